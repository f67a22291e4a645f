/* sched_json_read.c: reading a Schedule from JSON, strictly (see
 * sched_json.c for the format's shape and docs/FORMATS.md). Every index is
 * validated before the builder API sees it, and every error names the origin
 * and the JSON path. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>

#include "base/error.h"
#include "base/json.h"
#include "sched/sched_json_private.h"

/* ---- reading: helpers ----------------------------------------------------- */

/* Errors below name the place in the tree ("programs[0].ops[12]: ..."); the
 * origin is prefixed once, by st_schedule_from_json. */

static gboolean G_GNUC_PRINTF(2, 3)
fail(GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error_literal(error, ST_SCHED_ERROR, ST_ERROR_INVALID, message);
  return FALSE;
}

/* Prefixes a path segment ("programs[0]", ".ops[3]") to an error whose
 * message is a deeper path (".deps[1]: ...") or a plain message, so nested
 * readers compose "programs[0].ops[3].deps[1]: ...". */
static void G_GNUC_PRINTF(2, 3)
prefix_path(GError **error, const char *format, ...)
{
  if (error == NULL || *error == NULL)
    return;
  va_list args;
  va_start(args, format);
  g_autofree char *segment = g_strdup_vprintf(format, args);
  va_end(args);
  char first = (*error)->message[0];
  if (first == '.' || first == '[')
    g_prefix_error(error, "%s", segment);
  else
    g_prefix_error(error, "%s: ", segment);
}

typedef gboolean (*ItemReader)(const cJSON *item, int index, gpointer ctx, GError **error);

/* Calls `read` on each item of `array`; an error gets the item's path
 * (`path` is "ranks" at the top level, ".ops" below it). */
static gboolean
read_each(const cJSON *array, const char *path, ItemReader read, gpointer ctx, GError **error)
{
  int i = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, array)
  {
    if (!read(item, i, ctx, error)) {
      prefix_path(error, "%s[%d]", path, i);
      return FALSE;
    }
    i++;
  }
  return TRUE;
}

/* Reads `key` as an index into `n` things that `owner` has ("the program",
 * 2, "streams"). Leaves *out untouched when optional and absent. */
static gboolean
get_index(const cJSON *obj, const char *key, gboolean required, int64_t n, const char *owner,
          const char *things, int32_t *out, GError **error)
{
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (item == NULL)
    return required ? fail(error, "missing key '%s'", key) : TRUE;
  int64_t v;
  if (!st_json_item_int(item, key, G_MININT32, G_MAXINT32, &v, error))
    return FALSE;
  if (v < 0 || v >= n)
    return fail(error, "key '%s': %" G_GINT64_FORMAT " is out of range: %s has %" G_GINT64_FORMAT
                " %s", key, v, owner, n, things);
  *out = (int32_t)v;
  return TRUE;
}

static gboolean
get_int32(const cJSON *obj, const char *key, gboolean required, int32_t *out, GError **error)
{
  int64_t v = *out;
  if (!st_json_get_int(obj, key, required, G_MININT32, G_MAXINT32, &v, error))
    return FALSE;
  *out = (int32_t)v;
  return TRUE;
}

static gboolean
expect_object(const cJSON *item, const char *const *keys, GError **error)
{
  if (!cJSON_IsObject(item))
    return fail(error, "expected an object");
  return st_json_check_keys(item, keys, error);
}

/* ---- reading: the schedule-wide parts ------------------------------------ */

