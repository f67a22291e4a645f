/* test_cost.c: worked examples of the cost models. Each comment states the
 * closed form first; the assertion checks the model against it.
 *
 * The cluster is the shipped dgx-h100 (models/clusters/dgx-h100.json):
 *   intra-node B_i = 450 GB/s, alpha_i = 2 us; inter-node B_e = 50 GB/s,
 *   alpha_e = 5 us; HBM 3.35 TB/s; 67 TFLOP/s fp32, 989 TFLOP/s bf16.
 * Times in ns.
 */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "cluster/cluster.h"
#include "cost/cost.h"
#include "profile/profile.h"
#include "testutil.h"

#define B_I 450e9
#define ALPHA_I 2000.0
#define B_E 50e9
#define ALPHA_E 5000.0
/* The shares of those rates NCCL's collectives reach (models/gpus/h100-sxm.json,
 * nccl_bus: nccl-tests' bus bandwidth): rings within a node, across nodes;
 * an all-reduce on one node runs at the links' rate (NVLS beats them). */
#define BUS_I 0.80
#define BUS_E 0.94
#define RI (BUS_I * B_I)
#define RE (BUS_E * B_E)
#define HBM 3.35e12
#define MIB 1048576.0

static StCluster *
h100(int nodes)
{
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  StCluster *c = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(c, nodes, 0, &error));
  return c;
}

/* The shape of ranks 0..n-1 placed on GPUs gpus[i]. */
static StGroupShape
shape_of(const StCluster *c, const int32_t *gpus, int n)
{
  StGroupShape s;
  st_cluster_group_shape(c, gpus, n, &s);
  return s;
}

static StGroupShape
first_gpus(const StCluster *c, int n)
{
  int32_t gpus[64];
  g_assert_cmpint(n, <=, 64);
  for (int i = 0; i < n; i++)
    gpus[i] = i;
  return shape_of(c, gpus, n);
}

static StCommPlan
plan_ok(const StCluster *c, const StProfile *p, const char *algo, StCollKind kind, int64_t bytes,
        const StGroupShape *g)
{
  StCommPlan plan;
  g_autoptr(GError) error = NULL;
  g_assert_true(st_comm_plan_collective(c, p, algo, kind, bytes, g, &plan, &error));
  g_assert_no_error(error);
  return plan;
}

/* ---- ring ---------------------------------------------------------------- */

static void
test_ring(void)
{
  g_autoptr(StCluster) c = h100(1);
  StGroupShape g = first_gpus(c, 8);
  const double s = 256 * MIB;

  /* 8 ranks, ring all-reduce of S bytes at B bytes/s: t = 2*7/8*S/B + 14*alpha. */
  StCommPlan plan = plan_ok(c, NULL, "ring", ST_COLL_ALL_REDUCE, (int64_t)s, &g);
  g_assert_cmpstr(plan.algo, ==, "ring");
  g_assert_cmpint(plan.source, ==, ST_SRC_ALPHA_BETA);
  g_assert_cmpint(plan.n_phases, ==, 1);
  g_assert_cmpint(plan.phases[0].link, ==, ST_LINK_INTRA_NODE);
  g_assert_cmpfloat_with_epsilon(plan.phases[0].bytes, 2.0 * 7 / 8 * s, 1e-6);
  g_assert_cmpint(plan.phases[0].latency_ns, ==, 14 * 2000);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), 2.0 * 7 / 8 * s / B_I * 1e9 + 14 * ALPHA_I,
                                 1e-3);

  /* Reduce-scatter and all-gather: t = 7/8*S/B + 7*alpha. */
  plan = plan_ok(c, NULL, "ring", ST_COLL_REDUCE_SCATTER, (int64_t)s, &g);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), 7.0 / 8 * s / RI * 1e9 + 7 * ALPHA_I,
                                 1e-3);
  plan = plan_ok(c, NULL, "ring", ST_COLL_ALL_GATHER, (int64_t)s, &g);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), 7.0 / 8 * s / RI * 1e9 + 7 * ALPHA_I,
                                 1e-3);
  /* Pipelined broadcast and reduce: t = S/B + 7*alpha. */
  plan = plan_ok(c, NULL, "ring", ST_COLL_BROADCAST, (int64_t)s, &g);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), s / RI * 1e9 + 7 * ALPHA_I, 1e-3);
  plan = plan_ok(c, NULL, "ring", ST_COLL_REDUCE, (int64_t)s, &g);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), s / RI * 1e9 + 7 * ALPHA_I, 1e-3);

  /* One rank: nothing to move, t = 0 with no phases. */
  StGroupShape one = first_gpus(c, 1);
  plan = plan_ok(c, NULL, "auto", ST_COLL_ALL_REDUCE, (int64_t)s, &one);
  g_assert_cmpint(plan.n_phases, ==, 0);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), 0, 1e-12);
}

/* All-to-all (MoE dispatch and combine) as NCCL runs it: every device
 * sends S/n to each of its n-1 peers at once (nccl-tests' alltoall: busbw =
 * algbw (n-1)/n).
 * 8 ranks in a node: t = 7/8 S/B_i + alpha_i (one step of latency).
 * 16 ranks on 2 nodes: of each device's 15/16 S, 7/16 S stays on NVLink and
 * 8/16 S leaves through its own NIC, which binds: t = S/2 / B_e + alpha_e.
 * Tree and hierarchical do not apply; auto takes the pairwise exchange. */
