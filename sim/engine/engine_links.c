/* engine_links.c: which links a flow loads (see engine_internal.h).
 *
 * A use list is built over the real links of the cluster (cluster/links.h)
 * from what the plan says (StLinkUse) and where the real members sit, then
 * folded onto the representatives. Folding: a device's own links (NVLink
 * ports, PCIe, memory) are represented by its representative device's; a
 * shared link (a NIC, a leaf switch) by the same link of the first node (or
 * leaf) whose devices have the same representatives in the same order, and
 * within it by the first NIC with the same representatives behind it, so
 * that links that behave alike share one slot. A simulated flow stands for the
 * real flows of the ranks folded into its sender (one collective for a
 * group: its members are all represented inside it), and loads each
 * representative with the most that any link it stands for carries from
 * them: exact when they are symmetric, and never an underestimate of the
 * bottleneck when they are not (a group with more devices on one node than
 * another). Unfolded, every link stands for itself.
 *
 * Lists are cached by what determines them: (comm, group, use) for a
 * collective phase, (sender, comm, peer, scale) for a transfer, (device,
 * link) for a copy.
 */
#include "engine/engine_internal.h"

#include <string.h>

#include "base/util.h"

typedef enum { KEY_COLL = 1, KEY_P2P, KEY_COPY } KeyKind;

typedef struct {
  int32_t what, a, b, c;
  StLinkUse use; /* KEY_P2P: use.gpu holds the scale */
} UseKey;

static guint
key_hash(gconstpointer p)
{
  const UseKey *k = p;
  guint h = (guint)k->what * 16777619u ^ (guint)k->a;
  h = (h * 16777619u) ^ (guint)k->b;
  h = (h * 16777619u) ^ (guint)k->c;
  const double *d = &k->use.gpu;
  for (int i = 0; i < 5; i++) {
    uint64_t bits;
    memcpy(&bits, &d[i], sizeof bits);
    h = (h * 16777619u) ^ (guint)(bits ^ (bits >> 32));
  }
  return h;
}

static gboolean
key_equal(gconstpointer a, gconstpointer b)
{
  return memcmp(a, b, sizeof(UseKey)) == 0;
}

/* ---- representatives ------------------------------------------------------- */

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
  const int32_t *rep;       /* device_rep */
  const int32_t *node_first;
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
  return x->node_first + n0;
}

/* Shared links. Nodes whose devices have the same representatives, in the
 * same order, are alike: NIC k of each stands for NIC k of the others; and
 * within such a node, NICs whose devices have the same representatives are
 * alike (the devices behind them run the same ops, so the NICs carry the
 * same). Leaves whose nodes are alike, in the same order, are alike. */
static void
fold_shared_links(Engine *e)
{
  const StCluster *c = e->s->cluster;
  const int32_t *rep = e->fold->device_rep;
  int nics = c->fabric.nics, gpn = c->gpus_per_node;
  g_autofree int32_t *node_first = g_new(int32_t, c->nodes);
  FoldCtx x = {c, rep, node_first};
  classes(c->nodes, node_seq, &x, node_first);
  /* NIC k serves a node's GPUs lo[k] .. lo[k + 1] - 1 (i * nics / gpn = k). */
  g_autofree int32_t *lo = g_new(int32_t, nics + 1);
  for (int k = 0; k <= nics; k++)
    lo[k] = (k * gpn + nics - 1) / nics;
  g_autofree int32_t *nic_first = g_new(int32_t, (gsize)c->nodes * nics);
  for (int node = 0; node < c->nodes; node++) {
    int first = node_first[node];
    if (first == node) {
      /* A class's first node: its NICs with equal representatives behind. */
      int g0 = node * gpn, end = MIN(g0 + gpn, c->gpus) - g0;
      for (int k = 0; k < nics; k++) {
        int a = MIN(lo[k], end), n = MIN(lo[k + 1], end) - a;
        nic_first[node * nics + k] = k;
        for (int j = 0; j < k; j++) {
          int b = MIN(lo[j], end), m = MIN(lo[j + 1], end) - b;
          if (nic_first[node * nics + j] == j && m == n &&
              memcmp(rep + g0 + a, rep + g0 + b, sizeof(int32_t) * (size_t)n) == 0) {
            nic_first[node * nics + k] = j;
            break;
          }
        }
      }
    }
    for (int k = 0; k < nics; k++)
      for (int out = 0; out < 2; out++)
        e->rep_link[st_net_nic_link(c, node * nics + k, out)] =
          st_net_nic_link(c, first * nics + nic_first[first * nics + k], out);
  }
  int n_leaves = st_net_n_leaves(c);
  g_autofree int32_t *leaf_first = g_new(int32_t, n_leaves);
  classes(n_leaves, leaf_seq, &x, leaf_first);
  for (int leaf = 0; leaf < n_leaves; leaf++)
    for (int up = 0; up < 2; up++)
      e->rep_link[st_net_leaf_link(c, leaf, up)] = st_net_leaf_link(c, leaf_first[leaf], up);
}

