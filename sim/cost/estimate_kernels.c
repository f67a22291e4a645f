/* estimate_kernels.c: the kernels of a layer pass, per layer type (see
 * estimate.h). One table maps a type's name to the function that lists its
 * kernels (the convolution family in estimate_conv.c, over the primitives of
 * estimate_list.h); a type not in it gets the generic list at the end.
 *
 * What each pass launches, as PyTorch does on cuBLAS / cuDNN:
 * - a linear x[R, in] W[in, out]: forward one GEMM (R x out, K = in);
 *   backward the input's gradient (R x in, K = out) and the weight's
 *   (in x out, K = R); a bias adds one memory pass backward (its gradient).
 * - a convolution as an implicit GEMM per group: forward (B Ho Wo x Cout/g,
 *   K = Cin/g k^2); backward data (B H W x Cin/g, K = Cout/g k^2 / s^2 for a
 *   stride s) and weights (Cout/g x Cin/g k^2, K = B Ho Wo).
 * - attention: fused (flash) as one kernel forward and one backward of the
 *   layer's core FLOPs (4 s^2 d_head per head forward, 2.5x backward, causal
 *   pairs only), or unfused as batched GEMMs QK^T and PV around a softmax.
 * - element-wise kernels (norms, activations, residual adds, dropout,
 *   RoPE, the loss) as the framework runs them (cost/framework.h): fused,
 *   one kernel at bytes = passes over its tensor (a norm reads its input
 *   twice, statistics then normalise, and writes once forward: 3 passes, 5
 *   backward; an activation 2 forward, 3 backward; an add 3 forward), or in
 *   PyTorch eager, op by op as the reference code writes it, each op a
 *   kernel reading and writing its tensors (an RMSNorm upcast to fp32,
 *   squared, averaged, scaled, cast back and weighted: 6 kernels; RoPE on
 *   complex fp32: 3 per tensor; SwiGLU's silu and product: 2; the loss's
 *   cast, log-softmax and gather: 3), autograd's backward of each reading
 *   its saved inputs and the incoming gradient: 1.6 times the forward's
 *   bytes (a unary op's 3 passes to 2, a product's 5 to 3) in 1.3 times
 *   the kernels.
 * - a mixture-of-experts expert: its MLP on its C gathered rows per sample,
 *   the stream copied on and the gathered rows moved in and out.
 * - a selective recompute (the attention scores, an MLP's activation, the
 *   norms' outputs again): a shapeless GEMM of the layer's again_flops and
 *   a memory pass over act_again, twice, summed over the chosen ops.
 * - under --precision fp8 (StComputeCtx.fp8), Transformer Engine's recipe as
 *   Megatron-LM runs it (te.Linear / LayerNormLinear / LayerNormMLP in the
 *   transformer layers): the linears of attention (QKV, the output
 *   projection) and of the MLPs (fc1 / gate-up, fc2; experts' too) run their
 *   three GEMMs (forward, dgrad, wgrad) on FP8 inputs, 1 byte each, with a
 *   bf16 output; forward, a fused cast-transpose of the input (reads it,
 *   writes it and its transpose in FP8: TE's fp8_cast_transpose_fused,
 *   transformer_engine/pytorch/module/linear.py); backward, the same of the
 *   output's gradient. The weight's cast (its cached FP8 copy and
 *   transpose) runs on each step's first micro-batch only (Megatron-LM
 *   passes TE is_first_microbatch): the optimizer step's traffic carries it
 *   (strategy_common.c, st_state_bytes). Attention's core (flash
 *   or the BMMs), norms, activations, the embedding, the LM head and the
 *   loss stay in 16 bits (Megatron-LM builds the output layer with its own
 *   ColumnParallelLinear, outside TE's fp8_autocast).
 * Shapes are one rank's under tensor parallelism (attrs / layer->tp). The
 * model's first layer computes no input gradient (frameworks do not ask one
 * for the samples), though its layer FLOPs count one.
 *
 * A backward split in two (ST_PASS_BWD_INPUT, B, and ST_PASS_BWD_WEIGHT, W:
 * zero-bubble pipelines) is the backward's list cut in two: W is the
 * kernels that compute a weight's gradient and nothing else, the wgrad
 * GEMMs of linears and convolutions, a bias's reduction and the input a
 * convolution transposes again for its wgrad; B is everything else (the
 * dgrad GEMMs, attention's backward, the element-wise gradients, a norm's
 * fused backward with its scale's gradient: Qi et al. leave what is not a
 * GEMM in B too). A type without a list of its own splits its one kernel
 * by st_estimate_weight_share.
 */
