/* test_burst_pack.c: branch packing (burst/burst.h, burst_pack.c) on
 * two-branch graphs worked out by hand, and the burst schedule of a model
 * with two branches against its plan.
 *
 * Units: costs in ms (x 1e6 ns); every node's backward is half its compute.
 */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "burst/burst.h"
#include "engine/engine.h"
#include "output/output.h"
#include "strategy/strategy.h"
#include "testutil.h"

#define MS 1e6

/* A node with its compute per width (ms), the backward half of it, and
 * moving its output to a set at the same first rank (near) or another
 * (far), both ways together. */
static int
add(StBurstGraph *g, const char *name, const int *preds, int n_preds, const double *compute,
    double near, double far)
{
  int v = st_burst_graph_add(g, name, -1, preds, n_preds);
  StBurstNode *n = st_burst_graph_node(g, v);
  int W = g->n_widths;
  for (int k = 0; k < W; k++) {
    n->compute_ns[k] = compute[k] * MS;
    n->bwd_ns[k] = compute[k] * MS / 2;
    for (int b = 0; b < W; b++) {
      n->xfer_ns[k * W + b] = k == b ? 0 : near * MS;
      n->xfer_far_ns[k * W + b] = far * MS;
    }
  }
  n->single_ns = n->compute_ns[0];
  return v;
}

/* F forks into B1 and B2, which meet at J; 2 GPUs, widths 1 and 2. */
static StBurstGraph *
fork_join(const double *f, const double *b, double far)
{
  StBurstGraph *g = st_burst_graph_new(2, 2);
  g_assert_cmpint(g->n_widths, ==, 2);
  int F = add(g, "F", NULL, 0, f, 0, far);
  int B1 = add(g, "B1", &F, 1, b, 0, far);
  int B2 = add(g, "B2", &F, 1, b, 0, far);
  int preds[] = {B1, B2};
  add(g, "J", preds, 2, f, 0, 0);
  return g;
}

static void
test_equal_branches(void)
{
  /* Two equal branches that scale perfectly (4 ms on one GPU, 2 on two),
   * F and J free, moves free. Serial on both GPUs: 2 + 2 = 4 ms. Packed,
   * each on its own GPU: 4 ms side by side. On one GPU, one after the
   * other: 8 ms. */
  const double f[] = {0, 0}, b[] = {4, 2};
  g_autoptr(StBurstGraph) g = fork_join(f, b, 0);
  const int32_t all[] = {1, 1, 1, 1}, halves[] = {1, 0, 0, 1}, zero[] = {0, 0, 0, 0};
  const int32_t packed[] = {0, 0, 1, 0};
  g_assert_cmpfloat_with_epsilon(st_burst_step_at_ns(g, all, zero), 4 * MS, 1);
  g_assert_cmpfloat_with_epsilon(st_burst_step_at_ns(g, halves, packed), 4 * MS, 1);
  g_assert_cmpfloat_with_epsilon(st_burst_step_at_ns(g, halves, zero), 8 * MS, 1);
  /* NULL first ranks: every set from rank 0, the timeline of chains. */
  g_assert_cmpfloat_with_epsilon(st_burst_step_ns(g, all), 4 * MS, 1);
}

static void
test_pack_non_scaling(void)
{
  /* Branches that do not scale (4 ms on one GPU, 4.4 on two), F and J
   * 1 ms on one GPU and 0.5 on two; moving to a set at another first rank
   * costs 1 ms both ways (0.5 each), within a first rank nothing.
   * Planned widths: F@2, B1@1, B2@1, J@2.
   * Unpacked (all from rank 0), forward: F 0.25, B1 2.25, B2 4.25, J 4.5;
   * backward: J 4.75, B2 6.75, B1 8.75, F 9.0 -> 9 ms.
   * Packed, B1 on rank 1: forward F 0.25; B1 waits for its move: 0.75 ->
   * 2.75; B2 on rank 0: 0.25 -> 2.25; J waits for B1's move: 3.25 -> 3.5;
   * backward J 3.75, B2 (rank 0) 5.75, B1 (rank 1) 3.75 + 0.5 -> 6.25,
   * F after B1's gradient moves back: 6.75 -> 7.0 -> 7 ms. */
  const double f[] = {1, 0.5}, b[] = {4, 4.4};
  g_autoptr(StBurstGraph) g = fork_join(f, b, 1);
  StBurstParams p;
  st_burst_params_init(&p);
  p.exempt_ns = 1e9; /* the limit plays no part here */
  g_autoptr(GError) error = NULL;
  g_autoptr(StBurstPlan) plan = st_burst_plan_new(g, &p, &error);
  g_assert_no_error(error);
  const int gpus[] = {2, 1, 1, 2};
  for (int v = 0; v < 4; v++)
    g_assert_cmpint(plan->nodes[v].gpus, ==, gpus[v]);
  g_assert_cmpfloat_with_epsilon(plan->unpacked_step_ns, 9 * MS, 1);
  g_assert_cmpfloat_with_epsilon(plan->step_ns, 7 * MS, 1);
  g_assert_cmpint(plan->packed, ==, 1);
  g_assert_cmpint(plan->nodes[1].first_rank, !=, plan->nodes[2].first_rank);
  /* Without packing, the plan is the unpacked one. */
  p.pack = FALSE;
  g_autoptr(StBurstPlan) serial = st_burst_plan_new(g, &p, &error);
  g_assert_no_error(error);
  g_assert_cmpint(serial->packed, ==, 0);
  g_assert_cmpfloat_with_epsilon(serial->step_ns, 9 * MS, 1);
}

