/* profile_file.c: reading profile files (format in profile.h; writing is
 * in profile_save.c). Parsing is strict: unknown keys, missing keys and bad
 * values are errors naming the file, the entry (layers[3]) and the key. */
#include "profile/profile_private.h"

#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "base/limits.h"

/* A measured time, us: at most 11.6 days (a kernel or a transfer). */
#define MAX_US 1e12

/* ---- reading files ------------------------------------------------------ */

/* Re-homes a json.c / kinds.c error into this domain with its place in front. */
static gboolean
fail(GError **error, GError *local, const char *origin, const char *where)
{
  g_set_error(error, ST_PROFILE_ERROR, local->code, "%s: %s%s%s", origin, where ? where : "",
              where ? ": " : "", local->message);
  g_error_free(local);
  return FALSE;
}

static gboolean
expect_object(const cJSON *item, GError **local)
{
  if (cJSON_IsObject(item))
    return TRUE;
  g_set_error(local, ST_PROFILE_ERROR, ST_ERROR_INVALID, "expected an object");
  return FALSE;
}

/* "name" and / or "signature", "pass" and "x": the keys of layer and
 * sharing entries. */
static gboolean
parse_layer_keys(const cJSON *item, const char **name, const char **signature, StPass *pass,
                 int64_t *x, GError **local)
{
  const char *pass_text = NULL;
  if (!st_json_get_string(item, "name", FALSE, name, local) ||
      !st_json_get_string(item, "signature", FALSE, signature, local) ||
      !st_json_get_string(item, "pass", TRUE, &pass_text, local))
    return FALSE;
  if (!st_pass_parse(pass_text, pass, local)) {
    g_prefix_error(local, "key 'pass': ");
    return FALSE;
  }
  if (!st_json_get_int(item, "x", TRUE, 1, G_MAXINT32, x, local))
    return FALSE;
  if (*name == NULL && *signature == NULL) {
    g_set_error(local, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "missing key 'name' or 'signature' (an entry needs one of them)");
    return FALSE;
  }
  return TRUE;
}

static gboolean
parse_layer(const cJSON *item, const char *device, GPtrArray *out, GError **local)
{
  static const char *const keys[] = {"name",      "signature", "pass", "x",          "time_us",
                                     "spread_us", "fill",      "fill_bound", NULL};
  const char *name = NULL, *signature = NULL;
  int64_t x = 0;
  double time_us = 0, spread_us = 0, fill = 0;
  gboolean bound = FALSE;
  StPass pass;
  if (!expect_object(item, local) || !st_json_check_keys(item, keys, local) ||
      !parse_layer_keys(item, &name, &signature, &pass, &x, local) ||
      !st_json_get_double_range(item, "time_us", TRUE, 0, MAX_US, &time_us, local) ||
      !st_json_get_double_range(item, "spread_us", FALSE, 0, MAX_US, &spread_us, local) ||
      !st_json_get_double(item, "fill", FALSE, 0, &fill, local) ||
      !st_json_get_bool(item, "fill_bound", FALSE, &bound, local))
    return FALSE;
  if (cJSON_HasObjectItem(item, "fill") && (fill <= 0 || fill > 1)) {
    g_set_error(local, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "key 'fill': %g is outside (0, 1] (the fraction of the device a kernel fills)",
                fill);
    return FALSE;
  }
  ProfileLayerEntry *e = g_new0(ProfileLayerEntry, 1);
  *e = (ProfileLayerEntry){g_strdup(device), g_strdup(name), g_strdup(signature), pass, x,
                           time_us * 1e3, spread_us * 1e3, fill, bound};
  g_ptr_array_add(out, e);
  return TRUE;
}

/* "send_recv" (a point-to-point transfer between 2 ranks) or a collective. */
static gboolean
parse_link_kind(const char *text, StCollKind *coll, gboolean *p2p, GError **local)
{
  *p2p = strcmp(text, "send_recv") == 0;
  *coll = ST_COLL_INVALID;
  if (*p2p)
    return TRUE;
  if (st_coll_parse(text, coll, local))
    return TRUE;
  g_prefix_error(local, "key 'collective': ");
  return FALSE;
}

