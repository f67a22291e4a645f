/* test_kernels_tp.c: the host kernel table's tensor-parallel kernels
 * (kernels/ref/split.c): the cross-entropy over logits split by classes,
 * run as t ranks would run it (each on its slice, the MAX and SUM
 * reductions done here as the comm backend does them), against the naive
 * formula in double and against the unsplit softmax_ce_fwd/bwd; its
 * gradient against central differences of the split loss; and the MAX
 * reduction's kernel. Tolerances: kernel_check.h. */
#include "kernel_check.h"

/* ---- the maximum ----------------------------------------------------------------- */

static void
test_maximum(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(1);
  const size_t n = 37;
  g_autofree float *a = randu(r, n, -3, 3), *b = randu(r, n, -3, 3);
  g_autofree double *want = g_new(double, n);
  for (size_t i = 0; i < n; i++)
    want[i] = fmax(a[i], b[i]);
  for (gsize d = 0; d < G_N_ELEMENTS(DTS); d++) {
    StKDtype dt = DTS[d];
    g_autofree float *ar = g_memdup2(a, n * 4), *br = g_memdup2(b, n * 4);
    if (dt == ST_KDT_BF16) {
      round_bf16(ar, n);
      round_bf16(br, n);
    }
    g_autofree double *w = g_new(double, n);
    for (size_t i = 0; i < n; i++)
      w[i] = fmax(ar[i], br[i]);
    g_autofree void *y = to_dt(ar, n, dt), *x = to_dt(br, n, dt);
    g_assert_cmpint(K->maximum(NULL, y, x, dt, n), ==, 0);
    assert_close("maximum", y, dt, w, n, 0, 0);
  }
  g_assert_cmpint(K->maximum(NULL, NULL, NULL, ST_KDT_F32, 0), ==, 0);
  g_assert_cmpint(K->maximum(NULL, NULL, a, ST_KDT_F32, 1), ==, ST_K_EINVAL);
}

/* ---- the split cross-entropy ------------------------------------------------------ */

/* Logits [rows, V] split over t ranks by classes: rank i holds classes
 * [i V / t, (i + 1) V / t). */
typedef struct {
  int rows, V, t;
  float *x;          /* [rows, V] */
  int32_t *targets;  /* [rows] */
  float scale;
  int vocab;         /* classes [0, vocab) are real, the rest padding; 0: all */
} Ce;

/* Of rank i's classes, the real ones. */
static int
valid_of(const Ce *q, int i)
{
  int v = q->V / q->t;
  return q->vocab > 0 ? CLAMP(q->vocab - i * v, 0, v) : v;
}

/* Slice i of the logits, [rows, V / t] in dt (transfer full). */
static void *
slice_of(const Ce *q, int i, StKDtype dt)
{
  int v = q->V / q->t;
  g_autofree float *s = g_new(float, (size_t)q->rows * v);
  for (int r = 0; r < q->rows; r++)
    memcpy(s + (size_t)r * v, q->x + (size_t)r * q->V + (size_t)i * v, (size_t)v * 4);
  return to_dt(s, (size_t)q->rows * v, dt);
}

/* The group's forward: every rank's fwd, the MAX of stats[1], the rescale,
 * the SUM of stats[2..3], the loss (each rank's is the same: rank 0's is
 * returned). exps and stats: per rank, kept for the backward. */
static float
split_forward(const Ce *q, StKDtype dt, void **logits, float **exps, float **stats)
{
  int v = q->V / q->t, R = q->rows;
  for (int i = 0; i < q->t; i++)
    g_assert_cmpint(K->ce_split_fwd(NULL, exps[i], stats[i], logits[i], q->targets, i * v, R, v,
                                    valid_of(q, i), dt), ==, 0);
  for (int i = 1; i < q->t; i++) /* all-reduce MAX, in member order */
    g_assert_cmpint(K->maximum(NULL, stats[0] + R, stats[i] + R, ST_KDT_F32, (size_t)R), ==, 0);
  for (int i = 1; i < q->t; i++)
    memcpy(stats[i] + R, stats[0] + R, (size_t)R * 4);
  for (int i = 0; i < q->t; i++)
    g_assert_cmpint(K->ce_split_rescale(NULL, stats[i], R), ==, 0);
  for (int i = 1; i < q->t; i++) /* all-reduce SUM of [s, x_target] */
    g_assert_cmpint(K->axpy(NULL, stats[0] + 2 * R, ST_KDT_F32, 1.0f, stats[i] + 2 * R,
                            ST_KDT_F32, 2 * (size_t)R), ==, 0);
  for (int i = 1; i < q->t; i++)
    memcpy(stats[i] + 2 * R, stats[0] + 2 * R, 2 * (size_t)R * 4);
  float loss = 0;
  for (int i = 0; i < q->t; i++) {
    float mine = 0;
    g_assert_cmpint(K->ce_split_loss(NULL, &mine, stats[i], q->targets, R), ==, 0);
    if (i == 0)
      loss = mine;
    g_assert_cmpfloat(mine, ==, loss); /* every rank knows the same loss */
  }
  return loss;
}

