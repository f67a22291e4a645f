/* runtime.h: the executor's private structures, shared by its files:
 * exec.c (setup, the run), harvest.c (the measured timeline, losses,
 * background jobs), exec_check.c (what it can run), exec_weights.c (the
 * final weights), walker.c (threads, dependencies, staggered starts),
 * steps.c (per-step events and losses), state.c (what the schedule's
 * buffers hold: weights, gradients, optimizer states, dense or compressed,
 * by version), state_init.c (the first weights; states shared on a device),
 * sparse_mask.c (SAMO's mask), acts.c (activations and their lifetimes),
 * op_compute.c (layer passes), op_update.c (optimizer, compress, expand),
 * op_comm.c (collectives and transfers), op_move.c (burst's samples moved
 * between GPU sets), data.c (synthetic samples, or a data set's rows:
 * dataset.c), mux.c and admit.c
 * (multiplexing: foreground and background jobs, admission at run time).
 *
 * Threads: one per (rank, stream). A rank's shared state (buffers, layer
 * pointers, activations, its pool) changes under the rank's lock; the
 * tensors themselves are read and written outside it, ordered by the
 * schedule's dependencies as on a GPU. The multiplexer's state (mux.c)
 * changes under its own lock, never taken while holding a rank's.
 */
#pragma once

#include <glib.h>

#include "exec/comm.h"
#include "exec/device.h"
#include "exec/exec.h"
#include "exec/layer_impl.h"
#include "exec/pool.h"

typedef struct Exec Exec;
typedef struct Mux Mux;             /* mux.c: multiplexing at run time */
typedef struct MuxStream MuxStream; /* mux.c: one stream's part in it */

/* Buffers of one data kind that alternate by step (StBuffer.slot): two
 * parameter versions, two gradient buffers. */
#define STATE_SLOTS 2

/* One layer's model state on a rank: where each kind of data of the layer
 * is, from the buffers alive now (state.c). Kinds and layouts as
 * sched/sched.h and base/kinds.h state them: dense weights and gradients
 * (dt), their slices, optimizer states (fp32), and the sparse kinds (index
 * lists, compressed weights, gradients and states of the non-zeros). */
typedef struct {
  void *at[ST_DATA_N][STATE_SLOTS]; /* [kind][slot]: the layer's data, or NULL */
  int8_t slots[ST_DATA_N];  /* alternating buffers of the kind (1 when one buffer) */
  int parts;                /* slices of the layer when sharded */
  int slice;                /* this rank's slice, known once a collective placed it */
  int newest;               /* the PARAMS slot the last optimizer step wrote */
  int home;                 /* the rank whose buffers these are: this one, or the
                               device holder a guest computes with (cyclic DP) */
  gboolean shared;          /* several ranks accumulate into its gradients */
  /* Gradients applied (or handed over) and not yet zeroed: the next write
   * that accumulates zeroes them first (state_fresh), so nothing rewrites
   * them while a send may still read them (hazards.c). */
  gboolean stale[ST_DATA_N][STATE_SLOTS];
} LayerState;

/* A tensor of activations the executor made: a layer's output (or input
 * data), or the gradient of a layer's input, for one micro-batch. Freed when
 * its last user op ends. */
typedef struct {
  void *ptr;
  int users;         /* ops still to read it this step */
  int32_t step;      /* the step that made it */
} Act;

/* Which samples of a step a tensor of a layer holds, in order (burst
 * parallelism, StOp.sample_stride): replica + first + p * stride at position
 * p < count; stride 0 when the schedule does not say (a rank's own
 * contiguous share). */
typedef struct {
  int32_t first, stride, count;
} ActSamples;

