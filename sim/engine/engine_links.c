/* engine_links.c: which links a flow loads (see engine_internal.h).
 *
 * A use list is built over the real links of the cluster (cluster/links.h)
 * from what the plan says (StLinkUse) and where the real members sit, then
 * folded onto the representatives (engine_link_reps.c): a device's own
 * links onto its representative device's, a NIC or leaf onto the first
 * alike, so that links that behave alike share one slot. A simulated flow stands for the
 * real flows of the ranks folded into its sender (one collective for a
 * group: its members are all represented inside it), and loads each
 * representative with the most that any link it stands for carries from
 * them: exact when they are symmetric, and never an underestimate of the
 * bottleneck when they are not (a group with more devices on one node than
 * another). Unfolded, every link stands for itself.
 *
 * Lists are cached by what determines them: (comm, group, use) for a
 * collective phase, (sender, comm, peer, scale) for a transfer, (device,
 * link) for a copy. Building one keeps real links' loads in a scratch map
 * only until they are complete: a collective over a million devices folds
 * each node's loads before the next node's, so it holds one node's links,
 * not the cluster's.
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

void
links_init(Engine *e)
{
  e->links = g_array_new(FALSE, TRUE, sizeof(NetLink));
  e->lists = g_hash_table_new_full(key_hash, key_equal, g_free, NULL);
  e->trace = e->tl->net = st_net_trace_new();
  link_map_init(&e->slot_of);
  link_map_init(&e->acc);
  link_map_init(&e->best);
  link_reps_init(e);
  guint n_comms = e->s->comms->len;
  e->comm_canon = g_new(int32_t, MAX(n_comms, 1));
  for (guint c = 0; c < n_comms; c++) {
    const StComm *comm = st_schedule_comm(e->s, c);
    guint same = 0;
    while (same < c && st_schedule_comm(e->s, same)->group_of != comm->group_of)
      same++;
    e->comm_canon[c] = (int32_t)same;
  }
}

void
links_clear(Engine *e)
{
  for (guint i = 0; e->links != NULL && i < e->links->len; i++)
    g_free(g_array_index(e->links, NetLink, i).on);
  g_clear_pointer(&e->links, g_array_unref);
  g_clear_pointer(&e->lists, g_hash_table_unref);
  link_reps_clear(e);
  g_clear_pointer(&e->comm_canon, g_free);
  link_map_clear(&e->slot_of);
  link_map_clear(&e->acc);
  link_map_clear(&e->best);
  g_clear_pointer(&e->rep_offsets, g_free);
  g_clear_pointer(&e->rep_ranks, g_free);
}

/* The ranks each simulated rank stands for, in rank order (folded runs),
 * made when a transfer first needs them. */
