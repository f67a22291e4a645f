/* hf_llama.c: transformers' LLaMA-style decoders: "llama" (LLaMA, Llama-2,
 * Llama-3), "mistral", "mixtral", "qwen2".
 *
 * All four are: a token embedding; num_hidden_layers pre-norm blocks of
 * RMSNorm, attention with rotary positions and grouped-query heads
 * (num_key_value_heads, head_dim), RMSNorm and a gated MLP of
 * intermediate_size (SiLU: SwiGLU; a GELU: GeGLU); a final RMSNorm; the LM
 * head, untied unless tie_word_embeddings. In stagger's vocabulary:
 * embedding, llama_block, rmsnorm, lm_head, softmax_cross_entropy. What
 * differs, and the keys that say it:
 *
 *   llama    attention_bias (Q, K, V and output biases), mlp_bias
 *   mistral  sliding_window (the attention's window)
 *   qwen2    Q, K, V biases always, no output bias; the window on the
 *            layers layer_types says ("sliding_attention"), or, in older
 *            files, with use_sliding_window on those from max_window_layers
 *            on; sliding_window its size
 *   mixtral  num_local_experts experts of intermediate_size each, the best
 *            num_experts_per_tok per token, instead of the MLP: each layer
 *            is an attention-only llama_block, a moe_router (with the
 *            block's second RMSNorm) and its moe_expert layers; sliding_window
 *
 * Read for structure in all: vocab_size, hidden_size, intermediate_size,
 * num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
 * hidden_act, max_position_embeddings (the default tokens per sample),
 * rope_theta, tie_word_embeddings, attention_dropout (must be 0: the block
 * has no dropout). Numerics only: rms_norm_eps, rope_scaling (rescales the
 * rotary frequencies; same cost), and for mixtral router_aux_loss_coef and
 * router_jitter_noise. Ignored: mixtral's output_router_logits (an output
 * switch).
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "import/import_private.h"

typedef enum {
  VARIANT_LLAMA,
  VARIANT_MISTRAL,
  VARIANT_MIXTRAL,
  VARIANT_QWEN2,
} Variant;

/* transformers' activation names: SiLU makes the MLP a SwiGLU, a GELU a
 * GeGLU. */
static const char *const ACTS[] = {"silu", "swish", "gelu", "gelu_new", "gelu_fast",
                                   "gelu_pytorch_tanh", NULL};

/* What the readers below fill, the attrs every block shares. */
typedef struct {
  int64_t vocab, dim, ffn, layers, heads, kv_heads, head_dim, context, rope_theta;
  gboolean tied, gelu, qkv_bias, out_bias, mlp_bias;
  int64_t window;        /* 0: none */
  guint8 *windowed;      /* [layers]: which layers have the window (qwen2), owned;
                            NULL: all of them */
  int64_t experts, top_k;
} Shape;

static gboolean
fail(HfConfig *c, GError **error, const char *key, const char *format, ...) G_GNUC_PRINTF(4, 5);

static gboolean
fail(HfConfig *c, GError **error, const char *key, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_INVALID, "%s: key '%s': %s", hf_config_path(c),
              key, message);
  return FALSE;
}

/* rope_theta as the integer attr (the base changes no cost; a fraction is
 * rounded, and said). */
static gboolean
read_rope(HfConfig *c, const char *key, HfModel *m, int64_t *theta, GError **error)
{
  double value = (double)*theta;
  if (!hf_get_double(c, key, FALSE, 1, &value, error))
    return FALSE;
  if (value > 0x1p40)
    return fail(c, error, key, "%g is beyond any rotary base stagger takes (2^40)", value);
  *theta = llround(value);
  if ((double)*theta != value)
    st_import_warn(m->result, "%s %g rounded to %" G_GINT64_FORMAT " (it changes no cost)", key,
                   value, *theta);
  const cJSON *scaling = hf_get_item(c, "rope_scaling");
  if (scaling != NULL && !cJSON_IsObject(scaling))
    return fail(c, error, "rope_scaling", "expected an object or null");
  return TRUE;
}

