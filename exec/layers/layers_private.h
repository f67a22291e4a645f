/* layers_private.h: what the layer implementations (exec/layers/layer_*.c)
 * share: their registry entries, deterministic initialisation, carving the
 * `saved` block into tensors, scratch memory, and the dense and convolution
 * building blocks that both the plain layers and the residual / transformer
 * blocks use. Private to exec/layers/.
 *
 * Everything runs through the kernel table of the context, so it works on
 * the host and on a GPU alike; every helper returns 0 or the first kernel
 * error, which the caller returns as is (ST_TRY).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "exec/layer_impl.h"

/* Returns a non-zero kernel status from the enclosing function. */
#define ST_TRY(call)                                                                          \
  do {                                                                                        \
    int st_try_rc_ = (call);                                                                  \
    if (st_try_rc_ != 0)                                                                      \
      return st_try_rc_;                                                                      \
  } while (0)

/* The drop probability of dropout layers and of the transformer block's
 * dropouts. Models carry no probability (it changes no cost, see
 * sim/model/layer_elementwise.c); 0.1 is GPT-2's and ViT's. */
#define ST_LAYER_DROPOUT_P 0.1f

/* ---- registry entries (one per model layer type) ------------------------ */

extern const StLayerImpl st_impl_linear, st_impl_embedding, st_impl_position_embedding,
  st_impl_class_token, st_impl_lm_head;                             /* layer_dense.c */
extern const StLayerImpl st_impl_conv2d, st_impl_maxpool2d, st_impl_avgpool2d,
  st_impl_adaptive_avgpool2d, st_impl_flatten, st_impl_to_tokens;  /* layer_conv.c */
extern const StLayerImpl st_impl_batchnorm2d, st_impl_layernorm;    /* layer_norm.c */
extern const StLayerImpl st_impl_relu, st_impl_gelu, st_impl_dropout,
  st_impl_select_token;                                             /* layer_elementwise.c */
extern const StLayerImpl st_impl_softmax_cross_entropy;            /* layer_loss.c */
extern const StLayerImpl st_impl_basic_block, st_impl_bottleneck;   /* layer_residual.c */
extern const StLayerImpl st_impl_transformer_block;                 /* layer_transformer.c */

/* ---- initialisation (layer_util.c) -------------------------------------- */

/* Fills x[0..n) with uniform values in [-bound, bound]: value i of tensor
 * `tensor` of layer `l` is a hash of (seed, the layer's name, tensor, i), a
 * counter-based generator: no state, the same on every rank and backend. */
void st_init_uniform(float *x, size_t n, float bound, uint64_t seed, const StLayer *l,
                     int tensor);
void st_init_fill(float *x, size_t n, float value);

/* An independent seed for the j-th random stream of one layer call (the
 * transformer block's three dropouts), hashed from ctx->seed. */
uint64_t st_layer_subseed(uint64_t seed, int j);

/* ---- the saved block and scratch (layer_util.c) -------------------------- */

/* Cuts consecutive tensors out of a block, each aligned to ST_LAYER_ALIGN
 * bytes (model/layer_type.h, whose memory() functions count the same). With
 * base NULL it only measures, so saved_bytes() and forward() / backward()
 * run the same layout code and cannot disagree. */
typedef struct {
  char *base;
  size_t offset;
} StCarve;

void *st_carve(StCarve *c, size_t bytes);

/* Temporary device memory for the rest of the call (NULL when out of
 * memory, or for 0 bytes). */
void *st_scratch(const StLayerCtx *c, size_t bytes);

/* ptr = `bytes` of scratch (NULL for 0), or return ST_K_ENOMEM. */
#define ST_SCRATCH(ptr, c, bytes)                                                             \
  do {                                                                                        \
    (ptr) = st_scratch((c), (bytes));                                                         \
    if ((ptr) == NULL && (bytes) > 0)                                                         \
      return ST_K_ENOMEM;                                                                     \
  } while (0)

/* Element offset `i` of a tensor in dt, as a byte pointer. */
static inline void *
st_at(const void *p, StKDtype dt, size_t i)
{
  return (char *)p + i * st_kdt_size(dt);
}

/* init() of layers without parameters. */
void st_layer_no_init(const StLayer *l, float *params, uint64_t seed);

/* saved_bytes() of layers that keep nothing of their own. */
size_t st_layer_no_saved(const StLayer *l, int batch, StKDtype dt);

/* out = in, unless they are one buffer (a view). */
int st_copy_through(const StLayerCtx *c, void *dst, const void *src, size_t elems);

/* Features (last dim) and rows (the product of the others, times batch). */
int st_layer_last_dim(const StShape *s);
int st_layer_rows(const StShape *s, int batch);
size_t st_layer_elems(const StShape *s, int batch);

/* ---- dense: y [rows, out] = x [rows, in] W^T + b, W [out, in] (layer_ops.c) */

int st_dense_fwd(const StLayerCtx *c, const void *x, int rows, int in, int out, const void *w,
                 const void *b, void *y);
/* dx (written; NULL to skip), dw and db accumulated (NULL to skip). */
int st_dense_bwd(const StLayerCtx *c, const void *x, const void *dy, int rows, int in, int out,
                 const void *w, void *dx, void *dw, void *db);

/* ---- convolution without bias, NCHW, as im2col + gemm (layer_ops.c) ------ */

typedef struct {
  int n, cin, h, w;        /* input [n, cin, h, w] */
  int cout, k, s, p, groups;
  int ho, wo;              /* output [n, cout, ho, wo] */
} StConvGeom;

/* The geometry of a conv; ho, wo as PyTorch (ceil_mode off). */
StConvGeom st_conv_geom(int n, int cin, int h, int w, int cout, int k, int s, int p, int groups);
/* The im2col columns a pass of this conv works in, bytes (0 when its input
 * is its own columns): as many images at once as fit in ST_CONV_COLS_BYTES. */
size_t st_conv_cols_size(const StConvGeom *g, StKDtype dt);
/* Weights [cout, cin / groups, k, k]. `cols`: st_conv_cols_size() bytes the
 * caller lends (several convs of a block share one), or NULL to take them
 * from scratch. */
int st_conv_fwd(const StLayerCtx *c, const StConvGeom *g, const void *x, const void *wt,
                void *y, void *cols);
/* dwt accumulated; dx written, or accumulated with dx_add (NULL to skip). */
int st_conv_bwd(const StLayerCtx *c, const StConvGeom *g, const void *x, const void *wt,
                const void *dy, void *dx, int dx_add, void *dwt, void *cols);
