/* gpu_check.h: what the CUDA kernel tests (test_gpu_kernels.c,
 * test_gpu_kernels_llm.c) share: tensors with a host and a device copy, the
 * same call run on both tables, and comparison with a stated tolerance
 * (test_gpu_kernels.c explains the tolerances). The including test sets H
 * and C (the host table and the CUDA module's) in its main, once
 * st_test_open_gpu() has opened the device. */
#pragma once

#include <math.h>
#include <string.h>

#include "exec/device.h"
#include "kernels/kernels.h"
#include "testutil.h"

static const StKernels *H, *C;

/* ---- a tensor on both sides --------------------------------------------------- */

typedef struct {
  void *h, *d; /* host copy (for the reference), device copy */
  size_t bytes;
} Buf;

static inline Buf
buf_of(const void *init, size_t bytes)
{
  Buf b = {g_malloc0(bytes + 1), NULL, bytes};
  if (init != NULL)
    memcpy(b.h, init, bytes);
  g_assert_cmpint(C->alloc(&b.d, bytes + 1), ==, 0);
  g_assert_cmpint(C->copy(NULL, b.d, b.h, bytes, 1), ==, 0);
  return b;
}

static inline Buf
buf_zero(size_t bytes)
{
  return buf_of(NULL, bytes);
}

/* n values uniform in [lo, hi) stored in dt. */
static inline Buf
buf_rand(GRand *r, size_t n, StKDtype dt, float lo, float hi)
{
  g_autofree uint8_t *x = g_malloc(n * st_kdt_size(dt) + 1);
  for (size_t i = 0; i < n; i++) {
    float v = (float)g_rand_double_range(r, lo, hi);
    if (dt == ST_KDT_F32)
      ((float *)x)[i] = v;
    else
      ((uint16_t *)x)[i] = st_f32_to_bf16(v);
  }
  return buf_of(x, n * st_kdt_size(dt));
}

static inline Buf
buf_ints(const int32_t *v, size_t n)
{
  return buf_of(v, n * sizeof(int32_t));
}

static inline void
buf_free(Buf *b)
{
  g_free(b->h);
  g_assert_cmpint(C->free(b->d), ==, 0);
}

/* The device copy, downloaded. Transfer full. */
static inline void *
buf_down(const Buf *b)
{
  void *x = g_malloc(b->bytes + 1);
  g_assert_cmpint(C->copy(NULL, x, b->d, b->bytes, 2), ==, 0);
  return x;
}

static inline float
at(const void *p, StKDtype dt, size_t i)
{
  return dt == ST_KDT_F32 ? ((const float *)p)[i] : st_bf16_to_f32(((const uint16_t *)p)[i]);
}

/* Device against host: n elements in dt, fp32 tolerance `rel` (bf16: 1e-2). */
static inline void
same(const char *what, const Buf *b, size_t n, StKDtype dt, double rel)
{
  g_autofree void *got = buf_down(b);
  double r = dt == ST_KDT_F32 ? rel : 1e-2, most = 0;
  for (size_t i = 0; i < n; i++)
    most = fmax(most, fabs(at(b->h, dt, i)));
  for (size_t i = 0; i < n; i++) {
    double g = at(got, dt, i), w = at(b->h, dt, i);
    if (!(fabs(g - w) <= r * fabs(w) + r * most) && !(isnan(g) && isnan(w))) {
      g_test_message("%s (%s)[%zu]: cuda %.8g, host %.8g", what,
                     dt == ST_KDT_F32 ? "fp32" : "bf16", i, g, w);
      g_assert_not_reached();
    }
  }
}

/* Bytes equal (masks, int32 results). */
static inline void
same_bytes(const char *what, const Buf *b)
{
  g_autofree void *got = buf_down(b);
  if (memcmp(got, b->h, b->bytes) != 0) {
    g_test_message("%s: cuda and host bytes differ", what);
    g_assert_not_reached();
  }
}

/* Runs `call` on the host (S = 0: buffers' host copies, table H) and on the
 * device (S = 1: device copies, table C); both must succeed. */
#define BOTH(call)                                                                            \
  do {                                                                                        \
    for (int S = 0; S < 2; S++) {                                                             \
      const StKernels *T = S ? C : H;                                                         \
      g_assert_cmpint((call), ==, 0);                                                         \
    }                                                                                         \
  } while (0)
#define P(b) (S ? (b).d : (b).h)

static const StKDtype DTS[] = {ST_KDT_F32, ST_KDT_BF16};

