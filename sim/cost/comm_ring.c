/* comm_ring.c: the "ring" algorithm, as nccl-tests and NCCL's tuner model it
 * (NCCL src/graph/tuning.cc). n ranks on N nodes, S the full buffer (bytes);
 * every member device sends, per direction, in n_steps latencies of which
 * n_inter cross nodes:
 *
 *   all_reduce (reduce-scatter then all-gather): 2(n-1)/n * S,  2(n-1) steps, 2(N-1) inter
 *   reduce_scatter, all_gather:                  (n-1)/n * S,   (n-1) steps,  (N-1) inter
 *   broadcast, reduce (pipelined chain):         S,             (n-1) steps,  (N-1) inter
 *   ring_shift (one step: S to the next member): S,             1 step,       1 inter over nodes
 *
 * at the rate the links allow (st_comm_flat_use: within a node every
 * device's NVLink ports; over nodes (g-1)/g of it on NVLink and one device's
 * worth per node through the node's NICs). One node at B bytes/s per GPU:
 * t = 2(n-1)/n S/B + 2(n-1) alpha for an all-reduce. Several members on one
 * device scale its bytes by per_device. One rank: no phases.
 *
 * all_to_all is no ring: NCCL runs it as n-1 concurrent sends and receives
 * (ncclGroupStart .. ncclSend/ncclRecv per peer .. ncclGroupEnd, as
 * nccl-tests' alltoall does), every device sending S/n to each peer at
 * once: (n-1)/n * S per device in one step of latency (over nodes, one
 * inter-node latency), busbw factor (n-1)/n. Its links differ from the
 * ring's: of each device's bytes, (g-1)/(n-1) go to the g-1 peers on its
 * node over NVLink and (n-g)/(n-1) leave through its own NIC; with the
 * group on L leaves of m = n/L devices each, m(n-m)/(n-1) of one device's
 * bytes cross each leaf's links. One node at B per GPU: t = (n-1)/n S/B +
 * alpha.
 */
#include "cost/cost_impl.h"

/* Per byte a device sends in an all-to-all (see the top). */
static StLinkUse
all_to_all_use(const StGroupShape *group)
{
  if (group->devices <= 1 || group->nodes <= 1)
    return st_comm_flat_use(group);
  double n = group->devices, g = MAX(group->per_node, 1), m = n / MAX(group->leaves, 1);
  return (StLinkUse){.gpu = (g - 1) / (n - 1), .nic_dev = (n - g) / (n - 1),
                     .leaf = m * (n - m) / (n - 1)};
}

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
  case ST_COLL_RING_SHIFT: /* one step of the ring */
    share = 1;
    steps = 1;
    inter = inter > 0 ? 1 : 0;
    break;
  case ST_COLL_ALL_TO_ALL:
    st_comm_plan_add(plan, cluster, group, st_comm_flat_link(group), steps / n * s,
                     all_to_all_use(group), inter > 0 ? 0 : 1, inter > 0 ? 1 : 0);
    return TRUE;
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
