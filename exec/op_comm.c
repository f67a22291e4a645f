/* op_comm.c: what a COMM op does: it moves the data the schedule names
 * (StOp.data of layers [layer, layer_last], of data step step - version)
 * through the comm backend. Dense and compressed (sparse) kinds move alike,
 * each layer's part as long as state_elems says:
 *
 * - all-reduce of gradients (dense or compressed): in place, over the run of
 *   layers when their gradients are contiguous (one bucket), else layer by
 *   layer;
 * - reduce-scatter of gradients: per layer, into this rank's slice: added to
 *   the slice buffer when there is one (it accumulates micro-batches), else
 *   copied into its place inside the whole gradients;
 * - all-gather of weights (dense or compressed): per layer, from this rank's
 *   slice (its slice buffer, or in place inside the whole weights) into the
 *   whole weights;
 * - broadcast / reduce of weights or gradients: whole layers, rooted at the
 *   group's first member;
 * - send / receive of a layer's output or input gradient (pipelines; burst's
 *   samples between GPU sets, when the op says them: op_move.c); of
 *   weights (the receive overwrites); of gradients along a chain (the receive
 *   adds them to the receiver's, the send hands the sender's over: zero
 *   after it); of a chain's total (the receive overwrites); or of nothing (a
 *   zero-byte event between ranks).
 * A transfer or collective on several layers is several calls, in layer
 * order on every member, so they meet in order.
 */
#include <string.h>

#include "exec/check.h"
#include "exec/runtime.h"

typedef struct {
  Rank *r;
  uint32_t o;
  const StOp *op;
  int32_t step;
  int64_t t;      /* data step: step - version */
  void *stream;
  char *what;
} Call;

static gboolean
fail_missing(Call *c, const char *what, int layer, GError **error)
{
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
              "rank %d, op %u '%s': %s of layer %d are not on this rank (no buffer holds them)",
              c->r->rank, c->o, c->what, what, layer);
  return FALSE;
}

static StCommCall
call_of(Call *c, const void *send, void *recv, size_t total)
{
  return (StCommCall){
    .rank = c->r->rank,
    .comm = c->op->comm,
    .tag = c->op->tag,
    .kind = c->op->sub,
    .send = send,
    .recv = recv,
    .total = total,
    .dt = c->r->x->dt,
    .stream = c->stream,
    .what = c->what,
  };
}

static int group_size(const Call *c);

static gboolean
collective(Call *c, const void *send, void *recv, size_t total, GError **error)
{
  /* A group of one in place has nothing to do (NCCL returns at once too);
   * out of place it copies, as the backends do. */
  if (send == recv && group_size(c) == 1)
    return TRUE;
  StCommCall call = call_of(c, send, recv, total);
  return c->r->x->comm_backend->collective(c->r->x->comm, &call, error);
}

static inline size_t
dts(const Rank *r)
{
  return st_kdt_size(r->x->dt);
}

/* The layer whose data moves at layer i of the op's range: i, or for a
 * tied head (which has no weights of its own) on a rank keeping a copy of
 * the weights it is tied to (it runs no backward of that layer; a pipeline
 * stage), that copy's, which travels in the head's bucket. */
static int
moved(const Call *c, int i)
{
  int t = st_model_tied_layer(c->r->model, i);
  return t >= 0 && !c->r->runs_bwd[t] && (t < c->op->layer || t > c->op->layer_last) ? t : i;
}

/* Elements of layer i that the op's data kind moves, whole. */
static size_t
elems(const Call *c, int i)
{
  return state_elems(c->r, c->op->data, moved(c, i), 1);
}

static void *
data_of(Call *c, StData data, int i)
{
  return state_data_of(c->r, c->o, c->step, data, moved(c, i), c->t);
}

