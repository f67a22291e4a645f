/* test_model_llm.c: the LLM layer types of the simulator (sim/model:
 * layer_attention.c, layer_llm.c, layer_decoder.c, layer_moe.c), their
 * numbers against closed forms worked out by hand, Korthikanti et al.'s
 * activation formula (arXiv 2205.05198, section 4) with and without tensor
 * and sequence parallelism, the MoE chain's rules, choice attrs, and the
 * tensor-parallel split (st_model_derive_as, st_layer_tp_comm).
 */
#include <string.h>

#include "base/json.h"
#include "model/layer_type.h"
#include "testutil.h"

/* A one-layer token model: embedding of `d` into `layer` (JSON of one
 * layer object), on `s` tokens at `dtype`. */
static StModel *
one_layer(int s, int d, const char *dtype, const char *layer)
{
  g_autofree char *json = g_strdup_printf(
    "{\"name\": \"t\", \"input\": [%d], \"dtype\": \"%s\", \"layers\": ["
    "{\"name\": \"emb\", \"type\": \"embedding\", \"vocab\": 64, \"dim\": %d}, %s]}",
    s, dtype, d, layer);
  return st_test_model_parse(json);
}

/* Parsing `json` fails with a message holding every one of `parts`. */
static void
assert_bad(const char *json, const char *const *parts)
{
  g_autoptr(cJSON) root = cJSON_Parse(json);
  g_assert_nonnull(root);
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) m = st_model_from_json(root, "inline", &error);
  g_assert_null(m);
  g_assert_nonnull(error);
  for (const char *const *p = parts; *p != NULL; p++)
    if (strstr(error->message, *p) == NULL)
      g_error("message \"%s\" lacks \"%s\"", error->message, *p);
}

/* ---- attention ------------------------------------------------------------------- */

static void
test_attention_gqa(void)
{
  /* d = 64, 8 heads of 8 sharing 2 kv heads, s = 16: q = 64, n = q + 2 x 16
   * = 96. params = d n + q d = 6144 + 4096 = 10240. Projections forward
   * 2 s d n + 2 s q d = 196608 + 131072 = 327680. Flash, causal: P = 16 x
   * 17 / 2 = 136 pairs, core 4 P k H = 4 x 136 x 8 x 8 = 34816; backward
   * 2 x 327680 + 2.5 x 34816 = 742400. Kept (fp32) besides the input:
   * (n + q) s 4 = 10240 bytes and the log-sum-exp 4 H s = 512. */
  g_autoptr(StModel) m = one_layer(16, 64, "fp32",
                                   "{\"name\": \"a\", \"type\": \"attention\", \"heads\": 8, "
                                   "\"kv_heads\": 2}");
  const StLayer *a = &m->layers[1];
  g_assert_cmpint(a->params, ==, 10240);
  g_assert_cmpfloat(a->fwd_flops, ==, 327680.0 + 34816.0);
  g_assert_cmpfloat(a->bwd_flops, ==, 742400.0);
  g_assert_cmpint(a->act_bytes, ==, 16 * 64 * 4 + 10240 + 512);
  g_assert_cmpint(a->act_again[ST_RC_CORE_ATTN], ==, 0);
  g_assert_cmpint(st_layer_attr(a, "head_dim", 0), ==, 8);
  g_assert_cmpint(st_layer_attr(a, "rope_dim", 0), ==, 8);

  /* Dense (flash off): all 256 pairs, core 4 x 256 x 64 = 65536, backward
   * 2x; the probabilities H s^2 = 2048 elements kept, and what selective
   * recomputation drops, remade by QK^T: 2 x 256 x 64 = 32768 FLOPs. */
  g_autoptr(StModel) d = one_layer(16, 64, "fp32",
                                   "{\"name\": \"a\", \"type\": \"attention\", \"heads\": 8, "
                                   "\"kv_heads\": 2, \"flash\": false}");
  a = &d->layers[1];
  g_assert_cmpfloat(a->fwd_flops, ==, 327680.0 + 65536.0);
  g_assert_cmpfloat(a->bwd_flops, ==, 2.0 * (327680.0 + 65536.0));
  g_assert_cmpint(a->act_bytes, ==, 16 * 64 * 4 + 10240 + 2048 * 4);
  g_assert_cmpint(a->act_again[ST_RC_CORE_ATTN], ==, 2048 * 4);
  g_assert_cmpfloat(a->again_flops[ST_RC_CORE_ATTN], ==, 32768.0);

  /* Multi-query with biases: n = 64 + 2 x 8 = 80: 64 x 80 + 80 + 64 x 64 + 64. */
  g_autoptr(StModel) q = one_layer(16, 64, "fp32",
                                   "{\"name\": \"a\", \"type\": \"attention\", \"heads\": 8, "
                                   "\"kv_heads\": 1, \"qkv_bias\": true, \"out_bias\": true}");
  g_assert_cmpint(q->layers[1].params, ==, 64 * 80 + 80 + 64 * 64 + 64);

  /* Sliding window w = 4 over s = 16: 4 x 5 / 2 rows filling the window,
   * then 12 rows of 4: 58 pairs, core 4 x 58 x 64. */
  g_autoptr(StModel) w = one_layer(16, 64, "fp32",
                                   "{\"name\": \"a\", \"type\": \"attention\", \"heads\": 8, "
                                   "\"window\": 4}");
  g_assert_cmpfloat(w->layers[1].fwd_flops, ==,
                    2.0 * 16 * 64 * 192 + 2.0 * 16 * 64 * 64 + 4.0 * 58 * 64);
}

