/* test_import_hf.c: Hugging Face configs into models (import/import.h).
 *
 * The published config.json of each architecture (tests/data/hf/, each
 * file's source named in tests/data/hf/README.md) is imported and its
 * parameter count compared with the count its authors published, and with
 * the zoo's model of the same network where the zoo has one (layer by
 * layer: same types, attrs and shapes). Then the refusals: an unknown
 * architecture, an unknown key, a head stagger does not model, values it
 * cannot represent, each named in the message.
 */
#include <glib/gstdio.h>
#include <string.h>

#include "base/json.h"
#include "import/import.h"
#include "model/layer_type.h"
#include "testutil.h"

static StModel *
import_file(const char *path, const StImportOptions *options, StImportResult *result,
            GError **error)
{
  const StImporter *hf = st_importer_find("hf");
  g_assert_nonnull(hf);
  st_import_result_init(result);
  return st_import(hf, path, options, result, error);
}

/* Imports tests/data/hf/NAME.json (g_assert on failure). */
static StModel *
import_published(const char *name, StImportResult *result)
{
  g_autofree char *relative = g_strdup_printf("tests/data/hf/%s.json", name);
  g_autofree char *path = st_test_src(relative);
  g_autoptr(GError) error = NULL;
  StModel *model = import_file(path, NULL, result, &error);
  g_assert_no_error(error);
  return model;
}

/* Same layers as the zoo's file: names aside, every layer's signature (type,
 * attrs, input shape) and count equal. */
static void
assert_same_layers(const StModel *a, const StModel *b)
{
  g_assert_cmpint(a->n_layers, ==, b->n_layers);
  for (int i = 0; i < a->n_layers; i++) {
    g_assert_cmpstr(a->layers[i].signature, ==, b->layers[i].signature);
    g_assert_cmpint(a->layers[i].params, ==, b->layers[i].params);
  }
  g_assert_cmpint(a->params, ==, b->params);
  g_assert_cmpfloat(a->fwd_flops, ==, b->fwd_flops);
}

/* openai-community/gpt2: 124,439,808 parameters (Radford et al. 2019 call it
 * 117M, an early miscount; the checkpoint's tensors sum to 124,439,808,
 * which the zoo's gpt2-124m.json states too). */
static void
test_gpt2(void)
{
  StImportResult result;
  g_autoptr(StModel) model = import_published("gpt2", &result);
  g_assert_cmpint(model->params, ==, 124439808);
  g_assert_cmpint(model->input.dims[0], ==, 1024);
  g_autoptr(StModel) zoo = st_test_model_named("gpt2-124m");
  assert_same_layers(model, zoo);
  g_assert_cmpuint(result.warnings->len, ==, 0);
  st_import_result_clear(&result);
}

/* The architectures' published configs against the counts published for
 * them: the sum over the released checkpoint's tensors (the hub shows it
 * rounded: "6.74B params"), and for Mixtral the paper's active count per
 * token too (Jiang et al. 2024: 47B total, 13B active). Where the zoo has the
 * same network (models/NAME.json), the import must count the same. */
typedef struct {
  const char *file;
  int64_t params, active;
  const char *zoo;
} Published;

static const Published PUBLISHED[] = {
  {"llama-2-7b", 6738415616, 6738415616, "llama-2-7b"},
  {"llama-3-8b", 8030261248, 8030261248, "llama-3-8b"},
  {"mistral-7b", 7241732096, 7241732096, "mistral-7b"},
  {"mixtral-8x7b", 46702792704, 12879925248, "mixtral-8x7b"},
  {"qwen2-7b", 7615616512, 7615616512, "qwen2-7b"},
  /* EleutherAI's model card: 162,322,944 (and 85,056,000 without the two
   * embeddings, checked below). */
  {"pythia-160m", 162322944, 162322944, NULL},
};

static void
test_published(gconstpointer data)
{
  const Published *p = data;
  StImportResult result;
  g_autoptr(StModel) model = import_published(p->file, &result);
  g_assert_cmpint(model->params, ==, p->params);
  g_assert_cmpint(model->active_params, ==, p->active);
  g_autofree char *relative = g_strdup_printf("models/%s.json", p->zoo != NULL ? p->zoo : "");
  g_autofree char *zoo_path = st_test_src(relative);
  if (p->zoo != NULL && g_file_test(zoo_path, G_FILE_TEST_EXISTS)) {
    g_autoptr(StModel) zoo = st_test_model(relative);
    g_assert_cmpint(model->params, ==, zoo->params);
    g_assert_cmpint(model->active_params, ==, zoo->active_params);
  }
  st_import_result_clear(&result);
}

