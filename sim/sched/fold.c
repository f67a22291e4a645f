/* fold.c: classes of identical ranks by partition refinement (see fold.h).
 *
 * Round 0 gives each rank its program and start offset as class. Each round then gives a rank
 * a signature made of its class, the sorted classes of the ranks sharing its
 * device, the shape of its group in every communicator, and the classes of
 * its point-to-point peers in op order; equal signatures form the next
 * classes. When a round splits nothing the partition is stable. Cost per
 * round: O(R * (C + P)) for C communicators and P point-to-point ops per
 * program; a handful of rounds suffice.
 */
#include "sched/fold.h"

#include <string.h>

#include "base/util.h"

/* Ranks of each device, ascending (ranks are visited in order). */
typedef struct {
  int32_t *offsets; /* [n_devices + 1] */
  int32_t *ranks;
} DeviceRanks;

static void
device_ranks_init(DeviceRanks *dr, const StSchedule *s)
{
  dr->offsets = g_new0(int32_t, s->n_devices + 1);
  dr->ranks = g_new(int32_t, s->n_ranks);
  for (int r = 0; r < s->n_ranks; r++)
    dr->offsets[s->ranks[r].device + 1]++;
  for (int d = 0; d < s->n_devices; d++)
    dr->offsets[d + 1] += dr->offsets[d];
  /* Filled through offsets[d + 1] as a cursor (it ends where device d + 1
   * starts), then moved back one place. */
  for (int d = s->n_devices - 1; d >= 0; d--)
    dr->offsets[d + 1] = dr->offsets[d];
  for (int r = 0; r < s->n_ranks; r++)
    dr->ranks[dr->offsets[s->ranks[r].device + 1]++] = r;
}

static void
device_ranks_clear(DeviceRanks *dr)
{
  g_free(dr->offsets);
  g_free(dr->ranks);
}

/* Signatures are int sequences, interned: equal sequences get one id, ids
 * numbered in the order they first appear. */
typedef struct {
  guint hash;   /* FNV-1a over the ints */
  guint n;
  int32_t v[];  /* [n] */
} SigKey;

static guint
sig_hash(gconstpointer p)
{
  return ((const SigKey *)p)->hash;
}

static gboolean
sig_equal(gconstpointer a, gconstpointer b)
{
  const SigKey *x = a, *y = b;
  return x->hash == y->hash && x->n == y->n && memcmp(x->v, y->v, sizeof(int32_t) * x->n) == 0;
}

typedef struct {
  GHashTable *ids; /* SigKey -> id */
  SigKey *probe;   /* scratch: the last key looked up, copied only when new */
  guint probe_cap;
  int probe_id;    /* the id of the sequence in probe, -1 before the first */
} Interner;

static void
interner_init(Interner *in)
{
  in->ids = g_hash_table_new_full(sig_hash, sig_equal, g_free, NULL);
  in->probe = NULL;
  in->probe_cap = 0;
  in->probe_id = -1;
}

static void
interner_clear(Interner *in)
{
  g_clear_pointer(&in->ids, g_hash_table_unref);
  g_clear_pointer(&in->probe, g_free);
}

/* A signature being built: ints pushed at the end. */
typedef struct {
  int32_t *v;
  guint len, cap;
} Sig;

static inline void
push(Sig *sig, int32_t v)
{
  if (sig->len == sig->cap) {
    sig->cap = MAX(64, 2 * sig->cap);
    sig->v = g_renew(int32_t, sig->v, sig->cap);
  }
  sig->v[sig->len++] = v;
}

/* The id of the sequence in `sig` (or `fresh` when it is new). Allocates
 * only for a new sequence: a million ranks of a few classes make a few
 * keys. */
