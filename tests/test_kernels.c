/* test_kernels.c: the host kernel table (kernels/ref/) against naive
 * formulas, and every backward against central finite differences of its
 * forward.
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
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "testutil.h"

static const StKernels *K;

/* ---- helpers ------------------------------------------------------------ */

static float *
randu(GRand *r, size_t n, float lo, float hi)
{
  float *x = g_new(float, n);
  for (size_t i = 0; i < n; i++)
    x[i] = (float)g_rand_double_range(r, lo, hi);
  return x;
}

/* x as a tensor in dt (transfer full); bf16 rounds. */
static void *
to_dt(const float *x, size_t n, StKDtype dt)
{
  if (dt == ST_KDT_F32)
    return g_memdup2(x, n * sizeof(float));
  uint16_t *h = g_new(uint16_t, n);
  for (size_t i = 0; i < n; i++)
    h[i] = st_f32_to_bf16(x[i]);
  return h;
}

static float *
from_dt(const void *p, size_t n, StKDtype dt)
{
  float *x = g_new(float, n);
  for (size_t i = 0; i < n; i++)
    x[i] = dt == ST_KDT_F32 ? ((const float *)p)[i] : st_bf16_to_f32(((const uint16_t *)p)[i]);
  return x;
}

/* Rounds x in place to what bf16 holds (for naive references of bf16 runs). */
static void
round_bf16(float *x, size_t n)
{
  for (size_t i = 0; i < n; i++)
    x[i] = st_bf16_to_f32(st_f32_to_bf16(x[i]));
}

static double
max_abs(const double *x, size_t n)
{
  double m = 0;
  for (size_t i = 0; i < n; i++)
    m = fmax(m, fabs(x[i]));
  return m;
}

/* got (in dt) against want (double), rel + abs * max|want|. */
static void
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

static double
tol_rel(StKDtype dt, double fp32)
{
  return dt == ST_KDT_F32 ? fp32 : 1e-2;
}

static double
tol_abs(StKDtype dt)
{
  return dt == ST_KDT_F32 ? 1e-6 : 1e-2;
}

/* Central differences of loss() with respect to x[i] for every i (n small),
 * against the analytic gradient. */
typedef double (*LossFn)(gpointer data);

static void
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

static double
dot(const float *w, const float *y, size_t n)
{
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += (double)w[i] * y[i];
  return s;
}

static const StKDtype DTS[] = {ST_KDT_F32, ST_KDT_BF16};

/* ---- memory, elementwise ----------------------------------------------- */

static void
test_memory(void)
{
  void *p = NULL;
  g_assert_cmpint(K->alloc(&p, 64), ==, 0);
  g_assert_nonnull(p);
  char src[64];
  memset(src, 7, sizeof(src));
  g_assert_cmpint(K->copy(NULL, p, src, 64, 1), ==, 0);
  g_assert_cmpint(memcmp(p, src, 64), ==, 0);
  g_assert_cmpint(K->memset0(NULL, p, 32), ==, 0);
  g_assert_cmpint(((char *)p)[31], ==, 0);
  g_assert_cmpint(((char *)p)[32], ==, 7);
  g_assert_cmpint(K->copy(NULL, p, src, 8, 3), ==, ST_K_EINVAL);
  g_assert_cmpint(K->copy(NULL, NULL, src, 8, 0), ==, ST_K_EINVAL);
  g_assert_cmpint(K->alloc(NULL, 8), ==, ST_K_EINVAL);
  g_assert_cmpint(K->free(p), ==, 0);
  g_assert_cmpint(K->alloc(&p, 0), ==, 0);
  g_assert_null(p);
}

static void
test_elementwise(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(1);
  const size_t n = 301;
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    g_autofree float *a = randu(r, n, -2, 2), *b = randu(r, n, -2, 2);
    if (dt == ST_KDT_BF16) {
      round_bf16(a, n);
      round_bf16(b, n);
    }
    g_autofree double *want = g_new(double, n);
    g_autofree void *ya = to_dt(a, n, dt), *xb = to_dt(b, n, dt);
    g_assert_cmpint(K->axpy(NULL, ya, dt, 0.5f, xb, dt, n), ==, 0);
    for (size_t i = 0; i < n; i++)
      want[i] = a[i] + 0.5 * b[i];
    assert_close("axpy", ya, dt, want, n, tol_rel(dt, 1e-6), tol_abs(dt));
    g_autofree void *oa = to_dt(a, n, dt), *ob = to_dt(b, n, dt);
    g_assert_cmpint(K->add(NULL, oa, oa, ob, dt, n), ==, 0); /* out aliases a */
    for (size_t i = 0; i < n; i++)
      want[i] = (double)a[i] + b[i];
    assert_close("add", oa, dt, want, n, tol_rel(dt, 1e-6), tol_abs(dt));
    g_assert_cmpint(K->scale(NULL, ob, dt, -3.0f, n), ==, 0);
    for (size_t i = 0; i < n; i++)
      want[i] = -3.0 * b[i];
    assert_close("scale", ob, dt, want, n, tol_rel(dt, 1e-6), tol_abs(dt));
  }
  /* convert: fp32 -> bf16 rounds to nearest even, bf16 -> fp32 is exact */
  float in[4] = {1.0f, 1.00390625f /* 1 + 2^-8: a tie, to even (1) */, 1.01171875f, -3.5f};
  uint16_t h[4];
  float back[4];
  g_assert_cmpint(K->convert(NULL, h, ST_KDT_BF16, in, ST_KDT_F32, 4), ==, 0);
  g_assert_cmpint(K->convert(NULL, back, ST_KDT_F32, h, ST_KDT_BF16, 4), ==, 0);
  g_assert_cmpfloat(back[0], ==, 1.0f);
  g_assert_cmpfloat(back[1], ==, 1.0f);
  g_assert_cmpfloat(back[2], ==, 1.015625f); /* 1 + 3 * 2^-8 rounds up to 1 + 2^-6 */
  g_assert_cmpfloat(back[3], ==, -3.5f);
  g_assert_cmpint(K->add(NULL, NULL, in, in, ST_KDT_F32, 4), ==, ST_K_EINVAL);
  g_assert_cmpint(K->add(NULL, NULL, NULL, NULL, ST_KDT_F32, 0), ==, 0);
  g_assert_cmpint(K->scale(NULL, in, (StKDtype)7, 1.0f, 4), ==, ST_K_EINVAL);
}

