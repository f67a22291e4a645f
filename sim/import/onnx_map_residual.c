/* onnx_map_residual.c: torchvision's residual blocks (He et al. 2016) as
 * stagger's bottleneck and basic_block.
 *
 * In the graph a block is one segment ending in the residual Add, then a
 * segment with the ReLU after it. From the block's input, one path to the
 * Add is the main path of convolutions, each followed by a batch norm and
 * all but the last by a ReLU; the other is the input itself or a 1x1
 * convolution and batch norm (the downsample). The main path decides the
 * type:
 *
 *   bottleneck   1x1 (width) -> 3x3 (stride s, groups g) -> 1x1 (4 planes)
 *   basic_block  3x3 (stride s, planes) -> 3x3 (planes)
 *
 * with the stride on the 3x3 as torchvision puts it ("ResNet v1.5"), no
 * conv bias, and the downsample present exactly when the shape changes.
 * Batch norms folded into the convolutions (an inference export) do not
 * match: such a block becomes a custom layer with a warning.
 */
#include <string.h>

#include "import/onnx_map.h"

#define MAX_PATH 16

/* One convolution of a path and what is after it. */
typedef struct {
  const OnnxNode *conv;
  int64_t kernel, stride, pad, groups, out;
  gboolean relu;
} Unit;

/* Walks from `v` back to the block input through one-input nodes of the
 * segment, into units (conv [bn] [relu]); FALSE when the path is anything
 * else. */
static gboolean
walk(const OnnxMap *m, int seg, const OnnxValue *v, Unit *units, int *n, int *nodes)
{
  const OnnxGraph *g = m->g;
  const OnnxValue *x = onnx_value(g, m->segs[seg].in);
  const OnnxNode *chain[3 * MAX_PATH];
  int len = 0;
  while (v != x) {
    if (v->producer < 0 || len == 3 * MAX_PATH)
      return FALSE;
    const OnnxNode *node = &g->nodes[v->producer];
    chain[len++] = node;
    v = onnx_in(g, node, 0);
  }
  *nodes += len;
  /* chain is from the Add back to x: read it forward. */
  *n = 0;
  for (int i = len - 1; i >= 0; i--) {
    const OnnxNode *node = chain[i];
    if (strcmp(node->op, "Conv") == 0) {
      const OnnxValue *w = onnx_in(g, node, 1);
      int c;
      const int64_t *strides = onnx_attr_ints(node, "strides", &c);
      const int64_t *pads = onnx_attr_ints(node, "pads", &c);
      if (w->rank != 4 || w->dims[2] != w->dims[3] || onnx_in(g, node, 2) != NULL ||
          *n == MAX_PATH)
        return FALSE;
      units[(*n)++] = (Unit){
        .conv = node,
        .kernel = w->dims[2],
        .stride = strides != NULL ? strides[0] : 1,
        .pad = pads != NULL ? pads[0] : 0,
        .groups = onnx_attr_int(node, "group", 1),
        .out = w->dims[0],
      };
      /* a batch norm must follow */
      if (i == 0 || strcmp(chain[i - 1]->op, "BatchNormalization") != 0)
        return FALSE;
      i--;
    } else if (strcmp(node->op, "Relu") == 0 && *n > 0 && !units[*n - 1].relu) {
      units[*n - 1].relu = TRUE;
    } else {
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean
unit_is(const Unit *u, int64_t kernel, int64_t stride, int64_t groups, gboolean relu)
{
  return u->kernel == kernel && u->stride == stride && u->pad == kernel / 2 &&
         u->groups == groups && u->relu == relu;
}

static int
residual(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  const OnnxGraph *g = m->g;
  const OnnxSegment *s = &m->segs[seg];
  const OnnxNode *add = &g->nodes[s->nodes[s->n_nodes - 1]];
  if (strcmp(add->op, "Add") != 0 || seg + 1 >= m->n_segs ||
      onnx_single(m, seg + 1, "Relu") == NULL || onnx_count(m, seg, "Conv") < 2)
    return 0;
  const OnnxValue *a = onnx_in(g, add, 0), *b = onnx_in(g, add, 1);
  if (a->kind != ONNX_ACT || b->kind != ONNX_ACT)
    return 0;
  Unit pa[MAX_PATH], pb[MAX_PATH];
  int na, nb, nodes = 1;
  if (!walk(m, seg, a, pa, &na, &nodes) || !walk(m, seg, b, pb, &nb, &nodes) ||
      nodes != s->n_nodes) {
    g_string_append(why, "its paths are not convolutions each with a batch norm (an export "
                         "in training mode keeps them)");
    return 0;
  }
  const Unit *main = na >= nb ? pa : pb, *down = na >= nb ? pb : pa;
  int n_main = MAX(na, nb), n_down = MIN(na, nb);
  const OnnxValue *x = onnx_value(g, s->in);
  int64_t stride = n_main >= 2 ? main[1].stride : 0, planes, width = main[0].out;
  const char *type;
  if (n_main == 3 && unit_is(&main[0], 1, 1, 1, TRUE) &&
      unit_is(&main[1], 3, stride, main[1].groups, TRUE) && unit_is(&main[2], 1, 1, 1, FALSE) &&
      main[1].out == width && main[2].out % 4 == 0) {
    type = "bottleneck";
    planes = main[2].out / 4;
  } else if (n_main == 2 && unit_is(&main[0], 3, main[0].stride, 1, TRUE) &&
             unit_is(&main[1], 3, 1, 1, FALSE) && main[1].out == width) {
    type = "basic_block";
    stride = main[0].stride;
    planes = width;
  } else {
    g_string_append(why, "its main path is neither a bottleneck nor a basic block");
    return 0;
  }
  int64_t out_channels = main[n_main - 1].out;
  gboolean needs_down = stride != 1 || x->dims[1] != out_channels;
  if (n_down != (needs_down ? 1 : 0) ||
      (n_down == 1 && !unit_is(&down[0], 1, stride, 1, FALSE))) {
    g_string_append(why, "its shortcut is not the 1x1 downsample its shape change needs");
    return 0;
  }
  int64_t groups = main[1].groups;
  int64_t per_group = width * 64 / (planes * groups);
  if (strcmp(type, "bottleneck") == 0 && planes * per_group / 64 * groups != width) {
    g_string_append(why, "its width is no whole width_per_group");
    return 0;
  }
  g_autofree char *name = onnx_layer_name(m, seg, 2, type);
  cJSON *layer = cJSON_CreateObject();
  cJSON_AddStringToObject(layer, "name", name);
  cJSON_AddStringToObject(layer, "type", type);
  cJSON_AddNumberToObject(layer, "planes", (double)planes);
  cJSON_AddNumberToObject(layer, "stride", (double)stride);
  if (strcmp(type, "bottleneck") == 0) {
    cJSON_AddNumberToObject(layer, "groups", (double)groups);
    cJSON_AddNumberToObject(layer, "width_per_group", (double)per_group);
  }
  cJSON_AddItemToArray(out, layer);
  return 2;
}

const OnnxRule st_onnx_rules_residual[] = {
  {"residual block", residual, FALSE},
  {NULL},
};