static void
test_all_to_all(void)
{
  g_autoptr(StCluster) c = h100(2);
  const double s = 64 * MIB;
  StGroupShape node = first_gpus(c, 8);
  StCommPlan plan = plan_ok(c, NULL, "auto", ST_COLL_ALL_TO_ALL, (int64_t)s, &node);
  g_assert_cmpstr(plan.algo, ==, "ring");
  g_assert_cmpint(plan.n_phases, ==, 1);
  g_assert_cmpfloat_with_epsilon(plan.phases[0].bytes, 7.0 / 8 * s, 1e-6);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), 7.0 / 8 * s / RI * 1e9 + ALPHA_I, 1e-3);

  StGroupShape two = first_gpus(c, 16);
  plan = plan_ok(c, NULL, "auto", ST_COLL_ALL_TO_ALL, (int64_t)s, &two);
  g_assert_cmpint(plan.phases[0].link, ==, ST_LINK_INTER_NODE);
  g_assert_cmpfloat_with_epsilon(plan.phases[0].use.nic_dev, 8.0 / 15, 1e-12);
  g_assert_cmpfloat_with_epsilon(plan.phases[0].use.gpu, 7.0 / 15, 1e-12);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), s / 2 / RE * 1e9 + ALPHA_E, 1e-3);

  StCommPlan none;
  g_autoptr(GError) error = NULL;
  g_assert_false(st_comm_plan_collective(c, NULL, "tree", ST_COLL_ALL_TO_ALL, (int64_t)s, &two,
                                         &none, &error));
  g_assert_error(error, ST_COST_ERROR, ST_ERROR_UNSUPPORTED);
  g_clear_error(&error);
  g_assert_false(st_comm_plan_collective(c, NULL, "hierarchical", ST_COLL_ALL_TO_ALL,
                                         (int64_t)s, &two, &none, &error));
  g_assert_error(error, ST_COST_ERROR, ST_ERROR_UNSUPPORTED);
  g_assert_cmpfloat_with_epsilon(st_coll_busbw_factor(ST_COLL_ALL_TO_ALL, 16), 15.0 / 16, 1e-12);
  g_assert_cmpstr(st_coll_name(ST_COLL_ALL_TO_ALL), ==, "all_to_all");
}

/* A flat ring over N nodes of g GPUs: each node's g - 1 hops ride NVLink
 * and one crosses nodes, NCCL's rings spreading those crossings over the
 * node's NICs. Each GPU sends x, its NVLink ports carry (g-1)/g x, each
 * node's NICs together x: x = min(B_i g/(g-1), nics B_e). Latency per
 * NCCL's tuner: 2(n-1) steps of which 2(N-1) cross nodes. */
static void
test_ring_across_nodes(void)
{
  g_autoptr(StCluster) c = h100(2);
  StGroupShape g = first_gpus(c, 16);
  const double s = 64 * MIB;
  /* 16 ranks on 2 nodes, 8 NICs each: x = min(450*8/7, 8*50) = 400 GB/s,
   * t = 2*15/16*S/(8 B_e) + 28 alpha_i + 2 alpha_e. */
  StCommPlan plan = plan_ok(c, NULL, "ring", ST_COLL_ALL_REDUCE, (int64_t)s, &g);
  g_assert_cmpint(plan.phases[0].link, ==, ST_LINK_INTER_NODE);
  g_assert_cmpfloat_with_epsilon(plan.phases[0].bandwidth, 8 * RE, 1e-3);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan),
                                 2.0 * 15 / 16 * s / (8 * RE) * 1e9 + 28 * ALPHA_I + 2 * ALPHA_E,
                                 1e-3);
  /* With 2 NICs per node the NICs bind at x = 2 B_e. */
  c->fabric.nics = 2;
  g = first_gpus(c, 16);
  plan = plan_ok(c, NULL, "ring", ST_COLL_ALL_REDUCE, (int64_t)s, &g);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan),
                                 2.0 * 15 / 16 * s / (2 * RE) * 1e9 + 28 * ALPHA_I + 2 * ALPHA_E,
                                 1e-3);
  /* One GPU per node (GPUs 0 and 8): no NVLink hop, the NIC carries all of
   * it: t = 2*1/2*S/B_e + 2 alpha_e. */
  c->fabric.nics = 8;
  const int32_t pair[] = {0, 8};
  StGroupShape two = shape_of(c, pair, 2);
  plan = plan_ok(c, NULL, "ring", ST_COLL_ALL_REDUCE, (int64_t)s, &two);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), s / RE * 1e9 + 2 * ALPHA_E, 1e-3);
}

/* 16 ranks on Summit (6 GPUs and 2 NICs of B_e = 12.5 GB/s per node, NVLink
 * 50 GB/s, alpha_i 2 us, alpha_e 5 us), ring all-reduce of S. The first 16
 * GPUs (nodes of 6, 6, 4): on the last node NIC 0 serves 3 of its 4 GPUs and
 * carries 3/4 of the node's ring: x = min(50/(5/6), B_e/(3/4)) = 4/3 B_e,
 * t = 2*15/16*S/(4/3 B_e) + 26 alpha_i + 4 alpha_e. With --gpus-per-node 4
 * on 4 nodes each NIC serves 2 of 4: x = min(50/(3/4), B_e/(1/2)) = 2 B_e,
 * t = 2*15/16*S/(2 B_e) + 24 alpha_i + 6 alpha_e, as a full node's ring. */
