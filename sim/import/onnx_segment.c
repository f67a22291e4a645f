/* onnx_segment.c: cutting an inferred graph into segments (onnx_map.h),
 * their numbers, their names, and the custom layer for a segment no rule
 * describes.
 *
 * Cuts: walking the activation nodes in file order, a value is live from
 * the node that makes it until its last reader has run (the graph's output
 * stays live). After a node, when the only live activation is one it made,
 * and that value has the batch as its first dim and 1 to 4 dims per sample
 * (what a stagger tensor can be), it is a cut. The sample input is the
 * first cut; the graph's output is the last.
 */
#include <string.h>

#include "base/util.h"
#include "import/onnx_map.h"
#include "import/onnx_ops.h"

static gboolean
cuttable(const OnnxGraph *g, const OnnxValue *v)
{
  return v->rank >= 2 && v->rank - 1 <= 4 && v->dims[0] == g->batch;
}

static gboolean
act_node(const OnnxGraph *g, const OnnxNode *node)
{
  for (int i = 0; i < node->n_out; i++) {
    const OnnxValue *v = onnx_out(g, node, i);
    if (v != NULL && v->kind == ONNX_ACT)
      return TRUE;
  }
  return FALSE;
}

gboolean
onnx_segments(OnnxMap *m, GError **error)
{
  OnnxGraph *g = m->g;
  /* Readers left per activation value. */
  g_autofree int *left = g_new0(int, g->values->len);
  for (int n = 0; n < g->n_nodes; n++)
    for (int i = 0; i < g->nodes[n].n_in && act_node(g, &g->nodes[n]); i++)
      if (g->nodes[n].in[i] >= 0 && onnx_value(g, g->nodes[n].in[i])->kind == ONNX_ACT)
        left[g->nodes[n].in[i]]++; /* a Shape reads an activation but makes a constant */
  left[g->output]++;

  g_autoptr(GArray) segs = g_array_new(FALSE, TRUE, sizeof(OnnxSegment));
  g_autoptr(GArray) nodes = g_array_new(FALSE, FALSE, sizeof(int));
  int live = left[g->input] > 0 ? 1 : 0, cut = g->input;
  for (int n = 0; n < g->n_nodes; n++) {
    const OnnxNode *node = &g->nodes[n];
    if (!act_node(g, node))
      continue;
    g_array_append_val(nodes, n);
    for (int i = 0; i < node->n_in; i++) {
      int v = node->in[i];
      if (v >= 0 && onnx_value(g, v)->kind == ONNX_ACT && --left[v] == 0)
        live--;
    }
    int made = -1, made_live = 0;
    for (int i = 0; i < node->n_out; i++) {
      int v = node->out[i];
      if (v >= 0 && onnx_value(g, v)->kind == ONNX_ACT && left[v] > 0) {
        live++;
        made = v;
        made_live++;
      }
    }
    if (live == 1 && made_live == 1 && cuttable(g, onnx_value(g, made))) {
      OnnxSegment s = {.in = cut, .out = made, .n_nodes = (int)nodes->len};
      s.nodes = (int *)g_array_free(g_steal_pointer(&nodes), FALSE);
      g_array_append_val(segs, s);
      nodes = g_array_new(FALSE, FALSE, sizeof(int));
      cut = made;
    }
  }
  m->n_segs = (int)segs->len;
  m->segs = (OnnxSegment *)g_array_free(g_steal_pointer(&segs), FALSE);
  if (cut != g->output) {
    g_autofree char *shape = onnx_shape_text(onnx_value(g, g->output));
    g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_INVALID,
                "%s: the output '%s' %s is not one tensor per sample of 1 to 4 dims with the "
                "batch first",
                g->path, onnx_value(g, g->output)->name, shape);
    return FALSE;
  }
  return TRUE;
}

void
onnx_segments_clear(OnnxMap *m)
{
  for (int s = 0; s < m->n_segs; s++)
    g_free(m->segs[s].nodes);
  g_clear_pointer(&m->segs, g_free);
  m->n_segs = 0;
}

/* ---- numbers ---------------------------------------------------------------- */

/* The parameters a value is made of, into `set` (index + 1): its
 * initializers that count (not a copy of another). */
