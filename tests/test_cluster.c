/* test_cluster.c: the shipped clusters load with their datasheet numbers,
 * --gpus-per-node / --nodes / --gpus resize them, groups get their shapes, and every kind of
 * bad file is refused with an error that names the file and the key. */
#include <glib.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "cluster/cluster.h"
#include "testutil.h"

static StCluster *
load_shipped(const char *name)
{
  g_autofree char *rel = g_strdup_printf("models/clusters/%s.json", name);
  g_autofree char *path = st_test_src(rel);
  g_autoptr(GError) error = NULL;
  StCluster *c = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_nonnull(c);
  g_assert_cmpstr(c->name, ==, name);
  g_assert_cmpstr(c->path, ==, path);
  return c;
}

static void
assert_link(const StCluster *c, StLinkClass l, double bandwidth, int64_t latency_ns,
            StTopology topology)
{
  g_assert_true(c->links[l].present);
  g_assert_cmpfloat_with_epsilon(c->links[l].bandwidth, bandwidth, 1);
  g_assert_cmpint(c->links[l].latency_ns, ==, latency_ns);
  g_assert_cmpint(c->links[l].topology, ==, topology);
}

static void
test_dgx_h100(void)
{
  /* Exactly the example of DESIGN.md, plus tf32, fp16 and the PCIe link. */
  g_autoptr(StCluster) c = load_shipped("dgx-h100");
  g_assert_cmpint(c->nodes, ==, 1);
  g_assert_cmpint(c->gpus_per_node, ==, 8);
  g_assert_cmpint(c->gpus, ==, 8);
  g_assert_cmpstr(c->gpu.name, ==, "H100-SXM");
  g_assert_cmpint(c->gpu.memory_bytes, ==, 81090LL << 20); /* PyTorch's total_memory */
  g_assert_cmpfloat_with_epsilon(c->gpu.flops[ST_DTYPE_BF16], 989e12, 1);
  g_assert_cmpfloat_with_epsilon(c->gpu.flops[ST_DTYPE_FP16], 989e12, 1);
  g_assert_cmpfloat_with_epsilon(c->gpu.flops[ST_DTYPE_FP32], 67e12, 1);
  g_assert_cmpfloat_with_epsilon(c->gpu.tf32_flops, 494e12, 1);
  g_assert_cmpfloat_with_epsilon(c->gpu.memory_bandwidth, 3.35e12, 1);
  assert_link(c, ST_LINK_INTRA_NODE, 450e9, 2000, ST_TOPO_SWITCH);
  assert_link(c, ST_LINK_INTER_NODE, 50e9, 5000, ST_TOPO_SWITCH);
  assert_link(c, ST_LINK_PCIE, 64e9, 1000, ST_TOPO_SWITCH);
  /* LOCAL: a copy reads and writes, so half of 3.35 TB/s, no latency. */
  g_assert_cmpfloat_with_epsilon(st_cluster_link_bandwidth(c, ST_LINK_LOCAL), 1.675e12, 1);
  g_assert_cmpint(st_cluster_link_latency(c, ST_LINK_LOCAL), ==, 0);
  g_assert_cmpfloat_with_epsilon(st_cluster_link_bandwidth(c, ST_LINK_INTRA_NODE), 450e9, 1);
  g_assert_cmpint(st_cluster_link_latency(c, ST_LINK_INTER_NODE), ==, 5000);
}

static void
test_dgx_h200(void)
{
  /* H100 compute and links, 141 GB (decimal) of HBM3e at 4.8 TB/s. */
  g_autoptr(StCluster) c = load_shipped("dgx-h200");
  g_assert_cmpstr(c->gpu.name, ==, "H200-SXM");
  g_assert_cmpint(c->gpu.memory_bytes, ==, 143156LL << 20); /* PyTorch's total_memory */
  g_assert_cmpfloat_with_epsilon(c->gpu.memory_bandwidth, 4.8e12, 1);
  g_assert_cmpfloat_with_epsilon(c->gpu.flops[ST_DTYPE_BF16], 989e12, 1);
  g_assert_cmpfloat_with_epsilon(c->gpu.flops[ST_DTYPE_FP32], 67e12, 1);
  assert_link(c, ST_LINK_INTRA_NODE, 450e9, 2000, ST_TOPO_SWITCH);
  assert_link(c, ST_LINK_INTER_NODE, 50e9, 5000, ST_TOPO_SWITCH);
}