static void
test_attention_bad(void)
{
  static const struct {
    const char *layer;
    const char *parts[3];
  } CASES[] = {
    {"\"heads\": 8, \"kv_heads\": 3", {"key 'kv_heads'", "does not divide the 8 heads"}},
    {"\"heads\": 6", {"key 'heads'", "does not divide the dim 64"}},
    {"\"heads\": 8, \"rope_dim\": 5", {"key 'rope_dim'", "even"}},
    {"\"heads\": 8, \"window\": 4, \"flash\": false", {"key 'window'", "flash"}},
  };
  for (gsize k = 0; k < G_N_ELEMENTS(CASES); k++) {
    g_autofree char *json = g_strdup_printf(
      "{\"name\": \"t\", \"input\": [16], \"layers\": [{\"name\": \"emb\", \"type\": "
      "\"embedding\", \"vocab\": 64, \"dim\": 64}, {\"name\": \"a\", \"type\": "
      "\"attention\", %s}]}",
      CASES[k].layer);
    const char *parts[4] = {"layer 1 'a'", CASES[k].parts[0], CASES[k].parts[1], NULL};
    assert_bad(json, parts);
  }
}

/* ---- MLPs, norms, the decoder block --------------------------------------------------- */

static void
test_mlp_norm(void)
{
  /* SwiGLU d = 64 -> f = 96: params 3 d f, forward 6 s d f; kept besides
   * the input: gate and up (2 s f) and their product (s f). */
  g_autoptr(StModel) m = one_layer(16, 64, "bf16",
                                   "{\"name\": \"f\", \"type\": \"swiglu\", \"ffn\": 96}");
  const StLayer *f = &m->layers[1];
  g_assert_cmpint(f->params, ==, 3 * 64 * 96);
  g_assert_cmpfloat(f->fwd_flops, ==, 6.0 * 16 * 64 * 96);
  g_assert_cmpfloat(f->bwd_flops, ==, 12.0 * 16 * 64 * 96);
  g_assert_cmpint(f->act_bytes, ==, 2 * (16 * 64 + 3 * 16 * 96));
  g_autoptr(StModel) g = one_layer(16, 64, "bf16",
                                   "{\"name\": \"f\", \"type\": \"geglu\", \"ffn\": 96, "
                                   "\"bias\": true}");
  g_assert_cmpint(g->layers[1].params, ==, 3 * 64 * 96 + 2 * 96 + 64);
  /* RMSNorm: a scale per feature, 4 FLOPs per element forward. */
  g_autoptr(StModel) n = one_layer(16, 64, "fp32", "{\"name\": \"n\", \"type\": \"rmsnorm\"}");
  g_assert_cmpint(n->layers[1].params, ==, 64);
  g_assert_cmpfloat(n->layers[1].fwd_flops, ==, 4.0 * 16 * 64);
}

