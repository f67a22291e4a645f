/* layer_custom.c: "custom", a layer whose numbers are given directly, all
 * per sample (the contract in docs/ARCHITECTURE.md). For layers no type
 * describes, or to pin numbers measured elsewhere.
 *
 * Its output is a vector of ceil(output_bytes / element size) elements, so a
 * custom layer can feed any layer that accepts a vector; out_bytes is
 * output_bytes exactly. It accepts any input shape.
 */
#include "model/layer_types_private.h"

/* Counts up to 2^50; FLOPs up to what JSON integers hold (2^53). */
#define CUSTOM_MAX (INT64_C(1) << 50)

static const StAttrSpec CUSTOM_ATTRS[] = {
  {.key = "params", .fallback = 0, .min = 0, .max = CUSTOM_MAX,
   .help = "trainable parameters (elements)"},
  {.key = "fwd_flops", .min = 0, .max = INT64_MAX, .required = TRUE,
   .help = "forward FLOPs per sample"},
  {.key = "bwd_flops", .min = 0, .max = INT64_MAX, .required = TRUE,
   .help = "backward FLOPs per sample"},
  {.key = "activation_bytes", .fallback = 0, .min = 0, .max = CUSTOM_MAX,
   .help = "bytes kept from forward for backward, per sample"},
  {.key = "output_bytes", .min = 1, .max = CUSTOM_MAX, .required = TRUE,
   .help = "output bytes per sample"},
  {NULL},
};

static gboolean
custom_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  int64_t out_bytes = st_layer_attr(layer, "output_bytes", 1);
  layer->out_shape = (StShape){.n_dims = 1, .dims = {(out_bytes + dtype_bytes - 1) / dtype_bytes}};
  layer->out_bytes = out_bytes;
  layer->params = st_layer_attr(layer, "params", 0);
  layer->fwd_flops = (double)st_layer_attr(layer, "fwd_flops", 0);
  layer->bwd_flops = (double)st_layer_attr(layer, "bwd_flops", 0);
  layer->act_bytes = st_layer_attr(layer, "activation_bytes", 0);
  return TRUE;
}

const StLayerType st_layer_custom = {
  .name = "custom",
  .summary = "numbers given directly, all per sample",
  .attrs = CUSTOM_ATTRS,
  .derive = custom_derive,
  .keeps = 0,
};
