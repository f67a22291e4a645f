/* ring_attention.c: one step of context parallelism's ring attention (Liu
 * et al., "Ring Attention with Blockwise Transformers", 2023; Transformer
 * Engine's p2p context parallelism), kernels.h ring_attn_*.
 *
 * Forward, per query row i of head h (kv head g = h / (H / G)) against one
 * chunk of keys: the scores s_j = scale q_i . k_j over the keys i sees by
 * their global positions (kmath.h: causal, window), m' = max(m, max s_j),
 * then the online
 * softmax's merge (flash attention's): o = o exp(m - m') + sum exp(s_j - m')
 * v_j, l = l exp(m - m') + sum exp(s_j - m'). After every chunk, y = o / l
 * and lse = m + log l are what flash_attn_fwd gives on the whole sequence.
 *
 * Backward, per step from the whole sequence's lse: p = exp(s_ij - lse_i),
 * D_i = dy_i . y_i, dp = dy_i . v_j, ds = p (dp - D_i); dq_i += scale ds
 * k_j, dk_j += scale ds q_i, dv_j += p dy_i: attention.c's backward on
 * the pairs of one chunk, accumulated (fp32 arithmetic, stored in dt).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/kmath.h"
#include "kernels/ref/ref.h"

typedef struct {
  int B, T, H, G, k, c, rank, kv_rank, causal, window;
  size_t ld_q, ld_kv;
} Ring;

static int
ring_ok(const Ring *g, StKDtype dt)
{
  return st_ref_dt_ok(dt) && g->B >= 0 && g->T >= 0 && g->T % 2 == 0 && g->H >= 0 &&
         g->G > 0 && g->k > 0 && g->k <= ST_K_MAX_HEAD_DIM && g->H % g->G == 0 && g->c >= 1 &&
         g->rank >= 0 && g->rank < g->c && g->kv_rank >= 0 && g->kv_rank < g->c;
}

static int
sees(const Ring *g, int i, int j)
{
  return st_k_attn_sees(st_k_cp_position(i, g->T, g->c, g->rank),
                        st_k_cp_position(j, g->T, g->c, g->kv_rank), g->causal, g->window);
}

/* Element offsets: query head h of row (b, t) in q, key / value head of h's
 * group in kv, head h of a [B, T, H k] tensor, row (b, h, t) of [B, H, T]. */
static size_t
q_at(const Ring *g, size_t ld, int b, int t, int h)
{
  return ((size_t)b * g->T + t) * ld + (size_t)h * g->k;
}

static size_t
k_at(const Ring *g, size_t ld, int b, int t, int h)
{
  return ((size_t)b * g->T + t) * ld + (size_t)(h / (g->H / g->G)) * g->k;
}

static size_t
v_at(const Ring *g, size_t ld, int b, int t, int h)
{
  return k_at(g, ld, b, t, h) + (size_t)g->G * g->k;
}

static size_t
o_at(const Ring *g, int b, int t, int h)
{
  return (((size_t)b * g->T + t) * g->H + h) * g->k;
}

static size_t
row_at(const Ring *g, int b, int h, int t)
{
  return ((size_t)b * g->H + h) * g->T + t;
}

int
st_ref_ring_attn_fwd(void *stream, float *o, float *m, float *l, const void *q, int ld_q,
                     const void *kv, int batch, int tokens, int heads, int kv_heads,
                     int head_dim, float scale, int causal, int window, int c, int rank,
                     int kv_rank, StKDtype dt)
{
  (void)stream;
  Ring g = {batch, tokens, heads, kv_heads, head_dim, c, rank, kv_rank, causal, window,
            (size_t)ld_q, 2 * (size_t)kv_heads * head_dim};
  if (!ring_ok(&g, dt) || ld_q < heads * head_dim)
    return ST_K_EINVAL;
  if (batch == 0 || tokens == 0 || heads == 0)
    return 0;
  if (o == NULL || m == NULL || l == NULL || q == NULL || kv == NULL)
    return ST_K_EINVAL;
  float *s = malloc(sizeof(float) * (size_t)tokens);
  if (s == NULL)
    return ST_K_ENOMEM;
  for (int b = 0; b < batch; b++)
    for (int h = 0; h < heads; h++)
      for (int i = 0; i < tokens; i++) {
        size_t qi = q_at(&g, g.ld_q, b, i, h), r = row_at(&g, b, h, i);
        float mx = l[r] > 0.0f ? m[r] : -INFINITY;
        for (int j = 0; j < tokens; j++) {
          s[j] = sees(&g, i, j) ? scale * st_ref_dot(q, qi, kv, k_at(&g, g.ld_kv, b, j, h), head_dim, dt)
                                : -INFINITY;
          mx = fmaxf(mx, s[j]);
        }
        if (mx == -INFINITY) /* nothing seen yet, nor in this chunk */
          continue;
        float keep = l[r] > 0.0f ? expf(m[r] - mx) : 0.0f;
        float *out = o + o_at(&g, b, i, h);
        for (int d = 0; d < head_dim; d++)
          out[d] *= keep;
        float sum = l[r] * keep;
        for (int j = 0; j < tokens; j++) {
          if (s[j] == -INFINITY)
            continue;
          float p = expf(s[j] - mx);
          sum += p;
          size_t v = v_at(&g, g.ld_kv, b, j, h);
          for (int d = 0; d < head_dim; d++)
            out[d] += p * st_ref_ld(kv, dt, v + d);
        }
        m[r] = mx;
        l[r] = sum;
      }
  free(s);
  return 0;
}

