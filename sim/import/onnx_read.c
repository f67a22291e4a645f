/* onnx_read.c: an ONNX file into an OnnxGraph (onnx_graph.h).
 *
 * protobuf-c parses the file against onnx.proto's subset; this file turns
 * the messages into the graph's values and nodes and checks what the rest
 * of the importer relies on: names resolve to values defined earlier (the
 * ONNX rule: nodes are stored in topological order), shapes have at most
 * ONNX_MAX_RANK non-negative dims, the contents that are read have as many
 * elements as their shape says, one sample input and one output. The parsed
 * messages are freed before it returns.
 */
#include <glib/gstdio.h>
#include <stdarg.h>
#include <string.h>

#include "base/error.h"
#include "base/util.h"
#include "import/onnx_graph.h"
#include "onnx.pb-c.h"

/* protobuf's own limit on a message; larger models keep their weights in
 * external data files, which are not read. */
#define MAX_FILE_BYTES ((gsize)2 << 30)

static gboolean
read_error(const char *path, GError **error, const char *format, ...) G_GNUC_PRINTF(3, 4);

static gboolean
read_error(const char *path, GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_INVALID, "%s: %s", path, message);
  return FALSE;
}

static void
value_free(gpointer data)
{
  OnnxValue *v = data;
  g_free(v->name);
  g_free(v->data);
  if (v->probe_rows != NULL)
    g_bytes_unref(v->probe_rows);
  if (v->probe_cols != NULL)
    g_bytes_unref(v->probe_cols);
  g_free(v);
}

static int
add_value(OnnxGraph *g, const char *name)
{
  OnnxValue *v = g_new0(OnnxValue, 1);
  v->name = g_strdup(name);
  v->rank = -1;
  v->producer = -1;
  v->copy_of = -1;
  g_ptr_array_add(g->values, v);
  int index = (int)g->values->len - 1;
  if (name[0] != '\0')
    g_hash_table_insert(g->by_name, v->name, GINT_TO_POINTER(index + 1));
  return index;
}

static int
find_value(const OnnxGraph *g, const char *name)
{
  return GPOINTER_TO_INT(g_hash_table_lookup(g->by_name, name)) - 1;
}

/* ---- tensors -------------------------------------------------------------- */

/* Element `i` of raw little-endian data of type `elem`. */
static gboolean
raw_element(int elem, const uint8_t *raw, int64_t i, double *out)
{
  switch (elem) {
  case ONNX_FLOAT: {
    float f;
    memcpy(&f, raw + 4 * i, 4);
    *out = f;
    return TRUE;
  }
  case ONNX_DOUBLE:
    memcpy(out, raw + 8 * i, 8);
    return TRUE;
  case ONNX_INT64: {
    int64_t v;
    memcpy(&v, raw + 8 * i, 8);
    *out = (double)v;
    return TRUE;
  }
  case ONNX_INT32: {
    int32_t v;
    memcpy(&v, raw + 4 * i, 4);
    *out = v;
    return TRUE;
  }
  case ONNX_INT8:
    *out = (int8_t)raw[i];
    return TRUE;
  case ONNX_UINT8:
  case ONNX_BOOL:
    *out = raw[i];
    return TRUE;
  default:
    return FALSE;
  }
}

/* The contents of a small tensor into v->data, when its type is one shape
 * arithmetic uses; left NULL otherwise (external data, large, float16). */
