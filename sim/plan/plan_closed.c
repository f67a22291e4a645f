/* plan_closed.c: closed-form bounds of a configuration's steady step,
 * before building it (plan_private.h), one function per strategy family in
 * a table; a strategy without one is built to be bounded, as before.
 *
 * Why a closed form. Building a schedule, checking it, fingerprinting it
 * and sorting its groups' shapes costs O(ranks) even when its program is
 * one for every rank (dp, zero), so a search over 1-N nodes cost O(N^2),
 * almost all of it on configurations the bound then pruned. A closed form
 * costs O(layers x micro-batches) whatever the rank count; the planner
 * prunes with it before building and builds only what can still win or
 * reach a Pareto front.
 *
 * Validity. Each form follows one cycle of the schedule its strategy
 * would build: a chain of ops that really exist, each at the time the
 * engine gives it alone (st_compute_time, st_comm_plan_collective: the
 * same calls plan_bound.c makes on a built schedule), joined by
 * dependencies that really exist. Leaving ops or dependencies out only
 * shortens the chain, so a form may omit what it cannot follow cheaply
 * (offload copies, ZeRO-3's gathers) and stays a lower bound; it returns 0
 * for options that change the chain's ops themselves (--sparsity,
 * --offload, hybrid sharding). The steady-step argument is plan_bound.c's:
 * an op that runs once a step ends at least the cycle's length after its
 * previous instance. tests/test_plan_closed.c holds every form under the
 * simulated steps of several models and strategies.
 *
 * The group of every rank. A collective over all the devices 0 .. n-1 has
 * the shape its first node and its last (maybe partial) node give, which
 * st_plan_world_shape finds in O(GPUs per node) instead of sorting n
 * devices.
 */
#include "plan/plan_private.h"

#include <string.h>

typedef struct {
  const char *strategy;  /* registered name */
  int64_t (*cycle)(const StStrategyInput *in, gboolean zero);
  gboolean zero;         /* passed on: one form serves dp and zero */
} Closed;

static const Closed CLOSED[] = {
  {"dp", st_plan_closed_dp_cycle, FALSE},
  {"zero", st_plan_closed_dp_cycle, TRUE},
};

int64_t
st_plan_closed_cycle(const StStrategy *strategy, const StStrategyInput *in)
{
  g_return_val_if_fail(strategy != NULL && in != NULL, 0);
  for (gsize i = 0; i < G_N_ELEMENTS(CLOSED); i++)
    if (strcmp(CLOSED[i].strategy, strategy->name) == 0)
      return CLOSED[i].cycle(in, CLOSED[i].zero);
  return 0;
}

gboolean
st_plan_closed_known(const StStrategy *strategy)
{
  for (gsize i = 0; i < G_N_ELEMENTS(CLOSED); i++)
    if (strcmp(CLOSED[i].strategy, strategy->name) == 0)
      return TRUE;
  return FALSE;
}

void
st_plan_world_shape(const StCluster *c, int n, StGroupShape *shape)
{
  g_return_if_fail(c != NULL && shape != NULL && n >= 0);
  int per = c->gpus_per_node;
  if (n <= 2 * per || per <= 0) {
    /* Small: as st_cluster_group_shape counts it. */
    g_autofree int32_t *gpus = g_new(int32_t, MAX(n, 1));
    for (int i = 0; i < n; i++)
      gpus[i] = i;
    st_cluster_group_shape(c, gpus, n, shape);
    return;
  }
  /* Every full node is the first one shifted; the last may be partial. */
  g_autofree int32_t *list = g_new(int32_t, 2 * per);
  int full = n / per, rest = n % per;
  for (int i = 0; i < per; i++)
    list[i] = i;
  for (int i = 0; i < rest; i++)
    list[per + i] = full * per + i;
  StGroupShape first, last;
  st_cluster_group_shape(c, list, per, &first);
  st_cluster_group_shape(c, list + per, rest, &last);
  int nodes = full + (rest > 0);
  int leaf = MAX(c->fabric.leaf_nodes, 1);
  *shape = (StGroupShape){
    .ranks = n,
    .devices = n,
    .nodes = nodes,
    .per_node = first.per_node,
    .per_device = 1,
    .per_nic = MAX(first.per_nic, last.per_nic),
    .leaves = (nodes - 1) / leaf + 1,
    .nic_share = MAX(first.nic_share, last.nic_share),
  };
}
