/* sched_json_private.h: what the schedule's JSON writer (sched_json.c) and
 * reader (sched_json_read.c, sched_json_program.c) share: the format's name
 * and version, the table of an op's optional integer fields, and the
 * reader's helpers. */
#pragma once

#include <stddef.h>

#include "sched/sched.h"

#define ST_SCHEDULE_FORMAT "stagger-schedule"
#define ST_SCHEDULE_VERSION 1

/* What an op field indexes, so the reader can range-check it. */
typedef enum { INDEX_NONE, INDEX_LAYER, INDEX_COMM, INDEX_LABEL } IndexOf;

#define KIND_BIT(k) (1u << (k))
#define COMM_KINDS (KIND_BIT(ST_OP_COMM_COLL) | KIND_BIT(ST_OP_COMM_SEND) | KIND_BIT(ST_OP_COMM_RECV))
#define P2P_KINDS (KIND_BIT(ST_OP_COMM_SEND) | KIND_BIT(ST_OP_COMM_RECV))

/* The optional integer fields of an op, shared by writer and reader: written
 * when not `none`, read as an integer >= `min` (or an index, see IndexOf),
 * required for the kinds in `required`. */
typedef struct {
  const char *key;
  size_t offset;
  gboolean wide; /* int64_t, else int32_t */
  int64_t none;
  int64_t min;
  IndexOf index;
  unsigned required; /* KIND_BIT()s */
} StOpField;

#define ST_N_OP_FIELDS 11
extern const StOpField ST_OP_FIELDS[ST_N_OP_FIELDS];
/* Their indices in ST_OP_FIELDS, for those who set one by name. */
enum {
  ST_OP_FIELD_LAYER, ST_OP_FIELD_MICRO, ST_OP_FIELD_BATCH, ST_OP_FIELD_COMM, ST_OP_FIELD_PEER,
  ST_OP_FIELD_TAG, ST_OP_FIELD_LABEL, ST_OP_FIELD_VERSION, ST_OP_FIELD_LAYER_LAST,
  ST_OP_FIELD_ELEMS, ST_OP_FIELD_BYTES,
};

int64_t st_op_field_get(const StOp *op, guint f);
void st_op_field_set(StOp *op, guint f, int64_t v);
/* The key naming an op's `sub` field, or NULL for kinds that have none. */
const char *st_op_sub_key(StOpKind kind);

/* ---- the reader's helpers (sched_json_read.c) ------------------------------ */

struct cJSON;

/* Errors name the place in the tree ("programs[0].ops[12]: ..."); the origin
 * is prefixed once, by st_schedule_from_json. */
gboolean sj_fail(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);
/* Prefixes a path segment ("programs[0]", ".ops[3]") to an error. */
void sj_prefix_path(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);

typedef gboolean (*ItemReader)(const struct cJSON *item, int index, gpointer ctx,
                               GError **error);
/* Calls `read` on each item of `array`; an error gets the item's path. */
gboolean sj_read_each(const struct cJSON *array, const char *path, ItemReader read,
                      gpointer ctx, GError **error);
/* `key` as an index into `n` things that `owner` has ("the program", 2,
 * "streams"); *out untouched when optional and absent. */
gboolean sj_get_index(const struct cJSON *obj, const char *key, gboolean required, int64_t n,
                      const char *owner, const char *things, int32_t *out, GError **error);
gboolean sj_get_int32(const struct cJSON *obj, const char *key, gboolean required,
                      int32_t *out, GError **error);
gboolean sj_expect_object(const struct cJSON *item, const char *const *keys, GError **error);

/* One item of "programs" (sched_json_program.c); `ctx` is the StSchedule. */
gboolean sj_read_program(const struct cJSON *obj, int index, gpointer ctx, GError **error);