static gboolean
all_reduce_grads(Call *c, GError **error)
{
  StData d = c->op->data;
  for (int i = c->op->layer; i <= c->op->layer_last;) {
    if (elems(c, i) == 0) {
      i++;
      continue;
    }
    char *start = data_of(c, d, i);
    if (start == NULL)
      return fail_missing(c, "the gradients", i, error);
    /* The longest run of layers whose gradients follow each other. */
    size_t total = elems(c, i);
    int j = i + 1;
    for (; j <= c->op->layer_last; j++) {
      if (elems(c, j) == 0)
        continue;
      if ((char *)data_of(c, d, j) != start + total * dts(c->r))
        break;
      total += elems(c, j);
    }
    if (!collective(c, start, start, total, error))
      return FALSE;
    i = j;
  }
  return TRUE;
}

static int
my_index(const Call *c)
{
  return st_schedule_comm(c->r->x->s, c->op->comm)->index_of[c->r->rank];
}

static int
group_size(const Call *c)
{
  const StComm *comm = st_schedule_comm(c->r->x->s, c->op->comm);
  int g = comm->group_of[c->r->rank];
  return comm->offsets[g + 1] - comm->offsets[g];
}

static gboolean
reduce_scatter_grads(Call *c, GError **error)
{
  Rank *r = c->r;
  int n = group_size(c), me = my_index(c);
  StData shard = c->op->data == ST_DATA_GRADS_PACKED ? ST_DATA_GRADS_PACKED_SHARD
                                                     : ST_DATA_GRADS_SHARD;
  /* Always into a slice of a scratch buffer, never in place: every
   * member's slice is then summed in member order, the bits an all-reduce
   * gives. It is added to the shard (which accumulates micro-batches) or
   * copied into the whole gradients' slice. The schedule's buffer for it
   * when the op allocates one (its memory is then predicted), else one of
   * the executor's own per layer. */
  size_t room = 0, used = 0;
  char *own = state_own_scratch(r, c->o, c->step, ST_MEM_COMM, &room);
  for (int i = c->op->layer; i <= c->op->layer_last; i++) {
    LayerState *ls = &r->layers[moved(c, i)];
    size_t total = elems(c, i), first, count;
    if (total == 0)
      continue;
    char *grads = data_of(c, c->op->data, i);
    if (grads == NULL)
      return fail_missing(c, "the gradients", i, error);
    ls->parts = n;
    ls->slice = me;
    st_comm_slice(total, n, me, &first, &count);
    if (own != NULL && used + count * dts(r) > room) {
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                  "rank %d, op %u '%s': the schedule's reduce-scatter buffer of %zu bytes is "
                  "too small for the slices of layers %d-%d",
                  r->rank, c->o, c->what, room, c->op->layer, c->op->layer_last);
      return FALSE;
    }
    void *slice = own != NULL ? own + used
                              : op_scratch(r, count * dts(r), ST_MEM_COMM,
                                           "a reduce-scatter's slice", c->step, c->o, c->stream,
                                           error);
    used += own != NULL ? count * dts(r) : 0;
    if ((slice == NULL && count > 0) || !collective(c, grads, slice, total, error))
      return FALSE;
    void *part = ls->at[shard][0];
    if (part != NULL && !state_fresh(r, moved(c, i), shard, c->t, c->stream, error))
      return FALSE;
    if (count > 0 && part != NULL)
      ST_KCHECK(r->k->axpy(c->stream, part, r->x->dt, 1.0f, slice, r->x->dt, count),
                r->k->name, error);
    else if (count > 0)
      ST_KCHECK(r->k->copy(c->stream, grads + first * dts(r), slice, count * dts(r), 0),
                r->k->name, error);
    if (own == NULL)
      op_scratch_release(r, slice, c->step, c->o, c->stream);
  }
  return TRUE;
}

static gboolean
all_gather_params(Call *c, GError **error)
{
  Rank *r = c->r;
  int n = group_size(c), me = my_index(c);
  StData shard = c->op->data == ST_DATA_PARAMS_PACKED ? ST_DATA_PARAMS_PACKED_SHARD
                                                      : ST_DATA_PARAMS_SHARD;
  for (int i = c->op->layer; i <= c->op->layer_last; i++) {
    LayerState *ls = &r->layers[moved(c, i)];
    size_t total = elems(c, i), first, count;
    if (total == 0)
      continue;
    char *params = data_of(c, c->op->data, i);
    if (params == NULL)
      return fail_missing(c, "the weights (to gather into)", i, error);
    ls->parts = n;
    ls->slice = me;
    st_comm_slice(total, n, me, &first, &count);
    const void *mine = ls->at[shard][0] != NULL ? ls->at[shard][0] : params + first * dts(r);
    if (!collective(c, mine, params, total, error))
      return FALSE;
  }
  return TRUE;
}