static gboolean
parse_link(const cJSON *item, const char *device, GPtrArray *out, GError **local)
{
  static const char *const keys[] = {"collective", "link",      "ranks",      "bytes", "time_us",
                                     "spread_us",  "algbw_GBps", "busbw_GBps", NULL};
  const char *coll_text = NULL, *link_text = NULL;
  int64_t ranks = 0, bytes = 0;
  double time_us = 0, spread_us = 0, derived = 0;
  StCollKind coll;
  gboolean p2p;
  StLinkClass link;
  if (!expect_object(item, local) || !st_json_check_keys(item, keys, local) ||
      !st_json_get_string(item, "collective", TRUE, &coll_text, local) ||
      !parse_link_kind(coll_text, &coll, &p2p, local))
    return FALSE;
  if (!st_json_get_string(item, "link", TRUE, &link_text, local))
    return FALSE;
  if (!st_link_parse(link_text, &link, local)) {
    g_prefix_error(local, "key 'link': ");
    return FALSE;
  }
  /* algbw and busbw follow from bytes and time: checked as numbers, not kept. */
  if (!st_json_get_int(item, "ranks", TRUE, 1, INT32_MAX, &ranks, local) ||
      !st_json_get_int(item, "bytes", TRUE, 1, ST_MAX_BYTES, &bytes, local) ||
      !st_json_get_double_range(item, "time_us", TRUE, 0, MAX_US, &time_us, local) ||
      !st_json_get_double_range(item, "spread_us", FALSE, 0, MAX_US, &spread_us, local) ||
      !st_json_get_double(item, "algbw_GBps", FALSE, 0, &derived, local) ||
      !st_json_get_double(item, "busbw_GBps", FALSE, 0, &derived, local))
    return FALSE;
  if (p2p && ranks != 2) {
    g_set_error(local, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "key 'ranks': a send_recv entry is between 2 ranks, not %" G_GINT64_FORMAT,
                ranks);
    return FALSE;
  }
  ProfileLinkEntry *e = g_new0(ProfileLinkEntry, 1);
  *e = (ProfileLinkEntry){g_strdup(device), coll, p2p, link, (int)ranks, bytes, time_us * 1e3,
                          spread_us * 1e3};
  g_ptr_array_add(out, e);
  return TRUE;
}

static gboolean
parse_copy(const cJSON *item, const char *device, GPtrArray *out, GError **local)
{
  static const char *const keys[] = {"kind", "bytes", "time_us", "spread_us", NULL};
  const char *kind_text = NULL;
  int64_t bytes = 0;
  double time_us = 0, spread_us = 0;
  StCopyKind kind;
  if (!expect_object(item, local) || !st_json_check_keys(item, keys, local) ||
      !st_json_get_string(item, "kind", TRUE, &kind_text, local))
    return FALSE;
  if (!st_copy_parse(kind_text, &kind, local)) {
    g_prefix_error(local, "key 'kind': ");
    return FALSE;
  }
  if (!st_json_get_int(item, "bytes", TRUE, 1, ST_MAX_BYTES, &bytes, local) ||
      !st_json_get_double_range(item, "time_us", TRUE, 0, MAX_US, &time_us, local) ||
      !st_json_get_double_range(item, "spread_us", FALSE, 0, MAX_US, &spread_us, local))
    return FALSE;
  ProfileCopyEntry *e = g_new0(ProfileCopyEntry, 1);
  *e = (ProfileCopyEntry){g_strdup(device), kind, bytes, time_us * 1e3, spread_us * 1e3};
  g_ptr_array_add(out, e);
  return TRUE;
}

