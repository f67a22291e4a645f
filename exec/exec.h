/* exec.h: the executor. It runs a Schedule for real and returns the measured
 * Timeline, in the same format as the simulator's prediction.
 *
 * Every rank's program runs with CUDA semantics: one host thread per (rank,
 * stream) issues the stream's ops in order, each after its dependencies were
 * issued (on a GPU, the stream then waits for their completion events). COMP
 * ops run the layers' real forward and backward (exec/layers/) and the
 * optimizer on real weights; collectives and transfers move the real tensors
 * that the schedule says they move (StOp.data over a layer range) through
 * the comm backend; buffers are allocated from an instrumented per-rank pool
 * when their op starts and freed when it ends.
 *
 * Device backends: "host" (CPU threads and the reference kernels; for CI and
 * machines with no GPU) and "cuda" (streams with the schedule's priorities,
 * events, cuBLAS, kernels/cuda). Comm backends: "local" (ranks in this
 * process: copies and reduction kernels) and "nccl" (one process per GPU,
 * bootstrapped as torchrun or mpirun set the environment).
 */
#pragma once

#include <glib.h>

#include "output/timeline.h"
#include "sched/sched.h"

#define ST_EXEC_ERROR (st_exec_error_quark())
GQuark st_exec_error_quark(void);

typedef enum {
  ST_EXEC_ERROR_FAILED = 1,   /* a kernel, a copy, a collective failed */
  ST_EXEC_ERROR_UNSUPPORTED,  /* the schedule asks for what this executor cannot do */
  ST_EXEC_ERROR_NO_DEVICE,    /* the backend is not built in, or no device answers */
  ST_EXEC_ERROR_OOM,          /* out of device memory: the op and the buffer are named */
  ST_EXEC_ERROR_TIMEOUT,      /* a collective did not complete within --timeout */
  ST_EXEC_ERROR_INTERRUPTED,  /* stopped by SIGINT; what was measured is kept */
} StExecErrorCode;

typedef struct {
  const char *device;     /* "auto" (cuda when a device answers, else host), "host", "cuda" */
  const char *comm;       /* "auto" (local in one process, nccl under torchrun/mpirun), ... */
  uint64_t seed;          /* weights and synthetic data (or a data set's order) */
  const struct StDataset *data; /* a real data set to train on (exec/dataset.h; borrowed),
                                   or NULL: the synthetic task of exec/data.c */
  double lr;              /* learning rate (default 1e-3 for adam, 1e-2 for sgd) */
  double timeout_s;       /* a collective that does not complete in time fails the run */
  int64_t memory_limit;   /* bytes a rank may allocate (0: what the device has) */
  volatile int *stop;     /* set non-zero (from a SIGINT handler) to stop at the next op */
  gboolean keep_weights;  /* return the main job's final weights (tests, agreement checks) */
} StExecOptions;

void st_exec_options_init(StExecOptions *options);

/* What one rank of a background job did (multiplexing, exec/mux.c). */
typedef struct {
  int rank, job, device;
  int32_t iterations;     /* its iterations completed (beside a foreground: as many as it
                             began while the foreground ran) */
  GArray *loss;           /* double per iteration: the mean loss of its samples */
  GPtrArray *weights;     /* with keep_weights: per layer of its job's model, a GArray of
                             float, its weights after the last iteration */
} StExecBackground;

typedef struct {
  char *device;           /* what ran: "host", "cuda: NVIDIA H100 80GB HBM3, driver ..." */
  GArray *loss;           /* double per step: mean loss of the main job's global batch */
  int64_t device_peak_bytes;  /* device-level usage (cudaMemGetInfo / the pool's high water) */
  gboolean interrupted;   /* stopped early: the timeline holds the steps that completed */
  GPtrArray *weights;     /* with keep_weights: per layer of the main job's model, a GArray
                             of float (its params, whole; empty when it has none), put
                             together from the ranks' whole weights or slices */
  /* Multiplexed schedules (background streams), else NULL: */
  GPtrArray *background;  /* StExecBackground *, one per background rank */
  GArray *admissions;     /* StAdmitRecord (exec/admit.h): every admission decision */
  const char *priorities; /* what the device did with stream priorities (static text) */
} StExecResult;

void st_exec_result_clear(StExecResult *result);

/* FALSE (ST_EXEC_ERROR_UNSUPPORTED) when the schedule asks for something the
 * executor cannot run, listing every missing piece (layer types without a
 * real implementation, ops of unknown data, a rank computing a layer whose
 * weights neither it nor its device holds). */
gboolean st_exec_check(const StSchedule *schedule, GError **error);

/* The fixed pruning mask of `layer` at sparsity p (SAMO, StSettings.sparsity):
 * the indices of the nnz = P - floor(p P) entries kept of its P parameters,
 * ascending, drawn by a generator seeded with `seed` and the layer index, so
 * every rank, replica and run with that seed prunes the same weights. The
 * executor initializes the dense weights with the pruned entries zero.
 * Transfer full (g_free); NULL when the layer has no parameters. */
int32_t *st_exec_sparse_mask(const StModel *model, int layer, double p, uint64_t seed,
                             size_t *nnz);

/* Sample g of the synthetic data every run uses (exec/data.c): its input
 * (`x`, the model's input elements, for models that read activations; `ids`,
 * token ids, for models whose first layer is an embedding; the other may be
 * NULL) and its targets (`targets`, one per position the loss averages
 * over). Sample g of step t, replica d, micro-batch m, position j in it is
 * g = t * global_batch + (d * accumulation + m) * micro_batch + j. */
void st_exec_sample(const StModel *model, uint64_t seed, uint64_t g, float *x, int32_t *ids,
                    int32_t *targets);

/* The admission decisions of a run (StExecResult.admissions) as CSV, one
 * row each: time_us, device, rank, op, iteration, decision (admit.h's
 * names), and the state it was taken on. Transfer full. */
char *st_exec_admissions_csv(const GArray *admissions);

/* Runs `schedule` (borrowed; it must outlive the timeline). On an error after
 * some steps completed (SIGINT), the timeline of those steps is returned and
 * `result->interrupted` set; on failure `result` holds nothing. Transfer full. */
StTimeline *st_execute(const StSchedule *schedule, const StExecOptions *options,
                       StExecResult *result, GError **error);