/* Broadcast or reduce of whole layers' weights or gradients. */
static gboolean
rooted(Call *c, GError **error)
{
  for (int i = c->op->layer; i <= c->op->layer_last; i++) {
    if (elems(c, i) == 0)
      continue;
    void *data = data_of(c, c->op->data, i);
    if (data == NULL)
      return fail_missing(c, st_data_name(c->op->data), i, error);
    if (!collective(c, data, data, elems(c, i), error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
coll(Call *c, GError **error)
{
  StCollKind kind = c->op->sub;
  StData data = c->op->data;
  gboolean grads = data == ST_DATA_GRADS || data == ST_DATA_GRADS_PACKED;
  gboolean params = data == ST_DATA_PARAMS || data == ST_DATA_PARAMS_PACKED;
  if (kind == ST_COLL_ALL_REDUCE && grads)
    return all_reduce_grads(c, error);
  if (kind == ST_COLL_REDUCE_SCATTER && grads)
    return reduce_scatter_grads(c, error);
  if (kind == ST_COLL_ALL_GATHER && params)
    return all_gather_params(c, error);
  if ((kind == ST_COLL_BROADCAST || kind == ST_COLL_REDUCE) &&
      (data == ST_DATA_PARAMS || data == ST_DATA_GRADS))
    return rooted(c, error);
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
              "rank %d, op %u '%s': the executor cannot run a %s of %s", c->r->rank, c->o,
              c->what, st_coll_name(kind), st_data_name(data));
  return FALSE;
}

/* ---- point to point --------------------------------------------------------- */

static gboolean
transfer(Call *c, int peer, const void *send, void *recv, size_t total, GError **error)
{
  const StCommBackend *b = c->r->x->comm_backend;
  StCommCall call = call_of(c, send, recv, total);
  return (c->op->kind == ST_OP_COMM_SEND ? b->send : b->recv)(c->r->x->comm, &call, peer, error);
}

/* A layer's output or the gradient of its input, for one micro-batch. */
static gboolean
p2p_activation(Call *c, int peer, GError **error)
{
  Rank *r = c->r;
  const StOp *op = c->op;
  gboolean sending = op->kind == ST_OP_COMM_SEND;
  Act *a = op->data == ST_DATA_OUTPUT ? acts_output(r, c->step, op->micro, op->layer)
                                      : acts_input_grad(r, c->step, op->micro, op->layer);
  if (!sending &&
      !acts_make(r, a, (size_t)op->bytes,
                 op->data == ST_DATA_OUTPUT ? ST_MEM_ACTIVATIONS : ST_MEM_WORKSPACE, c->step,
                 c->o, c->stream, error))
    return FALSE;
  if (a->ptr == NULL)
    return fail_missing(c, st_data_name(op->data), op->layer, error);
  if (!transfer(c, peer, a->ptr, a->ptr, (size_t)op->bytes / dts(r), error))
    return FALSE;
  if (sending || a->users == 0)
    acts_use(r, a, c->step, c->o, c->stream);
  return TRUE;
}

/* Weights or gradients of whole layers, layer by layer. */
static gboolean
p2p_states(Call *c, int peer, GError **error)
{
  Rank *r = c->r;
  const StOp *op = c->op;
  gboolean sending = op->kind == ST_OP_COMM_SEND;
  gboolean partial = op->data == ST_DATA_GRADS; /* a chain's partial sum */
  /* A partial sum is received layer after layer into the schedule's buffer
   * when the receive allocates one (its memory is then predicted: the
   * largest layer's, each reusing it once the last one is added in, in
   * stream order), else into blocks of the pool. */
  size_t room = 0, largest = 0;
  char *own = partial && !sending ? state_own_scratch(r, c->o, c->step, ST_MEM_COMM, &room)
                                  : NULL;
  for (int i = op->layer; i <= op->layer_last; i++) {
    size_t n = elems(c, i);
    if (n == 0)
      continue;
    void *data = data_of(c, op->data, i);
    if (data == NULL)
      return fail_missing(c, st_data_name(state_kind(op->data)), i, error);
    if (sending) {
      if (!transfer(c, peer, data, NULL, n, error))
        return FALSE;
      if (partial) /* handed over: the next write starts from zero */
        state_mark_stale(r, i, op->data, c->t);
      continue;
    }
    if (!partial) {
      if (!transfer(c, peer, NULL, data, n, error))
        return FALSE;
      if (op->data == ST_DATA_GRADS_TOTAL)
        state_clear_stale(r, i, op->data, c->t);
      continue;
    }
    /* The addition fused into the receive (cdp.h): into scratch, then added. */
    if (own != NULL && n * dts(r) > room) {
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                  "rank %d, op %u '%s': the schedule's receive buffer of %zu bytes is too small "
                  "for the gradients of layer %d",
                  r->rank, c->o, c->what, room, i);
      return FALSE;
    }
    largest = MAX(largest, n * dts(r));
    void *got = own != NULL ? own
                            : op_scratch(r, n * dts(r), ST_MEM_COMM, "a received partial sum",
                                         c->step, c->o, c->stream, error);
    if (got == NULL || !transfer(c, peer, NULL, got, n, error))
      return FALSE;
    if (!state_fresh(r, i, op->data, c->t, c->stream, error))
      return FALSE;
    ST_KCHECK(r->k->axpy(c->stream, data, r->x->dt, 1.0f, got, r->x->dt, n), r->k->name, error);
    if (own == NULL)
      op_scratch_release(r, got, c->step, c->o, c->stream);
  }
  if (own != NULL && largest != room) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d, op %u '%s': the schedule's receive buffer of %zu bytes is not the "
                "largest layer's %zu",
                r->rank, c->o, c->what, room, largest);
    return FALSE;
  }
  return TRUE;
}

