/* test_golden.c: whole timelines of small cases, pinned in tests/golden/ and
 * compared byte for byte: report.json, ops.csv, memory.csv, comm.csv,
 * links.csv, link_rates.csv and trace.json. A change in the engine, a cost model or a strategy that moves
 * any op shows up here.
 *
 * After an intended change, regenerate and review the diff:
 *   STAGGER_REGENERATE_GOLDEN=1 build/tests/test_golden && git diff tests/golden
 */
#include <string.h>

#include "engine/engine.h"
#include "output/output.h"
#include "strategy/strategy.h"
#include "testutil.h"

typedef struct {
  const char *name;
  const char *strategy;
  int zero_stage;
} Golden;

static const Golden CASES[] = {
  {"dp-mlp-4gpu", "dp", 1},
  {"zero3-mlp-4gpu", "zero", 3},
};

static const char *const FILES[] = {"report.json", "ops.csv",        "memory.csv", "comm.csv",
                                    "links.csv",   "link_rates.csv", "trace.json"};

static void
test_golden(gconstpointer data)
{
  const Golden *g = data;
  g_autofree char *mpath = st_test_src("models/mlp.json");
  g_autofree char *cpath = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) m = st_model_load(mpath, &error);
  g_assert_no_error(error);
  g_autoptr(StCluster) c = st_cluster_load(cpath, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(c, 0, 4, &error));
  /* 4 GPUs, micro-batch 16 x 2 micro-batches, 2 steps, one bucket per layer. */
  StOptions o;
  st_options_init(&o);
  o.micro_batch = 16;
  o.global_batch = 4 * 16 * 2;
  o.steps = 2;
  o.bucket_bytes = 0;
  o.zero_stage = g->zero_stage;
  g_autoptr(StSchedule) s = st_strategy_build(st_strategy_find(g->strategy), m, c, NULL, &o,
                                              &error);
  g_assert_no_error(error);
  StEngineOptions eo = {NULL, "auto", NULL, FALSE, NULL};
  g_autoptr(StTimeline) t = st_simulate(s, &eo, NULL, &error);
  g_assert_no_error(error);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_autofree char *tmp = st_test_tmpdir();
  g_assert_true(st_output_write_all(sum, tmp, &error));
  g_assert_no_error(error);

  g_autofree char *golden_rel = g_build_filename("tests/golden", g->name, NULL);
  g_autofree char *golden = st_test_src(golden_rel);
  gboolean regenerate = g_getenv("STAGGER_REGENERATE_GOLDEN") != NULL;
  if (regenerate)
    g_assert_cmpint(g_mkdir_with_parents(golden, 0755), ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS(FILES); i++) {
    g_autofree char *got_path = g_build_filename(tmp, FILES[i], NULL);
    g_autofree char *want_path = g_build_filename(golden, FILES[i], NULL);
    gsize got_len;
    g_autofree char *got = st_test_read(got_path, &got_len);
    if (regenerate) {
      g_assert_true(g_file_set_contents(want_path, got, (gssize)got_len, &error));
      continue;
    }
    if (!g_file_test(want_path, G_FILE_TEST_EXISTS))
      g_error("%s is missing: run STAGGER_REGENERATE_GOLDEN=1 %s", want_path, g_get_prgname());
    gsize want_len;
    g_autofree char *want = st_test_read(want_path, &want_len);
    if (got_len != want_len || memcmp(got, want, got_len) != 0)
      g_error("%s differs from %s; if the change is intended, regenerate with "
              "STAGGER_REGENERATE_GOLDEN=1 and review 'git diff tests/golden'",
              got_path, want_path);
  }
  st_options_clear(&o);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(CASES); i++) {
    g_autofree char *path = g_strdup_printf("/golden/%s", CASES[i].name);
    g_test_add_data_func(path, &CASES[i], test_golden);
  }
  return g_test_run();
}
