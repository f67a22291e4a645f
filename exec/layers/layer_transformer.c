/* layer_transformer.c: the pre-LN transformer block of GPT-2 and ViT (model
 * type in sim/model/layer_block.c) on x [B, T, D], H heads of hd = D / H, an
 * MLP of F = ffn:
 *
 *   x1  = x + drop(proj(attention(LN1(x))))
 *   out = x1 + drop(fc2(gelu(fc1(LN2(x1)))))
 *   attention: qkv = h W_qkv^T + b, per head softmax(Q K^T / sqrt(hd)) V,
 *   causal (each token sees itself and earlier ones) when the block says so.
 *
 * Dropout (attr "dropout") on the attention probabilities and on both
 * residual branches, p = ST_LAYER_DROPOUT_P, three streams from ctx->seed.
 *
 * Heads ride in the batch dimension: qkv [B, T, 3H, hd] is permuted to
 * [3H, B, T, hd], so Q, K and V are each H*B contiguous [T, hd] matrices and
 * the scores are one gemm batched over H*B (as llm.c's attention does).
 *
 * Parameter layout (GPT-2's order, PyTorch shapes [out, in]):
 *   ln1.weight [D], ln1.bias [D], attn.qkv.weight [3D, D], attn.qkv.bias [3D],
 *   attn.proj.weight [D, D], attn.proj.bias [D], ln2.weight [D], ln2.bias [D],
 *   mlp.fc1.weight [F, D], mlp.fc1.bias [F], mlp.fc2.weight [D, F], mlp.fc2.bias [D]
 * = 4D^2 + 2DF + 9D + F, the model's count. Init: linear weights
 * U(+-1/sqrt(fan_in)), biases 0, norms 1 and 0.
 *
 * The block keeps its input; `saved` holds what Korthikanti et al. count:
 * LN stats (fp32), LN1 output, Q K V, the probabilities (and their dropped
 * version and masks), the attention output, x1, LN2 output, fc1 output and
 * GELU output (layout in xf_layout).
 */
#include <math.h>

#include "exec/layers/layers_private.h"

typedef struct {
  int B, T, D, H, hd, F, causal, dropout;
  size_t bt, btd, btf, hbtt; /* element counts */
} Xf;

static Xf
xf_of(const StLayer *l, int batch)
{
  Xf x;
  x.B = batch;
  x.T = (int)l->in_shape.dims[0];
  x.D = (int)l->in_shape.dims[1];
  x.H = (int)st_layer_attr(l, "heads", 1);
  x.hd = x.D / x.H;
  x.F = (int)st_layer_attr(l, "ffn", 0);
  if (x.F == 0)
    x.F = 4 * x.D;
  x.causal = st_layer_attr(l, "causal", 0) != 0;
  x.dropout = st_layer_attr(l, "dropout", 0) != 0;
  x.bt = (size_t)x.B * x.T;
  x.btd = x.bt * x.D;
  x.btf = x.bt * x.F;
  x.hbtt = (size_t)x.H * x.B * x.T * x.T;
  return x;
}

/* Element offsets of the parameters. */
typedef struct {
  size_t ln1_g, ln1_b, w_qkv, b_qkv, w_proj, b_proj, ln2_g, ln2_b, w_fc1, b_fc1, w_fc2, b_fc2, end;
} XfParams;

static XfParams
xf_params(const Xf *x)
{
  size_t d = (size_t)x->D, f = (size_t)x->F;
  XfParams p;
  p.ln1_g = 0;
  p.ln1_b = p.ln1_g + d;
  p.w_qkv = p.ln1_b + d;
  p.b_qkv = p.w_qkv + 3 * d * d;
  p.w_proj = p.b_qkv + 3 * d;
  p.b_proj = p.w_proj + d * d;
  p.ln2_g = p.b_proj + d;
  p.ln2_b = p.ln2_g + d;
  p.w_fc1 = p.ln2_b + d;
  p.b_fc1 = p.w_fc1 + f * d;
  p.w_fc2 = p.b_fc1 + f;
  p.b_fc2 = p.w_fc2 + d * f;
  p.end = p.b_fc2 + d;
  return p;
}