void
links_init(Engine *e)
{
  const StCluster *c = e->s->cluster;
  int n = st_net_n_links(c);
  e->n_real_links = n;
  e->rep_link = g_new(int32_t, n);
  e->stands_for = g_new0(int32_t, n);
  e->slot_of = g_new(int32_t, n);
  e->acc = g_new0(double, n);
  e->best = g_new0(double, n);
  for (int l = 0; l < n; l++) {
    e->rep_link[l] = l;
    e->slot_of[l] = -1;
  }
  e->touched = g_new(int32_t, n);
  e->n_touched = 0;
  e->links = g_array_new(FALSE, TRUE, sizeof(NetLink));
  e->lists = g_hash_table_new_full(key_hash, key_equal, g_free, NULL);
  e->trace = e->tl->net = st_net_trace_new();
  if (e->fold->folded) {
    for (int d = 0; d < c->gpus; d++)
      for (int k = 0; k < ST_NET_PER_GPU; k++)
        e->rep_link[st_net_gpu_link(c, d, k)] = st_net_gpu_link(c, e->fold->device_rep[d], k);
    fold_shared_links(e);
    /* The ranks each simulated rank stands for, in rank order. */
    e->rep_offsets = g_new0(int32_t, e->n_sims + 1);
    e->rep_ranks = g_new(int32_t, e->s->n_ranks);
    for (int r = 0; r < e->s->n_ranks; r++)
      e->rep_offsets[e->sim_of_rank[e->fold->rank_rep[r]] + 1]++;
    for (int i = 0; i < e->n_sims; i++)
      e->rep_offsets[i + 1] += e->rep_offsets[i];
    g_autofree int32_t *fill = g_memdup2(e->rep_offsets, sizeof(int32_t) * e->n_sims);
    for (int r = 0; r < e->s->n_ranks; r++)
      e->rep_ranks[fill[e->sim_of_rank[e->fold->rank_rep[r]]]++] = r;
  }
  for (int l = 0; l < n; l++)
    e->stands_for[e->rep_link[l]]++;
}

void
links_clear(Engine *e)
{
  for (guint i = 0; e->links != NULL && i < e->links->len; i++)
    g_free(g_array_index(e->links, NetLink, i).on);
  g_clear_pointer(&e->links, g_array_unref);
  g_clear_pointer(&e->touched, g_free);
  g_clear_pointer(&e->lists, g_hash_table_unref);
  g_clear_pointer(&e->rep_link, g_free);
  g_clear_pointer(&e->stands_for, g_free);
  g_clear_pointer(&e->slot_of, g_free);
  g_clear_pointer(&e->acc, g_free);
  g_clear_pointer(&e->best, g_free);
  g_clear_pointer(&e->rep_offsets, g_free);
  g_clear_pointer(&e->rep_ranks, g_free);
}

