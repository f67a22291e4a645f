/* onnx_map_llama.c: LLaMA-style decoders (Touvron et al. 2023) as
 * stagger's rmsnorm and llama_block.
 *
 * RMSNorm has no ONNX operator before opset 23: exporters write it out,
 * x * 1/sqrt(mean(x^2) + eps) * g (Pow or Mul, ReduceMean, Add, Sqrt, Div
 * or Reciprocal, Mul, then the Mul by the [d] weight, which may land in
 * the next segment). A block is two segments, each a residual Add of its
 * input after an RMSNorm of it:
 *
 *   attention  Q, K, V and output projections by weights (biases optional),
 *              rotary positions (products by tables made by Sin and Cos
 *              of the positions: RoPE),
 *              two products between activations around one Softmax
 *   MLP        gate and up projections, SiLU (Sigmoid times its input) of
 *              the gate times up, the down projection: SwiGLU (a GELU
 *              instead: GeGLU)
 *
 * Heads come from the scores' shape ([batch, heads, s, s] or [batch x
 * heads, s, s]), the key/value heads from K's projection width over the
 * head width; causal as for the transformer block (a Trilu, or a Where on a
 * constant condition). The graph computes its scores whole, so the block
 * is dense (flash off), and its FLOPs must equal the graph's products. The
 * rotary base is not recovered (it changes no cost): the default stands.
 */
#include <string.h>

#include "import/onnx_map.h"

/* Does segment `seg` open with an RMSNorm of its input: every node up to
 * the normalized value one of the written-out ops, no LayerNormalization?
 * Only the ops' presence is checked; the loader's check does the rest. */
static gboolean
has_rms(const OnnxMap *m, int seg)
{
  const OnnxValue *x = onnx_value(m->g, m->segs[seg].in);
  return onnx_count(m, seg, "LayerNormalization") == 0 && onnx_count(m, seg, "ReduceMean") >= 1 &&
         onnx_count(m, seg, "Sqrt") >= 1 &&
         (onnx_consumer(m, seg, x, "Pow") != NULL || onnx_consumer(m, seg, x, "Mul") != NULL);
}

/* The Mul of a segment by a [d] weight: the norm's scale. */
static gboolean
scaled(const OnnxMap *m, int seg)
{
  const OnnxSegment *s = &m->segs[seg];
  for (int k = 0; k < s->n_nodes; k++) {
    const OnnxNode *node = &m->g->nodes[s->nodes[k]];
    if (strcmp(node->op, "Mul") != 0)
      continue;
    for (int i = 0; i < node->n_in; i++)
      if (onnx_in(m->g, node, i)->kind == ONNX_WEIGHT && onnx_in(m->g, node, i)->rank == 1)
        return TRUE;
  }
  return FALSE;
}

/* A standalone RMSNorm: its segment holds nothing else; the scale there or
 * alone in the next segment. */
static int
rmsnorm(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  static const char *const OPS[] = {"Pow", "Mul", "ReduceMean", "Add", "Sqrt", "Div",
                                    "Reciprocal", "Cast", NULL};
  const OnnxSegment *s = &m->segs[seg];
  if (!has_rms(m, seg) || onnx_count(m, seg, "ReduceMean") != 1)
    return 0;
  for (int k = 0; k < s->n_nodes; k++) {
    gboolean known = FALSE;
    for (const char *const *o = OPS; *o != NULL && !known; o++)
      known = strcmp(m->g->nodes[s->nodes[k]].op, *o) == 0;
    if (!known)
      return 0;
  }
  int n = 1;
  if (!scaled(m, seg)) {
    const OnnxNode *mul = seg + 1 < m->n_segs ? onnx_single(m, seg + 1, "Mul") : NULL;
    if (mul == NULL || !scaled(m, seg + 1))
      return 0;
    n = 2;
  }
  g_autofree char *name = onnx_layer_name(m, seg, n, "rmsnorm");
  cJSON *layer = cJSON_CreateObject();
  cJSON_AddStringToObject(layer, "name", name);
  cJSON_AddStringToObject(layer, "type", "rmsnorm");
  cJSON_AddItemToArray(out, layer);
  return n;
}

/* Products by a weight in a segment, in order, with their output widths. */
typedef struct {
  int weighted, between, biases;
  int64_t width[8];
  const OnnxNode *first_between;
} Products;

