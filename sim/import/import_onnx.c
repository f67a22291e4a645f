/* import_onnx.c: `--onnx model.onnx`, an exported network, into a model
 * file.
 *
 * The file is read into a graph (onnx_read.c), every value's shape and kind
 * inferred and the parameters found (onnx_infer.c), the graph cut into
 * segments and each described by stagger layers (onnx_segment.c and the
 * rules of onnx_map_*.c, tried in the order below, blocks before their
 * parts), a proposal taken only when the model loader derives from it the
 * segment's own output shape and parameters (onnx_check.c). A softmax
 * cross-entropy loss is appended (the exported graph ends at its logits)
 * unless --no-loss.
 *
 * The result also carries the graph's own totals, counted on its nodes as
 * exported (result->graph_params, graph_dense_flops), so that a test can
 * hold them against the exporting framework's count independently of how
 * the nodes were mapped.
 */
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "import/import_private.h"
#include "import/onnx_map.h"
#include "import/onnx_ops.h"

static const OnnxRule *const RULES[] = {
  st_onnx_rules_residual,
  st_onnx_rules_transformer,
  st_onnx_rules_llama,
  st_onnx_rules_basic,
};

/* The per-sample shape of a cut as a JSON array. */
static cJSON *
sample_shape(const OnnxValue *v)
{
  cJSON *shape = cJSON_CreateArray();
  for (int k = 1; k < v->rank; k++)
    cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)v->dims[k]));
  return shape;
}

/* Frees the names a rejected proposal took. */
static void
release_names(OnnxMap *m, const cJSON *layers)
{
  const cJSON *layer;
  cJSON_ArrayForEach(layer, layers)
  {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(layer, "name");
    if (cJSON_IsString(name))
      onnx_layer_name_release(m, name->valuestring);
  }
}

/* The distinct operators of a segment, in order: "Conv, BatchNormalization,
 * Clip, Add". Transfer full. */
static char *
operators(const OnnxMap *m, int seg)
{
  const OnnxSegment *s = &m->segs[seg];
  g_autoptr(GPtrArray) ops = g_ptr_array_new();
  for (int k = 0; k < s->n_nodes; k++) {
    const char *op = m->g->nodes[s->nodes[k]].op;
    gboolean seen = FALSE;
    for (guint i = 0; i < ops->len && !seen; i++)
      seen = strcmp(ops->pdata[i], op) == 0;
    if (!seen)
      g_ptr_array_add(ops, (gpointer)op);
  }
  g_ptr_array_add(ops, NULL);
  return g_strjoinv(", ", (char **)ops->pdata);
}

/* Custom layers are reported once per kind (the same operators, the same
 * reason), naming the first few layers and counting the others. */
#define NAMED 4

typedef struct {
  char *ops, *why;
  char *names[NAMED]; /* the first layers of the kind */
  guint n;            /* layers of the kind */
} CustomKind;

static void
custom_kind_free(gpointer data)
{
  CustomKind *kind = data;
  g_free(kind->ops);
  g_free(kind->why);
  for (guint k = 0; k < MIN(kind->n, NAMED); k++)
    g_free(kind->names[k]);
  g_free(kind);
}

static void
note_custom(OnnxMap *m, const char *name, const char *ops, const char *why)
{
  g_autofree char *key = g_strconcat(ops, why, NULL);
  CustomKind *kind = g_hash_table_lookup(m->customs, key);
  if (kind == NULL) {
    kind = g_new0(CustomKind, 1);
    kind->ops = g_strdup(ops);
    kind->why = g_strdup(why);
    g_hash_table_insert(m->customs, g_strdup(key), kind);
    g_ptr_array_add(m->custom_order, g_steal_pointer(&key));
  }
  if (kind->n < NAMED)
    kind->names[kind->n] = g_strdup(name);
  kind->n++;
}

static void
warn_customs(OnnxMap *m)
{
  for (guint i = 0; i < m->custom_order->len; i++) {
    const CustomKind *kind = g_hash_table_lookup(m->customs, m->custom_order->pdata[i]);
    guint n = kind->n;
    g_autoptr(GString) list = g_string_new(NULL);
    for (guint k = 0; k < n && k < NAMED; k++)
      g_string_append_printf(list, "%s'%s'", k > 0 ? ", " : "", kind->names[k]);
    if (n > NAMED)
      g_string_append_printf(list, " and %u more", n - NAMED);
    st_import_warn(m->result,
                   "%u custom layer%s (numbers computed from the graph) where no stagger layer "
                   "type describes the nodes (%s): %s%s",
                   n, n > 1 ? "s" : "", kind->ops, list->str, kind->why);
  }
}

/* Describes segment `seg` (and maybe those after it) into `layers`;
 * returns how many segments were covered. */
