/* onnx_infer.c: shapes, contents and kinds of every value, node by node in
 * the file's (topological) order, through the operator tables
 * (onnx_ops.h); then which initializers are trainable parameters.
 *
 * Kinds: the sample input is an activation; a float initializer with more
 * than one element is a weight, any other initializer a constant; a node's
 * outputs are activations when any input is one, else weights when any
 * input is one, else constants (Shape and Size give constants whatever they
 * read: shapes are static here).
 *
 * Parameters: ONNX does not say which initializers training updates (a
 * framework's buffers, BatchNorm's running statistics, are initializers
 * too). An initializer is counted as a parameter when it reaches, through
 * weight-side nodes only (a transpose, a cast, a slice), an input that its
 * operator's entry marks trainable at a node that computes on activations:
 * a convolution's weight and bias, a normalization's scale and bias (not
 * the running statistics), either operand of a MatMul, an operand of an
 * element-wise sum or product (a bias, a position table), an embedding
 * table gathered from. Each initializer is counted once however many nodes
 * read it (a tied embedding and head).
 */
#include <string.h>

#include "base/error.h"
#include "import/onnx_ops.h"

static const OnnxOp *const TABLES[] = {st_onnx_shape_ops, st_onnx_math_ops, st_onnx_nn_ops};

const OnnxOp *
onnx_op_find(const char *op)
{
  for (guint t = 0; t < G_N_ELEMENTS(TABLES); t++)
    for (const OnnxOp *o = TABLES[t]; o->op != NULL; o++)
      if (strcmp(o->op, op) == 0)
        return o;
  return NULL;
}

/* ---- helpers for the tables (onnx_ops.h) ----------------------------------- */

gboolean
onnx_need_inputs(const OnnxGraph *g, const OnnxNode *node, int n, GError **error)
{
  for (int i = 0; i < n; i++)
    if (onnx_in(g, node, i) == NULL)
      return onnx_node_error(g, node, error, "input %d is missing", i);
  return TRUE;
}

gboolean
onnx_set_shape(const OnnxGraph *g, const OnnxNode *node, int i, int elem, int rank,
               const int64_t *dims, GError **error)
{
  OnnxValue *v = onnx_out(g, node, i);
  if (v == NULL)
    return TRUE;
  if (rank < 0 || rank > ONNX_MAX_RANK)
    return onnx_node_error(g, node, error, "output %d would have %d dims", i, rank);
  for (int k = 0; k < rank; k++)
    if (dims[k] < 0)
      return onnx_node_error(g, node, error, "output %d would have a negative dim", i);
  if (!onnx_dims_fit(rank, dims))
    return onnx_node_error(g, node, error, "output %d would have more than 2^50 elements", i);
  v->elem = elem;
  v->rank = rank;
  for (int k = 0; k < rank; k++)
    v->dims[k] = dims[k];
  return TRUE;
}

gboolean
onnx_same_shape(const OnnxGraph *g, const OnnxNode *node, int i, int j, GError **error)
{
  const OnnxValue *in = onnx_in(g, node, j);
  return onnx_set_shape(g, node, i, in->elem, in->rank, in->dims, error);
}

void
onnx_set_data(const OnnxGraph *g, const OnnxNode *node, int i, double *data)
{
  OnnxValue *v = onnx_out(g, node, i);
  int64_t n = v != NULL ? onnx_elems(v) : 0;
  if (v == NULL || n > ONNX_MAX_DATA) {
    g_free(data);
    return;
  }
  g_free(v->data);
  v->data = data;
  v->n_data = n;
}

