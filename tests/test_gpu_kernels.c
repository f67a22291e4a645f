/* test_gpu_kernels.c: every CUDA kernel (kernels/cuda/) against its host
 * reference (kernels/ref/), on the same inputs, sizes larger than a warp (and
 * than a block where a kernel reduces), fp32 and bf16. Skips when CUDA is not
 * built in or no device answers (label gpu).
 *
 * Tolerances, relative to each element plus a fraction of the tensor's
 * largest magnitude:
 * - exact where both sides do the same operations in the same order: masks,
 *   argmax, copies, permutations, embeddings and their scatter-add (a loop
 *   over ids on both), pooling gathers, the sparse gathers;
 * - fp32 1e-6: element-wise arithmetic (nvcc fuses a * b + c into one FMA,
 *   the host compiler may not: one rounding apart; tanhf and expf differ by
 *   an ulp or two);
 * - fp32 1e-5: reductions (norms, softmax, cross-entropy, bias gradients,
 *   optimizers), whose sums run in another order on the GPU;
 * - fp32 1e-4: gemm (cuBLAS blocks the k-sum differently; k up to 300);
 * - bf16 1e-2 of the element plus 1e-2 of the largest: results are rounded
 *   to bf16 (2^-9 relative) on both sides, so a different fp32 sum can land
 *   one bf16 step away.
 */
#include "gpu_check.h"

/* ---- tests ------------------------------------------------------------------------ */

static void
test_elementwise(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(1);
  const size_t n = 100003; /* many blocks, a ragged tail */
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d], other = DTS[1 - d];
    Buf a = buf_rand(r, n, dt, -3, 3), b = buf_rand(r, n, dt, -3, 3), y = buf_zero(n * 4);
    Buf m = buf_zero(n), o = buf_zero(n * 4);
    BOTH(T->convert(NULL, P(y), other, P(a), dt, n));
    same("convert", &y, n, other, 0);
    BOTH(T->axpy(NULL, P(a), dt, 0.75f, P(b), dt, n));
    same("axpy", &a, n, dt, 1e-6);
    BOTH(T->add(NULL, P(a), P(a), P(b), dt, n));
    same("add", &a, n, dt, 1e-6);
    BOTH(T->scale(NULL, P(b), dt, -1.5f, n));
    same("scale", &b, n, dt, 1e-6);
    BOTH(T->relu_fwd(NULL, P(o), P(a), dt, n));
    same("relu_fwd", &o, n, dt, 0);
    BOTH(T->relu_bwd(NULL, P(y), P(b), P(o), dt, n));
    same("relu_bwd", &y, n, dt, 0);
    BOTH(T->gelu_fwd(NULL, P(o), P(a), dt, n));
    same("gelu_fwd", &o, n, dt, 1e-6);
    BOTH(T->gelu_bwd(NULL, P(y), P(b), P(a), dt, n));
    same("gelu_bwd", &y, n, dt, 1e-6);
    BOTH(T->dropout_fwd(NULL, P(o), P(m), P(a), 0.3f, 777, dt, n));
    same_bytes("dropout mask", &m);
    same("dropout_fwd", &o, n, dt, 1e-6);
    BOTH(T->dropout_bwd(NULL, P(y), P(b), P(m), 0.3f, dt, n));
    same("dropout_bwd", &y, n, dt, 1e-6);
    Buf list[] = {a, b, y, m, o};
    for (size_t i = 0; i < G_N_ELEMENTS(list); i++)
      buf_free(&list[i]);
  }
  Buf z = buf_zero(64);
  BOTH(T->memset0(NULL, P(z), 64));
  same_bytes("memset0", &z);
  buf_free(&z);
}

static void
test_gemm(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(2);
  const int m = 67, n = 45, k = 300, batch = 3;
  for (int d = 0; d < 2; d++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        StKDtype dt = DTS[d];
        int shared = ta; /* A shared across the batch (stride 0) half the time */
        int64_t sa = shared ? 0 : (int64_t)m * k, sb = (int64_t)k * n, sc = (int64_t)m * n;
        Buf a = buf_rand(r, (size_t)m * k * batch, dt, -1, 1);
        Buf b = buf_rand(r, (size_t)k * n * batch, dt, -1, 1);
        Buf c = buf_rand(r, (size_t)m * n * batch, dt, -1, 1);
        float beta = tb ? 0.5f : 0.0f;
        BOTH(T->gemm(NULL, ta, tb, m, n, k, 1.25f, P(a), P(b), beta, P(c), dt, batch, sa, sb, sc));
        same("gemm", &c, (size_t)m * n * batch, dt, 1e-4);
        buf_free(&a);
        buf_free(&b);
        buf_free(&c);
      }
}

