/* test_kernels_llm.c: the host kernel table's LLM kernels (kernels/ref/
 * llm.c, attention.c, moe.c) against naive formulas evaluated in double,
 * and every backward against central finite differences of its forward
 * (tolerances: kernel_check.h). Shapes are small and odd (7 tokens, head
 * width 5, groups of 2) so that an index that is off by one shows. */
#include "kernel_check.h"

/* ---- RMSNorm ---------------------------------------------------------------- */

typedef struct {
  int rows, cols;
  float *x, *g, *w, *y, *rstd;
} Rms;

static double
rms_loss(gpointer data)
{
  Rms *q = data;
  g_assert_cmpint(K->rmsnorm_fwd(NULL, q->y, q->rstd, q->x, q->g, q->rows, q->cols, ST_KDT_F32),
                  ==, 0);
  return dot(q->w, q->y, (size_t)q->rows * q->cols);
}

static void
test_rmsnorm(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(3);
  Rms q = {.rows = 5, .cols = 7};
  size_t n = (size_t)q.rows * q.cols;
  g_autofree float *x = randu(r, n, -2, 2), *g = randu(r, (size_t)q.cols, 0.5, 1.5);
  g_autofree float *w = randu(r, n, -1, 1);
  g_autofree double *want = g_new(double, n);
  for (int i = 0; i < q.rows; i++) {
    double ss = 0;
    for (int j = 0; j < q.cols; j++)
      ss += (double)x[i * q.cols + j] * x[i * q.cols + j];
    double rs = 1.0 / sqrt(ss / q.cols + 1e-5);
    for (int j = 0; j < q.cols; j++)
      want[i * q.cols + j] = x[i * q.cols + j] * rs * g[j];
  }
  for (gsize d = 0; d < G_N_ELEMENTS(DTS); d++) {
    StKDtype dt = DTS[d];
    g_autofree void *xd = to_dt(x, n, dt), *gd = to_dt(g, (size_t)q.cols, dt);
    g_autofree void *y = g_malloc(n * 4);
    g_autofree float *rstd = g_new(float, q.rows);
    g_assert_cmpint(K->rmsnorm_fwd(NULL, y, rstd, xd, gd, q.rows, q.cols, dt), ==, 0);
    assert_close("rmsnorm", y, dt, want, n, tol_rel(dt, 1e-4), tol_abs(dt));
  }
  /* gradients: of x and of the scale */
  q.x = x;
  q.g = g;
  q.w = w;
  q.y = g_new(float, n);
  q.rstd = g_new(float, q.rows);
  rms_loss(&q);
  g_autofree float *dx = g_new(float, n), *dg = g_new0(float, q.cols);
  g_assert_cmpint(K->rmsnorm_bwd(NULL, dx, dg, w, x, q.rstd, g, q.rows, q.cols, ST_KDT_F32), ==, 0);
  check_fd("rmsnorm dx", rms_loss, &q, x, n, dx);
  check_fd("rmsnorm dgamma", rms_loss, &q, g, (size_t)q.cols, dg);
  g_free(q.y);
  g_free(q.rstd);
}

/* ---- gated linear units --------------------------------------------------------- */

typedef struct {
  int rows, f, act;
  float *gu, *w, *h;
} Glu;

static double
glu_loss(gpointer data)
{
  Glu *q = data;
  g_assert_cmpint(K->glu_fwd(NULL, q->h, q->gu, q->rows, q->f, q->act, ST_KDT_F32), ==, 0);
  return dot(q->w, q->h, (size_t)q->rows * q->f);
}

