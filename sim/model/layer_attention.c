/* layer_attention.c: self-attention as LLMs use it (the `attention` layer
 * and the attention part of llama_block): grouped-query heads (Ainslie et
 * al. 2023: kv_heads < heads share each key/value head among heads /
 * kv_heads query heads; kv_heads 1 is multi-query, Shazeer 2019), rotary
 * position embedding (Su et al. 2021) on Q and K, causal masking, and a
 * flash-style implementation (Dao et al. 2022; Dao 2023, FlashAttention-2).
 *
 * On x [s, d], with H query and G key/value heads of width k per rank
 * (heads / tp, kv_heads / tp), q = H k, n = q + 2 G k:
 *
 * params = d n + q d (+ n with qkv_bias, + d with out_bias)
 * fwd    = projections 2 s d n + 2 s q d, and the core 4 P k H: QK^T and
 *          PV, 2 P k each per head, over P pairs of (query, key) tokens:
 *          s^2, or s (s + 1) / 2 when flash skips what a causal mask hides
 *          (a dense kernel computes all s^2 scores and masks them), or with
 *          a sliding window w < s (Mistral; Beltagy et al. 2020):
 *          w (w + 1) / 2 + (s - w) w.
 * bwd    = 2 x the projections; the core 2x (dS K, dS^T Q, dP = dY V^T,
 *          dV = P^T dY), plus QK^T again under flash, whose backward
 *          recomputes the scores: 2.5x (FlashAttention-2, section 3.1.2).
 * kept   = besides its input (the QKV projection's): Q K V after RoPE
 *          s n, the attention output (the output projection's input) s q,
 *          and either the probabilities H s^2 (dense) or flash's fp32
 *          log-sum-exp per row, 4 H s bytes. With MHA at 16 bits that is
 *          Korthikanti et al.'s attention without dropout, 10 s d + 2 a s^2
 *          bytes with the input; flash replaces the 2 a s^2 by 4 a s.
 * On a context-parallel rank (StLayer.cp = c > 1, layer_context.c) the s
 * rows are the rank's s / c of a sequence of c s keys: projections on its
 * rows, the core 1 / c of the whole sequence's pairs (the two-chunk split
 * of causal sequences gives every rank exactly that share), kept and
 * scratch of its rows. Flash only (Transformer Engine's fused attention).
 * again  = dense: selective recomputation drops the probabilities (H s^2)
 *          and recomputes QK^T and the softmax before the backward (2 P k H
 *          FLOPs); Megatron-LM's selective checkpoint also recomputes PV,
 *          whose output is kept anyway: we do not. Flash keeps no scores:
 *          nothing to drop.
 *
 * memory(), as exec/layers/layer_llm_parts.c runs it on B samples (each
 * tensor aligned): saved = qkv [B s n] + y [B s q] + (probs [H B s s] |
 * lse fp32 [B H s]); dense forward scratch: Q, K, V and the output by head
 * [H B s k] each (K and V repeated over their group); backward scratch: the
 * output's gradient [B s q] and qkv's [B s n], flash also D = rowsum(dO O)
 * fp32 [B H s]; dense also Q K V by head, the output's gradient by head,
 * dP [H B s s] and dQ dK dV by head; the recompute: Q and K by head.
 */
#include "model/layer_types_private.h"

gboolean
st_layer_check_tp(const StLayer *layer, const char *key, int64_t value, GError **error)
{
  if (layer->tp <= 1 || value % layer->tp == 0)
    return TRUE;
  return st_layer_attr_error(error, key,
                             "%" G_GINT64_FORMAT " is not a multiple of the %d tensor-parallel "
                             "ranks",
                             value, layer->tp);
}

