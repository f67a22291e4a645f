/* layer_norm.c: batchnorm2d (training mode: batch statistics per channel)
 * and layernorm (per token over the last dim); model types in
 * sim/model/layer_norm.c. Parameter layout when affine (else none):
 *
 *   batchnorm2d  weight [C], bias [C]
 *   layernorm    weight [dim], bias [dim]
 *
 * Init 1 and 0 (PyTorch's). Both keep their input (the model says so) and
 * save their fp32 mean and 1/std in `saved`: [C] each for batch norm, [rows]
 * each for layer norm. BatchNorm's running statistics are not kept: the
 * executor only trains.
 */
#include "exec/layers/layers_private.h"

static void
norm_init(const StLayer *l, float *params, uint64_t seed)
{
  if (l->params == 0)
    return;
  st_init_fill(params, (size_t)l->params / 2, 1.0f);
  st_init_fill(params + l->params / 2, (size_t)l->params / 2, 0.0f);
}

/* Statistics over `groups` (channels or rows): mean [groups], rstd [groups]. */
static void
norm_stats(void *saved, int groups, float **mean, float **rstd)
{
  StCarve cv = {saved, 0};
  *mean = st_carve(&cv, (size_t)groups * sizeof(float));
  *rstd = st_carve(&cv, (size_t)groups * sizeof(float));
}

static size_t
norm_saved(int groups)
{
  StCarve cv = {NULL, 0};
  st_carve(&cv, (size_t)groups * sizeof(float));
  st_carve(&cv, (size_t)groups * sizeof(float));
  return cv.offset;
}

/* gamma, beta (NULL without affine) of a norm over `features`. */
static void
affine(const StLayerCtx *c, const StLayer *l, const void *params, int features, const void **g,
       const void **b)
{
  *g = l->params > 0 ? params : NULL;
  *b = l->params > 0 ? st_at(params, c->dt, (size_t)features) : NULL;
}

/* ---- batchnorm2d on [batch, C, H, W] -------------------------------------- */

static size_t
batchnorm_saved(const StLayer *l, int batch, StKDtype dt)
{
  return norm_saved((int)l->in_shape.dims[0]);
}

static int
batchnorm_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                  const void *in, void *out, void *saved)
{
  int ch = (int)l->in_shape.dims[0], hw = (int)(l->in_shape.dims[1] * l->in_shape.dims[2]);
  float *mean, *rstd;
  const void *g, *b;
  norm_stats(saved, ch, &mean, &rstd);
  affine(c, l, params, ch, &g, &b);
  return c->k->batchnorm_fwd(c->stream, out, mean, rstd, in, g, b, batch, ch, hw, c->dt);
}

static int
batchnorm_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                   const void *in, const void *out, const void *saved, const void *dout,
                   void *din, void *dparams)
{
  int ch = (int)l->in_shape.dims[0], hw = (int)(l->in_shape.dims[1] * l->in_shape.dims[2]);
  float *mean, *rstd;
  const void *g, *b;
  norm_stats((void *)saved, ch, &mean, &rstd);
  affine(c, l, params, ch, &g, &b);
  void *dg = g != NULL ? dparams : NULL, *db = g != NULL ? st_at(dparams, c->dt, ch) : NULL;
  return c->k->batchnorm_bwd(c->stream, din, dg, db, dout, in, mean, rstd, g, batch, ch, hw,
                             c->dt);
}

const StLayerImpl st_impl_batchnorm2d = {
  .type = "batchnorm2d",
  .init = norm_init,
  .saved_bytes = batchnorm_saved,
  .forward = batchnorm_forward,
  .backward = batchnorm_backward,
};

/* ---- layernorm over the last dim ------------------------------------------ */

static size_t
layernorm_saved(const StLayer *l, int batch, StKDtype dt)
{
  return norm_saved(st_layer_rows(&l->in_shape, batch));
}

static int
layernorm_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                  const void *in, void *out, void *saved)
{
  int rows = st_layer_rows(&l->in_shape, batch), cols = st_layer_last_dim(&l->in_shape);
  float *mean, *rstd;
  const void *g, *b;
  norm_stats(saved, rows, &mean, &rstd);
  affine(c, l, params, cols, &g, &b);
  return c->k->layernorm_fwd(c->stream, out, mean, rstd, in, g, b, rows, cols, c->dt);
}

static int
layernorm_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                   const void *in, const void *out, const void *saved, const void *dout,
                   void *din, void *dparams)
{
  int rows = st_layer_rows(&l->in_shape, batch), cols = st_layer_last_dim(&l->in_shape);
  float *mean, *rstd;
  const void *g, *b;
  norm_stats((void *)saved, rows, &mean, &rstd);
  affine(c, l, params, cols, &g, &b);
  void *dg = g != NULL ? dparams : NULL, *db = g != NULL ? st_at(dparams, c->dt, cols) : NULL;
  return c->k->layernorm_bwd(c->stream, din, dg, db, dout, in, mean, rstd, g, rows, cols, c->dt);
}

const StLayerImpl st_impl_layernorm = {
  .type = "layernorm",
  .init = norm_init,
  .saved_bytes = layernorm_saved,
  .forward = layernorm_forward,
  .backward = layernorm_backward,
};
