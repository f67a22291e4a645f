/* limits.c: see limits.h. */
#include "base/limits.h"

#include <math.h>

/* A whole number of ns as int64: 0 for NaN or <= 0, saturated above. */
static int64_t
clamp_ns(double whole)
{
  if (!(whole > 0)) /* NaN too */
    return 0;
  /* 2^63 is the first double above INT64_MAX. */
  if (whole >= 9223372036854775808.0)
    return ST_TIME_MAX;
  return (int64_t)whole;
}

int64_t
st_ns_ceil(double ns)
{
  return clamp_ns(ceil(ns - 1e-6));
}

int64_t
st_ns_floor(double ns)
{
  return clamp_ns(floor(ns));
}
