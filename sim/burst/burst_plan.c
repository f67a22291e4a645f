/* burst_plan.c: the planner's dynamic programming over a series-parallel
 * layer DAG (see burst.h).
 *
 * best[v][b] is the earliest predicted finish of node v at width b. A chain
 * is solved node by node. At a fork f, each branch is solved once per width
 * of f (its first node sees f at that width only), and the join J takes per
 * width the slowest branch's arrival; best[J] keeps the best over f's widths
 * and from[J] which one. Nodes inside branches are overwritten for each
 * width of their fork, so the plan is rebuilt backwards by solving each
 * branch again for the fork width chosen. Costs: O(N W^2) for a chain of N
 * nodes and W widths; each level of nested branches multiplies its part by W.
 */
#include "burst/burst.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK(st-burst-error-quark, st_burst_error)

/* ---- graphs ------------------------------------------------------------------ */

static void
node_free(gpointer data)
{
  StBurstNode *n = data;
  g_free(n->name);
  g_free(n->preds);
  g_free(n->compute_ns);
  g_free(n->bwd_ns);
  g_free(n->sync_ns);
  g_free(n->xfer_ns);
  g_free(n->xfer_far_ns);
  g_free(n->xfer_net_ns);
  g_free(n->batch);
  g_free(n);
}

StBurstGraph *
st_burst_graph_new(int max_gpus, int64_t batch)
{
  g_return_val_if_fail(max_gpus >= 1 && batch >= 1, NULL);
  StBurstGraph *g = g_new0(StBurstGraph, 1);
  g->batch = batch;
  g->n_ranks = max_gpus;
  int64_t limit = MIN((int64_t)max_gpus, batch);
  for (int64_t w = 1; w <= limit; w *= 2)
    g->n_widths++;
  g->widths = g_new(int32_t, g->n_widths);
  for (int k = 0; k < g->n_widths; k++)
    g->widths[k] = 1 << k;
  g->nodes = g_ptr_array_new_with_free_func(node_free);
  return g;
}

void
st_burst_graph_free(StBurstGraph *g)
{
  if (g == NULL)
    return;
  g_free(g->widths);
  g_ptr_array_unref(g->nodes);
  g_free(g);
}

int
st_burst_graph_add(StBurstGraph *g, const char *name, int layer, const int *preds, int n_preds)
{
  int W = g->n_widths;
  StBurstNode *n = g_new0(StBurstNode, 1);
  n->name = g_strdup(name);
  n->layer = layer;
  n->n_preds = n_preds;
  n->preds = g_new(int32_t, MAX(n_preds, 1));
  for (int i = 0; i < n_preds; i++) {
    g_return_val_if_fail(preds[i] >= 0 && preds[i] < (int)g->nodes->len, -1);
    n->preds[i] = preds[i];
  }
  n->compute_ns = g_new0(double, W);
  n->bwd_ns = g_new0(double, W);
  n->sync_ns = g_new0(double, W);
  n->xfer_ns = g_new0(double, (gsize)W * W);
  n->xfer_far_ns = g_new0(double, (gsize)W * W);
  n->xfer_net_ns = g_new0(double, (gsize)W * W);
  n->batch = g_new(int32_t, W);
  for (int k = 0; k < W; k++)
    n->batch[k] = st_burst_share(g->batch, g->widths[k], 0);
  g_ptr_array_add(g->nodes, n);
  return (int)g->nodes->len - 1;
}

void
st_burst_params_init(StBurstParams *p)
{
  *p = (StBurstParams){.amp_limit = 2.0, .exempt_ns = 300e3, .refine = TRUE, .pack = TRUE};
}

/* ---- the solver ---------------------------------------------------------------- */

