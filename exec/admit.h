/* admit.h: admission control for GPU multiplexing at run time (DeepPool,
 * Park et al., MLSys 2022; docs/PAPERS.md section 2).
 *
 * The executor's controller: what it knows about each device, from what the
 * run measures (the foreground's collectives and receives in flight, the
 * slowdown of its kernels against their time in the reference step it ran
 * alone, the steps it finished, the background pieces in flight), and the
 * decision when a background piece asks. The decision itself is the
 * simulator's: sched/admission.h's st_admission_decide on the same
 * StAdmissionState, with the same moving average of the slowdown
 * (st_admission_slowdown), so a run and its simulation follow one policy.
 * Every decision is kept with the state it saw (a request that waits and
 * asks again keeps only the decisions that change).
 *
 * No clock and no threads here: times are given by the caller (ns from the
 * run's start), so tests drive it with constructed situations, and the
 * executor (exec/mux.c) calls it under its own lock.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "base/kinds.h"
#include "sched/admission.h"

/* One decision, with what it was taken on. */
typedef struct {
  int64_t t_ns;           /* when, from the run's start */
  int32_t device;
  int32_t rank;           /* the background rank whose piece asked */
  uint32_t op;            /* the op that would start the piece */
  int32_t iteration;      /* the background's own step */
  uint8_t decision;       /* StAdmitDecision */
  int64_t piece_ns;       /* the piece admitted (st_admission_piece_ns); 0: refused */
  StAdmissionState state; /* what the controller knew */
} StAdmitRecord;

typedef struct StAdmitCtl StAdmitCtl;

/* A controller over `n_devices` devices; `fg_streams` foreground streams with
 * ops run `steps` steps (0 streams: no foreground anywhere). Transfer full. */
StAdmitCtl *st_admit_ctl_new(int n_devices, int fg_streams, int steps);
void st_admit_ctl_free(StAdmitCtl *ctl);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StAdmitCtl, st_admit_ctl_free)

/* Device `device` runs background pieces under `policy` (borrowed; the first
 * given wins, as in the engine); `has_foreground`: a foreground stream with
 * ops runs there. */
void st_admit_ctl_device(StAdmitCtl *ctl, int device, const StAdmissionPolicy *policy,
                         gboolean has_foreground);

/* A foreground op began (a collective or a receive is watched). */
void st_admit_fg_begin(StAdmitCtl *ctl, int device, StOpKind kind, int64_t now_ns);
/* ...and ended. A compute op that took `took_ns` against `alone_ns` in the
 * reference step (0: unknown, no sample) moves the device's slowdown
 * average and, once admission opened (`from_step` steps done), its slowdown
 * budget (st_admission_budget). */
void st_admit_fg_end(StAdmitCtl *ctl, int device, StOpKind kind, int64_t now_ns,
                     int64_t took_ns, int64_t alone_ns);
/* One foreground stream finished step `step` at `end_ns` (its last op's
 * end); TRUE when every foreground stream has finished it and the steps
 * before (the count advanced). A step ends when its last stream does; from
 * `from_step` on, each step that ends sets every device's budget to its
 * step budget, moved by the step's time against the reference step's
 * (st_admission_step_budget, as the engine does). */
gboolean st_admit_fg_step_done(StAdmitCtl *ctl, int step, int64_t end_ns);
int st_admit_fg_steps_done(const StAdmitCtl *ctl);
/* Every foreground step done (FALSE without a foreground). */
gboolean st_admit_fg_finished(const StAdmitCtl *ctl);

/* A background piece asks at `now_ns`: the decision, kept unless it repeats
 * *last (the decision this same request got when it last asked; NULL: always
 * kept), which it then updates. Admitted, the piece is in flight on the
 * device until st_admit_piece_end, and *piece_ns (may be NULL) is its length
 * in ns of background time (st_admission_piece_ns); refused, 0. Once the
 * foreground finished, its devices count as without one (what still runs
 * completes). */
StAdmitDecision st_admit_ask(StAdmitCtl *ctl, int device, int rank, uint32_t op, int iteration,
                             int64_t now_ns, StAdmitDecision *last, int64_t *piece_ns);
void st_admit_piece_end(StAdmitCtl *ctl, int device);

/* When a refused piece should ask again if nothing else changes: just after
 * the foreground's pending receive turns long; -1 when none is pending. */
int64_t st_admit_recheck_ns(const StAdmitCtl *ctl, int device);
/* The device's slowdown average (1: as fast as alone). */
double st_admit_slowdown(const StAdmitCtl *ctl, int device);
/* The device's slowdown budget, ns (st_admission_budget). */
double st_admit_budget_ns(const StAdmitCtl *ctl, int device);
/* The policy of a device, NULL when it runs no background. Borrowed. */
const StAdmissionPolicy *st_admit_policy(const StAdmitCtl *ctl, int device);

/* The decisions kept, in order (StAdmitRecord). Borrowed / transfer full. */
const GArray *st_admit_records(const StAdmitCtl *ctl);
GArray *st_admit_steal_records(StAdmitCtl *ctl);
