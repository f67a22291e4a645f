/* test_plan_closed.c: the planner's closed forms before building
 * (sim/plan/plan_closed.c): the shape of every rank's group in O(GPUs per
 * node), each form under the simulated step and the built schedule's bound
 * and each memory estimate under the simulated peak on several models and
 * strategies, the same winner and fronts as the search without pruning,
 * and a search whose work per configuration does not grow with the node
 * count.
 */
#include <string.h>

#include "plan/plan_private.h"
#include "testutil.h"

/* ---- the group of every rank ------------------------------------------------ */

static void
test_world_shape(void)
{
  /* Devices 0 .. n-1, one rank each: st_plan_world_shape from the first
   * and last nodes against st_cluster_group_shape sorting all n, on
   * clusters of 8 GPUs and 8 NICs, 8 GPUs and 4 NICs, 6 GPUs and 2 NICs,
   * and leaves of several nodes. */
  const char *clusters[] = {"models/clusters/dgx-h100.json", "models/clusters/dgx-v100.json",
                            "models/clusters/summit.json",
                            "tests/data/clusters/oversubscribed.json"};
  for (gsize k = 0; k < G_N_ELEMENTS(clusters); k++) {
    g_autoptr(StCluster) c = st_test_cluster(clusters[k], 300, 0);
    g_autofree int32_t *gpus = g_new(int32_t, c->gpus);
    for (int i = 0; i < c->gpus; i++)
      gpus[i] = i;
    for (int n = 1; n <= c->gpus; n += n < 40 ? 1 : 7) {
      StGroupShape want, got;
      st_cluster_group_shape(c, gpus, n, &want);
      st_plan_world_shape(c, n, &got);
      g_assert_cmpmem(&got, sizeof got, &want, sizeof want);
    }
  }
}

/* ---- under the simulated step ----------------------------------------------- */

typedef struct {
  const char *model;
  const char *strategy;
  const char *nodes;
  const char *micro;
  const char *accumulation;
  const char *extra, *value; /* one more option, or NULL */
} Space;

static const Space SPACES[] = {
  {"models/mlp.json", "dp,zero", "1,2,3", "1,8", "1,2", "zero-stage", "1,2,3"},
  {"models/resnet50.json", "dp,zero", "1,2", "8,32", "1,2", "zero-stage", "1,2,3"},
  {"models/resnet18.json", "dp", "1,2", "16", "1", "recompute", "none,full"},
  {"models/gpt2-124m.json", "dp,zero", "1", "2", "1", "recompute", "selective,full"},
  {"models/gpt2-124m.json", "dp,zero", "1,2", "2", "1,3", "zero-stage", "1,3"},
  {"models/gpt2-124m.json", "zero", "1", "2", "1", "overlap-param-gather", "off,on"},
  {"models/gpt2-124m.json", "dp", "1,2", "1", "2", "bucket-bytes", "1MB,4GB"},
};

static StPlanSpec *
space_spec(const Space *s, const char *prune)
{
  StPlanSpec *spec = st_test_plan_spec("strategy", s->strategy, "nodes", s->nodes,
                                       "micro-batch", s->micro, "accumulation", s->accumulation,
                                       "prune", prune, NULL);
  if (s->extra != NULL) {
    g_autoptr(GError) error = NULL;
    st_plan_spec_set(spec, s->extra, s->value, &error);
    g_assert_no_error(error);
  }
  return spec;
}

static void
test_below_simulated(void)
{
  /* Every point simulated without pruning: the closed form (tolerance of
   * the steady rule off) is positive, at most the bound of the schedule
   * built (a sub-chain of its cycle) and so at most the simulated steady
   * step; the memory estimate at most the simulated peak. */
  int checked = 0, tight = 0;
  for (gsize k = 0; k < G_N_ELEMENTS(SPACES); k++) {
    g_autoptr(StModel) m = st_test_model(SPACES[k].model);
    g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
    g_autoptr(StPlanSpec) spec = space_spec(&SPACES[k], "off");
    g_autoptr(StPlan) plan = st_test_plan_run(spec, m, c);
    for (guint i = 0; i < plan->configs->len; i++) {
      const StPlanPoint *pt = &plan->points[i];
      if (pt->status != ST_PLAN_OK || !pt->sim->steady)
        continue;
      if (g_test_verbose())
        g_printerr("%s %s %d GPUs mb %d x %d: closed %" G_GINT64_FORMAT " built %" G_GINT64_FORMAT
                   " simulated %" G_GINT64_FORMAT "\n",
                   SPACES[k].model, g_array_index(plan->configs, StPlanConfig, i).strategy->name,
                   pt->gpus_used, g_array_index(plan->configs, StPlanConfig, i).micro_batch,
                   pt->accumulation, pt->closed_ns, pt->bound.step_time_ns, pt->step_time_ns);
      g_assert_cmpint(pt->closed_ns, >, 0);
      g_assert_cmpint(pt->closed_ns, <=, pt->bound.step_time_ns);
      g_assert_cmpint(pt->closed_ns, <=, pt->step_time_ns);
      g_assert_cmpint(pt->estimate.peak_bytes, <=, pt->peak_bytes);
      /* Close to the built schedule's bound: it prunes what that would. */
      tight += pt->closed_ns * 10 >= pt->bound.step_time_ns * 9;
      checked++;
    }
  }
  g_assert_cmpint(checked, >, 100);
  g_assert_cmpint(tight * 4, >=, checked * 3);
}

