/* comm_tree.c: the "tree" algorithm: NCCL's double binary tree (two
 * complementary binary trees, each carrying half the data, so every rank
 * sends about S whichever tree it is a leaf of). n ranks, S the full
 * buffer, d = ceil(log2 n) the depth:
 *
 *   all_reduce (reduce up, broadcast down): 2 * S, 2 d alpha
 *   broadcast, reduce:                      S,     d alpha
 *
 * It needs twice the ring's bandwidth term for all-reduce at large n but
 * only log-depth latency, so it wins for small messages. reduce_scatter and
 * all_gather have no tree form (NCCL runs them as rings): not applicable.
 * Bytes scale by group->per_device as in the ring. One rank: no phases.
 */
#include "cost/cost_impl.h"

static int
ceil_log2(int n)
{
  int depth = 0;
  while ((1LL << depth) < n)
    depth++;
  return depth;
}

static gboolean
tree_plan(const StCluster *cluster, StCollKind kind, int64_t bytes, const StGroupShape *group,
          StCommPlan *plan)
{
  st_comm_plan_init(plan, "tree", ST_SRC_ALPHA_BETA);
  if (kind == ST_COLL_REDUCE_SCATTER || kind == ST_COLL_ALL_GATHER)
    return FALSE;
  int n = group->ranks;
  if (n <= 1)
    return TRUE;
  double s = st_comm_device_bytes(group, bytes);
  double depth = ceil_log2(n);
  StLinkClass link = st_comm_flat_link(group);
  switch (kind) {
  case ST_COLL_ALL_REDUCE:
    st_comm_plan_add(plan, cluster, link, 2 * s, 2 * depth);
    return TRUE;
  case ST_COLL_BROADCAST:
  case ST_COLL_REDUCE:
    st_comm_plan_add(plan, cluster, link, s, depth);
    return TRUE;
  default:
    g_return_val_if_reached(FALSE);
  }
}

const StCommAlgo st_comm_tree = {
  .name = "tree",
  .summary = "double binary tree: log-depth latency; all_reduce, broadcast and reduce only",
  .citation = "P. Sanders, J. Speck, J. L. Traff, Two-tree algorithms for full bandwidth "
              "broadcast, reduction and scan, Parallel Computing 35(12), 2009; NCCL 2.4",
  .plan = tree_plan,
};
