/* test_burst.c: the burst planner (burst/burst.h) on hand-made graphs whose
 * optimum is worked out by hand in each comment, and the burst strategy's
 * schedule on a model whose plan and traffic follow from its numbers.
 *
 * Planner units: costs are written in ms (x 1e6 ns) and nothing is exempt
 * from the amplification limit unless a test says so.
 */
#include <string.h>

#include "base/json.h"
#include "burst/burst.h"
#include "engine/engine.h"
#include "output/output.h"
#include "strategy/strategy.h"
#include "testutil.h"

#define MS 1e6

static StBurstParams
params(double limit, double exempt_ns)
{
  StBurstParams p;
  st_burst_params_init(&p);
  p.amp_limit = limit;
  p.exempt_ns = exempt_ns;
  p.pack = FALSE; /* the dynamic programming's plans; packing: test_burst_pack.c */
  return p;
}

/* A node with compute and sync per width (ms) and one transfer cost (ms) for
 * any change of width; single = compute on one GPU. */
static int
add(StBurstGraph *g, const char *name, const int *preds, int n_preds, const double *compute,
    const double *sync, double xfer)
{
  int v = st_burst_graph_add(g, name, -1, preds, n_preds);
  StBurstNode *n = st_burst_graph_node(g, v);
  int W = g->n_widths;
  for (int k = 0; k < W; k++) {
    n->compute_ns[k] = compute[k] * MS;
    n->sync_ns[k] = sync != NULL ? sync[k] * MS : 0;
    for (int b = 0; b < W; b++)
      n->xfer_ns[k * W + b] = k == b ? 0 : xfer * MS;
  }
  n->single_ns = n->compute_ns[0];
  return v;
}

static StBurstPlan *
plan(const StBurstGraph *g, const StBurstParams *p)
{
  g_autoptr(GError) error = NULL;
  StBurstPlan *pl = st_burst_plan_new(g, p, &error);
  g_assert_no_error(error);
  g_assert_nonnull(pl);
  return pl;
}

/* Two layers on up to 4 GPUs (widths 1, 2, 4), batch 4:
 *   A scales: compute 8, 4, 2 ms (or 8, 5, 3.5 in the second graph)
 *   B does not: compute 4 ms at any width, sync 0, 1, 2 ms
 *   moving A's output between widths: 0.5 ms (both ways together). */
static StBurstGraph *
two_layers(const double *a_compute)
{
  StBurstGraph *g = st_burst_graph_new(4, 4);
  g_assert_cmpint(g->n_widths, ==, 3);
  const double b_compute[] = {4, 4, 4}, b_sync[] = {0, 1, 2};
  int a = add(g, "A", NULL, 0, a_compute, NULL, 0.5);
  add(g, "B", &a, 1, b_compute, b_sync, 0);
  return g;
}

static void
test_chain(void)
{
  /* Without a limit, the best iteration is A on 4 GPUs, B on 1:
   *   A@4 + move 4->1 + B@1 = 2 + 0.5 + 4 = 6.5 ms
   * against A@4 + B@4 = 2 + 4 + 2 = 8, A@2 + 0.5 + B@1 = 8.5, A@1 + B@1 = 12.
   * GPU-time: 4 x 2 (A) + 1 x 4 (B) + 4 x 0.5 (the move holds the wider set)
   * = 14 GPU-ms. Data parallelism runs both on 4 GPUs: 2 + (4 + 2) = 8 ms,
   * 4 x 8 = 32 GPU-ms. A's amplification: (2 + 0.5) x 4 / 8 = 1.25. */
  const double a_compute[] = {8, 4, 2};
  g_autoptr(StBurstGraph) g = two_layers(a_compute);
  StBurstParams p = params(1e9, 0);
  g_autoptr(StBurstPlan) pl = plan(g, &p);
  g_assert_cmpint(pl->nodes[0].gpus, ==, 4);
  g_assert_cmpint(pl->nodes[1].gpus, ==, 1);
  g_assert_cmpint(pl->nodes[0].batch, ==, 1);
  g_assert_cmpint(pl->nodes[1].batch, ==, 4);
  g_assert_cmpfloat_with_epsilon(pl->iteration_ns, 6.5 * MS, 1);
  g_assert_cmpfloat_with_epsilon(pl->nodes[1].xfer_in_ns, 0.5 * MS, 1);
  g_assert_cmpfloat_with_epsilon(pl->gpu_ns, 14 * MS, 1);
  g_assert_cmpint(pl->dp_gpus, ==, 4);
  g_assert_cmpfloat_with_epsilon(pl->dp_iteration_ns, 8 * MS, 1);
  g_assert_cmpfloat_with_epsilon(pl->dp_gpu_ns, 32 * MS, 1);
  g_assert_cmpfloat_with_epsilon(pl->nodes[0].amplification, 1.25, 1e-12);
  g_autofree char *summary = st_burst_plan_summary(pl, g);
  g_assert_cmpstr(summary, ==, "A:4 B:1");
}

