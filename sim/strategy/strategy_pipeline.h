/* strategy_pipeline.h: the parts of the `pipeline` strategy (AxoNN-style
 * inter-layer parallelism inside data-parallel groups), private to
 * strategy_pipeline*.c:
 *
 *   strategy_pipeline.c          ranks, communicators, the stage count (given
 *                                or fitted to memory), notes, the registry entry
 *   strategy_pipeline_balance.c  what a layer weighs (time, memory, params),
 *                                the split into stages, the memory estimate
 *   strategy_pipeline_order.c    GPipe, 1F1B and zero-bubble orders of passes
 *   strategy_pipeline_stage.c    one stage's program: passes, p2p, reductions
 *
 * Layout. R ranks = G_inter stages x G_data pipelines: rank r is stage
 * r % G_inter of pipeline r / G_inter, so a pipeline's stages sit on
 * consecutive GPUs (p2p on the fastest links) and each stage's data-parallel
 * group spans the pipelines. Communicators: "pipe" (one group per pipeline,
 * indexed by stage: p2p), "data" (one group per stage: gradient
 * all-reduce), and "tied" (the embedding and the tied LM head's stages of
 * each pipeline, when they differ: the head keeps a copy of the embedding's
 * weights and the two gradients are summed, as Megatron-LM does).
 *
 * A step runs M = global batch / (G_data x micro-batch) micro-batches
 * through each pipeline. Uniform stages of forward time f and backward b per
 * micro-batch, with free communication, finish the passes in
 *   T = (M + S - 1)(f + b)
 * under both orders; each GPU idles (S - 1)(f + b) of it, the bubble,
 * a fraction (S - 1) / (M + S - 1). GPipe holds M micro-batches of
 * activations on every stage; 1F1B holds min(S - s, M) on stage s.
 *
 * DualPipeV (DeepSeek-AI's DualPipe repository, dualpipe/dualpipev.py: the
 * "cut-in-half" V-shape of DualPipe, DeepSeek-V3 technical report, arXiv
 * 2412.19437, section 3.2.1): each of the S stages holds two model chunks
 * of the 2S, chunk 0 the s-th and chunk 1 the (2S - 1 - s)-th, so a
 * micro-batch goes down the stages and back up, the turn and the loss on
 * the same GPU as its neighbours (no p2p at the turn; the embedding and the
 * head on stage 0). Its order (st_pipe_order_dualpipev) runs forward and
 * backward chunks in pairs and splits some backwards into B and W, for a
 * bubble per GPU of (PP/2 - 1)(F&B + B - 3W) with PP = 2S chunks, F, B
 * (whole) and W a chunk's times and F&B a pair's, which runs here as F
 * then B on one stream: (S - 1)(f + 2b - w) with b the B half. It needs M
 * >= 2S micro-batches.
 *
 * Zero-bubble orders (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR
 * 2024) split each backward in B (the input's gradient, which the stage
 * before waits for) and W (the weights'), ST_PASS_BWD_INPUT and
 * ST_PASS_BWD_WEIGHT, and run W later, where the stage would idle. With
 * per-stage times f, b (B) and w (W) the bubble of each GPU is
 *   1F1B (S - 1)(f + b + w), ZB-H1 (S - 1)(f + b - w), ZB-H2 (S - 1)(f + b - 2w)
 * (at least 0), ZB-H1 at 1F1B's peak of activations (S micro-batches on the
 * first stage), ZB-H2 at 2S - 1 on every stage. ZB-H2's reaches 0 only in
 * the steady state, where each stage's next step starts as soon as its own
 * optimizer is done (the paper's parallelogram: this strategy's step has
 * no synchronisation across stages but the tied embedding's).
 */
#pragma once

#include "strategy/sparse.h"
#include "strategy/strategy_common.h"
#include "strategy/tensor_parallel.h"