static void
test_llama_block(void)
{
  /* LLaMA-shaped: d = 64, 8 heads, 2 kv heads, SwiGLU f = 96: two RMSNorms
   * 2 d, attention 10240 (test_attention_gqa), MLP 3 d f. */
  g_autoptr(StModel) m = one_layer(16, 64, "fp32",
                                   "{\"name\": \"b\", \"type\": \"llama_block\", \"heads\": 8, "
                                   "\"kv_heads\": 2, \"ffn\": 96}");
  const StLayer *b = &m->layers[1];
  g_assert_cmpint(b->params, ==, 2 * 64 + 10240 + 3 * 64 * 96);
  g_assert_cmpfloat(b->fwd_flops, ==, 327680.0 + 34816.0 + 6.0 * 16 * 64 * 96);
  g_assert_cmpfloat(b->bwd_flops, ==, 742400.0 + 12.0 * 16 * 64 * 96);
  g_assert_cmpstr(st_layer_attr_choice(b, "mlp"), ==, "swiglu");
  g_assert_cmpstr(st_layer_attr_choice(b, "norm"), ==, "rmsnorm");

  /* The attention half (mlp none): one norm, the attention. */
  g_autoptr(StModel) h = one_layer(16, 64, "fp32",
                                   "{\"name\": \"b\", \"type\": \"llama_block\", \"heads\": 8, "
                                   "\"kv_heads\": 2, \"mlp\": \"none\"}");
  g_assert_cmpint(h->layers[1].params, ==, 64 + 10240);

  /* GPT-NeoX: LayerNorms (scale and shift), biases everywhere, GELU MLP. */
  g_autoptr(StModel) x = one_layer(16, 64, "fp32",
                                   "{\"name\": \"b\", \"type\": \"llama_block\", \"heads\": 8, "
                                   "\"ffn\": 256, \"mlp\": \"gelu\", \"norm\": \"layernorm\", "
                                   "\"qkv_bias\": true, \"out_bias\": true, \"mlp_bias\": true, "
                                   "\"parallel_residual\": true, \"rope_dim\": 2}");
  g_assert_cmpint(x->layers[1].params, ==, 12 * 64 * 64 + 13 * 64);

  const char *bad_choice = "{\"name\": \"t\", \"input\": [16], \"layers\": [{\"name\": \"emb\", "
                           "\"type\": \"embedding\", \"vocab\": 64, \"dim\": 64}, {\"name\": "
                           "\"b\", \"type\": \"llama_block\", \"heads\": 8, \"ffn\": 8, \"mlp\": "
                           "\"relu\"}]}";
  const char *parts[] = {"key 'mlp'", "swiglu, geglu, gelu, none", NULL};
  assert_bad(bad_choice, parts);
  const char *no_ffn = "{\"name\": \"t\", \"input\": [16], \"layers\": [{\"name\": \"emb\", "
                       "\"type\": \"embedding\", \"vocab\": 64, \"dim\": 64}, {\"name\": \"b\", "
                       "\"type\": \"llama_block\", \"heads\": 8}]}";
  const char *parts2[] = {"key 'ffn'", "missing", NULL};
  assert_bad(no_ffn, parts2);
}

/* ---- Korthikanti et al. --------------------------------------------------------------- */

