/* testutil.c: see testutil.h. */
#include "testutil.h"

#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "engine/engine.h"
#include "exec/device.h"

char *
st_test_src(const char *relative)
{
  return g_build_filename(STAGGER_SOURCE_DIR, relative, NULL);
}

static GPtrArray *tmpdirs;

static void
remove_tree(const char *path)
{
  GDir *dir = g_dir_open(path, 0, NULL);
  if (dir != NULL) {
    const char *name;
    while ((name = g_dir_read_name(dir)) != NULL) {
      g_autofree char *child = g_build_filename(path, name, NULL);
      if (g_file_test(child, G_FILE_TEST_IS_DIR) && !g_file_test(child, G_FILE_TEST_IS_SYMLINK))
        remove_tree(child);
      else
        g_unlink(child);
    }
    g_dir_close(dir);
  }
  g_rmdir(path);
}

static void
remove_tmpdirs(void)
{
  for (guint i = 0; tmpdirs != NULL && i < tmpdirs->len; i++)
    remove_tree(g_ptr_array_index(tmpdirs, i));
  if (tmpdirs != NULL)
    g_ptr_array_free(tmpdirs, TRUE);
}

char *
st_test_tmpdir(void)
{
  g_autoptr(GError) error = NULL;
  char *dir = g_dir_make_tmp("stagger-test-XXXXXX", &error);
  g_assert_no_error(error);
  if (tmpdirs == NULL) {
    tmpdirs = g_ptr_array_new_with_free_func(g_free);
    atexit(remove_tmpdirs);
  }
  g_ptr_array_add(tmpdirs, g_strdup(dir));
  return dir;
}

char *
st_test_read(const char *path, gsize *length)
{
  char *text = NULL;
  g_autoptr(GError) error = NULL;
  g_file_get_contents(path, &text, length, &error);
  g_assert_no_error(error);
  return text;
}

StModel *
st_test_model(const char *relative)
{
  g_autofree char *path = st_test_src(relative);
  g_autoptr(GError) error = NULL;
  StModel *m = st_model_load(path, &error);
  g_assert_no_error(error);
  return m;
}

StModel *
st_test_model_parse(const char *json)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(cJSON) root = st_json_parse(json, strlen(json), "<inline>", &error);
  g_assert_no_error(error);
  StModel *m = st_model_from_json(root, "<inline>", &error);
  g_assert_no_error(error);
  return m;
}

StModel *
st_test_model_named(const char *name)
{
  g_autofree char *relative = g_strdup_printf("models/%s.json", name);
  return st_test_model(relative);
}

StCluster *
st_test_cluster(const char *relative, int nodes, int gpus)
{
  g_autofree char *path = st_test_src(relative);
  g_autoptr(GError) error = NULL;
  StCluster *c = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(c, nodes, gpus, &error));
  g_assert_no_error(error);
  return c;
}

StCluster *
st_test_cluster_named(const char *name, int nodes, int gpus)
{
  g_autofree char *relative = g_strdup_printf("models/clusters/%s.json", name);
  return st_test_cluster(relative, nodes, gpus);
}

StSchedule *
st_test_build(const char *strategy, const StModel *m, const StCluster *c, const StOptions *o)
{
  g_autoptr(GError) error = NULL;
  StSchedule *s = st_strategy_build(st_strategy_find(strategy), m, c, NULL, o, &error);
  g_assert_no_error(error);
  g_assert_nonnull(s);
  return s;
}

StSummary *
st_test_simulate(const StSchedule *s, const char *algo, gboolean no_fold, StTimeline **timeline)
{
  g_autoptr(GError) error = NULL;
  StEngineOptions eo = {NULL, algo, NULL, no_fold};
  *timeline = st_simulate(s, &eo, NULL, &error);
  g_assert_no_error(error);
  g_assert_nonnull(*timeline);
  return st_summary_new(*timeline);
}

StTimeline *
st_test_execute(const StSchedule *s, double lr, uint64_t seed, StExecResult *result)
{
  StExecOptions o;
  st_exec_options_init(&o);
  o.device = "host";
  o.keep_weights = TRUE;
  o.timeout_s = 60;
  if (lr > 0)
    o.lr = lr;
  if (seed != 0)
    o.seed = seed;
  g_autoptr(GError) error = NULL;
  StTimeline *t = st_execute(s, &o, result, &error);
  g_assert_no_error(error);
  g_assert_nonnull(t);
  return t;
}

double
st_test_weights_differ(const GPtrArray *a, const GPtrArray *b)
{
  g_assert_cmpuint(a->len, ==, b->len);
  double worst = 0;
  for (guint i = 0; i < a->len; i++) {
    const GArray *x = g_ptr_array_index(a, i), *y = g_ptr_array_index(b, i);
    g_assert_cmpuint(x->len, ==, y->len);
    for (guint j = 0; j < x->len; j++) {
      double u = g_array_index(x, float, j), v = g_array_index(y, float, j);
      worst = MAX(worst, fabs(u - v) / (fabs(v) + 1e-3));
    }
  }
  return worst;
}

gboolean
st_test_have_gpu(void)
{
  g_autoptr(GError) error = NULL;
  StExecDevice *dev = st_device_cuda.open(0, &error);
  if (dev == NULL) {
    printf("1..0 # SKIP %s\n", error->message);
    return FALSE;
  }
  dev->backend->close(dev);
  return TRUE;
}