static void
test_glu(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(4);
  for (int act = 0; act < 2; act++) {
    Glu q = {.rows = 3, .f = 5, .act = act};
    size_t n = (size_t)q.rows * q.f;
    g_autofree float *gu = randu(r, 2 * n, -3, 3), *w = randu(r, n, -1, 1);
    g_autofree double *want = g_new(double, n);
    for (int i = 0; i < q.rows; i++)
      for (int j = 0; j < q.f; j++) {
        double x = gu[i * 2 * q.f + j], u = gu[i * 2 * q.f + q.f + j];
        double gelu = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        double a = act == 0 ? x / (1.0 + exp(-x)) : gelu;
        want[i * q.f + j] = a * u;
      }
    for (gsize d = 0; d < G_N_ELEMENTS(DTS); d++) {
      StKDtype dt = DTS[d];
      g_autofree void *gd = to_dt(gu, 2 * n, dt), *h = g_malloc(n * 4);
      g_assert_cmpint(K->glu_fwd(NULL, h, gd, q.rows, q.f, act, dt), ==, 0);
      assert_close(act == 0 ? "swiglu" : "geglu", h, dt, want, n, tol_rel(dt, 1e-5),
                   tol_abs(dt));
    }
    q.gu = gu;
    q.w = w;
    q.h = g_new(float, n);
    g_autofree float *dgu = g_new(float, 2 * n);
    g_assert_cmpint(K->glu_bwd(NULL, dgu, w, gu, q.rows, q.f, act, ST_KDT_F32), ==, 0);
    check_fd(act == 0 ? "swiglu dgu" : "geglu dgu", glu_loss, &q, gu, 2 * n, dgu);
    g_free(q.h);
  }
  g_assert_cmpint(K->glu_fwd(NULL, NULL, NULL, 1, 1, 2, ST_KDT_F32), ==, ST_K_EINVAL);
}

/* ---- RoPE ----------------------------------------------------------------------------- */

static void
test_rope(void)
{
  /* 2 samples of 3 tokens, rows of 3 heads of 6 (plus 2 more elements):
   * the first 2 heads turn their first 4 dims (pairs (0, 2), (1, 3)); the
   * rest of every row stays. theta 100 so the angles are large. */
  g_autoptr(GRand) r = g_rand_new_with_seed(6);
  int B = 2, T = 3, heads = 2, ld = 20, hd = 6, rot = 4;
  float theta = 100.0f;
  size_t n = (size_t)B * T * ld;
  g_autofree float *x = randu(r, n, -1, 1);
  g_autofree double *want = g_new(double, n);
  for (size_t k = 0; k < n; k++)
    want[k] = x[k];
  for (int row = 0; row < B * T; row++)
    for (int h = 0; h < heads; h++)
      for (int i = 0; i < rot / 2; i++) {
        double a = (row % T) * pow(theta, -2.0 * i / rot);
        size_t p = (size_t)row * ld + h * hd + i, q = p + rot / 2;
        want[p] = x[p] * cos(a) - x[q] * sin(a);
        want[q] = x[q] * cos(a) + x[p] * sin(a);
      }
  for (gsize d = 0; d < G_N_ELEMENTS(DTS); d++) {
    StKDtype dt = DTS[d];
    g_autofree void *y = to_dt(x, n, dt);
    g_assert_cmpint(K->rope(NULL, y, B, T, heads, ld, hd, rot, theta, 0, dt), ==, 0);
    assert_close("rope", y, dt, want, n, tol_rel(dt, 1e-5), tol_abs(dt));
  }
  /* The inverse turns back (the backward is the transpose of a rotation). */
  g_autofree float *y = g_memdup2(x, n * sizeof(float));
  g_assert_cmpint(K->rope(NULL, y, B, T, heads, ld, hd, rot, theta, 0, ST_KDT_F32), ==, 0);
  g_assert_cmpint(K->rope(NULL, y, B, T, heads, ld, hd, rot, theta, 1, ST_KDT_F32), ==, 0);
  g_autofree double *orig = g_new(double, n);
  for (size_t k = 0; k < n; k++)
    orig[k] = x[k];
  assert_close("rope inverse", y, ST_KDT_F32, orig, n, 1e-5, 1e-6);
  g_assert_cmpint(K->rope(NULL, y, B, T, heads, ld, hd, 3, theta, 0, ST_KDT_F32), ==,
                  ST_K_EINVAL);
}

static void
test_copy2d(void)
{
  float src[12], dst[10] = {0};
  for (int k = 0; k < 12; k++)
    src[k] = (float)k;
  /* 2 rows of 3 from rows of 6 (starting at column 1) into rows of 5 */
  g_assert_cmpint(K->copy2d(NULL, dst, 5, src + 1, 6, 2, 3, ST_KDT_F32), ==, 0);
  const float want[10] = {1, 2, 3, 0, 0, 7, 8, 9, 0, 0};
  for (int k = 0; k < 10; k++)
    g_assert_cmpfloat(dst[k], ==, want[k]);
}

