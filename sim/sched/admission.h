/* admission.h: admission control for GPU multiplexing (DeepPool, Park et al.,
 * MLSys 2022; docs/PAPERS.md section 2).
 *
 * A foreground training job runs on high-priority streams; background jobs
 * share its GPUs on low-priority streams, cut into pieces of about
 * `piece_ns` of GPU time alone. Before a background piece starts, the
 * device's controller looks at what the foreground is doing there now and
 * decides. The rules, with DeepPool's constants as the defaults
 * (st_admission_policy_init):
 *
 *   - the foreground keeps at most `fg_pieces` (2) pieces in flight
 *     (st_admission_fg_may_launch; a launcher's rule, for the executor);
 *   - nothing is admitted anywhere before the foreground has finished
 *     `from_step` steps (a multiplexed schedule runs its first steps alone,
 *     as the reference its slowdown and idle time are measured against);
 *   - on a device without a foreground job, up to `bg_pieces_alone` (4)
 *     background pieces are in flight;
 *   - otherwise at most `bg_pieces` (1), none while the device's slowdown
 *     budget is overdrawn (below), and then a piece is admitted only
 *       when the foreground waits on a long receive (over `long_recv_ns`,
 *       500 us: the GPU idles inside a burst); or
 *       when no foreground collective (an all-reduce) is running and the
 *       foreground is slowed by at most `slowdown_limit` (10 %) against its
 *       solo time, as a moving average that takes a slower sample at once
 *       and a faster one with weight `recover` (st_admission_slowdown).
 *
 * The budget is what holds the bound over time, not only at the instant of
 * a decision: it is the foreground time the background may still cost
 * before the measured slowdown since admission opened exceeds the limit,
 * capped at one full piece, `piece_ns`. One rule, st_admission_budget, at
 * two grains: each foreground step that took `took` against the reference
 * step's `alone` sets it to the step budget, budget + (1 + slowdown_limit)
 * x alone - took (what the bound is about: a step waits on every device's
 * slowed kernels, so kernels each within the limit can still slow the step
 * beyond it); within a step, each foreground kernel of the device moves it
 * by the same rule, so a slowed kernel backs off at once. An admitted
 * piece is sized from it
 * (st_admission_piece_ns): as long as the budget (one op at least, at most
 * `piece_ns`), since a background ns costs a foreground kernel at most about
 * one ns when both fill the GPU. Over the bound (budget < 0) nothing is
 * admitted beside a foreground, long receives included (the op a piece
 * starts may outlast the wait); under it, pieces grow back with the budget. Ops are never cut, so a
 * piece overshoots by at most one op, which the budget then pays back.
 *
 * Everything here is a pure function of its arguments, with no state: the
 * simulator engine calls it at each decision point, and an executor can call
 * the same functions at run time with what it measures.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

typedef struct {
  double slowdown_limit;   /* 0.10: the foreground may run at most 10 % slower than alone */
  double recover;          /* weight of a faster sample in the slowdown average (0.125) */
  int64_t long_recv_ns;    /* a receive the foreground waits on longer than this (500 us) */
  int64_t piece_ns;        /* background piece: this much GPU time alone (500 us) */
  int32_t fg_pieces;       /* foreground pieces in flight at most (2) */
  int32_t bg_pieces;       /* background pieces in flight beside a foreground (1) */
  int32_t bg_pieces_alone; /* background pieces in flight with no foreground (4) */
  int32_t from_step;       /* foreground steps to finish before any admission (0) */
} StAdmissionPolicy;

/* What the controller of one device knows when a background piece asks. */
typedef struct {
  gboolean has_foreground; /* a foreground job runs on this device */
  int32_t fg_steps_done;   /* foreground steps finished (G_MAXINT32 when there is no
                              foreground job at all) */
  int32_t bg_in_flight;    /* background pieces started and not finished */
  gboolean fg_collective;  /* a foreground collective is running now */
  int64_t fg_recv_wait_ns; /* how long the foreground has waited on a receive; 0: none */
  double fg_slowdown;      /* st_admission_slowdown's average; 1 = as fast as alone */
  double fg_budget_ns;     /* st_admission_budget: foreground ns the background may still
                              cost; < 0: the measured slowdown is over the limit */
} StAdmissionState;

typedef enum {
  ST_ADMIT_NO_WARMUP = 0,   /* before `from_step` foreground steps */
  ST_ADMIT_NO_PIECES,       /* as many background pieces in flight as allowed */
  ST_ADMIT_NO_COLLECTIVE,   /* the foreground runs a collective */
  ST_ADMIT_NO_SLOWED,       /* the foreground is slowed by more than the limit */
  ST_ADMIT_NO_BUDGET,       /* the slowdown budget is overdrawn */
  ST_ADMIT_YES_ALONE,       /* no foreground on the device */
  ST_ADMIT_YES_LONG_RECEIVE, /* the foreground idles on a long receive */
  ST_ADMIT_YES,             /* the foreground is not slowed and not in a collective */
  ST_ADMIT_N,
} StAdmitDecision;

/* DeepPool's constants (above). */
void st_admission_policy_init(StAdmissionPolicy *policy);

StAdmitDecision st_admission_decide(const StAdmissionPolicy *policy,
                                    const StAdmissionState *state);

static inline gboolean
st_admit_ok(StAdmitDecision decision)
{
  return decision >= ST_ADMIT_YES_ALONE;
}

/* "alone", "long_receive", "slowed", ... */
const char *st_admit_decision_name(StAdmitDecision decision);

/* The slowdown average after one more foreground piece that took `sample`
 * times its solo time: a slower sample is taken at once, a faster one with
 * weight `recover`, so the controller reacts at once to interference and
 * lets background work back in slowly. */
double st_admission_slowdown(const StAdmissionPolicy *policy, double average, double sample);

/* The budget after one more foreground kernel or step that took `took_ns`
 * against `alone_ns` alone: budget + (1 + slowdown_limit) alone_ns - took_ns,
 * at most `piece_ns`. Starts at 0 when admission opens. */
double st_admission_budget(const StAdmissionPolicy *policy, double budget, double took_ns,
                           double alone_ns);

/* The same rule over one foreground step against the reference step, but
 * at most 0: a step that left part of its slowdown unused does not carry it
 * over, a step over the limit leaves a debt the next ones repay. */
double st_admission_step_budget(const StAdmissionPolicy *policy, double budget, double took_ns,
                                double alone_ns);

/* The length of a piece admitted with `decision` on `state`, in ns of GPU
 * time alone: `piece_ns` without a foreground, else the budget within
 * [1, piece_ns] (1: the piece ends after its first op). 0 when refused. */
int64_t st_admission_piece_ns(const StAdmissionPolicy *policy, const StAdmissionState *state,
                              StAdmitDecision decision);

/* Whether the foreground may launch one more piece with `in_flight` running. */
gboolean st_admission_fg_may_launch(const StAdmissionPolicy *policy, int in_flight);