static void
test_bias(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(3);
  const int rows = 1000, cols = 77, n = 5, ch = 33, hw = 49;
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    Buf y = buf_rand(r, (size_t)rows * cols, dt, -1, 1), bias = buf_rand(r, cols, dt, -1, 1);
    BOTH(T->bias_add(NULL, P(y), P(bias), rows, cols, dt));
    same("bias_add", &y, (size_t)rows * cols, dt, 1e-6);
    BOTH(T->bias_grad(NULL, P(bias), P(y), rows, cols, dt));
    same("bias_grad", &bias, cols, dt, 1e-5);
    Buf z = buf_rand(r, (size_t)n * ch * hw, dt, -1, 1), cb = buf_rand(r, ch, dt, -1, 1);
    BOTH(T->bias_add_chw(NULL, P(z), P(cb), n, ch, hw, dt));
    same("bias_add_chw", &z, (size_t)n * ch * hw, dt, 1e-6);
    BOTH(T->bias_grad_chw(NULL, P(cb), P(z), n, ch, hw, dt));
    same("bias_grad_chw", &cb, ch, dt, 1e-5);
    buf_free(&y);
    buf_free(&bias);
    buf_free(&z);
    buf_free(&cb);
  }
}

static void
test_norms(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(4);
  const int rows = 300, cols = 777;     /* layer norm: more columns than a block's threads */
  const int n = 6, c = 40, hw = 13 * 13; /* batch norm */
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    for (int bn = 0; bn < 2; bn++) {
      int groups = bn ? c : rows, feats = bn ? c : cols;
      size_t total = bn ? (size_t)n * c * hw : (size_t)rows * cols;
      Buf x = buf_rand(r, total, dt, -2, 3), dy = buf_rand(r, total, dt, -1, 1);
      Buf g = buf_rand(r, feats, dt, 0.5, 1.5), b = buf_rand(r, feats, dt, -1, 1);
      Buf y = buf_zero(total * 4), dx = buf_zero(total * 4);
      Buf dg = buf_rand(r, feats, dt, -1, 1), db = buf_rand(r, feats, dt, -1, 1);
      Buf mean = buf_zero(groups * 4), rstd = buf_zero(groups * 4);
      if (bn) {
        BOTH(T->batchnorm_fwd(NULL, P(y), P(mean), P(rstd), P(x), P(g), P(b), n, c, hw, dt));
        BOTH(T->batchnorm_bwd(NULL, P(dx), P(dg), P(db), P(dy), P(x), P(mean), P(rstd), P(g), n,
                              c, hw, dt));
      } else {
        BOTH(T->layernorm_fwd(NULL, P(y), P(mean), P(rstd), P(x), P(g), P(b), rows, cols, dt));
        BOTH(T->layernorm_bwd(NULL, P(dx), P(dg), P(db), P(dy), P(x), P(mean), P(rstd), P(g),
                              rows, cols, dt));
      }
      const char *name = bn ? "batchnorm" : "layernorm";
      same(name, &y, total, dt, 1e-5);
      same(name, &mean, groups, ST_KDT_F32, 1e-5);
      same(name, &rstd, groups, ST_KDT_F32, 1e-5);
      same(name, &dx, total, dt, 1e-5);
      same(name, &dg, feats, dt, 1e-5);
      same(name, &db, feats, dt, 1e-5);
      Buf list[] = {x, dy, g, b, y, dx, dg, db, mean, rstd};
      for (size_t i = 0; i < G_N_ELEMENTS(list); i++)
        buf_free(&list[i]);
    }
  }
}

