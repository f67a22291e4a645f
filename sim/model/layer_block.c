/* layer_block.c: composite blocks that models repeat: the residual blocks of
 * torchvision's ResNets (basic_block, bottleneck) and the pre-LN transformer
 * block (attention + MLP).
 *
 * A block costs the sum of its parts. Its act_bytes counts each tensor that
 * autograd keeps once, even when two of its parts keep it (an in-place ReLU's
 * output is also the next convolution's input).
 */
#include "model/layer_types_private.h"

/* ---- residual blocks (He et al. 2016, as torchvision builds them) ------- */

/* Accumulates the parts of a residual block on [C,H,W] maps. */
typedef struct {
  int64_t params;
  int32_t tensors;    /* parameter tensors: a conv's weight, its norm's weight and bias */
  double fwd_flops;
  int64_t kept_elems; /* saved for backward, besides the block's input */
} Residual;

/* conv (no bias) then batchnorm: the conv output is kept as the norm's input. */
static gboolean
conv_bn(Residual *r, StChw in, int64_t out_channels, int64_t kernel, int64_t stride,
        int64_t groups, StChw *out, GError **error)
{
  int64_t weights;
  double flops;
  if (!st_conv_apply(in, out_channels, kernel, stride, kernel / 2, groups, out, &weights,
                     &flops, error))
    return FALSE;
  r->params += weights + 2 * out_channels;
  r->tensors += 3;
  r->fwd_flops += flops + ST_NORM_FWD_FLOPS_PER_ELEM * (double)st_chw_elems(*out);
  r->kept_elems += st_chw_elems(*out);
  return TRUE;
}

/* In-place ReLU: one FLOP per element, keeps its output. */
static void
relu(Residual *r, StChw x)
{
  r->fwd_flops += (double)st_chw_elems(x);
  r->kept_elems += st_chw_elems(x);
}

/* The shortcut (a 1x1 conv + batchnorm when the shape changes), the residual
 * add and the final ReLU, then the layer's numbers. */
static gboolean
residual_finish(StLayer *layer, Residual *r, StChw in, StChw out, int64_t stride,
                int dtype_bytes, GError **error)
{
  if (stride != 1 || in.c != out.c) {
    StChw shortcut;
    if (!conv_bn(r, in, out.c, 1, stride, 1, &shortcut, error))
      return FALSE;
  }
  r->fwd_flops += (double)st_chw_elems(out); /* the add */
  relu(r, out);
  layer->out_shape = (StShape){.n_dims = 3, .dims = {out.c, out.h, out.w}};
  layer->out_bytes = st_chw_elems(out) * dtype_bytes;
  layer->params = r->params;
  layer->param_tensors = r->tensors;
  layer->fwd_flops = r->fwd_flops;
  layer->bwd_flops = 2.0 * r->fwd_flops;
  layer->act_bytes = layer->in_bytes + r->kept_elems * dtype_bytes;
  return TRUE;
}

static StChw
input_chw(const StLayer *layer)
{
  const int64_t *d = layer->in_shape.dims;
  return (StChw){d[0], d[1], d[2]};
}

static const StAttrSpec BASIC_ATTRS[] = {
  {.key = "planes", .min = 1, .required = TRUE, .help = "output channels"},
  {.key = "stride", .fallback = 1, .min = 1, .help = "stride of the first 3x3 conv and shortcut"},
  {NULL},
};

/* conv3x3(stride)-bn-relu, conv3x3-bn, + shortcut, relu (ResNet-18/34). */
static gboolean
basic_block_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 3, "[C,H,W]", error))
    return FALSE;
  int64_t planes = st_layer_attr(layer, "planes", 0);
  int64_t stride = st_layer_attr(layer, "stride", 1);
  Residual r = {0};
  StChw in = input_chw(layer), mid, out;
  if (!conv_bn(&r, in, planes, 3, stride, 1, &mid, error))
    return FALSE;
  relu(&r, mid);
  if (!conv_bn(&r, mid, planes, 3, 1, 1, &out, error))
    return FALSE;
  return residual_finish(layer, &r, in, out, stride, dtype_bytes, error);
}

