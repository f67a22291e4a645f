/* plan_bound_ranks.c: a lower bound of the steady step over the whole
 * schedule, every rank's ops at once, each send joined to its receive.
 *
 * Why. plan_bound.c follows one program at a time, where a receive costs
 * only its transfer. A chain of point-to-point hops through the ranks (a
 * cyclic-DP chain reduce: W - 1 hops per step) is invisible there, so its
 * configurations, two to four times slower than the winner, were all
 * simulated (docs/PERFORMANCE.md, "Issue 19").
 *
 * The graph. One node per op of every rank, except that a send and the
 * receive it pairs with are one node: the engine starts a transfer when both
 * ends are posted (engine_net.c) and ends both ops with it, so the pair ends
 * no earlier than the later of the two ends' predecessors plus the transfer's
 * time between the two devices (the link between them, as the engine
 * plans it; the op's own durations take the fastest link of any kind). A
 * node's predecessors are those of its ops: the previous op of the
 * stream (the stream's last op of the previous step for its first op) and
 * the dependencies, of this step or the previous one. Durations are
 * plan_bound.c's (no op runs faster in the engine). Collectives stay as each
 * rank sees them alone (their members' coupling is left out: a bound may
 * leave things out, never add).
 *
 * The bound. Let x(k) be the earliest ends of every node in step k, given
 * x(k-1): x(k) = F(x(k-1)), F max-plus linear (every path from step k-1 to
 * a node of step k, by its weight). If every node i has x_i(k) - x_i(k-1)
 * >= c, following from each node the predecessor that sets its end gives a
 * cycle of the step-periodic graph whose weight is at least c per step it
 * crosses; and a steady run, whose every op ends P later each step and no
 * earlier than its predecessors' ends plus its duration, has P at least the
 * weight per step of every cycle. So P >= min_i (x_i(k) - x_i(k-1)) for any
 * k and any start x(-1): the bound is the largest such minimum over the
 * steps iterated (at most MAX_STEPS, stopping when it has not grown for
 * PATIENCE steps). It converges to the maximum cycle ratio of the graph.
 *
 * A send whose receive cannot be paired as the engine would (sends of one
 * (sender, receiver, tag) on two streams, whose order the engine takes as
 * they come) stays alone. A pairing that makes the step's graph cyclic is a
 * deadlock the engine reports: no bound.
 *
 * Only one group of each kind among those transfers tie together is
 * followed (plan_bound_replicas.c): identical groups grow alike, so the
 * bound is the same.
 *
 * Cost: O(ops over the ranks followed) memory, O(steps x (their ops +
 * dependencies)) time; nothing when the schedule has no point-to-point
 * transfers (the per-program bound is then the same), or more than MAX_OPS
 * ops over all its ranks. */
#include "plan/plan_private.h"

#include <math.h>
#include <string.h>

#include "base/limits.h"
#include "cost/cost.h"

#define MAX_STEPS 256
#define PATIENCE 16
#define MAX_OPS (4 << 20)

typedef struct {
  const StSchedule *s;
  const StProfile *profile;
  int64_t *const *dur; /* [program][op] (borrowed) */
  int64_t *pair_ns;    /* [n]: a joined send's transfer between its two devices */
  guint n;             /* ops over all ranks */
  uint32_t *base;      /* [n_ranks + 1]: the first global index of each rank */
  int32_t *partner;    /* [n]: the op a send or receive is joined to, -1 */
  uint32_t *node;      /* [n]: the op standing for its node (a joined pair's send) */
  uint32_t *pred_first; /* [n + 1]: op i's predecessors are pred[pred_first[i] ..] */
  uint32_t *pred;      /* global op indices, PREV set for the previous step's */
  int32_t *rank_of;    /* [n] */
  int32_t *order;      /* [nodes]: the representative ops, in topological order */
  guint n_nodes;
  const gboolean *in;  /* [n_ranks]: the ranks followed (plan_bound_replicas.c); the
                          others have no ops here (base[r + 1] == base[r]) */
} Graph;

