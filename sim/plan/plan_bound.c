/* plan_bound.c: lower bounds of a schedule's step time and peak memory,
 * from the schedule and the cost models alone (see plan.h).
 *
 * Op durations. Each op gets the time it would take alone, floored to whole
 * ns: a COMP op its cost-model time (the engine's rate is at most 1 when
 * kernels share a GPU), a collective the alone time of the plan the engine
 * would choose (the least over the shapes of the communicator's groups),
 * a transfer its time over the fastest link class it could use, a copy its
 * link's time. The engine never runs an op faster.
 *
 * Earliest ends. Given a moment before which some ops cannot start, the
 * earliest end of every op follows from its predecessors (the previous op
 * of its stream, its dependencies, of this step or the previous one) and
 * its duration, ignoring every other rank and all sharing: the engine can
 * only end it later. An op with no known predecessor gets no bound.
 *
 * Step time with --steps auto (StSchedule.steps 0): the steady step. The
 * last op a of a stream runs once per step, after its stream's earlier
 * ops and their dependencies: its instance of step k+1 ends at least W_a
 * after its instance of step k, W_a the earliest end of a one step on with
 * a ending at 0 (a cycle of dependencies through a). A run the steady rule
 * accepts repeats the end of a, relative to the step boundary, from one
 * period to the next, so its step is at least W_a, less the rule's
 * tolerance (st_steady_step_bound). The bound is the largest over the last
 * ops of every stream of every program: at least each stream's own work
 * per step, and the whole chain of a data-parallel step (forward, the
 * last all-reduce, the optimizer, the next forward). It bounds the steady
 * step whatever warm-up came before it, which no finite-window figure can
 * promise; a run that never becomes steady (reported so) is averaged over
 * a window whose mean may fall below it by the lag of a at the window's
 * edges.
 *
 * Step time, S fixed steps of which w are warm-up (the summary's definition):
 *
 *   w = 0: step time = E(S-1) / S, where E(k) is the end of step k. A rank
 *     starts at start_ns: every op of its first step starts then or later,
 *     so E(S-1) >= start_ns + the latest earliest end over S steps.
 *
 *   w >= 1: step time = (E(S-1) - E(w-1)) / (S - w). Let o be the op of
 *     step w-1 that ends last (E(w-1) is its end; among ties take one no
 *     other tied op depends on). Nothing of step w-1 depends on o and it is
 *     last on its stream, so o is a sink of the step's graph. Its stream's
 *     next op and its previous-step dependents start after E(w-1), and so
 *     does everything that follows them: the latest earliest end over steps
 *     w .. S-1 with o ending at 0 bounds E(S-1) - E(w-1). Which sink ends
 *     last is not known before simulating, so the bound is the least of
 *     these over every sink of every program, over (S - w).
 *
 * Peak memory: persistent buffers live for the whole run, so a device's
 * peak is at least the persistent bytes of the ranks on it, plus what one
 * of them certainly holds at once besides: at the start of an op b of
 * positive duration, every buffer allocated by an op of b's stream at or
 * before b and freed by one at or after b (freed at that op's end, after
 * b's start; allocations at one instant all count). That is a data-parallel
 * rank's activations at the end of its forward pass, for example.
 */
#include "plan/plan_private.h"

#include <math.h>
#include <string.h>

#include "base/limits.h"
#include "strategy/strategy_common.h"
#include "cost/cost.h"
#include "output/steady.h"
#include "sched/work.h"

/* More sinks than this in one program get the plain bound of their own
 * stream's work, to keep the bound O(ops) for odd programs. */
#define MAX_SINKS 64

typedef struct {
  const StSchedule *s;
  const StProfile *profile;
  const char *algo;
  GHashTable *coll_ns;  /* CollKey -> int64 ns, the least over the groups' shapes */
  GArray **shapes;      /* [n_comms]: distinct StGroupShape of each communicator, lazily */
  GHashTable *comp_ns;  /* WorkKey -> int64 ns: programs of one job repeat their work */
} Ctx;

/* A COMP op's work as the cost models see it, with its job: equal keys
 * cost the same (every field zeroed first, padding included). */
typedef struct {
  int64_t batch, elems, bytes;
  const StLayer *layer;
  const char *kernel;
  double share;
  int32_t pass, job;
  uint32_t again_ops, pad;
} WorkKey;

