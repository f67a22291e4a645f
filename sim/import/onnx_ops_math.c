/* onnx_ops_math.c: element-wise operators (with numpy broadcasting),
 * reductions, softmax and dropout.
 *
 * FLOPs per output element: 1 for arithmetic, comparisons and selections
 * (Add .. Where, ReLU, Clip, the sign and rounding functions); 2 for
 * dropout's mask multiply and rescale and for LeakyReLU and PReLU; 4 for
 * the transcendental activations (Sigmoid, Tanh, Erf, Softplus, ELU, SELU,
 * HardSwish), 3 for HardSigmoid, 8 for GELU and Mish (stagger's gelu
 * counts 8); 5 for a softmax (max, subtract, exp, sum, divide); reductions
 * 1 per input element. Arithmetic on integer tensors (shape arithmetic) is
 * carried out when its inputs' contents are known.
 */
#include <math.h>
#include <string.h>

#include "import/onnx_ops.h"

/* ---- broadcasting ---------------------------------------------------------- */

/* The numpy broadcast of the node's present inputs from `first` on. */
static gboolean
broadcast(const OnnxGraph *g, const OnnxNode *node, int first, int *rank, int64_t *dims,
          GError **error)
{
  *rank = 0;
  for (int i = first; i < node->n_in; i++) {
    const OnnxValue *v = onnx_in(g, node, i);
    if (v != NULL)
      *rank = MAX(*rank, v->rank);
  }
  for (int k = 0; k < *rank; k++)
    dims[k] = 1;
  for (int i = first; i < node->n_in; i++) {
    const OnnxValue *v = onnx_in(g, node, i);
    for (int k = 0; v != NULL && k < v->rank; k++) {
      int64_t d = v->dims[k], *o = &dims[*rank - v->rank + k];
      if (d != *o && d != 1 && *o != 1)
        return onnx_node_error(g, node, error, "inputs do not broadcast (dim %d: %"
                               G_GINT64_FORMAT " and %" G_GINT64_FORMAT ")",
                               *rank - v->rank + k, *o, d);
      if (*o == 1)
        *o = d;
    }
  }
  return TRUE;
}

/* The flat index into `v` of output element `flat` of shape (rank, dims). */
static int64_t
source_index(const OnnxValue *v, int rank, const int64_t *dims, int64_t flat)
{
  int64_t index = 0, stride = 1;
  for (int k = rank - 1; k >= 0; k--) {
    int64_t i = flat % dims[k];
    flat /= dims[k];
    int vk = k - (rank - v->rank);
    if (vk >= 0) {
      index += (v->dims[vk] == 1 ? 0 : i) * stride;
      stride *= v->dims[vk];
    }
  }
  return index;
}

static gboolean
is_integral(int elem)
{
  return elem != ONNX_FLOAT && elem != ONNX_DOUBLE && elem != ONNX_FLOAT16 &&
         elem != ONNX_BFLOAT16;
}

/* One element of a binary (or n-ary, folded left) operator. */
static double
apply(const char *op, double a, double b, gboolean integral)
{
  if (strcmp(op, "Add") == 0 || strcmp(op, "Sum") == 0) return a + b;
  if (strcmp(op, "Sub") == 0) return a - b;
  if (strcmp(op, "Mul") == 0) return a * b;
  if (strcmp(op, "Div") == 0) return b == 0 ? 0 : integral ? trunc(a / b) : a / b;
  if (strcmp(op, "Mod") == 0) return b == 0 ? 0 : fmod(a, b);
  if (strcmp(op, "Pow") == 0) return pow(a, b);
  if (strcmp(op, "Max") == 0) return MAX(a, b);
  if (strcmp(op, "Min") == 0) return MIN(a, b);
  if (strcmp(op, "Equal") == 0) return a == b;
  if (strcmp(op, "Less") == 0) return a < b;
  if (strcmp(op, "Greater") == 0) return a > b;
  if (strcmp(op, "LessOrEqual") == 0) return a <= b;
  if (strcmp(op, "GreaterOrEqual") == 0) return a >= b;
  if (strcmp(op, "And") == 0) return a != 0 && b != 0;
  if (strcmp(op, "Or") == 0) return a != 0 || b != 0;
  if (strcmp(op, "Xor") == 0) return (a != 0) != (b != 0);
  return NAN;
}