static void
test_ring_gpus_per_node(void)
{
  const double b_e = 12.5e9, s = 200e6;
  g_autofree char *path = st_test_src("models/clusters/summit.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) first = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(first, 3, 16, &error));
  StGroupShape g = first_gpus(first, 16);
  StCommPlan plan = plan_ok(first, NULL, "ring", ST_COLL_ALL_REDUCE, (int64_t)s, &g);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan),
                                 2.0 * 15 / 16 * s / (4.0 / 3 * b_e) * 1e9 + 26 * ALPHA_I +
                                   4 * ALPHA_E,
                                 1e-3);
  g_autoptr(StCluster) spread = st_cluster_load(path, &error);
  g_assert_true(st_cluster_keep_gpus_per_node(spread, 4, &error));
  g_assert_true(st_cluster_resize(spread, 4, 0, &error));
  g_assert_no_error(error);
  g = first_gpus(spread, 16);
  plan = plan_ok(spread, NULL, "ring", ST_COLL_ALL_REDUCE, (int64_t)s, &g);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan),
                                 2.0 * 15 / 16 * s / (2 * b_e) * 1e9 + 24 * ALPHA_I + 6 * ALPHA_E,
                                 1e-3);
}

/* Several ranks on one device: the device sends for each of them, over its
 * own memory. 4 ranks on GPU 0, ring all-reduce:
 * t = 4 * 2*3/4*S / (HBM/2) + 0 (LOCAL has no latency). */
static void
test_shared_device(void)
{
  g_autoptr(StCluster) c = h100(1);
  const int32_t gpus[] = {0, 0, 0, 0, 0, 0};
  StGroupShape g = shape_of(c, gpus, 4);
  const double s = 16 * MIB;
  StCommPlan plan = plan_ok(c, NULL, "ring", ST_COLL_ALL_REDUCE, (int64_t)s, &g);
  g_assert_cmpint(plan.phases[0].link, ==, ST_LINK_LOCAL);
  g_assert_cmpint(plan.phases[0].latency_ns, ==, 0);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), 4 * 2.0 * 3 / 4 * s / (HBM / 2) * 1e9,
                                 1e-3);
}

/* NCCL's collectives reach a share of the links' rate (the GPU files'
 * nccl_bus), checked against the nccl-tests figures it comes from: on 8
 * A100s a 16 GiB ring all-reduce at 234.9 GB/s bus bandwidth (S. Bekman,
 * ml-engineering, network/README.md); on 8 H100-class GPUs an all-gather
 * at 361.4 GB/s and an all-reduce at the links' 450 (NVLS measured 480,
 * above the links, which cap it); across 2 H100 nodes 46-48 GB/s per NIC
 * (NVIDIA/nccl-tests issue #290). busbw = algbw x 2(n-1)/n (all-reduce),
 * (n-1)/n (all-gather), per nccl-tests' PERFORMANCE.md. */
static double
busbw(const StCluster *c, StCollKind kind, int n, double s)
{
  StGroupShape g = first_gpus(c, n);
  StCommPlan plan = plan_ok(c, NULL, "ring", kind, (int64_t)s, &g);
  double factor = (kind == ST_COLL_ALL_REDUCE ? 2.0 : 1.0) * (n - 1) / n;
  return s / (st_comm_plan_ns(&plan) / 1e9) * factor;
}

static void
test_nccl_bus(void)
{
  const double s = 16.0 * 1024 * MIB;
  g_autofree char *path = st_test_src("models/clusters/dgx-a100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) a100 = st_cluster_load(path, &error);
  g_assert_no_error(error);
  double a = busbw(a100, ST_COLL_ALL_REDUCE, 8, s);
  g_test_message("A100 all-reduce busbw %.1f GB/s (nccl-tests 234.9)", a / 1e9);
  g_assert_cmpfloat(fabs(a / 234.9e9 - 1), <, 0.01);
  g_autoptr(StCluster) h = h100(2);
  double ag = busbw(h, ST_COLL_ALL_GATHER, 8, s), ar = busbw(h, ST_COLL_ALL_REDUCE, 8, s);
  g_test_message("H100 all-gather %.1f, all-reduce %.1f GB/s", ag / 1e9, ar / 1e9);
  g_assert_cmpfloat(fabs(ag / 361.4e9 - 1), <, 0.01);
  g_assert_cmpfloat(fabs(ar / 450e9 - 1), <, 0.01);
  /* 2 nodes: a device's ring rate is its node's 8 NICs' (test_ring_across_nodes),
   * so the bus bandwidth over 8 is one NIC's: 46-48 GB/s. */
  double two = busbw(h, ST_COLL_ALL_REDUCE, 16, s) / 8;
  g_test_message("2 x H100 nodes: %.1f GB/s per NIC", two / 1e9);
  g_assert_cmpfloat(two, >=, 46e9);
  g_assert_cmpfloat(two, <=, 48e9);
}

/* ---- tree ---------------------------------------------------------------- */

static void
test_tree(void)
{
  g_autoptr(StCluster) c = h100(1);
  StGroupShape g = first_gpus(c, 8);
  const double s = 4 * MIB;
  /* 8 ranks in one node: a chain, every GPU sends 2S at 0.92 of its port,
   * t = 2*S/(0.92 B_i) + 2*(8-1)*alpha_i. */
  StCommPlan plan = plan_ok(c, NULL, "tree", ST_COLL_ALL_REDUCE, (int64_t)s, &g);
  g_assert_cmpstr(plan.algo, ==, "tree");
  g_assert_cmpint(plan.n_phases, ==, 1);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), 2 * s / (0.92 * B_I) * 1e9 + 14 * ALPHA_I,
                                 1e-3);
  /* 4 nodes x 8 GPUs: chains of 8, a double binary tree over 4 nodes; each
   * node's 8 NICs carry 2S as each GPU sends 2S: x = 0.92 min(B_i, 8 B_e),
   * t = 2*S/(0.92*400 GB/s) + 2*((32/4 - 1) alpha_i + log2(4) alpha_e). */
  g_autoptr(StCluster) c4 = h100(4);
  StGroupShape g4 = first_gpus(c4, 32);
  plan = plan_ok(c4, NULL, "tree", ST_COLL_ALL_REDUCE, (int64_t)s, &g4);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan),
                                 2 * s / (0.92 * 8 * RE) * 1e9 + 2 * (7 * ALPHA_I + 2 * ALPHA_E),
                                 1e-3);

  /* Only all-reduce: the algorithm declines the others, a forced name is an error. */
  g_assert_false(st_comm_algo_find("tree")->plan(c, ST_COLL_ALL_GATHER, (int64_t)s, &g, &plan));
  g_assert_false(st_comm_algo_find("tree")->plan(c, ST_COLL_BROADCAST, (int64_t)s, &g, &plan));
  g_autoptr(GError) error = NULL;
  g_assert_false(st_comm_plan_collective(c, NULL, "tree", ST_COLL_ALL_GATHER, (int64_t)s, &g,
                                         &plan, &error));
  g_assert_error(error, ST_COST_ERROR, ST_ERROR_UNSUPPORTED);
  g_assert_nonnull(strstr(error->message, "'tree'"));
  g_assert_nonnull(strstr(error->message, "all_gather"));
}