gboolean
st_attn_resolve(StLayer *layer, int64_t rows, int64_t d, GError **error)
{
  int64_t heads = st_layer_attr(layer, "heads", 1);
  int64_t kv = st_layer_attr(layer, "kv_heads", 0);
  int64_t hd = st_layer_attr(layer, "head_dim", 0);
  if (kv == 0)
    st_layer_set_attr(layer, "kv_heads", kv = heads);
  if (heads % kv != 0)
    return st_layer_attr_error(error, "kv_heads",
                               "%" G_GINT64_FORMAT " does not divide the %" G_GINT64_FORMAT
                               " heads",
                               kv, heads);
  if (hd == 0) {
    if (d % heads != 0)
      return st_layer_attr_error(error, "heads",
                                 "%" G_GINT64_FORMAT " does not divide the dim %" G_GINT64_FORMAT
                                 " (or give head_dim)",
                                 heads, d);
    st_layer_set_attr(layer, "head_dim", hd = d / heads);
  }
  int64_t rope = st_layer_attr(layer, "rope_dim", 0);
  if (rope == 0)
    st_layer_set_attr(layer, "rope_dim", rope = hd);
  if (rope > hd || rope % 2 != 0)
    return st_layer_attr_error(error, "rope_dim",
                               "%" G_GINT64_FORMAT " must be even and at most head_dim %"
                               G_GINT64_FORMAT,
                               rope, hd);
  int64_t window = st_layer_attr(layer, "window", 0);
  if (window > 0 && (!st_layer_attr(layer, "causal", 1) || !st_layer_attr(layer, "flash", 1)))
    return st_layer_attr_error(error, "window", "a sliding window needs causal and flash");
  if (layer->cp > 1 && !st_layer_attr(layer, "flash", 1))
    return st_layer_attr_error(error, "flash", "context parallelism runs flash attention "
                               "(Transformer Engine's fused kernels): flash must be on");
  if (!st_layer_check_tp(layer, "heads", heads, error) ||
      !st_layer_check_tp(layer, "kv_heads", kv, error))
    return FALSE;
  double s = (double)rows * MAX(layer->tp, 1), q = (double)(heads * hd);
  double n = q + 2.0 * (double)(kv * hd);
  double scores = st_layer_attr(layer, "flash", 1) ? 0.0 : (double)heads * s * s;
  return st_layer_check_size((double)d * (n + q), ST_MAX_COUNT, "the weights", error) &&
         st_layer_check_size(s * n + scores, ST_MAX_ELEMS, "the kept elements", error);
}

void
st_attn_part(const StLayer *layer, int64_t rows, int64_t d, StAttnPart *p)
{
  int64_t t = MAX(layer->tp, 1);
  *p = (StAttnPart){
    .s = rows * (layer->sp ? t : 1),
    .keys = rows * (layer->sp ? t : 1) * MAX(layer->cp, 1),
    .cp = MAX(layer->cp, 1),
    .rows = rows,
    .d = d,
    .heads = st_layer_attr(layer, "heads", 1) / t,
    .kv_heads = st_layer_attr(layer, "kv_heads", 1) / t,
    .head_dim = st_layer_attr(layer, "head_dim", 1),
    .rope_dim = st_layer_attr(layer, "rope_dim", 0),
    .window = st_layer_attr(layer, "window", 0),
    .causal = st_layer_attr(layer, "causal", 1) != 0,
    .flash = st_layer_attr(layer, "flash", 1) != 0,
    .qkv_bias = st_layer_attr(layer, "qkv_bias", 0) != 0,
    .out_bias = st_layer_attr(layer, "out_bias", 0) != 0,
  };
}

/* q and n of the rank. */
static int64_t
attn_q(const StAttnPart *p)
{
  return p->heads * p->head_dim;
}

static int64_t
attn_n(const StAttnPart *p)
{
  return attn_q(p) + 2 * p->kv_heads * p->head_dim;
}

int64_t
st_attn_params(const StAttnPart *p)
{
  int64_t q = attn_q(p), n = attn_n(p);
  return p->d * n + q * p->d + (p->qkv_bias ? n : 0) + (p->out_bias ? p->d : 0);
}

