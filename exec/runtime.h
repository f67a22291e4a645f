/* runtime.h: the executor's private structures, shared by its files:
 * exec.c (setup, the run, the measured timeline), walker.c (threads and
 * dependencies), state.c (what the schedule's buffers hold: weights,
 * gradients, optimizer states), acts.c (activations and their lifetimes),
 * op_compute.c (layer passes and the optimizer), op_comm.c (collectives and
 * transfers), data.c (synthetic samples).
 *
 * Threads: one per (rank, stream). A rank's shared state (buffers, layer
 * pointers, activations, its pool) changes under the rank's lock; the
 * tensors themselves are read and written outside it, ordered by the
 * schedule's dependencies as on a GPU.
 */
#pragma once

#include <glib.h>

#include "exec/comm.h"
#include "exec/device.h"
#include "exec/exec.h"
#include "exec/layer_impl.h"
#include "exec/pool.h"

typedef struct Exec Exec;

/* One layer's model state on a rank, from the buffers alive now. */
typedef struct {
  void *params;      /* whole weights (dt), or NULL */
  void *grads;       /* whole gradients (dt), or NULL */
  void *params_part; /* this rank's slice of the weights (dt), or NULL */
  void *grads_part;  /* this rank's slice of the gradients (dt), or NULL */
  float *optim;      /* optimizer states of the whole layer or of the slice (fp32):
                        [master if mixed][m][v] (adam) or [master if mixed][momentum] (sgd) */
  gboolean optim_part; /* the states are of the slice */
  int parts;         /* slices of the layer when sharded */
  int slice;         /* this rank's slice, known once a collective placed it */
} LayerState;

/* A tensor of activations the executor made: a layer's output (or input
 * data), or the gradient of a layer's input, for one micro-batch. Freed when
 * its last user op ends. */
typedef struct {
  void *ptr;
  int users;         /* ops still to read it this step */
} Act;

typedef struct {
  int32_t step;
  int64_t start_ns, end_ns;
} OpTime;

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
  void **buffers;          /* [n_buffers]: device memory of live schedule buffers */
  LayerState *layers;      /* [n_layers] */
  int n_micro;             /* micro-batch indices in the program */
  Act *outputs;            /* [n_micro * (n_layers + 1)]: index 0 the input data, i + 1 layer i */
  Act *input_grads;        /* [n_micro * n_layers] */
  void **saved;            /* [n_micro * n_layers] */
  int32_t **targets;       /* [n_micro]: device int32 targets while the loss needs them */
  int32_t *done;           /* [n_ops]: instances issued */
  void **events;           /* [steps * n_ops * 2]: start and end of each instance */
  float *loss;             /* device fp32 [steps]: summed loss of its micro-batches */
  void **tied_grads;       /* [n_micro]: a tied head's weight gradient waiting for the
                              backward of the layer it is tied to (whose gradient buffer
                              may not exist yet), or NULL */
  int *act_users;          /* [n_micro * (n_layers + 1) + n_micro * n_layers]: users per step */
} Rank;

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
};

/* exec.c */
void exec_fail(Exec *x, GError *error); /* takes ownership; keeps the first */
static inline gboolean
exec_failed(Exec *x)
{
  return g_atomic_int_get(&x->failed) != 0;
}

/* state.c: schedule buffers and what they hold. */
gboolean state_alloc_buffer(Rank *r, uint32_t buffer, int32_t step, uint32_t op, void *stream,
                            GError **error);
void state_free_buffer(Rank *r, uint32_t buffer, int32_t step, uint32_t op, void *last_use);
gboolean state_init_weights(Rank *r, GError **error);
size_t state_optim_floats(const Rank *r, size_t n); /* floats of states for n parameters */
/* Where op `o` finds `data` (weights or gradients, whole or sliced) of
 * `layer`: in a buffer of its own alloc or free list first (the gather made
 * for it, the bucket it reduces), else where the layer's state points. A
 * prefetched gather for a later pass, or the next micro-batch's bucket, may
 * already be bound to the layer while this op still needs its own. */
void *state_data_of(Rank *r, uint32_t o, StData data, int layer);

/* acts.c: activations. */
void acts_count_users(Rank *r);
Act *acts_output(Rank *r, int micro, int layer); /* layer -1: the input data */
Act *acts_input_grad(Rank *r, int micro, int layer);
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

/* op_compute.c, op_comm.c: what an op does. `step` is 0-based. */
gboolean op_compute(Rank *r, uint32_t op, int32_t step, void *stream, GError **error);
gboolean op_comm(Rank *r, uint32_t op, int32_t step, void *stream, GError **error);

/* walker.c */
/* Runs every stream of every rank here to the end; FALSE when the run
 * failed (x->error says why). */
gboolean walker_run(Exec *x);
