/* normalization.cu: layer norm and training-mode batch norm
 * (kernels/ref/normalization.c, whose comment gives the formulas). One block
 * per row (layer norm) or per channel (batch norm) does the statistics with
 * block sums built on warp shuffles; layer norm's weight gradients are
 * column sums over rows, done by tiles as bias_grad does, without atomics. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

__device__ __forceinline__ float
gamma_at(const void *gamma, StKDtype dt, size_t i)
{
  return gamma != NULL ? st_cu_ld(gamma, dt, i) : 1.0f;
}

__global__ void
layernorm_fwd_kernel(void *out, float *mean, float *rstd, const void *in, const void *gamma,
                     const void *beta, int cols, StKDtype dt)
{
  size_t base = (size_t)blockIdx.x * cols;
  float sum = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    sum += st_cu_ld(in, dt, base + j);
  float mu = st_cu_block_sum(sum) / (float)cols;
  float var = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    float d = st_cu_ld(in, dt, base + j) - mu;
    var += d * d;
  }
  float rs = 1.0f / sqrtf(st_cu_block_sum(var) / (float)cols + ST_K_NORM_EPS);
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = mu;
    rstd[blockIdx.x] = rs;
  }
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    float y = (st_cu_ld(in, dt, base + j) - mu) * rs * gamma_at(gamma, dt, j);
    if (beta != NULL)
      y += st_cu_ld(beta, dt, j);
    st_cu_st(out, dt, base + j, y);
  }
}

/* din of one row per block. */
__global__ void
layernorm_bwd_din_kernel(void *din, const void *dout, const void *in, const float *mean,
                         const float *rstd, const void *gamma, int cols, StKDtype dt)
{
  size_t base = (size_t)blockIdx.x * cols;
  float mu = mean[blockIdx.x], rs = rstd[blockIdx.x];
  float sum_gdy = 0.0f, sum_gdy_xhat = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    float gdy = gamma_at(gamma, dt, j) * st_cu_ld(dout, dt, base + j);
    sum_gdy += gdy;
    sum_gdy_xhat += gdy * (st_cu_ld(in, dt, base + j) - mu) * rs;
  }
  float mean_gdy = st_cu_block_sum(sum_gdy) / (float)cols;
  float mean_gdy_xhat = st_cu_block_sum(sum_gdy_xhat) / (float)cols;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    float xhat = (st_cu_ld(in, dt, base + j) - mu) * rs;
    float gdy = gamma_at(gamma, dt, j) * st_cu_ld(dout, dt, base + j);
    st_cu_st(din, dt, base + j, rs * (gdy - mean_gdy - xhat * mean_gdy_xhat));
  }
}

/* dgamma[j] += sum_r dy xhat, dbeta[j] += sum_r dy: 32 columns per block of
 * 32 x 8 threads, every 8th row per warp, partial sums met in shared memory. */
#define COL_TILE 32
#define COL_WARPS 8

__global__ void
layernorm_bwd_params_kernel(void *dgamma, void *dbeta, const void *dout, const void *in,
                            const float *mean, const float *rstd, int rows, int cols,
                            StKDtype dt)
{
  __shared__ float pg[COL_WARPS][COL_TILE + 1], pb[COL_WARPS][COL_TILE + 1];
  int j = blockIdx.x * COL_TILE + threadIdx.x;
  float sg = 0.0f, sb = 0.0f;
  if (j < cols)
    for (int r = threadIdx.y; r < rows; r += COL_WARPS) {
      size_t idx = (size_t)r * cols + j;
      float dy = st_cu_ld(dout, dt, idx);
      sg += dy * (st_cu_ld(in, dt, idx) - mean[r]) * rstd[r];
      sb += dy;
    }
  pg[threadIdx.y][threadIdx.x] = sg;
  pb[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    float tg = 0.0f, tb = 0.0f;
    for (int w = 0; w < COL_WARPS; w++) {
      tg += pg[w][threadIdx.x];
      tb += pb[w][threadIdx.x];
    }
    if (dgamma != NULL)
      st_cu_st(dgamma, dt, j, st_cu_ld(dgamma, dt, j) + tg);
    if (dbeta != NULL)
      st_cu_st(dbeta, dt, j, st_cu_ld(dbeta, dt, j) + tb);
  }
}

/* Element i of channel ch in N x C x HW. */
__device__ __forceinline__ size_t
chw_index(size_t i, int ch, int c, int hw)
{
  return ((i / hw) * c + ch) * hw + i % hw;
}

