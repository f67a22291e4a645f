/* split.cu: tensor parallelism's kernels, as kernels/ref/split.c: the MAX
 * reduction of the local comm backend and the cross-entropy over logits
 * split by classes. ce_split_fwd gives each row a block (rows are as long as
 * the vocabulary slice); the loss is summed by one block over the rows, in a
 * fixed order: no atomics, the same bits every run. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

__global__ void
maximum_kernel(void *y, const void *x, StKDtype dt, size_t n)
{
  ST_CU_FOR(i, n) st_cu_st(y, dt, i, fmaxf(st_cu_ld(y, dt, i), st_cu_ld(x, dt, i)));
}

__global__ void
ce_split_fwd_kernel(float *exps, float *stats, const void *logits, const int32_t *targets,
                    int first, int rows, int classes, int valid, StKDtype dt)
{
  size_t r = blockIdx.x, base = r * classes;
  float mx = -INFINITY, sum = 0.0f;
  for (int j = threadIdx.x; j < valid; j += blockDim.x)
    mx = fmaxf(mx, st_cu_ld(logits, dt, base + j));
  mx = st_cu_block_max(mx);
  for (int j = threadIdx.x; j < classes; j += blockDim.x) {
    float e = j < valid ? expf(st_cu_ld(logits, dt, base + j) - mx) : 0.0f;
    exps[base + j] = e;
    sum += e;
  }
  sum = st_cu_block_sum(sum);
  if (threadIdx.x == 0) {
    int64_t t = (int64_t)targets[r] - first;
    stats[r] = mx;
    stats[rows + r] = mx;
    stats[2 * (size_t)rows + r] = sum;
    stats[3 * (size_t)rows + r] = t >= 0 && t < valid ? st_cu_ld(logits, dt, base + t) : 0.0f;
  }
}

__global__ void
ce_split_rescale_kernel(float *stats, int rows)
{
  ST_CU_FOR(r, (size_t)rows) stats[2 * (size_t)rows + r] *= expf(stats[r] - stats[rows + r]);
}

__global__ void
ce_split_loss_kernel(float *loss_sum, const float *stats, const int32_t *targets, int rows)
{
  float v = 0.0f;
  for (int r = threadIdx.x; r < rows; r += blockDim.x)
    if (targets[r] >= 0)
      v += logf(stats[2 * (size_t)rows + r]) + stats[rows + r] - stats[3 * (size_t)rows + r];
  v = st_cu_block_sum(v);
  if (threadIdx.x == 0)
    *loss_sum += v;
}

__global__ void
ce_split_bwd_kernel(void *dlogits, const float *exps, const float *stats, const int32_t *targets,
                    int first, float scale, int rows, int classes, StKDtype dt)
{
  ST_CU_FOR(i, (size_t)rows * classes)
  {
    size_t r = i / classes;
    int64_t t = (int64_t)targets[r] - first;
    float norm = expf(stats[r] - stats[rows + r]) / stats[2 * (size_t)rows + r];
    float g = (exps[i] * norm - ((int64_t)(i % classes) == t ? 1.0f : 0.0f)) * scale;
    st_cu_st(dlogits, dt, i, targets[r] < 0 ? 0.0f : g);
  }
}

int
st_cu_maximum(void *stream, void *y, const void *x, StKDtype dt, size_t n)
{
  if (!st_cu_dt_ok(dt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (y == NULL || x == NULL)
    return ST_K_EINVAL;
  maximum_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(y, x, dt, n);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_ce_split_fwd(void *stream, float *exps, float *stats, const void *logits,
                   const int32_t *targets, int first, int rows, int classes, int valid,
                   StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || classes < 0 || first < 0 || valid < 0 || valid > classes)
    return ST_K_EINVAL;
  if (rows == 0 || classes == 0)
    return 0;
  if (exps == NULL || stats == NULL || logits == NULL || targets == NULL)
    return ST_K_EINVAL;
  ce_split_fwd_kernel<<<(unsigned)rows, ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    exps, stats, logits, targets, first, rows, classes, valid, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_ce_split_rescale(void *stream, float *stats, int rows)
{
  if (rows < 0)
    return ST_K_EINVAL;
  if (rows == 0)
    return 0;
  if (stats == NULL)
    return ST_K_EINVAL;
  ce_split_rescale_kernel<<<st_cu_grid((size_t)rows), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    stats, rows);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_ce_split_loss(void *stream, float *loss_sum, const float *stats, const int32_t *targets,
                    int rows)
{
  if (rows < 0)
    return ST_K_EINVAL;
  if (rows == 0)
    return 0;
  if (loss_sum == NULL || stats == NULL || targets == NULL)
    return ST_K_EINVAL;
  ce_split_loss_kernel<<<1, ST_CU_THREADS, 0, st_cu_stream(stream)>>>(loss_sum, stats, targets,
                                                                      rows);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_ce_split_bwd(void *stream, void *dlogits, const float *exps, const float *stats,
                   const int32_t *targets, int first, float scale, int rows, int classes,
                   StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || classes < 0 || first < 0)
    return ST_K_EINVAL;
  if (rows == 0 || classes == 0)
    return 0;
  if (dlogits == NULL || exps == NULL || stats == NULL || targets == NULL)
    return ST_K_EINVAL;
  ce_split_bwd_kernel<<<st_cu_grid((size_t)rows * classes), ST_CU_THREADS, 0,
                        st_cu_stream(stream)>>>(dlogits, exps, stats, targets, first, scale,
                                                rows, classes, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