int
st_ref_ring_attn_finish(void *stream, void *y, float *lse, const float *o, const float *m,
                        const float *l, int batch, int tokens, int heads, int head_dim,
                        StKDtype dt)
{
  (void)stream;
  if (!st_ref_dt_ok(dt) || batch < 0 || tokens < 0 || heads < 0 || head_dim < 0)
    return ST_K_EINVAL;
  Ring g = {batch, tokens, heads, 1, head_dim, 1, 0, 0, 0, 0, 0, 0};
  for (int b = 0; b < batch; b++)
    for (int h = 0; h < heads; h++)
      for (int i = 0; i < tokens; i++) {
        size_t r = row_at(&g, b, h, i), at = o_at(&g, b, i, h);
        for (int d = 0; d < head_dim; d++)
          st_ref_st(y, dt, at + d, l[r] > 0.0f ? o[at + d] / l[r] : 0.0f);
        lse[r] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
      }
  return 0;
}

static void
acc(void *p, StKDtype dt, size_t i, float v)
{
  st_ref_st(p, dt, i, st_ref_ld(p, dt, i) + v);
}

int
st_ref_ring_attn_bwd(void *stream, void *dq, int ld_dq, void *dkv, int ld_dkv, const void *dy,
                     const void *y, const float *lse, const void *q, int ld_q, const void *kv,
                     int batch, int tokens, int heads, int kv_heads, int head_dim, float scale,
                     int causal, int window, int c, int rank, int kv_rank, StKDtype dt)
{
  (void)stream;
  Ring g = {batch, tokens, heads, kv_heads, head_dim, c, rank, kv_rank, causal, window,
            (size_t)ld_q, 2 * (size_t)kv_heads * head_dim};
  if (!ring_ok(&g, dt) || ld_q < heads * head_dim || ld_dq < heads * head_dim ||
      (size_t)ld_dkv < g.ld_kv)
    return ST_K_EINVAL;
  if (batch == 0 || tokens == 0 || heads == 0)
    return 0;
  if (dq == NULL || dkv == NULL || dy == NULL || y == NULL || lse == NULL || q == NULL ||
      kv == NULL)
    return ST_K_EINVAL;
  for (int b = 0; b < batch; b++)
    for (int h = 0; h < heads; h++)
      for (int i = 0; i < tokens; i++) {
        size_t qi = q_at(&g, g.ld_q, b, i, h), dqi = q_at(&g, (size_t)ld_dq, b, i, h);
        size_t oi = o_at(&g, b, i, h);
        float lse_i = lse[row_at(&g, b, h, i)];
        if (lse_i == -INFINITY)
          continue;
        float D = st_ref_dot(dy, oi, y, oi, head_dim, dt);
        for (int j = 0; j < tokens; j++) {
          if (!sees(&g, i, j))
            continue;
          size_t kj = k_at(&g, g.ld_kv, b, j, h), vj = v_at(&g, g.ld_kv, b, j, h);
          size_t dkj = k_at(&g, (size_t)ld_dkv, b, j, h), dvj = v_at(&g, (size_t)ld_dkv, b, j, h);
          float p = expf(scale * st_ref_dot(q, qi, kv, kj, head_dim, dt) - lse_i);
          float ds = p * (st_ref_dot(dy, oi, kv, vj, head_dim, dt) - D);
          for (int d = 0; d < head_dim; d++) {
            acc(dq, dt, dqi + d, scale * ds * st_ref_ld(kv, dt, kj + d));
            acc(dkv, dt, dkj + d, scale * ds * st_ref_ld(q, dt, qi + d));
            acc(dkv, dt, dvj + d, p * st_ref_ld(dy, dt, oi + d));
          }
        }
      }
  return 0;
}