typedef struct {
  int32_t from, to, tag;
  int32_t seq;
} PairKey;

static guint
pair_hash(gconstpointer p)
{
  const PairKey *k = p;
  return ((guint)k->from * 2654435761u) ^ ((guint)k->to * 40503u) ^ ((guint)k->tag * 97u) ^
         (guint)k->seq;
}

static gboolean
pair_equal(gconstpointer a, gconstpointer b)
{
  return memcmp(a, b, sizeof(PairKey)) == 0;
}

static const StProgram *
program_of(const StSchedule *s, int rank)
{
  return g_ptr_array_index(s->programs, s->ranks[rank].program);
}

static gboolean
is_transfer(const StOp *op)
{
  return op->kind == ST_OP_COMM_SEND || op->kind == ST_OP_COMM_RECV;
}

static gboolean
is_recv(const Graph *g, guint i)
{
  int r = g->rank_of[i];
  return st_program_op(program_of(g->s, r), i - g->base[r])->kind == ST_OP_COMM_RECV;
}

/* Numbers the sends (or receives) of each (sender, receiver, tag) in op
 * order into `seqs`; a key whose ops sit on two streams is marked in
 * `mixed`. */
static void
number_side(Graph *g, gboolean sends, GHashTable *seqs, GHashTable *mixed, int32_t *seq)
{
  const StSchedule *s = g->s;
  g_autoptr(GHashTable) count = g_hash_table_new_full(pair_hash, pair_equal, g_free, g_free);
  for (int r = 0; r < s->n_ranks; r++) {
    if (!g->in[r])
      continue;
    const StProgram *p = program_of(s, r);
    for (guint i = 0; i < p->ops->len; i++) {
      const StOp *op = st_program_op(p, i);
      if (op->kind != (sends ? ST_OP_COMM_SEND : ST_OP_COMM_RECV))
        continue;
      int peer = st_schedule_peer_rank(s, r, op->comm, op->peer);
      PairKey key = {sends ? r : peer, sends ? peer : r, op->tag, sends ? 0 : 1};
      int32_t *n = g_hash_table_lookup(count, &key);
      if (n == NULL) {
        n = g_new0(int32_t, 2);
        n[1] = op->stream;
        g_hash_table_insert(count, g_memdup2(&key, sizeof key), n);
      } else if (n[1] != op->stream) {
        g_hash_table_add(mixed, g_memdup2(&key, sizeof key));
      }
      seq[g->base[r] + i] = n[0]++;
      if (sends) {
        PairKey at = {key.from, key.to, key.tag, seq[g->base[r] + i]};
        g_hash_table_insert(seqs, g_memdup2(&at, sizeof at), GINT_TO_POINTER(g->base[r] + i + 1));
      }
    }
  }
}

/* Joins the n-th receive of each (sender, receiver, tag) to the n-th send. */
static void
pair_transfers(Graph *g)
{
  const StSchedule *s = g->s;
  g_autoptr(GHashTable) sends = g_hash_table_new_full(pair_hash, pair_equal, g_free, NULL);
  g_autoptr(GHashTable) mixed = g_hash_table_new_full(pair_hash, pair_equal, g_free, NULL);
  g_autofree int32_t *seq = g_new(int32_t, MAX(g->n, 1));
  number_side(g, TRUE, sends, mixed, seq);
  number_side(g, FALSE, NULL, mixed, seq);
  for (guint i = 0; i < g->n; i++)
    g->partner[i] = -1;
  for (int r = 0; r < s->n_ranks; r++) {
    if (!g->in[r])
      continue;
    const StProgram *p = program_of(s, r);
    for (guint i = 0; i < p->ops->len; i++) {
      const StOp *op = st_program_op(p, i);
      if (op->kind != ST_OP_COMM_RECV)
        continue;
      int peer = st_schedule_peer_rank(s, r, op->comm, op->peer);
      PairKey side[2] = {{peer, r, op->tag, 0}, {peer, r, op->tag, 1}};
      if (g_hash_table_contains(mixed, &side[0]) || g_hash_table_contains(mixed, &side[1]))
        continue;
      PairKey at = {peer, r, op->tag, seq[g->base[r] + i]};
      int send = GPOINTER_TO_INT(g_hash_table_lookup(sends, &at)) - 1;
      if (send < 0)
        continue;
      g->partner[g->base[r] + i] = send;
      g->partner[send] = (int32_t)(g->base[r] + i);
    }
  }
}

