/* layer_dense.c: layers with a weight matrix or a lookup table: linear,
 * embedding, position_embedding, class_token, lm_head.
 *
 * Inputs are [features] or [tokens, features]: the last dim is the feature
 * dim and every leading dim counts as tokens. A linear map of `in` to `out`
 * features costs 2 * in * out FLOPs per token forward and twice that
 * backward (input gradient plus weight gradient); bias adds are not counted.
 * None keeps anything but its input, nor takes scratch.
 */
#include <string.h>

#include "model/layer_types_private.h"

/* Features (last dim) and tokens (product of the others) of the input. */
static void
split_tokens(const StLayer *layer, int64_t *tokens, int64_t *features)
{
  const StShape *in = &layer->in_shape;
  *features = in->dims[in->n_dims - 1];
  *tokens = st_shape_elems(in) / *features;
}

/* Fails before int64 arithmetic could overflow on a map of `in` to `out`. */
static gboolean
check_dense(int64_t tokens, int64_t in, int64_t out, GError **error)
{
  return st_layer_check_size((double)tokens * (double)out, ST_MAX_ELEMS, "the output elements",
                             error) &&
         st_layer_check_size((double)in * (double)out, ST_MAX_COUNT, "the weights", error);
}

/* Forward, backward and kept bytes of a dense map applied to the input. */
static void
dense_costs(StLayer *layer, int64_t in, int64_t out, int64_t tokens)
{
  layer->fwd_flops = 2.0 * (double)in * (double)out * (double)tokens;
  layer->bwd_flops = 2.0 * layer->fwd_flops;
  layer->act_bytes = layer->in_bytes; /* the input, for the weight gradient */
}

static void
replace_last_dim(StLayer *layer, int64_t features, int dtype_bytes)
{
  layer->out_shape = layer->in_shape;
  layer->out_shape.dims[layer->out_shape.n_dims - 1] = features;
  layer->out_bytes = st_shape_elems(&layer->out_shape) * dtype_bytes;
}

/* ---- linear ------------------------------------------------------------ */

static const StAttrSpec LINEAR_ATTRS[] = {
  {.key = "out_features", .min = 1, .required = TRUE, .help = "output features"},
  {.key = "bias", .fallback = 1, .flag = TRUE, .help = "add a learned bias"},
  {NULL},
};

static gboolean
linear_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  int64_t tokens, in;
  split_tokens(layer, &tokens, &in);
  int64_t out = st_layer_attr(layer, "out_features", 0);
  if (!check_dense(tokens, in, out, error))
    return FALSE;
  replace_last_dim(layer, out, dtype_bytes);
  layer->params = in * out + st_layer_attr(layer, "bias", 1) * out;
  layer->param_tensors = 1 + (int32_t)st_layer_attr(layer, "bias", 1);
  dense_costs(layer, in, out, tokens);
  return TRUE;
}

const StLayerType st_layer_linear = {
  .name = "linear",
  .summary = "fully connected layer y = x W^T + b over the last dim",
  .attrs = LINEAR_ATTRS,
  .derive = linear_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = st_layer_no_memory,
};

/* ---- embedding --------------------------------------------------------- */

static const StAttrSpec EMBEDDING_ATTRS[] = {
  {.key = "vocab", .min = 1, .required = TRUE, .help = "rows of the table (vocabulary size)"},
  {.key = "dim", .min = 1, .required = TRUE, .help = "width of each row (output features)"},
  {NULL},
};

/* A gather: no forward FLOPs; backward scatter-adds one gradient row per
 * token. Keeps the token ids (counted at the model's element size). */
static gboolean
embedding_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 1, "[tokens]", error))
    return FALSE;
  int64_t tokens = layer->in_shape.dims[0];
  int64_t dim = st_layer_attr(layer, "dim", 0), vocab = st_layer_attr(layer, "vocab", 0);
  int64_t t = MAX(layer->tp, 1);
  if (!check_dense(tokens, vocab, dim, error) ||
      !st_layer_check_tp(layer, "vocab", vocab, error))
    return FALSE;
  /* Sequence parallel: the sum over the ranks' rows is reduce-scattered
   * to each rank's tokens. */
  if (layer->sp && tokens % t != 0) {
    g_set_error(error, ST_MODEL_ERROR, ST_ERROR_INVALID,
                "sequence parallelism: the %" G_GINT64_FORMAT
                " tokens do not divide over %" G_GINT64_FORMAT " ranks",
                tokens, t);
    return FALSE;
  }
  int64_t rows = layer->sp ? tokens / t : tokens;
  layer->out_shape = (StShape){.n_dims = 2, .dims = {rows, dim}};
  layer->out_bytes = rows * dim * dtype_bytes;
  layer->params = vocab / t * dim;
  layer->fwd_flops = 0;
  layer->bwd_flops = (double)tokens * (double)dim;
  layer->act_bytes = layer->in_bytes;
  return TRUE;
}

