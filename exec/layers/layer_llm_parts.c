/* layer_llm_parts.c: the attention, MLP and norm parts of the LLM layers
 * (layers_private.h gives each one's contract; sim/model/layer_attention.c
 * and layer_llm.c count what they keep and take).
 *
 * Attention on x [B, T, d]: qkv = x W_qkv^T + b, RoPE on its Q and K heads
 * in place, then either flash (kernels.h's flash_attn_*: y and the
 * log-sum-exp, nothing of T x T) or dense: Q, K, V by head [H, B, T, k]
 * (K, V repeated over their group), scores = Q K^T batched over H B, the
 * scaled, masked softmax in place (the probabilities, saved), Y = P V, back
 * to [B, T, H k]; out = y W_o^T + b. Its backward runs the same steps back;
 * RoPE's is the inverse rotation of the gradient of Q and K.
 */
#include <math.h>
#include <string.h>

#include "exec/layers/layers_private.h"
#include "model/layer_type.h"

/* ---- attention --------------------------------------------------------------------- */

StAttnGeom
st_attn_geom(const StLayer *l, int batch)
{
  StAttnGeom a;
  a.t = MAX(l->tp, 1);
  a.B = batch;
  a.T = (int)l->in_shape.dims[0] * (l->sp ? a.t : 1);
  a.d = (int)l->in_shape.dims[1];
  a.H = (int)st_layer_attr(l, "heads", 1) / a.t;
  a.G = (int)st_layer_attr(l, "kv_heads", 1) / a.t;
  a.k = (int)st_layer_attr(l, "head_dim", 1);
  a.rot = (int)st_layer_attr(l, "rope_dim", 0);
  a.theta = (float)st_layer_attr(l, "rope_theta", 0);
  a.causal = st_layer_attr(l, "causal", 1) != 0;
  a.window = (int)st_layer_attr(l, "window", 0);
  a.flash = st_layer_attr(l, "flash", 1) != 0;
  a.qkv_bias = st_layer_attr(l, "qkv_bias", 0) != 0;
  a.out_bias = st_layer_attr(l, "out_bias", 0) != 0;
  a.bias_first = 0;
  a.bias_rows = batch * a.T;
  return a;
}

/* Widths: q = H k, n = q + 2 G k; element offsets of the parameters. */
typedef struct {
  size_t q, n, w_qkv, b_qkv, w_o, b_o, end;
} AttnParams;

static AttnParams
attn_params(const StAttnGeom *a)
{
  AttnParams p;
  p.q = (size_t)a->H * a->k;
  p.n = p.q + 2 * (size_t)a->G * a->k;
  p.w_qkv = 0;
  p.b_qkv = p.n * a->d;
  p.w_o = p.b_qkv + (a->qkv_bias ? p.n : 0);
  p.b_o = p.w_o + (size_t)a->d * p.q;
  p.end = p.b_o + (a->out_bias ? (size_t)a->d : 0);
  return p;
}

size_t
st_attn_param_count(const StAttnGeom *a)
{
  return attn_params(a).end;
}

void
st_attn_spans(const StAttnGeom *a, int rank, StTpSpan *out, int *n)
{
  AttnParams p = attn_params(a);
  size_t k = (size_t)a->k, d = (size_t)a->d, t = (size_t)a->t;
  size_t H = (size_t)a->H * t, G = (size_t)a->G * t; /* the whole layer's */
  size_t wq = H * k, wn = wq + 2 * G * k;            /* its widths */
  size_t hq = (size_t)a->H * k, gk = (size_t)a->G * k;
  size_t w_o = wn * d + (a->qkv_bias ? wn : 0), b_o = w_o + d * wq;
  /* rows of W_qkv (and entries of b_qkv): its Q heads, K heads, V heads */
  size_t whole_row[3] = {rank * hq, wq + rank * gk, wq + G * k + rank * gk};
  size_t part_row[3] = {0, hq, hq + gk}, len[3] = {hq, gk, gk};
  for (int j = 0; j < 3; j++) {
    st_span_add(out, n, whole_row[j] * d, p.w_qkv + part_row[j] * d, len[j] * d, 1, 0, 0,
                ST_TP_SPAN_SPLIT);
    if (a->qkv_bias)
      st_span_add(out, n, wn * d + whole_row[j], p.b_qkv + part_row[j], len[j], 1, 0, 0,
                  ST_TP_SPAN_SPLIT);
  }
  st_span_add(out, n, w_o + rank * hq, p.w_o, hq, d, wq, hq, ST_TP_SPAN_SPLIT);
  if (a->out_bias)
    st_span_add(out, n, b_o, p.b_o, d, 1, 0, 0, ST_TP_SPAN_WHOLE);
}