static int
intern(Interner *in, const Sig *sig, int fresh)
{
  /* Neighbours are often alike (ranks in order): the last sequence first. */
  if (in->probe_id >= 0 && in->probe->n == sig->len &&
      memcmp(in->probe->v, sig->v, sizeof(int32_t) * sig->len) == 0)
    return in->probe_id;
  guint h = 2166136261u;
  for (guint i = 0; i < sig->len; i++)
    h = (h ^ (guint32)sig->v[i]) * 16777619u;
  if (sig->len > in->probe_cap) {
    in->probe_cap = MAX(sig->len, 2 * in->probe_cap);
    in->probe = g_realloc(in->probe, sizeof(SigKey) + sizeof(int32_t) * in->probe_cap);
  }
  SigKey *key = in->probe;
  if (key == NULL) /* an empty sequence, before any other */
    key = in->probe = g_malloc(sizeof(SigKey));
  key->hash = h;
  key->n = sig->len;
  memcpy(key->v, sig->v, sizeof(int32_t) * sig->len);
  gpointer id;
  if (g_hash_table_lookup_extended(in->ids, key, NULL, &id))
    return in->probe_id = GPOINTER_TO_INT(id);
  g_hash_table_insert(in->ids, g_memdup2(key, sizeof(SigKey) + sizeof(int32_t) * sig->len),
                      GINT_TO_POINTER(fresh));
  return in->probe_id = fresh;
}

/* The sorted classes of the ranks on device d, after their count. */
static void
append_device_mix(Sig *sig, const DeviceRanks *dr, int d, const int32_t *klass)
{
  int n = dr->offsets[d + 1] - dr->offsets[d];
  push(sig, n);
  guint at = sig->len;
  for (int i = 0; i < n; i++)
    push(sig, klass[dr->ranks[dr->offsets[d] + i]]);
  if (n > 1)
    qsort(sig->v + at, n, sizeof(int32_t), st_compare_int32);
}

/* Group shapes per (comm, group), computed once (once per partition when
 * communicators share theirs, sched.h), as ids: equal shapes, equal ids. */
static int32_t *
group_shapes(const StSchedule *s, int32_t **first_out)
{
  int32_t *first = g_new(int32_t, s->comms->len + 1);
  int total = 0;
  for (guint c = 0; c < s->comms->len; c++) {
    first[c] = total;
    total += st_schedule_comm(s, c)->n_groups;
  }
  first[s->comms->len] = total;
  int32_t *ids = g_new0(int32_t, total > 0 ? total : 1);
  Interner in;
  interner_init(&in);
  Sig sig = {0};
  int n_ids = 0;
  for (guint c = 0; c < s->comms->len; c++) {
    const StComm *comm = st_schedule_comm(s, c);
    guint same = 0;
    while (same < c && st_schedule_comm(s, same)->group_of != comm->group_of)
      same++;
    for (int g = 0; g < comm->n_groups; g++) {
      if (same < c) {
        ids[first[c] + g] = ids[first[same] + g];
        continue;
      }
      StGroupShape sh;
      st_schedule_group_shape(s, c, g, &sh);
      sig.len = 0;
      int32_t shape[] = {sh.ranks, sh.devices, sh.nodes, sh.per_node, sh.per_device};
      for (int k = 0; k < 5; k++)
        push(&sig, shape[k]);
      ids[first[c] + g] = intern(&in, &sig, n_ids);
      n_ids += ids[first[c] + g] == n_ids;
    }
  }
  g_free(sig.v);
  interner_clear(&in);
  *first_out = first;
  return ids;
}

/* One refinement round: new classes into `next`; returns their count. A
 * rank's signature: its class, its device's mix, its group's shape in every
 * communicator (its id, -1 when not a member), its point-to-point peers'
 * classes in op order. */
static int
refine(const StSchedule *s, const DeviceRanks *dr, const int32_t *shapes,
       const int32_t *shape_first, const GPtrArray *p2p, const int32_t *klass, int32_t *next)
{
  Interner in;
  interner_init(&in);
  Sig sig_buf = {0}, *sig = &sig_buf;
  int count = 0;
  for (int r = 0; r < s->n_ranks; r++) {
    sig->len = 0;
    push(sig, klass[r]);
    append_device_mix(sig, dr, s->ranks[r].device, klass);
    for (guint c = 0; c < s->comms->len; c++) {
      int g = st_schedule_comm(s, c)->group_of[r];
      push(sig, g >= 0 ? shapes[shape_first[c] + g] : -1);
    }
    const StProgram *p = st_schedule_program_of(s, r);
    const GArray *ops = g_ptr_array_index(p2p, s->ranks[r].program);
    for (guint i = 0; i < ops->len; i++) {
      const StOp *op = st_program_op(p, g_array_index(ops, uint32_t, i));
      int peer = st_schedule_peer_rank(s, r, op->comm, op->peer);
      push(sig, peer >= 0 ? klass[peer] : -1);
    }
    next[r] = intern(&in, sig, count);
    count += next[r] == count;
  }
  g_free(sig_buf.v);
  interner_clear(&in);
  return count;
}