static gboolean
is_comparison(const char *op)
{
  static const char *const OPS[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                    "And", "Or", "Xor", "Not", NULL};
  for (const char *const *o = OPS; *o != NULL; o++)
    if (strcmp(*o, op) == 0)
      return TRUE;
  return FALSE;
}

/* Add, Sub, ..., the comparisons, and the variadic Max, Min, Sum, Mean. */
static gboolean
binary_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  int rank;
  int64_t dims[ONNX_MAX_RANK];
  if (!broadcast(g, node, 0, &rank, dims, error))
    return FALSE;
  const OnnxValue *a = onnx_in(g, node, 0);
  int elem = is_comparison(node->op) ? ONNX_BOOL : a->elem;
  if (!onnx_set_shape(g, node, 0, elem, rank, dims, error))
    return FALSE;
  int64_t n = onnx_elems(onnx_out(g, node, 0));
  gboolean known = n <= ONNX_MAX_DATA && strcmp(node->op, "Mean") != 0;
  for (int i = 0; i < node->n_in && known; i++)
    known = onnx_in(g, node, i) != NULL && onnx_in(g, node, i)->data != NULL;
  if (!known)
    return TRUE;
  double *data = g_new(double, MAX(n, 1));
  gboolean integral = is_integral(a->elem);
  for (int64_t k = 0; k < n; k++) {
    double x = a->data[source_index(a, rank, dims, k)];
    for (int i = 1; i < node->n_in; i++) {
      const OnnxValue *b = onnx_in(g, node, i);
      x = apply(node->op, x, b->data[source_index(b, rank, dims, k)], integral);
    }
    data[k] = x;
  }
  onnx_set_data(g, node, 0, data);
  return TRUE;
}

static gboolean
where_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 3, error))
    return FALSE;
  int rank;
  int64_t dims[ONNX_MAX_RANK];
  if (!broadcast(g, node, 0, &rank, dims, error) ||
      !onnx_set_shape(g, node, 0, onnx_in(g, node, 1)->elem, rank, dims, error))
    return FALSE;
  const OnnxValue *c = onnx_in(g, node, 0), *x = onnx_in(g, node, 1), *y = onnx_in(g, node, 2);
  int64_t n = onnx_elems(onnx_out(g, node, 0));
  if (n > ONNX_MAX_DATA || c->data == NULL || x->data == NULL || y->data == NULL)
    return TRUE;
  double *data = g_new(double, MAX(n, 1));
  for (int64_t k = 0; k < n; k++)
    data[k] = c->data[source_index(c, rank, dims, k)] != 0
                ? x->data[source_index(x, rank, dims, k)]
                : y->data[source_index(y, rank, dims, k)];
  onnx_set_data(g, node, 0, data);
  return TRUE;
}

/* Activations and the other one-input functions; contents followed for
 * the few shape arithmetic uses. */
static gboolean
unary_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error) || !onnx_same_shape(g, node, 0, 0, error))
    return FALSE;
  OnnxValue *out = onnx_out(g, node, 0);
  if (out != NULL && strcmp(node->op, "Not") == 0)
    out->elem = ONNX_BOOL;
  const OnnxValue *in = onnx_in(g, node, 0);
  if (in->data == NULL)
    return TRUE;
  double *data = g_new(double, MAX(in->n_data, 1));
  gboolean known = TRUE;
  for (int64_t k = 0; k < in->n_data && known; k++) {
    double x = in->data[k];
    if (strcmp(node->op, "Neg") == 0) data[k] = -x;
    else if (strcmp(node->op, "Abs") == 0) data[k] = fabs(x);
    else if (strcmp(node->op, "Not") == 0) data[k] = x == 0;
    else if (strcmp(node->op, "Floor") == 0) data[k] = floor(x);
    else if (strcmp(node->op, "Ceil") == 0) data[k] = ceil(x);
    else if (strcmp(node->op, "Sqrt") == 0) data[k] = sqrt(x);
    else known = FALSE;
  }
  if (known)
    onnx_set_data(g, node, 0, data);
  else
    g_free(data);
  return TRUE;
}