static gboolean
read_settings(const cJSON *obj, StSettings *st, GError **error)
{
  static const char *const keys[] = {"strategy",     "description",  "precision",
                                     "optimizer",    "micro_batch",  "accumulation",
                                     "global_batch", "sparsity",     NULL};
  const char *strategy = NULL, *description = NULL, *precision = NULL, *optimizer = NULL;
  int64_t micro = 0, accumulation = 0;
  if (!expect_object(obj, keys, error) ||
      !st_json_get_string(obj, "strategy", FALSE, &strategy, error) ||
      !st_json_get_string(obj, "description", FALSE, &description, error) ||
      !st_json_get_string(obj, "precision", TRUE, &precision, error) ||
      !st_json_get_string(obj, "optimizer", TRUE, &optimizer, error) ||
      !st_precision_parse(precision, &st->precision, error) ||
      !st_optimizer_parse(optimizer, &st->optimizer, error) ||
      !st_json_get_int(obj, "micro_batch", TRUE, 0, G_MAXINT32, &micro, error) ||
      !st_json_get_int(obj, "accumulation", TRUE, 0, G_MAXINT32, &accumulation, error) ||
      !st_json_get_int(obj, "global_batch", TRUE, 0, INT64_MAX, &st->global_batch, error))
    return FALSE;
  const cJSON *sparsity = cJSON_GetObjectItemCaseSensitive(obj, "sparsity");
  if (sparsity != NULL) {
    if (!cJSON_IsNumber(sparsity) || !(sparsity->valuedouble >= 0 && sparsity->valuedouble < 1))
      return fail(error, "key 'sparsity': expected a number in [0, 1)");
    st->sparsity = sparsity->valuedouble;
  }
  st->micro_batch = (int32_t)micro;
  st->accumulation = (int32_t)accumulation;
  st->strategy = g_strdup(strategy);
  st->description = g_strdup(description);
  return TRUE;
}

static gboolean
read_notes(const cJSON *obj, StSchedule *s, GError **error)
{
  const cJSON *item;
  cJSON_ArrayForEach(item, obj)
  {
    if (cJSON_IsString(item))
      st_schedule_note_text(s, item->string, item->valuestring);
    else if (cJSON_IsNumber(item) && isfinite(item->valuedouble))
      st_schedule_note_number(s, item->string, item->valuedouble);
    else
      return fail(error, "key '%s': expected a number or a string", item->string);
  }
  return TRUE;
}

/* A job beside the main one: its name, model and settings. */
static gboolean
read_job(const cJSON *obj, int index, gpointer ctx, GError **error)
{
  static const char *const keys[] = {"name", "model", "settings", NULL};
  StSchedule *s = ctx;
  const char *name = NULL;
  const cJSON *model_obj = NULL, *settings = NULL;
  if (!expect_object(obj, keys, error) || !st_json_get_string(obj, "name", TRUE, &name, error) ||
      !st_json_get_object(obj, "model", TRUE, &model_obj, error) ||
      !st_json_get_object(obj, "settings", TRUE, &settings, error))
    return FALSE;
  StModel *model = st_model_from_json(model_obj, "model", error);
  if (model == NULL)
    return FALSE;
  StSettings st = {0};
  if (!read_settings(settings, &st, error)) {
    st_model_free(model);
    prefix_path(error, "settings");
    return FALSE;
  }
  st_schedule_add_job(s, name, model, &st);
  g_free(st.strategy);
  g_free(st.description);
  return TRUE;
}

/* Placement and program of each rank, read before st_schedule_new (which
 * only g_return_if_fail()s on a bad device). */
typedef struct {
  int n_devices, n_programs;
  int32_t *device, *program, *replica;
  int64_t *start_ns;
} Ranks;

static gboolean
read_rank(const cJSON *item, int r, gpointer ctx, GError **error)
{
  static const char *const keys[] = {"device", "program", "start_ns", "replica", NULL};
  Ranks *rk = ctx;
  int64_t replica = r;
  gboolean ok = expect_object(item, keys, error) &&
         get_index(item, "device", TRUE, rk->n_devices, "the cluster", "GPUs in use",
                   &rk->device[r], error) &&
         get_index(item, "program", TRUE, rk->n_programs, "the schedule", "programs",
                   &rk->program[r], error) &&
         st_json_get_int(item, "start_ns", FALSE, 0, INT64_MAX, &rk->start_ns[r], error) &&
         st_json_get_int(item, "replica", FALSE, 0, G_MAXINT32, &replica, error);
  rk->replica[r] = (int32_t)replica;
  return ok;
}