static guint
work_hash(gconstpointer p)
{
  const WorkKey *k = p;
  return g_direct_hash(k->layer) * 31u + (guint)k->pass * 7u + (guint)k->batch +
         (guint)k->elems * 13u + (guint)k->job;
}

static gboolean
work_equal(gconstpointer a, gconstpointer b)
{
  return memcmp(a, b, sizeof(WorkKey)) == 0;
}

typedef struct {
  int32_t comm;
  int32_t kind;
  int64_t bytes;
} CollKey;

static guint
coll_hash(gconstpointer p)
{
  const CollKey *k = p;
  return (guint)k->comm * 31u + (guint)k->kind * 7u + (guint)(k->bytes ^ (k->bytes >> 32));
}

static gboolean
coll_equal(gconstpointer a, gconstpointer b)
{
  return memcmp(a, b, sizeof(CollKey)) == 0;
}

static GArray *
comm_shapes(Ctx *x, int comm)
{
  if (x->shapes[comm] != NULL)
    return x->shapes[comm];
  const StComm *c = st_schedule_comm(x->s, comm);
  GArray *list = g_array_new(FALSE, FALSE, sizeof(StGroupShape));
  for (int g = 0; g < c->n_groups; g++) {
    StGroupShape shape;
    st_schedule_group_shape(x->s, comm, g, &shape);
    gboolean seen = FALSE;
    for (guint i = 0; i < list->len && !seen; i++)
      seen = memcmp(&g_array_index(list, StGroupShape, i), &shape, sizeof shape) == 0;
    if (!seen)
      g_array_append_val(list, shape);
  }
  x->shapes[comm] = list;
  return list;
}

static int64_t
collective_ns(Ctx *x, const StOp *op)
{
  CollKey key = {op->comm, op->sub, op->bytes};
  gpointer found = g_hash_table_lookup(x->coll_ns, &key);
  if (found != NULL)
    return *(int64_t *)found;
  GArray *list = comm_shapes(x, op->comm);
  double least = INFINITY;
  for (guint i = 0; i < list->len; i++) {
    StCommPlan plan;
    if (st_comm_plan_collective(x->s->cluster, x->profile, x->algo, op->sub, op->bytes,
                                &g_array_index(list, StGroupShape, i), &plan, NULL))
      least = MIN(least, st_comm_plan_ns(&plan));
  }
  /* No plan: the engine fails the run; nothing to bound. */
  int64_t *ns = g_new(int64_t, 1);
  *ns = isfinite(least) ? st_ns_floor(least) : 0;
  g_hash_table_insert(x->coll_ns, g_memdup2(&key, sizeof key), ns);
  return *ns;
}

/* A transfer over the fastest link class a pair of GPUs can have. */
static int64_t
transfer_ns(const StCluster *c, int64_t bytes)
{
  static const StLinkClass links[] = {ST_LINK_LOCAL, ST_LINK_INTRA_NODE, ST_LINK_INTER_NODE};
  double least = INFINITY;
  for (gsize i = 0; i < G_N_ELEMENTS(links); i++) {
    if (links[i] != ST_LINK_LOCAL && !c->links[links[i]].present)
      continue;
    double bw = st_cluster_link_bandwidth(c, links[i]);
    if (bw > 0)
      least = MIN(least, (double)st_cluster_link_latency(c, links[i]) + (double)bytes / bw * 1e9);
  }
  return isfinite(least) ? st_ns_floor(least) : 0;
}

static int64_t
copy_ns(const StCluster *c, const StOp *op)
{
  StLinkClass link = op->sub == ST_COPY_D2D ? ST_LINK_LOCAL : ST_LINK_PCIE;
  double bw = st_cluster_link_bandwidth(c, link);
  if (bw <= 0 || (link != ST_LINK_LOCAL && !c->links[link].present))
    return 0;
  return st_ns_floor((double)st_cluster_link_latency(c, link) + (double)op->bytes / bw * 1e9);
}