void
st_attn_init(const StAttnGeom *a, float *params, uint64_t seed, const StLayer *l, int tensor)
{
  AttnParams p = attn_params(a);
  st_init_fill(params, p.end, 0.0f);
  st_init_uniform(params + p.w_qkv, p.n * a->d, 1.0f / sqrtf((float)a->d), seed, l, tensor);
  st_init_uniform(params + p.w_o, (size_t)a->d * p.q, 1.0f / sqrtf((float)p.q), seed, l,
                  tensor + 1);
}

void
st_attn_layout(const StAttnGeom *a, StKDtype dt, StCarve *main, StCarve *again, StAttnSaved *s)
{
  AttnParams p = attn_params(a);
  size_t es = st_kdt_size(dt), bt = (size_t)a->B * a->T;
  s->qkv = st_carve(main, bt * p.n * es);
  s->y = st_carve(main, bt * p.q * es);
  s->lse = a->flash ? st_carve(main, bt * a->H * sizeof(float)) : NULL;
  s->probs = a->flash ? NULL : st_carve(again, (size_t)a->H * bt * a->T * es);
}

/* The dense path's tensors by head, [H, B, T, k] each. */
typedef struct {
  void *qh, *kh, *vh, *yh;
} Heads;

static size_t
heads_carve(const StAttnGeom *a, StKDtype dt, StCarve *cv, Heads *h, int n)
{
  size_t bytes = (size_t)a->H * a->B * a->T * a->k * st_kdt_size(dt);
  void **slot[4] = {&h->qh, &h->kh, &h->vh, &h->yh};
  for (int i = 0; i < 4; i++)
    *slot[i] = i < n ? st_carve(cv, bytes) : NULL;
  return cv->offset;
}

size_t
st_attn_fwd_work(const StAttnGeom *a, StKDtype dt)
{
  if (a->flash)
    return 0;
  StCarve cv = {NULL, 0};
  Heads h;
  return heads_carve(a, dt, &cv, &h, 4);
}

size_t
st_attn_again_work(const StAttnGeom *a, StKDtype dt)
{
  if (a->flash)
    return 0;
  StCarve cv = {NULL, 0};
  Heads h;
  return heads_carve(a, dt, &cv, &h, 2);
}

/* The backward's work: dy [B T q] and dqkv [B T n]; flash the fp32 rowdot
 * [B H T]; dense Q K V by head, dy by head, dP [H B T T] and the gradients
 * of Q K V by head. */
typedef struct {
  void *dy, *dqkv, *dp;
  float *rowdot;
  Heads h, dh;
} AttnWork;

static size_t
attn_bwd_carve(const StAttnGeom *a, StKDtype dt, char *base, AttnWork *w)
{
  AttnParams p = attn_params(a);
  size_t es = st_kdt_size(dt), bt = (size_t)a->B * a->T;
  StCarve cv = {base, 0};
  w->dy = st_carve(&cv, bt * p.q * es);
  if (a->flash) {
    w->dqkv = st_carve(&cv, bt * p.n * es);
    w->rowdot = st_carve(&cv, bt * a->H * sizeof(float));
    return cv.offset;
  }
  heads_carve(a, dt, &cv, &w->h, 4); /* yh: dy by head */
  w->dp = st_carve(&cv, (size_t)a->H * bt * a->T * es);
  heads_carve(a, dt, &cv, &w->dh, 3);
  w->dqkv = st_carve(&cv, bt * p.n * es);
  return cv.offset;
}

size_t
st_attn_bwd_work(const StAttnGeom *a, StKDtype dt)
{
  AttnWork w;
  return attn_bwd_carve(a, dt, NULL, &w);
}

#define AP(off) st_at(params, c->dt, p.off)
#define ADP(off) st_at(dparams, c->dt, p.off)

/* The scores' scale and the batched products' sizes of the dense path. */
static void
dense_sizes(const StAttnGeom *a, int *hb, int64_t *sq, int64_t *ss)
{
  *hb = a->H * a->B;
  *sq = (int64_t)a->T * a->k;
  *ss = (int64_t)a->T * a->T;
}

