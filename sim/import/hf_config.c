/* hf_config.c: strict reading of a transformers config.json (hf_config.h),
 * and the list of keys that change nothing stagger computes. */
#include "import/hf_config.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "import/import.h"

struct HfConfig {
  char *path;
  cJSON *root;    /* owned */
  GHashTable *read; /* keys read (borrowed from root) */
};

/* Keys of transformers' PretrainedConfig and of the published configs that
 * change neither the computation of a training step nor its costs: what the
 * file is (names, versions), tokenizer ids,
 * generation defaults, inference switches (the KV cache), output switches,
 * initialization, fine-tuning labels. docs/MODELS.md lists them. */
static const char *const HF_IGNORED[] = {
  /* identity and provenance */
  "_name_or_path", "transformers_version", "model_type", "architectures", "_commit_hash",
  "name_or_path", "_attn_implementation_autoset",
  /* tokenizer */
  "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
  "tokenizer_class", "prefix",
  /* generation defaults (generate() only) */
  "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
  "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
  "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
  "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
  "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
  "suppress_tokens", "begin_suppress_tokens", "task_specific_params",
  /* inference and output switches */
  "use_cache", "output_attentions", "output_hidden_states", "return_dict", "torchscript",
  "use_bfloat16", "tf_legacy_loss",
  /* initialization of fresh weights */
  "initializer_range", "initializer_factor",
  /* labels of classification heads (not the causal-LM head stagger models) */
  "id2label", "label2id", "num_labels", "problem_type", "finetuning_task",
  /* tensor-parallel slicing of the original pretraining: same math */
  "pretraining_tp",
  NULL,
};

static gboolean
fail(HfConfig *config, GError **error, const char *format, ...) G_GNUC_PRINTF(3, 4);

static gboolean
fail(HfConfig *config, GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_INVALID, "%s: %s", config->path, message);
  return FALSE;
}

/* Python's json, which transformers reads config.json with, keeps the last
 * of duplicate keys; cJSON finds the first. Drops every earlier duplicate,
 * in every object of the tree. */
static void
keep_last_duplicates(cJSON *node)
{
  for (cJSON *child = node->child; child != NULL; child = child->next)
    keep_last_duplicates(child);
  if (!cJSON_IsObject(node) || node->child == NULL)
    return;
  g_autoptr(GHashTable) last = g_hash_table_new(g_str_hash, g_str_equal);
  for (cJSON *item = node->child; item != NULL; item = item->next)
    if (item->string != NULL)
      g_hash_table_replace(last, item->string, item); /* the key too: earlier ones go */
  for (cJSON *item = node->child; item != NULL;) {
    cJSON *next = item->next;
    if (item->string != NULL && g_hash_table_lookup(last, item->string) != item)
      cJSON_Delete(cJSON_DetachItemViaPointer(node, item));
    item = next;
  }
}

HfConfig *
hf_config_load(const char *path, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  cJSON *root = st_json_load_file(path, error);
  if (root == NULL)
    return NULL;
  keep_last_duplicates(root);
  HfConfig *config = g_new0(HfConfig, 1);
  config->path = g_strdup(path);
  config->root = root;
  config->read = g_hash_table_new(g_str_hash, g_str_equal);
  if (!cJSON_IsObject(root)) {
    fail(config, error, "expected a JSON object (a transformers config.json)");
    hf_config_free(config);
    return NULL;
  }
  return config;
}

void
hf_config_free(HfConfig *config)
{
  if (config == NULL)
    return;
  g_free(config->path);
  cJSON_Delete(config->root);
  g_hash_table_unref(config->read);
  g_free(config);
}

const char *
hf_config_path(const HfConfig *config)
{
  return config->path;
}

/* The item of `key`, NULL when absent or null; marks it read. */
static const cJSON *
take(HfConfig *config, const char *key)
{
  cJSON *item = cJSON_GetObjectItemCaseSensitive(config->root, key);
  if (item == NULL)
    return NULL;
  g_hash_table_add(config->read, item->string);
  return cJSON_IsNull(item) ? NULL : item;
}

const cJSON *
hf_get_item(HfConfig *config, const char *key)
{
  return take(config, key);
}

/* Runs a base/json.h getter on `key` unless it is absent or null, and puts
 * the file's path before its error. */
