/* attention.cu: flash-style attention with grouped-query heads and the
 * split of qkv by head (kernels/ref/attention.c gives the formulas).
 *
 * A warp per row: the forward gives each (sample, head, query) row a warp
 * that walks the keys it sees with an online softmax (Milakov and
 * Gimelshein 2018), each lane holding head_dim / 32 of the query and of
 * the output accumulator in registers: no s x s tensor, memory linear in
 * the tokens. The backward is three kernels: rowdot D = do . o per query
 * row; dQ, a warp per query row over its keys; dK and dV, a warp per key
 * row over the queries of its group that see it. Each recomputes the
 * scores from lse, and every output element is written by one warp: no
 * atomics, deterministic. The simplest version that is right (llm.c's
 * rule: tensor-core tiles are a measured speedup away); head_dim at most
 * 256.
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

#define MAX_PER_LANE (ST_K_MAX_HEAD_DIM / 32)
#define WARPS 4        /* warps per block */

typedef struct {
  int B, T, H, G, k;
  size_t ld;
} Geom;

__device__ __forceinline__ size_t
q_at(const Geom &g, int b, int t, int h)
{
  return ((size_t)b * g.T + t) * g.ld + (size_t)h * g.k;
}

__device__ __forceinline__ size_t
k_at(const Geom &g, int b, int t, int h)
{
  return ((size_t)b * g.T + t) * g.ld + (size_t)(g.H + h / (g.H / g.G)) * g.k;
}

__device__ __forceinline__ size_t
v_at(const Geom &g, int b, int t, int h)
{
  return k_at(g, b, t, h) + (size_t)g.G * g.k;
}

__device__ __forceinline__ size_t
o_at(const Geom &g, int b, int t, int h)
{
  return (((size_t)b * g.T + t) * g.H + h) * g.k;
}

__device__ __forceinline__ size_t
row_at(const Geom &g, int b, int h, int t)
{
  return ((size_t)b * g.H + h) * g.T + t;
}

/* x . y over head_dim, a lane's share of it summed over the warp. */
__device__ __forceinline__ float
warp_dot(const void *x, size_t xo, const void *y, size_t yo, int k, StKDtype dt)
{
  float s = 0.0f;
  for (int c = threadIdx.x & 31; c < k; c += 32)
    s += st_cu_ld(x, dt, xo + c) * st_cu_ld(y, dt, yo + c);
  return st_cu_warp_sum(s);
}

/* The global warp index, and how many rows there are for it. */
__device__ __forceinline__ size_t
warp_id(void)
{
  return ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
}

/* Row w = ((b H + h) T + i) of the query side. */
__device__ __forceinline__ void
split_row(const Geom &g, size_t w, int *b, int *h, int *i)
{
  *i = (int)(w % g.T);
  *h = (int)((w / g.T) % g.H);
  *b = (int)(w / ((size_t)g.T * g.H));
}

__global__ void
flash_fwd_kernel(Geom g, void *o, float *lse, const void *qkv, float scale, int causal,
                 int window, StKDtype dt)
{
  size_t w = warp_id();
  if (w >= (size_t)g.B * g.H * g.T)
    return;
  int b, h, i, lane = threadIdx.x & 31;
  split_row(g, w, &b, &h, &i);
  size_t q = q_at(g, b, i, h);
  float m = -INFINITY, l = 0.0f, acc[MAX_PER_LANE];
  for (int u = 0; u < MAX_PER_LANE; u++)
    acc[u] = 0.0f;
  for (int j = 0; j < g.T; j++) {
    if (!st_k_attn_sees(i, j, causal, window))
      continue;
    float s = scale * warp_dot(qkv, q, qkv, k_at(g, b, j, h), g.k, dt);
    float m2 = fmaxf(m, s), keep = expf(m - m2), p = expf(s - m2);
    l = l * keep + p;
    size_t v = v_at(g, b, j, h);
    for (int u = 0, c = lane; c < g.k; u++, c += 32)
      acc[u] = acc[u] * keep + p * st_cu_ld(qkv, dt, v + c);
    m = m2;
  }
  size_t out = o_at(g, b, i, h);
  for (int u = 0, c = lane; c < g.k; u++, c += 32)
    st_cu_st(o, dt, out + c, l > 0.0f ? acc[u] / l : 0.0f);
  if (lane == 0)
    lse[row_at(g, b, h, i)] = l > 0.0f ? m + logf(l) : -INFINITY;
}

__global__ void
rowdot_kernel(Geom g, float *rowdot, const void *dout, const void *o, StKDtype dt)
{
  size_t w = warp_id();
  if (w >= (size_t)g.B * g.H * g.T)
    return;
  int b, h, i;
  split_row(g, w, &b, &h, &i);
  float d = warp_dot(dout, o_at(g, b, i, h), o, o_at(g, b, i, h), g.k, dt);
  if ((threadIdx.x & 31) == 0)
    rowdot[row_at(g, b, h, i)] = d;
}