static gboolean
read_device(const cJSON *item, int d, gpointer ctx, GError **error)
{
  static const char *const keys[] = {"node", "local", NULL};
  StSchedule *s = ctx;
  return expect_object(item, keys, error) &&
         get_index(item, "node", TRUE, s->cluster->nodes, "the cluster", "nodes",
                   &s->devices[d].node, error) &&
         get_index(item, "local", TRUE, s->cluster->gpus_per_node, "a node", "GPUs",
                   &s->devices[d].local, error);
}

/* A communicator from its groups: group g becomes color g, so
 * st_schedule_add_comm rebuilds the same groups in the same order. Members
 * must be ascending, as the builder keeps them. */
static gboolean
read_comm(const cJSON *obj, int index, gpointer ctx, GError **error)
{
  static const char *const keys[] = {"name", "groups", NULL};
  StSchedule *s = ctx;
  const char *name = NULL;
  const cJSON *groups = NULL;
  if (!expect_object(obj, keys, error) || !st_json_get_string(obj, "name", TRUE, &name, error) ||
      !st_json_get_array(obj, "groups", TRUE, &groups, error))
    return FALSE;
  g_autofree int32_t *color = g_new(int32_t, s->n_ranks);
  for (int r = 0; r < s->n_ranks; r++)
    color[r] = -1;
  int g = 0;
  const cJSON *group;
  cJSON_ArrayForEach(group, groups)
  {
    if (!cJSON_IsArray(group) || cJSON_GetArraySize(group) == 0)
      return fail(error, ".groups[%d]: expected a non-empty array of ranks", g);
    int m = 0, previous = -1;
    const cJSON *item;
    cJSON_ArrayForEach(item, group)
    {
      int64_t r;
      if (!st_json_item_int(item, "rank", 0, s->n_ranks - 1, &r, error)) {
        prefix_path(error, ".groups[%d][%d]", g, m);
        return FALSE;
      }
      if (color[r] >= 0)
        return fail(error, ".groups[%d][%d]: rank %d is already in group %d", g, m, (int)r,
                    color[r]);
      if (r < previous)
        return fail(error, ".groups[%d][%d]: ranks must be ascending (%d after %d)", g, m,
                    (int)r, previous);
      color[r] = g;
      previous = (int)r;
      m++;
    }
    g++;
  }
  st_schedule_add_comm(s, name, color);
  return TRUE;
}

/* ---- reading: programs ---------------------------------------------------- */

/* A background stream's "admission" object (sched_json.c writes it). */
static gboolean
read_admission(const cJSON *obj, StAdmissionPolicy *a, GError **error)
{
  static const char *const keys[] = {"slowdown_limit", "recover", "long_recv_us", "piece_us",
                                     "fg_pieces", "bg_pieces", "bg_pieces_alone", "from_step",
                                     NULL};
  st_admission_policy_init(a);
  double long_recv_us = (double)a->long_recv_ns / 1e3, piece_us = (double)a->piece_ns / 1e3;
  if (!expect_object(obj, keys, error) ||
      !st_json_get_double(obj, "slowdown_limit", FALSE, 0, &a->slowdown_limit, error) ||
      !st_json_get_double(obj, "recover", FALSE, 0, &a->recover, error) ||
      !st_json_get_double(obj, "long_recv_us", FALSE, 0, &long_recv_us, error) ||
      !st_json_get_double(obj, "piece_us", FALSE, 0, &piece_us, error) ||
      !get_int32(obj, "fg_pieces", FALSE, &a->fg_pieces, error) ||
      !get_int32(obj, "bg_pieces", FALSE, &a->bg_pieces, error) ||
      !get_int32(obj, "bg_pieces_alone", FALSE, &a->bg_pieces_alone, error) ||
      !get_int32(obj, "from_step", FALSE, &a->from_step, error)) {
    prefix_path(error, ".admission");
    return FALSE;
  }
  a->long_recv_ns = (int64_t)llround(long_recv_us * 1e3);
  a->piece_ns = (int64_t)llround(piece_us * 1e3);
  return TRUE;
}

