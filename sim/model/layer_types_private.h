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
extern const StLayerType st_layer_conv2d_rect;
extern const StLayerType st_layer_concat;
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

/* layer_llm.c */
extern const StLayerType st_layer_rmsnorm;
extern const StLayerType st_layer_swiglu;
extern const StLayerType st_layer_geglu;

/* layer_attention.c */
extern const StLayerType st_layer_attention;

/* layer_decoder.c */
extern const StLayerType st_layer_llama_block;

/* layer_mla.c */
extern const StLayerType st_layer_mla_block;

/* layer_moe.c */
extern const StLayerType st_layer_moe_router;
extern const StLayerType st_layer_moe_expert;

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

/* ---- parts of the LLM layers (layer_attention.c, layer_llm.c) -----------
 *
 * The standalone attention and MLP layers, the decoder block and the MoE
 * experts are built of the same parts; each part gives one rank's numbers
 * (StLayer.tp, layer_type.h) and what its executor implementation
 * (exec/layers/layer_llm_parts.c) keeps and takes, so a block costs its
 * parts plus its own tensors. Sizes in elements unless named _bytes; `e`
 * is the activation element size. FLOPs count matrix products only (a
 * multiply-add is 2), as Narayanan et al. 2021 count a block: norms, RoPE,
 * softmax and gating are memory-bound and left to the io estimate. */

/* Scratch and kept tensors of a part over one micro-batch, in bytes, each
 * tensor ST_LAYER_ALIGN-aligned as the executor carves them. */
typedef struct {
  int64_t saved;   /* kept to the backward (includes `again`) */
  int64_t again;   /* of saved, what selective recomputation of the part's op drops: the
                      attention's scores (core_attn), the MLP's activation output
                      (mlp_act) */
  int64_t fwd, bwd, again_work; /* scratch of the forward, backward, recompute */
} StPartMemory;

/* The attention attrs, shared by `attention` and `llama_block`. */
#define ST_ATTN_ATTRS                                                                          \
  {.key = "heads", .min = 1, .required = TRUE, .help = "query heads"},                         \
  {.key = "kv_heads", .min = 0,                                                                \
   .help = "key/value heads (grouped-query attention; 1: multi-query); 0 = heads"},           \
  {.key = "head_dim", .min = 0, .help = "width of a head; 0 = dim / heads"},                    \
  {.key = "causal", .fallback = 1, .flag = TRUE,                                               \
   .help = "mask future tokens; flash then skips the masked half (FLOPs too)"},                 \
  {.key = "flash", .fallback = 1, .flag = TRUE,                                                \
   .help = "flash-style: no s x s scores kept, backward recomputes them (2.5x fwd FLOPs)"},     \
  {.key = "rope_theta", .fallback = 10000, .min = 0, .max = INT64_C(1) << 40,                   \
   .help = "rotary position embedding base (LLaMA 10000, Llama-3 500000); 0 = none"},          \
  {.key = "rope_dim", .min = 0,                                                                \
   .help = "leading dims of each head that rotate (GPT-NeoX 0.25 x head_dim); 0 = head_dim"},  \
  {.key = "qkv_bias", .flag = TRUE, .help = "biases on Q, K, V (Qwen2, GPT-NeoX)"},             \
  {.key = "out_bias", .flag = TRUE, .help = "bias on the output projection (GPT-NeoX)"},        \
  {.key = "window", .min = 0,                                                                  \
   .help = "sliding window: a token sees the last `window` (Mistral 7B: 4096; causal, flash); " \
           "0 = all"}

/* One rank's attention: over s tokens, heads / tp query and kv_heads / tp
 * key/value heads of head_dim, on a [rows, d] input (rows = s, or s / tp
 * under sequence parallelism). */
