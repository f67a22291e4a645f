/* engine_internal.h: the engine's private structures, shared by its files:
 * engine.c (the loop, streams, dispatch), engine_compute.c (kernels sharing a
 * device), engine_net.c (flows over shared links, collective rendezvous,
 * send/receive matching), engine_memory.c (buffer effects).
 *
 * Vocabulary. A "sim rank" is a rank the engine runs (after folding); an op
 * instance is (sim rank, op, step). An op starts when it heads its stream and
 * its dependencies are done; COMP ops become kernels on their device, COMM and
 * COPY ops become flows over links. When a kernel or flow ends, its ops
 * complete: their streams advance and the streams waiting on them re-check.
 */
#pragma once

#include <glib.h>

#include "base/limits.h"
#include "cluster/links.h"
#include "cost/cost.h"
#include "engine/engine.h"
#include "engine/linkmap.h"
#include "engine/queue.h"
#include "output/steady.h"
#include "sched/fold.h"

typedef enum {
  EV_KERNEL = 1,
  EV_FLOW,
  EV_START, /* a rank with a start offset begins */
  EV_WAKE,  /* admission control looks again (a foreground receive became long) */
} EventKind;

/* Every queued object starts with this, so a popped node tells its kind. */
typedef struct {
  StEventNode node;
  uint8_t kind; /* EventKind */
} Event;

typedef struct {
  int32_t sim;  /* index into Engine.sims */
  uint32_t op;
  int32_t step;
  int64_t ready_ns;
} OpRef;

/* Per program, computed once and shared by its ranks. */
typedef struct {
  GArray **stream_ops;   /* [n_streams] of uint32 op indices in stream order */
  double *cost_ns;       /* [n_ops] COMP: time alone on the device */
  uint8_t *source;       /* [n_ops] StCostSource */
  StShareTraits *share; /* [n_ops] COMP: what the share model needs (fill, memory,
                            priority leak: st_compute_share_traits) */
} ProgInfo;

typedef struct {
  int32_t pos;        /* index into the stream's op list */
  int32_t step;
  uint16_t dep_cursor; /* deps of the head op already seen met */
  gboolean busy;      /* head op started, not yet complete */
  gboolean done;      /* ran every step */
  /* Multiplexing (engine_admission.c); all FALSE / 0 for ordinary streams. */
  gboolean unbounded; /* a background stream beside a foreground: repeats until it ends */
  gboolean in_piece;  /* holds an admitted background piece */
  gboolean waiting;   /* on its device's list of streams waiting for admission */
  double piece_left_ns; /* solo compute time left in the piece */
} StreamState;

typedef struct {
  Event start;             /* EV_START, queued when the rank has a start offset */
  int32_t rank;
  int32_t device;          /* its device (a representative device) */
  int32_t state;           /* its device's DeviceState: index into Engine.devices */
  const StProgram *program;
  const ProgInfo *info;
  StreamState *streams;    /* [n_streams] */
  int32_t *done;           /* [n_ops]: instances completed */
  uint64_t *waiters;       /* [n_ops]: streams blocked on this op, one bit each */
  int64_t *coll_seq;       /* [n_comms]: collectives issued on each communicator */
} SimRank;

typedef struct {
  Event ev;
  OpRef ref;
  int32_t state;         /* its device's DeviceState (Engine.devices) */
  int32_t priority;
  StShareTraits share;   /* its op's (ProgInfo.share) */
  double remaining_ns;   /* work left, in ns at rate 1 */
  double rate;
  int64_t last_ns;
  int64_t start_ns;
  gboolean host;         /* on a host stream (StStream.host): runs its cost_ns alone, on
                            no GPU's list of kernels */
} Kernel;

typedef struct {
  GPtrArray *kernels;    /* Kernel *, running now */
  GPtrArray *host_kernels; /* Kernel *, host-stream ops of its ranks running now (each at
                              its own pace, no share model) */
  /* Communication kernels moving bytes here now (engine_net.c): the SMs and
   * memory bandwidth they hold together (st_comm_share_traits, summed). */
  int32_t comm_kernels;
  double comm_fill, comm_mem;
} DeviceState;

/* A flow on a link: it loads the link with coef x its rate. */
typedef struct {
  struct Flow *flow;
  double coef;
} Attach;

/* A link the run uses (engine_links.c gives it a slot: the index of its
 * StNetLink in the timeline), with the flows on it (engine_share.c). */
