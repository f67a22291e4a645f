/* limits.h: the sizes stagger accepts, checked arithmetic, and the clock.
 *
 * Every count a user gives is bounded here, and every product of user
 * numbers is formed in 64 bits through st_mul_i64, which reports overflow
 * instead of wrapping. Physical quantities (bandwidths, FLOP rates,
 * latencies, sizes) have their ranges in units.h. docs/RELIABILITY.md lists
 * every limit and why it is where it is.
 *
 * The simulator's clock is int64 nanoseconds: 2^63 ns is 292 years. A time
 * computed in floating point (work / rate) becomes whole nanoseconds only
 * through st_ns_ceil, and times add only through st_time_add; both saturate
 * at ST_TIME_MAX instead of overflowing (undefined behaviour in C), and the
 * engine refuses a run whose clock reaches it.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#define ST_TIME_MAX INT64_MAX

/* GPUs in one cluster (nodes x GPUs per node): device indices and every
 * per-GPU array stay in int32 with room to spare. */
#define ST_MAX_GPUS (1 << 24)
/* Training steps of one run (--steps, a schedule's "steps"). */
#define ST_MAX_STEPS 1000000
/* Ranks sharing one GPU: the engine's cost of sharing grows with the square
 * of the kernels on a device, and real GPUs run a handful of processes. */
#define ST_MAX_RANKS_PER_GPU 1024
/* One buffer, message or bucket, bytes (1 PiB; also elements of one op). */
#define ST_MAX_BYTES (INT64_C(1) << 50)
/* A lower bound of what each rank of a schedule costs to build and to
 * simulate folded, bytes: measured 262 B a rank for data parallelism on 1.6M
 * GPUs, the process's own memory included (docs/RELIABILITY.md). */
#define ST_MIN_BYTES_PER_RANK 256
/* Start offsets and other times read from files, ns (31.7 years): two of
 * them add without reaching ST_TIME_MAX. */
#define ST_MAX_TIME_NS INT64_C(1000000000000000000)

/* Bytes this process may still allocate: the least of the kernel's
 * MemAvailable and a cgroup's limit less its usage (v2, or v1), 0 when none
 * can be read. What `--max-memory` defaults to. */
int64_t st_memory_available(void);

/* a * b into *out; FALSE (and *out untouched) when it overflows int64. */
static inline gboolean
st_mul_i64(int64_t a, int64_t b, int64_t *out)
{
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return FALSE;
  *out = r;
  return TRUE;
}

/* ceil(ns - 1e-6) as whole nanoseconds (a duration a hair over a whole ns
 * from rounding error stays that ns): 0 for NaN or ns <= 0, ST_TIME_MAX for
 * anything that does not fit. */
int64_t st_ns_ceil(double ns);

/* floor(ns), likewise: for lower bounds, which must never round up. */
int64_t st_ns_floor(double ns);

/* t + d for t, d >= 0, saturated at ST_TIME_MAX. */
static inline int64_t
st_time_add(int64_t t, int64_t d)
{
  return d > ST_TIME_MAX - t ? ST_TIME_MAX : t + d;
}
