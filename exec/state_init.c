/* state_init.c: the states a run starts from, and the states ranks share.
 *
 * Every rank and backend starts from the same weights: each layer's
 * implementation draws them from the seed (layer_impl.h). Under
 * settings.sparsity (SAMO) the pruned entries (st_exec_sparse_mask) are
 * zero in the dense weights, and the kept ones are the compressed master
 * weights. Every buffer bound to a layer gets its part: every slot of
 * alternating parameter versions (both hold w_0 = w_{-1}: no update has
 * happened before step 0), this rank's slice of sliced data, the index
 * lists.
 *
 * Sharing (cyclic DP's model parallelism): a rank that computes a layer
 * whose weights it holds in no buffer of its own is a guest of the rank of
 * its device that keeps them persistently (the device holder): it reads that
 * rank's weights and adds into that rank's gradients, as the schedule's
 * shared device intends (strategy_cdp_mp.c). Those gradients are then
 * written by several ranks' backwards, which op_compute.c runs one at a
 * time. */
#include <string.h>

#include "exec/check.h"
#include "exec/runtime.h"

int
state_weights_layer(const StModel *m, int layer)
{
  int tied = st_model_tied_layer(m, layer);
  return tied >= 0 ? tied : layer;
}

/* Uploads `n` elements of `bytes` each from host `src` to `dst`, and waits
 * (the host memory goes away after). */
static gboolean
upload_raw(Rank *r, void *dst, const void *src, size_t n, size_t bytes, void *stream,
           GError **error)
{
  if (n == 0 || dst == NULL)
    return TRUE;
  ST_KCHECK(r->k->copy(stream, dst, src, n * bytes, 1), r->k->name, error);
  return r->dev->backend->stream_sync(r->dev, stream, error);
}

/* Uploads `n` fp32 host values to `dst` stored as `dt`. */
static gboolean
upload(Rank *r, void *dst, StKDtype dt, const float *src, size_t n, void *stream, GError **error)
{
  if (n == 0 || dst == NULL)
    return TRUE;
  if (dt != ST_KDT_BF16)
    return upload_raw(r, dst, src, n, sizeof(float), stream, error);
  g_autofree uint16_t *h = g_new(uint16_t, n);
  for (size_t i = 0; i < n; i++)
    h[i] = st_f32_to_bf16(src[i]);
  return upload_raw(r, dst, h, n, sizeof(uint16_t), stream, error);
}

/* The whole (or this rank's slice of the) vector `v` of n elements into the
 * layer's `data` and `part` kinds: the whole one gets all of v, the slice
 * one its slice. */
static gboolean
upload_both(Rank *r, LayerState *ls, StData whole, StData part, StKDtype dt, const float *v,
            size_t n, void *stream, GError **error)
{
  size_t first = 0, count = n;
  if (ls->parts > 1)
    st_comm_slice(n, ls->parts, ls->slice, &first, &count);
  for (int k = 0; k < MAX(ls->slots[whole], 1); k++)
    if (!upload(r, ls->at[whole][k], dt, v, n, stream, error))
      return FALSE;
  return upload(r, ls->at[part][0], dt, v + first, count, stream, error);
}

/* The fp32 master weights at the start of the optimizer states (whole or
 * slice: the states' own extent). */
static gboolean
upload_master(Rank *r, LayerState *ls, StData whole, StData part, const float *v, size_t n,
              void *stream, GError **error)
{
  size_t first = 0, count = n;
  if (ls->parts > 1)
    st_comm_slice(n, ls->parts, ls->slice, &first, &count);
  if (!upload(r, ls->at[whole][0], ST_KDT_F32, v, n, stream, error))
    return FALSE;
  return upload(r, ls->at[part][0], ST_KDT_F32, v + first, count, stream, error);
}

