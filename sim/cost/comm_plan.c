/* comm_plan.c: choosing and building communication plans (see cost.h).
 *
 * "auto" takes the applicable algorithm that is fastest alone on idle links,
 * which is how NCCL's tuner chooses: for each algorithm and protocol it
 * predicts latency + bytes / bandwidth from the topology and takes the least
 * (NCCL src/graph/tuning.cc, ncclTopoTuneModel and ncclTopoGetAlgoTime);
 * like NCCL, only all-reduce has a tree, and broadcast, reduce, all-gather
 * and reduce-scatter run as rings (NCCL's PAT, NVLS and CollNet algorithms
 * are not modelled; "hierarchical" stands for the two-level ones). Ties go
 * to the earlier algorithm in the registry (ring, tree, hierarchical).
 *
 * The modelled phases run at the share of the links' rate NCCL reaches
 * (nccl_bus, the GPU file's "nccl_bus": nccl-tests' bus bandwidth at large
 * sizes over the link's rate), capped there beside other traffic.
 *
 * A measured link profile for the case wins over the models. It becomes one
 * phase of the algorithm's wire bytes that loads the links as a flat ring
 * over the group would, and it combines with sharing this way: the measured
 * time sets the flow's rate alone, as a cap it never exceeds (the overheads
 * a measurement includes do not vanish beside other traffic), and the flow
 * shares its links max-min with every other flow, so two equal measured
 * all-reduces on the same links each get half of what the links allow.
 * When the measurement is faster than the model's links allow alone
 * (in-switch reduction, a cluster file below the hardware), the flow is
 * taken to load the links less in that ratio, so that alone it still runs
 * at its measured rate and no link carries more than its capacity.
 */
#include "cost/cost_impl.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "cluster/links.h"

StLinkClass
st_comm_flat_link(const StGroupShape *group)
{
  if (group->devices <= 1)
    return ST_LINK_LOCAL;
  if (group->nodes <= 1)
    return ST_LINK_INTRA_NODE;
  return ST_LINK_INTER_NODE;
}

StLinkUse
st_comm_flat_use(const StGroupShape *group)
{
  if (group->devices <= 1)
    return (StLinkUse){.mem = 1};
  if (group->nodes <= 1)
    return (StLinkUse){.gpu = 1};
  double g = MAX(group->per_node, 1);
  return (StLinkUse){.gpu = (g - 1) / g, .nic_node = 1, .leaf = 1};
}

double
st_comm_use_rate(const StCluster *c, const StLinkUse *use, const StGroupShape *shape)
{
  double rate = INFINITY;
  if (use->gpu > 0)
    rate = MIN(rate, c->links[ST_LINK_INTRA_NODE].bandwidth / use->gpu);
  if (use->mem > 0)
    rate = MIN(rate, st_cluster_link_bandwidth(c, ST_LINK_LOCAL) / use->mem);
  double nic = use->nic_dev * MAX(shape->per_nic, 1) + use->nic_node * shape->nic_share;
  if (nic > 0)
    rate = MIN(rate, c->links[ST_LINK_INTER_NODE].bandwidth / nic);
  if (use->leaf > 0 && shape->leaves > 1 && st_net_fabric_binds(c)) {
    /* A full leaf's links: a partial last leaf may bind earlier. */
    double leaf = c->fabric.leaf_nodes * c->fabric.nics * c->links[ST_LINK_INTER_NODE].bandwidth /
                  c->fabric.oversubscription;
    rate = MIN(rate, leaf / use->leaf);
  }
  return rate;
}

void
st_comm_plan_init(StCommPlan *plan, const char *algo, StCostSource source)
{
  *plan = (StCommPlan){.algo = algo, .source = source, .n_phases = 0};
}

