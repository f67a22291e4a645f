/* model.h: a neural network as a sequence of layers with derived costs.
 *
 * A model file (models/NAME.json) lists layers in execution order:
 *
 *   {"name": "resnet50", "input": [3, 224, 224], "dtype": "fp32",
 *    "layers": [ {"name": "conv1", "type": "conv2d", "out_channels": 64, ...},
 *                {"repeat": 3, "from": 1, "layers": [ {"name": "layer1.{i}", ...} ]},
 *                ... ]}
 *
 * `input` is the per-sample input shape ([C,H,W] for images, [tokens] for
 * token ids). Each layer's input shape is the previous layer's output shape,
 * so only the hyperparameters that are not implied by it are written (a
 * conv2d's in_channels comes from its input). A `repeat` entry expands its
 * `layers` N times, substituting the index (from `from`, default 0) for
 * "{i}" in names. A layer may name the earlier layers it reads with
 * `"inputs": ["a", "b"]` (a branch starting from a fork, a `concat` joining
 * branches; model_inputs.c); without it, it reads the previous layer.
 * Layer types are registered in layer_type.c; `"type":
 * "custom"` takes its numbers directly, all per sample: params, fwd_flops,
 * bwd_flops, activation_bytes, output_bytes.
 *
 * The loader derives per layer: trainable parameters, forward and backward
 * FLOPs, bytes kept for backward and output bytes, per sample, at the model's
 * dtype. Nothing here knows about GPUs or strategies.
 *
 * Reading is strict: a key that is neither `name`, `type` nor an attr of the
 * type is an error, as are missing required attrs, values out of range,
 * duplicate names and shapes a type cannot take. Flag attrs accept true/false
 * and are stored as 1/0. A free-form top-level `note` is allowed. Layers are
 * numbered from 0 in messages and tables, after repeats are expanded.
 *
 * act_bytes counts each kept tensor once: when a layer keeps its output (a
 * ReLU) and the next keeps that same tensor as its input (a conv), it is
 * charged to the first, whose backward runs last (see StLayerKeeps in
 * layer_type.h); the second layer's act_bytes then excludes in_bytes.
 *
 * Ownership: an StModel owns its layers and their strings; layer types are
 * static and borrowed.
 */
#pragma once

#include <glib.h>
#include <stdint.h>
#include <stdio.h>

#include "base/kinds.h"

#define ST_MODEL_ERROR (st_model_error_quark())
GQuark st_model_error_quark(void);

#define ST_SHAPE_MAX_DIMS 4

/* A per-sample tensor shape: [C,H,W] for images, [tokens, features] for
 * sequences, [features] for vectors, [tokens] for token ids. */
typedef struct {
  int n_dims;
  int64_t dims[ST_SHAPE_MAX_DIMS];
} StShape;

/* One integer hyperparameter (booleans are 0/1). Keys are interned strings. */
typedef struct {
  const char *key;
  int64_t value;
} StAttr;

typedef struct StLayerType StLayerType;
typedef struct StLayerMemory StLayerMemory; /* layer_type.h */

