/* steady.c: the steady-state rule (see steady.h). */
#include "output/steady.h"

#include <math.h>
#include <string.h>

#define DEFAULT_TOLERANCE 1e-4
#define DEFAULT_FLOOR_NS 100
/* Periods tried: at least this many steps, and up to the warm-up scale
 * (cyclic DP's N workers can settle into a rotation of several steps), at
 * most the second figure. */
#define MIN_MAX_PERIOD 4
#define MAX_MAX_PERIOD 64
/* Rule 3: periods running over which a state's changes must have shrunk,
 * how far (in tolerances) its phases may still be from repeating, and how
 * far (a fraction of the step) they may still move in all. */
#define SETTLING_PERIODS 8
#define SETTLING_SLACK 10
#define SETTLING_REACH 0.05

void
st_steady_rule_init(StSteadyRule *rule, const StSchedule *s, int cap)
{
  *rule = (StSteadyRule){
    .tolerance = DEFAULT_TOLERANCE,
    .floor_ns = DEFAULT_FLOOR_NS,
    .max_period = CLAMP(s->warmup_scale, MIN_MAX_PERIOD, MAX_MAX_PERIOD),
    .horizon = MAX(cap, 1),
    .first_step = MAX(s->warmup_steps, 0),
  };
}

int
st_steady_cap(const StSchedule *s)
{
  int64_t cap = (int64_t)MAX(s->warmup_steps, 0) + 8 + 4 * (int64_t)MAX(s->warmup_scale, 1);
  return (int)MIN(cap, G_MAXINT32 / 2);
}

int64_t
st_steady_step_bound(int64_t cycle_ns)
{
  if (cycle_ns <= SETTLING_SLACK * DEFAULT_FLOOR_NS)
    return 0;
  return (int64_t)floor((double)(cycle_ns - SETTLING_SLACK * DEFAULT_FLOOR_NS) /
                        (1 + SETTLING_SLACK * DEFAULT_TOLERANCE));
}

struct StSteadyDetector {
  StSteadyRule rule;
  int n_lanes;
  int hist;              /* steps of history kept (ring) */
  int64_t *rel;          /* [hist][2 * n_lanes]: first start, last end - E(k) */
  int64_t *end;          /* [hist]: E(k) */
  int64_t *delta;        /* [(max_period + 1) * hist]: Delta_p(k), -1 when not comparable */
  gboolean prev_idle;    /* the boundary before the next step */
  int32_t steps;         /* steps added */
};

StSteadyDetector *
st_steady_detector_new(int n_lanes, const StSteadyRule *rule, gboolean start_idle)
{
  g_return_val_if_fail(rule->max_period >= 1, NULL);
  StSteadyDetector *d = g_new0(StSteadyDetector, 1);
  d->rule = *rule;
  d->n_lanes = n_lanes;
  /* Rule 2 looks two periods back; rule 3 SETTLING_PERIODS, for periods
   * of a few steps. */
  d->hist = 2 * rule->max_period + 2 + 2 * SETTLING_PERIODS;
  d->rel = g_new(int64_t, (gsize)d->hist * 2 * MAX(n_lanes, 1));
  d->end = g_new0(int64_t, d->hist);
  d->delta = g_new(int64_t, (gsize)(rule->max_period + 1) * d->hist);
  d->prev_idle = start_idle;
  return d;
}

void
st_steady_detector_free(StSteadyDetector *d)
{
  if (d == NULL)
    return;
  g_free(d->rel);
  g_free(d->end);
  g_free(d->delta);
  g_free(d);
}

static inline int
slot(const StSteadyDetector *d, int k)
{
  return k % d->hist;
}

static int64_t
end_of(const StSteadyDetector *d, int k)
{
  return k < 0 ? 0 : d->end[slot(d, k)];
}

static int64_t
duration(const StSteadyDetector *d, int k)
{
  return end_of(d, k) - end_of(d, k - 1);
}

static int64_t *
rel_of(const StSteadyDetector *d, int k)
{
  return d->rel + (gsize)slot(d, k) * 2 * d->n_lanes;
}

static int64_t *
delta_of(const StSteadyDetector *d, int p, int k)
{
  return &d->delta[(gsize)p * d->hist + slot(d, k)];
}

/* Delta_p(k): the largest change of d and of the lanes' phases from step
 * k-p to step k; -1 when a lane has ops in one and not the other (they
 * cannot repeat). */