static gboolean
read_common(HfConfig *c, HfModel *m, Shape *s, GError **error)
{
  static const char *const NUMERICS[] = {"rms_norm_eps", NULL};
  const char *act = "silu";
  s->rope_theta = 10000;
  if (!hf_get_int(c, "vocab_size", TRUE, 1, ST_ATTR_MAX, &s->vocab, error) ||
      !hf_get_int(c, "hidden_size", TRUE, 1, ST_ATTR_MAX, &s->dim, error) ||
      !hf_get_int(c, "intermediate_size", TRUE, 1, ST_ATTR_MAX, &s->ffn, error) ||
      !hf_get_int(c, "num_hidden_layers", TRUE, 1, 100000, &s->layers, error) ||
      !hf_get_int(c, "num_attention_heads", TRUE, 1, ST_ATTR_MAX, &s->heads, error) ||
      !hf_get_int(c, "num_key_value_heads", FALSE, 1, ST_ATTR_MAX, &s->kv_heads, error) ||
      !hf_get_int(c, "head_dim", FALSE, 1, ST_ATTR_MAX, &s->head_dim, error) ||
      !hf_get_int(c, "max_position_embeddings", TRUE, 1, ST_ATTR_MAX, &s->context, error) ||
      !hf_get_choice(c, "hidden_act", FALSE, ACTS,
                     "stagger's gated MLPs are SwiGLU (silu) and GeGLU (gelu)", &act, error) ||
      !hf_get_bool(c, "tie_word_embeddings", FALSE, &s->tied, error) ||
      !read_rope(c, "rope_theta", m, &s->rope_theta, error) ||
      !hf_no_dropout(c, m, "attention_dropout", error) || !hf_numerics(c, NUMERICS, error))
    return FALSE;
  s->gelu = strncmp(act, "gelu", 4) == 0;
  if (s->kv_heads == 0)
    s->kv_heads = s->heads;
  if (s->heads % s->kv_heads != 0)
    return fail(c, error, "num_key_value_heads",
                "%" G_GINT64_FORMAT " does not divide num_attention_heads %" G_GINT64_FORMAT,
                s->kv_heads, s->heads);
  if (s->head_dim == 0 && s->dim % s->heads != 0)
    return fail(c, error, "num_attention_heads",
                "%" G_GINT64_FORMAT " does not divide hidden_size %" G_GINT64_FORMAT
                " (and no head_dim is given)",
                s->heads, s->dim);
  return TRUE;
}

/* sliding_window: an integer, or null / absent for none. */
static gboolean
read_window(HfConfig *c, Shape *s, GError **error)
{
  return hf_get_int(c, "sliding_window", FALSE, 1, ST_ATTR_MAX, &s->window, error);
}

/* Qwen2's layers with the window: layer_types when given (newer files:
 * "full_attention" or "sliding_attention" per layer), else, with
 * use_sliding_window, those from max_window_layers on. */
static gboolean
read_qwen2_windows(HfConfig *c, Shape *s, GError **error)
{
  gboolean use_window = FALSE;
  int64_t from = s->layers;
  if (!hf_get_bool(c, "use_sliding_window", FALSE, &use_window, error) ||
      !read_window(c, s, error) ||
      !hf_get_int(c, "max_window_layers", FALSE, 0, 100000, &from, error))
    return FALSE;
  s->windowed = g_new0(guint8, s->layers);
  const cJSON *types = hf_get_item(c, "layer_types");
  if (types == NULL) {
    for (int64_t i = from; use_window && i < s->layers; i++)
      s->windowed[i] = 1;
  } else if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != s->layers) {
    return fail(c, error, "layer_types", "expected one entry per layer (%" G_GINT64_FORMAT ")",
                s->layers);
  } else {
    for (int64_t i = 0; i < s->layers; i++) {
      const cJSON *t = cJSON_GetArrayItem(types, (int)i);
      gboolean sliding = cJSON_IsString(t) && strcmp(t->valuestring, "sliding_attention") == 0;
      if (!sliding && !(cJSON_IsString(t) && strcmp(t->valuestring, "full_attention") == 0))
        return fail(c, error, "layer_types", "entry %" G_GINT64_FORMAT " is not "
                    "full_attention or sliding_attention", i);
      s->windowed[i] = sliding;
    }
  }
  for (int64_t i = 0; i < s->layers; i++)
    if (s->windowed[i] && s->window == 0)
      return fail(c, error, "sliding_window", "layer %" G_GINT64_FORMAT " has a sliding window "
                  "but no size is given", i);
  return TRUE;
}

