/* layer_norm.c: normalizations: batchnorm2d (per channel over H, W and the
 * batch) and layernorm (per token over the last dim).
 *
 * Both cost ST_NORM_FWD_FLOPS_PER_ELEM forward and, with learned scale and
 * shift, twice that backward. Both keep their input (the per-channel or
 * per-token mean and 1/std they also save are a rounding error and not
 * counted in act_bytes; memory() counts them: two fp32 vectors, as the
 * executor saves them). BatchNorm's running mean and variance are buffers,
 * not parameters: 2*C parameters.
 */
#include "model/layer_types_private.h"

static const StAttrSpec NORM_ATTRS[] = {
  {.key = "affine", .fallback = 1, .flag = TRUE, .help = "learned scale and shift"},
  {NULL},
};

static void
norm_costs(StLayer *layer, int64_t features, int dtype_bytes)
{
  st_layer_same_shape(layer, dtype_bytes);
  gboolean affine = st_layer_attr(layer, "affine", 1) != 0;
  double elems = (double)st_shape_elems(&layer->in_shape);
  layer->params = affine ? 2 * features : 0;
  layer->param_tensors = affine ? 2 : 0; /* weight, bias */
  layer->fwd_flops = ST_NORM_FWD_FLOPS_PER_ELEM * elems;
  layer->bwd_flops = 2.0 * layer->fwd_flops;
  layer->act_bytes = layer->in_bytes;
}

/* The fp32 mean and 1/std over `groups` (channels or rows), each a tensor
 * of the saved block. */
static int64_t
stats_bytes(int64_t groups)
{
  return 2 * st_layer_aligned(groups * (int64_t)sizeof(float));
}

static void
batchnorm2d_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  out->saved = stats_bytes(layer->in_shape.dims[0]);
}

static gboolean
batchnorm2d_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 3, "[C,H,W]", error))
    return FALSE;
  norm_costs(layer, layer->in_shape.dims[0], dtype_bytes);
  return TRUE;
}

const StLayerType st_layer_batchnorm2d = {
  .name = "batchnorm2d",
  .summary = "batch normalization per channel of [C,H,W]",
  .attrs = NORM_ATTRS,
  .derive = batchnorm2d_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = batchnorm2d_memory,
};

/* Statistics per token: every leading dim and the batch are rows. */
static void
layernorm_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  const StShape *in = &layer->in_shape;
  out->saved = stats_bytes(st_shape_elems(in) / in->dims[in->n_dims - 1] * batch);
}

static gboolean
layernorm_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  norm_costs(layer, layer->in_shape.dims[layer->in_shape.n_dims - 1], dtype_bytes);
  return TRUE;
}

const StLayerType st_layer_layernorm = {
  .name = "layernorm",
  .summary = "layer normalization over the last dim",
  .attrs = NORM_ATTRS,
  .derive = layernorm_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = layernorm_memory,
};
