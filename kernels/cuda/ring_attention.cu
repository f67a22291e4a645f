/* ring_attention.cu: context parallelism's ring attention, one step at a
 * time (kernels.h ring_attn_*; kernels/ref/ring_attention.c gives the
 * formulas and the masking by global positions).
 *
 * attention.cu's layout on one chunk of keys: a warp per (sample, head,
 * query) row, each lane holding head_dim / 32 of the query side in
 * registers. The forward resumes the row's running max, sum and output
 * from o, m, l and walks the keys of the chunk it sees with the online
 * softmax; a row that sees none of them is left as it was (the
 * reference's rule). The finish is element-wise. The backward is two
 * kernels: dq, a warp per query row over the chunk's keys; dk and dv, a
 * warp per key row over the queries of its group that see it. Each
 * recomputes the scores from lse, and the rows' D = dy . y (the interface
 * has no scratch for it: the dkv kernel recomputes it per pair, one more
 * dot of head_dim). Each sums its step's share in fp32 registers and adds
 * it once into the stored gradient, so every element is read and written
 * by one warp: no atomics, deterministic. (The host reference adds pair by
 * pair in the storage dtype: the same in fp32 up to the order of sums; in
 * bf16 the device rounds once where the host rounds per pair.) head_dim at
 * most 256.
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

#define MAX_PER_LANE (ST_K_MAX_HEAD_DIM / 32)
#define WARPS 4 /* warps per block */

typedef struct {
  int B, T, H, G, k, c, rank, kv_rank, causal, window;
  size_t ld_q, ld_kv;
} Ring;

/* Element offsets: query head h of row (b, t) in rows of ld, key / value
 * head of h's group in rows of ld, head h of a [B, T, H k] tensor, row
 * (b, h, t) of [B, H, T]. */
static __device__ __forceinline__ size_t
ring_q_at(const Ring &g, size_t ld, int b, int t, int h)
{
  return ((size_t)b * g.T + t) * ld + (size_t)h * g.k;
}

static __device__ __forceinline__ size_t
ring_k_at(const Ring &g, size_t ld, int b, int t, int h)
{
  return ((size_t)b * g.T + t) * ld + (size_t)(h / (g.H / g.G)) * g.k;
}

static __device__ __forceinline__ size_t
ring_o_at(const Ring &g, int b, int t, int h)
{
  return (((size_t)b * g.T + t) * g.H + h) * g.k;
}

static __device__ __forceinline__ size_t
ring_row_at(const Ring &g, int b, int h, int t)
{
  return ((size_t)b * g.H + h) * g.T + t;
}

/* Whether the rank's query i sees key j of rank kv_rank: the mask on their
 * global positions (kernels.h, kmath.h: the reference's very formula). */
static __device__ __forceinline__ int
ring_sees(const Ring &g, int i, int j)
{
  return st_k_attn_sees(st_k_cp_position(i, g.T, g.c, g.rank),
                        st_k_cp_position(j, g.T, g.c, g.kv_rank), g.causal, g.window);
}

/* x . y over head_dim, a lane's share of it summed over the warp. */
static __device__ __forceinline__ float
ring_dot(const void *x, size_t xo, const void *y, size_t yo, int k, StKDtype dt)
{
  float s = 0.0f;
  for (int c = threadIdx.x & 31; c < k; c += 32)
    s += st_cu_ld(x, dt, xo + c) * st_cu_ld(y, dt, yo + c);
  return st_cu_warp_sum(s);
}

static __device__ __forceinline__ size_t
ring_warp(void)
{
  return ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
}

/* Query row w = ((b H + h) T + i). */
static __device__ __forceinline__ void
ring_split(const Ring &g, size_t w, int *b, int *h, int *i)
{
  *i = (int)(w % g.T);
  *h = (int)((w / g.T) % g.H);
  *b = (int)(w / ((size_t)g.T * g.H));
}

__global__ void
ring_fwd_kernel(Ring g, float *o, float *m, float *l, const void *q, const void *kv, float scale,
                StKDtype dt)
{
  size_t w = ring_warp();
  if (w >= (size_t)g.B * g.H * g.T)
    return;
  int b, h, i, lane = threadIdx.x & 31;
  ring_split(g, w, &b, &h, &i);
  size_t r = ring_row_at(g, b, h, i), qi = ring_q_at(g, g.ld_q, b, i, h);
  size_t out = ring_o_at(g, b, i, h);
  float sum = l[r], mx = sum > 0.0f ? m[r] : -INFINITY, acc[MAX_PER_LANE];
  for (int u = 0, c = lane; c < g.k; u++, c += 32)
    acc[u] = sum > 0.0f ? o[out + c] : 0.0f;
  int seen = 0; /* the same on every lane: the mask is the row's */
  for (int j = 0; j < g.T; j++) {
    if (!ring_sees(g, i, j))
      continue;
    size_t kj = ring_k_at(g, g.ld_kv, b, j, h), vj = kj + (size_t)g.G * g.k;
    float s = scale * ring_dot(q, qi, kv, kj, g.k, dt);
    float m2 = fmaxf(mx, s), keep = expf(mx - m2), p = expf(s - m2);
    sum = sum * keep + p;
    for (int u = 0, c = lane; c < g.k; u++, c += 32)
      acc[u] = acc[u] * keep + p * st_cu_ld(kv, dt, vj + c);
    mx = m2;
    seen = 1;
  }
  if (!seen) /* nothing in this chunk: the row stays as it was */
    return;
  for (int u = 0, c = lane; c < g.k; u++, c += 32)
    o[out + c] = acc[u];
  if (lane == 0) {
    m[r] = mx;
    l[r] = sum;
  }
}