/* The saved tensors. */
typedef struct {
  float *mean1, *rstd1; /* [B T] */
  void *h1;             /* LN1(x) [B, T, D] */
  void *qkvh;           /* [3H, B, T, hd]: Q, K, V one after the other, B T D each */
  void *att;            /* softmax probabilities [H B, T, T] */
  void *attd;           /* their dropout [H B, T, T] (= att without dropout) */
  uint8_t *mask_att;    /* [H B T T] */
  uint8_t *mask_r1, *mask_r2; /* residual branches [B T D] */
  void *y;              /* attention output, proj input [B, T, D] */
  void *x1;             /* x + attention branch [B, T, D] */
  float *mean2, *rstd2; /* [B T] */
  void *h2;             /* LN2(x1) [B, T, D] */
  void *u;              /* fc1 output [B, T, F] */
  void *gl;             /* gelu(u), fc2 input [B, T, F] */
} XfSaved;

/* The saved tensors; the probabilities, their dropped copy and its mask
 * (what selective recomputation drops) from `again` when it is given, else
 * from the same block. Returns the main block's bytes. */
static size_t
xf_layout(const Xf *x, StKDtype dt, char *base, StCarve *again, XfSaved *s)
{
  StCarve cv = {base, 0}, *ag = again != NULL ? again : &cv;
  size_t es = st_kdt_size(dt);
  s->mean1 = st_carve(&cv, x->bt * sizeof(float));
  s->rstd1 = st_carve(&cv, x->bt * sizeof(float));
  s->h1 = st_carve(&cv, x->btd * es);
  s->qkvh = st_carve(&cv, 3 * x->btd * es);
  s->att = st_carve(ag, x->hbtt * es);
  s->attd = x->dropout ? st_carve(ag, x->hbtt * es) : s->att;
  s->mask_att = x->dropout ? st_carve(ag, x->hbtt) : NULL;
  s->mask_r1 = x->dropout ? st_carve(&cv, x->btd) : NULL;
  s->mask_r2 = x->dropout ? st_carve(&cv, x->btd) : NULL;
  s->y = st_carve(&cv, x->btd * es);
  s->x1 = st_carve(&cv, x->btd * es);
  s->mean2 = st_carve(&cv, x->bt * sizeof(float));
  s->rstd2 = st_carve(&cv, x->bt * sizeof(float));
  s->h2 = st_carve(&cv, x->btd * es);
  s->u = st_carve(&cv, x->btf * es);
  s->gl = st_carve(&cv, x->btf * es);
  return cv.offset;
}

static void
xf_init(const StLayer *l, float *params, uint64_t seed)
{
  Xf x = xf_of(l, 1);
  XfParams p = xf_params(&x);
  size_t d = (size_t)x.D, f = (size_t)x.F;
  st_init_fill(params, p.end, 0.0f); /* biases and the norms' shifts */
  st_init_fill(params + p.ln1_g, d, 1.0f);
  st_init_fill(params + p.ln2_g, d, 1.0f);
  float bd = 1.0f / sqrtf((float)x.D), bf = 1.0f / sqrtf((float)x.F);
  st_init_uniform(params + p.w_qkv, 3 * d * d, bd, seed, l, 0);
  st_init_uniform(params + p.w_proj, d * d, bd, seed, l, 1);
  st_init_uniform(params + p.w_fc1, f * d, bd, seed, l, 2);
  st_init_uniform(params + p.w_fc2, d * f, bf, seed, l, 3);
}

/* The layout of a call: the again tensors from c->again when given. */
static void
xf_carve(const StLayerCtx *c, const Xf *x, const void *saved, XfSaved *s)
{
  StCarve other = {c->again, 0};
  xf_layout(x, c->dt, (char *)saved, c->again != NULL ? &other : NULL, s);
}

static size_t
xf_saved(const StLayer *l, int batch, StKDtype dt)
{
  Xf x = xf_of(l, batch);
  XfSaved s;
  return xf_layout(&x, dt, NULL, NULL, &s);
}

