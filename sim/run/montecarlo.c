/* montecarlo.c: trials of a training run under failures (run.h).
 *
 * One trial walks the run in time. Work (the steps, stretched by the
 * stragglers) advances in segments of interval_s, each followed by a
 * checkpoint that stalls the steps ckpt.stall_s; a synchronous checkpoint is
 * durable when its stall ends, an asynchronous one when its write ends
 * (ckpt.write_s after the stall), and a checkpoint whose predecessor is
 * still being written waits for it. Interruptions are a Poisson process of
 * the job's summed rate (exponential gaps: memoryless, so a gap drawn before
 * a restart still holds after it), striking during steps, stalls and
 * restarts alike, as in Daly's model. An interruption loses the work since
 * the last durable checkpoint, then the job restarts (restart_s; one that
 * is interrupted starts over). A hardware cause (st_failure_needs_node)
 * takes a spare node when the job holds spares (spare_nodes >= 0); with none
 * left the job waits for the first repaired node (repair_s after its
 * failure), and the failed node joins the spares when repaired.
 *
 * Accounting per trial: wall = work + stragglers + checkpoint stalls +
 * restarts + repair waits + lost, the last the remainder (work redone and
 * stalls cut short), so the parts add up exactly. Deterministic: one GRand
 * from spec->seed draws every trial in order.
 */
#include <math.h>

#include "run/run.h"

#define MAX_EVENTS 200000

typedef struct {
  GRand *rng;
  double rate_s;                /* interruptions per second */
  double cum[ST_FAIL_N];        /* cumulative share of each cause */
  GArray *returns;              /* double: when each node under repair comes back */
  int spares;                   /* free spares; < 0: the site's pool */
  double repair_s;
} Trial;

static double
draw_gap(Trial *x)
{
  return x->rate_s > 0 ? -log1p(-g_rand_double(x->rng)) / x->rate_s : INFINITY;
}

static StFailureCause
draw_cause(Trial *x)
{
  double u = g_rand_double(x->rng);
  for (int c = 0; c < ST_FAIL_N - 1; c++)
    if (u < x->cum[c])
      return (StFailureCause)c;
  return ST_FAIL_N - 1;
}

