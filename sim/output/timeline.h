/* timeline.h: what happened (or is predicted to happen) when a schedule ran.
 *
 * The simulator and the executor both produce a Timeline; every report, CSV,
 * trace and plot is computed from one, so predicted and measured runs are
 * compared on equal terms.
 *
 * Folding. The simulator may run only some ranks and let each stand for
 * identical ones (see sched/fold.h). rank_rep[r] is the recorded rank whose
 * records stand for rank r, and device_rep[d] the recorded device that stands
 * for device d; both are the identity when nothing was folded. Memory records
 * of a device already include every rank on it.
 *
 * Records are appended in time order of their events; readers sort when they
 * need another order. All times are ns from the start of the run.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "base/kinds.h"
#include "output/nettrace.h"
#include "sched/sched.h"

typedef struct {
  int32_t rank;     /* a recorded rank */
  uint32_t op;      /* index in the rank's program */
  int32_t step;     /* 0-based step */
  uint8_t source;   /* StCostSource of the duration */
  uint8_t algo;     /* communication: 1 + its index in StTimeline.algos (how its bytes
                       moved: "ring", "tree", "p2p", ...); 0 when none is known */
  int64_t ready_ns; /* dependencies met; a comm op waits for its peers from here */
  int64_t start_ns; /* work began (comm: every peer had arrived) */
  int64_t end_ns;
} StOpRecord;

/* A change of one device's memory in one category. */
typedef struct {
  int64_t t_ns;
  int64_t delta;     /* bytes, + allocation, - free */
  int32_t device;    /* a recorded device */
  int32_t rank;      /* whose buffer; -1 for none */
  int32_t buffer;    /* index in that rank's program, -1 for none */
  uint32_t op;       /* the op whose start (alloc) or end (free) caused it; UINT32_MAX for
                        persistent buffers allocated before the first step */
  uint8_t category;  /* StMemCategory */
} StMemEvent;

/* One device sending over one link class for an interval: a phase of a
 * collective, or a transfer, as the executor measures it (the simulator
 * records its links instead: StTimeline.net). */
typedef struct {
  int64_t start_ns, end_ns;
  double bytes;      /* sent by this device in the interval */
  int32_t device;    /* a recorded device */
  int32_t rank;      /* the rank whose op it belongs to */
  uint32_t op;
  uint8_t link;      /* StLinkClass */
} StCommRecord;

/* Whether and when a run reached its steady state (output/steady.h has the
 * rule). Steps are 0-based. */
typedef struct {
  gboolean evaluated;   /* FALSE: not looked at (a measured run: its times are noisy) */
  gboolean auto_steps;  /* the engine ran until steady, within `cap` steps (--steps auto) */
  gboolean converged;
  gboolean exact;       /* seen by idle step boundaries (periodic by construction) */
  gboolean settling;    /* converged by its mean step while the state still shrinks its
                           changes (steady.h, rule 3) */
  int32_t period;       /* steps per period when converged, else 0 */
  int32_t first, last;  /* converged: the period it was seen on, steps first .. last;
                           auto and not converged: the window the mean covers */
  int32_t cap;          /* auto: the most steps the run could take */
  int64_t drift_ns;     /* converged: the largest change over the period (0 when exact);
                           not converged: the least change between the last steps */
} StSteady;

typedef struct {
  const StSchedule *schedule; /* borrowed */
  gboolean measured;          /* FALSE: predicted by the simulator */
  gboolean on_host;           /* the devices are CPUs: the host backend ran it, or the
                                 cluster's "gpu" is "host" (host profiles) */
  char *origin;               /* "simulated" or a device description */
  char *note;                 /* a remark for the report (why folding was off), or NULL */
  int32_t *rank_rep;          /* [n_ranks] */
  int32_t *device_rep;        /* [n_devices] */
  GArray *ops;                /* StOpRecord */
  GArray *mem;                /* StMemEvent, in time order per device */
  GArray *comm;               /* StCommRecord (measured runs) */
  StNetTrace *net;            /* the links and their loads (simulated runs), or NULL */
  GPtrArray *algos;           /* const char *, static: the names StOpRecord.algo points to */
  int64_t end_ns;             /* when the last op ended */
  int32_t steps;              /* steps it holds: the schedule's, as many as --steps auto
                                 ran, or fewer when a run was stopped early */
  StSteady steady;            /* the simulator's steady state (auto runs: set by the engine) */
  struct StTimelineArrays *lender; /* where ops, mem and comm were borrowed, or NULL */
} StTimeline;

