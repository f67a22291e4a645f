/* test_gpu_kernels_cp.c: the CUDA table's ring attention (context
 * parallelism, kernels/cuda/ring_attention.cu) against the host reference
 * (kernels/ref/ring_attention.c), on the same inputs: every rank of a ring
 * of c = 2 and 4, each step against each kv_rank's chunk, grouped-query,
 * multi-head and multi-query heads, causal, causal with a sliding window
 * and unmasked, fp32 and bf16, chunks larger than a warp. Skips when CUDA
 * is not built in or no device answers (label gpu).
 *
 * Each step is compared on its own: after a step's comparison the host's
 * state (o, m, l; the finish's y and lse; the accumulated dq) is copied to
 * the device, so the next step starts from the same state on both sides
 * and a difference points at one kernel call.
 *
 * Tolerances (gpu_check.h's rules: |cuda - host| <= tol (|host| + max
 * |host|)): the forward's o, m, l and the backward's dq and dkv 1e-4 in
 * fp32, flash attention's (test_gpu_kernels_llm.c): the device sums a
 * row's scores online key by key where the host takes the chunk's max
 * first, and each score is a warp's sum, two reductions deep; the
 * finish's y and lse 1e-6 (one division, one logf). bf16 storage: 1e-2
 * (gpu_check.h). In bf16 the backward's reference runs in fp32 on the
 * same bf16 inputs widened (exactly), its dq and dkv rounded to bf16 once:
 * the host kernel adds pair by pair into the bf16 gradient, rounding each
 * time, where the device sums its step in fp32 and rounds once (as flash
 * attention's backward does); the host's bf16 path is off by more than
 * bf16's tolerance from that (measured on the first case: a dq of 0.348
 * against 0.334 in fp32 rounded once), by the host's roundings, not the
 * device's. The forward's state is fp32 in both dtypes
 * and the finish rounds once on both sides: those compare with the host's
 * own bf16 path.
 */
#include "gpu_check.h"

#define MAX_C 4

/* The host copy to the device: the next call starts from the host's state. */
static void
up(Buf *b)
{
  g_assert_cmpint(C->copy(NULL, b->d, b->h, b->bytes, 1), ==, 0);
}

/* n values of a host copy in fp32. Transfer full. */
static float *
widen(const Buf *b, size_t n, StKDtype dt)
{
  float *x = g_new(float, n + 1);
  for (size_t i = 0; i < n; i++)
    x[i] = at(b->h, dt, i);
  return x;
}

static void
narrow(Buf *b, const float *x, size_t n, StKDtype dt)
{
  for (size_t i = 0; i < n; i++) {
    if (dt == ST_KDT_F32)
      ((float *)b->h)[i] = x[i];
    else
      ((uint16_t *)b->h)[i] = st_f32_to_bf16(x[i]);
  }
}

typedef struct {
  int B, T, H, G, k, c, causal, window;
} Shape;

/* One backward step on both sides: the host in fp32 on the widened inputs
 * (see the top), the device in dt. */
static void
bwd_step(const Shape *s, StKDtype dt, Buf *dq, int ld_q, Buf *dkv, int ld_dkv, const Buf *dy,
         const Buf *y, const Buf *lse, const Buf *qkv, const Buf *kv, int rank, int kv_rank)
{
  float scale = 1.0f / sqrtf((float)s->k);
  size_t nq = (size_t)s->B * s->T * ld_q, nkv = (size_t)s->B * s->T * 2 * s->G * s->k;
  size_t ndkv = (size_t)s->B * s->T * ld_dkv, no = (size_t)s->B * s->T * s->H * s->k;
  g_autofree float *hq = widen(qkv, nq, dt), *hkv = widen(kv, nkv, dt);
  g_autofree float *hdy = widen(dy, no, dt), *hy = widen(y, no, dt);
  g_autofree float *hdq = widen(dq, nq, dt), *hdkv = widen(dkv, ndkv, dt);
  g_assert_cmpint(H->ring_attn_bwd(NULL, hdq, ld_q, hdkv, ld_dkv, hdy, hy, lse->h, hq, ld_q, hkv,
                                   s->B, s->T, s->H, s->G, s->k, scale, s->causal, s->window,
                                   s->c, rank, kv_rank, ST_KDT_F32),
                  ==, 0);
  narrow(dq, hdq, nq, dt);
  narrow(dkv, hdkv, ndkv, dt);
  g_assert_cmpint(C->ring_attn_bwd(NULL, dq->d, ld_q, dkv->d, ld_dkv, dy->d, y->d, lse->d,
                                   qkv->d, ld_q, kv->d, s->B, s->T, s->H, s->G, s->k, scale,
                                   s->causal, s->window, s->c, rank, kv_rank, dt),
                  ==, 0);
}