static gboolean
read_contents(const char *path, const Onnx__TensorProto *t, OnnxValue *v, GError **error)
{
  int64_t n = onnx_elems(v);
  if (n > ONNX_MAX_DATA ||
      (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
    return TRUE;
  int bytes = onnx_elem_bytes(v->elem);
  static const uint8_t zeros[8] = {0};
  double probe;
  if (bytes == 0 || !raw_element(v->elem, zeros, 0, &probe)) /* a type not decoded here */
    return TRUE;
  double *data = g_new0(double, MAX(n, 1));
  gboolean ok = TRUE;
  if (t->has_raw_data) {
    ok = t->raw_data.len == (size_t)(n * bytes);
    for (int64_t i = 0; ok && i < n; i++)
      raw_element(v->elem, t->raw_data.data, i, &data[i]);
  } else if (v->elem == ONNX_FLOAT) {
    ok = t->n_float_data == (size_t)n;
    for (int64_t i = 0; ok && i < n; i++)
      data[i] = t->float_data[i];
  } else if (v->elem == ONNX_DOUBLE) {
    ok = t->n_double_data == (size_t)n;
    for (int64_t i = 0; ok && i < n; i++)
      data[i] = t->double_data[i];
  } else if (v->elem == ONNX_INT64) {
    ok = t->n_int64_data == (size_t)n;
    for (int64_t i = 0; ok && i < n; i++)
      data[i] = (double)t->int64_data[i];
  } else {
    ok = t->n_int32_data == (size_t)n;
    for (int64_t i = 0; ok && i < n; i++)
      data[i] = t->int32_data[i];
  }
  if (!ok) {
    g_free(data);
    g_autofree char *shape = onnx_shape_text(v);
    return read_error(path, error,
                      "tensor '%s': its data does not hold the %" G_GINT64_FORMAT
                      " elements of %s",
                      v->name, n, shape);
  }
  v->data = data;
  v->n_data = n;
  return TRUE;
}

/* Probes of a matrix whose elements are in the file (onnx_graph.h): rows
 * 0, n/2, n-1 and columns 0, m/2, m-1, as raw little-endian elements. */
static void
read_probes(const Onnx__TensorProto *t, OnnxValue *v)
{
  const uint8_t *raw = NULL;
  int bytes = onnx_elem_bytes(v->elem);
  if (v->rank != 2 || bytes == 0 || v->dims[0] < 1 || v->dims[1] < 1)
    return;
  int64_t n = v->dims[0], m = v->dims[1];
  if (t->has_raw_data && t->raw_data.len == (size_t)(n * m * bytes))
    raw = t->raw_data.data;
  else if (v->elem == ONNX_FLOAT && t->n_float_data == (size_t)(n * m))
    raw = (const uint8_t *)t->float_data;
  if (raw == NULL)
    return;
  const int64_t rows[3] = {0, n / 2, n - 1}, cols[3] = {0, m / 2, m - 1};
  GByteArray *r = g_byte_array_sized_new((guint)(3 * m * bytes));
  GByteArray *c = g_byte_array_sized_new((guint)(3 * n * bytes));
  for (int k = 0; k < 3; k++) {
    g_byte_array_append(r, raw + rows[k] * m * bytes, (guint)(m * bytes));
    for (int64_t i = 0; i < n; i++)
      g_byte_array_append(c, raw + (i * m + cols[k]) * bytes, (guint)bytes);
  }
  v->probe_rows = g_byte_array_free_to_bytes(r);
  v->probe_cols = g_byte_array_free_to_bytes(c);
}

/* A TensorProto (an initializer, a tensor attribute) as value `index`. */
static gboolean
read_tensor(OnnxGraph *g, const Onnx__TensorProto *t, int index, GError **error)
{
  OnnxValue *v = onnx_value(g, index);
  if (t->n_dims > ONNX_MAX_RANK)
    return read_error(g->path, error, "tensor '%s': %zu dims, more than %d", v->name, t->n_dims,
                      ONNX_MAX_RANK);
  v->elem = t->has_data_type ? t->data_type : 0;
  v->rank = (int)t->n_dims;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0)
      return read_error(g->path, error, "tensor '%s': dim %zu is negative", v->name, i);
    v->dims[i] = t->dims[i];
  }
  if (!onnx_dims_fit(v->rank, v->dims))
    return read_error(g->path, error, "tensor '%s': more than 2^50 elements", v->name);
  read_probes(t, v);
  return read_contents(g->path, t, v, error);
}

/* ---- the sample input ------------------------------------------------------ */

static gboolean
read_input(OnnxGraph *g, const Onnx__ValueInfoProto *info, GHashTable *dims, GError **error)
{
  int index = add_value(g, info->name);
  OnnxValue *v = onnx_value(g, index);
  v->graph_input = TRUE;
  g->input = index;
  const Onnx__TypeProto *type = info->type;
  if (type == NULL || type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
      type->tensor_type->shape == NULL)
    return read_error(g->path, error, "input '%s': not a tensor of known rank", v->name);
  const Onnx__TensorShapeProto *shape = type->tensor_type->shape;
  if (shape->n_dim < 1 || shape->n_dim > ONNX_MAX_RANK)
    return read_error(g->path, error,
                      "input '%s': %zu dims (expected the batch, then 1 to %d per sample)",
                      v->name, shape->n_dim, ONNX_MAX_RANK - 1);
  v->elem = type->tensor_type->elem_type;
  v->rank = (int)shape->n_dim;
  for (size_t i = 0; i < shape->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = shape->dim[i];
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
        d->dim_value >= 1) {
      v->dims[i] = d->dim_value;
      continue;
    }
    if (i == 0) { /* a symbolic batch: per-sample numbers at batch 1 */
      v->dims[i] = 1;
      continue;
    }
    const char *param = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                          ? d->dim_param : "";
    const gint64 *size = dims != NULL && param[0] != '\0' ? g_hash_table_lookup(dims, param)
                                                          : NULL;
    if (size == NULL)
      return read_error(g->path, error,
                        "input '%s': dim %zu has no size ('%s'): give it with --dim %s=N, "
                        "or export with a fixed shape",
                        v->name, i, param, param[0] != '\0' ? param : "NAME");
    v->dims[i] = *size;
  }
  if (!onnx_dims_fit(v->rank, v->dims))
    return read_error(g->path, error, "input '%s': more than 2^50 elements", v->name);
  g->batch = v->dims[0];
  return TRUE;
}

