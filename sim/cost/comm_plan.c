/* comm_plan.c: choosing and building communication plans (see cost.h).
 *
 * A measured link profile for the case wins over the models: it becomes one
 * phase of the algorithm's wire bytes at the measured effective bandwidth
 * (bytes / time, no separate latency), so concurrent transfers still share
 * the link in the engine. Otherwise "auto" takes the applicable algorithm
 * that is fastest alone on idle links; ties go to the earlier one in the
 * registry (ring, tree, hierarchical).
 */
#include "cost/cost_impl.h"

#include <math.h>
#include <string.h>

#include "base/error.h"

StLinkClass
st_comm_flat_link(const StGroupShape *group)
{
  if (group->devices <= 1)
    return ST_LINK_LOCAL;
  if (group->nodes <= 1)
    return ST_LINK_INTRA_NODE;
  return ST_LINK_INTER_NODE;
}

void
st_comm_plan_init(StCommPlan *plan, const char *algo, StCostSource source)
{
  *plan = (StCommPlan){.algo = algo, .source = source, .n_phases = 0};
}

void
st_comm_plan_add(StCommPlan *plan, const StCluster *cluster, StLinkClass link, double bytes,
                 double alphas)
{
  g_return_if_fail(plan->n_phases < ST_COMM_MAX_PHASES);
  double latency = alphas * (double)st_cluster_link_latency(cluster, link);
  plan->phases[plan->n_phases++] = (StCommPhase){
    .link = link,
    .latency_ns = (int64_t)llround(latency),
    .bytes = bytes,
    .bandwidth = st_cluster_link_bandwidth(cluster, link),
  };
}

double
st_comm_plan_ns(const StCommPlan *plan)
{
  double ns = 0;
  for (int i = 0; i < plan->n_phases; i++) {
    const StCommPhase *p = &plan->phases[i];
    ns += (double)p->latency_ns;
    if (p->bytes > 0)
      ns += p->bandwidth > 0 ? p->bytes / p->bandwidth * 1e9 : INFINITY;
  }
  return ns;
}

static double
plan_bytes(const StCommPlan *plan)
{
  double bytes = 0;
  for (int i = 0; i < plan->n_phases; i++)
    bytes += plan->phases[i].bytes;
  return bytes;
}

static char *
algo_names(void)
{
  g_autoptr(GString) names = g_string_new("auto");
  for (const StCommAlgo *const *a = st_comm_algos(); *a != NULL; a++)
    g_string_append_printf(names, ", %s", (*a)->name);
  return g_string_free(g_steal_pointer(&names), FALSE);
}

/* The fastest applicable algorithm alone on idle links (the ring always applies). */
static const StCommAlgo *
plan_auto(const StCluster *cluster, StCollKind kind, int64_t bytes, const StGroupShape *group,
          StCommPlan *plan)
{
  const StCommAlgo *best = NULL;
  double best_ns = INFINITY;
  for (const StCommAlgo *const *a = st_comm_algos(); *a != NULL; a++) {
    StCommPlan candidate;
    if (!(*a)->plan(cluster, kind, bytes, group, &candidate))
      continue;
    double ns = st_comm_plan_ns(&candidate);
    if (best == NULL || ns < best_ns) {
      best = *a;
      best_ns = ns;
      *plan = candidate;
    }
  }
  return best;
}

/* Replaces `plan` with one phase of its wire bytes at the measured speed. */
static void
apply_link_profile(StCommPlan *plan, StLinkClass link, double time_ns)
{
  double bytes = plan_bytes(plan);
  st_comm_plan_init(plan, "link-profile", ST_SRC_LINK_PROFILE);
  if (time_ns <= 0 || bytes <= 0)
    return; /* measured as instant */
  plan->phases[0] = (StCommPhase){
    .link = link, .latency_ns = 0, .bytes = bytes, .bandwidth = bytes / (time_ns / 1e9)};
  plan->n_phases = 1;
}

gboolean
st_comm_plan_collective(const StCluster *cluster, const StProfile *profile, const char *algo,
                        StCollKind kind, int64_t bytes, const StGroupShape *group,
                        StCommPlan *plan, GError **error)
{
  g_return_val_if_fail(cluster != NULL && group != NULL && plan != NULL, FALSE);
  g_return_val_if_fail(kind > ST_COLL_INVALID && kind < ST_COLL_N && bytes >= 0, FALSE);
  if (algo == NULL || strcmp(algo, "auto") == 0) {
    if (plan_auto(cluster, kind, bytes, group, plan) == NULL) {
      g_set_error(error, ST_COST_ERROR, ST_ERROR_UNSUPPORTED,
                  "no comm algorithm applies to %s over %d ranks", st_coll_name(kind),
                  group->ranks);
      return FALSE;
    }
  } else {
    const StCommAlgo *a = st_comm_algo_find(algo);
    if (a == NULL) {
      g_autofree char *names = algo_names();
      g_set_error(error, ST_COST_ERROR, ST_ERROR_INVALID,
                  "unknown comm algorithm '%s' (expected one of: %s)", algo, names);
      return FALSE;
    }
    if (!a->plan(cluster, kind, bytes, group, plan)) {
      g_set_error(error, ST_COST_ERROR, ST_ERROR_UNSUPPORTED,
                  "comm algorithm '%s' does not apply to %s over %d ranks on %d devices in %d "
                  "node%s (%s: %s)", algo, st_coll_name(kind), group->ranks, group->devices,
                  group->nodes, group->nodes == 1 ? "" : "s", a->name, a->summary);
      return FALSE;
    }
  }
  double measured_ns;
  StLinkClass link = st_comm_flat_link(group);
  if (profile != NULL && group->ranks > 1 && cluster->gpu.name != NULL &&
      st_profile_link_time(profile, cluster->gpu.name, kind, link, group->ranks, bytes,
                           &measured_ns, NULL))
    apply_link_profile(plan, link, measured_ns);
  return TRUE;
}

void
st_comm_plan_p2p(const StCluster *cluster, int device_a, int device_b, int64_t bytes,
                 StCommPlan *plan)
{
  g_return_if_fail(cluster != NULL && plan != NULL);
  st_comm_plan_init(plan, "p2p", ST_SRC_ALPHA_BETA);
  st_comm_plan_add(plan, cluster, st_cluster_link_between(cluster, device_a, device_b),
                   (double)bytes, 1);
}

void
st_comm_plan_p2p_profiled(const StCluster *cluster, const StProfile *profile, int device_a,
                          int device_b, int64_t bytes, StCommPlan *plan)
{
  st_comm_plan_p2p(cluster, device_a, device_b, bytes, plan);
  StLinkClass link = st_cluster_link_between(cluster, device_a, device_b);
  double measured_ns;
  if (profile != NULL && cluster->gpu.name != NULL &&
      st_profile_p2p_time(profile, cluster->gpu.name, link, bytes, &measured_ns))
    apply_link_profile(plan, link, measured_ns);
}
