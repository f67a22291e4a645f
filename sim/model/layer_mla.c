/* layer_mla.c: mla_block, the pre-norm decoder block of DeepSeek-V2 and V3
 * (DeepSeek-AI 2024, arXiv 2405.04434, section 2.1; arXiv 2412.19437,
 * section 2.1.1) with multi-head latent attention (MLA) in place of
 * grouped-query attention:
 *
 *   x1  = x + mla(norm1(x))
 *   out = x1 + mlp(norm2(x1))      (mlp "none": the attention half, before an
 *                                   MoE router, whose shared experts are then
 *                                   this block's MLP: docs/LLM.md, "Modern MoE")
 *
 * MLA on h [s, d] with H heads, query rank q' (q_lora_rank; 0: no query
 * compression, DeepSeek-V2-Lite), key/value rank c (kv_lora_rank), per head
 * n = qk_nope_head_dim, r = qk_rope_head_dim, v = v_head_dim; in the
 * paper's names (eq. 9-19) and transformers' (modeling_deepseek_v3.py):
 *
 *   c_q  = rmsnorm(h W^DQ)        W^DQ [d, q']            q_a_proj, q_a_layernorm
 *   q    = c_q W^UQ (W^QR)        [q', H (n + r)]         q_b_proj (nope and rope parts)
 *   c_kv, k_r = h W^DKV (W^KR)    [d, c + r]              kv_a_proj_with_mqa
 *   k_n, v = rmsnorm(c_kv) W^UK (W^UV)  [c, H (n + v)]    kv_a_layernorm, kv_b_proj
 *   k    = [k_n, RoPE(k_r) shared by the heads]; q = [q_n, RoPE(q_r)]
 *   o    = attention(q, k, v) W^O [H v, d]                o_proj
 *
 * params = d q' + q' + q' H (n + r) + d (c + r) + c + c H (n + v) + H v d
 *          (q' = 0: d H (n + r) for W^Q); DeepSeek-V3 (d 7168, H 128, q' 1536,
 *          c 512, n 128, r 64, v 128): 187,107,328 per layer.
 * fwd    = 2 s x (the projections' weights, norms aside), and the core over
 *          P (query, key) pairs (causal: s (s + 1) / 2, flash skipping the
 *          masked half; else s^2): QK^T 2 P H (n + r), PV 2 P H v. Training
 *          decompresses K and V for every token (the paper's absorption of
 *          W^UK into W^UQ is an inference trick), as Megatron-LM's
 *          MLASelfAttention and transformers do.
 * bwd    = 2 x the projections, 2 x the core, plus QK^T again (flash's
 *          backward recomputes the scores, FlashAttention-2 section 3.1.2).
 * kept   = besides h (the block's): c_q before and after its norm (2 s q'),
 *          the compressed KV [c_kv, k_r] (s (c + r)) and c_kv after its norm
 *          (s c): the compressed tensors MLA keeps instead of a full K and V
 *          per head at the projection; then the flash kernel's inputs q and k
 *          (s H (n + r) each) and v (s H v), its output (s H v) and fp32
 *          log-sum-exp (4 H s bytes). The latents are the paper's point for
 *          inference (a KV cache of c + r per token and layer); in training
 *          the decompressed q, k, v dominate.
 *
 * Flash-style only: no dense (s x s scores) variant, no sliding window, no
 * context parallelism (refused).
 *
 * Split over a tensor-parallel group of t ranks (Megatron-LM's
 * MLASelfAttention): the down projections W^DQ and W^DKV and their norms
 * are whole on every rank ("duplicated" linears), computing on all s rows
 * (gathered first under sequence parallelism), and their gradients are
 * partial sums (each rank back-propagates its heads only): tp_partial_params;
 * the up projections and W^O split by heads (H / t each), the output a
 * partial sum, as any PARALLEL layer.
 *
 * memory(): estimated as the MLA of Megatron-LM with Transformer Engine's
 * flash kernel would take it (there is no executor implementation: the
 * type is simulated only): saved = the norms' fp32 statistics and the kept
 * tensors above, each aligned; backward scratch: the output's gradient
 * [s H v], q's, k's, v's and the two latents' gradients, and flash's D fp32
 * [H s]. The split block saves no norm of the block (as llama_block) and
 * takes, per part, the norm's statistics and output on all rows.
 */
