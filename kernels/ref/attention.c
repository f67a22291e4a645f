/* attention.c: flash-style attention (Dao et al. 2022; the backward as
 * FlashAttention-2, Dao 2023, algorithm 2) with grouped-query heads, and the
 * split of qkv by head for the dense path (exec/layers/layer_llm_parts.c).
 *
 * Forward, per query row i of head h (kv head g = h / (H / G)): scores s_j
 * = scale q_i . k_j over the keys it sees (kmath.h: causal, window), m =
 * max s_j, l = sum exp(s_j - m), o_i = sum exp(s_j - m) v_j / l, lse_i = m +
 * log l. Two passes over the keys, no s x s tensor: memory linear in the
 * tokens (the output row is accumulated in fp32, head_dim floats).
 *
 * Backward, from lse: D_i = do_i . o_i; for each key j seen: p = exp(s_ij -
 * lse_i) (the score recomputed), dp = do_i . v_j, ds = p (dp - D_i); dq_i +=
 * scale ds k_j, dk_j += scale ds q_i, dv_j += p do_i: five products per
 * pair, QK^T once more than the dense backward. The key side accumulates
 * over the group's query heads in fp32 (tokens x head_dim floats per kv
 * head, linear).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/kmath.h"
#include "kernels/ref/ref.h"

typedef struct {
  int B, T, H, G, k;
  size_t ld; /* elements of a qkv row */
} Geom;

static int
geom_of(Geom *g, int batch, int tokens, int heads, int kv_heads, int head_dim, StKDtype dt,
        int *done)
{
  *done = 1;
  if (!st_ref_dt_ok(dt) || batch < 0 || tokens < 0 || heads < 0 || kv_heads <= 0 ||
      head_dim < 0 || heads % kv_heads != 0)
    return ST_K_EINVAL;
  *g = (Geom){batch, tokens, heads, kv_heads, head_dim,
              (size_t)(heads + 2 * kv_heads) * head_dim};
  *done = batch == 0 || tokens == 0 || heads == 0 || head_dim == 0;
  return 0;
}

/* Element offsets of query head h, key and value head of h's group, at row (b, t). */
static size_t
q_at(const Geom *g, int b, int t, int h)
{
  return ((size_t)b * g->T + t) * g->ld + (size_t)h * g->k;
}

static size_t
k_at(const Geom *g, int b, int t, int h)
{
  return ((size_t)b * g->T + t) * g->ld + (size_t)(g->H + h / (g->H / g->G)) * g->k;
}

static size_t
v_at(const Geom *g, int b, int t, int h)
{
  return k_at(g, b, t, h) + (size_t)g->G * g->k;
}

static size_t
o_at(const Geom *g, int b, int t, int h)
{
  return (((size_t)b * g->T + t) * g->H + h) * g->k;
}

static size_t
row_at(const Geom *g, int b, int h, int t)
{
  return ((size_t)b * g->H + h) * g->T + t;
}

int
st_ref_flash_attn_fwd(void *stream, void *o, float *lse, const void *qkv, int batch,
                      int tokens, int heads, int kv_heads, int head_dim, float scale,
                      int causal, int window, StKDtype dt)
{
  Geom g;
  int done, rc = geom_of(&g, batch, tokens, heads, kv_heads, head_dim, dt, &done);
  if (done)
    return rc;
  if (o == NULL || lse == NULL || qkv == NULL || head_dim > ST_K_MAX_HEAD_DIM)
    return ST_K_EINVAL;
  float *acc = malloc(sizeof(float) * (size_t)head_dim);
  if (acc == NULL)
    return ST_K_ENOMEM;
  for (int b = 0; b < batch; b++)
    for (int h = 0; h < heads; h++)
      for (int i = 0; i < tokens; i++) {
        size_t q = q_at(&g, b, i, h);
        float m = -INFINITY;
        for (int j = 0; j < tokens; j++)
          if (st_k_attn_sees(i, j, causal, window))
            m = fmaxf(m, scale * st_ref_dot(qkv, q, qkv, k_at(&g, b, j, h), head_dim, dt));
        float l = 0.0f;
        memset(acc, 0, sizeof(float) * (size_t)head_dim);
        for (int j = 0; j < tokens; j++) {
          if (!st_k_attn_sees(i, j, causal, window))
            continue;
          float p = expf(scale * st_ref_dot(qkv, q, qkv, k_at(&g, b, j, h), head_dim, dt) - m);
          l += p;
          size_t v = v_at(&g, b, j, h);
          for (int c = 0; c < head_dim; c++)
            acc[c] += p * st_ref_ld(qkv, dt, v + c);
        }
        size_t out = o_at(&g, b, i, h);
        for (int c = 0; c < head_dim; c++)
          st_ref_st(o, dt, out + c, l > 0.0f ? acc[c] / l : 0.0f);
        lse[row_at(&g, b, h, i)] = l > 0.0f ? m + logf(l) : -INFINITY;
      }
  free(acc);
  return 0;
}