/* The slot of a representative link, made on first use. */
static int
slot_of(Engine *e, int link)
{
  if (e->slot_of[link] >= 0)
    return e->slot_of[link];
  const StCluster *c = e->s->cluster;
  StNetKind kind = st_net_link_kind(c, link);
  StNetLink info = {
    .name = st_net_link_name(c, link),
    .id = link,
    .kind = (uint8_t)kind,
    .link_class = (uint8_t)st_net_kind_class(kind),
    .sends = st_net_kind_sends(kind),
    .capacity = st_net_link_capacity(c, link),
    .stands_for = e->stands_for[link],
  };
  g_array_append_val(e->trace->links, info);
  NetLink state = {.capacity = info.capacity};
  g_array_append_val(e->links, state);
  return e->slot_of[link] = (int32_t)e->links->len - 1;
}

/* ---- building a list ---------------------------------------------------------- */

static inline void
load(Engine *e, int link, double coef)
{
  if (coef <= 0)
    return;
  if (e->acc[link] == 0)
    e->touched[e->n_touched++] = link;
  e->acc[link] += coef;
}

/* The accumulated loads, folded onto representatives (the most any link of
 * a representative carries), as a new list; clears the scratch. O(links
 * touched). */
static int
emit(Engine *e)
{
  guint n = (guint)e->n_touched;
  g_autofree int32_t *reps = g_new(int32_t, MAX(n, 1));
  int k = 0;
  for (guint i = 0; i < n; i++) {
    int link = e->touched[i];
    int rep = e->rep_link[link];
    double coef = e->acc[link];
    e->acc[link] = 0;
    if (e->best[rep] == 0)
      reps[k++] = rep;
    e->best[rep] = MAX(e->best[rep], coef);
  }
  e->n_touched = 0;
  g_autofree StNetUse *uses = g_new(StNetUse, MAX(k, 1));
  for (int i = 0; i < k; i++) {
    uses[i] = (StNetUse){slot_of(e, reps[i]), e->best[reps[i]]};
    e->best[reps[i]] = 0;
  }
  g_return_val_if_fail(k > 0, st_net_trace_add_list(e->trace, uses, 0));
  return st_net_trace_add_list(e->trace, uses, k);
}

static int
cached(Engine *e, const UseKey *key)
{
  return GPOINTER_TO_INT(g_hash_table_lookup(e->lists, key)) - 1;
}

static int
remember(Engine *e, const UseKey *key, int list)
{
  g_hash_table_insert(e->lists, g_memdup2(key, sizeof *key), GINT_TO_POINTER(list + 1));
  return list;
}

int
links_collective(Engine *e, int comm, int group, const StLinkUse *use, const StGroupShape *shape)
{
  UseKey key = {KEY_COLL, comm, group, 0, *use};
  int list = cached(e, &key);
  if (list >= 0)
    return list;
  const StCluster *c = e->s->cluster;
  const StComm *cm = st_schedule_comm(e->s, comm);
  /* The group's distinct devices (members are sorted by rank, not device). */
  int n = cm->offsets[group + 1] - cm->offsets[group];
  g_autofree int32_t *dev = g_new(int32_t, MAX(n, 1));
  for (int i = 0; i < n; i++)
    dev[i] = e->s->ranks[cm->members[cm->offsets[group] + i]].device;
  gboolean sorted = TRUE;
  for (int i = 1; i < n && sorted; i++)
    sorted = dev[i - 1] <= dev[i];
  if (!sorted)
    qsort(dev, (size_t)n, sizeof(int32_t), st_compare_int32);
  int nd = 0;
  for (int i = 0; i < n; i++)
    if (nd == 0 || dev[i] != dev[nd - 1])
      dev[nd++] = dev[i];
  gboolean leaves = shape->leaves > 1 && st_net_fabric_binds(c);
  for (int i = 0, node_start = 0; i < nd; i++) {
    int d = dev[i], node = st_cluster_node_of(c, d);
    for (int in = 0; in < 2; in++) {
      load(e, st_net_gpu_link(c, d, in ? ST_NET_GPU_IN : ST_NET_GPU_OUT), use->gpu);
      load(e, st_net_nic_link(c, st_net_nic_of(c, d), !in), use->nic_dev);
    }
    load(e, st_net_gpu_link(c, d, ST_NET_MEM), use->mem);
    if (i + 1 < nd && st_cluster_node_of(c, dev[i + 1]) == node)
      continue;
    /* The last device of its node: the node's traffic over its devices' NICs,
     * and its leaf's (once per leaf). */
    double per_device = use->nic_node / (i + 1 - node_start);
    for (int j = node_start; j <= i; j++)
      for (int in = 0; in < 2; in++)
        load(e, st_net_nic_link(c, st_net_nic_of(c, dev[j]), !in), per_device);
    int leaf = st_net_leaf_of(c, node);
    gboolean last_of_leaf = i + 1 == nd || st_net_leaf_of(c, st_cluster_node_of(c, dev[i + 1])) != leaf;
    if (leaves && last_of_leaf)
      for (int down = 0; down < 2; down++)
        load(e, st_net_leaf_link(c, leaf, !down), use->leaf);
    node_start = i + 1;
  }
  return remember(e, &key, emit(e));
}