/* ---- gemm and biases ----------------------------------------------------- */

/* Naive batched C = alpha op(A) op(B) + beta C in double. */
static void
naive_gemm(int ta, int tb, int m, int n, int k, double alpha, const float *a, const float *b,
           double beta, double *c, int batch, int64_t sa, int64_t sb, int64_t sc)
{
  for (int q = 0; q < batch; q++)
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) {
        double s = 0;
        for (int p = 0; p < k; p++) {
          double av = ta ? a[q * sa + (int64_t)p * m + i] : a[q * sa + (int64_t)i * k + p];
          double bv = tb ? b[q * sb + (int64_t)j * k + p] : b[q * sb + (int64_t)p * n + j];
          s += av * bv;
        }
        double *cv = &c[q * sc + (int64_t)i * n + j];
        *cv = alpha * s + (beta != 0 ? beta * *cv : 0);
      }
}

static void
test_gemm(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(2);
  const int m = 7, n = 300, k = 33, batch = 3; /* n > the reference's column block */
  for (int d = 0; d < 2; d++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        for (int shared = 0; shared < 2; shared++) {
          StKDtype dt = DTS[d];
          int64_t sa = shared ? 0 : (int64_t)m * k, sb = (int64_t)k * n, sc = (int64_t)m * n;
          size_t na = (size_t)m * k * (shared ? 1 : batch), nb = (size_t)k * n * batch;
          size_t nc = (size_t)m * n * batch;
          g_autofree float *a = randu(r, na, -1, 1), *b = randu(r, nb, -1, 1);
          g_autofree float *c0 = randu(r, nc, -1, 1);
          if (dt == ST_KDT_BF16) {
            round_bf16(a, na);
            round_bf16(b, nb);
            round_bf16(c0, nc);
          }
          float beta = shared ? 0.5f : 0.0f;
          g_autofree double *want = g_new(double, nc);
          for (size_t i = 0; i < nc; i++)
            want[i] = c0[i];
          naive_gemm(ta, tb, m, n, k, 1.5, a, b, beta, want, batch, sa, sb, sc);
          g_autofree void *da = to_dt(a, na, dt), *db = to_dt(b, nb, dt);
          g_autofree void *dc = to_dt(c0, nc, dt);
          if (beta == 0.0f) /* C is not read: NaN garbage must not leak in */
            memset(dc, 0xff, nc * st_kdt_size(dt));
          g_assert_cmpint(K->gemm(NULL, ta, tb, m, n, k, 1.5f, da, db, beta, dc, dt, batch, sa, sb,
                                  sc),
                          ==, 0);
          assert_close("gemm", dc, dt, want, nc, tol_rel(dt, 1e-4), tol_abs(dt));
        }
  float x = 0;
  g_assert_cmpint(K->gemm(NULL, 0, 0, -1, 1, 1, 1, &x, &x, 0, &x, ST_KDT_F32, 1, 0, 0, 0), ==,
                  ST_K_EINVAL);
  g_assert_cmpint(K->gemm(NULL, 0, 0, 1, 1, 1, 1, NULL, &x, 0, &x, ST_KDT_F32, 1, 0, 0, 0), ==,
                  ST_K_EINVAL);
  /* k = 0: C = beta C */
  float c[2] = {2, 4};
  g_assert_cmpint(K->gemm(NULL, 0, 0, 1, 2, 0, 1, NULL, NULL, 0.5f, c, ST_KDT_F32, 1, 0, 0, 0), ==,
                  0);
  g_assert_cmpfloat(c[1], ==, 2.0f);
}

static void
test_bias(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(3);
  const int rows = 37, cols = 45, n = 3, ch = 5, hw = 17;
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    size_t total = (size_t)rows * cols;
    g_autofree float *y = randu(r, total, -1, 1), *bias = randu(r, (size_t)cols, -1, 1);
    if (dt == ST_KDT_BF16) {
      round_bf16(y, total);
      round_bf16(bias, (size_t)cols);
    }
    g_autofree double *want = g_new(double, total);
    for (size_t i = 0; i < total; i++)
      want[i] = (double)y[i] + bias[i % cols];
    g_autofree void *dy = to_dt(y, total, dt), *dbias = to_dt(bias, (size_t)cols, dt);
    g_assert_cmpint(K->bias_add(NULL, dy, dbias, rows, cols, dt), ==, 0);
    assert_close("bias_add", dy, dt, want, total, tol_rel(dt, 1e-6), tol_abs(dt));
    g_autofree void *g = to_dt(y, total, dt); /* dbias += column sums */
    g_autofree double *sums = g_new(double, cols);
    for (int j = 0; j < cols; j++) {
      sums[j] = bias[j];
      for (int i = 0; i < rows; i++)
        sums[j] += y[(size_t)i * cols + j];
    }
    g_assert_cmpint(K->bias_grad(NULL, dbias, g, rows, cols, dt), ==, 0);
    assert_close("bias_grad", dbias, dt, sums, (size_t)cols, tol_rel(dt, 1e-5), tol_abs(dt));
    /* per channel of N x C x HW */
    size_t t2 = (size_t)n * ch * hw;
    g_autofree float *z = randu(r, t2, -1, 1), *cb = randu(r, (size_t)ch, -1, 1);
    if (dt == ST_KDT_BF16) {
      round_bf16(z, t2);
      round_bf16(cb, (size_t)ch);
    }
    g_autofree double *w2 = g_new(double, t2), *s2 = g_new0(double, ch);
    for (size_t i = 0; i < t2; i++) {
      w2[i] = (double)z[i] + cb[(i / hw) % ch];
      s2[(i / hw) % ch] += z[i];
    }
    for (int j = 0; j < ch; j++)
      s2[j] += cb[j];
    g_autofree void *dz = to_dt(z, t2, dt), *dcb = to_dt(cb, (size_t)ch, dt);
    g_assert_cmpint(K->bias_add_chw(NULL, dz, dcb, n, ch, hw, dt), ==, 0);
    assert_close("bias_add_chw", dz, dt, w2, t2, tol_rel(dt, 1e-6), tol_abs(dt));
    g_autofree void *gz = to_dt(z, t2, dt);
    g_assert_cmpint(K->bias_grad_chw(NULL, dcb, gz, n, ch, hw, dt), ==, 0);
    assert_close("bias_grad_chw", dcb, dt, s2, (size_t)ch, tol_rel(dt, 1e-5), tol_abs(dt));
  }
}

