/* elementwise.cu: conversions and BLAS-1 updates (kernels/ref/elementwise.c),
 * one grid-stride kernel each. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

__global__ void
convert_kernel(void *dst, StKDtype dst_dt, const void *src, StKDtype src_dt, size_t n)
{
  ST_CU_FOR(i, n) st_cu_st(dst, dst_dt, i, st_cu_ld(src, src_dt, i));
}

__global__ void
axpy_kernel(void *y, StKDtype ydt, float alpha, const void *x, StKDtype xdt, size_t n)
{
  ST_CU_FOR(i, n) st_cu_st(y, ydt, i, st_cu_ld(y, ydt, i) + alpha * st_cu_ld(x, xdt, i));
}

/* Each element is read before it is written by the same thread: out may alias a or b. */
__global__ void
add_kernel(void *out, const void *a, const void *b, StKDtype dt, size_t n)
{
  ST_CU_FOR(i, n) st_cu_st(out, dt, i, st_cu_ld(a, dt, i) + st_cu_ld(b, dt, i));
}

__global__ void
scale_kernel(void *x, StKDtype dt, float alpha, size_t n)
{
  ST_CU_FOR(i, n) st_cu_st(x, dt, i, alpha * st_cu_ld(x, dt, i));
}

int
st_cu_convert(void *stream, void *dst, StKDtype dst_dt, const void *src, StKDtype src_dt,
              size_t n)
{
  if (!st_cu_dt_ok(dst_dt) || !st_cu_dt_ok(src_dt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (dst == NULL || src == NULL)
    return ST_K_EINVAL;
  convert_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(dst, dst_dt, src,
                                                                            src_dt, n);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_axpy(void *stream, void *y, StKDtype ydt, float alpha, const void *x, StKDtype xdt,
           size_t n)
{
  if (!st_cu_dt_ok(ydt) || !st_cu_dt_ok(xdt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (y == NULL || x == NULL)
    return ST_K_EINVAL;
  axpy_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(y, ydt, alpha, x, xdt,
                                                                         n);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_add(void *stream, void *out, const void *a, const void *b, StKDtype dt, size_t n)
{
  if (!st_cu_dt_ok(dt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (out == NULL || a == NULL || b == NULL)
    return ST_K_EINVAL;
  add_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(out, a, b, dt, n);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_scale(void *stream, void *x, StKDtype dt, float alpha, size_t n)
{
  if (!st_cu_dt_ok(dt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (x == NULL)
    return ST_K_EINVAL;
  scale_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(x, dt, alpha, n);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
