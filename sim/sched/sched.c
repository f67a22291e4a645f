/* sched.c: building and reading a Schedule (see sched.h). Communicators are
 * in sched_comm.c, serialization in sched_json.c, the invariant checks in
 * sched_check.c, folding in fold.c. */
#include "sched/sched.h"

#include <string.h>

#include "base/util.h"
#include "sched/sched_private.h"

G_DEFINE_QUARK(st-sched-error-quark, st_sched_error)

/* ---- programs ----------------------------------------------------------- */

static void
stream_clear(gpointer p)
{
  g_free(((StStream *)p)->name);
}

StProgram *
st_program_new(const char *name)
{
  StProgram *p = g_new0(StProgram, 1);
  p->name = g_strdup(name);
  p->streams = g_array_new(FALSE, TRUE, sizeof(StStream));
  g_array_set_clear_func(p->streams, stream_clear);
  p->buffers = g_array_new(FALSE, TRUE, sizeof(StBuffer));
  p->names = g_string_chunk_new(4096);
  p->ops = g_array_new(FALSE, TRUE, sizeof(StOp));
  p->deps = g_array_new(FALSE, TRUE, sizeof(StDep));
  p->mem = g_array_new(FALSE, TRUE, sizeof(uint32_t));
  p->labels = g_ptr_array_new_with_free_func(g_free);
  p->pending_deps = g_array_new(FALSE, FALSE, sizeof(StDep));
  p->pending_alloc = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  p->pending_free = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  p->label_index = g_hash_table_new(g_str_hash, g_str_equal);
  return p;
}

void
st_program_free(StProgram *p)
{
  if (p == NULL)
    return;
  g_free(p->name);
  g_array_unref(p->streams);
  g_array_unref(p->buffers);
  g_string_chunk_free(p->names);
  g_array_unref(p->ops);
  g_array_unref(p->deps);
  g_array_unref(p->mem);
  g_hash_table_unref(p->label_index);
  g_ptr_array_unref(p->labels);
  g_array_unref(p->pending_deps);
  g_array_unref(p->pending_alloc);
  g_array_unref(p->pending_free);
  g_free(p);
}

int
st_program_add_stream(StProgram *p, const char *name, int priority)
{
  g_return_val_if_fail(p->streams->len < G_MAXUINT16, -1);
  StStream s = {.name = g_strdup(name), .priority = priority};
  g_array_append_val(p->streams, s);
  return (int)p->streams->len - 1;
}

int
st_program_add_host_stream(StProgram *p, const char *name)
{
  int k = st_program_add_stream(p, name, 0);
  if (k >= 0)
    g_array_index(p->streams, StStream, k).host = TRUE;
  return k;
}

uint32_t
st_program_add_buffer(StProgram *p, const char *name, StMemCategory category, int64_t bytes,
                      gboolean persistent)
{
  g_return_val_if_fail(category >= 0 && category < ST_MEM_N, 0);
  g_return_val_if_fail(bytes >= 0, 0);
  StBuffer b = {g_string_chunk_insert(p->names, name), (uint8_t)category, persistent ? 1 : 0, bytes,
                ST_DATA_NONE,         -1,          -1, -1, 1, -1};
  g_array_append_val(p->buffers, b);
  return p->buffers->len - 1;
}

void
st_program_buffer_holds(StProgram *p, uint32_t buffer, StData data, int layer, int layer_last,
                        int micro, int parts)
{
  g_return_if_fail(buffer < p->buffers->len && data < ST_DATA_N && parts >= 1);
  g_return_if_fail(layer <= layer_last);
  StBuffer *b = &g_array_index(p->buffers, StBuffer, buffer);
  b->data = (uint8_t)data;
  b->layer = layer;
  b->layer_last = layer_last;
  b->micro = micro;
  b->parts = parts;
}

void
st_program_buffer_slot(StProgram *p, uint32_t buffer, int slot)
{
  g_return_if_fail(buffer < p->buffers->len && slot >= -1);
  g_array_index(p->buffers, StBuffer, buffer).slot = slot;
}

