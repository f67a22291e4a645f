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
  g_autofree int32_t *fill = g_new0(int32_t, s->n_devices);
  for (int r = 0; r < s->n_ranks; r++) {
    int d = s->ranks[r].device;
    dr->ranks[dr->offsets[d] + fill[d]++] = r;
  }
}

static void
device_ranks_clear(DeviceRanks *dr)
{
  g_free(dr->offsets);
  g_free(dr->ranks);
}

/* The sorted classes of the ranks on device d, as text. */
static void
append_device_mix(GString *out, const DeviceRanks *dr, int d, const int32_t *klass)
{
  int n = dr->offsets[d + 1] - dr->offsets[d];
  g_autofree int32_t *mix = g_new(int32_t, n > 0 ? n : 1);
  for (int i = 0; i < n; i++)
    mix[i] = klass[dr->ranks[dr->offsets[d] + i]];
  qsort(mix, n, sizeof(int32_t), st_compare_int32);
  for (int i = 0; i < n; i++)
    g_string_append_printf(out, "%d,", mix[i]);
}

/* Group shapes per (comm, group), computed once. */
static StGroupShape *
group_shapes(const StSchedule *s, int32_t **first_out)
{
  int32_t *first = g_new(int32_t, s->comms->len + 1);
  int total = 0;
  for (guint c = 0; c < s->comms->len; c++) {
    first[c] = total;
    total += st_schedule_comm(s, c)->n_groups;
  }
  first[s->comms->len] = total;
  StGroupShape *shapes = g_new0(StGroupShape, total > 0 ? total : 1);
  for (guint c = 0; c < s->comms->len; c++)
    for (int g = 0; g < st_schedule_comm(s, c)->n_groups; g++)
      st_schedule_group_shape(s, c, g, &shapes[first[c] + g]);
  *first_out = first;
  return shapes;
}

/* One refinement round: new classes into `next`; returns their count. */
static int
refine(const StSchedule *s, const DeviceRanks *dr, const StGroupShape *shapes,
       const int32_t *shape_first, const int32_t *klass, int32_t *next)
{
  g_autoptr(GHashTable) ids = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GString) sig = g_string_new(NULL);
  for (int r = 0; r < s->n_ranks; r++) {
    g_string_printf(sig, "%d|", klass[r]);
    append_device_mix(sig, dr, s->ranks[r].device, klass);
    for (guint c = 0; c < s->comms->len; c++) {
      int g = st_schedule_comm(s, c)->group_of[r];
      if (g < 0) {
        g_string_append(sig, "|-");
        continue;
      }
      const StGroupShape *sh = &shapes[shape_first[c] + g];
      g_string_append_printf(sig, "|%d/%d/%d/%d/%d", sh->ranks, sh->devices, sh->nodes,
                             sh->per_node, sh->per_device);
    }
    g_string_append_c(sig, '|');
    const StProgram *p = st_schedule_program_of(s, r);
    for (guint i = 0; i < p->ops->len; i++) {
      const StOp *op = st_program_op(p, i);
      if (op->kind != ST_OP_COMM_SEND && op->kind != ST_OP_COMM_RECV)
        continue;
      int peer = st_schedule_peer_rank(s, r, op->comm, op->peer);
      g_string_append_printf(sig, "%d,", peer >= 0 ? klass[peer] : -1);
    }
    gpointer id;
    if (!g_hash_table_lookup_extended(ids, sig->str, NULL, &id)) {
      id = GINT_TO_POINTER(g_hash_table_size(ids));
      g_hash_table_insert(ids, g_strdup(sig->str), id);
    }
    next[r] = GPOINTER_TO_INT(id);
  }
  return (int)g_hash_table_size(ids);
}

/* A collective completes among simulated ranks only if every member's
 * representative sits in the same group; NULL when that holds. */
