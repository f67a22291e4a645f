/* memory.cu: device memory for the CUDA table. A copy to the host waits for
 * its stream before returning, since the table offers no other way to know
 * the data has landed (kernels.h). */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

int
st_cu_alloc(void **ptr, size_t bytes)
{
  if (ptr == NULL)
    return ST_K_EINVAL;
  *ptr = NULL;
  if (bytes == 0)
    return 0;
  cudaError_t err = cudaMalloc(ptr, bytes);
  if (err != cudaSuccess) {
    *ptr = NULL;
    cudaGetLastError(); /* an out-of-memory error is not sticky: clear it */
  }
  return (int)err;
}

int
st_cu_free(void *ptr)
{
  return (int)cudaFree(ptr);
}

int
st_cu_copy(void *stream, void *dst, const void *src, size_t bytes, int kind)
{
  static const cudaMemcpyKind KINDS[3] = {cudaMemcpyDeviceToDevice, cudaMemcpyHostToDevice,
                                          cudaMemcpyDeviceToHost};
  if (kind < 0 || kind > 2)
    return ST_K_EINVAL;
  if (bytes == 0)
    return 0;
  if (dst == NULL || src == NULL)
    return ST_K_EINVAL;
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, KINDS[kind], st_cu_stream(stream));
  if (err == cudaSuccess && kind == 2)
    err = cudaStreamSynchronize(st_cu_stream(stream));
  return (int)err;
}

int
st_cu_memset0(void *stream, void *ptr, size_t bytes)
{
  if (bytes == 0)
    return 0;
  if (ptr == NULL)
    return ST_K_EINVAL;
  return (int)cudaMemsetAsync(ptr, 0, bytes, st_cu_stream(stream));
}
