/* exec_weights.c: the main job's final weights (StExecResult.weights), for
 * tests and agreement checks. Per layer, the newest version (the slot the
 * last optimizer step wrote) of whole weights, preferring a rank that
 * updates them (a replica, a cyclic-DP stage's owner, a device holder: a
 * relay's user or a guest may hold an older copy or none); else the slices
 * of the ranks put together, dense or compressed (expanded through the
 * mask). A background copy's are its own (exec_rank_weights). */
#include "exec/check.h"
#include "exec/runtime.h"

/* Downloads n elements of the compute dtype at `src` as floats into `dst`. */
static gboolean
download(Rank *r, float *dst, const void *src, size_t n, GError **error)
{
  size_t ds = st_kdt_size(r->x->dt);
  g_autofree void *host = g_malloc(MAX(n * ds, 1));
  ST_KCHECK(r->k->copy(r->streams[0], host, src, n * ds, 2), r->k->name, error);
  if (!r->dev->backend->stream_sync(r->dev, r->streams[0], error))
    return FALSE;
  for (size_t i = 0; i < n; i++)
    dst[i] = r->x->dt == ST_KDT_BF16 ? st_bf16_to_f32(((uint16_t *)host)[i]) : ((float *)host)[i];
  return TRUE;
}

static gboolean
updates(const LayerState *ls)
{
  return ls->at[ST_DATA_OPTIM][0] != NULL || ls->at[ST_DATA_OPTIM_PACKED][0] != NULL;
}

/* A rank of the main job holding layer i's whole weights, best first. */
static Rank *
whole_holder(Exec *x, int i)
{
  Rank *any = NULL;
  for (int rk = 0; rk < x->s->n_ranks; rk++) {
    Rank *r = &x->ranks[rk];
    if (r->dev == NULL || r->p->job != 0 || r->layers[i].home != rk ||
        state_at(&r->layers[i], ST_DATA_PARAMS, r->layers[i].newest) == NULL)
      continue;
    if (updates(&r->layers[i]))
      return r;
    if (any == NULL)
      any = r;
  }
  return any;
}

/* Puts slices of `kind` (n elements in all) together into `dst`, from the
 * ranks of tensor-parallel index `tp` (-1: every rank); *any says whether
 * some rank held one. */
