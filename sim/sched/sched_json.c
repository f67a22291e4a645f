/* sched_json.c: writing the Schedule as self-contained JSON (see sched.h;
 * reading is in sched_json_read.c; the format is described in
 * docs/FORMATS.md, "Schedule JSON").
 *
 * Writing leaves out every op field that is "none" (-1 or 0), so an op reads
 * like {"kind":"COMP","pass":"fwd","stream":0,"layer":3,"batch":32}.
 * Reading is strict and rebuilds everything through the builder API
 * (st_schedule_new, st_schedule_add_comm, st_program_begin .. commit), so a
 * loaded schedule is the one a strategy would have built. The builder only
 * g_return_if_fail()s on bad indices, so every index is validated here first
 * and reported as a GError that names the origin and the JSON path.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>

#include "base/error.h"
#include "base/json.h"
#include "sched/sched_json_private.h"

const StOpField ST_OP_FIELDS[ST_N_OP_FIELDS] = {
  {"layer", offsetof(StOp, layer), FALSE, -1, 0, INDEX_LAYER, 0},
  {"micro", offsetof(StOp, micro), FALSE, -1, 0, INDEX_NONE, 0},
  {"batch", offsetof(StOp, batch), FALSE, 0, 0, INDEX_NONE, 0},
  {"comm", offsetof(StOp, comm), FALSE, -1, 0, INDEX_COMM, COMM_KINDS},
  {"peer", offsetof(StOp, peer), FALSE, -1, 0, INDEX_NONE, P2P_KINDS},
  {"tag", offsetof(StOp, tag), FALSE, -1, G_MININT32, INDEX_NONE, 0},
  {"label", offsetof(StOp, label), FALSE, -1, 0, INDEX_LABEL, 0},
  {"version", offsetof(StOp, version), FALSE, 0, 0, INDEX_NONE, 0},
  {"layer_last", offsetof(StOp, layer_last), FALSE, -1, 0, INDEX_LAYER, 0},
  {"elems", offsetof(StOp, elems), TRUE, 0, 0, INDEX_NONE, 0},
  {"bytes", offsetof(StOp, bytes), TRUE, 0, 0, INDEX_NONE, 0},
};

G_STATIC_ASSERT(ST_OP_FIELD_BYTES == ST_N_OP_FIELDS - 1);

int64_t
st_op_field_get(const StOp *op, guint f)
{
  const char *at = (const char *)op + ST_OP_FIELDS[f].offset;
  return ST_OP_FIELDS[f].wide ? *(const int64_t *)(const void *)at
                              : *(const int32_t *)(const void *)at;
}

void
st_op_field_set(StOp *op, guint f, int64_t v)
{
  char *at = (char *)op + ST_OP_FIELDS[f].offset;
  if (ST_OP_FIELDS[f].wide)
    *(int64_t *)(void *)at = v;
  else
    *(int32_t *)(void *)at = (int32_t)v;
}

const char *
st_op_sub_key(StOpKind kind)
{
  return kind == ST_OP_COMP        ? "pass"
         : kind == ST_OP_COMM_COLL ? "collective"
         : kind == ST_OP_COPY      ? "copy"
                                   : NULL;
}

/* ---- writing ------------------------------------------------------------- */

static void
add_index_list(cJSON *o, const char *key, const uint32_t *items, guint n)
{
  if (n == 0)
    return;
  cJSON *a = cJSON_AddArrayToObject(o, key);
  for (guint i = 0; i < n; i++)
    cJSON_AddItemToArray(a, cJSON_CreateNumber(items[i]));
}

static cJSON *
op_to_json(const StProgram *p, uint32_t index)
{
  const StOp *op = st_program_op(p, index);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "kind", st_op_kind_name((StOpKind)op->kind));
  if (op->kind == ST_OP_COMP)
    cJSON_AddStringToObject(o, "pass", st_pass_name((StPass)op->sub));
  else if (op->kind == ST_OP_COMM_COLL)
    cJSON_AddStringToObject(o, "collective", st_coll_name((StCollKind)op->sub));
  else if (op->kind == ST_OP_COPY)
    cJSON_AddStringToObject(o, "copy", st_copy_name((StCopyKind)op->sub));
  st_json_add_int(o, "stream", op->stream);
  if (op->data != ST_DATA_NONE)
    cJSON_AddStringToObject(o, "data", st_data_name((StData)op->data));
  for (guint f = 0; f < ST_N_OP_FIELDS; f++)
    if (st_op_field_get(op, f) != ST_OP_FIELDS[f].none)
      st_json_add_int(o, ST_OP_FIELDS[f].key, st_op_field_get(op, f));
  if (op->part > 0)
    st_json_add_int(o, "part", op->part);
  if (op->sample_stride > 0) { /* [first, stride], as st_op_samples takes them */
    cJSON *samples = cJSON_AddArrayToObject(o, "samples");
    cJSON_AddItemToArray(samples, cJSON_CreateNumber(op->sample_first));
    cJSON_AddItemToArray(samples, cJSON_CreateNumber(op->sample_stride));
  }
  if (op->n_deps > 0) {
    /* A same-step dependency is a bare op index; only the rarer
     * previous-step ones pay for the [op, offset] pair. */
    cJSON *deps = cJSON_AddArrayToObject(o, "deps");
    const StDep *d = st_program_deps(p, op);
    for (uint32_t i = 0; i < op->n_deps; i++) {
      cJSON *item = cJSON_CreateNumber(d[i].op);
      if (d[i].step_offset != 0) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, item);
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(d[i].step_offset));
        item = pair;
      }
      cJSON_AddItemToArray(deps, item);
    }
  }
  add_index_list(o, "alloc", st_program_allocs(p, op), op->n_alloc);
  add_index_list(o, "free", st_program_frees(p, op), op->n_free);
  return o;
}