typedef struct {
  char *name;               /* unique within the model */
  const StLayerType *type;  /* borrowed from the registry */
  StAttr *attrs;            /* [n_attrs], sorted by key: given values and defaults */
  int n_attrs;
  StShape in_shape;         /* per sample */
  StShape out_shape;        /* per sample */
  char *signature;          /* "type{k=v,...}[in shape]": the key that carries a profile
                               entry across models with the same layer */
  int64_t params;           /* trainable parameters (elements); 0 for a tied head */
  int32_t param_tensors;    /* the tensors they are stored in, as PyTorch's
                               module.parameters() lists them (a conv's weight and bias:
                               2; a bottleneck's 3 convs and 3 batch norms: 9): what an
                               optimizer that loops over tensors launches kernels for.
                               derive() sets it where it knows; else 1 when params > 0 */
  int64_t active_params;    /* of them, what one token uses: an MoE expert's params x
                               top_k / experts (a token visits top_k of them) */
  double fwd_flops;         /* per sample */
  double bwd_flops;         /* per sample: input and weight gradients */
  int64_t act_bytes;        /* kept from forward for backward, per sample, at model dtype */
  int64_t out_bytes;        /* output tensor, per sample, at model dtype */
  int64_t in_bytes;         /* input tensor, per sample, at model dtype */
  double fwd_io_bytes;      /* activation memory traffic of forward, per sample (roofline) */
  double bwd_io_bytes;      /* same for backward */
  /* Selective recomputation (StLayerMemory.again), by op (StRecomputeOp,
   * --recompute-ops): of act_bytes, the bytes per sample that op's outputs
   * take, which selective recomputation of it drops, and the forward FLOPs
   * per sample of the recompute that makes them again (matrix products
   * only, as fwd_flops: an element-wise op's are 0); 0 where the layer has
   * nothing of that op to drop. st_layer_again sums a set. */
  int64_t act_again[ST_RC_N];
  double again_flops[ST_RC_N];
  /* Tensor parallelism (layer_type.h): the group size these numbers are
   * one rank's share of (1: the whole layer), and whether sequence
   * parallelism splits the tokens between layers. Set before derive(). */
  int tp;
  gboolean sp;
  /* Context parallelism (layer_context.c): the group size this layer's
   * sequence is cut over (0 or 1: none). Its input is the rank's s / cp
   * tokens; attention reads the keys of all s (docs/LLM.md). Set before
   * derive(), like tp. */
  int cp;
  /* Its output is an open chain (an MoE router's or an expert's before the
   * last): the next layer must continue it (StLayerType.link). */
  gboolean chain_open;
  /* The earlier layers whose outputs it reads (model_inputs.c), when the
   * file names them with `inputs`; NULL and 0: the previous layer (the
   * model's input for the first). Several are concatenated on the first
   * axis (Inception's branches meeting at a `concat`). Owned. */
  int32_t *inputs;
  int32_t n_inputs;
} StLayer;

typedef struct {
  char *name;
  char *path;        /* the file it came from, or NULL */
  StDtype dtype;     /* of activations and weights as written ("fp32" by default) */
  StShape input;     /* per sample */
  StLayer *layers;   /* [n_layers] in execution order */
  int n_layers;
  /* Totals over the layers. */
  int64_t params;
  int64_t active_params; /* used by each token: an MoE expert's count top_k / experts
                            times (Mixtral: 12.9B of 46.7B); = params without experts */
  int64_t param_tensors; /* the layers' StLayer.param_tensors summed */
  double fwd_flops, bwd_flops;
  int64_t act_bytes;
} StModel;

/* Loads and derives a model. Errors name the file, the layer and the key:
 * "models/x.json: layer 4 'conv1': key 'kernel': expected an integer". */
StModel *st_model_load(const char *path, GError **error);

/* Same from a parsed tree; `origin` names it in messages. */
struct cJSON;
StModel *st_model_from_json(const struct cJSON *root, const char *origin, GError **error);

/* The model as a JSON object that st_model_from_json reads back to an equal
 * model (layers expanded, attrs explicit). Each layer also carries its
 * derived numbers under "derived" and the model its sums under "totals", for
 * readers of `stagger model show --json`; the reader ignores both and derives
 * them again. Transfer full. */
struct cJSON *st_model_to_json(const StModel *model);

StModel *st_model_copy(const StModel *model);

/* The model derived again for an input of shape `input` (NULL: the model's)
 * and as one rank of a tensor-parallel group of `tp` ranks (1: whole), with
 * sequence parallelism when `sp`: every layer's numbers from its attrs, as
 * the loader derives them (layer_type.h on tensor parallelism). A token
 * model at another sequence length is `input` = [tokens]. Errors name the
 * layer and the attr that does not fit ("layer 3 'h.0': key 'kv_heads': 8
 * is not a multiple of the 16 tensor-parallel ranks"). Transfer full. */
