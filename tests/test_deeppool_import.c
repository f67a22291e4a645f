/* test_deeppool_import.c: DeepPool's published A100 profiles into stagger's
 * profile format (profile/profile_import_deeppool.h), and the burst planner
 * on them. The profiles are in traces/reference/deeppool/ (README there
 * names their source).
 */
#include <glib/gstdio.h>
#include <string.h>

#include "burst/burst.h"
#include "cost/cost.h"
#include "profile/profile_import_deeppool.h"
#include "testutil.h"

#define DEVICE "A100-SXM4-80GB"

/* DeepPool's profile `name` in traces/reference/deeppool/. */
static char *
reference_file(const char *name)
{
  g_autofree char *relative = g_build_filename("traces", "reference", "deeppool", name, NULL);
  char *path = st_test_src(relative);
  g_assert_true(g_file_test(path, G_FILE_TEST_IS_REGULAR));
  return path;
}

static const StLayer *
layer(const StModel *m, const char *name)
{
  for (int i = 0; i < m->n_layers; i++)
    if (strcmp(m->layers[i].name, name) == 0)
      return &m->layers[i];
  g_assert_not_reached();
}

/* Forward + backward of `name` at batch x from the profile, in ms. */
static double
fwd_bwd_ms(const StProfile *p, const StModel *m, const char *name, int64_t x)
{
  const StLayer *l = layer(m, name);
  double fwd = 0, bwd = 0;
  double fraction = l->fwd_flops / (l->fwd_flops + l->bwd_flops);
  g_assert_true(st_profile_layer_time(p, DEVICE, NULL, l->signature, ST_PASS_FWD, x, fraction,
                                      &fwd, NULL));
  g_assert_true(st_profile_layer_time(p, DEVICE, NULL, l->signature, ST_PASS_BWD, x, fraction,
                                      &bwd, NULL));
  return (fwd + bwd) / 1e6;
}

static gboolean
contains(const GPtrArray *names, const char *name)
{
  for (guint i = 0; i < names->len; i++)
    if (strcmp(g_ptr_array_index(names, i), name) == 0)
      return TRUE;
  return FALSE;
}

static void
test_vgg16(void)
{
  /* 8 blocks (batch 128 .. 1) of 22 rows; 18 distinct layer signatures in
   * VGG-16 have a row (conv3_2 and conv3_3 share one, as do conv4_2/4_3 and
   * the three conv5), so 18 x 8 = 144 entries. At batch 128 conv1_1 took
   * 13.509 ms forward + backward; conv3_2 and conv3_3 (16.238 and 16.248)
   * average to 16.243. ReLU, dropout and the loss have no row. The profile
   * saved and loaded again gives the same numbers. */
  g_autofree char *path = reference_file("vggLayerGpuProfileA100.txt");
  g_autoptr(StModel) m = st_test_model_named("vgg16");
  StDeepPoolImport stats = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(StProfile) p = st_profile_import_deeppool(path, m, DEVICE, &stats, &error);
  g_assert_no_error(error);
  g_assert_cmpint(stats.rows, ==, 176);
  g_assert_cmpint(stats.batches, ==, 8);
  g_assert_cmpint(stats.entries, ==, 144);
  g_assert_true(contains(stats.missing, "relu1_1"));
  g_assert_true(contains(stats.missing, "drop6"));
  g_assert_true(contains(stats.missing, "loss"));
  g_assert_false(contains(stats.missing, "conv1_1"));
  g_assert_false(contains(stats.missing, "fc8"));
  g_assert_cmpfloat_with_epsilon(fwd_bwd_ms(p, m, "conv1_1", 128), 13.509, 1e-9);
  g_assert_cmpfloat_with_epsilon(fwd_bwd_ms(p, m, "conv3_3", 128), 16.243, 1e-9);
  g_assert_cmpfloat_with_epsilon(fwd_bwd_ms(p, m, "fc6", 1), 1.922, 1e-9);

  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *saved = g_build_filename(dir, "a100-deeppool-vgg16.json", NULL);
  g_assert_true(st_profile_save(p, saved, &error));
  g_autoptr(StProfile) back = st_profile_load(saved, &error);
  g_assert_no_error(error);
  g_assert_cmpint(st_profile_n_layer_entries(back), ==, 144);
  g_assert_cmpfloat_with_epsilon(fwd_bwd_ms(back, m, "conv1_1", 128), 13.509, 1e-9);
  st_deeppool_import_clear(&stats);
}

