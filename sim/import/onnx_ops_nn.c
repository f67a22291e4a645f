/* onnx_ops_nn.c: the layers' own operators: Conv, the poolings, the
 * normalizations, and the matrix products MatMul and Gemm.
 *
 * Window arithmetic follows the ONNX operator definitions (explicit pads
 * begin and end per axis, dilations, ceil_mode, auto_pad). Dense FLOPs are
 * 2 per multiply-add without bias: a convolution 2 K C_in/groups per output
 * element (K the kernel's elements), a product of [M,K] by [K,N] 2 M K N
 * per batch entry. Poolings cost one FLOP per window element per output
 * (stagger's pooling layers count the same), global ones one per input
 * element, normalizations 7 per element (ST_NORM_FWD_FLOPS_PER_ELEM).
 */
#include <string.h>

#include "base/limits.h"
#include "import/onnx_ops.h"

#define NORM_FLOPS_PER_ELEM 7.0

/* ---- convolution and pooling -------------------------------------------- */

/* The output spatial dims of a window op over `in` ([N, C, spatial...]),
 * into out[2..]: from kernel_shape (or the weight's), strides, pads,
 * dilations, ceil_mode and auto_pad. */
static gboolean
window_dims(const OnnxGraph *g, const OnnxNode *node, const OnnxValue *in,
            const int64_t *kernel, int64_t *out, GError **error)
{
  int spatial = in->rank - 2, n;
  const int64_t *strides = onnx_attr_ints(node, "strides", &n);
  if (strides != NULL && n != spatial)
    return onnx_node_error(g, node, error, "%d strides for %d spatial dims", n, spatial);
  const int64_t *dilations = onnx_attr_ints(node, "dilations", &n);
  if (dilations != NULL && n != spatial)
    return onnx_node_error(g, node, error, "%d dilations for %d spatial dims", n, spatial);
  const int64_t *pads = onnx_attr_ints(node, "pads", &n);
  if (pads != NULL && n != 2 * spatial)
    return onnx_node_error(g, node, error, "%d pads for %d spatial dims", n, spatial);
  const OnnxAttr *auto_pad = onnx_attr(node, "auto_pad");
  const char *mode = auto_pad != NULL && auto_pad->s != NULL ? auto_pad->s : "NOTSET";
  gboolean ceil_mode = onnx_attr_int(node, "ceil_mode", 0) != 0;
  for (int k = 0; k < spatial; k++) {
    int64_t size = in->dims[2 + k], s = strides != NULL ? strides[k] : 1;
    int64_t d = dilations != NULL ? dilations[k] : 1;
    /* Attributes are any int64 in the file: bounded before any sum or product. */
    if (s < 1 || d < 1 || kernel[k] < 1 || s > ONNX_MAX_ELEMS || d > ONNX_MAX_ELEMS ||
        kernel[k] > ONNX_MAX_ELEMS)
      return onnx_node_error(g, node, error, "a kernel, stride or dilation outside 1 to 2^50");
    if (pads != NULL && (pads[k] < 0 || pads[k + spatial] < 0 || pads[k] > ONNX_MAX_ELEMS ||
                         pads[k + spatial] > ONNX_MAX_ELEMS))
      return onnx_node_error(g, node, error, "pads outside 0 to 2^50");
    int64_t span;
    if (!st_mul_i64(d, kernel[k] - 1, &span) || span >= ONNX_MAX_ELEMS)
      return onnx_node_error(g, node, error, "a dilated window of more than 2^50");
    span += 1;
    if (strcmp(mode, "SAME_UPPER") == 0 || strcmp(mode, "SAME_LOWER") == 0) {
      out[2 + k] = (size + s - 1) / s;
      continue;
    }
    int64_t padded = size + (strcmp(mode, "VALID") == 0 || pads == NULL
                               ? 0 : pads[k] + pads[k + spatial]);
    if (padded < span)
      return onnx_node_error(g, node, error,
                             "the window (%" G_GINT64_FORMAT ") is larger than the padded "
                             "input (%" G_GINT64_FORMAT ")", span, padded);
    out[2 + k] = (padded - span + (ceil_mode ? s - 1 : 0)) / s + 1;
  }
  return TRUE;
}

static gboolean
conv_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 2, error))
    return FALSE;
  const OnnxValue *x = onnx_in(g, node, 0), *w = onnx_in(g, node, 1);
  int64_t groups = onnx_attr_int(node, "group", 1);
  if (x->rank < 3 || w->rank != x->rank)
    return onnx_node_error(g, node, error, "expects [N, C, spatial...] data and a weight of "
                           "the same rank");
  int64_t channels;
  if (groups < 1 || !st_mul_i64(w->dims[1], groups, &channels) || x->dims[1] != channels ||
      w->dims[0] % groups != 0)
    return onnx_node_error(g, node, error,
                           "%" G_GINT64_FORMAT " input channels do not match the weight's %"
                           G_GINT64_FORMAT " x %" G_GINT64_FORMAT " groups",
                           x->dims[1], w->dims[1], groups);
  int n;
  const int64_t *kernel = onnx_attr_ints(node, "kernel_shape", &n);
  if (kernel != NULL && (n != x->rank - 2 || memcmp(kernel, w->dims + 2, sizeof(int64_t) * n)))
    return onnx_node_error(g, node, error, "kernel_shape disagrees with the weight");
  int64_t dims[ONNX_MAX_RANK] = {x->dims[0], w->dims[0]};
  return window_dims(g, node, x, w->dims + 2, dims, error) &&
         onnx_set_shape(g, node, 0, x->elem, x->rank, dims, error);
}