#include "cost/estimate_list.h"

#include <math.h>
#include <string.h>

#include "cost/framework.h"
#include "model/layer_type.h"

/* ---- building the list ---------------------------------------------------------- */


void
ek_push(EkList *l, StKernel k)
{
  if ((l->only == ST_PASS_BWD_INPUT && l->weights_now) ||
      (l->only == ST_PASS_BWD_WEIGHT && !l->weights_now))
    return;
  if (l->out->n < ST_KERNELS_MAX)
    l->out->k[l->out->n++] = k;
  else /* never for the shipped types; keep the work, as one more pass */
    l->out->k[ST_KERNELS_MAX - 1].bytes += k.bytes;
}

void
ek_gemm(EkList *l, StKernelClass cls, double m, double n, double k, double count)
{
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0)
    return;
  double in_bytes = l->fp8_now ? 1.0 : l->e; /* FP8 inputs, a 16-bit output */
  ek_push(l, (StKernel){cls, m, n, k, count, 2.0 * m * n * k * count,
                     ((m * k + k * n) * in_bytes + m * n * l->e) * count, FALSE, l->fp8_now,
                     l->grouped_now});
}

/* One memory-bound kernel making `passes` passes over `elems` elements. */
void
ek_mem(EkList *l, StKernelClass cls, double elems, double passes)
{
  if (elems > 0 && passes > 0)
    ek_push(l, (StKernel){cls, 0, 0, 0, 0, 0, elems * passes * l->e, FALSE, FALSE, FALSE});
}

/* A linear of rows x in -> rows x out. */
static void
linear(EkList *l, double rows, double in, double out, gboolean bias)
{
  if (l->fwd) {
    ek_gemm(l, ST_KERNEL_GEMM, rows, out, in, 1);
    return;
  }
  if (!l->no_dgrad)
    ek_gemm(l, ST_KERNEL_GEMM, rows, in, out, 1);
  l->weights_now = TRUE;
  ek_gemm(l, ST_KERNEL_GEMM, in, out, rows, 1);
  if (bias)
    ek_mem(l, ST_KERNEL_MEMORY, rows * out, 1);
  l->weights_now = FALSE;
}

/* A fused cast of `elems` 16-bit elements into FP8 and its FP8 transpose:
 * reads e, writes 2 bytes per element. */
static void
fp8_cast_transpose(EkList *l, double elems)
{
  if (elems > 0)
    ek_push(l, (StKernel){ST_KERNEL_MEMORY, 0, 0, 0, 0, 0, elems * (l->e + 2.0), FALSE, FALSE, FALSE});
}

/* A linear of a transformer layer: Transformer Engine's module, its GEMMs in
 * FP8 under --precision fp8 with the casts the header lists, else linear(). */
static void
te_linear(EkList *l, double rows, double in, double out, gboolean bias)
{
  if (!l->fp8) {
    linear(l, rows, in, out, bias);
    return;
  }
  fp8_cast_transpose(l, rows * (l->fwd ? in : out));
  l->fp8_now = TRUE;
  linear(l, rows, in, out, bias);
  l->fp8_now = FALSE;
}

/* An op PyTorch eager runs as `k` kernels moving `bytes_per_elem` bytes per
 * element forward; backward (autograd) 1.6 times the bytes in 1.3 times the
 * kernels (the header says why). */
static void
eager(EkList *l, double elems, int k, double bytes_per_elem)
{
  int n = l->fwd ? k : (int)ceil(1.3 * k);
  double bytes = elems * bytes_per_elem * (l->fwd ? 1.0 : 1.6);
  for (int i = 0; i < n && elems > 0; i++)
    ek_push(l, (StKernel){ST_KERNEL_MEMORY, 0, 0, 0, 0, 0, bytes / n, FALSE, FALSE, FALSE});
}

/* fp32 casts an eager op adds around its 16-bit tensors: bytes per element. */
static double
casts(const EkList *l, int n)
{
  return l->e < 4 ? n * (l->e + 4.0) : 0.0;
}

/* A LayerNorm (PyTorch's native kernel, fused in every framework), or an
 * RMSNorm (`rms`), which eager code writes op by op: x.float(), pow(2),
 * mean, x * rsqrt(mean + eps), .type_as(x), * weight. Fused, three passes
 * forward: the roofline's count (input, output and what it saves), which
 * the estimate never beats; a fused RMSNorm moves two (QuACK's and Liger's
 * benchmarks), PyTorch's native LayerNorm reaches 52-60 % of the bandwidth,
 * about three passes' time. */
