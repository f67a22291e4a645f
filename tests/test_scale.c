/* test_scale.c: a folded run costs what the question asks, not what the
 * ranks number (issue 22).
 *
 * GPT-3 2.7B ZeRO-3, micro-batch 1, mixed precision, one step, on 1,024 and
 * on 131,072 H100s (nodes of 8): every rank is alike, so both simulate one
 * rank on one device. What the simulation keeps must then be the same at
 * both sizes (the simulated ranks and ops, the summary's device rows, the
 * links the run uses and their use lists), and what it keeps per rank only
 * the folding maps the timeline and summary hand to readers: at most 16
 * bytes per rank (a rank's and a device's representative, a device's row),
 * where the summary alone held ~200 (a row of every figure per device) and
 * the engine 40 bytes per device and 56 per link before. Counts and bytes
 * held, never times: docs/PERFORMANCE.md has those. tests/cli/scale.sh pins
 * the 131,072-GPU prediction itself.
 */
#include <malloc.h>
#include <string.h>

#include "engine/engine.h"
#include "output/output.h"
#include "strategy/strategy.h"
#include "testutil.h"

typedef struct {
  StSchedule *schedule;
  StTimeline *timeline;
  StSummary *summary;
  StEngineStats stats;
  size_t held;            /* heap bytes the timeline and summary hold (0: not measured) */
} Run;

/* Heap bytes in use, or 0 when this allocator does not say (sanitizers). */
static size_t
heap_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
#else
  return 0;
#endif
}

static void
run_zero3(int gpus, Run *run)
{
  g_autofree char *mpath = st_test_src("models/gpt3-2.7b.json");
  g_autofree char *cpath = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) m = st_model_load(mpath, &error);
  g_assert_no_error(error);
  g_autoptr(StCluster) c = st_cluster_load(cpath, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(c, gpus / 8, gpus, &error));
  StOptions o;
  st_options_init(&o);
  o.steps = 1;
  o.micro_batch = 1;
  o.zero_stage = 3;
  o.precision = ST_PRECISION_MIXED;
  run->schedule = st_strategy_build(st_strategy_find("zero"), m, c, NULL, &o, &error);
  st_options_clear(&o);
  g_assert_no_error(error);
  StEngineOptions eo = {NULL, "auto", NULL, FALSE, NULL};
  size_t before = heap_in_use();
  run->timeline = st_simulate(run->schedule, &eo, &run->stats, &error);
  g_assert_no_error(error);
  run->summary = st_summary_new(run->timeline);
  size_t after = heap_in_use();
  run->held = before > 0 && after > before ? after - before : 0;
}

static void
run_clear(Run *run)
{
  st_summary_free(run->summary);
  st_timeline_free(run->timeline);
  st_schedule_free(run->schedule);
  st_engine_stats_clear(&run->stats);
}

static void
test_flat(void)
{
  Run small, large;
  run_zero3(1024, &small);
  run_zero3(131072, &large);
  /* One simulated rank, the same work. */
  g_assert_true(large.stats.folded);
  g_assert_cmpint(large.stats.sim_ranks, ==, 1);
  g_assert_cmpint(small.stats.sim_ranks, ==, 1);
  g_assert_cmpint(large.stats.ops, ==, small.stats.ops);
  g_assert_cmpuint(large.timeline->ops->len, ==, small.timeline->ops->len);
  g_assert_cmpuint(large.timeline->mem->len, ==, small.timeline->mem->len);
  /* One summary row, shared by every device. */
  g_assert_cmpint(large.summary->n_rows, ==, 1);
  g_assert_cmpint(small.summary->n_rows, ==, 1);
  g_assert_true(st_summary_device(large.summary, 131071) == st_summary_device(large.summary, 0));
  g_assert_cmpint(st_summary_worst_device(large.summary)->device, ==, 0);
  g_assert_cmpint(large.summary->gpus_used, ==, 131072);
  /* The same representative links (a link stands for more links, there
   * are not more of them) and a handful of use lists, one per phase of a
   * plan over the one partition (the plans' phases differ with the size). */
  const StNetTrace *ln = large.timeline->net, *sn = small.timeline->net;
  g_assert_cmpuint(ln->links->len, ==, sn->links->len);
  g_assert_cmpint(st_net_trace_n_lists(ln), <=, 8);
  g_assert_cmpint(st_net_trace_n_lists(sn), <=, 8);
  int64_t stands = 0;
  for (guint l = 0; l < ln->links->len; l++)
    stands = MAX(stands, g_array_index(ln->links, StNetLink, l).stands_for);
  g_assert_cmpint(stands, >=, 131072); /* GPU 0's ports stand for every GPU's */
  /* ZeRO-3's world, gather and reduce communicators: one partition, stored once. */
  const StSchedule *s = large.schedule;
  g_assert_cmpuint(s->comms->len, >=, 3);
  for (guint c = 1; c < s->comms->len; c++)
    g_assert_true(st_schedule_comm(s, c)->group_of == st_schedule_comm(s, 0)->group_of);
  /* What the timeline and summary hold grows by at most 16 bytes a rank. */
  if (small.held > 0 && large.held > 0) {
    double per_rank = ((double)large.held - (double)small.held) / (131072 - 1024);
    g_test_message("timeline + summary: %zu bytes at 1024 GPUs, %zu at 131072: %.1f per rank",
                   small.held, large.held, per_rank);
    g_assert_cmpfloat(per_rank, <=, 16);
  } else {
    g_test_message("this allocator does not report its heap: bytes per rank not checked");
  }
  run_clear(&small);
  run_clear(&large);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/scale/folded-zero3-flat", test_flat);
  return g_test_run();
}