#include "model/layer_types_private.h"

/* StNormKind's names a block accepts. */
static const char *const MLA_NORMS[] = {"rmsnorm", "layernorm", NULL};

static const StAttrSpec MLA_ATTRS[] = {
  {.key = "heads", .min = 1, .required = TRUE, .help = "query heads H (DeepSeek-V3: 128)"},
  {.key = "q_lora_rank", .min = 0,
   .help = "query compression rank q' (DeepSeek-V3: 1536); 0 = none, a full W^Q (V2-Lite)"},
  {.key = "kv_lora_rank", .min = 1, .required = TRUE,
   .help = "key/value compression rank c (DeepSeek-V2/V3: 512)"},
  {.key = "qk_nope_head_dim", .min = 1, .required = TRUE,
   .help = "per head, the query/key dims without RoPE (DeepSeek-V3: 128)"},
  {.key = "qk_rope_head_dim", .min = 0, .required = TRUE,
   .help = "per head, the query/key dims with RoPE; the key's are shared by the heads (64)"},
  {.key = "v_head_dim", .min = 1, .required = TRUE, .help = "per head, the value dims (128)"},
  {.key = "causal", .fallback = 1, .flag = TRUE,
   .help = "mask future tokens; flash then skips the masked half (FLOPs too)"},
  {.key = "rope_theta", .fallback = 10000, .min = 0, .max = INT64_C(1) << 40,
   .help = "rotary position embedding base (numerics only)"},
  {.key = "ffn", .min = 0, .help = "hidden width of the MLP (required unless mlp is none)"},
  {.key = "mlp", .fallback = ST_MLP_SWIGLU, .choices = ST_MLP_NAMES,
   .help = "swiglu, geglu, gelu (not gated) or none (the attention half only)"},
  {.key = "norm", .fallback = ST_NORM_RMS, .choices = MLA_NORMS, .help = "rmsnorm or layernorm"},
  {NULL},
};

/* One rank's MLA over s tokens on a [rows, d] input (rows = s / t under
 * sequence parallelism). Ranks and per-head dims whole; heads the rank's. */
typedef struct {
  int64_t s, rows, d, heads, qr, kvr, nope, rope, v;
  gboolean causal;
} Mla;

typedef struct {
  Mla attn;
  StMlpPart mlp;
  StNormKind norm;
  gboolean has_mlp;
  int64_t rows, d;
} Block;

/* Weights of the duplicated (down) and the split (up, out) projections,
 * norms aside, of one rank. */
static int64_t
mla_down_weights(const Mla *a)
{
  return a->d * a->qr + a->d * (a->kvr + a->rope);
}

static int64_t
mla_split_weights(const Mla *a)
{
  int64_t q_in = a->qr > 0 ? a->qr : a->d;
  return q_in * a->heads * (a->nope + a->rope) + a->kvr * a->heads * (a->nope + a->v) +
         a->heads * a->v * a->d;
}

static int64_t
mla_norm_params(const Mla *a)
{
  return a->qr + a->kvr; /* q_a_layernorm, kv_a_layernorm (RMSNorm) */
}

static double
mla_pairs(const Mla *a)
{
  double s = (double)a->s;
  return a->causal ? s * (s + 1.0) / 2.0 : s * s;
}

/* Forward: the projections, the core (QK^T, PV); backward as the top says. */
static void
mla_flops(const Mla *a, double *proj, double *qk, double *pv)
{
  double s = (double)a->s, pairs = mla_pairs(a), h = (double)a->heads;
  *proj = 2.0 * s * (double)(mla_down_weights(a) + mla_split_weights(a));
  *qk = 2.0 * pairs * h * (double)(a->nope + a->rope);
  *pv = 2.0 * pairs * h * (double)a->v;
}

/* Kept elements per sample (without the fp32 log-sum-exp), as the top. */
static int64_t
mla_kept_elems(const Mla *a)
{
  return a->s * (2 * a->qr + (a->kvr + a->rope) + a->kvr + 2 * a->heads * (a->nope + a->rope) +
                 2 * a->heads * a->v);
}