typedef struct {
  Ce *q;
  float *exps[4], *stats[4];
} CeRun;

static double
split_loss(gpointer data)
{
  CeRun *run = data;
  void *logits[4];
  for (int i = 0; i < run->q->t; i++)
    logits[i] = slice_of(run->q, i, ST_KDT_F32);
  double loss = split_forward(run->q, ST_KDT_F32, logits, run->exps, run->stats);
  for (int i = 0; i < run->q->t; i++)
    g_free(logits[i]);
  return loss;
}

static void
test_ce_split(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(5);
  /* 9 rows, 12 classes over 3 ranks; a target on every rank, one ignored
   * (-1), logits far apart so that the local maxima differ by several
   * units (the rescale matters). */
  Ce q = {.rows = 9, .V = 12, .t = 3, .scale = 0.25f};
  size_t n = (size_t)q.rows * q.V;
  g_autofree float *x = randu(r, n, -4, 4);
  for (int row = 0; row < q.rows; row++)
    x[(size_t)row * q.V + (row * 5) % q.V] += 6.0f;
  int32_t targets[9] = {0, 5, 11, 4, -1, 8, 3, 7, 10};
  q.x = x;
  q.targets = targets;
  int v = q.V / q.t;
  for (gsize d = 0; d < G_N_ELEMENTS(DTS); d++) {
    StKDtype dt = DTS[d];
    g_autofree float *xr = g_memdup2(x, n * 4);
    if (dt == ST_KDT_BF16)
      round_bf16(xr, n);
    /* naive: loss = sum over kept rows of log sum exp - x_t; dx = (p - onehot) scale */
    double want_loss = 0;
    g_autofree double *want_dx = g_new0(double, n);
    for (int row = 0; row < q.rows; row++) {
      const float *xs = xr + (size_t)row * q.V;
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j < q.V; j++)
        mx = fmax(mx, xs[j]);
      for (int j = 0; j < q.V; j++)
        sum += exp(xs[j] - mx);
      if (targets[row] < 0)
        continue;
      want_loss += log(sum) + mx - xs[targets[row]];
      for (int j = 0; j < q.V; j++)
        want_dx[(size_t)row * q.V + j] = (exp(xs[j] - mx) / sum - (j == targets[row])) * q.scale;
    }
    Ce qd = q;
    qd.x = xr;
    void *logits[3];
    float *exps[3], *stats[3];
    for (int i = 0; i < q.t; i++) {
      logits[i] = slice_of(&qd, i, dt);
      exps[i] = g_new(float, (size_t)q.rows * v);
      stats[i] = g_new(float, 4 * (size_t)q.rows);
    }
    float loss = split_forward(&qd, dt, logits, exps, stats);
    g_assert_cmpfloat(fabs(loss - want_loss), <=, 1e-5 * fabs(want_loss));
    /* the same as the unsplit kernel (which rounds nothing more) */
    g_autofree void *whole = to_dt(xr, n, dt);
    g_autofree float *probs = g_new(float, n);
    float whole_loss = 0;
    g_assert_cmpint(K->softmax_ce_fwd(NULL, &whole_loss, probs, whole, targets, q.rows, q.V, dt),
                    ==, 0);
    g_assert_cmpfloat(fabs(loss - whole_loss), <=, 1e-5 * fabs(whole_loss));
    /* backward: each rank's slice of the whole gradient */
    for (int i = 0; i < q.t; i++) {
      g_autofree void *dl = g_malloc((size_t)q.rows * v * 4);
      g_assert_cmpint(K->ce_split_bwd(NULL, dl, exps[i], stats[i], targets, i * v, q.scale,
                                      q.rows, v, dt), ==, 0);
      g_autofree double *want = g_new(double, (size_t)q.rows * v);
      for (int row = 0; row < q.rows; row++)
        for (int j = 0; j < v; j++)
          want[(size_t)row * v + j] = want_dx[(size_t)row * q.V + i * v + j];
      assert_close("ce_split_bwd", dl, dt, want, (size_t)q.rows * v, tol_rel(dt, 1e-5),
                   tol_abs(dt));
    }
    for (int i = 0; i < q.t; i++) {
      g_free(logits[i]);
      g_free(exps[i]);
      g_free(stats[i]);
    }
  }
  /* the gradient against finite differences of the split loss (fp32) */
  CeRun run = {&q, {0}, {0}};
  for (int i = 0; i < q.t; i++) {
    run.exps[i] = g_new(float, (size_t)q.rows * v);
    run.stats[i] = g_new(float, 4 * (size_t)q.rows);
  }
  q.scale = 1.0f;
  split_loss(&run);
  g_autofree float *grad = g_new(float, n);
  for (int i = 0; i < q.t; i++) {
    g_autofree float *dl = g_new(float, (size_t)q.rows * v);
    g_assert_cmpint(K->ce_split_bwd(NULL, dl, run.exps[i], run.stats[i], targets, i * v, 1.0f,
                                    q.rows, v, ST_KDT_F32), ==, 0);
    for (int row = 0; row < q.rows; row++)
      memcpy(grad + (size_t)row * q.V + i * v, dl + (size_t)row * v, (size_t)v * 4);
  }
  check_fd("ce_split dlogits", split_loss, &run, x, n, grad);
  for (int i = 0; i < q.t; i++) {
    g_free(run.exps[i]);
    g_free(run.stats[i]);
  }
}

