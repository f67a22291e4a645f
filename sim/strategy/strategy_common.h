/* strategy_common.h: mechanics that several strategies share, as
 * parameters rather than copies.
 *
 * - Model-state bytes per parameter for the optimizer and precision.
 * - Gradient buckets: layers grouped in backward order until a bucket holds
 *   at least --bucket-bytes of gradients (0: one bucket per layer).
 * - The data-parallel frame: a schedule whose ranks share one program with a
 *   compute stream, and the forward and backward passes of micro-batches on
 *   it, with hooks where ZeRO gathers parameters and where gradients leave
 *   for reduction.
 *
 * Memory of a micro-batch in the data-parallel frame: every tensor as the
 * executor allocates it (tensors.h, shared with every strategy's passes;
 * checked against real runs by tests/test_memory_conformance.c).
 */
#pragma once

#include "sched/sched.h"
#include "strategy/options.h"
#include "strategy/strategy.h"
#include "strategy/tensors.h"

typedef struct {
  int weight;          /* bytes per parameter of the weights used in compute */
  int grad;            /* bytes per parameter of gradients */
  int optimizer;       /* bytes per parameter of optimizer states, with fp32 master
                          weights under mixed precision (ZeRO's K) */
  int optim_traffic;   /* bytes read and written per parameter by one optimizer step */
  int shard_weight;    /* ZeRO-3: bytes per parameter of a rank's shard of the weights */
  int shard_optimizer; /* ZeRO-3: of its optimizer states (4 less where the fp32 master
                          is the shard itself: StFramework.fp32_shards) */
  int shard_grad;      /* ZeRO 2-3: of a rank's gradient shard between its reduction and
                          the step: `grad`, or the weights' 16 bits where the framework
                          keeps no fp32 master (FSDP2 casts the reduced shard back to
                          the parameters' dtype; StFramework.states_16bit) */
  StDtype activation;  /* dtype of activations */
} StStateBytes;

void st_state_bytes(const StOptions *options, StStateBytes *out);

/* StStrategy.estimate of dp and zero (dp_estimate.c): their model states'
 * lower bound of peak memory. */
gboolean st_dp_estimate(const StStrategyInput *input, StEstimate *estimate, GError **error);
gboolean st_zero_estimate(const StStrategyInput *input, StEstimate *estimate, GError **error);
/* The saved blocks of one micro-batch's forward over every layer of `m`
 * (dp_estimate.c): each layer's saved block, less what selective
 * recomputation drops, a checkpointed layer's input instead (recompute.h,
 * the modes st_recompute_layers gives the whole model), none of a layer
 * --offload-activations copies to the host; what tensors.h keeps of them
 * at once at the end of a forward over them all, at `dtype`. */
int64_t st_estimate_saved(const StModel *m, const StOptions *options, StDtype dtype);
/* The same, layer by layer, into `saved` [m->n_layers]. */
void st_estimate_saved_layers(const StModel *m, const StOptions *options, StDtype dtype,
                              int64_t *saved);
/* StStrategy.estimate of pipeline (pipeline_estimate.c): its GPUs' share of
 * the model states, and the busiest stage's states with the saved blocks
 * of the micro-batches its order surely holds at once. */
gboolean st_pipeline_estimate(const StStrategyInput *input, StEstimate *estimate,
                              GError **error);

/* The FLOP/s no compute op of a GPU of `cluster` exceeds under `options`'
 * precision (bf16, else fp16, under mixed precision; fp32 otherwise; the FP8
 * peak under fp8, where the linears' GEMMs run): what
 * lower bounds of compute time divide by. 0 when unknown. */
double st_compute_peak(const StCluster *cluster, const StOptions *options);

typedef struct {
  int first;      /* highest layer index: its backward runs first */
  int last;       /* lowest layer index: when its backward ends the bucket is full */
  int64_t params; /* parameters in the bucket */
} StBucket;

/* Buckets in backward order, covering every layer with parameters. */
GArray *st_grad_buckets(const StModel *model, int64_t bucket_bytes, int grad_bytes);
/* The same over layers [begin, end) with elems[i] gradient elements for
 * layer i (indexed by layer; a pipeline stage's layers, or the non-zeros of
 * a sparse model); StBucket.params then counts those elements. */
GArray *st_grad_buckets_of(const int64_t *elems, int begin, int end, int64_t bucket_bytes,
                           int grad_bytes);

/* Extra dependencies and frees for one pass, supplied by a hook. */
#define ST_PASS_EXTRA_MAX 4
typedef struct {
  uint32_t after[ST_PASS_EXTRA_MAX];
  int n_after;
  uint32_t after_prev_step[ST_PASS_EXTRA_MAX];
  int n_after_prev_step;
  uint32_t alloc[ST_PASS_EXTRA_MAX];
  int n_alloc;
  uint32_t free[ST_PASS_EXTRA_MAX];
  int n_free;
} StPassExtra;

typedef struct {
  gpointer data;
  /* Before a pass op is built: may emit ops (a parameter gather) and ask the
   * pass to wait for them or free buffers when it ends. May be NULL. */
  void (*before)(gpointer data, StPass pass, int layer, int micro, StPassExtra *extra);
  /* After a pass op is built. May be NULL. */
  void (*after)(gpointer data, StPass pass, int layer, int micro, uint32_t op);
} StPassHooks;

typedef struct {
  StSchedule *schedule;     /* owned until st_dp_frame_finish */
  StProgram *program;       /* owned until st_dp_frame_finish */
  const StModel *model;     /* the schedule's copy */
  const StOptions *options; /* borrowed */
  StStateBytes bytes;
  int compute;              /* stream */
  int world;                /* communicator of all ranks */
  int act_offload;          /* stream of --offload-activations' copies (offload.h), 0: none
                               (stream 0 is compute; a frame built by hand offloads nothing) */
} StDpFrame;

/* A schedule of options->ranks ranks, round-robin on the cluster's GPUs, that
 * will all run one program named `name` with a "compute" stream; settings
 * filled. */
void st_dp_frame_init(StDpFrame *frame, const StStrategyInput *input, const char *name);

/* Adds the program to the schedule for every rank; returns the schedule
 * (transfer full). */
StSchedule *st_dp_frame_finish(StDpFrame *frame);

/* Forward then backward of micro-batch `micro` on the compute stream; with
 * act_offload, each offloaded layer's saved block copied to the host after
 * its forward and back when the backward of the layer above it starts. */
void st_dp_emit_micro_batch(StDpFrame *frame, int micro, const StPassHooks *hooks);

/* ceil(n / parts). */
int64_t st_shard(int64_t n, int parts);

/* Sets `error` to ST_STRATEGY_ERROR / ST_ERROR_INVALID with the formatted
 * message and returns FALSE: a strategy's refusal in one line. */
gboolean st_strategy_refuse(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);
