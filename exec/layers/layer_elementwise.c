/* layer_elementwise.c: layers without weights that act per element or pick
 * elements (model types in sim/model/layer_elementwise.c): relu (its backward
 * reads the kept output), gelu (the kept input), dropout (a one-byte mask per
 * element in `saved`, p = ST_LAYER_DROPOUT_P, seeded by ctx->seed) and
 * select_token ([batch, tokens, dim] -> [batch, dim], token `index`). */
#include "exec/layers/layers_private.h"

static int
relu_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
             const void *in, void *out, void *saved)
{
  return c->k->relu_fwd(c->stream, out, in, c->dt, st_layer_elems(&l->in_shape, batch));
}

static int
relu_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
              const void *in, const void *out, const void *saved, const void *dout, void *din,
              void *dparams)
{
  if (din == NULL)
    return 0;
  return c->k->relu_bwd(c->stream, din, dout, out, c->dt, st_layer_elems(&l->in_shape, batch));
}

const StLayerImpl st_impl_relu = {
  .type = "relu",
  .init = st_layer_no_init,
  .saved_bytes = st_layer_no_saved,
  .forward = relu_forward,
  .backward = relu_backward,
};

static int
gelu_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
             const void *in, void *out, void *saved)
{
  return c->k->gelu_fwd(c->stream, out, in, c->dt, st_layer_elems(&l->in_shape, batch));
}

static int
gelu_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
              const void *in, const void *out, const void *saved, const void *dout, void *din,
              void *dparams)
{
  if (din == NULL)
    return 0;
  return c->k->gelu_bwd(c->stream, din, dout, in, c->dt, st_layer_elems(&l->in_shape, batch));
}

const StLayerImpl st_impl_gelu = {
  .type = "gelu",
  .init = st_layer_no_init,
  .saved_bytes = st_layer_no_saved,
  .forward = gelu_forward,
  .backward = gelu_backward,
};

static size_t
dropout_saved(const StLayer *l, int batch, StKDtype dt)
{
  return st_layer_elems(&l->in_shape, batch); /* the mask, one byte per element */
}

static int
dropout_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                const void *in, void *out, void *saved)
{
  return c->k->dropout_fwd(c->stream, out, saved, in, ST_LAYER_DROPOUT_P, c->seed, c->dt,
                           st_layer_elems(&l->in_shape, batch));
}

static int
dropout_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                 const void *in, const void *out, const void *saved, const void *dout, void *din,
                 void *dparams)
{
  if (din == NULL)
    return 0;
  return c->k->dropout_bwd(c->stream, din, dout, saved, ST_LAYER_DROPOUT_P, c->dt,
                           st_layer_elems(&l->in_shape, batch));
}

const StLayerImpl st_impl_dropout = {
  .type = "dropout",
  .init = st_layer_no_init,
  .saved_bytes = dropout_saved,
  .forward = dropout_forward,
  .backward = dropout_backward,
};

static int
select_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
               const void *in, void *out, void *saved)
{
  size_t tokens = (size_t)l->in_shape.dims[0], dim = (size_t)l->in_shape.dims[1];
  size_t index = (size_t)st_layer_attr(l, "index", 0);
  for (int b = 0; b < batch; b++)
    ST_TRY(c->k->copy(c->stream, st_at(out, c->dt, (size_t)b * dim),
                      st_at(in, c->dt, ((size_t)b * tokens + index) * dim),
                      dim * st_kdt_size(c->dt), 0));
  return 0;
}

static int
select_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                const void *in, const void *out, const void *saved, const void *dout, void *din,
                void *dparams)
{
  if (din == NULL)
    return 0;
  size_t tokens = (size_t)l->in_shape.dims[0], dim = (size_t)l->in_shape.dims[1];
  size_t index = (size_t)st_layer_attr(l, "index", 0);
  ST_TRY(c->k->memset0(c->stream, din, (size_t)batch * tokens * dim * st_kdt_size(c->dt)));
  for (int b = 0; b < batch; b++)
    ST_TRY(c->k->copy(c->stream, st_at(din, c->dt, ((size_t)b * tokens + index) * dim),
                      st_at(dout, c->dt, (size_t)b * dim), dim * st_kdt_size(c->dt), 0));
  return 0;
}

const StLayerImpl st_impl_select_token = {
  .type = "select_token",
  .init = st_layer_no_init,
  .saved_bytes = st_layer_no_saved,
  .forward = select_forward,
  .backward = select_backward,
};
