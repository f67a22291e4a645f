/* op_tp.c: the collectives of tensor parallelism (ST_DATA_TP_*, on the
 * tensor-parallel group's communicator), what each moves (tp.c says how a
 * pass's ops hand tensors over):
 *
 * - TP_INPUT (all-gather): the part's input rows (the layer's input; part
 *   2: x1's rows in the saved block) into the op's own comm buffer;
 * - TP_OUTPUT_GRAD (all-gather): the gradient of the part's output (the
 *   layer's; part 1: x1's, carried in the input gradient) likewise;
 * - TP_OUTPUT: the part's output, all-reduced in place, or reduce-scattered
 *   from the partial sums its COMP wrote; a split loss's statistics
 *   (kernels.h ce_split_*): all-reduce MAX of the row maxima, the sums
 *   rescaled, all-reduce SUM of the sums and target logits, then the loss
 *   (added by the group's first rank only: every rank knows it);
 * - TP_INPUT_GRAD: the input gradient, likewise;
 * - TP_GRADS (all-reduce): for layers [layer, layer_last], the gradients of
 *   the parameters every rank holds whole but computes partial sums of (the
 *   PARTIAL spans, layer_impl.h), in place.
 */
#include "exec/check.h"
#include "exec/runtime.h"

typedef struct {
  Rank *r;
  uint32_t o;
  const StOp *op;
  int32_t step;
  void *stream;
  const char *what;
} Call;

static gboolean
coll(Call *c, StCollKind kind, StCommOp red, const void *send, void *recv, size_t total,
     StKDtype dt, GError **error)
{
  StCommCall call = {
    .rank = c->r->rank,
    .comm = c->op->comm,
    .tag = c->op->tag,
    .kind = kind,
    .op = red,
    .send = send,
    .recv = recv,
    .total = total,
    .dt = dt,
    .stream = c->stream,
    .what = c->what,
  };
  return c->r->x->comm_backend->collective(c->r->x->comm, &call, error);
}

static gboolean
missing(Call *c, const char *what, GError **error)
{
  return op_missing(error, c->r, c->o, what);
}

/* Elements of the whole tensor the op moves (nccl-tests' size). */
static size_t
total_of(Call *c)
{
  return (size_t)c->op->bytes / st_kdt_size(c->r->x->dt);
}

/* Is `op` part 1 of a pass in two parts (its output x1, its gradient dx1)? */
static gboolean
first_of_two(const Rank *r, const StOp *op)
{
  double share[ST_TP_PARTS_MAX];
  return op->part == 1 &&
         st_layer_tp_parts(&r->model->layers[op->layer], ST_PASS_FWD, share) > 1;
}

static gboolean
gather(Call *c, GError **error)
{
  Rank *r = c->r;
  const StOp *op = c->op;
  const void *src;
  if (op->data == ST_DATA_TP_INPUT)
    src = op->part == 2 ? tp_part_output(r, &(StOp){.layer = op->layer, .micro = op->micro,
                                                    .part = 1},
                                         c->step)
                        : acts_layer_input(r, c->step, op->micro, op->layer)->ptr;
  else
    src = first_of_two(r, op) ? acts_input_grad(r, c->step, op->micro, op->layer)->ptr
                              : acts_layer_dout(r, c->step, op->micro, op->layer)->ptr;
  size_t room = 0;
  void *dst = state_own_scratch(r, c->o, c->step, ST_MEM_COMM, &room);
  if (src == NULL)
    return missing(c, "the rows it gathers", error);
  if (dst == NULL || room != (size_t)op->bytes)
    return missing(c, "a comm buffer of its bytes to gather into", error);
  tp_put(r, c->step, op, op->data, dst);
  return coll(c, ST_COLL_ALL_GATHER, ST_COMM_SUM, src, dst, total_of(c), r->x->dt, error);
}