/* A background stream's admission policy (sched/admission.h); its presence
 * marks the stream as background. Times in microseconds. */
static cJSON *
admission_to_json(const StAdmissionPolicy *a)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "slowdown_limit", a->slowdown_limit);
  cJSON_AddNumberToObject(o, "recover", a->recover);
  cJSON_AddNumberToObject(o, "long_recv_us", (double)a->long_recv_ns / 1e3);
  cJSON_AddNumberToObject(o, "piece_us", (double)a->piece_ns / 1e3);
  st_json_add_int(o, "fg_pieces", a->fg_pieces);
  st_json_add_int(o, "bg_pieces", a->bg_pieces);
  st_json_add_int(o, "bg_pieces_alone", a->bg_pieces_alone);
  st_json_add_int(o, "from_step", a->from_step);
  return o;
}

static cJSON *
program_to_json(const StProgram *p)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", p->name);
  if (p->job != 0)
    st_json_add_int(o, "job", p->job);
  cJSON *streams = cJSON_AddArrayToObject(o, "streams");
  for (guint i = 0; i < p->streams->len; i++) {
    const StStream *st = &g_array_index(p->streams, StStream, i);
    cJSON *so = cJSON_CreateObject();
    cJSON_AddStringToObject(so, "name", st->name);
    st_json_add_int(so, "priority", st->priority);
    if (st->background)
      cJSON_AddItemToObject(so, "admission", admission_to_json(&st->admission));
    if (st->host)
      cJSON_AddTrueToObject(so, "host");
    cJSON_AddItemToArray(streams, so);
  }
  cJSON *buffers = cJSON_AddArrayToObject(o, "buffers");
  for (guint i = 0; i < p->buffers->len; i++) {
    const StBuffer *b = &g_array_index(p->buffers, StBuffer, i);
    cJSON *bo = cJSON_CreateObject();
    cJSON_AddStringToObject(bo, "name", b->name);
    cJSON_AddStringToObject(bo, "category", st_mem_name((StMemCategory)b->category));
    st_json_add_int(bo, "bytes", b->bytes);
    if (b->persistent)
      cJSON_AddTrueToObject(bo, "persistent");
    if (b->data != ST_DATA_NONE) {
      cJSON_AddStringToObject(bo, "data", st_data_name((StData)b->data));
      cJSON *layers = cJSON_AddArrayToObject(bo, "layers");
      cJSON_AddItemToArray(layers, cJSON_CreateNumber(b->layer));
      cJSON_AddItemToArray(layers, cJSON_CreateNumber(b->layer_last));
      if (b->micro >= 0)
        st_json_add_int(bo, "micro", b->micro);
      if (b->parts != 1)
        st_json_add_int(bo, "parts", b->parts);
    }
    if (b->slot >= 0)
      st_json_add_int(bo, "slot", b->slot);
    cJSON_AddItemToArray(buffers, bo);
  }
  cJSON *labels = cJSON_AddArrayToObject(o, "labels");
  for (guint i = 0; i < p->labels->len; i++)
    cJSON_AddItemToArray(labels, cJSON_CreateString(g_ptr_array_index(p->labels, i)));
  cJSON *ops = cJSON_AddArrayToObject(o, "ops");
  for (guint i = 0; i < p->ops->len; i++)
    cJSON_AddItemToArray(ops, op_to_json(p, i));
  return o;
}

