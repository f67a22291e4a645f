/* cluster_links.c: the links of a cluster (see links.h). */
#include "cluster/links.h"

static int
n_nics(const StCluster *c)
{
  return c->nodes * c->fabric.nics;
}

int
st_net_n_leaves(const StCluster *c)
{
  return (c->nodes + c->fabric.leaf_nodes - 1) / c->fabric.leaf_nodes;
}

int
st_net_n_links(const StCluster *c)
{
  return c->gpus * ST_NET_PER_GPU + 2 * n_nics(c) + 2 * st_net_n_leaves(c);
}

int
st_net_gpu_link(const StCluster *c, int gpu, StNetKind kind)
{
  g_return_val_if_fail(gpu >= 0 && gpu < c->gpus && kind <= ST_NET_MEM, -1);
  return gpu * ST_NET_PER_GPU + (int)kind;
}

int
st_net_nic_link(const StCluster *c, int nic, gboolean out)
{
  return c->gpus * ST_NET_PER_GPU + 2 * nic + (out ? 0 : 1);
}

int
st_net_leaf_of(const StCluster *c, int node)
{
  return node / c->fabric.leaf_nodes;
}

int
st_net_leaf_link(const StCluster *c, int leaf, gboolean up)
{
  return c->gpus * ST_NET_PER_GPU + 2 * n_nics(c) + 2 * leaf + (up ? 0 : 1);
}

gboolean
st_net_fabric_binds(const StCluster *c)
{
  return c->fabric.oversubscription > 1 && st_net_n_leaves(c) > 1;
}

StNetKind
st_net_link_kind(const StCluster *c, int link)
{
  int gpu_links = c->gpus * ST_NET_PER_GPU;
  if (link < gpu_links)
    return (StNetKind)(link % ST_NET_PER_GPU);
  link -= gpu_links;
  if (link < 2 * n_nics(c))
    return link % 2 == 0 ? ST_NET_NIC_OUT : ST_NET_NIC_IN;
  return (link - 2 * n_nics(c)) % 2 == 0 ? ST_NET_LEAF_UP : ST_NET_LEAF_DOWN;
}

double
st_net_link_capacity(const StCluster *c, int link)
{
  switch (st_net_link_kind(c, link)) {
  case ST_NET_GPU_OUT:
  case ST_NET_GPU_IN:
    return c->links[ST_LINK_INTRA_NODE].bandwidth;
  case ST_NET_PCIE_UP:
  case ST_NET_PCIE_DOWN:
    return c->links[ST_LINK_PCIE].bandwidth;
  case ST_NET_MEM:
    return st_cluster_link_bandwidth(c, ST_LINK_LOCAL);
  case ST_NET_NIC_OUT:
  case ST_NET_NIC_IN:
    return c->links[ST_LINK_INTER_NODE].bandwidth;
  case ST_NET_LEAF_UP:
  case ST_NET_LEAF_DOWN: {
    int leaf = (link - st_net_leaf_link(c, 0, TRUE)) / 2;
    int nodes = MIN(c->fabric.leaf_nodes, c->nodes - leaf * c->fabric.leaf_nodes);
    return nodes * c->fabric.nics * c->links[ST_LINK_INTER_NODE].bandwidth /
           c->fabric.oversubscription;
  }
  default:
    g_return_val_if_reached(0);
  }
}

StLinkClass
st_net_kind_class(StNetKind kind)
{
  switch (kind) {
  case ST_NET_GPU_OUT:
  case ST_NET_GPU_IN:
    return ST_LINK_INTRA_NODE;
  case ST_NET_PCIE_UP:
  case ST_NET_PCIE_DOWN:
    return ST_LINK_PCIE;
  case ST_NET_MEM:
    return ST_LINK_LOCAL;
  default:
    return ST_LINK_INTER_NODE;
  }
}

gboolean
st_net_kind_sends(StNetKind kind)
{
  return kind == ST_NET_GPU_OUT || kind == ST_NET_NIC_OUT || kind == ST_NET_PCIE_UP ||
         kind == ST_NET_PCIE_DOWN || kind == ST_NET_MEM;
}

const char *
st_net_kind_name(StNetKind kind)
{
  static const char *const names[ST_NET_KIND_N] = {
    "out", "in", "pcie up", "pcie down", "memory", "out", "in", "up", "down"};
  g_return_val_if_fail(kind < ST_NET_KIND_N, "?");
  return names[kind];
}

char *
st_net_link_name(const StCluster *c, int link)
{
  StNetKind kind = st_net_link_kind(c, link);
  int gpu_links = c->gpus * ST_NET_PER_GPU;
  if (kind <= ST_NET_MEM)
    return g_strdup_printf("gpu%d %s", link / ST_NET_PER_GPU, st_net_kind_name(kind));
  if (kind <= ST_NET_NIC_IN) {
    int nic = (link - gpu_links) / 2;
    return g_strdup_printf("node%d nic%d %s", nic / c->fabric.nics, nic % c->fabric.nics,
                           st_net_kind_name(kind));
  }
  int leaf = (link - st_net_leaf_link(c, 0, TRUE)) / 2;
  return g_strdup_printf("leaf%d %s", leaf, st_net_kind_name(kind));
}
