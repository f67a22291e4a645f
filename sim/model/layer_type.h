/* layer_type.h: the registry of layer types.
 *
 * Each type declares the hyperparameters it accepts (with defaults) and one
 * function that derives, from those and the per-sample input shape, the output
 * shape, the parameter count, the FLOPs and the bytes kept for backward.
 * Adding a layer type touches one file (a layer_*.c holding a family of
 * related types) and one line of the registry in layer_type.c.
 *
 * Conventions for derive(): FLOPs count a multiply-add as 2; backward FLOPs
 * include the input gradient and the weight gradient (about 2x forward for
 * layers with weights, 1x for those without); activation bytes are those a
 * PyTorch-style autograd keeps for backward, at the model's dtype. derive()
 * may rewrite an attr whose default means "derived" (maxpool2d's stride 0 =
 * kernel) to the value it used, so signatures and saved models are explicit.
 *
 * Attrs are integers; a `choices` attr is written by name in files ("norm":
 * "rmsnorm") and stored as the index of the name. A type with link() continues
 * a chain started by an earlier layer (an MoE router's experts): the loader
 * calls it with the layer before, so that it takes what it shares with the
 * chain from there; a layer whose output opens a chain (StLayer.chain_open)
 * may only be followed by layers whose link() accepts it.
 *
 * memory() says, per micro-batch, what a layer's passes allocate besides its
 * input and output tensors, exactly as its real implementation does
 * (exec/layers/, checked by tests/test_memory_conformance.c): the blocks it
 * keeps from forward to backward, and the scratch each pass takes while it
 * runs. act_bytes stays the per-sample figure of the literature (what
 * autograd keeps, each tensor once) that planners and estimates use; the
 * strategies' passes allocate from memory() (st_layer_memory in model.h).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "model/model.h"

typedef struct {
  const char *key;
  int64_t fallback;   /* used when the file omits the key (ignored when required) */
  int64_t min;        /* smallest accepted value */
  gboolean required;
  const char *help;   /* one line for `stagger model types` */
  gboolean flag;      /* a switch: accepts true/false (stored 1/0) or 0/1 */
  int64_t max;        /* largest accepted value; 0 = ST_ATTR_MAX */
  /* Names of the values 0, 1, ... (NULL-terminated), or NULL: a choice
   * written and printed by name; `fallback` is an index. */
  const char *const *choices;
  /* Set by derive() or link() from the shapes or the chain (an MoE expert's
   * index and capacity), never by a file: listed by `stagger model types`
   * and in signatures, left out of written models. */
  gboolean derived;
} StAttrSpec;

/* Default bound on attrs (and on input dims): 2^24 is wider than any real
 * layer, and keeps derived counts of plausible models inside int64. */
#define ST_ATTR_MAX (INT64_C(1) << 24)

/* Which of a layer's own input and output tensors derive() counts in
 * act_bytes, so that a tensor kept by two neighbours is counted once. */
typedef enum {
  ST_KEEPS_INPUT = 1 << 0,  /* act_bytes includes in_bytes: the input is saved */
  ST_KEEPS_OUTPUT = 1 << 1, /* act_bytes includes out_bytes: the output is saved */
  ST_OUTPUT_IS_VIEW = 1 << 2, /* the output aliases the input (flatten, a reshape) */
} StLayerKeeps;

/* Tensors the executor cuts out of one block (a layer's saved block, a
 * pass's scratch) start at multiples of this many bytes, as cudaMalloc's
 * do: each one takes st_layer_aligned(bytes). */
#define ST_LAYER_ALIGN 256

static inline int64_t
st_layer_aligned(int64_t bytes)
{
  return (bytes + ST_LAYER_ALIGN - 1) / ST_LAYER_ALIGN * ST_LAYER_ALIGN;
}

/* im2col columns of a convolution are made for as many images at once as
 * fit in this many bytes (at least one): the scratch of a conv pass. */
#define ST_CONV_COLS_BYTES ((int64_t)32 << 20)

/* What one layer's passes over a micro-batch allocate, in bytes (see
 * st_layer_memory). memory() fills the last four; the tensors between
 * layers are the same for every type and st_layer_memory adds them. */
struct StLayerMemory {
  int64_t input;       /* the tensor its forward reads: the previous layer's output,
                          or the samples (int32 ids for an embedding) */
  int64_t output;      /* the tensor its forward writes */
  int64_t input_grad;  /* the gradient of its input, written by its backward */
  int64_t saved;       /* kept from the forward to the backward (activations): what
                          the layer saves beyond its input and output tensors */
  int64_t targets;     /* a loss's class ids, made by its forward and read by its
                          backward (int32; the executor counts them as workspace) */
  int64_t fwd_scratch; /* workspace the forward takes while it runs */
  int64_t bwd_scratch; /* workspace the backward takes while it runs */
  /* Selective recomputation (Korthikanti et al. 2022, --recompute
   * selective), by op (StRecomputeOp, --recompute-ops): the part of `saved`
   * that op's outputs take, cheap to make again (the attention scores and
   * what derives from them; the MLP's activation output; the norms'
   * outputs). Under selective the forward keeps saved less the chosen
   * ops' parts (it takes them as extra scratch), and a recompute pass
   * before the backward makes them anew, taking the op's again_scratch
   * while it runs (st_layer_memory_again). 0 for an op the layer has none
   * of. */
  int64_t again[ST_RC_N];
  int64_t again_scratch[ST_RC_N];
};