/* ---- nodes ---------------------------------------------------------------- */

static gboolean
read_attr(OnnxGraph *g, const OnnxNode *node, const Onnx__AttributeProto *a, OnnxAttr *out,
          GError **error)
{
  out->name = g_strdup(a->name != NULL ? a->name : "");
  out->type = a->has_type ? (int)a->type : 0;
  out->i = a->i;
  out->f = a->f;
  out->value = -1;
  if (a->has_s)
    out->s = g_strndup((const char *)a->s.data, a->s.len);
  if (a->n_ints > 0) {
    out->n_ints = (int)MIN(a->n_ints, (size_t)G_MAXINT);
    out->ints = g_memdup2(a->ints, sizeof(int64_t) * (size_t)out->n_ints);
  }
  if (a->n_floats > 0) {
    out->n_floats = (int)MIN(a->n_floats, (size_t)G_MAXINT);
    out->floats = g_new(double, out->n_floats);
    for (int i = 0; i < out->n_floats; i++)
      out->floats[i] = a->floats[i];
  }
  if (a->t != NULL) {
    g_autofree char *name = g_strdup_printf("%s/%s", node->name, out->name);
    out->value = add_value(g, "");
    g_free(onnx_value(g, out->value)->name);
    onnx_value(g, out->value)->name = g_steal_pointer(&name);
    if (!read_tensor(g, a->t, out->value, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
read_node(OnnxGraph *g, int index, const Onnx__NodeProto *p, GError **error)
{
  OnnxNode *node = &g->nodes[index];
  const char *op = p->op_type != NULL ? p->op_type : "";
  node->op = g_string_chunk_insert_const(g->text, op);
  node->domain = g_string_chunk_insert_const(g->text, p->domain != NULL ? p->domain : "");
  if (p->name != NULL && p->name[0] != '\0') {
    node->name = g_string_chunk_insert(g->text, p->name);
  } else {
    char digits[ST_INT_TEXT_SIZE];
    g_autofree char *name = g_strconcat(op, "#", st_int_text(index, digits), NULL);
    node->name = g_string_chunk_insert(g->text, name);
  }
  if (op[0] == '\0')
    return onnx_node_error(g, node, error, "no op_type");
  node->n_in = (int)MIN(p->n_input, (size_t)G_MAXINT / 2);
  node->in = g_new(int, MAX(node->n_in, 1));
  for (int i = 0; i < node->n_in; i++) {
    const char *name = p->input[i];
    node->in[i] = name[0] == '\0' ? -1 : find_value(g, name);
    if (name[0] != '\0' && node->in[i] < 0)
      return onnx_node_error(g, node, error,
                             "input '%s' is made by no earlier node (ONNX stores nodes in "
                             "topological order)",
                             name);
    if (node->in[i] >= 0)
      onnx_value(g, node->in[i])->n_consumers++;
  }
  node->n_attrs = (int)MIN(p->n_attribute, (size_t)G_MAXINT / 2);
  node->attrs = g_new0(OnnxAttr, MAX(node->n_attrs, 1));
  for (int i = 0; i < node->n_attrs; i++)
    if (!read_attr(g, node, p->attribute[i], &node->attrs[i], error))
      return FALSE;
  node->n_out = (int)MIN(p->n_output, (size_t)G_MAXINT / 2);
  node->out = g_new(int, MAX(node->n_out, 1));
  for (int i = 0; i < node->n_out; i++) {
    const char *name = p->output[i];
    if (name[0] != '\0' && find_value(g, name) >= 0)
      return onnx_node_error(g, node, error, "output '%s' is already defined", name);
    node->out[i] = name[0] == '\0' ? -1 : add_value(g, name);
    if (node->out[i] >= 0)
      onnx_value(g, node->out[i])->producer = index;
  }
  return TRUE;
}

/* ---- the model -------------------------------------------------------------- */

static gboolean
read_opset(OnnxGraph *g, const Onnx__ModelProto *m, GError **error)
{
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const char *domain = m->opset_import[i]->domain;
    if (domain == NULL || domain[0] == '\0' || strcmp(domain, "ai.onnx") == 0)
      g->opset = m->opset_import[i]->version;
  }
  if (g->opset < 1)
    return read_error(g->path, error, "no opset_import for the default domain");
  if (m->producer_name != NULL)
    g->producer = g_strdup_printf("%s%s%s", m->producer_name,
                                  m->producer_version != NULL ? " " : "",
                                  m->producer_version != NULL ? m->producer_version : "");
  else
    g->producer = g_strdup("");
  return TRUE;
}

static gboolean
read_graph(OnnxGraph *g, const Onnx__GraphProto *p, GHashTable *dims, GError **error)
{
  for (size_t i = 0; i < p->n_initializer; i++) {
    const char *name = p->initializer[i]->name != NULL ? p->initializer[i]->name : "";
    if (name[0] == '\0' || find_value(g, name) >= 0)
      return read_error(g->path, error, "initializer %zu: missing or repeated name '%s'", i,
                        name);
    int index = add_value(g, name);
    onnx_value(g, index)->initializer = TRUE;
    if (!read_tensor(g, p->initializer[i], index, error))
      return FALSE;
  }
  /* The sample input: the one graph input that is no initializer (older
   * exporters list initializers among the inputs too). */
  g->input = -1;
  for (size_t i = 0; i < p->n_input; i++) {
    const char *name = p->input[i]->name != NULL ? p->input[i]->name : "";
    if (find_value(g, name) >= 0 && onnx_value(g, find_value(g, name))->initializer)
      continue;
    if (g->input >= 0)
      return read_error(g->path, error,
                        "inputs '%s' and '%s': a stagger model takes one input per sample "
                        "(export without the others, or make them constants)",
                        onnx_value(g, g->input)->name, name);
    if (name[0] == '\0' || find_value(g, name) >= 0)
      return read_error(g->path, error, "input %zu: missing or repeated name '%s'", i, name);
    if (!read_input(g, p->input[i], dims, error))
      return FALSE;
  }
  if (g->input < 0)
    return read_error(g->path, error, "the graph has no input besides its initializers");

  g->n_nodes = (int)MIN(p->n_node, (size_t)G_MAXINT / 2);
  g->nodes = g_new0(OnnxNode, MAX(g->n_nodes, 1));
  for (int i = 0; i < g->n_nodes; i++)
    if (!read_node(g, i, p->node[i], error))
      return FALSE;

  if (p->n_output != 1) {
    g_autoptr(GString) names = g_string_new(NULL);
    for (size_t i = 0; i < p->n_output; i++)
      g_string_append_printf(names, "%s'%s'", i > 0 ? ", " : "", p->output[i]->name);
    return read_error(g->path, error,
                      "%zu outputs (%s): a stagger model has one (export the one to train)",
                      p->n_output, names->str);
  }
  g->output = find_value(g, p->output[0]->name != NULL ? p->output[0]->name : "");
  if (g->output < 0)
    return read_error(g->path, error, "output '%s' is made by no node", p->output[0]->name);
  return TRUE;
}

OnnxGraph *
onnx_graph_read(const char *path, GHashTable *dims, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  GError *local = NULL;
  g_autoptr(GMappedFile) file = g_mapped_file_new(path, FALSE, &local);
  if (file == NULL) {
    g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return NULL;
  }
  gsize length = g_mapped_file_get_length(file);
  g_autoptr(OnnxGraph) g = g_new0(OnnxGraph, 1);
  g->path = g_strdup(path);
  g->values = g_ptr_array_new_with_free_func(value_free);
  g->by_name = g_hash_table_new(g_str_hash, g_str_equal);
  g->text = g_string_chunk_new(64 * 1024);
  g->input = g->output = -1;
  if (length > MAX_FILE_BYTES) {
    read_error(path, error, "%zu bytes, more than protobuf's 2 GiB (keep large weights in "
                            "external data)", length);
    return NULL;
  }
  Onnx__ModelProto *m = onnx__model_proto__unpack(
    NULL, length, (const uint8_t *)(length > 0 ? g_mapped_file_get_contents(file) : ""));
  if (m == NULL || m->graph == NULL) {
    if (m != NULL)
      onnx__model_proto__free_unpacked(m, NULL);
    read_error(path, error, "not an ONNX model (no ModelProto with a graph)");
    return NULL;
  }
  gboolean ok = read_opset(g, m, error) && read_graph(g, m->graph, dims, error);
  onnx__model_proto__free_unpacked(m, NULL);
  return ok ? g_steal_pointer(&g) : NULL;
}

void
onnx_graph_free(OnnxGraph *g)
{
  if (g == NULL)
    return;
  for (int i = 0; i < g->n_nodes; i++) {
    OnnxNode *node = &g->nodes[i];
    for (int a = 0; a < node->n_attrs; a++) {
      g_free(node->attrs[a].name);
      g_free(node->attrs[a].s);
      g_free(node->attrs[a].ints);
      g_free(node->attrs[a].floats);
    }
    g_free(node->attrs);
    g_free(node->in);
    g_free(node->out);
  }
  if (g->text != NULL)
    g_string_chunk_free(g->text);
  g_free(g->nodes);
  if (g->by_name != NULL)
    g_hash_table_unref(g->by_name);
  if (g->values != NULL)
    g_ptr_array_unref(g->values);
  g_free(g->path);
  g_free(g->producer);
  g_free(g);
}

/* ---- accessors (onnx_graph.h) ----------------------------------------------- */

OnnxValue *
onnx_in(const OnnxGraph *g, const OnnxNode *node, int i)
{
  return i < node->n_in ? onnx_value(g, node->in[i]) : NULL;
}

OnnxValue *
onnx_out(const OnnxGraph *g, const OnnxNode *node, int i)
{
  return i < node->n_out ? onnx_value(g, node->out[i]) : NULL;
}

const OnnxAttr *
onnx_attr(const OnnxNode *node, const char *name)
{
  for (int i = 0; i < node->n_attrs; i++)
    if (strcmp(node->attrs[i].name, name) == 0)
      return &node->attrs[i];
  return NULL;
}

int64_t
onnx_attr_int(const OnnxNode *node, const char *name, int64_t fallback)
{
  const OnnxAttr *a = onnx_attr(node, name);
  return a != NULL ? a->i : fallback;
}

double
onnx_attr_float(const OnnxNode *node, const char *name, double fallback)
{
  const OnnxAttr *a = onnx_attr(node, name);
  return a != NULL ? a->f : fallback;
}

const int64_t *
onnx_attr_ints(const OnnxNode *node, const char *name, int *n)
{
  const OnnxAttr *a = onnx_attr(node, name);
  *n = a != NULL ? a->n_ints : 0;
  return a != NULL ? a->ints : NULL;
}

gboolean
onnx_dims_fit(int rank, const int64_t *dims)
{
  int64_t span = 1; /* <= ONNX_MAX_ELEMS: the product never overflows */
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0 || dims[i] > ONNX_MAX_ELEMS / span)
      return FALSE;
    span *= MAX(dims[i], 1);
  }
  return TRUE;
}

int64_t
onnx_elems(const OnnxValue *v)
{
  int64_t n = 1;
  for (int i = 0; i < v->rank; i++)
    n *= v->dims[i];
  return n;
}

int
onnx_elem_bytes(int elem)
{
  switch (elem) {
  case ONNX_FLOAT:
  case ONNX_INT32:
  case 12: /* uint32 */
    return 4;
  case ONNX_INT64:
  case ONNX_DOUBLE:
  case 13: /* uint64 */
    return 8;
  case ONNX_FLOAT16:
  case ONNX_BFLOAT16:
  case 4: /* uint16 */
  case 5: /* int16 */
    return 2;
  case ONNX_UINT8:
  case ONNX_INT8:
  case ONNX_BOOL:
    return 1;
  default:
    return 0;
  }
}

char *
onnx_shape_text(const OnnxValue *v)
{
  if (v->rank < 0)
    return g_strdup("[?]");
  GString *s = g_string_new("[");
  for (int i = 0; i < v->rank; i++)
    g_string_append_printf(s, "%s%" G_GINT64_FORMAT, i > 0 ? "," : "", v->dims[i]);
  g_string_append_c(s, ']');
  return g_string_free(s, FALSE);
}

gboolean
onnx_node_error(const OnnxGraph *g, const OnnxNode *node, GError **error, const char *format,
                ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_INVALID, "%s: node '%s' (%s): %s", g->path,
              node->name, node->op, message);
  return FALSE;
}
