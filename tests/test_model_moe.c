/* test_model_moe.c: the parts of modern MoE models (issue 20 part 6):
 * multi-head latent attention (mla_block, sim/model/layer_mla.c) against the
 * DeepSeek-V2 paper's formulas, and DeepSeekMoE's shared and fine-grained
 * experts (docs/LLM.md, "Modern MoE") against their closed-form parameter
 * counts. */
#include <string.h>

#include "base/json.h"

#include "model/layer_type.h"
#include "model/model.h"
#include "testutil.h"

static StModel *
one_layer(int s, int d, const char *layer)
{
  g_autofree char *json = g_strdup_printf(
    "{\"name\": \"t\", \"input\": [%d], \"dtype\": \"bf16\", \"layers\": ["
    "{\"name\": \"emb\", \"type\": \"embedding\", \"vocab\": 64, \"dim\": %d}, %s]}",
    s, d, layer);
  return st_test_model_parse(json);
}

/* ---- multi-head latent attention ------------------------------------------------ */

/* DeepSeek-V2 (arXiv 2405.04434, section 2.1.2-2.1.3, eq. 12-19) per layer,
 * with d, H heads, q' = q_lora_rank, c = kv_lora_rank, per head n nope, r
 * rope, v value dims:
 *   W^DQ d q', q_norm q', W^UQ+W^QR q' H (n + r), W^DKV+W^KR d (c + r),
 *   kv_norm c, W^UK+W^UV c H (n + v), W^O H v d.
 * DeepSeek-V3's shape (arXiv 2412.19437, section 4.2: d 7168, 128 heads,
 * q' 1536, c 512, n 128, r 64, v 128):
 *   11,010,048 + 1,536 + 37,748,736 + 4,128,768 + 512 + 16,777,216
 *   + 117,440,512 = 187,107,328, with the block's RMSNorm 7,168 more. */
static void
test_mla_deepseek_v3(void)
{
  g_autoptr(StModel) m = one_layer(
    16, 7168,
    "{\"name\": \"b\", \"type\": \"mla_block\", \"heads\": 128, \"q_lora_rank\": 1536, "
    "\"kv_lora_rank\": 512, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, "
    "\"v_head_dim\": 128, \"mlp\": \"none\"}");
  g_assert_cmpint(m->layers[1].params, ==, 187107328 + 7168);
}

/* A small MLA, closed forms: s 16, d 64, H 4, q' 32, c 16, n 8, r 4, v 8.
 *   weights: d q' 2048 + q' H (n + r) 1536 + d (c + r) 1280 + c H (n + v)
 *            1024 + H v d 2048 = 7936; norms q' + c + d = 32 + 16 + 64
 *   forward: 2 s x 7936 = 253,952 for the projections; causal pairs
 *            P = 16 x 17 / 2 = 136: QK^T 2 P H (n + r) = 13,056,
 *            PV 2 P H v = 8,704
 *   backward: 2 x 253,952 + 2 x (13,056 + 8,704) + 13,056 = 564,480
 *   kept (bf16), besides the input x: h1 s d, c_q twice 2 s q', [c_kv, k_r]
 *            s (c + r), c_kv normed s c, q and k 2 s H (n + r), v and the
 *            output 2 s H v, fp32 lse 4 H s:
 *            2 (1024 + 1024 + 320 + 256 + 1536 + 1024) + 256 = 10,624
 *   The compressed KV (the paper's cache, c + r per token) is in it:
 *   without query compression (q' = 0, W^Q d H (n + r) = 3072) the kept
 *   bytes lose exactly the two c_q. */
static void
test_mla_small(void)
{
#define MLA_SMALL(Q)                                                                           \
  "{\"name\": \"b\", \"type\": \"mla_block\", \"heads\": 4, \"q_lora_rank\": " Q ", "              \
  "\"kv_lora_rank\": 16, \"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 4, \"v_head_dim\": 8, " \
  "\"mlp\": \"none\"}"
  const char *with_q = MLA_SMALL("32");
  g_autoptr(StModel) m = one_layer(16, 64, with_q);
  const StLayer *b = &m->layers[1];
  g_assert_cmpint(b->params, ==, 7936 + 32 + 16 + 64);
  g_assert_cmpfloat(b->fwd_flops, ==, 253952.0 + 13056.0 + 8704.0);
  g_assert_cmpfloat(b->bwd_flops, ==, 564480.0);
  g_assert_cmpint(b->act_bytes, ==, 16 * 64 * 2 + 10624);

  const char *without_q = MLA_SMALL("0");
  g_autoptr(StModel) n = one_layer(16, 64, without_q);
  const StLayer *c = &n->layers[1];
  g_assert_cmpint(c->params, ==, 3072 + 1280 + 1024 + 2048 + 16 + 64);
  g_assert_cmpint(c->act_bytes, ==, b->act_bytes - 2 * 16 * 32 * 2);

  /* Tensor-parallel over 2: the down projections and their norms stay whole
   * (Megatron-LM's duplicated linears), the up and output projections and
   * the heads halve: 2048 + 1280 + 32 + 16 + 64 + (1536 + 1024 + 2048) / 2. */
  StShape in = m->input;
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) tp = st_model_derive_as(m, &in, 2, FALSE, &error);
  g_assert_no_error(error);
  g_assert_cmpint(tp->layers[1].params, ==, 2048 + 1280 + 32 + 16 + 64 + 4608 / 2);
}

