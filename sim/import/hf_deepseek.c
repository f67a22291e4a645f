/* hf_deepseek.c: transformers' "deepseek_v2" and "deepseek_v3" (DeepSeek-AI
 * 2024, DeepSeek-V2, arXiv 2405.04434; DeepSeek-V3 technical report, arXiv
 * 2412.19437): decoders of multi-head latent attention (MLA) and DeepSeekMoE
 * (shared experts beside many fine-grained routed ones).
 *
 * A token embedding; num_hidden_layers pre-norm blocks of RMSNorm, MLA
 * (q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
 * v_head_dim, num_attention_heads), RMSNorm and either a SwiGLU MLP of
 * intermediate_size (the first first_k_dense_replace layers) or the MoE:
 * n_shared_experts experts every token passes and n_routed_experts of which
 * a token takes num_experts_per_tok, each a SwiGLU of moe_intermediate_size;
 * a final RMSNorm; the LM head, untied. In stagger's vocabulary (docs/
 * LLM.md, "Modern MoE"): embedding; mla_block with ffn intermediate_size;
 * then per MoE layer an mla_block whose MLP is the shared experts (ffn =
 * n_shared_experts x moe_intermediate_size), a moe_router without a norm of
 * its own (the block's second norm is the MoE's) and n_routed_experts
 * moe_expert layers; rmsnorm, lm_head, softmax_cross_entropy.
 *
 * Read for structure: vocab_size, hidden_size, intermediate_size,
 * moe_intermediate_size, num_hidden_layers, num_attention_heads,
 * num_key_value_heads (MLA has one key/value head per query head: must
 * equal num_attention_heads), n_routed_experts, n_shared_experts,
 * num_experts_per_tok, first_k_dense_replace, moe_layer_freq (1 only: every
 * layer after the dense ones is MoE, as in V2 and V3), the MLA ranks and
 * head dims, max_position_embeddings, hidden_act (silu), attention_bias
 * (must be false), tie_word_embeddings, attention_dropout (0). Numerics
 * only: rms_norm_eps, rope_theta, rope_scaling (YaRN), routed_scaling_factor,
 * aux_loss_alpha, seq_aux, norm_topk_prob (the router's norm_topk).
 * Routing choices read and warned about, since they change which experts a
 * token picks but not the balanced costs stagger computes: scoring_func
 * (softmax, sigmoid), topk_method (greedy, group_limited_greedy, noaux_tc),
 * n_group and topk_group (device- or node-limited routing: each token's
 * experts on at most topk_group of n_group groups; stagger's all-to-all
 * sends as if unlimited). Left out, with a warning: the multi-token
 * prediction module (num_nextn_predict_layers; DeepSeek-V3's 14B of MTP
 * weights beside the 671B main model, the report's section 2.2) and the
 * published checkpoint's FP8 weight format (quantization_config: the
 * inference checkpoint's, not the training dtype; --precision fp8 models
 * FP8 training). Ignored: auto_map (remote code's classes), ep_size (the
 * remote code's inference EP).
 */
#include <string.h>

#include "base/error.h"
#include "import/import_private.h"

static const char *const V2[] = {"DeepseekV2ForCausalLM", NULL};
static const char *const V3[] = {"DeepseekV3ForCausalLM", NULL};
static const char *const SILU[] = {"silu", "swish", NULL};
static const char *const NUMERICS[] = {"rms_norm_eps", "rope_theta", "routed_scaling_factor",
                                       "aux_loss_alpha", "seq_aux", NULL};

typedef struct {
  int64_t vocab, dim, ffn, moe_ffn, layers, heads, kv_heads, routed, shared, top_k, dense, freq;
  int64_t q_rank, kv_rank, nope, rope, v, context, nextn, groups, topk_groups;
  gboolean tied, bias, norm_topk;
} Shape;

static gboolean
ds_fail(HfConfig *c, GError **error, const char *key, const char *message)
{
  g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_INVALID, "%s: key '%s': %s", hf_config_path(c),
              key, message);
  return FALSE;
}

