/* kernel_check.h: what the host kernel tests (test_kernels.c,
 * test_kernels_nn.c) share: random inputs, dtype conversion, comparison
 * against naive references, and finite differences.
 *
 * Tolerances. Naive formulas are evaluated in double on the same inputs:
 * fp32 kernels must agree to 1e-5 relative (1e-4 for long sums: gemm, the
 * norms, softmax); bf16 kernels (inputs rounded to bf16 first) to 1e-2
 * relative plus 1e-2 of the tensor's largest magnitude: one bf16 rounding of
 * the output is 2^-9 relative, and bf16 intermediates (a stored gemm output
 * fed to a bias add, a += into a bf16 gradient) add a few more. Finite
 * differences use h = 1e-2 on L = sum(w * forward(x)) with random w, in
 * fp32, and must agree with the analytic gradient to 1e-2 relative plus 2e-3
 * absolute: fp32 rounding of L over ~100 terms divided by 2h is ~1e-5, the
 * truncation error h^2 f''' / 6 stays below 1e-4 for these smooth inputs.
 */
#pragma once

#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "testutil.h"

/* The host kernel table, set by each test program's main. */
static const StKernels *K;

static inline float *
randu(GRand *r, size_t n, float lo, float hi)
{
  float *x = g_new(float, n);
  for (size_t i = 0; i < n; i++)
    x[i] = (float)g_rand_double_range(r, lo, hi);
  return x;
}

/* x as a tensor in dt (transfer full); bf16 rounds. */
static inline void *
to_dt(const float *x, size_t n, StKDtype dt)
{
  if (dt == ST_KDT_F32)
    return g_memdup2(x, n * sizeof(float));
  uint16_t *h = g_new(uint16_t, n);
  for (size_t i = 0; i < n; i++)
    h[i] = st_f32_to_bf16(x[i]);
  return h;
}

/* Element i of a tensor in dt, as a byte pointer. */
static inline void *
st_at_bytes(void *p, size_t i, StKDtype dt)
{
  return (char *)p + i * st_kdt_size(dt);
}

static inline float *
from_dt(const void *p, size_t n, StKDtype dt)
{
  float *x = g_new(float, n);
  for (size_t i = 0; i < n; i++)
    x[i] = dt == ST_KDT_F32 ? ((const float *)p)[i] : st_bf16_to_f32(((const uint16_t *)p)[i]);
  return x;
}

/* Rounds x in place to what bf16 holds (for naive references of bf16 runs). */
static inline void
round_bf16(float *x, size_t n)
{
  for (size_t i = 0; i < n; i++)
    x[i] = st_bf16_to_f32(st_f32_to_bf16(x[i]));
}

static inline double
max_abs(const double *x, size_t n)
{
  double m = 0;
  for (size_t i = 0; i < n; i++)
    m = fmax(m, fabs(x[i]));
  return m;
}

/* got (in dt) against want (double), rel + abs * max|want|. */
static inline void
assert_close(const char *what, const void *got_dt, StKDtype dt, const double *want, size_t n,
             double rel, double abs)
{
  g_autofree float *got = from_dt(got_dt, n, dt);
  double scale = max_abs(want, n);
  for (size_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= rel * fabs(want[i]) + abs * scale + 1e-30)) {
      g_test_message("%s[%zu]: got %.8g, want %.8g", what, i, got[i], want[i]);
      g_assert_not_reached();
    }
}

static inline double
tol_rel(StKDtype dt, double fp32)
{
  return dt == ST_KDT_F32 ? fp32 : 1e-2;
}

static inline double
tol_abs(StKDtype dt)
{
  return dt == ST_KDT_F32 ? 1e-6 : 1e-2;
}

/* Central differences of loss() with respect to x[i] for every i (n small),
 * against the analytic gradient. */
typedef double (*LossFn)(gpointer data);

static inline void
check_fd(const char *what, LossFn loss, gpointer data, float *x, size_t n, const float *grad)
{
  const float h = 1e-2f;
  for (size_t i = 0; i < n; i++) {
    float keep = x[i];
    x[i] = keep + h;
    double up = loss(data);
    x[i] = keep - h;
    double down = loss(data);
    x[i] = keep;
    double fd = (up - down) / (2.0 * h);
    if (!(fabs(fd - grad[i]) <= 1e-2 * fmax(fabs(fd), fabs(grad[i])) + 2e-3)) {
      g_test_message("%s: d/dx[%zu]: finite difference %.6g, backward %.6g", what, i, fd,
                     grad[i]);
      g_assert_not_reached();
    }
  }
}

static inline double
dot(const float *w, const float *y, size_t n)
{
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += (double)w[i] * y[i];
  return s;
}

static const StKDtype DTS[] = {ST_KDT_F32, ST_KDT_BF16};