/* ---- attention ---------------------------------------------------------------------------- */

typedef struct {
  int B, T, H, G, k, causal, window;
  float scale;
  float *qkv, *w, *o, *lse;
} Attn;

static size_t
attn_ld(const Attn *a)
{
  return (size_t)(a->H + 2 * a->G) * a->k;
}

/* Naive attention in double: o [B, T, H k] and lse [B, H, T]. */
static void
naive_attention(const Attn *a, const float *qkv, double *o, double *lse)
{
  size_t ld = attn_ld(a);
  int group = a->H / a->G;
  for (int b = 0; b < a->B; b++)
    for (int h = 0; h < a->H; h++)
      for (int i = 0; i < a->T; i++) {
        const float *q = qkv + ((size_t)b * a->T + i) * ld + (size_t)h * a->k;
        double s[64], m = -INFINITY, l = 0;
        for (int j = 0; j < a->T; j++) {
          gboolean sees = (!a->causal || j <= i) && (a->window <= 0 || j > i - a->window);
          const float *kk = qkv + ((size_t)b * a->T + j) * ld + (size_t)(a->H + h / group) * a->k;
          s[j] = -INFINITY;
          if (!sees)
            continue;
          double d = 0;
          for (int c = 0; c < a->k; c++)
            d += (double)q[c] * kk[c];
          s[j] = a->scale * d;
          m = fmax(m, s[j]);
        }
        for (int j = 0; j < a->T; j++)
          l += isinf(s[j]) ? 0 : exp(s[j] - m);
        for (int c = 0; c < a->k; c++) {
          double acc = 0;
          for (int j = 0; j < a->T; j++) {
            if (isinf(s[j]))
              continue;
            const float *v = qkv + ((size_t)b * a->T + j) * ld +
                             (size_t)(a->H + a->G + h / group) * a->k;
            acc += exp(s[j] - m) / l * v[c];
          }
          o[(((size_t)b * a->T + i) * a->H + h) * a->k + c] = acc;
        }
        lse[((size_t)b * a->H + h) * a->T + i] = m + log(l);
      }
}

static double
attn_loss(gpointer data)
{
  Attn *a = data;
  g_assert_cmpint(K->flash_attn_fwd(NULL, a->o, a->lse, a->qkv, a->B, a->T, a->H, a->G, a->k,
                                    a->scale, a->causal, a->window, ST_KDT_F32),
                  ==, 0);
  return dot(a->w, a->o, (size_t)a->B * a->T * a->H * a->k);
}

static void
attention_case(int causal, int window, int G)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(7 + causal + window + G);
  Attn a = {.B = 2, .T = 7, .H = 4, .G = G, .k = 5, .causal = causal, .window = window,
            .scale = 1.0f / sqrtf(5.0f)};
  size_t nq = (size_t)a.B * a.T * attn_ld(&a), no = (size_t)a.B * a.T * a.H * a.k;
  size_t nl = (size_t)a.B * a.H * a.T;
  g_autofree float *qkv = randu(r, nq, -1, 1), *w = randu(r, no, -1, 1);
  g_autofree double *want = g_new(double, no), *want_lse = g_new(double, nl);
  naive_attention(&a, qkv, want, want_lse);
  for (gsize d = 0; d < G_N_ELEMENTS(DTS); d++) {
    StKDtype dt = DTS[d];
    g_autofree float *in = g_memdup2(qkv, nq * sizeof(float));
    if (dt == ST_KDT_BF16)
      round_bf16(in, nq);
    g_autofree double *ref = g_new(double, no), *ref_lse = g_new(double, nl);
    naive_attention(&a, in, ref, ref_lse);
    g_autofree void *x = to_dt(in, nq, dt), *o = g_malloc(no * 4);
    g_autofree float *lse = g_new(float, nl);
    g_assert_cmpint(K->flash_attn_fwd(NULL, o, lse, x, a.B, a.T, a.H, a.G, a.k, a.scale, causal,
                                      window, dt),
                    ==, 0);
    assert_close("flash o", o, dt, ref, no, tol_rel(dt, 1e-4), tol_abs(dt));
    assert_close("flash lse", lse, ST_KDT_F32, ref_lse, nl, 1e-4, 1e-6);
  }
  /* The backward against finite differences of L = sum(w o), every qkv entry. */
  a.qkv = qkv;
  a.w = w;
  a.o = g_new(float, no);
  a.lse = g_new(float, nl);
  attn_loss(&a);
  g_autofree float *dqkv = g_new(float, nq), *rowdot = g_new(float, nl);
  for (size_t k = 0; k < nq; k++)
    dqkv[k] = NAN; /* the backward writes all of it */
  g_assert_cmpint(K->flash_attn_bwd(NULL, dqkv, w, qkv, a.o, a.lse, rowdot, a.B, a.T, a.H, a.G,
                                    a.k, a.scale, causal, window, ST_KDT_F32),
                  ==, 0);
  check_fd("flash dqkv", attn_loss, &a, qkv, nq, dqkv);
  g_free(a.o);
  g_free(a.lse);
}