typedef struct {
  const StBurstGraph *g;
  const StBurstParams *p;
  int n, W;
  GArray **succs;   /* [n] of int32 */
  int32_t *ipdom;   /* [n]: immediate post-dominator (the join of a fork), -1 for the sink */
  int32_t *depth;   /* [n]: depth in the post-dominator tree */
  double *best;     /* [n * W] */
  int32_t *from;    /* [n * W]: predecessor width (one predecessor) or fork width (a join) */
  int32_t *fork_of; /* [n]: for a join, its fork */
  int32_t *chosen;  /* [n]: the plan's width index */
  const int32_t *lo; /* [n]: first ranks the refinement keeps (NULL: all 0) */
  double *unit;     /* [W]: scratch for a fork seen at one width */
} Solver;

static inline const StBurstNode *
node(const Solver *s, int v)
{
  return st_burst_graph_node(s->g, v);
}

static inline double
xfer(const Solver *s, int u, int a, int b)
{
  return node(s, u)->xfer_ns[a * s->W + b];
}

static inline double
cost(const Solver *s, int v, int k)
{
  return node(s, v)->compute_ns[k] + node(s, v)->sync_ns[k];
}

static double
amplification(const Solver *s, int u, int a, double out_ns)
{
  const StBurstNode *n = node(s, u);
  if (n->single_ns < s->p->exempt_ns || n->single_ns <= 0)
    return 1.0;
  return (cost(s, u, a) + out_ns) * s->g->widths[a] / n->single_ns;
}

/* The predecessor width to take for `v`'s width b: the fastest among those
 * admitted by the amplification limit, else the least amplified. `uvec`
 * holds u's finish times (INFINITY: not a candidate). Writes u's finish plus
 * the transfer into *arrival. b < 0 means "no successor" (u is the sink). */
static int
choose(const Solver *s, int u, const double *uvec, int b, double *arrival)
{
  int best = -1, least = -1;
  double best_t = INFINITY, least_amp = INFINITY, least_t = INFINITY;
  for (int a = 0; a < s->W; a++) {
    if (!isfinite(uvec[a]))
      continue;
    double x = b >= 0 ? xfer(s, u, a, b) : 0;
    double t = uvec[a] + x;
    double amp = amplification(s, u, a, x);
    if (amp < s->p->amp_limit && t < best_t) {
      best = a;
      best_t = t;
    }
    if (amp < least_amp || (amp == least_amp && t < least_t)) {
      least = a;
      least_amp = amp;
      least_t = t;
    }
  }
  if (best < 0) {
    best = least;
    best_t = least_t;
  }
  *arrival = best_t;
  return best;
}

static void
compute_node(Solver *s, int v, int u, const double *uvec)
{
  for (int b = 0; b < s->W; b++) {
    double arrival = 0;
    int a = u >= 0 ? choose(s, u, uvec, b, &arrival) : -1;
    s->best[v * s->W + b] = cost(s, v, b) + arrival;
    s->from[v * s->W + b] = a;
  }
}

static gboolean
not_series_parallel(GError **error, const Solver *s, int v, const char *why)
{
  g_set_error(error, ST_BURST_ERROR, ST_ERROR_UNSUPPORTED,
              "node %d '%s': %s; the planner takes series-parallel graphs (chains, and forks "
              "whose branches meet at one join)",
              v, node(s, v)->name, why);
  return FALSE;
}

static int solve_chain(Solver *s, int start, int pred, const double *uvec, int stop,
                       GError **error);

