/* estimate_conv.c: the kernels of the convolution family's passes (see
 * estimate.h, estimate_kernels.c's header): a convolution as cuDNN's
 * implicit GEMM per group, with the NHWC transposes an NCHW tensor takes,
 * and torchvision's residual blocks of them. */
#include "cost/estimate_list.h"

#include "model/layer_type.h"

typedef struct {
  int64_t c, h, w;
} Map;

static Map
conv_out(Map in, int64_t out_c, int64_t k, int64_t stride, int64_t pad)
{
  return (Map){out_c, (in.h + 2 * pad - k) / stride + 1, (in.w + 2 * pad - k) / stride + 1};
}

static double map_elems(Map x);

/* cuDNN's tensor-core convolutions read and write NHWC: a tensor in NCHW
 * is transposed in (its input forward, and backward the output's gradient
 * and the input again for the weights' gradient) and its results back (the
 * output forward, the input's gradient backward), each a kernel reading
 * and writing the tensor (NVIDIA, Convolutional Layers User's Guide,
 * "Tensor Layouts In Memory: NCHW vs NHWC"). */
static void
conv_transposes(EkList *l, double b, Map in, Map out)
{
  if (!l->transposes)
    return;
  double x = b * map_elems(in), y = b * map_elems(out);
  ek_mem(l, ST_KERNEL_MEMORY, x, 2);
  ek_mem(l, ST_KERNEL_MEMORY, y, 2);
  if (!l->fwd) {
    l->weights_now = TRUE; /* the input again, for the weights' gradient */
    ek_mem(l, ST_KERNEL_MEMORY, x, 2);
    l->weights_now = FALSE;
    if (!l->no_dgrad)
      ek_mem(l, ST_KERNEL_MEMORY, x, 2);
  }
}

/* A convolution of batch b from `in` to `out` (kernel k, groups g). */
static void
conv(EkList *l, double b, Map in, Map out, int64_t k, int64_t g)
{
  double kk = (double)(k * k), G = (double)MAX(g, 1);
  conv_transposes(l, b, in, out);
  if (l->fwd) {
    ek_gemm(l, ST_KERNEL_CONV, b * out.h * out.w, out.c / G, in.c / G * kk, G);
    return;
  }
  /* The input's gradient: each input position sums over the k^2 / s^2
   * taps a stride s lets reach it (cuDNN skips the zeros a strided
   * convolution's transpose would insert), as many FLOPs as forward. */
  double s2 = (double)(in.h * in.w) / (double)(out.h * out.w);
  if (!l->no_dgrad)
    ek_gemm(l, ST_KERNEL_CONV, b * in.h * in.w, in.c / G, out.c / G * kk / s2, G);
  l->weights_now = TRUE;
  ek_gemm(l, ST_KERNEL_CONV, out.c / G, in.c / G * kk, b * out.h * out.w, G);
  l->weights_now = FALSE;
}

static Map
input_map(const StLayer *layer)
{
  const int64_t *d = layer->in_shape.dims;
  return (Map){d[0], d[1], d[2]};
}

static double
map_elems(Map x)
{
  return (double)x.c * (double)x.h * (double)x.w;
}

void
ek_conv2d_layer(const StLayer *layer, double b, EkList *l)
{
  Map in = input_map(layer);
  const int64_t *o = layer->out_shape.dims;
  conv(l, b, in, (Map){o[0], o[1], o[2]}, st_layer_attr(layer, "kernel", 1),
       st_layer_attr(layer, "groups", 1));
  l->weights_now = TRUE; /* the bias's gradient */
  if (!l->fwd && st_layer_attr(layer, "bias", 1))
    ek_mem(l, ST_KERNEL_MEMORY, b * (double)(o[0] * o[1] * o[2]), 1);
  l->weights_now = FALSE;
}

/* conv (no bias) + batchnorm (+ ReLU), as torchvision's residual blocks. */
static Map
conv_bn(EkList *l, double b, Map in, int64_t out_c, int64_t k, int64_t stride, int64_t g,
        gboolean relu)
{
  Map out = conv_out(in, out_c, k, stride, k / 2);
  conv(l, b, in, out, k, g);
  ek_norm(l, b * map_elems(out));
  if (relu)
    ek_activation(l, b * map_elems(out));
  return out;
}

static void
shortcut_and_add(EkList *l, double b, Map in, Map out, int64_t stride)
{
  if (stride != 1 || in.c != out.c)
    conv_bn(l, b, in, out.c, 1, stride, 1, FALSE);
  ek_residual_add(l, b * map_elems(out));
  ek_activation(l, b * map_elems(out));
}

void
ek_basic_block_layer(const StLayer *layer, double b, EkList *l)
{
  Map in = input_map(layer);
  int64_t planes = st_layer_attr(layer, "planes", 1), stride = st_layer_attr(layer, "stride", 1);
  Map x = conv_bn(l, b, in, planes, 3, stride, 1, TRUE);
  x = conv_bn(l, b, x, planes, 3, 1, 1, FALSE);
  shortcut_and_add(l, b, in, x, stride);
}

void
ek_bottleneck_layer(const StLayer *layer, double b, EkList *l)
{
  Map in = input_map(layer);
  int64_t planes = st_layer_attr(layer, "planes", 1), stride = st_layer_attr(layer, "stride", 1);
  int64_t groups = st_layer_attr(layer, "groups", 1);
  int64_t width = planes * st_layer_attr(layer, "width_per_group", 64) / 64 * groups;
  Map x = conv_bn(l, b, in, width, 1, 1, 1, TRUE);
  x = conv_bn(l, b, x, width, 3, stride, groups, TRUE);
  x = conv_bn(l, b, x, 4 * planes, 1, 1, 1, FALSE);
  shortcut_and_add(l, b, in, x, stride);
}