static void
norm_of(EkList *l, double elems, gboolean rms)
{
  if (!rms || (l->fused & ST_FUSE_NORM))
    ek_mem(l, ST_KERNEL_MEMORY, elems, l->fwd ? 3 : 5);
  else
    eager(l, elems, l->e < 4 ? 6 : 4, casts(l, 2) + 8 + 4 + 8 + 2 * l->e);
}

void
ek_norm(EkList *l, double elems)
{
  norm_of(l, elems, FALSE);
}

void
ek_activation(EkList *l, double elems)
{
  ek_mem(l, ST_KERNEL_MEMORY, elems, l->fwd ? 2 : 3);
}

/* A gated MLP's silu(gate) x up over `elems` outputs: one kernel fused,
 * silu then a product in eager. */
static void
glu(EkList *l, double elems)
{
  if (l->fused & ST_FUSE_ACTIVATION)
    ek_mem(l, ST_KERNEL_MEMORY, elems, l->fwd ? 3 : 5);
  else
    eager(l, elems, 2, 5 * l->e);
}

/* Rotary embedding of Q and K (`elems` in all): one kernel fused, or
 * torchtitan's complex form per tensor: a cast to fp32, a complex product
 * with the frequencies, a cast back. */
static void
rope(EkList *l, double elems)
{
  if (l->fused & ST_FUSE_ROPE)
    ek_mem(l, ST_KERNEL_MEMORY, elems, 2);
  else
    eager(l, elems, 6, casts(l, 2) + 16);
}

void
ek_residual_add(EkList *l, double elems)
{
  if (l->fwd)
    ek_mem(l, ST_KERNEL_MEMORY, elems, 3);
}

/* ---- families ----------------------------------------------------------------------- */

/* Rows (tokens) of a [tokens, features] or [features] input. */
static double
rows_of(const StLayer *layer)
{
  return layer->in_shape.n_dims >= 2 ? (double)layer->in_shape.dims[0] : 1.0;
}

static double
features_of(const StShape *s)
{
  return (double)s->dims[s->n_dims - 1];
}

static void
linear_layer(const StLayer *layer, double b, EkList *l)
{
  linear(l, b * rows_of(layer), features_of(&layer->in_shape), features_of(&layer->out_shape),
         st_layer_attr(layer, "bias", 0) != 0);
}

/* Attention's core over `count` = batch x heads of s queries, with
 * `pairs` (query, key) pairs each and head dim hd: fused, or unfused as
 * QK^T, softmax, PV (and their gradients). */
static void
attention_core(EkList *l, double count, double s, double pairs, double hd, gboolean fused)
{
  double core = 4.0 * pairs * hd * count; /* QK^T and PV forward */
  if (fused) {
    ek_push(l, (StKernel){ST_KERNEL_ATTENTION, s, pairs / s, hd, count, l->fwd ? core : 2.5 * core,
                       (l->fwd ? 4.0 : 8.0) * s * hd * count * l->e, !l->fwd, FALSE, FALSE});
    return;
  }
  double keys = pairs / s;
  if (l->fwd) {
    ek_gemm(l, ST_KERNEL_GEMM, s, keys, hd, count);
    ek_mem(l, ST_KERNEL_MEMORY, count * s * keys, 2);
    ek_gemm(l, ST_KERNEL_GEMM, s, hd, keys, count);
    return;
  }
  ek_gemm(l, ST_KERNEL_GEMM, s, keys, hd, count);   /* dP = dO V^T */
  ek_gemm(l, ST_KERNEL_GEMM, keys, hd, s, count);   /* dV = P^T dO */
  ek_mem(l, ST_KERNEL_MEMORY, count * s * keys, 3); /* softmax backward */
  ek_gemm(l, ST_KERNEL_GEMM, s, hd, keys, count);   /* dQ = dS K */
  ek_gemm(l, ST_KERNEL_GEMM, keys, hd, s, count);   /* dK = dS^T Q */
}

/* What the attention layers share: s tokens (rows x tp under sequence
 * parallelism), this rank's heads. */
typedef struct {
  double rows, s, d, heads, kv, hd, pairs;
  gboolean flash, qkv_bias, out_bias, rope;
} Attn;

