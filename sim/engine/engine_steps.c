/* engine_steps.c: how many steps a run takes, and its steady state.
 *
 * Every op instance belongs to a step. As ops complete, each step keeps
 * its latest end, each lane's (sim rank, stream) first start and last end,
 * and the earliest time an op of it was posted; when all its ops are done
 * (steps complete in order: step k waits for step k-1), the steady-state
 * detector (output/steady.h) takes it. Background streams beside a
 * foreground run best effort across steps and stay out of it.
 *
 * --steps auto (StSchedule.steps 0): the streams may run up to the cap
 * (st_steady_cap). When the detector says steady at step k, or k is the
 * last step the cap allows, the run stops taking new steps: every stream
 * finishes the step it is in and starts no other. Nothing of a step after
 * the last one begun had started by E(k), so everything up to E(k), the
 * steady window included, happened exactly as in a longer run; the steps
 * after k end the run (they may end faster: nothing follows them) and stay
 * out of the window.
 *
 * With a fixed number of steps the detector still watches every step but
 * the last (which nothing follows), so the report can say whether the run
 * reached its steady state; the run is not cut.
 *
 * Cost: O(1) per op; O(lanes x max period) per step; memory O(lanes) per
 * step in flight.
 */
#include "engine/engine_internal.h"

#include <string.h>

typedef struct {
  int64_t *first, *last;  /* [n_lanes]: ST_STEADY_NONE until an op of the lane ends */
  int64_t end;            /* latest end so far */
  int64_t posted;         /* earliest time one of its ops started */
  int64_t done;           /* ops completed */
} StepAcc;

static StepAcc *
acc_new(int n_lanes)
{
  StepAcc *a = g_new0(StepAcc, 1);
  a->first = g_new(int64_t, MAX(n_lanes, 1));
  a->last = g_new(int64_t, MAX(n_lanes, 1));
  for (int i = 0; i < n_lanes; i++)
    a->first[i] = a->last[i] = ST_STEADY_NONE;
  a->end = 0;
  a->posted = INT64_MAX;
  return a;
}

static void
acc_free(gpointer p)
{
  StepAcc *a = p;
  g_free(a->first);
  g_free(a->last);
  g_free(a);
}

/* The bookkeeping of `step`, made on first use. */
static StepAcc *
acc_of(Engine *e, int32_t step)
{
  Steps *t = &e->steps;
  g_assert(step >= t->base);
  while ((guint)(step - t->base) >= t->acc->len)
    g_ptr_array_add(t->acc, acc_new(t->n_lanes));
  return g_ptr_array_index(t->acc, step - t->base);
}

static gboolean
counted(const Engine *e, const OpRef *ref)
{
  const SimRank *sr = &e->sims[ref->sim];
  return !sr->streams[st_program_op(sr->program, ref->op)->stream].unbounded;
}

void
engine_steps_init(Engine *e)
{
  const StSchedule *s = e->s;
  Steps *t = &e->steps;
  t->auto_steps = s->steps == 0;
  t->cap = t->auto_steps ? st_steady_cap(s) : s->steps;
  /* Auto: no stream stops on its own; the stop decision sets the limit. */
  t->limit = t->auto_steps ? G_MAXINT32 / 2 : t->cap;
  t->acc = g_ptr_array_new_with_free_func(acc_free);
  t->lane_base = g_new(int32_t, MAX(e->n_sims, 1));
  t->max_started = -1;
  for (int i = 0; i < e->n_sims; i++) {
    t->lane_base[i] = t->n_lanes;
    t->n_lanes += (int)e->sims[i].program->streams->len;
  }
  StSteadyRule rule;
  st_steady_rule_init(&rule, s, t->cap);
  gboolean start_idle = e->adm == NULL;
  for (int r = 0; r < s->n_ranks; r++)
    start_idle = start_idle && s->ranks[r].start_ns == 0;
  t->detector = st_steady_detector_new(t->n_lanes, &rule, start_idle);
}

/* After admission_init (it marks the unbounded streams). */
void
engine_steps_count_ops(Engine *e)
{
  Steps *t = &e->steps;
  for (int i = 0; i < e->n_sims; i++) {
    const SimRank *sr = &e->sims[i];
    for (guint st = 0; st < sr->program->streams->len; st++)
      if (!sr->streams[st].unbounded)
        t->ops_per_step += sr->info->stream_ops[st]->len;
  }
}

