/* stragglers.c: what a synchronous step pays for its slowest GPU (run.h,
 * docs/GOODPUT.md "Stragglers").
 *
 * Each GPU computes at its own speed: a persistent part (manufacturing and
 * power management: Sinha et al., "Not All GPUs Are Created Equal", SC 2022,
 * arXiv 2208.11035, measured 8 % average variation (max 22 %) between GPUs
 * of one SKU in a cluster, outliers 1.5x slower than the median) and a
 * per-step jitter (thermal and power transients, OS noise). A synchronous
 * step waits for the slowest of N GPUs: its compute takes 1 + sigma M_N
 * longer, M_N the largest of N standard normal draws. A schedule that
 * tolerates k steps of delay (cyclic DP's stale update rules, k = 1) lets a
 * GPU slow in one step catch up in the next: the jitter averages over k + 1
 * steps, the persistent part does not.
 *
 * E[M_N] is computed by quadrature of the order statistic's density
 * n phi(x) Phi(x)^{n-1} (David and Nagaraja, Order Statistics, 3rd ed. 2003,
 * eq. 2.1.6), and cross-checked with Blom's approximation.
 */
#include <math.h>

#include "run/run.h"

static double
phi(double x)
{
  return exp(-0.5 * x * x) / sqrt(2.0 * G_PI);
}

static double
Phi(double x)
{
  return 0.5 * erfc(-x / G_SQRT2);
}

double
st_expected_max_normal(int n)
{
  if (n <= 1)
    return 0;
  /* Simpson's rule on [-9, 9]: the density is smooth and negligible beyond
   * for n up to millions (the mode of M_N is below 5.5 for n < 1e7). */
  const int steps = 20000;
  const double a = -9, b = 9, h = (b - a) / steps;
  double sum = 0;
  for (int i = 0; i <= steps; i++) {
    double x = a + i * h;
    double w = i == 0 || i == steps ? 1 : i % 2 ? 4 : 2;
    double cdf = Phi(x);
    double f = cdf > 0 ? x * n * phi(x) * exp((n - 1) * log(cdf)) : 0;
    sum += w * f;
  }
  return sum * h / 3;
}

/* Phi^-1 by bisection: enough for a cross-check. */
static double
Phi_inv(double p)
{
  double lo = -12, hi = 12;
  for (int i = 0; i < 200; i++) {
    double mid = 0.5 * (lo + hi);
    if (Phi(mid) < p)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

double
st_expected_max_normal_blom(int n)
{
  if (n <= 1)
    return 0;
  return Phi_inv((n - 0.375) / (n + 0.25));
}

double
st_straggler_factor(const StRunStep *step, const StRunSpec *spec)
{
  double k = MAX(step->stale_slack, 0);
  double sigma =
    sqrt(spec->sigma_gpu * spec->sigma_gpu + spec->sigma_step * spec->sigma_step / (k + 1));
  return 1.0 + step->busy_fraction * sigma * st_expected_max_normal(step->gpus);
}