static int
attn_probs(const StLayerCtx *c, const StAttnGeom *a, const StAttnSaved *s, const Heads *h)
{
  int hb;
  int64_t sq, ss;
  dense_sizes(a, &hb, &sq, &ss);
  ST_TRY(c->k->attn_heads(c->stream, h->qh, h->kh, h->vh, s->qkv, a->B, a->T, a->H, a->G, a->k,
                          c->dt));
  ST_TRY(c->k->gemm(c->stream, 0, 1, a->T, a->T, a->k, 1.0f, h->qh, h->kh, 0.0f, s->probs, c->dt,
                    hb, sq, sq, ss));
  return c->k->softmax_fwd(c->stream, s->probs, s->probs, 1.0f / sqrtf((float)a->k), a->causal,
                           hb * a->T, a->T, c->dt);
}

int
st_attn_forward(const StLayerCtx *c, const StAttnGeom *a, const void *params, const void *x,
                void *out, const StAttnSaved *s, void *work)
{
  const StKernels *k = c->k;
  AttnParams p = attn_params(a);
  int rows = a->B * a->T;
  ST_TRY(st_dense_fwd(c, x, rows, a->d, (int)p.n, AP(w_qkv), a->qkv_bias ? AP(b_qkv) : NULL,
                      s->qkv));
  if (a->theta > 0)
    ST_TRY(k->rope(c->stream, s->qkv, a->B, a->T, a->H + a->G, (int)p.n, a->k, a->rot, a->theta,
                   0, c->dt));
  float scale = 1.0f / sqrtf((float)a->k);
  if (a->flash) {
    ST_TRY(k->flash_attn_fwd(c->stream, s->y, s->lse, s->qkv, a->B, a->T, a->H, a->G, a->k,
                             scale, a->causal, a->window, c->dt));
  } else {
    StCarve cv = {work, 0};
    Heads h;
    heads_carve(a, c->dt, &cv, &h, 4);
    ST_TRY(attn_probs(c, a, s, &h));
    int hb;
    int64_t sq, ss;
    dense_sizes(a, &hb, &sq, &ss);
    ST_TRY(k->gemm(c->stream, 0, 0, a->T, a->k, a->T, 1.0f, s->probs, h.vh, 0.0f, h.yh, c->dt, hb,
                   ss, sq, sq));
    int dims[4] = {a->H, a->B, a->T, a->k}, perm[4] = {1, 2, 0, 3};
    ST_TRY(k->permute4(c->stream, s->y, h.yh, dims, perm, c->dt));
  }
  if (a->bias_rows == rows)
    return st_dense_fwd(c, s->y, rows, (int)p.q, a->d, AP(w_o), a->out_bias ? AP(b_o) : NULL,
                        out);
  ST_TRY(st_dense_fwd(c, s->y, rows, (int)p.q, a->d, AP(w_o), NULL, out));
  return a->out_bias ? st_bias_rows(c, out, AP(b_o), a->bias_first, a->bias_rows, a->d) : 0;
}

int
st_attn_recompute(const StLayerCtx *c, const StAttnGeom *a, const StAttnSaved *s, void *work)
{
  g_return_val_if_fail(!a->flash, ST_K_EINVAL);
  StCarve cv = {work, 0};
  Heads h;
  heads_carve(a, c->dt, &cv, &h, 2);
  return attn_probs(c, a, s, &h);
}