static gboolean
read_stream(const cJSON *item, int i, gpointer ctx, GError **error)
{
  static const char *const keys[] = {"name", "priority", "admission", NULL};
  const char *name = NULL;
  int32_t priority = 0;
  if (i >= G_MAXUINT16)
    return fail(error, "more than %d streams", G_MAXUINT16 - 1);
  if (!expect_object(item, keys, error) || !st_json_get_string(item, "name", TRUE, &name, error) ||
      !get_int32(item, "priority", FALSE, &priority, error))
    return FALSE;
  StAdmissionPolicy admission;
  const cJSON *adm = cJSON_GetObjectItemCaseSensitive(item, "admission");
  if (adm != NULL && !read_admission(adm, &admission, error))
    return FALSE;
  int k = st_program_add_stream(ctx, name, priority);
  if (adm != NULL) {
    StStream *st = &g_array_index(((StProgram *)ctx)->streams, StStream, k);
    st->background = TRUE;
    st->admission = admission;
  }
  return TRUE;
}

static gboolean
read_buffer(const cJSON *item, int i, gpointer ctx, GError **error)
{
  static const char *const keys[] = {"name", "category", "bytes", "persistent", "data",
                                     "layers", "micro", "parts", "slot", NULL};
  const char *name = NULL, *category = NULL, *data_text = NULL;
  StMemCategory cat;
  StData data = ST_DATA_NONE;
  int64_t bytes = 0, micro = -1, parts = 1, slot = -1, range[2] = {-1, -1};
  gboolean persistent = FALSE;
  const cJSON *layers = NULL;
  if (!expect_object(item, keys, error) || !st_json_get_string(item, "name", TRUE, &name, error) ||
      !st_json_get_string(item, "category", TRUE, &category, error) ||
      !st_mem_parse(category, &cat, error) ||
      !st_json_get_int(item, "bytes", TRUE, 0, INT64_MAX, &bytes, error) ||
      !st_json_get_bool(item, "persistent", FALSE, &persistent, error) ||
      !st_json_get_string(item, "data", FALSE, &data_text, error) ||
      (data_text != NULL && !st_data_parse(data_text, &data, error)) ||
      !st_json_get_array(item, "layers", data != ST_DATA_NONE, &layers, error) ||
      !st_json_get_int(item, "micro", FALSE, -1, G_MAXINT32, &micro, error) ||
      !st_json_get_int(item, "parts", FALSE, 1, G_MAXINT32, &parts, error) ||
      !st_json_get_int(item, "slot", FALSE, 0, G_MAXINT32, &slot, error))
    return FALSE;
  if (layers != NULL) {
    if (cJSON_GetArraySize(layers) != 2)
      return fail(error, "key 'layers': expected [first, last]");
    for (int k = 0; k < 2; k++)
      if (!st_json_item_int(cJSON_GetArrayItem(layers, k), "layers", 0, G_MAXINT32, &range[k],
                            error))
        return FALSE;
    if (range[0] > range[1])
      return fail(error, "key 'layers': first %" G_GINT64_FORMAT " after last %" G_GINT64_FORMAT,
                  range[0], range[1]);
  }
  uint32_t b = st_program_add_buffer(ctx, name, cat, bytes, persistent);
  if (data != ST_DATA_NONE)
    st_program_buffer_holds(ctx, b, data, (int)range[0], (int)range[1], (int)micro, (int)parts);
  if (slot >= 0)
    st_program_buffer_slot(ctx, b, (int)slot);
  return TRUE;
}

static gboolean
read_label(const cJSON *item, int i, gpointer ctx, GError **error)
{
  if (!cJSON_IsString(item))
    return fail(error, "expected a string");
  /* Labels are interned: a repeat would shift every later index. */
  if (st_program_label(ctx, item->valuestring) != i)
    return fail(error, "'%s' repeats an earlier label", item->valuestring);
  return TRUE;
}

typedef struct {
  uint32_t ref, target;
} Ref;

typedef struct {
  const StSchedule *s;
  StProgram *p;
  uint32_t n_ops;
  GArray *refs; /* Ref: forward references, for previous-step deps on later ops */
} Ops;