const StLayerType st_layer_embedding = {
  .name = "embedding",
  .summary = "token embedding table: [tokens] ids -> [tokens, dim]",
  .attrs = EMBEDDING_ATTRS,
  .derive = embedding_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = st_layer_no_memory,
  .takes_ids = TRUE,
  .tp = ST_TP_VOCAB_IN,
};

/* ---- position_embedding ------------------------------------------------ */

static const StAttrSpec POSITION_ATTRS[] = {
  {.key = "positions", .min = 0, .help = "rows of the table; 0 = the input's tokens"},
  {NULL},
};

/* Adds a learned row per position: one add per element each way. */
static gboolean
position_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 2, "[tokens, dim]", error))
    return FALSE;
  int64_t tokens = layer->in_shape.dims[0], dim = layer->in_shape.dims[1];
  int64_t positions = st_layer_attr(layer, "positions", 0);
  if (positions == 0)
    st_layer_set_attr(layer, "positions", positions = tokens);
  if (positions < tokens)
    return st_layer_attr_error(error, "positions",
                               "%" G_GINT64_FORMAT " is fewer than the %" G_GINT64_FORMAT
                               " input tokens", positions, tokens);
  if (!st_layer_check_size((double)positions * (double)dim, ST_MAX_COUNT, "the table", error))
    return FALSE;
  st_layer_same_shape(layer, dtype_bytes);
  layer->params = positions * dim;
  layer->fwd_flops = (double)tokens * (double)dim;
  layer->bwd_flops = layer->fwd_flops;
  layer->act_bytes = 0;
  return TRUE;
}

const StLayerType st_layer_position_embedding = {
  .name = "position_embedding",
  .summary = "learned position embedding added to [tokens, dim]",
  .attrs = POSITION_ATTRS,
  .derive = position_derive,
  .keeps = 0,
  .memory = st_layer_no_memory,
};

/* ---- class_token ------------------------------------------------------- */

static const StAttrSpec NO_ATTRS[] = {{NULL}};

/* A concatenation: no FLOPs, nothing kept. */
static gboolean
class_token_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 2, "[tokens, dim]", error))
    return FALSE;
  int64_t dim = layer->in_shape.dims[1];
  layer->out_shape = (StShape){.n_dims = 2, .dims = {layer->in_shape.dims[0] + 1, dim}};
  layer->out_bytes = st_shape_elems(&layer->out_shape) * dtype_bytes;
  layer->params = dim;
  layer->fwd_flops = layer->bwd_flops = 0;
  layer->act_bytes = 0;
  return TRUE;
}

const StLayerType st_layer_class_token = {
  .name = "class_token",
  .summary = "prepends a learned token (ViT's [class]): [tokens, dim] -> [tokens+1, dim]",
  .attrs = NO_ATTRS,
  .derive = class_token_derive,
  .keeps = 0,
  .memory = st_layer_no_memory,
};

/* ---- lm_head ----------------------------------------------------------- */

static const StAttrSpec LM_HEAD_ATTRS[] = {
  {.key = "vocab", .min = 1, .required = TRUE, .help = "output logits per token"},
  {.key = "tied", .fallback = 0, .flag = TRUE,
   .help = "weight shared with the token embedding (no parameters of its own)"},
  {.key = "bias", .fallback = 0, .flag = TRUE, .help = "add a learned bias"},
  {NULL},
};

/* A linear map to the vocabulary. Tied, it owns no weight, but still
 * computes the weight gradient (added into the embedding's). */
static gboolean
lm_head_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  int64_t tokens, in;
  split_tokens(layer, &tokens, &in);
  int64_t vocab = st_layer_attr(layer, "vocab", 0);
  if (!check_dense(tokens, in, vocab, error) || !st_layer_check_tp(layer, "vocab", vocab, error))
    return FALSE;
  /* Tensor parallel: this rank's vocab / t logits, for every token (under
   * sequence parallelism it gathers the ranks' tokens first). */
  int64_t t = MAX(layer->tp, 1), v = vocab / t;
  replace_last_dim(layer, v, dtype_bytes);
  if (layer->sp) {
    layer->out_shape.dims[0] *= t;
    layer->out_bytes *= t;
  }
  layer->params = (st_layer_attr(layer, "tied", 0) ? 0 : in * v) +
                  st_layer_attr(layer, "bias", 0) * v;
  dense_costs(layer, in, v, layer->sp ? tokens * t : tokens);
  layer->act_bytes = layer->in_bytes;
  return TRUE;
}

const StLayerType st_layer_lm_head = {
  .name = "lm_head",
  .summary = "language-model head: [tokens, dim] -> [tokens, vocab] logits",
  .attrs = LM_HEAD_ATTRS,
  .derive = lm_head_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = st_layer_no_memory,
  .tp = ST_TP_VOCAB_OUT,
};