int
st_attn_backward(const StLayerCtx *c, const StAttnGeom *a, const void *params, const void *x,
                 const StAttnSaved *s, const void *dout, void *dx, void *dparams, void *work)
{
  const StKernels *k = c->k;
  AttnParams p = attn_params(a);
  AttnWork w;
  attn_bwd_carve(a, c->dt, work, &w);
  int rows = a->B * a->T;
  float scale = 1.0f / sqrtf((float)a->k);
  ST_TRY(st_dense_bwd(c, s->y, dout, rows, (int)p.q, a->d, AP(w_o), w.dy, ADP(w_o),
                      a->out_bias ? ADP(b_o) : NULL));
  if (a->flash) {
    ST_TRY(k->flash_attn_bwd(c->stream, w.dqkv, w.dy, s->qkv, s->y, s->lse, w.rowdot, a->B, a->T,
                             a->H, a->G, a->k, scale, a->causal, a->window, c->dt));
  } else {
    int hb;
    int64_t sq, ss;
    dense_sizes(a, &hb, &sq, &ss);
    int dims[4] = {a->B, a->T, a->H, a->k}, perm[4] = {2, 0, 1, 3};
    ST_TRY(k->permute4(c->stream, w.h.yh, w.dy, dims, perm, c->dt)); /* dy by head */
    ST_TRY(k->attn_heads(c->stream, w.h.qh, w.h.kh, w.h.vh, s->qkv, a->B, a->T, a->H, a->G, a->k,
                         c->dt));
    /* dP = dY V^T, dV = P^T dY, dS through the softmax, dQ = dS K, dK = dS^T Q */
    ST_TRY(k->gemm(c->stream, 0, 1, a->T, a->T, a->k, 1.0f, w.h.yh, w.h.vh, 0.0f, w.dp, c->dt, hb,
                   sq, sq, ss));
    ST_TRY(k->gemm(c->stream, 1, 0, a->T, a->k, a->T, 1.0f, s->probs, w.h.yh, 0.0f, w.dh.vh,
                   c->dt, hb, ss, sq, sq));
    ST_TRY(k->softmax_bwd(c->stream, w.dp, w.dp, s->probs, scale, hb * a->T, a->T, c->dt));
    ST_TRY(k->gemm(c->stream, 0, 0, a->T, a->k, a->T, 1.0f, w.dp, w.h.kh, 0.0f, w.dh.qh, c->dt,
                   hb, ss, sq, sq));
    ST_TRY(k->gemm(c->stream, 1, 0, a->T, a->k, a->T, 1.0f, w.dp, w.h.qh, 0.0f, w.dh.kh, c->dt,
                   hb, ss, sq, sq));
    ST_TRY(k->attn_heads_bwd(c->stream, w.dqkv, w.dh.qh, w.dh.kh, w.dh.vh, a->B, a->T, a->H, a->G,
                             a->k, c->dt));
  }
  if (a->theta > 0)
    ST_TRY(k->rope(c->stream, w.dqkv, a->B, a->T, a->H + a->G, (int)p.n, a->k, a->rot, a->theta,
                   1, c->dt));
  return st_dense_bwd(c, x, w.dqkv, rows, a->d, (int)p.n, AP(w_qkv), dx, ADP(w_qkv),
                      a->qkv_bias ? ADP(b_qkv) : NULL);
}

int
st_attn_qkv_fwd(const StLayerCtx *c, const StAttnGeom *a, const void *params, const void *x,
                void *qkv)
{
  AttnParams p = attn_params(a);
  return st_dense_fwd(c, x, a->B * a->T, a->d, (int)p.n, AP(w_qkv),
                      a->qkv_bias ? AP(b_qkv) : NULL, qkv);
}

int
st_attn_out_fwd(const StLayerCtx *c, const StAttnGeom *a, const void *params, const void *y,
                void *out)
{
  AttnParams p = attn_params(a);
  int rows = a->B * a->T;
  if (a->bias_rows == rows)
    return st_dense_fwd(c, y, rows, (int)p.q, a->d, AP(w_o), a->out_bias ? AP(b_o) : NULL, out);
  ST_TRY(st_dense_fwd(c, y, rows, (int)p.q, a->d, AP(w_o), NULL, out));
  return a->out_bias ? st_bias_rows(c, out, AP(b_o), a->bias_first, a->bias_rows, a->d) : 0;
}

int
st_attn_out_bwd(const StLayerCtx *c, const StAttnGeom *a, const void *params, const void *y,
                const void *dout, void *dy, void *dparams)
{
  AttnParams p = attn_params(a);
  return st_dense_bwd(c, y, dout, a->B * a->T, (int)p.q, a->d, AP(w_o), dy, ADP(w_o),
                      a->out_bias ? ADP(b_o) : NULL);
}

int
st_attn_qkv_bwd(const StLayerCtx *c, const StAttnGeom *a, const void *params, const void *x,
                const void *dqkv, void *dx, void *dparams)
{
  AttnParams p = attn_params(a);
  return st_dense_bwd(c, x, dqkv, a->B * a->T, a->d, (int)p.n, AP(w_qkv), dx, ADP(w_qkv),
                      a->qkv_bias ? ADP(b_qkv) : NULL);
}