/* ---- hierarchical -------------------------------------------------------- */

static void
test_hierarchical(void)
{
  g_autoptr(StCluster) c = h100(2);
  StGroupShape g = first_gpus(c, 16);
  const double s = 1024 * MIB;
  /* 2 nodes x 8 GPUs (g = 8, N = 2), all-reduce in three phases:
   *   intra reduce-scatter  7/8*S/B_i + 7 alpha_i
   *   inter all-reduce      2*1/2*(S/8)/B_e + 2 alpha_e
   *   intra all-gather      7/8*S/B_i + 7 alpha_i
   * t = 2*(7/8*S/B_i + 7 alpha_i) + S/8/B_e + 2 alpha_e. */
  StCommPlan plan = plan_ok(c, NULL, "hierarchical", ST_COLL_ALL_REDUCE, (int64_t)s, &g);
  g_assert_cmpstr(plan.algo, ==, "hierarchical");
  g_assert_cmpint(plan.n_phases, ==, 3);
  g_assert_cmpint(plan.phases[0].link, ==, ST_LINK_INTRA_NODE);
  g_assert_cmpint(plan.phases[1].link, ==, ST_LINK_INTER_NODE);
  g_assert_cmpint(plan.phases[2].link, ==, ST_LINK_INTRA_NODE);
  g_assert_cmpfloat_with_epsilon(plan.phases[1].bytes, s / 8, 1e-6);
  double expected = 2 * (7.0 / 8 * s / RI * 1e9 + 7 * ALPHA_I) + s / 8 / RE * 1e9 + 2 * ALPHA_E;
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), expected, 1e-3);
  /* The flat ring moves 2*15/16*S at 8 B_e = 400 GB/s (its node crossings
   * spread over 8 NICs): 5.0 ms against 6.9 ms, so auto takes the ring. */
  plan = plan_ok(c, NULL, "auto", ST_COLL_ALL_REDUCE, (int64_t)s, &g);
  g_assert_cmpstr(plan.algo, ==, "ring");
  /* With one NIC per node the ring gets x = B_e (t = 2*15/16*S/B_e = 40 ms)
   * while each GPU's shard ring shares the NIC 8 ways, S/8/(B_e/8) = 21 ms
   * (+ 4.2 ms in the node): auto takes the hierarchical one. */
  c->fabric.nics = 1;
  StGroupShape g1 = first_gpus(c, 16);
  plan = plan_ok(c, NULL, "auto", ST_COLL_ALL_REDUCE, (int64_t)s, &g1);
  g_assert_cmpstr(plan.algo, ==, "hierarchical");
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan),
                                 2 * (7.0 / 8 * s / RI * 1e9 + 7 * ALPHA_I) + s / RE * 1e9 +
                                   2 * ALPHA_E,
                                 1e-3);
  c->fabric.nics = 8;

  /* Reduce-scatter: t = 7/8*S/B_i + 7 alpha_i + 1/2*(S/8)/B_e + alpha_e. */
  plan = plan_ok(c, NULL, "hierarchical", ST_COLL_REDUCE_SCATTER, (int64_t)s, &g);
  g_assert_cmpint(plan.n_phases, ==, 2);
  g_assert_cmpfloat_with_epsilon(
    st_comm_plan_ns(&plan), 7.0 / 8 * s / RI * 1e9 + 7 * ALPHA_I + s / 16 / RE * 1e9 + ALPHA_E,
    1e-3);
  /* All-gather: the same two terms, inter-node first. */
  plan = plan_ok(c, NULL, "hierarchical", ST_COLL_ALL_GATHER, (int64_t)s, &g);
  g_assert_cmpint(plan.phases[0].link, ==, ST_LINK_INTER_NODE);
  g_assert_cmpfloat_with_epsilon(
    st_comm_plan_ns(&plan), 7.0 / 8 * s / RI * 1e9 + 7 * ALPHA_I + s / 16 / RE * 1e9 + ALPHA_E,
    1e-3);

  /* Inside one node, or with unequal GPUs per node, it does not apply. */
  StGroupShape one_node = first_gpus(c, 8);
  g_autoptr(GError) error = NULL;
  g_assert_false(st_comm_plan_collective(c, NULL, "hierarchical", ST_COLL_ALL_REDUCE,
                                         (int64_t)s, &one_node, &plan, &error));
  g_assert_error(error, ST_COST_ERROR, ST_ERROR_UNSUPPORTED);
  g_assert_nonnull(strstr(error->message, "'hierarchical'"));
  const int32_t uneven[] = {0, 1, 2, 8};
  StGroupShape u = shape_of(c, uneven, 4);
  g_assert_false(
    st_comm_algo_find("hierarchical")->plan(c, ST_COLL_ALL_REDUCE, (int64_t)s, &u, &plan));
}