__global__ void
batchnorm_fwd_kernel(void *out, float *mean, float *rstd, const void *in, const void *gamma,
                     const void *beta, int n, int c, int hw, StKDtype dt)
{
  int ch = blockIdx.x;
  size_t count = (size_t)n * hw;
  float sum = 0.0f;
  for (size_t i = threadIdx.x; i < count; i += blockDim.x)
    sum += st_cu_ld(in, dt, chw_index(i, ch, c, hw));
  float fcount = (float)n * (float)hw;
  float mu = st_cu_block_sum(sum) / fcount;
  float var = 0.0f;
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) {
    float d = st_cu_ld(in, dt, chw_index(i, ch, c, hw)) - mu;
    var += d * d;
  }
  float rs = 1.0f / sqrtf(st_cu_block_sum(var) / fcount + ST_K_NORM_EPS);
  float g = gamma_at(gamma, dt, ch), b = beta != NULL ? st_cu_ld(beta, dt, ch) : 0.0f;
  if (threadIdx.x == 0) {
    mean[ch] = mu;
    rstd[ch] = rs;
  }
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) {
    size_t idx = chw_index(i, ch, c, hw);
    st_cu_st(out, dt, idx, (st_cu_ld(in, dt, idx) - mu) * rs * g + b);
  }
}

__global__ void
batchnorm_bwd_kernel(void *din, void *dgamma, void *dbeta, const void *dout, const void *in,
                     const float *mean, const float *rstd, const void *gamma, int n, int c,
                     int hw, StKDtype dt)
{
  int ch = blockIdx.x;
  size_t count = (size_t)n * hw;
  float mu = mean[ch], rs = rstd[ch], g = gamma_at(gamma, dt, ch);
  float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) {
    size_t idx = chw_index(i, ch, c, hw);
    float dy = st_cu_ld(dout, dt, idx);
    sum_dy += dy;
    sum_dy_xhat += dy * (st_cu_ld(in, dt, idx) - mu) * rs;
  }
  sum_dy = st_cu_block_sum(sum_dy);
  sum_dy_xhat = st_cu_block_sum(sum_dy_xhat);
  if (threadIdx.x == 0) {
    if (dgamma != NULL)
      st_cu_st(dgamma, dt, ch, st_cu_ld(dgamma, dt, ch) + sum_dy_xhat);
    if (dbeta != NULL)
      st_cu_st(dbeta, dt, ch, st_cu_ld(dbeta, dt, ch) + sum_dy);
  }
  if (din == NULL)
    return;
  float fcount = (float)n * (float)hw;
  float mean_dy = sum_dy / fcount, mean_dy_xhat = sum_dy_xhat / fcount;
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) {
    size_t idx = chw_index(i, ch, c, hw);
    float xhat = (st_cu_ld(in, dt, idx) - mu) * rs;
    st_cu_st(din, dt, idx, g * rs * (st_cu_ld(dout, dt, idx) - mean_dy - xhat * mean_dy_xhat));
  }
}

int
st_cu_layernorm_fwd(void *stream, void *out, float *mean, float *rstd, const void *in,
                    const void *gamma, const void *beta, int rows, int cols, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (out == NULL || mean == NULL || rstd == NULL || in == NULL)
    return ST_K_EINVAL;
  layernorm_fwd_kernel<<<(unsigned)rows, ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    out, mean, rstd, in, gamma, beta, cols, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_layernorm_bwd(void *stream, void *din, void *dgamma, void *dbeta, const void *dout,
                    const void *in, const float *mean, const float *rstd, const void *gamma,
                    int rows, int cols, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (dout == NULL || in == NULL || mean == NULL || rstd == NULL)
    return ST_K_EINVAL;
  cudaStream_t s = st_cu_stream(stream);
  if (dgamma != NULL || dbeta != NULL) {
    dim3 block(COL_TILE, COL_WARPS);
    unsigned grid = (unsigned)((cols + COL_TILE - 1) / COL_TILE);
    layernorm_bwd_params_kernel<<<grid, block, 0, s>>>(dgamma, dbeta, dout, in, mean, rstd,
                                                       rows, cols, dt);
    ST_CU_CHECK_LAUNCH();
  }
  if (din != NULL) {
    layernorm_bwd_din_kernel<<<(unsigned)rows, ST_CU_THREADS, 0, s>>>(din, dout, in, mean, rstd,
                                                                      gamma, cols, dt);
    ST_CU_CHECK_LAUNCH();
  }
  return 0;
}

int
st_cu_batchnorm_fwd(void *stream, void *out, float *mean, float *rstd, const void *in,
                    const void *gamma, const void *beta, int n, int c, int hw, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || n < 0 || c < 0 || hw < 0)
    return ST_K_EINVAL;
  if (n == 0 || c == 0 || hw == 0)
    return 0;
  if (out == NULL || mean == NULL || rstd == NULL || in == NULL)
    return ST_K_EINVAL;
  batchnorm_fwd_kernel<<<(unsigned)c, ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    out, mean, rstd, in, gamma, beta, n, c, hw, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_batchnorm_bwd(void *stream, void *din, void *dgamma, void *dbeta, const void *dout,
                    const void *in, const float *mean, const float *rstd, const void *gamma,
                    int n, int c, int hw, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || n < 0 || c < 0 || hw < 0)
    return ST_K_EINVAL;
  if (n == 0 || c == 0 || hw == 0)
    return 0;
  if (dout == NULL || in == NULL || mean == NULL || rstd == NULL)
    return ST_K_EINVAL;
  batchnorm_bwd_kernel<<<(unsigned)c, ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    din, dgamma, dbeta, dout, in, mean, rstd, gamma, n, c, hw, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