int
st_ref_flash_attn_bwd(void *stream, void *dqkv, const void *dout, const void *qkv,
                      const void *o, const float *lse, float *rowdot, int batch, int tokens,
                      int heads, int kv_heads, int head_dim, float scale, int causal,
                      int window, StKDtype dt)
{
  Geom g;
  int done, rc = geom_of(&g, batch, tokens, heads, kv_heads, head_dim, dt, &done);
  if (done)
    return rc;
  if (dqkv == NULL || dout == NULL || qkv == NULL || o == NULL || lse == NULL ||
      rowdot == NULL || head_dim > ST_K_MAX_HEAD_DIM)
    return ST_K_EINVAL;
  size_t tk = (size_t)tokens * head_dim;
  float *dk = malloc(sizeof(float) * 2 * tk), *dq = malloc(sizeof(float) * (size_t)head_dim);
  if (dk == NULL || dq == NULL) {
    free(dk);
    free(dq);
    return ST_K_ENOMEM;
  }
  float *dv = dk + tk;
  for (int b = 0; b < batch; b++)
    for (int h = 0; h < heads; h++)
      for (int i = 0; i < tokens; i++)
        rowdot[row_at(&g, b, h, i)] =
          st_ref_dot(dout, o_at(&g, b, i, h), o, o_at(&g, b, i, h), head_dim, dt);
  int group = heads / kv_heads;
  for (int b = 0; b < batch; b++)
    for (int kvh = 0; kvh < kv_heads; kvh++) {
      memset(dk, 0, sizeof(float) * 2 * tk);
      for (int h = kvh * group; h < (kvh + 1) * group; h++)
        for (int i = 0; i < tokens; i++) {
          size_t q = q_at(&g, b, i, h), od = o_at(&g, b, i, h);
          float l = lse[row_at(&g, b, h, i)], d = rowdot[row_at(&g, b, h, i)];
          memset(dq, 0, sizeof(float) * (size_t)head_dim);
          for (int j = 0; j < tokens; j++) {
            if (!st_k_attn_sees(i, j, causal, window))
              continue;
            size_t kj = k_at(&g, b, j, h), vj = v_at(&g, b, j, h);
            float p = expf(scale * st_ref_dot(qkv, q, qkv, kj, head_dim, dt) - l);
            float ds = p * (st_ref_dot(dout, od, qkv, vj, head_dim, dt) - d);
            for (int c = 0; c < head_dim; c++) {
              dq[c] += scale * ds * st_ref_ld(qkv, dt, kj + c);
              dk[(size_t)j * head_dim + c] += scale * ds * st_ref_ld(qkv, dt, q + c);
              dv[(size_t)j * head_dim + c] += p * st_ref_ld(dout, dt, od + c);
            }
          }
          for (int c = 0; c < head_dim; c++)
            st_ref_st(dqkv, dt, q + c, dq[c]);
        }
      int h0 = kvh * group; /* any head of the group names its kv head */
      for (int j = 0; j < tokens; j++)
        for (int c = 0; c < head_dim; c++) {
          st_ref_st(dqkv, dt, k_at(&g, b, j, h0) + c, dk[(size_t)j * head_dim + c]);
          st_ref_st(dqkv, dt, v_at(&g, b, j, h0) + c, dv[(size_t)j * head_dim + c]);
        }
    }
  free(dk);
  free(dq);
  return 0;
}

/* Element offset of head h, row (b, t) in a [heads, batch, tokens, head_dim] tensor. */
static size_t
hd_at(const Geom *g, int h, int b, int t)
{
  return (((size_t)h * g->B + b) * g->T + t) * g->k;
}

int
st_ref_attn_heads(void *stream, void *qh, void *kh, void *vh, const void *qkv, int batch,
                  int tokens, int heads, int kv_heads, int head_dim, StKDtype dt)
{
  Geom g;
  int done, rc = geom_of(&g, batch, tokens, heads, kv_heads, head_dim, dt, &done);
  if (done)
    return rc;
  if (qkv == NULL)
    return ST_K_EINVAL;
  for (int h = 0; h < heads; h++)
    for (int b = 0; b < batch; b++)
      for (int t = 0; t < tokens; t++)
        for (int c = 0; c < head_dim; c++) {
          size_t to = hd_at(&g, h, b, t) + c;
          if (qh != NULL)
            st_ref_st(qh, dt, to, st_ref_ld(qkv, dt, q_at(&g, b, t, h) + c));
          if (kh != NULL)
            st_ref_st(kh, dt, to, st_ref_ld(qkv, dt, k_at(&g, b, t, h) + c));
          if (vh != NULL)
            st_ref_st(vh, dt, to, st_ref_ld(qkv, dt, v_at(&g, b, t, h) + c));
        }
  return 0;
}

int
st_ref_attn_heads_bwd(void *stream, void *dqkv, const void *dqh, const void *dkh,
                      const void *dvh, int batch, int tokens, int heads, int kv_heads,
                      int head_dim, StKDtype dt)
{
  Geom g;
  int done, rc = geom_of(&g, batch, tokens, heads, kv_heads, head_dim, dt, &done);
  if (done)
    return rc;
  if (dqkv == NULL || dqh == NULL || dkh == NULL || dvh == NULL)
    return ST_K_EINVAL;
  int group = heads / kv_heads;
  for (int b = 0; b < batch; b++)
    for (int t = 0; t < tokens; t++)
      for (int c = 0; c < head_dim; c++) {
        for (int h = 0; h < heads; h++)
          st_ref_st(dqkv, dt, q_at(&g, b, t, h) + c, st_ref_ld(dqh, dt, hd_at(&g, h, b, t) + c));
        for (int kvh = 0; kvh < kv_heads; kvh++) {
          float sk = 0.0f, sv = 0.0f;
          for (int h = kvh * group; h < (kvh + 1) * group; h++) {
            sk += st_ref_ld(dkh, dt, hd_at(&g, h, b, t) + c);
            sv += st_ref_ld(dvh, dt, hd_at(&g, h, b, t) + c);
          }
          st_ref_st(dqkv, dt, k_at(&g, b, t, kvh * group) + c, sk);
          st_ref_st(dqkv, dt, v_at(&g, b, t, kvh * group) + c, sv);
        }
      }
  return 0;
}
