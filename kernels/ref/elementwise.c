/* elementwise.c: conversions and the BLAS-1 updates the executor needs for
 * gradient accumulation, residual connections and local reductions. */
#include "kernels/ref/ref.h"

int
st_ref_convert(void *stream, void *dst, StKDtype dst_dt, const void *src, StKDtype src_dt,
               size_t n)
{
  if (!st_ref_dt_ok(dst_dt) || !st_ref_dt_ok(src_dt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (dst == NULL || src == NULL)
    return ST_K_EINVAL;
  for (size_t i = 0; i < n; i++)
    st_ref_st(dst, dst_dt, i, st_ref_ld(src, src_dt, i));
  return 0;
}

int
st_ref_axpy(void *stream, void *y, StKDtype ydt, float alpha, const void *x, StKDtype xdt,
            size_t n)
{
  if (!st_ref_dt_ok(ydt) || !st_ref_dt_ok(xdt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (y == NULL || x == NULL)
    return ST_K_EINVAL;
  for (size_t i = 0; i < n; i++)
    st_ref_st(y, ydt, i, st_ref_ld(y, ydt, i) + alpha * st_ref_ld(x, xdt, i));
  return 0;
}

int
st_ref_add(void *stream, void *out, const void *a, const void *b, StKDtype dt, size_t n)
{
  if (!st_ref_dt_ok(dt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (out == NULL || a == NULL || b == NULL)
    return ST_K_EINVAL;
  /* Element i is read before it is written, so out may alias a or b. */
  for (size_t i = 0; i < n; i++)
    st_ref_st(out, dt, i, st_ref_ld(a, dt, i) + st_ref_ld(b, dt, i));
  return 0;
}

int
st_ref_scale(void *stream, void *x, StKDtype dt, float alpha, size_t n)
{
  if (!st_ref_dt_ok(dt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (x == NULL)
    return ST_K_EINVAL;
  for (size_t i = 0; i < n; i++)
    st_ref_st(x, dt, i, alpha * st_ref_ld(x, dt, i));
  return 0;
}
