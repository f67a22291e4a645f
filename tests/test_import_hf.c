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

/* ---- refusals ------------------------------------------------------------ */

/* tests/data/hf/gpt2.json with `edit` applied (a key set, or removed when
 * `value` is NULL), imported; the error must contain `expected`. */
static void
assert_refused(const char *key, const char *value, const char *expected)
{
  g_autofree char *src = st_test_src("tests/data/hf/gpt2.json");
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
  g_test_add_func("/import/hf/refusals", test_refusals);
  g_test_add_func("/import/hf/null-is-default", test_null_is_default);
  g_test_add_func("/import/hf/seq-len", test_seq_len);
  return g_test_run();
}
