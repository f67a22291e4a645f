/* tensors.h: a rank's tensors of one micro-batch, as the executor makes
 * them (exec/acts.c, exec/op_compute.c, exec/op_move.c), for every
 * strategy's pass emission: which op allocates each and which op frees it.
 *
 * Boundary k is the tensor x[k] between layers k-1 and k (x[0] the
 * samples) and, going back, its gradient g[k]. A rank runs some layers
 * (StTensorsSpec.batch > 0: a data-parallel replica all, a pipeline or
 * cyclic-DP stage a range, a burst rank those of its GPU sets). A boundary
 * is `moved` when its tensor crosses between ranks there: then the rank
 * holds up to two tensors of it, the one its layer k-1 made (sent away by
 * the strategy's transfers, or copied) and the one its layer k reads (made
 * by the first transfer or copy that brings it in); otherwise one.
 *
 * Who allocates (memory category):
 * - forward of k: x[k+1] (activations), what the layer saves for its
 *   backward (activations), a loss its targets (workspace), layer 0 the
 *   samples (activations); a checkpointed layer (full recomputation, of
 *   every layer or, with --recompute-every, of some: recompute.h) has its
 *   saved block allocated and freed by the forward and allocated again
 *   by the recompute, which also makes a fresh output (activations) that
 *   lives until the backward when the layer keeps it, else until the
 *   recompute's end; with selective recomputation a layer that has
 *   something of the chosen ops to drop (st_layer_memory_again) keeps the
 *   rest of its saved block, its forward takes the dropped part as
 *   scratch, and the recompute allocates it again (activations) for the
 *   backward;
 * - an offloaded layer (--offload-activations, offload.h): its D2H copy
 *   frees the saved block the forward allocated, and its H2D copy allocates
 *   it again (activations) for the recompute and backward, which wait for
 *   it;
 * - a backward split in two (zero-bubble pipelines): B (ST_PASS_BWD_INPUT)
 *   allocates g[k] and frees nothing the layer read; W (ST_PASS_BWD_WEIGHT)
 *   frees what the whole backward frees (below), and reads them last;
 * - backward of k > 0: g[k] (workspace); a tied head's backward, when this
 *   rank runs the backward of the layer it is tied to, that layer's weight
 *   gradient (grads), freed by that backward, which adds it in;
 * - every pass: its scratch (workspace, st_pass_scratch), allocated and
 *   freed by the pass itself;
 * - the first transfer or copy into a moved boundary: the tensor there (the
 *   category the strategy says: the executor's assembled tensors are comm,
 *   a received layer input activations, a received gradient workspace).
 * Who frees: the last reader, as autograd frees what nothing holds. Readers
 * of x[k] in time order: the transfers out, forward k, its recompute, the
 * backward of k when the layer keeps its input, the backward of k-1 when it
 * keeps its output (not under checkpointing: it reads the recomputed one);
 * of g[k]: the transfers out, the backward of k-1. A tensor nothing reads
 * (a loss's output) goes with the pass that made it.
 *
 * Layers of one rank: its passes may interleave with other micro-batches'
 * (1F1B) and with transfers; each micro-batch has its own StTensors. The
 * buffers are created in the rank's program as the calls need them: the
 * boundaries' before the passes that read them.
 */
#pragma once

#include "sched/sched.h"
#include "strategy/recompute.h"

#define ST_PASS_MEM_MAX 12

/* What one op allocates when it starts and frees when it ends, and the ops
 * it waits for so that it frees last what they read too. */
typedef struct {
  uint32_t alloc[ST_PASS_MEM_MAX], free[ST_PASS_MEM_MAX];
  int n_alloc, n_free;
  uint32_t after[3];
  int n_after;
} StPassMem;

/* Both ignore UINT32_MAX (no buffer). */
void st_pass_mem_alloc(StPassMem *pm, uint32_t buffer);
void st_pass_mem_free(StPassMem *pm, uint32_t buffer);
/* Adds the effects to the op being built (st_program_begin .. commit):
 * dependencies, allocations, then frees. */
void st_pass_mem_apply(StProgram *program, const StPassMem *pm);

typedef struct {
  const StModel *model;     /* borrowed */
  int micro;
  StDtype dtype;            /* of activations */
  int grad_bytes;           /* per parameter, of a tied head's parked gradient */
  const int *batch;         /* [n_layers], borrowed: samples of each layer's passes on
                               this rank, 0 where it runs none */
  const gboolean *moved;    /* [n_layers + 1], borrowed, or NULL (none): boundaries whose
                               tensors cross between ranks; [0] and [n_layers] FALSE */
  StRecomputePlan recompute; /* which layers are recomputed before their backward, and how
                                (recompute.h): checkpointed (full), or dropping the chosen
                                ops' part of their saved block (selective) */
  gboolean loss_in_place;   /* the loss keeps one fp32 statistic per row, not the
                               probabilities (StFramework.loss_in_place) */
  gboolean loss_16bit;      /* the loss keeps its log-probabilities in the 16-bit dtype, not
                               fp32 (StFramework.loss_16bit) */
  gboolean loss_autograd;   /* the loss's autograd buffers beside its own (StFramework.
                               loss_autograd) */
  int offload;              /* the first N transformer layers copy their saved blocks to
                               the host and back (offload.h); 0 = none */
} StTensorsSpec;