typedef struct {
  int64_t s, rows, d;
  int64_t keys;  /* tokens each query may attend: s, or cp s on a context-parallel rank */
  int64_t cp;    /* context-parallel ranks (1: none): the core does 1 / cp of the sequence's */
  int64_t heads, kv_heads, head_dim, rope_dim; /* heads and kv_heads: this rank's */
  int64_t window;                              /* sliding window, 0 = none */
  gboolean causal, flash, qkv_bias, out_bias;
} StAttnPart;

/* In derive(): rewrites kv_heads, head_dim and rope_dim left 0 to what they
 * mean for an input [rows, d], and fails when the heads do not divide by
 * kv_heads or by the tensor-parallel ranks. */
gboolean st_attn_resolve(StLayer *layer, int64_t rows, int64_t d, GError **error);
/* The rank's attention of a derived layer on an input [rows, d]. */
void st_attn_part(const StLayer *layer, int64_t rows, int64_t d, StAttnPart *p);
int64_t st_attn_params(const StAttnPart *p);
/* Per sample: forward, backward, and the selective recompute (QK^T: the
 * scores again; 0 for flash, whose backward already recomputes them). */
void st_attn_flops(const StAttnPart *p, double *fwd, double *bwd, double *again);
/* Per sample, forward: the QKV projection, the output projection, the core. */
void st_attn_flops_split(const StAttnPart *p, double *qkv, double *out, double *core);
/* Bytes per sample kept besides the input, and of them what selective
 * recomputation drops (Korthikanti et al.'s count; see layer_attention.c). */
void st_attn_kept(const StAttnPart *p, int e, int64_t *kept, int64_t *again);
void st_attn_memory(const StAttnPart *p, int batch, int e, StPartMemory *m);

typedef enum {
  ST_MLP_SWIGLU = 0, /* down(silu(gate(x)) * up(x)): LLaMA, Mistral, Qwen2 (Shazeer 2020) */
  ST_MLP_GEGLU,      /* down(gelu(gate(x)) * up(x)): Gemma (Shazeer 2020) */
  ST_MLP_GELU,       /* fc2(gelu(fc1(x))): GPT-2, GPT-NeoX */
  ST_MLP_NONE,       /* no MLP (a decoder block's attention half) */
} StMlpKind;

/* "swiglu", "geglu", "gelu", "none", in StMlpKind order. */
extern const char *const ST_MLP_NAMES[];

/* One rank's MLP: d -> ffn / tp -> d on `rows` tokens per sample. */
typedef struct {
  int64_t rows, d, f; /* f: this rank's */
  StMlpKind kind;
  gboolean bias;
} StMlpPart;

/* The rank's MLP of `ffn` (whole) for a layer: fails when tp does not
 * divide ffn (naming `ffn_key`). */
gboolean st_mlp_part(const StLayer *layer, const char *ffn_key, int64_t rows, int64_t d,
                     int64_t ffn, StMlpKind kind, gboolean bias, StMlpPart *p, GError **error);
int64_t st_mlp_params(const StMlpPart *p);
double st_mlp_fwd_flops(const StMlpPart *p);
int64_t st_mlp_kept(const StMlpPart *p, int e);
void st_mlp_memory(const StMlpPart *p, int batch, int e, StPartMemory *m);

typedef enum {
  ST_NORM_RMS = 0, /* RMSNorm (Zhang and Sennrich 2019): scale, no shift, no mean */
  ST_NORM_LAYER,   /* LayerNorm with scale and shift */
  ST_NORM_NONE,
} StNormKind;

extern const char *const ST_NORM_NAMES[];

/* Parameters of a norm over d features, and what it saves over `rows`
 * tokens: fp32 1/rms (RMSNorm) or mean and 1/std (LayerNorm). */
int64_t st_norm_params(StNormKind kind, int64_t d);
int64_t st_norm_saved(StNormKind kind, int64_t rows);

/* Fails unless `value` is a multiple of the layer's tensor-parallel ranks. */
gboolean st_layer_check_tp(const StLayer *layer, const char *key, int64_t value, GError **error);
