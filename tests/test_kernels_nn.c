/* test_kernels_nn.c: the host kernel table's layer kernels against naive
 * formulas, and every backward against central finite differences of its
 * forward: normalization, softmax and the loss, embeddings and reshapes,
 * convolution and pooling (tolerances: kernel_check.h). */
#include "kernel_check.h"

/* ---- normalization -------------------------------------------------------- */

typedef struct {
  int bn;                 /* batch norm (n, c, hw) or layer norm (rows, cols) */
  int a, b, c;            /* bn: n, c, hw; ln: rows, cols, - */
  float *x, *g, *beta, *w, *y, *mean, *rstd;
  size_t n;
} Norm;

static double
norm_loss(gpointer data)
{
  Norm *q = data;
  int rc = q->bn ? K->batchnorm_fwd(NULL, q->y, q->mean, q->rstd, q->x, q->g, q->beta, q->a, q->b,
                                    q->c, ST_KDT_F32)
                 : K->layernorm_fwd(NULL, q->y, q->mean, q->rstd, q->x, q->g, q->beta, q->a, q->b,
                                    ST_KDT_F32);
  g_assert_cmpint(rc, ==, 0);
  return dot(q->w, q->y, q->n);
}

/* Naive norm in double: groups of elements (a row, or a channel over n, hw). */
static void
naive_norm(const Norm *q, const float *x, const float *g, const float *b, double *y)
{
  int groups = q->bn ? q->b : q->a;
  size_t per = q->n / (size_t)groups;
  for (int grp = 0; grp < groups; grp++) {
    double s = 0, s2 = 0;
    for (size_t j = 0; j < per; j++) {
      size_t idx = q->bn ? ((j / q->c) * q->b + grp) * q->c + j % q->c : grp * per + j;
      s += x[idx];
    }
    double mu = s / per;
    for (size_t j = 0; j < per; j++) {
      size_t idx = q->bn ? ((j / q->c) * q->b + grp) * q->c + j % q->c : grp * per + j;
      s2 += (x[idx] - mu) * (x[idx] - mu);
    }
    double rs = 1.0 / sqrt(s2 / per + 1e-5);
    for (size_t j = 0; j < per; j++) {
      size_t idx = q->bn ? ((j / q->c) * q->b + grp) * q->c + j % q->c : grp * per + j;
      int f = q->bn ? grp : (int)j; /* the affine parameter's index */
      y[idx] = (x[idx] - mu) * rs * g[f] + b[f];
    }
  }
}

static void
norm_case(int bn, int a, int b, int c)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(5);
  Norm q = {.bn = bn, .a = a, .b = b, .c = c};
  q.n = bn ? (size_t)a * b * c : (size_t)a * b;
  int feats = b, groups = bn ? b : a; /* affine over channels, or over columns */
  q.x = randu(r, q.n, -2, 3);
  q.g = randu(r, (size_t)feats, 0.5, 1.5);
  q.beta = randu(r, (size_t)feats, -0.5, 0.5);
  q.w = randu(r, q.n, -1, 1);
  q.y = g_new(float, q.n);
  q.mean = g_new(float, groups);
  q.rstd = g_new(float, groups);
  for (int d = 0; d < 2; d++) { /* forward against the naive formula */
    StKDtype dt = DTS[d];
    g_autofree float *x = g_memdup2(q.x, q.n * 4), *g = g_memdup2(q.g, feats * 4);
    g_autofree float *be = g_memdup2(q.beta, feats * 4);
    if (dt == ST_KDT_BF16) {
      round_bf16(x, q.n);
      round_bf16(g, feats);
      round_bf16(be, feats);
    }
    g_autofree double *want = g_new(double, q.n);
    naive_norm(&q, x, g, be, want);
    g_autofree void *dx = to_dt(x, q.n, dt), *dg = to_dt(g, feats, dt), *db = to_dt(be, feats, dt);
    g_autofree void *out = to_dt(x, q.n, dt);
    int rc = bn ? K->batchnorm_fwd(NULL, out, q.mean, q.rstd, dx, dg, db, a, b, c, dt)
                : K->layernorm_fwd(NULL, out, q.mean, q.rstd, dx, dg, db, a, b, dt);
    g_assert_cmpint(rc, ==, 0);
    assert_close(bn ? "batchnorm" : "layernorm", out, dt, want, q.n, tol_rel(dt, 1e-4),
                 tol_abs(dt));
  }
  norm_loss(&q); /* statistics of the unperturbed input, then the analytic gradients */
  g_autofree float *dx = g_new(float, q.n), *dg = g_new0(float, feats);
  g_autofree float *db = g_new0(float, feats);
  int rc = bn ? K->batchnorm_bwd(NULL, dx, dg, db, q.w, q.x, q.mean, q.rstd, q.g, a, b, c,
                                 ST_KDT_F32)
              : K->layernorm_bwd(NULL, dx, dg, db, q.w, q.x, q.mean, q.rstd, q.g, a, b, ST_KDT_F32);
  g_assert_cmpint(rc, ==, 0);
  const char *name = bn ? "batchnorm" : "layernorm";
  check_fd(name, norm_loss, &q, q.x, q.n, dx);
  check_fd(name, norm_loss, &q, q.g, feats, dg);
  check_fd(name, norm_loss, &q, q.beta, feats, db);
  g_free(q.x);
  g_free(q.g);
  g_free(q.beta);
  g_free(q.w);
  g_free(q.y);
  g_free(q.mean);
  g_free(q.rstd);
}