static void
test_wrn(void)
{
  /* WideResNet-101-2: 10 blocks (batch 32 .. 1) of 39 rows. The 22
   * identical blocks of stage 3 map to one signature: its entry at batch 32
   * is the mean of their rows, computed here from the text directly. Only
   * bn1 and the loss have no row (DeepPool's profile lists neither). */
  g_autofree char *path = reference_file("wrnLayerGpuProfileA100V2.txt");
  g_autoptr(StModel) m = st_test_model_named("wide_resnet101_2");
  StDeepPoolImport stats = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(StProfile) p = st_profile_import_deeppool(path, m, DEVICE, &stats, &error);
  g_assert_no_error(error);
  g_assert_cmpint(stats.rows, ==, 390);
  g_assert_cmpint(stats.batches, ==, 10);
  g_assert_cmpuint(stats.missing->len, ==, 2);
  g_assert_true(contains(stats.missing, "bn1"));
  g_assert_true(contains(stats.missing, "loss"));

  g_autofree char *text = st_test_read(path, NULL);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  double sum = 0;
  int n = 0;
  for (char **line = lines; *line != NULL; line++) {
    if (strstr(*line, "\"inplanes\":1024,\"planes\":256}[32][1024,14,14]") == NULL)
      continue;
    g_auto(GStrv) fields = g_strsplit_set(g_strstrip(*line), " \t", -1);
    int k = 1;
    while (fields[k] != NULL && fields[k][0] == '\0')
      k++;
    sum += g_ascii_strtod(fields[k], NULL);
    n++;
  }
  g_assert_cmpint(n, ==, 22);
  g_assert_cmpfloat_with_epsilon(fwd_bwd_ms(p, m, "layer3.7", 32), sum / n, 1e-9);
  st_deeppool_import_clear(&stats);
}

static void
test_errors(void)
{
  /* A malformed row names its line; a row that no layer of the model
   * matches says so; a missing file is an I/O error. */
  g_autoptr(StModel) m = st_test_model_named("vgg16");
  g_autofree char *dir = st_test_tmpdir();
  struct {
    const char *text, *expect;
  } cases[] = {
    {"#config avg(ms)\nconv2d{\"in_channels\":3}[x][3,224,224] 1.0\n", "line 2"},
    {"conv2d{\"in_channels\":3,\"kernel_size\":3,\"out_channels\":7,\"padding\":1,\"stride\":1}"
     "[8][3,224,224] 1.0\n",
     "no layer of vgg16"},
    {"linear{\"in_features\":4096,\"out_features\":1000}[8]4096\n", "average time"},
    {"SUM(avg) 0\n", "no profile rows"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *path = g_build_filename(dir, "bad.txt", NULL);
    g_assert_true(g_file_set_contents(path, cases[i].text, -1, NULL));
    g_autoptr(GError) error = NULL;
    g_autoptr(StProfile) p = st_profile_import_deeppool(path, m, DEVICE, NULL, &error);
    g_assert_null(p);
    g_assert_nonnull(error);
    g_test_message("%s", error->message);
    g_assert_nonnull(strstr(error->message, cases[i].expect));
    g_assert_nonnull(strstr(error->message, "bad.txt"));
  }
  g_autoptr(GError) error = NULL;
  g_autoptr(StProfile) p = st_profile_import_deeppool("/nonexistent/x.txt", m, DEVICE, NULL,
                                                      &error);
  g_assert_error(error, ST_PROFILE_ERROR, ST_ERROR_IO);
}

static void
test_plan_vgg16(void)
{
  /* DeepPool's observation on its own VGG-16 numbers: at a global batch of
   * 32 on 8 A100s the early convolutions keep scaling while the large
   * fully-connected layers do not, so the plan runs conv1_1 on more GPUs
   * than fc6 and holds less GPU time than data parallelism would. */
  g_autofree char *path = reference_file("vggLayerGpuProfileA100.txt");
  g_autoptr(StModel) m = st_test_model_named("vgg16");
  g_autoptr(GError) error = NULL;
  g_autoptr(StProfile) p = st_profile_import_deeppool(path, m, DEVICE, NULL, &error);
  g_assert_no_error(error);
  g_autofree char *cpath = st_test_src("models/clusters/dgx-a100.json");
  g_autoptr(StCluster) c = st_cluster_load(cpath, &error);
  g_assert_no_error(error);
  StBurstCostInput in = {.model = m, .cluster = c, .profile = p, .comm_algo = "auto",
                         .ranks = 8, .batch = 32, .compute_dtype = ST_DTYPE_FP32,
                         .activation_dtype = ST_DTYPE_FP32, .grad_bytes = 4};
  g_autoptr(StBurstGraph) g = st_burst_graph_for_model(&in, &error);
  g_assert_no_error(error);
  StBurstParams params;
  st_burst_params_init(&params);
  g_autoptr(StBurstPlan) plan = st_burst_plan_new(g, &params, &error);
  g_assert_no_error(error);
  int conv = (int)(layer(m, "conv1_1") - m->layers), fc = (int)(layer(m, "fc6") - m->layers);
  g_assert_cmpint(plan->nodes[conv].gpus, >, plan->nodes[fc].gpus);
  g_assert_cmpfloat(plan->gpu_ns, <, plan->dp_gpu_ns);
  g_autofree char *table = st_burst_plan_table(plan, g, &params);
  g_test_message("%s", table);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/deeppool/import/vgg16", test_vgg16);
  g_test_add_func("/deeppool/import/wrn101", test_wrn);
  g_test_add_func("/deeppool/import/errors", test_errors);
  g_test_add_func("/deeppool/plan/vgg16", test_plan_vgg16);
  return g_test_run();
}
