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
/* Every field of two models equal: names, dtype, input, totals, and each
 * layer's name, type, attrs, shapes, signature, counts, split and inputs
 * (g_assert naming the layer and field otherwise). */
void st_test_assert_same_model(const StModel *a, const StModel *b);
/* A cluster file of the source tree resized to `nodes` and `gpus` (0 keeps
 * the file's). Transfer full. */
StCluster *st_test_cluster(const char *relative, int nodes, int gpus);
/* A shipped cluster by name: models/clusters/NAME.json, resized. */
StCluster *st_test_cluster_named(const char *name, int nodes, int gpus);
/* st_options_init, then --compute-model roofline: the options of tests whose
 * closed forms are the roofline's (FLOPs at peak), not the estimate's. */
void st_test_options_init(StOptions *options);
/* The strategy's schedule (g_assert on failure). Transfer full. */
StSchedule *st_test_build(const char *strategy, const StModel *model, const StCluster *cluster,
                          const StOptions *options);
/* The number of `s`'s note `key` (g_assert: it has one). */
double st_test_note_number(const StSchedule *s, const char *key);
/* The members of `rank`'s group in communicator `name`, as "a,b,c". Transfer full. */
char *st_test_group_of(const StSchedule *s, const char *name, int rank);
/* The error `strategy` refuses `options` with (no schedule: asserted); its
 * message is logged. The caller frees it. */
GError *st_test_build_refused(const char *strategy, const StModel *model,
                              const StCluster *cluster, const StOptions *options);
/* Simulates without a profile (`algo` as --comm-algo), checks that every
 * link stays within its capacity (st_test_assert_links) and summarizes; the
 * timeline the summary reads goes to *timeline (the caller frees both). */
StSummary *st_test_simulate(const StSchedule *schedule, const char *algo, gboolean no_fold,
                            StTimeline **timeline);

/* ---- engine worked examples ---------------------------------------------- */

/* A schedule on the unit cluster and model (tests/data/engine/: 2 nodes x 4
 * GPUs at 100 TFLOP/s fp32 and 1 TB/s; intra-node 100 GB/s, 1 us; inter-node
 * 10 GB/s per NIC, one NIC per GPU, 5 us; one layer of 1e10 FLOP forward and
 * 2e10 backward at batch 10), `n_ranks` ranks on the GPUs `placement` names
 * (NULL: rank r on GPU r), a batch of 10, costed by the roofline (100 us
 * forward: the closed forms the tests state). Programs are the test's to add.
 * Transfer full. */
StSchedule *st_test_unit_schedule(int n_ranks, const int32_t *placement);
/* A new program of `n_streams` streams (priority 0) run by `rank`. Borrowed. */
StProgram *st_test_program_for(StSchedule *s, int rank, int n_streams);
uint32_t st_test_add(StProgram *p, StOp op);
/* Checks `s` and simulates it (`algo` as --comm-algo, NULL auto); every
 * link within its capacity (st_test_assert_links). Transfer full. */
StTimeline *st_test_run(const StSchedule *s, const char *algo, gboolean no_fold);
/* Every rank of a world group (placed as in st_test_unit_schedule) runs one
 * collective of `bytes`, unfolded. The schedule lives as long as the test. */
StTimeline *st_test_collective(int n_ranks, const int32_t *placement, StCollKind kind,
                               int64_t bytes, const char *algo);
/* The end of the first record of (rank, op). */
int64_t st_test_end_of(const StTimeline *t, int rank, uint32_t op);
/* No link of a simulated timeline ever carries more than its capacity, and
 * no link class sends more than its links' capacity over the cluster. */
void st_test_assert_links(const StTimeline *t);

/* ---- executor tests -------------------------------------------------------- */

/* Runs `schedule` on the host backend keeping the final weights; `lr` and
 * `seed` 0 take the executor's defaults. g_assert on failure. Transfer full. */
StTimeline *st_test_execute(const StSchedule *schedule, double lr, uint64_t seed,
                            StExecResult *result);

/* Largest |a - b| / (|b| + 1e-3) over every weight of two runs' kept
 * weights (b the reference): 0 when they are equal bit for bit. */
double st_test_weights_differ(const GPtrArray *a, const GPtrArray *b);

/* GPU 0 opened by the cuda backend (loading its module), or NULL when no
 * device answers (or the module is not built), after printing why as a TAP
 * plan of no tests: a GPU program's main then returns ST_TEST_SKIPPED.
 * Transfer full (dev->backend->close). */
struct StExecDevice *st_test_open_gpu(void);

/* ---- the planner ------------------------------------------------------------ */

#include "plan/plan.h"

/* A plan spec from name, value pairs, NULL-terminated (g_assert on a bad
 * pair). Transfer full. */
StPlanSpec *st_test_plan_spec(const char *first, ...) G_GNUC_NULL_TERMINATED;
/* st_plan_run without a profile or progress (g_assert on failure). Transfer full. */
StPlan *st_test_plan_run(const StPlanSpec *spec, const StModel *model, const StCluster *cluster);
