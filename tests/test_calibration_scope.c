/* test_calibration_scope.c: a calibration's parameters scoped to one GPU
 * (cost/calibration.h, "NAME@GPU"): parsed into slots of their own, saved
 * and read back, applied only to clusters of their GPU and only to their
 * framework's runs, and never touching another GPU's prediction. */
#include <glib/gstdio.h>
#include <string.h>

#include "cost/calibration.h"
#include "testutil.h"

static StCluster *
load(const char *name)
{
  g_autofree char *path = st_test_src(name);
  g_autoptr(GError) error = NULL;
  StCluster *c = st_cluster_load(path, &error);
  g_assert_no_error(error);
  return c;
}

static void
test_slots(void)
{
  StCalibration c;
  st_calibration_init(&c);
  g_autoptr(GError) error = NULL;
  int n = st_calib_param_count();
  g_assert_cmpint(st_calibration_slot(&c, "pytorch", &error), ==, st_calib_param_index("pytorch"));
  int a = st_calibration_slot(&c, "pytorch@A100-SXM4", &error);
  g_assert_no_error(error);
  g_assert_cmpint(a, ==, n);
  g_assert_cmpint(st_calibration_slot(&c, "pytorch@A100-SXM4", &error), ==, a);
  g_assert_cmpint(st_calibration_slot(&c, "gemm@V100-SXM2", &error), ==, n + 1);
  g_assert_cmpint(c.n_slots, ==, n + 2);
  g_autofree char *name = st_calibration_slot_name(&c, a);
  g_assert_cmpstr(name, ==, "pytorch@A100-SXM4");
  g_assert_true(st_calibration_slot_param(&c, a) == &st_calib_params()[st_calib_param_index("pytorch")]);
  /* Unknown parameters and an empty GPU are refused, naming the known ones. */
  g_assert_cmpint(st_calibration_slot(&c, "bogus@A100-SXM4", &error), ==, -1);
  g_assert_nonnull(strstr(error->message, "unknown parameter 'bogus@A100-SXM4'"));
  g_assert_nonnull(strstr(error->message, "megatron"));
  g_clear_error(&error);
  g_assert_cmpint(st_calibration_slot(&c, "pytorch@", &error), ==, -1);
  g_clear_error(&error);
  st_calibration_clear(&c);
}

static void
test_round_trip(void)
{
  StCalibration c, back;
  st_calibration_init(&c);
  g_autoptr(GError) error = NULL;
  int a = st_calibration_slot(&c, "megatron@H100-SXM", &error);
  c.factor[a] = 0.9;
  c.set[a] = TRUE;
  int m = st_calib_param_index("megatron");
  c.factor[m] = 0.8;
  c.set[m] = TRUE;
  g_autofree char *dir = g_dir_make_tmp("calib-XXXXXX", &error);
  g_autofree char *path = g_build_filename(dir, "c.json", NULL);
  g_assert_true(st_calibration_save(&c, path, &error));
  g_assert_true(st_calibration_load(path, &back, &error));
  g_assert_no_error(error);
  g_assert_cmpint(back.n_slots, ==, c.n_slots);
  int b = st_calibration_slot(&back, "megatron@H100-SXM", &error);
  g_assert_cmpint(b, ==, a);
  g_assert_cmpfloat(back.factor[b], ==, 0.9);
  g_assert_true(back.set[b]);
  g_assert_cmpfloat(back.factor[m], ==, 0.8);
  g_autofree char *described = st_calibration_describe(&back);
  g_assert_cmpstr(described, ==, "megatron x0.800, megatron@H100-SXM x0.900");
  /* A copy owns its own scope strings. */
  StCalibration copy;
  st_calibration_copy(&copy, &back);
  st_calibration_clear(&back);
  g_assert_cmpstr(copy.scope_gpu[a], ==, "H100-SXM");
  st_calibration_clear(&copy);
  st_calibration_clear(&c);
  g_unlink(path);
  g_rmdir(dir);
}

static void
test_apply_and_touch(void)
{
  StCalibration c;
  st_calibration_init(&c);
  g_autoptr(GError) error = NULL;
  int a = st_calibration_slot(&c, "pytorch@A100-SXM4", &error);
  c.factor[a] = 0.5;
  g_autoptr(StCluster) a100 = load("models/clusters/dgx-a100.json");
  g_autoptr(StCluster) v100 = load("models/clusters/dgx-v100.json");
  double before_a = st_gpu_perf_framework_factor(a100->gpu.perf, "pytorch");
  double before_v = st_gpu_perf_framework_factor(v100->gpu.perf, "pytorch");
  double before_m = st_gpu_perf_framework_factor(a100->gpu.perf, "megatron");
  st_calibration_apply(&c, a100);
  st_calibration_apply(&c, v100);
  /* Only the A100's pytorch factor moves, by the scoped factor. */
  g_assert_cmpfloat_with_epsilon(st_gpu_perf_framework_factor(a100->gpu.perf, "pytorch"),
                                 0.5 * before_a, 1e-12);
  g_assert_cmpfloat(st_gpu_perf_framework_factor(a100->gpu.perf, "megatron"), ==, before_m);
  g_assert_cmpfloat(st_gpu_perf_framework_factor(v100->gpu.perf, "pytorch"), ==, before_v);
  g_assert_true(st_calibration_slot_touches(&c, a, a100, "pytorch"));
  g_assert_false(st_calibration_slot_touches(&c, a, a100, "megatron"));
  g_assert_false(st_calibration_slot_touches(&c, a, v100, "pytorch"));
  /* An unscoped kernel parameter touches every run; a framework's only its own. */
  g_assert_true(st_calibration_slot_touches(&c, st_calib_param_index("gemm"), v100, "megatron"));
  g_assert_false(st_calibration_slot_touches(&c, st_calib_param_index("fsdp"), v100, "megatron"));
  st_calibration_clear(&c);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/calibration/scope/slots", test_slots);
  g_test_add_func("/calibration/scope/round-trip", test_round_trip);
  g_test_add_func("/calibration/scope/apply", test_apply_and_touch);
  return g_test_run();
}