/* The optional "samples": [first, stride] (st_op_samples). */
static gboolean
read_samples(const cJSON *obj, StOp *op, GError **error)
{
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, "samples");
  if (item == NULL)
    return TRUE;
  const cJSON *first = cJSON_GetArrayItem(item, 0), *stride = cJSON_GetArrayItem(item, 1);
  if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != 2 || !cJSON_IsNumber(first) ||
      !cJSON_IsNumber(stride) || first->valuedouble != (double)(int64_t)first->valuedouble ||
      stride->valuedouble != (double)(int64_t)stride->valuedouble ||
      first->valuedouble < 0 || first->valuedouble > G_MAXINT32 || stride->valuedouble < 1 ||
      stride->valuedouble > G_MAXUINT16)
    return fail(error, "key 'samples': expected [first, stride], integers with first >= 0 "
                       "and 1 <= stride <= %d", G_MAXUINT16);
  st_op_samples(op, (int)first->valuedouble, (int)stride->valuedouble);
  return TRUE;
}

/* The kind, its sub-kind and the integer fields, each index range-checked. */
static gboolean
read_op_fields(const cJSON *obj, const Ops *ctx, StOp *op, GError **error)
{
  const char *kind_text = NULL, *sub_text = NULL;
  StOpKind kind;
  if (!cJSON_IsObject(obj))
    return fail(error, "expected an object");
  if (!st_json_get_string(obj, "kind", TRUE, &kind_text, error))
    return FALSE;
  if (!st_op_kind_parse(kind_text, &kind, error)) {
    g_prefix_error(error, "key 'kind': ");
    return FALSE;
  }
  const char *sub = st_op_sub_key(kind);
  const char *keys[ST_N_OP_FIELDS + 9] = {"kind", "stream", "deps", "alloc", "free", "data",
                                          "samples", sub};
  for (guint f = 0; f < ST_N_OP_FIELDS; f++)
    keys[(sub != NULL ? 8 : 7) + f] = ST_OP_FIELDS[f].key;
  if (!st_json_check_keys(obj, keys, error))
    return FALSE;
  if (sub != NULL && !st_json_get_string(obj, sub, TRUE, &sub_text, error))
    return FALSE;
  StPass pass = ST_PASS_INVALID;
  StCollKind coll = ST_COLL_INVALID;
  StCopyKind copy = ST_COPY_INVALID;
  gboolean ok = kind == ST_OP_COMP        ? st_pass_parse(sub_text, &pass, error)
                : kind == ST_OP_COMM_COLL ? st_coll_parse(sub_text, &coll, error)
                : kind == ST_OP_COPY      ? st_copy_parse(sub_text, &copy, error)
                                          : TRUE;
  if (!ok) {
    g_prefix_error(error, "key '%s': ", sub);
    return FALSE;
  }
  const char *data_text = NULL;
  StData data = ST_DATA_NONE;
  if (!st_json_get_string(obj, "data", FALSE, &data_text, error) ||
      (data_text != NULL && !st_data_parse(data_text, &data, error))) {
    g_prefix_error(error, "key 'data': ");
    return FALSE;
  }
  /* At most one of them is set. */
  *op = (StOp){.kind = (uint8_t)kind, .sub = (uint8_t)(pass + coll + copy),
               .data = (uint8_t)data};
  int32_t stream = 0;
  if (!get_index(obj, "stream", TRUE, ctx->p->streams->len, "the program", "streams", &stream,
                 error))
    return FALSE;
  op->stream = (uint16_t)stream;
  for (guint f = 0; f < ST_N_OP_FIELDS; f++) {
    const char *key = ST_OP_FIELDS[f].key;
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    int64_t v = ST_OP_FIELDS[f].none;
    gboolean required = (ST_OP_FIELDS[f].required & KIND_BIT(kind)) != 0;
    int32_t index = -1;
    if (ST_OP_FIELDS[f].index == INDEX_LAYER)
      ok = get_index(obj, key, FALSE, st_program_model(ctx->s, ctx->p)->n_layers,
                     "the job's model", "layers", &index, error);
    else if (ST_OP_FIELDS[f].index == INDEX_COMM)
      ok = get_index(obj, key, required, ctx->s->comms->len, "the schedule", "communicators",
                     &index, error);
    else if (ST_OP_FIELDS[f].index == INDEX_LABEL)
      ok = get_index(obj, key, FALSE, ctx->p->labels->len, "the program", "labels", &index,
                     error);
    else if (item != NULL || required)
      ok = st_json_get_int(obj, key, TRUE, ST_OP_FIELDS[f].min,
                           ST_OP_FIELDS[f].wide ? INT64_MAX : G_MAXINT32, &v, error);
    if (!ok)
      return FALSE;
    st_op_field_set(op, f, ST_OP_FIELDS[f].index != INDEX_NONE ? index : v);
  }
  return read_samples(obj, op, error);
}