/* Output 0 like the input; output 1, when asked for, the bool mask. */
static gboolean
dropout_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error) || !onnx_same_shape(g, node, 0, 0, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  return onnx_set_shape(g, node, 1, ONNX_BOOL, in->rank, in->dims, error);
}

/* ---- reductions, softmax ----------------------------------------------------- */

static gboolean
reduce_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  g_autofree int64_t *axes = NULL;
  int n_axes;
  if (!onnx_ints_arg(g, node, 1, "axes", &axes, &n_axes, error))
    return FALSE;
  gboolean keep = onnx_attr_int(node, "keepdims", 1) != 0;
  gboolean reduce[ONNX_MAX_RANK] = {0};
  if (n_axes <= 0 && onnx_attr_int(node, "noop_with_empty_axes", 0) == 0)
    for (int k = 0; k < in->rank; k++)
      reduce[k] = TRUE;
  for (int k = 0; k < n_axes; k++) {
    int axis;
    if (!onnx_axis(g, node, axes[k], in->rank, "axes", &axis, error))
      return FALSE;
    reduce[axis] = TRUE;
  }
  int64_t dims[ONNX_MAX_RANK];
  int rank = 0;
  for (int k = 0; k < in->rank; k++)
    if (!reduce[k] || keep)
      dims[rank++] = reduce[k] ? 1 : in->dims[k];
  int elem = strcmp(node->op, "ArgMax") == 0 || strcmp(node->op, "ArgMin") == 0 ? ONNX_INT64
                                                                                 : in->elem;
  return onnx_set_shape(g, node, 0, elem, rank, dims, error);
}

/* ArgMax and ArgMin reduce one `axis`. */
static gboolean
arg_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  const OnnxValue *in = onnx_in(g, node, 0);
  int axis;
  if (!onnx_axis(g, node, onnx_attr_int(node, "axis", 0), in->rank, "axis", &axis, error))
    return FALSE;
  int64_t dims[ONNX_MAX_RANK];
  int rank = 0;
  gboolean keep = onnx_attr_int(node, "keepdims", 1) != 0;
  for (int k = 0; k < in->rank; k++)
    if (k != axis || keep)
      dims[rank++] = k == axis ? 1 : in->dims[k];
  return onnx_set_shape(g, node, 0, ONNX_INT64, rank, dims, error);
}

/* Reductions cost one FLOP per input element. */
static double
reduce_flops(const OnnxGraph *g, const OnnxNode *node, double *dense)
{
  *dense = 0;
  return (double)onnx_elems(onnx_in(g, node, 0));
}

static gboolean
softmax_infer(OnnxGraph *g, const OnnxNode *node, GError **error)
{
  if (!onnx_need_inputs(g, node, 1, error))
    return FALSE;
  int axis;
  const OnnxValue *in = onnx_in(g, node, 0);
  return onnx_axis(g, node, onnx_attr_int(node, "axis", g->opset >= 13 ? -1 : 1), in->rank,
                   "axis", &axis, error) &&
         onnx_same_shape(g, node, 0, 0, error);
}

#define ALL ONNX_ALL_INPUTS
#define IN ONNX_KEEPS_INPUT
#define OUT ONNX_KEEPS_OUTPUT

