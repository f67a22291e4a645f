/* layer_custom.c: "custom", a layer whose numbers are given directly, all
 * per sample (the contract in docs/ARCHITECTURE.md). For layers no type
 * describes, or to pin numbers measured elsewhere.
 *
 * fwd_io_bytes / bwd_io_bytes pin the memory traffic the roofline charges
 * (a Chakra trace's tensor_size, sim/interop/); 0 keeps the estimate.
 *
 * Its output is a vector of ceil(output_bytes / element size) elements, so a
 * custom layer can feed any layer that accepts a vector; out_bytes is
 * output_bytes exactly. Given dim0, dim1, ... (the ONNX importer writes
 * them), the output has that per-sample shape instead, and output_bytes
 * must be its elements at the model's element size. It accepts any input
 * shape.
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
  {.key = "dim0", .fallback = 0, .min = 0, .help = "output shape, dim 0 (0: a vector)"},
  {.key = "dim1", .fallback = 0, .min = 0, .help = "output shape, dim 1 (0: none)"},
  {.key = "dim2", .fallback = 0, .min = 0, .help = "output shape, dim 2 (0: none)"},
  {.key = "dim3", .fallback = 0, .min = 0, .help = "output shape, dim 3 (0: none)"},
  {.key = "fwd_io_bytes", .fallback = 0, .min = 0, .max = CUSTOM_MAX,
   .help = "memory traffic of forward per sample, for the roofline (0: input + output + kept)"},
  {.key = "bwd_io_bytes", .fallback = 0, .min = 0, .max = CUSTOM_MAX,
   .help = "memory traffic of backward per sample, for the roofline (0: estimated likewise)"},
  {NULL},
};

static const char *const DIMS[ST_SHAPE_MAX_DIMS] = {"dim0", "dim1", "dim2", "dim3"};

/* The shape given by dim0.. (n_dims 0 when none is), checked against
 * output_bytes. */
static gboolean
given_shape(StLayer *layer, int dtype_bytes, StShape *shape, GError **error)
{
  shape->n_dims = 0;
  double elems = 1;
  for (int i = 0; i < ST_SHAPE_MAX_DIMS; i++) {
    int64_t d = st_layer_attr(layer, DIMS[i], 0);
    if (d == 0) {
      for (int j = i + 1; j < ST_SHAPE_MAX_DIMS; j++)
        if (st_layer_attr(layer, DIMS[j], 0) != 0)
          return st_layer_attr_error(error, DIMS[j], "given without %s", DIMS[i]);
      break;
    }
    shape->dims[shape->n_dims++] = d;
    elems *= (double)d;
  }
  int64_t out_bytes = st_layer_attr(layer, "output_bytes", 1);
  if (shape->n_dims > 0 && elems * dtype_bytes != (double)out_bytes)
    return st_layer_attr_error(error, "output_bytes",
                               "%" G_GINT64_FORMAT " is not the %.0f elements of the given "
                               "shape at %d bytes each",
                               out_bytes, elems, dtype_bytes);
  return TRUE;
}

static gboolean
custom_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  int64_t out_bytes = st_layer_attr(layer, "output_bytes", 1);
  StShape shape;
  if (!given_shape(layer, dtype_bytes, &shape, error))
    return FALSE;
  layer->out_shape = shape.n_dims > 0 ? shape
                                      : (StShape){.n_dims = 1,
                                                  .dims = {(out_bytes + dtype_bytes - 1) /
                                                           dtype_bytes}};
  layer->out_bytes = out_bytes;
  layer->params = st_layer_attr(layer, "params", 0);
  layer->fwd_flops = (double)st_layer_attr(layer, "fwd_flops", 0);
  layer->bwd_flops = (double)st_layer_attr(layer, "bwd_flops", 0);
  layer->act_bytes = st_layer_attr(layer, "activation_bytes", 0);
  /* Left at 0, the loader estimates them from the tensors. */
  layer->fwd_io_bytes = (double)st_layer_attr(layer, "fwd_io_bytes", 0);
  layer->bwd_io_bytes = (double)st_layer_attr(layer, "bwd_io_bytes", 0);
  return TRUE;
}

const StLayerType st_layer_custom = {
  .name = "custom",
  .summary = "numbers given directly, all per sample",
  .attrs = CUSTOM_ATTRS,
  .derive = custom_derive,
  .keeps = 0,
};
