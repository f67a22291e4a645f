/* common.cuh: what every CUDA kernel file shares: loads and stores in the
 * storage dtype (the kernel branches on it at run time: one uniform branch,
 * and one kernel per operation instead of one per dtype), grid-stride
 * launch sizes, the launch check, and block and warp sums built on warp
 * shuffles. Private to kernels/cuda/. No GLib here (kernels.h is plain C).
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/ref/kmath.h"

/* Threads per block of the element-wise kernels and of the reductions (a
 * multiple of the warp size; st_cu_block_sum relies on it). */
#define ST_CU_THREADS 256

static inline cudaStream_t
st_cu_stream(void *stream)
{
  return (cudaStream_t)stream;
}

static inline bool
st_cu_dt_ok(StKDtype dt)
{
  return dt == ST_KDT_F32 || dt == ST_KDT_BF16;
}

/* Blocks for n elements in grid-stride loops: enough to fill the GPU, capped
 * so the grid stays small; at least one. */
static inline unsigned
st_cu_grid(size_t n)
{
  size_t g = (n + ST_CU_THREADS - 1) / ST_CU_THREADS;
  if (g > 65536)
    g = 65536;
  return g == 0 ? 1u : (unsigned)g;
}

/* Returns the launch's error (and clears it) from the enclosing function. */
#define ST_CU_CHECK_LAUNCH()                                                                  \
  do {                                                                                        \
    cudaError_t st_err_ = cudaGetLastError();                                                 \
    if (st_err_ != cudaSuccess)                                                               \
      return (int)st_err_;                                                                    \
  } while (0)

#define ST_CU_FOR(i, n)                                                                       \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n);            \
       i += (size_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float
st_cu_ld(const void *p, StKDtype dt, size_t i)
{
  return dt == ST_KDT_BF16 ? __bfloat162float(((const __nv_bfloat16 *)p)[i])
                           : ((const float *)p)[i];
}

/* bf16 rounds to nearest even, as st_f32_to_bf16 on the host. */
__device__ __forceinline__ void
st_cu_st(void *p, StKDtype dt, size_t i, float v)
{
  if (dt == ST_KDT_BF16)
    ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
  else
    ((float *)p)[i] = v;
}

__device__ __forceinline__ float
st_cu_warp_sum(float v)
{
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float
st_cu_warp_max(float v)
{
  for (int off = 16; off > 0; off >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

/* Sum of v over the block (blockDim.x a multiple of 32, at most 1024),
 * returned to every thread. Every thread of the block must call it; it may
 * be called several times in a row (the first barrier protects the shared
 * slots from the previous call's readers). */
__device__ __forceinline__ float
st_cu_block_sum(float v)
{
  __shared__ float warp_sums[32];
  __shared__ float total;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = st_cu_warp_sum(v);
  __syncthreads();
  if (lane == 0)
    warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0.0f;
    w = st_cu_warp_sum(w);
    if (lane == 0)
      total = w;
  }
  __syncthreads();
  return total;
}

/* Same for the maximum. */
__device__ __forceinline__ float
st_cu_block_max(float v)
{
  __shared__ float warp_max[32];
  __shared__ float total;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = st_cu_warp_max(v);
  __syncthreads();
  if (lane == 0)
    warp_max[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < (int)(blockDim.x >> 5) ? warp_max[lane] : -INFINITY;
    w = st_cu_warp_max(w);
    if (lane == 0)
      total = w;
  }
  __syncthreads();
  return total;
}