/* memory(): the executor's block (exec/layers/layer_residual.c) runs its
 * conv-bn units one after another. Each unit saves its conv output (the
 * norm's input), the norm's fp32 mean and 1/std, and its ReLU output when it
 * has one (the next conv's input); the downsample is a unit of its own. The
 * forward takes one block of conv columns, as large as the largest unit's,
 * and the shortcut's output; the backward two maps of the largest unit output
 * (the gradient going down the path, a conv output's) and the columns. */
typedef struct {
  StChw in, out;
  int64_t kernel, stride;
  gboolean relu;
} Unit;

/* The units of a residual block in the executor's order: the main path,
 * then the downsample when the shape changes (*down). Returns how many. */
static int
residual_units(const StLayer *layer, Unit *u, gboolean *down)
{
  StChw in = input_chw(layer);
  int64_t planes = st_layer_attr(layer, "planes", 1), stride = st_layer_attr(layer, "stride", 1);
  const int64_t *o = layer->out_shape.dims;
  StChw out = {o[0], o[1], o[2]};
  int n = 0;
  if (layer->type == &st_layer_bottleneck) {
    int64_t width = planes * st_layer_attr(layer, "width_per_group", 64) / 64 *
                    st_layer_attr(layer, "groups", 1);
    StChw a = {width, in.h, in.w}, b = {width, out.h, out.w};
    u[n++] = (Unit){in, a, 1, 1, TRUE};
    u[n++] = (Unit){a, b, 3, stride, TRUE};
    u[n++] = (Unit){b, out, 1, 1, FALSE};
  } else {
    StChw mid = {planes, out.h, out.w};
    u[n++] = (Unit){in, mid, 3, stride, TRUE};
    u[n++] = (Unit){mid, out, 3, 1, FALSE};
  }
  *down = stride != 1 || in.c != out.c;
  if (*down)
    u[n++] = (Unit){in, out, 1, stride, FALSE};
  return n;
}

static void
residual_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  Unit u[4];
  gboolean down;
  int n = residual_units(layer, u, &down);
  int64_t cols = 0, most = 0, map = 0;
  for (int i = 0; i < n; i++) {
    map = st_chw_elems(u[i].out) * batch * dtype_bytes;
    out->saved += st_layer_aligned(map) * (u[i].relu ? 2 : 1) +
                  2 * st_layer_aligned(u[i].out.c * (int64_t)sizeof(float));
    cols = MAX(cols, st_conv_cols_bytes(u[i].in, u[i].kernel, u[i].stride, u[i].kernel / 2,
                                        u[i].out, batch, dtype_bytes));
    most = MAX(most, map);
  }
  /* map: the last unit's output, the block's own: the shortcut's size */
  out->fwd_scratch = st_layer_aligned(cols) + (down ? st_layer_aligned(map) : 0);
  out->bwd_scratch = 2 * st_layer_aligned(most) + st_layer_aligned(cols);
}

const StLayerType st_layer_basic_block = {
  .name = "basic_block",
  .summary = "ResNet basic block: two 3x3 convs with batchnorm and a shortcut",
  .attrs = BASIC_ATTRS,
  .derive = basic_block_derive,
  .keeps = ST_KEEPS_INPUT | ST_KEEPS_OUTPUT,
  .memory = residual_memory,
};

static const StAttrSpec BOTTLENECK_ATTRS[] = {
  {.key = "planes", .min = 1, .required = TRUE, .help = "base channels; output = 4 x planes"},
  {.key = "stride", .fallback = 1, .min = 1, .help = "stride of the 3x3 conv and shortcut"},
  {.key = "groups", .fallback = 1, .min = 1, .help = "groups of the 3x3 conv (ResNeXt)"},
  {.key = "width_per_group", .fallback = 64, .min = 1,
   .help = "3x3 width = planes * width_per_group / 64 * groups (128: Wide ResNet-2)"},
  {NULL},
};

