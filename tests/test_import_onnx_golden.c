/* test_import_onnx_golden.c: what the ONNX importer writes, pinned in
 * tests/golden/onnx/ and compared byte for byte.
 *
 * For each network: the model file `stagger model import --onnx` writes
 * (st_import_format), the warnings, and the loaded model as
 * st_model_to_json gives it. The model st_import returns must also be the
 * one the model loader makes of the written tree (the importer once loaded
 * that tree to make it; docs/PERFORMANCE.md, issue 23). Then mutated
 * networks (a seeded draw of bytes changed): each is refused with the same
 * message or imported to the same file, warnings and model as when the
 * golden files were written, one line each in mutated.txt (a checksum of
 * what was made: the message, or the file, warnings and model), so that
 * remembering a rule's checked proposals cannot change which proposals
 * are taken or what a rejection says.
 *
 * These files were written by the importer before it remembered checked
 * proposals and built its model directly. After an intended change,
 * regenerate and review the diff:
 *   STAGGER_REGENERATE_GOLDEN=1 build/tests/test_import_onnx_golden && git diff tests/golden
 */
#include <string.h>

#include "base/json.h"
#include "import/import.h"
#include "readers.h"
#include "testutil.h"

static gboolean
regenerating(void)
{
  return g_getenv("STAGGER_REGENERATE_GOLDEN") != NULL;
}

static void
compare_golden(const char *name, const char *text)
{
  g_autofree char *dir = st_test_src("tests/golden/onnx");
  g_autofree char *file = g_build_filename(dir, name, NULL);
  if (regenerating()) {
    g_autoptr(GError) error = NULL;
    g_assert_true(g_mkdir_with_parents(dir, 0755) == 0);
    g_assert_true(g_file_set_contents(file, text, -1, &error));
    g_assert_no_error(error);
    return;
  }
  g_autofree char *want = st_test_read(file, NULL);
  if (want == NULL)
    g_error("%s is missing: run STAGGER_REGENERATE_GOLDEN=1 %s", file, g_get_prgname());
  if (strcmp(want, text) != 0) {
    g_autofree char *tmp = g_build_filename(g_get_tmp_dir(), name, NULL);
    g_file_set_contents(tmp, text, -1, NULL);
    g_error("%s differs from the import (written to %s); if the change is intended, regenerate "
            "with STAGGER_REGENERATE_GOLDEN=1 and review 'git diff tests/golden'", file, tmp);
  }
}

/* The loaded model as text. */
static char *
model_text(const StModel *model)
{
  g_autoptr(cJSON) json = st_model_to_json(model);
  return cJSON_Print(json);
}

/* What one import made: the file, then the warnings, then the model; or
 * the message. `model` may be NULL. Also holds the model to the loader's
 * reading of the tree. Transfer full. */
static char *
outcome(const StModel *model, const StImportResult *result, const GError *error)
{
  g_assert_true((model == NULL) == (error != NULL));
  if (model == NULL)
    return g_strdup_printf("refused: %s\n", error->message);
  g_autoptr(GError) local = NULL;
  g_autoptr(StModel) loaded = st_model_from_json(result->model, "tree", &local);
  g_assert_no_error(local);
  st_test_assert_same_model(model, loaded);
  g_autofree char *text = model_text(model);
  GString *out = g_string_new(NULL);
  g_autofree char *file = st_import_format(result);
  g_string_append(out, file);
  g_string_append_printf(out, "---- %u warnings\n", result->warnings->len);
  for (guint i = 0; i < result->warnings->len; i++)
    g_string_append_printf(out, "%s\n", (char *)result->warnings->pdata[i]);
  g_string_append_printf(out, "---- model: %s\n", text);
  return g_string_free(out, FALSE);
}

static char *
import_path(const char *path, const StImportOptions *options)
{
  StImportResult result;
  st_import_result_init(&result);
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) model = st_import(st_importer_find("onnx"), path, options, &result, &error);
  char *text = outcome(model, &result, error);
  st_import_result_clear(&result);
  return text;
}