/* A split loss's statistics, reduced (see the top). */
static gboolean
loss_stats(Call *c, GError **error)
{
  Rank *r = c->r;
  const StOp *op = c->op;
  const StLayer *l = &r->model->layers[op->layer];
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  void *saved = *tp_saved_cell(r, op->micro, op->layer);
  int batch = tp_batch(r, op);
  float *stats = saved != NULL ? impl->tp_tensor(l, batch, r->x->dt, 0, saved) : NULL;
  const int32_t *targets = r->targets[op->micro];
  if (stats == NULL || targets == NULL)
    return missing(c, "the loss's statistics and targets", error);
  int rows = (int)(st_shape_elems(&l->in_shape) / l->in_shape.dims[l->in_shape.n_dims - 1]) *
             batch;
  if (!coll(c, ST_COLL_ALL_REDUCE, ST_COMM_MAX, stats + rows, stats + rows, (size_t)rows,
            ST_KDT_F32, error))
    return FALSE;
  ST_KCHECK(r->k->ce_split_rescale(c->stream, stats, rows), r->k->name, error);
  if (!coll(c, ST_COLL_ALL_REDUCE, ST_COMM_SUM, stats + 2 * rows, stats + 2 * rows,
            2 * (size_t)rows, ST_KDT_F32, error))
    return FALSE;
  if (r->tp_rank == 0)
    ST_KCHECK(r->k->ce_split_loss(c->stream, steps_loss(r, c->step), stats, targets, rows),
              r->k->name, error);
  return TRUE;
}

/* A pass that ends after its reduction (layer_impl.h tp_rows, tp_tail: an
 * MoE expert): its rows all-reduced, scattered into the stream; a
 * backward's releases are this op's (the schedule frees there). */
static gboolean
reduce_then_tail(Call *c, const StLayerImpl *impl, GError **error)
{
  Rank *r = c->r;
  const StOp *op = c->op;
  const StLayer *l = &r->model->layers[op->layer];
  gboolean bwd = op->data == ST_DATA_TP_INPUT_GRAD;
  StPass pass = bwd ? ST_PASS_BWD : ST_PASS_FWD;
  void **saved = tp_saved_cell(r, op->micro, op->layer);
  int batch = tp_batch(r, op);
  size_t elems = 0;
  void *rows = *saved != NULL ? impl->tp_rows(l, batch, r->x->dt, pass, *saved, &elems) : NULL;
  /* an owned expert under expert parallelism: the all-to-all's buffer its
   * compute handed over (op_compute.c); else the stream */
  gboolean ep = ep_expert(r, &(StOp){.kind = ST_OP_COMP, .layer = op->layer});
  void *target = ep ? tp_take(r, c->step, op, op->data)
                    : (bwd ? acts_input_grad(r, c->step, op->micro, op->layer)
                           : acts_output(r, c->step, op->micro, op->layer))->ptr;
  if (rows == NULL || elems != total_of(c) || target == NULL)
    return missing(c, "the rows its pass left to reduce, and where they go", error);
  if (!coll(c, ST_COLL_ALL_REDUCE, ST_COMM_SUM, rows, rows, elems, r->x->dt, error))
    return FALSE;
  StLayerCtx ctx = {.k = r->k, .stream = c->stream, .dt = r->x->dt, .tp_rank = r->tp_rank,
                    .ep = ep ? r->ep_size : 0, .ep_index = r->ep_index};
  int status = impl->tp_tail(&ctx, l, batch, pass, *saved, target);
  if (status != 0)
    return st_exec_fail_status(error, __FILE__, __LINE__, l->name, status, r->k->name);
  if (!bwd)
    return TRUE;
  op_scratch_release(r, *saved, c->step, c->o, c->stream);
  *saved = NULL;
  Act *dout = ep ? NULL : acts_layer_dout(r, c->step, op->micro, op->layer);
  if (dout != NULL && dout->ptr != NULL)
    acts_use(r, dout, c->step, c->o, c->stream);
  return TRUE;
}