static void
collect_params(const OnnxGraph *g, int index, GHashTable *set)
{
  /* An activation is made of none; an initializer of itself (most inputs
   * are one or the other: no table of sources for them). */
  const OnnxValue *v = onnx_value(g, index);
  if (v == NULL || v->kind != ONNX_WEIGHT)
    return;
  if (v->initializer) {
    if (v->param)
      g_hash_table_add(set, GINT_TO_POINTER(index + 1));
    return;
  }
  g_autoptr(GHashTable) sources = g_hash_table_new(NULL, NULL);
  onnx_weight_initializers(g, index, sources);
  GHashTableIter iter;
  gpointer key;
  g_hash_table_iter_init(&iter, sources);
  while (g_hash_table_iter_next(&iter, &key, NULL))
    if (onnx_value(g, GPOINTER_TO_INT(key) - 1)->param)
      g_hash_table_add(set, key);
}

static GHashTable *
segment_params(const OnnxMap *m, int first, int n)
{
  GHashTable *set = g_hash_table_new(NULL, NULL);
  for (int s = first; s < first + n; s++)
    for (int k = 0; k < m->segs[s].n_nodes; k++) {
      const OnnxNode *node = &m->g->nodes[m->segs[s].nodes[k]];
      for (int i = 0; i < node->n_in; i++)
        collect_params(m->g, node->in[i], set);
    }
  return set;
}

int64_t
onnx_segments_params(const OnnxMap *m, int first, int n)
{
  g_autoptr(GHashTable) set = segment_params(m, first, n);
  int64_t params = 0;
  GHashTableIter iter;
  gpointer key;
  g_hash_table_iter_init(&iter, set);
  while (g_hash_table_iter_next(&iter, &key, NULL))
    if (!g_hash_table_contains(m->counted, key))
      params += onnx_elems(onnx_value(m->g, GPOINTER_TO_INT(key) - 1));
  return params;
}

void
onnx_segments_count(OnnxMap *m, int first, int n)
{
  g_autoptr(GHashTable) set = segment_params(m, first, n);
  GHashTableIter iter;
  gpointer key;
  g_hash_table_iter_init(&iter, set);
  while (g_hash_table_iter_next(&iter, &key, NULL))
    g_hash_table_add(m->counted, key);
}

double
onnx_segments_flops(const OnnxMap *m, int first, int n, double *dense)
{
  double flops = 0;
  *dense = 0;
  for (int s = first; s < first + n; s++)
    for (int k = 0; k < m->segs[s].n_nodes; k++) {
      double d;
      flops += onnx_node_flops(m->g, &m->g->nodes[m->segs[s].nodes[k]], &d);
      *dense += d;
    }
  *dense /= (double)m->g->batch;
  return flops / (double)m->g->batch;
}

/* Bytes per sample that autograd keeps for the segments' backward,
 * estimated from each operator's entry (onnx_ops.h): its kept inputs or
 * output at the model's element size, masks at one byte; each tensor once. */
static int64_t
kept_bytes(const OnnxMap *m, int first, int n)
{
  const OnnxGraph *g = m->g;
  g_autoptr(GHashTable) kept = g_hash_table_new(NULL, NULL);
  double masks = 0;
  for (int s = first; s < first + n; s++)
    for (int k = 0; k < m->segs[s].n_nodes; k++) {
      const OnnxNode *node = &g->nodes[m->segs[s].nodes[k]];
      const OnnxOp *op = onnx_node_op(node);
      for (int i = 0; i < node->n_in && (op->keeps & ONNX_KEEPS_INPUT); i++)
        if (node->in[i] >= 0 && onnx_value(g, node->in[i])->kind == ONNX_ACT)
          g_hash_table_add(kept, GINT_TO_POINTER(node->in[i] + 1));
      if ((op->keeps & ONNX_KEEPS_OUTPUT) && node->out[0] >= 0)
        g_hash_table_add(kept, GINT_TO_POINTER(node->out[0] + 1));
      if (op->keeps & ONNX_KEEPS_MASK)
        masks += (double)onnx_elems(onnx_out(g, node, 0));
    }
  double bytes = masks;
  GHashTableIter iter;
  gpointer key;
  g_hash_table_iter_init(&iter, kept);
  while (g_hash_table_iter_next(&iter, &key, NULL))
    bytes += (double)onnx_elems(onnx_value(g, GPOINTER_TO_INT(key) - 1)) * m->dtype_bytes;
  return (int64_t)(bytes / (double)g->batch);
}

