/* test_net.c: the network model on worked examples whose closed form comes
 * first: each collective algorithm's flows, flows sharing links max-min
 * fairly (equal loads on a shared bottleneck, nothing slowed by a link it
 * does not cross), NICs and an oversubscribed fabric, copies, and how a
 * measured collective shares.
 *
 * The unit cluster (tests/data/engine/cluster.json): 2 nodes x 4 GPUs;
 * NVLink ports of B_i = 100 GB/s each way, alpha_i = 1 us; one NIC per GPU
 * of B_e = 10 GB/s each way, alpha_e = 5 us. Every run also checks that no
 * link ever carries more than its capacity (st_test_run). Times in ns.
 */
#include <string.h>

#include "cost/cost.h"
#include "engine/engine.h"
#include "output/output.h"
#include "testutil.h"

#define S 100000000 /* bytes of each collective */

/* |end of (rank, op) - expected| <= 2 ns: finish times round up to whole
 * nanoseconds each time a flow's rate changes. */
static void
assert_end(const StTimeline *t, int rank, uint32_t op, double expected_ns)
{
  int64_t end = st_test_end_of(t, rank, op);
  if (end < expected_ns - 2 || end > expected_ns + 2)
    g_error("rank %d op %u ends at %" G_GINT64_FORMAT " ns, expected %.1f", rank, op, end,
            expected_ns);
}

static StCluster *
cluster_of(const StSchedule *s)
{
  /* The tests change the unit cluster's network before simulating. */
  return (StCluster *)s->cluster;
}

/* ---- one algorithm at a time ------------------------------------------------- */

static void
test_ring_one_node(void)
{
  /* 4 ranks in one node, ring all-reduce: every GPU sends 2(n-1)/n S through
   * its port at B_i: t = 2*3/4*S/B_i + 2*3*alpha_i = 1.5 ms + 6 us. */
  g_autoptr(StTimeline) t = st_test_collective(4, NULL, ST_COLL_ALL_REDUCE, S, "ring");
  for (int r = 0; r < 4; r++)
    g_assert_cmpint(st_test_end_of(t, r, 0), ==, 1506000);
  /* All-gather: (n-1)/n S in n-1 steps: t = 0.75 ms + 3 us. */
  g_autoptr(StTimeline) g = st_test_collective(4, NULL, ST_COLL_ALL_GATHER, S, "ring");
  g_assert_cmpint(st_test_end_of(g, 0, 0), ==, 753000);
}

static void
test_ring_two_nodes(void)
{
  /* 8 ranks on 2 nodes: each node's 3 NVLink hops and one crossing, spread
   * over its 4 NICs. Each GPU sends x; its port carries 3/4 x, each NIC
   * x/4: x = min(4/3 B_i, 4 B_e) = 40 GB/s. Latency: 2*7 steps, 2*1 across
   * nodes: t = 2*7/8*S/(40 GB/s) + 12 alpha_i + 2 alpha_e = 4375 + 22 us. */
  g_autoptr(StTimeline) t = st_test_collective(8, NULL, ST_COLL_ALL_REDUCE, S, "ring");
  g_assert_cmpint(st_test_end_of(t, 0, 0), ==, 4397000);
}

static void
test_tree_two_nodes(void)
{
  /* NCCL's tree, 8 ranks on 2 nodes: chains of 4, a tree of 2 nodes. Every
   * GPU sends 2S over NVLink (x <= B_i), each node's NICs 2S together
   * (x/4 <= B_e), at 0.92 of that: x = 0.92 * 40 GB/s; latency
   * 2((8/2 - 1) alpha_i + log2(2) alpha_e) = 16 us:
   * t = 2S/(36.8 GB/s) + 16 us = 5434.783 + 16 us. */
  g_autoptr(StTimeline) t = st_test_collective(8, NULL, ST_COLL_ALL_REDUCE, S, "tree");
  assert_end(t, 0, 0, 2.0 * S / 36.8e9 * 1e9 + 16000);
}

