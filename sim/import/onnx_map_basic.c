/* onnx_map_basic.c: rules for single operators and short chains, and the
 * helpers every rule uses (onnx_map.h).
 *
 *   Conv (2-D, square, symmetric padding)  -> conv2d
 *   BatchNormalization on [C,H,W]           -> batchnorm2d
 *   LayerNormalization over the last dim    -> layernorm
 *   Relu                                    -> relu
 *   Gelu, or its erf / tanh expansion       -> gelu
 *   Dropout                                 -> dropout (nothing when p is 0)
 *   MaxPool / AveragePool (2-D, square)     -> maxpool2d / avgpool2d
 *   GlobalAveragePool                       -> adaptive_avgpool2d (1)
 *   Flatten / Reshape to one dim            -> flatten
 *   Reshape [C,H,W] -> [C,HW], Transpose     -> to_tokens
 *   Concat of a [1, d] weight before tokens -> class_token
 *   Gather of one token (axis 1)            -> select_token
 *   Gather from a table by the input ids    -> embedding
 *   Add of a [tokens, dim] weight           -> position_embedding
 *   MatMul or Gemm by a weight (+ bias Add) -> linear, or lm_head when it
 *                                              maps to the embedding's
 *                                              vocabulary (tied when it
 *                                              reads the embedding's table)
 *   a view that keeps the per-sample shape  -> nothing
 *   a Softmax at the end, before the loss   -> nothing (the loss has one)
 */
#include <string.h>

#include "import/onnx_map.h"
#include "import/onnx_ops.h"

/* ---- helpers (onnx_map.h) ---------------------------------------------------- */

const OnnxNode *
onnx_single(const OnnxMap *m, int seg, const char *op)
{
  const OnnxSegment *s = &m->segs[seg];
  if (s->n_nodes != 1)
    return NULL;
  const OnnxNode *node = &m->g->nodes[s->nodes[0]];
  return op == NULL || strcmp(node->op, op) == 0 ? node : NULL;
}

int
onnx_count(const OnnxMap *m, int seg, const char *op)
{
  int n = 0;
  const OnnxSegment *s = &m->segs[seg];
  for (int k = 0; k < s->n_nodes; k++)
    n += strcmp(m->g->nodes[s->nodes[k]].op, op) == 0;
  return n;
}

const OnnxValue *
onnx_weight_source(const OnnxGraph *g, const OnnxValue *v)
{
  while (v != NULL && v->kind == ONNX_WEIGHT && !v->initializer && v->producer >= 0) {
    const OnnxNode *node = &g->nodes[v->producer];
    const OnnxValue *next = NULL;
    for (int i = 0; i < node->n_in; i++) {
      const OnnxValue *in = onnx_in(g, node, i);
      if (in == NULL || in->kind != ONNX_WEIGHT)
        continue;
      if (next != NULL)
        return NULL;
      next = in;
    }
    v = next;
  }
  if (v != NULL && v->copy_of >= 0)
    v = onnx_value(g, v->copy_of);
  return v != NULL && v->initializer && v->param ? v : NULL;
}

const OnnxNode *
onnx_consumer(const OnnxMap *m, int seg, const OnnxValue *v, const char *op)
{
  const OnnxSegment *s = &m->segs[seg];
  for (int k = 0; k < s->n_nodes; k++) {
    const OnnxNode *node = &m->g->nodes[s->nodes[k]];
    if (strcmp(node->op, op) != 0)
      continue;
    for (int i = 0; i < node->n_in; i++)
      if (onnx_in(m->g, node, i) == v)
        return node;
  }
  return NULL;
}

gboolean
onnx_residual_end(const OnnxMap *m, int seg)
{
  const OnnxSegment *s = &m->segs[seg];
  const OnnxNode *add = &m->g->nodes[s->nodes[s->n_nodes - 1]];
  const OnnxValue *x = onnx_value(m->g, s->in);
  return strcmp(add->op, "Add") == 0 && x->rank == 3 &&
         (onnx_in(m->g, add, 0) == x || onnx_in(m->g, add, 1) == x);
}

gboolean
onnx_causal(const OnnxMap *m, int seg)
{
  if (onnx_count(m, seg, "Trilu") > 0)
    return TRUE;
  const OnnxSegment *s = &m->segs[seg];
  for (int k = 0; k < s->n_nodes; k++) {
    const OnnxNode *node = &m->g->nodes[s->nodes[k]];
    if (strcmp(node->op, "Where") == 0 && onnx_in(m->g, node, 0)->kind == ONNX_CONST)
      return TRUE;
  }
  return FALSE;
}

