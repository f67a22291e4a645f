/* llm.cu: RMSNorm, gated linear units, RoPE and strided copies
 * (kernels/ref/llm.c, whose comment gives the formulas). RMSNorm runs a
 * block per row for the statistics and the input gradient, and column
 * tiles (as layer norm's) for the scale's gradient, without atomics. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

__device__ __forceinline__ float
rms_gamma(const void *gamma, StKDtype dt, int j)
{
  return gamma != NULL ? st_cu_ld(gamma, dt, (size_t)j) : 1.0f;
}

__global__ void
rmsnorm_fwd_kernel(void *out, float *rstd, const void *in, const void *gamma, int cols,
                   StKDtype dt)
{
  size_t base = (size_t)blockIdx.x * cols;
  float ss = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    float x = st_cu_ld(in, dt, base + j);
    ss += x * x;
  }
  float rs = 1.0f / sqrtf(st_cu_block_sum(ss) / (float)cols + ST_K_NORM_EPS);
  if (threadIdx.x == 0)
    rstd[blockIdx.x] = rs;
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    st_cu_st(out, dt, base + j, st_cu_ld(in, dt, base + j) * rs * rms_gamma(gamma, dt, j));
}

__global__ void
rmsnorm_bwd_din_kernel(void *din, const void *dout, const void *in, const float *rstd,
                       const void *gamma, int cols, StKDtype dt)
{
  size_t base = (size_t)blockIdx.x * cols;
  float rs = rstd[blockIdx.x], sum = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    sum += rms_gamma(gamma, dt, j) * st_cu_ld(dout, dt, base + j) * st_cu_ld(in, dt, base + j) *
           rs;
  float mean = st_cu_block_sum(sum) / (float)cols;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    float xhat = st_cu_ld(in, dt, base + j) * rs;
    st_cu_st(din, dt, base + j,
             rs * (rms_gamma(gamma, dt, j) * st_cu_ld(dout, dt, base + j) - xhat * mean));
  }
}

#define COL_TILE 32
#define COL_WARPS 8

/* dgamma[j] += sum over rows of dy xhat: 32 columns per block of 32 x 8. */
__global__ void
rmsnorm_bwd_gamma_kernel(void *dgamma, const void *dout, const void *in, const float *rstd,
                         int rows, int cols, StKDtype dt)
{
  __shared__ float part[COL_WARPS][COL_TILE + 1];
  int j = blockIdx.x * COL_TILE + threadIdx.x;
  float s = 0.0f;
  if (j < cols)
    for (int r = threadIdx.y; r < rows; r += COL_WARPS) {
      size_t idx = (size_t)r * cols + j;
      s += st_cu_ld(dout, dt, idx) * st_cu_ld(in, dt, idx) * rstd[r];
    }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    float t = 0.0f;
    for (int w = 0; w < COL_WARPS; w++)
      t += part[w][threadIdx.x];
    st_cu_st(dgamma, dt, (size_t)j, st_cu_ld(dgamma, dt, (size_t)j) + t);
  }
}