static void
test_amplification_limit(void)
{
  /* A scales worse: 8, 5, 3.5 ms. Without a limit A@4 wins:
   *   3.5 + 0.5 + 4 = 8.0 ms, against A@2: 5 + 0.5 + 4 = 9.5.
   * With the limit 2, A@4 has amplification (3.5 + 0.5) x 4 / 8 = 2.0, not
   * under 2, so A@2 (amplification (5 + 0.5) x 2 / 8 = 1.375) is taken:
   * 9.5 ms. When A is exempt (its 8 ms alone under an exemption of 10 ms),
   * A@4 is back. */
  const double a_compute[] = {8, 5, 3.5};
  g_autoptr(StBurstGraph) g = two_layers(a_compute);
  StBurstParams free = params(1e9, 0), limited = params(2.0, 0), exempt = params(2.0, 10 * MS);
  g_autoptr(StBurstPlan) unlimited = plan(g, &free);
  g_assert_cmpint(unlimited->nodes[0].gpus, ==, 4);
  g_assert_cmpfloat_with_epsilon(unlimited->iteration_ns, 8.0 * MS, 1);
  g_autoptr(StBurstPlan) two = plan(g, &limited);
  g_assert_cmpint(two->nodes[0].gpus, ==, 2);
  g_assert_cmpint(two->nodes[1].gpus, ==, 1);
  g_assert_cmpfloat_with_epsilon(two->iteration_ns, 9.5 * MS, 1);
  g_assert_cmpfloat_with_epsilon(two->nodes[0].amplification, 1.375, 1e-12);
  g_autoptr(StBurstPlan) ex = plan(g, &exempt);
  g_assert_cmpint(ex->nodes[0].gpus, ==, 4);
  g_assert_cmpfloat_with_epsilon(ex->nodes[0].amplification, 1.0, 1e-12);
}