static gboolean
parse_share(const cJSON *item, const char *device, GPtrArray *out, GError **local)
{
  static const char *const keys[] = {"name",       "signature", "pass",   "x", "streams",
                                     "priorities", "alone_us",  "end_us", NULL};
  const char *name = NULL, *signature = NULL;
  int64_t x = 0, streams = 0;
  double alone_us = 0;
  gboolean priorities = FALSE;
  StPass pass;
  const cJSON *ends = NULL;
  if (!expect_object(item, local) || !st_json_check_keys(item, keys, local) ||
      !parse_layer_keys(item, &name, &signature, &pass, &x, local) ||
      !st_json_get_int(item, "streams", TRUE, 2, 1024, &streams, local) ||
      !st_json_get_bool(item, "priorities", TRUE, &priorities, local) ||
      !st_json_get_double_range(item, "alone_us", TRUE, 0, MAX_US, &alone_us, local) ||
      !st_json_get_array(item, "end_us", TRUE, &ends, local))
    return FALSE;
  if (cJSON_GetArraySize(ends) != streams) {
    g_set_error(local, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "key 'end_us': %d values for %" G_GINT64_FORMAT " streams",
                cJSON_GetArraySize(ends), streams);
    return FALSE;
  }
  double *end_ns = g_new(double, streams);
  int i = 0;
  const cJSON *v;
  cJSON_ArrayForEach(v, ends)
  {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= MAX_US)) {
      g_set_error(local, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                  "key 'end_us': item %d: expected a number in [0, %g]", i, MAX_US);
      g_free(end_ns);
      return FALSE;
    }
    end_ns[i++] = v->valuedouble * 1e3;
  }
  ProfileShareEntry *e = g_new0(ProfileShareEntry, 1);
  *e = (ProfileShareEntry){g_strdup(device), g_strdup(name), g_strdup(signature), pass, x,
                           (int)streams, priorities, alone_us * 1e3, end_ns};
  g_ptr_array_add(out, e);
  return TRUE;
}

typedef gboolean (*ParseFn)(const cJSON *item, const char *device, GPtrArray *out,
                            GError **local);

/* Every item of one section ("layers", "links", ...) into `out`. */
static gboolean
parse_section(const cJSON *array, const char *section, ParseFn parse, const char *device,
              GPtrArray *out, const char *path, GError **error)
{
  GError *local = NULL;
  int i = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, array)
  {
    if (!parse(item, device, out, &local)) {
      g_autofree char *where = g_strdup_printf("%s[%d]", section, i);
      return fail(error, local, path, where);
    }
    i++;
  }
  return TRUE;
}

/* Parses the whole file before touching the profile, so a bad file leaves
 * it as it was. */
