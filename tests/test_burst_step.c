/* test_burst_step.c: the burst planner's step timeline (burst_step.c) keeps
 * one clock per segment of ranks, cut at every set's first rank and one past
 * its last, instead of one per rank (issue 22: a 70B plan on 128 GPUs took
 * 25 CPU-s to refine, 0.4 s now). The ranks of a segment are in exactly the
 * same sets, so the two must give the same step to the last bit: here the
 * per-rank timeline as it was, on random graphs, widths and first ranks
 * (chains, forks, packed sets, all-reduces slowing the backward).
 */
#include <math.h>
#include <string.h>

#include "burst/burst.h"
#include "testutil.h"

/* ---- the per-rank timeline, as burst_step.c computed it before ---------- */

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

static double
per_rank_step(const StBurstGraph *g, const int32_t *width, const int32_t *lo)
{
  int n = (int)g->nodes->len, R = MAX(g->n_ranks, 1);
  g_autofree double *fin = g_new0(double, MAX(n, 1));
  g_autofree double *ready = g_new0(double, MAX(n, 1));
  g_autofree double *comp = g_new0(double, R);
  g_autofree double *sync = g_new0(double, R);
  g_autofree double *send = g_new0(double, R);
  g_autofree double *recv = g_new0(double, R);
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
    ready[v] = -INFINITY;
  g_autofree GArray **syncs = g_new(GArray *, R);
  g_autofree guint *first_open = g_new0(guint, R);
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
      double alone = MIN(work, MAX(0, s0 - t));
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

/* ---- random graphs -------------------------------------------------------- */

/* n nodes over R ranks (8 a machine); each reads the node before it and, on
 * `forks`, one more earlier node; costs in whole microseconds so that ties
 * happen. */
static StBurstGraph *
random_graph(GRand *rand, int n, int R, gboolean forks)
{
  StBurstGraph *g = st_burst_graph_new(R, 4096);
  g->ranks_per_node = 8;
  g->step_ns = g_rand_int_range(rand, 0, 50) * 1e3;
  g->sync_drag = g_rand_boolean(rand) ? 0 : g_rand_double_range(rand, 0, 0.5);
  int W = g->n_widths;
  for (int v = 0; v < n; v++) {
    int preds[2], n_preds = 0;
    if (v > 0)
      preds[n_preds++] = v - 1;
    if (forks && v > 1 && g_rand_int_range(rand, 0, 3) == 0)
      preds[n_preds++] = g_rand_int_range(rand, 0, v - 1);
    int id = st_burst_graph_add(g, "n", -1, preds, n_preds);
    StBurstNode *x = st_burst_graph_node(g, id);
    x->params = g_rand_int_range(rand, 0, 1000);
    for (int k = 0; k < W; k++) {
      x->compute_ns[k] = g_rand_int_range(rand, 1, 400) * 1e3;
      x->bwd_ns[k] = x->compute_ns[k] * g_rand_double_range(rand, 0.3, 0.7);
      x->sync_ns[k] = k == 0 ? 0 : g_rand_int_range(rand, 0, 300) * 1e3;
      for (int b = 0; b < W; b++) {
        x->xfer_ns[k * W + b] = k == b ? 0 : g_rand_int_range(rand, 0, 100) * 1e3;
        x->xfer_far_ns[k * W + b] = g_rand_int_range(rand, 0, 150) * 1e3;
        x->xfer_net_ns[k * W + b] = g_rand_int_range(rand, 0, 300) * 1e3;
      }
    }
    x->single_ns = x->compute_ns[0];
  }
  return g;
}

static void
test_segments_equal_ranks(void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(22);
  const int ranks[] = {1, 2, 8, 24, 64, 1024};
  int compared = 0;
  for (guint c = 0; c < G_N_ELEMENTS(ranks); c++) {
    for (int trial = 0; trial < 40; trial++) {
      int R = ranks[c], n = g_rand_int_range(rand, 1, 40);
      g_autoptr(StBurstGraph) g = random_graph(rand, n, R, trial % 2 == 1);
      g_autofree int32_t *width = g_new(int32_t, n);
      g_autofree int32_t *lo = g_new(int32_t, n);
      g_autofree int32_t *zero = g_new0(int32_t, n);
      /* A few widths, as plans have them; every other trial packed: sets
       * from other first ranks, within the R ranks. */
      int few = g_rand_int_range(rand, 1, g->n_widths + 1);
      for (int v = 0; v < n; v++) {
        width[v] = g_rand_int_range(rand, 0, few);
        int w = g->widths[width[v]];
        lo[v] = trial % 4 < 2 ? 0 : g_rand_int_range(rand, 0, R - w + 1);
      }
      double a = st_burst_step_at_ns(g, width, lo), b = per_rank_step(g, width, lo);
      g_assert_true(memcmp(&a, &b, sizeof a) == 0);
      a = st_burst_step_ns(g, width);
      b = per_rank_step(g, width, zero);
      g_assert_true(memcmp(&a, &b, sizeof a) == 0);
      g_assert_cmpfloat(a, >, 0);
      compared += 2;
    }
  }
  g_assert_cmpint(compared, ==, 2 * 40 * (int)G_N_ELEMENTS(ranks));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/burst/step/segments-equal-ranks", test_segments_equal_ranks);
  return g_test_run();
}
