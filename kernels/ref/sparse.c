/* sparse.c: SAMO's compressed model states: a gather of the non-zero
 * entries of a dense tensor into a values array and the scatter back. An
 * index < 0 skips its entry (padding of a fixed-size index). */
#include "kernels/ref/ref.h"

int
st_ref_compress(void *stream, void *values, StKDtype vdt, const void *dense, StKDtype ddt,
                const int32_t *index, size_t n)
{
  if (!st_ref_dt_ok(vdt) || !st_ref_dt_ok(ddt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (values == NULL || dense == NULL || index == NULL)
    return ST_K_EINVAL;
  for (size_t i = 0; i < n; i++)
    if (index[i] >= 0)
      st_ref_st(values, vdt, i, st_ref_ld(dense, ddt, (size_t)index[i]));
  return 0;
}

int
st_ref_expand(void *stream, void *dense, StKDtype ddt, const void *values, StKDtype vdt,
              const int32_t *index, size_t n)
{
  if (!st_ref_dt_ok(vdt) || !st_ref_dt_ok(ddt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (values == NULL || dense == NULL || index == NULL)
    return ST_K_EINVAL;
  for (size_t i = 0; i < n; i++)
    if (index[i] >= 0)
      st_ref_st(dense, ddt, (size_t)index[i], st_ref_ld(values, vdt, i));
  return 0;
}
