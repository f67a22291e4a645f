/* util.c: see util.h. */
#include "util.h"

int
st_compare_int32(gconstpointer a, gconstpointer b)
{
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

int
st_compare_int64(gconstpointer a, gconstpointer b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

int
st_compare_double(gconstpointer a, gconstpointer b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double
st_quantile(const double *sorted, int n, double q)
{
  g_return_val_if_fail(n >= 1, 0);
  double at = q * (double)(n - 1);
  int lo = (int)at, hi = MIN(lo + 1, n - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - (double)lo);
}
