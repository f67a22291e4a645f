/* layer_decoder.c: llama_block, the pre-norm decoder block of LLaMA-style
 * models (Touvron et al. 2023), built of the parts of layer_attention.c and
 * layer_llm.c so that a model file stays one line per block:
 *
 *   x1  = x + attention(norm1(x))
 *   out = x1 + mlp(norm2(x1))                   (sequential, LLaMA, Qwen2)
 *   out = x + attention(norm1(x)) + mlp(norm2(x))  (parallel_residual, GPT-NeoX)
 *   out = x1                                    (mlp "none": the attention half,
 *                                                before an MoE router)
 *
 * Costs are the parts' sums (norms and residual adds are element-wise, not
 * counted, as layer_block.c's transformer_block). Kept, besides the input
 * (norm1's): norm1's output (the attention's input), the attention's, x1
 * (norm2's input, sequential with an MLP), norm2's output (the MLP's input)
 * and the MLP's. With mlp "gelu", ffn = 4 d, MHA, dense attention and no
 * dropout at 16 bits this is Korthikanti et al.'s 34 s b h + 5 a s^2 b less
 * the dropouts' 2 s b h + 3 a s^2 b: 32 s d + 2 a s^2 bytes per sample.
 *
 * memory(), as exec/layers/layer_decoder.c runs it: saved: norm1's fp32
 * statistics, h1 = norm1(x), the attention's, then with an MLP: x1
 * (sequential), norm2's statistics, h2, the MLP's. Forward scratch: the
 * attention's, and (parallel) the MLP's output before it is added. Backward
 * scratch: one [B s d] gradient (two with an MLP) and one block for the
 * branch being differentiated, as large as the larger branch's.
 *
 * torchtitan's per-op checkpointing (--recompute-ops torchtitan;
 * torchtitan/distributed/activation_checkpoint.py, mode "selective", option
 * "op", as of its 2024-12 benchmarks): a policy counts each block's aten.mm
 * calls afresh and keeps the outputs of the odd ones and of the attention
 * kernel (output and log-sum-exp), everything else made again before the
 * backward. torchtitan's Llama calls wq, wk, wv, wo, then w1, w3, w2 (fc1,
 * fc2 without a gate), so it keeps wq, wv, w1, w2 (fc1); a biased
 * projection is an addmm, neither counted nor kept. Per sample the block then
 * keeps these besides its input, drops the rest of what it keeps otherwise
 * (act_again[ST_RC_TORCHTITAN]) and makes again the FLOPs of the projections
 * it did not keep (again_flops; the norms, RoPE and the activation are a few
 * FLOPs per element). Modelled for whole blocks (tp 1).
 *
 * Split over a tensor-parallel group (tp > 1), exec/layers/layer_decoder.c
 * runs it in parts on all N = B s rows (s the whole sequence) and keeps no
 * norm: saved = x1 (sequential with an MLP; the rank's rows, N / t under
 * sequence parallelism) + the attention's + the MLP's, for the rank's heads
 * and ffn / t on N rows; every part of a pass takes the same scratch: the
 * norm's statistics and output on N rows, then forward the attention's
 * work (+ the MLP's output with a parallel residual), backward two [N d]
 * gradients (three with a parallel residual, or sequential without
 * sequence parallelism) and the larger half's work.
 */
#include "model/layer_types_private.h"

/* StNormKind's names a block accepts. */
static const char *const BLOCK_NORMS[] = {"rmsnorm", "layernorm", NULL};

static const StAttrSpec LLAMA_ATTRS[] = {
  ST_ATTN_ATTRS,
  {.key = "ffn", .min = 0, .help = "hidden width of the MLP (required unless mlp is none)"},
  {.key = "mlp", .fallback = ST_MLP_SWIGLU, .choices = ST_MLP_NAMES,
   .help = "swiglu, geglu, gelu (not gated) or none (the attention half only)"},
  {.key = "mlp_bias", .flag = TRUE, .help = "biases on the MLP's projections (GPT-NeoX)"},
  {.key = "norm", .fallback = ST_NORM_RMS, .choices = BLOCK_NORMS,
   .help = "rmsnorm or layernorm (with shift: GPT-NeoX)"},
  {.key = "parallel_residual", .flag = TRUE,
   .help = "x + attention(norm1(x)) + mlp(norm2(x)) (GPT-NeoX)"},
  {NULL},
};

typedef struct {
  StAttnPart attn;
  StMlpPart mlp;
  StNormKind norm;
  gboolean parallel, has_mlp;
  int64_t rows, d;
} Block;