void
st_attn_flops_split(const StAttnPart *p, double *qkv, double *out, double *core)
{
  double s = (double)p->s, d = (double)p->d, q = (double)attn_q(p), n = (double)attn_n(p);
  double keys = (double)p->keys, pairs = s * keys;
  if (p->causal && p->flash) {
    double w = p->window > 0 ? MIN((double)p->window, keys) : keys;
    /* rows before the window fills, then w; a context-parallel rank's share */
    pairs = (w * (w + 1.0) / 2.0 + (keys - w) * w) / (double)p->cp;
  }
  *qkv = 2.0 * s * d * n;
  *out = 2.0 * s * q * d;
  *core = 4.0 * pairs * (double)p->head_dim * (double)p->heads;
}

void
st_attn_flops(const StAttnPart *p, double *fwd, double *bwd, double *again)
{
  double qkv, out, core;
  st_attn_flops_split(p, &qkv, &out, &core);
  double proj = qkv + out;
  *fwd = proj + core;
  *bwd = 2.0 * proj + (p->flash ? 2.5 : 2.0) * core;
  *again = p->flash ? 0.0 : core / 2.0;
}

void
st_attn_kept(const StAttnPart *p, int e, int64_t *kept, int64_t *again)
{
  int64_t s = p->s, scores = p->heads * s * s * e;
  *again = p->flash ? 0 : scores;
  *kept = (attn_n(p) + attn_q(p)) * s * e +
          (p->flash ? p->heads * s * (int64_t)sizeof(float) : scores);
}

void
st_attn_memory(const StAttnPart *p, int batch, int e, StPartMemory *m)
{
  int64_t bs = batch * p->s, q = attn_q(p), n = attn_n(p);
  int64_t map_q = st_layer_aligned(bs * q * e), map_n = st_layer_aligned(bs * n * e);
  int64_t lse = st_layer_aligned(bs * p->heads * (int64_t)sizeof(float));
  int64_t probs = st_layer_aligned(p->heads * bs * p->s * e);
  *m = (StPartMemory){0};
  m->saved = map_n + map_q + (p->flash ? lse : probs);
  if (p->flash) {
    m->bwd = map_q + map_n + lse;
    return;
  }
  m->again = probs;
  m->fwd = 4 * map_q;
  m->bwd = map_q + 3 * map_q + map_q + probs + 3 * map_q + map_n;
  m->again_work = 2 * map_q;
}

/* ---- the attention layer ------------------------------------------------------- */

static const StAttrSpec ATTENTION_ATTRS[] = {
  ST_ATTN_ATTRS,
  {NULL},
};

static gboolean
attention_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 2, "[tokens, dim]", error))
    return FALSE;
  int64_t rows = layer->in_shape.dims[0], d = layer->in_shape.dims[1];
  if (!st_attn_resolve(layer, rows, d, error))
    return FALSE;
  StAttnPart p;
  st_attn_part(layer, rows, d, &p);
  st_layer_same_shape(layer, dtype_bytes);
  layer->params = st_attn_params(&p);
  st_attn_flops(&p, &layer->fwd_flops, &layer->bwd_flops, &layer->again_flops[ST_RC_CORE_ATTN]);
  int64_t kept;
  st_attn_kept(&p, dtype_bytes, &kept, &layer->act_again[ST_RC_CORE_ATTN]);
  layer->act_bytes = layer->in_bytes + kept;
  return TRUE;
}

static void
attention_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  StAttnPart p;
  st_attn_part(layer, layer->in_shape.dims[0], layer->in_shape.dims[1], &p);
  StPartMemory m;
  st_attn_memory(&p, batch, dtype_bytes, &m);
  out->saved = m.saved;
  out->again[ST_RC_CORE_ATTN] = m.again;
  out->fwd_scratch = m.fwd;
  out->bwd_scratch = m.bwd;
  out->again_scratch[ST_RC_CORE_ATTN] = m.again_work;
}

const StLayerType st_layer_attention = {
  .name = "attention",
  .summary = "self-attention: QKV projection, RoPE, grouped-query heads, causal, flash-style, "
             "output projection",
  .attrs = ATTENTION_ATTRS,
  .derive = attention_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = attention_memory,
  .tp = ST_TP_PARALLEL,
  .cp_attention = TRUE,
};