static void
test_layernorm(void)
{
  norm_case(0, 4, 45, 0);
}

static void
test_batchnorm(void)
{
  norm_case(1, 3, 4, 13);
}

/* ---- softmax and loss ----------------------------------------------------- */

typedef struct {
  int rows, cols, causal;
  float scale;
  float *x, *w, *y;
  int32_t *targets;
  float *probs;
} Soft;

static double
softmax_loss(gpointer data)
{
  Soft *q = data;
  g_assert_cmpint(K->softmax_fwd(NULL, q->y, q->x, q->scale, q->causal, q->rows, q->cols,
                                 ST_KDT_F32), ==, 0);
  return dot(q->w, q->y, (size_t)q->rows * q->cols);
}

static void
test_softmax(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(6);
  const int cols = 9, rows = 2 * cols; /* two attention blocks of 9 queries */
  const size_t n = (size_t)rows * cols;
  for (int causal = 0; causal < 2; causal++) {
    for (int d = 0; d < 2; d++) {
      StKDtype dt = DTS[d];
      g_autofree float *x = randu(r, n, -4, 4);
      if (dt == ST_KDT_BF16)
        round_bf16(x, n);
      g_autofree double *want = g_new0(double, n);
      for (int i = 0; i < rows; i++) {
        int valid = causal ? i % cols + 1 : cols;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < valid; j++)
          mx = fmax(mx, 0.5 * x[i * cols + j]);
        for (int j = 0; j < valid; j++)
          sum += exp(0.5 * x[i * cols + j] - mx);
        for (int j = 0; j < valid; j++)
          want[i * cols + j] = exp(0.5 * x[i * cols + j] - mx) / sum;
      }
      g_autofree void *dx = to_dt(x, n, dt), *out = to_dt(x, n, dt);
      g_assert_cmpint(K->softmax_fwd(NULL, out, dx, 0.5f, causal, rows, cols, dt), ==, 0);
      assert_close("softmax", out, dt, want, n, tol_rel(dt, 1e-5), tol_abs(dt));
    }
    Soft q = {.rows = rows, .cols = cols, .causal = causal, .scale = 0.5f,
              .x = randu(r, n, -2, 2), .w = randu(r, n, -1, 1), .y = g_new(float, n)};
    softmax_loss(&q);
    g_autofree float *grad = g_new(float, n);
    g_assert_cmpint(K->softmax_bwd(NULL, grad, q.w, q.y, q.scale, rows, cols, ST_KDT_F32), ==, 0);
    check_fd("softmax", softmax_loss, &q, q.x, n, grad);
    g_free(q.x);
    g_free(q.w);
    g_free(q.y);
  }
}

static double
ce_loss(gpointer data)
{
  Soft *q = data;
  float sum = 0.0f;
  g_assert_cmpint(K->softmax_ce_fwd(NULL, &sum, q->probs, q->x, q->targets, q->rows, q->cols,
                                    ST_KDT_F32), ==, 0);
  return sum * q->scale;
}