static void
test_hierarchical_two_nodes(void)
{
  /* 8 ranks on 2 nodes x 4 GPUs. Intra reduce-scatter 3/4*S/B_i + 3 alpha_i,
   * inter ring all-reduce of S/4 per GPU through its own NIC:
   * 2*1/2*(S/4)/B_e + 2 alpha_e, intra all-gather like the reduce-scatter:
   * t = 0.75 ms + 3 us + 2.5 ms + 10 us + 0.75 ms + 3 us = 4016 us. */
  g_autoptr(StTimeline) t = st_test_collective(8, NULL, ST_COLL_ALL_REDUCE, S, "hierarchical");
  for (int r = 0; r < 8; r++)
    g_assert_cmpint(st_test_end_of(t, r, 0), ==, 4016000);
  /* Auto takes it: the ring needs 4397 us, the tree 5451 us. */
  g_autoptr(StTimeline) a = st_test_collective(8, NULL, ST_COLL_ALL_REDUCE, S, "auto");
  g_assert_cmpint(st_test_end_of(a, 0, 0), ==, 4016000);
}

static void
test_p2p_inter_node(void)
{
  /* Rank 0 (node 0) sends S to rank 1 on GPU 4 (node 1): out of NIC 0, into
   * NIC 4, at B_e after alpha_e: t = 10 ms + 5 us. Send and receive end
   * together. */
  int32_t placement[] = {0, 4};
  g_autoptr(StSchedule) s = st_test_unit_schedule(2, placement);
  int world = st_schedule_add_world(s, "world");
  st_test_add(st_test_program_for(s, 0, 1), st_op_send(0, world, 1, 0, S));
  st_test_add(st_test_program_for(s, 1, 1), st_op_recv(0, world, 0, 0, S));
  g_autoptr(StTimeline) t = st_test_run(s, NULL, FALSE);
  g_assert_cmpint(st_test_end_of(t, 0, 0), ==, 10005000);
  g_assert_cmpint(st_test_end_of(t, 1, 0), ==, 10005000);
}

/* ---- sharing ------------------------------------------------------------------- */

/* Every rank of `comm` runs `n` all-reduces of S at once, one per stream. */
static StSchedule *
concurrent_all_reduces(int n_ranks, int n)
{
  StSchedule *s = st_test_unit_schedule(n_ranks, NULL);
  StProgram *p = st_program_new("many");
  for (int i = 0; i < n; i++) {
    g_autofree char *name = g_strdup_printf("c%d", i);
    int comm = st_schedule_add_world(s, name);
    st_program_add_stream(p, name, 0);
    st_test_add(p, st_op_coll(i, ST_COLL_ALL_REDUCE, comm, S));
  }
  int prog = st_schedule_add_program(s, p);
  for (int r = 0; r < n_ranks; r++)
    s->ranks[r].program = prog;
  return s;
}

static void
test_two_equal_all_reduces(void)
{
  /* Two equal ring all-reduces on the same 4 GPUs, started together: their
   * latencies overlap, their bytes share every port equally, so each takes
   * twice as long on the wire as alone: alone 2*3/4*S/B_i + 6 us = 1506 us,
   * together 2 * 1500 + 6 us = 3006 us. */
  g_autoptr(StSchedule) one = concurrent_all_reduces(4, 1);
  g_autoptr(StTimeline) t1 = st_test_run(one, "ring", TRUE);
  g_assert_cmpint(st_test_end_of(t1, 0, 0), ==, 1506000);
  g_autoptr(StSchedule) two = concurrent_all_reduces(4, 2);
  g_autoptr(StTimeline) t2 = st_test_run(two, "ring", TRUE);
  for (int r = 0; r < 4; r++)
    for (uint32_t op = 0; op < 2; op++)
      g_assert_cmpint(st_test_end_of(t2, r, op), ==, 3006000);
  g_assert_cmpint(st_test_end_of(t2, 0, 0) - 6000, ==, 2 * (st_test_end_of(t1, 0, 0) - 6000));
  /* Folded (one GPU stands for the four), the same. */
  g_autoptr(StTimeline) f = st_test_run(two, "ring", FALSE);
  g_assert_cmpint(st_test_end_of(f, 0, 1), ==, 3006000);
}