static Attn
attn_of(const StLayer *layer)
{
  double t = MAX(layer->tp, 1);
  Attn a;
  a.rows = rows_of(layer);
  a.s = a.rows * (layer->sp ? t : 1);
  a.d = features_of(&layer->in_shape);
  a.heads = (double)st_layer_attr(layer, "heads", 1) / t;
  a.kv = (double)st_layer_attr(layer, "kv_heads", st_layer_attr(layer, "heads", 1)) / t;
  a.hd = (double)st_layer_attr(layer, "head_dim", 0);
  if (a.hd <= 0)
    a.hd = a.d / (double)st_layer_attr(layer, "heads", 1);
  a.flash = st_layer_attr(layer, "flash", 1) != 0;
  /* A context-parallel rank's queries attend the whole sequence's keys;
   * causal, it does 1 / cp of the pairs (layer_context.c) */
  double cp = MAX(layer->cp, 1), keys = a.s * cp;
  a.pairs = a.s * keys;
  if (st_layer_attr(layer, "causal", 1) && a.flash) {
    double w = st_layer_attr(layer, "window", 0) > 0
                 ? MIN((double)st_layer_attr(layer, "window", 0), keys)
                 : keys;
    a.pairs = (w * (w + 1.0) / 2.0 + (keys - w) * w) / cp;
  }
  a.qkv_bias = st_layer_attr(layer, "qkv_bias", 0) != 0;
  a.out_bias = st_layer_attr(layer, "out_bias", 0) != 0;
  a.rope = st_layer_attr(layer, "rope_theta", 0) > 0;
  return a;
}

static void
attention_part(EkList *l, double b, const Attn *a, gboolean fused)
{
  double q = a->heads * a->hd, n = q + 2.0 * a->kv * a->hd;
  te_linear(l, b * a->s, a->d, n, a->qkv_bias);
  if (a->rope) /* rotate Q and K in place; backward their gradients */
    rope(l, b * a->s * (a->heads + a->kv) * a->hd);
  attention_core(l, b * a->heads, a->s, a->pairs, a->hd, fused);
  te_linear(l, b * a->s, q, a->d, a->out_bias);
}

/* A fused kernel runs where the GPU has a measured one; else the GEMMs. */
static gboolean
fused_ok(const StComputeCtx *ctx, const Attn *a)
{
  const StGpuPerf *p = ctx->cluster->gpu.perf;
  return a->flash && p != NULL && p->attention[ST_ATTN_FLASH2].n > 0;
}

static void
attention_layer(const StComputeCtx *ctx, const StLayer *layer, double b, EkList *l)
{
  Attn a = attn_of(layer);
  attention_part(l, b, &a, fused_ok(ctx, &a));
}

/* An MLP d -> f -> d on `rows`, gated (two up halves) or not. */
static void
mlp(EkList *l, double rows, double d, double f, gboolean gated, gboolean bias)
{
  te_linear(l, rows, d, (gated ? 2.0 : 1.0) * f, bias);
  if (gated)
    glu(l, rows * f);
  else
    ek_activation(l, rows * f);
  te_linear(l, rows, f, d, bias);
}

static double
tp_ffn(const StLayer *layer)
{
  return (double)st_layer_attr(layer, "ffn", 0) / MAX(layer->tp, 1);
}

static void
gated_mlp_layer(const StLayer *layer, double b, EkList *l)
{
  double t = MAX(layer->tp, 1), s = rows_of(layer) * (layer->sp ? t : 1);
  mlp(l, b * s, features_of(&layer->in_shape), tp_ffn(layer), TRUE,
      st_layer_attr(layer, "bias", 0) != 0);
}

static void
llama_block_layer(const StComputeCtx *ctx, const StLayer *layer, double b, EkList *l)
{
  Attn a = attn_of(layer);
  double elems = b * a.rows * a.d;
  const char *norm_kind = st_layer_attr_choice(layer, "norm");
  gboolean rms = norm_kind == NULL || strcmp(norm_kind, "rmsnorm") == 0;
  norm_of(l, elems, rms);
  attention_part(l, b, &a, fused_ok(ctx, &a));
  ek_residual_add(l, elems);
  const char *kind = st_layer_attr_choice(layer, "mlp");
  if (kind == NULL || strcmp(kind, "none") != 0) {
    norm_of(l, elems, rms);
    mlp(l, b * a.s, a.d, tp_ffn(layer), kind == NULL || strcmp(kind, "gelu") != 0,
        st_layer_attr(layer, "mlp_bias", 0) != 0);
    ek_residual_add(l, elems);
  }
}

