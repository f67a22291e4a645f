/* reshape.cu: the 4-D permutation (kernels/ref/reshape.c): one thread per
 * output element, which reads its source through the input's strides. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

typedef struct {
  int od[4];      /* out's dims */
  size_t s[4];    /* in's stride along each of out's dims */
} Permutation;

__global__ void
permute4_kernel(void *out, const void *in, Permutation p, size_t total, StKDtype dt)
{
  ST_CU_FOR(o, total)
  {
    size_t rest = o, src = 0;
    for (int i = 3; i >= 0; i--) {
      src += (rest % p.od[i]) * p.s[i];
      rest /= p.od[i];
    }
    st_cu_st(out, dt, o, st_cu_ld(in, dt, src));
  }
}

int
st_cu_permute4(void *stream, void *out, const void *in, const int d[4], const int perm[4],
               StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || d == NULL || perm == NULL)
    return ST_K_EINVAL;
  int seen = 0;
  for (int i = 0; i < 4; i++) {
    if (d[i] < 0 || perm[i] < 0 || perm[i] > 3 || (seen & (1 << perm[i])))
      return ST_K_EINVAL;
    seen |= 1 << perm[i];
  }
  size_t total = (size_t)d[0] * d[1] * d[2] * d[3];
  if (total == 0)
    return 0;
  if (out == NULL || in == NULL || out == in)
    return ST_K_EINVAL;
  size_t in_stride[4] = {(size_t)d[1] * d[2] * d[3], (size_t)d[2] * d[3], (size_t)d[3], 1};
  Permutation p;
  for (int i = 0; i < 4; i++) {
    p.od[i] = d[perm[i]];
    p.s[i] = in_stride[perm[i]];
  }
  permute4_kernel<<<st_cu_grid(total), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(out, in, p,
                                                                                 total, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
