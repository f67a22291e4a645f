/* test_gpu_kernels_llm.c: the CUDA LLM kernels (kernels/cuda/llm.cu,
 * attention.cu, moe.cu) against their host references, on the same inputs,
 * sizes larger than a warp and a block, fp32 and bf16. Skips when CUDA is
 * not built in or no device answers (label gpu).
 *
 * Tolerances (gpu_check.h's rules): RMSNorm's reductions 1e-5; element-wise
 * GLU and RoPE 1e-6 (nvcc's fused multiply-adds; RoPE's angles are computed
 * in double on both sides); attention 1e-4: the device sums a row's scores
 * online in another order, and each score is a warp's sum, two reductions
 * deep; routing exact in its choices (well-separated random logits) and
 * 1e-6 in its gates; gathers and copies exact; the scatter and the gates'
 * gradient 1e-6 (a dot product over d).
 */
#include "gpu_check.h"

static void
test_rmsnorm_glu(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(21);
  const int rows = 300, cols = 777, f = 333;
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    size_t n = (size_t)rows * cols;
    Buf x = buf_rand(r, n, dt, -2, 3), dy = buf_rand(r, n, dt, -1, 1);
    Buf g = buf_rand(r, cols, dt, 0.5, 1.5), dg = buf_rand(r, cols, dt, -1, 1);
    Buf y = buf_zero(n * 4), dx = buf_zero(n * 4), rstd = buf_zero(rows * 4);
    BOTH(T->rmsnorm_fwd(NULL, P(y), P(rstd), P(x), P(g), rows, cols, dt));
    BOTH(T->rmsnorm_bwd(NULL, P(dx), P(dg), P(dy), P(x), P(rstd), P(g), rows, cols, dt));
    same("rmsnorm y", &y, n, dt, 1e-5);
    same("rmsnorm rstd", &rstd, rows, ST_KDT_F32, 1e-5);
    same("rmsnorm dx", &dx, n, dt, 1e-5);
    same("rmsnorm dgamma", &dg, cols, dt, 1e-5);
    for (int act = 0; act < 2; act++) {
      size_t m = (size_t)rows * f;
      Buf gu = buf_rand(r, 2 * m, dt, -3, 3), dh = buf_rand(r, m, dt, -1, 1);
      Buf h = buf_zero(m * 4), dgu = buf_zero(2 * m * 4);
      BOTH(T->glu_fwd(NULL, P(h), P(gu), rows, f, act, dt));
      BOTH(T->glu_bwd(NULL, P(dgu), P(dh), P(gu), rows, f, act, dt));
      same("glu h", &h, m, dt, 1e-6);
      same("glu dgu", &dgu, 2 * m, dt, 1e-6);
      Buf list[] = {gu, dh, h, dgu};
      for (size_t i = 0; i < G_N_ELEMENTS(list); i++)
        buf_free(&list[i]);
    }
    Buf list[] = {x, dy, g, dg, y, dx, rstd};
    for (size_t i = 0; i < G_N_ELEMENTS(list); i++)
      buf_free(&list[i]);
  }
}

static void
test_rope_copy(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(22);
  /* 2 x 700 rows of 16 heads of 40, the first 12 turning 32 dims, Llama-3's theta */
  const int B = 2, nt = 700, heads = 12, hd = 40, ld = 16 * hd, rot = 32;
  size_t n = (size_t)B * nt * ld;
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    for (int inverse = 0; inverse < 2; inverse++) {
      Buf x = buf_rand(r, n, dt, -1, 1);
      BOTH(T->rope(NULL, P(x), B, nt, heads, ld, hd, rot, 500000.0f, inverse, dt));
      same("rope", &x, n, dt, 1e-6);
      buf_free(&x);
    }
    Buf src = buf_rand(r, n, dt, -1, 1), dst = buf_rand(r, n, dt, -1, 1);
    BOTH(T->copy2d(NULL, P(dst), ld, (char *)P(src) + 3 * st_kdt_size(dt), ld, B * nt, 100, dt));
    same_bytes("copy2d", &dst);
    buf_free(&src);
    buf_free(&dst);
  }
}

static void
attention_case(int B, int nt, int nh, int G, int k, int causal, int window)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(23 + k + window);
  float scale = 1.0f / sqrtf((float)k);
  size_t nq = (size_t)B * nt * (nh + 2 * G) * k, no = (size_t)B * nt * nh * k;
  size_t nl = (size_t)B * nh * nt, nbh = (size_t)nh * B * nt * k;
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    Buf qkv = buf_rand(r, nq, dt, -1, 1), dout = buf_rand(r, no, dt, -1, 1);
    Buf o = buf_zero(no * 4), lse = buf_zero(nl * 4), dqkv = buf_zero(nq * 4);
    Buf rowdot = buf_zero(nl * 4);
    BOTH(T->flash_attn_fwd(NULL, P(o), P(lse), P(qkv), B, nt, nh, G, k, scale, causal, window, dt));
    same("flash o", &o, no, dt, 1e-4);
    same("flash lse", &lse, nl, ST_KDT_F32, 1e-4);
    /* the backward from the same saved o and lse on both sides */
    g_assert_cmpint(C->copy(NULL, o.d, o.h, o.bytes, 1), ==, 0);
    g_assert_cmpint(C->copy(NULL, lse.d, lse.h, lse.bytes, 1), ==, 0);
    BOTH(T->flash_attn_bwd(NULL, P(dqkv), P(dout), P(qkv), P(o), P(lse), P(rowdot), B, nt, nh, G,
                           k, scale, causal, window, dt));
    same("flash dqkv", &dqkv, nq, dt, 1e-4);
    Buf qh = buf_zero(nbh * 4), kh = buf_zero(nbh * 4), vh = buf_zero(nbh * 4);
    BOTH(T->attn_heads(NULL, P(qh), P(kh), P(vh), P(qkv), B, nt, nh, G, k, dt));
    same_bytes("heads q", &qh);
    same_bytes("heads k", &kh);
    same_bytes("heads v", &vh);
    BOTH(T->attn_heads_bwd(NULL, P(dqkv), P(qh), P(kh), P(vh), B, nt, nh, G, k, dt));
    same("heads bwd", &dqkv, nq, dt, 1e-6);
    Buf list[] = {qkv, dout, o, lse, dqkv, rowdot, qh, kh, vh};
    for (size_t i = 0; i < G_N_ELEMENTS(list); i++)
      buf_free(&list[i]);
  }
}

