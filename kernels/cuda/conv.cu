/* conv.cu: im2col / col2im and the poolings on NCHW (kernels/ref/conv.c).
 * One thread per output element; the backward passes are gathers (each
 * input element sums the windows that contain it, through kmath.h's window
 * ranges), in the reference's order, without atomics. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

/* Output size of a window, or -1 when the arguments are invalid. */
static int
window_out(int size, int k, int s, int p)
{
  if (size < 0 || k < 1 || s < 1 || p < 0 || size + 2 * p < k)
    return -1;
  return (size + 2 * p - k) / s + 1;
}

typedef struct {
  int h, w, k, s, p, ho, wo;
} Window;

__global__ void
im2col_kernel(void *cols, const void *in, Window g, size_t total, StKDtype dt)
{
  ST_CU_FOR(i, total)
  {
    size_t plane = (size_t)g.ho * g.wo;
    size_t row = i / plane, at = i % plane; /* row = (ch, ki, kj) */
    int oy = (int)(at / g.wo), ox = (int)(at % g.wo);
    int kj = (int)(row % g.k), ki = (int)((row / g.k) % g.k);
    size_t ch = row / ((size_t)g.k * g.k);
    int iy = oy * g.s - g.p + ki, ix = ox * g.s - g.p + kj;
    float v = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w
                ? st_cu_ld(in, dt, (ch * g.h + iy) * g.w + ix)
                : 0.0f;
    st_cu_st(cols, dt, i, v);
  }
}

__global__ void
col2im_kernel(void *din, const void *cols, Window g, size_t total, StKDtype dt)
{
  ST_CU_FOR(idx, total)
  {
    int ix = (int)(idx % g.w), iy = (int)((idx / g.w) % g.h);
    size_t ch = idx / ((size_t)g.h * g.w);
    float sum = 0.0f;
    for (int oy = st_k_window_first(iy, g.k, g.s, g.p); oy <= st_k_window_last(iy, g.s, g.p, g.ho);
         oy++)
      for (int ox = st_k_window_first(ix, g.k, g.s, g.p);
           ox <= st_k_window_last(ix, g.s, g.p, g.wo); ox++) {
        int ki = iy - (oy * g.s - g.p), kj = ix - (ox * g.s - g.p);
        size_t row = (ch * g.k + ki) * g.k + kj;
        sum += st_cu_ld(cols, dt, row * g.ho * g.wo + (size_t)oy * g.wo + ox);
      }
    st_cu_st(din, dt, idx, st_cu_ld(din, dt, idx) + sum);
  }
}

__global__ void
maxpool_fwd_kernel(void *out, int32_t *argmax, const void *in, Window g, size_t total,
                   StKDtype dt)
{
  ST_CU_FOR(o, total)
  {
    int ox = (int)(o % g.wo), oy = (int)((o / g.wo) % g.ho);
    size_t pl = o / ((size_t)g.ho * g.wo);
    float best = -INFINITY;
    int32_t at = -1; /* padding is -inf: it never wins */
    for (int iy = oy * g.s - g.p; iy < oy * g.s - g.p + g.k; iy++)
      for (int ix = ox * g.s - g.p; ix < ox * g.s - g.p + g.k; ix++) {
        if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w)
          continue;
        float v = st_cu_ld(in, dt, (pl * g.h + iy) * g.w + ix);
        if (at < 0 || v > best) {
          best = v;
          at = iy * g.w + ix;
        }
      }
    st_cu_st(out, dt, o, best);
    argmax[o] = at;
  }
}

__global__ void
maxpool_bwd_kernel(void *din, const void *dout, const int32_t *argmax, Window g, size_t total,
                   StKDtype dt)
{
  ST_CU_FOR(idx, total)
  {
    int ix = (int)(idx % g.w), iy = (int)((idx / g.w) % g.h);
    size_t pl = idx / ((size_t)g.h * g.w);
    float sum = 0.0f;
    for (int oy = st_k_window_first(iy, g.k, g.s, g.p); oy <= st_k_window_last(iy, g.s, g.p, g.ho);
         oy++)
      for (int ox = st_k_window_first(ix, g.k, g.s, g.p);
           ox <= st_k_window_last(ix, g.s, g.p, g.wo); ox++) {
        size_t o = (pl * g.ho + oy) * g.wo + ox;
        if (argmax[o] == iy * g.w + ix)
          sum += st_cu_ld(dout, dt, o);
      }
    st_cu_st(din, dt, idx, sum);
  }
}