/* ---- activations ---------------------------------------------------------- */

static double
gelu_ref(double x)
{
  return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

typedef struct {
  float *x, *w, *y;
  size_t n;
} Pointwise;

static double
gelu_loss(gpointer data)
{
  Pointwise *p = data;
  g_assert_cmpint(K->gelu_fwd(NULL, p->y, p->x, ST_KDT_F32, p->n), ==, 0);
  return dot(p->w, p->y, p->n);
}

static void
test_activations(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(4);
  const size_t n = 257;
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    g_autofree float *x = randu(r, n, -3, 3), *dy = randu(r, n, -1, 1);
    if (dt == ST_KDT_BF16) {
      round_bf16(x, n);
      round_bf16(dy, n);
    }
    g_autofree void *dx = to_dt(x, n, dt), *ddy = to_dt(dy, n, dt), *out = to_dt(x, n, dt);
    g_autofree void *din = to_dt(x, n, dt);
    g_autofree double *want = g_new(double, n);
    g_assert_cmpint(K->relu_fwd(NULL, out, dx, dt, n), ==, 0);
    for (size_t i = 0; i < n; i++)
      want[i] = x[i] > 0 ? x[i] : 0;
    assert_close("relu", out, dt, want, n, 0, 0);
    g_assert_cmpint(K->relu_bwd(NULL, din, ddy, out, dt, n), ==, 0);
    for (size_t i = 0; i < n; i++)
      want[i] = x[i] > 0 ? dy[i] : 0;
    assert_close("relu_bwd", din, dt, want, n, 0, 0);
    g_assert_cmpint(K->gelu_fwd(NULL, out, dx, dt, n), ==, 0);
    for (size_t i = 0; i < n; i++)
      want[i] = gelu_ref(x[i]);
    assert_close("gelu", out, dt, want, n, tol_rel(dt, 1e-5), tol_abs(dt));
  }
  /* gelu's backward against finite differences */
  Pointwise p = {randu(r, 64, -3, 3), randu(r, 64, -1, 1), g_new(float, 64), 64};
  g_autofree float *grad = g_new(float, 64);
  g_assert_cmpint(K->gelu_bwd(NULL, grad, p.w, p.x, ST_KDT_F32, 64), ==, 0);
  check_fd("gelu", gelu_loss, &p, p.x, 64, grad);
  g_free(p.x);
  g_free(p.w);
  g_free(p.y);
}

/* Dropout: each element kept with probability 1 - p from (seed, index) alone. */
static void
test_dropout(void)
{
  const size_t n = 20000;
  const float p = 0.25f;
  g_autofree float *x = g_new(float, n), *y = g_new(float, n), *y2 = g_new(float, n);
  g_autofree float *dx = g_new(float, n);
  g_autofree uint8_t *mask = g_new(uint8_t, n), *mask2 = g_new(uint8_t, n);
  for (size_t i = 0; i < n; i++)
    x[i] = 1.0f + (float)(i % 7);
  g_assert_cmpint(K->dropout_fwd(NULL, y, mask, x, p, 42, ST_KDT_F32, n), ==, 0);
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    kept += mask[i];
    g_assert_cmpfloat_with_epsilon(y[i], mask[i] ? x[i] / (1.0f - p) : 0.0f, 1e-6 * x[i]);
  }
  /* binomial: 0.75 n +- 5 sigma, sigma = sqrt(n p (1 - p)) ~ 61 */
  g_assert_cmpfloat(fabs((double)kept - 0.75 * n), <, 310);
  g_assert_cmpint(K->dropout_fwd(NULL, y2, mask2, x, p, 42, ST_KDT_F32, n), ==, 0);
  g_assert_cmpint(memcmp(mask, mask2, n), ==, 0);
  g_assert_cmpint(K->dropout_fwd(NULL, y2, mask2, x, p, 43, ST_KDT_F32, n), ==, 0);
  g_assert_cmpint(memcmp(mask, mask2, n), !=, 0);
  g_assert_cmpint(K->dropout_bwd(NULL, dx, x, mask, p, ST_KDT_F32, n), ==, 0);
  for (size_t i = 0; i < n; i++)
    g_assert_cmpfloat(dx[i], ==, y[i]); /* the same linear map */
  g_assert_cmpint(K->dropout_fwd(NULL, y, mask, x, 1.0f, 42, ST_KDT_F32, n), ==, ST_K_EINVAL);
}