/* ---- auto ---------------------------------------------------------------- */

/* Auto takes the fastest alone, as NCCL's tuner does. In one node the
 * tree's chain has the ring's 2(n-1) latencies and more bytes: the ring
 * always. Over 16 nodes x 8 GPUs (n = 128) the tree's latency is
 * 2(7 alpha_i + 4 alpha_e) = 68 us against the ring's
 * (254 - 30) alpha_i + 30 alpha_e = 598 us, for bandwidth terms
 * 2S/(0.92*400 GB/s) and 2*127/128*S/(400 GB/s): the tree wins below
 * S* = 530 us / (2/(0.92*400e9) - 1.984375/400e9) = 1.12 GB. */
static void
test_auto(void)
{
  g_autoptr(StCluster) c = h100(1);
  StGroupShape g = first_gpus(c, 8);
  StCommPlan plan = plan_ok(c, NULL, "auto", ST_COLL_ALL_REDUCE, 1024, &g);
  g_assert_cmpstr(plan.algo, ==, "ring");
  plan = plan_ok(c, NULL, NULL, ST_COLL_ALL_REDUCE, 1 << 30, &g);
  g_assert_cmpstr(plan.algo, ==, "ring");
  g_autoptr(StCluster) c16 = h100(16);
  int32_t all[128];
  for (int i = 0; i < 128; i++)
    all[i] = i;
  StGroupShape g16 = shape_of(c16, all, 128);
  plan = plan_ok(c16, NULL, "auto", ST_COLL_ALL_REDUCE, 1024, &g16);
  g_assert_cmpstr(plan.algo, ==, "tree");
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan),
                                 2 * 1024 / (0.92 * 8 * RE) * 1e9 + 2 * (7 * ALPHA_I + 4 * ALPHA_E),
                                 1e-6);
  const double crossover =
    (224 * ALPHA_I + 30 * ALPHA_E - 2 * (7 * ALPHA_I + 4 * ALPHA_E)) / 1e9 /
    (2 / (0.92 * 8 * RE) - 2.0 * 127 / 128 / (8 * RE));
  plan = plan_ok(c16, NULL, "auto", ST_COLL_ALL_REDUCE, (int64_t)(crossover * 0.99), &g16);
  g_assert_cmpstr(plan.algo, ==, "tree");
  plan = plan_ok(c16, NULL, "auto", ST_COLL_ALL_REDUCE, (int64_t)(crossover * 1.01), &g16);
  g_assert_cmpstr(plan.algo, ==, "ring");
  /* All-gather has only the ring here. */
  plan = plan_ok(c, NULL, "auto", ST_COLL_ALL_GATHER, 1024, &g);
  g_assert_cmpstr(plan.algo, ==, "ring");

  /* An unknown name lists the known ones. */
  g_autoptr(GError) error = NULL;
  g_assert_false(st_comm_plan_collective(c, NULL, "butterfly", ST_COLL_ALL_REDUCE, 1024, &g,
                                         &plan, &error));
  g_assert_error(error, ST_COST_ERROR, ST_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "'butterfly'"));
  g_assert_nonnull(strstr(error->message, "auto, ring, tree, hierarchical"));
}

/* ---- link profile -------------------------------------------------------- */

