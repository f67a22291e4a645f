/* json.h: cJSON at the edge, with GError messages that name the key.
 *
 * Loaders parse a file into a cJSON tree, read it through these getters into
 * typed structs, then delete the tree: cJSON types never travel past a loader.
 * Every getter names the key it failed on; callers add where the object sits
 * with g_prefix_error ("models/x.json: layer 4 'conv1': ").
 *
 * `required`: TRUE makes a missing key an error; FALSE leaves *out untouched
 * (so the caller pre-loads the default) and returns TRUE.
 */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdint.h>

#include "base/units.h"

/* Parses a whole file. A syntax error says the file, line and column.
 * Transfer full: free with cJSON_Delete (or g_autoptr(cJSON)). */
cJSON *st_json_load_file(const char *path, GError **error);

/* Parses text; `origin` names it in messages (a path, "<stdin>"). Transfer full. */
cJSON *st_json_parse(const char *text, gsize length, const char *origin, GError **error);

/* Writes `root` formatted, atomically (a temporary file then rename), with a
 * trailing newline. The same tree always gives the same bytes. */
gboolean st_json_write_file(const char *path, const cJSON *root, GError **error);

/* Fails when `obj` has a key not in the NULL-terminated `allowed` list, so a
 * typo ("bandwith") is reported instead of silently ignored. */
gboolean st_json_check_keys(const cJSON *obj, const char *const *allowed, GError **error);

gboolean st_json_get_object(const cJSON *obj, const char *key, gboolean required,
                            const cJSON **out, GError **error);
gboolean st_json_get_array(const cJSON *obj, const char *key, gboolean required,
                           const cJSON **out, GError **error);
/* Borrowed: the string lives as long as the tree. */
gboolean st_json_get_string(const cJSON *obj, const char *key, gboolean required,
                            const char **out, GError **error);
/* An integral number in [min, max]. */
gboolean st_json_get_int(const cJSON *obj, const char *key, gboolean required, int64_t min,
                         int64_t max, int64_t *out, GError **error);
/* A finite number >= min. */
gboolean st_json_get_double(const cJSON *obj, const char *key, gboolean required, double min,
                            double *out, GError **error);
/* A finite number in [min, max]. */
gboolean st_json_get_double_range(const cJSON *obj, const char *key, gboolean required,
                                  double min, double max, double *out, GError **error);
gboolean st_json_get_bool(const cJSON *obj, const char *key, gboolean required, gboolean *out,
                          GError **error);
/* Strings with units, see units.h ("80GiB", "450GB/s", "2us", "989TFLOP/s"),
 * within `range` (units.h: ST_RANGE_LINK_BANDWIDTH, ...). */
gboolean st_json_get_bytes(const cJSON *obj, const char *key, gboolean required,
                           const StRange *range, int64_t *out, GError **error);
gboolean st_json_get_bandwidth(const cJSON *obj, const char *key, gboolean required,
                               const StRange *range, double *out, GError **error);
gboolean st_json_get_duration(const cJSON *obj, const char *key, gboolean required,
                              const StRange *range, int64_t *out, GError **error);
gboolean st_json_get_flop_rate(const cJSON *obj, const char *key, gboolean required,
                               const StRange *range, double *out, GError **error);

/* An item of an array that must be an integer in [min, max]; `what` names it. */
gboolean st_json_item_int(const cJSON *item, const char *what, int64_t min, int64_t max,
                          int64_t *out, GError **error);

/* Adds an int64 as a JSON number (exact up to 2^53, which bytes and ns stay under). */
cJSON *st_json_add_int(cJSON *obj, const char *key, int64_t value);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(cJSON, cJSON_Delete)