/* Whether a rank is simulated: every rank on a representative device. */
static gboolean
simulated(const StSchedule *s, const StFold *f, int rank)
{
  int d = s->ranks[rank].device;
  return f->device_rep[d] == d;
}

/* A collective completes among simulated ranks only if every member's
 * representative sits in the same group; NULL when that holds. */
static char *
check_groups(const StSchedule *s, const StFold *f)
{
  for (guint c = 0; c < s->comms->len; c++) {
    const StComm *comm = st_schedule_comm(s, c);
    /* A communicator sharing an earlier one's partition passes with it. */
    guint same = 0;
    while (same < c && st_schedule_comm(s, same)->group_of != comm->group_of)
      same++;
    if (same < c)
      continue;
    for (int g = 0; g < comm->n_groups; g++) {
      gboolean has_sim = FALSE;
      for (int i = comm->offsets[g]; i < comm->offsets[g + 1] && !has_sim; i++)
        has_sim = simulated(s, f, comm->members[i]);
      for (int i = comm->offsets[g]; has_sim && i < comm->offsets[g + 1]; i++) {
        int m = comm->members[i];
        if (comm->group_of[f->rank_rep[m]] != g)
          return g_strdup_printf("communicator '%s': rank %d of group %d is represented by "
                                 "rank %d outside that group",
                                 comm->name, m, g, f->rank_rep[m]);
      }
    }
  }
  return NULL;
}

/* Sends from each simulated rank to each represented receiver must meet as
 * many receives there from ranks it represents, per tag. */
static char *
check_p2p(const StSchedule *s, const StFold *f)
{
  g_autoptr(GHashTable) balance = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (int i = 0; i < f->n_sim_ranks; i++) {
    int r = f->sim_ranks[i];
    const StProgram *p = st_schedule_program_of(s, r);
    for (guint o = 0; o < p->ops->len; o++) {
      const StOp *op = st_program_op(p, o);
      if (op->kind != ST_OP_COMM_SEND && op->kind != ST_OP_COMM_RECV)
        continue;
      int peer = st_schedule_peer_rank(s, r, op->comm, op->peer);
      if (peer < 0)
        continue;
      gboolean send = op->kind == ST_OP_COMM_SEND;
      int src = send ? r : f->rank_rep[peer], dst = send ? f->rank_rep[peer] : r;
      g_autofree char *key = g_strdup_printf("%d>%d#%d", src, dst, op->tag);
      gpointer n = g_hash_table_lookup(balance, key);
      g_hash_table_replace(balance, g_strdup(key),
                           GINT_TO_POINTER(GPOINTER_TO_INT(n) + (send ? 1 : -1)));
    }
  }
  GHashTableIter it;
  gpointer key, value;
  g_hash_table_iter_init(&it, balance);
  while (g_hash_table_iter_next(&it, &key, &value))
    if (GPOINTER_TO_INT(value) != 0)
      return g_strdup_printf("point-to-point traffic %s does not pair up among the "
                             "representatives",
                             (const char *)key);
  return NULL;
}

static void
set_identity(StFold *f, const StSchedule *s)
{
  f->folded = FALSE;
  f->n_rank_classes = s->n_ranks;
  f->n_device_classes = s->n_devices;
  f->n_sim_ranks = s->n_ranks;
  f->sim_ranks = g_renew(int32_t, f->sim_ranks, s->n_ranks);
  for (int r = 0; r < s->n_ranks; r++)
    f->rank_rep[r] = f->sim_ranks[r] = r;
  for (int d = 0; d < s->n_devices; d++)
    f->device_rep[d] = d;
}