__global__ void
avgpool_fwd_kernel(void *out, const void *in, Window g, size_t total, StKDtype dt)
{
  float inv = 1.0f / (float)(g.k * g.k); /* count_include_pad, see conv.c */
  ST_CU_FOR(o, total)
  {
    int ox = (int)(o % g.wo), oy = (int)((o / g.wo) % g.ho);
    size_t pl = o / ((size_t)g.ho * g.wo);
    float sum = 0.0f;
    for (int iy = oy * g.s - g.p; iy < oy * g.s - g.p + g.k; iy++)
      for (int ix = ox * g.s - g.p; ix < ox * g.s - g.p + g.k; ix++)
        if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
          sum += st_cu_ld(in, dt, (pl * g.h + iy) * g.w + ix);
    st_cu_st(out, dt, o, sum * inv);
  }
}

__global__ void
avgpool_bwd_kernel(void *din, const void *dout, Window g, size_t total, StKDtype dt)
{
  float inv = 1.0f / (float)(g.k * g.k);
  ST_CU_FOR(idx, total)
  {
    int ix = (int)(idx % g.w), iy = (int)((idx / g.w) % g.h);
    size_t pl = idx / ((size_t)g.h * g.w);
    float sum = 0.0f;
    for (int oy = st_k_window_first(iy, g.k, g.s, g.p); oy <= st_k_window_last(iy, g.s, g.p, g.ho);
         oy++)
      for (int ox = st_k_window_first(ix, g.k, g.s, g.p);
           ox <= st_k_window_last(ix, g.s, g.p, g.wo); ox++)
        sum += st_cu_ld(dout, dt, (pl * g.ho + oy) * g.wo + ox);
    st_cu_st(din, dt, idx, sum * inv);
  }
}

__global__ void
adaptive_fwd_kernel(void *out, const void *in, int h, int w, int oh, int ow, size_t total,
                    StKDtype dt)
{
  ST_CU_FOR(o, total)
  {
    int j = (int)(o % ow), i = (int)((o / ow) % oh);
    size_t pl = o / ((size_t)oh * ow);
    int y0 = st_k_adaptive_start(i, h, oh), y1 = st_k_adaptive_end(i, h, oh);
    int x0 = st_k_adaptive_start(j, w, ow), x1 = st_k_adaptive_end(j, w, ow);
    float sum = 0.0f;
    for (int iy = y0; iy < y1; iy++)
      for (int ix = x0; ix < x1; ix++)
        sum += st_cu_ld(in, dt, (pl * h + iy) * w + ix);
    st_cu_st(out, dt, o, sum / (float)((y1 - y0) * (x1 - x0)));
  }
}

__global__ void
adaptive_bwd_kernel(void *din, const void *dout, int h, int w, int oh, int ow, size_t total,
                    StKDtype dt)
{
  ST_CU_FOR(idx, total)
  {
    int ix = (int)(idx % w), iy = (int)((idx / w) % h);
    size_t pl = idx / ((size_t)h * w);
    float sum = 0.0f;
    for (int i = st_k_adaptive_first(iy, h, oh); i <= st_k_adaptive_last(iy, h, oh); i++)
      for (int j = st_k_adaptive_first(ix, w, ow); j <= st_k_adaptive_last(ix, w, ow); j++) {
        int area = (st_k_adaptive_end(i, h, oh) - st_k_adaptive_start(i, h, oh)) *
                   (st_k_adaptive_end(j, w, ow) - st_k_adaptive_start(j, w, ow));
        sum += st_cu_ld(dout, dt, (pl * oh + i) * ow + j) / (float)area;
      }
    st_cu_st(din, dt, idx, sum);
  }
}

