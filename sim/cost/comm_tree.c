/* comm_tree.c: the "tree" algorithm, NCCL's all-reduce tree: inside each
 * node a chain through its devices, between nodes a double binary tree (two
 * complementary trees, each carrying half the data, so that every node is
 * a leaf of one of them). Reduce up, broadcast down: every device of a
 * chain sends about 2S over NVLink; each node's NICs together send 2S too
 * (each tree carries S/2: as an inner node a node sends S/2 up and S/2 to
 * each of two children, as a leaf S/2 up). n ranks on N nodes, S the full
 * buffer, latencies as NCCL's tuner counts them (src/graph/tuning.cc):
 *
 *   all_reduce: 2 S per device,  2 ((n/N - 1) alpha_intra + floor(log2 N) alpha_inter)
 *
 * at 0.92 of the rate its links allow alone: NCCL's tuner counts 92% of the
 * tree's bus bandwidth for all-reduce (tuning.cc), the cost of its finer
 * pipelining. It needs twice the ring's
 * bandwidth term within a node and about as much between nodes, for
 * logarithmic inter-node latency: it wins for small and medium messages
 * over many nodes. Like NCCL, only all-reduce has a tree. Several members
 * on one device scale its bytes by per_device.
 */
#include "cost/cost_impl.h"

/* NCCL's discount of the tree's bus bandwidth against the ring's. */
#define TREE_EFFICIENCY 0.92

static int
floor_log2(int n)
{
  int depth = 0;
  while ((2LL << depth) <= n)
    depth++;
  return depth;
}

static gboolean
tree_plan(const StCluster *cluster, StCollKind kind, int64_t bytes, const StGroupShape *group,
          StCommPlan *plan)
{
  st_comm_plan_init(plan, "tree", ST_SRC_ALPHA_BETA);
  if (kind != ST_COLL_ALL_REDUCE)
    return FALSE;
  int n = group->ranks, nodes = MAX(group->nodes, 1);
  if (n <= 1)
    return TRUE;
  double s = st_comm_device_bytes(group, bytes);
  StLinkUse use = st_comm_flat_use(group);
  if (nodes > 1)
    /* Each device of a chain forwards both ways over NVLink; a lone device
     * per node sends only through its NIC. */
    use.gpu = group->per_node > 1 ? 1 : 0;
  double intra = 2.0 * (n / nodes - 1), inter = 2.0 * floor_log2(nodes);
  st_comm_plan_add(plan, cluster, group, st_comm_flat_link(group), 2 * s, use, intra, inter);
  StCommPhase *ph = &plan->phases[0];
  ph->bandwidth = ph->cap = TREE_EFFICIENCY * ph->bandwidth;
  return TRUE;
}

const StCommAlgo st_comm_tree = {
  .name = "tree",
  .summary = "NCCL's tree: chains in nodes, a double binary tree between them; all_reduce only",
  .citation = "P. Sanders, J. Speck, J. L. Traff, Two-tree algorithms for full bandwidth "
              "broadcast, reduction and scan, Parallel Computing 35(12), 2009; NCCL 2.4, "
              "src/graph/tuning.cc",
  .plan = tree_plan,
};