/* As the engine computes a COMP op (engine.c: compute dtype, kernel names). */
static int64_t
compute_ns(const Ctx *x, const StProgram *p, const StOp *op)
{
  StWork work = st_op_work(x->s, p, op);
  WorkKey key;
  memset(&key, 0, sizeof key);
  key.batch = work.batch;
  key.elems = work.elems;
  key.bytes = work.bytes;
  key.layer = work.layer;
  key.kernel = work.kernel;
  key.share = work.share;
  key.pass = (int32_t)work.pass;
  key.job = p->job;
  key.again_ops = work.again_ops;
  int64_t *found = g_hash_table_lookup(x->comp_ns, &key);
  if (found != NULL)
    return *found;
  StComputeCtx ctx = st_program_compute_ctx(x->s, p, x->profile);
  StCostSource source;
  double t = st_compute_time(&ctx, &work, &source);
  int64_t *ns = g_new(int64_t, 1);
  *ns = isfinite(t) ? st_ns_floor(t) : 0;
  g_hash_table_insert(x->comp_ns, g_memdup2(&key, sizeof key), ns);
  return *ns;
}

static int64_t
op_ns(Ctx *x, const StProgram *p, const StOp *op)
{
  switch ((StOpKind)op->kind) {
  case ST_OP_COMP:
    return compute_ns(x, p, op);
  case ST_OP_COMM_COLL:
    return collective_ns(x, op);
  case ST_OP_COMM_SEND:
  case ST_OP_COMM_RECV:
    return transfer_ns(x->s->cluster, op->bytes);
  case ST_OP_COPY:
    return copy_ns(x->s->cluster, op);
  default:
    return 0;
  }
}

/* One program's ops as the bound sees them. */
typedef struct {
  const StProgram *p;
  guint n, n_streams;
  int64_t *dur;        /* [n] */
  int64_t *work;       /* [n_streams]: the stream's ops' durations summed */
  int32_t *prev;       /* [n]: previous op of the same stream, -1 */
  int32_t *first;      /* [n_streams]: first op of the stream, -1 */
  int32_t *last;       /* [n_streams] */
  gboolean *sink;      /* [n] */
} Prog;

static void
prog_init(Prog *g, Ctx *x, const StProgram *p)
{
  g->p = p;
  g->n = p->ops->len;
  g->n_streams = p->streams->len;
  g->dur = g_new0(int64_t, g->n);
  g->prev = g_new(int32_t, g->n);
  g->sink = g_new(gboolean, g->n);
  g->work = g_new0(int64_t, g->n_streams);
  g->first = g_new(int32_t, g->n_streams);
  g->last = g_new(int32_t, g->n_streams);
  for (guint s = 0; s < g->n_streams; s++)
    g->first[s] = g->last[s] = -1;
  for (guint i = 0; i < g->n; i++) {
    const StOp *op = st_program_op(p, i);
    g->dur[i] = op_ns(x, p, op);
    g->prev[i] = g->last[op->stream];
    g->work[op->stream] = st_time_add(g->work[op->stream], g->dur[i]);
    if (g->first[op->stream] < 0)
      g->first[op->stream] = (int32_t)i;
    g->last[op->stream] = (int32_t)i;
    g->sink[i] = TRUE;
  }
  for (guint i = 0; i < g->n; i++) {
    const StOp *op = st_program_op(p, i);
    const StDep *deps = st_program_deps(p, op);
    for (guint d = 0; d < op->n_deps; d++)
      if (deps[d].step_offset == 0)
        g->sink[deps[d].op] = FALSE;
    if (g->last[op->stream] != (int32_t)i)
      g->sink[i] = FALSE;
  }
}

static void
prog_clear(Prog *g)
{
  g_free(g->dur);
  g_free(g->prev);
  g_free(g->sink);
  g_free(g->work);
  g_free(g->first);
  g_free(g->last);
}

#define UNKNOWN INT64_MIN

/* Earliest ends over `steps` steps; `prev` holds the ends of the step
 * before the first (UNKNOWN: no bound) and is overwritten, `cur` is
 * scratch, both [g->n]. Returns the latest end found (UNKNOWN if none).
 * O(steps * (ops + dependencies)). */