/* Each op's predecessors as a list (CSR): the previous op of its stream
 * (the stream's last op of the previous step for its first op) and its
 * dependencies, a previous-step one marked with PREV. */
#define PREV 0x80000000u

static void
list_preds(Graph *g)
{
  const StSchedule *s = g->s;
  g->pred_first = g_new0(uint32_t, g->n + 1);
  for (int r = 0; r < s->n_ranks; r++) {
    if (!g->in[r])
      continue;
    const StProgram *p = program_of(s, r);
    for (guint i = 0; i < p->ops->len; i++)
      g->pred_first[g->base[r] + i + 1] = 1 + st_program_op(p, i)->n_deps;
  }
  for (guint i = 0; i < g->n; i++)
    g->pred_first[i + 1] += g->pred_first[i];
  g->pred = g_new(uint32_t, MAX(g->pred_first[g->n], 1));
  for (int r = 0; r < s->n_ranks; r++) {
    if (!g->in[r])
      continue;
    const StProgram *p = program_of(s, r);
    g_autofree int32_t *last = g_new(int32_t, MAX(p->streams->len, 1));
    g_autofree int32_t *first = g_new(int32_t, MAX(p->streams->len, 1));
    for (guint st = 0; st < p->streams->len; st++)
      last[st] = first[st] = -1;
    for (guint i = 0; i < p->ops->len; i++) {
      const StOp *op = st_program_op(p, i);
      guint at = g->base[r] + i;
      uint32_t *out = g->pred + g->pred_first[at];
      out[0] = last[op->stream] >= 0 ? (uint32_t)last[op->stream] : PREV; /* fixed below */
      if (first[op->stream] < 0)
        first[op->stream] = (int32_t)at;
      last[op->stream] = (int32_t)at;
      const StDep *deps = st_program_deps(p, op);
      for (guint d = 0; d < op->n_deps; d++)
        out[1 + d] = (g->base[r] + deps[d].op) | (deps[d].step_offset == 0 ? 0 : PREV);
    }
    for (guint st = 0; st < p->streams->len; st++)
      if (first[st] >= 0)
        g->pred[g->pred_first[first[st]]] = (uint32_t)last[st] | PREV;
  }
}

/* Kahn's order of the nodes over same-step edges; FALSE on a cycle. */
static gboolean
topo_order(Graph *g)
{
  g_autofree int32_t *indeg = g_new0(int32_t, MAX(g->n, 1));
  g_autofree uint32_t *first = g_new0(uint32_t, g->n + 1);
  /* Successor lists (CSR): node of a predecessor -> node of the op. */
  for (guint i = 0; i < g->n; i++)
    for (uint32_t e = g->pred_first[i]; e < g->pred_first[i + 1]; e++)
      if (!(g->pred[e] & PREV))
        first[g->node[g->pred[e]] + 1]++;
  for (guint i = 0; i < g->n; i++)
    first[i + 1] += first[i];
  g_autofree uint32_t *fill = g_memdup2(first, (g->n + 1) * sizeof *first);
  g_autofree uint32_t *succ = g_new(uint32_t, MAX(first[g->n], 1));
  for (guint i = 0; i < g->n; i++)
    for (uint32_t e = g->pred_first[i]; e < g->pred_first[i + 1]; e++)
      if (!(g->pred[e] & PREV)) {
        succ[fill[g->node[g->pred[e]]]++] = g->node[i];
        indeg[g->node[i]]++;
      }
  guint nodes = 0;
  g->n_nodes = 0;
  for (guint i = 0; i < g->n; i++) {
    nodes += g->node[i] == i;
    if (g->node[i] == i && indeg[i] == 0)
      g->order[g->n_nodes++] = (int32_t)i;
  }
  for (guint head = 0; head < g->n_nodes; head++) {
    guint u = (guint)g->order[head];
    for (uint32_t e = first[u]; e < first[u + 1]; e++)
      if (--indeg[succ[e]] == 0)
        g->order[g->n_nodes++] = (int32_t)succ[e];
  }
  return g->n_nodes == nodes;
}

