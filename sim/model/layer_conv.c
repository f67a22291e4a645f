/* layer_conv.c: image layers on [C,H,W] inputs: conv2d, conv2d_rect, the
 * poolings, and
 * the reshapes that leave the image world (flatten, to_tokens).
 *
 * Window arithmetic is PyTorch's with ceil_mode off. Layers without weights
 * cost as much backward as forward.
 */
#include "model/layer_types_private.h"

static StChw
input_chw(const StLayer *layer)
{
  const int64_t *d = layer->in_shape.dims;
  return (StChw){d[0], d[1], d[2]};
}

static void
set_chw_output(StLayer *layer, StChw out, int dtype_bytes)
{
  layer->out_shape = (StShape){.n_dims = 3, .dims = {out.c, out.h, out.w}};
  layer->out_bytes = st_chw_elems(out) * dtype_bytes;
}

gboolean
st_conv_apply(StChw in, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding,
              int64_t groups, StChw *out, int64_t *weights, double *fwd_flops, GError **error)
{
  if (in.c % groups != 0 || out_channels % groups != 0)
    return st_layer_attr_error(error, "groups",
                               "%" G_GINT64_FORMAT " does not divide both the %" G_GINT64_FORMAT
                               " input and the %" G_GINT64_FORMAT " output channels",
                               groups, in.c, out_channels);
  out->c = out_channels;
  if (!st_window_out(in.h, kernel, stride, padding, &out->h, error) ||
      !st_window_out(in.w, kernel, stride, padding, &out->w, error) ||
      !st_layer_check_size((double)out->c * (double)out->h * (double)out->w, ST_MAX_ELEMS,
                           "the output elements", error) ||
      !st_layer_check_size((double)kernel * (double)kernel * (double)(in.c / groups) *
                             (double)out_channels, ST_MAX_COUNT, "the weights", error))
    return FALSE;
  int64_t per_output = kernel * kernel * (in.c / groups); /* multiply-adds per output element */
  *weights = per_output * out_channels;
  *fwd_flops = 2.0 * (double)per_output * (double)st_chw_elems(*out);
  return TRUE;
}

int64_t
st_conv_cols_bytes(StChw in, int64_t kernel, int64_t stride, int64_t padding, StChw out,
                   int batch, int dtype_bytes)
{
  if (kernel == 1 && stride == 1 && padding == 0)
    return 0;
  int64_t per_image = in.c * kernel * kernel * out.h * out.w * dtype_bytes;
  int64_t fit = ST_CONV_COLS_BYTES / per_image;
  return CLAMP(fit, 1, batch) * per_image;
}

/* ---- conv2d ------------------------------------------------------------ */

static const StAttrSpec CONV2D_ATTRS[] = {
  {.key = "out_channels", .min = 1, .required = TRUE, .help = "output channels"},
  {.key = "kernel", .min = 1, .required = TRUE, .help = "square kernel size"},
  {.key = "stride", .fallback = 1, .min = 1, .help = "step between windows"},
  {.key = "padding", .fallback = 0, .min = 0, .help = "zeros added on each side"},
  {.key = "groups", .fallback = 1, .min = 1, .help = "channel groups (depthwise = channels)"},
  {.key = "bias", .fallback = 1, .flag = TRUE, .help = "add a learned bias per channel"},
  {NULL},
};

/* fwd = 2 * (k*k*Cin/groups) * Cout * Hout * Wout; bwd = 2 x fwd (input and
 * weight gradients); keeps its input for the weight gradient. */
static gboolean
conv2d_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 3, "[C,H,W]", error))
    return FALSE;
  StChw out;
  int64_t weights, out_channels = st_layer_attr(layer, "out_channels", 0);
  if (!st_conv_apply(input_chw(layer), out_channels, st_layer_attr(layer, "kernel", 0),
                     st_layer_attr(layer, "stride", 1), st_layer_attr(layer, "padding", 0),
                     st_layer_attr(layer, "groups", 1), &out, &weights, &layer->fwd_flops,
                     error))
    return FALSE;
  set_chw_output(layer, out, dtype_bytes);
  layer->params = weights + st_layer_attr(layer, "bias", 1) * out_channels;
  layer->param_tensors = 1 + (int32_t)st_layer_attr(layer, "bias", 1);
  layer->bwd_flops = 2.0 * layer->fwd_flops;
  layer->act_bytes = layer->in_bytes;
  return TRUE;
}

/* Each pass makes the columns of its input (the backward again, rather
 * than keeping them: k*k times the input). */
static void
conv2d_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  const int64_t *o = layer->out_shape.dims;
  int64_t cols = st_conv_cols_bytes(input_chw(layer), st_layer_attr(layer, "kernel", 1),
                                    st_layer_attr(layer, "stride", 1),
                                    st_layer_attr(layer, "padding", 0), (StChw){o[0], o[1], o[2]},
                                    batch, dtype_bytes);
  out->fwd_scratch = out->bwd_scratch = st_layer_aligned(cols);
}

