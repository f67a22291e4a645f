/* engine_link_reps.c: which representative link stands for a real link of
 * the cluster (cluster/links.h), and for how many (see engine_links.c for
 * what the representatives are for).
 *
 * A device's own links (NVLink ports, PCIe, memory) are represented by its
 * representative device's; a shared link (a NIC, a leaf switch) by the same
 * link of the first node (or leaf) whose devices have the same
 * representatives in the same order, and within that node by the first NIC
 * with the same representatives behind it. Unfolded, every link stands for
 * itself.
 *
 * Nothing here is per link: the answer is computed from the fold's
 * device_rep, a class per node and per leaf, and a count per representative
 * device, so a folded cluster of a million GPUs (7 million links) costs a
 * few bytes per node. link_rep and link_stands_for are O(1).
 */
#include "engine/engine_internal.h"

#include <string.h>

/* FNV-1a over `n` ints. */
static guint64
hash_ints(const int32_t *v, int n)
{
  guint64 h = 14695981039346656037ull;
  for (int i = 0; i < n; i++)
    h = (h ^ (guint32)v[i]) * 1099511628211ull;
  return h ^ (guint64)n;
}

/* Classes of equal int sequences: seq(i) of length len(i) for i in
 * [0, count); first[i] is the first i' with the same sequence. A hash
 * collision between different sequences only splits a class, which stays
 * exact. O(total length). */
typedef const int32_t *(*SeqFn)(gpointer data, int i, int *len);

static void
classes(int count, SeqFn seq, gpointer data, int32_t *first)
{
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  for (int i = 0; i < count; i++) {
    int n;
    const int32_t *v = seq(data, i, &n);
    guint64 h = hash_ints(v, n);
    gpointer found;
    first[i] = i;
    if (g_hash_table_lookup_extended(seen, &h, NULL, &found)) {
      int j = GPOINTER_TO_INT(found), m;
      const int32_t *w = seq(data, j, &m);
      if (m == n && memcmp(v, w, sizeof(int32_t) * (size_t)n) == 0)
        first[i] = j;
    } else {
      g_hash_table_insert(seen, g_memdup2(&h, sizeof h), GINT_TO_POINTER(i));
    }
  }
}

typedef struct {
  const StCluster *c;
  const int32_t *rep;        /* device_rep */
  const int32_t *node_class; /* dense, equal for nodes with equal sequences */
} FoldCtx;

/* A node's devices' representatives, in the node's order. */
static const int32_t *
node_seq(gpointer data, int node, int *len)
{
  const FoldCtx *x = data;
  int g0 = node * x->c->gpus_per_node, g1 = MIN(g0 + x->c->gpus_per_node, x->c->gpus);
  *len = MAX(g1 - g0, 0);
  return x->rep + MIN(g0, x->c->gpus);
}

/* A leaf's nodes' classes, in order. */
static const int32_t *
leaf_seq(gpointer data, int leaf, int *len)
{
  const FoldCtx *x = data;
  int n0 = leaf * x->c->fabric.leaf_nodes, n1 = MIN(n0 + x->c->fabric.leaf_nodes, x->c->nodes);
  *len = n1 - n0;
  return x->node_class + n0;
}

/* Shared links. Nodes whose devices have the same representatives, in the
 * same order, are alike: NIC k of each stands for NIC k of the others; and
 * within such a node, NICs whose devices have the same representatives are
 * alike (the devices behind them run the same ops, so the NICs carry the
 * same). Leaves whose nodes are alike, in the same order, are alike. */
static void
fold_shared_links(LinkReps *lr, const StCluster *c)
{
  int nics = c->fabric.nics, gpn = c->gpus_per_node;
  lr->node_class = g_new(int32_t, MAX(c->nodes, 1));
  FoldCtx x = {c, lr->device_rep, lr->node_class};
  classes(c->nodes, node_seq, &x, lr->node_class);
  int n_classes = 0;
  for (int node = 0; node < c->nodes; node++)
    n_classes += lr->node_class[node] == node;
  lr->class_node = g_new(int32_t, MAX(n_classes, 1));
  lr->class_count = g_new0(int32_t, MAX(n_classes, 1));
  lr->class_nic = g_new(int32_t, (gsize)MAX(n_classes, 1) * nics);
  lr->class_nic_count = g_new0(int32_t, (gsize)MAX(n_classes, 1) * nics);
  /* NIC k serves a node's GPUs lo[k] .. lo[k + 1] - 1 (i * nics / gpn = k). */
  g_autofree int32_t *lo = g_new(int32_t, nics + 1);
  for (int k = 0; k <= nics; k++)
    lo[k] = (k * gpn + nics - 1) / nics;
  const int32_t *rep = lr->device_rep;
  for (int node = 0, next = 0; node < c->nodes; node++) {
    if (lr->node_class[node] != node) {
      /* Its class's first node came before and holds its dense id. */
      lr->node_class[node] = lr->node_class[lr->node_class[node]];
      lr->class_count[lr->node_class[node]]++;
      continue;
    }
    int cls = next++;
    lr->node_class[node] = cls;
    lr->class_node[cls] = node;
    lr->class_count[cls] = 1;
    /* A class's first node: its NICs with equal representatives behind. */
    int32_t *nic_first = lr->class_nic + (gsize)cls * nics;
    int g0 = node * gpn, end = MIN(g0 + gpn, c->gpus) - g0;
    for (int k = 0; k < nics; k++) {
      int a = MIN(lo[k], end), n = MIN(lo[k + 1], end) - a;
      nic_first[k] = k;
      for (int j = 0; j < k; j++) {
        int b = MIN(lo[j], end), m = MIN(lo[j + 1], end) - b;
        if (nic_first[j] == j && m == n &&
            memcmp(rep + g0 + a, rep + g0 + b, sizeof(int32_t) * (size_t)n) == 0) {
          nic_first[k] = j;
          break;
        }
      }
      lr->class_nic_count[(gsize)cls * nics + nic_first[k]]++;
    }
  }
  int n_leaves = st_net_n_leaves(c);
  lr->leaf_first = g_new(int32_t, MAX(n_leaves, 1));
  lr->leaf_count = g_new0(int32_t, MAX(n_leaves, 1));
  classes(n_leaves, leaf_seq, &x, lr->leaf_first);
  for (int leaf = 0; leaf < n_leaves; leaf++)
    lr->leaf_count[lr->leaf_first[leaf]]++;
}

