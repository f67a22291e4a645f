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
};

const StLayerType *st_layer_type_find(const char *name);
/* NULL-terminated, in registry order. */
const StLayerType *const *st_layer_types(void);