/* Section 4.1: a GPT block at 16 bits with dropout keeps s b h (34 + 5 a s
 * / h) bytes; selective recomputation drops the 5 a s^2 b of the attention
 * core (softmax output 2, its dropout mask 1, the dropout output 2), full
 * keeps the block's input, 2 s b h (what --recompute full keeps: the
 * strategies' tests). Per sample (b = 1), s = 32, h = 64, a = 4. Our block
 * matches the formula exactly: act_bytes counts what autograd keeps (the
 * fp32 LayerNorm statistics the executor also keeps are left out, as the
 * paper leaves them out). Section 4.2 (tensor parallel, t = 2): the
 * LayerNorms' inputs, the QKV and fc1 inputs and the two residual dropout
 * masks stay whole, 10 s b h; the rest splits: 24 s b h / t + 5 a s^2 b /
 * t; with sequence parallelism everything splits: (34 s b h + 5 a s^2 b) / t. */
static void
test_korthikanti(void)
{
  const int64_t s = 32, h = 64, a = 4;
  g_autoptr(StModel) m = one_layer(
    (int)s, (int)h, "bf16",
    "{\"name\": \"b\", \"type\": \"transformer_block\", \"heads\": 4, \"dropout\": true}");
  const StLayer *b = &m->layers[1];
  g_assert_cmpint(b->act_bytes, ==, s * h * 34 + 5 * a * s * s);
  g_assert_cmpint(b->act_bytes - b->act_again[ST_RC_CORE_ATTN], ==, s * h * 34);
  StShape in = m->input;
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) tp = st_model_derive_as(m, &in, 2, FALSE, &error);
  g_assert_no_error(error);
  g_assert_cmpint(tp->layers[1].act_bytes, ==, 10 * s * h + 24 * s * h / 2 + 5 * a * s * s / 2);
  g_autoptr(StModel) sp = st_model_derive_as(m, &in, 2, TRUE, &error);
  g_assert_no_error(error);
  g_assert_cmpint(sp->layers[1].act_bytes, ==, (34 * s * h + 5 * a * s * s) / 2);

  /* A LLaMA block with GPT's MLP (gelu, f = 4h), MHA, dense attention, no
   * dropout: the formula less the dropouts (2 s b h of masks, 3 a s^2 b of
   * the attention's dropout): 32 s b h + 2 a s^2 b. Flash replaces the
   * softmax output 2 a s^2 b by its fp32 log-sum-exp, 4 a s b. */
  g_autoptr(StModel) l = one_layer(
    (int)s, (int)h, "bf16",
    "{\"name\": \"b\", \"type\": \"llama_block\", \"heads\": 4, \"ffn\": 256, \"mlp\": "
    "\"gelu\", \"flash\": false}");
  g_assert_cmpint(l->layers[1].act_bytes, ==, 32 * s * h + 2 * a * s * s);
  g_autoptr(StModel) f = one_layer(
    (int)s, (int)h, "bf16",
    "{\"name\": \"b\", \"type\": \"llama_block\", \"heads\": 4, \"ffn\": 256, \"mlp\": \"gelu\"}");
  g_assert_cmpint(f->layers[1].act_bytes, ==, 32 * s * h + 4 * a * s);
}

/* ---- MoE -------------------------------------------------------------------------------- */

#define MOE_HEAD                                                                               \
  "{\"name\": \"t\", \"input\": [16], \"layers\": [{\"name\": \"emb\", \"type\": "            \
  "\"embedding\", \"vocab\": 64, \"dim\": 32}, "

