/* sched.c: building and reading a Schedule (see sched.h). Serialization is in
 * sched_json.c, the invariant checks in sched_check.c, folding in fold.c. */
#include "sched/sched.h"

#include <string.h>

#include "base/util.h"

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

/* The arrays of a communicator are GRcBox blocks, shared with the
 * communicators that partition the ranks alike (sched.h). */
static void
comm_free(gpointer data)
{
  StComm *c = data;
  g_free(c->name);
  g_rc_box_release(c->group_of);
  g_rc_box_release(c->index_of);
  g_rc_box_release(c->offsets);
  g_rc_box_release(c->members);
  g_free(c);
}

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
  s->comms = g_ptr_array_new_with_free_func(comm_free);
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

/* Dense group ids in order of color. Colors in a range not much wider than
 * the ranks (every strategy's) go through a table over the range: group of
 * color k is id[k - lo]; others through a sort into group_of. */
typedef struct {
  int32_t lo;         /* the least color */
  int32_t *id;        /* [range]: a color's group, -1 when no rank has it; NULL: sparse */
  int n_groups;
} ColorGroups;

static void
color_groups_init(ColorGroups *cg, int n_ranks, const int32_t *color)
{
  int32_t lo = G_MAXINT32, hi = -1;
  for (int r = 0; r < n_ranks; r++)
    if (color[r] >= 0) {
      lo = MIN(lo, color[r]);
      hi = MAX(hi, color[r]);
    }
  *cg = (ColorGroups){.lo = lo};
  if (hi < 0)
    cg->lo = 0, hi = -1;
  if ((int64_t)hi - cg->lo >= 4 * (int64_t)n_ranks + 1024)
    return;
  cg->id = g_new0(int32_t, (gsize)MAX(hi - cg->lo + 1, 1));
  for (int r = 0; r < n_ranks; r++)
    if (color[r] >= 0)
      cg->id[color[r] - cg->lo] = 1;
  for (int64_t k = 0; k <= (int64_t)hi - cg->lo; k++)
    cg->id[k] = cg->id[k] ? cg->n_groups++ : -1;
}

static inline int32_t
color_group(const ColorGroups *cg, int32_t color)
{
  return color >= 0 ? cg->id[color - cg->lo] : -1;
}

/* The groups of a sparse coloring, through a sort. */
static int
sparse_groups(int n_ranks, const int32_t *color, int32_t *group_of)
{
  int n_groups = 0;
  g_autoptr(GArray) colors = g_array_new(FALSE, FALSE, sizeof(int32_t));
  for (int r = 0; r < n_ranks; r++)
    if (color[r] >= 0)
      g_array_append_val(colors, color[r]);
  g_array_sort(colors, (GCompareFunc)st_compare_int32);
  g_autoptr(GHashTable) group_of_color = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint i = 0; i < colors->len; i++) {
    int32_t col = g_array_index(colors, int32_t, i);
    if (!g_hash_table_contains(group_of_color, GINT_TO_POINTER(col)))
      g_hash_table_insert(group_of_color, GINT_TO_POINTER(col), GINT_TO_POINTER(n_groups++));
  }
  for (int r = 0; r < n_ranks; r++)
    group_of[r] = color[r] >= 0 ? GPOINTER_TO_INT(g_hash_table_lookup(
                                    group_of_color, GINT_TO_POINTER(color[r])))
                                : -1;
  return n_groups;
}

/* An earlier communicator whose groups these colors make, or NULL; read
 * from the colors, so that a communicator equal to one before costs no
 * array of its own. */
static const StComm *
same_partition(const StSchedule *s, const ColorGroups *cg, const int32_t *color)
{
  for (guint i = 0; i < s->comms->len; i++) {
    const StComm *c = st_schedule_comm(s, i);
    if (c->n_groups != cg->n_groups)
      continue;
    int r = 0;
    while (r < s->n_ranks && c->group_of[r] == color_group(cg, color[r]))
      r++;
    if (r == s->n_ranks)
      return c;
  }
  return NULL;
}

