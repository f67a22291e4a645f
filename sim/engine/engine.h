/* engine.h: the discrete-event simulator.
 *
 * Runs a Schedule over the cost models and returns the predicted Timeline.
 * Time is int64 nanoseconds; events are ordered by (time, insertion
 * sequence), so the same input always gives the same output. An StEngine is
 * a plain object with no global state: a planner may run many at once on a
 * thread pool, one per thread.
 *
 * Resources are shared: the kernels running on one device split it by the
 * share model, and every transfer is flows over the cluster's links
 * (cluster/links.h) that share each link max-min fairly; whenever a user
 * arrives or leaves, the rates change and the finish times of the others
 * are recomputed. The timeline records every link's load (nettrace.h).
 *
 * Multiplexing: background streams (StStream.background) start their compute
 * in pieces admitted by their device's admission control (sched/admission.h)
 * and, beside a foreground, run best effort until the foreground's last step
 * ends (engine_admission.c). A schedule without them runs exactly as before.
 */
#pragma once

#include <glib.h>
#include <stdatomic.h>

#include "output/timeline.h"
#include "profile/profile.h"
#include "sched/sched.h"

#define ST_ENGINE_ERROR (st_engine_error_quark())
GQuark st_engine_error_quark(void);

/* What a running simulation has done, for a caller that shows progress
 * from another thread (written with relaxed atomic stores; read them with
 * atomic_load). */
typedef struct {
  _Atomic int64_t ops_total; /* op executions it will simulate; 0 until known */
  _Atomic int64_t ops_done;
  _Atomic int64_t events;
} StEngineProgress;

typedef struct {
  const StProfile *profile; /* borrowed, may be NULL: roofline and alpha-beta only */
  const char *comm_algo;    /* "auto" (default when NULL), "ring", "tree", "hierarchical" */
  const char *share_model;  /* GPU sharing model; NULL: the registry's first ("interference") */
  gboolean no_fold;         /* simulate every rank even when identical ranks could fold */
  StTimelineArrays *arrays; /* borrowed, may be NULL: record arrays to reuse (a caller that
                               simulates many schedules in turn, timeline.h) */
} StEngineOptions;

/* What a caller allows a run, and where it watches it. */
typedef struct {
  /* Refuse, before simulating, a run estimated to need more bytes than this
   * (op records and the outputs written from them, engine_budget.c); 0: no
   * limit. */
  int64_t max_memory;
  StEngineProgress *progress; /* borrowed, may be NULL */
} StEngineBudget;

typedef struct {
  int64_t events;           /* events processed */
  int64_t ops;              /* op executions simulated */
  int32_t sim_ranks;        /* ranks simulated (after folding) */
  gboolean folded;
  char *fold_note;          /* why folding was not applied, or NULL */
} StEngineStats;

/* Simulates `schedule` (borrowed; must outlive the timeline). Fails on a
 * deadlock (ops that can never start), naming one of them, and, within a
 * budget, before it starts when the run would need more than
 * budget->max_memory, saying what to change. Transfer full. */
StTimeline *st_simulate(const StSchedule *schedule, const StEngineOptions *options,
                        StEngineStats *stats, GError **error);
/* The same within `budget` (may be NULL: no limit, no progress). */
StTimeline *st_simulate_within(const StSchedule *schedule, const StEngineOptions *options,
                               const StEngineBudget *budget, StEngineStats *stats,
                               GError **error);

void st_engine_stats_clear(StEngineStats *stats);