static gboolean
read_shape(HfConfig *c, HfModel *m, Shape *s, GError **error)
{
  const char *act = "silu", *scoring = NULL, *method = NULL;
  s->freq = 1;
  if (!hf_get_int(c, "vocab_size", TRUE, 1, ST_ATTR_MAX, &s->vocab, error) ||
      !hf_get_int(c, "hidden_size", TRUE, 1, ST_ATTR_MAX, &s->dim, error) ||
      !hf_get_int(c, "intermediate_size", TRUE, 1, ST_ATTR_MAX, &s->ffn, error) ||
      !hf_get_int(c, "moe_intermediate_size", TRUE, 1, ST_ATTR_MAX, &s->moe_ffn, error) ||
      !hf_get_int(c, "num_hidden_layers", TRUE, 1, 100000, &s->layers, error) ||
      !hf_get_int(c, "num_attention_heads", TRUE, 1, ST_ATTR_MAX, &s->heads, error) ||
      !hf_get_int(c, "num_key_value_heads", FALSE, 1, ST_ATTR_MAX, &s->kv_heads, error) ||
      !hf_get_int(c, "n_routed_experts", FALSE, 1, 1 << 16, &s->routed, error) ||
      !hf_get_int(c, "n_shared_experts", FALSE, 0, 1 << 16, &s->shared, error) ||
      !hf_get_int(c, "num_experts_per_tok", FALSE, 1, 1 << 16, &s->top_k, error) ||
      !hf_get_int(c, "first_k_dense_replace", FALSE, 0, 100000, &s->dense, error) ||
      !hf_get_int(c, "moe_layer_freq", FALSE, 1, 100000, &s->freq, error) ||
      !hf_get_int(c, "q_lora_rank", FALSE, 1, ST_ATTR_MAX, &s->q_rank, error) ||
      !hf_get_int(c, "kv_lora_rank", TRUE, 1, ST_ATTR_MAX, &s->kv_rank, error) ||
      !hf_get_int(c, "qk_nope_head_dim", TRUE, 1, ST_ATTR_MAX, &s->nope, error) ||
      !hf_get_int(c, "qk_rope_head_dim", TRUE, 0, ST_ATTR_MAX, &s->rope, error) ||
      !hf_get_int(c, "v_head_dim", TRUE, 1, ST_ATTR_MAX, &s->v, error) ||
      !hf_get_int(c, "max_position_embeddings", TRUE, 1, ST_ATTR_MAX, &s->context, error) ||
      !hf_get_int(c, "num_nextn_predict_layers", FALSE, 0, 100000, &s->nextn, error) ||
      !hf_get_int(c, "n_group", FALSE, 1, 1 << 16, &s->groups, error) ||
      !hf_get_int(c, "topk_group", FALSE, 1, 1 << 16, &s->topk_groups, error) ||
      !hf_get_choice(c, "hidden_act", FALSE, SILU, "DeepSeek's MLPs are SwiGLU (silu)", &act,
                     error) ||
      !hf_get_string(c, "scoring_func", FALSE, &scoring, error) ||
      !hf_get_string(c, "topk_method", FALSE, &method, error) ||
      !hf_get_bool(c, "attention_bias", FALSE, &s->bias, error) ||
      !hf_get_bool(c, "tie_word_embeddings", FALSE, &s->tied, error) ||
      !hf_get_bool(c, "norm_topk_prob", FALSE, &s->norm_topk, error) ||
      !hf_no_dropout(c, m, "attention_dropout", error) || !hf_numerics(c, NUMERICS, error))
    return FALSE;
  const cJSON *scaling = hf_get_item(c, "rope_scaling");
  if (scaling != NULL && !cJSON_IsObject(scaling))
    return ds_fail(c, error, "rope_scaling", "expected an object or null");
  hf_get_item(c, "auto_map");
  hf_get_item(c, "ep_size");
  if (hf_get_item(c, "quantization_config") != NULL)
    st_import_warn(m->result, "quantization_config (the published checkpoint's weight format) "
                              "is left out: the model takes torch_dtype; --precision fp8 "
                              "models FP8 training");
  if (s->kv_heads != 0 && s->kv_heads != s->heads)
    return ds_fail(c, error, "num_key_value_heads",
                   "multi-head latent attention has one key/value head per query head: "
                   "expected num_attention_heads");
  if (s->bias)
    return ds_fail(c, error, "attention_bias", "stagger's mla_block has no biases");
  if (s->freq != 1)
    return ds_fail(c, error, "moe_layer_freq",
                   "only 1 (every layer after first_k_dense_replace is MoE, as DeepSeek-V2 "
                   "and V3) is read");
  if (s->routed > 0 && (s->top_k == 0 || s->top_k > s->routed))
    return ds_fail(c, error, "num_experts_per_tok",
                   "expected between 1 and n_routed_experts");
  if (s->dense > s->layers)
    return ds_fail(c, error, "first_k_dense_replace", "more than num_hidden_layers");
  if (s->routed > 0 && (scoring != NULL || method != NULL || s->groups > 0))
    st_import_warn(m->result,
                   "routing (scoring_func %s, topk_method %s, %" G_GINT64_FORMAT
                   " of %" G_GINT64_FORMAT " groups) is read but not modelled: experts take "
                   "balanced loads, and the all-to-all sends as if a token's experts could be "
                   "on any rank",
                   scoring != NULL ? scoring : "-", method != NULL ? method : "-",
                   s->topk_groups, s->groups);
  if (s->nextn > 0)
    st_import_warn(m->result,
                   "num_nextn_predict_layers %" G_GINT64_FORMAT ": the multi-token prediction "
                   "module is left out (DeepSeek-V3: 14B parameters beside the main model's "
                   "671B)",
                   s->nextn);
  return TRUE;
}