/* `c` takes the arrays of `same` (a reference each). */
static void
share_partition(StComm *c, const StComm *same)
{
  c->n_groups = same->n_groups;
  c->group_of = g_rc_box_acquire(same->group_of);
  c->index_of = g_rc_box_acquire(same->index_of);
  c->offsets = g_rc_box_acquire(same->offsets);
  c->members = g_rc_box_acquire(same->members);
  c->n_members = same->n_members;
}

int
st_schedule_add_comm(StSchedule *s, const char *name, const int32_t *color)
{
  StComm *c = g_new0(StComm, 1);
  c->name = g_strdup(name);
  ColorGroups cg;
  color_groups_init(&cg, s->n_ranks, color);
  const StComm *same = cg.id != NULL ? same_partition(s, &cg, color) : NULL;
  if (same != NULL) {
    g_free(cg.id);
    share_partition(c, same);
    g_ptr_array_add(s->comms, c);
    return (int)s->comms->len - 1;
  }
  c->group_of = g_rc_box_alloc(sizeof(int32_t) * (gsize)s->n_ranks);
  if (cg.id != NULL) {
    c->n_groups = cg.n_groups;
    for (int r = 0; r < s->n_ranks; r++)
      c->group_of[r] = color_group(&cg, color[r]);
    g_free(cg.id);
  } else {
    c->n_groups = sparse_groups(s->n_ranks, color, c->group_of);
  }
  c->offsets = g_rc_box_alloc0(sizeof(int32_t) * ((gsize)c->n_groups + 1));
  for (int r = 0; r < s->n_ranks; r++)
    if (c->group_of[r] >= 0)
      c->offsets[c->group_of[r] + 1]++;
  for (int g = 0; g < c->n_groups; g++)
    c->offsets[g + 1] += c->offsets[g];
  c->n_members = c->offsets[c->n_groups];
  c->index_of = g_rc_box_alloc(sizeof(int32_t) * (gsize)s->n_ranks);
  c->members = g_rc_box_alloc(sizeof(int32_t) * (gsize)MAX(c->n_members, 1));
  g_autofree int32_t *fill = g_new0(int32_t, MAX(c->n_groups, 1));
  for (int r = 0; r < s->n_ranks; r++) {
    int g = c->group_of[r];
    c->index_of[r] = g >= 0 ? fill[g] : -1;
    if (g >= 0)
      c->members[c->offsets[g] + fill[g]++] = r;
  }
  g_ptr_array_add(s->comms, c);
  return (int)s->comms->len - 1;
}

int
st_schedule_add_world(StSchedule *s, const char *name)
{
  /* A world already there: its arrays, without a color per rank. */
  for (guint i = 0; i < s->comms->len; i++) {
    const StComm *w = st_schedule_comm(s, i);
    if (w->n_groups == 1 && w->n_members == s->n_ranks) {
      StComm *c = g_new0(StComm, 1);
      c->name = g_strdup(name);
      share_partition(c, w);
      g_ptr_array_add(s->comms, c);
      return (int)s->comms->len - 1;
    }
  }
  g_autofree int32_t *color = g_new0(int32_t, s->n_ranks);
  return st_schedule_add_comm(s, name, color);
}

int
st_schedule_find_comm(const StSchedule *s, const char *name)
{
  for (guint i = 0; i < s->comms->len; i++)
    if (strcmp(st_schedule_comm(s, i)->name, name) == 0)
      return (int)i;
  return -1;
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

int
st_schedule_peer_rank(const StSchedule *s, int rank, int comm, int peer)
{
  const StComm *c = st_schedule_comm(s, comm);
  int g = c->group_of[rank];
  if (g < 0 || peer < 0 || peer >= c->offsets[g + 1] - c->offsets[g])
    return -1;
  return c->members[c->offsets[g] + peer];
}

void
st_schedule_group_shape(const StSchedule *s, int comm, int group, StGroupShape *shape)
{
  const StComm *c = st_schedule_comm(s, comm);
  int n = c->offsets[group + 1] - c->offsets[group];
  g_autofree int32_t *gpus = g_new(int32_t, n);
  for (int i = 0; i < n; i++)
    gpus[i] = s->ranks[c->members[c->offsets[group] + i]].device;
  st_cluster_group_shape(s->cluster, gpus, n, shape);
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