static gboolean
block_of(const StLayer *layer, Block *b, GError **error)
{
  b->rows = layer->in_shape.dims[0];
  b->d = layer->in_shape.dims[1];
  b->norm = (StNormKind)st_layer_attr(layer, "norm", ST_NORM_RMS);
  StMlpKind kind = (StMlpKind)st_layer_attr(layer, "mlp", ST_MLP_SWIGLU);
  b->has_mlp = kind != ST_MLP_NONE;
  b->parallel = b->has_mlp && st_layer_attr(layer, "parallel_residual", 0) != 0;
  int64_t ffn = st_layer_attr(layer, "ffn", 0);
  if (b->has_mlp && ffn == 0)
    return st_layer_attr_error(error, "ffn", "missing: the MLP needs its hidden width");
  st_attn_part(layer, b->rows, b->d, &b->attn);
  if (!b->has_mlp) {
    b->mlp = (StMlpPart){.kind = ST_MLP_NONE};
    return TRUE;
  }
  return st_mlp_part(layer, "ffn", b->rows, b->d, ffn, kind,
                     st_layer_attr(layer, "mlp_bias", 0) != 0, &b->mlp, error);
}

static int64_t
tensor_bytes(int64_t bytes, gboolean aligned)
{
  return aligned ? st_layer_aligned(bytes) : bytes;
}

/* Under torchtitan's policy (see the top): what `samples` samples keep
 * besides the input, each tensor aligned when `aligned`, and the FLOPs of
 * the projections made again. */
static int64_t
torchtitan_kept(const Block *b, int64_t samples, int e, gboolean aligned, double *again_flops)
{
  const StAttnPart *a = &b->attn;
  int64_t q = a->heads * a->head_dim, kv = a->kv_heads * a->head_dim;
  int64_t rows = samples * b->rows, f = b->mlp.f;
  gboolean gated = b->mlp.kind != ST_MLP_GELU;
  /* The projections in the order torchtitan's Llama calls them: width in,
   * width out, biased. */
  const struct {
    int64_t in, out;
    gboolean bias, present;
  } proj[] = {
    {b->d, q, a->qkv_bias, TRUE},        {b->d, kv, a->qkv_bias, TRUE},
    {b->d, kv, a->qkv_bias, TRUE},       {q, b->d, a->out_bias, TRUE},
    {b->d, f, b->mlp.bias, b->has_mlp},  {b->d, f, b->mlp.bias, b->has_mlp && gated},
    {f, b->d, b->mlp.bias, b->has_mlp},
  };
  int64_t kept = tensor_bytes(rows * q * e, aligned) +
                 tensor_bytes(rows * a->heads * (int64_t)sizeof(float), aligned);
  int mm = 0;
  *again_flops = 0;
  for (gsize i = 0; i < G_N_ELEMENTS(proj); i++) {
    if (!proj[i].present)
      continue;
    if (!proj[i].bias && ++mm % 2 == 1)
      kept += tensor_bytes(rows * proj[i].out * e, aligned);
    else
      *again_flops += 2.0 * (double)rows * (double)proj[i].in * (double)proj[i].out;
  }
  return kept;
}

/* What torchtitan's policy drops of a whole block's saved tensors. */
static void
torchtitan_again(const Block *b, int batch, int dtype_bytes, StLayerMemory *out)
{
  double again_flops;
  out->again[ST_RC_TORCHTITAN] =
    MAX(out->saved - torchtitan_kept(b, batch, dtype_bytes, TRUE, &again_flops), 0);
}

static gboolean
llama_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 2, "[tokens, dim]", error) ||
      !st_attn_resolve(layer, layer->in_shape.dims[0], layer->in_shape.dims[1], error))
    return FALSE;
  Block b;
  if (!block_of(layer, &b, error))
    return FALSE;
  st_layer_same_shape(layer, dtype_bytes);
  int64_t e = dtype_bytes, map = b.rows * b.d * e;
  double fwd, bwd;
  st_attn_flops(&b.attn, &fwd, &bwd, &layer->again_flops[ST_RC_CORE_ATTN]);
  int64_t kept;
  st_attn_kept(&b.attn, dtype_bytes, &kept, &layer->act_again[ST_RC_CORE_ATTN]);
  layer->act_again[ST_RC_LAYERNORM] = map; /* h1 = norm1(x) */
  layer->params = st_norm_params(b.norm, b.d) + st_attn_params(&b.attn);
  layer->act_bytes = layer->in_bytes + map + kept;
  if (b.has_mlp) {
    double mlp = st_mlp_fwd_flops(&b.mlp);
    fwd += mlp;
    bwd += 2.0 * mlp;
    layer->params += st_norm_params(b.norm, b.d) + st_mlp_params(&b.mlp);
    layer->act_bytes += (b.parallel ? 0 : map) + map + st_mlp_kept(&b.mlp, dtype_bytes);
    layer->act_again[ST_RC_LAYERNORM] += map; /* h2 = norm2(x1) */
    layer->act_again[ST_RC_MLP_ACT] = b.mlp.rows * b.mlp.f * e;
  }
  if (layer->tp <= 1)
    layer->act_again[ST_RC_TORCHTITAN] =
      layer->act_bytes - layer->in_bytes -
      torchtitan_kept(&b, 1, dtype_bytes, FALSE, &layer->again_flops[ST_RC_TORCHTITAN]);
  layer->fwd_flops = fwd;
  layer->bwd_flops = bwd;
  return TRUE;
}

