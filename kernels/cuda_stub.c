/* cuda_stub.c: built without CUDA (no nvcc found): there is no CUDA kernel
 * table; exec/device_cuda_stub.c reports "built without CUDA". */
#include "kernels/kernels.h"

const StKernels *
st_kernels_cuda(void)
{
  return NULL;
}

int
st_kernels_cuda_devices(void)
{
  return 0;
}