/* Cross-entropy: loss_sum += sum of -log softmax(x)[target]; a target out of
 * range (-1 here) ignores its row. */
static void
test_softmax_ce(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(7);
  const int rows = 6, classes = 40;
  const size_t n = (size_t)rows * classes;
  int32_t targets[6] = {0, 39, 7, -1, 20, 3};
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    g_autofree float *x = randu(r, n, -5, 5), *probs = g_new(float, n);
    if (dt == ST_KDT_BF16)
      round_bf16(x, n);
    double want = 0;
    for (int i = 0; i < rows; i++) {
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j < classes; j++)
        mx = fmax(mx, x[i * classes + j]);
      for (int j = 0; j < classes; j++)
        sum += exp(x[i * classes + j] - mx);
      if (targets[i] >= 0)
        want += log(sum) + mx - x[i * classes + targets[i]];
    }
    g_autofree void *dx = to_dt(x, n, dt);
    float loss = 1.0f; /* added to */
    g_assert_cmpint(K->softmax_ce_fwd(NULL, &loss, probs, dx, targets, rows, classes, dt), ==, 0);
    g_assert_cmpfloat_with_epsilon(loss, 1.0 + want, 1e-5 * (1.0 + want));
  }
  Soft q = {.rows = rows, .cols = classes, .scale = 0.25f, .x = randu(r, n, -3, 3),
            .targets = targets, .probs = g_new(float, n)};
  ce_loss(&q);
  g_autofree float *grad = g_new(float, n);
  g_assert_cmpint(K->softmax_ce_bwd(NULL, grad, q.probs, targets, q.scale, rows, classes,
                                    ST_KDT_F32), ==, 0);
  check_fd("softmax_ce", ce_loss, &q, q.x, n, grad);
  for (int j = 0; j < classes; j++) /* the ignored row */
    g_assert_cmpfloat(grad[3 * classes + j], ==, 0.0f);
  g_free(q.x);
  g_free(q.probs);
}

/* ---- embeddings and reshapes ----------------------------------------------- */

static void
test_embeddings(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(8);
  const int vocab = 11, dim = 37, n = 9, batch = 3, rows = 5;
  int32_t ids[9] = {3, 0, 10, 3, 3, -1, 7, 0, 10}; /* repeats, and a padding id */
  for (int d = 0; d < 2; d++) {
    StKDtype dt = DTS[d];
    size_t nt = (size_t)vocab * dim, no = (size_t)n * dim;
    g_autofree float *table = randu(r, nt, -1, 1), *dy = randu(r, no, -1, 1);
    if (dt == ST_KDT_BF16) {
      round_bf16(table, nt);
      round_bf16(dy, no);
    }
    g_autofree double *want = g_new0(double, no), *wt = g_new(double, nt);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < dim; j++)
        want[i * dim + j] = ids[i] >= 0 ? table[ids[i] * dim + j] : 0.0;
    g_autofree void *dtab = to_dt(table, nt, dt), *out = to_dt(dy, no, dt);
    g_autofree void *ddy = to_dt(dy, no, dt);
    g_assert_cmpint(K->embedding_fwd(NULL, out, dtab, ids, n, dim, 0, vocab, dt), ==, 0);
    assert_close("embedding", out, dt, want, no, 0, 0);
    /* A tensor-parallel rank's slice, ids [3, 8): rows 3..7 of the table;
     * the ids outside read zeros and add nothing. */
    const int first = 3, slice = 5;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < dim; j++)
        want[i * dim + j] = ids[i] >= first && ids[i] < first + slice ? table[ids[i] * dim + j]
                                                                       : 0.0;
    g_assert_cmpint(K->embedding_fwd(NULL, out, st_at_bytes(dtab, (size_t)first * dim, dt), ids,
                                     n, dim, first, slice, dt), ==, 0);
    assert_close("embedding slice", out, dt, want, no, 0, 0);
    for (size_t i = 0; i < nt; i++)
      wt[i] = table[i];
    for (int i = 0; i < n; i++)
      for (int j = 0; ids[i] >= 0 && j < dim; j++)
        wt[ids[i] * dim + j] += dy[i * dim + j];
    g_assert_cmpint(K->embedding_bwd(NULL, dtab, ddy, ids, n, dim, 0, vocab, dt), ==, 0);
    assert_close("embedding_bwd", dtab, dt, wt, nt, tol_rel(dt, 1e-6), tol_abs(dt));
    for (int i = 0; i < n; i++) /* the slice's rows get the same again; the others nothing */
      for (int j = 0; ids[i] >= first && ids[i] < first + slice && j < dim; j++)
        wt[ids[i] * dim + j] += dy[i * dim + j];
    g_assert_cmpint(K->embedding_bwd(NULL, st_at_bytes(dtab, (size_t)first * dim, dt), ddy, ids,
                                     n, dim, first, slice, dt), ==, 0);
    assert_close("embedding_bwd slice", dtab, dt, wt, nt, tol_rel(dt, 1e-6), tol_abs(dt));
    /* position rows: out[b] += pos, dpos += sum over b */
    size_t per = (size_t)rows * dim, all = per * batch;
    g_autofree float *x = randu(r, all, -1, 1), *pos = randu(r, per, -1, 1);
    if (dt == ST_KDT_BF16) {
      round_bf16(x, all);
      round_bf16(pos, per);
    }
    g_autofree double *wx = g_new(double, all), *wp = g_new(double, per);
    for (size_t i = 0; i < per; i++)
      wp[i] = pos[i];
    for (size_t i = 0; i < all; i++) {
      wx[i] = (double)x[i] + pos[i % per];
      wp[i % per] += x[i];
    }
    g_autofree void *dxx = to_dt(x, all, dt), *dpos = to_dt(pos, per, dt);
    g_autofree void *gx = to_dt(x, all, dt);
    g_assert_cmpint(K->add_rows(NULL, dxx, dpos, batch, rows, dim, dt), ==, 0);
    assert_close("add_rows", dxx, dt, wx, all, tol_rel(dt, 1e-6), tol_abs(dt));
    g_assert_cmpint(K->add_rows_bwd(NULL, dpos, gx, batch, rows, dim, dt), ==, 0);
    assert_close("add_rows_bwd", dpos, dt, wp, per, tol_rel(dt, 1e-6), tol_abs(dt));
  }
}