static void
check_network(const char *name, gboolean no_loss)
{
  g_autofree char *file = g_strdup_printf("tests/data/onnx/%s.onnx", name);
  g_autofree char *path = st_test_src(file);
  StImportOptions options = {.no_loss = no_loss};
  g_autofree char *text = import_path(path, &options);
  g_autofree char *golden = g_strdup_printf("%s%s.txt", name, no_loss ? ".no-loss" : "");
  compare_golden(golden, text);
}

static void
test_networks(void)
{
  static const char *const NAMES[] = {"resnet50", "vit_b_16", "tiny_gpt", "tiny_gpt_folded",
                                      "tiny_llama", "mobilenet_v2", NULL};
  for (const char *const *n = NAMES; *n != NULL; n++)
    check_network(*n, FALSE);
  check_network("tiny_gpt", TRUE);
  check_network("resnet50", TRUE);
}

/* The benchmark's graph (tests/readers.c): unnamed MatMuls sharing one
 * weight, and Relus: a linear layer, then custom layers whose linear
 * proposal is rejected for its parameters, each with its own name. */
static void
test_benchmark_graph(void)
{
  g_autofree char *dir = st_test_tmpdir();
  g_autoptr(GError) error = NULL;
  g_autofree char *path = st_reader_input_find("onnx")->write(dir, 40, &error);
  g_assert_no_error(error);
  StImportOptions options = {.no_loss = TRUE};
  g_autofree char *text = import_path(path, &options);
  compare_golden("benchmark-40.txt", text);
  StImportOptions loss = {0};
  g_autofree char *with_loss = import_path(path, &loss);
  compare_golden("benchmark-40.loss.txt", with_loss);
}

static void
mutate(const char *name, guint32 seed, int rounds, GString *lines)
{
  g_autofree char *file = g_strdup_printf("tests/data/onnx/%s.onnx", name);
  g_autofree char *src = st_test_src(file);
  gsize length;
  g_autofree char *bytes = st_test_read(src, &length);
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "mutated.onnx", NULL);
  g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
  for (int round = 0; round < rounds; round++) {
    g_autofree char *copy = g_memdup2(bytes, length);
    int changes = g_rand_int_range(rand, 1, 5);
    for (int c = 0; c < changes; c++)
      copy[g_rand_int_range(rand, 0, (gint32)length)] = (char)g_rand_int_range(rand, 0, 256);
    g_assert_true(g_file_set_contents_full(path, copy, (gssize)length,
                                           G_FILE_SET_CONTENTS_NONE, 0644, NULL));
    g_autofree char *text = import_path(path, NULL);
    /* The folder is new each run. */
    g_auto(GStrv) parts = g_strsplit(text, dir, -1);
    g_autofree char *same = g_strjoinv("DIR", parts);
    g_autofree char *sum = g_compute_checksum_for_string(G_CHECKSUM_SHA256, same, -1);
    sum[16] = '\0';
    g_string_append_printf(lines, "%s %d %s %s\n", name, round,
                           g_str_has_prefix(same, "refused: ") ? "refused" : "imported", sum);
  }
}

static void
test_mutated(void)
{
  g_autoptr(GString) lines = g_string_new(NULL);
  mutate("tiny_gpt", 23, 300, lines);
  mutate("tiny_llama", 24, 200, lines);
  mutate("mobilenet_v2", 25, 200, lines);
  mutate("vit_b_16", 26, 100, lines);
  compare_golden("mutated.txt", lines->str);
  if (!regenerating()) {
    /* Some of each, or the comparison says little. */
    g_assert_nonnull(strstr(lines->str, " imported "));
    g_assert_nonnull(strstr(lines->str, " refused "));
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/import/onnx-golden/networks", test_networks);
  g_test_add_func("/import/onnx-golden/benchmark-graph", test_benchmark_graph);
  g_test_add_func("/import/onnx-golden/mutated", test_mutated);
  return g_test_run();
}
