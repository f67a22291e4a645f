/* normalization.c: layer norm (per row of rows x cols) and training-mode
 * batch norm (per channel of N x C x HW). Statistics in fp32, two passes
 * (mean, then the centred variance: no cancellation), biased variance and
 * eps = ST_K_NORM_EPS, as PyTorch. With xhat = (x - mean) * rstd and g the
 * scale (1 without affine), both backwards are
 *   din = rstd * (g dy - mean(g dy) - xhat * mean(g dy xhat))
 * with the means over what the statistics were taken over, and
 *   dgamma += sum dy xhat, dbeta += sum dy.
 */
#include <math.h>
#include <stdlib.h>

#include "kernels/ref/kmath.h"
#include "kernels/ref/ref.h"

static float
gamma_at(const void *gamma, StKDtype dt, size_t i)
{
  return gamma != NULL ? st_ref_ld(gamma, dt, i) : 1.0f;
}

int
st_ref_layernorm_fwd(void *stream, void *out, float *mean, float *rstd, const void *in,
                     const void *gamma, const void *beta, int rows, int cols, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (out == NULL || mean == NULL || rstd == NULL || in == NULL)
    return ST_K_EINVAL;
  for (int r = 0; r < rows; r++) {
    size_t base = (size_t)r * cols;
    float sum = 0.0f;
    for (int j = 0; j < cols; j++)
      sum += st_ref_ld(in, dt, base + j);
    float mu = sum / (float)cols, var = 0.0f;
    for (int j = 0; j < cols; j++) {
      float d = st_ref_ld(in, dt, base + j) - mu;
      var += d * d;
    }
    float rs = 1.0f / sqrtf(var / (float)cols + ST_K_NORM_EPS);
    mean[r] = mu;
    rstd[r] = rs;
    for (int j = 0; j < cols; j++) {
      float y = (st_ref_ld(in, dt, base + j) - mu) * rs * gamma_at(gamma, dt, j);
      if (beta != NULL)
        y += st_ref_ld(beta, dt, j);
      st_ref_st(out, dt, base + j, y);
    }
  }
  return 0;
}

int
st_ref_layernorm_bwd(void *stream, void *din, void *dgamma, void *dbeta, const void *dout,
                     const void *in, const float *mean, const float *rstd, const void *gamma,
                     int rows, int cols, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (dout == NULL || in == NULL || mean == NULL || rstd == NULL)
    return ST_K_EINVAL;
  /* fp32 sums of the weight gradients over all rows, added once at the end */
  float *dg = calloc(2 * (size_t)cols, sizeof(float));
  if (dg == NULL)
    return ST_K_ENOMEM;
  float *db = dg + cols;
  for (int r = 0; r < rows; r++) {
    size_t base = (size_t)r * cols;
    float mu = mean[r], rs = rstd[r], sum_gdy = 0.0f, sum_gdy_xhat = 0.0f;
    for (int j = 0; j < cols; j++) {
      float dy = st_ref_ld(dout, dt, base + j);
      float xhat = (st_ref_ld(in, dt, base + j) - mu) * rs;
      float gdy = gamma_at(gamma, dt, j) * dy;
      sum_gdy += gdy;
      sum_gdy_xhat += gdy * xhat;
      dg[j] += dy * xhat;
      db[j] += dy;
    }
    if (din == NULL)
      continue;
    float mean_gdy = sum_gdy / (float)cols, mean_gdy_xhat = sum_gdy_xhat / (float)cols;
    for (int j = 0; j < cols; j++) {
      float xhat = (st_ref_ld(in, dt, base + j) - mu) * rs;
      float gdy = gamma_at(gamma, dt, j) * st_ref_ld(dout, dt, base + j);
      st_ref_st(din, dt, base + j, rs * (gdy - mean_gdy - xhat * mean_gdy_xhat));
    }
  }
  for (int j = 0; j < cols; j++) {
    if (dgamma != NULL)
      st_ref_st(dgamma, dt, j, st_ref_ld(dgamma, dt, j) + dg[j]);
    if (dbeta != NULL)
      st_ref_st(dbeta, dt, j, st_ref_ld(dbeta, dt, j) + db[j]);
  }
  free(dg);
  return 0;
}