static double
conv_flops(const OnnxGraph *g, const OnnxNode *node, double *dense)
{
  const OnnxValue *w = onnx_in(g, node, 1), *y = onnx_out(g, node, 0);
  double per_output = 1; /* multiply-adds: C_in / groups x kernel elements */
  for (int k = 1; k < w->rank; k++)
    per_output *= (double)w->dims[k];
  *dense = 2.0 * per_output * (double)onnx_elems(y);
  return *dense;
}

static gboolean
pool_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *x = onnx_in(g, node, 0);
  int n;
  const int64_t *kernel = onnx_attr_ints(node, "kernel_shape", &n);
  if (x->rank < 3 || kernel == NULL || n != x->rank - 2)
    return onnx_node_error(g, node, error, "expects [N, C, spatial...] and a kernel_shape per "
                           "spatial dim");
  int64_t dims[ONNX_MAX_RANK] = {x->dims[0], x->dims[1]};
  if (!window_dims(g, node, x, kernel, dims, error) ||
      !onnx_set_shape(g, node, 0, x->elem, x->rank, dims, error))
    return FALSE;
  /* MaxPool's optional indices. */
  return onnx_set_shape(g, node, 1, ONNX_INT64, x->rank, dims, error);
}

/* One FLOP per window element per output. */
static double
pool_flops(const OnnxGraph *g, const OnnxNode *node, double *dense)
{
  int n;
  const int64_t *kernel = onnx_attr_ints(node, "kernel_shape", &n);
  double window = 1;
  for (int k = 0; k < n; k++)
    window *= (double)kernel[k];
  *dense = 0;
  return window * (double)onnx_elems(onnx_out(g, node, 0));
}

static gboolean
global_pool_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *x = onnx_in(g, node, 0);
  if (x->rank < 3)
    return onnx_node_error(g, node, error, "expects [N, C, spatial...]");
  int64_t dims[ONNX_MAX_RANK];
  for (int k = 0; k < x->rank; k++)
    dims[k] = k < 2 ? x->dims[k] : 1;
  return onnx_set_shape(g, node, 0, x->elem, x->rank, dims, error);
}

static double
input_flops(const OnnxGraph *g, const OnnxNode *node, double *dense)
{
  *dense = 0;
  return (double)onnx_elems(onnx_in(g, node, 0));
}

/* ---- normalizations ---------------------------------------------------------- */

/* BatchNormalization: Y like X; in training mode the running mean and
 * variance (and, before opset 14, the saved ones) like the scale. */
static gboolean
batchnorm_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 5, error) || !onnx_same_shape(g, node, 0, 0, error))
    return FALSE;
  const OnnxValue *x = onnx_in(g, node, 0), *scale = onnx_in(g, node, 1);
  if (x->rank < 2 || scale->rank != 1 || scale->dims[0] != x->dims[1])
    return onnx_node_error(g, node, error, "its scale does not have one entry per channel");
  for (int i = 1; i < node->n_out; i++)
    if (!onnx_same_shape(g, node, i, 1, error))
      return FALSE;
  return TRUE;
}

/* LayerNormalization: Y like X; the optional mean and 1/std with the
 * normalized dims reduced to 1. */
static gboolean
layernorm_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 2, error) || !onnx_same_shape(g, node, 0, 0, error))
    return FALSE;
  const OnnxValue *x = onnx_in(g, node, 0);
  int axis;
  if (!onnx_axis(g, node, onnx_attr_int(node, "axis", -1), x->rank, "axis", &axis, error))
    return FALSE;
  int64_t dims[ONNX_MAX_RANK];
  for (int k = 0; k < x->rank; k++)
    dims[k] = k < axis ? x->dims[k] : 1;
  return onnx_set_shape(g, node, 1, ONNX_FLOAT, x->rank, dims, error) &&
         onnx_set_shape(g, node, 2, ONNX_FLOAT, x->rank, dims, error);
}

static gboolean
norm_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  return onnx_need_inputs(g, node, 1, error) && onnx_same_shape(g, node, 0, 0, error);
}

/* ---- matrix products ------------------------------------------------------ */