#undef AP
#undef ADP

/* ---- MLP ----------------------------------------------------------------------------- */

/* sim/model's StMlpKind order: swiglu, geglu, gelu, none. */
enum { MLP_SWIGLU, MLP_GEGLU, MLP_GELU };

StMlpGeom
st_mlp_geom(const StLayer *l, int rows, int d, const char *bias_key)
{
  int kind = (int)st_layer_attr(l, "mlp", MLP_SWIGLU);
  if (strcmp(l->type->name, "geglu") == 0)
    kind = MLP_GEGLU;
  int t = MAX(l->tp, 1);
  StMlpGeom m = {rows, d, (int)st_layer_attr(l, "ffn", 1) / t, kind != MLP_GELU,
                 kind == MLP_SWIGLU ? 0 : 1, st_layer_attr(l, bias_key, 0) != 0, t, 0, rows};
  return m;
}

typedef struct {
  size_t w1, b1, w2, b2, end;
} MlpParams;

static MlpParams
mlp_params(const StMlpGeom *m)
{
  size_t nf = (size_t)(m->gated ? 2 : 1) * m->f, d = (size_t)m->d;
  MlpParams p;
  p.w1 = 0;
  p.b1 = nf * d;
  p.w2 = p.b1 + (m->bias ? nf : 0);
  p.b2 = p.w2 + d * m->f;
  p.end = p.b2 + (m->bias ? d : 0);
  return p;
}

size_t
st_mlp_param_count(const StMlpGeom *m)
{
  return mlp_params(m).end;
}

void
st_mlp_spans(const StMlpGeom *m, int rank, StTpSpan *out, int *n)
{
  MlpParams p = mlp_params(m);
  size_t f = (size_t)m->f, d = (size_t)m->d, F = f * (size_t)m->t, nn = m->gated ? 2 : 1;
  size_t b1 = nn * F * d, w2 = b1 + (m->bias ? nn * F : 0), b2 = w2 + d * F;
  for (size_t j = 0; j < nn; j++) { /* the gate's rows, then the up's */
    st_span_add(out, n, (j * F + rank * f) * d, p.w1 + j * f * d, f * d, 1, 0, 0,
                ST_TP_SPAN_SPLIT);
    if (m->bias)
      st_span_add(out, n, b1 + j * F + rank * f, p.b1 + j * f, f, 1, 0, 0, ST_TP_SPAN_SPLIT);
  }
  st_span_add(out, n, w2 + rank * f, p.w2, f, d, F, f, ST_TP_SPAN_SPLIT);
  if (m->bias)
    st_span_add(out, n, b2, p.b2, d, 1, 0, 0, ST_TP_SPAN_WHOLE);
}

void
st_mlp_init(const StMlpGeom *m, float *params, uint64_t seed, const StLayer *l, int tensor)
{
  MlpParams p = mlp_params(m);
  st_init_fill(params, p.end, 0.0f);
  st_init_uniform(params + p.w1, p.b1, 1.0f / sqrtf((float)m->d), seed, l, tensor);
  st_init_uniform(params + p.w2, (size_t)m->d * m->f, 1.0f / sqrtf((float)m->f), seed, l,
                  tensor + 1);
}

void
st_mlp_layout(const StMlpGeom *m, StKDtype dt, StCarve *cv, StMlpSaved *s)
{
  size_t rf = (size_t)m->rows * m->f * st_kdt_size(dt);
  s->u = st_carve(cv, rf * (m->gated ? 2 : 1));
  s->h = st_carve(cv, rf);
}

size_t
st_mlp_bwd_work(const StMlpGeom *m, StKDtype dt)
{
  StMlpSaved s;
  StCarve cv = {NULL, 0};
  st_mlp_layout(m, dt, &cv, &s); /* dh and du: the shapes of h and u */
  return cv.offset;
}

#define MP(off) st_at(params, c->dt, p.off)
#define MDP(off) st_at(dparams, c->dt, p.off)

