/* cluster.h: GPUs, nodes and the links between them.
 *
 *   {"name": "dgx-h100", "nodes": 1, "gpus_per_node": 8,
 *    "gpu": {"name": "H100-SXM", "memory": "80GiB",
 *            "flops": {"bf16": "989TFLOP/s", "fp32": "67TFLOP/s"},
 *            "memory_bandwidth": "3.35TB/s"},
 *    "links": {"intra_node": {"bandwidth": "450GB/s", "latency": "2us", "topology": "switch"},
 *              "inter_node": {"bandwidth": "50GB/s", "latency": "5us", "topology": "switch"},
 *              "pcie":       {"bandwidth": "64GB/s", "latency": "1us"}}}
 *
 * Every quantity carries its unit. `bandwidth` is one direction, per GPU
 * (intra_node, pcie) or per NIC (inter_node); `topology` (optional, default
 * "switch") is "switch" (any pair at full per-GPU bandwidth) or "ring" (GPUs
 * talk to their ring neighbours; collectives use rings). `intra_node` is
 * required when a node has several GPUs, `inter_node` when there are several
 * nodes; `pcie` is optional (host copies). GPU `flops` keys: fp32 (required,
 * the last fallback), tf32, fp16, bf16, fp8. GPU `performance` (optional):
 * the GPU performance file (gpu_perf.h: achievable rates, with their
 * sources), a path relative to the cluster file or the object itself;
 * default models/gpus/default.json. GPU `power_limit_w` (optional): a power
 * cap in watts (nvidia-smi -pl), under which math runs at the share of its
 * rated speed the performance file's power curve gives. Optional top-level
 * keys: `note`
 * (free text: where the numbers come from) and `gpus` (GPUs in use; written
 * by st_cluster_to_json so a resized cluster reads back equal).
 *
 * The network between nodes (optional keys of `inter_node`, see
 * cluster/links.h for the links they make): `nics` NICs per node (default
 * one per GPU, as rail-optimised nodes have; GPU i of a node uses NIC
 * i * nics / gpus_per_node), `leaf_nodes` nodes under one leaf switch
 * (default 1) and `oversubscription` of each leaf's uplink into the core
 * (default 1: non-blocking; 2 means the uplink carries half of what the
 * leaf's NICs inject).
 *
 * `--gpus-per-node K` keeps K of the node's GPUs, `--nodes N` makes N copies
 * of the node, `--gpus G` uses the first G GPUs. GPU g sits on node
 * g / gpus_per_node.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "base/kinds.h"
#include "cluster/gpu_perf.h"

#define ST_CLUSTER_ERROR (st_cluster_error_quark())
GQuark st_cluster_error_quark(void);

typedef enum {
  ST_TOPO_SWITCH = 0,
  ST_TOPO_RING,
} StTopology;

typedef struct {
  gboolean present;
  double bandwidth;   /* bytes/s per GPU, one direction */
  int64_t latency_ns; /* per message: the alpha of alpha-beta models */
  StTopology topology;
} StLink;

/* The network between nodes (inter_node's optional keys). */
typedef struct {
  int nics;                /* NICs per node, 1 .. gpus_per_node */
  int leaf_nodes;          /* nodes under one leaf switch, >= 1 */
  double oversubscription; /* leaf uplink = leaf's NIC bandwidth / this, >= 1 */
} StFabric;

typedef struct {
  char *name;                    /* matched against a profile's "device" */
  int64_t memory_bytes;
  double flops[ST_DTYPE_N];      /* peak FLOP/s per dtype; 0 when not given */
  double tf32_flops;             /* 0 when not given */
  double fp8_flops;              /* dense FP8 tensor-core peak (Hopper and later); 0 when not
                                    given: the GPU cannot train in fp8 */
  double memory_bandwidth;       /* bytes/s */
  double power_limit_w;          /* `power_limit_w`: a cap below the GPU's rated power
                                    (its performance file's power.tdp_w), W; 0: none */
  StGpuPerf *perf;               /* what it achieves (gpu_perf.h): the file `performance`
                                    names, else models/gpus/default.json; shared by copies */
} StGpuSpec;

typedef struct {
  char *name;
  char *path;         /* the file it came from, or NULL */
  int nodes;
  int gpus_per_node;
  int gpus;           /* GPUs in use: nodes * gpus_per_node unless --gpus said fewer */
  StGpuSpec gpu;
  StLink links[ST_LINK_N]; /* ST_LINK_LOCAL is derived from the GPU's memory bandwidth */
  StFabric fabric;
} StCluster;

