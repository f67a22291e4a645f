/* util.h: tiny helpers with no better home. */
#pragma once

#include <glib.h>
#include <stdint.h>

/* qsort / g_array_sort comparators. */
int st_compare_int32(gconstpointer a, gconstpointer b);
int st_compare_int64(gconstpointer a, gconstpointer b);
int st_compare_double(gconstpointer a, gconstpointer b);

/* ceil(a / b) for positive b. */
static inline int64_t
st_div_ceil(int64_t a, int64_t b)
{
  return (a + b - 1) / b;
}
