/* activations.c: ReLU, GELU (tanh form, kmath.h) and dropout. Backward
 * passes read what the layer keeps: ReLU its output, GELU its input, dropout
 * its one-byte mask. */
#include "kernels/ref/kmath.h"
#include "kernels/ref/ref.h"

/* The checks every element-wise kernel shares; `a`, `b`, `c` may be NULL
 * only when there is no work. */
static int
check(StKDtype dt, size_t n, const void *a, const void *b, const void *c, int *done)
{
  *done = 1;
  if (!st_ref_dt_ok(dt))
    return ST_K_EINVAL;
  if (n == 0)
    return 0;
  if (a == NULL || b == NULL || c == NULL)
    return ST_K_EINVAL;
  *done = 0;
  return 0;
}

int
st_ref_relu_fwd(void *stream, void *out, const void *in, StKDtype dt, size_t n)
{
  int done, rc = check(dt, n, out, in, in, &done);
  if (done)
    return rc;
  for (size_t i = 0; i < n; i++) {
    float x = st_ref_ld(in, dt, i);
    st_ref_st(out, dt, i, x > 0.0f ? x : 0.0f);
  }
  return 0;
}

int
st_ref_relu_bwd(void *stream, void *din, const void *dout, const void *out, StKDtype dt,
                size_t n)
{
  int done, rc = check(dt, n, din, dout, out, &done);
  if (done)
    return rc;
  for (size_t i = 0; i < n; i++)
    st_ref_st(din, dt, i, st_ref_ld(out, dt, i) > 0.0f ? st_ref_ld(dout, dt, i) : 0.0f);
  return 0;
}

int
st_ref_gelu_fwd(void *stream, void *out, const void *in, StKDtype dt, size_t n)
{
  int done, rc = check(dt, n, out, in, in, &done);
  if (done)
    return rc;
  for (size_t i = 0; i < n; i++)
    st_ref_st(out, dt, i, st_k_gelu(st_ref_ld(in, dt, i)));
  return 0;
}

int
st_ref_gelu_bwd(void *stream, void *din, const void *dout, const void *in, StKDtype dt,
                size_t n)
{
  int done, rc = check(dt, n, din, dout, in, &done);
  if (done)
    return rc;
  for (size_t i = 0; i < n; i++)
    st_ref_st(din, dt, i, st_ref_ld(dout, dt, i) * st_k_gelu_grad(st_ref_ld(in, dt, i)));
  return 0;
}

int
st_ref_dropout_fwd(void *stream, void *out, uint8_t *mask, const void *in, float p,
                   uint64_t seed, StKDtype dt, size_t n)
{
  if (!(p >= 0.0f && p < 1.0f))
    return ST_K_EINVAL;
  int done, rc = check(dt, n, out, mask, in, &done);
  if (done)
    return rc;
  float keep_scale = 1.0f / (1.0f - p);
  for (size_t i = 0; i < n; i++) {
    int keep = st_k_dropout_keep(seed, i, p);
    mask[i] = (uint8_t)keep;
    st_ref_st(out, dt, i, keep ? st_ref_ld(in, dt, i) * keep_scale : 0.0f);
  }
  return 0;
}

int
st_ref_dropout_bwd(void *stream, void *din, const void *dout, const uint8_t *mask, float p,
                   StKDtype dt, size_t n)
{
  if (!(p >= 0.0f && p < 1.0f))
    return ST_K_EINVAL;
  int done, rc = check(dt, n, din, dout, mask, &done);
  if (done)
    return rc;
  float keep_scale = 1.0f / (1.0f - p);
  for (size_t i = 0; i < n; i++)
    st_ref_st(din, dt, i, mask[i] ? st_ref_ld(dout, dt, i) * keep_scale : 0.0f);
  return 0;
}