static void
mla_attrs(cJSON *layer, const Shape *s)
{
  st_import_int(layer, "heads", s->heads);
  if (s->q_rank > 0)
    st_import_int(layer, "q_lora_rank", s->q_rank);
  st_import_int(layer, "kv_lora_rank", s->kv_rank);
  st_import_int(layer, "qk_nope_head_dim", s->nope);
  st_import_int(layer, "qk_rope_head_dim", s->rope);
  st_import_int(layer, "v_head_dim", s->v);
}

static gboolean
build(HfConfig *c, HfModel *m, const char *what, GError **error)
{
  Shape s = {0};
  if (!read_shape(c, m, &s, error))
    return FALSE;
  int64_t dense = s.routed > 0 ? s.dense : s.layers;
  cJSON *embed = st_import_layer(m->layers, "embed_tokens", "embedding");
  st_import_int(embed, "vocab", s.vocab);
  st_import_int(embed, "dim", s.dim);
  if (dense > 0) {
    cJSON *block = st_import_layer(st_import_repeat(m->layers, dense), "layers.{i}", "mla_block");
    mla_attrs(block, &s);
    st_import_int(block, "ffn", s.ffn);
  }
  if (dense < s.layers) {
    cJSON *body = st_import_repeat(m->layers, s.layers - dense);
    if (dense > 0)
      cJSON_AddNumberToObject(cJSON_GetArrayItem(m->layers, cJSON_GetArraySize(m->layers) - 1),
                              "from", (double)dense);
    cJSON *block = st_import_layer(body, "layers.{i}", "mla_block");
    mla_attrs(block, &s);
    if (s.shared > 0)
      st_import_int(block, "ffn", s.shared * s.moe_ffn);
    else
      cJSON_AddStringToObject(block, "mlp", "none");
    cJSON *router = st_import_layer(body, "layers.{i}.moe", "moe_router");
    st_import_int(router, "experts", s.routed);
    st_import_int(router, "top_k", s.top_k);
    st_import_flag(router, "norm_topk", s.norm_topk);
    if (s.shared > 0)
      cJSON_AddStringToObject(router, "norm", "none");
    cJSON *expert = st_import_layer(st_import_repeat(body, s.routed), "layers.{i}.experts.{j}",
                                    "moe_expert");
    st_import_int(expert, "ffn", s.moe_ffn);
    st_import_warn(m->result,
                   "%s routes without a capacity limit; the experts take capacity factor 1.0 "
                   "(top_k x tokens / experts each: the balanced load; --moe-imbalance "
                   "models a busiest expert above the mean)",
                   what);
  }
  st_import_layer(m->layers, "norm", "rmsnorm");
  cJSON *head = st_import_layer(m->layers, "lm_head", "lm_head");
  st_import_int(head, "vocab", s.vocab);
  st_import_flag(head, "tied", s.tied);
  st_import_layer(m->layers, "loss", "softmax_cross_entropy");

  m->context = s.context;
  g_string_append_printf(m->note,
                         "%s: %" G_GINT64_FORMAT " layers (%" G_GINT64_FORMAT " dense), d %"
                         G_GINT64_FORMAT ", %" G_GINT64_FORMAT " heads of multi-head latent "
                         "attention (ranks q %" G_GINT64_FORMAT ", kv %" G_GINT64_FORMAT
                         "), vocabulary %" G_GINT64_FORMAT,
                         what, s.layers, dense, s.dim, s.heads, s.q_rank, s.kv_rank, s.vocab);
  if (s.routed > 0)
    g_string_append_printf(m->note,
                           ", %" G_GINT64_FORMAT " shared and %" G_GINT64_FORMAT
                           " routed experts of %" G_GINT64_FORMAT " (top %" G_GINT64_FORMAT ")",
                           s.shared, s.routed, s.moe_ffn, s.top_k);
  if (s.nextn > 0)
    g_string_append(m->note, "; without the multi-token prediction module");
  return TRUE;
}

static gboolean
v2_build(HfConfig *c, HfModel *m, GError **error)
{
  return build(c, m, "DeepSeek-V2", error);
}

static gboolean
v3_build(HfConfig *c, HfModel *m, GError **error)
{
  return build(c, m, "DeepSeek-V3", error);
}

const HfArch st_hf_deepseek_v2 = {"deepseek_v2", V2, "DeepSeek-V2 (MLA, shared + routed experts)",
                                  v2_build};
const HfArch st_hf_deepseek_v3 = {"deepseek_v3", V3, "DeepSeek-V3 (MLA, shared + routed experts; "
                                  "no MTP module)", v3_build};