static cJSON *
settings_to_json(const StSettings *st)
{
  cJSON *o = cJSON_CreateObject();
  if (st->strategy != NULL)
    cJSON_AddStringToObject(o, "strategy", st->strategy);
  if (st->description != NULL)
    cJSON_AddStringToObject(o, "description", st->description);
  cJSON_AddStringToObject(o, "precision", st_precision_name(st->precision));
  cJSON_AddStringToObject(o, "optimizer", st_optimizer_name(st->optimizer));
  st_json_add_int(o, "micro_batch", st->micro_batch);
  st_json_add_int(o, "accumulation", st->accumulation);
  st_json_add_int(o, "global_batch", st->global_batch);
  if (st->sparsity > 0)
    cJSON_AddNumberToObject(o, "sparsity", st->sparsity);
  if (st->recompute != ST_RECOMPUTE_NONE)
    cJSON_AddStringToObject(o, "recompute", st_recompute_name(st->recompute));
  if (st->recompute_ops != 0 && st->recompute_ops != ST_RC_DEFAULT) {
    g_autofree char *ops = st_recompute_ops_format(st->recompute_ops);
    cJSON_AddStringToObject(o, "recompute_ops", ops);
  }
  if (st->compute_model != NULL)
    cJSON_AddStringToObject(o, "compute_model", st->compute_model);
  if (st->framework != NULL)
    cJSON_AddStringToObject(o, "framework", st->framework);
  if (st->nchw)
    cJSON_AddStringToObject(o, "memory_format", "nchw");
  if (st->moe_imbalance > 1)
    cJSON_AddNumberToObject(o, "moe_imbalance", st->moe_imbalance);
  if (st->gather_bucket_bytes > 0)
    st_json_add_int(o, "gather_bucket_bytes", st->gather_bucket_bytes);
  return o;
}

static void
add_rest_to_json(cJSON *root, const StSchedule *s)
{
  cJSON_AddItemToObject(root, "settings", settings_to_json(&s->settings));
  if (s->jobs->len > 0) {
    cJSON *jobs = cJSON_AddArrayToObject(root, "jobs");
    for (guint i = 0; i < s->jobs->len; i++) {
      const StJob *j = g_ptr_array_index(s->jobs, i);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "name", j->name);
      cJSON_AddItemToObject(o, "model", st_model_to_json(j->model));
      cJSON_AddItemToObject(o, "settings", settings_to_json(&j->settings));
      cJSON_AddItemToArray(jobs, o);
    }
  }
  st_json_add_int(root, "steps", s->steps);
  if (s->warmup_steps >= 0)
    st_json_add_int(root, "warmup_steps", s->warmup_steps);
  if (s->warmup_scale != 1)
    st_json_add_int(root, "warmup_scale", s->warmup_scale);
  cJSON *notes = cJSON_AddObjectToObject(root, "notes");
  for (guint i = 0; i < s->notes->len; i++) {
    const StNote *n = &g_array_index(s->notes, StNote, i);
    if (n->text != NULL)
      cJSON_AddStringToObject(notes, n->key, n->text);
    else
      cJSON_AddNumberToObject(notes, n->key, n->number);
  }
}

cJSON *
st_schedule_to_json(const StSchedule *s)
{
  g_return_val_if_fail(s != NULL, NULL);
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", ST_SCHEDULE_FORMAT);
  st_json_add_int(root, "version", ST_SCHEDULE_VERSION);
  cJSON_AddItemToObject(root, "model", st_model_to_json(s->model));
  cJSON_AddItemToObject(root, "cluster", st_cluster_to_json(s->cluster));
  add_rest_to_json(root, s);
  cJSON *devices = cJSON_AddArrayToObject(root, "devices");
  for (int d = 0; d < s->n_devices; d++) {
    cJSON *o = cJSON_CreateObject();
    st_json_add_int(o, "node", s->devices[d].node);
    st_json_add_int(o, "local", s->devices[d].local);
    cJSON_AddItemToArray(devices, o);
  }
  cJSON *ranks = cJSON_AddArrayToObject(root, "ranks");
  for (int r = 0; r < s->n_ranks; r++) {
    cJSON *o = cJSON_CreateObject();
    st_json_add_int(o, "device", s->ranks[r].device);
    st_json_add_int(o, "program", s->ranks[r].program);
    if (s->ranks[r].start_ns != 0)
      st_json_add_int(o, "start_ns", s->ranks[r].start_ns);
    if (s->ranks[r].replica != r)
      st_json_add_int(o, "replica", s->ranks[r].replica);
    cJSON_AddItemToArray(ranks, o);
  }
  cJSON *comms = cJSON_AddArrayToObject(root, "comms");
  for (guint c = 0; c < s->comms->len; c++) {
    const StComm *comm = st_schedule_comm(s, (int)c);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", comm->name);
    cJSON *groups = cJSON_AddArrayToObject(o, "groups");
    for (int g = 0; g < comm->n_groups; g++)
      cJSON_AddItemToArray(groups, cJSON_CreateIntArray(comm->members + comm->offsets[g],
                                                        comm->offsets[g + 1] - comm->offsets[g]));
    cJSON_AddItemToArray(comms, o);
  }
  cJSON *programs = cJSON_AddArrayToObject(root, "programs");
  for (guint p = 0; p < s->programs->len; p++)
    cJSON_AddItemToArray(programs, program_to_json(g_ptr_array_index(s->programs, p)));
  return root;
}

gboolean
st_schedule_save(const StSchedule *s, const char *path, GError **error)
{
  g_autoptr(cJSON) root = st_schedule_to_json(s);
  return st_json_write_file(path, root, error);
}