static gboolean
read_variant(HfConfig *c, HfModel *m, Variant v, Shape *s, GError **error)
{
  static const char *const ROUTER_NUMERICS[] = {"router_aux_loss_coef", "router_jitter_noise",
                                                NULL};
  switch (v) {
  case VARIANT_LLAMA: {
    gboolean bias = FALSE;
    if (!hf_get_bool(c, "attention_bias", FALSE, &bias, error) ||
        !hf_get_bool(c, "mlp_bias", FALSE, &s->mlp_bias, error))
      return FALSE;
    s->qkv_bias = s->out_bias = bias;
    return TRUE;
  }
  case VARIANT_MISTRAL:
    return read_window(c, s, error);
  case VARIANT_MIXTRAL:
    hf_get_item(c, "output_router_logits");
    s->top_k = 2;
    return read_window(c, s, error) &&
           hf_get_int(c, "num_local_experts", TRUE, 1, 100000, &s->experts, error) &&
           hf_get_int(c, "num_experts_per_tok", FALSE, 1, 100000, &s->top_k, error) &&
           hf_numerics(c, ROUTER_NUMERICS, error) &&
           (s->top_k <= s->experts ||
            fail(c, error, "num_experts_per_tok", "%" G_GINT64_FORMAT " is more than the %"
                 G_GINT64_FORMAT " experts", s->top_k, s->experts));
  case VARIANT_QWEN2:
    s->qkv_bias = TRUE;
    return read_qwen2_windows(c, s, error);
  }
  g_assert_not_reached();
}

/* The attention and norm attrs of a block. */
static void
block_attrs(cJSON *layer, const Shape *s, int64_t window)
{
  st_import_int(layer, "heads", s->heads);
  if (s->kv_heads != s->heads)
    st_import_int(layer, "kv_heads", s->kv_heads);
  if (s->head_dim != 0)
    st_import_int(layer, "head_dim", s->head_dim);
  st_import_int(layer, "rope_theta", s->rope_theta);
  if (s->qkv_bias)
    st_import_flag(layer, "qkv_bias", TRUE);
  if (s->out_bias)
    st_import_flag(layer, "out_bias", TRUE);
  if (window > 0)
    st_import_int(layer, "window", window);
}

/* Layers [first, first + count) of the blocks, all with `window`. */
static void
append_blocks(HfModel *m, const Shape *s, int64_t first, int64_t count, int64_t window)
{
  if (count == 0)
    return;
  cJSON *body = st_import_repeat(m->layers, count);
  if (first > 0)
    cJSON_AddNumberToObject(cJSON_GetArrayItem(m->layers, cJSON_GetArraySize(m->layers) - 1),
                            "from", (double)first);
  const char *mlp = s->gelu ? "geglu" : "swiglu";
  if (s->experts == 0) {
    cJSON *layer = st_import_layer(body, "layers.{i}", "llama_block");
    block_attrs(layer, s, window);
    st_import_int(layer, "ffn", s->ffn);
    if (s->gelu)
      cJSON_AddStringToObject(layer, "mlp", mlp);
    if (s->mlp_bias)
      st_import_flag(layer, "mlp_bias", TRUE);
    return;
  }
  cJSON *attn = st_import_layer(body, "layers.{i}.attn", "llama_block");
  block_attrs(attn, s, window);
  cJSON_AddStringToObject(attn, "mlp", "none");
  cJSON *router = st_import_layer(body, "layers.{i}.moe", "moe_router");
  st_import_int(router, "experts", s->experts);
  st_import_int(router, "top_k", s->top_k);
  cJSON *experts = st_import_repeat(body, s->experts);
  cJSON *expert = st_import_layer(experts, "layers.{i}.experts.{j}", "moe_expert");
  st_import_int(expert, "ffn", s->ffn);
  if (s->gelu)
    cJSON_AddStringToObject(expert, "mlp", mlp);
}

