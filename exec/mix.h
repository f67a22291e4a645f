/* mix.h: splitmix64 (Steele et al. 2014), the executor's one source of
 * reproducible randomness: a counter-based generator, so a draw depends on
 * (seed, counter) only and threads share no state. Weights, synthetic data,
 * the sparse mask and the profiler's inputs all draw from it. (The kernels
 * have their own copy, kernels/ref/kmath.h, for device code.) */
#pragma once

#include <stdint.h>

/* The finalizer: a good 64-bit mix of z. */
static inline uint64_t
st_mix64(uint64_t z)
{
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* One step of splitmix64 from state x: the golden-ratio increment, mixed. */
static inline uint64_t
st_splitmix64(uint64_t x)
{
  return st_mix64(x + UINT64_C(0x9e3779b97f4a7c15));
}