typedef struct {
  double capacity;       /* bytes/s */
  Attach *on;            /* [n_on] flows moving bytes through it now */
  int32_t n_on, max_on;
  uint32_t mark;         /* component search stamp */
  gboolean dirty;        /* a flow arrived or left since the last re-rating */
  double left, weight;   /* progressive filling: capacity not yet given, sum of the
                            unfrozen flows' coefficients */
  int32_t open;          /* progressive filling: unfrozen flows on it */
} NetLink;

typedef struct Flow {
  Event ev;
  StCommPlan plan;
  int32_t lists[ST_COMM_MAX_PHASES]; /* each phase's use list (StNetTrace) */
  int32_t phase;
  gboolean in_latency;
  gboolean attached;     /* on its links (the bandwidth part of a phase) */
  double remaining;      /* bytes of the current phase, per device */
  double share;          /* bytes/s per device its links give it */
  double rate;           /* bytes/s per device it moves at: its share, a hair less so that
                            it ends on a whole nanosecond */
  double recorded;       /* the rate last written to the trace */
  int32_t trace_id;      /* flow phase id in the trace */
  int64_t last_ns;
  int64_t start_ns;      /* every member had arrived */
  GArray *members;       /* OpRef: ops that complete when the flow ends */
  uint32_t mark;         /* component search stamp */
  gboolean frozen;       /* progressive filling: its rate is fixed */
  int32_t slot;          /* index in Engine.flows */
  StShareTraits held;    /* what its kernels hold on each member's device while attached */
} Flow;

/* Admission control of one (representative) device, for multiplexing. */
typedef struct {
  Event wake;              /* EV_WAKE: when a pending foreground receive turns long */
  int32_t device;
  const StAdmissionPolicy *policy; /* of the first background stream on it, or NULL */
  gboolean has_fg;         /* a foreground stream with ops runs here */
  int32_t bg_in_flight;    /* background pieces holding the device */
  int32_t fg_collectives;  /* foreground collectives started, not complete */
  int32_t fg_recvs;        /* foreground receives posted, not complete */
  int64_t fg_recv_since;   /* when fg_recvs last became non-zero */
  double fg_slowdown;      /* moving average (st_admission_slowdown), 1 = as alone */
  double fg_budget_ns;     /* st_admission_budget: the step budget, then this step's kernels */
  double fg_step_budget_ns; /* st_admission_budget over the foreground steps */
  gboolean dirty;          /* something the decision reads changed */
  GArray *waiting;         /* int32 pairs (sim, stream) waiting for admission */
} AdmitDevice;

/* engine_admission.c: NULL unless a simulated rank has a background stream,
 * so ordinary schedules run exactly as before. */
typedef struct {
  AdmitDevice *devices;    /* [n_devices] */
  int32_t n_fg_streams;    /* foreground streams with ops of simulated ranks */
  GArray *fg_finished;     /* int32 per step: foreground streams that finished step k */
  int32_t fg_steps_done;   /* steps that every foreground stream has finished */
  GArray *fg_step_end;     /* int64 ns per step done: when its last foreground stream ended it */
  GArray *dirty;           /* int32 devices with dirty set */
  int64_t bg_ops_since_fg; /* background ops completed since the foreground's last */
} Admission;

/* engine_link_reps.c: which representative link stands for a real one, and
 * for how many, from a class per node and leaf (not a table per link). */
typedef struct {
  gboolean folded;            /* FALSE: every link stands for itself */
  const int32_t *device_rep;  /* the fold's, [n_devices] */
  int32_t *node_class;        /* [nodes]: dense class of each node (folded runs) */
  int32_t *class_node;        /* [classes]: the class's first node */
  int32_t *class_count;       /* [classes]: its nodes */
  int32_t *class_nic;         /* [classes x nics]: NIC k of the first node -> the first of
                                 its NICs with the same representatives behind */
  int32_t *class_nic_count;   /* [classes x nics]: at such a first NIC, how many of the
                                 first node's NICs it stands for */
  int32_t *leaf_first;        /* [leaves]: the first leaf whose nodes' classes are the same */
  int32_t *leaf_count;        /* [leaves]: at a first leaf, the leaves it stands for */
  LinkMap device_count;       /* representative device -> the devices it stands for (i) */
} LinkReps;

