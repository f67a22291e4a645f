/* hf_gpt2.c: transformers' "gpt2" (GPT2LMHeadModel; Radford et al. 2019).
 *
 * wte (vocab_size x n_embd) + wpe (n_positions x n_embd), dropout
 * (embd_pdrop), n_layer pre-LN blocks (n_head heads, MLP n_inner or 4 n_embd
 * wide, biases everywhere, causal, dropout on the attention probabilities
 * and both residual branches), ln_f, and the LM head tied to wte. In
 * stagger's vocabulary: embedding, position_embedding, dropout,
 * transformer_block, layernorm, lm_head, softmax_cross_entropy.
 *
 * Keys read for structure: vocab_size, n_positions (n_ctx, the older name,
 * must agree), n_embd, n_layer, n_head, n_inner, activation_function (a GELU:
 * the block runs one), attn_pdrop, resid_pdrop, embd_pdrop,
 * tie_word_embeddings, add_cross_attention (must be false). Numerics only:
 * layer_norm_epsilon, scale_attn_weights, scale_attn_by_inverse_layer_idx,
 * reorder_and_upcast_attn. Ignored here: the summary_* keys, which configure
 * the sequence-summary head of GPT2DoubleHeadsModel, not the LM.
 */
#include "base/error.h"
#include "import/import_private.h"

static const char *const CLASSES[] = {"GPT2LMHeadModel", NULL};

/* transformers' names for GELU and its tanh / sigmoid approximations: the
 * same cost in stagger. */
static const char *const GELUS[] = {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh",
                                    "quick_gelu", NULL};

static const char *const NUMERICS[] = {"layer_norm_epsilon", "scale_attn_weights",
                                       "scale_attn_by_inverse_layer_idx",
                                       "reorder_and_upcast_attn", NULL};

static const char *const SUMMARY_HEAD[] = {"summary_type", "summary_use_proj",
                                           "summary_activation", "summary_proj_to_labels",
                                           "summary_first_dropout", NULL};

static gboolean
gpt2_build(HfConfig *c, HfModel *m, GError **error)
{
  int64_t vocab = 0, positions = 0, ctx = 0, dim = 0, n_layer = 0, heads = 0, inner = 0;
  gboolean tied = TRUE, attn_drop = FALSE, resid_drop = FALSE, embd_drop = FALSE;
  const char *act = "gelu_new";
  if (!hf_get_int(c, "vocab_size", TRUE, 1, ST_ATTR_MAX, &vocab, error) ||
      !hf_get_int(c, "n_positions", TRUE, 1, ST_ATTR_MAX, &positions, error) ||
      !hf_get_int(c, "n_ctx", FALSE, 1, ST_ATTR_MAX, &ctx, error) ||
      !hf_get_int(c, "n_embd", TRUE, 1, ST_ATTR_MAX, &dim, error) ||
      !hf_get_int(c, "n_layer", TRUE, 1, 100000, &n_layer, error) ||
      !hf_get_int(c, "n_head", TRUE, 1, ST_ATTR_MAX, &heads, error) ||
      !hf_get_int(c, "n_inner", FALSE, 1, ST_ATTR_MAX, &inner, error) ||
      !hf_get_choice(c, "activation_function", FALSE, GELUS,
                     "stagger's transformer_block runs a GELU", &act, error) ||
      !hf_get_dropout(c, "attn_pdrop", &attn_drop, error) ||
      !hf_get_dropout(c, "resid_pdrop", &resid_drop, error) ||
      !hf_get_dropout(c, "embd_pdrop", &embd_drop, error) ||
      !hf_get_bool(c, "tie_word_embeddings", FALSE, &tied, error) ||
      !hf_require_false(c, "add_cross_attention",
                        "cross-attention to an encoder; stagger's blocks attend to themselves",
                        error) ||
      !hf_numerics(c, NUMERICS, error))
    return FALSE;
  for (const char *const *k = SUMMARY_HEAD; *k != NULL; k++)
    hf_get_item(c, *k);
  if (ctx != 0 && ctx != positions) {
    g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_INVALID,
                "%s: key 'n_ctx': %" G_GINT64_FORMAT " differs from n_positions %" G_GINT64_FORMAT,
                hf_config_path(c), ctx, positions);
    return FALSE;
  }
  if (dim % heads != 0) {
    g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_INVALID,
                "%s: key 'n_head': %" G_GINT64_FORMAT " does not divide n_embd %" G_GINT64_FORMAT,
                hf_config_path(c), heads, dim);
    return FALSE;
  }
  if (attn_drop != resid_drop)
    st_import_warn(m->result, "attn_pdrop and resid_pdrop disagree on dropout; the blocks "
                              "drop out both (stagger's transformer_block has one switch)");

  cJSON *layer = st_import_layer(m->layers, "wte", "embedding");
  st_import_int(layer, "vocab", vocab);
  st_import_int(layer, "dim", dim);
  layer = st_import_layer(m->layers, "wpe", "position_embedding");
  st_import_int(layer, "positions", positions);
  if (embd_drop)
    st_import_layer(m->layers, "drop", "dropout");
  cJSON *body = st_import_repeat(m->layers, n_layer);
  layer = st_import_layer(body, "h.{i}", "transformer_block");
  st_import_int(layer, "heads", heads);
  st_import_int(layer, "ffn", inner > 0 ? inner : 4 * dim);
  st_import_flag(layer, "causal", TRUE);
  st_import_flag(layer, "dropout", attn_drop || resid_drop);
  st_import_layer(m->layers, "ln_f", "layernorm");
  layer = st_import_layer(m->layers, "lm_head", "lm_head");
  st_import_int(layer, "vocab", vocab);
  st_import_flag(layer, "tied", tied);
  st_import_layer(m->layers, "loss", "softmax_cross_entropy");

  m->context = positions;
  m->learned_positions = TRUE;
  g_string_append_printf(m->note,
                         "GPT-2: %" G_GINT64_FORMAT " layers, d %" G_GINT64_FORMAT
                         ", %" G_GINT64_FORMAT " heads, vocabulary %" G_GINT64_FORMAT
                         ", %s LM head",
                         n_layer, dim, heads, vocab, tied ? "tied" : "untied");
  return TRUE;
}

const HfArch st_hf_gpt2 = {
  .model_type = "gpt2",
  .classes = CLASSES,
  .summary = "GPT-2 (learned positions, pre-LN blocks, tied head)",
  .build = gpt2_build,
};