static void
ring_case(Shape s)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(31 + 7 * s.c + s.k + s.window);
  float scale = 1.0f / sqrtf((float)s.k);
  /* the queries in qkv's rows (the executor's layout); the key-value
   * gradient in rows wider than the chunk's, to cover ld_dkv */
  int ld_q = (s.H + 2 * s.G) * s.k, ld_dkv = 2 * s.G * s.k + 5;
  size_t rows = (size_t)s.B * s.T, nq = rows * ld_q, nkv = rows * 2 * s.G * s.k;
  size_t ndkv = rows * ld_dkv, no = rows * s.H * s.k, nl = (size_t)s.B * s.H * s.T;
  g_test_message("B %d, %d tokens a rank, %d heads, %d kv heads, head_dim %d, c %d, causal %d, "
                 "window %d",
                 s.B, s.T, s.H, s.G, s.k, s.c, s.causal, s.window);
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    Buf kv[MAX_C];
    for (int i = 0; i < s.c; i++)
      kv[i] = buf_rand(r, nkv, dt, -1, 1);
    for (int rank = 0; rank < s.c; rank++) {
      Buf qkv = buf_rand(r, nq, dt, -1, 1), dy = buf_rand(r, no, dt, -1, 1);
      Buf o = buf_zero(no * 4), m = buf_zero(nl * 4), l = buf_zero(nl * 4);
      Buf y = buf_zero(no * 4), lse = buf_zero(nl * 4), dq = buf_rand(r, nq, dt, -0.5, 0.5);
      /* the rank's own chunk last: under the causal mask the first steps
       * leave some rows with nothing seen (l = 0), the state's other case */
      for (int step = 0; step < s.c; step++) {
        int kvr = (rank + 1 + step) % s.c;
        BOTH(T->ring_attn_fwd(NULL, P(o), P(m), P(l), P(qkv), ld_q, P(kv[kvr]), s.B, s.T, s.H,
                              s.G, s.k, scale, s.causal, s.window, s.c, rank, kvr, dt));
        same("ring o", &o, no, ST_KDT_F32, 1e-4);
        same("ring m", &m, nl, ST_KDT_F32, 1e-4);
        same("ring l", &l, nl, ST_KDT_F32, 1e-4);
        up(&o);
        up(&m);
        up(&l);
      }
      BOTH(T->ring_attn_finish(NULL, P(y), P(lse), P(o), P(m), P(l), s.B, s.T, s.H, s.k, dt));
      same("ring y", &y, no, dt, 1e-6);
      same("ring lse", &lse, nl, ST_KDT_F32, 1e-6);
      up(&y);
      up(&lse);
      for (int step = 0; step < s.c; step++) {
        int kvr = (rank + 1 + step) % s.c;
        Buf dkv = buf_rand(r, ndkv, dt, -0.5, 0.5);
        bwd_step(&s, dt, &dq, ld_q, &dkv, ld_dkv, &dy, &y, &lse, &qkv, &kv[kvr], rank, kvr);
        same("ring dq", &dq, nq, dt, 1e-4);
        same("ring dkv", &dkv, ndkv, dt, 1e-4);
        up(&dq);
        buf_free(&dkv);
      }
      Buf list[] = {qkv, dy, o, m, l, y, lse, dq};
      for (size_t i = 0; i < G_N_ELEMENTS(list); i++)
        buf_free(&list[i]);
    }
    for (int i = 0; i < s.c; i++)
      buf_free(&kv[i]);
  }
}

