/* sched_json_program.c: reading one program of a Schedule's JSON (streams,
 * buffers, labels, ops and their dependencies and memory effects), strictly,
 * for sched_json_read.c; errors name the JSON path below the program. */
#include <cjson/cJSON.h>
#include <math.h>

#include "base/error.h"
#include "base/json.h"
#include "base/limits.h"
#include "sched/sched_import.h"
#include "sched/sched_json_private.h"

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
  if (!sj_expect_object(obj, keys, error) ||
      !st_json_get_double_range(obj, "slowdown_limit", FALSE, 0, 1e6, &a->slowdown_limit,
                                error) ||
      !st_json_get_double_range(obj, "recover", FALSE, 0, 1e6, &a->recover, error) ||
      !st_json_get_double_range(obj, "long_recv_us", FALSE, 0, 1e9, &long_recv_us, error) ||
      !st_json_get_double_range(obj, "piece_us", FALSE, 0, 1e9, &piece_us, error) ||
      !sj_get_int32(obj, "fg_pieces", FALSE, &a->fg_pieces, error) ||
      !sj_get_int32(obj, "bg_pieces", FALSE, &a->bg_pieces, error) ||
      !sj_get_int32(obj, "bg_pieces_alone", FALSE, &a->bg_pieces_alone, error) ||
      !sj_get_int32(obj, "from_step", FALSE, &a->from_step, error)) {
    sj_prefix_path(error, ".admission");
    return FALSE;
  }
  a->long_recv_ns = (int64_t)llround(long_recv_us * 1e3);
  a->piece_ns = (int64_t)llround(piece_us * 1e3);
  return TRUE;
}