int32_t
st_program_label(StProgram *p, const char *text)
{
  gpointer found;
  if (g_hash_table_lookup_extended(p->label_index, text, NULL, &found))
    return GPOINTER_TO_INT(found);
  char *copy = g_strdup(text);
  g_ptr_array_add(p->labels, copy);
  int32_t index = (int32_t)p->labels->len - 1;
  g_hash_table_insert(p->label_index, copy, GINT_TO_POINTER(index));
  return index;
}

/* ---- op templates -------------------------------------------------------- */

static StOp
op_none(StOpKind kind, int sub, int stream)
{
  return (StOp){
    .kind = (uint8_t)kind,
    .sub = (uint8_t)sub,
    .stream = (uint16_t)stream,
    .layer = -1,
    .micro = -1,
    .comm = -1,
    .peer = -1,
    .tag = -1,
    .label = -1,
    .layer_last = -1,
  };
}

StOp
st_op_comp(int stream, StPass pass, int layer, int micro, int batch)
{
  StOp op = op_none(ST_OP_COMP, pass, stream);
  op.layer = layer;
  op.micro = micro;
  op.batch = batch;
  return op;
}

StOp
st_op_elementwise(int stream, StPass pass, int layer, int64_t elems, int64_t bytes)
{
  StOp op = op_none(ST_OP_COMP, pass, stream);
  op.layer = layer;
  op.elems = elems;
  op.bytes = bytes;
  return op;
}

StOp
st_op_coll(int stream, StCollKind kind, int comm, int64_t bytes)
{
  StOp op = op_none(ST_OP_COMM_COLL, kind, stream);
  op.comm = comm;
  op.bytes = bytes;
  return op;
}

StOp
st_op_send(int stream, int comm, int peer, int tag, int64_t bytes)
{
  StOp op = op_none(ST_OP_COMM_SEND, 0, stream);
  op.comm = comm;
  op.peer = peer;
  op.tag = tag;
  op.bytes = bytes;
  return op;
}

StOp
st_op_recv(int stream, int comm, int peer, int tag, int64_t bytes)
{
  StOp op = st_op_send(stream, comm, peer, tag, bytes);
  op.kind = ST_OP_COMM_RECV;
  return op;
}

StOp
st_op_copy(int stream, StCopyKind kind, int64_t bytes)
{
  StOp op = op_none(ST_OP_COPY, kind, stream);
  op.bytes = bytes;
  return op;
}

void
st_op_moves(StOp *op, StData data, int layer, int layer_last)
{
  g_return_if_fail(data < ST_DATA_N && layer <= layer_last);
  op->data = (uint8_t)data;
  op->layer = layer;
  op->layer_last = layer_last;
}

/* ---- building one op ----------------------------------------------------- */

void
st_program_begin(StProgram *p, const StOp *op)
{
  g_return_if_fail(!p->building);
  g_return_if_fail(op->kind > ST_OP_INVALID && op->kind < ST_OP_N);
  g_return_if_fail(op->stream < p->streams->len);
  p->pending = *op;
  p->building = TRUE;
  g_array_set_size(p->pending_deps, 0);
  g_array_set_size(p->pending_alloc, 0);
  g_array_set_size(p->pending_free, 0);
}

/* Forward reference handles live above every real op index. */
#define FORWARD_REF_BASE UINT32_C(0xF0000000)

static void
add_dep(StProgram *p, uint32_t op, int32_t step_offset)
{
  g_return_if_fail(p->building);
  g_return_if_fail(op < p->ops->len ||
                   (step_offset < 0 && op >= FORWARD_REF_BASE && op - FORWARD_REF_BASE < p->n_refs));
  for (guint i = 0; i < p->pending_deps->len; i++) {
    StDep *d = &g_array_index(p->pending_deps, StDep, i);
    if (d->op == op && d->step_offset == step_offset)
      return;
  }
  StDep dep = {op, step_offset};
  g_array_append_val(p->pending_deps, dep);
}

void
st_program_after(StProgram *p, uint32_t op)
{
  add_dep(p, op, 0);
}

void
st_program_after_prev_step(StProgram *p, uint32_t op)
{
  add_dep(p, op, -1);
}