void
engine_steps_clear(Engine *e)
{
  Steps *t = &e->steps;
  if (t->acc != NULL)
    g_ptr_array_unref(t->acc);
  g_free(t->lane_base);
  st_steady_detector_free(t->detector);
  memset(t, 0, sizeof *t);
}

void
engine_steps_on_rank_start(Engine *e)
{
  e->steps.n_started++;
}

void
engine_steps_on_start(Engine *e, const OpRef *ref)
{
  if (!counted(e, ref))
    return;
  StepAcc *a = acc_of(e, ref->step);
  a->posted = MIN(a->posted, e->now);
  e->steps.max_started = MAX(e->steps.max_started, ref->step);
}

/* No step after k has anything started before now, every rank has begun,
 * and no admission control carries averages between steps. */
static gboolean
idle_after(Engine *e)
{
  const Steps *t = &e->steps;
  if (e->adm != NULL || t->n_started < e->n_sims)
    return FALSE;
  for (guint j = 1; j < t->acc->len; j++)
    if (((const StepAcc *)g_ptr_array_index(t->acc, j))->posted < e->now)
      return FALSE;
  return TRUE;
}

/* Takes no step after the last one begun (see the top of the file). */
static void
stop_after(Engine *e, int32_t k)
{
  Steps *t = &e->steps;
  t->stopped = TRUE;
  t->limit = MAX(t->max_started + 1, k + 1);
  for (int i = 0; i < e->n_sims; i++) {
    SimRank *sr = &e->sims[i];
    for (guint st = 0; st < sr->program->streams->len; st++)
      if (!sr->streams[st].unbounded && sr->streams[st].step >= t->limit)
        sr->streams[st].done = TRUE;
  }
}

/* Step `base` is complete: the detector takes it. */
static void
step_complete(Engine *e)
{
  Steps *t = &e->steps;
  StepAcc *a = g_ptr_array_index(t->acc, 0);
  int32_t k = t->base;
  t->end = MAX(t->end, a->end);
  gboolean watch = !t->found && !t->stopped && (t->auto_steps || k + 1 < t->cap);
  StSteady seen;
  if (watch && st_steady_detector_add(t->detector, t->end, a->first, a->last, idle_after(e),
                                      &seen)) {
    t->found = TRUE;
    t->steady = seen;
  } else if (watch) {
    t->steady.drift_ns = seen.drift_ns;
  }
  g_ptr_array_remove_index(t->acc, 0);
  t->base++;
  if (t->auto_steps && !t->stopped && (t->found || k + 1 >= t->cap))
    stop_after(e, k);
}

void
engine_steps_on_complete(Engine *e, const OpRef *ref, int64_t start_ns)
{
  if (!counted(e, ref))
    return;
  Steps *t = &e->steps;
  StepAcc *a = acc_of(e, ref->step);
  const SimRank *sr = &e->sims[ref->sim];
  int lane = t->lane_base[ref->sim] + st_program_op(sr->program, ref->op)->stream;
  if (a->first[lane] == ST_STEADY_NONE || start_ns < a->first[lane])
    a->first[lane] = start_ns;
  if (a->last[lane] == ST_STEADY_NONE || e->now > a->last[lane])
    a->last[lane] = e->now;
  a->end = MAX(a->end, e->now);
  a->done++;
  while (t->acc->len > 0 &&
         ((const StepAcc *)g_ptr_array_index(t->acc, 0))->done == t->ops_per_step)
    step_complete(e);
}

void
engine_steps_finish(Engine *e, StSteady *out, int32_t *steps_run)
{
  Steps *t = &e->steps;
  *steps_run = t->limit;
  *out = t->found ? t->steady : (StSteady){.evaluated = TRUE, .drift_ns = t->steady.drift_ns};
  out->auto_steps = t->auto_steps;
  out->cap = t->auto_steps ? t->cap : 0;
  if (t->auto_steps && !t->found) {
    /* Not converged: the mean covers the second half of what ran. */
    int32_t floor = MAX(e->s->warmup_steps, 0);
    out->last = t->cap - 1;
    out->first = MIN(MAX(floor, t->cap / 2), out->last);
  }
}