static void
test_moe_chain(void)
{
  /* 4 experts, top 2, capacity 150%: C = ceil(1.5 x 2 x 16 / 4) = 12 of the
   * 16 tokens. The stream is [16, 2 x 32 + 4]; the last expert closes it.
   * Router: RMSNorm d, W_r E d; expert: SwiGLU 3 d f = 3 x 32 x 48, of which
   * a token uses top_k / E. Expert forward 6 C d f. */
  g_autoptr(StModel) m = st_test_model_parse(
    MOE_HEAD "{\"name\": \"r\", \"type\": \"moe_router\", \"experts\": 4, \"capacity_pct\": 150},"
             "{\"repeat\": 4, \"layers\": [{\"name\": \"e{i}\", \"type\": \"moe_expert\", "
             "\"ffn\": 48}]}, {\"name\": \"n\", \"type\": \"rmsnorm\"}]}");
  g_assert_cmpint(m->n_layers, ==, 7);
  const StLayer *r = &m->layers[1];
  g_assert_cmpint(r->out_shape.dims[1], ==, 68);
  g_assert_cmpint(r->params, ==, 32 + 4 * 32);
  for (int e = 0; e < 4; e++) {
    const StLayer *x = &m->layers[2 + e];
    g_assert_cmpint(st_layer_attr(x, "expert", -1), ==, e);
    g_assert_cmpint(st_layer_attr(x, "capacity", 0), ==, 12);
    g_assert_cmpint(x->params, ==, 3 * 32 * 48);
    g_assert_cmpint(x->active_params, ==, 3 * 32 * 48 / 2);
    g_assert_cmpfloat(x->fwd_flops, ==, 6.0 * 12 * 32 * 48);
    g_assert_cmpint(x->out_shape.dims[1], ==, e == 3 ? 32 : 68);
  }
  g_assert_cmpint(m->params - m->active_params, ==, 4 * 3 * 32 * 48 / 2);

  /* Written back, the derived attrs stay out and come back the same. */
  g_autoptr(cJSON) json = st_model_to_json(m);
  g_autofree char *text = cJSON_PrintUnformatted(json);
  g_assert_null(strstr(text, "\"capacity\""));
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) back = st_model_from_json(json, "written", &error);
  g_assert_no_error(error);
  g_assert_cmpstr(back->layers[5].signature, ==, m->layers[5].signature);

  /* A longer sequence: the capacity follows (C = ceil(1.5 x 2 x 64 / 4)). */
  StShape in = {.n_dims = 1, .dims = {64}};
  g_autoptr(StModel) longer = st_model_derive_as(m, &in, 1, FALSE, &error);
  g_assert_no_error(error);
  g_assert_cmpint(st_layer_attr(&longer->layers[3], "capacity", 0), ==, 48);
  /* Capacity at most the tokens. */
  g_autoptr(StModel) big = st_test_model_parse(
    MOE_HEAD "{\"name\": \"r\", \"type\": \"moe_router\", \"experts\": 2, \"top_k\": 1, "
             "\"capacity_pct\": 1000}, {\"name\": \"e0\", \"type\": \"moe_expert\", \"ffn\": 8},"
             "{\"name\": \"e1\", \"type\": \"moe_expert\", \"ffn\": 8}]}");
  g_assert_cmpint(st_layer_attr(&big->layers[2], "capacity", 0), ==, 16);
}

