/* layer_elementwise.c: layers without weights that act per element or pick
 * elements: relu, gelu, dropout, select_token, concat, and the loss.
 *
 * FLOPs per element are stated beside each type; backward costs as much as
 * forward (no weight gradient). What each keeps follows PyTorch autograd.
 */
#include "model/layer_types_private.h"

static const StAttrSpec NO_ATTRS[] = {{NULL}};

static void
pointwise_costs(StLayer *layer, int dtype_bytes, double flops_per_elem)
{
  st_layer_same_shape(layer, dtype_bytes);
  layer->params = 0;
  layer->fwd_flops = flops_per_elem * (double)st_shape_elems(&layer->in_shape);
  layer->bwd_flops = layer->fwd_flops;
}

/* One comparison per element; keeps its output (the mask of what passed). */
static gboolean
relu_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  pointwise_costs(layer, dtype_bytes, 1.0);
  layer->act_bytes = layer->out_bytes;
  return TRUE;
}

const StLayerType st_layer_relu = {
  .name = "relu",
  .summary = "max(x, 0), element-wise",
  .attrs = NO_ATTRS,
  .derive = relu_derive,
  .keeps = ST_KEEPS_OUTPUT,
  .memory = st_layer_no_memory,
};

/* The tanh form, about 8 FLOPs per element; keeps its input. */
static gboolean
gelu_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  pointwise_costs(layer, dtype_bytes, 8.0);
  layer->act_bytes = layer->in_bytes;
  return TRUE;
}

const StLayerType st_layer_gelu = {
  .name = "gelu",
  .summary = "Gaussian error linear unit, element-wise",
  .attrs = NO_ATTRS,
  .derive = gelu_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = st_layer_no_memory,
};

/* Branches joined on the channel axis (Inception's modules): the loader
 * gives it its inputs concatenated (model_inputs.h); a copy, no FLOPs,
 * nothing kept. */
static gboolean
concat_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  st_layer_same_shape(layer, dtype_bytes);
  layer->params = 0;
  layer->fwd_flops = layer->bwd_flops = 0;
  layer->act_bytes = 0;
  return TRUE;
}

const StLayerType st_layer_concat = {
  .name = "concat",
  .summary = "its inputs (`inputs`) concatenated on the first axis",
  .attrs = NO_ATTRS,
  .derive = concat_derive,
  .keeps = 0,
  .memory = st_layer_no_memory,
};

/* Mask multiply and rescale, 2 FLOPs per element; keeps a one-byte mask per
 * element whatever the dtype (PyTorch's bool mask). The drop probability
 * changes no cost, so it is not an attribute. */
static gboolean
dropout_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  pointwise_costs(layer, dtype_bytes, 2.0);
  layer->act_bytes = st_shape_elems(&layer->in_shape);
  return TRUE;
}

/* The mask, one byte per element. */
static void
dropout_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  out->saved = st_shape_elems(&layer->in_shape) * batch;
}

const StLayerType st_layer_dropout = {
  .name = "dropout",
  .summary = "random zeroing during training (keeps a 1-byte mask per element)",
  .attrs = NO_ATTRS,
  .derive = dropout_derive,
  .keeps = 0,
  .memory = dropout_memory,
};

static const StAttrSpec SELECT_ATTRS[] = {
  {.key = "index", .fallback = 0, .min = 0, .help = "which token to keep"},
  {NULL},
};

/* x[index]: a view, no FLOPs. */
static gboolean
select_token_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 2, "[tokens, dim]", error))
    return FALSE;
  int64_t index = st_layer_attr(layer, "index", 0);
  if (index >= layer->in_shape.dims[0])
    return st_layer_attr_error(error, "index",
                               "%" G_GINT64_FORMAT " is past the %" G_GINT64_FORMAT " tokens",
                               index, layer->in_shape.dims[0]);
  layer->out_shape = (StShape){.n_dims = 1, .dims = {layer->in_shape.dims[1]}};
  layer->out_bytes = layer->in_shape.dims[1] * dtype_bytes;
  layer->params = 0;
  layer->fwd_flops = layer->bwd_flops = 0;
  layer->act_bytes = 0;
  return TRUE;
}

const StLayerType st_layer_select_token = {
  .name = "select_token",
  .summary = "keeps one token (ViT's class token): [tokens, dim] -> [dim]",
  .attrs = SELECT_ATTRS,
  .derive = select_token_derive,
  .keeps = ST_OUTPUT_IS_VIEW,
  .memory = st_layer_no_memory,
};

/* Log-softmax then negative log-likelihood over the last dim, averaged over
 * the tokens into one number per sample. About 5 FLOPs per logit (max,
 * subtract, exp, sum, log); keeps the log-probabilities, a new tensor the
 * size of its input. */
static gboolean
softmax_ce_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  layer->out_shape = (StShape){.n_dims = 1, .dims = {1}};
  layer->out_bytes = dtype_bytes;
  layer->params = 0;
  layer->fwd_flops = 5.0 * (double)st_shape_elems(&layer->in_shape);
  layer->bwd_flops = layer->fwd_flops;
  layer->act_bytes = layer->in_bytes;
  return TRUE;
}

/* The probabilities are saved in fp32 whatever the dtype (a bf16 softmax
 * loses the small ones the gradient needs), and the targets are one int32
 * class per position: per token of a sequence, else one per sample. Over
 * logits split by classes (tp > 1: exec/layers/layer_loss.c), exp(x - the
 * local max) in their place and four fp32 statistics per row, each tensor
 * aligned. */
static void
softmax_ce_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  const StShape *in = &layer->in_shape;
  int64_t positions = in->n_dims >= 2 ? in->dims[0] : 1;
  int64_t rows = st_shape_elems(in) / in->dims[in->n_dims - 1] * batch;
  out->saved = layer->tp > 1
                 ? st_layer_aligned(st_shape_elems(in) * (int64_t)sizeof(float) * batch) +
                     st_layer_aligned(4 * rows * (int64_t)sizeof(float))
                 : st_shape_elems(in) * (int64_t)sizeof(float) * batch;
  out->targets = positions * (int64_t)sizeof(int32_t) * batch;
}

const StLayerType st_layer_softmax_cross_entropy = {
  .name = "softmax_cross_entropy",
  .summary = "loss: softmax cross-entropy over the last dim -> [1]",
  .attrs = NO_ATTRS,
  .derive = softmax_ce_derive,
  .keeps = 0,
  .memory = softmax_ce_memory,
  .tp = ST_TP_VOCAB_LOSS,
};
