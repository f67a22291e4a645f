/* moe.c: mixture-of-experts routing and an expert's gather and scatter
 * (sim/model/layer_moe.c describes the chain these serve).
 *
 * Routing: p = softmax(logits) per row, its top_k experts (ties to the
 * lower index), gates p_e (norm_topk: p_e / S, S the sum over the top_k).
 * Capacity per sample, GShard's order: pass j = 0 .. top_k - 1 admits each
 * row's j-th choice, rows in order, while its expert has room; a dropped
 * choice is marked -1 - e in sel. Backward, with dg the gates' gradient
 * (0 where dropped: that gate was the constant 0):
 * dp_e = dg_e (plain) or (dg_e - sum_i dg_i g_i) / S over the top_k
 * (renormalized), 0 elsewhere; dlogits = p (dp - sum p dp).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/ref.h"

/* The expert of a choice, admitted or dropped (-1 - expert). */
static int
chosen(int32_t s)
{
  return s >= 0 ? s : -1 - s;
}

/* Row r's top_k experts by probability into sel (ties to the lower index). */
static void
top_k(const float *p, int experts, int k, int32_t *sel)
{
  for (int j = 0; j < k; j++) {
    int best = -1;
    for (int e = 0; e < experts; e++) {
      int taken = 0;
      for (int i = 0; i < j; i++)
        taken |= sel[i] == e;
      if (!taken && (best < 0 || p[e] > p[best]))
        best = e;
    }
    sel[j] = best;
  }
}

int
st_ref_moe_route_fwd(void *stream, void *gates, int ld, float *probs, int32_t *sel,
                     const void *logits, int batch, int tokens, int experts, int top_k_,
                     int capacity, int norm_topk, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || batch < 0 || tokens < 0 || experts <= 0 || top_k_ <= 0 ||
      top_k_ > experts || top_k_ > ST_K_MAX_TOP_K || capacity < 0 || ld < experts)
    return ST_K_EINVAL;
  if (batch == 0 || tokens == 0)
    return 0;
  if (gates == NULL || probs == NULL || sel == NULL || logits == NULL)
    return ST_K_EINVAL;
  int rows = batch * tokens;
  for (int r = 0; r < rows; r++) {
    float *p = probs + (size_t)r * experts, m = -INFINITY, sum = 0.0f;
    for (int e = 0; e < experts; e++)
      m = fmaxf(m, st_ref_ld(logits, dt, (size_t)r * experts + e));
    for (int e = 0; e < experts; e++)
      sum += p[e] = expf(st_ref_ld(logits, dt, (size_t)r * experts + e) - m);
    for (int e = 0; e < experts; e++)
      p[e] /= sum;
    top_k(p, experts, top_k_, sel + (size_t)r * top_k_);
    for (int e = 0; e < experts; e++)
      st_ref_st(gates, dt, (size_t)r * ld + e, 0.0f);
  }
  int *count = calloc((size_t)experts, sizeof(int));
  if (count == NULL)
    return ST_K_ENOMEM;
  for (int b = 0; b < batch; b++) {
    memset(count, 0, sizeof(int) * (size_t)experts);
    for (int j = 0; j < top_k_; j++)
      for (int t = 0; t < tokens; t++) {
        int r = b * tokens + t;
        int32_t *s = sel + (size_t)r * top_k_;
        if (count[s[j]] >= capacity) {
          s[j] = -1 - s[j];
          continue;
        }
        count[s[j]]++;
        const float *p = probs + (size_t)r * experts;
        float norm = 1.0f;
        if (norm_topk) {
          norm = 0.0f;
          for (int i = 0; i < top_k_; i++)
            norm += p[chosen(s[i])];
        }
        st_ref_st(gates, dt, (size_t)r * ld + s[j], p[s[j]] / norm);
      }
  }
  free(count);
  return 0;
}

int
st_ref_moe_route_bwd(void *stream, void *dlogits, const void *dgates, int ld,
                     const float *probs, const int32_t *sel, int rows, int experts, int top_k_,
                     int norm_topk, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || experts <= 0 || top_k_ <= 0 || top_k_ > experts ||
      top_k_ > ST_K_MAX_TOP_K || ld < experts)
    return ST_K_EINVAL;
  if (rows == 0)
    return 0;
  if (dlogits == NULL || dgates == NULL || probs == NULL || sel == NULL)
    return ST_K_EINVAL;
  float *dp = malloc(sizeof(float) * (size_t)experts);
  if (dp == NULL)
    return ST_K_ENOMEM;
  for (int r = 0; r < rows; r++) {
    const float *p = probs + (size_t)r * experts;
    const int32_t *s = sel + (size_t)r * top_k_;
    memset(dp, 0, sizeof(float) * (size_t)experts);
    /* a dropped gate's gradient counts as 0: its gate was a constant */
    float norm = 0.0f, gdg = 0.0f, dg[ST_K_MAX_TOP_K];
    for (int j = 0; j < top_k_; j++) {
      norm += p[chosen(s[j])];
      dg[j] = s[j] >= 0 ? st_ref_ld(dgates, dt, (size_t)r * ld + s[j]) : 0.0f;
    }
    for (int j = 0; j < top_k_; j++)
      gdg += dg[j] * p[chosen(s[j])] / norm;
    for (int j = 0; j < top_k_; j++)
      dp[chosen(s[j])] = norm_topk ? (dg[j] - gdg) / norm : dg[j];
    float pdp = 0.0f;
    for (int e = 0; e < experts; e++)
      pdp += p[e] * dp[e];
    for (int e = 0; e < experts; e++)
      st_ref_st(dlogits, dt, (size_t)r * experts + e, p[e] * (dp[e] - pdp));
  }
  free(dp);
  return 0;
}