typedef struct {
  Exec *x;
  int rank;
  int device;              /* schedule device */
  const StProgram *p;
  const StModel *model;    /* of its job */
  const StSettings *settings;
  StExecDevice *dev;
  const StKernels *k;
  StPool *pool;
  GMutex lock;
  GCond cond;
  void **streams;          /* [n_streams] */
  void **buffers;          /* [n_buffers]: device memory of persistent schedule buffers */
  GHashTable *live;        /* (buffer, step) -> device memory of transient buffers alive */
  GArray **transient_of;   /* [ST_DATA_N * n_layers]: transient buffers holding each */
  LayerState *layers;      /* [n_layers] */
  int n_micro;             /* micro-batch indices in the program */
  Act *outputs;            /* [2][n_micro * (n_layers + 1)] by step parity: index 0 the input
                              data, i + 1 layer i */
  Act *input_grads;        /* [2][n_micro * n_layers] by step parity */
  Act *inputs;             /* [2][n_micro * n_layers]: a layer's input assembled at its own
                              width from another GPU set (burst), by step parity */
  Act *output_grads;       /* [2][n_micro * n_layers]: the gradient of a layer's output
                              assembled likewise */
  gboolean *assembles;     /* [2][n_micro * n_layers]: whether the layer reads an assembled
                              input ([0]) or output gradient ([1]) */
  ActSamples *samples;     /* [n_micro * n_layers]: what the layer's passes here compute */
  void **saved;            /* [n_micro * n_layers] */
  int32_t **targets;       /* [n_micro]: device int32 targets while the loss needs them */
  int32_t *done;           /* [n_ops]: instances issued */
  /* Per step, in chunks (steps.c): the start and end events of each op
   * instance, [op * 2 + end]; the summed loss of its micro-batches (device
   * fp32). */
  void ***event_chunks;
  float **loss_chunks;
  gboolean background;     /* its streams run a background job (multiplexing) */
  void **tied_grads;       /* [n_micro]: a tied head's weight gradient waiting for the
                              backward of the layer it is tied to (whose gradient buffer
                              may not exist yet), or NULL */
  int *act_users;          /* users per step of outputs, input gradients, assembled inputs
                              and assembled output gradients, one after another */
  int64_t *nnz;            /* [n_layers]: the entries each layer keeps (its parameters when
                              dense; P - floor(p P) under settings.sparsity) */
  gboolean *runs_bwd;      /* [n_layers]: the program runs the layer's backward */
  int32_t *fwd_version;    /* [n_layers]: version its forward reads, -1 when not run here */
  gboolean *recomputed;    /* [n_micro * n_layers]: a RECOMPUTE op exists: the layer is
                              checkpointed, or under selective recomputation drops its
                              scores (settings->recompute says which) */
  void **recomputed_out;   /* [n_micro * n_layers]: a recompute's output, kept for a backward
                              that reads its layer's output */
  void **remade;           /* [n_micro * n_layers]: selective: what the recompute made
                              again (the layer's again_bytes()), for its backward */
  /* Shared gradients (a device holder and its guests): backwards that add into
   * them run one at a time, each after the last one's end event. */
  GMutex share_lock;
  void *share_event;
  /* Implicit dependencies (hazards.c): op o also waits for
   * hazards[hazard_first[o] .. hazard_first[o + 1]). */
  uint32_t *hazard_first;  /* [n_ops + 1] */
  struct Hazard *hazards;
  /* Tensor parallelism (tp.c): the rank's index in its group and the group's
   * communicator (-1 without); tensors handed between a pass's ops. The
   * model file's vocabulary when the schedule padded it (the data and the
   * loss use only that much), else 0. */
  int tp_rank, tp_comm;
  int64_t vocab;
  /* Expert parallelism (op_ep.c): the 'ep' communicator (-1 without), the
   * group's size and the rank's index in it. */
  int ep_comm, ep_size, ep_index;
  GArray *tp_tensors;
  int32_t *tp_batch;       /* [n_micro * n_layers]: the batch of each layer's passes */
  /* Context parallelism (op_cp.c): the 'cp' communicator (-1 without), the
   * group's size (1 without) and the rank's index in it; per op, which
   * exchange of its pass an exchange is (0: none) and whether the pass is a
   * backward; the passes' states alive. */
  int cp_comm, cp_size, cp_rank;
  int cp_kind;             /* ST_LAYER_CP_RING or ST_LAYER_CP_A2A (exec/layer_impl.h) */
  int16_t *cp_exchange;    /* [n_ops] */
  gboolean *cp_backward;   /* [n_ops] */
  GHashTable *cp_states;   /* (step, micro, layer, backward) -> device memory */
} Rank;