int64_t
onnx_heads(const OnnxMap *m, const OnnxValue *scores, int64_t tokens)
{
  if (scores->rank < 3 || scores->dims[scores->rank - 2] != tokens ||
      scores->dims[scores->rank - 1] != tokens)
    return 0;
  if (scores->rank == 4)
    return scores->dims[1];
  return scores->rank == 3 && scores->dims[0] % m->g->batch == 0
           ? scores->dims[0] / m->g->batch : 0;
}

gboolean
onnx_dropout_active(const OnnxGraph *g, const OnnxNode *node)
{
  if (strcmp(node->op, "Dropout") != 0)
    return FALSE;
  const OnnxValue *ratio = onnx_in(g, node, 1), *training = onnx_in(g, node, 2);
  if (ratio != NULL && ratio->data != NULL && ratio->data[0] == 0)
    return FALSE;
  if (ratio == NULL && onnx_attr_float(node, "ratio", 0.5) == 0)
    return FALSE;
  return !(training != NULL && training->data != NULL && training->data[0] == 0);
}

/* A new layer in `out`, named after segments [seg, seg + n). */
static cJSON *
add_layer(OnnxMap *m, int seg, int n, cJSON *out, const char *type)
{
  g_autofree char *name = onnx_layer_name(m, seg, n, type);
  cJSON *layer = cJSON_CreateObject();
  cJSON_AddStringToObject(layer, "name", name);
  cJSON_AddStringToObject(layer, "type", type);
  cJSON_AddItemToArray(out, layer);
  return layer;
}

static void
set_int(cJSON *layer, const char *key, int64_t value)
{
  cJSON_AddNumberToObject(layer, key, (double)value);
}

/* The square window of a 2-D Conv or pool: one kernel size, one stride, one
 * padding on every side, no dilation; FALSE (with why) otherwise. */
static gboolean
square_window(const OnnxNode *node, const int64_t *kernel, int64_t *k, int64_t *stride,
              int64_t *pad, GString *why)
{
  int n_s, n_p, n_d;
  const int64_t *s = onnx_attr_ints(node, "strides", &n_s);
  const int64_t *p = onnx_attr_ints(node, "pads", &n_p);
  const int64_t *d = onnx_attr_ints(node, "dilations", &n_d);
  const OnnxAttr *auto_pad = onnx_attr(node, "auto_pad");
  *k = kernel[0];
  *stride = s != NULL ? s[0] : 1;
  *pad = p != NULL ? p[0] : 0;
  gboolean ok = kernel[1] == *k && (s == NULL || s[1] == *stride) &&
                (p == NULL || (p[1] == *pad && p[2] == *pad && p[3] == *pad)) &&
                (d == NULL || (d[0] == 1 && d[1] == 1)) &&
                onnx_attr_int(node, "ceil_mode", 0) == 0 &&
                (auto_pad == NULL || auto_pad->s == NULL || strcmp(auto_pad->s, "NOTSET") == 0);
  if (!ok)
    g_string_append(why, "a window that is not square with equal padding on every side");
  return ok;
}

/* ---- rules ------------------------------------------------------------------ */

static int
conv2d(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  const OnnxNode *node = onnx_single(m, seg, "Conv");
  if (node == NULL)
    return 0;
  const OnnxValue *w = onnx_in(m->g, node, 1);
  int64_t k, stride, pad;
  if (w->rank != 4 || !square_window(node, w->dims + 2, &k, &stride, &pad, why))
    return 0;
  cJSON *layer = add_layer(m, seg, 1, out, "conv2d");
  set_int(layer, "out_channels", w->dims[0]);
  set_int(layer, "kernel", k);
  set_int(layer, "stride", stride);
  set_int(layer, "padding", pad);
  set_int(layer, "groups", onnx_attr_int(node, "group", 1));
  cJSON_AddBoolToObject(layer, "bias", onnx_in(m->g, node, 2) != NULL);
  return 1;
}

