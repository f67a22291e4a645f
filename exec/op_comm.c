/* op_comm.c: what a COMM op does: it moves the data the schedule names
 * (StOp.data of layers [layer, layer_last]) through the comm backend.
 *
 * - all-reduce of gradients: in place, over the run of layers when their
 *   gradients are contiguous (one bucket), else layer by layer;
 * - reduce-scatter of gradients: per layer, into this rank's slice: added to
 *   the slice buffer when there is one (it accumulates micro-batches), else
 *   copied into its place inside the whole gradients;
 * - all-gather of weights: per layer, from this rank's slice (its slice
 *   buffer, or in place inside the whole weights) into the whole weights;
 * - broadcast / reduce of weights or gradients: whole layers, rooted at the
 *   group's first member;
 * - send / receive of a layer's output or input gradient (pipelines), or of
 *   weights (overwritten) or gradients (added) of layers.
 * A collective on several layers is several calls, in layer order on every
 * member, so they meet in order.
 */
#include <string.h>

#include "exec/check.h"
#include "exec/runtime.h"

typedef struct {
  Rank *r;
  uint32_t o;
  const StOp *op;
  int32_t step;
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

static gboolean
collective(Call *c, const void *send, void *recv, size_t total, GError **error)
{
  StCommCall call = call_of(c, send, recv, total);
  return c->r->x->comm_backend->collective(c->r->x->comm, &call, error);
}

static size_t
params_of(const Rank *r, int i)
{
  return (size_t)r->model->layers[i].params;
}

static gboolean
all_reduce_grads(Call *c, GError **error)
{
  Rank *r = c->r;
  size_t ds = st_kdt_size(r->x->dt);
  for (int i = c->op->layer; i <= c->op->layer_last;) {
    if (params_of(r, i) == 0) {
      i++;
      continue;
    }
    char *start = state_data_of(r, c->o, ST_DATA_GRADS, i);
    if (start == NULL)
      return fail_missing(c, "the gradients", i, error);
    /* The longest run of layers whose gradients follow each other. */
    size_t total = params_of(r, i);
    int j = i + 1;
    for (; j <= c->op->layer_last; j++) {
      if (params_of(r, j) == 0)
        continue;
      if ((char *)state_data_of(r, c->o, ST_DATA_GRADS, j) != start + total * ds)
        break;
      total += params_of(r, j);
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
  size_t ds = st_kdt_size(r->x->dt);
  int n = group_size(c), me = my_index(c);
  for (int i = c->op->layer; i <= c->op->layer_last; i++) {
    LayerState *ls = &r->layers[i];
    size_t total = params_of(r, i), first, count;
    if (total == 0)
      continue;
    char *grads = state_data_of(r, c->o, ST_DATA_GRADS, i);
    if (grads == NULL)
      return fail_missing(c, "the gradients", i, error);
    ls->parts = n;
    ls->slice = me;
    st_comm_slice(total, n, me, &first, &count);
    /* Always into a scratch slice, never in place: every member's slice is
     * then summed in member order, the bits an all-reduce gives. It is added
     * to the slice buffer (which accumulates micro-batches) or copied into
     * the whole gradients' slice. */
    void *slice = NULL;
    g_mutex_lock(&r->lock);
    gboolean ok = st_pool_alloc(r->pool, count * ds, ST_MEM_COMM, c->step, c->o, -1,
                                "a reduce-scatter's slice", c->stream, &slice, error);
    g_mutex_unlock(&r->lock);
    if (!ok || !collective(c, grads, slice, total, error))
      return FALSE;
    if (count > 0 && ls->grads_part != NULL)
      ST_KCHECK(r->k->axpy(c->stream, ls->grads_part, r->x->dt, 1.0f, slice, r->x->dt, count),
                r->k->name, error);
    else if (count > 0)
      ST_KCHECK(r->k->copy(c->stream, grads + first * ds, slice, count * ds, 0),
                r->k->name, error);
    void *ev = r->dev->backend->event_record(r->dev, c->stream, NULL);
    g_mutex_lock(&r->lock);
    st_pool_release(r->pool, slice, c->step, c->o, ev);
    g_mutex_unlock(&r->lock);
  }
  return TRUE;
}

static gboolean
all_gather_params(Call *c, GError **error)
{
  Rank *r = c->r;
  size_t ds = st_kdt_size(r->x->dt);
  int n = group_size(c), me = my_index(c);
  for (int i = c->op->layer; i <= c->op->layer_last; i++) {
    LayerState *ls = &r->layers[i];
    size_t total = params_of(r, i), first, count;
    if (total == 0)
      continue;
    char *params = state_data_of(r, c->o, ST_DATA_PARAMS, i);
    if (params == NULL)
      return fail_missing(c, "the weights (to gather into)", i, error);
    ls->parts = n;
    ls->slice = me;
    st_comm_slice(total, n, me, &first, &count);
    const void *mine = ls->params_part != NULL ? ls->params_part : params + first * ds;
    if (!collective(c, mine, params, total, error))
      return FALSE;
  }
  return TRUE;
}

/* Broadcast or reduce of whole layers' weights or gradients. */
static gboolean
rooted(Call *c, GError **error)
{
  Rank *r = c->r;
  for (int i = c->op->layer; i <= c->op->layer_last; i++) {
    void *data = state_data_of(r, c->o, c->op->data, i);
    if (params_of(r, i) == 0)
      continue;
    if (data == NULL)
      return fail_missing(c, st_data_name(c->op->data), i, error);
    if (!collective(c, data, data, params_of(r, i), error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
coll(Call *c, GError **error)
{
  StCollKind kind = c->op->sub;
  StData data = c->op->data;
  if (kind == ST_COLL_ALL_REDUCE && data == ST_DATA_GRADS)
    return all_reduce_grads(c, error);
  if (kind == ST_COLL_REDUCE_SCATTER && data == ST_DATA_GRADS)
    return reduce_scatter_grads(c, error);
  if (kind == ST_COLL_ALL_GATHER && data == ST_DATA_PARAMS)
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
p2p(Call *c, GError **error)
{
  Rank *r = c->r;
  const StOp *op = c->op;
  gboolean sending = op->kind == ST_OP_COMM_SEND;
  int peer = st_schedule_peer_rank(r->x->s, r->rank, op->comm, op->peer);
  size_t ds = st_kdt_size(r->x->dt);
  size_t total = (size_t)op->bytes / ds;
  Act *a = NULL;
  if (op->data == ST_DATA_OUTPUT)
    a = acts_output(r, op->micro, op->layer);
  else if (op->data == ST_DATA_INPUT_GRAD)
    a = acts_input_grad(r, op->micro, op->layer);
  if (a == NULL) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d, op %u '%s': the executor cannot transfer %s yet", r->rank, c->o,
                c->what, st_data_name(op->data));
    return FALSE;
  }
  if (!sending &&
      !acts_make(r, a, (size_t)op->bytes,
                 op->data == ST_DATA_OUTPUT ? ST_MEM_ACTIVATIONS : ST_MEM_WORKSPACE, c->step,
                 c->o, c->stream, error))
    return FALSE;
  if (a->ptr == NULL)
    return fail_missing(c, st_data_name(op->data), op->layer, error);
  StCommCall call = call_of(c, a->ptr, a->ptr, total);
  const StCommBackend *b = r->x->comm_backend;
  if (!(sending ? b->send : b->recv)(r->x->comm, &call, peer, error))
    return FALSE;
  if (sending)
    acts_use(r, a, c->step, c->o, c->stream);
  else if (a->users == 0)
    acts_use(r, a, c->step, c->o, c->stream);
  return TRUE;
}

gboolean
op_comm(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  g_autofree char *name = st_op_describe(r->x->s, r->p, o);
  Call c = {r, o, op, step, stream, name};
  if (op->kind == ST_OP_COMM_COLL)
    return coll(&c, error);
  return p2p(&c, error);
}