/* A transfer's devices and size: pairs with equal keys take equal times. */
typedef struct {
  int32_t from, to;
  int64_t bytes;
} LinkKey;

static guint
link_hash(gconstpointer p)
{
  const LinkKey *k = p;
  return (guint)k->from * 2654435761u ^ (guint)k->to * 40503u ^ (guint)(k->bytes ^ (k->bytes >> 32));
}

static gboolean
link_equal(gconstpointer a, gconstpointer b)
{
  const LinkKey *x = a, *y = b;
  return x->from == y->from && x->to == y->to && x->bytes == y->bytes;
}

/* A joined pair's time alone between its two devices, as the engine plans
 * it (engine_net.c): the link between them, not the fastest of any. */
static void
time_pairs(Graph *g)
{
  const StSchedule *s = g->s;
  g_autoptr(GHashTable) seen = g_hash_table_new_full(link_hash, link_equal, g_free, g_free);
  g->pair_ns = g_new0(int64_t, MAX(g->n, 1));
  for (guint i = 0; i < g->n; i++) {
    if (g->partner[i] < 0 || is_recv(g, i))
      continue;
    int r = g->rank_of[i];
    const StOp *op = st_program_op(program_of(s, r), i - g->base[r]);
    int a = s->ranks[r].device, b = s->ranks[g->rank_of[g->partner[i]]].device;
    LinkKey key = {a, b, op->bytes};
    int64_t *ns = g_hash_table_lookup(seen, &key);
    if (ns == NULL) {
      StCommPlan plan;
      st_comm_plan_p2p_profiled(s->cluster, g->profile, a, b, op->bytes, &plan);
      double t = st_comm_plan_ns(&plan);
      ns = g_new(int64_t, 1);
      *ns = isfinite(t) && t > 0 ? st_ns_floor(t) : 0;
      g_hash_table_insert(seen, g_memdup2(&key, sizeof key), ns);
    }
    g->pair_ns[i] = *ns;
  }
}

static gboolean
graph_init(Graph *g, const StSchedule *s, const StProfile *profile, int64_t *const *dur,
           const gboolean *in)
{
  *g = (Graph){.s = s, .profile = profile, .dur = dur, .in = in};
  g->base = g_new(uint32_t, s->n_ranks + 1);
  g->base[0] = 0;
  uint64_t all = 0; /* over every rank, followed or not: the same limit either way */
  for (int r = 0; r < s->n_ranks; r++) {
    guint n = program_of(s, r)->ops->len;
    all += n;
    if (all > MAX_OPS)
      return FALSE;
    g->base[r + 1] = g->base[r] + (in[r] ? n : 0);
  }
  g->n = g->base[s->n_ranks];
  g->partner = g_new(int32_t, MAX(g->n, 1));
  g->node = g_new(uint32_t, MAX(g->n, 1));
  g->rank_of = g_new(int32_t, MAX(g->n, 1));
  g->order = g_new(int32_t, MAX(g->n, 1));
  for (int r = 0; r < s->n_ranks; r++)
    for (guint i = g->base[r]; i < g->base[r + 1]; i++)
      g->rank_of[i] = r;
  list_preds(g);
  pair_transfers(g);
  time_pairs(g);
  /* A joined pair is its send's node. */
  for (guint i = 0; i < g->n; i++) {
    int32_t j = g->partner[i];
    g->node[i] = j >= 0 && is_recv(g, i) ? (uint32_t)j : i;
  }
  return topo_order(g);
}