/* ---- normalization -------------------------------------------------------- */

typedef struct {
  int bn;                 /* batch norm (n, c, hw) or layer norm (rows, cols) */
  int a, b, c;            /* bn: n, c, hw; ln: rows, cols, - */
  float *x, *g, *beta, *w, *y, *mean, *rstd;
  size_t n;
} Norm;

static double
norm_loss(gpointer data)
{
  Norm *q = data;
  int rc = q->bn ? K->batchnorm_fwd(NULL, q->y, q->mean, q->rstd, q->x, q->g, q->beta, q->a, q->b,
                                    q->c, ST_KDT_F32)
                 : K->layernorm_fwd(NULL, q->y, q->mean, q->rstd, q->x, q->g, q->beta, q->a, q->b,
                                    ST_KDT_F32);
  g_assert_cmpint(rc, ==, 0);
  return dot(q->w, q->y, q->n);
}

/* Naive norm in double: groups of elements (a row, or a channel over n, hw). */
static void
naive_norm(const Norm *q, const float *x, const float *g, const float *b, double *y)
{
  int groups = q->bn ? q->b : q->a;
  size_t per = q->n / (size_t)groups;
  for (int grp = 0; grp < groups; grp++) {
    double s = 0, s2 = 0;
    for (size_t j = 0; j < per; j++) {
      size_t idx = q->bn ? ((j / q->c) * q->b + grp) * q->c + j % q->c : grp * per + j;
      s += x[idx];
    }
    double mu = s / per;
    for (size_t j = 0; j < per; j++) {
      size_t idx = q->bn ? ((j / q->c) * q->b + grp) * q->c + j % q->c : grp * per + j;
      s2 += (x[idx] - mu) * (x[idx] - mu);
    }
    double rs = 1.0 / sqrt(s2 / per + 1e-5);
    for (size_t j = 0; j < per; j++) {
      size_t idx = q->bn ? ((j / q->c) * q->b + grp) * q->c + j % q->c : grp * per + j;
      int f = q->bn ? grp : (int)j; /* the affine parameter's index */
      y[idx] = (x[idx] - mu) * rs * g[f] + b[f];
    }
  }
}

static void
norm_case(int bn, int a, int b, int c)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(5);
  Norm q = {.bn = bn, .a = a, .b = b, .c = c};
  q.n = bn ? (size_t)a * b * c : (size_t)a * b;
  int feats = b, groups = bn ? b : a; /* affine over channels, or over columns */
  q.x = randu(r, q.n, -2, 3);
  q.g = randu(r, (size_t)feats, 0.5, 1.5);
  q.beta = randu(r, (size_t)feats, -0.5, 0.5);
  q.w = randu(r, q.n, -1, 1);
  q.y = g_new(float, q.n);
  q.mean = g_new(float, groups);
  q.rstd = g_new(float, groups);
  for (int d = 0; d < 2; d++) { /* forward against the naive formula */
    StKDtype dt = DTS[d];
    g_autofree float *x = g_memdup2(q.x, q.n * 4), *g = g_memdup2(q.g, feats * 4);
    g_autofree float *be = g_memdup2(q.beta, feats * 4);
    if (dt == ST_KDT_BF16) {
      round_bf16(x, q.n);
      round_bf16(g, feats);
      round_bf16(be, feats);
    }
    g_autofree double *want = g_new(double, q.n);
    naive_norm(&q, x, g, be, want);
    g_autofree void *dx = to_dt(x, q.n, dt), *dg = to_dt(g, feats, dt), *db = to_dt(be, feats, dt);
    g_autofree void *out = to_dt(x, q.n, dt);
    int rc = bn ? K->batchnorm_fwd(NULL, out, q.mean, q.rstd, dx, dg, db, a, b, c, dt)
                : K->layernorm_fwd(NULL, out, q.mean, q.rstd, dx, dg, db, a, b, dt);
    g_assert_cmpint(rc, ==, 0);
    assert_close(bn ? "batchnorm" : "layernorm", out, dt, want, q.n, tol_rel(dt, 1e-4),
                 tol_abs(dt));
  }
  norm_loss(&q); /* statistics of the unperturbed input, then the analytic gradients */
  g_autofree float *dx = g_new(float, q.n), *dg = g_new0(float, feats);
  g_autofree float *db = g_new0(float, feats);
  int rc = bn ? K->batchnorm_bwd(NULL, dx, dg, db, q.w, q.x, q.mean, q.rstd, q.g, a, b, c,
                                 ST_KDT_F32)
              : K->layernorm_bwd(NULL, dx, dg, db, q.w, q.x, q.mean, q.rstd, q.g, a, b, ST_KDT_F32);
  g_assert_cmpint(rc, ==, 0);
  const char *name = bn ? "batchnorm" : "layernorm";
  check_fd(name, norm_loss, &q, q.x, q.n, dx);
  check_fd(name, norm_loss, &q, q.g, feats, dg);
  check_fd(name, norm_loss, &q, q.beta, feats, db);
  g_free(q.x);
  g_free(q.g);
  g_free(q.beta);
  g_free(q.w);
  g_free(q.y);
  g_free(q.mean);
  g_free(q.rstd);
}

static void
test_layernorm(void)
{
  norm_case(0, 4, 45, 0);
}

static void
test_batchnorm(void)
{
  norm_case(1, 3, 4, 13);
}

/* ---- softmax and loss ----------------------------------------------------- */

typedef struct {
  int rows, cols, causal;
  float scale;
  float *x, *w, *y;
  int32_t *targets;
  float *probs;
} Soft;

static double
softmax_loss(gpointer data)
{
  Soft *q = data;
  g_assert_cmpint(K->softmax_fwd(NULL, q->y, q->x, q->scale, q->causal, q->rows, q->cols,
                                 ST_KDT_F32), ==, 0);
  return dot(q->w, q->y, (size_t)q->rows * q->cols);
}

