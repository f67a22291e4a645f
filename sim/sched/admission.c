/* admission.c: see admission.h. */
#include "sched/admission.h"

void
st_admission_policy_init(StAdmissionPolicy *p)
{
  *p = (StAdmissionPolicy){
    .slowdown_limit = 0.10,
    .recover = 0.125,
    .long_recv_ns = 500000,
    .piece_ns = 500000,
    .fg_pieces = 2,
    .bg_pieces = 1,
    .bg_pieces_alone = 4,
    .from_step = 0,
  };
}

StAdmitDecision
st_admission_decide(const StAdmissionPolicy *p, const StAdmissionState *s)
{
  g_return_val_if_fail(p != NULL && s != NULL, ST_ADMIT_NO_PIECES);
  if (s->fg_steps_done < p->from_step)
    return ST_ADMIT_NO_WARMUP;
  if (!s->has_foreground)
    return s->bg_in_flight < p->bg_pieces_alone ? ST_ADMIT_YES_ALONE : ST_ADMIT_NO_PIECES;
  if (s->bg_in_flight >= p->bg_pieces)
    return ST_ADMIT_NO_PIECES;
  /* Over the budget, the foreground is owed time: nothing, even on a GPU it
   * leaves idle now, since the op a piece starts may outlast the idling. */
  if (s->fg_budget_ns < 0)
    return ST_ADMIT_NO_BUDGET;
  /* A foreground that idles on a long receive is neither computing nor
   * reducing: whatever its recent slowdown, the GPU is free. */
  if (s->fg_recv_wait_ns > p->long_recv_ns)
    return ST_ADMIT_YES_LONG_RECEIVE;
  if (s->fg_collective)
    return ST_ADMIT_NO_COLLECTIVE;
  if (s->fg_slowdown > 1.0 + p->slowdown_limit)
    return ST_ADMIT_NO_SLOWED;
  return ST_ADMIT_YES;
}

const char *
st_admit_decision_name(StAdmitDecision d)
{
  static const char *const names[ST_ADMIT_N] = {
    "warmup", "pieces", "collective", "slowed", "over_budget", "alone", "long_receive", "yes",
  };
  return d >= 0 && d < ST_ADMIT_N ? names[d] : "?";
}

double
st_admission_slowdown(const StAdmissionPolicy *p, double average, double sample)
{
  if (sample >= average)
    return sample;
  return average + p->recover * (sample - average);
}

double
st_admission_budget(const StAdmissionPolicy *p, double budget, double took_ns, double alone_ns)
{
  return MIN(budget + (1.0 + p->slowdown_limit) * alone_ns - took_ns, (double)p->piece_ns);
}

double
st_admission_step_budget(const StAdmissionPolicy *p, double budget, double took_ns,
                         double alone_ns)
{
  return MIN(st_admission_budget(p, budget, took_ns, alone_ns), 0.0);
}

int64_t
st_admission_piece_ns(const StAdmissionPolicy *p, const StAdmissionState *s, StAdmitDecision d)
{
  if (!st_admit_ok(d))
    return 0;
  if (d == ST_ADMIT_YES_ALONE)
    return p->piece_ns;
  double budget = CLAMP(s->fg_budget_ns, 1.0, (double)MAX(p->piece_ns, 1));
  return (int64_t)budget;
}

gboolean
st_admission_fg_may_launch(const StAdmissionPolicy *p, int in_flight)
{
  return in_flight < p->fg_pieces;
}