typedef enum {
  ST_PIPE_1F1B = 0, /* PipeDream-Flush: warm-up forwards, then one forward one backward */
  ST_PIPE_GPIPE,    /* every forward, then every backward */
  ST_PIPE_ZB_H1,    /* zero bubble, 1F1B's memory: W deferred by the stage's index */
  ST_PIPE_ZB_H2,    /* zero bubble: 2S - 1 micro-batches in flight on every stage */
  ST_PIPE_DUALPIPE_V, /* DualPipeV: two chunks per stage in a V, some backwards split */
} StPipeOrder;

/* Whether the order splits backwards into B and W (all of them, or under
 * DualPipeV those its order marks). */
static inline gboolean
st_pipe_order_splits(StPipeOrder order)
{
  return order == ST_PIPE_ZB_H1 || order == ST_PIPE_ZB_H2 || order == ST_PIPE_DUALPIPE_V;
}

typedef enum {
  ST_PIPE_BALANCE_TIME = 0, /* forward + backward (+ recompute) time, from the cost models */
  ST_PIPE_BALANCE_MEMORY,   /* model states + activations in flight */
  ST_PIPE_BALANCE_PARAMS,   /* parameters */
} StPipeBalance;

/* One compute slot of a stage: a micro-batch's forward or backward over the
 * layers of one of the stage's model chunks (0 without interleaving). */
typedef struct {
  gboolean fwd;
  int micro;
  int chunk;
  StPass half; /* a backward of a zero-bubble order: ST_PASS_BWD_INPUT (B) or
                  ST_PASS_BWD_WEIGHT (W); ST_PASS_INVALID: the whole pass */
  gboolean pair; /* DualPipeV's F&B: this forward and the backward after it run as one
                    (both receives waited for first, both sends after both passes) */
} StPipeSlot;

/* The slots of stage `stage` of `n_stages` for `n_micro` micro-batches, in
 * order (GArray of StPipeSlot, transfer full). Backwards (B and W) run in
 * micro-batch order under every order. Zero-bubble orders: stage s runs
 * `warm` forwards, then, until the backwards are done, a B, the W's that
 * leave at most `lag` of them behind the B's, and a forward while any is
 * left; then the remaining W's. ZB-H1: warm = S - s, lag = s (the first
 * stage runs each W right after its B, so it holds 1F1B's S micro-batches;
 * stage s defers s W's). ZB-H2: warm = 2 (S - s) - 1, lag = 2 s, every
 * stage holding 2S - 1. */
GArray *st_pipe_order(StPipeOrder order, int stage, int n_stages, int n_micro);

/* DualPipeV's order on stage `stage` of `n_stages` (see the top): the eight
 * phases of dualpipev.py's step, each slot naming its chunk; a backward
 * split into B has its W later, first in first out. n_micro >= 2 n_stages. */
GArray *st_pipe_order_dualpipev(int stage, int n_stages, int n_micro);

/* Megatron-LM's interleaved 1F1B (Narayanan et al., SC 2021, section 2.2):
 * each stage holds `n_chunks` model chunks (chunk c of stage s is the
 * model's (c S + s)-th of S V); micro-batches go through the chunks in
 * groups of S: forward slot k runs chunk (k mod S V) / S on micro-batch
 * (k / S V) S + k mod S, backward slot k the same micro-batch on chunk
 * V - 1 - (k mod S V) / S. Stage s first runs min(2 (S - s - 1) + (V - 1) S,
 * M V) forwards (all of them when M = S), then one forward one backward,
 * then the remaining backwards. n_micro must be a multiple of n_stages. */
GArray *st_pipe_order_interleaved(int stage, int n_stages, int n_micro, int n_chunks);

/* Micro-batches whose activations stage `stage` holds at most at once
 * (from a forward to the end of its backward, or of its W). */
int st_pipe_in_flight(StPipeOrder order, int stage, int n_stages, int n_micro);

