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
 * PyTorch-style autograd keeps for backward, at the model's dtype.
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
} StAttrSpec;

struct StLayerType {
  const char *name;
  const char *summary;
  const StAttrSpec *attrs; /* terminated by an entry with key NULL */
  /* Reads layer->attrs and layer->in_shape; fills out_shape, params,
   * fwd_flops, bwd_flops, act_bytes, out_bytes (and may set fwd_io_bytes /
   * bwd_io_bytes; left at 0 they get generic estimates). `dtype_bytes` is the
   * model's element size. Errors say what is wrong with the shape or attrs. */
  gboolean (*derive)(StLayer *layer, int dtype_bytes, GError **error);
};

const StLayerType *st_layer_type_find(const char *name);
/* NULL-terminated, in registry order. */
const StLayerType *const *st_layer_types(void);