/* Steps and the steady state (engine_steps.c). */
typedef struct {
  gboolean auto_steps;     /* --steps auto: run until steady, within `cap` */
  int32_t cap;             /* the most steps the detector may look at */
  int32_t limit;           /* steps the streams run; auto: unbounded until the stop */
  gboolean stopped;        /* auto: no step after `limit` - 1 is taken */
  int32_t base;            /* the first step not complete */
  GPtrArray *acc;          /* per step from `base` on: what its ops did (engine_steps.c) */
  int64_t ops_per_step;    /* ops of a step over the simulated ranks (bounded streams) */
  int32_t *lane_base;      /* [n_sims]: the first lane (sim rank, stream) of each */
  int32_t n_lanes;
  int32_t max_started;     /* the latest step any op has started in */
  int32_t n_started;       /* simulated ranks begun */
  int64_t end;             /* E(base - 1) */
  StSteadyDetector *detector;
  gboolean found;          /* the detector said steady; `steady` holds how */
  StSteady steady;
} Steps;

typedef struct {
  const StSchedule *s;
  const StEngineOptions *options;
  StEngineBudget budget;  /* zero: no limit, no progress */
  StFold *fold;           /* its rank_rep and device_rep owned by tl once tl_took_maps */
  StTimeline *tl;
  gboolean tl_took_maps;
  StEventQueue queue;
  int64_t now;
  StComputeCtx compute;
  const StShareModel *share;
  const char *comm_algo;

  ProgInfo *progs;        /* [n_programs] */
  SimRank *sims;          /* [n_sims] */
  int32_t n_sims;
  int32_t *sim_of_rank;   /* [n_ranks]: index into sims, -1 when folded away */
  DeviceState *devices;   /* [n_dev_states]: one per device a simulated rank runs on (a
                             representative), SimRank.state; none for the devices folded
                             away, so their count costs nothing here */
  int32_t n_dev_states;

  /* Links (engine_links.c): real link ids (cluster/links.h) map to the
   * representative that stands for them (engine_link_reps.c) and, once
   * used, to a slot. Nothing here is per real link: a folded cluster of a
   * million GPUs has 7 million, and the run touches a few. */
  LinkReps reps;
  LinkMap slot_of;        /* representative link -> slot (i) */
  GArray *links;          /* NetLink, by slot */
  LinkMap acc;            /* scratch: a use list's load per real link (d), in order of first
                             load */
  LinkMap best;           /* scratch: the most per representative (d), in order of first
                             appearance */
  int32_t *rep_offsets;   /* [n_sims + 1]: ranks each simulated rank stands for are */
  int32_t *rep_ranks;     /* rep_ranks[rep_offsets[i] .. [i + 1]) (folded runs, made on the
                             first transfer) */
  GHashTable *lists;      /* UseKey -> use list index + 1 */
  int32_t *comm_canon;    /* [n_comms]: the first communicator with the same partition
                             (sched.h: they share their arrays), whose groups' shapes and
                             use lists stand for this one's */
  StNetTrace *trace;      /* = tl->net */

  /* Sharing (engine_share.c). */
  GArray *dirty;          /* int32 slots with dirty set */
  GPtrArray *comp;        /* Flow *: scratch, a component being re-rated */
  GArray *comp_links;     /* int32 slots: scratch */
  uint32_t stamp;

  GQueue ready;           /* (sim << 16 | stream) as pointers: streams to (re)try now */
  GHashTable *instances;  /* collective rendezvous, by (comm, group, seq) */
  GHashTable *p2p;        /* pending sends/receives, by (src, dst, tag) */
  GHashTable *plans;      /* StCommPlan by (comm, group, kind, bytes) */
  GHashTable *groups;     /* (comm, group) -> simulated members and shape */
  GPtrArray *flows;       /* Flow *: every flow alive (Flow.slot), for cleanup after a failure */

  int64_t events;
  int64_t ops_done;
  GError *error;          /* first error met inside a handler */
  Admission *adm;         /* multiplexing, or NULL */
  Steps steps;
} Engine;

/* engine_budget.c: the estimate of what the run holds against
 * budget.max_memory (after folding, before anything per rank is
 * allocated), and progress for budget.progress. */
gboolean engine_budget(Engine *e, GError **error);
void engine_report_progress(Engine *e);

/* engine.c */
/* An op ends: `algo` names how a communication op's bytes moved (a static
 * string: the plan's), NULL for compute. */
void engine_complete(Engine *e, const OpRef *ref, int64_t start_ns, StCostSource source,
                     const char *algo);
gboolean engine_failed(Engine *e);
void engine_fail(Engine *e, const char *format, ...) G_GNUC_PRINTF(2, 3);

/* engine.c: queues a stream to be tried again. */
void engine_retry_stream(Engine *e, int sim, int stream);