gboolean
onnx_axis(const OnnxGraph *g, const OnnxNode *node, int64_t axis, int rank, const char *what,
          int *out, GError **error)
{
  if (axis < -rank || axis >= rank)
    return onnx_node_error(g, node, error, "%s %" G_GINT64_FORMAT " is outside %d dims", what,
                           axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return TRUE;
}

gboolean
onnx_ints_arg(const OnnxGraph *g, const OnnxNode *node, int i, const char *attr, int64_t **out,
              int *n, GError **error)
{
  const OnnxValue *v = onnx_in(g, node, i);
  *out = NULL;
  *n = -1;
  if (v != NULL) {
    if (v->data == NULL || v->rank > 1)
      return onnx_node_error(g, node, error, "input %d ('%s') is not known when importing "
                             "(export with fixed shapes)", i, v->name);
    *n = (int)v->n_data;
    *out = g_new(int64_t, MAX(*n, 1));
    for (int k = 0; k < *n; k++)
      (*out)[k] = onnx_int(v->data[k]);
    return TRUE;
  }
  int count;
  const int64_t *ints = onnx_attr_ints(node, attr, &count);
  if (onnx_attr(node, attr) != NULL) {
    *n = count;
    *out = g_memdup2(ints != NULL ? ints : (const int64_t[]){0},
                     sizeof(int64_t) * (size_t)MAX(count, 1));
  }
  return TRUE;
}

double
onnx_node_flops(const OnnxGraph *g, const OnnxNode *node, double *dense)
{
  const OnnxOp *op = onnx_node_op(node);
  *dense = 0;
  if (op == NULL)
    return 0;
  if (op->flops != NULL)
    return op->flops(g, node, dense);
  const OnnxValue *out = onnx_out(g, node, 0);
  return out != NULL ? op->per_elem * (double)onnx_elems(out) : 0;
}

/* ---- the pass ------------------------------------------------------------------ */

static gboolean
floating(int elem)
{
  return elem == ONNX_FLOAT || elem == ONNX_DOUBLE || elem == ONNX_FLOAT16 ||
         elem == ONNX_BFLOAT16;
}

static OnnxKind
node_kind(const OnnxGraph *g, const OnnxNode *node)
{
  if (strcmp(node->op, "Shape") == 0 || strcmp(node->op, "Size") == 0)
    return ONNX_CONST;
  OnnxKind kind = ONNX_CONST;
  for (int i = 0; i < node->n_in; i++) {
    const OnnxValue *v = onnx_in(g, node, i);
    if (v != NULL && v->kind == ONNX_ACT)
      return ONNX_ACT;
    if (v != NULL && v->kind == ONNX_WEIGHT)
      kind = ONNX_WEIGHT;
  }
  return kind;
}

/* Node n's operator: that of one of the few nodes before it when it has
 * the same (a graph repeats a few operators: no walk of the tables). */
static const OnnxOp *
node_op(const OnnxGraph *g, int n)
{
  const OnnxNode *node = &g->nodes[n];
  for (int back = 1; back <= 4 && back <= n; back++) {
    const OnnxNode *before = &g->nodes[n - back];
    if (before->def != NULL && strcmp(before->op, node->op) == 0)
      return before->def;
  }
  return onnx_op_find(node->op);
}

static gboolean
infer_node(OnnxGraph *g, int n, GError **error)
{
  OnnxNode *node = &g->nodes[n];
  if (node->domain[0] != '\0' && strcmp(node->domain, "ai.onnx") != 0)
    return onnx_node_error(g, node, error, "operator of domain '%s' is not supported",
                           node->domain);
  const OnnxOp *op = node_op(g, n);
  if (op == NULL)
    return onnx_node_error(g, node, error,
                           "unsupported operator '%s' (docs/MODELS.md lists those stagger "
                           "imports)",
                           node->op);
  node->def = op;
  for (int i = 0; i < node->n_in; i++) {
    const OnnxValue *v = onnx_in(g, node, i);
    if (v != NULL && v->rank < 0)
      return onnx_node_error(g, node, error, "input '%s' has no known shape", v->name);
  }
  if (!op->infer(g, node, error))
    return FALSE;
  OnnxKind kind = node_kind(g, node);
  for (int i = 0; i < node->n_out; i++) {
    OnnxValue *v = onnx_out(g, node, i);
    if (v == NULL)
      continue;
    if (v->rank < 0)
      return onnx_node_error(g, node, error, "output %d is not one stagger can follow", i);
    v->kind = kind;
    if (kind == ONNX_ACT) { /* contents are per sample: not constants */
      g_clear_pointer(&v->data, g_free);
      v->n_data = 0;
    }
  }
  return TRUE;
}

void
onnx_weight_initializers(const OnnxGraph *g, int index, GHashTable *out)
{
  /* Most values asked about are activations or initializers themselves
   * (every input of every node of a graph is): no walk. */
  const OnnxValue *first = onnx_value(g, index);
  if (first == NULL || first->kind != ONNX_WEIGHT)
    return;
  if (first->initializer) {
    g_hash_table_add(out, GINT_TO_POINTER(index + 1));
    return;
  }
  g_autoptr(GHashTable) seen = g_hash_table_new(NULL, NULL);
  g_autoptr(GArray) stack = g_array_new(FALSE, FALSE, sizeof(int));
  g_array_append_val(stack, index);
  while (stack->len > 0) {
    int v = g_array_index(stack, int, stack->len - 1);
    g_array_set_size(stack, stack->len - 1);
    const OnnxValue *value = onnx_value(g, v);
    if (value == NULL || value->kind != ONNX_WEIGHT ||
        !g_hash_table_add(seen, GINT_TO_POINTER(v + 1)))
      continue;
    if (value->initializer) {
      g_hash_table_add(out, GINT_TO_POINTER(v + 1));
      continue;
    }
    if (value->producer < 0)
      continue;
    const OnnxNode *node = &g->nodes[value->producer];
    for (int i = 0; i < node->n_in; i++)
      if (node->in[i] >= 0)
        g_array_append_val(stack, node->in[i]);
  }
}

/* Marks the initializers value `index` is made of as parameters. */
static void
mark_params(const OnnxGraph *g, int index)
{
  g_autoptr(GHashTable) sources = g_hash_table_new(NULL, NULL);
  onnx_weight_initializers(g, index, sources);
  GHashTableIter iter;
  gpointer key;
  g_hash_table_iter_init(&iter, sources);
  while (g_hash_table_iter_next(&iter, &key, NULL))
    onnx_value(g, GPOINTER_TO_INT(key) - 1)->param = TRUE;
}

/* Probes that say something: not all one value (zero-initialized weights
 * of one shape would all look alike). */
static gboolean
telling(GBytes *probe, int elem_bytes)
{
  gsize n;
  const uint8_t *b = g_bytes_get_data(probe, &n);
  for (gsize i = (gsize)elem_bytes; i + (gsize)elem_bytes <= n; i += (gsize)elem_bytes)
    if (memcmp(b, b + i, (gsize)elem_bytes) != 0)
      return TRUE;
  return FALSE;
}

/* Exporters that fold constants turn a tied head's Transpose of the
 * embedding table into a transposed copy, an initializer of its own:
 * torch's count has it once. A parameter matrix whose probed columns are
 * the probed rows of one stored before it (or whose rows are, for an
 * untransposed copy) is that one's copy: not counted, and read as the
 * original. Exporters store the model's own tensors first. */
static char *
matrix_key(int64_t rows, int64_t cols, int elem)
{
  return g_strdup_printf("%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT "/%d", rows, cols, elem);
}

static void
find_copies(OnnxGraph *g, StImportResult *result)
{
  /* Originals that can be told apart, by shape: "rows x cols / elem" ->
   * GArray of value indices, in file order. */
  g_autoptr(GHashTable) by_shape =
    g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
  for (guint j = 0; j < g->values->len; j++) {
    const OnnxValue *e = onnx_value(g, (int)j);
    if (!e->param || e->probe_rows == NULL || !telling(e->probe_rows, onnx_elem_bytes(e->elem)))
      continue;
    char *key = matrix_key(e->dims[0], e->dims[1], e->elem);
    GArray *list = g_hash_table_lookup(by_shape, key);
    if (list == NULL) {
      list = g_array_new(FALSE, FALSE, sizeof(int));
      g_hash_table_insert(by_shape, key, list);
    } else {
      g_free(key);
    }
    int index = (int)j;
    g_array_append_val(list, index);
  }
  for (guint i = 0; i < g->values->len; i++) {
    OnnxValue *w = onnx_value(g, (int)i);
    if (!w->param || w->probe_cols == NULL)
      continue;
    for (int transposed = 1; transposed >= 0 && w->copy_of < 0; transposed--) {
      g_autofree char *key = transposed ? matrix_key(w->dims[1], w->dims[0], w->elem)
                                        : matrix_key(w->dims[0], w->dims[1], w->elem);
      GArray *list = g_hash_table_lookup(by_shape, key);
      for (guint k = 0; list != NULL && k < list->len && w->copy_of < 0; k++) {
        int j = g_array_index(list, int, k);
        const OnnxValue *e = onnx_value(g, j);
        if (j >= (int)i || e->copy_of >= 0)
          break;
        gboolean copy = transposed ? g_bytes_equal(w->probe_cols, e->probe_rows)
                                   : g_bytes_equal(w->probe_rows, e->probe_rows) &&
                                       g_bytes_equal(w->probe_cols, e->probe_cols);
        if (!copy)
          continue;
        w->copy_of = j;
        w->param = FALSE;
        if (result != NULL)
          st_import_warn(result,
                         "initializer '%s' is a%s copy of '%s' (a tied weight that the "
                         "exporter folded into a tensor of its own): counted once, as tied",
                         w->name, transposed ? " transposed" : "n exact", e->name);
      }
    }
  }
}

gboolean
onnx_graph_infer(OnnxGraph *g, StImportResult *result, GError **error)
{
  for (guint i = 0; i < g->values->len; i++) {
    OnnxValue *v = onnx_value(g, (int)i);
    if (v->initializer || (v->producer < 0 && !v->graph_input)) /* tensor attributes too */
      v->kind = v->initializer && floating(v->elem) && onnx_elems(v) > 1 ? ONNX_WEIGHT
                                                                         : ONNX_CONST;
  }
  onnx_value(g, g->input)->kind = ONNX_ACT;
  for (int n = 0; n < g->n_nodes; n++)
    if (!infer_node(g, n, error))
      return FALSE;
  const OnnxValue *out = onnx_value(g, g->output);
  if (out->kind != ONNX_ACT)
    return onnx_node_error(g, &g->nodes[MAX(out->producer, 0)], error,
                           "the graph's output '%s' does not depend on its input", out->name);
  for (int n = 0; n < g->n_nodes; n++) {
    const OnnxNode *node = &g->nodes[n];
    const OnnxOp *op = node->def;
    const OnnxValue *first = onnx_out(g, node, 0);
    if (first == NULL || first->kind != ONNX_ACT)
      continue;
    for (int i = 0; i < node->n_in && i < 32; i++)
      if (node->in[i] >= 0 && (op->weights & (1u << i)))
        mark_params(g, node->in[i]);
  }
  find_copies(g, result);
  return TRUE;
}