static void
test_branch(void)
{
  /* F forks into B1 and B2, which join at J; widths 1, 2 (ms):
   *   F: 2, 1        B1: 4, 2        B2: 1, 1 with sync 0, 2      J: 1.5, 1
   *   moving an output to another width: F 1, B1 1, B2 0.5.
   * F at 2 (1 ms): B1@2 = 1 + 2 = 3; B2@1 = 1 + 1 + 1 = 3 (B2@2 = 1 + 3 = 4).
   *   J@2 waits for the slowest: B1 3 + 0, B2 min(4, 3 + 0.5) = 3.5 -> 1 + 3.5 = 4.5;
   *   J@1: B1 min(3 + 1, 6) = 4, B2 3 -> 1.5 + 4 = 5.5.
   * F at 1 (2 ms): B1 arrives at 5 at best, so J >= 6.
   * The plan: F@2, B1@2, B2@1, J@2, 4.5 ms; the branches differ in width. */
  g_autoptr(StBurstGraph) g = st_burst_graph_new(2, 8);
  const double f[] = {2, 1}, b1[] = {4, 2}, b2[] = {1, 1}, b2_sync[] = {0, 2}, j[] = {1.5, 1};
  int F = add(g, "F", NULL, 0, f, NULL, 1);
  int B1 = add(g, "B1", &F, 1, b1, NULL, 1);
  int B2 = add(g, "B2", &F, 1, b2, b2_sync, 0.5);
  int preds[] = {B1, B2};
  add(g, "J", preds, 2, j, NULL, 0);
  StBurstParams p = params(1e9, 0);
  g_autoptr(StBurstPlan) pl = plan(g, &p);
  g_assert_cmpint(pl->nodes[0].gpus, ==, 2);
  g_assert_cmpint(pl->nodes[1].gpus, ==, 2);
  g_assert_cmpint(pl->nodes[2].gpus, ==, 1);
  g_assert_cmpint(pl->nodes[3].gpus, ==, 2);
  g_assert_cmpfloat_with_epsilon(pl->nodes[1].end_ns, 3 * MS, 1);
  g_assert_cmpfloat_with_epsilon(pl->nodes[2].end_ns, 3 * MS, 1);
  g_assert_cmpfloat_with_epsilon(pl->nodes[2].xfer_in_ns, 1 * MS, 1);
  g_assert_cmpfloat_with_epsilon(pl->nodes[3].xfer_in_ns, 0.5 * MS, 1);
  g_assert_cmpfloat_with_epsilon(pl->iteration_ns, 4.5 * MS, 1);
}

static void
test_skip_connection(void)
{
  /* A residual block: F feeds B and, directly, J (widths 1, 2; ms):
   *   F: 2, 1; B: 4, 2; J: 1, 1; moving F's or B's output: 1.
   * F@2 (1): B@2 = 3; the skip reaches J@2 at 1 + 0 -> J@2 = 1 + max(3, 1) = 4.
   * Every other choice is slower (F@1: B arrives at 5 at best), so all run
   * on 2 GPUs: 4 ms, which is also data parallelism's 1 + 2 + 1. */
  g_autoptr(StBurstGraph) g = st_burst_graph_new(2, 8);
  const double f[] = {2, 1}, b[] = {4, 2}, j[] = {1, 1};
  int F = add(g, "F", NULL, 0, f, NULL, 1);
  int B = add(g, "B", &F, 1, b, NULL, 1);
  int preds[] = {B, F};
  add(g, "J", preds, 2, j, NULL, 0);
  StBurstParams p = params(1e9, 0);
  g_autoptr(StBurstPlan) pl = plan(g, &p);
  for (int v = 0; v < 3; v++)
    g_assert_cmpint(pl->nodes[v].gpus, ==, 2);
  g_assert_cmpfloat_with_epsilon(pl->iteration_ns, 4 * MS, 1);
  g_assert_cmpfloat_with_epsilon(pl->dp_iteration_ns, 4 * MS, 1);
}

static void
test_not_series_parallel(void)
{
  /* A -> {B, C}; B -> {D, E}; C -> D; D -> E: B's branches meet at E, which
   * is also where A's meet, so the graph is not series-parallel. */
  g_autoptr(StBurstGraph) g = st_burst_graph_new(2, 2);
  const double c[] = {1, 1};
  int A = add(g, "A", NULL, 0, c, NULL, 0);
  int B = add(g, "B", &A, 1, c, NULL, 0);
  int C = add(g, "C", &A, 1, c, NULL, 0);
  int d_preds[] = {B, C};
  int D = add(g, "D", d_preds, 2, c, NULL, 0);
  int e_preds[] = {B, D};
  add(g, "E", e_preds, 2, c, NULL, 0);
  StBurstParams p = params(2, 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(StBurstPlan) pl = st_burst_plan_new(g, &p, &error);
  g_assert_null(pl);
  g_assert_error(error, ST_BURST_ERROR, ST_ERROR_UNSUPPORTED);
  g_assert_nonnull(strstr(error->message, "series-parallel"));
}

/* ---- the strategy --------------------------------------------------------- */

static StModel *
wide_narrow_model(void)
{
  /* "wide": 3e12 FLOP per sample, no parameters, 1 MB output: splits well.
   * "narrow": 1e9 parameters (4 GB of fp32 gradients), tiny compute: any
   * split pays an all-reduce of 4 GB. */
  const char *text =
    "{\"name\": \"wide-narrow\", \"input\": [1000], \"layers\": ["
    "{\"name\": \"wide\", \"type\": \"custom\", \"fwd_flops\": 1000000000000, "
    "\"bwd_flops\": 2000000000000, \"output_bytes\": 1000000},"
    "{\"name\": \"narrow\", \"type\": \"custom\", \"params\": 1000000000, "
    "\"fwd_flops\": 1000000, \"bwd_flops\": 2000000, \"output_bytes\": 1000}]}";
  g_autoptr(GError) error = NULL;
  g_autoptr(cJSON) root = cJSON_Parse(text);
  StModel *m = st_model_from_json(root, "wide-narrow", &error);
  g_assert_no_error(error);
  return m;
}

static StCluster *
h100(int gpus)
{
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  StCluster *c = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(c, 0, gpus, &error));
  return c;
}

