/* comm_ring.c: the "ring" algorithm, as nccl-tests and NCCL's tuner model it
 * (NCCL src/graph/tuning.cc). n ranks on N nodes, S the full buffer (bytes);
 * every member device sends, per direction, in n_steps latencies of which
 * n_inter cross nodes:
 *
 *   all_reduce (reduce-scatter then all-gather): 2(n-1)/n * S,  2(n-1) steps, 2(N-1) inter
 *   reduce_scatter, all_gather:                  (n-1)/n * S,   (n-1) steps,  (N-1) inter
 *   broadcast, reduce (pipelined chain):         S,             (n-1) steps,  (N-1) inter
 *
 * at the rate the links allow (st_comm_flat_use: within a node every
 * device's NVLink ports; over nodes (g-1)/g of it on NVLink and one device's
 * worth per node through the node's NICs). One node at B bytes/s per GPU:
 * t = 2(n-1)/n S/B + 2(n-1) alpha for an all-reduce. Several members on one
 * device scale its bytes by per_device. One rank: no phases.
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
  double steps = n - 1, inter = MAX(group->nodes - 1, 0), share;
  switch (kind) {
  case ST_COLL_ALL_REDUCE:
    share = 2 * steps / n;
    steps *= 2;
    inter *= 2;
    break;
  case ST_COLL_REDUCE_SCATTER:
  case ST_COLL_ALL_GATHER:
    share = steps / n;
    break;
  case ST_COLL_BROADCAST:
  case ST_COLL_REDUCE:
    share = 1;
    break;
  default:
    g_return_val_if_reached(FALSE);
  }
  st_comm_plan_add(plan, cluster, group, st_comm_flat_link(group), share * s,
                   st_comm_flat_use(group), steps - inter, inter);
  return TRUE;
}

const StCommAlgo st_comm_ring = {
  .name = "ring",
  .summary = "ring over all ranks: bandwidth-optimal, latency linear in ranks; every collective",
  .citation = "P. Patarasuk, X. Yuan, Bandwidth optimal all-reduce algorithms for clusters of "
              "workstations, JPDC 69(2), 2009; NCCL src/graph/tuning.cc",
  .plan = ring_plan,
};