static void
test_flash(void)
{
  attention_case(0, 0, 4); /* MHA, every token sees every token */
  attention_case(1, 0, 2); /* GQA, causal */
  attention_case(1, 3, 1); /* MQA, causal, window 3 */
}

/* The heads split and its backward are adjoint: <heads(x), y> = <x, heads_bwd(y)>. */
static void
test_attn_heads(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(8);
  int B = 2, T = 3, H = 4, G = 2, k = 5;
  size_t nq = (size_t)B * T * (H + 2 * G) * k, nh = (size_t)H * B * T * k;
  g_autofree float *x = randu(r, nq, -1, 1), *qh = g_new(float, nh), *kh = g_new(float, nh);
  g_autofree float *vh = g_new(float, nh), *dq = randu(r, nh, -1, 1), *dk = randu(r, nh, -1, 1);
  g_autofree float *dv = randu(r, nh, -1, 1), *dx = g_new(float, nq);
  g_assert_cmpint(K->attn_heads(NULL, qh, kh, vh, x, B, T, H, G, k, ST_KDT_F32), ==, 0);
  /* head 3 of sample 1, token 2: query head 3, kv head 1 */
  size_t row = ((size_t)1 * T + 2) * (H + 2 * G) * k, at = (((size_t)3 * B + 1) * T + 2) * k;
  for (int c = 0; c < k; c++) {
    g_assert_cmpfloat(qh[at + c], ==, x[row + 3 * k + c]);
    g_assert_cmpfloat(kh[at + c], ==, x[row + (H + 1) * k + c]);
    g_assert_cmpfloat(vh[at + c], ==, x[row + (H + G + 1) * k + c]);
  }
  g_assert_cmpint(K->attn_heads_bwd(NULL, dx, dq, dk, dv, B, T, H, G, k, ST_KDT_F32), ==, 0);
  double lhs = dot(qh, dq, nh) + dot(kh, dk, nh) + dot(vh, dv, nh), rhs = dot(x, dx, nq);
  g_assert_cmpfloat_with_epsilon(lhs, rhs, 1e-4 * fabs(rhs) + 1e-5);
}

/* ---- MoE ---------------------------------------------------------------------------------- */