/* DeepSeek's block of multi-head latent attention (sim/model/layer_mla.c):
 * the down projections on all s rows (whole on every tensor rank), the
 * latents' RMSNorms, the up projections and the output by the rank's
 * heads, RoPE on the heads' r dims and the shared key's, and the core,
 * priced at the mean of its two head widths (n + r for QK^T, v for PV):
 * the same forward FLOPs; a fused backward then carries 2.5 x them where
 * the layer counts 2 x + QK^T (within 4 % at DeepSeek's 192 and 128). */
static void
mla_block_layer(const StComputeCtx *ctx, const StLayer *layer, double b, EkList *l)
{
  double t = MAX(layer->tp, 1), rows = rows_of(layer), s = rows * (layer->sp ? t : 1);
  double d = features_of(&layer->in_shape);
  double heads = (double)st_layer_attr(layer, "heads", 1) / t;
  double qr = (double)st_layer_attr(layer, "q_lora_rank", 0);
  double c = (double)st_layer_attr(layer, "kv_lora_rank", 1);
  double n = (double)st_layer_attr(layer, "qk_nope_head_dim", 1);
  double r = (double)st_layer_attr(layer, "qk_rope_head_dim", 0);
  double v = (double)st_layer_attr(layer, "v_head_dim", 1);
  double pairs = st_layer_attr(layer, "causal", 1) ? s * (s + 1.0) / 2.0 : s * s;
  double elems = b * rows * d, bs = b * s;
  norm_of(l, elems, TRUE);
  if (qr > 0) {
    te_linear(l, bs, d, qr, FALSE);
    norm_of(l, bs * qr, TRUE);
    te_linear(l, bs, qr, heads * (n + r), FALSE);
  } else {
    te_linear(l, bs, d, heads * (n + r), FALSE);
  }
  te_linear(l, bs, d, c + r, FALSE);
  norm_of(l, bs * c, TRUE);
  te_linear(l, bs, c, heads * (n + v), FALSE);
  if (r > 0)
    rope(l, bs * (heads + 1.0) * r);
  Attn flash = {.flash = TRUE};
  attention_core(l, b * heads, s, pairs, (n + r + v) / 2.0, fused_ok(ctx, &flash));
  te_linear(l, bs, heads * v, d, FALSE);
  ek_residual_add(l, elems);
  const char *kind = st_layer_attr_choice(layer, "mlp");
  if (kind == NULL || strcmp(kind, "none") != 0) {
    norm_of(l, elems, TRUE);
    mlp(l, bs, d, tp_ffn(layer), kind == NULL || strcmp(kind, "gelu") != 0, FALSE);
    ek_residual_add(l, elems);
  }
}

/* GPT-2/3's pre-LN block: unfused attention with biases, GELU MLP. */
static void
transformer_block_layer(const StLayer *layer, double b, EkList *l)
{
  double t = MAX(layer->tp, 1), rows = rows_of(layer), s = rows * (layer->sp ? t : 1);
  double d = features_of(&layer->in_shape);
  double heads = (double)st_layer_attr(layer, "heads", 1);
  Attn a = {rows, s, d, heads / t, heads / t, d / heads, s * s, FALSE, TRUE, TRUE, FALSE};
  double elems = b * rows * d;
  ek_norm(l, elems);
  te_linear(l, b * s, d, 3.0 * a.heads * a.hd, TRUE);
  attention_core(l, b * a.heads, s, a.pairs, a.hd, FALSE);
  te_linear(l, b * s, a.heads * a.hd, d, TRUE);
  ek_residual_add(l, elems);
  ek_norm(l, elems);
  mlp(l, b * s, d, tp_ffn(layer), FALSE, TRUE);
  ek_residual_add(l, elems);
  if (st_layer_attr(layer, "dropout", 0)) {
    ek_mem(l, ST_KERNEL_MEMORY, b * a.heads * s * s, 2);
    ek_mem(l, ST_KERNEL_MEMORY, 2 * elems, 2);
  }
}

/* Under sequence parallelism the head gathers the group's tokens first:
 * every token's logits over this rank's vocab / t. */
static void
lm_head_layer(const StLayer *layer, double b, EkList *l)
{
  double t = MAX(layer->tp, 1);
  linear(l, b * rows_of(layer) * (layer->sp ? t : 1), features_of(&layer->in_shape),
         (double)st_layer_attr(layer, "vocab", 1) / t, st_layer_attr(layer, "bias", 0) != 0);
}

