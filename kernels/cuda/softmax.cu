/* softmax.cu: attention's row softmax (one warp per row: rows are as long as
 * the sequence) and the softmax cross-entropy (one block per row: rows are
 * as long as the vocabulary), as kernels/ref/softmax.c. The loss of each row
 * is added to *loss_sum with one atomicAdd: the sum's last bits depend on
 * the order the rows finish in. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

#define ROWS_PER_BLOCK (ST_CU_THREADS / 32)

__global__ void
softmax_fwd_kernel(void *out, const void *in, float scale, int causal, int rows, int cols,
                   StKDtype dt)
{
  int lane = threadIdx.x & 31;
  size_t r = (size_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  if (r >= (size_t)rows) /* the whole warp leaves together: its shuffles stay full */
    return;
  size_t base = r * cols;
  int valid = causal ? (int)(r % cols) + 1 : cols; /* query r mod cols sees keys 0..itself */
  float mx = -INFINITY, sum = 0.0f;
  for (int j = lane; j < valid; j += 32)
    mx = fmaxf(mx, scale * st_cu_ld(in, dt, base + j));
  mx = st_cu_warp_max(mx);
  for (int j = lane; j < valid; j += 32)
    sum += expf(scale * st_cu_ld(in, dt, base + j) - mx);
  sum = st_cu_warp_sum(sum);
  for (int j = lane; j < cols; j += 32)
    st_cu_st(out, dt, base + j, j < valid ? expf(scale * st_cu_ld(in, dt, base + j) - mx) / sum
                                          : 0.0f);
}

__global__ void
softmax_bwd_kernel(void *din, const void *dout, const void *out, float scale, int rows, int cols,
                   StKDtype dt)
{
  int lane = threadIdx.x & 31;
  size_t r = (size_t)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  if (r >= (size_t)rows)
    return;
  size_t base = r * cols;
  float dot = 0.0f;
  for (int j = lane; j < cols; j += 32)
    dot += st_cu_ld(dout, dt, base + j) * st_cu_ld(out, dt, base + j);
  dot = st_cu_warp_sum(dot);
  for (int j = lane; j < cols; j += 32)
    st_cu_st(din, dt, base + j,
             scale * st_cu_ld(out, dt, base + j) * (st_cu_ld(dout, dt, base + j) - dot));
}

__global__ void
softmax_ce_fwd_kernel(float *loss_sum, float *probs, const void *logits, const int32_t *targets,
                      int classes, StKDtype dt)
{
  size_t base = (size_t)blockIdx.x * classes;
  float mx = -INFINITY, sum = 0.0f;
  for (int j = threadIdx.x; j < classes; j += blockDim.x)
    mx = fmaxf(mx, st_cu_ld(logits, dt, base + j));
  mx = st_cu_block_max(mx);
  for (int j = threadIdx.x; j < classes; j += blockDim.x)
    sum += expf(st_cu_ld(logits, dt, base + j) - mx);
  sum = st_cu_block_sum(sum);
  for (int j = threadIdx.x; j < classes; j += blockDim.x)
    probs[base + j] = expf(st_cu_ld(logits, dt, base + j) - mx) / sum;
  int32_t t = targets[blockIdx.x];
  if (threadIdx.x == 0 && t >= 0 && t < classes)
    atomicAdd(loss_sum, logf(sum) + mx - st_cu_ld(logits, dt, base + t));
}

__global__ void
softmax_ce_bwd_kernel(void *dlogits, const float *probs, const int32_t *targets, float scale,
                      int rows, int classes, StKDtype dt)
{
  ST_CU_FOR(i, (size_t)rows * classes)
  {
    int32_t t = targets[i / classes];
    int j = (int)(i % classes);
    int ignored = t < 0 || t >= classes;
    st_cu_st(dlogits, dt, i, ignored ? 0.0f : (probs[i] - (j == t ? 1.0f : 0.0f)) * scale);
  }
}

int
st_cu_softmax_fwd(void *stream, void *out, const void *in, float scale, int causal, int rows,
                  int cols, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (out == NULL || in == NULL)
    return ST_K_EINVAL;
  unsigned grid = (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
  softmax_fwd_kernel<<<grid, ST_CU_THREADS, 0, st_cu_stream(stream)>>>(out, in, scale, causal,
                                                                       rows, cols, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_softmax_bwd(void *stream, void *din, const void *dout, const void *out, float scale,
                  int rows, int cols, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (din == NULL || dout == NULL || out == NULL)
    return ST_K_EINVAL;
  unsigned grid = (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
  softmax_bwd_kernel<<<grid, ST_CU_THREADS, 0, st_cu_stream(stream)>>>(din, dout, out, scale,
                                                                       rows, cols, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_softmax_ce_fwd(void *stream, float *loss_sum, float *probs, const void *logits,
                     const int32_t *targets, int rows, int classes, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || classes < 0)
    return ST_K_EINVAL;
  if (rows == 0 || classes == 0)
    return 0;
  if (loss_sum == NULL || probs == NULL || logits == NULL || targets == NULL)
    return ST_K_EINVAL;
  softmax_ce_fwd_kernel<<<(unsigned)rows, ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    loss_sum, probs, logits, targets, classes, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_softmax_ce_bwd(void *stream, void *dlogits, const float *probs, const int32_t *targets,
                     float scale, int rows, int classes, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || classes < 0)
    return ST_K_EINVAL;
  if (rows == 0 || classes == 0)
    return 0;
  if (dlogits == NULL || probs == NULL || targets == NULL)
    return ST_K_EINVAL;
  softmax_ce_bwd_kernel<<<st_cu_grid((size_t)rows * classes), ST_CU_THREADS, 0,
                          st_cu_stream(stream)>>>(dlogits, probs, targets, scale, rows, classes,
                                                  dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