static void
test_dgx_a100(void)
{
  /* A100-SXM4-80GB datasheet; NVLink3 12 x 25 GB/s; HDR 200 Gb/s = 25 GB/s per GPU. */
  g_autoptr(StCluster) c = load_shipped("dgx-a100");
  g_assert_cmpint(c->gpus, ==, 8);
  g_assert_cmpint(c->gpu.memory_bytes, ==, 80LL << 30);
  g_assert_cmpfloat_with_epsilon(c->gpu.flops[ST_DTYPE_BF16], 312e12, 1);
  g_assert_cmpfloat_with_epsilon(c->gpu.flops[ST_DTYPE_FP32], 19.5e12, 1);
  g_assert_cmpfloat_with_epsilon(c->gpu.tf32_flops, 156e12, 1);
  g_assert_cmpfloat_with_epsilon(c->gpu.memory_bandwidth, 2.039e12, 1);
  assert_link(c, ST_LINK_INTRA_NODE, 300e9, 2000, ST_TOPO_SWITCH);
  assert_link(c, ST_LINK_INTER_NODE, 25e9, 5000, ST_TOPO_SWITCH);
}

static void
test_dgx_v100(void)
{
  /* DGX-1: NVLink2 6 x 25 GB/s = 150 GB/s per GPU per direction over a
   * hybrid cube-mesh (rings); 4 EDR 100 Gb/s ports per 8 GPUs = 6.25 GB/s
   * per GPU. No bf16 on V100: 16-bit work runs at the fp16 rate. */
  g_autoptr(StCluster) c = load_shipped("dgx-v100");
  g_assert_cmpint(c->gpus_per_node, ==, 8);
  g_assert_cmpint(c->gpu.memory_bytes, ==, 32LL << 30);
  g_assert_cmpfloat_with_epsilon(c->gpu.flops[ST_DTYPE_FP16], 125e12, 1);
  g_assert_true(c->gpu.flops[ST_DTYPE_BF16] == 0);
  g_assert_cmpfloat_with_epsilon(st_cluster_peak_flops(c, ST_DTYPE_BF16), 125e12, 1);
  g_assert_cmpfloat_with_epsilon(st_cluster_peak_flops(c, ST_DTYPE_FP32), 15.7e12, 1);
  g_assert_cmpfloat_with_epsilon(c->gpu.memory_bandwidth, 900e9, 1);
  assert_link(c, ST_LINK_INTRA_NODE, 150e9, 2000, ST_TOPO_RING);
  /* 4 EDR ports of 12.5 GB/s, each shared by 2 GPUs. */
  assert_link(c, ST_LINK_INTER_NODE, 12.5e9, 5000, ST_TOPO_SWITCH);
  g_assert_cmpint(c->fabric.nics, ==, 4);
}

static void
test_summit(void)
{
  /* One Summit node: 6 x V100 16 GB, 50 GB/s NVLink2, two 12.5 GB/s rails
   * between nodes, fp16 125 TFLOP/s, fp32 15.7 TFLOP/s, 900 GB/s HBM2. */
  g_autoptr(StCluster) c = load_shipped("summit");
  g_assert_cmpint(c->nodes, ==, 1);
  g_assert_cmpint(c->gpus_per_node, ==, 6);
  g_assert_cmpint(c->gpu.memory_bytes, ==, 16LL << 30);
  g_assert_cmpfloat_with_epsilon(c->gpu.flops[ST_DTYPE_FP16], 125e12, 1);
  g_assert_cmpfloat_with_epsilon(c->gpu.flops[ST_DTYPE_FP32], 15.7e12, 1);
  g_assert_cmpfloat_with_epsilon(c->gpu.memory_bandwidth, 900e9, 1);
  assert_link(c, ST_LINK_INTRA_NODE, 50e9, 2000, ST_TOPO_RING);
  assert_link(c, ST_LINK_INTER_NODE, 12.5e9, 5000, ST_TOPO_SWITCH);
  g_assert_cmpint(c->fabric.nics, ==, 2);
  g_assert_cmpint(c->fabric.leaf_nodes, ==, 1);
  g_assert_true(c->fabric.oversubscription == 1);
}

