/* kmath.h: the scalar formulas that the host references (kernels/ref/) and
 * the CUDA kernels (kernels/cuda/) share, so both compute the same thing by
 * construction: GELU and its derivative, the dropout mask, the norms' eps,
 * the adaptive pooling windows. Plain C; under nvcc every function is also a
 * device function. Private to kernels/.
 */
#ifndef STAGGER_KMATH_H
#define STAGGER_KMATH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define ST_KFN static inline __host__ __device__
#else
#define ST_KFN static inline
#endif

/* Under the square root of both norms (PyTorch's default). */
#define ST_K_NORM_EPS 1e-5f

/* GELU, tanh approximation (Hendrycks and Gimpel 2016; GPT-2's "gelu_new"):
 * 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3). */
#define ST_K_GELU_C 0.7978845608028654f /* sqrt(2 / pi) */

ST_KFN float
st_k_gelu(float x)
{
  float u = ST_K_GELU_C * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

/* d gelu / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx, du/dx = c (1 + 3 * 0.044715 x^2). */
ST_KFN float
st_k_gelu_grad(float x)
{
  float u = ST_K_GELU_C * (x + 0.044715f * x * x * x);
  float t = tanhf(u);
  float du = ST_K_GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

/* SiLU (swish) x sigmoid(x), the gate of SwiGLU, and its derivative
 * s (1 + x (1 - s)) with s = sigmoid(x). */
ST_KFN float
st_k_silu(float x)
{
  return x / (1.0f + expf(-x));
}

ST_KFN float
st_k_silu_grad(float x)
{
  float s = 1.0f / (1.0f + expf(-x));
  return s * (1.0f + x * (1.0f - s));
}

/* The gate activation of a gated linear unit: 0 SiLU, 1 GELU. */
ST_KFN float
st_k_glu_act(float x, int act)
{
  return act == 0 ? st_k_silu(x) : st_k_gelu(x);
}

ST_KFN float
st_k_glu_act_grad(float x, int act)
{
  return act == 0 ? st_k_silu_grad(x) : st_k_gelu_grad(x);
}

/* Rotary position embedding: the angle of pair i (of rot / 2) at position
 * pos, pos theta^(-2 i / rot) (Su et al. 2021), in double so that host and
 * device agree at long positions; its cosine and sine in fp32. */
ST_KFN void
st_k_rope_angle(int pos, int i, int rot, float theta, float *c, float *s)
{
  double a = (double)pos * pow((double)theta, -2.0 * (double)i / (double)rot);
  *c = (float)cos(a);
  *s = (float)sin(a);
}

/* Whether query i sees key j: causal (j <= i), and with a sliding window
 * w > 0 also j > i - w. */
ST_KFN int
st_k_attn_sees(int i, int j, int causal, int window)
{
  if (causal && j > i)
    return 0;
  return window <= 0 || j > i - window;
}

/* splitmix64's finalizer: a counter-based generator, so element i's draw
 * depends on (seed, i) only, whatever the thread layout. */
ST_KFN uint64_t
st_k_mix64(uint64_t z)
{
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 24 bits, from (seed, i). */
ST_KFN float
st_k_uniform(uint64_t seed, uint64_t i)
{
  uint64_t z = st_k_mix64(seed + 0x9e3779b97f4a7c15ull * (i + 1));
  return (float)(z >> 40) * (1.0f / 16777216.0f);
}

/* Dropout keeps element i with probability 1 - p. */
ST_KFN int
st_k_dropout_keep(uint64_t seed, uint64_t i, float p)
{
  return st_k_uniform(seed, i) >= p;
}

/* Adaptive pooling window of output index i of `out` over `in`:
 * [floor(i in / out), ceil((i + 1) in / out)). */
ST_KFN int
st_k_adaptive_start(int i, int in, int out)
{
  return (int)(((int64_t)i * in) / out);
}

ST_KFN int
st_k_adaptive_end(int i, int in, int out)
{
  return (int)((((int64_t)i + 1) * in + out - 1) / out);
}

/* The output indices whose adaptive windows contain input index x:
 * [floor(x out / in), floor(((x + 1) out - 1) / in)], clipped to the output. */
ST_KFN int
st_k_adaptive_first(int x, int in, int out)
{
  return (int)(((int64_t)x * out) / in);
}

ST_KFN int
st_k_adaptive_last(int x, int in, int out)
{
  int last = (int)((((int64_t)x + 1) * out - 1) / in);
  return last < out - 1 ? last : out - 1;
}

/* The sliding windows (size k, stride s, padding p) that contain input index
 * x: output indices [first, last], clipped to [0, out); empty when first > last. */
ST_KFN int
st_k_window_first(int x, int k, int s, int p)
{
  int lo = x + p - k + 1; /* o s - p + k - 1 >= x */
  return lo <= 0 ? 0 : (lo + s - 1) / s;
}

ST_KFN int
st_k_window_last(int x, int s, int p, int out)
{
  int last = (x + p) / s; /* o s - p <= x */
  return last < out - 1 ? last : out - 1;
}

#endif /* STAGGER_KMATH_H */