/* With an MLP the block is a DeepSeek dense layer: + norm2 d + SwiGLU 3 d f. */
static void
test_mla_dense(void)
{
  g_autoptr(StModel) m = one_layer(
    16, 64,
    "{\"name\": \"b\", \"type\": \"mla_block\", \"heads\": 4, \"q_lora_rank\": 32, "
    "\"kv_lora_rank\": 16, \"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 4, "
    "\"v_head_dim\": 8, \"ffn\": 96}");
  g_assert_cmpint(m->layers[1].params, ==, 7936 + 32 + 16 + 64 + 64 + 3 * 64 * 96);
  g_assert_cmpfloat(m->layers[1].fwd_flops, ==, 253952.0 + 13056.0 + 8704.0 + 6.0 * 16 * 64 * 96);
}

static void
test_mla_bad(void)
{
  g_autoptr(cJSON) root = cJSON_Parse(
    "{\"name\": \"t\", \"input\": [16], \"layers\": [{\"name\": \"emb\", \"type\": "
    "\"embedding\", \"vocab\": 64, \"dim\": 64}, {\"name\": \"b\", \"type\": \"mla_block\", "
    "\"heads\": 4, \"kv_lora_rank\": 16, \"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 3, "
    "\"v_head_dim\": 8, \"mlp\": \"none\"}]}");
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) m = st_model_from_json(root, "inline", &error);
  g_assert_null(m);
  g_assert_nonnull(strstr(error->message, "qk_rope_head_dim"));
}

/* ---- shared and fine-grained experts -------------------------------------------- */

/* DeepSeekMoE (Dai et al. 2024, arXiv 2401.06066, section 3): N_s shared
 * experts that every token passes, N_r routed experts of which it takes
 * K_r, each expert of width f_e, distinct from the dense layers' f. Written
 * as docs/LLM.md says: the block's MLP holds the shared experts (ffn = N_s
 * f_e), the router takes no norm of its own (the block's second norm is
 * the MoE's), then N_r moe_expert layers of ffn f_e. Per MoE layer:
 *   total  = d (norm) + 3 d N_s f_e + N_r d (router) + N_r 3 d f_e
 *   active = d + 3 d N_s f_e + N_r d + K_r 3 d f_e
 * d 32, N_s 2, N_r 8, K_r 3, f_e 16, dense f 96; attention MLA as above
 * but d 32 (weights 1024 + 1536 + 640 + 1024 + 1024 = 5248, norms 32 + 16
 * + 32). One dense layer, two MoE layers, vocab 64 embedding and untied
 * head. */
static void
test_shared_fine_grained(void)
{
  const char *attn = "\"heads\": 4, \"q_lora_rank\": 32, \"kv_lora_rank\": 16, "
                     "\"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 4, \"v_head_dim\": 8";
  g_autofree char *json = g_strdup_printf(
    "{\"name\": \"t\", \"input\": [16], \"layers\": ["
    "{\"name\": \"emb\", \"type\": \"embedding\", \"vocab\": 64, \"dim\": 32},"
    "{\"name\": \"dense\", \"type\": \"mla_block\", %s, \"ffn\": 96},"
    "{\"repeat\": 2, \"layers\": ["
    " {\"name\": \"l{i}\", \"type\": \"mla_block\", %s, \"ffn\": 32},"
    " {\"name\": \"l{i}.moe\", \"type\": \"moe_router\", \"experts\": 8, \"top_k\": 3, "
    "  \"norm\": \"none\"},"
    " {\"repeat\": 8, \"layers\": [{\"name\": \"l{i}.e{j}\", \"type\": \"moe_expert\", "
    "  \"ffn\": 16}]}]},"
    "{\"name\": \"norm\", \"type\": \"rmsnorm\"},"
    "{\"name\": \"head\", \"type\": \"lm_head\", \"vocab\": 64}]}",
    attn, attn);
  g_autoptr(StModel) m = st_test_model_parse(json);
  int64_t d = 32, fe = 16, attention = 5248 + 32 + 16 + d;
  int64_t dense = attention + d + 3 * d * 96;
  int64_t moe_total = attention + d + 3 * d * 2 * fe + 8 * d + 8 * 3 * d * fe;
  int64_t moe_active = attention + d + 3 * d * 2 * fe + 8 * d + 3 * 3 * d * fe;
  int64_t ends = 64 * d + d + d * 64;
  g_assert_cmpint(m->params, ==, ends + dense + 2 * moe_total);
  g_assert_cmpint(m->active_params, ==, ends + dense + 2 * moe_active);
  /* top_k 3 of 8 fine-grained experts: each expert takes C = ceil(3 x 16 /
   * 8) = 6 rows, 6 C d f_e FLOPs forward. */
  const StLayer *x = &m->layers[5];
  g_assert_cmpstr(x->type->name, ==, "moe_expert");
  g_assert_cmpint(st_layer_attr(x, "capacity", 0), ==, 6);
  g_assert_cmpfloat(x->fwd_flops, ==, 6.0 * 6 * d * fe);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/model/moe/mla-deepseek-v3", test_mla_deepseek_v3);
  g_test_add_func("/model/moe/mla-small", test_mla_small);
  g_test_add_func("/model/moe/mla-dense", test_mla_dense);
  g_test_add_func("/model/moe/mla-bad", test_mla_bad);
  g_test_add_func("/model/moe/shared-fine-grained", test_shared_fine_grained);
  return g_test_run();
}
