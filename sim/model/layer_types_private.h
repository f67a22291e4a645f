/* layer_types_private.h: the layer types of each family (layer_*.c) and the
 * helpers their derive() functions share. Private to sim/model/: the rest of
 * the tree reaches types through st_layer_type_find() / st_layer_types().
 *
 * derive() may assume that layer->attrs holds every attr of its type (given
 * or defaulted) with value >= the spec's min, and that flag attrs are 0 or 1;
 * the loader checks that before calling it. Errors from derive() carry no
 * location: the loader prefixes "file: layer N 'name': ".
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "model/layer_type.h"

/* layer_dense.c */
extern const StLayerType st_layer_linear;
extern const StLayerType st_layer_embedding;
extern const StLayerType st_layer_position_embedding;
extern const StLayerType st_layer_class_token;
extern const StLayerType st_layer_lm_head;

/* layer_conv.c */
extern const StLayerType st_layer_conv2d;
extern const StLayerType st_layer_maxpool2d;
extern const StLayerType st_layer_avgpool2d;
extern const StLayerType st_layer_adaptive_avgpool2d;
extern const StLayerType st_layer_flatten;
extern const StLayerType st_layer_to_tokens;

/* layer_norm.c */
extern const StLayerType st_layer_batchnorm2d;
extern const StLayerType st_layer_layernorm;

/* layer_elementwise.c */
extern const StLayerType st_layer_relu;
extern const StLayerType st_layer_gelu;
extern const StLayerType st_layer_dropout;
extern const StLayerType st_layer_select_token;
extern const StLayerType st_layer_softmax_cross_entropy;

/* layer_block.c */
extern const StLayerType st_layer_basic_block;
extern const StLayerType st_layer_bottleneck;
extern const StLayerType st_layer_transformer_block;

/* layer_custom.c */
extern const StLayerType st_layer_custom;

/* ---- helpers for derive() (layer_type.c) ------------------------------ */

/* FLOPs per element of a normalization's forward (batchnorm2d, layernorm and
 * the ones inside residual blocks): sum and sum of squares (1 + 2), subtract
 * the mean and scale by 1/std (2), affine multiply-add (2). */
#define ST_NORM_FWD_FLOPS_PER_ELEM 7.0

/* Fails unless the input shape has exactly `n_dims` dims; `expected` names
 * them for the message ("[C,H,W]"). */
gboolean st_layer_check_dims(const StLayer *layer, int n_dims, const char *expected,
                             GError **error);

/* Bounds on what derive() may compute: no real layer comes close, and
 * checking a product in double before computing it in int64 keeps absurd
 * attrs from overflowing. Elements of one tensor, and any count (params,
 * bytes) of one layer. */
#define ST_MAX_ELEMS 1099511627776.0 /* 2^40 */
#define ST_MAX_COUNT 1125899906842624.0 /* 2^50 */

/* Fails when `count` (computed in double) is above `max`; `what` names it. */
gboolean st_layer_check_size(double count, double max, const char *what, GError **error);

/* Sets an attr the layer already has (see layer_type.h on rewriting defaults). */
void st_layer_set_attr(StLayer *layer, const char *key, int64_t value);

/* Sets an error about one attr: "key 'heads': 768 is not a multiple of 5".
 * Returns FALSE. */
gboolean st_layer_attr_error(GError **error, const char *key, const char *format, ...)
  G_GNUC_PRINTF(3, 4);

/* memory() of a layer that keeps nothing besides its input and output and
 * takes no scratch. */
void st_layer_no_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out);

/* Output shape equal to the input shape; out_bytes from it. */
void st_layer_same_shape(StLayer *layer, int dtype_bytes);

/* One [C,H,W] feature map (elements). */
typedef struct {
  int64_t c, h, w;
} StChw;

static inline int64_t
st_chw_elems(StChw x)
{
  return x.c * x.h * x.w;
}

/* A sliding window of `kernel` with `stride` and `padding` over `size`:
 * floor((size + 2 padding - kernel) / stride) + 1, as PyTorch (ceil_mode
 * off). Fails when the kernel does not fit the padded input. */
gboolean st_window_out(int64_t size, int64_t kernel, int64_t stride, int64_t padding,
                       int64_t *out, GError **error);

/* A conv2d without bias from `in` to `out_channels` (layer_conv.c): output
 * map, weight count and forward FLOPs 2 * (k*k*Cin/groups) * Cout * Hout * Wout.
 * Used by conv2d and by the residual blocks. */
/* The im2col scratch of one conv2d pass (either way) over `batch` images
 * of `in` (layer_conv.c): 0 for a 1x1 conv with stride 1 and no padding
 * (its input is its own columns), else the columns of as many images as fit
 * in ST_CONV_COLS_BYTES, at least one. */
int64_t st_conv_cols_bytes(StChw in, int64_t kernel, int64_t stride, int64_t padding, StChw out,
                           int batch, int dtype_bytes);

gboolean st_conv_apply(StChw in, int64_t out_channels, int64_t kernel, int64_t stride,
                       int64_t padding, int64_t groups, StChw *out, int64_t *weights,
                       double *fwd_flops, GError **error);
