/* gemm.cu: matrix products through cuBLAS, and the biases.
 *
 * Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so the
 * product is one cublasGemmStridedBatchedEx with the operands swapped: no
 * copy, fp32 compute (CUBLAS_COMPUTE_32F: no TF32, the reference's math) on
 * fp32 or bf16 storage.
 *
 * cuBLAS handles. The table has no context object, so handles live here, in
 * the one piece of mutable global state of kernels/: a registry of one
 * handle per (device, stream), created on first use and bound to its stream
 * once (cublasSetStream), kept for the life of the process. A lock guards the
 * registry only; calls on different streams then run concurrently, each on
 * its own handle, as cuBLAS asks of multi-threaded users. A handle serves the
 * thread that issues work on its stream (the executor has one per stream).
 */
#include <cublas_v2.h>
#include <pthread.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

#define MAX_HANDLES 1024

typedef struct {
  int device;
  cudaStream_t stream;
  cublasHandle_t handle;
} HandleEntry;

/* pthread rather than std::mutex: the library is linked by C programs,
 * without the C++ runtime. */
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static HandleEntry handles[MAX_HANDLES];
static int n_handles;

/* The handle of (current device, stream); 0 or a cuBLAS / CUDA status. */
static int
handle_for(cudaStream_t stream, cublasHandle_t *out)
{
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess)
    return (int)err;
  int rc = 0;
  pthread_mutex_lock(&handles_lock);
  int i = 0;
  while (i < n_handles && !(handles[i].device == device && handles[i].stream == stream))
    i++;
  if (i == n_handles) { /* first use of this stream: a handle bound to it */
    cublasHandle_t h = NULL;
    cublasStatus_t st = n_handles == MAX_HANDLES ? CUBLAS_STATUS_ALLOC_FAILED : cublasCreate(&h);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasSetStream(h, stream);
    if (st == CUBLAS_STATUS_SUCCESS)
      handles[n_handles++] = HandleEntry{device, stream, h};
    else if (h != NULL)
      cublasDestroy(h);
    rc = (int)st;
  }
  if (rc == 0)
    *out = handles[i].handle;
  pthread_mutex_unlock(&handles_lock);
  return rc;
}

/* C = beta C for each problem: what a product with k = 0 leaves. */
__global__ void
scale_batched_kernel(void *c, StKDtype dt, float beta, size_t per, int batch, int64_t stride)
{
  ST_CU_FOR(i, per * (size_t)batch)
  {
    size_t idx = (size_t)(i / per) * (size_t)stride + i % per;
    st_cu_st(c, dt, idx, beta != 0.0f ? beta * st_cu_ld(c, dt, idx) : 0.0f);
  }
}