typedef struct StTensors StTensors;

/* Transfer full; the spec's arrays must outlive it. */
StTensors *st_tensors_new(StProgram *program, const StTensorsSpec *spec);
void st_tensors_free(StTensors *tensors);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StTensors, st_tensors_free)

/* Whether layer `layer` has a recompute pass before its backward. */
gboolean st_tensors_recomputes(const StTensors *tensors, int layer);

/* Whether `layer`, whose forward has been added, has a saved block to copy
 * to the host (offload.h). */
gboolean st_tensors_offloads(const StTensors *tensors, int layer);

/* The bytes of that block. */
int64_t st_tensors_offload_bytes(const StTensors *tensors, int layer);

/* Adds to `pm` what the copy of `layer`'s saved block to the host frees
 * (the device block, when the copy ends). Only for a layer that offloads. */
void st_tensors_offload_down(StTensors *tensors, int layer, StPassMem *pm);

/* Whether the copy of `layer`'s block to the host was added
 * (st_tensors_offload_down), and whether the copy back was
 * (st_tensors_offload_up). */
gboolean st_tensors_offloaded(const StTensors *tensors, int layer);
gboolean st_tensors_offload_fetched(const StTensors *tensors, int layer);

/* Adds to `pm` what the copy back allocates (the block again, freed by the
 * backward), and records `op`, the copy, for the layer's recompute and
 * backward to wait for. Once per layer that offloads, after its
 * st_tensors_offload_down and before its recompute and backward. */
void st_tensors_offload_up(StTensors *tensors, int layer, StPassMem *pm);
void st_tensors_offload_fetch_op(StTensors *tensors, int layer, uint32_t op);

/* Adds to `pm` what a pass (forward, recompute or backward) of `layer`
 * allocates and frees. */
void st_tensors_pass(StTensors *tensors, StPass pass, int layer, StPassMem *pm);

/* The buffer the first transfer or copy bringing boundary k in allocates
 * (forward: x[k], read by this rank's layer k; backward: g[k], read by its
 * layer k-1), of `category`; UINT32_MAX for later ones. */
uint32_t st_tensors_move_in(StTensors *tensors, int k, gboolean backward,
                            StMemCategory category);

/* The buffer the last transfer or copy taking boundary k out frees (what
 * this rank's layer k-1 made going forward, its layer k's input gradient
 * going back); UINT32_MAX when a later pass of this rank reads it (a layer
 * that keeps its output) and frees it then. */
uint32_t st_tensors_move_out(StTensors *tensors, int k, gboolean backward);

/* Says which op was the last to take x[k] out (forward). When layer k-1's
 * backward reads it too, that backward waits for this op, as a framework
 * waits for a send before it lets its buffer go: then the backward frees
 * it, whatever the timing (the simulator has the backward after it anyway:
 * its gradient comes back only once the samples have arrived). */
void st_tensors_sent(StTensors *tensors, int k, uint32_t op);

/* What one micro-batch's tensors cost a rank that runs its passes (and
 * moves) one after another, forwards then backwards, in bytes: `held`, what
 * stays allocated between the last forward and the first backward (a
 * micro-batch in flight), and `peak`, the most allocated at any point, pass
 * scratch included. Estimates (a pipeline stage's memory) build on these. */
void st_tensors_footprint(const StTensorsSpec *spec, int64_t *held, int64_t *peak);

/* A workspace buffer for the scratch that a pass of `layer` over `batch`
 * samples with activations in `dtype` takes while it runs (st_layer_memory)
 * when the layer itself is recomputed as `mode` says (st_recompute_layer;
 * `ops` the selective set), named "scratch fwd|bwd LAYER mMICRO", for that
 * pass to allocate and free; UINT32_MAX when it takes none. A forward takes
 * fwd_scratch, and under selective recomputation also the part of its saved
 * block it drops (st_layer_memory_again); a backward bwd_scratch; a full
 * recompute the forward's, plus, for a loss, an aligned float for the loss
 * it computes again and nobody reads; a selective recompute the chosen
 * ops' again_scratch. Opaque (ST_DATA_NONE): the executor allocates it and
 * lends it to the layer as its scratch. */
uint32_t st_pass_scratch(StProgram *program, const StModel *model, int layer, int micro,
                         StPass pass, int batch, StDtype dtype, StRecompute mode,
                         unsigned ops);