static void
test_moe_bad(void)
{
  const char *alone = MOE_HEAD "{\"name\": \"e\", \"type\": \"moe_expert\", \"ffn\": 8}]}";
  const char *p1[] = {"layer 1 'e'", "follows its moe_router", NULL};
  assert_bad(alone, p1);
  const char *short_chain =
    MOE_HEAD "{\"name\": \"r\", \"type\": \"moe_router\", \"experts\": 3}, {\"name\": \"e\", "
             "\"type\": \"moe_expert\", \"ffn\": 8}, {\"name\": \"n\", \"type\": \"rmsnorm\"}]}";
  const char *p2[] = {"layer 3 'n'", "cannot follow 'e'", "still open", NULL};
  assert_bad(short_chain, p2);
  const char *unfinished =
    MOE_HEAD "{\"name\": \"r\", \"type\": \"moe_router\", \"experts\": 3, \"top_k\": 1}]}";
  const char *p3[] = {"layer 1 'r'", "ends inside its chain", NULL};
  assert_bad(unfinished, p3);
  const char *extra =
    MOE_HEAD "{\"name\": \"r\", \"type\": \"moe_router\", \"experts\": 1, \"top_k\": 1}, "
             "{\"name\": \"e0\", \"type\": \"moe_expert\", \"ffn\": 8}, {\"name\": \"e1\", "
             "\"type\": \"moe_expert\", \"ffn\": 8}]}";
  const char *p4[] = {"layer 3 'e1'", "follows its moe_router", NULL};
  assert_bad(extra, p4);
  const char *given =
    MOE_HEAD "{\"name\": \"r\", \"type\": \"moe_router\", \"experts\": 1, \"top_k\": 1}, "
             "{\"name\": \"e0\", \"type\": \"moe_expert\", \"ffn\": 8, \"capacity\": 3}]}";
  const char *p5[] = {"layer 2 'e0'", "capacity", NULL};
  assert_bad(given, p5);
  const char *topk = MOE_HEAD "{\"name\": \"r\", \"type\": \"moe_router\", \"experts\": 2, "
                              "\"top_k\": 3}, {\"name\": \"e0\", \"type\": \"moe_expert\", "
                              "\"ffn\": 8}, {\"name\": \"e1\", \"type\": \"moe_expert\", "
                              "\"ffn\": 8}]}";
  const char *p6[] = {"layer 1 'r'", "key 'top_k'", NULL};
  assert_bad(topk, p6);
}

/* ---- tensor parallelism ---------------------------------------------------------------------- */

static void
test_tensor_parallel(void)
{
  /* A tiny LLaMA at t = 2: split layers hold half their weights (the
   * norms stay whole), the embedding and head half the vocabulary. */
  g_autoptr(StModel) m = st_test_model_parse(
    "{\"name\": \"t\", \"input\": [16], \"dtype\": \"bf16\", \"layers\": ["
    "{\"name\": \"emb\", \"type\": \"embedding\", \"vocab\": 64, \"dim\": 64},"
    "{\"name\": \"b\", \"type\": \"llama_block\", \"heads\": 8, \"kv_heads\": 2, \"ffn\": 96},"
    "{\"name\": \"n\", \"type\": \"rmsnorm\"},"
    "{\"name\": \"head\", \"type\": \"lm_head\", \"vocab\": 64},"
    "{\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}");
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) t2 = st_model_derive_as(m, NULL, 2, FALSE, &error);
  g_assert_no_error(error);
  g_assert_cmpint(t2->layers[0].params, ==, 32 * 64);
  g_assert_cmpint(t2->layers[1].params, ==, 2 * 64 + (10240 + 3 * 64 * 96) / 2);
  g_assert_cmpfloat(t2->layers[1].fwd_flops, ==, m->layers[1].fwd_flops / 2);
  g_assert_cmpint(t2->layers[2].params, ==, 64);
  g_assert_cmpint(t2->layers[3].out_shape.dims[1], ==, 32);
  g_assert_cmpint(t2->layers[3].params, ==, 64 * 32);
  g_assert_nonnull(strstr(t2->layers[1].signature, "/tp2"));

  /* What each pass needs from the group (bytes per sample, bf16): the
   * block all-reduces its output forward and its input's gradient backward
   * (16 x 64 x 2); with sequence parallelism it all-gathers its 8 tokens'
   * input first and reduce-scatters the output. The embedding all-reduces
   * its output; the head its input's gradient; the loss 3 floats a token. */
  StTpComm c[2];
  g_assert_cmpint(st_layer_tp_comm(&t2->layers[1], ST_PASS_FWD, 2, c), ==, 1);
  g_assert_cmpint(c[0].kind, ==, ST_COLL_ALL_REDUCE);
  g_assert_cmpint(c[0].bytes, ==, 16 * 64 * 2);
  g_assert_cmpint(st_layer_tp_comm(&t2->layers[1], ST_PASS_BWD, 2, c), ==, 1);
  g_assert_cmpint(c[0].kind, ==, ST_COLL_ALL_REDUCE);
  g_assert_cmpint(st_layer_tp_comm(&t2->layers[0], ST_PASS_FWD, 2, c), ==, 1);
  g_assert_cmpint(c[0].kind, ==, ST_COLL_ALL_REDUCE);
  g_assert_cmpint(st_layer_tp_comm(&t2->layers[0], ST_PASS_BWD, 2, c), ==, 0);
  g_assert_cmpint(st_layer_tp_comm(&t2->layers[2], ST_PASS_FWD, 2, c), ==, 0);
  g_assert_cmpint(st_layer_tp_comm(&t2->layers[3], ST_PASS_FWD, 2, c), ==, 0);
  g_assert_cmpint(st_layer_tp_comm(&t2->layers[3], ST_PASS_BWD, 2, c), ==, 1);
  g_assert_cmpint(c[0].bytes, ==, 16 * 64 * 2);
  g_assert_cmpint(st_layer_tp_comm(&t2->layers[4], ST_PASS_FWD, 2, c), ==, 1);
  g_assert_cmpint(c[0].bytes, ==, 16 * 12);
  g_assert_cmpint(st_layer_tp_comm(&m->layers[1], ST_PASS_FWD, 2, c), ==, 0);

  g_autoptr(StModel) sp = st_model_derive_as(m, NULL, 2, TRUE, &error);
  g_assert_no_error(error);
  g_assert_cmpint(sp->layers[0].out_shape.dims[0], ==, 8);
  g_assert_cmpint(sp->layers[1].in_shape.dims[0], ==, 8);
  g_assert_cmpfloat(sp->layers[1].fwd_flops, ==, m->layers[1].fwd_flops / 2);
  g_assert_cmpint(sp->layers[3].out_shape.dims[0], ==, 16);
  g_assert_cmpint(st_layer_tp_comm(&sp->layers[1], ST_PASS_FWD, 2, c), ==, 2);
  g_assert_cmpint(c[0].kind, ==, ST_COLL_ALL_GATHER);
  g_assert_true(c[0].before);
  g_assert_cmpint(c[0].bytes, ==, 16 * 64 * 2);
  g_assert_cmpint(c[1].kind, ==, ST_COLL_REDUCE_SCATTER);
  g_assert_false(c[1].before);

  /* 4 ranks cannot split 2 kv heads. */
  g_autoptr(StModel) t4 = st_model_derive_as(m, NULL, 4, FALSE, &error);
  g_assert_null(t4);
  g_assert_nonnull(strstr(error->message, "layer 1 'b': key 'kv_heads'"));
  g_assert_nonnull(strstr(error->message, "4 tensor-parallel ranks"));
}