/* A thread per element of y (kk = head_dim, or 1 when it is 0 so that lse
 * is still written). */
__global__ void
ring_finish_kernel(void *y, float *lse, const float *o, const float *m, const float *l, int T,
                   int H, int k, int kk, size_t n, StKDtype dt)
{
  ST_CU_FOR(e, n)
  {
    int d = (int)(e % kk);
    size_t row = e / kk; /* (b T + t) H + h */
    int h = (int)(row % H), t = (int)((row / H) % T);
    size_t b = row / ((size_t)H * T), r = (b * H + h) * T + t;
    float lr = l[r];
    if (d < k)
      st_cu_st(y, dt, row * k + d, lr > 0.0f ? o[row * k + d] / lr : 0.0f);
    if (d == 0)
      lse[r] = lr > 0.0f ? m[r] + logf(lr) : -INFINITY;
  }
}

/* dq += scale sum_j ds_ij k_j over the chunk's keys row i sees. */
__global__ void
ring_dq_kernel(Ring g, void *dq, size_t ld_dq, const void *dy, const void *y, const float *lse,
               const void *q, const void *kv, float scale, StKDtype dt)
{
  size_t w = ring_warp();
  if (w >= (size_t)g.B * g.H * g.T)
    return;
  int b, h, i, lane = threadIdx.x & 31;
  ring_split(g, w, &b, &h, &i);
  float lse_i = lse[ring_row_at(g, b, h, i)];
  if (lse_i == -INFINITY) /* a row that saw nothing has no gradient */
    return;
  size_t qi = ring_q_at(g, g.ld_q, b, i, h), oi = ring_o_at(g, b, i, h);
  float D = ring_dot(dy, oi, y, oi, g.k, dt), acc[MAX_PER_LANE];
  for (int u = 0; u < MAX_PER_LANE; u++)
    acc[u] = 0.0f;
  int seen = 0;
  for (int j = 0; j < g.T; j++) {
    if (!ring_sees(g, i, j))
      continue;
    size_t kj = ring_k_at(g, g.ld_kv, b, j, h), vj = kj + (size_t)g.G * g.k;
    float p = expf(scale * ring_dot(q, qi, kv, kj, g.k, dt) - lse_i);
    float ds = p * (ring_dot(dy, oi, kv, vj, g.k, dt) - D);
    for (int u = 0, c = lane; c < g.k; u++, c += 32)
      acc[u] += ds * st_cu_ld(kv, dt, kj + c);
    seen = 1;
  }
  if (!seen)
    return;
  size_t dqi = ring_q_at(g, ld_dq, b, i, h);
  for (int u = 0, c = lane; c < g.k; u++, c += 32)
    st_cu_st(dq, dt, dqi + c, st_cu_ld(dq, dt, dqi + c) + scale * acc[u]);
}

/* A warp per key row (b, kv head, j) of the chunk, over the queries of its
 * group that see it: dk += scale sum ds_ij q_i, dv += sum p_ij dy_i. */
__global__ void
ring_dkv_kernel(Ring g, void *dkv, size_t ld_dkv, const void *dy, const void *y,
                const float *lse, const void *q, const void *kv, float scale, StKDtype dt)
{
  size_t w = ring_warp();
  if (w >= (size_t)g.B * g.G * g.T)
    return;
  int lane = threadIdx.x & 31, j = (int)(w % g.T), kvh = (int)((w / g.T) % g.G);
  int b = (int)(w / ((size_t)g.T * g.G)), group = g.H / g.G, h0 = kvh * group;
  size_t kj = ring_k_at(g, g.ld_kv, b, j, h0), vj = kj + (size_t)g.G * g.k;
  float dk[MAX_PER_LANE], dv[MAX_PER_LANE];
  for (int u = 0; u < MAX_PER_LANE; u++)
    dk[u] = dv[u] = 0.0f;
  int seen = 0;
  for (int h = h0; h < h0 + group; h++)
    for (int i = 0; i < g.T; i++) {
      if (!ring_sees(g, i, j))
        continue;
      float lse_i = lse[ring_row_at(g, b, h, i)];
      if (lse_i == -INFINITY)
        continue;
      size_t qi = ring_q_at(g, g.ld_q, b, i, h), oi = ring_o_at(g, b, i, h);
      float D = ring_dot(dy, oi, y, oi, g.k, dt);
      float p = expf(scale * ring_dot(q, qi, kv, kj, g.k, dt) - lse_i);
      float ds = p * (ring_dot(dy, oi, kv, vj, g.k, dt) - D);
      for (int u = 0, c = lane; c < g.k; u++, c += 32) {
        dk[u] += ds * st_cu_ld(q, dt, qi + c);
        dv[u] += p * st_cu_ld(dy, dt, oi + c);
      }
      seen = 1;
    }
  if (!seen)
    return;
  size_t dkj = ring_k_at(g, ld_dkv, b, j, h0), dvj = dkj + (size_t)g.G * g.k;
  for (int u = 0, c = lane; c < g.k; u++, c += 32) {
    st_cu_st(dkv, dt, dkj + c, st_cu_ld(dkv, dt, dkj + c) + scale * dk[u]);
    st_cu_st(dkv, dt, dvj + c, st_cu_ld(dkv, dt, dvj + c) + dv[u]);
  }
}

