/* comm_ring.c: the "ring" algorithm, alpha-beta (as nccl-tests and NCCL's
 * tuner model it). n ranks, S the full buffer (bytes), alpha the latency and
 * B the per-GPU bandwidth of the slowest link class the ring crosses; every
 * member sends, per direction:
 *
 *   all_reduce (reduce-scatter then all-gather): 2(n-1)/n * S, 2(n-1) alpha
 *   reduce_scatter, all_gather:                  (n-1)/n * S,  (n-1) alpha
 *   broadcast, reduce (pipelined chain):         S,            (n-1) alpha
 *
 * so t = latency + bytes / B. One phase. When several members share a
 * device (group->per_device > 1) the device sends for each of them: bytes
 * scale by per_device. One rank: no phases.
 */
#include "cost/cost_impl.h"

static gboolean
ring_plan(const StCluster *cluster, StCollKind kind, int64_t bytes, const StGroupShape *group,
          StCommPlan *plan)
{
  st_comm_plan_init(plan, "ring", ST_SRC_ALPHA_BETA);
  int n = group->ranks;
  if (n <= 1)
    return TRUE;
  double s = st_comm_device_bytes(group, bytes);
  double steps = n - 1;
  StLinkClass link = st_comm_flat_link(group);
  switch (kind) {
  case ST_COLL_ALL_REDUCE:
    st_comm_plan_add(plan, cluster, link, 2 * steps / n * s, 2 * steps);
    return TRUE;
  case ST_COLL_REDUCE_SCATTER:
  case ST_COLL_ALL_GATHER:
    st_comm_plan_add(plan, cluster, link, steps / n * s, steps);
    return TRUE;
  case ST_COLL_BROADCAST:
  case ST_COLL_REDUCE:
    st_comm_plan_add(plan, cluster, link, s, steps);
    return TRUE;
  default:
    g_return_val_if_reached(FALSE);
  }
}

const StCommAlgo st_comm_ring = {
  .name = "ring",
  .summary = "ring over all ranks: bandwidth-optimal, latency linear in ranks; every collective",
  .citation = "P. Patarasuk, X. Yuan, Bandwidth optimal all-reduce algorithms for clusters of "
              "workstations, JPDC 69(2), 2009; NCCL",
  .plan = ring_plan,
};