/* conv1x1-bn-relu, conv3x3(stride, groups)-bn-relu, conv1x1-bn, + shortcut,
 * relu (ResNet-50/101/152, Wide ResNet, ResNeXt; stride on the 3x3 as in
 * torchvision's "ResNet v1.5"). */
static gboolean
bottleneck_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 3, "[C,H,W]", error))
    return FALSE;
  int64_t planes = st_layer_attr(layer, "planes", 0);
  int64_t stride = st_layer_attr(layer, "stride", 1);
  int64_t groups = st_layer_attr(layer, "groups", 1);
  int64_t width = planes * st_layer_attr(layer, "width_per_group", 64) / 64 * groups;
  if (width < 1)
    return st_layer_attr_error(error, "width_per_group", "gives a 3x3 width of 0 channels");
  Residual r = {0};
  StChw in = input_chw(layer), a, b, out;
  if (!conv_bn(&r, in, width, 1, 1, 1, &a, error))
    return FALSE;
  relu(&r, a);
  if (!conv_bn(&r, a, width, 3, stride, groups, &b, error))
    return FALSE;
  relu(&r, b);
  if (!conv_bn(&r, b, 4 * planes, 1, 1, 1, &out, error))
    return FALSE;
  return residual_finish(layer, &r, in, out, stride, dtype_bytes, error);
}

const StLayerType st_layer_bottleneck = {
  .name = "bottleneck",
  .summary = "ResNet bottleneck block: 1x1, 3x3, 1x1 convs with batchnorm and a shortcut",
  .attrs = BOTTLENECK_ATTRS,
  .derive = bottleneck_derive,
  .keeps = ST_KEEPS_INPUT | ST_KEEPS_OUTPUT,
  .memory = residual_memory,
};

/* ---- transformer block (pre-LN, as GPT-2 and ViT) ---------------------- */

static const StAttrSpec TRANSFORMER_ATTRS[] = {
  {.key = "heads", .min = 1, .required = TRUE, .help = "attention heads (must divide dim)"},
  {.key = "ffn", .fallback = 0, .min = 0, .help = "hidden width of the MLP; 0 = 4 x dim"},
  {.key = "causal", .fallback = 0, .flag = TRUE,
   .help = "mask future tokens (decoder); costs the same, see layer_block.c"},
  {.key = "dropout", .fallback = 0, .flag = TRUE,
   .help = "dropout on attention probabilities and both residual branches"},
  {NULL},
};

/* x + attn(LN1(x)), then + MLP(LN2(.)), on [s, d] with a heads, f = ffn:
 *
 * params = 4d^2 + 4d (QKV and output projections with biases)
 *        + 2df + f + d (MLP with biases) + 4d (two LayerNorms);
 *        with f = 4d: 12 d^2 + 13 d.
 * fwd    = matrix products only, as Narayanan et al. 2021 count them:
 *          QKV 6sd^2 + QK^T 2s^2d + AV 2s^2d + projection 2sd^2 + MLP 4sdf;
 *          with f = 4d: 24 s d^2 + 4 s^2 d. The element-wise work (norms,
 *          softmax, GELU) is memory-bound and left to the io estimate.
 *          A causal mask halves nothing: dense kernels compute all s^2
 *          scores and mask them, as the formula and non-fused attention do.
 * bwd    = 2 x fwd.
 * kept   = (Korthikanti et al. 2022, section 4.1), in elements at the dtype:
 *          LN1 input sd, QKV input sd, Q and K 2sd, softmax output a s^2,
 *          V sd, projection input sd, LN2 input sd, fc1 input sd, GELU input
 *          sf, fc2 input sf: 8sd + 2sf + a s^2. With dropout also its output
 *          on the probabilities a s^2, plus one-byte masks a s^2 + 2sd. At
 *          16 bits, f = 4d, with dropout: 34 sd + 5 a s^2 bytes, the paper's
 *          figure. */