static void
graph_clear(Graph *g)
{
  g_free(g->base);
  g_free(g->partner);
  g_free(g->pair_ns);
  g_free(g->node);
  g_free(g->pred_first);
  g_free(g->pred);
  g_free(g->rank_of);
  g_free(g->order);
}

static inline int64_t
dur_of(const Graph *g, guint i)
{
  int r = g->rank_of[i];
  return g->dur[g->s->ranks[r].program][i - g->base[r]];
}

/* When op i could start: its predecessors' latest end. */
static inline int64_t
ready(const Graph *g, guint i, const int64_t *prev, const int64_t *cur)
{
  int64_t t = INT64_MIN;
  for (uint32_t e = g->pred_first[i]; e < g->pred_first[i + 1]; e++) {
    uint32_t p = g->pred[e];
    t = MAX(t, p & PREV ? prev[p & ~PREV] : cur[p]);
  }
  return t;
}

/* x(k) from x(k-1) = prev into cur; both [n], every op (a joined receive
 * gets its send's end). */
static void
step_once(const Graph *g, const int64_t *prev, int64_t *cur)
{
  for (guint o = 0; o < g->n_nodes; o++) {
    guint i = (guint)g->order[o];
    int32_t j = g->partner[i];
    int64_t t = ready(g, i, prev, cur), d = dur_of(g, i);
    if (j >= 0) {
      t = MAX(t, ready(g, (guint)j, prev, cur));
      d = MAX(d, MAX(dur_of(g, (guint)j), g->pair_ns[i]));
    }
    cur[i] = st_time_add(t, d);
    if (j >= 0)
      cur[j] = cur[i];
  }
}

int64_t
st_plan_bound_ranks_cycle(const StSchedule *s, const StProfile *profile, int64_t *const *dur)
{
  return st_plan_bound_ranks_cycle_all(s, profile, dur, FALSE);
}

int64_t
st_plan_bound_ranks_cycle_all(const StSchedule *s, const StProfile *profile,
                              int64_t *const *dur, gboolean every_rank)
{
  gboolean transfers = FALSE;
  for (guint p = 0; p < s->programs->len; p++) {
    const StProgram *prog = g_ptr_array_index(s->programs, p);
    for (guint st = 0; st < prog->streams->len; st++)
      if (g_array_index(prog->streams, StStream, st).background)
        return 0; /* repeats as long as the foreground runs: no step of its own */
    for (guint i = 0; i < prog->ops->len && !transfers; i++)
      transfers = is_transfer(st_program_op(prog, i));
  }
  if (!transfers || s->jobs->len > 0)
    return 0;
  g_autofree gboolean *in = NULL;
  if (every_rank) {
    in = g_new(gboolean, MAX(s->n_ranks, 1));
    for (int r = 0; r < s->n_ranks; r++)
      in[r] = TRUE;
  } else {
    in = st_plan_bound_ranks_followed(s, profile);
  }
  Graph g;
  if (!graph_init(&g, s, profile, dur, in)) {
    graph_clear(&g);
    return 0;
  }
  g_autofree int64_t *prev = g_new(int64_t, MAX(g.n, 1));
  g_autofree int64_t *cur = g_new(int64_t, MAX(g.n, 1));
  for (guint i = 0; i < g.n; i++)
    prev[i] = s->ranks[g.rank_of[i]].start_ns;
  int64_t best = 0;
  for (int k = 0, still = 0; k < MAX_STEPS && still < PATIENCE; k++) {
    step_once(&g, prev, cur);
    int64_t least = INT64_MAX;
    for (guint i = 0; i < g.n; i++)
      least = MIN(least, cur[i] - prev[i]);
    if (least > best) {
      best = least;
      still = 0;
    } else {
      still++;
    }
    int64_t *swap = prev;
    prev = cur;
    cur = swap;
  }
  graph_clear(&g);
  return best;
}