/* The vector at the join of fork f, whose own vector is known. */
static gboolean
solve_block(Solver *s, int f, GError **error)
{
  int J = s->ipdom[f], W = s->W;
  GArray *branches = s->succs[f];
  if (J < 0 || node(s, J)->n_preds != (int)branches->len)
    return not_series_parallel(error, s, f, "its branches do not all meet at one join");
  g_autofree double *fvec = g_memdup2(&s->best[f * W], sizeof(double) * W);
  g_autofree double *join = g_new(double, W);
  g_autofree double *arrival = g_new(double, W * branches->len);
  for (int b = 0; b < W; b++) {
    s->best[J * W + b] = INFINITY;
    s->from[J * W + b] = -1;
  }
  /* The fork's own widths under the limit (no transfer counted: it feeds
   * several branches); the least amplified if none is. */
  double dummy;
  int fallback = choose(s, f, fvec, -1, &dummy);
  for (int kf = 0; kf < W; kf++) {
    if (!isfinite(fvec[kf]))
      continue;
    if (kf != fallback && amplification(s, f, kf, 0) >= s->p->amp_limit)
      continue;
    for (guint i = 0; i < branches->len; i++) {
      int first = g_array_index(branches, int32_t, i);
      for (int k = 0; k < W; k++)
        s->unit[k] = k == kf ? fvec[kf] : INFINITY;
      if (first == J) { /* a skip connection straight to the join */
        for (int b = 0; b < W; b++)
          arrival[i * W + b] = fvec[kf] + xfer(s, f, kf, b);
        continue;
      }
      g_autofree double *unit = g_memdup2(s->unit, sizeof(double) * W);
      int last = solve_chain(s, first, f, unit, J, error);
      if (last < 0)
        return FALSE;
      for (int b = 0; b < W; b++)
        choose(s, last, &s->best[last * W], b, &arrival[i * W + b]);
    }
    for (int b = 0; b < W; b++) {
      double slowest = 0;
      for (guint i = 0; i < branches->len; i++)
        slowest = MAX(slowest, arrival[i * W + b]);
      join[b] = cost(s, J, b) + slowest;
      if (join[b] < s->best[J * W + b]) {
        s->best[J * W + b] = join[b];
        s->from[J * W + b] = kf;
      }
    }
  }
  s->fork_of[J] = f;
  return TRUE;
}

/* Solves from `start` (reading `pred` at the finish times `uvec`; pred -1:
 * the source) until the node before `stop` (-1: the sink). Returns that
 * last node, or -1 with `error` set. */
static int
solve_chain(Solver *s, int start, int pred, const double *uvec, int stop, GError **error)
{
  if (node(s, start)->n_preds > 1) {
    not_series_parallel(error, s, start, "a join reached from outside its fork");
    return -1;
  }
  compute_node(s, start, pred, uvec);
  int cur = start;
  for (;;) {
    GArray *next = s->succs[cur];
    if (next->len == 0) {
      if (stop >= 0) {
        not_series_parallel(error, s, cur, "a branch ends before its join");
        return -1;
      }
      return cur;
    }
    if (next->len == 1) {
      int v = g_array_index(next, int32_t, 0);
      if (v == stop)
        return cur;
      if (node(s, v)->n_preds > 1) {
        not_series_parallel(error, s, v, "a join reached from outside its fork");
        return -1;
      }
      compute_node(s, v, cur, &s->best[cur * s->W]);
      cur = v;
      continue;
    }
    int J = s->ipdom[cur];
    if (J == stop || J < 0) {
      not_series_parallel(error, s, cur, "a fork whose join is shared with an enclosing fork");
      return -1;
    }
    if (!solve_block(s, cur, error))
      return -1;
    cur = J;
  }
}

/* Sets the plan's widths from `last` at width k back to `start`. */
static gboolean
assign_chain(Solver *s, int last, int k, int start, GError **error)
{
  int v = last;
  for (;;) {
    s->chosen[v] = k;
    if (v == start)
      return TRUE;
    const StBurstNode *n = node(s, v);
    if (n->n_preds == 1) {
      k = s->from[v * s->W + k];
      v = n->preds[0];
      continue;
    }
    int f = s->fork_of[v], kf = s->from[v * s->W + k];
    GArray *branches = s->succs[f];
    for (guint i = 0; i < branches->len; i++) {
      int first = g_array_index(branches, int32_t, i);
      if (first == v)
        continue;
      for (int w = 0; w < s->W; w++)
        s->unit[w] = w == kf ? s->best[f * s->W + kf] : INFINITY;
      g_autofree double *unit = g_memdup2(s->unit, sizeof(double) * s->W);
      int branch_last = solve_chain(s, first, f, unit, v, error);
      if (branch_last < 0)
        return FALSE;
      double arrival;
      int kb = choose(s, branch_last, &s->best[branch_last * s->W], k, &arrival);
      if (!assign_chain(s, branch_last, kb, first, error))
        return FALSE;
    }
    v = f;
    k = kf;
  }
}

