/* gemm.c: the matrix product and the biases that go with it.
 *
 * The product packs op(A) [m, k] and op(B) [k, n] into fp32 row-major copies
 * (which also widens bf16), then runs an i-p-j loop over blocks of NB
 * columns of C: the inner loop is a contiguous axpy the compiler vectorizes,
 * and a block of op(B) (k x NB floats) stays in cache across the rows of A.
 * Correct first, not tuned: the host backend runs small models. A shared
 * operand (stride 0) is packed once for the whole batch.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/ref.h"

#define NB 256 /* columns of C per block */

/* dst [rows, cols] fp32 = op(src), src stored [rows, cols] or, transposed, [cols, rows]. */
static void
pack(float *dst, const void *src, StKDtype dt, int rows, int cols, int trans)
{
  size_t total = (size_t)rows * (size_t)cols;
  if (!trans) {
    if (dt == ST_KDT_F32)
      memcpy(dst, src, total * sizeof(float));
    else
      for (size_t i = 0; i < total; i++)
        dst[i] = st_ref_ld(src, dt, i);
    return;
  }
  for (int c = 0; c < cols; c++) /* reads src row c contiguously */
    for (int r = 0; r < rows; r++)
      dst[(size_t)r * cols + c] = st_ref_ld(src, dt, (size_t)c * rows + r);
}

/* C [m, n] (stored in dt) = alpha * Ap Bp + beta * C, Ap [m, k], Bp [k, n] fp32. */
static void
gemm_one(int m, int n, int k, float alpha, const float *ap, const float *bp, float beta, void *c,
         StKDtype dt)
{
  float acc[NB];
  for (int jb = 0; jb < n; jb += NB) {
    int nb = n - jb < NB ? n - jb : NB;
    for (int i = 0; i < m; i++) {
      memset(acc, 0, sizeof(float) * (size_t)nb);
      const float *arow = ap + (size_t)i * k;
      for (int p = 0; p < k; p++) {
        float av = arow[p];
        const float *brow = bp + (size_t)p * n + jb;
        for (int j = 0; j < nb; j++)
          acc[j] += av * brow[j];
      }
      for (int j = 0; j < nb; j++) {
        size_t idx = (size_t)i * n + jb + j;
        float v = alpha * acc[j];
        if (beta != 0.0f) /* beta 0: C is not read, it may be garbage */
          v += beta * st_ref_ld(c, dt, idx);
        st_ref_st(c, dt, idx, v);
      }
    }
  }
}

int
st_ref_gemm(void *stream, int ta, int tb, int m, int n, int k, float alpha, const void *a,
            const void *b, float beta, void *c, StKDtype dt, int batch, int64_t stride_a,
            int64_t stride_b, int64_t stride_c)
{
  if (!st_ref_dt_ok(dt) || m < 0 || n < 0 || k < 0 || batch < 0 || stride_a < 0 ||
      stride_b < 0 || stride_c < 0)
    return ST_K_EINVAL;
  if (m == 0 || n == 0 || batch == 0)
    return 0;
  if (c == NULL || (k > 0 && (a == NULL || b == NULL)))
    return ST_K_EINVAL;
  size_t es = st_kdt_size(dt);
  float *ap = NULL, *bp = NULL;
  if (k > 0) {
    ap = malloc(sizeof(float) * (size_t)m * (size_t)k);
    bp = malloc(sizeof(float) * (size_t)k * (size_t)n);
    if (ap == NULL || bp == NULL) {
      free(ap);
      free(bp);
      return ST_K_ENOMEM;
    }
  }
  const char *packed_a = NULL, *packed_b = NULL; /* what ap / bp hold now */
  for (int bi = 0; bi < batch; bi++) {
    char *cb = (char *)c + (size_t)bi * (size_t)stride_c * es;
    if (k == 0) { /* an empty sum: C = beta C */
      for (size_t i = 0; i < (size_t)m * (size_t)n; i++)
        st_ref_st(cb, dt, i, beta != 0.0f ? beta * st_ref_ld(cb, dt, i) : 0.0f);
      continue;
    }
    const char *ab = (const char *)a + (size_t)bi * (size_t)stride_a * es;
    const char *bb = (const char *)b + (size_t)bi * (size_t)stride_b * es;
    if (ab != packed_a)
      pack(ap, ab, dt, m, k, ta);
    if (bb != packed_b)
      pack(bp, bb, dt, k, n, tb);
    packed_a = ab;
    packed_b = bb;
    gemm_one(m, n, k, alpha, ap, bp, beta, cb, dt);
  }
  free(ap);
  free(bp);
  return 0;
}

int
st_ref_bias_add(void *stream, void *out, const void *bias, int rows, int cols, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (out == NULL || bias == NULL)
    return ST_K_EINVAL;
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < cols; j++) {
      size_t idx = (size_t)r * cols + j;
      st_ref_st(out, dt, idx, st_ref_ld(out, dt, idx) + st_ref_ld(bias, dt, j));
    }
  return 0;
}

int
st_ref_bias_grad(void *stream, void *dbias, const void *dout, int rows, int cols, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (dbias == NULL || dout == NULL)
    return ST_K_EINVAL;
  for (int j = 0; j < cols; j++) {
    float sum = 0.0f; /* the whole column in fp32, then one rounding into dbias */
    for (int r = 0; r < rows; r++)
      sum += st_ref_ld(dout, dt, (size_t)r * cols + j);
    st_ref_st(dbias, dt, j, st_ref_ld(dbias, dt, j) + sum);
  }
  return 0;
}

int
st_ref_bias_add_chw(void *stream, void *out, const void *bias, int n, int c, int hw,
                    StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || n < 0 || c < 0 || hw < 0)
    return ST_K_EINVAL;
  if (n == 0 || c == 0 || hw == 0)
    return 0;
  if (out == NULL || bias == NULL)
    return ST_K_EINVAL;
  for (int s = 0; s < n; s++)
    for (int ch = 0; ch < c; ch++) {
      float bv = st_ref_ld(bias, dt, ch);
      size_t base = ((size_t)s * c + ch) * hw;
      for (int i = 0; i < hw; i++)
        st_ref_st(out, dt, base + i, st_ref_ld(out, dt, base + i) + bv);
    }
  return 0;
}

int
st_ref_bias_grad_chw(void *stream, void *dbias, const void *dout, int n, int c, int hw,
                     StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || n < 0 || c < 0 || hw < 0)
    return ST_K_EINVAL;
  if (n == 0 || c == 0 || hw == 0)
    return 0;
  if (dbias == NULL || dout == NULL)
    return ST_K_EINVAL;
  for (int ch = 0; ch < c; ch++) {
    float sum = 0.0f;
    for (int s = 0; s < n; s++) {
      size_t base = ((size_t)s * c + ch) * hw;
      for (int i = 0; i < hw; i++)
        sum += st_ref_ld(dout, dt, base + i);
    }
    st_ref_st(dbias, dt, ch, st_ref_ld(dbias, dt, ch) + sum);
  }
  return 0;
}