static size_t
xf_again(const StLayer *l, int batch, StKDtype dt)
{
  Xf x = xf_of(l, batch);
  XfSaved s;
  StCarve again = {NULL, 0};
  xf_layout(&x, dt, NULL, &again, &s);
  return again.offset;
}

/* The backward's scratch for one branch at a time: the MLP's gradient of
 * the GELU output (dgl [B, T, F], then d u), or the attention's gradients of
 * the probabilities (dp [HB, T, T], then of the scores), of Q K V by head
 * (dqkvh [3H, B, T, hd]) and by token (dqkv [B, T, 3D]). The MLP's backward
 * ends before the attention's begins, so they share one block: as large as
 * the larger, not their sum (sim/model/layer_block.c counts the same). */
typedef struct {
  void *dgl, *dp, *dqkvh, *dqkv;
} XfBranch;

static size_t
xf_branch(const Xf *x, StKDtype dt, char *base, XfBranch *b)
{
  size_t es = st_kdt_size(dt);
  StCarve mlp = {base, 0}, att = {base, 0};
  b->dgl = st_carve(&mlp, x->btf * es);
  b->dp = st_carve(&att, x->hbtt * es);
  b->dqkvh = st_carve(&att, 3 * x->btd * es);
  b->dqkv = st_carve(&att, 3 * x->btd * es);
  return MAX(mlp.offset, att.offset);
}

#define P(off) st_at(params, c->dt, p.off)
#define DP(off) st_at(dparams, c->dt, p.off)

/* Q, K, V inside qkvh. */
static void *
head_part(const Xf *x, StKDtype dt, const void *qkvh, int which)
{
  return st_at(qkvh, dt, (size_t)which * x->btd);
}

/* The attention's probabilities from the saved Q and K: scores [HB, T, T]
 * = Q K^T, softmax in place (scaled, masked), and their dropout (the same
 * mask from the same seed when a selective recompute makes them again). */
static int
xf_probs(const StLayerCtx *c, const Xf *x, const XfSaved *s)
{
  const StKernels *k = c->k;
  int hb = x->H * x->B, T = x->T, hd = x->hd;
  int64_t sq = (int64_t)T * hd, ss = (int64_t)T * T;
  const void *q = head_part(x, c->dt, s->qkvh, 0), *kk = head_part(x, c->dt, s->qkvh, 1);
  ST_TRY(k->gemm(c->stream, 0, 1, T, T, hd, 1.0f, q, kk, 0.0f, s->att, c->dt, hb, sq, sq, ss));
  ST_TRY(k->softmax_fwd(c->stream, s->att, s->att, 1.0f / sqrtf((float)hd), x->causal, hb * T, T,
                        c->dt));
  if (!x->dropout)
    return 0;
  return k->dropout_fwd(c->stream, s->attd, s->mask_att, s->att, ST_LAYER_DROPOUT_P,
                        st_layer_subseed(c->seed, 0), c->dt, x->hbtt);
}

static int
xf_recompute(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
             const void *in, const void *saved)
{
  Xf x = xf_of(l, batch);
  XfSaved s;
  xf_carve(c, &x, saved, &s);
  return xf_probs(c, &x, &s);
}