/* An implicit dependency: op `op` of rank `rank` (this one, or a guest's
 * holder), `step_offset` steps back. */
typedef struct Hazard {
  uint32_t op;
  int32_t step_offset;
  int32_t rank;
} Hazard;

struct Exec {
  const StSchedule *s;
  const StExecOptions *o;
  const StDeviceBackend *device_backend;
  const StCommBackend *comm_backend;
  StCommCtx *comm;
  StKDtype dt;             /* activations and weights */
  int n_ranks;             /* ranks this process runs (all, for local comm) */
  Rank *ranks;             /* [s->n_ranks]; only those with a device run here */
  StExecDevice **devices;  /* [s->n_ranks]: open device of each rank here, NULL otherwise */
  GPtrArray *open_devices; /* StExecDevice *, one per physical device opened */
  void **origins;          /* per open device: the event at time zero */
  GMutex fail_lock;
  GError *error;           /* the first failure */
  volatile gint failed;
  gint64 origin_us;        /* time zero on the host's monotonic clock (staggered starts) */
  Mux *mux;                /* NULL unless the schedule has background streams */
};

/* exec.c */
void exec_fail(Exec *x, GError *error); /* takes ownership; keeps the first */
/* exec_weights.c: the main job's newest weights per layer (StExecResult.weights);
 * one rank's own, whole (a background copy's). */
gboolean exec_gather_weights(Exec *x, GPtrArray *out, GError **error);
gboolean exec_rank_weights(Rank *r, GPtrArray *out, GError **error);
/* harvest.c: the measured timeline, the losses, the background jobs. */
int32_t exec_completed_steps(Exec *x);
gboolean exec_harvest(Exec *x, StTimeline *t, int32_t steps, GError **error);
gboolean exec_losses(Exec *x, int32_t steps, GArray *out, GError **error);
gboolean exec_backgrounds(Exec *x, int32_t steps, gboolean weights, GPtrArray **out,
                          GError **error);
static inline gboolean
exec_failed(Exec *x)
{
  return g_atomic_int_get(&x->failed) != 0;
}

/* state.c: schedule buffers and what they hold. */
gboolean state_alloc_buffer(Rank *r, uint32_t buffer, int32_t step, uint32_t op, void *stream,
                            GError **error);
void state_free_buffer(Rank *r, uint32_t buffer, int32_t step, uint32_t op, void *last_use);
size_t state_optim_floats(const Rank *r, size_t n); /* floats of states for n parameters */
/* Elements of `layer` that a buffer of `data` in `parts` slices holds, and
 * the bytes of one element. */
size_t state_elems(const Rank *r, StData data, int layer, int parts);
size_t state_elem_bytes(const Rank *r, StData data);
/* The kind a buffer holds for data an op moves (ST_DATA_GRADS_TOTAL: GRADS). */
StData state_kind(StData data);
/* Where op `o` of step `step` finds `data` of `layer` for data step `t`
 * (parameters w_t, the gradient of step t; an op of step k with version v
 * asks for k - v): in a buffer of its own alloc or free list first (the
 * gather made for it, the bucket it reduces), then in a transient buffer
 * allocated in the same step, then where the layer's persistent state
 * points (the slot of data step t when buffers alternate). A prefetched
 * gather for a later pass, or the next micro-batch's bucket, may be alive
 * while this op still needs its own. NULL when nothing holds it. */