static void
test_all_reduce_beside_p2p(void)
{
  /* (a) A ring all-reduce over GPUs 0-3 (node 0: NVLink ports only) beside a
   * transfer from GPU 4 to GPU 0 (NIC 4 out, NIC 0 in): they share no link,
   * so each takes exactly its time alone: 1506 us and 5 us + 1e7/B_e =
   * 1005 us. */
  {
    int32_t placement[] = {0, 1, 2, 3, 4, 0};
    g_autoptr(StSchedule) s = st_test_unit_schedule(6, placement);
    int32_t color[] = {0, 0, 0, 0, -1, -1};
    int coll = st_schedule_add_comm(s, "coll", color);
    int world = st_schedule_add_world(s, "world");
    StProgram *p = st_program_new("coll");
    st_program_add_stream(p, "comm", 0);
    st_test_add(p, st_op_coll(0, ST_COLL_ALL_REDUCE, coll, S));
    int prog = st_schedule_add_program(s, p);
    for (int r = 0; r < 4; r++)
      s->ranks[r].program = prog;
    st_test_add(st_test_program_for(s, 4, 1), st_op_send(0, world, 5, 0, 10000000));
    st_test_add(st_test_program_for(s, 5, 1), st_op_recv(0, world, 4, 0, 10000000));
    g_autoptr(StTimeline) t = st_test_run(s, "ring", TRUE);
    g_assert_cmpint(st_test_end_of(t, 0, 0), ==, 1506000);
    g_assert_cmpint(st_test_end_of(t, 4, 0), ==, 1005000);
  }
  /* (b) The ring over all 8 GPUs (alone: x = 40 GB/s, 4397 us; each NIC
   * carries x/4) beside a transfer of P = 1e7 from GPU 0 to GPU 4, which
   * shares NIC 0 out and NIC 4 in with it. The transfer runs alone from
   * alpha_e = 5 us at B_e; at 22 us the ring's bytes start and the two split
   * those NICs equally: x/4 = p = B_e/2, so x = 20 GB/s (the ring's other
   * links allow 40) and p = 5 GB/s. The transfer ends at
   * 22 + (P - 17 us * B_e) / (B_e/2) = 1988 us; then the ring, with
   * 1.75e8 - 1966 us * 20 GB/s = 1.3568e8 bytes left per GPU, ends at
   * 1988 + 1.3568e8 / (40 GB/s) = 5380 us: slowed by the links it shares,
   * for as long as it shares them. */
  {
    int32_t placement[] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 4};
    g_autoptr(StSchedule) s = st_test_unit_schedule(10, placement);
    int32_t color[] = {0, 0, 0, 0, 0, 0, 0, 0, -1, -1};
    int coll = st_schedule_add_comm(s, "coll", color);
    int world = st_schedule_add_world(s, "world");
    StProgram *p = st_program_new("coll");
    st_program_add_stream(p, "comm", 0);
    st_test_add(p, st_op_coll(0, ST_COLL_ALL_REDUCE, coll, S));
    int prog = st_schedule_add_program(s, p);
    for (int r = 0; r < 8; r++)
      s->ranks[r].program = prog;
    st_test_add(st_test_program_for(s, 8, 1), st_op_send(0, world, 9, 0, 10000000));
    st_test_add(st_test_program_for(s, 9, 1), st_op_recv(0, world, 8, 0, 10000000));
    g_autoptr(StTimeline) t = st_test_run(s, "ring", TRUE);
    assert_end(t, 8, 0, 1988000);
    assert_end(t, 0, 0, 5380000);
  }
}

/* n ranks on GPUs 0 .. n-1 of node 0 each send `bytes` to a rank on GPU
 * 4 + i of node 1, all at once. */
static StSchedule *
cross_node_sends(int n, int64_t bytes)
{
  int32_t placement[8];
  for (int i = 0; i < n; i++) {
    placement[i] = i;
    placement[n + i] = 4 + i;
  }
  StSchedule *s = st_test_unit_schedule(2 * n, placement);
  int world = st_schedule_add_world(s, "world");
  for (int i = 0; i < n; i++) {
    st_test_add(st_test_program_for(s, i, 1), st_op_send(0, world, n + i, 0, bytes));
    st_test_add(st_test_program_for(s, n + i, 1), st_op_recv(0, world, i, 0, bytes));
  }
  return s;
}