__global__ void
flash_dq_kernel(Geom g, void *dqkv, const void *dout, const void *qkv, const float *lse,
                const float *rowdot, float scale, int causal, int window, StKDtype dt)
{
  size_t w = warp_id();
  if (w >= (size_t)g.B * g.H * g.T)
    return;
  int b, h, i, lane = threadIdx.x & 31;
  split_row(g, w, &b, &h, &i);
  size_t q = q_at(g, b, i, h), od = o_at(g, b, i, h);
  float l = lse[row_at(g, b, h, i)], d = rowdot[row_at(g, b, h, i)], acc[MAX_PER_LANE];
  for (int u = 0; u < MAX_PER_LANE; u++)
    acc[u] = 0.0f;
  for (int j = 0; j < g.T; j++) {
    if (!st_k_attn_sees(i, j, causal, window))
      continue;
    size_t kj = k_at(g, b, j, h);
    float p = expf(scale * warp_dot(qkv, q, qkv, kj, g.k, dt) - l);
    float ds = p * (warp_dot(dout, od, qkv, v_at(g, b, j, h), g.k, dt) - d);
    for (int u = 0, c = lane; c < g.k; u++, c += 32)
      acc[u] += ds * st_cu_ld(qkv, dt, kj + c);
  }
  for (int u = 0, c = lane; c < g.k; u++, c += 32)
    st_cu_st(dqkv, dt, q + c, scale * acc[u]);
}

/* A warp per key row (b, kv head, j), over the queries of its group. */
__global__ void
flash_dkv_kernel(Geom g, void *dqkv, const void *dout, const void *qkv, const float *lse,
                 const float *rowdot, float scale, int causal, int window, StKDtype dt)
{
  size_t w = warp_id();
  if (w >= (size_t)g.B * g.G * g.T)
    return;
  int lane = threadIdx.x & 31, j = (int)(w % g.T), kvh = (int)((w / g.T) % g.G);
  int b = (int)(w / ((size_t)g.T * g.G)), group = g.H / g.G, h0 = kvh * group;
  size_t kj = k_at(g, b, j, h0), vj = v_at(g, b, j, h0);
  float dk[MAX_PER_LANE], dv[MAX_PER_LANE];
  for (int u = 0; u < MAX_PER_LANE; u++)
    dk[u] = dv[u] = 0.0f;
  for (int h = h0; h < h0 + group; h++)
    for (int i = 0; i < g.T; i++) {
      if (!st_k_attn_sees(i, j, causal, window))
        continue;
      size_t q = q_at(g, b, i, h), od = o_at(g, b, i, h);
      float p = expf(scale * warp_dot(qkv, q, qkv, kj, g.k, dt) - lse[row_at(g, b, h, i)]);
      float ds = p * (warp_dot(dout, od, qkv, vj, g.k, dt) - rowdot[row_at(g, b, h, i)]);
      for (int u = 0, c = lane; c < g.k; u++, c += 32) {
        dk[u] += ds * st_cu_ld(qkv, dt, q + c);
        dv[u] += p * st_cu_ld(dout, dt, od + c);
      }
    }
  for (int u = 0, c = lane; c < g.k; u++, c += 32) {
    st_cu_st(dqkv, dt, kj + c, scale * dk[u]);
    st_cu_st(dqkv, dt, vj + c, dv[u]);
  }
}

static int
geom_of(Geom *g, int batch, int tokens, int heads, int kv_heads, int head_dim, StKDtype dt,
        int *done)
{
  *done = 1;
  if (!st_cu_dt_ok(dt) || batch < 0 || tokens < 0 || heads < 0 || kv_heads <= 0 ||
      head_dim < 0 || heads % kv_heads != 0)
    return ST_K_EINVAL;
  *g = Geom{batch, tokens, heads, kv_heads, head_dim, (size_t)(heads + 2 * kv_heads) * head_dim};
  *done = batch == 0 || tokens == 0 || heads == 0 || head_dim == 0;
  return 0;
}

static unsigned
warp_blocks(size_t rows)
{
  return (unsigned)((rows + WARPS - 1) / WARPS);
}