void *state_data_of(Rank *r, uint32_t o, int32_t step, StData data, int layer, int64_t t);
/* The same without an op's own lists; `micro` (-1: any) picks among
 * transient buffers of several micro-batches (ZeRO-2's buckets). */
void *state_find(Rank *r, StData data, int layer, int64_t t, int32_t step, int micro);
/* The layer state's persistent binding of `data` for data step t, or NULL. */
void *state_at(const LayerState *ls, StData data, int64_t t);
/* `data` of `layer` in a buffer of op `o`'s own alloc or free lists (its
 * instance of `step`), or NULL; and whether the op allocates such a buffer. */
void *state_own_data(Rank *r, uint32_t o, int32_t step, StData data, int layer);
gboolean state_own_alloc(Rank *r, uint32_t o, int32_t step, StData data, int layer);
/* A buffer of `category` that op `o` allocates holding no model state (a
 * collective's output before it is added where it belongs), and its bytes;
 * NULL when the op allocates none. */
void *state_own_scratch(Rank *r, uint32_t o, int32_t step, StMemCategory category,
                        size_t *bytes);
/* The same among the buffers op `o` frees (alive when it runs). */
void *state_freed_scratch(Rank *r, uint32_t o, int32_t step, StMemCategory category,
                          size_t *bytes);
/* The index of transient buffers by data and layer, and the live instances
 * (rank setup and teardown). */
void state_index_buffers(Rank *r);
void state_index_clear(Rank *r);
/* Gradients (any gradient kind) of `layer` for data step t were applied or
 * handed over: mark them to be zeroed by their next accumulating write; or
 * (fresh) zero them now if so marked, before accumulating into them. The
 * flags live with the rank owning the buffers (a guest's holder). */
void state_mark_stale(Rank *r, int layer, StData data, int64_t t);
gboolean state_fresh(Rank *r, int layer, StData data, int64_t t, void *stream, GError **error);
/* The data written whole (a receive that overwrites): no longer stale. */
void state_clear_stale(Rank *r, int layer, StData data, int64_t t);

/* hazards.c: the implicit order of writes after the sends that read
 * before them (Rank.hazards); after state_share, which says who is whose
 * guest. */
void hazards_find(Exec *x, Rank *r);

/* state_init.c: the first weights (dense, sliced, compressed), and the
 * states guests share with their device holder. */
gboolean state_init_weights(Rank *r, GError **error);
gboolean state_share(Exec *x, GError **error);
/* The layer whose weights a pass of `layer` uses (a tied head's embedding). */
int state_weights_layer(const StModel *m, int layer);
/* Whether `rank` computes `layer` (with parameters) without holding its
 * weights in any buffer: a guest of its device holder. */
gboolean exec_is_guest(const StSchedule *s, int rank, int layer);
/* The rank of the same device (and job) keeping `layer`'s weights
 * persistently, other than `rank`, or -1. */
int exec_device_holder(const StSchedule *s, int rank, int layer);

/* acts.c: activations. */
void acts_setup(Rank *r); /* after n_micro is known */
void acts_clear(Rank *r);
void acts_count_users(Rank *r);
/* The tensors of `step` (two steps' alternate: acts.c). */
Act *acts_output(Rank *r, int32_t step, int micro, int layer); /* layer -1: the input data */
Act *acts_input_grad(Rank *r, int32_t step, int micro, int layer);
/* What a layer's passes read: its input (the previous layer's output, or
 * the input assembled from another GPU set), the gradient of its output
 * (the next layer's input gradient, or assembled; NULL for the last). */
Act *acts_layer_input(Rank *r, int32_t step, int micro, int layer);
Act *acts_layer_dout(Rank *r, int32_t step, int micro, int layer);
gboolean acts_assembles_input(const Rank *r, int micro, int layer);
gboolean acts_assembles_dout(const Rank *r, int micro, int layer);
/* The assembled tensor a copy or receive of a boundary's data (`op`: its
 * data, layer and micro-batch) writes into, or NULL when the rank assembles
 * none there (a receive then makes the tensor itself). */
