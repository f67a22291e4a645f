/* moe.cu: MoE routing and an expert's gather and scatter
 * (kernels/ref/moe.c gives the rules). A thread per row computes the
 * softmax and top_k; admission is sequential within a sample, so a thread
 * per (sample, expert) walks the rows in GShard's order and writes that
 * expert's gate column (each gate written by one thread). The gather finds
 * a sample's slots with one thread per sample, then copies rows in
 * parallel; scatter and its backward run a thread per element, a warp per
 * slot for the gate's dot product. Slots of one expert hold distinct rows,
 * so no two threads add to one element. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"


__global__ void
route_softmax_kernel(float *probs, int32_t *sel, const void *logits, int rows, int experts,
                     int k, StKDtype dt)
{
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows)
    return;
  float *p = probs + (size_t)r * experts, m = -INFINITY, sum = 0.0f;
  for (int e = 0; e < experts; e++)
    m = fmaxf(m, st_cu_ld(logits, dt, (size_t)r * experts + e));
  for (int e = 0; e < experts; e++)
    sum += p[e] = expf(st_cu_ld(logits, dt, (size_t)r * experts + e) - m);
  for (int e = 0; e < experts; e++)
    p[e] /= sum;
  int32_t *s = sel + (size_t)r * k;
  for (int j = 0; j < k; j++) {
    int best = -1;
    for (int e = 0; e < experts; e++) {
      bool taken = false;
      for (int i = 0; i < j; i++)
        taken |= s[i] == e;
      if (!taken && (best < 0 || p[e] > p[best]))
        best = e;
    }
    s[j] = best;
  }
}

__device__ __forceinline__ int
chosen(int32_t s)
{
  return s >= 0 ? s : -1 - s;
}

/* Thread (b, e): expert e's column of sample b; it marks its dropped
 * choices -1 - e (a choice of e is only ever written by this thread;
 * others read it through chosen(), which both spellings give the same). */
__global__ void
route_admit_kernel(void *gates, int ld, const float *probs, int32_t *sel, int batch,
                   int tokens, int experts, int k, int capacity, int norm_topk, StKDtype dt)
{
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= batch * experts)
    return;
  int b = n / experts, e = n % experts, count = 0;
  for (int t = 0; t < tokens; t++)
    st_cu_st(gates, dt, ((size_t)b * tokens + t) * ld + e, 0.0f);
  for (int j = 0; j < k; j++)
    for (int t = 0; t < tokens; t++) {
      size_t r = (size_t)b * tokens + t;
      int32_t *s = sel + r * k;
      if (s[j] != e)
        continue;
      if (count >= capacity) {
        s[j] = -1 - e;
        continue;
      }
      count++;
      const float *p = probs + r * experts;
      float norm = 1.0f;
      if (norm_topk) {
        norm = 0.0f;
        for (int i = 0; i < k; i++)
          norm += p[chosen(s[i])];
      }
      st_cu_st(gates, dt, r * ld + e, p[e] / norm);
    }
}

int
st_cu_moe_route_fwd(void *stream, void *gates, int ld, float *probs, int32_t *sel,
                    const void *logits, int batch, int tokens, int experts, int top_k,
                    int capacity, int norm_topk, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || batch < 0 || tokens < 0 || experts <= 0 || top_k <= 0 ||
      top_k > experts || top_k > ST_K_MAX_TOP_K || capacity < 0 || ld < experts)
    return ST_K_EINVAL;
  if (batch == 0 || tokens == 0)
    return 0;
  if (gates == NULL || probs == NULL || sel == NULL || logits == NULL)
    return ST_K_EINVAL;
  cudaStream_t s = st_cu_stream(stream);
  int rows = batch * tokens;
  route_softmax_kernel<<<(rows + ST_CU_THREADS - 1) / ST_CU_THREADS, ST_CU_THREADS, 0, s>>>(
    probs, sel, logits, rows, experts, top_k, dt);
  ST_CU_CHECK_LAUNCH();
  int cols = batch * experts;
  route_admit_kernel<<<(cols + ST_CU_THREADS - 1) / ST_CU_THREADS, ST_CU_THREADS, 0, s>>>(
    gates, ld, probs, sel, batch, tokens, experts, top_k, capacity, norm_topk, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

__global__ void
route_bwd_kernel(void *dlogits, const void *dgates, int ld, const float *probs,
                 const int32_t *sel, int rows, int experts, int k, int norm_topk, StKDtype dt)
{
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows)
    return;
  const float *p = probs + (size_t)r * experts;
  const int32_t *s = sel + (size_t)r * k;
  float norm = 0.0f, gdg = 0.0f, dg[ST_K_MAX_TOP_K], dp[ST_K_MAX_TOP_K];
  for (int j = 0; j < k; j++) {
    norm += p[chosen(s[j])];
    dg[j] = s[j] >= 0 ? st_cu_ld(dgates, dt, (size_t)r * ld + s[j]) : 0.0f;
  }
  for (int j = 0; j < k; j++)
    gdg += dg[j] * p[chosen(s[j])] / norm;
  float pdp = 0.0f;
  for (int j = 0; j < k; j++) {
    dp[j] = norm_topk ? (dg[j] - gdg) / norm : dg[j];
    pdp += p[chosen(s[j])] * dp[j];
  }
  for (int e = 0; e < experts; e++) {
    float d = 0.0f;
    for (int j = 0; j < k; j++)
      if (chosen(s[j]) == e)
        d = dp[j];
    st_cu_st(dlogits, dt, (size_t)r * experts + e, p[e] * (d - pdp));
  }
}