/* The part's output or the input gradient: in place, or from the partial sums. */
static gboolean
reduce(Call *c, GError **error)
{
  Rank *r = c->r;
  const StOp *op = c->op;
  const StLayerImpl *impl = st_layer_impl_find(r->model->layers[op->layer].type->name);
  if (op->data == ST_DATA_TP_OUTPUT &&
      r->model->layers[op->layer].type->tp == ST_TP_VOCAB_LOSS)
    return loss_stats(c, error);
  if (impl != NULL && impl->tp_tail != NULL && op->sub == ST_COLL_ALL_REDUCE)
    return reduce_then_tail(c, impl, error);
  void *target = op->data == ST_DATA_TP_OUTPUT
                   ? tp_part_output(r, op, c->step)
                   : acts_input_grad(r, c->step, op->micro, op->layer)->ptr;
  if (target == NULL)
    return missing(c, "the tensor it reduces", error);
  if (op->sub == ST_COLL_ALL_REDUCE)
    return coll(c, ST_COLL_ALL_REDUCE, ST_COMM_SUM, target, target, total_of(c), r->x->dt,
                error);
  void *partial = tp_take(r, c->step, op, op->data);
  if (partial == NULL)
    return missing(c, "the partial sums its compute wrote", error);
  return coll(c, ST_COLL_REDUCE_SCATTER, ST_COMM_SUM, partial, target, total_of(c), r->x->dt,
              error);
}

/* The PARTIAL spans of the gradients of layers [layer, layer_last]: of the
 * whole gradient, or under ZeRO 2-3 of the rank's shard of it (elements
 * [first, first + count) of the layer's; the tensor group's members hold
 * the same shard of the same layout, so they make the same calls). */
static gboolean
partial_grads(Call *c, GError **error)
{
  Rank *r = c->r;
  const StOp *op = c->op;
  size_t es = st_kdt_size(r->x->dt);
  int64_t t = (int64_t)c->step - op->version;
  for (int i = op->layer; i <= op->layer_last; i++) {
    const StLayer *l = &r->model->layers[i];
    if (st_tp_partial_elems(l) == 0)
      continue;
    const LayerState *ls = &r->layers[i];
    char *grads = ls->at[ST_DATA_GRADS_SHARD][0];
    size_t first = 0, count = (size_t)l->params;
    if (grads != NULL)
      st_comm_slice((size_t)l->params, MAX(ls->parts, 1), ls->slice, &first, &count);
    else
      grads = state_data_of(r, c->o, c->step, ST_DATA_GRADS, i, t);
    if (grads == NULL)
      return missing(c, "the gradients", error);
    StTpSpan spans[ST_TP_SPANS_MAX];
    int n = st_tp_spans(l, r->tp_rank, spans);
    for (int k = 0; k < n; k++) {
      if (spans[k].kind != ST_TP_SPAN_PARTIAL)
        continue;
      for (size_t row = 0; row < spans[k].rows; row++) {
        size_t a = spans[k].part + row * spans[k].part_ld, b = a + spans[k].len;
        size_t lo = MAX(a, first), hi = MIN(b, first + count);
        char *at = grads + (lo - first) * es;
        if (lo < hi &&
            !coll(c, ST_COLL_ALL_REDUCE, ST_COMM_SUM, at, at, hi - lo, r->x->dt, error))
          return FALSE;
      }
    }
  }
  return TRUE;
}

gboolean
op_tp(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  g_autofree char *name = st_op_describe(r->x->s, r->p, o);
  Call c = {r, o, op, step, stream, name};
  gboolean gathers = op->sub == ST_COLL_ALL_GATHER &&
                     (op->data == ST_DATA_TP_INPUT || op->data == ST_DATA_TP_OUTPUT_GRAD);
  gboolean reduces = (op->sub == ST_COLL_ALL_REDUCE || op->sub == ST_COLL_REDUCE_SCATTER) &&
                     (op->data == ST_DATA_TP_OUTPUT || op->data == ST_DATA_TP_INPUT_GRAD);
  if (gathers)
    return gather(&c, error);
  if (reduces)
    return reduce(&c, error);
  if (op->sub == ST_COLL_ALL_REDUCE && op->data == ST_DATA_TP_GRADS)
    return partial_grads(&c, error);
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
              "rank %d, op %u '%s': the executor cannot run a %s of %s", r->rank, o, name,
              st_coll_name(op->sub), st_data_name(op->data));
  return FALSE;
}