int
st_cu_gemm(void *stream, int ta, int tb, int m, int n, int k, float alpha, const void *a,
           const void *b, float beta, void *c, StKDtype dt, int batch, int64_t stride_a,
           int64_t stride_b, int64_t stride_c)
{
  if (!st_cu_dt_ok(dt) || m < 0 || n < 0 || k < 0 || batch < 0 || stride_a < 0 ||
      stride_b < 0 || stride_c < 0)
    return ST_K_EINVAL;
  if (m == 0 || n == 0 || batch == 0)
    return 0;
  if (c == NULL || (k > 0 && (a == NULL || b == NULL)))
    return ST_K_EINVAL;
  cudaStream_t s = st_cu_stream(stream);
  if (k == 0) {
    size_t per = (size_t)m * (size_t)n;
    scale_batched_kernel<<<st_cu_grid(per * batch), ST_CU_THREADS, 0, s>>>(c, dt, beta, per,
                                                                           batch, stride_c);
    ST_CU_CHECK_LAUNCH();
    return 0;
  }
  cublasHandle_t h;
  int rc = handle_for(s, &h);
  if (rc != 0)
    return rc;
  cudaDataType_t type = dt == ST_KDT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
  /* column-major view: C^T [n x m] = op(B)^T [n x k] op(A)^T [k x m] */
  int lda = ta ? m : k, ldb = tb ? k : n;
  cublasStatus_t st = cublasGemmStridedBatchedEx(
    h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, type,
    ldb, stride_b, a, type, lda, stride_a, &beta, c, type, n, stride_c, batch,
    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return (int)st;
}

__global__ void
bias_add_kernel(void *out, const void *bias, int rows, int cols, StKDtype dt)
{
  ST_CU_FOR(i, (size_t)rows * cols)
  st_cu_st(out, dt, i, st_cu_ld(out, dt, i) + st_cu_ld(bias, dt, i % cols));
}

/* Column sums of rows x cols: a block of 32 x 8 threads owns 32 columns; each
 * warp (a threadIdx.y) reads whole 32-column rows, coalesced, every 8th row;
 * the 8 partial sums per column meet in shared memory. No atomics: the order
 * of the additions is fixed, so the result is the same at every run. */
#define COL_TILE 32
#define COL_WARPS 8

__global__ void
bias_grad_kernel(void *dbias, const void *dout, int rows, int cols, StKDtype dt)
{
  __shared__ float part[COL_WARPS][COL_TILE + 1];
  int j = blockIdx.x * COL_TILE + threadIdx.x;
  float sum = 0.0f;
  if (j < cols)
    for (int r = threadIdx.y; r < rows; r += COL_WARPS)
      sum += st_cu_ld(dout, dt, (size_t)r * cols + j);
  part[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    float total = 0.0f;
    for (int w = 0; w < COL_WARPS; w++)
      total += part[w][threadIdx.x];
    st_cu_st(dbias, dt, j, st_cu_ld(dbias, dt, j) + total);
  }
}

__global__ void
bias_add_chw_kernel(void *out, const void *bias, int c, int hw, size_t total, StKDtype dt)
{
  ST_CU_FOR(i, total)
  st_cu_st(out, dt, i, st_cu_ld(out, dt, i) + st_cu_ld(bias, dt, (i / hw) % c));
}

/* One block per channel: a block sum over its n x hw elements. */
__global__ void
bias_grad_chw_kernel(void *dbias, const void *dout, int n, int c, int hw, StKDtype dt)
{
  int ch = blockIdx.x;
  size_t count = (size_t)n * hw;
  float sum = 0.0f;
  for (size_t i = threadIdx.x; i < count; i += blockDim.x)
    sum += st_cu_ld(dout, dt, ((i / hw) * c + ch) * hw + i % hw);
  sum = st_cu_block_sum(sum);
  if (threadIdx.x == 0)
    st_cu_st(dbias, dt, ch, st_cu_ld(dbias, dt, ch) + sum);
}

int
st_cu_bias_add(void *stream, void *out, const void *bias, int rows, int cols, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (out == NULL || bias == NULL)
    return ST_K_EINVAL;
  bias_add_kernel<<<st_cu_grid((size_t)rows * cols), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    out, bias, rows, cols, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_bias_grad(void *stream, void *dbias, const void *dout, int rows, int cols, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (dbias == NULL || dout == NULL)
    return ST_K_EINVAL;
  dim3 block(COL_TILE, COL_WARPS);
  unsigned grid = (unsigned)((cols + COL_TILE - 1) / COL_TILE);
  bias_grad_kernel<<<grid, block, 0, st_cu_stream(stream)>>>(dbias, dout, rows, cols, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_bias_add_chw(void *stream, void *out, const void *bias, int n, int c, int hw,
                   StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || n < 0 || c < 0 || hw < 0)
    return ST_K_EINVAL;
  if (n == 0 || c == 0 || hw == 0)
    return 0;
  if (out == NULL || bias == NULL)
    return ST_K_EINVAL;
  size_t total = (size_t)n * c * hw;
  bias_add_chw_kernel<<<st_cu_grid(total), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    out, bias, c, hw, total, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_bias_grad_chw(void *stream, void *dbias, const void *dout, int n, int c, int hw,
                    StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || n < 0 || c < 0 || hw < 0)
    return ST_K_EINVAL;
  if (n == 0 || c == 0 || hw == 0)
    return 0;
  if (dbias == NULL || dout == NULL)
    return ST_K_EINVAL;
  bias_grad_chw_kernel<<<(unsigned)c, ST_CU_THREADS, 0, st_cu_stream(stream)>>>(dbias, dout, n,
                                                                                c, hw, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