static const char *
note_text(const StSchedule *s, const char *key)
{
  for (guint i = 0; i < s->notes->len; i++) {
    const StNote *n = &g_array_index(s->notes, StNote, i);
    if (strcmp(n->key, key) == 0)
      return n->text;
  }
  return NULL;
}

static StSummary *
simulate(const StSchedule *s, gboolean no_fold, StTimeline **t)
{
  return st_test_simulate(s, "auto", no_fold, t);
}

static void
test_schedule_traffic(void)
{
  /* 4 ranks, 8 samples (micro-batch 2): "wide" runs on 4 GPUs (2 samples
   * each, compute scales), "narrow" on 1 (an all-reduce of 4 GB costs more
   * than its compute). Per step, forward: ranks 1-3 send their 2 samples x
   * 1 MB to rank 0 (6 MB over NVLink) and rank 0 copies its own 2 MB
   * locally; backward the same the other way: 12 MB intra-node, 4 MB local.
   * Rank 0 holds narrow's 1e9 parameters (fp32 Adam: 4 + 4 + 8 bytes
   * each), the others none. */
  g_autoptr(StModel) m = wide_narrow_model();
  g_autoptr(StCluster) c = h100(4);
  StOptions o;
  st_test_options_init(&o);
  o.micro_batch = 2;
  o.steps = 2;
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) s = st_strategy_build(st_strategy_find("burst"), m, c, NULL, &o, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(note_text(s, "burst_plan"), ==, "wide:4 narrow:1");
  int64_t bytes[ST_MEM_N];
  st_program_persistent_bytes(st_schedule_program_of(s, 0), bytes);
  g_assert_cmpint(bytes[ST_MEM_PARAMS] + bytes[ST_MEM_GRADS] + bytes[ST_MEM_OPTIMIZER], ==,
                  INT64_C(16000000000));
  st_program_persistent_bytes(st_schedule_program_of(s, 3), bytes);
  g_assert_cmpint(bytes[ST_MEM_PARAMS] + bytes[ST_MEM_GRADS] + bytes[ST_MEM_OPTIMIZER], ==, 0);
  StTimeline *tf, *tu;
  g_autoptr(StSummary) folded = simulate(s, FALSE, &tf);
  g_autoptr(StSummary) unfolded = simulate(s, TRUE, &tu);
  g_assert_cmpfloat_with_epsilon(unfolded->comm_bytes_by_link[ST_LINK_INTRA_NODE], 12e6, 1);
  g_assert_cmpfloat_with_epsilon(unfolded->comm_bytes_by_link[ST_LINK_LOCAL], 4e6, 1);
  g_assert_cmpint(folded->step_time_ns, ==, unfolded->step_time_ns);
  g_assert_cmpfloat_with_epsilon(folded->comm_bytes_total, unfolded->comm_bytes_total, 1);
  st_timeline_free(tf);
  st_timeline_free(tu);
  st_options_clear(&o);
}