static void
test_link_profile(void)
{
  g_autoptr(StCluster) c = h100(1);
  StGroupShape g = first_gpus(c, 8);
  g_autoptr(StProfile) p = st_profile_new();
  /* Measured: 8-rank intra-node all-reduce of 1 MiB in 40 us. */
  st_profile_add_link(p, "H100-SXM", ST_COLL_ALL_REDUCE, ST_LINK_INTRA_NODE, 8, 1 << 20, 40e3);
  /* The measurement replaces the model: t = 40 us, as one phase carrying
   * the ring's wire bytes 2*7/8*S at their effective rate 1.75 MiB / 40 us. */
  StCommPlan plan = plan_ok(c, p, "ring", ST_COLL_ALL_REDUCE, 1 << 20, &g);
  g_assert_cmpstr(plan.algo, ==, "ring"); /* the algorithm whose links it loads */
  g_assert_cmpint(plan.source, ==, ST_SRC_LINK_PROFILE);
  g_assert_cmpint(plan.n_phases, ==, 1);
  g_assert_cmpint(plan.phases[0].latency_ns, ==, 0);
  g_assert_cmpfloat_with_epsilon(plan.phases[0].bytes, 1.75 * MIB, 1e-6);
  g_assert_cmpfloat_with_epsilon(plan.phases[0].bandwidth, 1.75 * MIB / 40e-6, 1e-3);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), 40e3, 1e-6);
  /* Slower than the links allow (45.9 GB/s against 450): the measured rate
   * caps the flow, which loads the links as the ring does. */
  g_assert_cmpfloat_with_epsilon(plan.phases[0].cap, 1.75 * MIB / 40e-6, 1e-3);
  g_assert_cmpfloat_with_epsilon(plan.phases[0].use.gpu, 1, 1e-12);
  /* Auto too; at 2 MiB the single point scales proportionally: 80 us. */
  plan = plan_ok(c, p, "auto", ST_COLL_ALL_REDUCE, 2 << 20, &g);
  g_assert_cmpint(plan.source, ==, ST_SRC_LINK_PROFILE);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), 80e3, 1e-6);
  /* Not for another rank count or collective: the models answer. */
  StGroupShape four = first_gpus(c, 4);
  plan = plan_ok(c, p, "auto", ST_COLL_ALL_REDUCE, 1 << 20, &four);
  g_assert_cmpint(plan.source, ==, ST_SRC_ALPHA_BETA);
  plan = plan_ok(c, p, "auto", ST_COLL_ALL_GATHER, 1 << 20, &g);
  g_assert_cmpint(plan.source, ==, ST_SRC_ALPHA_BETA);
  /* Faster than the links allow (1.75 MiB in 1 us: 1835 GB/s, as an
   * in-switch reduction may be): it is taken to load the links less in that
   * ratio, so alone the links allow exactly the measured rate. */
  st_profile_add_link(p, "H100-SXM", ST_COLL_REDUCE_SCATTER, ST_LINK_INTRA_NODE, 8, 1 << 20, 1e3);
  plan = plan_ok(c, p, "ring", ST_COLL_REDUCE_SCATTER, 1 << 20, &g);
  double rate = 7.0 / 8 * MIB / 1e-6;
  g_assert_cmpfloat_with_epsilon(plan.phases[0].use.gpu, B_I / rate, 1e-12);
  g_assert_cmpfloat_with_epsilon(plan.phases[0].cap, rate, 1e-3);
  g_assert_cmpfloat_with_epsilon(st_comm_use_rate(c, &plan.phases[0].use, &g), rate, 1e-3);
}

/* ---- p2p ----------------------------------------------------------------- */

static void
test_p2p(void)
{
  g_autoptr(StCluster) c = h100(2);
  const double s = 8 * MIB;
  StCommPlan plan;
  /* Same node: t = alpha_i + S/B_i. */
  st_comm_plan_p2p(c, 0, 7, (int64_t)s, &plan);
  g_assert_cmpint(plan.n_phases, ==, 1);
  g_assert_cmpint(plan.phases[0].link, ==, ST_LINK_INTRA_NODE);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), ALPHA_I + s / B_I * 1e9, 1e-3);
  /* Across nodes: t = alpha_e + S/B_e. */
  st_comm_plan_p2p(c, 7, 8, (int64_t)s, &plan);
  g_assert_cmpint(plan.phases[0].link, ==, ST_LINK_INTER_NODE);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), ALPHA_E + s / B_E * 1e9, 1e-3);
  /* Same device: a copy in memory, t = S / (HBM/2). */
  st_comm_plan_p2p(c, 3, 3, (int64_t)s, &plan);
  g_assert_cmpint(plan.phases[0].link, ==, ST_LINK_LOCAL);
  g_assert_cmpfloat_with_epsilon(st_comm_plan_ns(&plan), s / (HBM / 2) * 1e9, 1e-3);
}

/* ---- compute ------------------------------------------------------------- */

/* Linear 1024 -> 4096 (bias), per sample: params = 1024*4096 + 4096,
 * fwd = 2*1024*4096 FLOPs, bwd = 2 fwd, activation traffic (in + out)
 * elements in fp32. */
static StLayer
linear_layer(void)
{
  const double in = 1024, out = 4096;
  return (StLayer){
    .name = "fc1",
    .signature = "linear{bias=1,out_features=4096}[1024]",
    .params = (int64_t)(in * out + out),
    .fwd_flops = 2 * in * out,
    .bwd_flops = 4 * in * out,
    .fwd_io_bytes = (in + out) * 4,
    .bwd_io_bytes = 2 * (in + out) * 4,
  };
}

