/* strategy_pipeline_stage.h: one stage's program as it is built, shared by
 * strategy_pipeline_stage.c (passes, p2p, reductions, the update) and
 * strategy_pipeline_moe.c (MoE layers as expert-parallel segments).
 * Private to the pipeline's files. */
#pragma once

#include "strategy/strategy_pipeline.h"
#include "strategy/offload.h"
#include "strategy/zero.h"

#define NONE UINT32_MAX

#define CHUNKS_MAX 64

/* One of the stage's model chunks (one without interleaving): model chunk
 * k = c S + s, layers [lo, hi), and its p2p streams (-1 where its chunk has
 * no neighbour on that side). */
typedef struct {
  int k, lo, hi;
  int recv_act, send_act, recv_grad, send_grad;
} Chunk;

typedef struct {
  const StPipe *pp;
  const StPipeComms *comms;
  StProgram *p;
  int s, lo, hi;  /* stage; the lowest and past the highest of its layers */
  Chunk chunks[CHUNKS_MAX];
  int n_chunks;
  int compute, comm;
  int tp_overlap;       /* the stream of --tp-comm-overlap's chunks, or -1 */
  int cp_stream;        /* the stream of ring attention's exchanges (context_parallel.h), or -1 */
  const StBucket *buckets;
  int n_buckets;
  int *bucket_of_last;  /* [n_layers]: the bucket whose lowest layer it is, or -1 */
  int *moe_router_of;   /* [n_layers]: for a segment's last expert its router, else -1 */
  uint32_t last_reduce;
  StZero *zero;        /* ZeRO over the data-parallel group (megatron), or NULL */
  StPassHooks hooks;   /* its */
  StTensors **tensors; /* [n_micro]: each micro-batch's (tensors.h) */
  int ep_index;        /* its index in the expert-parallel group (0 without) */
  const int64_t *elems; /* [n_layers]: gradient elements of the layers whose states it keeps
                           (a tied head's copy included; experts of other EP ranks 0) */
  /* MoE segments (StPipe.moe_segments): what lives from a segment's
   * forward to its backward, [n_micro][n_layers]: an owned expert's saved
   * block; at a router's index, its segment's combined rows (moe_saved)
   * and its slots' tokens and gates (moe_slots). NONE: none. */
  uint32_t **moe_saved, **moe_slots;
  /* Zero-bubble orders (st_pipe_order_splits): per layer, the last op of
   * its backward's B slot for the micro-batch being emitted (a whole
   * backward for a layer that does not split, NONE when none ran there). */
  uint32_t *b_op;
  /* --offload-activations (offload.h): the copies' stream, or -1; and the
   * last pass emitted on the compute stream, which a block's copy back
   * follows. */
  int act_offload;
  uint32_t last_pass;
  StOffloadGate offload_gate; /* what the next forward waits for (offload.h) */
} Stage;



/* A layer pass with `pm`'s effects (tensors.h's, or a segment's own) over
 * `batch` samples after `after` (NONE: only its stream), through `tp`
 * (the stage's tensor parallelism, or a spec of t = 1: none) and ZeRO's
 * hooks. Returns its last op. */
uint32_t st_pipe_stage_pass(Stage *st, StPass pass, int layer, int micro, int batch,
                            StPassMem *pm, uint32_t after, const StTpSpec *tp);

/* The all-reduce of the bucket that layer i's backward (its last op
 * `ready`) completes, after the step's last micro-batch (without ZeRO). */
void st_pipe_maybe_reduce(Stage *st, int i, int m, uint32_t ready);

/* Whether layer i is an expert spread over an expert-parallel group. */
gboolean st_pipe_is_expert(const StPipe *pp, int i);

/* Experts after `layer` when it opens an MoE chain the stage runs as a
 * segment (StPipe.moe_segments), else 0. */
int st_pipe_moe_experts(const StPipe *pp, int layer);
/* The experts of router `router` this stage's EP rank keeps: [*first, *first + *n). */
void st_pipe_moe_owned(const Stage *st, int router, int *first, int *n);
/* The segment of router `router` for micro-batch m: forward, after the
 * router's pass `after` (dispatch, the owned experts, combine); backward,
 * before the router's pass (the output's gradient to the experts, their
 * backwards, the rows' gradient back). */
void st_pipe_moe_forward(Stage *st, int router, int m, uint32_t after);
void st_pipe_moe_backward(Stage *st, int router, int m);
