/* onnx_graph.h: an ONNX model's main graph as typed structs.
 *
 * onnx_read.c fills it from the file (through the protobuf-c code generated
 * from onnx.proto; no protobuf type leaves that file). Every tensor of the
 * graph, whether a graph input, an initializer, a constant attribute or a
 * node's output, is one OnnxValue, named and indexed; nodes refer to values
 * by index. onnx_infer.c then gives every value its shape, its contents
 * where they can be known at import time (shape arithmetic), and its kind.
 *
 * Shapes keep the batch: dims[0] of the sample input is the batch the graph
 * was exported with (a symbolic batch counts as 1). Per-sample numbers
 * divide by it.
 *
 * Weight bytes are barely read: an initializer is its dims and type (so a
 * file whose weights live in external data, absent here, imports the same),
 * plus the contents of small tensors that shape arithmetic needs, and three
 * rows and columns of each matrix in the file (probes that tell a folded
 * copy of a tied weight).
 *
 * Ownership: the graph owns everything in it.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "import/import.h"

#define ONNX_MAX_RANK 8
/* Contents are kept for tensors up to this many elements (shape tensors,
 * split sizes, scalars); larger constants are only their shape. */
#define ONNX_MAX_DATA 4096
/* Elements of one value, and the span of its shape (below): 2^50, as
 * ST_MAX_BYTES, so that any product of a value's dims fits int64. */
#define ONNX_MAX_ELEMS (INT64_C(1) << 50)

/* TensorProto.DataType values that matter here (onnx.proto). */
enum {
  ONNX_FLOAT = 1,
  ONNX_UINT8 = 2,
  ONNX_INT8 = 3,
  ONNX_INT32 = 6,
  ONNX_INT64 = 7,
  ONNX_BOOL = 9,
  ONNX_FLOAT16 = 10,
  ONNX_DOUBLE = 11,
  ONNX_BFLOAT16 = 16,
};

typedef enum {
  ONNX_ACT = 1, /* depends on the sample input: an activation */
  ONNX_CONST,   /* known at import time, made of no parameter (shapes, masks) */
  ONNX_WEIGHT,  /* made of parameters and constants only (a weight, its transpose) */
} OnnxKind;

typedef struct {
  char *name;
  int elem;                     /* TensorProto.DataType; 0 = not yet known */
  int rank;                     /* -1 = not yet known */
  int64_t dims[ONNX_MAX_RANK];
  int producer;                 /* node index; -1 for graph inputs and initializers */
  gboolean initializer;
  gboolean graph_input;
  OnnxKind kind;                /* 0 until onnx_infer.c classifies it */
  gboolean param;               /* a trainable parameter (onnx_infer.c) */
  double *data;                 /* [n_data] contents (integers are exact below 2^53),
                                   or NULL when unknown or larger than ONNX_MAX_DATA */
  int64_t n_data;
  int n_consumers;              /* node inputs that read it (graph outputs not counted) */
  /* A matrix initializer whose elements are in the file: the bytes of its
   * rows 0, n/2, n-1 and of its columns 0, m/2, m-1, so that a transposed
   * copy of another (a tied head that an exporter folded into a weight of
   * its own) can be told from a weight of its own (onnx_infer.c). */
  GBytes *probe_rows, *probe_cols;
  int copy_of;                  /* the initializer this one copies, or -1 */
} OnnxValue;

typedef struct {
  char *name;
  int type;                     /* AttributeProto.AttributeType (1 float, 2 int, 3 string,
                                   4 tensor, 6 floats, 7 ints) */
  int64_t i;
  double f;
  char *s;
  int64_t *ints;
  int n_ints;
  double *floats;
  int n_floats;
  int value;                    /* a tensor attribute as a value of the graph; -1 */
} OnnxAttr;