void
st_program_alloc(StProgram *p, uint32_t buffer)
{
  g_return_if_fail(p->building && buffer < p->buffers->len);
  g_array_append_val(p->pending_alloc, buffer);
}

void
st_program_free_buffer(StProgram *p, uint32_t buffer)
{
  g_return_if_fail(p->building && buffer < p->buffers->len);
  g_array_append_val(p->pending_free, buffer);
}

uint32_t
st_program_commit(StProgram *p)
{
  g_return_val_if_fail(p->building, 0);
  g_return_val_if_fail(p->pending_alloc->len + p->pending_free->len <= G_MAXUINT16, 0);
  StOp op = p->pending;
  op.dep_first = p->deps->len;
  op.n_deps = p->pending_deps->len;
  g_array_append_vals(p->deps, p->pending_deps->data, p->pending_deps->len);
  op.mem_first = p->mem->len;
  op.n_alloc = (uint16_t)p->pending_alloc->len;
  op.n_free = (uint16_t)p->pending_free->len;
  g_array_append_vals(p->mem, p->pending_alloc->data, p->pending_alloc->len);
  g_array_append_vals(p->mem, p->pending_free->data, p->pending_free->len);
  g_array_append_val(p->ops, op);
  p->building = FALSE;
  return p->ops->len - 1;
}

uint32_t
st_program_forward_ref(StProgram *p)
{
  p->n_unresolved++;
  return FORWARD_REF_BASE + p->n_refs++;
}

void
st_program_resolve(StProgram *p, uint32_t ref, uint32_t op)
{
  g_return_if_fail(ref >= FORWARD_REF_BASE && ref - FORWARD_REF_BASE < p->n_refs);
  g_return_if_fail(op < p->ops->len);
  for (guint i = 0; i < p->deps->len; i++) {
    StDep *d = &g_array_index(p->deps, StDep, i);
    if (d->op == ref)
      d->op = op;
  }
  p->n_unresolved--;
}

void
st_program_persistent_bytes(const StProgram *p, int64_t out[ST_MEM_N])
{
  memset(out, 0, sizeof(int64_t) * ST_MEM_N);
  for (guint i = 0; i < p->buffers->len; i++) {
    const StBuffer *b = &g_array_index(p->buffers, StBuffer, i);
    if (b->persistent)
      out[b->category] += b->bytes;
  }
}

/* ---- schedules ----------------------------------------------------------- */

static void
job_free(gpointer data)
{
  StJob *j = data;
  g_free(j->name);
  st_model_free(j->model);
  g_free(j->settings.strategy);
  g_free(j->settings.description);
  g_free(j->settings.compute_model);
  g_free(j->settings.framework);
  g_free(j);
}

static void
note_clear(gpointer data)
{
  StNote *n = data;
  g_free(n->key);
  g_free(n->text);
}

StSchedule *
st_schedule_new(StModel *model, StCluster *cluster, int n_ranks, const int32_t *placement)
{
  g_return_val_if_fail(model != NULL && cluster != NULL && n_ranks > 0, NULL);
  StSchedule *s = g_new0(StSchedule, 1);
  s->model = model;
  s->cluster = cluster;
  s->steps = 1;
  s->warmup_steps = -1;
  s->warmup_scale = 1;
  s->n_devices = cluster->gpus;
  s->devices = g_new0(StDevice, s->n_devices);
  for (int d = 0; d < s->n_devices; d++) {
    s->devices[d].node = d / cluster->gpus_per_node;
    s->devices[d].local = d % cluster->gpus_per_node;
  }
  s->n_ranks = n_ranks;
  s->ranks = g_new0(StRank, n_ranks);
  for (int r = 0; r < n_ranks; r++) {
    s->ranks[r].device = placement != NULL ? placement[r] : r % s->n_devices;
    s->ranks[r].program = -1;
    s->ranks[r].replica = r;
    g_return_val_if_fail(s->ranks[r].device >= 0 && s->ranks[r].device < s->n_devices, NULL);
  }
  s->comms = g_ptr_array_new_with_free_func(st_sched_comm_free);
  s->jobs = g_ptr_array_new_with_free_func(job_free);
  s->programs = g_ptr_array_new_with_free_func((GDestroyNotify)st_program_free);
  s->notes = g_array_new(FALSE, TRUE, sizeof(StNote));
  g_array_set_clear_func(s->notes, note_clear);
  return s;
}