gboolean
st_profile_merge_file(StProfile *p, const char *path, GError **error)
{
  static const char *const keys[] = {"format", "version", "device",  "driver",    "cuda",
                                     "date",   "source",  "note",    "machine",   "precision",
                                     "layers", "links",   "copies",  "sharing",   NULL};
  g_return_val_if_fail(p != NULL && path != NULL, FALSE);
  GError *local = NULL;
  g_autoptr(cJSON) root = st_json_load_file(path, &local);
  if (root == NULL) {
    /* json.c's message names the file (and line:column). */
    g_set_error_literal(error, ST_PROFILE_ERROR, local->code, local->message);
    g_error_free(local);
    return FALSE;
  }
  if (!cJSON_IsObject(root)) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID, "%s: expected a JSON object", path);
    return FALSE;
  }
  const char *format = NULL, *device = NULL;
  const char *facts[4] = {NULL, NULL, NULL, NULL}; /* driver, cuda, date, source */
  const char *note = NULL, *machine = NULL, *precision = NULL;
  int64_t version = 0;
  const cJSON *layers = NULL, *links = NULL, *copies = NULL, *sharing = NULL;
  if (!st_json_check_keys(root, keys, &local) ||
      !st_json_get_string(root, "format", TRUE, &format, &local) ||
      !st_json_get_int(root, "version", TRUE, 1, 1, &version, &local) ||
      !st_json_get_string(root, "device", TRUE, &device, &local) ||
      !st_json_get_string(root, "driver", FALSE, &facts[0], &local) ||
      !st_json_get_string(root, "cuda", FALSE, &facts[1], &local) ||
      !st_json_get_string(root, "date", FALSE, &facts[2], &local) ||
      !st_json_get_string(root, "source", FALSE, &facts[3], &local) ||
      !st_json_get_string(root, "note", FALSE, &note, &local) ||
      !st_json_get_string(root, "machine", FALSE, &machine, &local) ||
      !st_json_get_string(root, "precision", FALSE, &precision, &local) ||
      !st_json_get_array(root, "layers", FALSE, &layers, &local) ||
      !st_json_get_array(root, "links", FALSE, &links, &local) ||
      !st_json_get_array(root, "copies", FALSE, &copies, &local) ||
      !st_json_get_array(root, "sharing", FALSE, &sharing, &local))
    return fail(error, local, path, NULL);
  StPrecision prec;
  if (precision != NULL && !st_precision_parse(precision, &prec, &local))
    return fail(error, local, path, "key 'precision'");
  if (strcmp(format, "stagger-profile") != 0) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "%s: key 'format': '%s' is not \"stagger-profile\"", path, format);
    return FALSE;
  }
  if (*device == '\0') {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID, "%s: key 'device': must not be empty",
                path);
    return FALSE;
  }
  g_autoptr(GPtrArray) new_layers = g_ptr_array_new_with_free_func(st_profile_layer_entry_free);
  g_autoptr(GPtrArray) new_links = g_ptr_array_new_with_free_func(st_profile_link_entry_free);
  g_autoptr(GPtrArray) new_copies = g_ptr_array_new_with_free_func(st_profile_copy_entry_free);
  g_autoptr(GPtrArray) new_shares = g_ptr_array_new_with_free_func(st_profile_share_entry_free);
  if (!parse_section(layers, "layers", parse_layer, device, new_layers, path, error) ||
      !parse_section(links, "links", parse_link, device, new_links, path, error) ||
      !parse_section(copies, "copies", parse_copy, device, new_copies, path, error) ||
      !parse_section(sharing, "sharing", parse_share, device, new_shares, path, error))
    return FALSE;
  for (guint k = 0; k < new_layers->len; k++) {
    const ProfileLayerEntry *e = g_ptr_array_index(new_layers, k);
    st_profile_add_layer(p, e->device, e->name, e->signature, e->pass, e->x, e->time_ns,
                         e->spread_ns);
    if (e->fill > 0)
      st_profile_set_layer_fill(p, e->device, e->name, e->signature, e->pass, e->x, e->fill,
                                e->fill_bound);
  }
  for (guint k = 0; k < new_links->len; k++) {
    const ProfileLinkEntry *e = g_ptr_array_index(new_links, k);
    st_profile_add_link_entry(p, e->device, e->coll, e->p2p, e->link, e->ranks, e->bytes,
                              e->time_ns, e->spread_ns);
  }
  for (guint k = 0; k < new_copies->len; k++) {
    const ProfileCopyEntry *e = g_ptr_array_index(new_copies, k);
    st_profile_add_copy(p, e->device, e->kind, e->bytes, e->time_ns, e->spread_ns);
  }
  for (guint k = 0; k < new_shares->len; k++) {
    const ProfileShareEntry *e = g_ptr_array_index(new_shares, k);
    StProfileSharing m = {e->name,     e->signature, e->pass,    e->x,
                          e->streams, e->priorities, e->alone_ns, e->end_ns};
    st_profile_add_sharing(p, e->device, &m);
  }
  if (p->device == NULL) {
    st_profile_set_device(p, device, facts[0], facts[1], facts[2], facts[3]);
    st_profile_set_machine(p, machine, precision);
  }
  return TRUE;
}

/* Every *.json below `dir`, recursively, into `paths`. */
static gboolean
collect_json(const char *dir, GPtrArray *paths, GError **error)
{
  GError *local = NULL;
  g_autoptr(GDir) d = g_dir_open(dir, 0, &local);
  if (d == NULL) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return FALSE;
  }
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL) {
    g_autofree char *child = g_build_filename(dir, name, NULL);
    if (g_file_test(child, G_FILE_TEST_IS_DIR)) {
      if (!collect_json(child, paths, error))
        return FALSE;
    } else if (g_str_has_suffix(name, ".json") && g_file_test(child, G_FILE_TEST_IS_REGULAR)) {
      g_ptr_array_add(paths, g_steal_pointer(&child));
    }
  }
  return TRUE;
}

static gint
compare_paths(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

StProfile *
st_profile_load(const char *path, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_autoptr(StProfile) p = st_profile_new();
  if (!g_file_test(path, G_FILE_TEST_IS_DIR)) {
    if (!st_profile_merge_file(p, path, error))
      return NULL;
    return g_steal_pointer(&p);
  }
  g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);
  if (!collect_json(path, paths, error))
    return NULL;
  if (paths->len == 0) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "%s: no profile (*.json) files in this directory", path);
    return NULL;
  }
  /* Sorted, so that when two files measure the same point the result does
   * not depend on the order the file system lists them. */
  g_ptr_array_sort(paths, compare_paths);
  for (guint i = 0; i < paths->len; i++)
    if (!st_profile_merge_file(p, g_ptr_array_index(paths, i), error))
      return NULL;
  return g_steal_pointer(&p);
}