static gboolean
read_stream(const cJSON *item, int i, gpointer ctx, GError **error)
{
  static const char *const keys[] = {"name", "priority", "admission", "host", NULL};
  const char *name = NULL;
  int32_t priority = 0;
  if (i >= G_MAXUINT16)
    return sj_fail(error, "more than %d streams", G_MAXUINT16 - 1);
  if (!sj_expect_object(item, keys, error) || !st_json_get_string(item, "name", TRUE, &name, error) ||
      !sj_get_int32(item, "priority", FALSE, &priority, error))
    return FALSE;
  StAdmissionPolicy admission;
  const cJSON *adm = cJSON_GetObjectItemCaseSensitive(item, "admission");
  if (adm != NULL && !read_admission(adm, &admission, error))
    return FALSE;
  const cJSON *host = cJSON_GetObjectItemCaseSensitive(item, "host");
  if (host != NULL && !cJSON_IsBool(host))
    return sj_fail(error, "key 'host': expected true or false");
  int k = st_program_add_stream(ctx, name, priority);
  if (host != NULL && cJSON_IsTrue(host))
    g_array_index(((StProgram *)ctx)->streams, StStream, k).host = TRUE;
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
  if (!sj_expect_object(item, keys, error) || !st_json_get_string(item, "name", TRUE, &name, error) ||
      !st_json_get_string(item, "category", TRUE, &category, error) ||
      !st_mem_parse(category, &cat, error) ||
      !st_json_get_int(item, "bytes", TRUE, 0, ST_MAX_BYTES, &bytes, error) ||
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
      return sj_fail(error, "key 'layers': expected [first, last]");
    for (int k = 0; k < 2; k++)
      if (!st_json_item_int(cJSON_GetArrayItem(layers, k), "layers", 0, G_MAXINT32, &range[k],
                            error))
        return FALSE;
    if (range[0] > range[1])
      return sj_fail(error, "key 'layers': first %" G_GINT64_FORMAT " after last %" G_GINT64_FORMAT,
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
    return sj_fail(error, "expected a string");
  /* Labels are interned: a repeat would shift every later index. */
  if (st_program_label(ctx, item->valuestring) != i)
    return sj_fail(error, "'%s' repeats an earlier label", item->valuestring);
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
    return sj_fail(error, "key 'samples': expected [first, stride], integers with first >= 0 "
                       "and 1 <= stride <= %d", G_MAXUINT16);
  st_op_samples(op, (int)first->valuedouble, (int)stride->valuedouble);
  return TRUE;
}

/* The optional "part" (StOp.part): a part of a layer's pass. */
static gboolean
read_part(const cJSON *obj, StOp *op, GError **error)
{
  int64_t part = 0;
  if (!st_json_get_int(obj, "part", FALSE, 0, ST_TP_PARTS_MAX, &part, error))
    return FALSE;
  if (part > 0 && op->layer < 0)
    return sj_fail(error, "key 'part': a part of a layer's pass needs its 'layer'");
  op->part = (uint8_t)part;
  return TRUE;
}

/* The kind, its sub-kind and the integer fields, each index range-checked. */
static gboolean
read_op_fields(const cJSON *obj, const Ops *ctx, StOp *op, GError **error)
{
  const char *kind_text = NULL, *sub_text = NULL;
  StOpKind kind;
  if (!cJSON_IsObject(obj))
    return sj_fail(error, "expected an object");
  if (!st_json_get_string(obj, "kind", TRUE, &kind_text, error))
    return FALSE;
  if (!st_op_kind_parse(kind_text, &kind, error)) {
    g_prefix_error(error, "key 'kind': ");
    return FALSE;
  }
  const char *sub = st_op_sub_key(kind);
  const char *keys[ST_N_OP_FIELDS + 10] = {"kind", "stream", "deps", "alloc", "free", "data",
                                           "samples", "part", sub};
  for (guint f = 0; f < ST_N_OP_FIELDS; f++)
    keys[(sub != NULL ? 9 : 8) + f] = ST_OP_FIELDS[f].key;
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
  if (!sj_get_index(obj, "stream", TRUE, ctx->p->streams->len, "the program", "streams", &stream,
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
      ok = sj_get_index(obj, key, FALSE, st_program_model(ctx->s, ctx->p)->n_layers,
                     "the job's model", "layers", &index, error);
    else if (ST_OP_FIELDS[f].index == INDEX_COMM)
      ok = sj_get_index(obj, key, required, ctx->s->comms->len, "the schedule", "communicators",
                     &index, error);
    else if (ST_OP_FIELDS[f].index == INDEX_LABEL)
      ok = sj_get_index(obj, key, FALSE, ctx->p->labels->len, "the program", "labels", &index,
                     error);
    else if (item != NULL || required)
      ok = st_json_get_int(obj, key, TRUE, ST_OP_FIELDS[f].min,
                           ST_OP_FIELDS[f].wide ? ST_MAX_BYTES : G_MAXINT32, &v, error);
    if (!ok)
      return FALSE;
    st_op_field_set(op, f, ST_OP_FIELDS[f].index != INDEX_NONE ? index : v);
  }
  return read_samples(obj, op, error) && read_part(obj, op, error);
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
      return sj_fail(error, ".deps[%d]: expected an op index or [op, step_offset]", i);
    if (cJSON_IsArray(item))
      ok = st_json_item_int(item->child, "op", 0, G_MAXINT32, &target, error) &&
           st_json_item_int(item->child->next, "step_offset", -1, 0, &offset, error);
    else
      ok = st_json_item_int(item, "op", 0, G_MAXINT32, &target, error);
    if (!ok) {
      sj_prefix_path(error, ".deps[%d]", i);
      return FALSE;
    }
    if (offset == 0 && target >= index)
      return sj_fail(error, ".deps[%d]: dependency on op %" G_GINT64_FORMAT ", which does not come "
                  "before op %u (dangling or forward dependency)", i, target, index);
    if (target >= ctx->n_ops)
      return sj_fail(error, ".deps[%d]: dependency on op %" G_GINT64_FORMAT " of the previous step, "
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
      sj_prefix_path(error, ".%s[%d]", key, i);
      return FALSE;
    }
    if (b >= p->buffers->len)
      return sj_fail(error, ".%s[%d]: buffer %" G_GINT64_FORMAT " is out of range: the program has "
                  "%u buffers", key, i, b, p->buffers->len);
    if (++*total > G_MAXUINT16)
      return sj_fail(error, ".%s: more than %d buffers in one op", key, G_MAXUINT16);
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

/* A program's name, job, streams, buffers and labels; its "ops" (absent:
 * none) in *ops. */
static StProgram *
read_head(const cJSON *obj, int n_jobs, const cJSON **ops, GError **error)
{
  static const char *const keys[] = {"name", "job", "streams", "buffers", "labels", "ops", NULL};
  const char *name = NULL;
  int32_t job = 0;
  const cJSON *streams = NULL, *buffers = NULL, *labels = NULL;
  if (!sj_expect_object(obj, keys, error) || !st_json_get_string(obj, "name", TRUE, &name, error) ||
      !sj_get_index(obj, "job", FALSE, n_jobs, "the schedule", "jobs", &job, error) ||
      !st_json_get_array(obj, "streams", TRUE, &streams, error) ||
      !st_json_get_array(obj, "buffers", TRUE, &buffers, error) ||
      !st_json_get_array(obj, "labels", TRUE, &labels, error) ||
      !st_json_get_array(obj, "ops", *ops == NULL, ops, error))
    return NULL;
  g_autoptr(StProgram) p = st_program_new(name);
  p->job = job < 0 ? 0 : job;
  if (!sj_read_each(streams, ".streams", read_stream, p, error) ||
      !sj_read_each(buffers, ".buffers", read_buffer, p, error) ||
      !sj_read_each(labels, ".labels", read_label, p, error))
    return NULL;
  return g_steal_pointer(&p);
}

StProgram *
st_program_from_json_head(const cJSON *obj, int n_jobs, GError **error)
{
  const cJSON *ops = obj; /* not required */
  StProgram *p = read_head(obj, n_jobs, &ops, error);
  if (p != NULL && ops != NULL && ops != obj) {
    st_program_free(p);
    sj_fail(error, "key 'ops': a program's head has none");
    return NULL;
  }
  return p;
}

gboolean
sj_read_program(const cJSON *obj, int index, gpointer ctx, GError **error)
{
  StSchedule *s = ctx;
  const cJSON *ops = NULL; /* required */
  g_autoptr(StProgram) p = read_head(obj, st_schedule_n_jobs(s), &ops, error);
  if (p == NULL)
    return FALSE;
  g_autoptr(GArray) refs = g_array_new(FALSE, FALSE, sizeof(Ref));
  Ops op_ctx = {s, p, (uint32_t)cJSON_GetArraySize(ops), refs};
  if (!sj_read_each(ops, ".ops", read_op, &op_ctx, error))
    return FALSE;
  for (guint i = 0; i < refs->len; i++)
    st_program_resolve(p, g_array_index(refs, Ref, i).ref, g_array_index(refs, Ref, i).target);
  st_schedule_add_program(s, g_steal_pointer(&p));
  return TRUE;
}