/* Immediate post-dominators, in reverse topological order. */
static void
post_dominators(Solver *s)
{
  for (int v = s->n - 1; v >= 0; v--) {
    GArray *next = s->succs[v];
    if (next->len == 0) {
      s->ipdom[v] = -1;
      s->depth[v] = 0;
      continue;
    }
    int a = g_array_index(next, int32_t, 0);
    for (guint i = 1; i < next->len && a >= 0; i++) {
      int b = g_array_index(next, int32_t, i);
      while (a != b && a >= 0 && b >= 0) {
        if (s->depth[a] >= s->depth[b])
          a = s->ipdom[a];
        else
          b = s->ipdom[b];
      }
      if (a != b)
        a = -1;
    }
    s->ipdom[v] = a;
    s->depth[v] = a >= 0 ? s->depth[a] + 1 : 0;
  }
}

static void
solver_clear(Solver *s)
{
  for (int v = 0; s->succs != NULL && v < s->n; v++)
    g_array_unref(s->succs[v]);
  g_free(s->succs);
  g_free(s->ipdom);
  g_free(s->depth);
  g_free(s->best);
  g_free(s->from);
  g_free(s->fork_of);
  g_free(s->chosen);
  g_free(s->unit);
}

static gboolean
solver_init(Solver *s, const StBurstGraph *g, const StBurstParams *p, GError **error)
{
  *s = (Solver){.g = g, .p = p, .n = (int)g->nodes->len, .W = g->n_widths};
  if (s->n == 0 || s->W == 0) {
    g_set_error(error, ST_BURST_ERROR, ST_ERROR_INVALID, "nothing to plan: %d nodes, %d widths",
                s->n, s->W);
    return FALSE;
  }
  s->succs = g_new(GArray *, s->n);
  for (int v = 0; v < s->n; v++)
    s->succs[v] = g_array_new(FALSE, FALSE, sizeof(int32_t));
  for (int v = 0; v < s->n; v++) {
    const StBurstNode *n = node(s, v);
    if ((v == 0) != (n->n_preds == 0))
      return not_series_parallel(error, s, v, v == 0 ? "the first node has inputs"
                                                     : "a second node without inputs");
    for (int i = 0; i < n->n_preds; i++) {
      int32_t vv = v;
      g_array_append_val(s->succs[n->preds[i]], vv);
    }
  }
  for (int v = 0; v + 1 < s->n; v++)
    if (s->succs[v]->len == 0)
      return not_series_parallel(error, s, v, "a second node whose output nobody reads");
  s->ipdom = g_new(int32_t, s->n);
  s->depth = g_new(int32_t, s->n);
  s->best = g_new(double, (gsize)s->n * s->W);
  s->from = g_new(int32_t, (gsize)s->n * s->W);
  s->fork_of = g_new(int32_t, s->n);
  s->chosen = g_new0(int32_t, s->n);
  s->unit = g_new(double, s->W);
  for (int v = 0; v < s->n; v++)
    s->fork_of[v] = -1;
  post_dominators(s);
  return TRUE;
}

/* ---- refining on the step's timeline ------------------------------------------------ */

/* v's amplification at the widths `w` as the step pays it: its passes and
 * its transfer out to its one successor, without its all-reduce, which runs
 * beside the backward (the timeline charges what of it shows). */
static double
amp_at(const Solver *s, const int32_t *w, int v)
{
  const StBurstNode *n = node(s, v);
  if (n->single_ns < s->p->exempt_ns || n->single_ns <= 0)
    return 1.0;
  GArray *next = s->succs[v];
  double out = next->len == 1 ? xfer(s, v, w[v], w[g_array_index(next, int32_t, 0)]) : 0;
  return (n->compute_ns[w[v]] + out) * s->g->widths[w[v]] / n->single_ns;
}

/* Under the limit, or no more amplified than the dynamic programming left
 * it (a node none of whose widths is admitted). */