static char *
check_groups(const StSchedule *s, const StFold *f, const gboolean *simulated)
{
  for (guint c = 0; c < s->comms->len; c++) {
    const StComm *comm = st_schedule_comm(s, c);
    for (int g = 0; g < comm->n_groups; g++) {
      gboolean has_sim = FALSE;
      for (int i = comm->offsets[g]; i < comm->offsets[g + 1] && !has_sim; i++)
        has_sim = simulated[comm->members[i]];
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
  for (int r = 0; r < s->n_ranks; r++)
    f->rank_class[r] = f->rank_rep[r] = f->sim_ranks[r] = r;
  for (int d = 0; d < s->n_devices; d++)
    f->device_rep[d] = d;
}

StFold *
st_fold_new(const StSchedule *s, gboolean enable)
{
  StFold *f = g_new0(StFold, 1);
  f->rank_class = g_new(int32_t, s->n_ranks);
  f->rank_rep = g_new(int32_t, s->n_ranks);
  f->sim_ranks = g_new(int32_t, s->n_ranks);
  f->device_rep = g_new(int32_t, s->n_devices);
  set_identity(f, s);
  if (!enable)
    return f;

  DeviceRanks dr;
  device_ranks_init(&dr, s);
  g_autofree int32_t *shape_first = NULL;
  g_autofree StGroupShape *shapes = group_shapes(s, &shape_first);
  g_autofree int32_t *klass = g_new(int32_t, s->n_ranks);
  g_autofree int32_t *next = g_new(int32_t, s->n_ranks);
  /* Round 0: ranks with the same program and start offset. */
  g_autoptr(GHashTable) first = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (int r = 0; r < s->n_ranks; r++) {
    g_autofree char *key =
      g_strdup_printf("%d@%" G_GINT64_FORMAT, s->ranks[r].program, s->ranks[r].start_ns);
    gpointer id;
    if (!g_hash_table_lookup_extended(first, key, NULL, &id)) {
      id = GINT_TO_POINTER(g_hash_table_size(first));
      g_hash_table_insert(first, g_steal_pointer(&key), id);
    }
    klass[r] = GPOINTER_TO_INT(id);
  }
  int n_classes = -1;
  for (;;) {
    int n = refine(s, &dr, shapes, shape_first, klass, next);
    memcpy(klass, next, sizeof(int32_t) * s->n_ranks);
    if (n == n_classes)
      break;
    n_classes = n;
  }

  /* Device classes: devices with the same mix of rank classes. The lowest
   * device of each class represents it; empty devices stand for themselves. */
  g_autoptr(GHashTable) dev_ids = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GString) mix = g_string_new(NULL);
  for (int d = 0; d < s->n_devices; d++) {
    if (dr.offsets[d + 1] == dr.offsets[d])
      continue;
    g_string_truncate(mix, 0);
    append_device_mix(mix, &dr, d, klass);
    gpointer rep;
    if (!g_hash_table_lookup_extended(dev_ids, mix->str, NULL, &rep)) {
      rep = GINT_TO_POINTER(d);
      g_hash_table_insert(dev_ids, g_strdup(mix->str), rep);
    }
    f->device_rep[d] = GPOINTER_TO_INT(rep);
  }
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
  g_autofree gboolean *simulated = g_new0(gboolean, s->n_ranks);
  f->n_sim_ranks = 0;
  for (int r = 0; r < s->n_ranks; r++) {
    f->rank_class[r] = klass[r];
    if (f->device_rep[s->ranks[r].device] == s->ranks[r].device) {
      simulated[r] = TRUE;
      f->sim_ranks[f->n_sim_ranks++] = r;
    }
  }
  f->n_rank_classes = n_classes;
  f->n_device_classes = (int)g_hash_table_size(dev_ids);
  device_ranks_clear(&dr);

  char *why = check_groups(s, f, simulated);
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
  g_free(f->rank_class);
  g_free(f->rank_rep);
  g_free(f->device_rep);
  g_free(f->sim_ranks);
  g_free(f);
}