static int
xf_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params, const void *in,
           void *out, void *saved)
{
  const StKernels *k = c->k;
  void *st = c->stream;
  StKDtype dt = c->dt;
  Xf x = xf_of(l, batch);
  XfParams p = xf_params(&x);
  XfSaved s;
  xf_carve(c, &x, saved, &s);
  int bt = (int)x.bt, hb = x.H * x.B, T = x.T, hd = x.hd;
  void *tmp; /* [B, T, 3D]: qkv, later the attention output by head and the projection */
  ST_SCRATCH(tmp, c, 3 * x.btd * st_kdt_size(dt));

  /* attention branch */
  ST_TRY(k->layernorm_fwd(st, s.h1, s.mean1, s.rstd1, in, P(ln1_g), P(ln1_b), bt, x.D, dt));
  ST_TRY(st_dense_fwd(c, s.h1, bt, x.D, 3 * x.D, P(w_qkv), P(b_qkv), tmp));
  int d_in[4] = {x.B, T, 3 * x.H, hd}, to_heads[4] = {2, 0, 1, 3};
  ST_TRY(k->permute4(st, s.qkvh, tmp, d_in, to_heads, dt));
  void *v = head_part(&x, dt, s.qkvh, 2);
  int64_t sq = (int64_t)T * hd, ss = (int64_t)T * T;
  ST_TRY(xf_probs(c, &x, &s));
  void *yh = tmp, *proj = st_at(tmp, dt, x.btd);
  ST_TRY(k->gemm(st, 0, 0, T, hd, T, 1.0f, s.attd, v, 0.0f, yh, dt, hb, ss, sq, sq));
  int d_heads[4] = {x.H, x.B, T, hd}, from_heads[4] = {1, 2, 0, 3};
  ST_TRY(k->permute4(st, s.y, yh, d_heads, from_heads, dt));
  ST_TRY(st_dense_fwd(c, s.y, bt, x.D, x.D, P(w_proj), P(b_proj), proj));
  if (x.dropout)
    ST_TRY(k->dropout_fwd(st, proj, s.mask_r1, proj, ST_LAYER_DROPOUT_P,
                          st_layer_subseed(c->seed, 1), dt, x.btd));
  ST_TRY(k->add(st, s.x1, in, proj, dt, x.btd));

  /* MLP branch; out holds fc2's output until the residual add */
  ST_TRY(k->layernorm_fwd(st, s.h2, s.mean2, s.rstd2, s.x1, P(ln2_g), P(ln2_b), bt, x.D, dt));
  ST_TRY(st_dense_fwd(c, s.h2, bt, x.D, x.F, P(w_fc1), P(b_fc1), s.u));
  ST_TRY(k->gelu_fwd(st, s.gl, s.u, dt, x.btf));
  ST_TRY(st_dense_fwd(c, s.gl, bt, x.F, x.D, P(w_fc2), P(b_fc2), out));
  if (x.dropout)
    ST_TRY(k->dropout_fwd(st, out, s.mask_r2, out, ST_LAYER_DROPOUT_P,
                          st_layer_subseed(c->seed, 2), dt, x.btd));
  return k->add(st, out, out, s.x1, dt, x.btd);
}