int
st_cu_moe_route_bwd(void *stream, void *dlogits, const void *dgates, int ld, const float *probs,
                    const int32_t *sel, int rows, int experts, int top_k, int norm_topk,
                    StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || rows < 0 || experts <= 0 || top_k <= 0 || top_k > experts ||
      top_k > ST_K_MAX_TOP_K || ld < experts)
    return ST_K_EINVAL;
  if (rows == 0)
    return 0;
  if (dlogits == NULL || dgates == NULL || probs == NULL || sel == NULL)
    return ST_K_EINVAL;
  route_bwd_kernel<<<(rows + ST_CU_THREADS - 1) / ST_CU_THREADS, ST_CU_THREADS, 0,
                     st_cu_stream(stream)>>>(dlogits, dgates, ld, probs, sel, rows, experts,
                                             top_k, norm_topk, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

/* One thread per sample: its slots' rows and gates. */
__global__ void
gather_slots_kernel(int32_t *idx, float *gate, const void *src, int ld, int gate_col, int batch,
                    int tokens, int capacity, StKDtype dt)
{
  int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= batch)
    return;
  int c = 0;
  for (int t = 0; t < tokens && c < capacity; t++) {
    float g = st_cu_ld(src, dt, ((size_t)b * tokens + t) * ld + gate_col);
    if (g == 0.0f)
      continue;
    size_t slot = (size_t)b * capacity + c++;
    idx[slot] = t;
    gate[slot] = g;
  }
  for (; c < capacity; c++) {
    idx[(size_t)b * capacity + c] = -1;
    gate[(size_t)b * capacity + c] = 0.0f;
  }
}

__global__ void
gather_rows_kernel(void *x, const int32_t *idx, const void *src, int ld, int x_col, int tokens,
                   int capacity, int d, size_t n, StKDtype dt)
{
  ST_CU_FOR(e, n)
  {
    size_t slot = e / d;
    int j = (int)(e % d), t = idx[slot], b = (int)(slot / capacity);
    float v = t >= 0 ? st_cu_ld(src, dt, ((size_t)b * tokens + t) * ld + x_col + j) : 0.0f;
    st_cu_st(x, dt, e, v);
  }
}

int
st_cu_moe_gather(void *stream, void *x, int32_t *idx, float *gate, const void *src, int ld,
                 int x_col, int gate_col, int batch, int tokens, int capacity, int d,
                 StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || batch < 0 || tokens < 0 || capacity < 0 || d < 0 || x_col < 0 ||
      x_col + d > ld || gate_col < 0 || gate_col >= ld)
    return ST_K_EINVAL;
  if (batch == 0 || capacity == 0)
    return 0;
  if (x == NULL || idx == NULL || gate == NULL || (src == NULL && tokens > 0))
    return ST_K_EINVAL;
  cudaStream_t s = st_cu_stream(stream);
  gather_slots_kernel<<<(batch + 63) / 64, 64, 0, s>>>(idx, gate, src, ld, gate_col, batch,
                                                      tokens, capacity, dt);
  ST_CU_CHECK_LAUNCH();
  size_t n = (size_t)batch * capacity * d;
  if (n > 0) {
    gather_rows_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, s>>>(x, idx, src, ld, x_col, tokens,
                                                               capacity, d, n, dt);
    ST_CU_CHECK_LAUNCH();
  }
  return 0;
}

