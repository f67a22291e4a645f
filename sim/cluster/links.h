/* links.h: the links of a cluster that transfers cross.
 *
 * Every link is one direction of one piece of hardware with a capacity in
 * bytes/s; concurrent transfers share it (the engine's max-min sharing,
 * sim/engine/engine_share.c). Per GPU: its NVLink / NVSwitch injection (out)
 * and ejection (in) ports at the intra_node bandwidth, its PCIe link to the
 * host in each direction, and its memory (copies within the GPU, and ranks
 * that share it) at half the memory bandwidth. Per node: `fabric.nics` NICs,
 * each out and in at the inter_node bandwidth; GPU i of a node sends and
 * receives through NIC i * nics / gpus_per_node (GPUDirect RDMA: its PCIe
 * switch, not the host link). Per leaf switch (`fabric.leaf_nodes` nodes):
 * an uplink into the core and a downlink from it, each carrying the leaf's
 * NIC bandwidth over `fabric.oversubscription`; traffic between nodes under
 * different leaves crosses the sender's uplink and the receiver's downlink.
 * Rails are not modelled: any two NICs reach each other through the leaves.
 *
 * A link is an int in [0, st_net_n_links): the GPU links first (5 per GPU),
 * then the NICs (2 per NIC), then the leaves (2 per leaf), so ids are
 * computed, not stored. Pure functions of the cluster.
 */
#pragma once

#include <glib.h>

#include "cluster/cluster.h"

typedef enum {
  ST_NET_GPU_OUT = 0, /* NVLink / NVSwitch injection port */
  ST_NET_GPU_IN,      /* ejection port */
  ST_NET_PCIE_UP,     /* device to host */
  ST_NET_PCIE_DOWN,   /* host to device */
  ST_NET_MEM,         /* within the GPU's memory */
  ST_NET_NIC_OUT,
  ST_NET_NIC_IN,
  ST_NET_LEAF_UP,     /* leaf switch into the core */
  ST_NET_LEAF_DOWN,
  ST_NET_KIND_N,
} StNetKind;

#define ST_NET_PER_GPU 5

int st_net_n_links(const StCluster *cluster);
/* Kinds ST_NET_GPU_OUT .. ST_NET_MEM of `gpu`. */
int st_net_gpu_link(const StCluster *cluster, int gpu, StNetKind kind);
/* The NIC `gpu` uses, numbered over the cluster (node * nics + its NIC). */
static inline int
st_net_nic_of(const StCluster *c, int gpu)
{
  int local = gpu % c->gpus_per_node;
  return gpu / c->gpus_per_node * c->fabric.nics + local * c->fabric.nics / c->gpus_per_node;
}
int st_net_nic_link(const StCluster *cluster, int nic, gboolean out);
int st_net_n_leaves(const StCluster *cluster);
int st_net_leaf_of(const StCluster *cluster, int node);
int st_net_leaf_link(const StCluster *cluster, int leaf, gboolean up);
/* Whether the leaf links can ever bind: several leaves and an oversubscribed
 * core. Without, a leaf's uplink carries at most what its NICs inject, which
 * never exceeds its capacity, and the links need not be simulated. */
gboolean st_net_fabric_binds(const StCluster *cluster);

StNetKind st_net_link_kind(const StCluster *cluster, int link);
/* Bytes/s, one direction. */
double st_net_link_capacity(const StCluster *cluster, int link);
/* The link class whose traffic it carries: GPU ports intra_node, NICs and
 * leaves inter_node, PCIe pcie, memory local. */
StLinkClass st_net_kind_class(StNetKind kind);
/* Whether bytes crossing it count as bytes sent by a device: the sending
 * side of each transfer (GPU out, NIC out, both PCIe directions, memory), so
 * that a class's sent bytes count every transfer once. */
gboolean st_net_kind_sends(StNetKind kind);
/* "gpu3 out", "gpu3 pcie up", "gpu3 memory", "node1 nic2 out", "leaf0 up".
 * Transfer full. */
char *st_net_link_name(const StCluster *cluster, int link);
const char *st_net_kind_name(StNetKind kind);