const StLayerType st_layer_conv2d = {
  .name = "conv2d",
  .summary = "2-D convolution over [C,H,W]",
  .attrs = CONV2D_ATTRS,
  .derive = conv2d_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = conv2d_memory,
};

/* ---- conv2d_rect -------------------------------------------------------- */

/* Inception-v3's factorized convolutions (Szegedy et al. 2016, arXiv
 * 1512.00567): 1x7 then 7x1, 1x3 and 3x1, each padded to keep the map. */
static const StAttrSpec CONV2D_RECT_ATTRS[] = {
  {.key = "out_channels", .min = 1, .required = TRUE, .help = "output channels"},
  {.key = "kernel_h", .min = 1, .required = TRUE, .help = "kernel height"},
  {.key = "kernel_w", .min = 1, .required = TRUE, .help = "kernel width"},
  {.key = "padding_h", .fallback = 0, .min = 0, .help = "zeros added above and below"},
  {.key = "padding_w", .fallback = 0, .min = 0, .help = "zeros added left and right"},
  {.key = "stride", .fallback = 1, .min = 1, .help = "step between windows"},
  {.key = "bias", .fallback = 1, .flag = TRUE, .help = "add a learned bias per channel"},
  {NULL},
};

/* fwd = 2 * (kh*kw*Cin) * Cout * Hout * Wout; bwd = 2 x fwd; keeps its input. */
static gboolean
conv2d_rect_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 3, "[C,H,W]", error))
    return FALSE;
  StChw in = input_chw(layer), out = {.c = st_layer_attr(layer, "out_channels", 0)};
  int64_t kh = st_layer_attr(layer, "kernel_h", 0), kw = st_layer_attr(layer, "kernel_w", 0);
  int64_t stride = st_layer_attr(layer, "stride", 1);
  if (!st_window_out(in.h, kh, stride, st_layer_attr(layer, "padding_h", 0), &out.h, error) ||
      !st_window_out(in.w, kw, stride, st_layer_attr(layer, "padding_w", 0), &out.w, error) ||
      !st_layer_check_size((double)kh * (double)kw * (double)in.c * (double)out.c,
                           ST_MAX_COUNT, "the weights", error))
    return FALSE;
  int64_t per_output = kh * kw * in.c;
  set_chw_output(layer, out, dtype_bytes);
  layer->params = per_output * out.c + st_layer_attr(layer, "bias", 1) * out.c;
  layer->param_tensors = 1 + (int32_t)st_layer_attr(layer, "bias", 1);
  layer->fwd_flops = 2.0 * (double)per_output * (double)st_chw_elems(out);
  layer->bwd_flops = 2.0 * layer->fwd_flops;
  layer->act_bytes = layer->in_bytes;
  return TRUE;
}

/* The columns of its input, as conv2d's: kh*kw per output element. */
static void
conv2d_rect_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  const int64_t *o = layer->out_shape.dims;
  int64_t per_image = layer->in_shape.dims[0] * st_layer_attr(layer, "kernel_h", 1) *
                      st_layer_attr(layer, "kernel_w", 1) * o[1] * o[2] * dtype_bytes;
  int64_t fit = ST_CONV_COLS_BYTES / MAX(per_image, 1);
  out->fwd_scratch = out->bwd_scratch = st_layer_aligned(CLAMP(fit, 1, batch) * per_image);
}

const StLayerType st_layer_conv2d_rect = {
  .name = "conv2d_rect",
  .summary = "2-D convolution over [C,H,W] with a kernel_h x kernel_w kernel",
  .attrs = CONV2D_RECT_ATTRS,
  .derive = conv2d_rect_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = conv2d_rect_memory,
};

/* ---- pooling ----------------------------------------------------------- */

static const StAttrSpec POOL_ATTRS[] = {
  {.key = "kernel", .min = 1, .required = TRUE, .help = "square window size"},
  {.key = "stride", .fallback = 0, .min = 0, .help = "step between windows; 0 = kernel"},
  {.key = "padding", .fallback = 0, .min = 0, .help = "padding on each side (at most kernel/2)"},
  {NULL},
};

/* Output map of a pooling window; fwd = one FLOP per window element. */
static gboolean
pool_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 3, "[C,H,W]", error))
    return FALSE;
  int64_t kernel = st_layer_attr(layer, "kernel", 0);
  int64_t stride = st_layer_attr(layer, "stride", 0);
  int64_t padding = st_layer_attr(layer, "padding", 0);
  if (stride == 0)
    st_layer_set_attr(layer, "stride", stride = kernel);
  if (2 * padding > kernel)
    return st_layer_attr_error(error, "padding",
                               "%" G_GINT64_FORMAT " is more than half the kernel %"
                               G_GINT64_FORMAT, padding, kernel);
  StChw in = input_chw(layer), out = {.c = in.c};
  if (!st_window_out(in.h, kernel, stride, padding, &out.h, error) ||
      !st_window_out(in.w, kernel, stride, padding, &out.w, error) ||
      !st_layer_check_size((double)out.c * (double)out.h * (double)out.w, ST_MAX_ELEMS,
                           "the output elements", error))
    return FALSE;
  set_chw_output(layer, out, dtype_bytes);
  layer->params = 0;
  layer->fwd_flops = (double)(kernel * kernel) * (double)st_chw_elems(out);
  layer->bwd_flops = layer->fwd_flops;
  return TRUE;
}