static int64_t
params_of(const StModel *model, const char *type)
{
  int64_t n = 0;
  for (int i = 0; i < model->n_layers; i++)
    if (strcmp(model->layers[i].type->name, type) == 0)
      n += model->layers[i].params;
  return n;
}

/* What each reader makes of its keys, where a count alone would not tell. */
static void
test_structure(void)
{
  StImportResult result;
  /* Pythia: parallel residual, LayerNorm, rotary on a quarter of each head;
   * 85,056,000 parameters besides embed_in and embed_out. */
  g_autoptr(StModel) pythia = import_published("pythia-160m", &result);
  const StLayer *block = &pythia->layers[1];
  g_assert_cmpstr(block->type->name, ==, "llama_block");
  g_assert_cmpint(st_layer_attr(block, "parallel_residual", 0), ==, 1);
  g_assert_cmpint(st_layer_attr(block, "rope_dim", 0), ==, 16);
  g_assert_cmpint(pythia->params - params_of(pythia, "embedding") - params_of(pythia, "lm_head"),
                  ==, 85056000);
  st_import_result_clear(&result);

  /* Mistral's sliding window; Llama-3's rope base and GQA. */
  g_autoptr(StModel) mistral = import_published("mistral-7b", &result);
  g_assert_cmpint(st_layer_attr(&mistral->layers[1], "window", 0), ==, 4096);
  g_assert_cmpint(mistral->input.dims[0], ==, 32768);
  g_assert_cmpint(mistral->dtype, ==, ST_DTYPE_BF16);
  st_import_result_clear(&result);
  g_autoptr(StModel) llama3 = import_published("llama-3-8b", &result);
  g_assert_cmpint(st_layer_attr(&llama3->layers[1], "kv_heads", 0), ==, 8);
  g_assert_cmpint(st_layer_attr(&llama3->layers[1], "rope_theta", 0), ==, 500000);
  g_assert_cmpuint(result.warnings->len, ==, 0);
  st_import_result_clear(&result);

  /* Qwen2: Q, K, V biases and no output bias. */
  g_autoptr(StModel) qwen = import_published("qwen2-7b", &result);
  g_assert_cmpint(st_layer_attr(&qwen->layers[1], "qkv_bias", 0), ==, 1);
  g_assert_cmpint(st_layer_attr(&qwen->layers[1], "out_bias", 1), ==, 0);
  g_assert_cmpint(st_layer_attr(&qwen->layers[1], "window", -1), ==, 0);
  st_import_result_clear(&result);

  /* Mixtral: per layer the attention half, a router, 8 experts; the
   * import says that the load is taken as balanced. */
  g_autoptr(StModel) mixtral = import_published("mixtral-8x7b", &result);
  g_assert_cmpint(mixtral->n_layers, ==, 1 + 32 * 10 + 3);
  g_assert_cmpstr(mixtral->layers[2].type->name, ==, "moe_router");
  g_assert_cmpint(st_layer_attr(&mixtral->layers[2], "top_k", 0), ==, 2);
  g_assert_cmpuint(result.warnings->len, ==, 1);
  g_assert_nonnull(strstr(result.warnings->pdata[0], "capacity factor 1.0"));
  st_import_result_clear(&result);
}

/* Qwen2 with use_sliding_window: layers from max_window_layers on have the
 * window, the ones below attend to everything. */
