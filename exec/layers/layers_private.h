/* layers_private.h: what the layer implementations (exec/layers/layer_*.c)
 * share: their registry entries, deterministic initialisation, carving the
 * `saved` block into tensors, scratch memory, and the dense and convolution
 * building blocks that both the plain layers and the residual / transformer
 * blocks use, and the tensor-parallel pieces (layer_split.c). Private to
 * exec/layers/.
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
extern const StLayerImpl st_impl_rmsnorm, st_impl_swiglu, st_impl_geglu; /* layer_llm.c */
extern const StLayerImpl st_impl_attention;                         /* layer_attention.c */
extern const StLayerImpl st_impl_llama_block;                       /* layer_decoder.c */
extern const StLayerImpl st_impl_moe_router, st_impl_moe_expert;    /* layer_moe.c */

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

/* ---- parts of the LLM layers (layer_llm_parts.c) ----------------------------
 *
 * The attention, the MLPs and the norms that the attention / swiglu /
 * geglu / rmsnorm layers, llama_block and the MoE layers are made of, each
 * with its parameter layout, init, saved tensors and scratch ("work", a
 * block the caller lends, as large as *_work() says), so a block composes
 * them and sim/model/layer_attention.c, layer_llm.c count the same. One
 * rank of a tensor-parallel group (l->tp = t) holds its heads / ffn / t
 * and computes on every token of the micro-batch (B x T rows, T the whole
 * sequence also under sequence parallelism); the output bias is added to
 * the rows [bias_first, bias_first + bias_rows) only (all of them by
 * default; a split layer's owner rows, st_tp_own_rows). */

/* The attention of a layer on batch x tokens rows of width d. */
typedef struct {
  int B, T, d;
  int H, G, k, rot; /* this rank's query heads, kv heads; head width, rotated dims */
  float theta;      /* RoPE base, 0: none */
  int causal, window, flash, qkv_bias, out_bias;
  int t;            /* tensor-parallel ranks the heads are split over (1: whole) */
  int bias_first, bias_rows;
} StAttnGeom;

StAttnGeom st_attn_geom(const StLayer *l, int batch);
/* Adds rank `rank`'s parameter spans (layer_impl.h) to out[*n..]: Q, K and V
 * rows of its heads, its columns of W_o, the output bias WHOLE. */
void st_attn_spans(const StAttnGeom *a, int rank, StTpSpan *out, int *n);
size_t st_attn_param_count(const StAttnGeom *a);
/* Parameters: W_qkv [n, d] (Q heads, then K, then V: n = (H + 2 G) k),
 * b_qkv [n], W_o [d, H k], b_o [d] (biases when the layer has them). Init
 * U(+-1/sqrt(fan_in)), biases 0; `tensor` numbers its first tensor. */
void st_attn_init(const StAttnGeom *a, float *params, uint64_t seed, const StLayer *l, int tensor);

/* Saved: qkv [B T n] after RoPE, the output y [B T H k] (the projection's
 * input), flash's fp32 log-sum-exp [B H T] or the dense probabilities
 * [H B T T]; the probabilities come from `again` (selective
 * recomputation drops them) when it is not the main carve. */
typedef struct {
  void *qkv, *y, *probs;
  float *lse;
} StAttnSaved;

void st_attn_layout(const StAttnGeom *a, StKDtype dt, StCarve *main, StCarve *again,
                    StAttnSaved *s);
size_t st_attn_fwd_work(const StAttnGeom *a, StKDtype dt);
size_t st_attn_bwd_work(const StAttnGeom *a, StKDtype dt);
size_t st_attn_again_work(const StAttnGeom *a, StKDtype dt);
/* out [B T d] = the attention of x [B T d] (x is kept by the caller). */
int st_attn_forward(const StLayerCtx *c, const StAttnGeom *a, const void *params, const void *x,
                    void *out, const StAttnSaved *s, void *work);
/* dx (written, NULL skips) and the parameters' gradient (accumulated). */
int st_attn_backward(const StLayerCtx *c, const StAttnGeom *a, const void *params,
                     const void *x, const StAttnSaved *s, const void *dout, void *dx,
                     void *dparams, void *work);
