/* layer_context.c: a layer on one rank of a context-parallel group
 * (StLayer.cp = c > 1), as Megatron-LM runs it with Transformer Engine
 * (--context-parallel-size; Liu et al., "Ring Attention with Blockwise
 * Transformers", 2023; Jacobs et al., "DeepSpeed Ulysses", 2023).
 *
 * The rank holds s / c of every sequence (the model is derived on that,
 * st_model_derive_cp): embeddings, norms, MLPs, the head and the loss run
 * on its tokens alone. Only attention needs the others: its queries attend
 * the keys of the whole sequence. With a causal mask the tokens are cut in
 * 2c chunks and rank i holds chunks i and 2c - 1 - i, so that every rank
 * does the same 1 / c of the pairs (layer_attention.c counts the core so).
 *
 * The part of a pass holding the attention runs in steps around the
 * group's exchanges (model.h, st_layer_cp_part):
 *
 *   ring (TE's p2p):  pre | core 1 .. core c | post, the key/value chunk of
 *                     core k + 1 exchanged beside core k (k < c)
 *   all-to-all:       pre | a2a QKV | core | a2a out | post
 *
 * Each step's share is its FLOPs' (matrix products, as tp_parts shares):
 * pre the QKV projection (norm and RoPE besides), each core step 1 / c of
 * the core (the two-chunk split makes them equal: the local block is half
 * of two chunks squared plus one, each other block half of 2 x 2 chunks),
 * post the rest of the part (the output projection, and the MLP when the
 * part holds it). A backward does 2x the projections and 2.5x the core
 * (flash recomputes the scores).
 */
#include "model/layer_types_private.h"

static gboolean
cuts(const StLayer *layer)
{
  return layer->cp > 1 && layer->type->cp_attention && layer->in_shape.n_dims == 2;
}

int
st_layer_cp_part(const StLayer *layer)
{
  if (!cuts(layer))
    return -1;
  double share[ST_TP_PARTS_MAX];
  return st_layer_tp_parts(layer, ST_PASS_FWD, share) > 1 ? 1 : 0;
}

static void
attn_of(const StLayer *layer, StAttnPart *p)
{
  st_attn_part(layer, layer->in_shape.dims[0], layer->in_shape.dims[1], p);
}

double
st_layer_cp_share(const StLayer *layer, StPass pass, int step, int steps)
{
  g_return_val_if_fail(cuts(layer) && steps >= 3 && step >= 0 && step < steps, 0.0);
  StAttnPart p;
  attn_of(layer, &p);
  double qkv, out, core;
  st_attn_flops_split(&p, &qkv, &out, &core);
  gboolean bwd = st_pass_is_backward(pass);
  double proj_x = bwd ? 2.0 : 1.0, core_x = bwd ? 2.5 : 1.0;
  qkv *= proj_x;
  out *= proj_x;
  core *= core_x;
  double part = qkv + out + core;
  if (st_layer_cp_part(layer) == 0)
    part = bwd ? layer->bwd_flops : layer->fwd_flops;
  if (part <= 0)
    return 1.0 / steps;
  if (step == 0)
    return qkv / part;
  if (step < steps - 1)
    return core / (steps - 2) / part;
  return MAX(part - qkv - core, 0.0) / part;
}

void
st_layer_cp_bytes(const StLayer *layer, int dtype_bytes, int64_t *kv, int64_t *qkv, int64_t *out)
{
  *kv = *qkv = *out = 0;
  if (!layer->type->cp_attention || layer->in_shape.n_dims != 2)
    return;
  StAttnPart p;
  attn_of(layer, &p);
  int64_t q = p.heads * p.head_dim, k = p.kv_heads * p.head_dim;
  *kv = 2 * k * p.s * dtype_bytes;
  *qkv = (q + 2 * k) * p.s * dtype_bytes;
  *out = q * p.s * dtype_bytes;
}