/* A mixture-of-experts expert (layer_moe.c): it copies the router's stream
 * (2 d + E per token) on and back (as stagger's executor chains experts;
 * a framework's token dispatcher does not: ST_FUSE_DISPATCH), gathers its C rows per sample, runs its
 * MLP on them (the shape that decides its GEMMs' efficiency: C rows, not
 * the sequence's), and adds gate x output back in. Under sequence
 * parallelism the MLP runs on the tensor group's t C rows gathered (as the
 * head does; layer_llm.c's st_mlp_part counts them), the gather and the
 * add on the rank's own C. Under ST_FUSE_GROUPED_EXPERTS its GEMMs are
 * groups of the rank's grouped GEMMs (StKernel.grouped). */
static void
moe_expert_layer(const StLayer *layer, double b, EkList *l)
{
  double t = MAX(layer->tp, 1);
  double stream = features_of(&layer->in_shape);
  double d = (stream - (double)st_layer_attr(layer, "experts", 1)) / 2;
  double rows = b * (double)st_layer_attr(layer, "capacity", 1);
  const char *kind = st_layer_attr_choice(layer, "mlp");
  if (!(l->fused & ST_FUSE_DISPATCH))
    ek_mem(l, ST_KERNEL_MEMORY, b * rows_of(layer) * stream, 2);
  ek_mem(l, ST_KERNEL_MEMORY, rows * d, 2);
  l->grouped_now = (l->fused & ST_FUSE_GROUPED_EXPERTS) != 0;
  mlp(l, rows * (layer->sp ? t : 1), d, tp_ffn(layer), kind == NULL || strcmp(kind, "gelu") != 0,
      st_layer_attr(layer, "bias", 0) != 0);
  l->grouped_now = FALSE;
  ek_mem(l, ST_KERNEL_MEMORY, rows * d, 3);
}

/* The layer's own FLOPs (a few per element) on the first kernel it pushed
 * since `first`, so that the kernels carry them. */
static void
carry_flops(EkList *l, const StLayer *layer, double b, int first)
{
  if (first < l->out->n)
    l->out->k[first].flops += b * (l->fwd ? layer->fwd_flops : layer->bwd_flops);
}

/* A standalone norm (a model's final one). */
static void
rmsnorm_layer(const StLayer *layer, double b, EkList *l)
{
  int first = l->out->n;
  norm_of(l, b * (double)st_shape_elems(&layer->in_shape), TRUE);
  carry_flops(l, layer, b, first);
}

static void
layernorm_layer(const StLayer *layer, double b, EkList *l)
{
  int first = l->out->n;
  norm_of(l, b * (double)st_shape_elems(&layer->in_shape), FALSE);
  carry_flops(l, layer, b, first);
}

/* Softmax cross-entropy over the logits: fused, one kernel each way that
 * reads the logits and keeps the fp32 softmax, then reads it and the logits
 * again into the gradient; or eager on fp32 logits (a cast, a log-softmax
 * that reads its input twice, for the statistics and for the output, a
 * gather), or eager in the logits' dtype. */
static void
loss_layer(const StLayer *layer, double b, EkList *l)
{
  double elems = b * (double)st_shape_elems(&layer->in_shape);
  int first = l->out->n;
  if (l->fused & ST_FUSE_LOSS)
    ek_push(l, (StKernel){ST_KERNEL_MEMORY, 0, 0, 0, 0, 0,
                       elems * (l->fwd ? l->e + 4 : 2 * l->e + 4), FALSE, FALSE, FALSE});
  else if (l->logits_fp32)
    eager(l, elems, 3, casts(l, 1) + 12);
  else
    eager(l, elems, 2, 3 * l->e);
  carry_flops(l, layer, b, first);
}

/* ---- the table ------------------------------------------------------------------------ */

typedef void (*PlainFn)(const StLayer *layer, double b, EkList *l);
typedef void (*CtxFn)(const StComputeCtx *ctx, const StLayer *layer, double b, EkList *l);

typedef struct {
  const char *type;
  PlainFn plain;
  CtxFn with_ctx;
  StKernelClass memory_class; /* for the memory-bound types: which bandwidth */
} Entry;