StFold *
st_fold_new(const StSchedule *s, gboolean enable)
{
  StFold *f = g_new0(StFold, 1);
  f->rank_rep = g_new(int32_t, s->n_ranks);
  f->device_rep = g_new(int32_t, s->n_devices);
  if (!enable) {
    set_identity(f, s);
    return f;
  }

  DeviceRanks dr;
  device_ranks_init(&dr, s);
  g_autofree int32_t *shape_first = NULL;
  g_autofree int32_t *shapes = group_shapes(s, &shape_first);
  g_autoptr(GPtrArray) p2p = st_schedule_p2p_ops(s);
  g_autofree int32_t *klass = g_new(int32_t, s->n_ranks);
  g_autofree int32_t *next = g_new(int32_t, s->n_ranks);
  /* Round 0: ranks with the same program and start offset. */
  Sig sig_buf = {0}, *sig = &sig_buf;
  Interner first;
  interner_init(&first);
  int count = 0;
  for (int r = 0; r < s->n_ranks; r++) {
    sig->len = 0;
    push(sig, s->ranks[r].program);
    push(sig, (int32_t)(s->ranks[r].start_ns & 0xffffffff));
    push(sig, (int32_t)(s->ranks[r].start_ns >> 32));
    klass[r] = intern(&first, sig, count);
    count += klass[r] == count;
  }
  interner_clear(&first);
  /* Rounds refine: a round that splits no class leaves the same classes,
   * numbered alike (by first rank), and every round after it would too. */
  int n_classes = count;
  for (;;) {
    int n = refine(s, &dr, shapes, shape_first, p2p, klass, next);
    memcpy(klass, next, sizeof(int32_t) * s->n_ranks);
    if (n == n_classes)
      break;
    n_classes = n;
  }

  /* Device classes: devices with the same mix of rank classes. The lowest
   * device of each class represents it; empty devices stand for themselves. */
  Interner dev_ids;
  interner_init(&dev_ids);
  for (int d = 0; d < s->n_devices; d++) {
    if (dr.offsets[d + 1] == dr.offsets[d]) {
      f->device_rep[d] = d;
      continue;
    }
    sig->len = 0;
    append_device_mix(sig, &dr, d, klass);
    f->device_rep[d] = intern(&dev_ids, sig, d);
  }
  int n_device_classes = (int)g_hash_table_size(dev_ids.ids);
  interner_clear(&dev_ids);
  g_free(sig_buf.v);
  /* The k-th rank of a class on a device is represented by the k-th rank of
   * that class on the representative device. */
  for (int d = 0; d < s->n_devices; d++) {
    int rep = f->device_rep[d];
    for (int i = dr.offsets[d]; i < dr.offsets[d + 1]; i++) {
      int r = dr.ranks[i], k = 0;
      for (int j = dr.offsets[d]; j < i; j++)
        k += klass[dr.ranks[j]] == klass[r];
      for (int j = dr.offsets[rep]; j < dr.offsets[rep + 1]; j++) {
        int q = dr.ranks[j];
        if (klass[q] == klass[r] && k-- == 0) {
          f->rank_rep[r] = q;
          break;
        }
      }
    }
  }
  f->n_sim_ranks = 0;
  for (int r = 0; r < s->n_ranks; r++)
    f->n_sim_ranks += simulated(s, f, r);
  f->sim_ranks = g_new(int32_t, MAX(f->n_sim_ranks, 1));
  for (int r = 0, i = 0; r < s->n_ranks; r++)
    if (simulated(s, f, r))
      f->sim_ranks[i++] = r;
  f->n_rank_classes = n_classes;
  f->n_device_classes = n_device_classes;
  device_ranks_clear(&dr);

  char *why = check_groups(s, f);
  if (why == NULL)
    why = check_p2p(s, f);
  if (why != NULL) {
    set_identity(f, s);
    f->why_not = why;
    return f;
  }
  f->folded = f->n_sim_ranks < s->n_ranks;
  return f;
}

void
st_fold_free(StFold *f)
{
  if (f == NULL)
    return;
  g_free(f->why_not);
  g_free(f->rank_rep);
  g_free(f->device_rep);
  g_free(f->sim_ranks);
  g_free(f);
}
