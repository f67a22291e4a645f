/* kinds.h: the small vocabularies that the schedule, the cost models, the
 * profiles and the timelines all speak. Each enum has a name table (the
 * spelling used in JSON, CSV and tables) and a strict parser. Zero is never a
 * valid kind, so a zeroed struct is recognisably invalid.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "base/error.h"

/* Element types of tensors. */
typedef enum {
  ST_DTYPE_FP32 = 0,
  ST_DTYPE_FP16,
  ST_DTYPE_BF16,
  ST_DTYPE_N,
} StDtype;

/* Op kinds, named as in MLCommons Chakra execution traces. */
typedef enum {
  ST_OP_INVALID = 0,
  ST_OP_COMP,      /* compute: a layer pass, the loss, an optimizer step, ... (StPass) */
  ST_OP_COMM_COLL, /* collective over a rank group (StCollKind) */
  ST_OP_COMM_SEND, /* point-to-point send to one peer */
  ST_OP_COMM_RECV, /* point-to-point receive from one peer */
  ST_OP_COPY,      /* memory copy (StCopyKind) */
  ST_OP_N,
} StOpKind;

/* What a COMP op computes. */
typedef enum {
  ST_PASS_INVALID = 0,
  ST_PASS_FWD,       /* layer forward */
  ST_PASS_BWD,       /* layer backward (input and weight gradients) */
  ST_PASS_FWDBWD,    /* both, as one measured number (profiles only, e.g. DeepPool's) */
  ST_PASS_OPTIM,     /* optimizer step over `elems` parameters */
  ST_PASS_COMPRESS,  /* gather non-zeros of a dense tensor (sparse modifier) */
  ST_PASS_EXPAND,    /* scatter non-zeros back into a dense tensor */
  ST_PASS_RECOMPUTE, /* forward recomputed for activation checkpointing */
  /* A backward split in two (zero-bubble pipelines, Qi et al., ICLR 2024):
   * B, the gradient of the layer's input, which the stage before waits
   * for, and W, the gradient of its weights, which nothing downstream
   * waits for and a schedule may run later. B + W is the layer's BWD. */
  ST_PASS_BWD_INPUT,  /* B: the input's gradient (keeps what W reads) */
  ST_PASS_BWD_WEIGHT, /* W: the weights' gradient (frees what the backward read) */
  ST_PASS_N,
} StPass;

/* A backward pass, whole or either half of a split one. */
static inline gboolean
st_pass_is_backward(StPass p)
{
  return p == ST_PASS_BWD || p == ST_PASS_BWD_INPUT || p == ST_PASS_BWD_WEIGHT;
}

/* Collective operations. `bytes` of a collective is always the full buffer
 * (nccl-tests' "size"): all-gather's output, reduce-scatter's input,
 * all-to-all's input (every member sends bytes / n to each member, itself
 * included, and receives as much: MoE expert parallelism's dispatch and
 * combine). */
typedef enum {
  ST_COLL_INVALID = 0,
  ST_COLL_ALL_REDUCE,
  ST_COLL_REDUCE_SCATTER,
  ST_COLL_ALL_GATHER,
  ST_COLL_BROADCAST,
  ST_COLL_REDUCE,
  ST_COLL_ALL_TO_ALL,
  /* Every member sends `bytes` to the next member of its group (by index,
   * the last to the first) and receives as much from the one before: one
   * step of a ring, as ring attention's batched isend / irecv of a
   * key/value chunk (Transformer Engine's p2p context parallelism). */
  ST_COLL_RING_SHIFT,
  ST_COLL_N,
} StCollKind;

typedef enum {
  ST_COPY_INVALID = 0,
  ST_COPY_D2D,
  ST_COPY_H2D,
  ST_COPY_D2H,
  ST_COPY_N,
} StCopyKind;