static Products
products(const OnnxMap *m, int seg)
{
  Products p = {0};
  const OnnxSegment *s = &m->segs[seg];
  for (int k = 0; k < s->n_nodes; k++) {
    const OnnxNode *node = &m->g->nodes[s->nodes[k]];
    if (strcmp(node->op, "Add") == 0) {
      for (int i = 0; i < node->n_in; i++)
        p.biases += onnx_in(m->g, node, i)->kind == ONNX_WEIGHT &&
                    onnx_in(m->g, node, i)->rank == 1;
      continue;
    }
    if (strcmp(node->op, "MatMul") != 0)
      continue;
    const OnnxValue *a = onnx_in(m->g, node, 0), *b = onnx_in(m->g, node, 1);
    if (a->kind == ONNX_ACT && b->kind == ONNX_ACT) {
      if (p.between++ == 0)
        p.first_between = node;
    } else if (b->kind == ONNX_WEIGHT && b->rank == 2) {
      if (p.weighted < 8)
        p.width[p.weighted] = b->dims[1];
      p.weighted++;
    }
  }
  return p;
}

/* Is `v` made from a Sin or Cos within a few weight- or constant-side
 * nodes (the rotary tables, computed from the positions)? */
static gboolean
trig(const OnnxGraph *g, const OnnxValue *v, int depth)
{
  if (v == NULL || v->kind == ONNX_ACT || v->producer < 0 || depth == 0)
    return FALSE;
  const OnnxNode *node = &g->nodes[v->producer];
  if (strcmp(node->op, "Sin") == 0 || strcmp(node->op, "Cos") == 0)
    return TRUE;
  for (int i = 0; i < node->n_in; i++)
    if (trig(g, onnx_in(g, node, i), depth - 1))
      return TRUE;
  return FALSE;
}

/* RoPE: a node of the segment multiplies by a rotary table. */
static gboolean
rotary(const OnnxMap *m, int seg)
{
  const OnnxSegment *s = &m->segs[seg];
  for (int k = 0; k < s->n_nodes; k++) {
    const OnnxNode *node = &m->g->nodes[s->nodes[k]];
    for (int i = 0; strcmp(node->op, "Mul") == 0 && i < node->n_in; i++)
      if (trig(m->g, onnx_in(m->g, node, i), 6))
        return TRUE;
  }
  return FALSE;
}

static int
llama_block(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  if (seg + 1 >= m->n_segs || !onnx_residual_end(m, seg) || !onnx_residual_end(m, seg + 1) ||
      !has_rms(m, seg) || !has_rms(m, seg + 1))
    return 0;
  Products attn = products(m, seg), mlp = products(m, seg + 1);
  if (attn.between != 2 || attn.weighted != 4 || onnx_count(m, seg, "Softmax") != 1)
    return 0;
  gboolean silu = onnx_count(m, seg + 1, "Sigmoid") == 1;
  gboolean gelu = onnx_count(m, seg + 1, "Erf") + onnx_count(m, seg + 1, "Tanh") +
                    onnx_count(m, seg + 1, "Gelu") == 1;
  if (mlp.between != 0 || mlp.weighted != 3 || silu == gelu || mlp.biases != 0) {
    g_string_append(why, "the half after attention is not a gated MLP");
    return 0;
  }
  const OnnxValue *scores = onnx_out(m->g, attn.first_between, 0);
  const OnnxValue *x = onnx_value(m->g, m->segs[seg].in);
  int64_t heads = onnx_heads(m, scores, x->dims[1]);
  if (heads == 0 || attn.width[0] % heads != 0) {
    g_string_append(why, "its scores are not [batch, heads, tokens, tokens]");
    return 0;
  }
  int64_t head_dim = attn.width[0] / heads, kv_heads = attn.width[1] / head_dim;
  g_autofree char *name = onnx_layer_name(m, seg, 2, "block");
  cJSON *layer = cJSON_CreateObject();
  cJSON_AddStringToObject(layer, "name", name);
  cJSON_AddStringToObject(layer, "type", "llama_block");
  cJSON_AddNumberToObject(layer, "heads", (double)heads);
  if (kv_heads != heads)
    cJSON_AddNumberToObject(layer, "kv_heads", (double)kv_heads);
  if (head_dim * heads != x->dims[2])
    cJSON_AddNumberToObject(layer, "head_dim", (double)head_dim);
  cJSON_AddBoolToObject(layer, "causal", onnx_causal(m, seg));
  cJSON_AddBoolToObject(layer, "flash", FALSE);
  if (!rotary(m, seg))
    cJSON_AddNumberToObject(layer, "rope_theta", 0);
  if (attn.biases >= 3)
    cJSON_AddBoolToObject(layer, "qkv_bias", TRUE);
  if (attn.biases == 1 || attn.biases == 4)
    cJSON_AddBoolToObject(layer, "out_bias", TRUE);
  cJSON_AddNumberToObject(layer, "ffn", (double)mlp.width[0]);
  if (gelu)
    cJSON_AddStringToObject(layer, "mlp", "geglu");
  cJSON_AddItemToArray(out, layer);
  return 2;
}

const OnnxRule st_onnx_rules_llama[] = {
  {"llama block", llama_block, TRUE},
  {"rmsnorm", rmsnorm, FALSE},
  {NULL},
};