/* The shared checks of the windowed kernels; fills g. 1 when done (rc says how). */
static int
window_check(StKDtype dt, int planes, int h, int w, int k, int s, int p, const void *a,
             const void *b, const void *c, Window *g, int *rc)
{
  *g = Window{h, w, k, s, p, window_out(h, k, s, p), window_out(w, k, s, p)};
  *rc = 0;
  if (!st_cu_dt_ok(dt) || planes < 0 || g->ho < 0 || g->wo < 0)
    *rc = ST_K_EINVAL;
  else if (planes == 0 || h == 0 || w == 0)
    return 1;
  else if (a == NULL || b == NULL || c == NULL)
    *rc = ST_K_EINVAL;
  return *rc != 0;
}

int
st_cu_im2col(void *stream, void *cols, const void *in, int c, int h, int w, int k, int s, int p,
             StKDtype dt)
{
  Window g;
  int rc;
  if (window_check(dt, c, h, w, k, s, p, cols, in, in, &g, &rc))
    return rc;
  size_t total = (size_t)c * k * k * g.ho * g.wo;
  im2col_kernel<<<st_cu_grid(total), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(cols, in, g,
                                                                               total, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_col2im(void *stream, void *din, const void *cols, int c, int h, int w, int k, int s, int p,
             StKDtype dt)
{
  Window g;
  int rc;
  if (window_check(dt, c, h, w, k, s, p, din, cols, cols, &g, &rc))
    return rc;
  size_t total = (size_t)c * h * w;
  col2im_kernel<<<st_cu_grid(total), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(din, cols, g,
                                                                               total, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_maxpool_fwd(void *stream, void *out, int32_t *argmax, const void *in, int nc, int h, int w,
                  int k, int s, int p, StKDtype dt)
{
  Window g;
  int rc;
  if (window_check(dt, nc, h, w, k, s, p, out, argmax, in, &g, &rc))
    return rc;
  size_t total = (size_t)nc * g.ho * g.wo;
  maxpool_fwd_kernel<<<st_cu_grid(total), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    out, argmax, in, g, total, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_maxpool_bwd(void *stream, void *din, const void *dout, const int32_t *argmax, int nc,
                  int h, int w, int k, int s, int p, StKDtype dt)
{
  Window g;
  int rc;
  if (window_check(dt, nc, h, w, k, s, p, din, dout, argmax, &g, &rc))
    return rc;
  size_t total = (size_t)nc * h * w;
  maxpool_bwd_kernel<<<st_cu_grid(total), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    din, dout, argmax, g, total, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_avgpool_fwd(void *stream, void *out, const void *in, int nc, int h, int w, int k, int s,
                  int p, StKDtype dt)
{
  Window g;
  int rc;
  if (window_check(dt, nc, h, w, k, s, p, out, in, in, &g, &rc))
    return rc;
  size_t total = (size_t)nc * g.ho * g.wo;
  avgpool_fwd_kernel<<<st_cu_grid(total), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(out, in, g,
                                                                                    total, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_avgpool_bwd(void *stream, void *din, const void *dout, int nc, int h, int w, int k, int s,
                  int p, StKDtype dt)
{
  Window g;
  int rc;
  if (window_check(dt, nc, h, w, k, s, p, din, dout, dout, &g, &rc))
    return rc;
  size_t total = (size_t)nc * h * w;
  avgpool_bwd_kernel<<<st_cu_grid(total), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(din, dout, g,
                                                                                    total, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_adaptive_avgpool_fwd(void *stream, void *out, const void *in, int nc, int h, int w, int oh,
                           int ow, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || nc < 0 || h < 1 || w < 1 || oh < 1 || ow < 1)
    return ST_K_EINVAL;
  if (nc == 0)
    return 0;
  if (out == NULL || in == NULL)
    return ST_K_EINVAL;
  size_t total = (size_t)nc * oh * ow;
  adaptive_fwd_kernel<<<st_cu_grid(total), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    out, in, h, w, oh, ow, total, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_adaptive_avgpool_bwd(void *stream, void *din, const void *dout, int nc, int h, int w,
                           int oh, int ow, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || nc < 0 || h < 1 || w < 1 || oh < 1 || ow < 1)
    return ST_K_EINVAL;
  if (nc == 0)
    return 0;
  if (din == NULL || dout == NULL)
    return ST_K_EINVAL;
  size_t total = (size_t)nc * h * w;
  adaptive_bwd_kernel<<<st_cu_grid(total), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    din, dout, h, w, oh, ow, total, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