static int64_t
compare(const StSteadyDetector *d, int p, int k)
{
  int64_t most = ABS(duration(d, k) - duration(d, k - p));
  const int64_t *a = rel_of(d, k), *b = rel_of(d, k - p);
  for (int i = 0; i < 2 * d->n_lanes; i++) {
    if ((a[i] == ST_STEADY_NONE) != (b[i] == ST_STEADY_NONE))
      return -1;
    if (a[i] != ST_STEADY_NONE)
      most = MAX(most, ABS(a[i] - b[i]));
  }
  return most;
}

/* The mean step over the period ending at step k. */
static double
period_mean(const StSteadyDetector *d, int p, int k)
{
  return (double)(end_of(d, k) - end_of(d, k - p)) / p;
}

/* How the state's changes shrink from period to period at step k: the
 * largest ratio Delta_p(j) / Delta_p(j-p) over `periods` periods back, 1
 * when one does not shrink (or the history ends first). */
static double
contraction(const StSteadyDetector *d, int p, int k, int periods)
{
  const StSteadyRule *r = &d->rule;
  double ratio = 0;
  for (int j = k; j > k - periods * p; j -= p) {
    int64_t after = *delta_of(d, p, j);
    gboolean held = j - p >= r->first_step + p && j - p > k - d->hist;
    int64_t before = held ? *delta_of(d, p, j - p) : -1;
    if (before <= after)
      return 1;
    ratio = MAX(ratio, (double)after / (double)before);
  }
  return ratio;
}

/* Rules 2 and 3 for period p at step k (see steady.h): 0 when neither
 * holds, else the rule. */
static int
repeats(const StSteadyDetector *d, int p, int k, int64_t *drift)
{
  const StSteadyRule *r = &d->rule;
  if (k - 2 * p + 1 < r->first_step)
    return 0;
  double tol = MAX(r->tolerance * period_mean(d, p, k), (double)r->floor_ns);
  int64_t most = 0;
  for (int j = k - p + 1; j <= k; j++) {
    int64_t dj = *delta_of(d, p, j);
    if (dj < 0 || (double)dj > SETTLING_SLACK * tol)
      return 0;
    most = MAX(most, dj);
  }
  int64_t now = *delta_of(d, p, k);
  *drift = now;
  if ((double)most <= tol && now == 0)
    return 2;
  /* The drift to come: the rest of a geometric series while the changes
   * shrink (the larger of the last two ratios, so that one large change
   * followed by small ones is no trend), else the same change every period
   * over the horizon. */
  double ratio = contraction(d, p, k, 2);
  double g = ratio < 1 ? ratio / (1 - ratio) : (double)r->horizon / p;
  if ((double)most <= tol && (double)now * g <= tol)
    return 2;
  /* Rule 3: a state that has shrunk its changes for SETTLING_PERIODS
   * periods running converges; the mean step moves with it, by at most
   * its last change times the same series. */
  ratio = contraction(d, p, k, SETTLING_PERIODS);
  if (ratio >= 1)
    return 0;
  g = ratio / (1 - ratio);
  double moved = fabs(period_mean(d, p, k) - period_mean(d, p, k - p));
  gboolean near = (double)now * g <= SETTLING_REACH * period_mean(d, p, k);
  return near && moved * g <= tol ? 3 : 0;
}

gboolean
st_steady_detector_add(StSteadyDetector *d, int64_t end_ns, const int64_t *first,
                       const int64_t *last, gboolean idle, StSteady *out)
{
  int k = d->steps++;
  d->end[slot(d, k)] = MAX(end_ns, end_of(d, k - 1));
  int64_t e = end_of(d, k);
  int64_t *rel = rel_of(d, k);
  for (int i = 0; i < d->n_lanes; i++) {
    rel[2 * i] = first[i] == ST_STEADY_NONE ? ST_STEADY_NONE : first[i] - e;
    rel[2 * i + 1] = last[i] == ST_STEADY_NONE ? ST_STEADY_NONE : last[i] - e;
  }
  const StSteadyRule *r = &d->rule;
  int64_t least = -1;
  for (int p = 1; p <= r->max_period; p++) {
    int64_t *slot_p = delta_of(d, p, k);
    *slot_p = k - p >= r->first_step ? compare(d, p, k) : -1;
    if (*slot_p >= 0)
      least = least < 0 ? *slot_p : MIN(least, *slot_p);
  }
  gboolean was_idle = d->prev_idle;
  d->prev_idle = idle;
  *out = (StSteady){.evaluated = TRUE, .drift_ns = MAX(least, 0)};
  if (idle && was_idle && k >= r->first_step) {
    *out = (StSteady){.evaluated = TRUE, .converged = TRUE, .exact = TRUE, .period = 1,
                      .first = k, .last = k};
    return TRUE;
  }
  for (int p = 1; p <= r->max_period; p++) {
    int64_t drift = 0;
    int rule = repeats(d, p, k, &drift);
    if (rule > 0) {
      *out = (StSteady){.evaluated = TRUE, .converged = TRUE, .settling = rule == 3,
                        .period = p, .first = k - p + 1, .last = k, .drift_ns = drift};
      return TRUE;
    }
  }
  return FALSE;
}