/* engine_steps.c: engine_steps_init after admission_init, then engine_steps_count_ops. */
void engine_steps_init(Engine *e);
void engine_steps_count_ops(Engine *e);
void engine_steps_clear(Engine *e);
void engine_steps_on_rank_start(Engine *e);
/* An op starts (before its work) / has completed and its stream advanced. */
void engine_steps_on_start(Engine *e, const OpRef *ref);
void engine_steps_on_complete(Engine *e, const OpRef *ref, int64_t start_ns);
/* The run's steady state and how many steps it took. */
void engine_steps_finish(Engine *e, StSteady *out, int32_t *steps_run);

/* engine_admission.c (multiplexing; each is a no-op without background streams) */
void admission_init(Engine *e);
void admission_clear(Engine *e);
/* Before an op whose dependencies are met starts: FALSE when it must wait
 * for admission (or its background stream has ended). */
gboolean admission_may_start(Engine *e, const OpRef *ref);
/* The step an op record carries: a background op is labelled with the
 * foreground step during which it ended. */
int32_t admission_record_step(Engine *e, const OpRef *ref);
/* After an op completed and its stream advanced (`wrapped`: to a new step). */
void admission_on_complete(Engine *e, const OpRef *ref, int64_t start_ns, gboolean wrapped);
/* Queues the waiting streams of devices whose situation changed; TRUE when
 * some were queued. */
gboolean admission_flush(Engine *e);
/* An EV_WAKE event fired. */
void admission_on_wake(Engine *e, Event *ev);
/* Whether an unfinished stream may be left behind when the run ends (a
 * background stream cut when the foreground finished). */
gboolean admission_stream_optional(const Engine *e, int sim, int stream);

/* engine_compute.c */
void compute_start(Engine *e, const OpRef *ref);
void compute_on_event(Engine *e, Kernel *k);
void compute_clear(Engine *e);

/* engine_net.c */
void net_init(Engine *e);
void net_clear(Engine *e);
void net_collective(Engine *e, const OpRef *ref);
void net_p2p(Engine *e, const OpRef *ref);
void net_copy(Engine *e, const OpRef *ref);
void net_on_event(Engine *e, Flow *f);
/* Describes what an op that never started is waiting for (deadlock reports). */
char *net_describe_wait(Engine *e, const SimRank *sr, uint32_t op, int32_t step);

/* engine_link_reps.c */
void link_reps_init(Engine *e);
void link_reps_clear(Engine *e);
/* The representative of a real link (itself when unfolded). O(1). */
int link_rep(const Engine *e, int link);
/* The real links a representative stands for (1 when unfolded). O(1). */
int link_stands_for(const Engine *e, int rep);

/* engine_links.c: use lists, each the links a flow phase loads (the
 * representatives of the real links, with the load of the most loaded link
 * each stands for), cached. */
void links_init(Engine *e);
void links_clear(Engine *e);
/* The first communicator partitioning the ranks as `comm` does. */
static inline int
links_canon(const Engine *e, int comm)
{
  return e->comm_canon[comm];
}
/* A collective phase over group `group` of `comm`. */
int links_collective(Engine *e, int comm, int group, const StLinkUse *use,
                     const StGroupShape *shape);
/* A transfer from simulated rank `sim` (op `op`, to its peer) whose plan
 * loads `scale` per byte of the unit point-to-point use (1 unless measured). */
int links_p2p(Engine *e, int sim, const StOp *op, double scale);
/* A copy on `device` through its link of `kind` (PCIe up or down, memory). */
int links_copy(Engine *e, int device, StNetKind kind);

/* engine_share.c: flows sharing links max-min fairly (progressive filling).
 * Attach and detach mark the flow's links; share_flush re-rates the
 * components of marked links once, before time moves on. */
void share_init(Engine *e);
void share_clear(Engine *e);
void share_attach(Engine *e, Flow *f, int list);
/* engine_compute.c: the device's kernels re-rated (a communication kernel
 * arrived or left). */
void compute_reshare(Engine *e, int state);
void share_detach(Engine *e, Flow *f);
static inline gboolean
share_pending(const Engine *e)
{
  return e->dirty->len > 0;
}
void share_flush(Engine *e);

/* engine_memory.c */
void memory_persistent(Engine *e);
void memory_alloc(Engine *e, const OpRef *ref);
void memory_free(Engine *e, const OpRef *ref);

static inline const StOp *
engine_op(const Engine *e, const OpRef *ref)
{
  return st_program_op(e->sims[ref->sim].program, ref->op);
}