static void
test_softmax(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(5);
  const int cols = 100, rows = 4 * cols; /* four attention blocks of 100 queries */
  const int ce_rows = 70, classes = 1001;
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    for (int causal = 0; causal < 2; causal++) {
      size_t total = (size_t)rows * cols;
      Buf x = buf_rand(r, total, dt, -6, 6), dy = buf_rand(r, total, dt, -1, 1);
      Buf y = buf_zero(total * 4), dx = buf_zero(total * 4);
      BOTH(T->softmax_fwd(NULL, P(y), P(x), 0.125f, causal, rows, cols, dt));
      same("softmax_fwd", &y, total, dt, 1e-5);
      BOTH(T->softmax_bwd(NULL, P(dx), P(dy), P(y), 0.125f, rows, cols, dt));
      same("softmax_bwd", &dx, total, dt, 1e-5);
      Buf list[] = {x, dy, y, dx};
      for (size_t i = 0; i < G_N_ELEMENTS(list); i++)
        buf_free(&list[i]);
    }
    g_autofree int32_t *t = g_new(int32_t, ce_rows);
    for (int i = 0; i < ce_rows; i++)
      t[i] = i == 5 ? -1 : g_rand_int_range(r, 0, classes); /* row 5 ignored */
    size_t total = (size_t)ce_rows * classes;
    Buf logits = buf_rand(r, total, dt, -8, 8), targets = buf_ints(t, ce_rows);
    Buf probs = buf_zero(total * 4), loss = buf_zero(4), dl = buf_zero(total * 4);
    BOTH(T->softmax_ce_fwd(NULL, P(loss), P(probs), P(logits), P(targets), ce_rows, classes, dt));
    same("softmax_ce_fwd loss", &loss, 1, ST_KDT_F32, 1e-5);
    same("softmax_ce_fwd probs", &probs, total, ST_KDT_F32, 1e-5);
    BOTH(T->softmax_ce_bwd(NULL, P(dl), P(probs), P(targets), 0.01f, ce_rows, classes, dt));
    same("softmax_ce_bwd", &dl, total, dt, 1e-5);
    Buf list[] = {logits, targets, probs, loss, dl};
    for (size_t i = 0; i < G_N_ELEMENTS(list); i++)
      buf_free(&list[i]);
  }
}

static void
test_embeddings(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(6);
  const int vocab = 50, dim = 96, n = 500, batch = 4, rows = 33;
  g_autofree int32_t *ids = g_new(int32_t, n);
  for (int i = 0; i < n; i++) /* repeated ids, and padding */
    ids[i] = i % 17 == 3 ? -1 : g_rand_int_range(r, 0, vocab);
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    Buf table = buf_rand(r, (size_t)vocab * dim, dt, -1, 1), bid = buf_ints(ids, n);
    Buf out = buf_zero((size_t)n * dim * 4), dy = buf_rand(r, (size_t)n * dim, dt, -1, 1);
    BOTH(T->embedding_fwd(NULL, P(out), P(table), P(bid), n, dim, 0, vocab, dt));
    same("embedding_fwd", &out, (size_t)n * dim, dt, 0);
    BOTH(T->embedding_bwd(NULL, P(table), P(dy), P(bid), n, dim, 0, vocab, dt));
    same("embedding_bwd", &table, (size_t)vocab * dim, dt, 0);
    /* a tensor-parallel rank's slice of the vocabulary: ids [20, 40) */
    BOTH(T->embedding_fwd(NULL, P(out), P(table), P(bid), n, dim, 20, 20, dt));
    same("embedding_fwd slice", &out, (size_t)n * dim, dt, 0);
    BOTH(T->embedding_bwd(NULL, P(table), P(dy), P(bid), n, dim, 20, 20, dt));
    same("embedding_bwd slice", &table, (size_t)vocab * dim, dt, 0);
    size_t per = (size_t)rows * dim;
    Buf x = buf_rand(r, per * batch, dt, -1, 1), pos = buf_rand(r, per, dt, -1, 1);
    BOTH(T->add_rows(NULL, P(x), P(pos), batch, rows, dim, dt));
    same("add_rows", &x, per * batch, dt, 1e-6);
    BOTH(T->add_rows_bwd(NULL, P(pos), P(x), batch, rows, dim, dt));
    same("add_rows_bwd", &pos, per, dt, 1e-6);
    Buf list[] = {table, bid, out, dy, x, pos};
    for (size_t i = 0; i < G_N_ELEMENTS(list); i++)
      buf_free(&list[i]);
  }
}