Act *acts_assembled(Rank *r, int32_t step, const StOp *op);
/* The samples this rank's passes of the layer compute. */
const ActSamples *acts_samples(const Rank *r, int micro, int layer);
gboolean acts_make(Rank *r, Act *a, size_t bytes, StMemCategory category, int32_t step,
                   uint32_t op, void *stream, GError **error);
/* One reader of `a` is done (its work is enqueued on `stream`); the last one frees it. */
void acts_use(Rank *r, Act *a, int32_t step, uint32_t op, void *stream);

/* data.c: synthetic, learnable samples. */
int st_exec_data_index(const StSchedule *s, int rank);
gboolean data_make_input(Rank *r, int micro, int32_t step, uint32_t op, void *stream,
                         GError **error);
gboolean data_make_targets(Rank *r, int micro, int32_t step, uint32_t op, void *stream,
                           GError **error);

/* op_move.c: burst's moves of samples between GPU sets: a copy of the
 * samples a rank keeps (ST_OP_COPY), and sends and receives of activations
 * that say their samples (StOp.sample_stride). */
gboolean op_copy(Rank *r, uint32_t op, int32_t step, void *stream, GError **error);
gboolean op_move_p2p(Rank *r, uint32_t op, int32_t step, void *stream, int peer,
                     GError **error);

/* op_compute.c, op_comm.c: what an op does. `step` is 0-based. */
gboolean op_compute(Rank *r, uint32_t op, int32_t step, void *stream, GError **error);
gboolean op_comm(Rank *r, uint32_t op, int32_t step, void *stream, GError **error);
/* op_update.c: optimizer steps, compress and expand (sparse states). */
gboolean op_update(Rank *r, uint32_t op, int32_t step, void *stream, GError **error);
gboolean op_compress(Rank *r, uint32_t op, int32_t step, void *stream, GError **error);
gboolean op_expand(Rank *r, uint32_t op, int32_t step, void *stream, GError **error);

/* Pool memory for an op's own use (released with op_scratch_release). */
void *op_scratch(Rank *r, size_t bytes, StMemCategory category, const char *what, int32_t step,
                 uint32_t op, void *stream, GError **error);
void op_scratch_release(Rank *r, void *ptr, int32_t step, uint32_t op, void *stream);
/* "rank R, op O 'name': WHAT is not on this rank when the op runs". FALSE. */
gboolean op_missing(GError **error, const Rank *r, uint32_t op, const char *what);

/* steps.c: per-step storage, reserved by the first stream to begin a step. */
int32_t steps_capacity(void);
void steps_init(Rank *r);
gboolean steps_reserve(Rank *r, int32_t step, void *stream, GError **error);
void **steps_event(Rank *r, int32_t step, uint32_t op, int end);
float *steps_loss(Rank *r, int32_t step);
gboolean steps_losses(Rank *r, int32_t steps, float *out, GError **error); /* to the host */
void steps_clear(Rank *r);

/* mux.c: multiplexing (a foreground job beside background jobs) at run
 * time. mux_setup leaves x->mux NULL when no stream is background; then
 * every call below is a no-op (ms NULL). */
void mux_setup(Exec *x);
void mux_free(Exec *x);
MuxStream *mux_stream(Exec *x, Rank *r, int stream);
/* Whether the stream runs step `step`: the schedule's steps, or for a
 * background stream beside a foreground, the iterations its job begins
 * while the foreground runs. */
gboolean mux_iteration(Exec *x, MuxStream *ms, int32_t step);
/* Around each op: FALSE when the run failed or stopped (error set on a
 * failure of its own). */
gboolean mux_before(MuxStream *ms, uint32_t op, int32_t step, GError **error);
gboolean mux_after(MuxStream *ms, uint32_t op, int32_t step, GError **error);
gboolean mux_stream_end(MuxStream *ms, GError **error);
/* A rank whose steps are a background job's repeated iterations. */
gboolean mux_repeats(const Exec *x, const Rank *r);
void mux_wake(Exec *x); /* a failure or a stop: waiting streams look */
int64_t mux_now_ns(const Exec *x);
GArray *mux_steal_records(Exec *x); /* StAdmitRecord, or NULL when not multiplexed */

