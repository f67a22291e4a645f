/* burst_step.c: the predicted step of a plan on the schedule's own timeline
 * (st_burst_step_at_ns, burst.h): per rank a compute stream and a sync
 * stream, the forward in topological order, the backward in reverse with
 * the all-reduces beside it, then the optimizer step. */
#include "burst/burst.h"

#include <math.h>

#include "base/util.h"

double
st_burst_edge_ns(const StBurstGraph *g, int u, int a, int fa, int b, int fb)
{
  const StBurstNode *p = st_burst_graph_node(g, u);
  int W = g->n_widths, per = g->ranks_per_node;
  if (fa == fb)
    return p->xfer_ns[a * W + b];
  int lo = MIN(fa, fb), hi = MAX(fa + g->widths[a], fb + g->widths[b]) - 1;
  return per <= 0 || lo / per == hi / per ? p->xfer_far_ns[a * W + b]
                                          : p->xfer_net_ns[a * W + b];
}

/* Ranks in segments. Every set the step touches is a node's ranks,
 * lo[v] .. lo[v] + w - 1; cut at each set's first rank and one past its
 * last, the ranks of a segment are in exactly the same sets, so their clocks
 * stay equal and one value stands for them all. The step is the same as with
 * a clock per rank (maxima and assignments only), in O(segments) per set
 * instead of O(ranks): the planner's refinement evaluates thousands of
 * steps of a 1024-rank plan whose few widths make a dozen segments.
 * tests/test_burst_pack.c holds it to a clock per rank. */
typedef struct {
  int n;           /* segments */
  int32_t *cut;    /* [n + 1]: the first rank of each segment, then R */
  int32_t *from;   /* [nodes]: the first segment of each node's set */
  int32_t *to;     /* [nodes]: one past its last */
} Segments;

static int
find_cut(const int32_t *cut, int n, int32_t rank)
{
  int a = 0, b = n; /* cut[a] <= rank < cut[b] once it ends */
  while (b - a > 1) {
    int m = (a + b) / 2;
    if (cut[m] <= rank)
      a = m;
    else
      b = m;
  }
  return a;
}

static void
segments_init(Segments *sg, const StBurstGraph *g, const int32_t *width, const int32_t *lo,
              int n, int R)
{
  g_autofree int32_t *all = g_new(int32_t, 2 * n + 2);
  int k = 0;
  all[k++] = 0;
  all[k++] = R;
  for (int v = 0; v < n; v++) {
    all[k++] = CLAMP(lo[v], 0, R);
    all[k++] = CLAMP(lo[v] + g->widths[width[v]], 0, R);
  }
  qsort(all, k, sizeof(int32_t), st_compare_int32);
  sg->cut = g_new(int32_t, k);
  int m = 0;
  for (int i = 0; i < k; i++)
    if (m == 0 || all[i] != sg->cut[m - 1])
      sg->cut[m++] = all[i];
  sg->n = MAX(m - 1, 1);
  sg->from = g_new(int32_t, MAX(n, 1));
  sg->to = g_new(int32_t, MAX(n, 1));
  for (int v = 0; v < n; v++) {
    int a = CLAMP(lo[v], 0, R), b = CLAMP(lo[v] + g->widths[width[v]], 0, R);
    sg->from[v] = find_cut(sg->cut, m, a);
    sg->to[v] = b > a ? find_cut(sg->cut, m, b) : sg->from[v];
  }
}

static void
segments_clear(Segments *sg)
{
  g_free(sg->cut);
  g_free(sg->from);
  g_free(sg->to);
}

/* The latest clock over segments a .. b - 1. */
static double
latest(const double *clock, int a, int b)
{
  double t = 0;
  for (int i = a; i < b; i++)
    t = MAX(t, clock[i]);
  return t;
}

static void
set_clock(double *clock, int a, int b, double t)
{
  for (int i = a; i < b; i++)
    clock[i] = t;
}

/* Moving one way (`ns`) from the set of node u to that of node v, once the
 * data is there (`at`): the transfers of a rank follow one another on its
 * send and its recv stream, as the schedule posts them (a fork feeding four
 * branches on other GPUs sends four times; a join gathers four times).
 * Returns the arrival. */
static double
move(const Segments *sg, double *send, double *recv, int u, int v, double at, double ns)
{
  if (ns <= 0)
    return at;
  double busy = MAX(latest(send, sg->from[u], sg->to[u]), latest(recv, sg->from[v], sg->to[v]));
  double start = MAX(at, busy);
  set_clock(send, sg->from[u], sg->to[u], start + ns);
  set_clock(recv, sg->from[v], sg->to[v], start + ns);
  return start + ns;
}

double
st_burst_step_ns(const StBurstGraph *g, const int32_t *width)
{
  return st_burst_step_at_ns(g, width, NULL);
}