/* ---- tensor parallelism ---------------------------------------------------
 *
 * How a layer splits over a tensor-parallel group of t ranks, as Megatron-LM
 * does it (Shoeybi et al. 2019, arXiv 1909.08053; sequence parallelism:
 * Korthikanti et al. 2022, arXiv 2205.05198). StLayer.tp = t (and .sp) make
 * derive() and memory() give ONE rank's numbers: its parameters, FLOPs,
 * kept bytes, shapes and scratch (st_model_derive_as sets them for a whole
 * model). Attrs always describe the whole layer. What the rank's passes
 * need from the group (st_layer_tp_comm in model.h) follows from the kind:
 *
 * - REPLICATED: every rank holds and computes the whole layer (norms,
 *   element-wise layers, position tables, an MoE router). Under sequence
 *   parallelism it runs on its s/t tokens (its input shape says so). No
 *   collective.
 * - PARALLEL: a column-parallel linear in, a row-parallel linear out
 *   (attention: heads and kv heads / t, each rank its heads' Q K V rows and
 *   the matching columns of the output projection; MLPs: ffn / t; blocks
 *   of them; MoE experts). The input is whole on every rank and the output
 *   a partial sum: forward all-reduces the output, backward the input's
 *   gradient (Megatron's g and f). Biases of the row-parallel linear are
 *   added once, after the sum. With SP the layer's input and output are its
 *   s/t tokens: forward all-gathers the input first and reduce-scatters the
 *   output; backward all-gathers the output's gradient and reduce-scatters
 *   the input's.
 * - VOCAB_IN: an embedding, vocab / t rows per rank (ids outside give zero
 *   rows): forward all-reduces the output (SP: reduce-scatter).
 * - VOCAB_OUT: an LM head, column-parallel over the vocabulary: its output
 *   [s, vocab / t] stays split for the loss; forward needs the whole input
 *   (SP: all-gather), backward all-reduces the input's gradient (SP:
 *   reduce-scatter).
 * - VOCAB_LOSS: cross-entropy over split logits: forward all-reduces three
 *   fp32 numbers per token (the max, the sum of exponentials, the target's
 *   logit), backward needs nothing.
 * A type that cannot split (convolutions) is REPLICATED. derive() fails
 * when t does not divide what it splits (heads, kv heads, ffn, vocab),
 * naming the attr. */
typedef enum {
  ST_TP_REPLICATED = 0,
  ST_TP_PARALLEL,
  ST_TP_VOCAB_IN,
  ST_TP_VOCAB_OUT,
  ST_TP_VOCAB_LOSS,
} StTpKind;

struct StLayerType {
  const char *name;
  const char *summary;
  const StAttrSpec *attrs; /* terminated by an entry with key NULL */
  /* Reads layer->attrs and layer->in_shape; fills out_shape, params,
   * fwd_flops, bwd_flops, act_bytes, out_bytes (and may set fwd_io_bytes /
   * bwd_io_bytes; left at 0 they get generic estimates). `dtype_bytes` is the
   * model's element size. Errors say what is wrong with the shape or attrs. */
  gboolean (*derive)(StLayer *layer, int dtype_bytes, GError **error);
  /* StLayerKeeps bits. Layer i's output is layer i+1's input: when layer i
   * keeps its output (through any views) and layer i+1 keeps its input, the
   * loader subtracts in_bytes from layer i+1, so the tensor is charged once,
   * to the producer, whose backward runs last and frees it. */
  unsigned keeps;
  /* Fills `out`'s saved, targets and scratch (the rest is zero) for `batch`
   * samples with activations of `dtype_bytes` each (mixed precision: 2).
   * NULL: the layer keeps act_bytes per sample and takes no scratch
   * (custom, whose numbers are given). */
  void (*memory)(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out);
  /* A transformer layer (Megatron-LM's TransformerLayer, torchtitan's
   * TransformerBlock): the unit --recompute-every counts. */
  gboolean block;
  /* Its input is int32 token ids (4 bytes each whatever the dtype), made by
   * the data loader: an embedding. */
  gboolean takes_ids;
  /* How it splits over a tensor-parallel group (above). */
  StTpKind tp;
  /* The collectives of one rank's pass when tp > 1, where they are not the
   * kind's (an MoE expert all-reduces its expert rows, not the stream):
   * fills out[] and returns how many (st_layer_tp_comm). NULL: the kind's. */
  int (*tp_comm)(const StLayer *layer, StPass pass, int dtype_bytes, StTpComm out[2]);
  /* Its backward ends after the group's reduction (an MoE expert: the
   * reduced rows' gradients are scattered back into the stream's), so the
   * pass's frees go on that collective rather than on its compute. */
  gboolean tp_tail;
  /* A PARALLEL layer built of several column-then-row-parallel halves (a
   * transformer block: attention, then MLP) runs each pass in parts with
   * the kind's collectives around every part (st_layer_tp_parts): fills
   * share[k] with part k's share of the pass's FLOPs, parts in forward
   * order, and returns how many. NULL: one part, the whole pass. */
  int (*tp_parts)(const StLayer *layer, StPass pass, double share[ST_TP_PARTS_MAX]);
  /* Of a PARALLEL layer's parameters, those every rank holds whole but whose
   * gradient it computes as a partial sum (a block's norms, computed on each
   * rank's partial gradient: st_layer_tp_partial_params). NULL: none. */
  int64_t (*tp_partial_params)(const StLayer *layer);
  /* It holds self-attention (flash), which context parallelism cuts into
   * steps around its exchanges (layer_context.c). */
  gboolean cp_attention;
  /* Continues a chain (see the top): reads what it shares with the chain
   * from `prev` (the layer before it, NULL for the first) into its attrs,
   * before derive(); fails when `prev` opens no chain it belongs to. NULL:
   * the type starts no chain and continues none. */
  gboolean (*link)(StLayer *layer, const StLayer *prev, GError **error);
};

const StLayerType *st_layer_type_find(const char *name);
/* NULL-terminated, in registry order. */
const StLayerType *const *st_layer_types(void);