static int
pool2d(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  const OnnxNode *node = onnx_single(m, seg, "MaxPool");
  if (node == NULL)
    node = onnx_single(m, seg, "AveragePool");
  int n;
  const int64_t *kernel = node != NULL ? onnx_attr_ints(node, "kernel_shape", &n) : NULL;
  int64_t k, stride, pad;
  if (kernel == NULL || n != 2 || !square_window(node, kernel, &k, &stride, &pad, why))
    return 0;
  if (onnx_out(m->g, node, 1) != NULL && onnx_out(m->g, node, 1)->n_consumers > 0) {
    g_string_append(why, "its indices are used");
    return 0;
  }
  cJSON *layer = add_layer(m, seg, 1, out, node->op[0] == 'M' ? "maxpool2d" : "avgpool2d");
  set_int(layer, "kernel", k);
  set_int(layer, "stride", stride);
  set_int(layer, "padding", pad);
  return 1;
}

/* Operators that are one stagger layer without attrs (the loader checks
 * the shapes). */
static int
plain(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  static const struct {
    const char *op, *type;
  } PLAIN[] = {
    {"Relu", "relu"},
    {"Gelu", "gelu"},
    {"Dropout", "dropout"},
    {"BatchNormalization", "batchnorm2d"},
  };
  const OnnxNode *node = onnx_single(m, seg, NULL);
  if (node != NULL && strcmp(node->op, "Dropout") == 0 && !onnx_dropout_active(m->g, node))
    return 1; /* p = 0: no layer */
  for (guint i = 0; node != NULL && i < G_N_ELEMENTS(PLAIN); i++) {
    if (strcmp(node->op, PLAIN[i].op) != 0)
      continue;
    for (int o = 1; o < node->n_out; o++) /* a mask, running statistics: not read */
      if (onnx_out(m->g, node, o) != NULL && onnx_out(m->g, node, o)->n_consumers > 0)
        return 0;
    add_layer(m, seg, 1, out, PLAIN[i].type);
    return 1;
  }
  return 0;
}

static int
layernorm(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  const OnnxNode *node = onnx_single(m, seg, "LayerNormalization");
  if (node == NULL)
    return 0;
  const OnnxValue *x = onnx_in(m->g, node, 0);
  int64_t axis = onnx_attr_int(node, "axis", -1);
  if (axis != -1 && axis != x->rank - 1) {
    g_string_append(why, "it normalizes more than the last dim");
    return 0;
  }
  cJSON *layer = add_layer(m, seg, 1, out, "layernorm");
  cJSON_AddBoolToObject(layer, "affine", onnx_in(m->g, node, 1)->param);
  return 1;
}

/* GELU written out: 0.5 x (1 + erf(x / sqrt 2)), or the tanh form; only
 * scalar constants besides the input. */
static int
gelu_expanded(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  static const char *const OPS[] = {"Div", "Mul", "Add", "Erf", "Pow", "Tanh", NULL};
  const OnnxSegment *s = &m->segs[seg];
  if (onnx_count(m, seg, "Erf") + onnx_count(m, seg, "Tanh") != 1 || s->n_nodes < 3)
    return 0;
  for (int k = 0; k < s->n_nodes; k++) {
    const OnnxNode *node = &m->g->nodes[s->nodes[k]];
    gboolean known = FALSE;
    for (const char *const *o = OPS; *o != NULL && !known; o++)
      known = strcmp(node->op, *o) == 0;
    for (int i = 0; known && i < node->n_in; i++) {
      const OnnxValue *v = onnx_in(m->g, node, i);
      known = v->kind == ONNX_ACT || (v->kind == ONNX_CONST && onnx_elems(v) == 1);
    }
    if (!known)
      return 0;
  }
  add_layer(m, seg, 1, out, "gelu");
  return 1;
}

static int
adaptive_pool(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  const OnnxNode *node = onnx_single(m, seg, "GlobalAveragePool");
  if (node == NULL || onnx_in(m->g, node, 0)->rank != 4)
    return 0;
  set_int(add_layer(m, seg, 1, out, "adaptive_avgpool2d"), "output_size", 1);
  return 1;
}

/* A reshape that keeps the per-sample shape is no layer; one to a vector
 * per sample is a flatten. */