static void
test_nics(void)
{
  /* 4 transfers of 1e8 from node 0 to node 1. One NIC per GPU: each runs
   * alone at B_e, t = 5 us + 10 ms. Two NICs per node (GPUs 0-1 on the
   * first, 2-3 on the second): two transfers per NIC, t = 5 us + 20 ms. */
  g_autoptr(StSchedule) own = cross_node_sends(4, S);
  g_autoptr(StTimeline) a = st_test_run(own, NULL, TRUE);
  for (int i = 0; i < 4; i++)
    g_assert_cmpint(st_test_end_of(a, i, 0), ==, 10005000);
  g_autoptr(StSchedule) shared = cross_node_sends(4, S);
  cluster_of(shared)->fabric.nics = 2;
  g_autoptr(StTimeline) b = st_test_run(shared, NULL, TRUE);
  for (int i = 0; i < 4; i++)
    g_assert_cmpint(st_test_end_of(b, i, 0), ==, 20005000);
}

static void
test_fabric(void)
{
  /* One node per leaf switch, uplinks oversubscribed 2:1: node 0's uplink
   * carries 4 NICs x B_e / 2 = 20 GB/s, so the 4 transfers of test_nics get
   * 5 GB/s each: t = 5 us + 20 ms. Within a leaf (2 nodes per leaf) the
   * core is never crossed: 10 ms as with a non-blocking fabric. */
  g_autoptr(StSchedule) s = cross_node_sends(4, S);
  cluster_of(s)->fabric.oversubscription = 2;
  g_autoptr(StTimeline) t = st_test_run(s, NULL, TRUE);
  for (int i = 0; i < 4; i++)
    g_assert_cmpint(st_test_end_of(t, i, 0), ==, 20005000);
  g_autoptr(StSchedule) leaf = cross_node_sends(4, S);
  cluster_of(leaf)->fabric.oversubscription = 2;
  cluster_of(leaf)->fabric.leaf_nodes = 2;
  g_autoptr(StTimeline) u = st_test_run(leaf, NULL, TRUE);
  g_assert_cmpint(st_test_end_of(u, 0, 0), ==, 10005000);
}

static void
test_copies(void)
{
  /* A PCIe host link of 20 GB/s each way, 1 us. On one GPU, two host-to-
   * device copies of 1e8 share its down direction: each 1 us + 10 ms; a
   * device-to-host copy beside one goes up, alone: 1 us + 5 ms. */
  g_autoptr(StSchedule) s = st_test_unit_schedule(1, NULL);
  StCluster *c = cluster_of(s);
  c->links[ST_LINK_PCIE] = (StLink){TRUE, 20e9, 1000, ST_TOPO_SWITCH};
  StProgram *p = st_test_program_for(s, 0, 3);
  st_test_add(p, st_op_copy(0, ST_COPY_H2D, S));
  st_test_add(p, st_op_copy(1, ST_COPY_H2D, S));
  g_autoptr(StTimeline) t = st_test_run(s, NULL, FALSE);
  g_assert_cmpint(st_test_end_of(t, 0, 0), ==, 10001000);
  g_assert_cmpint(st_test_end_of(t, 0, 1), ==, 10001000);

  g_autoptr(StSchedule) u = st_test_unit_schedule(1, NULL);
  cluster_of(u)->links[ST_LINK_PCIE] = (StLink){TRUE, 20e9, 1000, ST_TOPO_SWITCH};
  p = st_test_program_for(u, 0, 2);
  st_test_add(p, st_op_copy(0, ST_COPY_H2D, S));
  st_test_add(p, st_op_copy(1, ST_COPY_D2H, S));
  g_autoptr(StTimeline) v = st_test_run(u, NULL, FALSE);
  g_assert_cmpint(st_test_end_of(v, 0, 0), ==, 5001000);
  g_assert_cmpint(st_test_end_of(v, 0, 1), ==, 5001000);
}