static void
assert_clusters_equal(const StCluster *a, const StCluster *b)
{
  g_assert_cmpstr(a->name, ==, b->name);
  g_assert_cmpint(a->nodes, ==, b->nodes);
  g_assert_cmpint(a->gpus_per_node, ==, b->gpus_per_node);
  g_assert_cmpint(a->gpus, ==, b->gpus);
  g_assert_cmpstr(a->gpu.name, ==, b->gpu.name);
  g_assert_cmpint(a->gpu.memory_bytes, ==, b->gpu.memory_bytes);
  for (int d = 0; d < ST_DTYPE_N; d++)
    g_assert_true(a->gpu.flops[d] == b->gpu.flops[d]);
  g_assert_true(a->gpu.tf32_flops == b->gpu.tf32_flops);
  g_assert_true(a->gpu.memory_bandwidth == b->gpu.memory_bandwidth);
  for (int l = 0; l < ST_LINK_N; l++) {
    g_assert_cmpint(a->links[l].present, ==, b->links[l].present);
    g_assert_true(a->links[l].bandwidth == b->links[l].bandwidth);
    g_assert_cmpint(a->links[l].latency_ns, ==, b->links[l].latency_ns);
    g_assert_cmpint(a->links[l].topology, ==, b->links[l].topology);
  }
  g_assert_cmpint(a->fabric.nics, ==, b->fabric.nics);
  g_assert_cmpint(a->fabric.leaf_nodes, ==, b->fabric.leaf_nodes);
  g_assert_true(a->fabric.oversubscription == b->fabric.oversubscription);
}

/* to_json reads back to an equal cluster, bit for bit, resized or not. */
static void
test_round_trip(void)
{
  static const char *const names[] = {"dgx-h100", "dgx-h200", "dgx-a100", "dgx-v100", "summit"};
  for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
    g_autoptr(StCluster) c = load_shipped(names[i]);
    g_assert_true(st_cluster_resize(c, 3, 17, NULL));
    g_autoptr(cJSON) json = st_cluster_to_json(c);
    g_autoptr(GError) error = NULL;
    g_autoptr(StCluster) back = st_cluster_from_json(json, "round-trip", &error);
    g_assert_no_error(error);
    assert_clusters_equal(c, back);
    g_autoptr(StCluster) copy = st_cluster_copy(c);
    assert_clusters_equal(c, copy);
    g_assert_cmpstr(copy->path, ==, c->path);
  }
  /* The fabric's keys too. */
  g_autoptr(StCluster) f = load_shipped("dgx-h100");
  f->fabric = (StFabric){2, 4, 2.5};
  g_autoptr(cJSON) fj = st_cluster_to_json(f);
  g_autoptr(StCluster) fb = st_cluster_from_json(fj, "round-trip", NULL);
  g_assert_nonnull(fb);
  assert_clusters_equal(f, fb);
  /* Readable units where they are exact. */
  g_autoptr(StCluster) h100 = load_shipped("dgx-h100");
  g_autoptr(cJSON) json = st_cluster_to_json(h100);
  g_autofree char *text = cJSON_PrintUnformatted(json);
  g_assert_nonnull(strstr(text, "\"bandwidth\":\"450GB/s\""));
  g_assert_nonnull(strstr(text, "\"memory\":\"81090MiB\""));
  g_assert_nonnull(strstr(text, "\"latency\":\"2us\""));
  g_assert_nonnull(strstr(text, "\"bf16\":\"989TFLOP/s\""));
}