int
st_cu_rmsnorm_fwd(void *stream, void *out, float *rstd, const void *in, const void *gamma,
                  int rows, int cols, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (out == NULL || rstd == NULL || in == NULL)
    return ST_K_EINVAL;
  rmsnorm_fwd_kernel<<<(unsigned)rows, ST_CU_THREADS, 0, st_cu_stream(stream)>>>(out, rstd, in,
                                                                                gamma, cols, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_rmsnorm_bwd(void *stream, void *din, void *dgamma, const void *dout, const void *in,
                  const float *rstd, const void *gamma, int rows, int cols, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (dout == NULL || in == NULL || rstd == NULL)
    return ST_K_EINVAL;
  cudaStream_t s = st_cu_stream(stream);
  if (dgamma != NULL) {
    dim3 block(COL_TILE, COL_WARPS);
    unsigned grid = (unsigned)((cols + COL_TILE - 1) / COL_TILE);
    rmsnorm_bwd_gamma_kernel<<<grid, block, 0, s>>>(dgamma, dout, in, rstd, rows, cols, dt);
    ST_CU_CHECK_LAUNCH();
  }
  if (din != NULL) {
    rmsnorm_bwd_din_kernel<<<(unsigned)rows, ST_CU_THREADS, 0, s>>>(din, dout, in, rstd, gamma,
                                                                     cols, dt);
    ST_CU_CHECK_LAUNCH();
  }
  return 0;
}

__global__ void
glu_fwd_kernel(void *h, const void *gu, size_t n, int f, int act, StKDtype dt)
{
  ST_CU_FOR(i, n)
  {
    size_t r = i / f, j = i % f, g = r * 2 * f + j;
    st_cu_st(h, dt, i, st_k_glu_act(st_cu_ld(gu, dt, g), act) * st_cu_ld(gu, dt, g + f));
  }
}

__global__ void
glu_bwd_kernel(void *dgu, const void *dh, const void *gu, size_t n, int f, int act, StKDtype dt)
{
  ST_CU_FOR(i, n)
  {
    size_t r = i / f, j = i % f, g = r * 2 * f + j;
    float x = st_cu_ld(gu, dt, g), u = st_cu_ld(gu, dt, g + f), d = st_cu_ld(dh, dt, i);
    st_cu_st(dgu, dt, g, d * u * st_k_glu_act_grad(x, act));
    st_cu_st(dgu, dt, g + f, d * st_k_glu_act(x, act));
  }
}

int
st_cu_glu_fwd(void *stream, void *h, const void *gu, int rows, int f, int act, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || f < 0 || (act != 0 && act != 1))
    return ST_K_EINVAL;
  size_t n = (size_t)rows * f;
  if (n == 0)
    return 0;
  if (h == NULL || gu == NULL)
    return ST_K_EINVAL;
  glu_fwd_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(h, gu, n, f, act, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_glu_bwd(void *stream, void *dgu, const void *dh, const void *gu, int rows, int f, int act,
              StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || f < 0 || (act != 0 && act != 1))
    return ST_K_EINVAL;
  size_t n = (size_t)rows * f;
  if (n == 0)
    return 0;
  if (dgu == NULL || dh == NULL || gu == NULL)
    return ST_K_EINVAL;
  glu_bwd_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(dgu, dh, gu, n, f,
                                                                            act, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

/* One thread per (row, pair i, head): each pair is turned once. */
__global__ void
rope_kernel(void *x, size_t n, int tokens, int heads, int ld, int head_dim, int rot_dim,
            float theta, int inverse, StKDtype dt)
{
  int half = rot_dim / 2;
  ST_CU_FOR(k, n)
  {
    size_t h = k % heads, i = (k / heads) % half, r = k / ((size_t)heads * half);
    float c, s;
    st_k_rope_angle((int)(r % tokens), (int)i, rot_dim, theta, &c, &s);
    if (inverse)
      s = -s;
    size_t a = r * ld + h * head_dim + i, b = a + half;
    float x1 = st_cu_ld(x, dt, a), x2 = st_cu_ld(x, dt, b);
    st_cu_st(x, dt, a, x1 * c - x2 * s);
    st_cu_st(x, dt, b, x2 * c + x1 * s);
  }
}

int
st_cu_rope(void *stream, void *x, int batch, int tokens, int heads, int ld, int head_dim,
           int rot_dim, float theta, int inverse, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || batch < 0 || tokens < 0 || heads < 0 || head_dim < 0 ||
      rot_dim < 0 || rot_dim > head_dim || rot_dim % 2 != 0 || ld < heads * head_dim ||
      !(theta > 0.0f))
    return ST_K_EINVAL;
  size_t n = (size_t)batch * tokens * heads * (rot_dim / 2);
  if (n == 0)
    return 0;
  if (x == NULL)
    return ST_K_EINVAL;
  rope_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    x, n, tokens, heads, ld, head_dim, rot_dim, theta, inverse, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_copy2d(void *stream, void *dst, int ld_dst, const void *src, int ld_src, int rows,
             int cols, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || cols < 0 || ld_dst < cols || ld_src < cols)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (dst == NULL || src == NULL)
    return ST_K_EINVAL;
  size_t es = st_kdt_size(dt);
  cudaError_t err = cudaMemcpy2DAsync(dst, (size_t)ld_dst * es, src, (size_t)ld_src * es,
                                      (size_t)cols * es, (size_t)rows, cudaMemcpyDeviceToDevice,
                                      st_cu_stream(stream));
  return err == cudaSuccess ? 0 : (int)err;
}