static const Entry TYPES[] = {
  {"linear", linear_layer, NULL, 0},
  {"lm_head", lm_head_layer, NULL, 0},
  {"conv2d", ek_conv2d_layer, NULL, 0},
  {"basic_block", ek_basic_block_layer, NULL, 0},
  {"bottleneck", ek_bottleneck_layer, NULL, 0},
  {"transformer_block", transformer_block_layer, NULL, 0},
  {"attention", NULL, attention_layer, 0},
  {"swiglu", gated_mlp_layer, NULL, 0},
  {"geglu", gated_mlp_layer, NULL, 0},
  {"llama_block", NULL, llama_block_layer, 0},
  {"mla_block", NULL, mla_block_layer, 0},
  {"moe_expert", moe_expert_layer, NULL, 0},
  {"rmsnorm", rmsnorm_layer, NULL, 0},
  {"layernorm", layernorm_layer, NULL, 0},
  {"softmax_cross_entropy", loss_layer, NULL, 0},
  {"maxpool2d", NULL, NULL, ST_KERNEL_POOL},
  {"avgpool2d", NULL, NULL, ST_KERNEL_POOL},
  {"adaptive_avgpool2d", NULL, NULL, ST_KERNEL_POOL},
  {NULL},
};

/* A type with no entry (or a memory-bound one): one kernel of its roofline
 * bytes when its FLOPs are a few per byte, else one matrix multiply of its
 * FLOPs without a shape (m = n = k = 0: the curve's large-size efficiency,
 * as a custom layer states nothing more). */
static void
generic(const StComputeCtx *ctx, const StLayer *layer, StPass pass, double b,
        StKernelClass memory_class, EkList *l)
{
  StWork w = {.pass = pass, .layer = layer, .batch = (int64_t)b};
  double flops = 0, bytes = 0;
  st_compute_work_traffic(ctx, &w, &flops, &bytes);
  if (l->only != ST_PASS_INVALID) { /* one half of the backward: its share */
    double share = st_estimate_weight_share(ctx, layer);
    double part = l->only == ST_PASS_BWD_WEIGHT ? share : 1.0 - share;
    flops *= part;
    bytes *= part;
    l->weights_now = l->only == ST_PASS_BWD_WEIGHT;
    if (flops <= 0 && bytes <= 0)
      return;
  }
  if (memory_class == ST_KERNEL_POOL || flops <= 8.0 * bytes) {
    ek_push(l, (StKernel){memory_class == ST_KERNEL_POOL ? ST_KERNEL_POOL : ST_KERNEL_MEMORY, 0, 0,
                       0, 0, flops, bytes, FALSE, FALSE, FALSE});
    return;
  }
  ek_push(l, (StKernel){ST_KERNEL_GEMM, 0, 0, 0, 1, flops, bytes, FALSE, FALSE, FALSE});
}

static const Entry *
entry_of(const StLayer *layer)
{
  for (const Entry *e = TYPES; layer->type != NULL && e->type != NULL; e++)
    if (strcmp(e->type, layer->type->name) == 0)
      return e;
  return NULL;
}

static void
one_pass(const StComputeCtx *ctx, const StLayer *layer, StPass pass, double b, StKernels *out)
{
  /* Half a backward: the backward's kernels, those of that half kept. */
  StPass only = pass == ST_PASS_BWD_INPUT || pass == ST_PASS_BWD_WEIGHT ? pass : ST_PASS_INVALID;
  if (only != ST_PASS_INVALID)
    pass = ST_PASS_BWD;
  /* Frameworks compute no gradient for the samples: the first layer's
   * backward skips its input's (its own first GEMM or convolution). */
  gboolean first = ctx->model != NULL && ctx->model->n_layers > 0 &&
                   layer == &ctx->model->layers[0];
  const StFramework *f = ctx->framework;
  const StGpuPerf *p = ctx->cluster->gpu.perf;
  gboolean tensor_cores = ctx->dtype != ST_DTYPE_FP32 ||
                          (p != NULL && p->conv.fp32_as_tf32 && ctx->cluster->gpu.tf32_flops > 0);
  EkList l = {out,
            st_dtype_bytes(ctx->dtype),
            pass != ST_PASS_BWD,
            first,
            f != NULL ? f->fused : ST_FUSE_ALL,
            f != NULL && f->logits_fp32,
            ctx->nchw && tensor_cores,
            ctx->fp8 && ctx->cluster->gpu.fp8_flops > 0,
            FALSE,
            only,
            FALSE,
            FALSE};
  const Entry *e = entry_of(layer);
  if (e != NULL && e->plain != NULL)
    e->plain(layer, b, &l);
  else if (e != NULL && e->with_ctx != NULL)
    e->with_ctx(ctx, layer, b, &l);
  else
    generic(ctx, layer, pass, b, e != NULL ? e->memory_class : ST_KERNEL_MEMORY, &l);
}