void
link_reps_init(Engine *e)
{
  LinkReps *lr = &e->reps;
  const StCluster *c = e->s->cluster;
  *lr = (LinkReps){.folded = e->fold->folded, .device_rep = e->fold->device_rep};
  link_map_init(&lr->device_count);
  if (!lr->folded)
    return;
  /* Devices per representative, by runs of equal representatives. */
  for (int d = 0; d < c->gpus;) {
    int run = 1, rep = lr->device_rep[d];
    while (d + run < c->gpus && lr->device_rep[d + run] == rep)
      run++;
    link_map_get(&lr->device_count, rep)->i += run;
    d += run;
  }
  fold_shared_links(lr, c);
}

void
link_reps_clear(Engine *e)
{
  LinkReps *lr = &e->reps;
  link_map_clear(&lr->device_count);
  g_clear_pointer(&lr->node_class, g_free);
  g_clear_pointer(&lr->class_node, g_free);
  g_clear_pointer(&lr->class_count, g_free);
  g_clear_pointer(&lr->class_nic, g_free);
  g_clear_pointer(&lr->class_nic_count, g_free);
  g_clear_pointer(&lr->leaf_first, g_free);
  g_clear_pointer(&lr->leaf_count, g_free);
}

/* Where a real link sits: a GPU's (index, kind), a NIC (index, out) or a
 * leaf (index, up). */
typedef struct {
  StNetKind kind;
  int index;
  gboolean first_dir; /* NIC out, leaf up */
} Place;

static Place
place_of(const StCluster *c, int link)
{
  int gpu_links = c->gpus * ST_NET_PER_GPU;
  if (link < gpu_links)
    return (Place){(StNetKind)(link % ST_NET_PER_GPU), link / ST_NET_PER_GPU, FALSE};
  int x = link - gpu_links, nic_links = 2 * c->nodes * c->fabric.nics;
  if (x < nic_links)
    return (Place){x % 2 == 0 ? ST_NET_NIC_OUT : ST_NET_NIC_IN, x / 2, x % 2 == 0};
  x -= nic_links;
  return (Place){x % 2 == 0 ? ST_NET_LEAF_UP : ST_NET_LEAF_DOWN, x / 2, x % 2 == 0};
}

int
link_rep(const Engine *e, int link)
{
  const LinkReps *lr = &e->reps;
  if (!lr->folded)
    return link;
  const StCluster *c = e->s->cluster;
  Place p = place_of(c, link);
  int nics = c->fabric.nics;
  switch (p.kind) {
  case ST_NET_NIC_OUT:
  case ST_NET_NIC_IN: {
    int cls = lr->node_class[p.index / nics];
    int k = lr->class_nic[(gsize)cls * nics + p.index % nics];
    return st_net_nic_link(c, lr->class_node[cls] * nics + k, p.first_dir);
  }
  case ST_NET_LEAF_UP:
  case ST_NET_LEAF_DOWN:
    return st_net_leaf_link(c, lr->leaf_first[p.index], p.first_dir);
  default:
    return st_net_gpu_link(c, lr->device_rep[p.index], p.kind);
  }
}

int
link_stands_for(const Engine *e, int rep)
{
  const LinkReps *lr = &e->reps;
  if (!lr->folded)
    return 1;
  const StCluster *c = e->s->cluster;
  Place p = place_of(c, rep);
  int nics = c->fabric.nics;
  switch (p.kind) {
  case ST_NET_NIC_OUT:
  case ST_NET_NIC_IN: {
    int cls = lr->node_class[p.index / nics];
    return lr->class_count[cls] * lr->class_nic_count[(gsize)cls * nics + p.index % nics];
  }
  case ST_NET_LEAF_UP:
  case ST_NET_LEAF_DOWN:
    return lr->leaf_count[p.index];
  default: {
    const LinkMapEntry *n = link_map_find(&lr->device_count, p.index);
    return n != NULL ? n->i : 0;
  }
  }
}