static gboolean
block_of(const StLayer *layer, Block *b, GError **error)
{
  b->rows = layer->in_shape.dims[0];
  b->d = layer->in_shape.dims[1];
  b->norm = (StNormKind)st_layer_attr(layer, "norm", ST_NORM_RMS);
  int64_t t = MAX(layer->tp, 1), heads = st_layer_attr(layer, "heads", 1);
  if (!st_layer_check_tp(layer, "heads", heads, error))
    return FALSE;
  b->attn = (Mla){
    .s = b->rows * (layer->sp ? t : 1),
    .rows = b->rows,
    .d = b->d,
    .heads = heads / t,
    .qr = st_layer_attr(layer, "q_lora_rank", 0),
    .kvr = st_layer_attr(layer, "kv_lora_rank", 1),
    .nope = st_layer_attr(layer, "qk_nope_head_dim", 1),
    .rope = st_layer_attr(layer, "qk_rope_head_dim", 0),
    .v = st_layer_attr(layer, "v_head_dim", 1),
    .causal = st_layer_attr(layer, "causal", 1) != 0,
  };
  if (b->attn.rope % 2 != 0)
    return st_layer_attr_error(error, "qk_rope_head_dim",
                               "%" G_GINT64_FORMAT " is odd (RoPE rotates pairs)", b->attn.rope);
  StMlpKind kind = (StMlpKind)st_layer_attr(layer, "mlp", ST_MLP_SWIGLU);
  b->has_mlp = kind != ST_MLP_NONE;
  int64_t ffn = st_layer_attr(layer, "ffn", 0);
  if (b->has_mlp && ffn == 0)
    return st_layer_attr_error(error, "ffn", "missing: the MLP needs its hidden width");
  if (!b->has_mlp) {
    b->mlp = (StMlpPart){.kind = ST_MLP_NONE};
    return TRUE;
  }
  return st_mlp_part(layer, "ffn", b->rows, b->d, ffn, kind, FALSE, &b->mlp, error);
}

static gboolean
mla_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 2, "[tokens, dim]", error))
    return FALSE;
  if (layer->cp > 1)
    return st_layer_attr_error(error, "heads", "context parallelism of multi-head latent "
                               "attention is not modelled");
  Block b;
  if (!block_of(layer, &b, error))
    return FALSE;
  const Mla *a = &b.attn;
  if (!st_layer_check_size((double)mla_down_weights(a) + (double)mla_split_weights(a),
                           ST_MAX_COUNT, "the weights", error) ||
      !st_layer_check_size((double)mla_kept_elems(a), ST_MAX_ELEMS, "the kept elements", error))
    return FALSE;
  st_layer_same_shape(layer, dtype_bytes);
  int64_t e = dtype_bytes, map = b.rows * b.d * e;
  double proj, qk, pv;
  mla_flops(a, &proj, &qk, &pv);
  double fwd = proj + qk + pv, bwd = 2.0 * proj + 2.0 * (qk + pv) + qk;
  layer->params = st_norm_params(b.norm, b.d) + mla_norm_params(a) + mla_down_weights(a) +
                  mla_split_weights(a);
  layer->act_bytes = layer->in_bytes + map + mla_kept_elems(a) * e +
                     a->heads * a->s * (int64_t)sizeof(float);
  layer->act_again[ST_RC_LAYERNORM] = map; /* h1 = norm1(x) */
  if (b.has_mlp) {
    double mlp = st_mlp_fwd_flops(&b.mlp);
    fwd += mlp;
    bwd += 2.0 * mlp;
    layer->params += st_norm_params(b.norm, b.d) + st_mlp_params(&b.mlp);
    layer->act_bytes += 2 * map + st_mlp_kept(&b.mlp, dtype_bytes); /* x1, h2, the MLP's */
    layer->act_again[ST_RC_LAYERNORM] += map;
    layer->act_again[ST_RC_MLP_ACT] = b.mlp.rows * b.mlp.f * e;
  }
  layer->fwd_flops = fwd;
  layer->bwd_flops = bwd;
  return TRUE;
}

/* The attention's saved tensors and backward scratch over `batch` samples
 * (see the top). */
