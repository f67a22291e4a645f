/* op_update.c: the optimizer step, and SAMO's compress and expand.
 *
 * An optimizer op of step k with version v applies the gradient of data
 * step t = k - v to the weights w_t and makes w_{t+1} (DP: v = 0, this step's
 * gradient; cyclic DP's per-stage updates: v = 1, the last step's, and none
 * in step 0). It steps every layer of its range (StOp.layer .. layer_last;
 * all layers when none) whose optimizer states this rank holds: the whole
 * layer or its slice, dense or compressed. With alternating parameter
 * versions (StBuffer.slot) w_t is read from slot t mod n and w_{t+1} written
 * to slot t+1 mod n; the gradient applied is zeroed before its next use
 * (state_fresh), ready to accumulate again. Gradients are sums over the global batch's samples of
 * the loss scaled by 1 / samples, so they need no further scaling.
 *
 * Sparse (settings.sparsity): the step works on the kept entries only:
 * compressed fp32 master weights and states, the compressed gradient (its
 * fp32 copy under mixed precision), and writes the compressed weights that
 * an expand op scatters into the dense weights (or, ZeRO-3, this rank's
 * compressed slice, expanded after each gather). A compress op gathers a
 * layer's dense gradient of one micro-batch through the index list into
 * the op's workspace (sparse.h) and adds it to the compressed gradient. */
#include <string.h>

#include "exec/check.h"
#include "exec/runtime.h"

static inline size_t
dts(const Rank *r)
{
  return st_kdt_size(r->x->dt);
}

static inline void *
plus(void *p, size_t bytes)
{
  return p != NULL ? (char *)p + bytes : NULL;
}

/* The layers an op names: [op->layer, op->layer_last], or every layer. */
static void
op_layers(const Rank *r, const StOp *op, int *a, int *b)
{
  *a = op->layer >= 0 ? op->layer : 0;
  *b = op->layer < 0 ? r->model->n_layers - 1 : op->layer_last >= op->layer ? op->layer_last
                                                                              : op->layer;
}

/* One layer's step of data step t; nothing when this rank holds no states
 * of it. */
static gboolean
step_layer(Rank *r, uint32_t o, int i, int64_t t, int32_t step, void *stream, GError **error)
{
  LayerState *ls = &r->layers[i];
  gboolean mixed = r->settings->precision == ST_PRECISION_MIXED;
  gboolean adam = r->settings->optimizer == ST_OPTIMIZER_ADAM;
  StKDtype dt = r->x->dt;
  gboolean packed = ls->at[ST_DATA_OPTIM_PACKED][0] || ls->at[ST_DATA_OPTIM_PACKED_SHARD][0];
  StData O = packed ? ST_DATA_OPTIM_PACKED : ST_DATA_OPTIM;
  StData OS = packed ? ST_DATA_OPTIM_PACKED_SHARD : ST_DATA_OPTIM_SHARD;
  gboolean part = ls->at[OS][0] != NULL;
  float *optim = part ? ls->at[OS][0] : ls->at[O][0];
  if (optim == NULL || r->model->layers[i].params == 0)
    return TRUE;
  size_t total = packed ? (size_t)r->nnz[i] : (size_t)r->model->layers[i].params;
  size_t first = 0, n = total;
  if (part)
    st_comm_slice(total, MAX(ls->parts, 1), ls->slice, &first, &n);
  if (n == 0)
    return TRUE;
  /* The gradient: of the slice, or the slice of the whole (in place). */
  StData G = packed ? ST_DATA_GRADS_PACKED : ST_DATA_GRADS;
  StData GS = packed ? ST_DATA_GRADS_PACKED_SHARD : ST_DATA_GRADS_SHARD;
  void *grad = part && ls->at[GS][0] != NULL ? ls->at[GS][0]
                                             : plus(state_find(r, G, i, t, step, -1), first * dts(r));
  /* Where the new weights go, and (dense fp32) the old ones. */
  StData P = packed ? ST_DATA_PARAMS_PACKED : ST_DATA_PARAMS;
  StData PS = packed ? ST_DATA_PARAMS_PACKED_SHARD : ST_DATA_PARAMS_SHARD;
  void *old = part && ls->at[PS][0] != NULL ? ls->at[PS][0]
                                            : plus(state_find(r, P, i, t, step, -1), first * dts(r));
  void *out = part && ls->at[PS][0] != NULL
                ? ls->at[PS][0]
                : plus(state_find(r, P, i, t + 1, step, -1), first * dts(r));
  if (grad == NULL || out == NULL)
    return op_missing(error, r, o, grad == NULL ? "a layer's gradients" : "a layer's weights");
  float *master, *states;
  if (packed || mixed) {
    master = optim;
    states = optim + n;
  } else {
    /* fp32: the weights are their own master copy; a new version starts
     * from the old one. */
    master = out;
    states = optim;
    if (old != out)
      ST_KCHECK(r->k->copy(stream, out, old, n * sizeof(float), 0), r->k->name, error);
  }
  StKDtype gdt = dt;
  float *copy32 = ls->at[ST_DATA_GRADS_PACKED_FP32][0];
  if (packed && mixed && copy32 != NULL) {
    /* The fp32 copy of the compressed gradient, as the schedule keeps it. */
    ST_KCHECK(r->k->convert(stream, copy32, ST_KDT_F32, grad, dt, n), r->k->name, error);
    grad = copy32;
    gdt = ST_KDT_F32;
  }
  double lr = r->x->o->lr > 0 ? r->x->o->lr : adam ? 1e-3 : 1e-2;
  if (adam)
    ST_KCHECK(r->k->adamw(stream, master, states, states + n, grad, gdt, out, dt, n, (float)lr,
                          0.9f, 0.999f, 1e-8f, 0.0f, (int)t + 1, 1.0f),
              r->k->name, error);
  else
    ST_KCHECK(r->k->sgd(stream, master, states, grad, gdt, out, dt, n, (float)lr, 0.9f, 0.0f,
                        1.0f),
              r->k->name, error);
  if (!packed) {
    int slots = MAX(ls->slots[ST_DATA_PARAMS], 1);
    ls->newest = (int)(((t + 1) % slots + slots) % slots);
  }
  return TRUE;
}

