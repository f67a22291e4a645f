/* layer_conv.c: image layers on [C, H, W] samples (model types in
 * sim/model/layer_conv.c). Parameter layout of conv2d (PyTorch's):
 *
 *   conv2d   weight [out_channels, in_channels / groups, k, k], bias [out_channels]
 *
 * The others have none. Init: U(+-1/sqrt(fan_in)), fan_in = in/groups * k * k
 * (PyTorch's nn.Conv2d default), for the bias too. maxpool2d keeps its
 * argmax (int32 per output) in `saved`; flatten is a copy unless the
 * executor hands it one buffer; to_tokens transposes [C, HW] to [HW, C].
 */
#include <math.h>

#include "exec/layers/layers_private.h"

static StConvGeom
conv_geom(const StLayer *l, int batch)
{
  const int64_t *d = l->in_shape.dims;
  return st_conv_geom(batch, (int)d[0], (int)d[1], (int)d[2],
                      (int)st_layer_attr(l, "out_channels", 1), (int)st_layer_attr(l, "kernel", 1),
                      (int)st_layer_attr(l, "stride", 1), (int)st_layer_attr(l, "padding", 0),
                      (int)st_layer_attr(l, "groups", 1));
}

static size_t
conv_weights(const StConvGeom *g)
{
  return (size_t)g->cout * (g->cin / g->groups) * g->k * g->k;
}

static void
conv2d_init(const StLayer *l, float *params, uint64_t seed)
{
  StConvGeom g = conv_geom(l, 1);
  float bound = 1.0f / sqrtf((float)(g.cin / g.groups * g.k * g.k));
  st_init_uniform(params, conv_weights(&g), bound, seed, l, 0);
  if (st_layer_attr(l, "bias", 1))
    st_init_uniform(params + conv_weights(&g), (size_t)g.cout, bound, seed, l, 1);
}

static int
conv2d_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
               const void *in, void *out, void *saved)
{
  StConvGeom g = conv_geom(l, batch);
  ST_TRY(st_conv_fwd(c, &g, in, params, out, NULL));
  if (!st_layer_attr(l, "bias", 1))
    return 0;
  return c->k->bias_add_chw(c->stream, out, st_at(params, c->dt, conv_weights(&g)), batch, g.cout,
                            g.ho * g.wo, c->dt);
}

static int
conv2d_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                const void *in, const void *out, const void *saved, const void *dout, void *din,
                void *dparams)
{
  StConvGeom g = conv_geom(l, batch);
  if (st_layer_attr(l, "bias", 1))
    ST_TRY(c->k->bias_grad_chw(c->stream, st_at(dparams, c->dt, conv_weights(&g)), dout, batch,
                               g.cout, g.ho * g.wo, c->dt));
  return st_conv_bwd(c, &g, in, params, dout, din, 0, dparams, NULL);
}

const StLayerImpl st_impl_conv2d = {
  .type = "conv2d",
  .init = conv2d_init,
  .saved_bytes = st_layer_no_saved,
  .forward = conv2d_forward,
  .backward = conv2d_backward,
};

/* ---- pooling ------------------------------------------------------------ */

typedef struct {
  int nc, h, w, k, s, p;
} Pool;

static Pool
pool_of(const StLayer *l, int batch)
{
  const int64_t *d = l->in_shape.dims;
  return (Pool){batch * (int)d[0], (int)d[1], (int)d[2], (int)st_layer_attr(l, "kernel", 1),
                (int)st_layer_attr(l, "stride", 1), (int)st_layer_attr(l, "padding", 0)};
}

static size_t
maxpool_saved(const StLayer *l, int batch, StKDtype dt)
{
  return st_layer_elems(&l->out_shape, batch) * sizeof(int32_t); /* argmax */
}

static int
maxpool_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                const void *in, void *out, void *saved)
{
  Pool q = pool_of(l, batch);
  return c->k->maxpool_fwd(c->stream, out, saved, in, q.nc, q.h, q.w, q.k, q.s, q.p, c->dt);
}

static int
maxpool_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                 const void *in, const void *out, const void *saved, const void *dout, void *din,
                 void *dparams)
{
  if (din == NULL)
    return 0;
  Pool q = pool_of(l, batch);
  return c->k->maxpool_bwd(c->stream, din, dout, saved, q.nc, q.h, q.w, q.k, q.s, q.p, c->dt);
}