static void
test_link_profile_shares(void)
{
  /* A measured 4-rank intra-node all-reduce of S: 2 ms, i.e. the ring's
   * 1.5e8 wire bytes at 75 GB/s, below the 100 GB/s ports allow. Alone it
   * takes its measured 2 ms. Two at once share the ports: 50 GB/s each,
   * 1.5e8 / 50 GB/s = 3 ms. With a measurement of 4 ms (37.5 GB/s, under
   * half the ports) two at once do not slow each other: 4 ms each. */
  for (int k = 0; k < 2; k++) {
    double measured = k == 0 ? 2e6 : 4e6;
    g_autoptr(StProfile) prof = st_profile_new();
    st_profile_add_link(prof, "UNIT", ST_COLL_ALL_REDUCE, ST_LINK_INTRA_NODE, 4, S, measured);
    for (int n = 1; n <= 2; n++) {
      g_autoptr(StSchedule) s = concurrent_all_reduces(4, n);
      g_autoptr(GError) error = NULL;
      StEngineOptions o = {prof, "auto", NULL, TRUE, NULL};
      g_autoptr(StTimeline) t = st_simulate(s, &o, NULL, &error);
      g_assert_no_error(error);
      st_test_assert_links(t);
      double expected = n == 1 || k == 1 ? measured : 1.5e8 / 50e9 * 1e9;
      assert_end(t, 0, n - 1, expected);
    }
  }
}

/* ---- the record ------------------------------------------------------------------ */

static void
test_trace(void)
{
  /* The ring of test_ring_one_node: 4 GPUs, folded into GPU 0, whose out
   * port stands for the 4 out ports. The class rates sum every GPU's out
   * port: 4 x 100 GB/s while the bytes move; in the summary the bytes sent
   * are 4 x 1.5e8. */
  StSchedule *s = st_test_unit_schedule(4, NULL);
  int world = st_schedule_add_world(s, "world");
  StProgram *p = st_program_new("coll");
  st_program_add_stream(p, "comm", 0);
  st_test_add(p, st_op_coll(0, ST_COLL_ALL_REDUCE, world, S));
  int prog = st_schedule_add_program(s, p);
  for (int r = 0; r < 4; r++)
    s->ranks[r].program = prog;
  g_autoptr(StTimeline) t = st_test_run(s, "ring", FALSE);
  const StNetTrace *net = t->net;
  g_assert_cmpuint(net->links->len, ==, 2);
  const StNetLink *out = &g_array_index(net->links, StNetLink, 0);
  g_assert_cmpstr(out->name, ==, "gpu0 out");
  g_assert_cmpint(out->stands_for, ==, 4);
  g_assert_true(out->sends);
  g_assert_cmpfloat(out->capacity, ==, 100e9);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_cmpfloat_with_epsilon(sum->comm_bytes_total, 4 * 1.5e8, 1);
  g_assert_cmpfloat_with_epsilon(sum->comm_bytes_by_link[ST_LINK_INTRA_NODE], 4 * 1.5e8, 1);
  g_autofree StNetLinkStats *stats = st_net_trace_link_stats(net, 0, t->end_ns);
  g_assert_cmpfloat_with_epsilon(stats[0].bytes, 1.5e8, 1);
  g_assert_cmpfloat_with_epsilon(stats[0].peak, 100e9, 1);
  g_assert_cmpint(stats[0].busy_ns, ==, 1500000);
  g_assert_cmpfloat_with_epsilon(stats[0].utilization, 1500.0 / 1506, 1e-9);
  st_schedule_free(s);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/net/ring/one-node", test_ring_one_node);
  g_test_add_func("/net/ring/two-nodes", test_ring_two_nodes);
  g_test_add_func("/net/tree/two-nodes", test_tree_two_nodes);
  g_test_add_func("/net/hierarchical/two-nodes", test_hierarchical_two_nodes);
  g_test_add_func("/net/p2p/inter-node", test_p2p_inter_node);
  g_test_add_func("/net/share/two-equal-all-reduces", test_two_equal_all_reduces);
  g_test_add_func("/net/share/all-reduce-beside-p2p", test_all_reduce_beside_p2p);
  g_test_add_func("/net/nics", test_nics);
  g_test_add_func("/net/fabric", test_fabric);
  g_test_add_func("/net/copies", test_copies);
  g_test_add_func("/net/link-profile-shares", test_link_profile_shares);
  g_test_add_func("/net/trace", test_trace);
  return g_test_run();
}