void
onnx_custom_layer(OnnxMap *m, int first, int n, cJSON *out)
{
  const OnnxValue *v = onnx_value(m->g, m->segs[first + n - 1].out);
  double dense, flops = onnx_segments_flops(m, first, n, &dense);
  g_autofree char *name = onnx_layer_name(m, first, n, "custom");
  cJSON *layer = cJSON_CreateObject();
  cJSON_AddStringToObject(layer, "name", name);
  cJSON_AddStringToObject(layer, "type", "custom");
  cJSON_AddNumberToObject(layer, "params", (double)onnx_segments_params(m, first, n));
  /* Backward: both gradients of every product, one pass over the rest. */
  cJSON_AddNumberToObject(layer, "fwd_flops", (double)(int64_t)flops);
  cJSON_AddNumberToObject(layer, "bwd_flops", (double)(int64_t)(flops + dense));
  cJSON_AddNumberToObject(layer, "activation_bytes", (double)kept_bytes(m, first, n));
  int64_t elems = onnx_elems(v) / m->g->batch;
  cJSON_AddNumberToObject(layer, "output_bytes", (double)(elems * m->dtype_bytes));
  static const char *const DIMS[] = {"dim0", "dim1", "dim2", "dim3"};
  g_assert(v->rank - 1 <= (int)G_N_ELEMENTS(DIMS)); /* a cut (cuttable) */
  for (int k = 1; k < v->rank; k++)
    cJSON_AddNumberToObject(layer, DIMS[k - 1], (double)v->dims[k]);
  cJSON_AddItemToArray(out, layer);
}

/* ---- names ------------------------------------------------------------------- */

/* The module path of a node's name: "/layer1/layer1.0/conv1/Conv" ->
 * ["layer1", "layer1.0", "conv1"] (the last part is the operator). */
static char **
module_path(const char *name)
{
  if (name[0] != '/')
    return g_new0(char *, 1);
  char **parts = g_strsplit(name + 1, "/", -1);
  guint n = g_strv_length(parts);
  if (n > 0) {
    g_free(parts[n - 1]);
    parts[n - 1] = NULL;
  }
  return parts;
}

char *
onnx_layer_name(OnnxMap *m, int first, int n, const char *fallback)
{
  g_auto(GStrv) common = NULL;
  guint depth = 0;
  for (int s = first; s < first + n; s++)
    for (int k = 0; k < m->segs[s].n_nodes; k++) {
      g_auto(GStrv) parts = module_path(m->g->nodes[m->segs[s].nodes[k]].name);
      if (common == NULL) {
        common = g_steal_pointer(&parts);
        depth = g_strv_length(common);
        continue;
      }
      guint d = 0;
      while (d < depth && parts[d] != NULL && strcmp(parts[d], common[d]) == 0)
        d++;
      depth = d;
    }
  /* torch writes a child of a container as "layer1.0" under "layer1": keep
   * the longest, so "layer1/layer1.0/conv1" is "layer1.0.conv1". */
  GString *name = g_string_new(NULL);
  for (guint d = 0; common != NULL && d < depth; d++) {
    if (d + 1 < depth && g_str_has_prefix(common[d + 1], common[d]) &&
        common[d + 1][strlen(common[d])] == '.')
      continue;
    g_string_append_printf(name, "%s%s", name->len > 0 ? "." : "", common[d]);
  }
  if (name->len == 0)
    g_string_assign(name, fallback);
  g_autofree char *base = g_string_free(name, FALSE);
  if (!g_hash_table_contains(m->names, base)) {
    g_hash_table_add(m->names, g_strdup(base));
    return g_steal_pointer(&base);
  }
  /* The least i >= 1 with "base_i" free; those below the hint are taken. */
  int i = MAX(1, GPOINTER_TO_INT(g_hash_table_lookup(m->suffix_next, base)));
  char digits[ST_INT_TEXT_SIZE];
  char *unique = g_strconcat(base, "_", st_int_text(i, digits), NULL);
  while (g_hash_table_contains(m->names, unique)) {
    g_free(unique);
    unique = g_strconcat(base, "_", st_int_text(++i, digits), NULL);
  }
  g_hash_table_insert(m->suffix_next, g_steal_pointer(&base), GINT_TO_POINTER(i + 1));
  g_hash_table_add(m->names, g_strdup(unique));
  return unique;
}

void
onnx_layer_name_release(OnnxMap *m, const char *name)
{
  g_hash_table_remove(m->names, name);
  /* "base_i" is free again: lower base's hint to i (a lower hint is only
   * slower, never wrong). */
  const char *under = strrchr(name, '_');
  if (under == NULL || under[1] == '\0' || strspn(under + 1, "0123456789") != strlen(under + 1))
    return;
  g_autofree char *base = g_strndup(name, (gsize)(under - name));
  gpointer hint = NULL;
  if (!g_hash_table_lookup_extended(m->suffix_next, base, NULL, &hint))
    return;
  int64_t i = g_ascii_strtoll(under + 1, NULL, 10);
  if (i >= 1 && i < GPOINTER_TO_INT(hint))
    g_hash_table_insert(m->suffix_next, g_steal_pointer(&base), GINT_TO_POINTER((int)i));
}