const StLayerImpl st_impl_maxpool2d = {
  .type = "maxpool2d",
  .init = st_layer_no_init,
  .saved_bytes = maxpool_saved,
  .forward = maxpool_forward,
  .backward = maxpool_backward,
};

static int
avgpool_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                const void *in, void *out, void *saved)
{
  Pool q = pool_of(l, batch);
  return c->k->avgpool_fwd(c->stream, out, in, q.nc, q.h, q.w, q.k, q.s, q.p, c->dt);
}

static int
avgpool_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                 const void *in, const void *out, const void *saved, const void *dout, void *din,
                 void *dparams)
{
  if (din == NULL)
    return 0;
  Pool q = pool_of(l, batch);
  return c->k->avgpool_bwd(c->stream, din, dout, q.nc, q.h, q.w, q.k, q.s, q.p, c->dt);
}

const StLayerImpl st_impl_avgpool2d = {
  .type = "avgpool2d",
  .init = st_layer_no_init,
  .saved_bytes = st_layer_no_saved,
  .forward = avgpool_forward,
  .backward = avgpool_backward,
};

static int
adaptive_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                 const void *in, void *out, void *saved)
{
  const int64_t *d = l->in_shape.dims;
  int o = (int)st_layer_attr(l, "output_size", 1);
  return c->k->adaptive_avgpool_fwd(c->stream, out, in, batch * (int)d[0], (int)d[1], (int)d[2],
                                    o, o, c->dt);
}

static int
adaptive_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                  const void *in, const void *out, const void *saved, const void *dout,
                  void *din, void *dparams)
{
  if (din == NULL)
    return 0;
  const int64_t *d = l->in_shape.dims;
  int o = (int)st_layer_attr(l, "output_size", 1);
  return c->k->adaptive_avgpool_bwd(c->stream, din, dout, batch * (int)d[0], (int)d[1],
                                    (int)d[2], o, o, c->dt);
}

const StLayerImpl st_impl_adaptive_avgpool2d = {
  .type = "adaptive_avgpool2d",
  .init = st_layer_no_init,
  .saved_bytes = st_layer_no_saved,
  .forward = adaptive_forward,
  .backward = adaptive_backward,
};

/* ---- reshapes ----------------------------------------------------------- */

static int
flatten_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                const void *in, void *out, void *saved)
{
  return st_copy_through(c, out, in, st_layer_elems(&l->in_shape, batch));
}

static int
flatten_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                 const void *in, const void *out, const void *saved, const void *dout, void *din,
                 void *dparams)
{
  if (din == NULL)
    return 0;
  return st_copy_through(c, din, dout, st_layer_elems(&l->in_shape, batch));
}

const StLayerImpl st_impl_flatten = {
  .type = "flatten",
  .init = st_layer_no_init,
  .saved_bytes = st_layer_no_saved,
  .forward = flatten_forward,
  .backward = flatten_backward,
};

/* [batch, C, HW] -> [batch, HW, C]: a transpose per sample (in PyTorch a
 * strided view; here tensors are contiguous, so out and in must differ). */
static int
to_tokens_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                  const void *in, void *out, void *saved)
{
  const int64_t *d = l->in_shape.dims;
  int dims[4] = {batch, (int)d[0], (int)(d[1] * d[2]), 1}, perm[4] = {0, 2, 1, 3};
  return c->k->permute4(c->stream, out, in, dims, perm, c->dt);
}

static int
to_tokens_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                   const void *in, const void *out, const void *saved, const void *dout,
                   void *din, void *dparams)
{
  if (din == NULL)
    return 0;
  const int64_t *d = l->in_shape.dims;
  int dims[4] = {batch, (int)(d[1] * d[2]), (int)d[0], 1}, perm[4] = {0, 2, 1, 3};
  return c->k->permute4(c->stream, din, dout, dims, perm, c->dt);
}

const StLayerImpl st_impl_to_tokens = {
  .type = "to_tokens",
  .init = st_layer_no_init,
  .saved_bytes = st_layer_no_saved,
  .forward = to_tokens_forward,
  .backward = to_tokens_backward,
};
