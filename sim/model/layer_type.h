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
};

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
  /* Its input is int32 token ids (4 bytes each whatever the dtype), made by
   * the data loader: an embedding. */
  gboolean takes_ids;
};

const StLayerType *st_layer_type_find(const char *name);
/* NULL-terminated, in registry order. */
const StLayerType *const *st_layer_types(void);