static void
test_softmax(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(6);
  const int cols = 9, rows = 2 * cols; /* two attention blocks of 9 queries */
  const size_t n = (size_t)rows * cols;
  for (int causal = 0; causal < 2; causal++) {
    for (int d = 0; d < 2; d++) {
      StKDtype dt = DTS[d];
      g_autofree float *x = randu(r, n, -4, 4);
      if (dt == ST_KDT_BF16)
        round_bf16(x, n);
      g_autofree double *want = g_new0(double, n);
      for (int i = 0; i < rows; i++) {
        int valid = causal ? i % cols + 1 : cols;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < valid; j++)
          mx = fmax(mx, 0.5 * x[i * cols + j]);
        for (int j = 0; j < valid; j++)
          sum += exp(0.5 * x[i * cols + j] - mx);
        for (int j = 0; j < valid; j++)
          want[i * cols + j] = exp(0.5 * x[i * cols + j] - mx) / sum;
      }
      g_autofree void *dx = to_dt(x, n, dt), *out = to_dt(x, n, dt);
      g_assert_cmpint(K->softmax_fwd(NULL, out, dx, 0.5f, causal, rows, cols, dt), ==, 0);
      assert_close("softmax", out, dt, want, n, tol_rel(dt, 1e-5), tol_abs(dt));
    }
    Soft q = {.rows = rows, .cols = cols, .causal = causal, .scale = 0.5f,
              .x = randu(r, n, -2, 2), .w = randu(r, n, -1, 1), .y = g_new(float, n)};
    softmax_loss(&q);
    g_autofree float *grad = g_new(float, n);
    g_assert_cmpint(K->softmax_bwd(NULL, grad, q.w, q.y, q.scale, rows, cols, ST_KDT_F32), ==, 0);
    check_fd("softmax", softmax_loss, &q, q.x, n, grad);
    g_free(q.x);
    g_free(q.w);
    g_free(q.y);
  }
}

static double
ce_loss(gpointer data)
{
  Soft *q = data;
  float sum = 0.0f;
  g_assert_cmpint(K->softmax_ce_fwd(NULL, &sum, q->probs, q->x, q->targets, q->rows, q->cols,
                                    ST_KDT_F32), ==, 0);
  return sum * q->scale;
}

/* Cross-entropy: loss_sum += sum of -log softmax(x)[target]; a target out of
 * range (-1 here) ignores its row. */
static void
test_softmax_ce(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(7);
  const int rows = 6, classes = 40;
  const size_t n = (size_t)rows * classes;
  int32_t targets[6] = {0, 39, 7, -1, 20, 3};
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    g_autofree float *x = randu(r, n, -5, 5), *probs = g_new(float, n);
    if (dt == ST_KDT_BF16)
      round_bf16(x, n);
    double want = 0;
    for (int i = 0; i < rows; i++) {
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j < classes; j++)
        mx = fmax(mx, x[i * classes + j]);
      for (int j = 0; j < classes; j++)
        sum += exp(x[i * classes + j] - mx);
      if (targets[i] >= 0)
        want += log(sum) + mx - x[i * classes + targets[i]];
    }
    g_autofree void *dx = to_dt(x, n, dt);
    float loss = 1.0f; /* added to */
    g_assert_cmpint(K->softmax_ce_fwd(NULL, &loss, probs, dx, targets, rows, classes, dt), ==, 0);
    g_assert_cmpfloat_with_epsilon(loss, 1.0 + want, 1e-5 * (1.0 + want));
  }
  Soft q = {.rows = rows, .cols = classes, .scale = 0.25f, .x = randu(r, n, -3, 3),
            .targets = targets, .probs = g_new(float, n)};
  ce_loss(&q);
  g_autofree float *grad = g_new(float, n);
  g_assert_cmpint(K->softmax_ce_bwd(NULL, grad, q.probs, targets, q.scale, rows, classes,
                                    ST_KDT_F32), ==, 0);
  check_fd("softmax_ce", ce_loss, &q, q.x, n, grad);
  for (int j = 0; j < classes; j++) /* the ignored row */
    g_assert_cmpfloat(grad[3 * classes + j], ==, 0.0f);
  g_free(q.x);
  g_free(q.probs);
}

/* ---- embeddings and reshapes ----------------------------------------------- */

