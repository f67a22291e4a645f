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

#include "cost/cost.h"
#include "engine/engine.h"
#include "engine/queue.h"
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
  float *fill;           /* [n_ops] COMP: fraction of the device it fills alone, (0, 1];
                            1 unless a profile measured it (st_compute_fill) */
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
  int32_t device;
  int32_t priority;
  double fill;
  double remaining_ns;   /* work left, in ns at rate 1 */
  double rate;
  int64_t last_ns;
  int64_t start_ns;
} Kernel;

typedef struct {
  GPtrArray *kernels;    /* Kernel *, running now */
} DeviceState;

/* A port is one direction of one link class of one device. */
typedef struct {
  int32_t load;          /* flows moving bytes through it now */
  GPtrArray *flows;      /* those flows */
} Port;

typedef struct {
  Event ev;
  StCommPlan plan;
  int32_t phase;
  gboolean in_latency;
  double remaining;      /* bytes of the current phase, per device */
  double rate;           /* bytes/s per device */
  int64_t last_ns;
  int64_t phase_start_ns;
  int64_t start_ns;      /* every member had arrived */
  int32_t *devices;      /* distinct (representative) devices that send */
  int32_t n_devices;
  int32_t recv_device;   /* p2p: the receiving device; -1 otherwise */
  uint8_t mode;          /* which ports of its devices it uses (engine_net.c) */
  int32_t *ports;        /* ports of the current bandwidth phase */
  int32_t n_ports;
  GArray *members;       /* OpRef: ops that complete when the flow ends */
  uint64_t stamp;        /* recompute round that last updated it */
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
  gboolean dirty;          /* something the decision reads changed */
  GArray *waiting;         /* int32 pairs (sim, stream) waiting for admission */
} AdmitDevice;

/* engine_admission.c: NULL unless a simulated rank has a background stream,
 * so ordinary schedules run exactly as before. */
typedef struct {
  AdmitDevice *devices;    /* [n_devices] */
  int32_t n_fg_streams;    /* foreground streams with ops of simulated ranks */
  int32_t *fg_finished;    /* [steps]: foreground streams that finished step k */
  int32_t fg_steps_done;   /* steps that every foreground stream has finished */
  GArray *dirty;           /* int32 devices with dirty set */
  int64_t bg_ops_since_fg; /* background ops completed since the foreground's last */
} Admission;

typedef struct {
  const StSchedule *s;
  const StEngineOptions *options;
  StFold *fold;
  StTimeline *tl;
  StEventQueue queue;
  int64_t now;
  StComputeCtx compute;
  const StShareModel *share;
  const char *comm_algo;

  ProgInfo *progs;        /* [n_programs] */
  SimRank *sims;          /* [n_sims] */
  int32_t n_sims;
  int32_t *sim_of_rank;   /* [n_ranks]: index into sims, -1 when folded away */
  DeviceState *devices;   /* [n_devices] (only representatives are used) */
  Port *ports;            /* [n_devices * ST_LINK_N * 2] */
  uint64_t stamp;

  GQueue ready;           /* (sim << 16 | stream) as pointers: streams to (re)try now */
  GHashTable *instances;  /* collective rendezvous, by (comm, group, seq) */
  GHashTable *p2p;        /* pending sends/receives, by (src, dst, tag) */
  GHashTable *plans;      /* StCommPlan by (comm, group, kind, bytes) */
  GHashTable *group_devices; /* (comm, group) -> distinct representative devices */
  GHashTable *flows;      /* Flow *: every flow alive, for cleanup after a failure */

  int64_t events;
  int64_t ops_done;
  GError *error;          /* first error met inside a handler */
  Admission *adm;         /* multiplexing, or NULL */
} Engine;

/* engine.c */
void engine_complete(Engine *e, const OpRef *ref, int64_t start_ns, StCostSource source);
gboolean engine_failed(Engine *e);
void engine_fail(Engine *e, const char *format, ...) G_GNUC_PRINTF(2, 3);

/* engine.c: queues a stream to be tried again. */
void engine_retry_stream(Engine *e, int sim, int stream);

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

/* engine_memory.c */
void memory_persistent(Engine *e);
void memory_alloc(Engine *e, const OpRef *ref);
void memory_free(Engine *e, const OpRef *ref);

static inline const StOp *
engine_op(const Engine *e, const OpRef *ref)
{
  return st_program_op(e->sims[ref->sim].program, ref->op);
}
