/* plan_bound_replicas.c: which ranks the bound over every rank
 * (plan_bound_ranks.c) must follow: one of each kind of group of ranks
 * that point-to-point transfers tie together.
 *
 * That bound's graph ties ranks only through the sends it joins to their
 * receives (collectives stay as each rank sees them alone), so it falls
 * apart into the groups of ranks transfers connect: a pipeline's stages,
 * each data-parallel replica of it a group of its own. Its bound is the
 * largest over steps k of the least growth min_i x_i(k) - x_i(k-1) over
 * every op, and a minimum over the groups' ops is the minimum of each
 * group's. Two groups whose ranks, taken in ascending order, run the same
 * programs from the same start, send to and receive from the same
 * positions, each transfer taking the same time between its two devices
 * (plan_bound_ranks.c's time_pairs: tag, stream and bytes are the
 * programs'), have the same graph under that order, hence the same growth
 * at every step: following the first of each kind gives the same bound, to
 * the nanosecond, and the same steps iterated. A pipeline of 4 stages on
 * 128 nodes is 1,024 ranks in 256 replicas: where they are alike, 4 ranks
 * are followed, not 1,024 (issue 22). tests/test_plan_replicas.c holds it
 * to the bound over every rank.
 *
 * Cost: O(transfers over all ranks) for the groups, and one transfer-time
 * plan per distinct (sender's device, receiver's device, bytes).
 */
#include "plan/plan_private.h"

#include <math.h>
#include <string.h>

#include "base/limits.h"
#include "cost/cost.h"

static int
root(int32_t *parent, int x)
{
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}

/* A transfer's time alone between two devices, as time_pairs computes it. */
typedef struct {
  int32_t from, to;
  int64_t bytes;
} Key;

static guint
key_hash(gconstpointer p)
{
  const Key *k = p;
  return (guint)k->from * 2654435761u ^ (guint)k->to * 40503u ^
         (guint)(k->bytes ^ (k->bytes >> 32));
}

static gboolean
key_equal(gconstpointer a, gconstpointer b)
{
  const Key *x = a, *y = b;
  return x->from == y->from && x->to == y->to && x->bytes == y->bytes;
}

static int64_t
pair_ns(GHashTable *seen, const StSchedule *s, const StProfile *profile, int a, int b,
        int64_t bytes)
{
  Key key = {a, b, bytes};
  int64_t *ns = g_hash_table_lookup(seen, &key);
  if (ns == NULL) {
    StCommPlan plan;
    st_comm_plan_p2p_profiled(s->cluster, profile, a, b, bytes, &plan);
    double t = st_comm_plan_ns(&plan);
    ns = g_new(int64_t, 1);
    *ns = isfinite(t) && t > 0 ? st_ns_floor(t) : 0;
    g_hash_table_insert(seen, g_memdup2(&key, sizeof key), ns);
  }
  return *ns;
}

static void
push(GArray *sig, int64_t v)
{
  int32_t w[2] = {(int32_t)(v & 0xffffffff), (int32_t)(v >> 32)};
  g_array_append_vals(sig, w, 2);
}

gboolean *
st_plan_bound_ranks_followed(const StSchedule *s, const StProfile *profile)
{
  int R = s->n_ranks;
  /* The transfers of each program, in op order. */
  g_autoptr(GPtrArray) p2p = st_schedule_p2p_ops(s);
  g_autofree int32_t *parent = g_new(int32_t, MAX(R, 1));
  for (int r = 0; r < R; r++)
    parent[r] = r;
  for (int r = 0; r < R; r++) {
    const StProgram *p = g_ptr_array_index(s->programs, s->ranks[r].program);
    const GArray *ops = g_ptr_array_index(p2p, s->ranks[r].program);
    for (guint i = 0; i < ops->len; i++) {
      const StOp *op = st_program_op(p, g_array_index(ops, uint32_t, i));
      int peer = st_schedule_peer_rank(s, r, op->comm, op->peer);
      if (peer >= 0)
        parent[root(parent, r)] = root(parent, peer);
    }
  }
  /* Each group's ranks in ascending order, and each rank's place in it. */
  g_autofree int32_t *group = g_new(int32_t, MAX(R, 1));  /* [rank]: its group */
  g_autofree int32_t *id = g_new(int32_t, MAX(R, 1));     /* [root]: its group, -1 */
  g_autofree int32_t *place = g_new(int32_t, MAX(R, 1));  /* [rank]: its place in the group */
  int n_groups = 0;
  for (int r = 0; r < R; r++)
    id[r] = -1;
  g_autoptr(GArray) size = g_array_new(FALSE, TRUE, sizeof(int32_t));
  for (int r = 0; r < R; r++) {
    int x = root(parent, r);
    if (id[x] < 0) {
      id[x] = n_groups++;
      g_array_set_size(size, n_groups);
    }
    group[r] = id[x];
    place[r] = g_array_index(size, int32_t, group[r])++;
  }
  g_autofree int32_t *first = g_new0(int32_t, n_groups + 1); /* CSR of ranks by group */
  for (int g = 0; g < n_groups; g++)
    first[g + 1] = first[g] + g_array_index(size, int32_t, g);
  g_autofree int32_t *members = g_new(int32_t, MAX(R, 1));
  for (int r = 0; r < R; r++)
    members[first[group[r]] + place[r]] = r;

  /* A group's signature; the first group of each signature is followed. */
  g_autoptr(GHashTable) seen = g_hash_table_new_full(key_hash, key_equal, g_free, g_free);
  g_autoptr(GHashTable) kinds =
    g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, NULL);
  gboolean *followed = g_new0(gboolean, MAX(R, 1));
  g_autoptr(GArray) sig = g_array_new(FALSE, FALSE, sizeof(int32_t));
  for (int g = 0; g < n_groups; g++) {
    g_array_set_size(sig, 0);
    for (int m = first[g]; m < first[g + 1]; m++) {
      int r = members[m];
      const StProgram *p = g_ptr_array_index(s->programs, s->ranks[r].program);
      const GArray *ops = g_ptr_array_index(p2p, s->ranks[r].program);
      int32_t prog = s->ranks[r].program;
      g_array_append_val(sig, prog);
      push(sig, s->ranks[r].start_ns);
      for (guint i = 0; i < ops->len; i++) {
        const StOp *op = st_program_op(p, g_array_index(ops, uint32_t, i));
        int peer = st_schedule_peer_rank(s, r, op->comm, op->peer);
        int32_t at = peer >= 0 ? place[peer] : -1;
        g_array_append_val(sig, at);
        if (peer < 0)
          continue;
        int a = s->ranks[r].device, b = s->ranks[peer].device;
        gboolean send = op->kind == ST_OP_COMM_SEND;
        push(sig, pair_ns(seen, s, profile, send ? a : b, send ? b : a, op->bytes));
      }
    }
    GBytes *key = g_bytes_new(sig->data, sig->len * sizeof(int32_t));
    if (g_hash_table_contains(kinds, key)) {
      g_bytes_unref(key);
      continue;
    }
    g_hash_table_add(kinds, key);
    for (int m = first[g]; m < first[g + 1]; m++)
      followed[members[m]] = TRUE;
  }
  return followed;
}
