/* onnx_ops.h: the ONNX operators the importer understands, one table entry
 * each, and the helpers their functions share.
 *
 * An entry says how the operator's outputs get their type and shape (and,
 * for the shape arithmetic exporters leave in graphs, their contents), what
 * its forward costs, which of its inputs are trainable when made of
 * initializers, and what autograd keeps of it for backward. Operators are
 * grouped by family: onnx_ops_shape.c (constants and tensor plumbing),
 * onnx_ops_math.c (element-wise, reductions, softmax), onnx_ops_nn.c
 * (convolution, pooling, normalization, matrix products). An operator that
 * is in no table is refused by name with its node (onnx_infer.c).
 *
 * FLOP conventions (docs/MODELS.md): a multiply-add is 2 FLOPs; matrix
 * products (Conv, MatMul, Gemm) are "dense" and count 2 per multiply-add
 * without the bias; element-wise operators count per output element as
 * their entry says (1 for arithmetic and comparisons, a few for
 * transcendental functions, 7 for a normalization as stagger's norm layers
 * count it, 5 for a softmax); views and copies count 0.
 */
#pragma once

#include "import/onnx_graph.h"

typedef enum {
  ONNX_KEEPS_INPUT = 1 << 0,  /* its activation inputs are kept for backward */
  ONNX_KEEPS_OUTPUT = 1 << 1, /* its first output is kept for backward */
  ONNX_KEEPS_MASK = 1 << 2,   /* a one-byte mask per element is kept (dropout) */
} OnnxKeeps;

typedef struct OnnxOp {
  const char *op;
  /* Sets every output's elem type and shape from the inputs (which all have
   * theirs), and its contents when the inputs' are known and the output is
   * small. Errors through onnx_node_error. */
  gboolean (*infer)(OnnxGraph *g, const OnnxNode *node, GError **error);
  /* Forward FLOPs over the exported batch; *dense the part in matrix
   * products. NULL: per_elem FLOPs per element of the first output. */
  double (*flops)(const OnnxGraph *g, const OnnxNode *node, double *dense);
  double per_elem;
  unsigned weights;           /* bit i: input i is trainable when made of parameters */
  unsigned keeps;             /* OnnxKeeps */
} OnnxOp;

/* The entry for `op` of the default domain, or NULL. */
const OnnxOp *onnx_op_find(const char *op);

/* The entry of a node's operator: the one the inference pass recorded, or
 * found by name before it. */
static inline const OnnxOp *
onnx_node_op(const OnnxNode *node)
{
  return node->def != NULL ? node->def : onnx_op_find(node->op);
}

/* Shapes, contents and kinds of every value of `g`, then its parameters
 * (onnx_infer.c), with a warning in `result` (may be NULL) for each copy of
 * a weight it counts once. An operator in no table fails, naming it and its
 * node. */
gboolean onnx_graph_infer(OnnxGraph *g, StImportResult *result, GError **error);

/* The initializers that value `index` is made of through weight-side
 * nodes, into `out` (index + 1); each value visited once, without
 * recursion (a crafted graph may chain a million nodes). */
void onnx_weight_initializers(const OnnxGraph *g, int index, GHashTable *out);

/* Forward FLOPs of one node over the exported batch; *dense the part in
 * matrix products. */
double onnx_node_flops(const OnnxGraph *g, const OnnxNode *node, double *dense);

/* The families' tables, each ending with an entry whose op is NULL. */
extern const OnnxOp st_onnx_shape_ops[];
extern const OnnxOp st_onnx_math_ops[];
extern const OnnxOp st_onnx_nn_ops[];

#define ONNX_ALL_INPUTS 0xffffffffu

/* ---- helpers for infer() (onnx_infer.c) ----------------------------------- */

/* Fails unless the node has at least `n` inputs present. */
gboolean onnx_need_inputs(const OnnxGraph *g, const OnnxNode *node, int n, GError **error);
/* Output `i` gets `elem` and the shape (rank, dims). Fails past the
 * supported rank. A node's omitted output is skipped. */
gboolean onnx_set_shape(const OnnxGraph *g, const OnnxNode *node, int i, int elem, int rank,
                        const int64_t *dims, GError **error);
/* Output `i` gets input `j`'s type and shape. */
gboolean onnx_same_shape(const OnnxGraph *g, const OnnxNode *node, int i, int j, GError **error);
/* Output `i` takes ownership of `data` (its elements, as many as its
 * shape), or frees it when the output is larger than ONNX_MAX_DATA. */
void onnx_set_data(const OnnxGraph *g, const OnnxNode *node, int i, double *data);
/* `axis` in [-rank, rank) made non-negative, or an error naming `what`. */
gboolean onnx_axis(const OnnxGraph *g, const OnnxNode *node, int64_t axis, int rank,
                   const char *what, int *out, GError **error);
/* The ints of input `i` (an opset-13-style attribute given as a tensor) or,
 * when absent, of attribute `attr`. *n = -1 when neither is given. Fails
 * when the input is given but its contents are unknown. Transfer full. */
gboolean onnx_ints_arg(const OnnxGraph *g, const OnnxNode *node, int i, const char *attr,
                       int64_t **out, int *n, GError **error);