static void
test_resize(void)
{
  g_autoptr(StCluster) c = load_shipped("dgx-h100");
  g_autoptr(GError) error = NULL;
  /* --nodes 4: four copies of the node, all GPUs in use. */
  g_assert_true(st_cluster_resize(c, 4, 0, &error));
  g_assert_no_error(error);
  g_assert_cmpint(c->nodes, ==, 4);
  g_assert_cmpint(c->gpus, ==, 32);
  /* --gpus 12: the first 12 GPUs, on nodes 0 and 1. */
  g_assert_true(st_cluster_resize(c, 0, 12, &error));
  g_assert_cmpint(c->nodes, ==, 4);
  g_assert_cmpint(c->gpus, ==, 12);
  g_assert_cmpint(st_cluster_node_of(c, 11), ==, 1);
  /* --gpus beyond what 2 nodes hold: refused, the cluster unchanged. */
  g_assert_false(st_cluster_resize(c, 2, 17, &error));
  g_assert_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "--gpus 17"));
  g_assert_nonnull(strstr(error->message, "16 GPUs"));
  g_assert_cmpint(c->nodes, ==, 4);
  g_assert_cmpint(c->gpus, ==, 12);
  g_clear_error(&error);
  /* Fewer GPUs than a node holds, on a bigger node count: they stay. */
  g_assert_true(st_cluster_resize(c, 0, 3, NULL));
  g_assert_true(st_cluster_resize(c, 2, 0, NULL));
  g_assert_cmpint(c->gpus, ==, 3);
  g_assert_false(st_cluster_resize(c, -1, 0, NULL));
}

/* --gpus-per-node K keeps K of a node's GPUs, spread over its NICs, before
 * --nodes copies the node. Summit: 6 GPUs and 2 NICs per node. */
static void
test_keep_gpus_per_node(void)
{
  g_autoptr(GError) error = NULL;
  /* 16 GPUs as --gpus leaves them, the first 16 of 3 nodes: 6, 6 and 4.
   * On the last node GPUs 0-2 use NIC 0 and GPU 3 NIC 1, so one NIC
   * carries 3/4 of the node's ring traffic where a full node's carries 3/6. */
  g_autoptr(StCluster) first = load_shipped("summit");
  g_assert_true(st_cluster_resize(first, 3, 16, &error));
  int32_t all[16];
  for (int i = 0; i < 16; i++)
    all[i] = i;
  StGroupShape s;
  st_cluster_group_shape(first, all, 16, &s);
  g_assert_cmpint(s.nodes, ==, 3);
  g_assert_cmpint(s.per_node, ==, 6);
  g_assert_cmpfloat_with_epsilon(s.nic_share, 3.0 / 4, 1e-12);
  /* --gpus-per-node 4 --nodes 4: every node alike, 2 GPUs on each NIC. */
  g_autoptr(StCluster) c = load_shipped("summit");
  g_assert_true(st_cluster_keep_gpus_per_node(c, 4, &error));
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(c, 4, 0, &error));
  g_assert_cmpint(c->gpus_per_node, ==, 4);
  g_assert_cmpint(c->nodes, ==, 4);
  g_assert_cmpint(c->gpus, ==, 16);
  g_assert_cmpint(c->fabric.nics, ==, 2);
  g_assert_cmpint(st_cluster_node_of(c, 13), ==, 3);
  st_cluster_group_shape(c, all, 16, &s);
  g_assert_cmpint(s.nodes, ==, 4);
  g_assert_cmpint(s.per_node, ==, 4);
  g_assert_cmpint(s.per_nic, ==, 2);
  g_assert_cmpfloat_with_epsilon(s.nic_share, 1.0 / 2, 1e-12);
  /* It reads back equal. */
  g_autoptr(cJSON) json = st_cluster_to_json(c);
  g_autoptr(StCluster) back = st_cluster_from_json(json, "round-trip", &error);
  g_assert_no_error(error);
  assert_clusters_equal(c, back);
  /* One GPU per node keeps one NIC: a GPU uses one. 0 leaves the node as
   * it is; GPUs in use that were fewer than all stay as many as fit. */
  g_autoptr(StCluster) one = load_shipped("summit");
  g_assert_true(st_cluster_resize(one, 2, 5, &error));
  g_assert_true(st_cluster_keep_gpus_per_node(one, 0, &error));
  g_assert_cmpint(one->gpus_per_node, ==, 6);
  g_assert_true(st_cluster_keep_gpus_per_node(one, 1, &error));
  g_assert_cmpint(one->gpus_per_node, ==, 1);
  g_assert_cmpint(one->fabric.nics, ==, 1);
  g_assert_cmpint(one->gpus, ==, 2);
  /* More than the node holds: refused, naming the file and the option, the
   * cluster unchanged. */
  g_autoptr(StCluster) bad = load_shipped("summit");
  g_assert_false(st_cluster_keep_gpus_per_node(bad, 7, &error));
  g_assert_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "summit.json"));
  g_assert_nonnull(strstr(error->message, "--gpus-per-node 7"));
  g_assert_nonnull(strstr(error->message, "6 GPUs"));
  g_assert_cmpint(bad->gpus_per_node, ==, 6);
  g_assert_cmpint(bad->gpus, ==, 6);
  g_assert_cmpint(bad->fabric.nics, ==, 2);
}