static void
test_embeddings(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(8);
  const int vocab = 11, dim = 37, n = 9, batch = 3, rows = 5;
  int32_t ids[9] = {3, 0, 10, 3, 3, -1, 7, 0, 10}; /* repeats, and a padding id */
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    size_t nt = (size_t)vocab * dim, no = (size_t)n * dim;
    g_autofree float *table = randu(r, nt, -1, 1), *dy = randu(r, no, -1, 1);
    if (dt == ST_KDT_BF16) {
      round_bf16(table, nt);
      round_bf16(dy, no);
    }
    g_autofree double *want = g_new0(double, no), *wt = g_new(double, nt);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < dim; j++)
        want[i * dim + j] = ids[i] >= 0 ? table[ids[i] * dim + j] : 0.0;
    g_autofree void *dtab = to_dt(table, nt, dt), *out = to_dt(dy, no, dt);
    g_autofree void *ddy = to_dt(dy, no, dt);
    g_assert_cmpint(K->embedding_fwd(NULL, out, dtab, ids, n, dim, dt), ==, 0);
    assert_close("embedding", out, dt, want, no, 0, 0);
    for (size_t i = 0; i < nt; i++)
      wt[i] = table[i];
    for (int i = 0; i < n; i++)
      for (int j = 0; ids[i] >= 0 && j < dim; j++)
        wt[ids[i] * dim + j] += dy[i * dim + j];
    g_assert_cmpint(K->embedding_bwd(NULL, dtab, ddy, ids, n, dim, dt), ==, 0);
    assert_close("embedding_bwd", dtab, dt, wt, nt, tol_rel(dt, 1e-6), tol_abs(dt));
    /* position rows: out[b] += pos, dpos += sum over b */
    size_t per = (size_t)rows * dim, all = per * batch;
    g_autofree float *x = randu(r, all, -1, 1), *pos = randu(r, per, -1, 1);
    if (dt == ST_KDT_BF16) {
      round_bf16(x, all);
      round_bf16(pos, per);
    }
    g_autofree double *wx = g_new(double, all), *wp = g_new(double, per);
    for (size_t i = 0; i < per; i++)
      wp[i] = pos[i];
    for (size_t i = 0; i < all; i++) {
      wx[i] = (double)x[i] + pos[i % per];
      wp[i % per] += x[i];
    }
    g_autofree void *dxx = to_dt(x, all, dt), *dpos = to_dt(pos, per, dt);
    g_autofree void *gx = to_dt(x, all, dt);
    g_assert_cmpint(K->add_rows(NULL, dxx, dpos, batch, rows, dim, dt), ==, 0);
    assert_close("add_rows", dxx, dt, wx, all, tol_rel(dt, 1e-6), tol_abs(dt));
    g_assert_cmpint(K->add_rows_bwd(NULL, dpos, gx, batch, rows, dim, dt), ==, 0);
    assert_close("add_rows_bwd", dpos, dt, wp, per, tol_rel(dt, 1e-6), tol_abs(dt));
  }
}

/* Every one of the 24 permutations of a [2, 3, 4, 5] tensor. */
static void
test_permute4(void)
{
  const int d[4] = {2, 3, 4, 5};
  const size_t n = 120;
  g_autofree float *x = g_new(float, n), *y = g_new(float, n);
  for (size_t i = 0; i < n; i++)
    x[i] = (float)i;
  int count = 0;
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      for (int c = 0; c < 4; c++)
        for (int e = 0; e < 4; e++) {
          int perm[4] = {a, b, c, e};
          if (a == b || a == c || a == e || b == c || b == e || c == e) {
            g_assert_cmpint(K->permute4(NULL, y, x, d, perm, ST_KDT_F32), ==, ST_K_EINVAL);
            continue;
          }
          count++;
          g_assert_cmpint(K->permute4(NULL, y, x, d, perm, ST_KDT_F32), ==, 0);
          int od[4] = {d[a], d[b], d[c], d[e]}, i[4];
          size_t o = 0;
          for (i[0] = 0; i[0] < od[0]; i[0]++)
            for (i[1] = 0; i[1] < od[1]; i[1]++)
              for (i[2] = 0; i[2] < od[2]; i[2]++)
                for (i[3] = 0; i[3] < od[3]; i[3]++, o++) {
                  int src[4];
                  for (int k = 0; k < 4; k++)
                    src[perm[k]] = i[k];
                  size_t idx = ((size_t)(src[0] * d[1] + src[1]) * d[2] + src[2]) * d[3] + src[3];
                  g_assert_cmpfloat(y[o], ==, x[idx]);
                }
        }
  g_assert_cmpint(count, ==, 24);
}

/* ---- convolution and pooling ---------------------------------------------- */

typedef struct {
  int k, s, p;
} Win;

static const Win WINDOWS[] = {{3, 1, 1}, {3, 2, 1}, {1, 2, 0}, {4, 4, 0}, {5, 2, 2}, {2, 3, 1}};

static int
out_size(int size, Win w)
{
  return (size + 2 * w.p - w.k) / w.s + 1;
}

/* im2col against its definition; col2im is its adjoint:
 * <im2col(x), y> = <x, col2im(y)>. */
static void
test_im2col(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(9);
  const int c = 3, h = 9, w = 8;
  const size_t nx = (size_t)c * h * w;
  for (size_t t = 0; t < G_N_ELEMENTS(WINDOWS); t++) {
    Win win = WINDOWS[t];
    int ho = out_size(h, win), wo = out_size(w, win);
    size_t nc = (size_t)c * win.k * win.k * ho * wo;
    g_autofree float *x = randu(r, nx, -1, 1), *y = randu(r, nc, -1, 1);
    g_autofree float *cols = g_new(float, nc), *dx = g_new0(float, nx);
    g_assert_cmpint(K->im2col(NULL, cols, x, c, h, w, win.k, win.s, win.p, ST_KDT_F32), ==, 0);
    size_t i = 0;
    for (int ch = 0; ch < c; ch++)
      for (int ki = 0; ki < win.k; ki++)
        for (int kj = 0; kj < win.k; kj++)
          for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++, i++) {
              int iy = oy * win.s - win.p + ki, ix = ox * win.s - win.p + kj;
              float v = iy >= 0 && iy < h && ix >= 0 && ix < w ? x[(ch * h + iy) * w + ix] : 0;
              g_assert_cmpfloat(cols[i], ==, v);
            }
    g_assert_cmpint(K->col2im(NULL, dx, y, c, h, w, win.k, win.s, win.p, ST_KDT_F32), ==, 0);
    double lhs = dot(cols, y, nc), rhs = dot(x, dx, nx);
    g_assert_cmpfloat_with_epsilon(lhs, rhs, 1e-5 * (1 + fabs(lhs)));
  }
  float z = 0;
  g_assert_cmpint(K->im2col(NULL, &z, &z, 1, 2, 2, 5, 1, 0, ST_KDT_F32), ==, ST_K_EINVAL);
}

typedef struct {
  int nc, h, w;
  Win win;
  float *x, *wgt, *y;
  int32_t *argmax;
} Pool;