typedef struct {
  char *name;                   /* as in the file, or "OP#N" when it had none */
  char *op;
  char *domain;                 /* "" for the default (ai.onnx) */
                                /* (the three in the graph's `text`) */
  int *in;                      /* [n_in] value indices, -1 for an omitted optional input */
  int n_in;
  int *out;                     /* [n_out] */
  int n_out;
  OnnxAttr *attrs;              /* [n_attrs] */
  int n_attrs;
  const struct OnnxOp *def;     /* its operator's entry (onnx_ops.h), set by the inference
                                 * pass so that later passes need no lookup by name; NULL
                                 * before */
} OnnxNode;

typedef struct {
  char *path;
  char *producer;               /* "pytorch 1.13.1", or "" */
  int64_t opset;                /* of the default domain */
  GPtrArray *values;            /* OnnxValue *, owned */
  OnnxNode *nodes;              /* [n_nodes], in the file's (topological) order */
  int n_nodes;
  int input;                    /* the sample input (a graph input that is no initializer) */
  int output;                   /* the graph's output */
  int64_t batch;                /* dims[0] of the input as exported (symbolic: 1) */
  GHashTable *by_name;          /* value name -> index + 1 */
  GStringChunk *text;           /* the nodes' names, and their operators and domains once
                                   each (three allocations a node before) */
} OnnxGraph;

/* Reads `path`. Symbolic dims of the input other than the batch take their
 * size from `dims` (name -> gint64 *; may be NULL). Errors name the file and
 * the node, value or field at fault. Transfer full. */
OnnxGraph *onnx_graph_read(const char *path, GHashTable *dims, GError **error);
void onnx_graph_free(OnnxGraph *graph);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OnnxGraph, onnx_graph_free)

static inline OnnxValue *
onnx_value(const OnnxGraph *g, int index)
{
  return index < 0 ? NULL : (OnnxValue *)g->values->pdata[index];
}

/* Input / output `i` of a node, NULL when omitted or past the end. */
OnnxValue *onnx_in(const OnnxGraph *g, const OnnxNode *node, int i);
OnnxValue *onnx_out(const OnnxGraph *g, const OnnxNode *node, int i);

/* Attributes: the named one, or NULL / the fallback. */
const OnnxAttr *onnx_attr(const OnnxNode *node, const char *name);
int64_t onnx_attr_int(const OnnxNode *node, const char *name, int64_t fallback);
double onnx_attr_float(const OnnxNode *node, const char *name, double fallback);
/* The ints of an INTS attribute (borrowed), *n = 0 and NULL when absent. */
const int64_t *onnx_attr_ints(const OnnxNode *node, const char *name, int *n);

/* A known element as an integer, saturated at +-2^62 (exporters write
 * INT64_MAX for "to the end", which no double holds exactly) and NaN as 0. */
static inline int64_t
onnx_int(double x)
{
  if (x != x)
    return 0;
  if (x >= 0x1p62)
    return INT64_C(1) << 62;
  if (x <= -0x1p62)
    return -(INT64_C(1) << 62);
  return (int64_t)x;
}

/* Elements of a value's shape (1 for a scalar). */
int64_t onnx_elems(const OnnxValue *v);
/* Whether `rank` dims, each >= 0, have a product of their non-zero dims of
 * at most ONNX_MAX_ELEMS: every shape the graph holds does (a zero dim does
 * not let the others grow unbounded), so no product of its dims overflows. */
gboolean onnx_dims_fit(int rank, const int64_t *dims);
/* Bytes of one element of `elem` (0 when unknown: strings, undefined). */
int onnx_elem_bytes(int elem);
/* "[1,64,56,56]". Transfer full. */
char *onnx_shape_text(const OnnxValue *v);

/* Sets an error "FILE: node 'NAME' (OP): MESSAGE". Returns FALSE. */
gboolean onnx_node_error(const OnnxGraph *g, const OnnxNode *node, GError **error,
                         const char *format, ...) G_GNUC_PRINTF(4, 5);