/* One real transfer from device a to device b, `scale` per byte of the unit use. */
static void
load_transfer(Engine *e, int a, int b, double scale)
{
  const StCluster *c = e->s->cluster;
  switch (st_cluster_link_between(c, a, b)) {
  case ST_LINK_LOCAL:
    load(e, st_net_gpu_link(c, a, ST_NET_MEM), scale);
    return;
  case ST_LINK_INTRA_NODE:
    load(e, st_net_gpu_link(c, a, ST_NET_GPU_OUT), scale);
    load(e, st_net_gpu_link(c, b, ST_NET_GPU_IN), scale);
    return;
  default: {
    load(e, st_net_nic_link(c, st_net_nic_of(c, a), TRUE), scale);
    load(e, st_net_nic_link(c, st_net_nic_of(c, b), FALSE), scale);
    int la = st_net_leaf_of(c, st_cluster_node_of(c, a));
    int lb = st_net_leaf_of(c, st_cluster_node_of(c, b));
    if (la != lb && st_net_fabric_binds(c)) {
      load(e, st_net_leaf_link(c, la, TRUE), scale);
      load(e, st_net_leaf_link(c, lb, FALSE), scale);
    }
  }
  }
}

int
links_p2p(Engine *e, int sim, const StOp *op, double scale)
{
  int rank = e->sims[sim].rank;
  UseKey key = {KEY_P2P, rank, op->comm, op->peer, {.gpu = scale, .mem = 0}};
  int list = cached(e, &key);
  if (list >= 0)
    return list;
  const StSchedule *s = e->s;
  if (e->rep_offsets == NULL) {
    int peer = st_schedule_peer_rank(s, rank, op->comm, op->peer);
    load_transfer(e, s->ranks[rank].device, s->ranks[peer].device, scale);
  } else {
    /* Every rank this one stands for sends to its own peer. */
    for (int i = e->rep_offsets[sim]; i < e->rep_offsets[sim + 1]; i++) {
      int r = e->rep_ranks[i];
      int peer = st_schedule_peer_rank(s, r, op->comm, op->peer);
      load_transfer(e, s->ranks[r].device, s->ranks[peer].device, scale);
    }
  }
  return remember(e, &key, emit(e));
}

int
links_copy(Engine *e, int device, StNetKind kind)
{
  UseKey key = {KEY_COPY, device, (int32_t)kind, 0, {.gpu = 0, .mem = 0}};
  int list = cached(e, &key);
  if (list >= 0)
    return list;
  load(e, st_net_gpu_link(e->s->cluster, device, kind), 1);
  return remember(e, &key, emit(e));
}