/* The gradients of data step t that the step applied: zeroed by their next
 * accumulating write (state_fresh), not here, since a send of the chain may
 * still be reading them (hazards.c). */
static void
mark_applied(Rank *r, int i, int64_t t)
{
  static const StData kinds[] = {ST_DATA_GRADS, ST_DATA_GRADS_SHARD, ST_DATA_GRADS_PACKED,
                                 ST_DATA_GRADS_PACKED_SHARD};
  for (gsize k = 0; k < G_N_ELEMENTS(kinds); k++)
    state_mark_stale(r, i, kinds[k], t);
}

gboolean
op_update(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  int64_t t = (int64_t)step - op->version;
  if (t < 0) /* no gradient of a step before the first: nothing to apply */
    return TRUE;
  int a, b;
  op_layers(r, op, &a, &b);
  for (int i = a; i <= b; i++)
    if (!step_layer(r, o, i, t, step, stream, error))
      return FALSE;
  for (int i = a; i <= b; i++) {
    const LayerState *ls = &r->layers[i];
    gboolean held = ls->at[ST_DATA_OPTIM][0] || ls->at[ST_DATA_OPTIM_SHARD][0] ||
                    ls->at[ST_DATA_OPTIM_PACKED][0] || ls->at[ST_DATA_OPTIM_PACKED_SHARD][0];
    if (held)
      mark_applied(r, i, t);
  }
  return TRUE;
}

/* ---- compress and expand --------------------------------------------------------- */

gboolean
op_compress(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  /* A tied head's gradient is its embedding's, compressed by that mask. */
  int i = op->layer, w = state_weights_layer(r->model, i);
  size_t nnz = (size_t)r->nnz[w];
  void *dense = state_data_of(r, o, step, ST_DATA_GRADS, i, step);
  void *packed = state_data_of(r, o, step, ST_DATA_GRADS_PACKED, w, step);
  const int32_t *index = state_at(&r->layers[w], ST_DATA_INDEX, 0);
  if (dense == NULL || packed == NULL || index == NULL)
    return op_missing(error, r, o,
                      dense == NULL    ? "the layer's dense gradient"
                      : packed == NULL ? "its compressed gradient"
                                       : "its index list");
  /* The gathered values: the op's workspace in the schedule when it
   * allocates one (its memory is then predicted), else a block of the pool. */
  size_t room = 0;
  void *own = state_own_scratch(r, o, step, ST_MEM_WORKSPACE, &room);
  if (own != NULL && room != nnz * dts(r)) {
    g_autofree char *name = st_op_describe(r->x->s, r->p, o);
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d, op %u '%s': the schedule's %zu bytes of workspace are not the %zu "
                "bytes of the compressed values",
                r->rank, o, name, room, nnz * dts(r));
    return FALSE;
  }
  void *values = own != NULL ? own
                             : op_scratch(r, nnz * dts(r), ST_MEM_WORKSPACE, "compressed values",
                                          step, o, stream, error);
  if (values == NULL && nnz > 0)
    return FALSE;
  ST_KCHECK(r->k->compress(stream, values, r->x->dt, dense, r->x->dt, index, nnz), r->k->name,
            error);
  if (!state_fresh(r, w, ST_DATA_GRADS_PACKED, step, stream, error))
    return FALSE;
  ST_KCHECK(r->k->axpy(stream, packed, r->x->dt, 1.0f, values, r->x->dt, nnz), r->k->name,
            error);
  if (own == NULL)
    op_scratch_release(r, values, step, o, stream);
  return TRUE;
}

gboolean
op_expand(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  int a, b;
  op_layers(r, op, &a, &b);
  for (int i = a; i <= b; i++) {
    /* The compressed weights it consumes: its own buffer (the step's, the
     * gather's); with no layer named, every layer such a buffer covers. */
    void *packed = state_own_data(r, o, step, ST_DATA_PARAMS_PACKED, i);
    if (packed == NULL && op->layer < 0)
      continue;
    void *dense = state_data_of(r, o, step, ST_DATA_PARAMS, i, step);
    const int32_t *index = state_at(&r->layers[i], ST_DATA_INDEX, 0);
    if (packed == NULL || dense == NULL || index == NULL)
      return op_missing(error, r, o,
                        packed == NULL  ? "the compressed weights"
                        : dense == NULL ? "the dense weights"
                                        : "the index list");
    ST_KCHECK(r->k->expand(stream, dense, r->x->dt, packed, r->x->dt, index,
                           (size_t)r->nnz[i]),
              r->k->name, error);
  }
  return TRUE;
}