/* The reference's checks (ring_ok), and head_dim within the registers. */
static int
ring_ok(const Ring &g, StKDtype dt)
{
  return st_cu_dt_ok(dt) && g.B >= 0 && g.T >= 0 && g.T % 2 == 0 && g.H >= 0 && g.G > 0 &&
         g.k > 0 && g.k <= ST_K_MAX_HEAD_DIM && g.H % g.G == 0 && g.c >= 1 && g.rank >= 0 &&
         g.rank < g.c && g.kv_rank >= 0 && g.kv_rank < g.c;
}

static unsigned
ring_blocks(size_t warps)
{
  return (unsigned)((warps + WARPS - 1) / WARPS);
}

int
st_cu_ring_attn_fwd(void *stream, float *o, float *m, float *l, const void *q, int ld_q,
                    const void *kv, int batch, int tokens, int heads, int kv_heads, int head_dim,
                    float scale, int causal, int window, int c, int rank, int kv_rank,
                    StKDtype dt)
{
  Ring g = {batch, tokens, heads, kv_heads, head_dim, c, rank, kv_rank, causal, window,
            (size_t)ld_q, 2 * (size_t)kv_heads * head_dim};
  if (!ring_ok(g, dt) || ld_q < heads * head_dim)
    return ST_K_EINVAL;
  if (batch == 0 || tokens == 0 || heads == 0)
    return 0;
  if (o == NULL || m == NULL || l == NULL || q == NULL || kv == NULL)
    return ST_K_EINVAL;
  size_t rows = (size_t)batch * heads * tokens;
  ring_fwd_kernel<<<ring_blocks(rows), 32 * WARPS, 0, st_cu_stream(stream)>>>(g, o, m, l, q, kv,
                                                                             scale, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_ring_attn_finish(void *stream, void *y, float *lse, const float *o, const float *m,
                       const float *l, int batch, int tokens, int heads, int head_dim,
                       StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || batch < 0 || tokens < 0 || heads < 0 || head_dim < 0)
    return ST_K_EINVAL;
  int kk = head_dim > 0 ? head_dim : 1;
  size_t n = (size_t)batch * tokens * heads * kk;
  if (n == 0)
    return 0;
  if (y == NULL || lse == NULL || o == NULL || m == NULL || l == NULL)
    return ST_K_EINVAL;
  ring_finish_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    y, lse, o, m, l, tokens, heads, head_dim, kk, n, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

int
st_cu_ring_attn_bwd(void *stream, void *dq, int ld_dq, void *dkv, int ld_dkv, const void *dy,
                    const void *y, const float *lse, const void *q, int ld_q, const void *kv,
                    int batch, int tokens, int heads, int kv_heads, int head_dim, float scale,
                    int causal, int window, int c, int rank, int kv_rank, StKDtype dt)
{
  Ring g = {batch, tokens, heads, kv_heads, head_dim, c, rank, kv_rank, causal, window,
            (size_t)ld_q, 2 * (size_t)kv_heads * head_dim};
  if (!ring_ok(g, dt) || ld_q < heads * head_dim || ld_dq < heads * head_dim ||
      ld_dkv < 0 || (size_t)ld_dkv < g.ld_kv)
    return ST_K_EINVAL;
  if (batch == 0 || tokens == 0 || heads == 0)
    return 0;
  if (dq == NULL || dkv == NULL || dy == NULL || y == NULL || lse == NULL || q == NULL ||
      kv == NULL)
    return ST_K_EINVAL;
  cudaStream_t s = st_cu_stream(stream);
  size_t rows = (size_t)batch * heads * tokens, keys = (size_t)batch * kv_heads * tokens;
  ring_dq_kernel<<<ring_blocks(rows), 32 * WARPS, 0, s>>>(g, dq, (size_t)ld_dq, dy, y, lse, q,
                                                          kv, scale, dt);
  ST_CU_CHECK_LAUNCH();
  ring_dkv_kernel<<<ring_blocks(keys), 32 * WARPS, 0, s>>>(g, dkv, (size_t)ld_dkv, dy, y, lse, q,
                                                           kv, scale, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