int
st_mlp_forward(const StLayerCtx *c, const StMlpGeom *m, const void *params, const void *x,
               void *out, const StMlpSaved *s)
{
  MlpParams p = mlp_params(m);
  int nf = (m->gated ? 2 : 1) * m->f;
  ST_TRY(st_dense_fwd(c, x, m->rows, m->d, nf, MP(w1), m->bias ? MP(b1) : NULL, s->u));
  if (m->gated)
    ST_TRY(c->k->glu_fwd(c->stream, s->h, s->u, m->rows, m->f, m->act, c->dt));
  else
    ST_TRY(c->k->gelu_fwd(c->stream, s->h, s->u, c->dt, (size_t)m->rows * m->f));
  if (m->bias_rows == m->rows)
    return st_dense_fwd(c, s->h, m->rows, m->f, m->d, MP(w2), m->bias ? MP(b2) : NULL, out);
  ST_TRY(st_dense_fwd(c, s->h, m->rows, m->f, m->d, MP(w2), NULL, out));
  return m->bias ? st_bias_rows(c, out, MP(b2), m->bias_first, m->bias_rows, m->d) : 0;
}

int
st_mlp_backward(const StLayerCtx *c, const StMlpGeom *m, const void *params, const void *x,
                const StMlpSaved *s, const void *dout, void *dx, void *dparams, void *work)
{
  MlpParams p = mlp_params(m);
  int nf = (m->gated ? 2 : 1) * m->f;
  StCarve cv = {work, 0};
  StMlpSaved g; /* dh (h's shape), du (u's) */
  st_mlp_layout(m, c->dt, &cv, &g);
  ST_TRY(st_dense_bwd(c, s->h, dout, m->rows, m->f, m->d, MP(w2), g.h, MDP(w2),
                      m->bias ? MDP(b2) : NULL));
  if (m->gated)
    ST_TRY(c->k->glu_bwd(c->stream, g.u, g.h, s->u, m->rows, m->f, m->act, c->dt));
  else
    ST_TRY(c->k->gelu_bwd(c->stream, g.u, g.h, s->u, c->dt, (size_t)m->rows * m->f));
  return st_dense_bwd(c, x, g.u, m->rows, m->d, nf, MP(w1), dx, MDP(w1), m->bias ? MDP(b1) : NULL);
}

#undef MP
#undef MDP

/* ---- norms ---------------------------------------------------------------------------- */

enum { NORM_RMS, NORM_LAYER, NORM_NONE };

size_t
st_norm_param_count(int kind, int d)
{
  return kind == NORM_RMS ? (size_t)d : kind == NORM_LAYER ? 2 * (size_t)d : 0;
}

void
st_norm_init(int kind, int d, float *params)
{
  if (kind == NORM_NONE)
    return;
  st_init_fill(params, (size_t)d, 1.0f);
  if (kind == NORM_LAYER)
    st_init_fill(params + d, (size_t)d, 0.0f);
}

void
st_norm_layout(StNormPart *n, StCarve *cv)
{
  size_t v = (size_t)n->rows * sizeof(float);
  n->mean = n->kind == NORM_LAYER ? st_carve(cv, v) : NULL;
  n->rstd = n->kind == NORM_NONE ? NULL : st_carve(cv, v);
}

int
st_norm_forward(const StLayerCtx *c, const StNormPart *n, const void *params, const void *x,
                void *y)
{
  switch (n->kind) {
  case NORM_RMS:
    return c->k->rmsnorm_fwd(c->stream, y, n->rstd, x, params, n->rows, n->d, c->dt);
  case NORM_LAYER:
    return c->k->layernorm_fwd(c->stream, y, n->mean, n->rstd, x, params,
                               st_at(params, c->dt, (size_t)n->d), n->rows, n->d, c->dt);
  default:
    return c->k->copy(c->stream, y, x, (size_t)n->rows * n->d * st_kdt_size(c->dt), 0);
  }
}

int
st_norm_backward(const StLayerCtx *c, const StNormPart *n, const void *params, const void *x,
                 const void *dy, void *dx, void *dparams)
{
  switch (n->kind) {
  case NORM_RMS:
    return c->k->rmsnorm_bwd(c->stream, dx, dparams, dy, x, n->rstd, params, n->rows, n->d,
                             c->dt);
  case NORM_LAYER:
    return c->k->layernorm_bwd(c->stream, dx, dparams, st_at(dparams, c->dt, (size_t)n->d), dy,
                               x, n->mean, n->rstd, params, n->rows, n->d, c->dt);
  default:
    return dx != NULL
             ? c->k->copy(c->stream, dx, dy, (size_t)n->rows * n->d * st_kdt_size(c->dt), 0)
             : 0;
  }
}