/* Memory categories of buffers: every byte of a timeline is one of these. */
typedef enum {
  ST_MEM_PARAMS = 0,
  ST_MEM_GRADS,
  ST_MEM_OPTIMIZER,
  ST_MEM_ACTIVATIONS,
  ST_MEM_COMM,
  ST_MEM_WORKSPACE,
  ST_MEM_N,
} StMemCategory;

/* Where an op's duration came from. Every op of a timeline carries one. */
typedef enum {
  ST_SRC_NONE = 0,
  ST_SRC_PROFILED,     /* a profile entry at exactly this size */
  ST_SRC_INTERPOLATED, /* between (or beyond) profiled sizes, or split from a fwd+bwd entry */
  ST_SRC_ROOFLINE,     /* estimated from the GPU's peak FLOP/s and memory bandwidth */
  ST_SRC_ALPHA_BETA,   /* estimated from the link model: latency + bytes / bandwidth */
  ST_SRC_LINK_PROFILE, /* a measured collective, at this or an interpolated size */
  ST_SRC_MEASURED,     /* measured by the executor on a real run */
  ST_SRC_ESTIMATE,     /* estimated at the efficiency published measurements show (no profile) */
  ST_SRC_N,
} StCostSource;

/* Link classes of a cluster, plus LOCAL: ranks on one device exchanging
 * through its memory. */
typedef enum {
  ST_LINK_INTRA_NODE = 0,
  ST_LINK_INTER_NODE,
  ST_LINK_PCIE,
  ST_LINK_LOCAL,
  ST_LINK_N,
} StLinkClass;

/* What data a buffer holds, or a communication op moves, over a range of
 * layers: what the executor needs to run a schedule's math. The simulator
 * only moves bytes and ignores it. */
typedef enum {
  ST_DATA_NONE = 0,     /* opaque: allocated and freed, never read */
  ST_DATA_PARAMS,       /* weights of the layers, whole */
  ST_DATA_PARAMS_SHARD, /* this rank's slices of the weights */
  ST_DATA_GRADS,        /* weight gradients, whole (p2p: a partial sum, see GRADS_TOTAL) */
  ST_DATA_GRADS_SHARD,  /* this rank's slices of the gradients */
  ST_DATA_OPTIM,        /* optimizer states (and fp32 master weights), whole */
  ST_DATA_OPTIM_SHARD,  /* this rank's slices of them */
  ST_DATA_ACTS,         /* what a layer keeps from forward for backward */
  ST_DATA_OUTPUT,       /* a layer's output (the next layer's input) */
  ST_DATA_INPUT_GRAD,   /* the gradient of a layer's input */
  /* The reduced gradients passed on after a chain (cyclic DP): a receive
   * OVERWRITES the receiver's gradients with them, a send keeps its own.
   * (A point-to-point ST_DATA_GRADS is a partial sum along the chain: its
   * receive adds to the receiver's gradients, its send hands the sender's
   * over, which are zero after it.) */
  ST_DATA_GRADS_TOTAL,
  /* Sparse model states (SAMO): per layer, the nnz = P - floor(p P) kept
   * entries of its P parameters (p: StSettings.sparsity), in the order of
   * one int32 index list per layer. */
  ST_DATA_INDEX,               /* the index lists (int32, nnz per layer) */
  ST_DATA_PARAMS_PACKED,       /* compressed weights (the compute dtype), whole */
  ST_DATA_PARAMS_PACKED_SHARD, /* this rank's slices of them */
  ST_DATA_GRADS_PACKED,        /* compressed gradients (the compute dtype), whole */
  ST_DATA_GRADS_PACKED_SHARD,  /* this rank's slices of them */
  ST_DATA_GRADS_PACKED_FP32,   /* their fp32 copy for the optimizer (mixed precision),
                                  of what the optimizer states cover */
  ST_DATA_OPTIM_PACKED,        /* fp32 master weights and optimizer states of the
                                  non-zeros: [master][m][v] or [master][momentum] */
  ST_DATA_OPTIM_PACKED_SHARD,  /* this rank's slices of them */
  /* Tensor parallelism (Megatron-LM, docs/LLM.md): a collective over the
   * tensor-parallel group around a pass of layer `layer` (its part
   * StOp.part when it runs in parts), micro-batch `micro`: */
  ST_DATA_TP_INPUT,       /* the pass's input: each rank's s/t token rows all-gathered
                             (sequence parallelism; again in backward, for the weight
                             gradient) */
  ST_DATA_TP_OUTPUT,      /* the forward's output, partial sums: all-reduced, or
                             reduce-scattered to each rank's s/t rows (sequence
                             parallelism); a split loss's per-token statistics */
  ST_DATA_TP_OUTPUT_GRAD, /* the gradient of the output, each rank's rows all-gathered
                             (sequence parallelism) */
  ST_DATA_TP_INPUT_GRAD,  /* the gradient of the input, partial sums: all-reduced, or
                             reduce-scattered (sequence parallelism) */
  ST_DATA_TP_GRADS,       /* of layers [layer, layer_last]: the gradients of the parameters
                             every tensor-parallel rank holds whole but computes partial sums
                             of (st_layer_tp_partial_params), all-reduced once per step */
  /* Expert parallelism: an all-to-all over the expert-parallel group around
   * the experts [layer, layer_last] of one MoE layer, micro-batch `micro`: */
  ST_DATA_EP_DISPATCH,      /* forward: each expert's rows (up to its capacity) of every
                               rank's tokens, to the rank keeping the expert */
  ST_DATA_EP_COMBINE,       /* forward: the experts' outputs back to their tokens' ranks */
  ST_DATA_EP_COMBINE_GRAD,  /* backward: the gradient of those outputs, to the experts */
  ST_DATA_EP_DISPATCH_GRAD, /* backward: the gradient of the dispatched rows, back */
  /* The t - 1 chunks of a tensor-parallel all-gather or reduce-scatter that
   * run beside their GEMMs (--tp-comm-overlap, tensor_parallel.h): traffic
   * the simulator times, which the executor cannot run. */
  ST_DATA_TP_OVERLAP,
  /* Context parallelism (docs/LLM.md) around the attention of layer
   * `layer`, micro-batch `micro`: a ring step's key/value chunk (backward:
   * with its gradient), or the all-to-all of Q, K, V and of the output:
   * traffic the simulator times, which the executor cannot run. */
  ST_DATA_CP,
  ST_DATA_N,
} StData;