/* A file without inter_node is fine alone; --nodes 2 needs the link. */
static void
test_resize_needs_inter_node(void)
{
  g_autofree char *path = st_test_src("tests/data/clusters/intra-only.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) c = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_false(st_cluster_resize(c, 2, 0, &error));
  g_assert_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, path));
  g_assert_nonnull(strstr(error->message, "inter_node"));
  g_assert_cmpint(c->nodes, ==, 1);
  g_assert_cmpint(c->gpus, ==, 4);
  g_clear_error(&error);
  /* Two nodes, but only the first 4 GPUs in use: still one node. */
  g_assert_true(st_cluster_resize(c, 2, 4, &error));
  g_assert_no_error(error);
  g_assert_false(st_cluster_resize(c, 0, 5, &error));
  g_assert_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID);
}

static void
test_links_and_groups(void)
{
  g_autoptr(StCluster) c = load_shipped("dgx-h100");
  g_assert_true(st_cluster_resize(c, 2, 0, NULL));
  g_assert_cmpint(st_cluster_link_between(c, 3, 3), ==, ST_LINK_LOCAL);
  g_assert_cmpint(st_cluster_link_between(c, 0, 7), ==, ST_LINK_INTRA_NODE);
  g_assert_cmpint(st_cluster_link_between(c, 7, 8), ==, ST_LINK_INTER_NODE);

  StGroupShape s;
  /* 16 ranks on 2 nodes x 8 GPUs. */
  int32_t all[16];
  for (int i = 0; i < 16; i++)
    all[i] = i;
  st_cluster_group_shape(c, all, 16, &s);
  g_assert_cmpint(s.ranks, ==, 16);
  g_assert_cmpint(s.devices, ==, 16);
  g_assert_cmpint(s.nodes, ==, 2);
  g_assert_cmpint(s.per_node, ==, 8);
  g_assert_cmpint(s.per_device, ==, 1);
  /* 6 ranks round-robin on GPUs 0, 1, 9 (unsorted input): 3 devices on 2
   * nodes, node 0 holds 2 of them; 2 members per device. */
  const int32_t shared[] = {9, 0, 1, 9, 0, 1};
  st_cluster_group_shape(c, shared, 6, &s);
  g_assert_cmpint(s.ranks, ==, 6);
  g_assert_cmpint(s.devices, ==, 3);
  g_assert_cmpint(s.nodes, ==, 2);
  g_assert_cmpint(s.per_node, ==, 2);
  g_assert_cmpint(s.per_device, ==, 2);
  /* The network: one NIC per GPU, one node per leaf. GPU 9 alone on its
   * node carries all of the node's traffic; 8 devices of a node spread it
   * over 8 NICs. */
  g_assert_cmpint(s.per_nic, ==, 1);
  g_assert_cmpfloat(s.nic_share, ==, 1);
  g_assert_cmpint(s.leaves, ==, 2);
  st_cluster_group_shape(c, all, 16, &s);
  g_assert_cmpint(s.per_nic, ==, 1);
  g_assert_cmpfloat(s.nic_share, ==, 1.0 / 8);
  /* 4 NICs per node (GPUs 2i and 2i+1 share NIC i), 2 nodes per leaf: GPUs
   * 0, 1, 2 put 2 devices on NIC 0 of their node's 3 (share 2/3), GPUs 8-11
   * 2 of 4 on each NIC of node 1 (1/2); one leaf. */
  c->fabric = (StFabric){4, 2, 1};
  const int32_t three[] = {0, 1, 2, 8, 9, 10, 11};
  st_cluster_group_shape(c, three, 7, &s);
  g_assert_cmpint(s.per_nic, ==, 2);
  g_assert_cmpfloat_with_epsilon(s.nic_share, 2.0 / 3, 1e-12);
  g_assert_cmpint(s.leaves, ==, 1);
  c->fabric = (StFabric){8, 1, 1};
  /* 4 ranks on one GPU. */
  const int32_t one[] = {5, 5, 5, 5};
  st_cluster_group_shape(c, one, 4, &s);
  g_assert_cmpint(s.devices, ==, 1);
  g_assert_cmpint(s.nodes, ==, 1);
  g_assert_cmpint(s.per_node, ==, 1);
  g_assert_cmpint(s.per_device, ==, 4);
}

