/* conv.c: convolution as im2col + gemm (the layer does the gemm), and the
 * poolings, on NCHW. Windows follow PyTorch with ceil_mode off:
 * out = (size + 2 p - k) / s + 1. Backward passes are written as gathers
 * (each input element sums the outputs whose windows contain it, in a fixed
 * order), so the CUDA versions need no atomics and add in the same order. */
#include <math.h>

#include "kernels/ref/kmath.h"
#include "kernels/ref/ref.h"

/* Output size of a window, or -1 when the arguments are invalid. */
static int
window_out(int size, int k, int s, int p)
{
  if (size < 0 || k < 1 || s < 1 || p < 0 || size + 2 * p < k)
    return -1;
  return (size + 2 * p - k) / s + 1;
}

int
st_ref_im2col(void *stream, void *cols, const void *in, int c, int h, int w, int k, int s,
              int p, StKDtype dt)
{
  int ho = window_out(h, k, s, p), wo = window_out(w, k, s, p);
  if (!st_ref_dt_ok(dt) || c < 0 || ho < 0 || wo < 0)
    return ST_K_EINVAL;
  if (c == 0 || h == 0 || w == 0)
    return 0;
  if (cols == NULL || in == NULL)
    return ST_K_EINVAL;
  size_t row = 0; /* (ch, ki, kj) */
  for (int ch = 0; ch < c; ch++)
    for (int ki = 0; ki < k; ki++)
      for (int kj = 0; kj < k; kj++, row++)
        for (int oy = 0; oy < ho; oy++)
          for (int ox = 0; ox < wo; ox++) {
            int iy = oy * s - p + ki, ix = ox * s - p + kj;
            float v = iy >= 0 && iy < h && ix >= 0 && ix < w
                        ? st_ref_ld(in, dt, ((size_t)ch * h + iy) * w + ix)
                        : 0.0f;
            st_ref_st(cols, dt, row * ho * wo + (size_t)oy * wo + ox, v);
          }
  return 0;
}

int
st_ref_col2im(void *stream, void *din, const void *cols, int c, int h, int w, int k, int s,
              int p, StKDtype dt)
{
  int ho = window_out(h, k, s, p), wo = window_out(w, k, s, p);
  if (!st_ref_dt_ok(dt) || c < 0 || ho < 0 || wo < 0)
    return ST_K_EINVAL;
  if (c == 0 || h == 0 || w == 0)
    return 0;
  if (din == NULL || cols == NULL)
    return ST_K_EINVAL;
  for (int ch = 0; ch < c; ch++)
    for (int iy = 0; iy < h; iy++)
      for (int ix = 0; ix < w; ix++) {
        float sum = 0.0f;
        for (int oy = st_k_window_first(iy, k, s, p); oy <= st_k_window_last(iy, s, p, ho); oy++)
          for (int ox = st_k_window_first(ix, k, s, p); ox <= st_k_window_last(ix, s, p, wo);
               ox++) {
            int ki = iy - (oy * s - p), kj = ix - (ox * s - p);
            size_t row = ((size_t)ch * k + ki) * k + kj;
            sum += st_ref_ld(cols, dt, row * ho * wo + (size_t)oy * wo + ox);
          }
        size_t idx = ((size_t)ch * h + iy) * w + ix;
        st_ref_st(din, dt, idx, st_ref_ld(din, dt, idx) + sum);
      }
  return 0;
}

int
st_ref_maxpool_fwd(void *stream, void *out, int32_t *argmax, const void *in, int nc, int h,
                   int w, int k, int s, int p, StKDtype dt)
{
  int ho = window_out(h, k, s, p), wo = window_out(w, k, s, p);
  if (!st_ref_dt_ok(dt) || nc < 0 || ho < 0 || wo < 0)
    return ST_K_EINVAL;
  if (nc == 0 || h == 0 || w == 0)
    return 0;
  if (out == NULL || argmax == NULL || in == NULL)
    return ST_K_EINVAL;
  for (int pl = 0; pl < nc; pl++)
    for (int oy = 0; oy < ho; oy++)
      for (int ox = 0; ox < wo; ox++) {
        float best = -INFINITY;
        int32_t at = -1; /* padding is -inf: it never wins */
        for (int iy = oy * s - p; iy < oy * s - p + k; iy++)
          for (int ix = ox * s - p; ix < ox * s - p + k; ix++) {
            if (iy < 0 || iy >= h || ix < 0 || ix >= w)
              continue;
            float v = st_ref_ld(in, dt, ((size_t)pl * h + iy) * w + ix);
            if (at < 0 || v > best) {
              best = v;
              at = iy * w + ix;
            }
          }
        size_t o = ((size_t)pl * ho + oy) * wo + ox;
        st_ref_st(out, dt, o, best);
        argmax[o] = at;
      }
  return 0;
}

int
st_ref_maxpool_bwd(void *stream, void *din, const void *dout, const int32_t *argmax, int nc,
                   int h, int w, int k, int s, int p, StKDtype dt)
{
  int ho = window_out(h, k, s, p), wo = window_out(w, k, s, p);
  if (!st_ref_dt_ok(dt) || nc < 0 || ho < 0 || wo < 0)
    return ST_K_EINVAL;
  if (nc == 0 || h == 0 || w == 0)
    return 0;
  if (din == NULL || dout == NULL || argmax == NULL)
    return ST_K_EINVAL;
  for (int pl = 0; pl < nc; pl++)
    for (int iy = 0; iy < h; iy++)
      for (int ix = 0; ix < w; ix++) {
        float sum = 0.0f;
        for (int oy = st_k_window_first(iy, k, s, p); oy <= st_k_window_last(iy, s, p, ho); oy++)
          for (int ox = st_k_window_first(ix, k, s, p); ox <= st_k_window_last(ix, s, p, wo);
               ox++) {
            size_t o = ((size_t)pl * ho + oy) * wo + ox;
            if (argmax[o] == iy * w + ix)
              sum += st_ref_ld(dout, dt, o);
          }
        st_ref_st(din, dt, ((size_t)pl * h + iy) * w + ix, sum);
      }
  return 0;
}