/* A vocabulary of 7 padded to 12 over 3 ranks (4 real classes on rank 0,
 * 3 on rank 1, none on rank 2): the split loss and gradient are the
 * unpadded softmax_ce's on the 7 real classes, the padding's gradient is
 * exactly 0. Without the padding left out the loss would be the one over
 * 12 classes, larger by about log(12 / 7) (asserted different). */
static void
test_ce_split_padded(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(7);
  enum { ROWS = 6, V = 12, VOCAB = 7, T = 3 };
  int v = V / T;
  g_autofree float *x = randu(r, (size_t)ROWS * V, -2, 2);
  int32_t targets[ROWS] = {0, 6, 3, 4, -1, 2};
  Ce q = {.rows = ROWS, .V = V, .t = T, .x = x, .targets = targets, .scale = 0.5f};
  g_autofree float *real = g_new(float, (size_t)ROWS * VOCAB);
  for (int row = 0; row < ROWS; row++)
    memcpy(real + (size_t)row * VOCAB, x + (size_t)row * V, VOCAB * 4);
  float want = 0;
  g_autofree float *probs = g_new(float, (size_t)ROWS * VOCAB);
  g_autofree float *want_dx = g_new(float, (size_t)ROWS * VOCAB);
  g_assert_cmpint(K->softmax_ce_fwd(NULL, &want, probs, real, targets, ROWS, VOCAB, ST_KDT_F32),
                  ==, 0);
  g_assert_cmpint(K->softmax_ce_bwd(NULL, want_dx, probs, targets, q.scale, ROWS, VOCAB,
                                    ST_KDT_F32), ==, 0);
  void *logits[T];
  float *exps[T], *stats[T];
  for (int i = 0; i < T; i++) {
    logits[i] = slice_of(&q, i, ST_KDT_F32);
    exps[i] = g_new(float, (size_t)ROWS * v);
    stats[i] = g_new(float, 4 * (size_t)ROWS);
  }
  float all = split_forward(&q, ST_KDT_F32, logits, exps, stats);
  g_assert_cmpfloat(fabs(all - want), >, 0.5);
  q.vocab = VOCAB;
  float loss = split_forward(&q, ST_KDT_F32, logits, exps, stats);
  g_assert_cmpfloat(fabs(loss - want), <=, 1e-5 * fabs(want));
  for (int i = 0; i < T; i++) {
    g_autofree float *dl = g_new(float, (size_t)ROWS * v);
    g_assert_cmpint(K->ce_split_bwd(NULL, dl, exps[i], stats[i], targets, i * v, q.scale, ROWS,
                                    v, ST_KDT_F32), ==, 0);
    for (int row = 0; row < ROWS; row++)
      for (int j = 0; j < v; j++) {
        int c = i * v + j;
        float got = dl[(size_t)row * v + j];
        if (c >= VOCAB)
          g_assert_cmpfloat(got, ==, 0.0f);
        else
          g_assert_cmpfloat(fabsf(got - want_dx[(size_t)row * VOCAB + c]), <=, 1e-6);
      }
  }
  for (int i = 0; i < T; i++) {
    g_free(logits[i]);
    g_free(exps[i]);
    g_free(stats[i]);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  K = st_kernels_host();
  g_test_add_func("/kernels/tp/maximum", test_maximum);
  g_test_add_func("/kernels/tp/ce-split", test_ce_split);
  g_test_add_func("/kernels/tp/ce-split-padded", test_ce_split_padded);
  return g_test_run();
}