typedef enum {
  ST_OPTIMIZER_SGD = 0, /* with momentum: one fp32 state per parameter */
  ST_OPTIMIZER_ADAM,    /* AdamW: two fp32 states per parameter */
  ST_OPTIMIZER_N,
} StOptimizer;

/* Activation recomputation (Korthikanti et al. 2022, arXiv 2205.05198). */
typedef enum {
  ST_RECOMPUTE_NONE = 0,  /* every activation kept from forward to backward */
  ST_RECOMPUTE_SELECTIVE, /* the attention scores dropped and made again before each backward */
  ST_RECOMPUTE_FULL,      /* each layer's input kept, its forward run again before its backward */
  ST_RECOMPUTE_N,
} StRecompute;

/* What selective recomputation drops and makes again before a backward,
 * by op of a transformer layer (--recompute-ops; Megatron-LM's
 * --recompute-modules, PyTorch's selective activation checkpointing). A
 * set is a bit mask, 1u << op; 0 means the default, core attention
 * (Korthikanti et al.'s selective recomputation). */
typedef enum {
  ST_RC_CORE_ATTN = 0, /* the attention scores: QK^T, softmax, dropout (dense attention) */
  ST_RC_MLP_ACT,       /* the MLP's activation output (GELU, silu(gate) x up), from its input */
  ST_RC_LAYERNORM,     /* the norms' outputs, from their inputs and saved statistics */
  ST_RC_TORCHTITAN,    /* torchtitan's per-op policy, a whole policy (no other op with it):
                          of each block only the attention kernel's outputs and every other
                          matmul's (the 1st, 3rd, ...) kept, the rest made again (model/
                          layer_decoder.c) */
  ST_RC_N,
} StRecomputeOp;