__global__ void
scatter_kernel(void *dst, int ld, int col, const void *y, const int32_t *idx, const float *gate,
               int tokens, int capacity, int d, size_t n, StKDtype dt)
{
  ST_CU_FOR(e, n)
  {
    size_t slot = e / d;
    int j = (int)(e % d), t = idx[slot], b = (int)(slot / capacity);
    if (t < 0 || t >= tokens)
      continue;
    float g = gate != NULL ? gate[slot] : 1.0f;
    size_t at = ((size_t)b * tokens + t) * ld + col + j;
    st_cu_st(dst, dt, at, st_cu_ld(dst, dt, at) + g * st_cu_ld(y, dt, e));
  }
}

int
st_cu_moe_scatter(void *stream, void *dst, int ld, int col, const void *y, const int32_t *idx,
                  const float *gate, int batch, int tokens, int capacity, int d, StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || batch < 0 || tokens < 0 || capacity < 0 || d < 0 || col < 0 ||
      col + d > ld)
    return ST_K_EINVAL;
  size_t n = (size_t)batch * capacity * d;
  if (n == 0)
    return 0;
  if (dst == NULL || y == NULL || idx == NULL)
    return ST_K_EINVAL;
  scatter_kernel<<<st_cu_grid(n), ST_CU_THREADS, 0, st_cu_stream(stream)>>>(
    dst, ld, col, y, idx, gate, tokens, capacity, d, n, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}

/* A warp per slot: dy = gate dsum[row], and the gate's gradient dsum[row] . y. */
__global__ void
gather_grad_kernel(void *dy, void *dgates, int ld_gates, int gate_col, const void *dsum,
                   int ld_sum, const void *y, const int32_t *idx, const float *gate, int tokens,
                   int capacity, int d, size_t slots, StKDtype dt)
{
  size_t slot = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (slot >= slots)
    return;
  int lane = threadIdx.x & 31, t = idx[slot], b = (int)(slot / capacity);
  if (t < 0 || t >= tokens) {
    for (int j = lane; j < d; j += 32)
      st_cu_st(dy, dt, slot * d + j, 0.0f);
    return;
  }
  size_t row = ((size_t)b * tokens + t) * ld_sum;
  float s = 0.0f;
  for (int j = lane; j < d; j += 32) {
    float ds = st_cu_ld(dsum, dt, row + j);
    s += ds * st_cu_ld(y, dt, slot * d + j);
    st_cu_st(dy, dt, slot * d + j, gate[slot] * ds);
  }
  s = st_cu_warp_sum(s);
  if (lane == 0 && dgates != NULL) {
    size_t at = ((size_t)b * tokens + t) * ld_gates + gate_col;
    st_cu_st(dgates, dt, at, st_cu_ld(dgates, dt, at) + s);
  }
}

int
st_cu_moe_gather_grad(void *stream, void *dy, void *dgates, int ld_gates, int gate_col,
                      const void *dsum, int ld_sum, const void *y, const int32_t *idx,
                      const float *gate, int batch, int tokens, int capacity, int d,
                      StKDtype dt)
{
  if (!st_cu_dt_ok(dt) || batch < 0 || tokens < 0 || capacity < 0 || d < 0 || ld_sum < d ||
      (dgates != NULL && (gate_col < 0 || gate_col >= ld_gates)))
    return ST_K_EINVAL;
  size_t slots = (size_t)batch * capacity;
  if (slots == 0)
    return 0;
  if (dy == NULL || dsum == NULL || y == NULL || idx == NULL || gate == NULL)
    return ST_K_EINVAL;
  unsigned blocks = (unsigned)((slots + 7) / 8);
  gather_grad_kernel<<<blocks, 256, 0, st_cu_stream(stream)>>>(
    dy, dgates, ld_gates, gate_col, dsum, ld_sum, y, idx, gate, tokens, capacity, d, slots, dt);
  ST_CU_CHECK_LAUNCH();
  return 0;
}