static void
test_qwen2_window(void)
{
  g_autofree char *src = st_test_src("tests/data/hf/qwen2-7b.json");
  g_autofree char *text = st_test_read(src, NULL);
  g_autoptr(cJSON) root = cJSON_Parse(text);
  cJSON_ReplaceItemInObjectCaseSensitive(root, "use_sliding_window", cJSON_CreateTrue());
  cJSON_ReplaceItemInObjectCaseSensitive(root, "sliding_window", cJSON_CreateNumber(4096));
  cJSON_ReplaceItemInObjectCaseSensitive(root, "max_window_layers", cJSON_CreateNumber(20));
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "config.json", NULL);
  g_autofree char *out = cJSON_Print(root);
  g_assert_true(g_file_set_contents(path, out, -1, NULL));
  StImportResult result;
  g_autoptr(GError) error = NULL;
  StImportOptions options = {.seq_len = 8192};
  g_autoptr(StModel) model = import_file(path, &options, &result, &error);
  g_assert_no_error(error);
  g_assert_cmpint(st_layer_attr(&model->layers[20], "window", -1), ==, 0);
  g_assert_cmpstr(model->layers[21].name, ==, "layers.20");
  g_assert_cmpint(st_layer_attr(&model->layers[21], "window", -1), ==, 4096);
  g_assert_cmpint(model->params, ==, 7615616512);
  st_import_result_clear(&result);

  /* Newer files say it per layer: layer_types wins. */
  cJSON *types = cJSON_CreateArray();
  for (int i = 0; i < 28; i++)
    cJSON_AddItemToArray(types, cJSON_CreateString(i % 2 ? "sliding_attention"
                                                          : "full_attention"));
  cJSON_AddItemToObject(root, "layer_types", types);
  g_free(out);
  out = cJSON_Print(root);
  g_assert_true(g_file_set_contents(path, out, -1, NULL));
  g_autoptr(StModel) alternating = import_file(path, &options, &result, &error);
  g_assert_no_error(error);
  g_assert_cmpint(st_layer_attr(&alternating->layers[1], "window", -1), ==, 0);
  g_assert_cmpint(st_layer_attr(&alternating->layers[2], "window", -1), ==, 4096);
  g_assert_cmpstr(alternating->layers[2].name, ==, "layers.1");
  g_assert_cmpint(alternating->params, ==, 7615616512);
  st_import_result_clear(&result);
}

/* A dropout the block cannot hold is left out, and said. */
static void
test_dropout_warning(void)
{
  g_autofree char *src = st_test_src("tests/data/hf/llama-3-8b.json");
  g_autofree char *text = st_test_read(src, NULL);
  g_autoptr(cJSON) root = cJSON_Parse(text);
  cJSON_ReplaceItemInObjectCaseSensitive(root, "attention_dropout", cJSON_CreateNumber(0.1));
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "config.json", NULL);
  g_autofree char *out = cJSON_Print(root);
  g_assert_true(g_file_set_contents(path, out, -1, NULL));
  StImportResult result;
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) model = import_file(path, NULL, &result, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(result.warnings->len, ==, 1);
  g_assert_nonnull(strstr(result.warnings->pdata[0], "attention_dropout is ignored"));
  g_assert_cmpint(model->params, ==, 8030261248);
  st_import_result_clear(&result);
}

/* ---- refusals ------------------------------------------------------------ */

/* tests/data/hf/FILE.json with a key set (or removed when `value` is
 * NULL), imported; the error must contain `expected`. */
static void
assert_refused_in(const char *file, const char *key, const char *value, const char *expected)
{
  g_autofree char *relative = g_strdup_printf("tests/data/hf/%s.json", file);
  g_autofree char *src = st_test_src(relative);
  g_autofree char *text = st_test_read(src, NULL);
  g_autoptr(cJSON) root = cJSON_Parse(text);
  g_assert_nonnull(root);
  cJSON_DeleteItemFromObjectCaseSensitive(root, key);
  if (value != NULL)
    cJSON_AddItemToObject(root, key, cJSON_Parse(value));
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "config.json", NULL);
  g_autofree char *out = cJSON_Print(root);
  g_assert_true(g_file_set_contents(path, out, -1, NULL));
  StImportResult result;
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) model = import_file(path, NULL, &result, &error);
  g_assert_null(model);
  g_assert_nonnull(error);
  if (strstr(error->message, expected) == NULL)
    g_error("'%s' lacks '%s'", error->message, expected);
  g_assert_nonnull(strstr(error->message, path));
  st_import_result_clear(&result);
}

static void
assert_refused(const char *key, const char *value, const char *expected)
{
  assert_refused_in("gpt2", key, value, expected);
}

