/* burst_step.c: the predicted step of a plan on the schedule's own timeline
 * (st_burst_step_at_ns, burst.h): per rank a compute stream and a sync
 * stream, the forward in topological order, the backward in reverse with
 * the all-reduces beside it, then the optimizer step. */
#include "burst/burst.h"

#include <math.h>

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

/* The latest clock over ranks first .. first + w - 1. */
static double
latest(const double *clock, int first, int w)
{
  double t = 0;
  for (int r = first; r < first + w; r++)
    t = MAX(t, clock[r]);
  return t;
}

static void
set_clock(double *clock, int first, int w, double t)
{
  for (int r = first; r < first + w; r++)
    clock[r] = t;
}

/* Moving one way (`ns`) from ranks fs .. fs + fw - 1 to ts .. ts + tw - 1,
 * once the data is there (`at`): the transfers of a rank follow one another
 * on its send and its recv stream, as the schedule posts them (a fork
 * feeding four branches on other GPUs sends four times; a join gathers
 * four times). Returns the arrival. */
static double
move(double *send, double *recv, int fs, int fw, int ts, int tw, double at, double ns)
{
  if (ns <= 0)
    return at;
  double busy = MAX(latest(send, fs, fw), latest(recv, ts, tw)), start = MAX(at, busy);
  set_clock(send, fs, fw, start + ns);
  set_clock(recv, ts, tw, start + ns);
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
  g_autofree double *fin = g_new0(double, MAX(n, 1));   /* forward, then backward finish */
  g_autofree double *ready = g_new0(double, MAX(n, 1)); /* output gradient arrived */
  g_autofree double *comp = g_new0(double, R);          /* each rank's compute stream */
  g_autofree double *sync = g_new0(double, R);          /* each rank's sync stream */
  g_autofree double *send = g_new0(double, R);          /* each rank's send stream */
  g_autofree double *recv = g_new0(double, R);          /* each rank's recv stream */
  for (int v = 0; v < n; v++) {
    const StBurstNode *x = st_burst_graph_node(g, v);
    int w = g->widths[width[v]];
    double start = latest(comp, lo[v], w);
    for (int i = 0; i < x->n_preds; i++) {
      int u = x->preds[i];
      double ns = st_burst_edge_ns(g, u, width[u], lo[u], width[v], lo[v]) / 2;
      double arrival = move(send, recv, lo[u], g->widths[width[u]], lo[v], w, fin[u], ns);
      start = MAX(start, arrival);
    }
    fin[v] = start + x->compute_ns[width[v]] - x->bwd_ns[width[v]];
    set_clock(comp, lo[v], w, fin[v]);
  }
  double forward = latest(comp, 0, R);
  for (int v = 0; v < n; v++)
    ready[v] = -INFINITY; /* no successor's gradient yet: the sink's starts the backward */
  /* The backward in reverse order, each node's all-reduce queued on its
   * set's sync streams as its backward ends; the backwards its first rank
   * runs after it run slower while it runs (sync_drag). */
  g_autofree GArray **syncs = g_new(GArray *, R); /* per rank: start, end, ... */
  g_autofree guint *first_open = g_new0(guint, R); /* the all-reduces before it ended before
                                                      the compute's clock */
  for (int r = 0; r < R; r++)
    syncs[r] = g_array_new(FALSE, FALSE, sizeof(double));
  for (int v = n - 1; v >= 0; v--) {
    const StBurstNode *x = st_burst_graph_node(g, v);
    int w = g->widths[width[v]], r0 = lo[v];
    double t = MAX(isfinite(ready[v]) ? ready[v] : forward, latest(comp, r0, w));
    double work = x->bwd_ns[width[v]];
    GArray *list = syncs[r0];
    guint open = first_open[r0];
    while (open + 1 < list->len && g_array_index(list, double, open + 1) <= t)
      open += 2;
    first_open[r0] = open;
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
    set_clock(comp, r0, w, fin[v]);
    double cost = x->sync_ns[width[v]];
    if (cost > 0) {
      double s0 = MAX(latest(sync, r0, w), fin[v]), s1 = s0 + cost;
      set_clock(sync, r0, w, s1);
      for (int r = r0; r < r0 + w; r++) {
        g_array_append_val(syncs[r], s0);
        g_array_append_val(syncs[r], s1);
      }
    }
    for (int i = 0; i < x->n_preds; i++) {
      int u = x->preds[i];
      double ns = st_burst_edge_ns(g, u, width[u], lo[u], width[v], lo[v]) / 2;
      double arrival = move(send, recv, r0, w, lo[u], g->widths[width[u]], fin[v], ns);
      ready[u] = MAX(ready[u], arrival);
    }
  }
  for (int r = 0; r < R; r++)
    g_array_unref(syncs[r]);
  /* Each rank steps the parameters of the nodes it ran, once its compute
   * and its all-reduces are done: step_ns in proportion to them. */
  g_autofree double *held = g_new0(double, R);
  double total = 0;
  for (int v = 0; v < n; v++) {
    const StBurstNode *x = st_burst_graph_node(g, v);
    total += (double)x->params;
    for (int r = lo[v]; r < lo[v] + g->widths[width[v]]; r++)
      held[r] += (double)x->params;
  }
  double end = 0;
  for (int r = 0; r < R; r++)
    end = MAX(end, MAX(comp[r], sync[r]) + (total > 0 ? g->step_ns * held[r] / total
                                                      : g->step_ns));
  return end;
}