static int
reshape(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  static const char *const VIEWS[] = {"Flatten", "Reshape", "Identity", "Squeeze", "Unsqueeze",
                                      "Cast", NULL};
  const OnnxNode *node = onnx_single(m, seg, NULL);
  gboolean view = FALSE;
  for (const char *const *v = VIEWS; node != NULL && *v != NULL && !view; v++)
    view = strcmp(node->op, *v) == 0;
  if (!view)
    return 0;
  const OnnxValue *in = onnx_value(m->g, m->segs[seg].in), *o = onnx_value(m->g, m->segs[seg].out);
  if (in->elem != o->elem && strcmp(node->op, "Cast") == 0)
    return 0;
  gboolean same = in->rank == o->rank && memcmp(in->dims, o->dims, sizeof(int64_t) * in->rank) == 0;
  if (same)
    return 1;
  if (o->rank == 2 && in->rank > 2) {
    add_layer(m, seg, 1, out, "flatten");
    return 1;
  }
  return 0;
}

/* Patches to tokens (ViT): [C, H, W] reshaped to [C, H W], then swapped to
 * [H W, C]: two segments. */
static int
to_tokens(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  const OnnxNode *flat = onnx_single(m, seg, "Reshape");
  if (flat == NULL)
    flat = onnx_single(m, seg, "Flatten");
  const OnnxNode *swap = seg + 1 < m->n_segs ? onnx_single(m, seg + 1, "Transpose") : NULL;
  if (flat == NULL || swap == NULL)
    return 0;
  const OnnxValue *in = onnx_value(m->g, m->segs[seg].in), *mid = onnx_out(m->g, flat, 0);
  int n;
  const int64_t *perm = onnx_attr_ints(swap, "perm", &n);
  if (in->rank != 4 || mid->rank != 3 || mid->dims[1] != in->dims[1] ||
      mid->dims[2] != in->dims[2] * in->dims[3] || perm == NULL || n != 3 || perm[0] != 0 ||
      perm[1] != 2 || perm[2] != 1)
    return 0;
  add_layer(m, seg, 2, out, "to_tokens");
  return 2;
}

/* A learned token put before the others (ViT's [class]): Concat on the
 * token axis of a [1, d] weight (expanded to the batch) and the tokens. */
static int
class_token(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  const OnnxNode *node = onnx_single(m, seg, "Concat");
  if (node == NULL || node->n_in != 2)
    return 0;
  const OnnxValue *token = onnx_in(m->g, node, 0), *x = onnx_in(m->g, node, 1);
  if (token->kind != ONNX_WEIGHT || x->kind != ONNX_ACT || x->rank != 3 ||
      onnx_attr_int(node, "axis", 0) != 1 || token->rank != 3 || token->dims[1] != 1)
    return 0;
  add_layer(m, seg, 1, out, "class_token");
  return 1;
}

/* x[:, index]: one token of [tokens, d] (ViT's classifier input). */
static int
select_token(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  const OnnxNode *node = onnx_single(m, seg, "Gather");
  if (node == NULL || onnx_attr_int(node, "axis", 0) != 1)
    return 0;
  const OnnxValue *x = onnx_in(m->g, node, 0), *index = onnx_in(m->g, node, 1);
  if (x->kind != ONNX_ACT || x->rank != 3 || index->rank != 0 || index->data == NULL)
    return 0;
  int64_t i = onnx_int(index->data[0]);
  cJSON *layer = add_layer(m, seg, 1, out, "select_token");
  set_int(layer, "index", i < 0 ? i + x->dims[1] : i);
  return 1;
}

/* The ids -> rows lookup of a token embedding. */
static int
embedding(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  const OnnxNode *node = onnx_single(m, seg, "Gather");
  if (node == NULL || seg != 0 || onnx_attr_int(node, "axis", 0) != 0)
    return 0;
  const OnnxValue *table = onnx_weight_source(m->g, onnx_in(m->g, node, 0));
  if (table == NULL || table->rank != 2 || onnx_in(m->g, node, 1)->kind != ONNX_ACT)
    return 0;
  cJSON *layer = add_layer(m, seg, 1, out, "embedding");
  set_int(layer, "vocab", table->dims[0]);
  set_int(layer, "dim", table->dims[1]);
  m->embedding_table = GPOINTER_TO_INT(g_hash_table_lookup(m->g->by_name, table->name)) - 1;
  return 1;
}

