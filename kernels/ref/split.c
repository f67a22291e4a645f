/* split.c: the kernels of tensor parallelism (kernels.h): the MAX reduction
 * of the local comm backend, and the cross-entropy over logits split by
 * classes (Megatron-LM's vocabulary-parallel loss, Shoeybi et al. 2019,
 * section 3), in three steps around the group's two reductions:
 *
 *   ce_split_fwd      m = local max, s = sum exp(x - m), x_target if local
 *   [all-reduce MAX of a copy of m: M]
 *   ce_split_rescale  s *= exp(m - M)
 *   [all-reduce SUM of s and x_target]
 *   ce_split_loss     loss += log s + M - x_target
 *
 * With the whole vocabulary on one rank (no reduction) these are
 * softmax_ce_fwd's steps, so both give the same numbers. */
#include <math.h>

#include "kernels/ref/ref.h"

int
st_ref_maximum(void *stream, void *y, const void *x, StKDtype dt, size_t n)
{
  if (!st_ref_dt_ok(dt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (y == NULL || x == NULL)
    return ST_K_EINVAL;
  for (size_t i = 0; i < n; i++)
    st_ref_st(y, dt, i, fmaxf(st_ref_ld(y, dt, i), st_ref_ld(x, dt, i)));
  return 0;
}

int
st_ref_ce_split_fwd(void *stream, float *exps, float *stats, const void *logits,
                    const int32_t *targets, int first, int rows, int classes, int valid,
                    StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || classes < 0 || first < 0 || valid < 0 || valid > classes)
    return ST_K_EINVAL;
  if (rows == 0 || classes == 0)
    return 0;
  if (exps == NULL || stats == NULL || logits == NULL || targets == NULL)
    return ST_K_EINVAL;
  for (int r = 0; r < rows; r++) {
    size_t base = (size_t)r * classes;
    float mx = -INFINITY, sum = 0.0f;
    for (int j = 0; j < valid; j++)
      mx = fmaxf(mx, st_ref_ld(logits, dt, base + j));
    for (int j = 0; j < classes; j++) {
      exps[base + j] = j < valid ? expf(st_ref_ld(logits, dt, base + j) - mx) : 0.0f;
      sum += exps[base + j];
    }
    int64_t t = (int64_t)targets[r] - first;
    stats[r] = mx;
    stats[rows + r] = mx;
    stats[2 * (size_t)rows + r] = sum;
    stats[3 * (size_t)rows + r] = t >= 0 && t < valid ? st_ref_ld(logits, dt, base + t) : 0.0f;
  }
  return 0;
}

int
st_ref_ce_split_rescale(void *stream, float *stats, int rows)
{
  if (rows < 0)
    return ST_K_EINVAL;
  if (rows == 0)
    return 0;
  if (stats == NULL)
    return ST_K_EINVAL;
  for (int r = 0; r < rows; r++)
    stats[2 * (size_t)rows + r] *= expf(stats[r] - stats[rows + r]);
  return 0;
}

int
st_ref_ce_split_loss(void *stream, float *loss_sum, const float *stats, const int32_t *targets,
                     int rows)
{
  if (rows < 0)
    return ST_K_EINVAL;
  if (rows == 0)
    return 0;
  if (loss_sum == NULL || stats == NULL || targets == NULL)
    return ST_K_EINVAL;
  float total = 0.0f;
  for (int r = 0; r < rows; r++)
    if (targets[r] >= 0)
      total += logf(stats[2 * (size_t)rows + r]) + stats[rows + r] - stats[3 * (size_t)rows + r];
  *loss_sum += total;
  return 0;
}

int
st_ref_ce_split_bwd(void *stream, void *dlogits, const float *exps, const float *stats,
                    const int32_t *targets, int first, float scale, int rows, int classes,
                    StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || classes < 0 || first < 0)
    return ST_K_EINVAL;
  if (rows == 0 || classes == 0)
    return 0;
  if (dlogits == NULL || exps == NULL || stats == NULL || targets == NULL)
    return ST_K_EINVAL;
  for (int r = 0; r < rows; r++) {
    size_t base = (size_t)r * classes;
    int64_t t = (int64_t)targets[r] - first;
    float norm = expf(stats[r] - stats[rows + r]) / stats[2 * (size_t)rows + r];
    for (int j = 0; j < classes; j++)
      st_ref_st(dlogits, dt, base + j,
                targets[r] < 0 ? 0.0f : (exps[base + j] * norm - (j == t ? 1.0f : 0.0f)) * scale);
  }
  return 0;
}
