/* test_gpu_kernels_tp.c: the CUDA table's tensor-parallel kernels
 * (kernels/cuda/split.cu) against the host table (kernels/ref/split.c), on
 * sizes beyond a block: the MAX reduction's kernel, and each step of the
 * cross-entropy over a vocabulary slice. Tolerance 1e-5 relative in fp32
 * (exp and log in a different order of summation over a block), 1e-2 in
 * bf16 (test_gpu_kernels.c explains them). Skips without a GPU. */
#include "gpu_check.h"

static void
test_maximum(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(2);
  const size_t n = 100003;
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    Buf y = buf_rand(r, n, dt, -5, 5), x = buf_rand(r, n, dt, -5, 5);
    BOTH(T->maximum(NULL, P(y), P(x), dt, n));
    same("maximum", &y, n, dt, 0);
    buf_free(&y);
    buf_free(&x);
  }
}

static void
test_ce_split(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(3);
  /* 70 rows of a 1000-class slice starting at class 2000 of 4000; targets
   * inside and outside the slice, one ignored */
  const int rows = 70, classes = 1000, first = 2000;
  g_autofree int32_t *t = g_new(int32_t, rows);
  for (int i = 0; i < rows; i++)
    t[i] = i == 9 ? -1 : g_rand_int_range(r, 0, 4000);
  t[1] = first;
  t[2] = first + classes - 1;
  size_t total = (size_t)rows * classes;
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    Buf logits = buf_rand(r, total, dt, -8, 8), targets = buf_ints(t, rows);
    Buf exps = buf_zero(total * 4), stats = buf_zero(4 * (size_t)rows * 4);
    Buf loss = buf_zero(4), dl = buf_zero(total * 4);
    /* the last 137 classes a vocabulary's padding when d = 1 */
    int valid = d == 1 ? classes - 137 : classes;
    BOTH(T->ce_split_fwd(NULL, P(exps), P(stats), P(logits), P(targets), first, rows, classes,
                         valid, dt));
    same("ce_split_fwd exps", &exps, total, ST_KDT_F32, 1e-5);
    same("ce_split_fwd stats", &stats, 4 * (size_t)rows, ST_KDT_F32, 1e-5);
    /* a global max one above the local one, as another rank might give */
    float *h = stats.h;
    for (int i = 0; i < rows; i++)
      h[rows + i] += 1.0f;
    g_assert_cmpint(C->copy(NULL, stats.d, stats.h, stats.bytes, 1), ==, 0);
    BOTH(T->ce_split_rescale(NULL, P(stats), rows));
    same("ce_split_rescale", &stats, 4 * (size_t)rows, ST_KDT_F32, 1e-5);
    BOTH(T->ce_split_loss(NULL, P(loss), P(stats), P(targets), rows));
    same("ce_split_loss", &loss, 1, ST_KDT_F32, 1e-5);
    BOTH(T->ce_split_bwd(NULL, P(dl), P(exps), P(stats), P(targets), first, 0.01f, rows,
                         classes, dt));
    same("ce_split_bwd", &dl, total, dt, 1e-5);
    Buf list[] = {logits, targets, exps, stats, loss, dl};
    for (size_t i = 0; i < G_N_ELEMENTS(list); i++)
      buf_free(&list[i]);
  }
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
  g_test_add_func("/gpu/kernels/tp/maximum", test_maximum);
  g_test_add_func("/gpu/kernels/tp/ce-split", test_ce_split);
  int status = g_test_run();
  gpu->backend->close(gpu);
  return status;
}
