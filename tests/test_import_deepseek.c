/* test_import_deepseek.c: DeepSeek-V2 and V3 config.json files
 * (tests/data/hf/, README there) into models (sim/import/hf_deepseek.c),
 * their parameter counts against closed forms and against the counts the
 * papers publish.
 *
 * Per layer, d the width, V the vocabulary (sim/model/layer_mla.c for MLA):
 *   MLA     d q' + q' + q' H (n + r) + d (c + r) + c + c H (n + v) + H v d
 *   block   MLA + 2 d (its two RMSNorms)
 *   dense   block + 3 d f                          (first_k_dense_replace layers)
 *   MoE     block + 3 d N_s f_e + N_r d + N_r 3 d f_e  (shared, router, routed)
 *   active  MoE with K_r of the N_r routed experts
 *   ends    2 V d + d (untied embedding and head, final norm)
 *
 * DeepSeek-V3 (arXiv 2412.19437, section 4.2: 61 layers, d 7168, 128 heads,
 * q' 1536, c 512, n 128, r 64, v 128, 3 dense layers of f 18432, then 1
 * shared and 256 routed experts of f_e 2048, 8 per token; V 129,280):
 *   MLA 187,107,328; block 187,121,664; dense MLP 396,361,728; expert
 *   44,040,192; router 1,835,008; ends 1,853,365,248
 *   total  = ends + 61 x 187,121,664 + 3 x 396,361,728
 *            + 58 x (1,835,008 + 257 x 44,040,192)   = 671,026,404,352
 *   active = ends + 61 x 187,121,664 + 3 x 396,361,728
 *            + 58 x (1,835,008 + 9 x 44,040,192)     =  37,552,282,624
 * The report states "671B total parameters, of which 37B are activated for
 * each token" (section 4.2) for the main model; DeepSeek's model card
 * (huggingface.co/deepseek-ai/DeepSeek-V3) gives 685B for the released
 * weights, 671B of the main model and 14B of the multi-token prediction
 * module, which the import leaves out, warning. 671.03B rounds
 * to the report's figure; 37.55B is within the report's rounding of 37B
 * (its own convention is not stated; without the embedding table, which a
 * token reads one row of, it is 36.63B): checked within 1B.
 *
 * DeepSeek-V2 (arXiv 2405.04434, section 3.1.2: 60 layers, d 5120, 128
 * heads, same MLA ranks and dims, 1 dense layer of f 12288, then 2 shared
 * and 160 routed experts of f_e 1536, 6 per token; V 102,400; "236B total
 * parameters, of which 21B are activated for each token"):
 *   total  = 1,048,581,120 + 60 x 149,237,760 + 188,743,680
 *            + 59 x (819,200 + 162 x 23,592,960)    = 235,741,434,880
 *   active = ... + 59 x (819,200 + 8 x 23,592,960)  =  21,375,800,320
 */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "import/import.h"
#include "model/layer_type.h"
#include "testutil.h"

static StModel *
import_file(const char *path, StImportResult *result, GError **error)
{
  const StImporter *hf = st_importer_find("hf");
  g_assert_nonnull(hf);
  st_import_result_init(result);
  return st_import(hf, path, NULL, result, error);
}

static StModel *
import_published(const char *name, StImportResult *result)
{
  g_autofree char *relative = g_strdup_printf("tests/data/hf/%s.json", name);
  g_autofree char *path = st_test_src(relative);
  g_autoptr(GError) error = NULL;
  StModel *model = import_file(path, result, &error);
  g_assert_no_error(error);
  return model;
}

static gboolean
warned(const StImportResult *result, const char *part)
{
  for (guint i = 0; i < result->warnings->len; i++)
    if (strstr(g_ptr_array_index(result->warnings, i), part) != NULL)
      return TRUE;
  return FALSE;
}

static void
test_deepseek_v3(void)
{
  StImportResult result;
  g_autoptr(StModel) m = import_published("deepseek-v3", &result);
  g_assert_cmpint(m->params, ==, INT64_C(671026404352));
  g_assert_cmpint(m->active_params, ==, INT64_C(37552282624));
  g_assert_cmpfloat(fabs((double)m->params - 671e9), <, 0.5e9);
  g_assert_cmpfloat(fabs((double)m->active_params - 37e9), <, 1e9);
  /* embedding, 3 dense blocks, then block, router and 256 experts x 58 */
  g_assert_cmpint(m->n_layers, ==, 1 + 3 + 58 * 258 + 3);
  const StLayer *dense = &m->layers[1], *moe = &m->layers[4], *router = &m->layers[5];
  g_assert_cmpstr(dense->type->name, ==, "mla_block");
  g_assert_cmpint(st_layer_attr(dense, "ffn", 0), ==, 18432);
  g_assert_cmpint(st_layer_attr(moe, "ffn", 0), ==, 2048); /* the shared expert */
  g_assert_cmpstr(router->type->name, ==, "moe_router");
  g_assert_cmpint(st_layer_attr(router, "experts", 0), ==, 256);
  g_assert_cmpint(st_layer_attr(router, "top_k", 0), ==, 8);
  g_assert_cmpstr(st_layer_attr_choice(router, "norm"), ==, "none");
  g_assert_cmpint(st_layer_attr(&m->layers[6], "ffn", 0), ==, 2048);
  g_assert_true(warned(&result, "multi-token prediction"));
  g_assert_true(warned(&result, "quantization_config"));
  g_assert_true(warned(&result, "routing"));
  st_import_result_clear(&result);
}

static void
test_deepseek_v2(void)
{
  StImportResult result;
  g_autoptr(StModel) m = import_published("deepseek-v2", &result);
  g_assert_cmpint(m->params, ==, INT64_C(235741434880));
  g_assert_cmpint(m->active_params, ==, INT64_C(21375800320));
  g_assert_cmpfloat(fabs((double)m->params - 236e9), <, 0.5e9);
  g_assert_cmpfloat(fabs((double)m->active_params - 21e9), <, 0.5e9);
  g_assert_cmpint(st_layer_attr(&m->layers[2], "ffn", 0), ==, 2 * 1536);
  g_assert_false(warned(&result, "multi-token prediction"));
  st_import_result_clear(&result);
}

/* Imports deepseek-v3.json with `key` set to `value` (JSON; NULL: removed):
 * refused, the message holding `expected`. */
static void
assert_refused(const char *key, const char *value, const char *expected)
{
  g_autofree char *src = st_test_src("tests/data/hf/deepseek-v3.json");
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
  g_autoptr(StModel) model = import_file(path, &result, &error);
  g_assert_null(model);
  g_assert_nonnull(error);
  if (strstr(error->message, expected) == NULL)
    g_error("'%s' lacks '%s'", error->message, expected);
  st_import_result_clear(&result);
}

static void
test_refusals(void)
{
  assert_refused("moe_layer_freq", "2", "key 'moe_layer_freq': only 1");
  assert_refused("num_key_value_heads", "8", "key 'num_key_value_heads': multi-head latent");
  assert_refused("num_experts_per_tok", "300", "key 'num_experts_per_tok'");
  assert_refused("attention_bias", "true", "key 'attention_bias'");
  assert_refused("kv_lora_rank", NULL, "key 'kv_lora_rank': missing");
  assert_refused("hidden_act", "\"relu\"", "'relu' is not supported");
  assert_refused("first_k_dense_replace", "62", "key 'first_k_dense_replace'");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/import/deepseek/v3", test_deepseek_v3);
  g_test_add_func("/import/deepseek/v2", test_deepseek_v2);
  g_test_add_func("/import/deepseek/refusals", test_refusals);
  return g_test_run();
}