double
st_burst_step_at_ns(const StBurstGraph *g, const int32_t *width, const int32_t *first)
{
  int n = (int)g->nodes->len, R = MAX(g->n_ranks, 1);
  g_autofree int32_t *zero = first == NULL ? g_new0(int32_t, MAX(n, 1)) : NULL;
  const int32_t *lo = first != NULL ? first : zero;
  Segments sg;
  segments_init(&sg, g, width, lo, n, R);
  int S = sg.n;
  g_autofree double *fin = g_new0(double, MAX(n, 1));   /* forward, then backward finish */
  g_autofree double *ready = g_new0(double, MAX(n, 1)); /* output gradient arrived */
  g_autofree double *comp = g_new0(double, S);          /* each segment's compute streams */
  g_autofree double *sync = g_new0(double, S);          /* its sync streams */
  g_autofree double *send = g_new0(double, S);          /* its send streams */
  g_autofree double *recv = g_new0(double, S);          /* its recv streams */
  for (int v = 0; v < n; v++) {
    const StBurstNode *x = st_burst_graph_node(g, v);
    double start = latest(comp, sg.from[v], sg.to[v]);
    for (int i = 0; i < x->n_preds; i++) {
      int u = x->preds[i];
      double ns = st_burst_edge_ns(g, u, width[u], lo[u], width[v], lo[v]) / 2;
      double arrival = move(&sg, send, recv, u, v, fin[u], ns);
      start = MAX(start, arrival);
    }
    fin[v] = start + x->compute_ns[width[v]] - x->bwd_ns[width[v]];
    set_clock(comp, sg.from[v], sg.to[v], fin[v]);
  }
  double forward = latest(comp, 0, S);
  for (int v = 0; v < n; v++)
    ready[v] = -INFINITY; /* no successor's gradient yet: the sink's starts the backward */
  /* The backward in reverse order, each node's all-reduce queued on its
   * set's sync streams as its backward ends; the backwards its first rank
   * runs after it run slower while it runs (sync_drag). Only a set's
   * first segment is read: the list of its first rank. */
  g_autofree GArray **syncs = g_new(GArray *, S); /* per segment: start, end, ... */
  g_autofree guint *first_open = g_new0(guint, S); /* the all-reduces before it ended before
                                                      the compute's clock */
  for (int i = 0; i < S; i++)
    syncs[i] = g_array_new(FALSE, FALSE, sizeof(double));
  for (int v = n - 1; v >= 0; v--) {
    const StBurstNode *x = st_burst_graph_node(g, v);
    int a = sg.from[v], b = sg.to[v];
    double t = MAX(isfinite(ready[v]) ? ready[v] : forward, latest(comp, a, b));
    double work = x->bwd_ns[width[v]];
    GArray *list = syncs[a];
    guint open = first_open[a];
    while (open + 1 < list->len && g_array_index(list, double, open + 1) <= t)
      open += 2;
    first_open[a] = open;
    for (guint i = open; i + 1 < list->len && work > 0; i += 2) {
      double s0 = g_array_index(list, double, i), s1 = g_array_index(list, double, i + 1);
      if (s1 <= t)
        continue;
      double alone = MIN(work, MAX(0, s0 - t)); /* before this all-reduce starts */
      t += alone;
      work -= alone;
      double rate = 1 - g->sync_drag;
      double beside = rate > 0 ? MIN(work / rate, s1 - t) : s1 - t;
      t += beside;
      work -= beside * rate;
    }
    fin[v] = t + MAX(work, 0);
    set_clock(comp, a, b, fin[v]);
    double cost = x->sync_ns[width[v]];
    if (cost > 0) {
      double s0 = MAX(latest(sync, a, b), fin[v]), s1 = s0 + cost;
      set_clock(sync, a, b, s1);
      for (int i = a; i < b; i++) {
        g_array_append_val(syncs[i], s0);
        g_array_append_val(syncs[i], s1);
      }
    }
    for (int i = 0; i < x->n_preds; i++) {
      int u = x->preds[i];
      double ns = st_burst_edge_ns(g, u, width[u], lo[u], width[v], lo[v]) / 2;
      double arrival = move(&sg, send, recv, v, u, fin[v], ns);
      ready[u] = MAX(ready[u], arrival);
    }
  }
  for (int i = 0; i < S; i++)
    g_array_unref(syncs[i]);
  /* Each rank steps the parameters of the nodes it ran, once its compute
   * and its all-reduces are done: step_ns in proportion to them. */
  g_autofree double *held = g_new0(double, S);
  double total = 0;
  for (int v = 0; v < n; v++) {
    const StBurstNode *x = st_burst_graph_node(g, v);
    total += (double)x->params;
    for (int i = sg.from[v]; i < sg.to[v]; i++)
      held[i] += (double)x->params;
  }
  double end = 0;
  for (int i = 0; i < S; i++)
    end = MAX(end, MAX(comp[i], sync[i]) + (total > 0 ? g->step_ns * held[i] / total
                                                      : g->step_ns));
  segments_clear(&sg);
  return end;
}