/* numpy matmul: 1-D operands promoted, batch dims broadcast. */
static gboolean
matmul_shape(const OnnxGraph *g, const OnnxNode *node, int *rank, int64_t *dims,
             int64_t *m, int64_t *k, int64_t *n, GError **error)
{
  const OnnxValue *a = onnx_in(g, node, 0), *b = onnx_in(g, node, 1);
  if (a->rank < 1 || b->rank < 1)
    return onnx_node_error(g, node, error, "a scalar operand");
  *m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
  *k = a->dims[a->rank - 1];
  int64_t kb = b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0];
  *n = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
  if (*k != kb)
    return onnx_node_error(g, node, error, "inner dims differ (%" G_GINT64_FORMAT " and %"
                           G_GINT64_FORMAT ")", *k, kb);
  int batch_a = MAX(a->rank - 2, 0), batch_b = MAX(b->rank - 2, 0);
  int batch = MAX(batch_a, batch_b);
  for (int i = 0; i < batch; i++) {
    int64_t da = i - (batch - batch_a) >= 0 ? a->dims[i - (batch - batch_a)] : 1;
    int64_t db = i - (batch - batch_b) >= 0 ? b->dims[i - (batch - batch_b)] : 1;
    if (da != db && da != 1 && db != 1)
      return onnx_node_error(g, node, error, "batch dims do not broadcast");
    dims[i] = MAX(da, db);
  }
  *rank = batch;
  if (a->rank >= 2)
    dims[(*rank)++] = *m;
  if (b->rank >= 2)
    dims[(*rank)++] = *n;
  return TRUE;
}

static gboolean
matmul_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  int rank = 0;
  int64_t dims[ONNX_MAX_RANK], m, k, n;
  return onnx_need_inputs(g, node, 2, error) &&
         matmul_shape(g, node, &rank, dims, &m, &k, &n, error) &&
         onnx_set_shape(g, node, 0, onnx_in(g, node, 0)->elem, rank, dims, error);
}

static double
matmul_flops(const OnnxGraph *g, const OnnxNode *node, double *dense)
{
  const OnnxValue *a = onnx_in(g, node, 0), *y = onnx_out(g, node, 0);
  /* Every output element is a dot product over K. */
  *dense = 2.0 * (double)a->dims[a->rank - 1] * (double)onnx_elems(y);
  return *dense;
}

static gboolean
gemm_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 2, error))
    return FALSE;
  const OnnxValue *a = onnx_in(g, node, 0), *b = onnx_in(g, node, 1);
  if (a->rank != 2 || b->rank != 2)
    return onnx_node_error(g, node, error, "expects two matrices");
  gboolean ta = onnx_attr_int(node, "transA", 0) != 0, tb = onnx_attr_int(node, "transB", 0) != 0;
  int64_t m = a->dims[ta ? 1 : 0], k = a->dims[ta ? 0 : 1];
  int64_t kb = b->dims[tb ? 1 : 0], n = b->dims[tb ? 0 : 1];
  if (k != kb)
    return onnx_node_error(g, node, error, "inner dims differ (%" G_GINT64_FORMAT " and %"
                           G_GINT64_FORMAT ")", k, kb);
  int64_t dims[2] = {m, n};
  return onnx_set_shape(g, node, 0, a->elem, 2, dims, error);
}

static double
gemm_flops(const OnnxGraph *g, const OnnxNode *node, double *dense)
{
  const OnnxValue *a = onnx_in(g, node, 0), *y = onnx_out(g, node, 0);
  int64_t k = a->dims[onnx_attr_int(node, "transA", 0) != 0 ? 0 : 1];
  *dense = 2.0 * (double)k * (double)onnx_elems(y);
  return *dense;
}

#define IN ONNX_KEEPS_INPUT
#define OUT ONNX_KEEPS_OUTPUT

const OnnxOp st_onnx_nn_ops[] = {
  {"Conv", conv_infer, conv_flops, 0, 1u << 1 | 1u << 2, IN},
  {"MaxPool", pool_infer, pool_flops, 0, 0, IN},
  {"AveragePool", pool_infer, pool_flops, 0, 0, 0},
  {"GlobalAveragePool", global_pool_infer, input_flops, 0, 0, 0},
  {"GlobalMaxPool", global_pool_infer, input_flops, 0, 0, IN},
  {"BatchNormalization", batchnorm_infer, NULL, NORM_FLOPS_PER_ELEM, 1u << 1 | 1u << 2, IN},
  {"LayerNormalization", layernorm_infer, NULL, NORM_FLOPS_PER_ELEM, 1u << 1 | 1u << 2, IN},
  {"InstanceNormalization", norm_infer, NULL, NORM_FLOPS_PER_ELEM, 1u << 1 | 1u << 2, IN},
  {"GroupNormalization", norm_infer, NULL, NORM_FLOPS_PER_ELEM, 1u << 1 | 1u << 2, IN},
  {"MatMul", matmul_infer, matmul_flops, 0, 1u << 0 | 1u << 1, IN},
  {"Gemm", gemm_infer, gemm_flops, 0, 1u << 1 | 1u << 2, IN},
  {NULL},
};