/* Under sequence parallelism the tensor group's expert rows are gathered
 * (t C rows, C counted on the rank's s/t tokens) before the column-parallel
 * projections, whose weight gradients need them again in the backward:
 * Megatron-LM's experts save the gathered input. The expert keeps X at
 * t C rows (no all-gather repeats them in the schedule), its MLP's tensors
 * at t C rows, and its reduce-scattered output Y, tokens and gates at C.
 * It kept X at C rows: (t - 1) C d bytes a sample too few, 14 GiB on a
 * Mixtral 8x7B GPU of TP 8 + SP, EP 8. */
static void
test_moe_sequence_parallel_memory(void)
{
  g_autoptr(StModel) m = st_test_model_parse(
    "{\"name\": \"t\", \"input\": [64], \"layers\": [{\"name\": \"emb\", \"type\": "
    "\"embedding\", \"vocab\": 64, \"dim\": 256}, "
    "{\"name\": \"r\", \"type\": \"moe_router\", \"experts\": 4, \"top_k\": 2},"
    "{\"repeat\": 4, \"layers\": [{\"name\": \"e{i}\", \"type\": \"moe_expert\", "
    "\"ffn\": 512}]}]}");
  g_autoptr(GError) error = NULL;
  const int t = 2, e = 4, batch = 3;
  const int64_t d = 256, f = 512 / t;
  g_autoptr(StModel) sp = st_model_derive_as(m, NULL, t, TRUE, &error);
  g_assert_no_error(error);
  for (int i = 2; i < 6; i++) {
    const StLayer *x = &sp->layers[i];
    int64_t c = st_layer_attr(x, "capacity", 0);
    g_assert_cmpint(c, ==, 2 * 64 / t / 4); /* C = ceil(k s' / X), s' = s / t */
    int64_t rows = batch * c, gathered = t * rows;
    StLayerMemory mem;
    st_layer_memory(sp, i, batch, ST_DTYPE_FP32, &mem);
    int64_t want = 2 * st_layer_aligned(rows * 4) + st_layer_aligned(gathered * d * e) +
                   st_layer_aligned(gathered * f * 2 * e) + st_layer_aligned(gathered * f * e) +
                   st_layer_aligned(rows * d * e);
    g_assert_cmpint(mem.saved, ==, want);
    /* Per sample, unaligned: the same tensors. */
    g_assert_cmpint(x->act_bytes, ==,
                    (t * c * d + t * c * f * 3 + c * d) * e + c * (int64_t)(4 + 4));
  }
}