static void
test_permute4(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(7);
  const int dims[4] = {3, 17, 12, 33};
  const int perms[][4] = {{2, 0, 1, 3}, {1, 2, 0, 3}, {0, 2, 1, 3}, {3, 2, 1, 0}};
  size_t total = 3 * 17 * 12 * 33;
  for (int d = 0; d < 2; d++)
    for (size_t p = 0; p < G_N_ELEMENTS(perms); p++) {
      StKDtype dt = DTS[d];
      Buf x = buf_rand(r, total, dt, -1, 1), y = buf_zero(total * 4);
      BOTH(T->permute4(NULL, P(y), P(x), dims, perms[p], dt));
      same("permute4", &y, total, dt, 0);
      buf_free(&x);
      buf_free(&y);
    }
}

static void
test_conv_pool(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(8);
  const int c = 5, h = 23, w = 19;
  const int windows[][3] = {{3, 1, 1}, {3, 2, 1}, {7, 2, 3}, {2, 2, 0}, {1, 1, 0}};
  for (int d = 0; d < 2; d++)
    for (size_t t = 0; t < G_N_ELEMENTS(windows); t++) {
      StKDtype dt = DTS[d];
      int k = windows[t][0], s = windows[t][1], p = windows[t][2];
      int ho = (h + 2 * p - k) / s + 1, wo = (w + 2 * p - k) / s + 1;
      size_t nx = (size_t)c * h * w, ncols = (size_t)c * k * k * ho * wo, ny = (size_t)c * ho * wo;
      Buf x = buf_rand(r, nx, dt, -1, 1), cols = buf_zero(ncols * 4);
      Buf dx = buf_rand(r, nx, dt, -1, 1);
      BOTH(T->im2col(NULL, P(cols), P(x), c, h, w, k, s, p, dt));
      same("im2col", &cols, ncols, dt, 0);
      BOTH(T->col2im(NULL, P(dx), P(cols), c, h, w, k, s, p, dt));
      same("col2im", &dx, nx, dt, 0);
      Buf y = buf_zero(ny * 4), am = buf_zero(ny * 4), dy = buf_rand(r, ny, dt, -1, 1);
      BOTH(T->maxpool_fwd(NULL, P(y), P(am), P(x), c, h, w, k, s, p, dt));
      same("maxpool_fwd", &y, ny, dt, 0);
      same_bytes("maxpool argmax", &am);
      BOTH(T->maxpool_bwd(NULL, P(dx), P(dy), P(am), c, h, w, k, s, p, dt));
      same("maxpool_bwd", &dx, nx, dt, 0);
      BOTH(T->avgpool_fwd(NULL, P(y), P(x), c, h, w, k, s, p, dt));
      same("avgpool_fwd", &y, ny, dt, 0);
      BOTH(T->avgpool_bwd(NULL, P(dx), P(dy), c, h, w, k, s, p, dt));
      same("avgpool_bwd", &dx, nx, dt, 0);
      Buf list[] = {x, cols, dx, y, am, dy};
      for (size_t i = 0; i < G_N_ELEMENTS(list); i++)
        buf_free(&list[i]);
    }
  const int sizes[][2] = {{7, 1}, {23, 7}, {5, 9}}; /* down, uneven, up */
  for (int d = 0; d < 2; d++)
    for (size_t t = 0; t < G_N_ELEMENTS(sizes); t++) {
      StKDtype dt = DTS[d];
      int in = sizes[t][0], out = sizes[t][1];
      size_t nx = (size_t)c * in * in, ny = (size_t)c * out * out;
      Buf x = buf_rand(r, nx, dt, -1, 1), y = buf_zero(ny * 4), dx = buf_zero(nx * 4);
      BOTH(T->adaptive_avgpool_fwd(NULL, P(y), P(x), c, in, in, out, out, dt));
      same("adaptive_avgpool_fwd", &y, ny, dt, 0);
      BOTH(T->adaptive_avgpool_bwd(NULL, P(dx), P(y), c, in, in, out, out, dt));
      same("adaptive_avgpool_bwd", &dx, nx, dt, 0);
      buf_free(&x);
      buf_free(&y);
      buf_free(&dx);
    }
}

