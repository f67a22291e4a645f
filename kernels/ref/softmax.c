/* softmax.c: the row softmax of attention (scaled, optionally causal) and
 * the softmax cross-entropy loss. Both subtract the row's maximum before
 * exponentiating, so no logit overflows. */
#include <math.h>

#include "kernels/ref/ref.h"

int
st_ref_softmax_fwd(void *stream, void *out, const void *in, float scale, int causal, int rows,
                   int cols, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (out == NULL || in == NULL)
    return ST_K_EINVAL;
  for (int r = 0; r < rows; r++) {
    size_t base = (size_t)r * cols;
    int valid = causal ? r % cols + 1 : cols; /* query r mod cols sees keys 0..itself */
    float mx = -INFINITY, sum = 0.0f;
    for (int j = 0; j < valid; j++)
      mx = fmaxf(mx, scale * st_ref_ld(in, dt, base + j));
    for (int j = 0; j < valid; j++)
      sum += expf(scale * st_ref_ld(in, dt, base + j) - mx);
    for (int j = 0; j < cols; j++)
      st_ref_st(out, dt, base + j,
                j < valid ? expf(scale * st_ref_ld(in, dt, base + j) - mx) / sum : 0.0f);
  }
  return 0;
}

int
st_ref_softmax_bwd(void *stream, void *din, const void *dout, const void *out, float scale,
                   int rows, int cols, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (din == NULL || dout == NULL || out == NULL)
    return ST_K_EINVAL;
  for (int r = 0; r < rows; r++) {
    size_t base = (size_t)r * cols;
    float dot = 0.0f;
    for (int j = 0; j < cols; j++)
      dot += st_ref_ld(dout, dt, base + j) * st_ref_ld(out, dt, base + j);
    for (int j = 0; j < cols; j++)
      st_ref_st(din, dt, base + j,
                scale * st_ref_ld(out, dt, base + j) * (st_ref_ld(dout, dt, base + j) - dot));
  }
  return 0;
}

int
st_ref_softmax_ce_fwd(void *stream, float *loss_sum, float *probs, const void *logits,
                      const int32_t *targets, int rows, int classes, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || classes < 0)
    return ST_K_EINVAL;
  if (rows == 0 || classes == 0)
    return 0;
  if (loss_sum == NULL || probs == NULL || logits == NULL || targets == NULL)
    return ST_K_EINVAL;
  float total = 0.0f;
  for (int r = 0; r < rows; r++) {
    size_t base = (size_t)r * classes;
    float mx = -INFINITY, sum = 0.0f;
    for (int j = 0; j < classes; j++)
      mx = fmaxf(mx, st_ref_ld(logits, dt, base + j));
    for (int j = 0; j < classes; j++)
      sum += expf(st_ref_ld(logits, dt, base + j) - mx);
    for (int j = 0; j < classes; j++)
      probs[base + j] = expf(st_ref_ld(logits, dt, base + j) - mx) / sum;
    int32_t t = targets[r];
    if (t >= 0 && t < classes) /* -log p_t = log sum exp - x_t, without log(0) */
      total += logf(sum) + mx - st_ref_ld(logits, dt, base + t);
  }
  *loss_sum += total;
  return 0;
}

int
st_ref_softmax_ce_bwd(void *stream, void *dlogits, const float *probs, const int32_t *targets,
                      float scale, int rows, int classes, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || classes < 0)
    return ST_K_EINVAL;
  if (rows == 0 || classes == 0)
    return 0;
  if (dlogits == NULL || probs == NULL || targets == NULL)
    return ST_K_EINVAL;
  for (int r = 0; r < rows; r++) {
    size_t base = (size_t)r * classes;
    int32_t t = targets[r];
    int ignored = t < 0 || t >= classes;
    for (int j = 0; j < classes; j++)
      st_ref_st(dlogits, dt, base + j,
                ignored ? 0.0f : (probs[base + j] - (j == t ? 1.0f : 0.0f)) * scale);
  }
  return 0;
}
