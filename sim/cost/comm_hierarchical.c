/* comm_hierarchical.c: the "hierarchical" algorithm: an intra-node stage on
 * the fast links and an inter-node ring over one shard per GPU, each GPU
 * through its own NIC (the hierarchical all-reduce of Jia et al. 2018, as
 * Horovod and NCCL's CollNet / NVLS-tree split it).
 * It applies only to a group that spans several nodes with the same number
 * g > 1 of devices on each of its N nodes. S the full buffer, alpha_i and
 * alpha_e the intra- and inter-node latencies:
 *
 *   all_reduce:     intra reduce-scatter  (g-1)/g * S,        (g-1) alpha_i
 *                   inter ring all-reduce 2(N-1)/N * S/g,     2(N-1) alpha_e
 *                   intra all-gather      (g-1)/g * S,        (g-1) alpha_i
 *   reduce_scatter: intra reduce-scatter, then inter reduce-scatter
 *                   (N-1)/N * S/g, (N-1) alpha_e
 *   all_gather:     inter all-gather (N-1)/N * S/g, then intra all-gather
 *   broadcast:      inter pipelined chain S, (N-1) alpha_e, then intra S, (g-1) alpha_i
 *   reduce:         the same two phases, intra first
 *   all_to_all:     does not apply (the ring's pairwise exchange)
 *
 * Intra phases load every device's NVLink ports; inter phases every
 * device's NIC (g rings side by side: g devices sharing a NIC share it) and,
 * across leaves, g rings' worth of each leaf link. Bytes scale by
 * group->per_device (several members on one device send for each of them);
 * latencies count devices, not members.
 */
#include "cost/cost_impl.h"

static gboolean
hierarchical_plan(const StCluster *cluster, StCollKind kind, int64_t bytes,
                  const StGroupShape *group, StCommPlan *plan)
{
  st_comm_plan_init(plan, "hierarchical", ST_SRC_ALPHA_BETA);
  int g = group->per_node, nn = group->nodes;
  if (nn <= 1 || g <= 1 || group->devices != nn * g)
    return FALSE;
  double s = st_comm_device_bytes(group, bytes);
  double gi = g, ne = nn;
  const StLinkClass intra = ST_LINK_INTRA_NODE, inter = ST_LINK_INTER_NODE;
  const StLinkUse in_node = {.gpu = 1}, across = {.nic_dev = 1, .leaf = gi};
  switch (kind) {
  case ST_COLL_ALL_REDUCE:
    st_comm_plan_add(plan, cluster, group, intra, (gi - 1) / gi * s, in_node, gi - 1, 0);
    st_comm_plan_add(plan, cluster, group, inter, 2 * (ne - 1) / ne * s / gi, across, 0,
                     2 * (ne - 1));
    st_comm_plan_add(plan, cluster, group, intra, (gi - 1) / gi * s, in_node, gi - 1, 0);
    return TRUE;
  case ST_COLL_REDUCE_SCATTER:
    st_comm_plan_add(plan, cluster, group, intra, (gi - 1) / gi * s, in_node, gi - 1, 0);
    st_comm_plan_add(plan, cluster, group, inter, (ne - 1) / ne * s / gi, across, 0, ne - 1);
    return TRUE;
  case ST_COLL_ALL_GATHER:
    st_comm_plan_add(plan, cluster, group, inter, (ne - 1) / ne * s / gi, across, 0, ne - 1);
    st_comm_plan_add(plan, cluster, group, intra, (gi - 1) / gi * s, in_node, gi - 1, 0);
    return TRUE;
  case ST_COLL_BROADCAST:
    st_comm_plan_add(plan, cluster, group, inter, s, across, 0, ne - 1);
    st_comm_plan_add(plan, cluster, group, intra, s, in_node, gi - 1, 0);
    return TRUE;
  case ST_COLL_REDUCE:
    st_comm_plan_add(plan, cluster, group, intra, s, in_node, gi - 1, 0);
    st_comm_plan_add(plan, cluster, group, inter, s, across, 0, ne - 1);
    return TRUE;
  case ST_COLL_ALL_TO_ALL:
  case ST_COLL_RING_SHIFT:
    return FALSE; /* pairwise exchanges (comm_ring.c), not staged */
  default:
    g_return_val_if_reached(FALSE);
  }
}

const StCommAlgo st_comm_hierarchical = {
  .name = "hierarchical",
  .summary = "intra-node stage, inter-node ring on S/g, intra-node stage; only for groups on "
             "several nodes with the same number (>1) of devices on each",
  .citation = "X. Jia et al., Highly scalable deep learning training system with "
              "mixed-precision: training ImageNet in four minutes, arXiv:1807.11205, 2018",
  .plan = hierarchical_plan,
};