StCluster *st_cluster_load(const char *path, GError **error);
struct cJSON;
StCluster *st_cluster_from_json(const struct cJSON *root, const char *origin, GError **error);
/* The description as JSON that st_cluster_from_json reads back to an equal
 * cluster (with the node count and GPUs in use). Transfer full. */
struct cJSON *st_cluster_to_json(const StCluster *cluster);
StCluster *st_cluster_copy(const StCluster *cluster);
void st_cluster_free(StCluster *cluster);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StCluster, st_cluster_free)

/* Applies --gpus-per-node: each node keeps `gpus_per_node` of its GPUs (1 ..
 * the file's; 0 leaves the node as it is), as a job placed with Slurm's
 * --gpus-per-node uses them. The node's NICs stay, at most one per GPU kept
 * (a GPU uses one NIC), and GPU i of a node uses NIC i * nics /
 * gpus_per_node, so the GPUs kept are spread over the NICs as evenly as
 * their counts divide: 4 of a Summit node's 6 GPUs, 2 on each of its 2 NICs.
 * GPUs in use: all of the new nodes when all were, else as many as fit.
 * Apply it before st_cluster_resize, whose --nodes copies the node it leaves.
 * Fails, naming the cluster's file and the option, for a count the node
 * does not hold or when a needed link class is missing. */
gboolean st_cluster_keep_gpus_per_node(StCluster *cluster, int gpus_per_node, GError **error);

/* Applies --nodes and --gpus (0 leaves each as it is). Fails, with the
 * cluster's file and the option in the message, when `gpus` exceeds what the
 * nodes hold, the GPUs would exceed ST_MAX_GPUS (base/limits.h), or a needed
 * link class is missing. */
gboolean st_cluster_resize(StCluster *cluster, int nodes, int gpus, GError **error);

static inline int
st_cluster_node_of(const StCluster *cluster, int gpu)
{
  return gpu / cluster->gpus_per_node;
}

/* Bytes/s of host memory traffic that the host CPU's optimizer step
 * (ZeRO-Offload's CPU-Adam, StStream.host) sustains over a whole node, its
 * GPUs' ranks sharing it. ESTIMATED, the same for every cluster (no cluster
 * file key yet): 100 GB/s, about half the STREAM peak of a two-socket
 * server's DDR4 (2 x 8 channels x 25.6 GB/s = 410 GB/s on a DGX A100's
 * EPYC 7742s; 2 x 6 x 21.3 = 256 GB/s on the DGX-2 of the ZeRO-Offload
 * paper), the share a vectorised Adam over 28 bytes per parameter reaches
 * (docs/LLM.md, "ZeRO-Offload"). */
double st_cluster_host_memory_bandwidth(const StCluster *cluster);

/* Peak FLOP/s for compute in `dtype`: bf16 falls back to fp16 and back. */
double st_cluster_peak_flops(const StCluster *cluster, StDtype dtype);

/* The link joining two GPUs: LOCAL for the same GPU, INTRA_NODE for the same
 * node, INTER_NODE otherwise. */
StLinkClass st_cluster_link_between(const StCluster *cluster, int gpu_a, int gpu_b);

/* Where a group of ranks sits on the cluster. */
typedef struct {
  int ranks;      /* members */
  int devices;    /* distinct devices among them */
  int nodes;      /* distinct nodes among them */
  int per_node;   /* most devices of the group on one node */
  int per_device; /* most members on one device */
  int per_nic;    /* most devices of the group on one NIC */
  int leaves;     /* distinct leaf switches among its nodes */
  double nic_share; /* most, over NICs, of the group's devices on the NIC over the group's
                       devices on its node: the share of a node's inter-node traffic that
                       its busiest NIC carries when the traffic is spread over the devices */
} StGroupShape;

/* The shape of a group whose i-th member sits on GPU member_gpus[i]. */
void st_cluster_group_shape(const StCluster *cluster, const int32_t *member_gpus, int n,
                            StGroupShape *shape);

/* Bandwidth and latency of a link class; LOCAL uses half the memory
 * bandwidth (a copy reads and writes) and no latency. */
double st_cluster_link_bandwidth(const StCluster *cluster, StLinkClass link);
int64_t st_cluster_link_latency(const StCluster *cluster, StLinkClass link);