/* Same-step dependencies must come earlier in the array: that is what keeps
 * a program acyclic. A previous-step one on an op not built yet goes
 * through a forward reference, resolved by read_program; one per dependency,
 * as a strategy would build it, so duplicates survive as they were. */
static gboolean
read_deps(const cJSON *deps, const Ops *ctx, uint32_t index, GError **error)
{
  int i = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, deps)
  {
    int64_t target, offset = 0;
    gboolean ok;
    if (cJSON_IsArray(item) && cJSON_GetArraySize(item) != 2)
      return fail(error, ".deps[%d]: expected an op index or [op, step_offset]", i);
    if (cJSON_IsArray(item))
      ok = st_json_item_int(item->child, "op", 0, G_MAXINT32, &target, error) &&
           st_json_item_int(item->child->next, "step_offset", -1, 0, &offset, error);
    else
      ok = st_json_item_int(item, "op", 0, G_MAXINT32, &target, error);
    if (!ok) {
      prefix_path(error, ".deps[%d]", i);
      return FALSE;
    }
    if (offset == 0 && target >= index)
      return fail(error, ".deps[%d]: dependency on op %" G_GINT64_FORMAT ", which does not come "
                  "before op %u (dangling or forward dependency)", i, target, index);
    if (target >= ctx->n_ops)
      return fail(error, ".deps[%d]: dependency on op %" G_GINT64_FORMAT " of the previous step, "
                  "but the program has %u ops (dangling dependency)", i, target, ctx->n_ops);
    if (offset == 0) {
      st_program_after(ctx->p, (uint32_t)target);
    } else if (target < index) {
      st_program_after_prev_step(ctx->p, (uint32_t)target);
    } else {
      Ref ref = {st_program_forward_ref(ctx->p), (uint32_t)target};
      g_array_append_val(ctx->refs, ref);
      st_program_after_prev_step(ctx->p, ref.ref);
    }
    i++;
  }
  return TRUE;
}

/* The buffers of an "alloc" or "free" list; `total` counts both lists. */
static gboolean
read_memory(const cJSON *list, const char *key, StProgram *p, guint *total, GError **error)
{
  int i = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, list)
  {
    int64_t b;
    if (!st_json_item_int(item, "buffer", 0, G_MAXINT32, &b, error)) {
      prefix_path(error, ".%s[%d]", key, i);
      return FALSE;
    }
    if (b >= p->buffers->len)
      return fail(error, ".%s[%d]: buffer %" G_GINT64_FORMAT " is out of range: the program has "
                  "%u buffers", key, i, b, p->buffers->len);
    if (++*total > G_MAXUINT16)
      return fail(error, ".%s: more than %d buffers in one op", key, G_MAXUINT16);
    if (key[0] == 'a')
      st_program_alloc(p, (uint32_t)b);
    else
      st_program_free_buffer(p, (uint32_t)b);
    i++;
  }
  return TRUE;
}

static gboolean
read_op(const cJSON *obj, int index, gpointer data, GError **error)
{
  const Ops *ctx = data;
  StOp op;
  const cJSON *deps = NULL, *alloc = NULL, *freed = NULL;
  guint mem_total = 0;
  if (!read_op_fields(obj, ctx, &op, error) ||
      !st_json_get_array(obj, "deps", FALSE, &deps, error) ||
      !st_json_get_array(obj, "alloc", FALSE, &alloc, error) ||
      !st_json_get_array(obj, "free", FALSE, &freed, error))
    return FALSE;
  st_program_begin(ctx->p, &op);
  gboolean ok = read_deps(deps, ctx, (uint32_t)index, error) &&
                read_memory(alloc, "alloc", ctx->p, &mem_total, error) &&
                read_memory(freed, "free", ctx->p, &mem_total, error);
  /* Committed even on failure, so the program stays consistent to free. */
  st_program_commit(ctx->p);
  return ok;
}