/* tp.c: tensor parallelism. A layer pass in parts (StOp.part) around the
 * group's collectives: what its COMP op reads and writes in place of the
 * layer's activations (NULL: the activation), and whether it is the pass's
 * first part (it allocates the pass's tensors) or its last (it releases
 * what the pass is done with). */
typedef struct {
  gboolean first, last;
  const void *in, *dout;
  void *out;      /* forward: the part's output; backward: the input gradient */
} TpView;

gboolean tp_setup(Rank *r, GError **error);
/* The model a tensor-parallel one is one rank's share of (transfer full). */
StModel *tp_whole_model(const StModel *m, GError **error);
void tp_clear(Rank *r);
gboolean tp_view(Rank *r, uint32_t o, int32_t step, TpView *v, GError **error);
gboolean tp_first_part(const Rank *r, const StOp *op);
gboolean tp_last_part(const Rank *r, const StOp *op);
/* A tensor handed from one op of a pass to the next (put), taken once. */
void tp_put(Rank *r, int32_t step, const StOp *op, StData data, void *ptr);
void *tp_take(Rank *r, int32_t step, const StOp *op, StData data);
void *tp_peek(Rank *r, int32_t step, const StOp *op, StData data); /* left in place */
/* Where part `op->part`'s forward output is: part 1 of a pass in two parts
 * inside the saved block, else the layer's output. */
void *tp_part_output(Rank *r, const StOp *op, int32_t step);
void **tp_saved_cell(Rank *r, int micro, int layer);
/* The samples of a pass's op (a collective's: its COMP's). */
int tp_batch(const Rank *r, const StOp *op);
/* op_tp.c: the collectives of tensor parallelism (ST_DATA_TP_*). */
gboolean op_tp(Rank *r, uint32_t op, int32_t step, void *stream, GError **error);

/* op_ep.c: expert parallelism. What an owned expert's pass reads and writes
 * in place of the layer's activations (the all-to-alls' buffers: `on` says
 * the pass is one), and the collectives (ST_DATA_EP_*). */
typedef struct {
  gboolean on;
  const void *in;  /* forward: the dispatched rows; backward: their output gradients */
  void *out;       /* forward: the experts' outputs; backward: the rows' gradients */
} EpView;

gboolean ep_setup(Rank *r, GError **error);
gboolean ep_expert(const Rank *r, const StOp *op);
/* Whether the rank keeps layer i's states (not another EP rank's expert). */
gboolean ep_holds(const Rank *r, int layer);
gboolean ep_view(Rank *r, uint32_t o, int32_t step, EpView *v, GError **error);
gboolean op_ep(Rank *r, uint32_t op, int32_t step, void *stream, GError **error);

/* op_cp.c: context parallelism. A pass in steps (StOp's cp step) around
 * the exchanges (ST_DATA_CP ring shifts or all-to-alls on 'cp'): its state, made
 * by its first step and released by its last, and the exchanges. */
gboolean cp_setup(Rank *r, GError **error);
void cp_clear(Rank *r);
/* The step of op `o` (a COMP op) for its layer call; v->steps is 0 when
 * the op is a whole pass. The first step allocates the pass's state. */
gboolean cp_view(Rank *r, uint32_t o, int32_t step, void *stream, StLayerCp *v, GError **error);
/* After the op's call: its last step releases the pass's state. */
void cp_done(Rank *r, uint32_t o, int32_t step, void *stream);
gboolean op_cp(Rank *r, uint32_t op, int32_t step, void *stream, GError **error);

/* walker.c */
/* Runs every stream of every rank here to the end; FALSE when the run
 * failed (x->error says why). */
gboolean walker_run(Exec *x);
