/* limits.c: see limits.h. */
#include "base/limits.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* The first integer in `path` (after `key` when given), or -1. */
static int64_t
read_number(const char *path, const char *key)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return -1;
  const char *at = text;
  if (key != NULL && (at = strstr(text, key)) == NULL)
    return -1;
  at += key != NULL ? strlen(key) : 0;
  while (*at == ' ' || *at == '\t')
    at++;
  if (!g_ascii_isdigit(*at)) /* "max": no limit */
    return -1;
  return g_ascii_strtoll(at, NULL, 10);
}

int64_t
st_memory_available(void)
{
  int64_t best = -1;
  int64_t kib = read_number("/proc/meminfo", "MemAvailable:");
  if (kib > 0)
    best = kib * 1024;
  /* A container's limit (v2, then v1; a v1 "no limit" is a huge number). */
  int64_t max = read_number("/sys/fs/cgroup/memory.max", NULL);
  int64_t used = read_number("/sys/fs/cgroup/memory.current", NULL);
  if (max < 0) {
    max = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes", NULL);
    used = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes", NULL);
  }
  if (max > 0 && max < (INT64_C(1) << 60)) {
    int64_t left = MAX(max - MAX(used, 0), 0);
    best = best < 0 ? left : MIN(best, left);
  }
  return MAX(best, 0);
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