/* ---- over a finished run -------------------------------------------------- */

/* Lanes of a timeline: (recorded rank, stream), background streams left
 * out when a foreground runs (as the engine does). [n_ranks] first lane of
 * each recorded rank, -1 otherwise; *n the count. `has_fg`, `has_bg`:
 * whether the recorded ranks have foreground and background streams.
 * Transfer full. */
static int32_t *
lanes_of(const StTimeline *t, int *n, gboolean *has_fg, gboolean *has_bg)
{
  const StSchedule *s = t->schedule;
  *has_fg = *has_bg = FALSE;
  for (int r = 0; r < s->n_ranks; r++) {
    const StProgram *p = st_schedule_program_of(s, r);
    for (guint k = 0; t->rank_rep[r] == r && k < p->streams->len; k++) {
      gboolean bg = g_array_index(p->streams, StStream, k).background;
      *has_bg = *has_bg || bg;
      *has_fg = *has_fg || !bg;
    }
  }
  int32_t *base = g_new(int32_t, s->n_ranks);
  *n = 0;
  for (int r = 0; r < s->n_ranks; r++) {
    base[r] = t->rank_rep[r] == r ? *n : -1;
    if (base[r] >= 0)
      *n += (int)st_schedule_program_of(s, r)->streams->len;
  }
  return base;
}

void
st_steady_of_timeline(const StTimeline *t, int steps, const StSteadyRule *rule, StSteady *out)
{
  const StSchedule *s = t->schedule;
  *out = (StSteady){.evaluated = TRUE};
  steps = MIN(steps, t->steps);
  if (steps <= 0)
    return;
  int n_lanes = 0;
  gboolean has_fg, has_bg;
  g_autofree int32_t *base = lanes_of(t, &n_lanes, &has_fg, &has_bg);
  gsize cells = (gsize)steps * MAX(n_lanes, 1);
  g_autofree int64_t *first = g_new(int64_t, cells);
  g_autofree int64_t *last = g_new(int64_t, cells);
  for (gsize i = 0; i < cells; i++)
    first[i] = last[i] = ST_STEADY_NONE;
  g_autofree int64_t *end = g_new0(int64_t, steps);
  /* Earliest time an op of step k (or later) was posted. */
  g_autofree int64_t *posted = g_new(int64_t, steps + 1);
  for (int k = 0; k <= steps; k++)
    posted[k] = INT64_MAX;
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *rec = &g_array_index(t->ops, StOpRecord, i);
    const StProgram *p = st_schedule_program_of(s, rec->rank);
    const StOp *op = st_program_op(p, rec->op);
    if (has_fg && g_array_index(p->streams, StStream, op->stream).background)
      continue;
    int k = MIN(rec->step, steps);
    if (rec->step < 0)
      continue;
    posted[k] = MIN(posted[k], rec->ready_ns);
    if (rec->step >= steps || base[rec->rank] < 0)
      continue;
    end[k] = MAX(end[k], rec->end_ns);
    gsize at = (gsize)rec->step * n_lanes + base[rec->rank] + op->stream;
    first[at] = first[at] == ST_STEADY_NONE ? rec->start_ns : MIN(first[at], rec->start_ns);
    last[at] = last[at] == ST_STEADY_NONE ? rec->end_ns : MAX(last[at], rec->end_ns);
  }
  for (int k = steps - 1; k > 0; k--)
    posted[k - 1] = MIN(posted[k - 1], posted[k]);
  /* Idle boundaries as the engine sees them: every rank started, no
   * admission control (its averages carry over), nothing later posted. */
  int64_t started = 0;
  for (int r = 0; r < s->n_ranks; r++)
    started = MAX(started, s->ranks[r].start_ns);
  g_autoptr(StSteadyDetector) d =
    st_steady_detector_new(n_lanes, rule, started == 0 && !has_bg);
  int64_t e = 0;
  for (int k = 0; k < steps; k++) {
    e = MAX(e, end[k]);
    gboolean idle = !has_bg && started <= e && posted[k + 1] >= e;
    if (st_steady_detector_add(d, e, first + (gsize)k * n_lanes, last + (gsize)k * n_lanes, idle,
                               out))
      return;
  }
  *out = (StSteady){.evaluated = TRUE, .drift_ns = out->drift_ns};
}