static void
mla_memory_part(const Mla *a, int batch, int e, StPartMemory *m)
{
  int64_t bs = batch * a->s;
  int64_t qk = st_layer_aligned(bs * a->heads * (a->nope + a->rope) * e);
  int64_t v = st_layer_aligned(bs * a->heads * a->v * e);
  int64_t cq = a->qr > 0 ? st_layer_aligned(bs * a->qr * e) : 0;
  int64_t ckv = st_layer_aligned(bs * (a->kvr + a->rope) * e);
  int64_t ckv_n = st_layer_aligned(bs * a->kvr * e);
  int64_t lse = st_layer_aligned(bs * a->heads * (int64_t)sizeof(float));
  int64_t stats = (a->qr > 0 ? st_norm_saved(ST_NORM_RMS, bs) : 0) + st_norm_saved(ST_NORM_RMS, bs);
  *m = (StPartMemory){0};
  m->saved = stats + 2 * cq + ckv + ckv_n + 2 * qk + 2 * v + lse;
  m->bwd = v + 2 * qk + v + cq + ckv + lse; /* dO, dQ, dK, dV, d c_q, d [c_kv, k_r], D */
}

static void
mla_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  Block b;
  gboolean ok = block_of(layer, &b, NULL);
  g_return_if_fail(ok);
  StPartMemory attn, mlp;
  mla_memory_part(&b.attn, batch, dtype_bytes, &attn);
  st_mlp_memory(&b.mlp, batch, dtype_bytes, &mlp);
  int64_t map = st_layer_aligned(batch * b.rows * b.d * dtype_bytes);
  if (layer->tp > 1) {
    /* the split block (as llama_block's): no norm of the block kept */
    int64_t n = batch * b.attn.s, whole = st_layer_aligned(n * b.d * dtype_bytes);
    out->saved = (b.has_mlp ? map : 0) + attn.saved + mlp.saved;
    out->again[ST_RC_MLP_ACT] = mlp.again;
    out->fwd_scratch = st_norm_saved(b.norm, n) + whole;
    out->bwd_scratch = st_norm_saved(b.norm, n) + (b.has_mlp && !layer->sp ? 3 : 2) * whole +
                       MAX(attn.bwd, mlp.bwd);
    return;
  }
  out->saved = st_norm_saved(b.norm, batch * b.rows) + map + attn.saved;
  out->again[ST_RC_LAYERNORM] = map; /* h1 */
  if (!b.has_mlp) {
    out->bwd_scratch = map + attn.bwd;
    return;
  }
  out->saved += map + st_norm_saved(b.norm, batch * b.rows) + map + mlp.saved;
  out->again[ST_RC_LAYERNORM] += map; /* h2 */
  out->again[ST_RC_MLP_ACT] = mlp.again;
  out->bwd_scratch = 2 * map + MAX(attn.bwd, mlp.bwd);
}

/* Tensor-parallel parts: the attention half, then the MLP half. */
static int
mla_tp_parts(const StLayer *layer, StPass pass, double share[ST_TP_PARTS_MAX])
{
  Block b;
  if (!block_of(layer, &b, NULL) || !b.has_mlp) {
    share[0] = 1;
    return 1;
  }
  double proj, qk, pv;
  mla_flops(&b.attn, &proj, &qk, &pv);
  double attn = pass == ST_PASS_BWD ? 2.0 * proj + 3.0 * qk + 2.0 * pv : proj + qk + pv;
  double mlp = st_mlp_fwd_flops(&b.mlp) * (pass == ST_PASS_BWD ? 2 : 1);
  share[0] = attn / (attn + mlp);
  share[1] = mlp / (attn + mlp);
  return 2;
}

/* Whole on every rank, gradients partial: the block's norms, the down
 * projections and the latents' norms. */
static int64_t
mla_tp_partial_params(const StLayer *layer)
{
  Block b;
  if (!block_of(layer, &b, NULL))
    return 0;
  return st_norm_params(b.norm, b.d) * (b.has_mlp ? 2 : 1) + mla_down_weights(&b.attn) +
         mla_norm_params(&b.attn);
}

const StLayerType st_layer_mla_block = {
  .name = "mla_block",
  .summary = "pre-norm decoder block with multi-head latent attention (DeepSeek-V2/V3): "
             "low-rank query and key/value projections, decoupled RoPE, flash; RMSNorm, "
             "MLP, residuals (simulated only)",
  .attrs = MLA_ATTRS,
  .derive = mla_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = mla_memory,
  .block = TRUE,
  .tp = ST_TP_PARALLEL,
  .tp_parts = mla_tp_parts,
  .tp_partial_params = mla_tp_partial_params,
};