static void
test_moe_route(void)
{
  /* One sample of 4 tokens, 3 experts, top 2, capacity 2. Every token's
   * first choice is expert 0, second expert 1 for tokens 0-2 and expert 2
   * for token 3 (logits below). GShard's order: first choices: tokens 0, 1
   * to expert 0 (full: 2 and 3 dropped there); second choices: 0, 1 to
   * expert 1 (full: 2 dropped), 3 to expert 2. Gates renormalized over the
   * top 2: p0 / (p0 + p1) etc. */
  const float logits[12] = {2, 1, 0, 2, 1, 0, 2, 1, 0, 2, 0, 1};
  float gates[4 * 5], probs[12];
  int32_t sel[8];
  for (int k = 0; k < 20; k++)
    gates[k] = -7; /* columns 3 and 4 of each row stay untouched */
  g_assert_cmpint(K->moe_route_fwd(NULL, gates, 5, probs, sel, logits, 1, 4, 3, 2, 2, 1,
                                   ST_KDT_F32),
                  ==, 0);
  double e2 = exp(2), e1 = exp(1), p0 = e2 / (e2 + e1 + 1), p1 = e1 / (e2 + e1 + 1);
  double g0 = p0 / (p0 + p1), g1 = p1 / (p0 + p1);
  const double want[4][3] = {{g0, g1, 0}, {g0, g1, 0}, {0, 0, 0}, {0, 0, g1}};
  /* dropped choices are marked -1 - expert */
  const int32_t want_sel[8] = {0, 1, 0, 1, -1, -2, -1, 2};
  for (int t = 0; t < 4; t++) {
    g_assert_cmpint(sel[t * 2], ==, want_sel[t * 2]);
    g_assert_cmpint(sel[t * 2 + 1], ==, want_sel[t * 2 + 1]);
    for (int e = 0; e < 3; e++)
      g_assert_cmpfloat_with_epsilon(gates[t * 5 + e], want[t][e], 1e-6);
    g_assert_cmpfloat(gates[t * 5 + 3], ==, -7);
  }
  g_assert_cmpfloat_with_epsilon(probs[0], p0, 1e-6);
  /* Without renormalization the gate is the probability itself. */
  g_assert_cmpint(K->moe_route_fwd(NULL, gates, 5, probs, sel, logits, 1, 4, 3, 2, 2, 0,
                                   ST_KDT_F32),
                  ==, 0);
  g_assert_cmpfloat_with_epsilon(gates[0], p0, 1e-6);
}

typedef struct {
  int rows, experts, k, norm, capacity;
  float *logits, *w, *gates, *probs;
  int32_t *sel;
} Route;

static double
route_loss(gpointer data)
{
  Route *q = data;
  g_assert_cmpint(K->moe_route_fwd(NULL, q->gates, q->experts, q->probs, q->sel, q->logits, 1,
                                   q->rows, q->experts, q->k, q->capacity, q->norm, ST_KDT_F32),
                  ==, 0);
  return dot(q->w, q->gates, (size_t)q->rows * q->experts);
}

static void
test_moe_route_grad(void)
{
  /* Logits 0.5 apart (no choice flips within h): d L / d logits from
   * moe_route_bwd against finite differences, with room for every row, and
   * with room for one row per expert (dropped gates are constants). */
  for (int v = 0; v < 4; v++) {
    int norm = v % 2;
    g_autoptr(GRand) r = g_rand_new_with_seed(9 + v);
    Route q = {.rows = 3, .experts = 4, .k = 2, .norm = norm, .capacity = v < 2 ? 3 : 1};
    size_t n = (size_t)q.rows * q.experts;
    q.logits = g_new(float, n);
    for (int i = 0; i < q.rows; i++)
      for (int e = 0; e < q.experts; e++)
        q.logits[i * q.experts + e] = 0.5f * (float)((e * 3 + i) % q.experts);
    q.w = randu(r, n, -1, 1);
    q.gates = g_new(float, n);
    q.probs = g_new(float, n);
    q.sel = g_new(int32_t, (size_t)q.rows * q.k);
    route_loss(&q);
    g_autofree float *dl = g_new(float, n);
    g_assert_cmpint(K->moe_route_bwd(NULL, dl, q.w, q.experts, q.probs, q.sel, q.rows, q.experts,
                                     q.k, norm, ST_KDT_F32),
                    ==, 0);
    check_fd("moe route dlogits", route_loss, &q, q.logits, n, dl);
    g_free(q.logits);
    g_free(q.w);
    g_free(q.gates);
    g_free(q.probs);
    g_free(q.sel);
  }
}