static int
xf_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
            const void *in, const void *out, const void *saved, const void *dout, void *din,
            void *dparams)
{
  const StKernels *k = c->k;
  void *st = c->stream;
  StKDtype dt = c->dt;
  size_t es = st_kdt_size(dt);
  Xf x = xf_of(l, batch);
  XfParams p = xf_params(&x);
  XfSaved s;
  xf_carve(c, &x, saved, &s);
  int bt = (int)x.bt, hb = x.H * x.B, T = x.T, hd = x.hd;
  float scale = 1.0f / sqrtf((float)hd);
  float pd = ST_LAYER_DROPOUT_P;
  void *g1, *g2, *dx1, *branch; /* scratch, shapes below */
  ST_SCRATCH(g1, c, x.btd * es);  /* [B, T, D] a branch output's gradient */
  ST_SCRATCH(g2, c, x.btd * es);  /* [B, T, D] a branch input's gradient */
  ST_SCRATCH(dx1, c, x.btd * es); /* [B, T, D] d x1 */
  XfBranch bs;
  ST_SCRATCH(branch, c, xf_branch(&x, dt, NULL, &bs));
  xf_branch(&x, dt, branch, &bs);
  void *dgl = bs.dgl, *dp = bs.dp, *dqkvh = bs.dqkvh, *dqkv = bs.dqkv;

  /* MLP branch: out = x1 + drop(fc2(gelu(fc1(LN2(x1))))) */
  const void *dr2 = dout;
  if (x.dropout) {
    ST_TRY(k->dropout_bwd(st, g1, dout, s.mask_r2, pd, dt, x.btd));
    dr2 = g1;
  }
  ST_TRY(st_dense_bwd(c, s.gl, dr2, bt, x.F, x.D, P(w_fc2), dgl, DP(w_fc2), DP(b_fc2)));
  ST_TRY(k->gelu_bwd(st, dgl, dgl, s.u, dt, x.btf));
  ST_TRY(st_dense_bwd(c, s.h2, dgl, bt, x.D, x.F, P(w_fc1), g2, DP(w_fc1), DP(b_fc1)));
  ST_TRY(k->layernorm_bwd(st, dx1, DP(ln2_g), DP(ln2_b), g2, s.x1, s.mean2, s.rstd2, P(ln2_g), bt,
                          x.D, dt));
  ST_TRY(k->add(st, dx1, dx1, dout, dt, x.btd));

  /* attention branch: x1 = x + drop(proj(attention(LN1(x)))) */
  const void *dr1 = dx1;
  if (x.dropout) {
    ST_TRY(k->dropout_bwd(st, g1, dx1, s.mask_r1, pd, dt, x.btd));
    dr1 = g1;
  }
  ST_TRY(st_dense_bwd(c, s.y, dr1, bt, x.D, x.D, P(w_proj), g2, DP(w_proj), DP(b_proj)));
  void *dyh = g1; /* dy by head [HB, T, hd]; g1 is free again */
  int d_tok[4] = {x.B, T, x.H, hd}, to_heads[4] = {2, 0, 1, 3};
  ST_TRY(k->permute4(st, dyh, g2, d_tok, to_heads, dt));
  const void *q = head_part(&x, dt, s.qkvh, 0), *kk = head_part(&x, dt, s.qkvh, 1);
  const void *v = head_part(&x, dt, s.qkvh, 2);
  void *dq = head_part(&x, dt, dqkvh, 0), *dk = head_part(&x, dt, dqkvh, 1);
  void *dv = head_part(&x, dt, dqkvh, 2);
  int64_t sq = (int64_t)T * hd, ss = (int64_t)T * T;
  /* dP = dY V^T, dV = P^T dY (P after dropout), then dS through dropout and softmax */
  ST_TRY(k->gemm(st, 0, 1, T, T, hd, 1.0f, dyh, v, 0.0f, dp, dt, hb, sq, sq, ss));
  ST_TRY(k->gemm(st, 1, 0, T, hd, T, 1.0f, s.attd, dyh, 0.0f, dv, dt, hb, ss, sq, sq));
  if (x.dropout)
    ST_TRY(k->dropout_bwd(st, dp, dp, s.mask_att, pd, dt, x.hbtt));
  ST_TRY(k->softmax_bwd(st, dp, dp, s.att, scale, hb * T, T, dt));
  /* dQ = dS K, dK = dS^T Q */
  ST_TRY(k->gemm(st, 0, 0, T, hd, T, 1.0f, dp, kk, 0.0f, dq, dt, hb, ss, sq, sq));
  ST_TRY(k->gemm(st, 1, 0, T, hd, T, 1.0f, dp, q, 0.0f, dk, dt, hb, ss, sq, sq));
  int d_heads[4] = {3 * x.H, x.B, T, hd}, from_heads[4] = {1, 2, 0, 3};
  ST_TRY(k->permute4(st, dqkv, dqkvh, d_heads, from_heads, dt));
  ST_TRY(st_dense_bwd(c, s.h1, dqkv, bt, x.D, 3 * x.D, P(w_qkv), g2, DP(w_qkv), DP(b_qkv)));
  ST_TRY(k->layernorm_bwd(st, din, DP(ln1_g), DP(ln1_b), g2, in, s.mean1, s.rstd1, P(ln1_g), bt,
                          x.D, dt));
  if (din == NULL)
    return 0;
  return k->add(st, din, din, dx1, dt, x.btd);
}

const StLayerImpl st_impl_transformer_block = {
  .type = "transformer_block",
  .init = xf_init,
  .saved_bytes = xf_saved,
  .forward = xf_forward,
  .backward = xf_backward,
  .again_bytes = xf_again,
  .recompute = xf_recompute,
};