/* Keeps its input and the argmax indices (one per output, counted at the
 * model's element size), as PyTorch's max_pool2d_with_indices does. */
static gboolean
maxpool2d_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!pool_derive(layer, dtype_bytes, error))
    return FALSE;
  layer->act_bytes = layer->in_bytes + layer->out_bytes;
  return TRUE;
}

/* The argmax of each output, int32. */
static void
maxpool2d_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  out->saved = st_shape_elems(&layer->out_shape) * (int64_t)sizeof(int32_t) * batch;
}

const StLayerType st_layer_maxpool2d = {
  .name = "maxpool2d",
  .summary = "max pooling over [C,H,W]",
  .attrs = POOL_ATTRS,
  .derive = maxpool2d_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = maxpool2d_memory,
};

/* Backward needs only the shapes: nothing kept. */
static gboolean
avgpool2d_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!pool_derive(layer, dtype_bytes, error))
    return FALSE;
  layer->act_bytes = 0;
  return TRUE;
}

const StLayerType st_layer_avgpool2d = {
  .name = "avgpool2d",
  .summary = "average pooling over [C,H,W]",
  .attrs = POOL_ATTRS,
  .derive = avgpool2d_derive,
  .keeps = 0,
  .memory = st_layer_no_memory,
};

static const StAttrSpec ADAPTIVE_ATTRS[] = {
  {.key = "output_size", .min = 1, .required = TRUE, .help = "square output size (H = W)"},
  {NULL},
};

/* Averages into an output_size x output_size map: every input element is
 * added once (more when the output is larger); nothing kept. */
static gboolean
adaptive_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 3, "[C,H,W]", error))
    return FALSE;
  int64_t size = st_layer_attr(layer, "output_size", 1);
  StChw in = input_chw(layer), out = {in.c, size, size};
  if (!st_layer_check_size((double)in.c * (double)size * (double)size, ST_MAX_ELEMS,
                           "the output elements", error))
    return FALSE;
  set_chw_output(layer, out, dtype_bytes);
  layer->params = 0;
  layer->fwd_flops = (double)MAX(st_chw_elems(in), st_chw_elems(out));
  layer->bwd_flops = layer->fwd_flops;
  layer->act_bytes = 0;
  return TRUE;
}

const StLayerType st_layer_adaptive_avgpool2d = {
  .name = "adaptive_avgpool2d",
  .summary = "average pooling to a fixed output size over [C,H,W]",
  .attrs = ADAPTIVE_ATTRS,
  .derive = adaptive_derive,
  .keeps = 0,
  .memory = st_layer_no_memory,
};

/* ---- reshapes ---------------------------------------------------------- */

static const StAttrSpec NO_ATTRS[] = {{NULL}};

/* Views: no FLOPs, nothing kept, the output aliases the input. */
static void
view_costs(StLayer *layer, int dtype_bytes)
{
  layer->out_bytes = st_shape_elems(&layer->out_shape) * dtype_bytes;
  layer->params = 0;
  layer->fwd_flops = layer->bwd_flops = 0;
  layer->act_bytes = 0;
}

static gboolean
flatten_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  layer->out_shape = (StShape){.n_dims = 1, .dims = {st_shape_elems(&layer->in_shape)}};
  view_costs(layer, dtype_bytes);
  return TRUE;
}

const StLayerType st_layer_flatten = {
  .name = "flatten",
  .summary = "reshapes any input to [features]",
  .attrs = NO_ATTRS,
  .derive = flatten_derive,
  .keeps = ST_OUTPUT_IS_VIEW,
  .memory = st_layer_no_memory,
};

static gboolean
to_tokens_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 3, "[C,H,W]", error))
    return FALSE;
  const int64_t *d = layer->in_shape.dims;
  layer->out_shape = (StShape){.n_dims = 2, .dims = {d[1] * d[2], d[0]}};
  view_costs(layer, dtype_bytes);
  return TRUE;
}

const StLayerType st_layer_to_tokens = {
  .name = "to_tokens",
  .summary = "patches to tokens (ViT): [C,H,W] -> [H*W, C]",
  .attrs = NO_ATTRS,
  .derive = to_tokens_derive,
  .keeps = ST_OUTPUT_IS_VIEW,
  .memory = st_layer_no_memory,
};