static double
maxpool_loss(gpointer data)
{
  Pool *q = data;
  g_assert_cmpint(K->maxpool_fwd(NULL, q->y, q->argmax, q->x, q->nc, q->h, q->w, q->win.k,
                                 q->win.s, q->win.p, ST_KDT_F32), ==, 0);
  return dot(q->wgt, q->y, (size_t)q->nc * out_size(q->h, q->win) * out_size(q->w, q->win));
}

static void
test_pooling(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(10);
  const int nc = 4, h = 7, w = 9;
  const size_t nx = (size_t)nc * h * w;
  for (size_t t = 0; t < G_N_ELEMENTS(WINDOWS); t++) {
    Win win = WINDOWS[t];
    if (2 * win.p > win.k) /* PyTorch's pooling bound */
      continue;
    int ho = out_size(h, win), wo = out_size(w, win);
    size_t ny = (size_t)nc * ho * wo;
    Pool q = {nc, h, w, win, g_new(float, nx), randu(r, ny, -1, 1), g_new(float, ny),
              g_new(int32_t, ny)};
    for (size_t i = 0; i < nx; i++) /* distinct values 0.1 apart: no ties within 2h */
      q.x[i] = 0.1f * (float)((i * 37) % nx) - 5.0f;
    maxpool_loss(&q);
    for (int pl = 0; pl < nc; pl++) /* forward against the naive maximum */
      for (int oy = 0; oy < ho; oy++)
        for (int ox = 0; ox < wo; ox++) {
          float best = -INFINITY;
          for (int iy = oy * win.s - win.p; iy < oy * win.s - win.p + win.k; iy++)
            for (int ix = ox * win.s - win.p; ix < ox * win.s - win.p + win.k; ix++)
              if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                best = fmaxf(best, q.x[(pl * h + iy) * w + ix]);
          g_assert_cmpfloat(q.y[(pl * ho + oy) * wo + ox], ==, best);
        }
    g_autofree float *grad = g_new(float, nx);
    g_assert_cmpint(K->maxpool_bwd(NULL, grad, q.wgt, q.argmax, nc, h, w, win.k, win.s, win.p,
                                   ST_KDT_F32), ==, 0);
    check_fd("maxpool", maxpool_loss, &q, q.x, nx, grad);
    /* average: naive forward, backward as the adjoint */
    g_autofree float *avg = g_new(float, ny), *dx = g_new(float, nx);
    g_assert_cmpint(K->avgpool_fwd(NULL, avg, q.x, nc, h, w, win.k, win.s, win.p, ST_KDT_F32), ==,
                    0);
    for (int pl = 0; pl < nc; pl++)
      for (int oy = 0; oy < ho; oy++)
        for (int ox = 0; ox < wo; ox++) {
          double s = 0;
          for (int iy = oy * win.s - win.p; iy < oy * win.s - win.p + win.k; iy++)
            for (int ix = ox * win.s - win.p; ix < ox * win.s - win.p + win.k; ix++)
              if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                s += q.x[(pl * h + iy) * w + ix];
          g_assert_cmpfloat_with_epsilon(avg[(pl * ho + oy) * wo + ox], s / (win.k * win.k), 1e-5);
        }
    g_assert_cmpint(K->avgpool_bwd(NULL, dx, q.wgt, nc, h, w, win.k, win.s, win.p, ST_KDT_F32), ==,
                    0);
    double lhs = dot(q.wgt, avg, ny), rhs = dot(q.x, dx, nx);
    g_assert_cmpfloat_with_epsilon(lhs, rhs, 1e-5 * (1 + fabs(lhs)));
    g_free(q.x);
    g_free(q.wgt);
    g_free(q.y);
    g_free(q.argmax);
  }
}

/* Adaptive average pooling: windows [floor(i h / o), ceil((i + 1) h / o)),
 * down (7 -> 3, 8 -> 1) and up (5 -> 7); backward as the adjoint. */
static void
test_adaptive_pool(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(11);
  const int cases[][4] = {{7, 6, 3, 2}, {8, 8, 1, 1}, {5, 4, 7, 7}};
  for (size_t t = 0; t < G_N_ELEMENTS(cases); t++) {
    int h = cases[t][0], w = cases[t][1], oh = cases[t][2], ow = cases[t][3], nc = 3;
    size_t nx = (size_t)nc * h * w, ny = (size_t)nc * oh * ow;
    g_autofree float *x = randu(r, nx, -1, 1), *y = g_new(float, ny), *wgt = randu(r, ny, -1, 1);
    g_autofree float *dx = g_new(float, nx);
    g_assert_cmpint(K->adaptive_avgpool_fwd(NULL, y, x, nc, h, w, oh, ow, ST_KDT_F32), ==, 0);
    for (int pl = 0; pl < nc; pl++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++) {
          int y0 = i * h / oh, y1 = ((i + 1) * h + oh - 1) / oh;
          int x0 = j * w / ow, x1 = ((j + 1) * w + ow - 1) / ow;
          double s = 0;
          for (int iy = y0; iy < y1; iy++)
            for (int ix = x0; ix < x1; ix++)
              s += x[(pl * h + iy) * w + ix];
          g_assert_cmpfloat_with_epsilon(y[(pl * oh + i) * ow + j], s / ((y1 - y0) * (x1 - x0)),
                                         1e-5);
        }
    g_assert_cmpint(K->adaptive_avgpool_bwd(NULL, dx, wgt, nc, h, w, oh, ow, ST_KDT_F32), ==, 0);
    double lhs = dot(wgt, y, ny), rhs = dot(x, dx, nx);
    g_assert_cmpfloat_with_epsilon(lhs, rhs, 1e-5 * (1 + fabs(lhs)));
  }
}

/* ---- optimizers and sparse states ------------------------------------------ */