static gboolean
read_program(const cJSON *obj, int index, gpointer ctx, GError **error)
{
  static const char *const keys[] = {"name", "job", "streams", "buffers", "labels", "ops", NULL};
  StSchedule *s = ctx;
  const char *name = NULL;
  int32_t job = 0;
  const cJSON *streams = NULL, *buffers = NULL, *labels = NULL, *ops = NULL;
  if (!expect_object(obj, keys, error) || !st_json_get_string(obj, "name", TRUE, &name, error) ||
      !get_index(obj, "job", FALSE, st_schedule_n_jobs(s), "the schedule", "jobs", &job, error) ||
      !st_json_get_array(obj, "streams", TRUE, &streams, error) ||
      !st_json_get_array(obj, "buffers", TRUE, &buffers, error) ||
      !st_json_get_array(obj, "labels", TRUE, &labels, error) ||
      !st_json_get_array(obj, "ops", TRUE, &ops, error))
    return FALSE;
  g_autoptr(StProgram) p = st_program_new(name);
  p->job = job < 0 ? 0 : job;
  g_autoptr(GArray) refs = g_array_new(FALSE, FALSE, sizeof(Ref));
  Ops op_ctx = {s, p, (uint32_t)cJSON_GetArraySize(ops), refs};
  if (!read_each(streams, ".streams", read_stream, p, error) ||
      !read_each(buffers, ".buffers", read_buffer, p, error) ||
      !read_each(labels, ".labels", read_label, p, error) ||
      !read_each(ops, ".ops", read_op, &op_ctx, error))
    return FALSE;
  for (guint i = 0; i < refs->len; i++)
    st_program_resolve(p, g_array_index(refs, Ref, i).ref, g_array_index(refs, Ref, i).target);
  st_schedule_add_program(s, g_steal_pointer(&p));
  return TRUE;
}

/* ---- reading: the whole ---------------------------------------------------- */

/* Everything after the model and cluster (taken over); errors carry no
 * origin yet. */
static StSchedule *
read_schedule(const cJSON *root, StModel *model_in, StCluster *cluster_in, GError **error)
{
  g_autoptr(StModel) model = model_in;
  g_autoptr(StCluster) cluster = cluster_in;
  const cJSON *settings = NULL, *notes = NULL, *devices = NULL, *ranks = NULL, *comms = NULL,
              *programs = NULL, *jobs = NULL;
  int64_t steps = 1, warmup = -1;
  if (!st_json_get_object(root, "settings", TRUE, &settings, error) ||
      !st_json_get_int(root, "steps", TRUE, 1, G_MAXINT32, &steps, error) ||
      !st_json_get_int(root, "warmup_steps", FALSE, 0, G_MAXINT32, &warmup, error) ||
      !st_json_get_object(root, "notes", FALSE, &notes, error) ||
      !st_json_get_array(root, "devices", TRUE, &devices, error) ||
      !st_json_get_array(root, "ranks", TRUE, &ranks, error) ||
      !st_json_get_array(root, "comms", TRUE, &comms, error) ||
      !st_json_get_array(root, "programs", TRUE, &programs, error) ||
      !st_json_get_array(root, "jobs", FALSE, &jobs, error))
    return NULL;
  int n_ranks = cJSON_GetArraySize(ranks);
  if (cluster->gpus <= 0 || cluster->gpus_per_node <= 0) {
    fail(error, "cluster: no GPUs in use");
    return NULL;
  }
  if (n_ranks == 0) {
    fail(error, "ranks: expected at least one rank");
    return NULL;
  }
  if (cJSON_GetArraySize(devices) != cluster->gpus) {
    fail(error, "devices: %d entries, but the cluster has %d GPUs in use",
         cJSON_GetArraySize(devices), cluster->gpus);
    return NULL;
  }
  g_autofree int32_t *device = g_new0(int32_t, n_ranks);
  g_autofree int32_t *program = g_new0(int32_t, n_ranks);
  g_autofree int64_t *start_ns = g_new0(int64_t, n_ranks);
  g_autofree int32_t *replica = g_new0(int32_t, n_ranks);
  Ranks rk = {cluster->gpus, cJSON_GetArraySize(programs), device, program, replica, start_ns};
  if (!read_each(ranks, "ranks", read_rank, &rk, error))
    return NULL;

  g_autoptr(StSchedule) s = st_schedule_new(g_steal_pointer(&model),
                                            g_steal_pointer(&cluster), n_ranks, device);
  for (int r = 0; r < n_ranks; r++) {
    s->ranks[r].program = program[r];
    s->ranks[r].start_ns = start_ns[r];
    s->ranks[r].replica = replica[r];
  }
  s->steps = (int32_t)steps;
  s->warmup_steps = (int32_t)warmup;
  if (!read_settings(settings, &s->settings, error)) {
    prefix_path(error, "settings");
    return NULL;
  }
  if (notes != NULL && !read_notes(notes, s, error)) {
    prefix_path(error, "notes");
    return NULL;
  }
  if ((jobs != NULL && !read_each(jobs, "jobs", read_job, s, error)) ||
      !read_each(devices, "devices", read_device, s, error) ||
      !read_each(comms, "comms", read_comm, s, error) ||
      !read_each(programs, "programs", read_program, s, error))
    return NULL;
  return g_steal_pointer(&s);
}