static gboolean
admitted(const Solver *s, const int32_t *w, int v, const double *before)
{
  double a = amp_at(s, w, v);
  return a < s->p->amp_limit || a <= before[v];
}

/* The last node of the run of equal widths that starts at or holds i. */
static int
run_end(const int32_t *w, int n, int i)
{
  while (i + 1 < n && w[i + 1] == w[i])
    i++;
  return i;
}

#define REFINE_ROUNDS 32
#define REFINE_SPAN 32 /* nodes a move takes at most, besides whole runs */

/* The dynamic programming counts each all-reduce in the chain; the step
 * overlaps them with the backward (st_burst_step_ns), so a layer with many
 * parameters that it kept narrow to spare the sync may run faster wide.
 * Moves, one at a time, the best of: any span of up to REFINE_SPAN
 * consecutive nodes, a run of equal widths, or a run and the next, to
 * another width, while the step gets faster and every node touched stays
 * admitted. Returns the nodes changed. */
static int
refine(Solver *s)
{
  int n = s->n, W = s->W;
  g_autofree double *before = g_new(double, n);
  g_autofree int32_t *start = g_memdup2(s->chosen, sizeof(int32_t) * n);
  g_autofree int32_t *trial = g_new(int32_t, n);
  for (int v = 0; v < n; v++)
    before[v] = amp_at(s, s->chosen, v);
  double best = st_burst_step_at_ns(s->g, s->chosen, s->lo);
  for (int round = 0; round < REFINE_ROUNDS; round++) {
    int bi = -1, bj = -1, bk = -1;
    double bt = best * (1 - 1e-9);
    for (int i = 0; i < n; i++) {
      int last = MIN(n - 1, i + REFINE_SPAN - 1);
      if (run_end(s->chosen, n, i) + 1 < n)
        last = MAX(last, run_end(s->chosen, n, run_end(s->chosen, n, i) + 1));
      for (int j = i; j <= last; j++) {
        if (j - i >= REFINE_SPAN && j != last && j != run_end(s->chosen, n, i))
          continue;
        for (int k = 0; k < W; k++) {
          memcpy(trial, s->chosen, sizeof(int32_t) * n);
          for (int v = i; v <= j; v++)
            trial[v] = k;
          if (memcmp(trial, s->chosen, sizeof(int32_t) * n) == 0)
            continue;
          gboolean ok = TRUE;
          for (int v = i; ok && v <= j; v++)
            ok = admitted(s, trial, v, before);
          for (int p = 0; ok && p < node(s, i)->n_preds; p++)
            ok = admitted(s, trial, node(s, i)->preds[p], before);
          for (int v = i; ok && s->lo != NULL && v <= j; v++)
            ok = s->lo[v] + s->g->widths[k] <= s->g->n_ranks;
          if (!ok)
            continue;
          double t = st_burst_step_at_ns(s->g, trial, s->lo);
          if (t < bt) {
            bt = t;
            bi = i, bj = j, bk = k;
          }
        }
      }
    }
    if (bi < 0)
      break;
    for (int v = bi; v <= bj; v++)
      s->chosen[v] = bk;
    best = st_burst_step_at_ns(s->g, s->chosen, s->lo);
  }
  int changed = 0;
  for (int v = 0; v < n; v++)
    changed += s->chosen[v] != start[v];
  return changed;
}

