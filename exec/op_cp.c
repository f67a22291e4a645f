/* op_cp.c: context parallelism on a rank (runtime.h; the schedule's side:
 * sim/strategy/context_parallel.h; the layer's: exec/layer_impl.h
 * StLayerCp, exec/layers/layer_decoder_cp.c).
 *
 * A pass of the part holding a layer's attention runs in steps, one COMP op
 * each (StOp's cp step), with the exchanges between them on the 'cp'
 * communicator (ST_DATA_CP): the ring's shifts, every member sending to
 * the next and receiving from the one before, or Ulysses' two all-to-alls
 * (--cp-comm all-to-all; one kind per run). The pass's state (the ring's
 * slots, the running softmax, the gradients on their way, the all-to-alls'
 * buffers) is device memory
 * made by its first step (forward: pre; backward: post) and released by its
 * last, kept here per (step, micro-batch, layer, direction). An exchange is
 * the k-th of its pass in the program's order (the schedule emits them so);
 * the layer says what exchange k moves (cp_exchange), and the bytes must be
 * the schedule's: what the simulator costs is what moves.
 *
 * The ranks of a 'cp' group compute the same samples (their replica is the
 * same); each holds its chunks of every sequence (data.c reads the tokens
 * at their global positions), and its loss counts its tokens over the
 * whole sequence's (op_compute.c, harvest.c), so the gradients summed over
 * the data x context group are data parallelism's.
 */
#include "exec/check.h"
#include "exec/runtime.h"

static gint64
state_key(int32_t step, int micro, int layer, gboolean backward)
{
  return ((gint64)step << 32) | ((gint64)(micro & 0x7fff) << 17) | ((gint64)(layer & 0xffff) << 1) |
         (backward ? 1 : 0);
}

gboolean
cp_setup(Rank *r, GError **error)
{
  r->cp_comm = -1;
  r->cp_size = 1;
  r->cp_rank = 0;
  r->cp_kind = ST_LAYER_CP_RING;
  guint n = r->p->ops->len;
  r->cp_exchange = g_new0(int16_t, MAX(n, 1u));
  r->cp_backward = g_new0(gboolean, MAX(n, 1u));
  r->cp_states = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  /* per (micro, layer): the direction of the pass whose steps come last in
   * the program's order, and the exchanges seen of it */
  int L = MAX(r->model->n_layers, 1);
  g_autofree int *count = g_new0(int, (size_t)MAX(r->n_micro, 1) * L);
  g_autofree gboolean *bwd = g_new0(gboolean, (size_t)MAX(r->n_micro, 1) * L);
  for (guint o = 0; o < n; o++) {
    const StOp *op = st_program_op(r->p, o);
    if (op->layer < 0 || op->micro < 0 || op->micro >= r->n_micro)
      continue;
    size_t at = (size_t)op->micro * L + op->layer;
    int steps = st_op_cp_steps(op);
    if (steps > 0) {
      gboolean back = st_pass_is_backward(op->sub);
      if (st_op_cp_step(op) == (back ? steps - 1 : 0)) {
        count[at] = 0;
        bwd[at] = back;
      }
      continue;
    }
    if (op->kind != ST_OP_COMM_COLL || op->data != ST_DATA_CP)
      continue;
    int kind = op->sub == ST_COLL_ALL_TO_ALL ? ST_LAYER_CP_A2A : ST_LAYER_CP_RING;
    if (op->sub != ST_COLL_RING_SHIFT && op->sub != ST_COLL_ALL_TO_ALL) {
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                  "rank %d: context parallelism over %s exchanges", r->rank,
                  st_coll_name(op->sub));
      return FALSE;
    }
    if (r->cp_comm >= 0 && kind != r->cp_kind) {
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                  "rank %d: context parallelism both over a ring and all-to-alls", r->rank);
      return FALSE;
    }
    r->cp_kind = kind;
    if (r->cp_comm >= 0 && op->comm != r->cp_comm) {
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                  "rank %d: context-parallel exchanges on two communicators (%d and %d)",
                  r->rank, r->cp_comm, op->comm);
      return FALSE;
    }
    r->cp_comm = op->comm;
    r->cp_exchange[o] = (int16_t)++count[at];
    r->cp_backward[o] = bwd[at];
  }
  if (r->cp_comm < 0)
    return TRUE;
  if (r->cp_kind == ST_LAYER_CP_RING &&
      (r->k->ring_attn_fwd == NULL || r->k->ring_attn_bwd == NULL ||
       r->k->ring_attn_finish == NULL)) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d: context parallelism's ring needs ring attention's kernels "
                "(kernels.h ring_attn_*), which the %s kernel table lacks (--cp-comm "
                "all-to-all runs on flash attention's)",
                r->rank, r->k->name);
    return FALSE;
  }
  const StComm *c = st_schedule_comm(r->x->s, r->cp_comm);
  int g = c->group_of[r->rank];
  r->cp_size = c->offsets[g + 1] - c->offsets[g];
  r->cp_rank = c->index_of[r->rank];
  return TRUE;
}