static int
slots_check(StKDtype dt, int batch, int tokens, int capacity, int d)
{
  return !st_ref_dt_ok(dt) || batch < 0 || tokens < 0 || capacity < 0 || d < 0;
}

int
st_ref_moe_gather(void *stream, void *x, int32_t *idx, float *gate, const void *src, int ld,
                  int x_col, int gate_col, int batch, int tokens, int capacity, int d,
                  StKDtype dt)
{
  if (slots_check(dt, batch, tokens, capacity, d) || x_col < 0 || x_col + d > ld ||
      gate_col < 0 || gate_col >= ld)
    return ST_K_EINVAL;
  if (batch == 0 || capacity == 0)
    return 0;
  if (x == NULL || idx == NULL || gate == NULL || (src == NULL && tokens > 0))
    return ST_K_EINVAL;
  for (int b = 0; b < batch; b++) {
    int c = 0;
    for (int t = 0; t < tokens && c < capacity; t++) {
      size_t row = ((size_t)b * tokens + t) * ld;
      float g = st_ref_ld(src, dt, row + gate_col);
      if (g == 0.0f)
        continue;
      size_t slot = (size_t)b * capacity + c++;
      idx[slot] = t;
      gate[slot] = g;
      for (int j = 0; j < d; j++)
        st_ref_st(x, dt, slot * d + j, st_ref_ld(src, dt, row + x_col + j));
    }
    for (; c < capacity; c++) {
      size_t slot = (size_t)b * capacity + c;
      idx[slot] = -1;
      gate[slot] = 0.0f;
      for (int j = 0; j < d; j++)
        st_ref_st(x, dt, slot * d + j, 0.0f);
    }
  }
  return 0;
}

int
st_ref_moe_scatter(void *stream, void *dst, int ld, int col, const void *y,
                   const int32_t *idx, const float *gate, int batch, int tokens, int capacity,
                   int d, StKDtype dt)
{
  if (slots_check(dt, batch, tokens, capacity, d) || col < 0 || col + d > ld)
    return ST_K_EINVAL;
  if (batch == 0 || capacity == 0 || d == 0)
    return 0;
  if (dst == NULL || y == NULL || idx == NULL)
    return ST_K_EINVAL;
  for (int b = 0; b < batch; b++)
    for (int c = 0; c < capacity; c++) {
      size_t slot = (size_t)b * capacity + c;
      if (idx[slot] < 0 || idx[slot] >= tokens)
        continue;
      float g = gate != NULL ? gate[slot] : 1.0f;
      size_t row = ((size_t)b * tokens + idx[slot]) * ld + col;
      for (int j = 0; j < d; j++)
        st_ref_st(dst, dt, row + j, st_ref_ld(dst, dt, row + j) +
                                      g * st_ref_ld(y, dt, slot * d + j));
    }
  return 0;
}

int
st_ref_moe_gather_grad(void *stream, void *dy, void *dgates, int ld_gates, int gate_col,
                       const void *dsum, int ld_sum, const void *y, const int32_t *idx,
                       const float *gate, int batch, int tokens, int capacity, int d,
                       StKDtype dt)
{
  if (slots_check(dt, batch, tokens, capacity, d) || ld_sum < d ||
      (dgates != NULL && (gate_col < 0 || gate_col >= ld_gates)))
    return ST_K_EINVAL;
  if (batch == 0 || capacity == 0)
    return 0;
  if (dy == NULL || dsum == NULL || y == NULL || idx == NULL || gate == NULL)
    return ST_K_EINVAL;
  for (int b = 0; b < batch; b++)
    for (int c = 0; c < capacity; c++) {
      size_t slot = (size_t)b * capacity + c;
      int t = idx[slot];
      if (t < 0 || t >= tokens) {
        for (int j = 0; j < d; j++)
          st_ref_st(dy, dt, slot * d + j, 0.0f);
        continue;
      }
      size_t row = ((size_t)b * tokens + t) * ld_sum;
      float s = 0.0f;
      for (int j = 0; j < d; j++) {
        float ds = st_ref_ld(dsum, dt, row + j);
        s += ds * st_ref_ld(y, dt, slot * d + j);
        st_ref_st(dy, dt, slot * d + j, gate[slot] * ds);
      }
      if (dgates != NULL) {
        size_t at = ((size_t)b * tokens + t) * ld_gates + gate_col;
        st_ref_st(dgates, dt, at, st_ref_ld(dgates, dt, at) + s);
      }
    }
  return 0;
}