/* Every one of the 24 permutations of a [2, 3, 4, 5] tensor. */
static void
test_permute4(void)
{
  const int d[4] = {2, 3, 4, 5};
  const size_t n = 120;
  g_autofree float *x = g_new(float, n), *y = g_new(float, n);
  for (size_t i = 0; i < n; i++)
    x[i] = (float)i;
  int count = 0;
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      for (int c = 0; c < 4; c++)
        for (int e = 0; e < 4; e++) {
          int perm[4] = {a, b, c, e};
          if (a == b || a == c || a == e || b == c || b == e || c == e) {
            g_assert_cmpint(K->permute4(NULL, y, x, d, perm, ST_KDT_F32), ==, ST_K_EINVAL);
            continue;
          }
          count++;
          g_assert_cmpint(K->permute4(NULL, y, x, d, perm, ST_KDT_F32), ==, 0);
          int od[4] = {d[a], d[b], d[c], d[e]}, i[4];
          size_t o = 0;
          for (i[0] = 0; i[0] < od[0]; i[0]++)
            for (i[1] = 0; i[1] < od[1]; i[1]++)
              for (i[2] = 0; i[2] < od[2]; i[2]++)
                for (i[3] = 0; i[3] < od[3]; i[3]++, o++) {
                  int src[4];
                  for (int k = 0; k < 4; k++)
                    src[perm[k]] = i[k];
                  size_t idx = ((size_t)(src[0] * d[1] + src[1]) * d[2] + src[2]) * d[3] + src[3];
                  g_assert_cmpfloat(y[o], ==, x[idx]);
                }
        }
  g_assert_cmpint(count, ==, 24);
}

/* ---- convolution and pooling ---------------------------------------------- */

typedef struct {
  int k, s, p;
} Win;

static const Win WINDOWS[] = {{3, 1, 1}, {3, 2, 1}, {1, 2, 0}, {4, 4, 0}, {5, 2, 2}, {2, 3, 1}};

static int
out_size(int size, Win w)
{
  return (size + 2 * w.p - w.k) / w.s + 1;
}