/* Three steps of each optimizer against its formula in double, gradients and
 * parameters in bf16 (the mixed-precision case). */
static void
test_optimizers(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(12);
  const size_t n = 50;
  g_autofree float *w0 = randu(r, n, -1, 1), *master = g_memdup2(w0, n * 4);
  g_autofree float *m = g_new0(float, n), *v = g_new0(float, n), *mom = g_new0(float, n);
  g_autofree uint16_t *param = g_new(uint16_t, n);
  g_autofree double *wd = g_new(double, n), *md = g_new0(double, n), *vd = g_new0(double, n);
  for (size_t i = 0; i < n; i++)
    wd[i] = w0[i];
  for (int t = 1; t <= 3; t++) {
    g_autofree float *g = randu(r, n, -1, 1);
    round_bf16(g, n);
    g_autofree void *gb = to_dt(g, n, ST_KDT_BF16);
    g_assert_cmpint(K->adamw(NULL, master, m, v, gb, ST_KDT_BF16, param, ST_KDT_BF16, n, 1e-2f,
                             0.9f, 0.999f, 1e-8f, 0.1f, t, 0.5f), ==, 0);
    for (size_t i = 0; i < n; i++) {
      double gi = 0.5 * g[i];
      md[i] = 0.9 * md[i] + 0.1 * gi;
      vd[i] = 0.999 * vd[i] + 0.001 * gi * gi;
      double mh = md[i] / (1 - pow(0.9, t)), vh = vd[i] / (1 - pow(0.999, t));
      wd[i] -= 1e-2 * (mh / (sqrt(vh) + 1e-8) + 0.1 * wd[i]);
    }
  }
  for (size_t i = 0; i < n; i++) {
    g_assert_cmpfloat_with_epsilon(master[i], wd[i], 1e-5);
    g_assert_cmpfloat(st_bf16_to_f32(param[i]), ==, st_bf16_to_f32(st_f32_to_bf16(master[i])));
    wd[i] = master[i] = w0[i];
    md[i] = 0;
  }
  for (int t = 1; t <= 3; t++) { /* SGD, momentum 0.9, weight decay 0.01 */
    g_autofree float *g = randu(r, n, -1, 1);
    g_assert_cmpint(K->sgd(NULL, master, mom, g, ST_KDT_F32, NULL, ST_KDT_F32, n, 0.1f, 0.9f,
                           0.01f, 2.0f), ==, 0);
    for (size_t i = 0; i < n; i++) {
      md[i] = 0.9 * md[i] + 2.0 * g[i] + 0.01 * wd[i];
      wd[i] -= 0.1 * md[i];
    }
  }
  for (size_t i = 0; i < n; i++)
    g_assert_cmpfloat_with_epsilon(master[i], wd[i], 1e-5);
  g_assert_cmpint(K->sgd(NULL, master, NULL, w0, ST_KDT_F32, NULL, ST_KDT_F32, n, 0.1f, 0.9f, 0, 1),
                  ==, ST_K_EINVAL);
  g_assert_cmpint(K->adamw(NULL, master, m, v, w0, ST_KDT_F32, NULL, ST_KDT_F32, n, 1, 0.9f, 0.9f,
                           1e-8f, 0, 0, 1), ==, ST_K_EINVAL);
}

static void
test_sparse(void)
{
  float dense[8] = {0, 1.5f, 0, 0, -2, 0, 3, 0}, values[4];
  int32_t index[4] = {1, 4, 6, -1};
  uint16_t vb[4];
  g_assert_cmpint(K->compress(NULL, values, ST_KDT_F32, dense, ST_KDT_F32, index, 3), ==, 0);
  g_assert_cmpfloat(values[2], ==, 3.0f);
  g_assert_cmpint(K->compress(NULL, vb, ST_KDT_BF16, dense, ST_KDT_F32, index, 4), ==, 0);
  g_assert_cmpfloat(st_bf16_to_f32(vb[1]), ==, -2.0f);
  float back[8] = {9, 9, 9, 9, 9, 9, 9, 9};
  g_assert_cmpint(K->expand(NULL, back, ST_KDT_F32, values, ST_KDT_F32, index, 4), ==, 0);
  g_assert_cmpfloat(back[0], ==, 9.0f); /* untouched */
  g_assert_cmpfloat(back[1], ==, 1.5f);
  g_assert_cmpfloat(back[6], ==, 3.0f);
  g_assert_cmpint(K->expand(NULL, back, ST_KDT_F32, NULL, ST_KDT_F32, index, 4), ==, ST_K_EINVAL);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  K = st_kernels_host();
  g_test_add_func("/kernels/host/memory", test_memory);
  g_test_add_func("/kernels/host/elementwise", test_elementwise);
  g_test_add_func("/kernels/host/gemm", test_gemm);
  g_test_add_func("/kernels/host/bias", test_bias);
  g_test_add_func("/kernels/host/activations", test_activations);
  g_test_add_func("/kernels/host/dropout", test_dropout);
  g_test_add_func("/kernels/host/layernorm", test_layernorm);
  g_test_add_func("/kernels/host/batchnorm", test_batchnorm);
  g_test_add_func("/kernels/host/softmax", test_softmax);
  g_test_add_func("/kernels/host/softmax-ce", test_softmax_ce);
  g_test_add_func("/kernels/host/embeddings", test_embeddings);
  g_test_add_func("/kernels/host/permute4", test_permute4);
  g_test_add_func("/kernels/host/im2col", test_im2col);
  g_test_add_func("/kernels/host/pooling", test_pooling);
  g_test_add_func("/kernels/host/adaptive-pool", test_adaptive_pool);
  g_test_add_func("/kernels/host/optimizers", test_optimizers);
  g_test_add_func("/kernels/host/sparse", test_sparse);
  return g_test_run();
}