static gboolean
present(HfConfig *config, const char *key, gboolean required, GError **error)
{
  if (take(config, key) != NULL)
    return TRUE;
  if (required)
    fail(config, error, "key '%s': missing (required)", key);
  return FALSE;
}

static gboolean
prefixed(HfConfig *config, gboolean ok, GError **error)
{
  if (!ok)
    g_prefix_error(error, "%s: ", config->path);
  return ok;
}

gboolean
hf_get_int(HfConfig *config, const char *key, gboolean required, int64_t min, int64_t max,
           int64_t *out, GError **error)
{
  if (!present(config, key, required, error))
    return !required;
  return prefixed(config, st_json_get_int(config->root, key, TRUE, min, max, out, error), error);
}

gboolean
hf_get_double(HfConfig *config, const char *key, gboolean required, double min, double *out,
              GError **error)
{
  if (!present(config, key, required, error))
    return !required;
  return prefixed(config, st_json_get_double(config->root, key, TRUE, min, out, error), error);
}

gboolean
hf_get_bool(HfConfig *config, const char *key, gboolean required, gboolean *out,
            GError **error)
{
  if (!present(config, key, required, error))
    return !required;
  return prefixed(config, st_json_get_bool(config->root, key, TRUE, out, error), error);
}

gboolean
hf_get_string(HfConfig *config, const char *key, gboolean required, const char **out,
              GError **error)
{
  if (!present(config, key, required, error))
    return !required;
  return prefixed(config, st_json_get_string(config->root, key, TRUE, out, error), error);
}

gboolean
hf_get_choice(HfConfig *config, const char *key, gboolean required, const char *const *allowed,
              const char *why, const char **out, GError **error)
{
  const char *value = NULL;
  if (!hf_get_string(config, key, required, &value, error))
    return FALSE;
  if (value == NULL)
    return TRUE;
  for (const char *const *a = allowed; *a != NULL; a++) {
    if (strcmp(value, *a) == 0) {
      *out = value;
      return TRUE;
    }
  }
  g_autofree char *list = g_strjoinv(", ", (char **)allowed);
  return fail(config, error, "key '%s': '%s' is not supported (%s; accepted: %s)", key, value,
              why, list);
}

gboolean
hf_numerics(HfConfig *config, const char *const *keys, GError **error)
{
  for (const char *const *k = keys; *k != NULL; k++) {
    const cJSON *item = take(config, *k);
    if (item != NULL && !cJSON_IsNumber(item) && !cJSON_IsBool(item))
      return fail(config, error, "key '%s': expected a number or a boolean", *k);
    if (item != NULL && cJSON_IsNumber(item) && !isfinite(item->valuedouble))
      return fail(config, error, "key '%s': not a finite number", *k);
  }
  return TRUE;
}

gboolean
hf_require_false(HfConfig *config, const char *key, const char *what, GError **error)
{
  gboolean value = FALSE;
  if (!hf_get_bool(config, key, FALSE, &value, error))
    return FALSE;
  if (value)
    return fail(config, error, "key '%s': true is not supported (%s)", key, what);
  return TRUE;
}

gboolean
hf_get_dropout(HfConfig *config, const char *key, gboolean *on, GError **error)
{
  double p = 0;
  if (!hf_get_double(config, key, FALSE, 0, &p, error))
    return FALSE;
  if (p >= 1)
    return fail(config, error, "key '%s': a dropout probability must be below 1, got %g", key,
                p);
  *on = p > 0;
  return TRUE;
}

static gboolean
ignored(const char *key)
{
  for (const char *const *k = HF_IGNORED; *k != NULL; k++)
    if (strcmp(*k, key) == 0)
      return TRUE;
  return FALSE;
}

gboolean
hf_config_finish(HfConfig *config, const char *arch, GError **error)
{
  const cJSON *item;
  cJSON_ArrayForEach(item, config->root)
  {
    if (g_hash_table_contains(config->read, item->string) || ignored(item->string))
      continue;
    return fail(config, error,
                "key '%s': unknown to stagger's %s reader, so it may change the computation "
                "in a way the imported model would miss (docs/MODELS.md lists the keys read "
                "and ignored)",
                item->string, arch);
  }
  return TRUE;
}