static int64_t
latest_end(const Prog *g, int steps, int64_t *prev, int64_t *cur)
{
  int64_t latest = UNKNOWN;
  for (int k = 0; k < steps; k++) {
    for (guint i = 0; i < g->n; i++) {
      const StOp *op = st_program_op(g->p, i);
      int64_t t = g->prev[i] >= 0 ? cur[g->prev[i]] : prev[g->last[op->stream]];
      const StDep *deps = st_program_deps(g->p, op);
      for (guint d = 0; d < op->n_deps; d++)
        t = MAX(t, deps[d].step_offset == 0 ? cur[deps[d].op] : prev[deps[d].op]);
      cur[i] = t == UNKNOWN ? UNKNOWN : st_time_add(t, g->dur[i]);
      latest = MAX(latest, cur[i]);
    }
    int64_t *swap = prev;
    prev = cur;
    cur = swap;
  }
  return latest;
}

/* W_a: the earliest end of op `a` one step on, with a ending at 0 and
 * everything else unknown; 0 when nothing leads back to it. `prev` and
 * `cur` are scratch of [g->n]. O(ops + dependencies). */
static int64_t
cycle_through(const Prog *g, guint a, int64_t *prev, int64_t *cur)
{
  for (guint i = 0; i < g->n; i++)
    prev[i] = UNKNOWN;
  prev[a] = 0;
  latest_end(g, 1, prev, cur);
  return MAX(cur[a], 0);
}

/* The most bytes of non-persistent buffers a rank of this program certainly
 * holds at once (see the top of this file): one pass in op order with a
 * running sum per stream. O(ops + buffers). */
static int64_t
live_peak(const Prog *g)
{
  const StProgram *p = g->p;
  guint nb = p->buffers->len;
  g_autofree int32_t *alloc_at = g_new(int32_t, MAX(nb, 1));
  g_autofree int32_t *free_at = g_new(int32_t, MAX(nb, 1));
  for (guint b = 0; b < nb; b++)
    alloc_at[b] = free_at[b] = -1;
  for (guint i = 0; i < g->n; i++) {
    const StOp *op = st_program_op(p, i);
    for (guint k = 0; k < op->n_alloc; k++)
      alloc_at[st_program_allocs(p, op)[k]] = (int32_t)i;
    for (guint k = 0; k < op->n_free; k++)
      free_at[st_program_frees(p, op)[k]] = (int32_t)i;
  }
  g_autofree int64_t *add = g_new0(int64_t, MAX(g->n, 1));
  g_autofree int64_t *drop = g_new0(int64_t, MAX(g->n, 1));
  for (guint b = 0; b < nb; b++) {
    const StBuffer *buf = &g_array_index(p->buffers, StBuffer, b);
    int32_t a = alloc_at[b], f = free_at[b];
    if (buf->persistent || a < 0 || f < a ||
        st_program_op(p, a)->stream != st_program_op(p, f)->stream)
      continue;
    add[a] += buf->bytes;
    drop[f] += buf->bytes;
  }
  g_autofree int64_t *now = g_new0(int64_t, MAX(g->n_streams, 1));
  int64_t peak = 0;
  for (guint i = 0; i < g->n; i++) {
    guint s = st_program_op(p, i)->stream;
    now[s] += add[i];
    if (g->dur[i] > 0)
      peak = MAX(peak, now[s]);
    now[s] -= drop[i];
  }
  return peak;
}

static int
warmup_of(const StSchedule *s)
{
  int w = s->warmup_steps >= 0 ? s->warmup_steps : s->steps > 1 ? 1 : 0;
  return MIN(w, MAX(s->steps - 1, 0));
}