/* Everything the parts share about one pipeline layout. */
typedef struct {
  const StModel *model;     /* borrowed */
  const StCluster *cluster; /* borrowed */
  const StProfile *profile; /* borrowed, may be NULL */
  const StOptions *options; /* borrowed */
  StSparse sparse;          /* p = 0: dense */
  StStateBytes bytes;
  StPipeOrder order;
  int n_stages;             /* S = G_inter */
  int n_data;               /* G_data: pipelines */
  int n_micro;              /* M: micro-batches per pipeline per step */
  int n_chunks;             /* V: model chunks per stage (interleaved 1F1B, megatron); 1 in
                               the pipeline strategy */
  int32_t *first;           /* [n_stages n_chunks + 1]: model chunk k (on stage k mod S, its
                               chunk k / S there) is layers [first[k], first[k + 1]); with one
                               chunk, stage s is layers [first[s], first[s + 1]) */
  int32_t *stage_of;        /* [n_layers]: the stage holding each layer */
  int tied_head;            /* a tied LM head (computing with the embedding's weights), or -1 */
  int tied_embed;           /* that embedding, or -1 */
  int64_t tied_params;      /* the embedding's parameters */
  gboolean tied_copy;       /* set by the split: the two sit on different stages, so the
                               head's stage keeps a copy and their gradients are summed */
  /* Per layer, derived once (st_pipe_init): */
  int64_t *owned;           /* parameters whose states the layer's stage keeps (the tied
                               head counts its copy) */
  int64_t *owned_nnz;       /* their non-zeros (= owned when dense) */
  gboolean *keeps_output;   /* the layer saves its output for backward */
  StRecomputePlan recompute; /* --recompute and its refinements (recompute.h) */
  StRecompute *recomputes;  /* what each layer does under it (st_recompute_layer) */
  /* Megatron (strategy_megatron.c) sets these; the pipeline strategy leaves them 0. */
  const StTpSpec *tp;       /* tensor parallelism around every pass (tensor_parallel.h), or
                               NULL */
  int zero_stage;           /* 1-3: ZeRO over the data-parallel group (zero.h) in place of
                               the all-reduce per bucket; 0: none */
  gboolean offload;         /* with zero_stage 1-2: optimizer states and step on the CPU
                               (zero.h's ZeRO-Offload; Megatron-LM's --optimizer-cpu-offload) */
  int ep;                   /* expert parallelism: each MoE layer's experts spread over
                               groups of ep data-parallel ranks; 1: none */
  const int32_t *expert_owner; /* [n_layers], borrowed: the EP index keeping each expert
                               layer, -1 for every other layer; NULL: no segments */
  gboolean moe_segments;    /* MoE layers run as segments (strategy_pipeline_moe.c): their
                               experts on the EP rank owning them, tokens dispatched and
                               combined by all-to-all */
  int etp;                  /* the experts' tensor-parallel size k, dividing the tensor
                               group's t (0 or t: the tensor group; 1: none) */
  double moe_imbalance;     /* with segments and ep > 1: the busiest EP rank's routed tokens
                               over the mean (--moe-imbalance), >= 1; every rank is costed
                               as that rank: its all-to-alls, received rows and experts'
                               saved blocks F times the balanced ones (their passes' time
                               through StSettings.moe_imbalance); 0 or 1: balanced */
  gboolean dispatch_per_rank; /* the all-to-alls carry a token's row once per rank it
                               reaches (StFramework.dispatch_per_rank), not once per expert */
  int moe_routing;          /* StMoeRouting: which ranks a token reaches (moe_routing.h) */
} StPipe;

/* Whether layer i's backward runs as B and W under pipe's order: a
 * zero-bubble order, and the layer has weights of its own (a tied head's
 * backward stays whole: it adds into the embedding's gradient). */
gboolean st_pipe_splits(const StPipe *pipe, int i);

/* Where model chunk k of the S V sits. Interleaved (Megatron-LM): stage
 * k mod S, its chunk k / S there. DualPipeV's V: stage k, chunk 0, for
 * k < S; stage 2S - 1 - k, chunk 1, after. */
static inline gboolean
st_pipe_vshape(const StPipe *pp)
{
  return pp->order == ST_PIPE_DUALPIPE_V;
}