gboolean
state_init_weights(Rank *r, GError **error)
{
  void *stream = r->streams[0];
  gboolean mixed = r->settings->precision == ST_PRECISION_MIXED;
  double p = r->settings->sparsity;
  /* A rank of a tensor-parallel group starts from its slice of the whole
   * layer's weights: the same run as without the split. */
  g_autoptr(StModel) whole = NULL;
  if (r->tp_comm >= 0 && (whole = tp_whole_model(r->model, error)) == NULL)
    return FALSE;
  for (int i = 0; i < r->model->n_layers; i++) {
    const StLayer *l = &r->model->layers[i];
    LayerState *ls = &r->layers[i];
    if (l->params == 0 || !ep_holds(r, i))
      continue;
    const StLayerImpl *impl = st_layer_impl_find(l->type->name);
    g_autofree float *w = g_new0(float, l->params);
    if (whole != NULL) {
      const StLayer *wl = &whole->layers[i];
      g_autofree float *ww = g_new0(float, wl->params);
      impl->init(wl, ww, r->x->o->seed);
      st_tp_slice(l, r->tp_rank, ww, w);
    } else {
      impl->init(l, w, r->x->o->seed);
    }
    size_t n = (size_t)l->params;
    g_autofree float *packed = NULL;
    if (p > 0) {
      size_t nnz = 0;
      g_autofree int32_t *mask = st_exec_sparse_mask(r->model, i, p, r->x->o->seed, &nnz);
      packed = g_new(float, MAX(nnz, 1));
      g_autofree float *masked = g_new0(float, n);
      for (size_t j = 0; j < nnz; j++)
        masked[mask[j]] = packed[j] = w[mask[j]];
      memcpy(w, masked, n * sizeof(float));
      if (!upload_raw(r, ls->at[ST_DATA_INDEX][0], mask, nnz, sizeof(int32_t), stream, error) ||
          !upload_master(r, ls, ST_DATA_OPTIM_PACKED, ST_DATA_OPTIM_PACKED_SHARD, packed, nnz,
                         stream, error) ||
          !upload_both(r, ls, ST_DATA_PARAMS_PACKED, ST_DATA_PARAMS_PACKED_SHARD, r->x->dt,
                       packed, nnz, stream, error))
        return FALSE;
    }
    if (!upload_both(r, ls, ST_DATA_PARAMS, ST_DATA_PARAMS_SHARD, r->x->dt, w, n, stream, error))
      return FALSE;
    /* Master weights: the fp32 copy under mixed precision (in fp32 the
     * weights are their own). */
    if (mixed &&
        !upload_master(r, ls, ST_DATA_OPTIM, ST_DATA_OPTIM_SHARD, w, n, stream, error))
      return FALSE;
  }
  return TRUE;
}

/* ---- sharing ------------------------------------------------------------------ */

/* Whether `p` has a buffer (persistent or not) holding some kind of weights
 * of `layer`. */
static gboolean
holds_weights(const StProgram *p, int layer, gboolean persistent_params_only)
{
  for (guint b = 0; b < p->buffers->len; b++) {
    const StBuffer *buf = &g_array_index(p->buffers, StBuffer, b);
    if (layer < buf->layer || layer > buf->layer_last)
      continue;
    if (persistent_params_only ? buf->persistent && buf->data == ST_DATA_PARAMS
                               : buf->data == ST_DATA_PARAMS ||
                                   buf->data == ST_DATA_PARAMS_SHARD ||
                                   buf->data == ST_DATA_PARAMS_PACKED ||
                                   buf->data == ST_DATA_PARAMS_PACKED_SHARD)
      return TRUE;
  }
  return FALSE;
}

/* Whether `p` runs a pass that reads the weights of `layer`. */
static gboolean
computes(const StModel *m, const StProgram *p, int layer)
{
  for (guint o = 0; o < p->ops->len; o++) {
    const StOp *op = st_program_op(p, o);
    if (op->kind == ST_OP_COMP && op->layer >= 0 && op->sub != ST_PASS_OPTIM &&
        op->sub != ST_PASS_COMPRESS && op->sub != ST_PASS_EXPAND &&
        state_weights_layer(m, op->layer) == layer)
      return TRUE;
  }
  return FALSE;
}

int
exec_device_holder(const StSchedule *s, int rank, int layer)
{
  for (int h = 0; h < s->n_ranks; h++) {
    const StProgram *hp = st_schedule_program_of(s, h);
    if (h != rank && s->ranks[h].device == s->ranks[rank].device &&
        hp->job == st_schedule_program_of(s, rank)->job && holds_weights(hp, layer, TRUE))
      return h;
  }
  return -1;
}

gboolean
exec_is_guest(const StSchedule *s, int rank, int layer)
{
  const StProgram *p = st_schedule_program_of(s, rank);
  const StModel *m = st_program_model(s, p);
  return m->layers[layer].params > 0 && computes(m, p, layer) && !holds_weights(p, layer, FALSE);
}

gboolean
state_share(Exec *x, GError **error)
{
  const StSchedule *s = x->s;
  for (int rank = 0; rank < s->n_ranks; rank++) {
    Rank *r = &x->ranks[rank];
    for (int i = 0; r->dev != NULL && i < r->model->n_layers; i++) {
      LayerState *ls = &r->layers[i];
      ls->home = rank;
      if (!exec_is_guest(s, rank, i))
        continue;
      int h = exec_device_holder(s, rank, i);
      if (h < 0 || x->ranks[h].dev == NULL) {
        g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                    "rank %d computes layer '%s' but holds no weights of it, and no rank of "
                    "its device here keeps them",
                    rank, r->model->layers[i].name);
        return FALSE;
      }
      LayerState *hs = &x->ranks[h].layers[i];
      for (int k = 0; k < STATE_SLOTS; k++) {
        ls->at[ST_DATA_PARAMS][k] = hs->at[ST_DATA_PARAMS][k];
        ls->at[ST_DATA_GRADS][k] = hs->at[ST_DATA_GRADS][k];
      }
      ls->slots[ST_DATA_PARAMS] = hs->slots[ST_DATA_PARAMS];
      ls->slots[ST_DATA_GRADS] = hs->slots[ST_DATA_GRADS];
      ls->home = h;
      ls->shared = hs->shared = TRUE;
    }
  }
  return TRUE;
}
