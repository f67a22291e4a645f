/* llm.c: the element-wise parts of LLM layers: RMSNorm (Zhang and Sennrich
 * 2019), gated linear units (Shazeer 2020: SwiGLU, GeGLU), rotary position
 * embedding (Su et al. 2021), and strided 2-D copies. Formulas in
 * kernels.h; the scalar ones in kmath.h, shared with the CUDA kernels.
 *
 * RMSNorm backward: with xhat = x rstd and y = g xhat,
 *   d/dx = rstd (g dy - xhat mean(g dy xhat)),
 * since rstd depends on x through mean(x^2): d rstd / dx_j = -rstd^3 x_j / n.
 */
#include <math.h>
#include <string.h>

#include "kernels/ref/kmath.h"
#include "kernels/ref/ref.h"

static float
gamma_at(const void *gamma, StKDtype dt, int j)
{
  return gamma != NULL ? st_ref_ld(gamma, dt, (size_t)j) : 1.0f;
}

int
st_ref_rmsnorm_fwd(void *stream, void *out, float *rstd, const void *in, const void *gamma,
                   int rows, int cols, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (out == NULL || rstd == NULL || in == NULL)
    return ST_K_EINVAL;
  for (int r = 0; r < rows; r++) {
    size_t base = (size_t)r * cols;
    float ss = 0.0f;
    for (int j = 0; j < cols; j++) {
      float x = st_ref_ld(in, dt, base + j);
      ss += x * x;
    }
    float rs = 1.0f / sqrtf(ss / (float)cols + ST_K_NORM_EPS);
    rstd[r] = rs;
    for (int j = 0; j < cols; j++)
      st_ref_st(out, dt, base + j, st_ref_ld(in, dt, base + j) * rs * gamma_at(gamma, dt, j));
  }
  return 0;
}

int
st_ref_rmsnorm_bwd(void *stream, void *din, void *dgamma, const void *dout, const void *in,
                   const float *rstd, const void *gamma, int rows, int cols, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || cols < 0)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (dout == NULL || in == NULL || rstd == NULL)
    return ST_K_EINVAL;
  for (int r = 0; r < rows; r++) {
    size_t base = (size_t)r * cols;
    float rs = rstd[r], sum = 0.0f;
    for (int j = 0; j < cols; j++)
      sum += gamma_at(gamma, dt, j) * st_ref_ld(dout, dt, base + j) *
             st_ref_ld(in, dt, base + j) * rs;
    float mean = sum / (float)cols;
    for (int j = 0; j < cols; j++) {
      float xhat = st_ref_ld(in, dt, base + j) * rs, dy = st_ref_ld(dout, dt, base + j);
      if (din != NULL)
        st_ref_st(din, dt, base + j, rs * (gamma_at(gamma, dt, j) * dy - xhat * mean));
      if (dgamma != NULL)
        st_ref_st(dgamma, dt, (size_t)j, st_ref_ld(dgamma, dt, (size_t)j) + dy * xhat);
    }
  }
  return 0;
}

static int
glu_check(const void *a, const void *b, int rows, int f, int act, StKDtype dt, int *done)
{
  *done = 1;
  if (!st_ref_dt_ok(dt) || rows < 0 || f < 0 || (act != 0 && act != 1))
    return ST_K_EINVAL;
  if (rows == 0 || f == 0)
    return 0;
  if (a == NULL || b == NULL)
    return ST_K_EINVAL;
  *done = 0;
  return 0;
}

int
st_ref_glu_fwd(void *stream, void *h, const void *gu, int rows, int f, int act, StKDtype dt)
{
  int done, rc = glu_check(h, gu, rows, f, act, dt, &done);
  if (done)
    return rc;
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < f; j++) {
      size_t g = (size_t)r * 2 * f + j;
      float v = st_k_glu_act(st_ref_ld(gu, dt, g), act) * st_ref_ld(gu, dt, g + f);
      st_ref_st(h, dt, (size_t)r * f + j, v);
    }
  return 0;
}

int
st_ref_glu_bwd(void *stream, void *dgu, const void *dh, const void *gu, int rows, int f,
               int act, StKDtype dt)
{
  int done, rc = glu_check(dgu, gu, rows, f, act, dt, &done);
  if (done)
    return rc;
  if (dh == NULL)
    return ST_K_EINVAL;
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < f; j++) {
      size_t g = (size_t)r * 2 * f + j;
      float x = st_ref_ld(gu, dt, g), u = st_ref_ld(gu, dt, g + f);
      float d = st_ref_ld(dh, dt, (size_t)r * f + j);
      st_ref_st(dgu, dt, g, d * u * st_k_glu_act_grad(x, act));
      st_ref_st(dgu, dt, g + f, d * st_k_glu_act(x, act));
    }
  return 0;
}

int
st_ref_rope(void *stream, void *x, int batch, int tokens, int heads, int ld, int head_dim,
            int rot_dim, float theta, int inverse, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || batch < 0 || tokens < 0 || heads < 0 || head_dim < 0 ||
      rot_dim < 0 || rot_dim > head_dim || rot_dim % 2 != 0 || ld < heads * head_dim ||
      !(theta > 0.0f))
    return ST_K_EINVAL;
  if (batch == 0 || tokens == 0 || heads == 0 || rot_dim == 0)
    return 0;
  if (x == NULL)
    return ST_K_EINVAL;
  int half = rot_dim / 2;
  for (int r = 0; r < batch * tokens; r++) {
    int pos = r % tokens;
    for (int i = 0; i < half; i++) {
      float c, s;
      st_k_rope_angle(pos, i, rot_dim, theta, &c, &s);
      if (inverse)
        s = -s;
      for (int h = 0; h < heads; h++) {
        size_t a = (size_t)r * ld + (size_t)h * head_dim + i, b = a + half;
        float x1 = st_ref_ld(x, dt, a), x2 = st_ref_ld(x, dt, b);
        st_ref_st(x, dt, a, x1 * c - x2 * s);
        st_ref_st(x, dt, b, x2 * c + x1 * s);
      }
    }
  }
  return 0;
}

int
st_ref_copy2d(void *stream, void *dst, int ld_dst, const void *src, int ld_src, int rows,
              int cols, StKDtype dt)
{
  if (!st_ref_dt_ok(dt) || rows < 0 || cols < 0 || ld_dst < cols || ld_src < cols)
    return ST_K_EINVAL;
  if (rows == 0 || cols == 0)
    return 0;
  if (dst == NULL || src == NULL)
    return ST_K_EINVAL;
  size_t es = st_kdt_size(dt);
  for (int r = 0; r < rows; r++)
    memmove((char *)dst + (size_t)r * ld_dst * es, (const char *)src + (size_t)r * ld_src * es,
            (size_t)cols * es);
  return 0;
}