static inline int
st_pipe_chunk_stage(const StPipe *pp, int k)
{
  int S = pp->n_stages;
  return st_pipe_vshape(pp) ? (k < S ? k : 2 * S - 1 - k) : k % S;
}

static inline int
st_pipe_chunk_local(const StPipe *pp, int k)
{
  return k / pp->n_stages;
}

/* The model chunk that is chunk c of stage s. */
static inline int
st_pipe_chunk_at(const StPipe *pp, int s, int c)
{
  return st_pipe_vshape(pp) && c == 1 ? 2 * pp->n_stages - 1 - s : c * pp->n_stages + s;
}

/* Fills the per-layer facts for `n_stages` stages (no split yet: `first`
 * is NULL). Fails naming --sparsity when it is out of range. */
gboolean st_pipe_init(StPipe *pipe, const StModel *model, const StCluster *cluster,
                      const StProfile *profile, const StOptions *options, GError **error);
void st_pipe_clear(StPipe *pipe);

/* ---- balance (strategy_pipeline_balance.c) ------------------------------ */

/* Splits the layers into pipe->n_stages stages balancing `by`; sets first,
 * n_data, n_micro and the tied copy. n_stages must divide the ranks and be at
 * most the layer count. */
void st_pipe_split(StPipe *pipe, StPipeBalance by);

/* Takes `first` ([n_stages n_chunks + 1], transfer full) as the split and
 * derives from it which stage holds each layer, the tied copy and the
 * states each layer's stage keeps. */
void st_pipe_set_split(StPipe *pp, int32_t *first);

/* Bytes per micro-batch (activation dtype) of the tensor crossing into stage
 * s + 1: the output of stage s's last layer, or the gradient going back. */
int64_t st_pipe_boundary_bytes(const StPipe *pipe, int s);
/* Bytes of layer i's input per micro-batch (what checkpointing keeps, and
 * the gradient of the input). */
int64_t st_pipe_input_bytes(const StPipe *pipe, int layer);
/* The layer's own forward, backward and recompute time at one micro-batch
 * alone on its GPU (ns), from the cost models. */
double st_pipe_layer_time_ns(const StPipe *pipe, int layer, StPass pass);

/* Sets pp->n_stages (--pipeline-stages, or the fewest whose
 * st_pipe_stage_memory fits the GPU) and splits (strategy_pipeline.c);
 * `how` says how the count was chosen. What build() does, so that the
 * estimate (pipeline_estimate.c) sees the same stages. */
gboolean st_pipe_choose_stages(StPipe *pp, const char **how, GError **error);
/* An estimate (upper bound) of stage s's peak memory per rank, in bytes:
 * persistent states, the activations of the micro-batches in flight, and
 * the transient buffers of one backward or of the optimizer step. */
int64_t st_pipe_stage_memory(const StPipe *pipe, int s);

/* ---- programs (strategy_pipeline_stage.c) ------------------------------- */

typedef struct {
  int pipe;  /* communicator: p2p within a pipeline */
  int data;  /* communicator: gradient all-reduce across pipelines */
  int tied;  /* communicator: the tied embedding's two stages, or -1 */
  int data_gather; /* ZeRO-3's gathers: the data groups again, so that they never queue
                      behind a reduction (zero.h); -1 otherwise */
  int ep;          /* MoE segments: dispatch and combine (the EP group), or -1 */
  int expert_tp;   /* MoE segments under --expert-tensor-parallel k with 1 < k < t: the
                      experts' tensor group (k consecutive ranks), or -1 */
  int expert_data; /* experts' gradients: their data-parallel group, or -1 */
  int expert_data_gather; /* ZeRO-3's gathers of experts, or -1 */
} StPipeComms;

/* The program every rank of stage s with EP index `ep_index` (0 without
 * expert parallelism) runs (transfer full). */
StProgram *st_pipe_stage_program(const StPipe *pipe, int s, int ep_index,
                                 const StPipeComms *comms);