void
cp_clear(Rank *r)
{
  g_clear_pointer(&r->cp_exchange, g_free);
  g_clear_pointer(&r->cp_backward, g_free);
  g_clear_pointer(&r->cp_states, g_hash_table_unref);
}

static void *
state_of(Rank *r, int32_t step, const StOp *op, gboolean backward)
{
  gint64 key = state_key(step, op->micro, op->layer, backward);
  g_mutex_lock(&r->lock);
  void *ptr = g_hash_table_lookup(r->cp_states, &key);
  g_mutex_unlock(&r->lock);
  return ptr;
}

gboolean
cp_view(Rank *r, uint32_t o, int32_t step, void *stream, StLayerCp *v, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  int steps = st_op_cp_steps(op);
  *v = (StLayerCp){0};
  if (steps == 0)
    return TRUE;
  const StLayer *l = &r->model->layers[op->layer];
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  int want = r->cp_kind == ST_LAYER_CP_A2A ? 3 : r->cp_size + 2;
  if (impl == NULL || impl->cp_state_bytes == NULL || steps != want) {
    g_autofree char *name = st_op_describe(r->x->s, r->p, o);
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d, op %u '%s': a pass in %d context-parallel steps, but %s", r->rank, o,
                name, steps,
                impl == NULL || impl->cp_state_bytes == NULL
                  ? "its layer type has no context-parallel implementation"
                  : "the rank's 'cp' group is of another size");
    return FALSE;
  }
  gboolean back = st_pass_is_backward(op->sub);
  *v = (StLayerCp){st_op_cp_step(op), steps, r->cp_rank, r->cp_size, r->cp_kind, NULL};
  if (v->step != (back ? steps - 1 : 0)) {
    if ((v->state = state_of(r, step, op, back)) == NULL)
      return op_missing(error, r, o, "its pass's context-parallel state");
    return TRUE;
  }
  size_t bytes = impl->cp_state_bytes(l, op->batch, r->x->dt, back, r->cp_kind);
  g_autofree char *what = g_strdup_printf("layer '%s''s context-parallel attention", l->name);
  if ((v->state = op_scratch(r, bytes, ST_MEM_COMM, what, step, o, stream, error)) == NULL)
    return FALSE;
  gint64 *key = g_new(gint64, 1);
  *key = state_key(step, op->micro, op->layer, back);
  g_mutex_lock(&r->lock);
  g_hash_table_insert(r->cp_states, key, v->state);
  g_mutex_unlock(&r->lock);
  return TRUE;
}

void
cp_done(Rank *r, uint32_t o, int32_t step, void *stream)
{
  const StOp *op = st_program_op(r->p, o);
  int steps = st_op_cp_steps(op);
  gboolean back = st_pass_is_backward(op->sub);
  if (steps == 0 || st_op_cp_step(op) != (back ? 0 : steps - 1))
    return;
  gint64 key = state_key(step, op->micro, op->layer, back);
  g_mutex_lock(&r->lock);
  void *ptr = g_hash_table_lookup(r->cp_states, &key);
  g_hash_table_remove(r->cp_states, &key);
  g_mutex_unlock(&r->lock);
  op_scratch_release(r, ptr, step, o, stream);
}

gboolean
op_cp(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  g_autofree char *name = st_op_describe(r->x->s, r->p, o);
  int k = r->cp_exchange[o];
  gboolean back = r->cp_backward[o];
  const StLayer *l = &r->model->layers[op->layer];
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  void *state = state_of(r, step, op, back);
  if (k == 0 || impl == NULL || impl->cp_exchange == NULL || state == NULL)
    return op_missing(error, r, o, "the state of the pass it exchanges for");
  const void *send = NULL, *add_from = NULL;
  void *recv = NULL, *add_to = NULL;
  size_t elems = 0, add_elems = 0;
  int status = impl->cp_exchange(l, tp_batch(r, op), r->x->dt, back, r->cp_kind, k, r->cp_size,
                                 state, &send, &recv, &elems, &add_to, &add_from, &add_elems);
  if (status == 0 && add_elems > 0) /* the ring's gradient: this rank's share joins it */
    status = r->k->add(stream, add_to, add_to, add_from, r->x->dt, add_elems);
  if (status != 0)
    return st_exec_fail_status(error, __FILE__, __LINE__, l->name, status, r->k->name);
  if (elems * st_kdt_size(r->x->dt) != (size_t)op->bytes) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d, op %u '%s': the schedule's exchange moves %" G_GINT64_FORMAT
                " bytes, the layer's %zu",
                r->rank, o, name, op->bytes, elems * st_kdt_size(r->x->dt));
    return FALSE;
  }
  StCommCall call = {
    .rank = r->rank,
    .comm = op->comm,
    .tag = op->tag,
    .kind = op->sub,
    .send = send,
    .recv = recv,
    .total = elems,
    .dt = r->x->dt,
    .stream = stream,
    .what = name,
  };
  if (op->sub == ST_COLL_ALL_TO_ALL && !st_comm_all_to_all_ok(&call, r->cp_size, error))
    return FALSE;
  return r->x->comm_backend->collective(r->x->comm, &call, error);
}