StModel *st_model_derive_as(const StModel *model, const StShape *input, int tp, gboolean sp,
                            GError **error);
/* The same, and as one rank of a context-parallel group of `cp` ranks:
 * a token model's sequence (of `input`, or the model's) cut in cp, every
 * layer on the rank's s / cp tokens, attention against all s keys
 * (layer_context.c). cp must divide the sequence. Transfer full. */
StModel *st_model_derive_cp(const StModel *model, const StShape *input, int tp, gboolean sp,
                            int cp, GError **error);
/* The same, with the MoE experts (the layers that continue a chain) split
 * over `etp` ranks instead of tp (Megatron-LM's
 * --expert-tensor-parallel-size): under sequence parallelism an expert
 * computes on the rows its etp ranks routed (etp 1: its own rank's). etp
 * divides tp. Transfer full. */
StModel *st_model_derive_etp(const StModel *model, const StShape *input, int tp, gboolean sp,
                             int cp, int etp, GError **error);
/* The tensor-parallel size of a derived model's experts (its tp when it has
 * none or they split as the rest). */
int st_model_expert_tp(const StModel *model);
/* The context-parallel size a derived model was cut for (1: none). */
int st_model_context_parallel(const StModel *model);
void st_model_free(StModel *model);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StModel, st_model_free)

/* ---- branches (model_inputs.c) ------------------------------------------ */

#define ST_LAYER_MAX_INPUTS 8

/* Layer i's inputs as indices of earlier layers into out[] (the previous
 * layer when it names none; nothing for the first layer): returns how many. */
int st_model_layer_inputs(const StModel *model, int i, int32_t out[ST_LAYER_MAX_INPUTS]);
/* Whether some layer reads other than its predecessor: a DAG, not a chain. */
gboolean st_model_has_branches(const StModel *model);

/* Whether the model reads a sequence of token ids (input [tokens], an
 * embedding first): one whose sequence length --seq-len may change. */
gboolean st_model_is_token(const StModel *model);

/* Each expert's capacity C of an moe_router on its input (tokens per
 * sample; sim/model/layer_moe.c). */
int64_t st_moe_capacity(const StLayer *router);

/* What a layer split over a tensor-parallel group needs from the group in
 * one pass (forward or backward; layer_type.h): a collective over `bytes`
 * per sample (nccl-tests' size: the full buffer) of the rank's input or
 * output, before or after the pass's compute. */
typedef struct {
  StCollKind kind;
  int64_t bytes;    /* per sample, at `dtype_bytes` (the loss's fp32 statistics: 12 per token) */
  gboolean before;  /* before the compute (an all-gather of the input), else after */
} StTpComm;

/* Fills out[0..n) with the collectives of layer->tp ranks for `pass` (FWD or
 * BWD; a RECOMPUTE is a forward) and returns n (at most 2); 0 when tp = 1.
 * A layer in parts (st_layer_tp_parts) needs them around each part. */
int st_layer_tp_comm(const StLayer *layer, StPass pass, int dtype_bytes, StTpComm out[2]);

/* A layer split over a tensor-parallel group runs a pass in parts, each
 * between its own collectives, as Megatron-LM runs a transformer block:
 * the attention half (column-parallel QKV, row-parallel projection, its
 * all-reduce), then the MLP half (its own all-reduce); backward in reverse
 * order. Part k (1-based, forward order) does share[k - 1] of the pass's
 * FLOPs. Fills share[] and returns the number of parts: 1 (share 1) for a
 * layer in one piece or with tp = 1. */
#define ST_TP_PARTS_MAX 2
int st_layer_tp_parts(const StLayer *layer, StPass pass, double share[ST_TP_PARTS_MAX]);