#define ST_RC_DEFAULT (1u << ST_RC_CORE_ATTN)

/* The per-GPU memory figures a training process shows (output/runtime_memory.h). */
typedef enum {
  ST_MEMKIND_ALLOCATED = 0, /* tensors alive: torch.cuda.max_memory_allocated */
  ST_MEMKIND_RESERVED,      /* the caching allocator's segments: max_memory_reserved */
  ST_MEMKIND_DEVICE,        /* the process on the GPU, as nvidia-smi shows it */
  ST_MEMKIND_N,
} StMemoryKind;

typedef enum {
  ST_PRECISION_FP32 = 0, /* fp32 weights, gradients and activations */
  ST_PRECISION_MIXED,    /* 16-bit weights, gradients, activations; fp32 master weights */
  ST_PRECISION_FP8,      /* mixed, and the GEMMs of the transformer layers' linears in FP8
                            (Transformer Engine's recipe as Megatron-LM runs it:
                            docs/LLM.md, "FP8 training"); simulated only */
  ST_PRECISION_N,
} StPrecision;

/* Whether `p` keeps weights, gradients and activations in 16 bits with fp32
 * master weights: mixed, and fp8 (whose FP8 is confined to GEMM inputs and
 * the cached FP8 weight copies; everything stored otherwise is as mixed). */
static inline gboolean
st_precision_16bit(StPrecision p)
{
  return p == ST_PRECISION_MIXED || p == ST_PRECISION_FP8;
}

const char *st_dtype_name(StDtype d);
int st_dtype_bytes(StDtype d);
const char *st_op_kind_name(StOpKind k);
const char *st_pass_name(StPass p);
const char *st_coll_name(StCollKind c);
const char *st_copy_name(StCopyKind c);
const char *st_mem_name(StMemCategory c);
const char *st_cost_source_name(StCostSource s);
const char *st_link_name(StLinkClass l);
const char *st_optimizer_name(StOptimizer o);
const char *st_data_name(StData d);
const char *st_precision_name(StPrecision p);
const char *st_recompute_name(StRecompute r);
const char *st_recompute_op_name(StRecomputeOp op);
gboolean st_recompute_op_parse(const char *text, StRecomputeOp *out, GError **error);
const char *st_memory_kind_name(StMemoryKind k);

/* Strict parsers: exact spellings of the name tables; errors list them. */
gboolean st_dtype_parse(const char *text, StDtype *out, GError **error);
gboolean st_op_kind_parse(const char *text, StOpKind *out, GError **error);
gboolean st_pass_parse(const char *text, StPass *out, GError **error);
gboolean st_coll_parse(const char *text, StCollKind *out, GError **error);
gboolean st_copy_parse(const char *text, StCopyKind *out, GError **error);
gboolean st_mem_parse(const char *text, StMemCategory *out, GError **error);
gboolean st_cost_source_parse(const char *text, StCostSource *out, GError **error);
gboolean st_link_parse(const char *text, StLinkClass *out, GError **error);
gboolean st_optimizer_parse(const char *text, StOptimizer *out, GError **error);
gboolean st_data_parse(const char *text, StData *out, GError **error);
gboolean st_precision_parse(const char *text, StPrecision *out, GError **error);
gboolean st_recompute_parse(const char *text, StRecompute *out, GError **error);
/* A set of ops joined by '+' ("core_attn+mlp_act"), each named once, into
 * StRecomputeOp bits; and back, in op order (0 formats as the default's). */
gboolean st_recompute_ops_parse(const char *text, unsigned *out, GError **error);
char *st_recompute_ops_format(unsigned ops);
gboolean st_memory_kind_parse(const char *text, StMemoryKind *out, GError **error);

/* nccl-tests' bus bandwidth factor: busbw = algbw * factor(n ranks). */
double st_coll_busbw_factor(StCollKind c, int ranks);