static void
test_refusals(void)
{
  assert_refused("model_type", "\"bert\"", "unknown architecture 'bert'");
  assert_refused("model_type", NULL, "key 'model_type': missing");
  assert_refused("architectures", "[\"GPT2ForSequenceClassification\"]",
                 "'GPT2ForSequenceClassification' is not a causal language model");
  assert_refused("rotary_dim", "64", "key 'rotary_dim': unknown to stagger's gpt2 reader");
  assert_refused("add_cross_attention", "true", "key 'add_cross_attention': true is not");
  assert_refused("activation_function", "\"relu\"", "'relu' is not supported");
  assert_refused("n_head", "7", "key 'n_head': 7 does not divide n_embd 768");
  assert_refused("n_ctx", "2048", "key 'n_ctx': 2048 differs from n_positions 1024");
  assert_refused("n_embd", "\"768\"", "key 'n_embd': expected an integer");
  assert_refused("n_layer", NULL, "key 'n_layer': missing");
  assert_refused("attn_pdrop", "1.5", "dropout probability must be below 1");
  assert_refused("layer_norm_epsilon", "\"small\"", "key 'layer_norm_epsilon': expected a number");
  assert_refused("torch_dtype", "\"int8\"", "key 'torch_dtype': 'int8' is not supported");
  assert_refused_in("llama-3-8b", "num_key_value_heads", "5",
                    "key 'num_key_value_heads': 5 does not divide num_attention_heads 32");
  assert_refused_in("llama-3-8b", "hidden_act", "\"relu\"", "'relu' is not supported");
  assert_refused_in("llama-3-8b", "rope_scaling", "4", "key 'rope_scaling': expected an object");
  assert_refused_in("mistral-7b", "attention_bias", "true",
                    "key 'attention_bias': unknown to stagger's mistral reader");
  assert_refused_in("mixtral-8x7b", "num_experts_per_tok", "9",
                    "key 'num_experts_per_tok': 9 is more than the 8 experts");
  assert_refused_in("mixtral-8x7b", "num_local_experts", NULL,
                    "key 'num_local_experts': missing");
  assert_refused_in("pythia-160m", "rotary_pct", "0.3",
                    "key 'rotary_pct': must give a whole number of rotary dims");
  assert_refused_in("qwen2-7b", "architectures", "[\"Qwen2ForTokenClassification\"]",
                    "is not a causal language model");
  assert_refused_in("qwen2-7b", "layer_types", "[\"full_attention\"]",
                    "key 'layer_types': expected one entry per layer (28)");
}

/* null means "the default" in transformers' files: n_inner null is 4 d. */
static void
test_null_is_default(void)
{
  g_autofree char *src = st_test_src("tests/data/hf/gpt2.json");
  g_autofree char *text = st_test_read(src, NULL);
  g_autoptr(cJSON) root = cJSON_Parse(text);
  cJSON_AddNullToObject(root, "n_inner");
  cJSON_ReplaceItemInObjectCaseSensitive(root, "embd_pdrop", cJSON_CreateNumber(0));
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "gpt2-nodrop", "config.json", NULL);
  g_autofree char *folder = g_path_get_dirname(path);
  g_assert_cmpint(g_mkdir_with_parents(folder, 0755), ==, 0);
  g_autofree char *out = cJSON_Print(root);
  g_assert_true(g_file_set_contents(path, out, -1, NULL));
  StImportResult result;
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) model = import_file(path, NULL, &result, &error);
  g_assert_no_error(error);
  /* Named after its folder; no embedding dropout layer; same parameters. */
  g_assert_cmpstr(model->name, ==, "gpt2-nodrop");
  g_assert_cmpint(model->params, ==, 124439808);
  g_assert_cmpint(model->n_layers, ==, 17);
  g_assert_cmpint(st_layer_attr(&model->layers[2], "ffn", 0), ==, 3072);
  st_import_result_clear(&result);
}

/* --seq-len: fewer tokens is fine; more than a learned table holds is not. */
static void
test_seq_len(void)
{
  g_autofree char *path = st_test_src("tests/data/hf/gpt2.json");
  StImportResult result;
  g_autoptr(GError) error = NULL;
  StImportOptions options = {.seq_len = 256, .name = "short"};
  g_autoptr(StModel) model = import_file(path, &options, &result, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(model->name, ==, "short");
  g_assert_cmpint(model->input.dims[0], ==, 256);
  g_assert_cmpint(model->params, ==, 124439808); /* the table keeps its 1024 rows */
  st_import_result_clear(&result);

  options.seq_len = 2048;
  g_autoptr(StModel) none = import_file(path, &options, &result, &error);
  g_assert_null(none);
  g_assert_nonnull(strstr(error->message, "more than the 1024 positions"));
  st_import_result_clear(&result);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/import/hf/gpt2", test_gpt2);
  for (guint i = 0; i < G_N_ELEMENTS(PUBLISHED); i++) {
    g_autofree char *name = g_strdup_printf("/import/hf/published/%s", PUBLISHED[i].file);
    g_test_add_data_func(name, &PUBLISHED[i], test_published);
  }
  g_test_add_func("/import/hf/structure", test_structure);
  g_test_add_func("/import/hf/qwen2-window", test_qwen2_window);
  g_test_add_func("/import/hf/dropout-warning", test_dropout_warning);
  g_test_add_func("/import/hf/refusals", test_refusals);
  g_test_add_func("/import/hf/null-is-default", test_null_is_default);
  g_test_add_func("/import/hf/seq-len", test_seq_len);
  return g_test_run();
}