const OnnxOp st_onnx_math_ops[] = {
  {"Add", binary_infer, NULL, 1, ALL, 0},
  {"Sub", binary_infer, NULL, 1, ALL, 0},
  {"Mul", binary_infer, NULL, 1, ALL, IN},
  {"Div", binary_infer, NULL, 1, ALL, IN},
  {"Pow", binary_infer, NULL, 1, ALL, IN},
  {"Mod", binary_infer, NULL, 1, 0, 0},
  {"Max", binary_infer, NULL, 1, ALL, IN},
  {"Min", binary_infer, NULL, 1, ALL, IN},
  {"Sum", binary_infer, NULL, 1, ALL, 0},
  {"Mean", binary_infer, NULL, 1, ALL, 0},
  {"Equal", binary_infer, NULL, 1, 0, 0},
  {"Less", binary_infer, NULL, 1, 0, 0},
  {"Greater", binary_infer, NULL, 1, 0, 0},
  {"LessOrEqual", binary_infer, NULL, 1, 0, 0},
  {"GreaterOrEqual", binary_infer, NULL, 1, 0, 0},
  {"And", binary_infer, NULL, 1, 0, 0},
  {"Or", binary_infer, NULL, 1, 0, 0},
  {"Xor", binary_infer, NULL, 1, 0, 0},
  {"Where", where_infer, NULL, 1, 1u << 1 | 1u << 2, IN},
  {"Not", unary_infer, NULL, 1, 0, 0},
  {"Neg", unary_infer, NULL, 1, 0, 0},
  {"Abs", unary_infer, NULL, 1, 0, IN},
  {"Sign", unary_infer, NULL, 1, 0, 0},
  {"Floor", unary_infer, NULL, 1, 0, 0},
  {"Ceil", unary_infer, NULL, 1, 0, 0},
  {"Round", unary_infer, NULL, 1, 0, 0},
  {"Reciprocal", unary_infer, NULL, 1, 0, OUT},
  {"Sqrt", unary_infer, NULL, 1, 0, OUT},
  {"Exp", unary_infer, NULL, 1, 0, OUT},
  {"Log", unary_infer, NULL, 1, 0, IN},
  {"Sin", unary_infer, NULL, 1, 0, IN},
  {"Cos", unary_infer, NULL, 1, 0, IN},
  {"Relu", unary_infer, NULL, 1, 0, OUT},
  {"Clip", unary_infer, NULL, 1, 0, IN},
  {"LeakyRelu", unary_infer, NULL, 2, 0, IN},
  {"PRelu", unary_infer, NULL, 2, 1u << 1, IN},
  {"Sigmoid", unary_infer, NULL, 4, 0, OUT},
  {"Tanh", unary_infer, NULL, 4, 0, OUT},
  {"Erf", unary_infer, NULL, 4, 0, IN},
  {"Softplus", unary_infer, NULL, 4, 0, IN},
  {"Elu", unary_infer, NULL, 4, 0, OUT},
  {"Selu", unary_infer, NULL, 4, 0, OUT},
  {"HardSigmoid", unary_infer, NULL, 3, 0, IN},
  {"HardSwish", unary_infer, NULL, 4, 0, IN},
  {"Gelu", unary_infer, NULL, 8, 0, IN},
  {"Mish", unary_infer, NULL, 8, 0, IN},
  {"Dropout", dropout_infer, NULL, 2, 0, ONNX_KEEPS_MASK},
  {"ReduceMean", reduce_infer, reduce_flops, 0, 0, 0},
  {"ReduceSum", reduce_infer, reduce_flops, 0, 0, 0},
  {"ReduceMax", reduce_infer, reduce_flops, 0, 0, IN},
  {"ReduceMin", reduce_infer, reduce_flops, 0, 0, IN},
  {"ReduceProd", reduce_infer, reduce_flops, 0, 0, IN},
  {"ReduceSumSquare", reduce_infer, reduce_flops, 0, 0, IN},
  {"ReduceL2", reduce_infer, reduce_flops, 0, 0, IN},
  {"ReduceLogSumExp", reduce_infer, reduce_flops, 0, 0, IN},
  {"ArgMax", arg_infer, reduce_flops, 0, 0, 0},
  {"ArgMin", arg_infer, reduce_flops, 0, 0, 0},
  {"Softmax", softmax_infer, NULL, 5, 0, OUT},
  {"LogSoftmax", softmax_infer, NULL, 5, 0, OUT},
  {NULL},
};
