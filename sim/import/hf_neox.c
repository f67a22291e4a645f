/* hf_neox.c: transformers' "gpt_neox" (GPT-NeoX-20B, Pythia; Black et al.
 * 2022).
 *
 * embed_in (vocab_size x hidden_size); num_hidden_layers blocks of
 * LayerNorm (with shift), attention with biases and rotary positions on the
 * first rotary_pct of each head's dims, a second LayerNorm and a plain GELU
 * MLP (intermediate_size, biases), the two halves in parallel
 * (use_parallel_residual: x + attn(ln1 x) + mlp(ln2 x)) or in sequence; a
 * final LayerNorm; embed_out, untied unless tie_word_embeddings. In
 * stagger's vocabulary: embedding, llama_block (norm layernorm, mlp gelu,
 * biases, parallel_residual, rope_dim), layernorm, lm_head.
 *
 * Keys read for structure: vocab_size, hidden_size, intermediate_size,
 * num_hidden_layers, num_attention_heads, rotary_pct, rotary_emb_base (the
 * rope base, rope_theta in newer files), max_position_embeddings,
 * use_parallel_residual, hidden_act (a GELU), attention_bias,
 * tie_word_embeddings, attention_dropout and hidden_dropout (must be 0: the
 * block has no dropout). Numerics only: layer_norm_eps, rope_scaling.
 * Ignored here: classifier_dropout (the classification head's).
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "import/import_private.h"

static const char *const CLASSES[] = {"GPTNeoXForCausalLM", NULL};
static const char *const GELUS[] = {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", NULL};
static const char *const NUMERICS[] = {"layer_norm_eps", NULL};

static gboolean
neox_fail(HfConfig *c, GError **error, const char *key, const char *message)
{
  g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_INVALID, "%s: key '%s': %s", hf_config_path(c),
              key, message);
  return FALSE;
}

static gboolean
neox_build(HfConfig *c, HfModel *m, GError **error)
{
  int64_t vocab = 0, dim = 0, ffn = 0, layers = 0, heads = 0, context = 0;
  double pct = 1, base = 10000;
  gboolean parallel = TRUE, bias = TRUE, tied = FALSE;
  const char *act = "gelu";
  if (!hf_get_int(c, "vocab_size", TRUE, 1, ST_ATTR_MAX, &vocab, error) ||
      !hf_get_int(c, "hidden_size", TRUE, 1, ST_ATTR_MAX, &dim, error) ||
      !hf_get_int(c, "intermediate_size", TRUE, 1, ST_ATTR_MAX, &ffn, error) ||
      !hf_get_int(c, "num_hidden_layers", TRUE, 1, 100000, &layers, error) ||
      !hf_get_int(c, "num_attention_heads", TRUE, 1, ST_ATTR_MAX, &heads, error) ||
      !hf_get_int(c, "max_position_embeddings", TRUE, 1, ST_ATTR_MAX, &context, error) ||
      !hf_get_double(c, "rotary_pct", FALSE, 0, &pct, error) ||
      !hf_get_double(c, "rotary_emb_base", FALSE, 1, &base, error) ||
      !hf_get_double(c, "rope_theta", FALSE, 1, &base, error) ||
      !hf_get_bool(c, "use_parallel_residual", FALSE, &parallel, error) ||
      !hf_get_bool(c, "attention_bias", FALSE, &bias, error) ||
      !hf_get_bool(c, "tie_word_embeddings", FALSE, &tied, error) ||
      !hf_get_choice(c, "hidden_act", FALSE, GELUS, "stagger's GPT-NeoX MLP is a GELU", &act,
                     error) ||
      !hf_no_dropout(c, m, "attention_dropout", error) ||
      !hf_no_dropout(c, m, "hidden_dropout", error) || !hf_numerics(c, NUMERICS, error))
    return FALSE;
  hf_get_item(c, "classifier_dropout");
  const cJSON *scaling = hf_get_item(c, "rope_scaling");
  if (scaling != NULL && !cJSON_IsObject(scaling))
    return neox_fail(c, error, "rope_scaling", "expected an object or null");
  if (dim % heads != 0)
    return neox_fail(c, error, "num_attention_heads", "does not divide hidden_size");
  int64_t head_dim = dim / heads;
  double rotary = pct * (double)head_dim;
  if (pct <= 0 || pct > 1 || rotary != floor(rotary))
    return neox_fail(c, error, "rotary_pct",
                     "must give a whole number of rotary dims per head, at most all of them");
  if (base > 0x1p40 || base != floor(base))
    return neox_fail(c, error, "rotary_emb_base", "expected a whole rotary base below 2^40");

  cJSON *embed = st_import_layer(m->layers, "embed_in", "embedding");
  st_import_int(embed, "vocab", vocab);
  st_import_int(embed, "dim", dim);
  cJSON *block = st_import_layer(st_import_repeat(m->layers, layers), "layers.{i}",
                                 "llama_block");
  st_import_int(block, "heads", heads);
  st_import_int(block, "ffn", ffn);
  cJSON_AddStringToObject(block, "mlp", "gelu");
  cJSON_AddStringToObject(block, "norm", "layernorm");
  st_import_flag(block, "qkv_bias", bias);
  st_import_flag(block, "out_bias", bias);
  st_import_flag(block, "mlp_bias", TRUE);
  st_import_flag(block, "parallel_residual", parallel);
  st_import_int(block, "rope_dim", (int64_t)rotary);
  st_import_int(block, "rope_theta", (int64_t)base);
  st_import_layer(m->layers, "final_layer_norm", "layernorm");
  cJSON *head = st_import_layer(m->layers, "embed_out", "lm_head");
  st_import_int(head, "vocab", vocab);
  st_import_flag(head, "tied", tied);
  st_import_layer(m->layers, "loss", "softmax_cross_entropy");

  m->context = context;
  g_string_append_printf(m->note,
                         "GPT-NeoX: %" G_GINT64_FORMAT " layers, d %" G_GINT64_FORMAT
                         ", %" G_GINT64_FORMAT " heads, rotary on %" G_GINT64_FORMAT
                         " dims of %" G_GINT64_FORMAT ", %s residual, vocabulary %" G_GINT64_FORMAT,
                         layers, dim, heads, (int64_t)rotary, head_dim,
                         parallel ? "parallel" : "sequential", vocab);
  return TRUE;
}

const HfArch st_hf_gpt_neox = {
  .model_type = "gpt_neox",
  .classes = CLASSES,
  .summary = "GPT-NeoX, Pythia (parallel residual, partial rotary)",
  .build = neox_build,
};