static void
need_rep_ranks(Engine *e)
{
  if (e->rep_offsets != NULL)
    return;
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

/* The slot of a representative link, made on first use. */
static int
slot_of(Engine *e, int link)
{
  const LinkMapEntry *known = link_map_find(&e->slot_of, link);
  if (known != NULL)
    return known->i;
  const StCluster *c = e->s->cluster;
  StNetKind kind = st_net_link_kind(c, link);
  StNetLink info = {
    .name = st_net_link_name(c, link),
    .id = link,
    .kind = (uint8_t)kind,
    .link_class = (uint8_t)st_net_kind_class(kind),
    .sends = st_net_kind_sends(kind),
    .capacity = st_net_link_capacity(c, link),
    .stands_for = link_stands_for(e, link),
  };
  g_array_append_val(e->trace->links, info);
  NetLink state = {.capacity = info.capacity};
  g_array_append_val(e->links, state);
  return link_map_get(&e->slot_of, link)->i = (int32_t)e->links->len - 1;
}

/* ---- building a list ---------------------------------------------------------- */

static inline void
load(Engine *e, int link, double coef)
{
  if (coef <= 0)
    return;
  link_map_get(&e->acc, link)->d += coef;
}

/* The accumulated loads of real links, each complete (no later load adds
 * to them), folded onto their representatives: the most any link of a
 * representative carries. Clears them. O(links loaded). */
static void
fold_loads(Engine *e)
{
  for (guint i = 0; i < link_map_len(&e->acc); i++) {
    int link = link_map_key(&e->acc, i);
    double coef = link_map_find(&e->acc, link)->d;
    LinkMapEntry *b = link_map_get(&e->best, link_rep(e, link));
    b->d = MAX(b->d, coef);
  }
  link_map_reset(&e->acc);
}

/* The loads, folded onto representatives in the order their links were
 * first loaded, as a new list; clears the scratch. */
static int
emit(Engine *e)
{
  fold_loads(e);
  guint k = link_map_len(&e->best);
  g_autofree StNetUse *uses = g_new(StNetUse, MAX(k, 1));
  for (guint i = 0; i < k; i++) {
    int rep = link_map_key(&e->best, i);
    double coef = link_map_find(&e->best, rep)->d;
    uses[i] = (StNetUse){slot_of(e, rep), coef};
  }
  link_map_reset(&e->best);
  g_return_val_if_fail(k > 0, st_net_trace_add_list(e->trace, uses, 0));
  return st_net_trace_add_list(e->trace, uses, (int)k);
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

/* A node of a collective's group, for passing over nodes alike: its class,
 * its devices in the group (bit i: its i-th GPU), the class of the leaf it
 * loads (-1: none). */
typedef struct {
  int32_t node_class, leaf_class;
  guint64 mask;
} NodeKey;

static guint
node_key_hash(gconstpointer p)
{
  const NodeKey *k = p;
  guint64 h = ((guint64)(guint32)k->node_class * 16777619u) ^ (guint32)k->leaf_class;
  h = h * 1099511628211ull ^ k->mask;
  return (guint)(h ^ (h >> 32));
}

static gboolean
node_key_equal(gconstpointer a, gconstpointer b)
{
  return memcmp(a, b, sizeof(NodeKey)) == 0;
}

int
links_collective(Engine *e, int comm, int group, const StLinkUse *use, const StGroupShape *shape)
{
  /* Communicators with the same groups load the same links. */
  comm = links_canon(e, comm);
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
  /* Folded, a node alike one before (same class, same devices in the group,
   * the same leaf load) loads the same representatives as much, so it
   * adds nothing: a group over a million identical GPUs folds one node. */
  int gpn = c->gpus_per_node;
  gboolean pass_alike = e->reps.folded && gpn <= 64;
  g_autoptr(GHashTable) seen =
    pass_alike ? g_hash_table_new_full(node_key_hash, node_key_equal, g_free, NULL) : NULL;
  NodeKey last = {-1, -1, 0};
  for (int i0 = 0; i0 < nd;) {
    int node = st_cluster_node_of(c, dev[i0]), i1 = i0 + 1;
    while (i1 < nd && st_cluster_node_of(c, dev[i1]) == node)
      i1++;
    int leaf = st_net_leaf_of(c, node);
    gboolean last_of_leaf =
      i1 == nd || st_net_leaf_of(c, st_cluster_node_of(c, dev[i1])) != leaf;
    gboolean load_leaf = leaves && last_of_leaf;
    if (pass_alike) {
      NodeKey k = {e->reps.node_class[node], load_leaf ? e->reps.leaf_first[leaf] : -1, 0};
      for (int i = i0; i < i1; i++)
        k.mask |= G_GUINT64_CONSTANT(1) << (dev[i] - node * gpn);
      gboolean alike = node_key_equal(&k, &last) || g_hash_table_contains(seen, &k);
      last = k;
      if (alike) {
        i0 = i1;
        continue;
      }
      g_hash_table_add(seen, g_memdup2(&k, sizeof k));
    }
    for (int i = i0; i < i1; i++) {
      int d = dev[i];
      for (int in = 0; in < 2; in++) {
        load(e, st_net_gpu_link(c, d, in ? ST_NET_GPU_IN : ST_NET_GPU_OUT), use->gpu);
        load(e, st_net_nic_link(c, st_net_nic_of(c, d), !in), use->nic_dev);
      }
      load(e, st_net_gpu_link(c, d, ST_NET_MEM), use->mem);
    }
    /* The node's traffic over its devices' NICs, and its leaf's (once per
     * leaf). */
    double per_device = use->nic_node / (i1 - i0);
    for (int j = i0; j < i1; j++)
      for (int in = 0; in < 2; in++)
        load(e, st_net_nic_link(c, st_net_nic_of(c, dev[j]), !in), per_device);
    if (load_leaf)
      for (int down = 0; down < 2; down++)
        load(e, st_net_leaf_link(c, leaf, !down), use->leaf);
    /* Nothing after this node loads its links (devices are in order), so
     * the scratch holds one node at a time. */
    fold_loads(e);
    i0 = i1;
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
  if (!e->reps.folded) {
    int peer = st_schedule_peer_rank(s, rank, op->comm, op->peer);
    load_transfer(e, s->ranks[rank].device, s->ranks[peer].device, scale);
  } else {
    need_rep_ranks(e);
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