int
st_ref_batchnorm_fwd(void *stream, void *out, float *mean, float *rstd, const void *in,
                     const void *gamma, const void *beta, int n, int c, int hw, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || n < 0 || c < 0 || hw < 0)
    return ST_K_EINVAL;
  if (n == 0 || c == 0 || hw == 0)
    return 0;
  if (out == NULL || mean == NULL || rstd == NULL || in == NULL)
    return ST_K_EINVAL;
  float count = (float)n * (float)hw;
  for (int ch = 0; ch < c; ch++) {
    float sum = 0.0f, var = 0.0f;
    for (int s = 0; s < n; s++)
      for (int i = 0; i < hw; i++)
        sum += st_ref_ld(in, dt, ((size_t)s * c + ch) * hw + i);
    float mu = sum / count;
    for (int s = 0; s < n; s++)
      for (int i = 0; i < hw; i++) {
        float d = st_ref_ld(in, dt, ((size_t)s * c + ch) * hw + i) - mu;
        var += d * d;
      }
    float rs = 1.0f / sqrtf(var / count + ST_K_NORM_EPS);
    float g = gamma_at(gamma, dt, ch), b = beta != NULL ? st_ref_ld(beta, dt, ch) : 0.0f;
    mean[ch] = mu;
    rstd[ch] = rs;
    for (int s = 0; s < n; s++)
      for (int i = 0; i < hw; i++) {
        size_t idx = ((size_t)s * c + ch) * hw + i;
        st_ref_st(out, dt, idx, (st_ref_ld(in, dt, idx) - mu) * rs * g + b);
      }
  }
  return 0;
}

int
st_ref_batchnorm_bwd(void *stream, void *din, void *dgamma, void *dbeta, const void *dout,
                     const void *in, const float *mean, const float *rstd, const void *gamma,
                     int n, int c, int hw, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || n < 0 || c < 0 || hw < 0)
    return ST_K_EINVAL;
  if (n == 0 || c == 0 || hw == 0)
    return 0;
  if (dout == NULL || in == NULL || mean == NULL || rstd == NULL)
    return ST_K_EINVAL;
  float count = (float)n * (float)hw;
  for (int ch = 0; ch < c; ch++) {
    float mu = mean[ch], rs = rstd[ch], g = gamma_at(gamma, dt, ch);
    float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
    for (int s = 0; s < n; s++)
      for (int i = 0; i < hw; i++) {
        size_t idx = ((size_t)s * c + ch) * hw + i;
        float dy = st_ref_ld(dout, dt, idx);
        sum_dy += dy;
        sum_dy_xhat += dy * (st_ref_ld(in, dt, idx) - mu) * rs;
      }
    if (dgamma != NULL)
      st_ref_st(dgamma, dt, ch, st_ref_ld(dgamma, dt, ch) + sum_dy_xhat);
    if (dbeta != NULL)
      st_ref_st(dbeta, dt, ch, st_ref_ld(dbeta, dt, ch) + sum_dy);
    if (din == NULL)
      continue;
    float mean_dy = sum_dy / count, mean_dy_xhat = sum_dy_xhat / count;
    for (int s = 0; s < n; s++)
      for (int i = 0; i < hw; i++) {
        size_t idx = ((size_t)s * c + ch) * hw + i;
        float xhat = (st_ref_ld(in, dt, idx) - mu) * rs;
        st_ref_st(din, dt, idx,
                  g * rs * (st_ref_ld(dout, dt, idx) - mean_dy - xhat * mean_dy_xhat));
      }
  }
  return 0;
}