static void
test_roofline_linear(void)
{
  g_autoptr(StCluster) c = h100(1);
  StLayer layer = linear_layer();
  StModel model = {.name = "one-linear", .dtype = ST_DTYPE_FP32, .layers = &layer, .n_layers = 1};
  StComputeCtx ctx = {.cluster = c, .profile = NULL, .model = &model, .dtype = ST_DTYPE_FP32,
                      .fallback = "roofline"};
  StWork work = {.pass = ST_PASS_FWD, .layer = &layer, .batch = 64};
  const double p = (double)layer.params;

  /* fp32 forward, batch 64: FLOPs = 64*2*1024*4096 = 537 MFLOP, bytes =
   * 64*5120*4 + 4 p = 18.1 MB. fp32 work is bounded by the faster of the fp32
   * and TF32 peaks (frameworks may run it on TF32 tensor cores): t =
   * max(FLOPs/494 TFLOP/s, bytes/3.35 TB/s) = max(1.09 us, 5.41 us): memory
   * bound. */
  StCostSource source = ST_SRC_NONE;
  double t = st_compute_time(&ctx, &work, &source);
  g_assert_cmpint(source, ==, ST_SRC_ROOFLINE);
  double flops = 64 * 2 * 1024.0 * 4096, bytes = 64 * 5120 * 4.0 + 4 * p;
  g_assert_cmpfloat_with_epsilon(t, MAX(flops / 494e12, bytes / HBM) * 1e9, 1e-6);
  g_assert_cmpfloat_with_epsilon(t, bytes / HBM * 1e9, 1e-6);

  /* bf16 forward: activations and weights at 2 bytes. FLOPs/989 TFLOP/s =
   * 0.54 us < bytes/HBM = (64*5120*2 + 2 p)/3.35 TB/s = 2.70 us: memory bound. */
  ctx.dtype = ST_DTYPE_BF16;
  t = st_compute_time(&ctx, &work, &source);
  bytes = 64 * 5120 * 2.0 + 2 * p;
  g_assert_cmpfloat_with_epsilon(t, bytes / HBM * 1e9, 1e-6);
  g_assert_cmpfloat_with_epsilon(t, MAX(flops / 989e12, bytes / HBM) * 1e9, 1e-6);

  /* fp32 backward: FLOPs = 2x forward; bytes = 64*2*5120*4 + 2*4 p (weights
   * read, weight gradients written). t = max(2.17 us, 10.8 us). */
  ctx.dtype = ST_DTYPE_FP32;
  work.pass = ST_PASS_BWD;
  t = st_compute_time(&ctx, &work, &source);
  bytes = 64 * 2 * 5120 * 4.0 + 8 * p;
  g_assert_cmpfloat_with_epsilon(t, MAX(2 * flops / 494e12, bytes / HBM) * 1e9, 1e-6);

  /* An optimizer step is bandwidth bound: Adam over 1M fp32 parameters
   * touches 16 B each (param, grad, 2 states) read and written = 32 MB,
   * t = 32e6 / 3.35e12 s = 9.55 us. */
  StWork optim = {.pass = ST_PASS_OPTIM, .elems = 1000000, .bytes = 32000000, .kernel = "adam"};
  t = st_compute_time(&ctx, &optim, &source);
  g_assert_cmpint(source, ==, ST_SRC_ROOFLINE);
  g_assert_cmpfloat_with_epsilon(t, 32e6 / HBM * 1e9, 1e-6);
}

/* A profile entry wins over the estimate; misses fall back to it, or to the
 * roofline when the context asks for it (--compute-model roofline). */
static void
test_compute_profile(void)
{
  g_autoptr(StCluster) c = h100(1);
  StLayer layer = linear_layer();
  StModel model = {.name = "one-linear", .dtype = ST_DTYPE_FP32, .layers = &layer, .n_layers = 1};
  g_autoptr(StProfile) p = st_profile_new();
  st_profile_add_layer(p, "H100-SXM", "fc1", NULL, ST_PASS_FWD, 64, 12e3, 0);
  st_profile_add_layer(p, "H100-SXM", NULL, layer.signature, ST_PASS_FWDBWD, 64, 36e3, 0);
  st_profile_add_layer(p, "H100-SXM", "adam", NULL, ST_PASS_OPTIM, 1000000, 20e3, 0);
  StComputeCtx ctx = {.cluster = c, .profile = p, .model = &model, .dtype = ST_DTYPE_FP32};
  StCostSource source;

  StWork work = {.pass = ST_PASS_FWD, .layer = &layer, .batch = 64};
  g_assert_cmpfloat_with_epsilon(st_compute_time(&ctx, &work, &source), 12e3, 1e-9);
  g_assert_cmpint(source, ==, ST_SRC_PROFILED);
  /* Batch 128 from one point: proportional, 24 us. */
  work.batch = 128;
  g_assert_cmpfloat_with_epsilon(st_compute_time(&ctx, &work, &source), 24e3, 1e-9);
  g_assert_cmpint(source, ==, ST_SRC_INTERPOLATED);
  /* Backward from the signature's fwd+bwd by the FLOP ratio: bwd = 2/3 of 36 us. */
  work.batch = 64;
  work.pass = ST_PASS_BWD;
  g_assert_cmpfloat_with_epsilon(st_compute_time(&ctx, &work, &source), 24e3, 1e-6);
  g_assert_cmpint(source, ==, ST_SRC_INTERPOLATED);
  /* Recompute is the forward's kernels. */
  work.pass = ST_PASS_RECOMPUTE;
  g_assert_cmpfloat_with_epsilon(st_compute_time(&ctx, &work, &source), 12e3, 1e-9);
  g_assert_cmpint(source, ==, ST_SRC_PROFILED);
  /* Optimizer entries: kernel name, x = elements. */
  StWork optim = {.pass = ST_PASS_OPTIM, .elems = 500000, .bytes = 16000000, .kernel = "adam"};
  g_assert_cmpfloat_with_epsilon(st_compute_time(&ctx, &optim, &source), 10e3, 1e-9);
  g_assert_cmpint(source, ==, ST_SRC_INTERPOLATED);
  /* sgd was never profiled: the estimate answers, or the roofline. */
  optim.kernel = "sgd";
  st_compute_time(&ctx, &optim, &source);
  g_assert_cmpint(source, ==, ST_SRC_ESTIMATE);
  ctx.fallback = "roofline";
  st_compute_time(&ctx, &optim, &source);
  g_assert_cmpint(source, ==, ST_SRC_ROOFLINE);
  /* Another GPU: the profile has nothing for it. */
  g_autofree char *a100_path = st_test_src("models/clusters/dgx-a100.json");
  g_autoptr(StCluster) a100 = st_cluster_load(a100_path, NULL);
  ctx.cluster = a100;
  ctx.fallback = NULL;
  work.pass = ST_PASS_FWD;
  st_compute_time(&ctx, &work, &source);
  g_assert_cmpint(source, ==, ST_SRC_ESTIMATE);
}