/* Tensor parallel (layer_type.h), t ranks: heads / t and ffn / t per rank
 * (QKV and fc1 column-parallel, the projection and fc2 row-parallel, their
 * biases whole on every rank), norms whole; kept per Korthikanti et al.
 * (section 4.2): 10 s d + 24 s d / t + 5 a s^2 / t bytes at 16 bits with
 * dropout; with sequence parallelism the norms and dropouts' tensors are
 * the rank's s / t tokens too: (34 s d + 5 a s^2) / t. */
typedef struct {
  int64_t s, rows, d, a, f; /* a, f: the rank's heads and ffn; rows: its tokens */
  int64_t q;                /* the rank's share of d: a x d / heads */
  gboolean dropout;
} Xf;

static Xf
xf_of(const StLayer *layer)
{
  int64_t t = MAX(layer->tp, 1), rows = layer->in_shape.dims[0], d = layer->in_shape.dims[1];
  Xf x = {rows * (layer->sp ? t : 1), rows, d, st_layer_attr(layer, "heads", 1) / t,
          st_layer_attr(layer, "ffn", 0) / t, d / t, st_layer_attr(layer, "dropout", 0) != 0};
  return x;
}

static gboolean
transformer_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 2, "[tokens, dim]", error))
    return FALSE;
  if (layer->cp > 1) {
    g_set_error(error, ST_MODEL_ERROR, ST_ERROR_INVALID,
                "context parallelism runs flash attention (Transformer Engine's fused "
                "kernels); a transformer_block's attention is dense");
    return FALSE;
  }
  int64_t d = layer->in_shape.dims[1];
  int64_t a = st_layer_attr(layer, "heads", 1);
  int64_t f = st_layer_attr(layer, "ffn", 0);
  if (d % a != 0)
    return st_layer_attr_error(error, "heads",
                               "%" G_GINT64_FORMAT " does not divide the dim %" G_GINT64_FORMAT,
                               a, d);
  if (f == 0)
    st_layer_set_attr(layer, "ffn", f = 4 * d);
  if (!st_layer_check_tp(layer, "heads", a, error) ||
      !st_layer_check_tp(layer, "ffn", f, error))
    return FALSE;
  Xf x = xf_of(layer);
  double s = (double)x.s, sd = s * (double)d, ss = s * s;
  if (!st_layer_check_size(4.0 * (double)d * (double)d + 2.0 * (double)d * (double)f,
                           ST_MAX_COUNT, "the weights", error) ||
      !st_layer_check_size(8.0 * sd + 2.0 * s * (double)f + 2.0 * (double)a * ss,
                           ST_MAX_COUNT, "the kept elements", error))
    return FALSE;
  st_layer_same_shape(layer, dtype_bytes);
  layer->params = 4 * d * x.q + 3 * x.q + d + 2 * d * x.f + x.f + d + 4 * d;
  layer->param_tensors = 12; /* 2 norms, QKV, out, fc1, fc2: a weight and a bias each */
  layer->fwd_flops = 8.0 * sd * (double)x.q + 4.0 * ss * (double)x.q + 4.0 * sd * (double)x.f;
  layer->bwd_flops = 2.0 * layer->fwd_flops;
  /* per token, on the rank's rows: LN1 input and output, x1, LN2 input and
   * output (and two residual masks); at s: Q K V, the attention output, fc1
   * and GELU outputs, the probabilities (with dropout: twice, and a mask) */
  int64_t rows_d = x.rows * d, sq = x.s * x.q, probs = x.a * x.s * x.s;
  int64_t kept = 4 * rows_d + 4 * sq + 2 * x.s * x.f + probs;
  int64_t masks = 0;
  if (x.dropout) {
    kept += probs;
    masks = probs + 2 * rows_d;
  }
  layer->act_bytes = kept * dtype_bytes + masks;
  layer->act_again[ST_RC_CORE_ATTN] = (x.dropout ? 2 * dtype_bytes + 1 : dtype_bytes) * probs;
  layer->again_flops[ST_RC_CORE_ATTN] = 2.0 * ss * (double)x.q;
  /* GELU's output from fc1's; LN1's and LN2's outputs from their inputs
   * and statistics: element-wise, no FLOPs counted */
  layer->act_again[ST_RC_MLP_ACT] = x.s * x.f * dtype_bytes;
  layer->act_again[ST_RC_LAYERNORM] = 2 * rows_d * dtype_bytes;
  return TRUE;
}