/* The split block (see the top). */
static void
llama_split_memory(const Block *b, gboolean sp, int batch, int dtype_bytes,
                   const StPartMemory *attn, const StPartMemory *mlp, StLayerMemory *out)
{
  int64_t n = batch * b->attn.s, map = st_layer_aligned(n * b->d * dtype_bytes);
  int64_t stats = st_norm_saved(b->norm, n);
  gboolean x1 = b->has_mlp && !b->parallel;
  out->saved = (x1 ? st_layer_aligned(batch * b->rows * b->d * dtype_bytes) : 0) + attn->saved +
               mlp->saved;
  out->again[ST_RC_CORE_ATTN] = attn->again;
  out->again_scratch[ST_RC_CORE_ATTN] = attn->again_work;
  out->again[ST_RC_MLP_ACT] = mlp->again; /* (no norm kept: nothing for layernorm) */
  out->fwd_scratch = stats + map + attn->fwd + (b->parallel ? map : 0);
  gboolean second = b->parallel || (b->has_mlp && !sp);
  out->bwd_scratch = stats + (second ? 3 : 2) * map + MAX(attn->bwd, mlp->bwd);
}

static void
llama_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  Block b;
  gboolean ok = block_of(layer, &b, NULL);
  g_return_if_fail(ok);
  int64_t rows = batch * b.rows, map = st_layer_aligned(rows * b.d * dtype_bytes);
  StPartMemory attn, mlp;
  st_attn_memory(&b.attn, batch, dtype_bytes, &attn);
  st_mlp_memory(&b.mlp, batch, dtype_bytes, &mlp);
  if (layer->tp > 1) {
    llama_split_memory(&b, layer->sp, batch, dtype_bytes, &attn, &mlp, out);
    return;
  }
  out->saved = st_norm_saved(b.norm, rows) + map + attn.saved;
  out->again[ST_RC_CORE_ATTN] = attn.again;
  out->again_scratch[ST_RC_CORE_ATTN] = attn.again_work;
  out->again[ST_RC_LAYERNORM] = map; /* h1 */
  out->fwd_scratch = attn.fwd;
  if (!b.has_mlp) {
    out->bwd_scratch = map + attn.bwd;
    torchtitan_again(&b, batch, dtype_bytes, out);
    return;
  }
  out->saved += (b.parallel ? 0 : map) + st_norm_saved(b.norm, rows) + map + mlp.saved;
  out->again[ST_RC_LAYERNORM] += map; /* h2 */
  out->again[ST_RC_MLP_ACT] = mlp.again;
  if (b.parallel)
    out->fwd_scratch += map;
  out->bwd_scratch = 2 * map + MAX(attn.bwd, mlp.bwd);
  torchtitan_again(&b, batch, dtype_bytes, out);
}

/* Tensor-parallel parts (layer_type.h): the attention half, then the MLP
 * half, each ending in its row-parallel projection's reduction. A parallel
 * residual sums both halves' partial outputs before one reduction: one
 * part. Backward: attention 2.5 x its forward with flash (scores made
 * again), the MLP 2 x. */
static int
llama_tp_parts(const StLayer *layer, StPass pass, double share[ST_TP_PARTS_MAX])
{
  Block b;
  if (!block_of(layer, &b, NULL) || !b.has_mlp || b.parallel) {
    share[0] = 1;
    return 1;
  }
  double fwd, bwd, again;
  st_attn_flops(&b.attn, &fwd, &bwd, &again);
  double mlp = st_mlp_fwd_flops(&b.mlp);
  double attn = pass == ST_PASS_BWD ? bwd : fwd;
  mlp *= pass == ST_PASS_BWD ? 2 : 1;
  share[0] = attn / (attn + mlp);
  share[1] = mlp / (attn + mlp);
  return 2;
}

/* Its norms' weights (layer_type.h). */
static int64_t
llama_tp_partial_params(const StLayer *layer)
{
  Block b;
  if (!block_of(layer, &b, NULL))
    return 0;
  return st_norm_params(b.norm, b.d) * (b.has_mlp ? 2 : 1);
}

const StLayerType st_layer_llama_block = {
  .name = "llama_block",
  .summary = "pre-norm decoder block: RMSNorm, GQA attention with RoPE, RMSNorm, SwiGLU MLP, "
             "residuals (LLaMA; variants for Qwen2, GPT-NeoX, MoE)",
  .attrs = LLAMA_ATTRS,
  .derive = llama_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = llama_memory,
  .block = TRUE,
  .tp = ST_TP_PARALLEL,
  .tp_parts = llama_tp_parts,
  .tp_partial_params = llama_tp_partial_params,
  .cp_attention = TRUE,
};
