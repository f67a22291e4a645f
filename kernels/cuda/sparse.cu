/* sparse.cu: SAMO's gather of non-zeros and scatter back
 * (kernels/ref/sparse.c); an index < 0 skips its entry. The scatter assumes
 * distinct indices (a sparsity pattern), as the reference's result with
 * duplicates would depend on their order. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

__global__ void
compress_kernel(void *values, StKDtype vdt, const void *dense, StKDtype ddt,
                const int32_t *index, size_t n)
{
  ST_CU_FOR(i, n)
  if (index[i] >= 0)
    st_cu_st(values, vdt, i, st_cu_ld(dense, ddt, (size_t)index[i]));
}

__global__ void
expand_kernel(void *dense, StKDtype ddt, const void *values, StKDtype vdt, const int32_t *index,
              size_t n)
{
  ST_CU_FOR(i, n)
  if (index[i] >= 0)
    st_cu_st(dense, ddt, (size_t)index[i], st_cu_ld(values, vdt, i));
}

int
st_cu_compress(void *stream, void *values, StKDtype vdt, const void *dense, StKDtype ddt,
               const int32_t *index, size_t n)
{
  if (!st_cu_dt_ok(vdt) || !st_cu_dt_ok(ddt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (values == NULL || dense == NULL || index == NULL)
    return ST_K_EINVAL;
  compress_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(values, vdt, dense,
                                                                             ddt, index, n);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_expand(void *stream, void *dense, StKDtype ddt, const void *values, StKDtype vdt,
             const int32_t *index, size_t n)
{
  if (!st_cu_dt_ok(vdt) || !st_cu_dt_ok(ddt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (values == NULL || dense == NULL || index == NULL)
    return ST_K_EINVAL;
  expand_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(dense, ddt, values,
                                                                           vdt, index, n);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