/* ---- pruning by it keeps the winner and the fronts ----------------------------- */

static void
test_same_winners(void)
{
  /* dp and every ZeRO stage on 1-24 nodes of the MLP, then ResNet-50 on
   * 1-6: pruned by the closed forms (front and winner) against simulated
   * without pruning (--prune off): the same winner, the same points on the
   * GPU front, and nothing pruned that --prune off ranks first or on the
   * front. */
  const Space spaces[] = {
    {"models/mlp.json", "dp,zero", "1-24", "1,4,32", "1", "zero-stage", "1,2,3"},
    {"models/resnet50.json", "dp,zero", "1-6", "8,32", "1,2", "zero-stage", "1,3"},
  };
  int unbuilt = 0;
  for (gsize k = 0; k < G_N_ELEMENTS(spaces); k++) {
    g_autoptr(StModel) m = st_test_model(spaces[k].model);
    g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
    g_autoptr(StPlanSpec) off = space_spec(&spaces[k], "off");
    g_autoptr(StPlanSpec) front = space_spec(&spaces[k], "front");
    g_autoptr(StPlanSpec) winner = space_spec(&spaces[k], "winner");
    g_autoptr(StPlan) all = st_test_plan_run(off, m, c);
    g_autoptr(StPlan) pf = st_test_plan_run(front, m, c);
    g_autoptr(StPlan) pw = st_test_plan_run(winner, m, c);
    g_assert_cmpint(all->counts.pruned, ==, 0);
    g_assert_cmpint(st_plan_winner(all), >=, 0);
    g_assert_cmpint(st_plan_winner(pf), ==, st_plan_winner(all));
    g_assert_cmpint(st_plan_winner(pw), ==, st_plan_winner(all));
    for (guint i = 0; i < all->configs->len; i++) {
      g_assert_cmpint(pf->points[i].front_gpus, ==, all->points[i].front_gpus);
      if (pf->points[i].status == ST_PLAN_PRUNED)
        g_assert_false(all->points[i].front_gpus);
      if (pw->points[i].status == ST_PLAN_PRUNED)
        g_assert_cmpint(all->points[i].rank, !=, 1);
      /* Pruned before building, by the closed form. */
      unbuilt += pf->points[i].status == ST_PLAN_PRUNED && !pf->points[i].bounded &&
                 pf->points[i].closed_ns >= pf->points[i].before_ns;
    }
  }
  g_assert_cmpint(unbuilt, >, 100);
}

/* ---- the work per configuration ---------------------------------------------------- */

static int
built(const StPlan *plan)
{
  int n = 0;
  for (guint i = 0; i < plan->configs->len; i++)
    n += plan->points[i].bounded;
  return n;
}

/* Points holding a simulation record (StPlanSim); each is a simulated one. */
static int
records(const StPlan *plan)
{
  int n = 0;
  for (int i = 0; i < plan->counts.configurations; i++) {
    const StPlanPoint *pt = &plan->points[i];
    g_assert_true((pt->sim != NULL) == pt->simulated);
    n += pt->sim != NULL;
  }
  return n;
}

static void
test_work_per_configuration(void)
{
  /* MLP, dp, 1-100 nodes and 1-10,000 nodes (7 micro-batches each): the
   * larger search has 100 times the configurations and builds and
   * simulates exactly as many schedules as the smaller (those on one node,
   * which beat every larger one's closed form); the rest are pruned before
   * building. Before the closed forms, every one of the 70,000 was built. */
  g_autoptr(StModel) m = st_test_model("models/mlp.json");
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  g_autoptr(StPlanSpec) small = st_test_plan_spec("strategy", "dp", "nodes", "1-100", NULL);
  g_autoptr(StPlanSpec) large = st_test_plan_spec("strategy", "dp", "nodes", "1-10000", NULL);
  g_autoptr(StPlan) a = st_test_plan_run(small, m, c);
  g_autoptr(StPlan) b = st_test_plan_run(large, m, c);
  g_assert_cmpint(a->counts.configurations, ==, 700);
  g_assert_cmpint(b->counts.configurations, ==, 70000);
  g_assert_cmpint(built(b), ==, built(a));
  g_assert_cmpint(b->counts.simulated, ==, a->counts.simulated);
  g_assert_cmpint(built(a), <=, 2 * ST_PLAN_WAVE);
  g_assert_cmpint(b->counts.pruned, ==, 70000 - b->counts.simulated);
  g_assert_cmpint(st_plan_winner(b), ==, st_plan_winner(a));
  /* Only a simulated point (or its twin) holds a simulation record: the
   * 69,9xx pruned ones hold none, so the larger search keeps exactly as
   * many records as the smaller. */
  g_assert_cmpint(records(b), ==, records(a));
  g_assert_cmpint(records(b), ==, b->counts.simulated);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/closed/world-shape", test_world_shape);
  g_test_add_func("/plan/closed/below-simulated", test_below_simulated);
  g_test_add_func("/plan/closed/same-winners", test_same_winners);
  g_test_add_func("/plan/closed/work-per-configuration", test_work_per_configuration);
  return g_test_run();
}