void
st_comm_plan_add(StCommPlan *plan, const StCluster *cluster, const StGroupShape *group,
                 StLinkClass link, double bytes, StLinkUse use, double intra_steps,
                 double inter_steps)
{
  g_return_if_fail(plan->n_phases < ST_COMM_MAX_PHASES);
  StLinkClass near = group->devices <= 1 ? ST_LINK_LOCAL : ST_LINK_INTRA_NODE;
  double latency = intra_steps * (double)st_cluster_link_latency(cluster, near) +
                   inter_steps * (double)st_cluster_link_latency(cluster, ST_LINK_INTER_NODE);
  plan->phases[plan->n_phases++] = (StCommPhase){
    .link = link,
    .latency_ns = (int64_t)llround(latency),
    .bytes = bytes,
    .use = use,
    .bandwidth = st_comm_use_rate(cluster, &use, group),
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

/* The share of its links' rate a modelled phase of a `kind` collective
 * reaches (the GPU file's nccl_bus): the rate alone and a cap the phase
 * never exceeds, so that beside other traffic it gets no more than NCCL
 * would alone. */
static void
nccl_bus(StCommPlan *plan, const StCluster *cluster, StCollKind kind, const StGroupShape *group)
{
  const StGpuPerf *p = cluster->gpu.perf;
  if (p == NULL || p->bus_intra.value <= 0)
    return;
  for (int i = 0; i < plan->n_phases; i++) {
    StCommPhase *ph = &plan->phases[i];
    double share = 1;
    if (ph->link == ST_LINK_INTER_NODE)
      share = p->bus_inter.value;
    else if (ph->link == ST_LINK_INTRA_NODE)
      share = kind == ST_COLL_ALL_REDUCE && group->nodes <= 1 &&
                  p->bus_intra_all_reduce.value > 0
                ? p->bus_intra_all_reduce.value
                : p->bus_intra.value;
    if (share >= 1)
      continue;
    ph->bandwidth *= share;
    ph->cap = ph->cap > 0 ? MIN(ph->cap, ph->bandwidth) : ph->bandwidth;
  }
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
    nccl_bus(&candidate, cluster, kind, group);
    double ns = st_comm_plan_ns(&candidate);
    if (best == NULL || ns < best_ns) {
      best = *a;
      best_ns = ns;
      *plan = candidate;
    }
  }
  return best;
}

/* Replaces `plan` with one phase of its wire bytes at the measured speed,
 * loading the links as `use` says (scaled down when the measurement beats
 * what the links allow alone; see the top of this file). */
static void
apply_link_profile(StCommPlan *plan, const StCluster *cluster, const StGroupShape *shape,
                   StLinkClass link, StLinkUse use, double time_ns)
{
  double bytes = plan_bytes(plan);
  st_comm_plan_init(plan, plan->algo, ST_SRC_LINK_PROFILE);
  if (time_ns <= 0 || bytes <= 0)
    return; /* measured as instant */
  double rate = bytes / (time_ns / 1e9);
  double alone = st_comm_use_rate(cluster, &use, shape);
  if (rate > alone) {
    double k = alone / rate;
    use = (StLinkUse){use.gpu * k, use.mem * k, use.nic_dev * k, use.nic_node * k, use.leaf * k};
  }
  plan->phases[0] = (StCommPhase){
    .link = link, .latency_ns = 0, .bytes = bytes, .use = use, .bandwidth = rate, .cap = rate};
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
    nccl_bus(plan, cluster, kind, group);
  }
  double measured_ns;
  StLinkClass link = st_comm_flat_link(group);
  if (profile != NULL && group->ranks > 1 && cluster->gpu.name != NULL &&
      st_profile_link_time(profile, cluster->gpu.name, kind, link, group->ranks, bytes,
                           &measured_ns, NULL))
    apply_link_profile(plan, cluster, group, link, st_comm_flat_use(group), measured_ns);
  return TRUE;
}

/* The shape of a group of two devices (or one), for a transfer's rate. */
static void
pair_shape(const StCluster *cluster, int a, int b, StGroupShape *shape)
{
  int32_t gpus[2] = {a, b};
  st_cluster_group_shape(cluster, gpus, a == b ? 1 : 2, shape);
}

/* A transfer loads the sender's out side and the receiver's in side of one
 * link each: the memory, the NVLink ports, or the NICs (and the leaves when
 * it changes leaf). */
static StLinkUse
p2p_use(StLinkClass link)
{
  switch (link) {
  case ST_LINK_LOCAL:
    return (StLinkUse){.mem = 1};
  case ST_LINK_INTRA_NODE:
    return (StLinkUse){.gpu = 1};
  default:
    return (StLinkUse){.nic_dev = 1, .leaf = 1};
  }
}

void
st_comm_plan_p2p(const StCluster *cluster, int device_a, int device_b, int64_t bytes,
                 StCommPlan *plan)
{
  g_return_if_fail(cluster != NULL && plan != NULL);
  st_comm_plan_init(plan, "p2p", ST_SRC_ALPHA_BETA);
  StLinkClass link = st_cluster_link_between(cluster, device_a, device_b);
  StGroupShape shape;
  pair_shape(cluster, device_a, device_b, &shape);
  /* Each end sends or receives through a NIC of its own, whatever the pair shape says. */
  shape.per_nic = 1;
  gboolean inter = link == ST_LINK_INTER_NODE;
  st_comm_plan_add(plan, cluster, &shape, link, (double)bytes, p2p_use(link), inter ? 0 : 1,
                   inter ? 1 : 0);
}

void
st_comm_plan_p2p_profiled(const StCluster *cluster, const StProfile *profile, int device_a,
                          int device_b, int64_t bytes, StCommPlan *plan)
{
  st_comm_plan_p2p(cluster, device_a, device_b, bytes, plan);
  StLinkClass link = st_cluster_link_between(cluster, device_a, device_b);
  double measured_ns;
  if (profile != NULL && cluster->gpu.name != NULL &&
      st_profile_p2p_time(profile, cluster->gpu.name, link, bytes, &measured_ns)) {
    StGroupShape shape;
    pair_shape(cluster, device_a, device_b, &shape);
    shape.per_nic = 1;
    apply_link_profile(plan, cluster, &shape, link, p2p_use(link), measured_ns);
  }
}
