/* import_hf.c: `--hf config.json`, a Hugging Face transformers model
 * configuration, into a model file.
 *
 * The file's "model_type" picks the architecture (the table below, one
 * hf_<arch>.c each); "architectures", when present, must name that
 * architecture's causal-LM class, since stagger models the language-model
 * head and loss (a classification head would cost something else). The
 * architecture's reader takes every key that changes the computation;
 * hf_config_finish() then refuses any key neither read nor on the
 * documented ignore list. The model's tokens per sample are the config's
 * context length unless --seq-len says otherwise; its dtype is the
 * published weights' (torch_dtype).
 */
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "import/import_private.h"

static const HfArch *const ARCHS[] = {
  &st_hf_llama,
  &st_hf_mistral,
  &st_hf_mixtral,
  &st_hf_qwen2,
  &st_hf_gpt2,
  &st_hf_gpt_neox,
  &st_hf_deepseek_v2,
  &st_hf_deepseek_v3,
  NULL,
};

static GString *
known_archs(void)
{
  GString *known = g_string_new(NULL);
  for (const HfArch *const *a = ARCHS; *a != NULL; a++)
    g_string_append_printf(known, "%s%s", known->len > 0 ? ", " : "", (*a)->model_type);
  return known;
}

static const HfArch *
find_arch(HfConfig *config, GError **error)
{
  const char *type = NULL;
  if (!hf_get_string(config, "model_type", TRUE, &type, error))
    return NULL;
  for (const HfArch *const *a = ARCHS; *a != NULL; a++)
    if (strcmp((*a)->model_type, type) == 0)
      return *a;
  g_autoptr(GString) known = known_archs();
  g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_UNSUPPORTED,
              "%s: key 'model_type': unknown architecture '%s' (stagger imports: %s)",
              hf_config_path(config), type, known->str);
  return NULL;
}

/* Every entry of "architectures" must be one of the arch's classes. */
static gboolean
check_classes(HfConfig *config, const HfArch *arch, GError **error)
{
  const cJSON *list = hf_get_item(config, "architectures"), *item;
  if (list == NULL)
    return TRUE;
  if (!cJSON_IsArray(list)) {
    g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_INVALID,
                "%s: key 'architectures': expected an array of class names",
                hf_config_path(config));
    return FALSE;
  }
  cJSON_ArrayForEach(item, list)
  {
    gboolean ok = FALSE;
    for (const char *const *c = arch->classes; cJSON_IsString(item) && *c != NULL && !ok; c++)
      ok = strcmp(item->valuestring, *c) == 0;
    if (!ok) {
      g_autofree char *classes = g_strjoinv(", ", (char **)arch->classes);
      g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_UNSUPPORTED,
                  "%s: key 'architectures': '%s' is not a causal language model of type %s "
                  "(stagger imports: %s)",
                  hf_config_path(config), cJSON_IsString(item) ? item->valuestring : "?",
                  arch->model_type, classes);
      return FALSE;
    }
  }
  return TRUE;
}

/* torch_dtype (newer files: dtype), the weights' type as published, is the
 * model's dtype; fp32 when absent. */
static gboolean
read_dtype(HfConfig *config, const char **dtype, GError **error)
{
  static const char *const TYPES[] = {"float32", "float16", "bfloat16", NULL};
  static const char *const STAGGER[] = {"fp32", "fp16", "bf16"};
  const char *value = NULL;
  const char *key = hf_get_item(config, "dtype") != NULL ? "dtype" : "torch_dtype";
  if (!hf_get_choice(config, key, FALSE, TYPES, "stagger's model dtypes", &value, error))
    return FALSE;
  if (key[0] == 'd')
    hf_get_item(config, "torch_dtype");
  for (int i = 0; value != NULL && TYPES[i] != NULL; i++)
    if (strcmp(value, TYPES[i]) == 0)
      *dtype = STAGGER[i];
  return TRUE;
}

/* The model's name: the option, else the config's folder ("Llama-3-8B/
 * config.json" -> "Llama-3-8B"), else the file's base name. */
