/* activations.cu: ReLU, GELU and dropout (kernels/ref/activations.c). GELU
 * and the dropout mask come from kernels/ref/kmath.h, shared with the host:
 * the same (seed, index) gives the same mask on both. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

__global__ void
relu_fwd_kernel(void *out, const void *in, StKDtype dt, size_t n)
{
  ST_CU_FOR(i, n)
  {
    float x = st_cu_ld(in, dt, i);
    st_cu_st(out, dt, i, x > 0.0f ? x : 0.0f);
  }
}

__global__ void
relu_bwd_kernel(void *din, const void *dout, const void *out, StKDtype dt, size_t n)
{
  ST_CU_FOR(i, n) st_cu_st(din, dt, i, st_cu_ld(out, dt, i) > 0.0f ? st_cu_ld(dout, dt, i) : 0.0f);
}

__global__ void
gelu_fwd_kernel(void *out, const void *in, StKDtype dt, size_t n)
{
  ST_CU_FOR(i, n) st_cu_st(out, dt, i, st_k_gelu(st_cu_ld(in, dt, i)));
}

__global__ void
gelu_bwd_kernel(void *din, const void *dout, const void *in, StKDtype dt, size_t n)
{
  ST_CU_FOR(i, n)
  st_cu_st(din, dt, i, st_cu_ld(dout, dt, i) * st_k_gelu_grad(st_cu_ld(in, dt, i)));
}

__global__ void
dropout_fwd_kernel(void *out, uint8_t *mask, const void *in, float p, float keep_scale,
                   uint64_t seed, StKDtype dt, size_t n)
{
  ST_CU_FOR(i, n)
  {
    int keep = st_k_dropout_keep(seed, i, p);
    mask[i] = (uint8_t)keep;
    st_cu_st(out, dt, i, keep ? st_cu_ld(in, dt, i) * keep_scale : 0.0f);
  }
}

__global__ void
dropout_bwd_kernel(void *din, const void *dout, const uint8_t *mask, float keep_scale,
                   StKDtype dt, size_t n)
{
  ST_CU_FOR(i, n) st_cu_st(din, dt, i, mask[i] ? st_cu_ld(dout, dt, i) * keep_scale : 0.0f);
}

/* The checks of activations.c: 1 when the call is done (rc says how). */
static int
check(StKDtype dt, size_t n, const void *a, const void *b, const void *c, int *rc)
{
  *rc = 0;
  if (!st_cu_dt_ok(dt))
    *rc = ST_K_EINVAL;
  else if (n == 0)
    return 1;
  else if (a == NULL || b == NULL || c == NULL)
    *rc = ST_K_EINVAL;
  return *rc != 0;
}

int
st_cu_relu_fwd(void *stream, void *out, const void *in, StKDtype dt, size_t n)
{
  int rc;
  if (check(dt, n, out, in, in, &rc))
    return rc;
  relu_fwd_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(out, in, dt, n);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_relu_bwd(void *stream, void *din, const void *dout, const void *out, StKDtype dt,
               size_t n)
{
  int rc;
  if (check(dt, n, din, dout, out, &rc))
    return rc;
  relu_bwd_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(din, dout, out,
                                                                             dt, n);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_gelu_fwd(void *stream, void *out, const void *in, StKDtype dt, size_t n)
{
  int rc;
  if (check(dt, n, out, in, in, &rc))
    return rc;
  gelu_fwd_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(out, in, dt, n);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_gelu_bwd(void *stream, void *din, const void *dout, const void *in, StKDtype dt,
               size_t n)
{
  int rc;
  if (check(dt, n, din, dout, in, &rc))
    return rc;
  gelu_bwd_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(din, dout, in, dt,
                                                                             n);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_dropout_fwd(void *stream, void *out, uint8_t *mask, const void *in, float p,
                  uint64_t seed, StKDtype dt, size_t n)
{
  int rc;
  if (!(p >= 0.0f && p < 1.0f))
    return ST_K_EINVAL;
  if (check(dt, n, out, mask, in, &rc))
    return rc;
  dropout_fwd_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    out, mask, in, p, 1.0f / (1.0f - p), seed, dt, n);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_dropout_bwd(void *stream, void *din, const void *dout, const uint8_t *mask, float p,
                  StKDtype dt, size_t n)
{
  int rc;
  if (!(p >= 0.0f && p < 1.0f))
    return ST_K_EINVAL;
  if (check(dt, n, din, dout, mask, &rc))
    return rc;
  dropout_bwd_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    din, dout, mask, 1.0f / (1.0f - p), dt, n);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