int
st_cu_flash_attn_fwd(void *stream, void *o, float *lse, const void *qkv, int batch, int tokens,
                     int heads, int kv_heads, int head_dim, float scale, int causal, int window,
                     StKDtype dt)
{
  Geom g;
  int done, rc = geom_of(&g, batch, tokens, heads, kv_heads, head_dim, dt, &done);
  if (done)
    return rc;
  if (o == NULL || lse == NULL || qkv == NULL || head_dim > ST_K_MAX_HEAD_DIM)
    return ST_K_EINVAL;
  size_t rows = (size_t)batch * heads * tokens;
  flash_fwd_kernel<<<warp_blocks(rows), 32 * WARPS, 0, st_cu_stream(stream)>>>(
    g, o, lse, qkv, scale, causal, window, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_flash_attn_bwd(void *stream, void *dqkv, const void *dout, const void *qkv, const void *o,
                     const float *lse, float *rowdot, int batch, int tokens, int heads,
                     int kv_heads, int head_dim, float scale, int causal, int window,
                     StKDtype dt)
{
  Geom g;
  int done, rc = geom_of(&g, batch, tokens, heads, kv_heads, head_dim, dt, &done);
  if (done)
    return rc;
  if (dqkv == NULL || dout == NULL || qkv == NULL || o == NULL || lse == NULL ||
      rowdot == NULL || head_dim > ST_K_MAX_HEAD_DIM)
    return ST_K_EINVAL;
  cudaStream_t s = st_cu_stream(stream);
  size_t rows = (size_t)batch * heads * tokens, keys = (size_t)batch * kv_heads * tokens;
  rowdot_kernel<<<warp_blocks(rows), 32 * WARPS, 0, s>>>(g, rowdot, dout, o, dt);
  ST_CU_CHECK_LAUNCH();
  flash_dq_kernel<<<warp_blocks(rows), 32 * WARPS, 0, s>>>(g, dqkv, dout, qkv, lse, rowdot,
                                                           scale, causal, window, dt);
  ST_CU_CHECK_LAUNCH();
  flash_dkv_kernel<<<warp_blocks(keys), 32 * WARPS, 0, s>>>(g, dqkv, dout, qkv, lse, rowdot,
                                                            scale, causal, window, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

/* Element n of a [heads, batch, tokens, head_dim] tensor: its coordinates. */
__device__ __forceinline__ void
split_hd(const Geom &g, size_t n, int *h, int *b, int *t, int *c)
{
  *c = (int)(n % g.k);
  *t = (int)((n / g.k) % g.T);
  *b = (int)((n / ((size_t)g.k * g.T)) % g.B);
  *h = (int)(n / ((size_t)g.k * g.T * g.B));
}

__global__ void
heads_kernel(Geom g, void *qh, void *kh, void *vh, const void *qkv, size_t n, StKDtype dt)
{
  ST_CU_FOR(e, n)
  {
    int h, b, t, c;
    split_hd(g, e, &h, &b, &t, &c);
    if (qh != NULL)
      st_cu_st(qh, dt, e, st_cu_ld(qkv, dt, q_at(g, b, t, h) + c));
    if (kh != NULL)
      st_cu_st(kh, dt, e, st_cu_ld(qkv, dt, k_at(g, b, t, h) + c));
    if (vh != NULL)
      st_cu_st(vh, dt, e, st_cu_ld(qkv, dt, v_at(g, b, t, h) + c));
  }
}

/* One thread per element of a qkv row's slot: query heads copy, kv heads
 * sum their group. n = batch tokens (heads + 2 kv_heads) head_dim. */
__global__ void
heads_bwd_kernel(Geom g, void *dqkv, const void *dqh, const void *dkh, const void *dvh, size_t n,
                 StKDtype dt)
{
  int group = g.H / g.G;
  ST_CU_FOR(e, n)
  {
    int c = (int)(e % g.k), slot = (int)((e / g.k) % (g.H + 2 * g.G));
    size_t row = e / g.ld;
    int t = (int)(row % g.T), b = (int)(row / g.T);
    float v;
    if (slot < g.H) {
      v = st_cu_ld(dqh, dt, (((size_t)slot * g.B + b) * g.T + t) * g.k + c);
    } else {
      int kvh = (slot - g.H) % g.G;
      const void *src = slot < g.H + g.G ? dkh : dvh;
      v = 0.0f;
      for (int h = kvh * group; h < (kvh + 1) * group; h++)
        v += st_cu_ld(src, dt, (((size_t)h * g.B + b) * g.T + t) * g.k + c);
    }
    st_cu_st(dqkv, dt, e, v);
  }
}

int
st_cu_attn_heads(void *stream, void *qh, void *kh, void *vh, const void *qkv, int batch,
                 int tokens, int heads, int kv_heads, int head_dim, StKDtype dt)
{
  Geom g;
  int done, rc = geom_of(&g, batch, tokens, heads, kv_heads, head_dim, dt, &done);
  if (done)
    return rc;
  if (qkv == NULL)
    return ST_K_EINVAL;
  size_t n = (size_t)heads * batch * tokens * head_dim;
  heads_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(g, qh, kh, vh, qkv, n,
                                                                          dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_attn_heads_bwd(void *stream, void *dqkv, const void *dqh, const void *dkh,
                     const void *dvh, int batch, int tokens, int heads, int kv_heads,
                     int head_dim, StKDtype dt)
{
  Geom g;
  int done, rc = geom_of(&g, batch, tokens, heads, kv_heads, head_dim, dt, &done);
  if (done)
    return rc;
  if (dqkv == NULL || dqh == NULL || dkh == NULL || dvh == NULL)
    return ST_K_EINVAL;
  size_t n = (size_t)batch * tokens * g.ld;
  heads_bwd_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(g, dqkv, dqh, dkh,
                                                                              dvh, n, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
