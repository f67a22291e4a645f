/* engine_links.c: which links a flow loads (see engine_internal.h).
 *
 * A use list is built over the real links of the cluster (cluster/links.h)
 * from what the plan says (StLinkUse) and where the real members sit, then
 * folded onto the representatives. Folding: a device's own links (NVLink
 * ports, PCIe, memory) are represented by its representative device's; a
 * shared link (a NIC, a leaf switch) by the first link with the same
 * signature: the representatives of the devices behind it, and of the
 * devices of its node (a NIC) or how many nodes it serves (a leaf), so that
 * links that behave alike share one slot. A simulated flow stands for the
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

/* A signature of sorted ints, as text. */
static void
append_sorted(GString *sig, int32_t *v, int n)
{
  qsort(v, (size_t)n, sizeof(int32_t), st_compare_int32);
  for (int i = 0; i < n; i++)
    g_string_append_printf(sig, "%d,", v[i]);
  g_string_append_c(sig, '|');
}

/* Shared links: the first link of each signature represents the others. */
static void
fold_shared_links(Engine *e)
{
  const StCluster *c = e->s->cluster;
  const int32_t *rep = e->fold->device_rep;
  int gpn = c->gpus_per_node, nics = c->fabric.nics;
  g_autoptr(GHashTable) first = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GString) sig = g_string_new(NULL);
  g_autofree int32_t *v = g_new(int32_t, MAX(c->gpus, 1));
  for (int node = 0; node < c->nodes; node++) {
    int g0 = node * gpn, g1 = MIN(g0 + gpn, c->gpus);
    for (int k = 0; k < nics; k++) {
      int n = 0, m = 0;
      g_string_printf(sig, "nic|");
      for (int g = g0; g < g1; g++)
        if (st_net_nic_of(c, g) == node * nics + k)
          v[n++] = rep[g];
      append_sorted(sig, v, n);
      for (int g = g0; g < g1; g++)
        v[m++] = rep[g];
      append_sorted(sig, v, m);
      gpointer nic;
      if (!g_hash_table_lookup_extended(first, sig->str, NULL, &nic)) {
        nic = GINT_TO_POINTER(node * nics + k);
        g_hash_table_insert(first, g_strdup(sig->str), nic);
      }
      for (int out = 0; out < 2; out++)
        e->rep_link[st_net_nic_link(c, node * nics + k, out)] =
          st_net_nic_link(c, GPOINTER_TO_INT(nic), out);
    }
  }
  for (int leaf = 0; leaf < st_net_n_leaves(c); leaf++) {
    int n0 = leaf * c->fabric.leaf_nodes, n1 = MIN(n0 + c->fabric.leaf_nodes, c->nodes);
    int n = 0;
    for (int g = n0 * gpn; g < MIN(n1 * gpn, c->gpus); g++)
      v[n++] = rep[g];
    g_string_printf(sig, "leaf|%d|", n1 - n0);
    append_sorted(sig, v, n);
    gpointer first_leaf;
    if (!g_hash_table_lookup_extended(first, sig->str, NULL, &first_leaf)) {
      first_leaf = GINT_TO_POINTER(leaf);
      g_hash_table_insert(first, g_strdup(sig->str), first_leaf);
    }
    for (int up = 0; up < 2; up++)
      e->rep_link[st_net_leaf_link(c, leaf, up)] =
        st_net_leaf_link(c, GPOINTER_TO_INT(first_leaf), up);
  }
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
  for (int l = 0; l < n; l++) {
    e->rep_link[l] = l;
    e->slot_of[l] = -1;
  }
  e->touched = g_array_new(FALSE, FALSE, sizeof(int32_t));
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
  g_clear_pointer(&e->touched, g_array_unref);
  g_clear_pointer(&e->lists, g_hash_table_unref);
  g_clear_pointer(&e->rep_link, g_free);
  g_clear_pointer(&e->stands_for, g_free);
  g_clear_pointer(&e->slot_of, g_free);
  g_clear_pointer(&e->acc, g_free);
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
    g_array_append_val(e->touched, link);
  e->acc[link] += coef;
}

/* The accumulated loads, folded onto representatives (the most any link of
 * a representative carries), as a new list; clears the scratch. */
static int
emit(Engine *e)
{
  guint n = e->touched->len;
  g_autofree StNetUse *uses = g_new(StNetUse, MAX(n, 1));
  g_autofree int32_t *reps = g_new(int32_t, MAX(n, 1));
  int k = 0;
  for (guint i = 0; i < n; i++) {
    int link = g_array_index(e->touched, int32_t, i);
    int rep = e->rep_link[link];
    double coef = e->acc[link];
    e->acc[link] = 0;
    int j = 0;
    while (j < k && reps[j] != rep)
      j++;
    if (j == k) {
      reps[k] = rep;
      uses[k++] = (StNetUse){.link = -1, .coef = coef};
    } else if (coef > uses[j].coef) {
      uses[j].coef = coef;
    }
  }
  g_array_set_size(e->touched, 0);
  for (int i = 0; i < k; i++)
    uses[i].link = slot_of(e, reps[i]);
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