int
st_ref_avgpool_fwd(void *stream, void *out, const void *in, int nc, int h, int w, int k, int s,
                   int p, StKDtype dt)
{
  int ho = window_out(h, k, s, p), wo = window_out(w, k, s, p);
  if (!st_ref_dt_ok(dt) || nc < 0 || ho < 0 || wo < 0)
    return ST_K_EINVAL;
  if (nc == 0 || h == 0 || w == 0)
    return 0;
  if (out == NULL || in == NULL)
    return ST_K_EINVAL;
  /* count_include_pad: with ceil_mode off no window passes the padding, so
   * every window divides by k * k */
  float inv = 1.0f / (float)(k * k);
  for (int pl = 0; pl < nc; pl++)
    for (int oy = 0; oy < ho; oy++)
      for (int ox = 0; ox < wo; ox++) {
        float sum = 0.0f;
        for (int iy = oy * s - p; iy < oy * s - p + k; iy++)
          for (int ix = ox * s - p; ix < ox * s - p + k; ix++)
            if (iy >= 0 && iy < h && ix >= 0 && ix < w)
              sum += st_ref_ld(in, dt, ((size_t)pl * h + iy) * w + ix);
        st_ref_st(out, dt, ((size_t)pl * ho + oy) * wo + ox, sum * inv);
      }
  return 0;
}

int
st_ref_avgpool_bwd(void *stream, void *din, const void *dout, int nc, int h, int w, int k,
                   int s, int p, StKDtype dt)
{
  int ho = window_out(h, k, s, p), wo = window_out(w, k, s, p);
  if (!st_ref_dt_ok(dt) || nc < 0 || ho < 0 || wo < 0)
    return ST_K_EINVAL;
  if (nc == 0 || h == 0 || w == 0)
    return 0;
  if (din == NULL || dout == NULL)
    return ST_K_EINVAL;
  float inv = 1.0f / (float)(k * k);
  for (int pl = 0; pl < nc; pl++)
    for (int iy = 0; iy < h; iy++)
      for (int ix = 0; ix < w; ix++) {
        float sum = 0.0f;
        for (int oy = st_k_window_first(iy, k, s, p); oy <= st_k_window_last(iy, s, p, ho); oy++)
          for (int ox = st_k_window_first(ix, k, s, p); ox <= st_k_window_last(ix, s, p, wo);
               ox++)
            sum += st_ref_ld(dout, dt, ((size_t)pl * ho + oy) * wo + ox);
        st_ref_st(din, dt, ((size_t)pl * h + iy) * w + ix, sum * inv);
      }
  return 0;
}

int
st_ref_adaptive_avgpool_fwd(void *stream, void *out, const void *in, int nc, int h, int w,
                            int oh, int ow, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || nc < 0 || h < 1 || w < 1 || oh < 1 || ow < 1)
    return ST_K_EINVAL;
  if (nc == 0)
    return 0;
  if (out == NULL || in == NULL)
    return ST_K_EINVAL;
  for (int pl = 0; pl < nc; pl++)
    for (int i = 0; i < oh; i++)
      for (int j = 0; j < ow; j++) {
        int y0 = st_k_adaptive_start(i, h, oh), y1 = st_k_adaptive_end(i, h, oh);
        int x0 = st_k_adaptive_start(j, w, ow), x1 = st_k_adaptive_end(j, w, ow);
        float sum = 0.0f;
        for (int iy = y0; iy < y1; iy++)
          for (int ix = x0; ix < x1; ix++)
            sum += st_ref_ld(in, dt, ((size_t)pl * h + iy) * w + ix);
        st_ref_st(out, dt, ((size_t)pl * oh + i) * ow + j, sum / (float)((y1 - y0) * (x1 - x0)));
      }
  return 0;
}

int
st_ref_adaptive_avgpool_bwd(void *stream, void *din, const void *dout, int nc, int h, int w,
                            int oh, int ow, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || nc < 0 || h < 1 || w < 1 || oh < 1 || ow < 1)
    return ST_K_EINVAL;
  if (nc == 0)
    return 0;
  if (din == NULL || dout == NULL)
    return ST_K_EINVAL;
  for (int pl = 0; pl < nc; pl++)
    for (int iy = 0; iy < h; iy++)
      for (int ix = 0; ix < w; ix++) {
        float sum = 0.0f;
        for (int i = st_k_adaptive_first(iy, h, oh); i <= st_k_adaptive_last(iy, h, oh); i++)
          for (int j = st_k_adaptive_first(ix, w, ow); j <= st_k_adaptive_last(ix, w, ow); j++) {
            int area = (st_k_adaptive_end(i, h, oh) - st_k_adaptive_start(i, h, oh)) *
                       (st_k_adaptive_end(j, w, ow) - st_k_adaptive_start(j, w, ow));
            sum += st_ref_ld(dout, dt, ((size_t)pl * oh + i) * ow + j) / (float)area;
          }
        st_ref_st(din, dt, ((size_t)pl * h + iy) * w + ix, sum);
      }
  return 0;
}