static void
test_optimizers(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(9);
  const size_t n = 5000;
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    Buf master = buf_rand(r, n, ST_KDT_F32, -1, 1), m = buf_zero(n * 4), v = buf_zero(n * 4);
    Buf mom = buf_zero(n * 4), param = buf_zero(n * 4);
    for (int t = 1; t <= 3; t++) {
      Buf g = buf_rand(r, n, dt, -1, 1);
      BOTH(T->adamw(NULL, P(master), P(m), P(v), P(g), dt, P(param), dt, n, 1e-3f, 0.9f, 0.95f,
                    1e-8f, 0.1f, t, 0.5f));
      BOTH(T->sgd(NULL, P(master), P(mom), P(g), dt, P(param), dt, n, 1e-2f, 0.9f, 1e-4f, 1.0f));
      buf_free(&g);
    }
    same("optimizer master", &master, n, ST_KDT_F32, 1e-5);
    same("adamw m", &m, n, ST_KDT_F32, 1e-5);
    same("adamw v", &v, n, ST_KDT_F32, 1e-5);
    same("sgd momentum", &mom, n, ST_KDT_F32, 1e-5);
    same("optimizer param", &param, n, dt, 1e-5);
    Buf list[] = {master, m, v, mom, param};
    for (size_t i = 0; i < G_N_ELEMENTS(list); i++)
      buf_free(&list[i]);
  }
}

static void
test_sparse(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(10);
  const size_t dense_n = 10000, n = 3000;
  g_autofree int32_t *idx = g_new(int32_t, n);
  for (size_t i = 0; i < n; i++) /* distinct, with some padding */
    idx[i] = i % 101 == 7 ? -1 : (int32_t)(i * 3 + 1);
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d], vdt = DTS[1 - d];
    Buf dense = buf_rand(r, dense_n, dt, -1, 1), values = buf_zero(n * 4), index = buf_ints(idx, n);
    BOTH(T->compress(NULL, P(values), vdt, P(dense), dt, P(index), n));
    same("compress", &values, n, vdt, 0);
    BOTH(T->scale(NULL, P(values), vdt, 2.0f, n));
    BOTH(T->expand(NULL, P(dense), dt, P(values), vdt, P(index), n));
    same("expand", &dense, dense_n, dt, 0);
    buf_free(&dense);
    buf_free(&values);
    buf_free(&index);
  }
}

/* Bad arguments are refused before anything is enqueued, as on the host. */
static void
test_checks(void)
{
  int d[4] = {1, 2, 3, 4}, bad[4] = {0, 0, 1, 2};
  g_assert_cmpint(C->gemm(NULL, 0, 0, -1, 1, 1, 1, NULL, NULL, 0, NULL, ST_KDT_F32, 1, 0, 0, 0), ==,
                  ST_K_EINVAL);
  g_assert_cmpint(C->add(NULL, NULL, NULL, NULL, ST_KDT_F32, 5), ==, ST_K_EINVAL);
  g_assert_cmpint(C->add(NULL, NULL, NULL, NULL, ST_KDT_F32, 0), ==, 0);
  g_assert_cmpint(C->permute4(NULL, d, d, d, bad, ST_KDT_F32), ==, ST_K_EINVAL);
  g_assert_cmpint(C->copy(NULL, d, d, 4, 5), ==, ST_K_EINVAL);
  g_assert_cmpint(C->dropout_fwd(NULL, d, NULL, d, 1.0f, 1, ST_KDT_F32, 4), ==, ST_K_EINVAL);
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
  g_test_add_func("/gpu/kernels/elementwise", test_elementwise);
  g_test_add_func("/gpu/kernels/gemm", test_gemm);
  g_test_add_func("/gpu/kernels/bias", test_bias);
  g_test_add_func("/gpu/kernels/norms", test_norms);
  g_test_add_func("/gpu/kernels/softmax", test_softmax);
  g_test_add_func("/gpu/kernels/embeddings", test_embeddings);
  g_test_add_func("/gpu/kernels/permute4", test_permute4);
  g_test_add_func("/gpu/kernels/conv-pool", test_conv_pool);
  g_test_add_func("/gpu/kernels/optimizers", test_optimizers);
  g_test_add_func("/gpu/kernels/sparse", test_sparse);
  g_test_add_func("/gpu/kernels/checks", test_checks);
  int status = g_test_run();
  gpu->backend->close(gpu);
  return status;
}