gboolean
st_estimate_kernels(const StComputeCtx *ctx, const StWork *work, StKernels *out)
{
  g_return_val_if_fail(ctx != NULL && work != NULL && out != NULL, FALSE);
  out->n = 0;
  if (work->layer == NULL || work->batch <= 0)
    return FALSE;
  double b = (double)work->batch;
  if (work->pass == ST_PASS_RECOMPUTE && work->again_ops != 0) {
    /* The scores again (QK^T: again_flops, a GEMM whose shape the layer
     * does not keep) and the softmax over them (act_again written and read
     * back): the roofline's FLOPs and bytes, as two kernels. */
    double flops = 0, bytes = 0;
    st_compute_work_traffic(ctx, work, &flops, &bytes);
    EkList l = {out,   st_dtype_bytes(ctx->dtype), TRUE, FALSE, ST_FUSE_ALL, FALSE, FALSE, FALSE,
              FALSE, ST_PASS_INVALID,            FALSE, FALSE};
    if (flops > 0)
      ek_push(&l, (StKernel){ST_KERNEL_GEMM, 0, 0, 0, 1, flops, 0, FALSE, FALSE, FALSE});
    if (bytes > 0)
      ek_push(&l, (StKernel){ST_KERNEL_MEMORY, 0, 0, 0, 0, 0, bytes, FALSE, FALSE, FALSE});
    return TRUE;
  }
  switch (work->pass) {
  case ST_PASS_FWD:
  case ST_PASS_BWD:
  case ST_PASS_BWD_INPUT:
  case ST_PASS_BWD_WEIGHT:
  case ST_PASS_RECOMPUTE:
    one_pass(ctx, work->layer, work->pass, b, out);
    return TRUE;
  case ST_PASS_FWDBWD:
    one_pass(ctx, work->layer, ST_PASS_FWD, b, out);
    one_pass(ctx, work->layer, ST_PASS_BWD, b, out);
    return TRUE;
  default:
    return FALSE;
  }
}

void
st_estimate_weight_split(const StComputeCtx *ctx, const StLayer *layer, double *flop_share,
                         double *byte_share, double *w_flops)
{
  g_return_if_fail(ctx != NULL && layer != NULL);
  const Entry *e = entry_of(layer);
  if (e == NULL || (e->plain == NULL && e->with_ctx == NULL)) {
    *flop_share = *byte_share = layer->params > 0 && layer->bwd_flops > 0
                                  ? MIN(layer->fwd_flops / layer->bwd_flops, 0.5)
                                  : 0;
    *w_flops = *flop_share * layer->bwd_flops;
    return;
  }
  StKernels all = {0}, weights = {0};
  one_pass(ctx, layer, ST_PASS_BWD, 1, &all);
  one_pass(ctx, layer, ST_PASS_BWD_WEIGHT, 1, &weights);
  double f_all = 0, f_w = 0, b_all = 0, b_w = 0;
  for (int i = 0; i < all.n; i++) {
    f_all += all.k[i].flops;
    b_all += all.k[i].bytes;
  }
  for (int i = 0; i < weights.n; i++) {
    f_w += weights.k[i].flops;
    b_w += weights.k[i].bytes;
  }
  *byte_share = b_all > 0 ? b_w / b_all : 0;
  *flop_share = f_all > 0 ? f_w / f_all : *byte_share;
  *w_flops = f_w;
}

double
st_estimate_weight_share(const StComputeCtx *ctx, const StLayer *layer)
{
  double f = 0, b, w;
  st_estimate_weight_split(ctx, layer, &f, &b, &w);
  return f;
}

int64_t
st_compute_fp8_weights(const StComputeCtx *ctx, const StLayer *layer, int *linears)
{
  g_return_val_if_fail(ctx != NULL && layer != NULL, 0);
  if (linears != NULL)
    *linears = 0;
  if (!ctx->fp8)
    return 0;
  /* One sample's forward: each FP8 GEMM is a linear's x[rows, in] W[in, out]. */
  StKernels ks = {0};
  one_pass(ctx, layer, ST_PASS_FWD, 1, &ks);
  double w = 0;
  for (int i = 0; i < ks.n; i++)
    if (ks.k[i].fp8) {
      w += ks.k[i].k * ks.k[i].n;
      if (linears != NULL)
        (*linears)++;
    }
  return (int64_t)llround(w);
}