static gboolean
build(HfConfig *c, HfModel *m, Variant v, const char *what, GError **error)
{
  Shape s = {0};
  gboolean ok = read_common(c, m, &s, error) && read_variant(c, m, v, &s, error);
  g_autofree guint8 *windowed = s.windowed;
  if (!ok)
    return FALSE;
  cJSON *embed = st_import_layer(m->layers, "embed_tokens", "embedding");
  st_import_int(embed, "vocab", s.vocab);
  st_import_int(embed, "dim", s.dim);
  /* One repeat per run of layers with (or without) the window. */
  for (int64_t first = 0, last; first < s.layers; first = last) {
    gboolean w = windowed == NULL || windowed[first];
    for (last = first + 1; last < s.layers && (windowed == NULL || windowed[last] == w); last++)
      ;
    append_blocks(m, &s, first, last - first, w ? s.window : 0);
  }
  st_import_layer(m->layers, "norm", "rmsnorm");
  cJSON *head = st_import_layer(m->layers, "lm_head", "lm_head");
  st_import_int(head, "vocab", s.vocab);
  st_import_flag(head, "tied", s.tied);
  st_import_layer(m->layers, "loss", "softmax_cross_entropy");

  if (s.experts > 0)
    st_import_warn(m->result,
                   "%s routes without a capacity limit; the experts take capacity factor 1.0 "
                   "(top_k x tokens / experts each: the balanced load, the same FLOPs on "
                   "average; an unbalanced router is not modelled)",
                   what);
  m->context = s.context;
  g_string_append_printf(m->note, "%s: %" G_GINT64_FORMAT " layers, d %" G_GINT64_FORMAT
                         ", %" G_GINT64_FORMAT " heads (%" G_GINT64_FORMAT " key/value), "
                         "vocabulary %" G_GINT64_FORMAT,
                         what, s.layers, s.dim, s.heads, s.kv_heads, s.vocab);
  if (s.experts > 0)
    g_string_append_printf(m->note, ", %" G_GINT64_FORMAT " experts (top %" G_GINT64_FORMAT ")",
                           s.experts, s.top_k);
  return TRUE;
}

static gboolean
llama_build(HfConfig *c, HfModel *m, GError **error)
{
  return build(c, m, VARIANT_LLAMA, "LLaMA", error);
}

static gboolean
mistral_build(HfConfig *c, HfModel *m, GError **error)
{
  return build(c, m, VARIANT_MISTRAL, "Mistral", error);
}

static gboolean
mixtral_build(HfConfig *c, HfModel *m, GError **error)
{
  return build(c, m, VARIANT_MIXTRAL, "Mixtral", error);
}

static gboolean
qwen2_build(HfConfig *c, HfModel *m, GError **error)
{
  return build(c, m, VARIANT_QWEN2, "Qwen2", error);
}

static const char *const LLAMA[] = {"LlamaForCausalLM", NULL};
static const char *const MISTRAL[] = {"MistralForCausalLM", NULL};
static const char *const MIXTRAL[] = {"MixtralForCausalLM", NULL};
static const char *const QWEN2[] = {"Qwen2ForCausalLM", NULL};

const HfArch st_hf_llama = {"llama", LLAMA, "LLaMA, Llama-2, Llama-3", llama_build};
const HfArch st_hf_mistral = {"mistral", MISTRAL, "Mistral (sliding window)", mistral_build};
const HfArch st_hf_mixtral = {"mixtral", MIXTRAL, "Mixtral (mixture of experts)", mixtral_build};
const HfArch st_hf_qwen2 = {"qwen2", QWEN2, "Qwen2 (Q, K, V biases)", qwen2_build};