static gboolean
p2p(Call *c, GError **error)
{
  int peer = st_schedule_peer_rank(c->r->x->s, c->r->rank, c->op->comm, c->op->peer);
  switch ((StData)c->op->data) {
  case ST_DATA_OUTPUT:
  case ST_DATA_INPUT_GRAD:
    if (c->op->sample_stride > 0) /* burst: samples placed by position (op_move.c) */
      return op_move_p2p(c->r, c->o, c->step, c->stream, peer, error);
    return p2p_activation(c, peer, error);
  case ST_DATA_PARAMS:
  case ST_DATA_GRADS:
  case ST_DATA_GRADS_TOTAL:
    return p2p_states(c, peer, error);
  case ST_DATA_NONE:
    if (c->op->bytes == 0) /* an event: the peers meet, nothing moves */
      return transfer(c, peer, NULL, NULL, 0, error);
    break;
  default:
    break;
  }
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
              "rank %d, op %u '%s': the executor cannot transfer %s", c->r->rank, c->o, c->what,
              st_data_name(c->op->data));
  return FALSE;
}

gboolean
op_comm(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  g_autofree char *name = st_op_describe(r->x->s, r->p, o);
  Call c = {r, o, op, step, (int64_t)step - op->version, stream, name};
  if (op->kind == ST_OP_COMM_COLL && op->data >= ST_DATA_TP_INPUT &&
      op->data <= ST_DATA_TP_GRADS)
    return op_tp(r, o, step, stream, error);
  if (op->kind == ST_OP_COMM_COLL && op->data == ST_DATA_CP)
    return op_cp(r, o, step, stream, error);
  if (op->kind == ST_OP_COMM_COLL && op->data >= ST_DATA_EP_DISPATCH &&
      op->data <= ST_DATA_EP_DISPATCH_GRAD)
    return op_ep(r, o, step, stream, error);
  if (op->kind == ST_OP_COMM_COLL)
    return coll(&c, error);
  return p2p(&c, error);
}