static void
test_uneven_shares(void)
{
  /* 6 ranks on 4 GPUs, 6 samples per micro-batch, 2 micro-batches: widths go
   * up to 4, where ranks hold 2, 2, 1, 1 samples; ranks 4 and 5 idle. The
   * schedule checks, simulates, and folding changes nothing. */
  g_autofree char *path = st_test_src("models/resnet18.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) m = st_model_load(path, &error);
  g_assert_no_error(error);
  g_autoptr(StCluster) c = h100(4);
  StOptions o;
  st_test_options_init(&o);
  o.ranks = 6;
  o.micro_batch = 1;
  o.global_batch = 12;
  o.steps = 2;
  g_autoptr(StSchedule) s = st_strategy_build(st_strategy_find("burst"), m, c, NULL, &o, &error);
  g_assert_no_error(error);
  g_assert_cmpint(s->n_ranks, ==, 6);
  g_assert_cmpint(s->settings.accumulation, ==, 2);
  for (int r = 4; r < 6; r++)
    g_assert_cmpint(st_schedule_program_of(s, r)->ops->len, ==, 0);
  StTimeline *tf, *tu;
  g_autoptr(StSummary) folded = simulate(s, FALSE, &tf);
  g_autoptr(StSummary) unfolded = simulate(s, TRUE, &tu);
  g_assert_cmpint(folded->step_time_ns, >, 0);
  g_assert_cmpint(folded->step_time_ns, ==, unfolded->step_time_ns);
  for (int d = 0; d < s->n_devices; d++)
    g_assert_cmpint(st_summary_device(folded, d)->peak_bytes, ==,
                    st_summary_device(unfolded, d)->peak_bytes);
  st_timeline_free(tf);
  st_timeline_free(tu);
  st_options_clear(&o);
}

/* A node's backward share (ms per width) of a node made by add(). */
static void
set_bwd(StBurstGraph *g, int v, const double *bwd)
{
  StBurstNode *n = st_burst_graph_node(g, v);
  for (int k = 0; k < g->n_widths; k++)
    n->bwd_ns[k] = bwd[k] * MS;
}

/* The step's timeline, by hand. A then B on up to 2 GPUs (widths 1, 2):
 *   A: forward 1, backward 2 ms at either width, no sync;
 *   B: forward 2, backward 4 at width 1; forward 1, backward 2 and an
 *      all-reduce of 1.5 at width 2;
 *   moving A's output between widths: 1 ms both ways (0.5 each);
 *   the optimizer step 1 ms.
 * Both on 1 GPU: forward 1 + 2, backward 4 + 2: 9, step 10.
 * A on 1, B on 2: A's forward ends at 1, B's starts at 1.5 and ends at 2.5;
 * B's backward ends at 4.5, its all-reduce runs 4.5-6; A's gradient arrives
 * at 5, and A's backward (2 ms of work) runs at half speed beside the
 * all-reduce until 6 (0.5 ms of work), the 1.5 left alone: 7.5; step 8.5.
 * Without the drag, A's backward ends at 7: step 8. */
static void
test_step_timeline(void)
{
  g_autoptr(StBurstGraph) g = st_burst_graph_new(2, 2);
  const double a_compute[] = {3, 3}, a_bwd[] = {2, 2};
  const double b_compute[] = {6, 3}, b_bwd[] = {4, 2}, b_sync[] = {0, 1.5};
  int a = add(g, "A", NULL, 0, a_compute, NULL, 1);
  int b = add(g, "B", &a, 1, b_compute, b_sync, 0);
  set_bwd(g, a, a_bwd);
  set_bwd(g, b, b_bwd);
  g->step_ns = 1 * MS;
  const int32_t narrow[] = {0, 0}, split[] = {0, 1};
  g_assert_cmpfloat_with_epsilon(st_burst_step_ns(g, narrow), 10 * MS, 1);
  g_assert_cmpfloat_with_epsilon(st_burst_step_ns(g, split), 8 * MS, 1);
  g->sync_drag = 0.5;
  g_assert_cmpfloat_with_epsilon(st_burst_step_ns(g, split), 8.5 * MS, 1);
  g_assert_cmpfloat_with_epsilon(st_burst_step_ns(g, narrow), 10 * MS, 1);
}

/* DeepPool's objective counts an all-reduce in the chain; the step hides it
 * behind the backward of the layers before. Up to 4 GPUs (widths 1, 2, 4):
 *   A: compute 30, 15, 7.5 ms (backward 20, 10, 5), no sync;
 *   B, the last: compute 12, 7, 4 (backward 8, 4.5, 2.5), all-reduce 0, 10,
 *   10;
 *   moving A's output: 0.4 ms both ways.
 * The dynamic programming: A on 4 (7.5); B on 1: 7.5 + 0.4 + 12 = 19.9
 * against B on 4: 7.5 + 4 + 10 = 21.5 (on 2: 24.9), so B stays on 1 GPU,
 * a step of 2.5 + 0.2 + 4 forward, 8 + 0.2 + 5 backward = 19.9 ms.
 * On the timeline B on 4 is faster: forward 2.5 + 1.5, B's backward to 6.5,
 * its all-reduce 6.5-16.5 beside A's backward (6.5-11.5): 16.5 ms (B on 2:
 * 19.7). The refinement moves B to 4 (its amplification without the sync,
 * 4 x 4 / 12 = 1.33, is under the limit of 2); without it the plan is the
 * dynamic programming's; under a limit of 1.1 (B on 2: 1.17) it stays. */
static void
test_refine(void)
{
  g_autoptr(StBurstGraph) g = st_burst_graph_new(4, 4);
  const double a_compute[] = {30, 15, 7.5}, a_bwd[] = {20, 10, 5};
  const double b_compute[] = {12, 7, 4}, b_bwd[] = {8, 4.5, 2.5}, b_sync[] = {0, 10, 10};
  int a = add(g, "A", NULL, 0, a_compute, NULL, 0.4);
  int b = add(g, "B", &a, 1, b_compute, b_sync, 0);
  set_bwd(g, a, a_bwd);
  set_bwd(g, b, b_bwd);
  StBurstParams p = params(2, 0);
  p.refine = FALSE;
  g_autoptr(StBurstPlan) dp_only = plan(g, &p);
  g_assert_cmpint(dp_only->nodes[0].gpus, ==, 4);
  g_assert_cmpint(dp_only->nodes[1].gpus, ==, 1);
  g_assert_cmpint(dp_only->refined, ==, 0);
  g_assert_cmpfloat_with_epsilon(dp_only->iteration_ns, 19.9 * MS, 1);
  g_assert_cmpfloat_with_epsilon(dp_only->step_ns, 19.9 * MS, 1);
  p.refine = TRUE;
  g_autoptr(StBurstPlan) refined = plan(g, &p);
  g_assert_cmpint(refined->nodes[0].gpus, ==, 4);
  g_assert_cmpint(refined->nodes[1].gpus, ==, 4);
  g_assert_cmpint(refined->refined, ==, 1);
  g_assert_cmpfloat_with_epsilon(refined->step_ns, 16.5 * MS, 1);
  g_assert_cmpfloat_with_epsilon(refined->dp_step_ns, 16.5 * MS, 1);
  p.amp_limit = 1.1;
  g_autoptr(StBurstPlan) held = plan(g, &p);
  g_assert_cmpint(held->nodes[1].gpus, ==, 1);
  g_assert_cmpint(held->refined, ==, 0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/burst/plan/chain", test_chain);
  g_test_add_func("/burst/plan/step-timeline", test_step_timeline);
  g_test_add_func("/burst/plan/refine", test_refine);
  g_test_add_func("/burst/plan/amplification-limit", test_amplification_limit);
  g_test_add_func("/burst/plan/branch", test_branch);
  g_test_add_func("/burst/plan/skip-connection", test_skip_connection);
  g_test_add_func("/burst/plan/not-series-parallel", test_not_series_parallel);
  g_test_add_func("/burst/schedule/traffic", test_schedule_traffic);
  g_test_add_func("/burst/schedule/uneven-shares", test_uneven_shares);
  return g_test_run();
}
