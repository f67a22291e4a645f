/* profile_layers.c: one layer pass on buffers of its own (a bench), as the
 * executor would run it (exec/op_compute.c): weights from the layer's init,
 * random inputs (token ids for an embedding), what its backward reads kept
 * by a forward, the gradient of its input written unless it is the model's
 * first layer, the loss's targets and scale, a tied head's borrowed weights.
 *
 * Scratch memory comes from an arena: a replay captured into a CUDA graph
 * must find the same addresses every call and allocate nothing, so a first
 * direct forward and backward (prof_layer_prepare) learn how much scratch
 * the layer takes and the arena is made that large; every call then starts
 * again at its beginning.
 */
#include <string.h>

#include "exec/check.h"
#include "exec/layer_impl.h"
#include "exec/profile_private.h"

#define ARENA_ALIGN 256

typedef struct {
  ProfDev *d;
  char *base;        /* device memory, `cap` bytes */
  size_t cap, used, high;
  GPtrArray *extra;  /* blocks beyond the arena, while it is being sized */
  gboolean sized;    /* the arena fits: running out now is an error */
} Arena;

struct ProfLayer {
  ProfDev *d;
  const StModel *m;
  const StLayer *l;
  const StLayerImpl *impl;
  int index, batch;
  gboolean loss, keeps_in, keeps_out;
  void *params, *dparams, *tied, *tied_grads;
  void *in, *out, *saved, *dout, *din;
  int32_t *targets;
  float *loss_sum;
  float loss_scale;
  Arena arena;
};

static void *
arena_alloc(gpointer data, size_t bytes)
{
  Arena *a = data;
  size_t need = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
  a->high = MAX(a->high, a->used + need);
  if (a->used + need <= a->cap) {
    void *p = a->base + a->used;
    a->used += need;
    return p;
  }
  a->used += need;
  if (a->sized)
    return NULL; /* the layer reports ENOMEM; never seen: calls repeat the same requests */
  void *p = NULL;
  if (a->d->k->alloc(&p, bytes) != 0)
    return NULL;
  g_ptr_array_add(a->extra, p);
  return p;
}

/* After a direct call: frees the blocks beyond the arena and grows it to
 * the high water. The device finished the call first. */
static gboolean
arena_fit(Arena *a, GError **error)
{
  ProfDev *d = a->d;
  for (guint i = 0; i < a->extra->len; i++)
    d->k->free(g_ptr_array_index(a->extra, i));
  g_ptr_array_set_size(a->extra, 0);
  if (a->high > a->cap) {
    if (a->base != NULL)
      d->k->free(a->base);
    a->base = NULL;
    a->cap = 0;
    if (!prof_alloc(d, (void **)&a->base, a->high, "layer scratch", error))
      return FALSE;
    a->cap = a->high;
  }
  return TRUE;
}

static void
layer_ctx(ProfLayer *b, void *stream, StLayerCtx *c)
{
  b->arena.used = 0;
  *c = (StLayerCtx){
    .k = b->d->k,
    .stream = stream,
    .dt = b->d->dt,
    .seed = 0x5eedull ^ (uint64_t)b->index,
    .scratch = arena_alloc,
    .pool = &b->arena,
    .targets = b->targets,
    .loss_sum = b->loss_sum,
    .loss_scale = b->loss_scale,
    .tied_params = b->tied,
    .tied_grads = b->tied_grads,
  };
}

gboolean
prof_layer_fwd(gpointer bench, void *stream, GError **error)
{
  ProfLayer *b = bench;
  StLayerCtx c;
  layer_ctx(b, stream, &c);
  int status = b->impl->forward(&c, b->l, b->batch, b->params, b->in, b->out, b->saved);
  if (status != 0)
    return st_exec_fail_status(error, __FILE__, __LINE__, b->l->name, status, b->d->k->name);
  return TRUE;
}

gboolean
prof_layer_bwd(gpointer bench, void *stream, GError **error)
{
  ProfLayer *b = bench;
  StLayerCtx c;
  layer_ctx(b, stream, &c);
  int status = b->impl->backward(&c, b->l, b->batch, b->params, b->keeps_in ? b->in : NULL,
                                 b->keeps_out ? b->out : NULL, b->saved, b->dout, b->din,
                                 b->dparams);
  if (status != 0)
    return st_exec_fail_status(error, __FILE__, __LINE__, b->l->name, status, b->d->k->name);
  return TRUE;
}

gboolean
prof_layer_prepare(ProfLayer *b, GError **error)
{
  ProfDev *d = b->d;
  void *s = d->streams[0];
  gboolean ok = prof_layer_fwd(b, s, error) && prof_layer_bwd(b, s, error) &&
                d->b->stream_sync(d->dev, s, error) && arena_fit(&b->arena, error);
  /* The arena may have moved: run once more on it, as the replays will. */
  ok = ok && prof_layer_fwd(b, s, error) && d->b->stream_sync(d->dev, s, error);
  b->arena.sized = ok;
  return ok;
}

/* ---- setup ------------------------------------------------------------------ */

/* The layer's weights (or a tied head's borrowed ones) from its init, as dt. */
static gboolean
upload_weights(ProfDev *d, const StLayer *l, void *dst, GError **error)
{
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  size_t n = (size_t)l->params, es = st_kdt_size(d->dt);
  g_autofree float *w = g_new0(float, MAX(n, 1));
  impl->init(l, w, 1234);
  if (d->dt == ST_KDT_BF16) {
    uint16_t *h = (uint16_t *)w; /* in place: element i goes to bytes 2i, read before */
    for (size_t i = 0; i < n; i++)
      h[i] = st_f32_to_bf16(w[i]);
  }
  return prof_upload(d, dst, w, n * es, error);
}