static int
compare_double(gconstpointer a, gconstpointer b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* A node failed at `t`: the time the job waits for a node to replace it. */
static double
replace_node(Trial *x, double t)
{
  if (x->spares < 0)
    return 0;
  /* Repaired nodes rejoin the spares. */
  while (x->returns->len > 0 && g_array_index(x->returns, double, 0) <= t) {
    g_array_remove_index(x->returns, 0);
    x->spares++;
  }
  /* The failed node goes to repair; a free spare takes its place, else the
   * job waits for the first node back (perhaps its own). */
  double ret = t + x->repair_s;
  g_array_append_val(x->returns, ret);
  g_array_sort(x->returns, compare_double);
  if (x->spares > 0) {
    x->spares--;
    return 0;
  }
  double back = g_array_index(x->returns, double, 0);
  g_array_remove_index(x->returns, 0);
  return back - t;
}

static void
add_event(GArray *events, double t, int kind, double work)
{
  if (events != NULL && events->len < MAX_EVENTS) {
    StRunEvent e = {t, kind, work};
    g_array_append_val(events, e);
  }
}

typedef struct {
  double wall, ckpt, restart, repair;
  int interruptions, by_cause[ST_FAIL_N], checkpoints;
} Tally;

static void
one_trial(Trial *x, const StRunSpec *spec, const StRunResult *r, double work, Tally *out,
          GArray *events)
{
  *out = (Tally){0};
  double tau = r->interval_s, stall = r->ckpt.stall_s, write = r->ckpt.write_s;
  double restart = r->restart_s;
  double t = 0, w = 0, durable = 0, last = 0;
  double pending_w = -1, pending_at = 0;
  double next = draw_gap(x);
  g_array_set_size(x->returns, 0);
  x->spares = spec->spare_nodes;
  for (; work > 0;) {
    /* The phase ahead: steps to the next checkpoint, a wait for the
     * previous write, or a stall; an interruption may cut it. */
    double seg_end = MIN(last + tau, work);
    double dt = seg_end - w;
    double wait = 0;
    gboolean stepping = dt > 0;
    if (!stepping) {
      if (pending_w >= 0 && pending_at > t)
        wait = pending_at - t;
      dt = wait + stall;
    }
    if (t + dt > next) {
      /* Interrupted: a stall cut short counts as lost. */
      t = next;
      if (pending_w >= 0 && pending_at <= t) {
        durable = pending_w;
        add_event(events, pending_at, 0, durable);
      }
      pending_w = -1;
      w = last = durable;
      for (;;) {
        StFailureCause cause = draw_cause(x);
        out->interruptions++;
        out->by_cause[cause]++;
        add_event(events, t, 1 + (int)cause, durable);
        if (st_failure_needs_node(cause)) {
          double wait_node = replace_node(x, t);
          out->repair += wait_node;
          t += wait_node;
        }
        next = t + draw_gap(x);
        if (next >= t + restart)
          break;
        out->restart += next - t;
        t = next;
      }
      out->restart += restart;
      t += restart;
      continue;
    }
    t += dt;
    if (stepping) {
      w = seg_end;
      if (w >= work)
        break;
      continue;
    }
    /* The stall ended: a checkpoint of w. */
    out->ckpt += dt;
    out->checkpoints++;
    if (pending_w >= 0) {
      durable = pending_w;
      add_event(events, pending_at, 0, durable);
      pending_w = -1;
    }
    if (spec->ckpt_async) {
      pending_w = w;
      pending_at = t + write;
    } else {
      durable = w;
      add_event(events, t, 0, durable);
    }
    last = w;
  }
  out->wall = t;
}

void
st_run_simulate(const StRunStep *step, const StRunSpec *spec, StRunResult *r)
{
  (void)step;
  Trial x = {0};
  x.rng = g_rand_new_with_seed(spec->seed);
  x.returns = g_array_new(FALSE, FALSE, sizeof(double));
  x.repair_s = spec->repair_s;
  double sum = 0;
  for (int c = 0; c < ST_FAIL_N; c++)
    sum += r->rate_by_cause[c];
  x.rate_s = sum / 3600.0;
  double acc = 0;
  for (int c = 0; c < ST_FAIL_N; c++) {
    acc += sum > 0 ? r->rate_by_cause[c] / sum : 0;
    x.cum[c] = acc;
  }
  double work = r->work_s * r->straggler_factor;
  int trials = MAX(spec->trials, 1);
  double wall = 0, wall2 = 0, ckpt = 0, restart = 0, repair = 0, n = 0, checkpoints = 0;
  double by_cause[ST_FAIL_N] = {0};
  if (r->timeline != NULL)
    g_array_unref(r->timeline);
  r->timeline = g_array_new(FALSE, FALSE, sizeof(StRunEvent));
  for (int i = 0; i < trials; i++) {
    Tally t;
    one_trial(&x, spec, r, work, &t, i == 0 ? r->timeline : NULL);
    wall += t.wall;
    wall2 += t.wall * t.wall;
    ckpt += t.ckpt;
    restart += t.restart;
    repair += t.repair;
    n += t.interruptions;
    checkpoints += t.checkpoints;
    for (int c = 0; c < ST_FAIL_N; c++)
      by_cause[c] += t.by_cause[c];
  }
  r->trials = trials;
  r->wall_s = wall / trials;
  r->wall_sd_s = trials > 1 ? sqrt(MAX(0, (wall2 - wall * wall / trials) / (trials - 1))) : 0;
  r->parts_s[ST_RUN_PRODUCTIVE] = r->work_s;
  r->parts_s[ST_RUN_STRAGGLERS] = work - r->work_s;
  r->parts_s[ST_RUN_CHECKPOINT] = ckpt / trials;
  r->parts_s[ST_RUN_RESTART] = restart / trials;
  r->parts_s[ST_RUN_REPAIR] = repair / trials;
  r->parts_s[ST_RUN_LOST] = r->wall_s - work - r->parts_s[ST_RUN_CHECKPOINT] -
                            r->parts_s[ST_RUN_RESTART] - r->parts_s[ST_RUN_REPAIR];
  /* The remainder is exact but for rounding: no lost time without failures. */
  if (fabs(r->parts_s[ST_RUN_LOST]) < 1e-9 * MAX(r->wall_s, 1))
    r->parts_s[ST_RUN_LOST] = 0;
  r->interruptions = n / trials;
  for (int c = 0; c < ST_FAIL_N; c++)
    r->interruptions_by_cause[c] = by_cause[c] / trials;
  r->checkpoints = checkpoints / trials;
  r->goodput = r->wall_s > 0 ? r->work_s / r->wall_s : 0;
  r->effective = r->wall_s > 0 ? work / r->wall_s : 0;
  g_array_unref(x.returns);
  g_rand_free(x.rng);
}
