/* onnx_map_transformer.c: the pre-LN transformer block of GPT-2 and ViT as
 * stagger's transformer_block.
 *
 * In the graph a pre-LN block is two segments, each ending in a residual
 * Add of its input:
 *
 *   attention  LayerNorm; projections to Q, K, V (one [d, 3d] weight or
 *              three [d, d], with biases); two products between
 *              activations (Q K^T, then the probabilities times V) around
 *              one Softmax; the output projection [d, d] with its bias
 *   MLP        LayerNorm; [d, f] with bias; a GELU (the operator, or its
 *              erf or tanh expansion); [f, d] with bias
 *
 * The heads are the second dim of the scores (Q K^T is [batch, heads, s,
 * s], or [batch x heads, s, s] as torch's MultiheadAttention lays them out);
 * the mask makes the block causal when the attention half holds a Trilu or
 * selects with a constant condition (a stored triangle); dropout when
 * either half holds a Dropout with a probability above 0. The check that follows (onnx_map.h)
 * compares parameters and the matrix products' FLOPs with the block's, so a
 * variant that differs in either (no biases, another MLP) falls back to
 * custom layers.
 */
#include <string.h>

#include "import/onnx_map.h"

/* Counts of a half's nodes: products by a weight, products between
 * activations, and which of them came first. */
typedef struct {
  int weighted, between;
  const OnnxNode *first_between;
  const OnnxNode *first_weighted;
} Products;

static Products
products(const OnnxMap *m, int seg)
{
  Products p = {0};
  const OnnxSegment *s = &m->segs[seg];
  for (int k = 0; k < s->n_nodes; k++) {
    const OnnxNode *node = &m->g->nodes[s->nodes[k]];
    if (strcmp(node->op, "MatMul") != 0 && strcmp(node->op, "Gemm") != 0)
      continue;
    const OnnxValue *a = onnx_in(m->g, node, 0), *b = onnx_in(m->g, node, 1);
    if (a->kind == ONNX_ACT && b->kind == ONNX_ACT) {
      if (p.between++ == 0)
        p.first_between = node;
    } else if (p.weighted++ == 0) {
      p.first_weighted = node;
    }
  }
  return p;
}

/* The segment ends in Add(its input, branch) and starts with a LayerNorm of
 * its input. */
static gboolean
pre_ln_residual(const OnnxMap *m, int seg)
{
  const OnnxValue *x = onnx_value(m->g, m->segs[seg].in);
  return onnx_residual_end(m, seg) && onnx_count(m, seg, "LayerNormalization") == 1 &&
         onnx_consumer(m, seg, x, "LayerNormalization") != NULL;
}

static int
transformer(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  if (seg + 1 >= m->n_segs || !pre_ln_residual(m, seg) || !pre_ln_residual(m, seg + 1))
    return 0;
  Products attn = products(m, seg), mlp = products(m, seg + 1);
  if (attn.between != 2 || onnx_count(m, seg, "Softmax") != 1 ||
      (attn.weighted != 2 && attn.weighted != 4))
    return 0;
  int gelus = onnx_count(m, seg + 1, "Gelu") + onnx_count(m, seg + 1, "Erf") +
              onnx_count(m, seg + 1, "Tanh");
  if (mlp.between != 0 || mlp.weighted != 2 || gelus != 1) {
    g_string_append(why, "the half after attention is not a GELU MLP");
    return 0;
  }
  const OnnxValue *scores = onnx_out(m->g, attn.first_between, 0);
  const OnnxValue *x = onnx_value(m->g, m->segs[seg].in);
  const OnnxValue *fc = onnx_in(m->g, mlp.first_weighted, 1);
  int64_t heads = onnx_heads(m, scores, x->dims[1]);
  if (heads == 0 || fc->rank != 2) {
    g_string_append(why, "its scores are not [batch, heads, tokens, tokens]");
    return 0;
  }
  gboolean trans = strcmp(mlp.first_weighted->op, "Gemm") == 0 &&
                   onnx_attr_int(mlp.first_weighted, "transB", 0) != 0;
  int64_t ffn = fc->dims[trans ? 0 : 1];
  gboolean dropout = FALSE;
  for (int h = seg; h <= seg + 1; h++)
    for (int k = 0; k < m->segs[h].n_nodes; k++)
      dropout = dropout || onnx_dropout_active(m->g, &m->g->nodes[m->segs[h].nodes[k]]);
  g_autofree char *name = onnx_layer_name(m, seg, 2, "block");
  cJSON *layer = cJSON_CreateObject();
  cJSON_AddStringToObject(layer, "name", name);
  cJSON_AddStringToObject(layer, "type", "transformer_block");
  cJSON_AddNumberToObject(layer, "heads", (double)heads);
  cJSON_AddNumberToObject(layer, "ffn", (double)ffn);
  cJSON_AddBoolToObject(layer, "causal", onnx_causal(m, seg));
  cJSON_AddBoolToObject(layer, "dropout", dropout);
  cJSON_AddItemToArray(out, layer);
  return 2;
}

const OnnxRule st_onnx_rules_transformer[] = {
  {"transformer block", transformer, TRUE},
  {NULL},
};