/* im2col against its definition; col2im is its adjoint:
 * <im2col(x), y> = <x, col2im(y)>. */
static void
test_im2col(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(9);
  const int c = 3, h = 9, w = 8;
  const size_t nx = (size_t)c * h * w;
  for (size_t t = 0; t < G_N_ELEMENTS(WINDOWS); t++) {
    Win win = WINDOWS[t];
    int ho = out_size(h, win), wo = out_size(w, win);
    size_t nc = (size_t)c * win.k * win.k * ho * wo;
    g_autofree float *x = randu(r, nx, -1, 1), *y = randu(r, nc, -1, 1);
    g_autofree float *cols = g_new(float, nc), *dx = g_new0(float, nx);
    g_assert_cmpint(K->im2col(NULL, cols, x, c, h, w, win.k, win.s, win.p, ST_KDT_F32), ==, 0);
    size_t i = 0;
    for (int ch = 0; ch < c; ch++)
      for (int ki = 0; ki < win.k; ki++)
        for (int kj = 0; kj < win.k; kj++)
          for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++, i++) {
              int iy = oy * win.s - win.p + ki, ix = ox * win.s - win.p + kj;
              float v = iy >= 0 && iy < h && ix >= 0 && ix < w ? x[(ch * h + iy) * w + ix] : 0;
              g_assert_cmpfloat(cols[i], ==, v);
            }
    g_assert_cmpint(K->col2im(NULL, dx, y, c, h, w, win.k, win.s, win.p, ST_KDT_F32), ==, 0);
    double lhs = dot(cols, y, nc), rhs = dot(x, dx, nx);
    g_assert_cmpfloat_with_epsilon(lhs, rhs, 1e-5 * (1 + fabs(lhs)));
  }
  float z = 0;
  g_assert_cmpint(K->im2col(NULL, &z, &z, 1, 2, 2, 5, 1, 0, ST_KDT_F32), ==, ST_K_EINVAL);
}

typedef struct {
  int nc, h, w;
  Win win;
  float *x, *wgt, *y;
  int32_t *argmax;
} Pool;

static double
maxpool_loss(gpointer data)
{
  Pool *q = data;
  g_assert_cmpint(K->maxpool_fwd(NULL, q->y, q->argmax, q->x, q->nc, q->h, q->w, q->win.k,
                                 q->win.s, q->win.p, ST_KDT_F32), ==, 0);
  return dot(q->wgt, q->y, (size_t)q->nc * out_size(q->h, q->win) * out_size(q->w, q->win));
}

static void
test_pooling(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(10);
  const int nc = 4, h = 7, w = 9;
  const size_t nx = (size_t)nc * h * w;
  for (size_t t = 0; t < G_N_ELEMENTS(WINDOWS); t++) {
    Win win = WINDOWS[t];
    if (2 * win.p > win.k) /* PyTorch's pooling bound */
      continue;
    int ho = out_size(h, win), wo = out_size(w, win);
    size_t ny = (size_t)nc * ho * wo;
    Pool q = {nc, h, w, win, g_new(float, nx), randu(r, ny, -1, 1), g_new(float, ny),
              g_new(int32_t, ny)};
    for (size_t i = 0; i < nx; i++) /* distinct values 0.1 apart: no ties within 2h */
      q.x[i] = 0.1f * (float)((i * 37) % nx) - 5.0f;
    maxpool_loss(&q);
    for (int pl = 0; pl < nc; pl++) /* forward against the naive maximum */
      for (int oy = 0; oy < ho; oy++)
        for (int ox = 0; ox < wo; ox++) {
          float best = -INFINITY;
          for (int iy = oy * win.s - win.p; iy < oy * win.s - win.p + win.k; iy++)
            for (int ix = ox * win.s - win.p; ix < ox * win.s - win.p + win.k; ix++)
              if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                best = fmaxf(best, q.x[(pl * h + iy) * w + ix]);
          g_assert_cmpfloat(q.y[(pl * ho + oy) * wo + ox], ==, best);
        }
    g_autofree float *grad = g_new(float, nx);
    g_assert_cmpint(K->maxpool_bwd(NULL, grad, q.wgt, q.argmax, nc, h, w, win.k, win.s, win.p,
                                   ST_KDT_F32), ==, 0);
    check_fd("maxpool", maxpool_loss, &q, q.x, nx, grad);
    /* average: naive forward, backward as the adjoint */
    g_autofree float *avg = g_new(float, ny), *dx = g_new(float, nx);
    g_assert_cmpint(K->avgpool_fwd(NULL, avg, q.x, nc, h, w, win.k, win.s, win.p, ST_KDT_F32), ==,
                    0);
    for (int pl = 0; pl < nc; pl++)
      for (int oy = 0; oy < ho; oy++)
        for (int ox = 0; ox < wo; ox++) {
          double s = 0;
          for (int iy = oy * win.s - win.p; iy < oy * win.s - win.p + win.k; iy++)
            for (int ix = ox * win.s - win.p; ix < ox * win.s - win.p + win.k; ix++)
              if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                s += q.x[(pl * h + iy) * w + ix];
          g_assert_cmpfloat_with_epsilon(avg[(pl * ho + oy) * wo + ox], s / (win.k * win.k), 1e-5);
        }
    g_assert_cmpint(K->avgpool_bwd(NULL, dx, q.wgt, nc, h, w, win.k, win.s, win.p, ST_KDT_F32), ==,
                    0);
    double lhs = dot(q.wgt, avg, ny), rhs = dot(q.x, dx, nx);
    g_assert_cmpfloat_with_epsilon(lhs, rhs, 1e-5 * (1 + fabs(lhs)));
    g_free(q.x);
    g_free(q.wgt);
    g_free(q.y);
    g_free(q.argmax);
  }
}