void
st_plan_bound(const StSchedule *s, const StProfile *profile, const char *comm_algo,
              StPlanBound *out)
{
  *out = (StPlanBound){0, 0, 0};
  guint n_programs = s->programs->len;
  g_autofree gboolean *used = g_new0(gboolean, n_programs);
  for (int r = 0; r < s->n_ranks; r++)
    used[s->ranks[r].program] = TRUE;

  g_autofree int64_t *persistent = g_new0(int64_t, n_programs);
  g_autofree int64_t *live = g_new0(int64_t, n_programs);
  for (guint p = 0; p < n_programs; p++) {
    int64_t bytes[ST_MEM_N];
    st_program_persistent_bytes(g_ptr_array_index(s->programs, p), bytes);
    for (int c = 0; c < ST_MEM_N; c++)
      persistent[p] += bytes[c];
  }

  /* Time. */
  Ctx x = {
    .s = s,
    .profile = profile,
    .algo = comm_algo != NULL ? comm_algo : "auto",
    .coll_ns = g_hash_table_new_full(coll_hash, coll_equal, g_free, g_free),
    .comp_ns = g_hash_table_new_full(work_hash, work_equal, g_free, g_free),
    .shapes = g_new0(GArray *, s->comms->len),
  };
  gboolean steady = s->steps == 0;
  int steps = MAX(s->steps, 1), w = warmup_of(s);
  g_autofree int64_t *latest = g_new0(int64_t, n_programs);
  g_autofree int64_t **durs = g_new0(int64_t *, n_programs);
  int64_t window = INT64_MAX, cycle = 0;
  for (guint p = 0; p < n_programs; p++) {
    if (!used[p])
      continue;
    Prog g;
    prog_init(&g, &x, g_ptr_array_index(s->programs, p));
    live[p] = live_peak(&g);
    g_autofree int64_t *a = g_new(int64_t, MAX(g.n, 1));
    g_autofree int64_t *b = g_new(int64_t, MAX(g.n, 1));
    for (guint st = 0; steady && st < g.n_streams; st++)
      if (g.last[st] >= 0)
        cycle = MAX(cycle, cycle_through(&g, (guint)g.last[st], a, b));
    if (steady) {
      durs[p] = g_steal_pointer(&g.dur);
      prog_clear(&g);
      continue;
    }
    if (w == 0) {
      /* From the rank's start (0 here; start_ns added below). */
      for (guint i = 0; i < g.n; i++)
        a[i] = 0;
      int64_t end = latest_end(&g, steps, a, b); /* not inside MAX: it runs once */
      latest[p] = MAX(0, end);
    }
    int sinks = 0;
    for (guint o = 0; w > 0 && o < g.n; o++) {
      if (!g.sink[o])
        continue;
      int64_t after;
      if (sinks++ < MAX_SINKS) {
        for (guint i = 0; i < g.n; i++)
          a[i] = UNKNOWN;
        a[o] = 0;
        int64_t end = latest_end(&g, steps - w, a, b);
        after = MAX(0, end);
      } else {
        /* Too many to follow each: its own stream's steps alone. */
        if (!st_mul_i64(steps - w, g.work[st_program_op(g.p, o)->stream], &after))
          after = ST_TIME_MAX;
      }
      window = MIN(window, after);
    }
    prog_clear(&g);
  }
  if (steady) {
    /* And the cycles through several ranks (plan_bound_ranks.c). */
    cycle = MAX(cycle, st_plan_bound_ranks_cycle(s, profile, durs));
    for (guint p = 0; p < n_programs; p++)
      g_free(durs[p]);
    out->step_time_ns = st_steady_step_bound(cycle);
  } else if (w == 0) {
    for (int r = 0; r < s->n_ranks; r++) {
      int64_t end = st_time_add(s->ranks[r].start_ns, latest[s->ranks[r].program]);
      out->step_time_ns = MAX(out->step_time_ns, end / steps);
    }
  } else if (window != INT64_MAX) {
    out->step_time_ns = window / (steps - w);
  }
  /* Memory: each device's persistent states, and the most one of its ranks
   * certainly holds besides. */
  g_autofree int64_t *device = g_new0(int64_t, MAX(s->n_devices, 1));
  g_autofree int64_t *extra = g_new0(int64_t, MAX(s->n_devices, 1));
  for (int r = 0; r < s->n_ranks; r++) {
    int d = s->ranks[r].device, p = s->ranks[r].program;
    device[d] += persistent[p];
    extra[d] = MAX(extra[d], live[p]);
  }
  for (int d = 0; d < s->n_devices; d++)
    out->peak_bytes = MAX(out->peak_bytes, device[d] + extra[d]);
  for (guint c = 0; c < s->comms->len; c++)
    if (x.shapes[c] != NULL)
      g_array_unref(x.shapes[c]);
  g_free(x.shapes);
  g_hash_table_unref(x.coll_ns);
  g_hash_table_unref(x.comp_ns);
}

int64_t
st_plan_work_bound(const StModel *m, const StCluster *c, const StOptions *o)
{
  double peak = st_compute_peak(c, o);
  if (!(peak > 0) || c->gpus <= 0)
    return 0;
  double ns = (m->fwd_flops + m->bwd_flops) * (double)o->global_batch / (c->gpus * peak) * 1e9;
  return isfinite(ns) && ns > 0 ? (int64_t)floor(ns) : 0;
}