static int
map_one(OnnxMap *m, int seg, cJSON *layers)
{
  g_autoptr(GString) why = g_string_new(NULL);
  /* One proposal array and one reason, emptied between rules (some 20
   * rules are tried on each segment). */
  g_autoptr(cJSON) proposal = cJSON_CreateArray();
  g_autoptr(GString) reason = g_string_new(NULL);
  for (guint t = 0; t < G_N_ELEMENTS(RULES); t++) {
    for (const OnnxRule *rule = RULES[t]; rule->name != NULL; rule++) {
      g_string_truncate(reason, 0);
      int n = rule->match(m, seg, proposal, reason);
      if (n > 0 && onnx_check_proposal(m, seg, n, proposal, rule->dense_only, reason)) {
        onnx_segments_count(m, seg, n);
        while (proposal->child != NULL)
          cJSON_AddItemToArray(layers, cJSON_DetachItemViaPointer(proposal, proposal->child));
        return n;
      }
      if (n > 0)
        release_names(m, proposal);
      while (proposal->child != NULL)
        cJSON_DeleteItemFromArray(proposal, 0);
      if (reason->len > 0 && why->len == 0)
        g_string_printf(why, "; as a %s, %s", rule->name, reason->str);
    }
  }
  g_autofree char *ops = operators(m, seg);
  /* Made in an array of its own: finding the last of `layers` walks it. */
  g_autoptr(cJSON) one = cJSON_CreateArray();
  onnx_custom_layer(m, seg, 1, one);
  onnx_segments_count(m, seg, 1);
  m->result->custom_layers++;
  cJSON *layer = cJSON_DetachItemFromArray(one, 0);
  cJSON_AddItemToArray(layers, layer);
  note_custom(m, cJSON_GetObjectItemCaseSensitive(layer, "name")->valuestring, ops, why->str);
  return 1;
}

/* The model's element type: its parameters' (fp32 when none). */
static const char *
model_dtype(const OnnxGraph *g, int *bytes)
{
  for (guint i = 0; i < g->values->len; i++) {
    const OnnxValue *v = onnx_value(g, (int)i);
    if (!v->param)
      continue;
    *bytes = v->elem == ONNX_FLOAT16 || v->elem == ONNX_BFLOAT16 ? 2 : 4;
    return v->elem == ONNX_FLOAT16 ? "fp16" : v->elem == ONNX_BFLOAT16 ? "bf16" : "fp32";
  }
  *bytes = 4;
  return "fp32";
}

/* The graph's own totals (every activation node, every parameter). */
static void
graph_totals(const OnnxGraph *g, StImportResult *result)
{
  double dense = 0;
  for (int n = 0; n < g->n_nodes; n++) {
    const OnnxValue *first = onnx_out(g, &g->nodes[n], 0);
    if (first == NULL || first->kind != ONNX_ACT)
      continue;
    double d;
    onnx_node_flops(g, &g->nodes[n], &d);
    dense += d;
  }
  result->graph_dense_flops = dense / (double)g->batch;
  result->graph_params = 0;
  for (guint i = 0; i < g->values->len; i++)
    if (onnx_value(g, (int)i)->param)
      result->graph_params += onnx_elems(onnx_value(g, (int)i));
  result->graph_nodes = g->n_nodes;
}

static char *
model_name(const char *path, const StImportOptions *options)
{
  if (options->name != NULL)
    return g_strdup(options->name);
  char *base = g_path_get_basename(path);
  char *dot = strrchr(base, '.');
  if (dot != NULL && dot != base)
    *dot = '\0';
  return base;
}

static gboolean
import_onnx(const char *path, const StImportOptions *options, StImportResult *result,
            GError **error)
{
  g_autoptr(OnnxGraph) g = onnx_graph_read(path, options->dims, error);
  if (g == NULL || !onnx_graph_infer(g, result, error))
    return FALSE;
  graph_totals(g, result);
  OnnxMap m = {
    .g = g,
    .counted = g_hash_table_new(NULL, NULL),
    .names = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
    .suffix_next = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
    .embedding_table = -1,
    .loss = !options->no_loss,
    .result = result,
    .customs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, custom_kind_free),
    .custom_order = g_ptr_array_new_with_free_func(g_free),
    .checked = onnx_checked_new(),
  };
  m.dtype = model_dtype(g, &m.dtype_bytes);
  g_autoptr(cJSON) layers = cJSON_CreateArray();
  gboolean ok = onnx_segments(&m, error);
  for (int seg = 0; ok && seg < m.n_segs;)
    seg += map_one(&m, seg, layers);
  if (ok && !options->no_loss) {
    g_autofree char *name = g_hash_table_contains(m.names, "loss") ? g_strdup("loss_1")
                                                                    : g_strdup("loss");
    st_import_layer(layers, name, "softmax_cross_entropy");
  }
  warn_customs(&m);
  onnx_segments_clear(&m);
  g_hash_table_unref(m.customs);
  g_ptr_array_unref(m.custom_order);
  g_hash_table_unref(m.counted);
  g_hash_table_unref(m.names);
  g_hash_table_unref(m.suffix_next);
  g_hash_table_unref(m.checked);
  if (!ok)
    return FALSE;

  g_autofree char *name = model_name(path, options);
  g_autofree char *base = g_path_get_basename(path);
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "name", name);
  g_autofree char *note = g_strdup_printf(
    "imported by stagger from %s (%s, opset %" G_GINT64_FORMAT "): %d nodes, %" G_GINT64_FORMAT
    " parameters; %d custom layers",
    base, g->producer[0] != '\0' ? g->producer : "unknown producer", g->opset, g->n_nodes,
    result->graph_params, result->custom_layers);
  cJSON_AddStringToObject(root, "note", note);
  cJSON_AddItemToObject(root, "input", sample_shape(onnx_value(g, g->input)));
  if (strcmp(m.dtype, "fp32") != 0)
    cJSON_AddStringToObject(root, "dtype", m.dtype);
  cJSON_AddItemToObject(root, "layers", g_steal_pointer(&layers));
  result->model = root;
  return TRUE;
}

const StImporter st_importer_onnx = {
  .name = "onnx",
  .arg = "MODEL.onnx",
  .summary = "an exported ONNX network (weights need not be there: external data may be absent)",
  .run = import_onnx,
};