/* ---- sharing ------------------------------------------------------------- */

static void
share(StShareClient *clients, int n)
{
  const StShareModel *m = st_share_model_find("priority");
  g_assert_nonnull(m);
  m->rates(clients, n);
}

static void
test_share_priority(void)
{
  /* Alone: rate 1 whatever its fill. */
  StShareClient one[] = {{.priority = 0, .fill = 0.3, .weight = 1}};
  share(one, 1);
  g_assert_cmpfloat_with_epsilon(one[0].rate, 1, 1e-12);

  /* Two full kernels of one priority: demand 2 > 1, each gets 1/2. */
  StShareClient two[] = {{0, 1.0, 1, 0, 0, 0}, {0, 1.0, 1, 0, 0, 0}};
  share(two, 2);
  g_assert_cmpfloat_with_epsilon(two[0].rate, 0.5, 1e-12);
  g_assert_cmpfloat_with_epsilon(two[1].rate, 0.5, 1e-12);

  /* Two half-filling kernels fit side by side: rate 1 each. */
  StShareClient halves[] = {{0, 0.5, 1, 0, 0, 0}, {0, 0.5, 1, 0, 0, 0}};
  share(halves, 2);
  g_assert_cmpfloat_with_epsilon(halves[0].rate, 1, 1e-12);

  /* Background beside a full foreground kernel: 0 (it waits). */
  StShareClient fg_full[] = {{-1, 0.5, 1, 0, 0, 0}, {1, 1.0, 1, 0, 0, 0}};
  share(fg_full, 2);
  g_assert_cmpfloat_with_epsilon(fg_full[1].rate, 1, 1e-12);
  g_assert_cmpfloat_with_epsilon(fg_full[0].rate, 0, 1e-12);

  /* Foreground fill 0.6 leaves 0.4; background asks 0.8: rate 0.4/0.8 = 0.5. */
  StShareClient fg_part[] = {{1, 0.6, 1, 0, 0, 0}, {0, 0.8, 1, 0, 0, 0}};
  share(fg_part, 2);
  g_assert_cmpfloat_with_epsilon(fg_part[0].rate, 1, 1e-12);
  g_assert_cmpfloat_with_epsilon(fg_part[1].rate, 0.5, 1e-12);

  /* Folded kernels count `weight` times: 3 x fill 0.5 beside 1 x fill 0.5
   * at one priority asks 2, so every kernel runs at 1/2. Three levels:
   * the third gets nothing. */
  StShareClient folded[] = {{2, 0.5, 3, 0, 0, 0}, {2, 0.5, 1, 0, 0, 0}, {0, 0.1, 1, 0, 0, 0}};
  share(folded, 3);
  g_assert_cmpfloat_with_epsilon(folded[0].rate, 0.5, 1e-12);
  g_assert_cmpfloat_with_epsilon(folded[1].rate, 0.5, 1e-12);
  g_assert_cmpfloat_with_epsilon(folded[2].rate, 0, 1e-12);
}

/* ---- registries ---------------------------------------------------------- */

static void
test_registries(void)
{
  const StComputeModel *const *compute = st_compute_models();
  g_assert_cmpstr(compute[0]->name, ==, "profile");
  g_assert_cmpstr(compute[1]->name, ==, "estimate");
  g_assert_cmpstr(compute[2]->name, ==, "roofline");
  g_assert_null(compute[3]);
  const StCommAlgo *const *algos = st_comm_algos();
  g_assert_cmpstr(algos[0]->name, ==, "ring");
  g_assert_cmpstr(algos[1]->name, ==, "tree");
  g_assert_cmpstr(algos[2]->name, ==, "hierarchical");
  g_assert_null(algos[3]);
  g_assert_true(st_comm_algo_find("tree") == algos[1]);
  g_assert_null(st_comm_algo_find("auto"));
  g_assert_cmpstr(st_share_models()[0]->name, ==, "interference");
  g_assert_cmpstr(st_share_models()[1]->name, ==, "priority");
  g_assert_null(st_share_model_find("fair"));
  /* Every entry says what it is and where it comes from. */
  for (int i = 0; algos[i] != NULL; i++)
    g_assert_true(*algos[i]->summary != '\0' && *algos[i]->citation != '\0');
  for (int i = 0; compute[i] != NULL; i++)
    g_assert_true(*compute[i]->summary != '\0' && *compute[i]->citation != '\0');
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cost/comm/ring", test_ring);
  g_test_add_func("/cost/comm/nccl-bus", test_nccl_bus);
  g_test_add_func("/cost/comm/ring-across-nodes", test_ring_across_nodes);
  g_test_add_func("/cost/comm/ring-gpus-per-node", test_ring_gpus_per_node);
  g_test_add_func("/cost/comm/all-to-all", test_all_to_all);
  g_test_add_func("/cost/comm/shared-device", test_shared_device);
  g_test_add_func("/cost/comm/tree", test_tree);
  g_test_add_func("/cost/comm/hierarchical", test_hierarchical);
  g_test_add_func("/cost/comm/auto", test_auto);
  g_test_add_func("/cost/comm/link-profile", test_link_profile);
  g_test_add_func("/cost/comm/p2p", test_p2p);
  g_test_add_func("/cost/compute/roofline-linear", test_roofline_linear);
  g_test_add_func("/cost/compute/profile", test_compute_profile);
  g_test_add_func("/cost/share/priority", test_share_priority);
  g_test_add_func("/cost/registries", test_registries);
  return g_test_run();
}