static char *
model_name(const char *path, const StImportOptions *options)
{
  if (options->name != NULL)
    return g_strdup(options->name);
  g_autofree char *base = g_path_get_basename(path);
  if (strcmp(base, "config.json") == 0) {
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *parent = g_path_get_basename(dir);
    if (strcmp(parent, ".") != 0 && strcmp(parent, "/") != 0)
      return g_steal_pointer(&parent);
  }
  char *dot = strrchr(base, '.');
  if (dot != NULL && dot != base)
    *dot = '\0';
  return g_steal_pointer(&base);
}

static gboolean
import_hf(const char *path, const StImportOptions *options, StImportResult *result,
          GError **error)
{
  g_autoptr(HfConfig) config = hf_config_load(path, error);
  if (config == NULL)
    return FALSE;
  const HfArch *arch = find_arch(config, error);
  if (arch == NULL || !check_classes(config, arch, error))
    return FALSE;

  g_autoptr(cJSON) layers = cJSON_CreateArray();
  g_autoptr(GString) note = g_string_new(NULL);
  HfModel model = {.layers = layers, .note = note, .result = result};
  const char *dtype = "fp32";
  if (!read_dtype(config, &dtype, error) || !arch->build(config, &model, error) ||
      !hf_config_finish(config, arch->model_type, error))
    return FALSE;
  g_assert(model.context > 0);

  int64_t tokens = options->seq_len > 0 ? options->seq_len : model.context;
  if (model.learned_positions && tokens > model.context) {
    g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_INVALID,
                "%s: --seq-len %" G_GINT64_FORMAT " is more than the %" G_GINT64_FORMAT
                " positions of its learned position table",
                path, tokens, model.context);
    return FALSE;
  }
  if (tokens > model.context)
    st_import_warn(result,
                   "%" G_GINT64_FORMAT " tokens per sample are more than the %" G_GINT64_FORMAT
                   " positions the model was trained for",
                   tokens, model.context);

  g_autofree char *name = model_name(path, options);
  g_autofree char *base = g_path_get_basename(path);
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "name", name);
  g_string_append_printf(note, "; imported by stagger from %s (Hugging Face %s), %" G_GINT64_FORMAT
                         " tokens per sample", base, arch->model_type, tokens);
  cJSON_AddStringToObject(root, "note", note->str);
  cJSON *input = cJSON_AddArrayToObject(root, "input");
  cJSON_AddItemToArray(input, cJSON_CreateNumber((double)tokens));
  if (strcmp(dtype, "fp32") != 0)
    cJSON_AddStringToObject(root, "dtype", dtype);
  cJSON_AddItemToObject(root, "layers", g_steal_pointer(&layers));
  result->model = root;
  return TRUE;
}

const StImporter st_importer_hf = {
  .name = "hf",
  .arg = "CONFIG.json",
  .summary = "a Hugging Face transformers config.json (model_type llama, mistral, mixtral, "
             "qwen2, gpt2, gpt_neox, deepseek_v2, deepseek_v3)",
  .run = import_hf,
};

gboolean
hf_no_dropout(HfConfig *config, HfModel *model, const char *key, GError **error)
{
  gboolean on = FALSE;
  if (!hf_get_dropout(config, key, &on, error))
    return FALSE;
  if (on)
    st_import_warn(model->result, "%s is ignored: stagger's llama_block has no dropout", key);
  return TRUE;
}

/* ---- building a model file (import_private.h) ---------------------------- */

cJSON *
st_import_layer(cJSON *layers, const char *name, const char *type)
{
  cJSON *layer = cJSON_CreateObject();
  cJSON_AddStringToObject(layer, "name", name);
  cJSON_AddStringToObject(layer, "type", type);
  cJSON_AddItemToArray(layers, layer);
  return layer;
}

cJSON *
st_import_repeat(cJSON *layers, int64_t count)
{
  cJSON *repeat = cJSON_CreateObject();
  cJSON_AddNumberToObject(repeat, "repeat", (double)count);
  cJSON *body = cJSON_AddArrayToObject(repeat, "layers");
  cJSON_AddItemToArray(layers, repeat);
  return body;
}

void
st_import_int(cJSON *layer, const char *key, int64_t value)
{
  cJSON_AddNumberToObject(layer, key, (double)value);
}

void
st_import_flag(cJSON *layer, const char *key, gboolean value)
{
  cJSON_AddBoolToObject(layer, key, value);
}