/* Each bad file fails in ST_CLUSTER_ERROR with a message that names the
 * file and every fragment listed (the key, and what is wrong with it). */
static void
test_bad_files(void)
{
  static const struct {
    const char *file;
    StError code;
    const char *fragments[3];
  } cases[] = {
    {"malformed.json", ST_ERROR_PARSE, {"malformed JSON", ":3:", NULL}},
    {"zero-gpus.json", ST_ERROR_INVALID, {"key 'gpus_per_node'", "out of range", NULL}},
    {"zero-nodes.json", ST_ERROR_INVALID, {"key 'nodes'", "out of range", NULL}},
    {"unknown-unit.json", ST_ERROR_PARSE,
     {"links.intra_node: key 'bandwidth'", "'450 GBs'", "unknown unit 'GBs'"}},
    {"missing-key.json", ST_ERROR_INVALID, {"gpu: missing key 'memory_bandwidth'", NULL}},
    {"unknown-key.json", ST_ERROR_INVALID,
     {"links.intra_node: unknown key 'bandwith'", NULL}},
    {"negative.json", ST_ERROR_PARSE,
     {"links.intra_node: key 'latency'", "cannot be negative", NULL}},
    {"no-unit.json", ST_ERROR_INVALID, {"gpu: key 'memory'", "a string with a unit", NULL}},
    {"no-intra.json", ST_ERROR_INVALID, {"links: missing key 'intra_node'", NULL}},
    {"no-inter.json", ST_ERROR_INVALID, {"links: missing key 'inter_node'", NULL}},
    {"bad-topology.json", ST_ERROR_INVALID, {"key 'topology'", "'mesh'", NULL}},
    {"no-fp32.json", ST_ERROR_INVALID, {"gpu.flops: missing key 'fp32'", NULL}},
    {"too-many-nics.json", ST_ERROR_INVALID, {"links.inter_node: key 'nics'", "out of range", NULL}},
    {"undersubscribed.json", ST_ERROR_INVALID,
     {"links.inter_node: key 'oversubscription'", NULL}},
    {"does-not-exist.json", ST_ERROR_IO, {NULL}},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *rel = g_strdup_printf("tests/data/clusters/%s", cases[i].file);
    g_autofree char *path = st_test_src(rel);
    g_autoptr(GError) error = NULL;
    g_autoptr(StCluster) c = st_cluster_load(path, &error);
    g_assert_null(c);
    g_assert_error(error, ST_CLUSTER_ERROR, (gint)cases[i].code);
    if (g_test_verbose())
      g_printerr("%s\n", error->message);
    g_assert_nonnull(strstr(error->message, path));
    for (int k = 0; k < 3 && cases[i].fragments[k] != NULL; k++)
      if (strstr(error->message, cases[i].fragments[k]) == NULL)
        g_error("%s: '%s' does not mention '%s'", cases[i].file, error->message,
                cases[i].fragments[k]);
  }
}

/* The H100 node with one key's text replaced, read from JSON. */
static StCluster *
h100_with(const char *from, const char *to, GError **error)
{
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_assert_nonnull(strstr(text, from));
  g_autoptr(GString) changed = g_string_new(text);
  g_string_replace(changed, from, to, 1);
  g_autoptr(cJSON) root = cJSON_Parse(changed->str);
  g_assert_nonnull(root);
  return st_cluster_from_json(root, "h100.json", error);
}