/* memory(), on x [B, T, D] = [batch, s, d] with a heads and f = ffn, as
 * the executor's block (exec/layers/layer_transformer.c) allocates it, each
 * tensor aligned: it saves its two norms' fp32 mean and 1/std [BT] each,
 * LN1's output, Q K V, the probabilities [aB, T, T] (and with dropout their
 * dropped copy, its one-byte mask and the two residual branches' masks), the
 * attention output, x1, LN2's output, fc1's output and GELU's: 7 BTD + 2 BTF
 * + aBT^2 elements, the tensors act_bytes counts but the block's input (the
 * previous layer's output). Selective recomputation drops the
 * probabilities, their dropped copy and its mask (`again`), which the
 * recompute makes again from the saved Q and K with no scratch. Its forward
 * takes a [B, T, 3D] scratch (qkv, then the attention output by head and
 * the projection); its backward three [B, T, D] gradients and one block for
 * the branch it is in: the MLP's [B, T, F], or the attention's
 * probabilities' gradient and two gradients of Q K V (by head and by
 * token), whichever is larger. One rank of a tensor-parallel group: the
 * same with its heads, its share of D inside the attention, its ffn (the
 * executor's split layouts are issue 13's). */
static void
transformer_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  Xf x = xf_of(layer);
  int64_t e = dtype_bytes, bt = batch * x.s, btq = bt * x.q, btf = bt * x.f;
  int64_t probs = x.a * batch * x.s * x.s, rows = batch * x.rows;
  int64_t stats = 2 * st_layer_aligned(rows * (int64_t)sizeof(float));
  int64_t map = st_layer_aligned(rows * x.d * e), qkv = st_layer_aligned(3 * btq * e);
  int64_t att = st_layer_aligned(probs * e);
  out->saved = 2 * stats + 3 * map + st_layer_aligned(btq * e) + qkv + att +
               2 * st_layer_aligned(btf * e);
  out->again[ST_RC_CORE_ATTN] = att;
  out->again[ST_RC_MLP_ACT] = st_layer_aligned(btf * e);
  out->again[ST_RC_LAYERNORM] = 2 * map;
  if (x.dropout) {
    out->again[ST_RC_CORE_ATTN] += att + st_layer_aligned(probs);
    out->saved += att + st_layer_aligned(probs) + 2 * st_layer_aligned(rows * x.d);
  }
  out->fwd_scratch = qkv;
  out->bwd_scratch = 3 * map + MAX(st_layer_aligned(btf * e), att + 2 * qkv);
}

/* Tensor-parallel parts (layer_type.h): attention (8 s d q + 4 s^2 q
 * forward, as derive() counts it), then the MLP (4 s d f); backward 2 x
 * each. */
static int
transformer_tp_parts(const StLayer *layer, StPass pass, double share[ST_TP_PARTS_MAX])
{
  (void)pass;
  Xf x = xf_of(layer);
  double s = (double)x.s, d = (double)layer->in_shape.dims[1];
  double attn = 8.0 * s * d * (double)x.q + 4.0 * s * s * (double)x.q;
  double mlp = 4.0 * s * d * (double)x.f;
  share[0] = attn / (attn + mlp);
  share[1] = mlp / (attn + mlp);
  return 2;
}

/* Its two LayerNorms' weights and biases (layer_type.h). */
static int64_t
transformer_tp_partial_params(const StLayer *layer)
{
  return 4 * layer->in_shape.dims[1];
}

const StLayerType st_layer_transformer_block = {
  .name = "transformer_block",
  .summary = "pre-LN transformer block: LN, multi-head attention, LN, GELU MLP, residuals",
  .attrs = TRANSFORMER_ATTRS,
  .derive = transformer_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = transformer_memory,
  .block = TRUE,
  .tp = ST_TP_PARALLEL,
  .tp_parts = transformer_tp_parts,
  .tp_partial_params = transformer_tp_partial_params,
};