static void
test_attention(void)
{
  attention_case(2, 67, 8, 2, 64, 1, 0);  /* GQA, causal, 2 dims a lane */
  attention_case(1, 90, 4, 4, 160, 0, 0); /* MHA, full, 5 dims a lane */
  attention_case(2, 70, 6, 1, 33, 1, 16); /* MQA, sliding window, a ragged lane */
}

static void
test_moe(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(24);
  const int B = 3, nt = 100, E = 8, k = 2, cap = 30, d = 48, ld = 2 * d + E;
  size_t rows = (size_t)B * nt;
  for (int dd = 0; dd < 2; dd++) {
    StKDtype dt = DTS[dd];
    for (int norm = 0; norm < 2; norm++) {
      Buf logits = buf_rand(r, rows * E, dt, -4, 4), src = buf_rand(r, rows * ld, dt, -1, 1);
      Buf probs = buf_zero(rows * E * 4), sel = buf_zero(rows * k * 4);
      Buf dl = buf_zero(rows * E * 4), dsrc = buf_rand(r, rows * ld, dt, -1, 1);
      BOTH(T->moe_route_fwd(NULL, (char *)P(src) + 2 * d * st_kdt_size(dt), ld, P(probs),
                            P(sel), P(logits), B, nt, E, k, cap, norm, dt));
      same_bytes("moe sel", &sel);
      same("moe probs", &probs, rows * E, ST_KDT_F32, 1e-6);
      same("moe stream with gates", &src, rows * ld, dt, 1e-6);
      BOTH(T->moe_route_bwd(NULL, P(dl), (char *)P(dsrc) + 2 * d * st_kdt_size(dt), ld,
                            P(probs), P(sel), (int)rows, E, k, norm, dt));
      same("moe dlogits", &dl, rows * E, dt, 1e-6);
      /* expert 5 of the routed stream */
      size_t slots = (size_t)B * cap;
      Buf x = buf_zero(slots * d * 4), idx = buf_zero(slots * 4), gate = buf_zero(slots * 4);
      BOTH(T->moe_gather(NULL, P(x), P(idx), P(gate), P(src), ld, d, 2 * d + 5, B, nt, cap, d,
                         dt));
      same_bytes("moe idx", &idx);
      same_bytes("moe gate", &gate);
      same_bytes("moe x", &x);
      Buf y = buf_rand(r, slots * d, dt, -1, 1), dy = buf_zero(slots * d * 4);
      BOTH(T->moe_scatter(NULL, P(src), ld, 0, P(y), P(idx), P(gate), B, nt, cap, d, dt));
      same("moe scatter", &src, rows * ld, dt, 1e-6);
      BOTH(T->moe_gather_grad(NULL, P(dy), P(dsrc), ld, 2 * d + 5, P(src), ld, P(y), P(idx),
                              P(gate), B, nt, cap, d, dt));
      same("moe dy", &dy, slots * d, dt, 1e-6);
      same("moe dgates", &dsrc, rows * ld, dt, 1e-6);
      Buf list[] = {logits, src, probs, sel, dl, dsrc, x, idx, gate, y, dy};
      for (size_t i = 0; i < G_N_ELEMENTS(list); i++)
        buf_free(&list[i]);
    }
  }
}

static void
test_checks(void)
{
  void *d = NULL;
  g_assert_cmpint(C->alloc(&d, 64), ==, 0);
  g_assert_cmpint(C->rope(NULL, d, 1, 1, 1, 4, 4, 3, 10000.0f, 0, ST_KDT_F32), ==, ST_K_EINVAL);
  g_assert_cmpint(C->flash_attn_fwd(NULL, d, d, d, 1, 1, 3, 2, 4, 1.0f, 1, 0, ST_KDT_F32), ==,
                  ST_K_EINVAL);
  g_assert_cmpint(C->flash_attn_fwd(NULL, d, d, d, 1, 1, 1, 1, ST_K_MAX_HEAD_DIM + 1, 1.0f, 1, 0,
                                    ST_KDT_F32),
                  ==, ST_K_EINVAL);
  g_assert_cmpint(C->moe_route_fwd(NULL, d, 2, d, d, d, 1, 1, 2, 3, 1, 1, ST_KDT_F32), ==,
                  ST_K_EINVAL);
  g_assert_cmpint(C->glu_fwd(NULL, d, d, 1, 1, 2, ST_KDT_F32), ==, ST_K_EINVAL);
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
  g_test_add_func("/gpu/kernels/llm/rmsnorm-glu", test_rmsnorm_glu);
  g_test_add_func("/gpu/kernels/llm/rope-copy", test_rope_copy);
  g_test_add_func("/gpu/kernels/llm/attention", test_attention);
  g_test_add_func("/gpu/kernels/llm/moe", test_moe);
  g_test_add_func("/gpu/kernels/llm/checks", test_checks);
  int status = g_test_run();
  gpu->backend->close(gpu);
  return status;
}
