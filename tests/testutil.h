/* testutil.h: small helpers shared by the test programs. */
#pragma once

#include <glib.h>

/* Absolute path of a file in the source tree ("models/resnet50.json").
 * Transfer full. */
char *st_test_src(const char *relative);

/* A fresh temporary directory, removed with its contents at exit. Transfer full. */
char *st_test_tmpdir(void);

/* Reads a whole file (g_assert on failure). Transfer full. */
char *st_test_read(const char *path, gsize *length);

/* What main returns when the whole program cannot run here: ctest reports
 * it as skipped (SKIP_RETURN_CODE in tests/CMakeLists.txt), not passed. */
#define ST_TEST_SKIPPED 77

/* ---- models, clusters, schedules, simulations --------------------------- */

#include "exec/exec.h"
#include "model/model.h"
#include "output/output.h"
#include "strategy/strategy.h"

/* A model file of the source tree, loaded (g_assert on failure). Transfer full. */
StModel *st_test_model(const char *relative);
/* A model from JSON text (an inline test model). Transfer full. */
StModel *st_test_model_parse(const char *json);
/* A shipped model by name: models/NAME.json. Transfer full. */
StModel *st_test_model_named(const char *name);
/* A cluster file of the source tree resized to `nodes` and `gpus` (0 keeps
 * the file's). Transfer full. */
StCluster *st_test_cluster(const char *relative, int nodes, int gpus);
/* A shipped cluster by name: models/clusters/NAME.json, resized. */
StCluster *st_test_cluster_named(const char *name, int nodes, int gpus);
/* The strategy's schedule (g_assert on failure). Transfer full. */
StSchedule *st_test_build(const char *strategy, const StModel *model, const StCluster *cluster,
                          const StOptions *options);
/* Simulates without a profile (`algo` as --comm-algo) and summarizes; the
 * timeline the summary reads goes to *timeline (the caller frees both). */
StSummary *st_test_simulate(const StSchedule *schedule, const char *algo, gboolean no_fold,
                            StTimeline **timeline);

/* ---- executor tests -------------------------------------------------------- */

/* Runs `schedule` on the host backend keeping the final weights; `lr` and
 * `seed` 0 take the executor's defaults. g_assert on failure. Transfer full. */
StTimeline *st_test_execute(const StSchedule *schedule, double lr, uint64_t seed,
                            StExecResult *result);

/* Largest |a - b| / (|b| + 1e-3) over every weight of two runs' kept
 * weights (b the reference): 0 when they are equal bit for bit. */
double st_test_weights_differ(const GPtrArray *a, const GPtrArray *b);

/* Whether a CUDA device answers (the cuda backend opens GPU 0). When none
 * does, prints why as a TAP plan of no tests and returns FALSE: a GPU
 * program's main then returns ST_TEST_SKIPPED. */
gboolean st_test_have_gpu(void);
