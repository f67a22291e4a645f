/* reshape.c: the 4-D permutation that moves attention heads in and out of
 * the batch dimension ([B, T, 3H, hd] -> [3H, B, T, hd]) and tokens out of
 * images ([B, C, HW, 1] -> [B, HW, C, 1]). A plain copy, element by element. */
#include "kernels/ref/ref.h"

int
st_ref_permute4(void *stream, void *out, const void *in, const int d[4], const int perm[4],
                StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || d == NULL || perm == NULL)
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
  int od[4];    /* out's dims */
  size_t s[4];  /* in's stride along each of out's dims */
  for (int i = 0; i < 4; i++) {
    od[i] = d[perm[i]];
    s[i] = in_stride[perm[i]];
  }
  size_t o = 0;
  for (int a = 0; a < od[0]; a++)
    for (int b = 0; b < od[1]; b++)
      for (int c = 0; c < od[2]; c++)
        for (int e = 0; e < od[3]; e++)
          st_ref_st(out, dt, o++, st_ref_ld(in, dt, a * s[0] + b * s[1] + c * s[2] + e * s[3]));
  return 0;
}