/* Class ids in [0, classes), or token ids in [0, vocab): n of them. */
static gboolean
upload_ids(ProfDev *d, int32_t *dst, size_t n, int64_t range, GError **error)
{
  g_autofree int32_t *ids = g_new(int32_t, MAX(n, 1));
  for (size_t i = 0; i < n; i++)
    ids[i] = (int32_t)((i * 2654435761u) % (uint64_t)MAX(range, 1));
  return prof_upload(d, dst, ids, n * sizeof(int32_t), error);
}

static gboolean
alloc_buffers(ProfLayer *b, GError **error)
{
  ProfDev *d = b->d;
  const StLayer *l = b->l;
  size_t es = st_kdt_size(d->dt), bt = (size_t)b->batch;
  size_t in_n = bt * (size_t)st_shape_elems(&l->in_shape);
  size_t out_n = bt * (size_t)st_shape_elems(&l->out_shape);
  gboolean ids = st_layer_takes_ids(l);
  int tied = st_model_tied_layer(b->m, b->index);
  if (!prof_alloc(d, &b->params, (size_t)l->params * es, "weights", error) ||
      !prof_alloc(d, &b->dparams, (size_t)l->params * es, "weight gradients", error) ||
      !prof_alloc(d, &b->in, in_n * (ids ? sizeof(int32_t) : es), "input", error) ||
      !prof_alloc(d, &b->out, out_n * es, "output", error) ||
      !prof_alloc(d, &b->saved, b->impl->saved_bytes(l, b->batch, d->dt), "saved", error))
    return FALSE;
  if (l->params > 0 && !upload_weights(d, l, b->params, error))
    return FALSE;
  if (ids ? !upload_ids(d, b->in, in_n, st_layer_attr(l, "vocab", 2), error)
          : !prof_upload_random(d, b->in, in_n, 1.0f, 11 + (uint64_t)b->index, error))
    return FALSE;
  /* The executor writes no input gradient for the first layer, nor one of
   * token ids. */
  if (b->index > 0 && !ids && !prof_alloc(d, &b->din, in_n * es, "input gradient", error))
    return FALSE;
  if (!b->loss && (!prof_alloc(d, &b->dout, out_n * es, "output gradient", error) ||
                   !prof_upload_random(d, b->dout, out_n, 0.01f, 17 + (uint64_t)b->index,
                                       error)))
    return FALSE;
  if (tied >= 0) {
    const StLayer *t = &b->m->layers[tied];
    size_t tn = (size_t)t->params;
    if (!prof_alloc(d, &b->tied, tn * es, "tied weights", error) ||
        !prof_alloc(d, &b->tied_grads, tn * es, "tied weight gradients", error) ||
        !upload_weights(d, t, b->tied, error))
      return FALSE;
  }
  if (b->loss) {
    int positions = l->in_shape.n_dims >= 2 ? (int)l->in_shape.dims[0] : 1;
    int64_t classes = l->in_shape.dims[l->in_shape.n_dims - 1];
    size_t n = bt * (size_t)positions;
    b->loss_scale = 1.0f / (float)n;
    if (!prof_alloc(d, (void **)&b->targets, n * sizeof(int32_t), "targets", error) ||
        !upload_ids(d, b->targets, n, classes, error) ||
        !prof_alloc(d, (void **)&b->loss_sum, sizeof(float), "loss", error))
      return FALSE;
  }
  return TRUE;
}

ProfLayer *
prof_layer_new(ProfDev *d, const StModel *m, int i, int batch, GError **error)
{
  const StLayer *l = &m->layers[i];
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  g_return_val_if_fail(impl != NULL && batch > 0, NULL);
  ProfLayer *b = g_new0(ProfLayer, 1);
  *b = (ProfLayer){
    .d = d,
    .m = m,
    .l = l,
    .impl = impl,
    .index = i,
    .batch = batch,
    .loss = g_strcmp0(l->type->name, "softmax_cross_entropy") == 0,
    .keeps_in = (l->type->keeps & ST_KEEPS_INPUT) != 0,
    .keeps_out = (l->type->keeps & ST_KEEPS_OUTPUT) != 0,
    .arena = {.d = d, .extra = g_ptr_array_new()},
  };
  if (!alloc_buffers(b, error)) {
    g_prefix_error(error, "layer '%s' at batch %d: ", l->name, batch);
    prof_layer_free(b);
    return NULL;
  }
  return b;
}

void
prof_layer_free(ProfLayer *b)
{
  if (b == NULL)
    return;
  ProfDev *d = b->d;
  /* Nothing may still run on these buffers. */
  for (int i = 0; i < PROF_N_STREAMS; i++)
    d->b->stream_sync(d->dev, d->streams[i], NULL);
  void *bufs[] = {b->params, b->dparams, b->tied,    b->tied_grads, b->in,       b->out,
                  b->saved,  b->dout,    b->din,     b->targets,    b->loss_sum, b->arena.base};
  for (gsize i = 0; i < G_N_ELEMENTS(bufs); i++)
    if (bufs[i] != NULL)
      d->k->free(bufs[i]);
  for (guint i = 0; i < b->arena.extra->len; i++)
    d->k->free(g_ptr_array_index(b->arena.extra, i));
  g_ptr_array_unref(b->arena.extra);
  g_free(b);
}