/* Fills the plan's per-node numbers and totals from the chosen widths. */
static void
fill_plan(const Solver *s, const int32_t *lo, StBurstPlan *plan)
{
  const StBurstGraph *g = s->g;
  int top = s->W - 1;
  plan->dp_gpus = g->widths[top];
  for (int v = 0; v < s->n; v++) {
    const StBurstNode *n = node(s, v);
    int k = s->chosen[v];
    StBurstChoice *c = &plan->nodes[v];
    *c = (StBurstChoice){
      .width = k,
      .gpus = g->widths[k],
      .first_rank = lo[v],
      .batch = n->batch[k],
      .compute_ns = n->compute_ns[k],
      .sync_ns = n->sync_ns[k],
      .end_ns = s->best[v * s->W + k],
    };
    plan->gpu_ns += c->gpus * (c->compute_ns + c->sync_ns);
    plan->dp_iteration_ns += cost(s, v, top);
    for (int i = 0; i < n->n_preds; i++) {
      int u = n->preds[i], a = s->chosen[u];
      double x = st_burst_edge_ns(g, u, a, lo[u], k, lo[v]);
      c->xfer_in_ns = MAX(c->xfer_in_ns, x);
      plan->gpu_ns += x * MAX(g->widths[a], g->widths[k]);
    }
    GArray *next = s->succs[v];
    double out = next->len == 1 ? xfer(s, v, k, s->chosen[g_array_index(next, int32_t, 0)]) : 0;
    c->amplification = amplification(s, v, k, out);
  }
  plan->iteration_ns = plan->nodes[s->n - 1].end_ns;
  plan->dp_gpu_ns = plan->dp_gpus * plan->dp_iteration_ns;
  plan->step_ns = st_burst_step_at_ns(g, s->chosen, lo);
  plan->unpacked_step_ns = st_burst_step_ns(g, s->chosen);
  g_autofree int32_t *wide = g_new(int32_t, s->n);
  for (int v = 0; v < s->n; v++)
    wide[v] = top;
  plan->dp_step_ns = st_burst_step_ns(g, wide);
}

StBurstPlan *
st_burst_plan_new(const StBurstGraph *g, const StBurstParams *p, GError **error)
{
  g_return_val_if_fail(g != NULL && p != NULL, NULL);
  Solver s;
  if (!solver_init(&s, g, p, error)) {
    solver_clear(&s);
    return NULL;
  }
  int last = solve_chain(&s, 0, -1, NULL, -1, error);
  if (last >= 0 && last != s.n - 1) {
    not_series_parallel(error, &s, last, "the sink is not the last node");
    last = -1;
  }
  double arrival;
  if (last < 0 || !assign_chain(&s, last, choose(&s, last, &s.best[last * s.W], -1, &arrival), 0,
                                error)) {
    solver_clear(&s);
    return NULL;
  }
  StBurstPlan *plan = g_new0(StBurstPlan, 1);
  plan->n_nodes = s.n;
  plan->nodes = g_new0(StBurstChoice, s.n);
  /* Refined then packed; and, with packing, packed then refined with the
   * branches where packing put them (a branch that runs beside another may
   * be better narrow than the refinement of a serial timeline leaves it):
   * the faster of the two. */
  g_autofree int32_t *dp_widths = g_memdup2(s.chosen, sizeof(int32_t) * s.n);
  if (p->refine)
    plan->refined = refine(&s);
  g_autofree int32_t *lo = g_new0(int32_t, s.n);
  if (p->pack) {
    plan->packed = st_burst_pack(g, s.chosen, lo);
    g_autofree int32_t *widths_a = g_memdup2(s.chosen, sizeof(int32_t) * s.n);
    double step_a = st_burst_step_at_ns(g, s.chosen, lo);
    g_autofree int32_t *lo_b = g_new0(int32_t, s.n);
    memcpy(s.chosen, dp_widths, sizeof(int32_t) * s.n);
    int packed_b = st_burst_pack(g, s.chosen, lo_b);
    s.lo = lo_b;
    int refined_b = p->refine ? refine(&s) : 0;
    s.lo = NULL;
    if (st_burst_step_at_ns(g, s.chosen, lo_b) < step_a) {
      memcpy(lo, lo_b, sizeof(int32_t) * s.n);
      plan->packed = packed_b;
      plan->refined = refined_b;
    } else {
      memcpy(s.chosen, widths_a, sizeof(int32_t) * s.n);
    }
  }
  fill_plan(&s, lo, plan);
  solver_clear(&s);
  return plan;
}

void
st_burst_plan_free(StBurstPlan *plan)
{
  if (plan == NULL)
    return;
  g_free(plan->nodes);
  g_free(plan);
}