/* Op descriptions (st_op_describe) made once per program op, for writers
 * that name millions of op executions. */
typedef struct {
  const StSchedule *schedule; /* borrowed */
  char ***names;              /* [n_programs] of [n_ops], lazily */
} StOpNames;

void st_op_names_init(StOpNames *names, const StSchedule *schedule);
/* Borrowed: lives until st_op_names_clear. */
const char *st_op_names_get(StOpNames *names, int rank, uint32_t op);
void st_op_names_clear(StOpNames *names);

/* What the devices are called in tables and figures: "CPU" or "GPU". */
static inline const char *
st_timeline_device_noun(const StTimeline *t)
{
  return t->on_host ? "CPU" : "GPU";
}

/* The StOpRecord.algo of `name` (a static string), added to t->algos when
 * new; 0 for NULL. */
uint8_t st_timeline_algo(StTimeline *t, const char *name);

static inline const char *
st_timeline_algo_name(const StTimeline *t, const StOpRecord *r)
{
  return r->algo > 0 && r->algo <= t->algos->len ? g_ptr_array_index(t->algos, r->algo - 1) : "";
}

/* An empty timeline over `schedule` with identity folding; on_host when the
 * cluster's device is "host". */
StTimeline *st_timeline_new(const StSchedule *schedule, gboolean measured, const char *origin);
void st_timeline_free(StTimeline *timeline);

/* Record arrays lent to one timeline after another: a caller that runs
 * thousands of simulations in turn (a planner's thread) keeps their pages
 * mapped and written, where fresh arrays of every run fault each page in
 * again (a third of the planner's time on ResNet-50, docs/PERFORMANCE.md).
 * One timeline at a time: while one holds them, the next gets arrays of its
 * own. Free the arrays after the last timeline that used them. */
typedef struct StTimelineArrays StTimelineArrays;
StTimelineArrays *st_timeline_arrays_new(void);
void st_timeline_arrays_free(StTimelineArrays *arrays);
/* st_timeline_new with the records in `arrays` (may be NULL: its own). */
StTimeline *st_timeline_new_in(const StSchedule *schedule, gboolean measured, const char *origin,
                               StTimelineArrays *arrays);
/* st_timeline_new_in with folding maps of its own (transfer full, [n_ranks]
 * and [n_devices]), where the identity would be made and overwritten. */
StTimeline *st_timeline_new_folded(const StSchedule *schedule, gboolean measured,
                                   const char *origin, StTimelineArrays *arrays,
                                   int32_t *rank_rep, int32_t *device_rep);
/* Room for `ops` op records and `mem` memory events without moving them. */
void st_timeline_reserve(StTimeline *timeline, guint ops, guint mem);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StTimeline, st_timeline_free)

/* TRUE when device d has its own records (it is its own representative). */
static inline gboolean
st_timeline_device_recorded(const StTimeline *t, int device)
{
  return t->device_rep[device] == device;
}

/* Number of devices that device `rep` stands for (1 when nothing is folded). */
int st_timeline_device_weight(const StTimeline *t, int rep);

/* The same for every device at once: weight[d] devices stand behind the
 * recorded device d, 0 for a device that is not recorded. [n_devices],
 * transfer full. O(devices). */
int32_t *st_timeline_device_weights(const StTimeline *t);

/* Lanes: one per (device, rank, stream) of the recorded ranks, numbered by
 * device, then rank, then stream; ops.csv, the Gantt and the trace all use
 * them. Returns the first lane of each rank, -1 for ranks not recorded.
 * [n_ranks], transfer full. */
int32_t *st_timeline_lanes(const StTimeline *t);

/* The memory of each recorded device over time: `visit` sees, device by
 * device in order, the bytes per category at time 0 and after all the events
 * of each instant (events of one instant are applied together, so a free and
 * an allocation at the same time make no false peak), with the last
 * allocation of that instant (NULL if none; valid during the call only).
 * With `to_end`, a last call at end_ns repeats the final state. O(E) for E
 * events recorded in time order per device (O(E log E) otherwise). */
typedef void (*StMemVisit)(gpointer data, int device, int64_t t_ns,
                           const int64_t state[ST_MEM_N], const StMemEvent *last_alloc);
void st_timeline_walk_memory(const StTimeline *t, gboolean to_end, StMemVisit visit,
                             gpointer data);
