/* steady.h: when a run has reached its steady state.
 *
 * A training schedule repeats one step; staggered and pipelined schedules
 * take several steps to settle (cyclic DP's workers start one after
 * another, a pipeline's stages fill). A step time is a prediction only once
 * the schedule's state repeats, so the step after it behaves like the one
 * before. The rule (docs/ARCHITECTURE.md, "Steady state"):
 *
 *   Step k ends at E(k), when its last op ends (never before E(k-1));
 *   d(k) = E(k) - E(k-1), E(-1) = 0. A lane is one stream of one simulated
 *   rank (background streams beside a foreground excepted: they run best
 *   effort across steps). Its phase in step k is where its ops of step k
 *   begin and end relative to the step boundary: (first start - E(k),
 *   last end - E(k)).
 *
 *   1. Idle boundaries (exact). When nothing of a later step has started
 *      by E(k), every stream waits at the head of step k+1 with all that
 *      came before done: the engine is in the same state as at any other
 *      such boundary. Two consecutive idle boundaries (the start of the run
 *      counts when every rank starts at 0) make the run periodic from there
 *      on with period one step: steady at step k, window [k, k].
 *
 *   2. Repeating phases (within a tolerance). For a period p of 1 to
 *      `max_period` steps (a staggered schedule may settle into a rotation
 *      of several steps), Delta_p(k) is the largest change between step k
 *      and step k-p of d and of every lane's two phase offsets. Steady at
 *      step k with period p when
 *        - Delta_p(j) <= tol for each of the p steps j = k-p+1 .. k (a whole
 *          period repeats the one before it), tol = max(tolerance x the
 *          period's mean step, floor_ns); and
 *        - the drift still to come is within tol: Delta_p(k) x g, where g
 *          extrapolates how the differences shrink: with r the larger of
 *          Delta_p(k) / Delta_p(k-p) and Delta_p(k-p) / Delta_p(k-2p),
 *          g = r / (1 - r) (the rest of a geometric series) when r < 1,
 *          else the periods of the horizon (`horizon` / p: the same change
 *          again every period). A state that still moves does not pass for
 *          steady because each move is small, nor because one large change
 *          was followed by a small one.
 *      The window is that period, steps k-p+1 .. k; its mean step is the
 *      steady step time.
 *
 *   3. A settling state with a converged step (StSteady.settling). Coupled
 *      workers (cyclic DP whose NCCL kernels slow the compute they overlap)
 *      can settle as a damped alternation: d swings by a millisecond from
 *      step to step, the swing shrinking by 2-4 % a period, while the
 *      period's mean step stays within nanoseconds; rule 2 would wait for
 *      the swing to vanish, hundreds of steps. Steady at step k with period
 *      p when
 *        - Delta_p(j) <= 10 tol for each step j of the period (the phases
 *          repeat to within 0.1 % of the step);
 *        - Delta_p has shrunk in each of the last 8 periods: r, the largest
 *          of those ratios, is below 1 (a contraction, not a rotation whose
 *          changes stay the same, nor a jump); and
 *        - the phases move less than 5 % of the step from here on
 *          (Delta_p(k) x r / (1 - r)), and the period's mean step less than
 *          tol: its last change times r / (1 - r), the series of rule 2.
 *      The window and step are rule 2's. A lane that drifts at a constant
 *      rate meets neither rule: where it stops is not known.
 *
 *   Steps before `first_step` (a schedule's declared warm-up, such as
 *   multiplexing's steps alone) are never part of a comparison or window.
 *   A run that meets neither rule within its cap has not converged, and is
 *   reported as such.
 *
 * The detector takes steps one at a time (the engine feeds it as steps
 * complete, and stops the run once it says steady); st_steady_of_timeline
 * applies the same rule to a finished simulated run. Memory: O(lanes x
 * max_period); each step costs O(lanes x max_period).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "output/timeline.h"

/* A lane with no op in a step. */
#define ST_STEADY_NONE INT64_MIN

typedef struct {
  double tolerance;    /* relative to the period's mean step (1e-4) */
  int64_t floor_ns;    /* the tolerance never goes below this (100 ns: event times are whole ns) */
  int32_t max_period;  /* periods tried, 1 .. this many steps (the warm-up scale, 4 to 64) */
  int32_t horizon;     /* steps a drift that does not shrink is extrapolated over (the cap) */
  int32_t first_step;  /* earliest step a comparison or the window may use */
} StSteadyRule;

/* Defaults for `schedule` run with `cap` steps at most. */
void st_steady_rule_init(StSteadyRule *rule, const StSchedule *schedule, int cap);

/* The most steps `--steps auto` runs `schedule`: 8 + 4 x its warm-up scale
 * (StSchedule.warmup_scale: cyclic DP's workers, a pipeline's stages, ...)
 * after its declared warm-up. */
int st_steady_cap(const StSchedule *schedule);

/* The least steady step time the rule can report for a schedule in which
 * some op's instance of step k+1 always ends at least `cycle_ns` after its
 * instance of step k (a cycle of dependencies through one step): exactly
 * periodic runs repeat every op in one period, so their step is at least
 * cycle_ns; a period that repeats within the tolerance may report up to
 * the tolerance less, ten times it under rule 3:
 * (cycle_ns - 10 floor_ns) / (1 + 10 tolerance), with the default rule. */
int64_t st_steady_step_bound(int64_t cycle_ns);

typedef struct StSteadyDetector StSteadyDetector;

/* `start_idle`: the run starts from an idle boundary (every rank at time 0,
 * nothing carried between steps beyond the streams' positions). Transfer full. */
StSteadyDetector *st_steady_detector_new(int n_lanes, const StSteadyRule *rule,
                                         gboolean start_idle);
void st_steady_detector_free(StSteadyDetector *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StSteadyDetector, st_steady_detector_free)

/* Adds the next step (0, 1, ...): when its last op ended, each lane's first
 * start and last end in it (absolute ns; ST_STEADY_NONE for none), and
 * whether nothing of a later step had started by its end (`idle`). TRUE
 * when the state repeats: `out` then says how (converged, period, window).
 * Otherwise `out->drift_ns` holds the smallest Delta seen for this step. */
gboolean st_steady_detector_add(StSteadyDetector *d, int64_t end_ns, const int64_t *first,
                                const int64_t *last, gboolean idle, StSteady *out);

/* The rule over the first `steps` steps of a finished simulated run (the
 * same lanes and test as the engine's). `out->evaluated` is set. */
void st_steady_of_timeline(const StTimeline *timeline, int steps, const StSteadyRule *rule,
                           StSteady *out);
