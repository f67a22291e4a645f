/* test_kernels.c: the host kernel table (kernels/ref/) against naive
 * formulas, and every backward against central finite differences of its
 * forward: memory, elementwise, GEMM and biases, activations, dropout, the
 * optimizers and the sparse states. Normalization, softmax, embeddings,
 * convolution and pooling are in test_kernels_nn.c; the tolerances, and
 * why, in kernel_check.h. */
#include "kernel_check.h"

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
  g_test_add_func("/kernels/host/optimizers", test_optimizers);
  g_test_add_func("/kernels/host/sparse", test_sparse);
  return g_test_run();
}