/* x + P, P a [positions, dim] table (or the rows of one) made of weights. */
static int
position_embedding(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  const OnnxNode *node = onnx_single(m, seg, "Add");
  if (node == NULL)
    return 0;
  const OnnxValue *a = onnx_in(m->g, node, 0), *b = onnx_in(m->g, node, 1);
  const OnnxValue *p = a->kind == ONNX_WEIGHT ? a : b;
  const OnnxValue *x = a->kind == ONNX_ACT ? a : b;
  if (p->kind != ONNX_WEIGHT || x->kind != ONNX_ACT || x->rank != 3)
    return 0;
  const OnnxValue *table = onnx_weight_source(m->g, p);
  if (table == NULL || table->rank < 2 || table->dims[table->rank - 1] != x->dims[2] ||
      onnx_elems(p) != x->dims[1] * x->dims[2])
    return 0;
  int64_t positions = onnx_elems(table) / table->dims[table->rank - 1];
  set_int(add_layer(m, seg, 1, out, "position_embedding"), "positions", positions);
  return 1;
}

/* x W (MatMul by a [in, out] weight, or Gemm by a weight, transposed or
 * not), then a bias: Gemm's C, or an Add of an [out] weight in the next
 * segment. */
static int
dense(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  const OnnxNode *node = onnx_single(m, seg, "MatMul");
  gboolean gemm = node == NULL;
  if (gemm)
    node = onnx_single(m, seg, "Gemm");
  if (node == NULL)
    return 0;
  const OnnxValue *x = onnx_in(m->g, node, 0), *w = onnx_in(m->g, node, 1);
  if (x->kind != ONNX_ACT || w->kind != ONNX_WEIGHT || w->rank != 2 ||
      (gemm && onnx_attr_int(node, "transA", 0) != 0))
    return 0;
  gboolean trans = gemm && onnx_attr_int(node, "transB", 0) != 0;
  int64_t features = w->dims[trans ? 0 : 1];
  gboolean bias = gemm && onnx_in(m->g, node, 2) != NULL;
  int used = 1;
  const OnnxNode *add = seg + 1 < m->n_segs ? onnx_single(m, seg + 1, "Add") : NULL;
  if (!bias && add != NULL) {
    const OnnxValue *a = onnx_in(m->g, add, 0), *b = onnx_in(m->g, add, 1);
    const OnnxValue *c = a->kind == ONNX_WEIGHT ? a : b;
    if (c->kind == ONNX_WEIGHT && onnx_elems(c) == features &&
        c->dims[MAX(c->rank - 1, 0)] == features) {
      bias = TRUE;
      used = 2;
    }
  }
  const OnnxValue *source = onnx_weight_source(m->g, w);
  const OnnxValue *table = onnx_value(m->g, m->embedding_table);
  gboolean tied = table != NULL && source == table;
  gboolean head = tied || (table != NULL && features == table->dims[0]);
  cJSON *layer = add_layer(m, seg, used, out, head ? "lm_head" : "linear");
  set_int(layer, head ? "vocab" : "out_features", features);
  if (head)
    cJSON_AddBoolToObject(layer, "tied", tied);
  cJSON_AddBoolToObject(layer, "bias", bias);
  return used;
}

/* The network's own softmax at its end: the loss computes one. */
static int
final_softmax(OnnxMap *m, int seg, cJSON *out, GString *why)
{
  if (!m->loss || seg != m->n_segs - 1)
    return 0;
  if (onnx_single(m, seg, "Softmax") == NULL && onnx_single(m, seg, "LogSoftmax") == NULL)
    return 0;
  st_import_warn(m->result, "the network's final %s is left out: the appended loss computes "
                 "the softmax", m->g->nodes[m->segs[seg].nodes[0]].op);
  return 1;
}

const OnnxRule st_onnx_rules_basic[] = {
  {"conv2d", conv2d, FALSE},
  {"pooling", pool2d, FALSE},
  {"adaptive_avgpool2d", adaptive_pool, FALSE},
  {"layer", plain, FALSE},
  {"layernorm", layernorm, FALSE},
  {"gelu", gelu_expanded, FALSE},
  {"reshape", reshape, FALSE},
  {"embedding", embedding, FALSE},
  {"to_tokens", to_tokens, FALSE},
  {"class_token", class_token, FALSE},
  {"select_token", select_token, FALSE},
  {"position_embedding", position_embedding, FALSE},
  {"linear", dense, FALSE},
  {"softmax", final_softmax, FALSE},
  {NULL},
};