static void
test_moe_gather_scatter(void)
{
  /* 2 samples of 4 rows of width 7: x at columns 1..3 (d = 3), the gate at
   * column 5. Sample 0 routes rows 1 and 3 here, sample 1 rows 0, 1 and 2;
   * capacity 2: sample 0's slots are rows 1, 3; sample 1's rows 0, 1. */
  float src[2 * 4 * 7];
  for (int k = 0; k < 56; k++)
    src[k] = (float)k;
  const float gate_of[8] = {0, 0.5f, 0, 0.25f, 0.1f, 0.2f, 0.3f, 0};
  for (int row = 0; row < 8; row++)
    src[row * 7 + 5] = gate_of[row];
  float x[4 * 3], gate[4];
  int32_t idx[4];
  g_assert_cmpint(K->moe_gather(NULL, x, idx, gate, src, 7, 1, 5, 2, 4, 2, 3, ST_KDT_F32), ==, 0);
  const int32_t want_idx[4] = {1, 3, 0, 1};
  for (int s = 0; s < 4; s++) {
    g_assert_cmpint(idx[s], ==, want_idx[s]);
    int row = (s / 2) * 4 + want_idx[s];
    g_assert_cmpfloat(gate[s], ==, gate_of[row]);
    for (int j = 0; j < 3; j++)
      g_assert_cmpfloat(x[s * 3 + j], ==, src[row * 7 + 1 + j]);
  }
  /* Capacity 3 for one sample with 2 rows routed: the last slot is empty. */
  float x3[3 * 3];
  int32_t idx3[3];
  float gate3[3];
  g_assert_cmpint(K->moe_gather(NULL, x3, idx3, gate3, src, 7, 1, 5, 1, 4, 3, 3, ST_KDT_F32), ==,
                  0);
  g_assert_cmpint(idx3[2], ==, -1);
  g_assert_cmpfloat(x3[8], ==, 0);

  /* Scatter y with the gates into dst (rows of 4, d = 3 at column 0), then
   * the backward: dy = gate dsum[row], dgate = dsum[row] . y. */
  float y[4 * 3], dst[2 * 4 * 4] = {0}, dsum[2 * 4 * 4], dy[4 * 3], dgates[2 * 4 * 2];
  for (int k = 0; k < 12; k++)
    y[k] = 0.1f * (float)(k + 1);
  for (int k = 0; k < 32; k++)
    dsum[k] = (float)(k % 5) - 2.0f;
  for (int k = 0; k < 16; k++)
    dgates[k] = -9; /* the gradient is added: the stream's own passes through */
  g_assert_cmpint(K->moe_scatter(NULL, dst, 4, 0, y, idx, gate, 2, 4, 2, 3, ST_KDT_F32), ==, 0);
  g_assert_cmpint(K->moe_gather_grad(NULL, dy, dgates, 2, 1, dsum, 4, y, idx, gate, 2, 4, 2, 3,
                                     ST_KDT_F32),
                  ==, 0);
  for (int s = 0; s < 4; s++) {
    int row = (s / 2) * 4 + idx[s];
    double d = 0;
    for (int j = 0; j < 3; j++) {
      g_assert_cmpfloat_with_epsilon(dst[row * 4 + j], gate[s] * y[s * 3 + j], 1e-7);
      g_assert_cmpfloat_with_epsilon(dy[s * 3 + j], gate[s] * dsum[row * 4 + j], 1e-7);
      d += (double)dsum[row * 4 + j] * y[s * 3 + j];
    }
    g_assert_cmpfloat_with_epsilon(dgates[row * 2 + 1], -9 + d, 1e-6);
    g_assert_cmpfloat(dgates[row * 2], ==, -9); /* another expert's column */
  }
  g_assert_cmpfloat(dgates[0 * 2 + 1], ==, -9); /* a row not routed here */
  g_assert_cmpfloat(dst[0], ==, 0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  K = st_kernels_host();
  g_test_add_func("/kernels/llm/rmsnorm", test_rmsnorm);
  g_test_add_func("/kernels/llm/glu", test_glu);
  g_test_add_func("/kernels/llm/rope", test_rope);
  g_test_add_func("/kernels/llm/copy2d", test_copy2d);
  g_test_add_func("/kernels/llm/flash", test_flash);
  g_test_add_func("/kernels/llm/attn-heads", test_attn_heads);
  g_test_add_func("/kernels/llm/moe-route", test_moe_route);
  g_test_add_func("/kernels/llm/moe-route-grad", test_moe_route_grad);
  g_test_add_func("/kernels/llm/moe-gather-scatter", test_moe_gather_scatter);
  return g_test_run();
}