static void
expect_refused(const char *from, const char *to, const char *const *fragments)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) c = h100_with(from, to, &error);
  g_assert_null(c);
  g_assert_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID);
  for (int i = 0; fragments[i] != NULL; i++)
    if (strstr(error->message, fragments[i]) == NULL)
      g_error("'%s' lacks '%s'", error->message, fragments[i]);
}

/* Numbers that parse but no hardware has are refused with the file, the key
 * and the value (issue 15: 1e-300 GB/s gave negative timestamps and exit 0). */
static void
test_physical_ranges(void)
{
  expect_refused("\"450GB/s\"", "\"1e-300GB/s\"",
                 (const char *const[]){"h100.json", "links.intra_node", "'bandwidth'",
                                       "'1e-300GB/s'", "below", "1MB/s", NULL});
  expect_refused("\"989TFLOP/s\"", "\"1e-300TFLOP/s\"",
                 (const char *const[]){"gpu.flops", "'bf16'", "'1e-300TFLOP/s'", NULL});
  expect_refused("\"67TFLOP/s\"", "\"1e30TFLOP/s\"",
                 (const char *const[]){"'fp32'", "above", "100PFLOP/s", NULL});
  expect_refused("\"2us\"", "\"2000s\"",
                 (const char *const[]){"'latency'", "'2000s'", "1s", NULL});
  expect_refused("\"81090MiB\"", "\"1kB\"", (const char *const[]){"'memory'", "1MiB", NULL});
  expect_refused("\"3.35TB/s\"", "\"0B/s\"",
                 (const char *const[]){"'memory_bandwidth'", "'0B/s'", NULL});
  /* The edges themselves are accepted. */
  g_autoptr(StCluster) slow = h100_with("\"450GB/s\"", "\"1MB/s\"", NULL);
  g_assert_nonnull(slow);
  g_assert_cmpfloat(slow->links[ST_LINK_INTRA_NODE].bandwidth, ==, 1e6);
}

/* nodes x gpus_per_node is formed in 64 bits and bounded: 2^20 x 4096 once
 * wrapped to "0 x H100" and an error about --ranks. */
static void
test_gpu_count_overflow(void)
{
  expect_refused("\"nodes\": 1,", "\"nodes\": 1048576, \"gpus_per_node\": 4096,",
                 (const char *const[]){"h100.json", "'nodes'", "'gpus_per_node'",
                                       "4294967296 GPUs", NULL});
  /* --nodes on a wide node: the option is named, not --ranks. */
  g_autoptr(StCluster) wide = h100_with("\"gpus_per_node\": 8", "\"gpus_per_node\": 65536",
                                        NULL);
  g_assert_nonnull(wide);
  g_autoptr(GError) error = NULL;
  g_assert_false(st_cluster_resize(wide, 1000000, 0, &error));
  g_assert_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "--nodes 1000000"));
  g_assert_nonnull(strstr(error->message, "65536000000 GPUs"));
  g_assert_cmpint(wide->nodes, ==, 1);
  /* 2^62 nodes: out of range, not "not an integer". */
  g_clear_error(&error);
  expect_refused("\"nodes\": 1,", "\"nodes\": 4611686018427387904,",
                 (const char *const[]){"'nodes'", "4611686018427387904 is out of range", NULL});
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cluster/shipped/dgx-h100", test_dgx_h100);
  g_test_add_func("/cluster/shipped/dgx-h200", test_dgx_h200);
  g_test_add_func("/cluster/shipped/dgx-a100", test_dgx_a100);
  g_test_add_func("/cluster/shipped/dgx-v100", test_dgx_v100);
  g_test_add_func("/cluster/shipped/summit", test_summit);
  g_test_add_func("/cluster/round-trip", test_round_trip);
  g_test_add_func("/cluster/resize", test_resize);
  g_test_add_func("/cluster/resize-needs-inter-node", test_resize_needs_inter_node);
  g_test_add_func("/cluster/keep-gpus-per-node", test_keep_gpus_per_node);
  g_test_add_func("/cluster/links-and-groups", test_links_and_groups);
  g_test_add_func("/cluster/bad-files", test_bad_files);
  g_test_add_func("/cluster/physical-ranges", test_physical_ranges);
  g_test_add_func("/cluster/gpu-count-overflow", test_gpu_count_overflow);
  return g_test_run();
}