static void
test_ring(void)
{
  /* GQA, causal, c = 2: chunks of 35 tokens, 2 dims a lane */
  ring_case((Shape){2, 70, 8, 2, 64, 2, 1, 0});
  /* MHA, causal with a window of 37 over 160 tokens, c = 4: whole chunks
   * out of the window; 5 dims a lane */
  ring_case((Shape){1, 40, 4, 4, 160, 4, 1, 37});
  /* MQA, unmasked, c = 4, a ragged lane */
  ring_case((Shape){2, 36, 6, 1, 33, 4, 0, 0});
}

/* The table has the three (the executor's ring needs them: op_cp.c), and
 * the device refuses what the host refuses, before enqueueing anything. */
static void
test_checks(void)
{
  g_assert_nonnull(C->ring_attn_fwd);
  g_assert_nonnull(C->ring_attn_finish);
  g_assert_nonnull(C->ring_attn_bwd);
  void *d = NULL;
  g_assert_cmpint(C->alloc(&d, 64), ==, 0);
  float *f = d;
  /* odd tokens (two chunks a rank), rank and kv_rank beyond c, heads not a
   * multiple of kv_heads, head_dim beyond the registers, ld_q too short */
  g_assert_cmpint(C->ring_attn_fwd(NULL, f, f, f, d, 4, d, 1, 3, 1, 1, 4, 1.0f, 1, 0, 2, 0, 0,
                                   ST_KDT_F32),
                  ==, ST_K_EINVAL);
  g_assert_cmpint(C->ring_attn_fwd(NULL, f, f, f, d, 4, d, 1, 2, 1, 1, 4, 1.0f, 1, 0, 2, 2, 0,
                                   ST_KDT_F32),
                  ==, ST_K_EINVAL);
  g_assert_cmpint(C->ring_attn_fwd(NULL, f, f, f, d, 12, d, 1, 2, 3, 2, 4, 1.0f, 1, 0, 2, 0, 0,
                                   ST_KDT_F32),
                  ==, ST_K_EINVAL);
  g_assert_cmpint(C->ring_attn_fwd(NULL, f, f, f, d, 4 * ST_K_MAX_HEAD_DIM, d, 1, 2, 1, 1,
                                   ST_K_MAX_HEAD_DIM + 1, 1.0f, 1, 0, 2, 0, 0, ST_KDT_F32),
                  ==, ST_K_EINVAL);
  g_assert_cmpint(C->ring_attn_fwd(NULL, f, f, f, d, 3, d, 1, 2, 1, 1, 4, 1.0f, 1, 0, 2, 0, 0,
                                   ST_KDT_F32),
                  ==, ST_K_EINVAL);
  g_assert_cmpint(C->ring_attn_bwd(NULL, d, 4, d, 7, d, d, f, d, 4, d, 1, 2, 1, 1, 4, 1.0f, 1, 0,
                                   2, 0, 1, ST_KDT_F32),
                  ==, ST_K_EINVAL); /* ld_dkv < 2 kv_heads head_dim */
  g_assert_cmpint(C->ring_attn_bwd(NULL, d, 4, d, 8, d, d, f, d, 4, d, 1, 2, 1, 1, 4, 1.0f, 1, 0,
                                   2, 0, 2, ST_KDT_F32),
                  ==, ST_K_EINVAL);
  g_assert_cmpint(C->ring_attn_finish(NULL, d, f, f, f, f, 1, 2, 1, 4, (StKDtype)7), ==,
                  ST_K_EINVAL);
  g_assert_cmpint(C->free(d), ==, 0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  StExecDevice *gpu = st_test_open_gpu();
  if (gpu == NULL)
    return ST_TEST_SKIPPED;
  H = st_kernels_host();
  C = gpu->backend->kernels(gpu);
  g_test_add_func("/gpu/kernels/cp/ring", test_ring);
  g_test_add_func("/gpu/kernels/cp/checks", test_checks);
  int status = g_test_run();
  gpu->backend->close(gpu);
  return status;
}