static void
test_pack_costly_move(void)
{
  /* The same with moves of 12 ms: a branch on its own GPU would wait
   * longer for its samples than it saves, so nothing moves (9 ms). */
  const double f[] = {1, 0.5}, b[] = {4, 4.4};
  g_autoptr(StBurstGraph) g = fork_join(f, b, 12);
  StBurstParams p;
  st_burst_params_init(&p);
  p.exempt_ns = 1e9;
  g_autoptr(GError) error = NULL;
  g_autoptr(StBurstPlan) plan = st_burst_plan_new(g, &p, &error);
  g_assert_no_error(error);
  g_assert_cmpint(plan->packed, ==, 0);
  g_assert_cmpfloat_with_epsilon(plan->step_ns, 9 * MS, 1);
}

/* ---- the schedule --------------------------------------------------------- */

static StModel *
two_branch_model(void)
{
  /* stem -> (left, right) -> concat -> head. Each branch: 1e9 parameters
   * (an all-reduce of 4 GB on two GPUs costs more than it saves) and
   * 2e10 FLOP per sample forward; stem and head are light. */
  const char *text =
    "{\"name\": \"two-branch\", \"input\": [1000], \"layers\": ["
    "{\"name\": \"stem\", \"type\": \"custom\", \"fwd_flops\": 1000000, "
    "\"bwd_flops\": 2000000, \"output_bytes\": 400000},"
    "{\"name\": \"left\", \"type\": \"custom\", \"params\": 1000000000, "
    "\"fwd_flops\": 20000000000, \"bwd_flops\": 40000000000, \"output_bytes\": 400000},"
    "{\"name\": \"right\", \"type\": \"custom\", \"inputs\": [\"stem\"], "
    "\"params\": 1000000000, \"fwd_flops\": 20000000000, \"bwd_flops\": 40000000000, "
    "\"output_bytes\": 400000},"
    "{\"name\": \"join\", \"type\": \"concat\", \"inputs\": [\"left\", \"right\"]},"
    "{\"name\": \"head\", \"type\": \"custom\", \"fwd_flops\": 1000000, "
    "\"bwd_flops\": 2000000, \"output_bytes\": 4}]}";
  g_autoptr(GError) error = NULL;
  g_autoptr(cJSON) root = cJSON_Parse(text);
  StModel *m = st_model_from_json(root, "two-branch", &error);
  g_assert_no_error(error);
  return m;
}

static double
note_number(const StSchedule *s, const char *key)
{
  for (guint i = 0; i < s->notes->len; i++) {
    const StNote *n = &g_array_index(s->notes, StNote, i);
    if (strcmp(n->key, key) == 0)
      return n->number;
  }
  g_assert_not_reached();
  return 0;
}

static void
test_schedule_packed(void)
{
  /* 2 H100s, 8 samples: the planner runs each branch on one GPU, side by
   * side (packed); the simulated step lands within 5 % of the planned one,
   * and under the unpacked plan's. */
  g_autoptr(StModel) m = two_branch_model();
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) c = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(c, 0, 2, &error));
  StOptions o;
  st_test_options_init(&o);
  o.micro_batch = 4;
  o.steps = 3;
  g_autoptr(StSchedule) s = st_test_build("burst", m, c, &o);
  double planned = note_number(s, "planned_step_s");
  double unpacked = note_number(s, "planned_unpacked_step_s");
  g_assert_cmpfloat(note_number(s, "packed_branches"), ==, 1);
  g_assert_cmpfloat(planned, <, unpacked);
  StTimeline *t;
  g_autoptr(StSummary) sum = st_test_simulate(s, "auto", TRUE, &t);
  double simulated = sum->step_time_ns * 1e-9;
  g_test_message("planned %.3f ms (unpacked %.3f), simulated %.3f ms", planned * 1e3,
                 unpacked * 1e3, simulated * 1e3);
  g_assert_cmpfloat(fabs(simulated - planned), <=, 0.05 * planned);
  g_assert_cmpfloat(simulated, <, unpacked);
  st_timeline_free(t);
  st_options_clear(&o);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/burst/pack/equal-branches", test_equal_branches);
  g_test_add_func("/burst/pack/non-scaling", test_pack_non_scaling);
  g_test_add_func("/burst/pack/costly-move", test_pack_costly_move);
  g_test_add_func("/burst/pack/schedule", test_schedule_packed);
  return g_test_run();
}
