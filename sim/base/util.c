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

const char *
st_int_text(int64_t v, char out[ST_INT_TEXT_SIZE])
{
  char digits[ST_INT_TEXT_SIZE];
  int n = 0, k = 0;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  do
    digits[n++] = (char)('0' + u % 10);
  while ((u /= 10) > 0);
  if (v < 0)
    out[k++] = '-';
  while (n > 0)
    out[k++] = digits[--n];
  out[k] = '\0';
  return out;
}

void
st_string_append_int(GString *s, int64_t v)
{
  char text[ST_INT_TEXT_SIZE];
  g_string_append(s, st_int_text(v, text));
}