/* Adaptive average pooling: windows [floor(i h / o), ceil((i + 1) h / o)),
 * down (7 -> 3, 8 -> 1) and up (5 -> 7); backward as the adjoint. */
static void
test_adaptive_pool(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(11);
  const int cases[][4] = {{7, 6, 3, 2}, {8, 8, 1, 1}, {5, 4, 7, 7}};
  for (size_t t = 0; t < G_N_ELEMENTS(cases); t++) {
    int h = cases[t][0], w = cases[t][1], oh = cases[t][2], ow = cases[t][3], nc = 3;
    size_t nx = (size_t)nc * h * w, ny = (size_t)nc * oh * ow;
    g_autofree float *x = randu(r, nx, -1, 1), *y = g_new(float, ny), *wgt = randu(r, ny, -1, 1);
    g_autofree float *dx = g_new(float, nx);
    g_assert_cmpint(K->adaptive_avgpool_fwd(NULL, y, x, nc, h, w, oh, ow, ST_KDT_F32), ==, 0);
    for (int pl = 0; pl < nc; pl++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++) {
          int y0 = i * h / oh, y1 = ((i + 1) * h + oh - 1) / oh;
          int x0 = j * w / ow, x1 = ((j + 1) * w + ow - 1) / ow;
          double s = 0;
          for (int iy = y0; iy < y1; iy++)
            for (int ix = x0; ix < x1; ix++)
              s += x[(pl * h + iy) * w + ix];
          g_assert_cmpfloat_with_epsilon(y[(pl * oh + i) * ow + j], s / ((y1 - y0) * (x1 - x0)),
                                         1e-5);
        }
    g_assert_cmpint(K->adaptive_avgpool_bwd(NULL, dx, wgt, nc, h, w, oh, ow, ST_KDT_F32), ==, 0);
    double lhs = dot(wgt, y, ny), rhs = dot(x, dx, nx);
    g_assert_cmpfloat_with_epsilon(lhs, rhs, 1e-5 * (1 + fabs(lhs)));
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  K = st_kernels_host();
  g_test_add_func("/kernels/host/layernorm", test_layernorm);
  g_test_add_func("/kernels/host/batchnorm", test_batchnorm);
  g_test_add_func("/kernels/host/softmax", test_softmax);
  g_test_add_func("/kernels/host/softmax-ce", test_softmax_ce);
  g_test_add_func("/kernels/host/embeddings", test_embeddings);
  g_test_add_func("/kernels/host/permute4", test_permute4);
  g_test_add_func("/kernels/host/im2col", test_im2col);
  g_test_add_func("/kernels/host/pooling", test_pooling);
  g_test_add_func("/kernels/host/adaptive-pool", test_adaptive_pool);
  return g_test_run();
}