StSchedule *
st_schedule_from_json(const cJSON *root, const char *origin, GError **error)
{
  static const char *const keys[] = {"format", "version", "model",  "cluster", "settings",
                                     "steps",  "notes",   "devices", "ranks",  "comms",
                                     "programs", "jobs", "warmup_steps", NULL};
  g_return_val_if_fail(root != NULL, NULL);
  if (origin == NULL)
    origin = "<schedule>";
  const char *format = NULL;
  int64_t version = 0;
  const cJSON *model_obj = NULL, *cluster_obj = NULL;
  gboolean ok = cJSON_IsObject(root) ? st_json_check_keys(root, keys, error)
                                     : fail(error, "expected a JSON object");
  ok = ok && st_json_get_string(root, "format", TRUE, &format, error) &&
       st_json_get_int(root, "version", TRUE, 0, G_MAXINT32, &version, error) &&
       st_json_get_object(root, "model", TRUE, &model_obj, error) &&
       st_json_get_object(root, "cluster", TRUE, &cluster_obj, error);
  if (ok && g_strcmp0(format, ST_SCHEDULE_FORMAT) != 0)
    ok = fail(error, "key 'format': '%s' is not a schedule (expected '%s')", format,
              ST_SCHEDULE_FORMAT);
  if (ok && version != ST_SCHEDULE_VERSION)
    ok = fail(error, "key 'version': version %d is not supported (this build reads %d)",
              (int)version, ST_SCHEDULE_VERSION);
  if (!ok) {
    g_prefix_error(error, "%s: ", origin);
    return NULL;
  }
  /* The model and cluster loaders name their origin themselves. */
  g_autofree char *model_origin = g_strdup_printf("%s: model", origin);
  g_autofree char *cluster_origin = g_strdup_printf("%s: cluster", origin);
  g_autoptr(StModel) model = st_model_from_json(model_obj, model_origin, error);
  if (model == NULL)
    return NULL;
  g_autoptr(StCluster) cluster = st_cluster_from_json(cluster_obj, cluster_origin, error);
  if (cluster == NULL)
    return NULL;
  StSchedule *s = read_schedule(root, g_steal_pointer(&model), g_steal_pointer(&cluster), error);
  if (s == NULL)
    g_prefix_error(error, "%s: ", origin);
  return s;
}

StSchedule *
st_schedule_load(const char *path, GError **error)
{
  g_autoptr(cJSON) root = st_json_load_file(path, error);
  if (root == NULL)
    return NULL;
  return st_schedule_from_json(root, path, error);
}