static gboolean
slices_of(Exec *x, int i, StData kind, int tp, float *dst, size_t n, gboolean *any,
          GError **error)
{
  *any = FALSE;
  for (int rk = 0; rk < x->s->n_ranks; rk++) {
    Rank *r = &x->ranks[rk];
    LayerState *ls = &r->layers[i];
    if (r->dev == NULL || r->p->job != 0 || ls->at[kind][0] == NULL ||
        (tp >= 0 && r->tp_rank != tp))
      continue;
    *any = TRUE;
    size_t first, count;
    st_comm_slice(n, MAX(ls->parts, 1), ls->slice, &first, &count);
    if (!download(r, dst + first, ls->at[kind][0], count, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
slices(Exec *x, int i, StData kind, float *dst, size_t n, GError **error)
{
  gboolean any;
  return slices_of(x, i, kind, -1, dst, n, &any, error);
}

/* A split model's layers (tensor parallelism): each whole layer put
 * together from one holder of every tensor-parallel index's slice. */
static gboolean
gather_split(Exec *x, GPtrArray *out, GError **error)
{
  const StModel *m = x->s->model;
  g_autoptr(StModel) whole = tp_whole_model(m, error);
  if (whole == NULL)
    return FALSE;
  for (int i = 0; i < m->n_layers; i++) {
    size_t n = (size_t)whole->layers[i].params;
    GArray *w = g_array_sized_new(FALSE, TRUE, sizeof(float), (guint)n);
    g_array_set_size(w, (guint)n);
    g_ptr_array_add(out, w);
    const StLayer *l = &m->layers[i];
    g_autofree float *part = g_new(float, MAX(l->params, 1));
    for (int q = 0; n > 0 && q < l->tp; q++) {
      Rank *holder = NULL;
      for (int rk = 0; rk < x->s->n_ranks && holder == NULL; rk++) {
        Rank *r = &x->ranks[rk];
        if (r->dev != NULL && r->p->job == 0 && r->tp_rank == q &&
            state_at(&r->layers[i], ST_DATA_PARAMS, r->layers[i].newest) != NULL)
          holder = r;
      }
      if (holder != NULL) {
        const LayerState *ls = &holder->layers[i];
        if (!download(holder, part, state_at(ls, ST_DATA_PARAMS, ls->newest),
                      (size_t)l->params, error))
          return FALSE;
      } else { /* ZeRO-3: the data-parallel shards of the slice */
        gboolean any;
        if (!slices_of(x, i, ST_DATA_PARAMS_SHARD, q, part, (size_t)l->params, &any, error))
          return FALSE;
        if (!any) {
          g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                      "layer '%s': no rank holds tensor-parallel slice %d of its weights",
                      l->name, q);
          return FALSE;
        }
      }
      st_tp_place(l, q, part, (float *)w->data);
    }
  }
  return TRUE;
}

gboolean
exec_gather_weights(Exec *x, GPtrArray *out, GError **error)
{
  const StModel *m = x->s->model;
  for (int i = 0; i < m->n_layers; i++)
    if (m->layers[i].tp > 1)
      return gather_split(x, out, error);
  for (int i = 0; i < m->n_layers; i++) {
    size_t n = (size_t)m->layers[i].params;
    GArray *w = g_array_sized_new(FALSE, TRUE, sizeof(float), (guint)n);
    g_array_set_size(w, (guint)n);
    g_ptr_array_add(out, w);
    if (n == 0)
      continue;
    Rank *r = whole_holder(x, i);
    if (r != NULL) {
      const LayerState *ls = &r->layers[i];
      if (!download(r, (float *)w->data, state_at(ls, ST_DATA_PARAMS, ls->newest), n, error))
        return FALSE;
      continue;
    }
    if (!slices(x, i, ST_DATA_PARAMS_SHARD, (float *)w->data, n, error))
      return FALSE;
    /* ZeRO-3 under sparsity: compressed slices, expanded through the mask. */
    double p = x->s->settings.sparsity;
    size_t nnz = 0;
    g_autofree int32_t *mask = p > 0 ? st_exec_sparse_mask(m, i, p, x->o->seed, &nnz) : NULL;
    g_autofree float *packed = g_new0(float, MAX(nnz, 1));
    gboolean any = FALSE;
    for (int rk = 0; rk < x->s->n_ranks && mask != NULL; rk++)
      any = any || (x->ranks[rk].dev != NULL &&
                    x->ranks[rk].layers[i].at[ST_DATA_PARAMS_PACKED_SHARD][0] != NULL);
    if (!any)
      continue;
    if (!slices(x, i, ST_DATA_PARAMS_PACKED_SHARD, packed, nnz, error))
      return FALSE;
    for (size_t j = 0; j < nnz; j++)
      g_array_index(w, float, mask[j]) = packed[j];
  }
  return TRUE;
}

gboolean
exec_rank_weights(Rank *r, GPtrArray *out, GError **error)
{
  const StModel *m = r->model;
  for (int i = 0; i < m->n_layers; i++) {
    size_t n = (size_t)m->layers[i].params;
    GArray *w = g_array_sized_new(FALSE, TRUE, sizeof(float), (guint)n);
    g_ptr_array_add(out, w);
    const LayerState *ls = &r->layers[i];
    const void *params = n > 0 ? state_at(ls, ST_DATA_PARAMS, ls->newest) : NULL;
    if (params == NULL)
      continue;
    g_array_set_size(w, (guint)n);
    if (!download(r, (float *)w->data, params, n, error))
      return FALSE;
  }
  return TRUE;
}