/* The attention's two projections alone, for a pass in steps (context
 * parallelism: the core between them runs chunk by chunk): qkv [B T n] =
 * x W_qkv^T (+ b) without RoPE; out [B T d] = y W_o^T (+ b); their
 * backwards (dqkv after RoPE's inverse; dx written, NULL skips; the
 * weights' gradients accumulated). */
int st_attn_qkv_fwd(const StLayerCtx *c, const StAttnGeom *a, const void *params, const void *x,
                    void *qkv);
int st_attn_out_fwd(const StLayerCtx *c, const StAttnGeom *a, const void *params, const void *y,
                    void *out);
int st_attn_out_bwd(const StLayerCtx *c, const StAttnGeom *a, const void *params, const void *y,
                    const void *dout, void *dy, void *dparams);
int st_attn_qkv_bwd(const StLayerCtx *c, const StAttnGeom *a, const void *params, const void *x,
                    const void *dqkv, void *dx, void *dparams);
/* The dense probabilities again, from the saved qkv. */
int st_attn_recompute(const StLayerCtx *c, const StAttnGeom *a, const StAttnSaved *s, void *work);

/* An MLP d -> f -> d on `rows` rows: act 0 SiLU, 1 GELU; gated (SwiGLU,
 * GeGLU) or not (GELU MLP). */
typedef struct {
  int rows, d, f, gated, act, bias; /* f: this rank's share of ffn */
  int t;
  int bias_first, bias_rows;        /* rows the output bias b2 goes to */
} StMlpGeom;

/* From a layer's attrs: `ffn`, and `mlp` (a choice of sim/model's
 * StMlpKind) unless the type fixes the kind; `bias_key` names its bias flag. */
StMlpGeom st_mlp_geom(const StLayer *l, int rows, int d, const char *bias_key);
size_t st_mlp_param_count(const StMlpGeom *m);
/* Parameters: W1 [n f, d] (gated: the gate's rows, then the up's), b1 [n f],
 * W2 [d, f], b2 [d]. */
void st_mlp_spans(const StMlpGeom *m, int rank, StTpSpan *out, int *n);
void st_mlp_init(const StMlpGeom *m, float *params, uint64_t seed, const StLayer *l, int tensor);
/* Saved: u [rows, n f] (the first projection's output), h [rows, f]. */
typedef struct {
  void *u, *h;
} StMlpSaved;

void st_mlp_layout(const StMlpGeom *m, StKDtype dt, StCarve *cv, StMlpSaved *s);
size_t st_mlp_bwd_work(const StMlpGeom *m, StKDtype dt);
int st_mlp_forward(const StLayerCtx *c, const StMlpGeom *m, const void *params, const void *x,
                   void *out, const StMlpSaved *s);
int st_mlp_backward(const StLayerCtx *c, const StMlpGeom *m, const void *params, const void *x,
                    const StMlpSaved *s, const void *dout, void *dx, void *dparams, void *work);

/* A norm over d features of `rows` rows: 0 RMSNorm (scale), 1 LayerNorm
 * (scale, shift), 2 none (a copy); its fp32 statistics are saved. */
typedef struct {
  int kind, rows, d;
  float *mean, *rstd;
} StNormPart;

size_t st_norm_param_count(int kind, int d);
void st_norm_init(int kind, int d, float *params);
void st_norm_layout(StNormPart *n, StCarve *cv);
int st_norm_forward(const StLayerCtx *c, const StNormPart *n, const void *params, const void *x,
                    void *y);
/* dx (written, NULL skips), the scale's (and shift's) gradient accumulated. */
int st_norm_backward(const StLayerCtx *c, const StNormPart *n, const void *params, const void *x,
                     const void *dy, void *dx, void *dparams);

/* ---- tensor parallelism (layer_split.c) -------------------------------------------- */

/* A span (layer_impl.h) appended to out[*n] (nothing when empty). */
void st_span_add(StTpSpan *out, int *n, size_t whole, size_t part, size_t len, size_t rows,
                 size_t whole_ld, size_t part_ld, StTpSpanKind kind);
/* Moves spans [from, n) by the offsets of a part inside a larger vector. */
void st_spans_shift(StTpSpan *spans, int from, int n, size_t whole, size_t part);
/* The rows [first, first + count) of `out` ([rows, cols] in dt) += bias [cols]. */
int st_bias_rows(const StLayerCtx *c, void *out, const void *bias, int first, int count,
                 int cols);