/* ---- sequence length, nested repeats ------------------------------------------------------- */

static void
test_derive_as_seq(void)
{
  /* Doubling the tokens doubles the projections and quadruples the dense
   * core; a learned position table shorter than the sequence refuses it. */
  g_autoptr(StModel) m = one_layer(16, 64, "fp32",
                                   "{\"name\": \"a\", \"type\": \"attention\", \"heads\": 8, "
                                   "\"flash\": false}");
  StShape in = {.n_dims = 1, .dims = {32}};
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) l = st_model_derive_as(m, &in, 1, FALSE, &error);
  g_assert_no_error(error);
  double proj = 2.0 * 16 * 64 * 192 + 2.0 * 16 * 64 * 64, core = 4.0 * 256 * 64;
  g_assert_cmpfloat(m->layers[1].fwd_flops, ==, proj + core);
  g_assert_cmpfloat(l->layers[1].fwd_flops, ==, 2 * proj + 4 * core);
  g_autoptr(StModel) gpt = st_test_model("tests/data/exec/tiny-gpt.json");
  g_autoptr(StModel) bad = st_model_derive_as(gpt, &in, 1, FALSE, &error);
  g_assert_null(bad);
  g_assert_nonnull(strstr(error->message, "key 'positions'"));
}

static void
test_nested_repeat(void)
{
  g_autoptr(StModel) m = st_test_model_parse(
    "{\"name\": \"t\", \"input\": [8], \"layers\": [{\"repeat\": 2, \"layers\": ["
    "{\"name\": \"l{i}\", \"type\": \"linear\", \"out_features\": 8},"
    "{\"repeat\": 3, \"from\": 1, \"layers\": [{\"name\": \"l{i}.x{j}\", \"type\": \"relu\"}]}"
    "]}]}");
  g_assert_cmpint(m->n_layers, ==, 8);
  g_assert_cmpstr(m->layers[3].name, ==, "l0.x3");
  g_assert_cmpstr(m->layers[5].name, ==, "l1.x1");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/model/llm/attention", test_attention_gqa);
  g_test_add_func("/model/llm/attention-bad", test_attention_bad);
  g_test_add_func("/model/llm/mlp-norm", test_mlp_norm);
  g_test_add_func("/model/llm/llama-block", test_llama_block);
  g_test_add_func("/model/llm/korthikanti", test_korthikanti);
  g_test_add_func("/model/llm/moe", test_moe_chain);
  g_test_add_func("/model/llm/moe-bad", test_moe_bad);
  g_test_add_func("/model/llm/moe-sequence-parallel-memory", test_moe_sequence_parallel_memory);
  g_test_add_func("/model/llm/tensor-parallel", test_tensor_parallel);
  g_test_add_func("/model/llm/seq-len", test_derive_as_seq);
  g_test_add_func("/model/llm/nested-repeat", test_nested_repeat);
  return g_test_run();
}