/* Context parallelism (layer_context.c). A layer with attention on a
 * context-parallel rank (StLayer.cp > 1) runs the part of a pass that holds
 * its attention (st_layer_cp_part: 0 the whole pass, k part k) in steps
 * around the group's exchanges: step 0 what comes before the attention's
 * core (norm, QKV projection, RoPE), steps 1 .. n - 2 the core (ring:
 * one per key/value chunk, n - 2 = cp; all-to-all: one), step n - 1 what
 * comes after (output projection, and the MLP when the part holds it);
 * a backward runs them in reverse. st_layer_cp_share: step k's share of
 * the part's FLOPs. */
int st_layer_cp_part(const StLayer *layer);
double st_layer_cp_share(const StLayer *layer, StPass pass, int step, int steps);
/* Per sample, the bytes of the rank's keys and values (K and V of its s /
 * cp tokens, its kv heads: the ring's chunk) and of its queries, keys and
 * values together and of the attention's output (what the all-to-all moves
 * before and after the core), at `dtype_bytes`; 0 without attention. */
void st_layer_cp_bytes(const StLayer *layer, int dtype_bytes, int64_t *kv, int64_t *qkv,
                       int64_t *out);

/* Parameters of a layer split over a tensor-parallel group that every rank
 * holds whole but computes only a partial sum of the gradient of, summed
 * over the group once per step (Megatron-LM's all-reduce of the norms'
 * gradients under sequence parallelism): a split block's norms; under
 * sequence parallelism also every replicated layer's parameters (each rank
 * computes on its s/t tokens). 0 when tp = 1. */
int64_t st_layer_tp_partial_params(const StLayer *layer);

/* The attribute `key` of a layer, or `fallback` when the layer has none. */
int64_t st_layer_attr(const StLayer *layer, const char *key, int64_t fallback);
/* The name of a choice attr's value ("rmsnorm"), or NULL when `key` is not a
 * choice of the layer's type. Borrowed. */
const char *st_layer_attr_choice(const StLayer *layer, const char *key);

/* The layer whose weights layer `i` uses instead of its own (a tied LM head
 * uses the first embedding's), or -1. */
int st_model_tied_layer(const StModel *model, int i);

/* Bytes of a per-sample quantity given at the model's dtype, converted to
 * `dtype` (mixed precision keeps activations in 16 bits). */
int64_t st_model_bytes_as(const StModel *model, int64_t bytes, StDtype dtype);

/* What layer `layer`'s forward and backward over `batch` samples with
 * activations in `dtype` allocate, in bytes, as the executor's
 * implementation does (StLayerMemory in layer_type.h): the tensors between
 * layers at `dtype` (token ids in int32), and what its type's memory() adds;
 * a custom layer keeps act_bytes per sample and takes no scratch. */
void st_layer_memory(const StModel *model, int layer, int batch, StDtype dtype,
                     StLayerMemory *out);

/* Per sample, what selective recomputation of `ops` (StRecomputeOp bits,
 * 0: the default) drops of layer `l` and the FLOPs of making it again:
 * the sums of act_again and again_flops over the set. */
void st_layer_again(const StLayer *l, unsigned ops, int64_t *bytes, double *flops);
/* Of one micro-batch's StLayerMemory, the bytes of its saved block that
 * selective recomputation of `ops` drops, and (when `scratch` is not NULL)
 * the scratch its recompute takes: the ops run one after another, so the
 * largest of theirs. */
int64_t st_layer_memory_again(const StLayerMemory *mem, unsigned ops, int64_t *scratch);

int64_t st_shape_elems(const StShape *shape);
/* "[3,224,224]". Transfer full. */
char *st_shape_format(const StShape *shape);
gboolean st_shape_equal(const StShape *a, const StShape *b);

/* Writes the per-layer table and the totals, as `stagger model show` prints it. */
void st_model_print(const StModel *model, FILE *out);