void
st_schedule_free(StSchedule *s)
{
  if (s == NULL)
    return;
  st_model_free(s->model);
  st_cluster_free(s->cluster);
  g_free(s->settings.strategy);
  g_free(s->settings.description);
  g_free(s->settings.compute_model);
  g_free(s->settings.framework);
  g_free(s->devices);
  g_free(s->ranks);
  g_ptr_array_unref(s->comms);
  g_ptr_array_unref(s->jobs);
  g_ptr_array_unref(s->programs);
  g_array_unref(s->notes);
  g_free(s);
}

int
st_schedule_add_program(StSchedule *s, StProgram *program)
{
  g_return_val_if_fail(!program->building, -1);
  g_return_val_if_fail(program->n_unresolved == 0, -1);
  g_ptr_array_add(s->programs, program);
  return (int)s->programs->len - 1;
}

int
st_schedule_add_job(StSchedule *s, const char *name, StModel *model, const StSettings *settings)
{
  StJob *j = g_new0(StJob, 1);
  j->name = g_strdup(name);
  j->model = model;
  j->settings = *settings;
  j->settings.strategy = g_strdup(settings->strategy);
  j->settings.description = g_strdup(settings->description);
  j->settings.compute_model = g_strdup(settings->compute_model);
  j->settings.framework = g_strdup(settings->framework);
  j->settings.nchw = settings->nchw;
  j->settings.gather_bucket_bytes = settings->gather_bucket_bytes;
  g_ptr_array_add(s->jobs, j);
  return (int)s->jobs->len;
}

void
st_schedule_note_number(StSchedule *s, const char *key, double value)
{
  StNote n = {g_strdup(key), NULL, value};
  g_array_append_val(s->notes, n);
}

void
st_schedule_note_text(StSchedule *s, const char *key, const char *text)
{
  StNote n = {g_strdup(key), g_strdup(text), 0};
  g_array_append_val(s->notes, n);
}

char *
st_op_describe(const StSchedule *s, const StProgram *p, uint32_t index)
{
  const StOp *op = st_program_op(p, index);
  const char *label = op->label >= 0 && (guint)op->label < p->labels->len
                        ? g_ptr_array_index(p->labels, op->label)
                        : NULL;
  const StModel *model = p->job >= 0 && p->job < st_schedule_n_jobs(s)
                           ? st_program_model(s, p)
                           : s->model;
  const char *layer =
    op->layer >= 0 && op->layer < model->n_layers ? model->layers[op->layer].name : NULL;
  g_autoptr(GString) out = g_string_new(NULL);
  switch ((StOpKind)op->kind) {
  case ST_OP_COMP:
    g_string_append(out, st_pass_name(op->sub));
    break;
  case ST_OP_COMM_COLL:
    g_string_append(out, st_coll_name(op->sub));
    break;
  case ST_OP_COMM_SEND:
    g_string_append_printf(out, "send->%d", op->peer);
    break;
  case ST_OP_COMM_RECV:
    g_string_append_printf(out, "recv<-%d", op->peer);
    break;
  case ST_OP_COPY:
    g_string_append_printf(out, "copy %s", st_copy_name(op->sub));
    break;
  default:
    g_string_append(out, "invalid");
  }
  if (label != NULL)
    g_string_append_printf(out, " %s", label);
  else if (layer != NULL)
    g_string_append_printf(out, " %s", layer);
  if (op->part > 0)
    g_string_append_printf(out, " part %d", op->part);
  if (st_op_cp_steps(op) > 0)
    g_string_append_printf(out, " step %d/%d", st_op_cp_step(op), st_op_cp_steps(op));
  if (op->micro >= 0)
    g_string_append_printf(out, " m%d", op->micro);
  if (op->version > 0)
    g_string_append_printf(out, " (params v-%d)", op->version);
  return g_string_free(g_steal_pointer(&out), FALSE);
}
