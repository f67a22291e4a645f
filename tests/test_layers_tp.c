/* test_layers_tp.c: every split layer implementation (exec/layers/, a layer
 * derived as one rank of a tensor-parallel group) against the unsplit
 * layer, with and without sequence parallelism, t = 2, on the host kernels.
 *
 * The group is emulated as the executor runs it (layer_impl.h): each of the
 * t ranks gets the slice of the whole layer's weights (initial, plus noise
 * so that the biases are not 0) its spans say
 * (st_tp_slice), computes on all N = batch x tokens rows (under sequence
 * parallelism the executor hands it the all-gathered rows, the same
 * numbers), and the collectives are done here: a sum over the ranks of the
 * partial outputs (the all-reduce; a reduce-scatter's rows are the same
 * sum), a block's two parts with x1 reduced between them and kept in the
 * saved block (all of it, or the rank's N / t rows under SP), the split
 * loss's MAX and SUM of its statistics.
 *
 * - forward: the sum of the ranks' partial outputs (the LM head: its
 *   columns) equals the whole layer's output, 1e-5 of the largest magnitude
 *   (fp32: only the order of the sums differs);
 * - backward: the sum of the ranks' partial input gradients equals the whole
 *   layer's; each rank's parameter gradient equals the whole one's slice
 *   (SPLIT and WHOLE spans), and PARTIAL spans (a block's norms) sum to it;
 * - finite differences of the group's L = sum(w * out) (the loss: the loss)
 *   with respect to sampled entries of the input and of each rank's
 *   parameters match the group's gradients (kernel_check.h's tolerances),
 *   so the split path is right on its own, not only equal to the whole one;
 * - memory: every part takes exactly the scratch st_layer_memory gives the
 *   rank's layer for its pass, and the saved block is its `saved` (the
 *   executor refuses any other size: test_memory_conformance.c).
 */
#include <math.h>
#include <string.h>

#include "exec/layer_impl.h"
#include "kernel_check.h"
#include "model/layer_type.h"

#define T 2        /* ranks */
#define BATCH 2

static const char *const MODELS[] = {
  /* every split kind: vocabulary-parallel embedding, GQA flash attention
   * with RoPE, dense attention with both biases, SwiGLU, GeGLU with biases,
   * LLaMA blocks (sequential in two parts; NeoX-style parallel residual
   * with LayerNorm, GELU and biases, dense, not causal; the attention half
   * alone), a replicated RMSNorm, an untied head with a bias, the loss */
  "{\"name\": \"llm\", \"input\": [6], \"layers\": ["
  " {\"name\": \"emb\", \"type\": \"embedding\", \"vocab\": 12, \"dim\": 8},"
  " {\"name\": \"att\", \"type\": \"attention\", \"heads\": 4, \"kv_heads\": 2,"
  "  \"rope_theta\": 100},"
  " {\"name\": \"attd\", \"type\": \"attention\", \"heads\": 2, \"flash\": false,"
  "  \"qkv_bias\": true, \"out_bias\": true},"
  " {\"name\": \"sw\", \"type\": \"swiglu\", \"ffn\": 10},"
  " {\"name\": \"ge\", \"type\": \"geglu\", \"ffn\": 6, \"bias\": true},"
  " {\"name\": \"b0\", \"type\": \"llama_block\", \"heads\": 4, \"kv_heads\": 2, \"ffn\": 12},"
  " {\"name\": \"b1\", \"type\": \"llama_block\", \"heads\": 2, \"ffn\": 16,"
  "  \"mlp\": \"gelu\", \"norm\": \"layernorm\", \"parallel_residual\": true,"
  "  \"flash\": false, \"causal\": false, \"mlp_bias\": true, \"qkv_bias\": true,"
  "  \"out_bias\": true},"
  " {\"name\": \"b2\", \"type\": \"llama_block\", \"heads\": 2, \"mlp\": \"none\"},"
  " {\"name\": \"n\", \"type\": \"rmsnorm\"},"
  " {\"name\": \"head\", \"type\": \"lm_head\", \"vocab\": 12, \"bias\": true},"
  " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}",
  /* a tied head: the embedding's slice serves it */
  "{\"name\": \"tied\", \"input\": [4], \"layers\": ["
  " {\"name\": \"emb\", \"type\": \"embedding\", \"vocab\": 10, \"dim\": 6},"
  " {\"name\": \"head\", \"type\": \"lm_head\", \"vocab\": 10, \"tied\": true},"
  " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}",
};

/* ---- the group ---------------------------------------------------------------------- */

typedef struct {
  const StModel *whole_m, *rank_m;
  int i;
  const StLayer *whole, *l; /* the whole layer, one rank's */
  const StLayerImpl *impl;
  gboolean sp;
  int N, in_w, out_w;       /* rows; widths of the whole layer's input and output */
  int parts;
  float *w_whole;           /* the whole layer's weights */
  float *p[T];              /* each rank's */
  float *tied_whole, *tied[T]; /* a tied head: the embedding's */
  int32_t *ids, *targets;
  StLayerMemory mem;        /* the simulator's, for the rank's layer */
} Group;

typedef struct {
  int64_t taken, room;
  gboolean exact;
  GPtrArray *blocks;
} Counter;

static void *
count_scratch(gpointer pool, size_t bytes)
{
  Counter *c = pool;
  c->taken += st_layer_aligned((int64_t)bytes);
  void *p = g_malloc0(bytes);
  g_ptr_array_add(c->blocks, p);
  return p;
}

/* A part's scratch, released at the end: exactly the pass's room. */
static void
counter_done(Counter *c)
{
  if (c->exact)
    g_assert_cmpint(c->taken, ==, c->room);
  g_ptr_array_unref(c->blocks);
}

static StLayerCtx
ctx_of(const Group *g, int rank, int part, Counter *pool, float *loss_sum, float scale)
{
  return (StLayerCtx){
    .k = K, .dt = ST_KDT_F32, .seed = 3, .scratch = count_scratch, .pool = pool,
    .targets = g->targets, .loss_sum = loss_sum, .loss_scale = scale,
    .tied_params = g->tied[rank], .tp_rank = rank, .part = part,
  };
}

static int
last_dim(const StShape *s)
{
  return (int)s->dims[s->n_dims - 1];
}

static gboolean
is_loss(const StLayer *l)
{
  return l->type->tp == ST_TP_VOCAB_LOSS;
}

/* The whole layer's forward and backward (the reference). */
static float
whole_run(const Group *g, const void *in, float *out, const float *dout, float *din, float *dw,
          float *dtied)
{
  size_t saved_n = g->impl->saved_bytes(g->whole, BATCH, ST_KDT_F32);
  g_autofree void *saved = g_malloc0(MAX(saved_n, 1));
  Counter c = {0, 0, FALSE, g_ptr_array_new_with_free_func(g_free)};
  float loss = 0;
  StLayerCtx ctx = ctx_of(g, 0, 0, &c, &loss, 1.0f);
  ctx.tied_params = g->tied_whole;
  ctx.tied_grads = dtied;
  g_assert_cmpint(g->impl->forward(&ctx, g->whole, BATCH, g->w_whole, in, out, saved), ==, 0);
  if (dout != NULL || is_loss(g->whole))
    g_assert_cmpint(g->impl->backward(&ctx, g->whole, BATCH, g->w_whole, in, out, saved,
                                      is_loss(g->whole) ? NULL : dout, din, dw),
                    ==, 0);
  counter_done(&c);
  return loss;
}

/* Columns [c0, c0 + w) of rows x ld `src` into dst [rows, w]. */
static void
columns(float *dst, const float *src, int rows, int ld, int c0, int w)
{
  for (int r = 0; r < rows; r++)
    memcpy(dst + (size_t)r * w, src + (size_t)r * ld + c0, (size_t)w * 4);
}

/* The group's forward as the executor runs it: out = the whole output (the
 * LM head's columns put together; the loss: returned). `saved[r]`: each
 * rank's saved block (allocated here). */
static float
group_forward(const Group *g, const void *in, float *out, void **saved)
{
  size_t nd = (size_t)g->N * g->out_w;
  int w_rank = g->l->type->tp == ST_TP_VOCAB_OUT ? g->out_w / T : g->out_w;
  float loss = 0;
  for (int r = 0; r < T; r++) {
    size_t saved_n = g->impl->saved_bytes(g->l, BATCH, ST_KDT_F32);
    g_assert_cmpint((int64_t)saved_n, ==, g->mem.saved);
    saved[r] = g_malloc0(MAX(saved_n, 1));
  }
  if (is_loss(g->l)) {
    /* each rank's columns of the logits; the statistics reduced here */
    int v = g->in_w / T;
    float *stats[T];
    for (int r = 0; r < T; r++) {
      g_autofree float *cols = g_new(float, (size_t)g->N * v);
      columns(cols, in, g->N, g->in_w, r * v, v);
      Counter c = {0, g->mem.fwd_scratch, TRUE, g_ptr_array_new_with_free_func(g_free)};
      StLayerCtx ctx = ctx_of(g, r, 0, &c, &loss, 1.0f);
      float zeros[BATCH]; /* the loss's output: zeros, the loss goes to loss_sum */
      g_assert_cmpint(g->impl->forward(&ctx, g->l, BATCH, NULL, cols, zeros, saved[r]), ==, 0);
      counter_done(&c);
      stats[r] = g->impl->tp_tensor(g->l, BATCH, ST_KDT_F32, 0, saved[r]);
    }
    int R = g->N;
    for (int r = 1; r < T; r++)
      g_assert_cmpint(K->maximum(NULL, stats[0] + R, stats[r] + R, ST_KDT_F32, R), ==, 0);
    for (int r = 0; r < T; r++) {
      memcpy(stats[r] + R, stats[0] + R, (size_t)R * 4);
      g_assert_cmpint(K->ce_split_rescale(NULL, stats[r], R), ==, 0);
    }
    for (int r = 1; r < T; r++)
      g_assert_cmpint(K->axpy(NULL, stats[0] + 2 * R, ST_KDT_F32, 1, stats[r] + 2 * R,
                              ST_KDT_F32, 2 * (size_t)R), ==, 0);
    for (int r = 1; r < T; r++)
      memcpy(stats[r] + 2 * R, stats[0] + 2 * R, 2 * (size_t)R * 4);
    g_assert_cmpint(K->ce_split_loss(NULL, &loss, stats[0], g->targets, R), ==, 0);
    return loss;
  }
  memset(out, 0, nd * 4);
  g_autofree float *x1 = g_new0(float, (size_t)g->N * g->out_w);
  for (int part = g->parts > 1 ? 1 : 0; part <= (g->parts > 1 ? 2 : 0); part++) {
    const void *part_in = part == 2 ? x1 : in;
    float *target = part == 1 ? x1 : out;
    for (int r = 0; r < T; r++) {
      g_autofree float *partial = g_new0(float, (size_t)g->N * w_rank);
      Counter c = {0, g->mem.fwd_scratch, TRUE, g_ptr_array_new_with_free_func(g_free)};
      StLayerCtx ctx = ctx_of(g, r, part, &c, &loss, 1.0f);
      g_assert_cmpint(g->impl->forward(&ctx, g->l, BATCH, g->p[r], part_in, partial, saved[r]),
                      ==, 0);
      counter_done(&c);
      if (w_rank != g->out_w) { /* the head: its columns */
        for (int row = 0; row < g->N; row++)
          memcpy(out + (size_t)row * g->out_w + r * w_rank, partial + (size_t)row * w_rank,
                 (size_t)w_rank * 4);
      } else {
        for (size_t e = 0; e < nd; e++) /* the all-reduce / reduce-scatter's sum */
          target[e] += partial[e];
      }
    }
    if (part == 1) { /* x1 kept where the executor's collective leaves it */
      for (int r = 0; r < T; r++) {
        float *kept = g->impl->tp_tensor(g->l, BATCH, ST_KDT_F32, 1, saved[r]);
        size_t rows = g->sp ? (size_t)g->N / T : (size_t)g->N;
        memcpy(kept, x1 + (g->sp ? (size_t)r * rows * g->out_w : 0), rows * g->out_w * 4);
      }
    }
  }
  return loss;
}

/* The group's backward: din = the sum of the ranks' partial input gradients,
 * dw[r] each rank's parameter gradient (zeroed first). */
static void
group_backward(const Group *g, const void *in, void **saved, const float *dout, float *din,
               float **dw, float **dtied)
{
  size_t nin = (size_t)g->N * g->in_w;
  int w_rank = g->l->type->tp == ST_TP_VOCAB_OUT ? g->out_w / T : g->out_w;
  if (din != NULL)
    memset(din, 0, nin * 4);
  for (int r = 0; r < T; r++)
    memset(dw[r], 0, (size_t)MAX(g->l->params, 1) * 4);
  if (is_loss(g->l)) {
    int v = g->in_w / T;
    for (int r = 0; r < T; r++) {
      g_autofree float *d = g_new(float, (size_t)g->N * v);
      Counter c = {0, g->mem.bwd_scratch, TRUE, g_ptr_array_new_with_free_func(g_free)};
      StLayerCtx ctx = ctx_of(g, r, 0, &c, NULL, 1.0f);
      g_assert_cmpint(g->impl->backward(&ctx, g->l, BATCH, NULL, NULL, NULL, saved[r], NULL, d,
                                        dw[r]), ==, 0);
      counter_done(&c);
      for (int row = 0; row < g->N; row++)
        memcpy(din + (size_t)row * g->in_w + r * v, d + (size_t)row * v, (size_t)v * 4);
    }
    return;
  }
  g_autofree float *dx1 = g_new0(float, (size_t)g->N * g->out_w);
  g_autofree float *dout_r = g_new(float, (size_t)g->N * w_rank);
  for (int part = g->parts > 1 ? 2 : 0; part >= (g->parts > 1 ? 1 : 0); part--) {
    float *sum = part == 2 ? dx1 : din;
    g_autofree float *x1 = NULL;
    if (part == 2) { /* x1 as the forward reduced it: rank 0's, gathered under SP */
      x1 = g_new(float, (size_t)g->N * g->out_w);
      size_t rows = g->sp ? (size_t)g->N / T : (size_t)g->N;
      for (int r = 0; r < (g->sp ? T : 1); r++)
        memcpy(x1 + (size_t)r * rows * g->out_w,
               g->impl->tp_tensor(g->l, BATCH, ST_KDT_F32, 1, saved[r]), rows * g->out_w * 4);
    }
    for (int r = 0; r < T; r++) {
      const float *d = part == 1 ? dx1 : dout;
      if (w_rank != g->out_w) {
        columns(dout_r, dout, g->N, g->out_w, r * w_rank, w_rank);
        d = dout_r;
      }
      g_autofree float *partial = g_new0(float, MAX(nin, 1));
      /* Without SP, part 1's output gradient arrives in the tensor it writes. */
      gboolean alias = part == 1 && !g->sp;
      if (alias)
        memcpy(partial, dx1, nin * 4);
      Counter c = {0, g->mem.bwd_scratch, TRUE, g_ptr_array_new_with_free_func(g_free)};
      StLayerCtx ctx = ctx_of(g, r, part, &c, NULL, 1.0f);
      ctx.tied_grads = dtied != NULL ? dtied[r] : NULL;
      gboolean ids = st_layer_takes_ids(g->l);
      g_assert_cmpint(g->impl->backward(&ctx, g->l, BATCH, g->p[r], part == 2 ? x1 : in, NULL,
                                        saved[r], alias ? partial : d,
                                        ids ? NULL : partial, dw[r]), ==, 0);
      counter_done(&c);
      for (size_t e = 0; !ids && e < nin; e++)
        sum[e] += partial[e];
    }
  }
}

static void
saved_free(void **saved)
{
  for (int r = 0; r < T; r++)
    g_free(saved[r]);
}

/* ---- comparisons ------------------------------------------------------------------------- */

static void
close_to(const char *what, const Group *g, const float *got, const float *want, size_t n)
{
  double most = 0;
  for (size_t e = 0; e < n; e++)
    most = fmax(most, fabs(want[e]));
  for (size_t e = 0; e < n; e++)
    if (!(fabs(got[e] - want[e]) <= 1e-5 * most + 1e-30)) {
      g_test_message("%s, layer %s%s: [%zu] split %.8g, whole %.8g", what, g->l->name,
                     g->sp ? " (SP)" : "", e, got[e], want[e]);
      g_assert_not_reached();
    }
}

/* Each rank's parameter gradient against the whole layer's: SPLIT and WHOLE
 * spans equal, PARTIAL spans summed over the ranks. */
static void
grads_match(const Group *g, float **dw, const float *dw_whole)
{
  size_t P = (size_t)g->whole->params;
  g_autofree float *placed = g_new0(float, MAX(P, 1));
  g_autofree float *partial = g_new0(float, MAX(P, 1));
  g_autofree gboolean *is_partial = g_new0(gboolean, MAX(P, 1));
  for (int r = 0; r < T; r++) {
    StTpSpan spans[ST_TP_SPANS_MAX];
    int n = st_tp_spans(g->l, r, spans);
    for (int k = 0; k < n; k++)
      for (size_t i = 0; i < spans[k].rows; i++)
        for (size_t j = 0; j < spans[k].len; j++) {
          size_t w = spans[k].whole + i * spans[k].whole_ld + j;
          float v = dw[r][spans[k].part + i * spans[k].part_ld + j];
          if (spans[k].kind == ST_TP_SPAN_PARTIAL) {
            partial[w] += v;
            is_partial[w] = TRUE;
          } else {
            if (spans[k].kind == ST_TP_SPAN_WHOLE && r > 0)
              g_assert_cmpfloat(v, ==, placed[w]); /* every rank the same */
            placed[w] = v;
          }
        }
  }
  for (size_t w = 0; w < P; w++)
    if (is_partial[w])
      placed[w] = partial[w];
  close_to("weight gradient", g, placed, dw_whole, P);
}

/* ---- finite differences ---------------------------------------------------------------- */

typedef struct {
  const Group *g;
  const void *in;
  const float *w; /* the weights of L = sum(w * out) */
} FdCtx;

static double
group_loss(gpointer data)
{
  FdCtx *f = data;
  const Group *g = f->g;
  g_autofree float *out = g_new(float, (size_t)g->N * g->out_w);
  void *saved[T];
  double loss = group_forward(g, f->in, out, saved);
  saved_free(saved);
  if (is_loss(g->l))
    return loss;
  return dot(f->w, out, (size_t)g->N * g->out_w);
}

/* Central differences of the group's loss by the entries `at` (moved together)
 * against `grad`. */
static void
fd_one(const char *what, FdCtx *f, float **at, int n_at, size_t e, float grad)
{
  const float h = 1e-2f;
  float keep[T];
  for (int k = 0; k < n_at; k++)
    keep[k] = *at[k];
  for (int k = 0; k < n_at; k++)
    *at[k] = keep[k] + h;
  double up = group_loss(f);
  for (int k = 0; k < n_at; k++)
    *at[k] = keep[k] - h;
  double down = group_loss(f);
  for (int k = 0; k < n_at; k++)
    *at[k] = keep[k];
  double fd = (up - down) / (2.0 * h);
  if (!(fabs(fd - grad) <= 1e-2 * fmax(fabs(fd), fabs(grad)) + 2e-3)) {
    g_test_message("%s, layer %s%s: d/d[%zu]: finite difference %.6g, backward %.6g", what,
                   f->g->l->name, f->g->sp ? " (SP)" : "", e, fd, grad);
    g_assert_not_reached();
  }
}

/* Sampled entries of the input. */
static void
fd_input(FdCtx *f, float *x, size_t n, const float *grad, GRand *r)
{
  for (int s = 0; s < 6; s++) {
    size_t e = (size_t)g_rand_int_range(r, 0, (gint32)n);
    float *at = x + e;
    fd_one("dx", f, &at, 1, e, grad[e]);
  }
}

/* Sampled entries of rank r's parameters: a SPLIT or PARTIAL one alone (a
 * rank's copy of a norm inside a block feeds only its heads: the group's
 * derivative by it is the rank's partial sum), a WHOLE one moved on every
 * rank at once (all copies are one parameter; only its rows' owner uses
 * it in the forward, every rank computes its whole gradient). */
static void
fd_params(FdCtx *f, int rank, const float *grad, GRand *r)
{
  const Group *g = f->g;
  StTpSpan spans[T][ST_TP_SPANS_MAX];
  int n[T];
  for (int q = 0; q < T; q++)
    n[q] = st_tp_spans(g->l, q, spans[q]);
  for (int s = 0; s < 6; s++) {
    size_t e = (size_t)g_rand_int_range(r, 0, (gint32)g->l->params);
    float *at[T];
    int n_at = 0;
    for (int k = 0; k < n[rank]; k++) {
      const StTpSpan *sp = &spans[rank][k];
      for (size_t i = 0; i < sp->rows; i++) {
        size_t p0 = sp->part + i * sp->part_ld;
        if (e < p0 || e >= p0 + sp->len)
          continue;
        if (sp->kind != ST_TP_SPAN_WHOLE) {
          at[n_at++] = g->p[rank] + e;
          continue;
        }
        for (int q = 0; q < T; q++) /* the same entry of every rank: span k on each */
          at[n_at++] = g->p[q] + spans[q][k].part + i * spans[q][k].part_ld + (e - p0);
      }
    }
    g_assert_cmpint(n_at, >=, 1);
    fd_one("dparams", f, at, n_at, e, grad[e]);
  }
}

/* ---- one layer ---------------------------------------------------------------------------- */

static void
check_layer(const StModel *whole_m, const StModel *rank_m, int i, gboolean sp)
{
  const StLayer *l = &rank_m->layers[i], *wl = &whole_m->layers[i];
  if (l->type->tp == ST_TP_REPLICATED)
    return; /* every rank runs the whole layer on its rows: nothing split */
  g_autoptr(GRand) rnd = g_rand_new_with_seed(17 + i);
  Group g = {.whole_m = whole_m, .rank_m = rank_m, .i = i, .whole = wl, .l = l,
             .impl = st_layer_impl_find(l->type->name), .sp = sp};
  g_assert_nonnull(g.impl);
  g.N = st_tp_rows(wl, BATCH);
  g.in_w = st_layer_takes_ids(wl) ? 1 : last_dim(&wl->in_shape);
  g.out_w = is_loss(wl) ? 1 : last_dim(&wl->out_shape);
  double shares[ST_TP_PARTS_MAX];
  g.parts = st_layer_tp_parts(l, ST_PASS_FWD, shares);
  st_layer_memory(rank_m, i, BATCH, ST_DTYPE_FP32, &g.mem);
  g_test_message("layer %s (%s)%s: %d part(s), saved %" G_GINT64_FORMAT ", scratch %"
                 G_GINT64_FORMAT " / %" G_GINT64_FORMAT,
                 l->name, l->type->name, sp ? " SP" : "", g.parts, g.mem.saved,
                 g.mem.fwd_scratch, g.mem.bwd_scratch);
  /* the weights: the whole layer's, sliced */
  g.w_whole = g_new0(float, MAX(wl->params, 1));
  g.impl->init(wl, g.w_whole, 9);
  for (int64_t e = 0; e < wl->params; e++) /* biases (0 at init) must count too */
    g.w_whole[e] += (float)g_rand_double_range(rnd, -0.2, 0.2);
  for (int r = 0; r < T; r++) {
    g.p[r] = g_new0(float, MAX(l->params, 1));
    st_tp_slice(l, r, g.w_whole, g.p[r]);
  }
  int tied = st_model_tied_layer(whole_m, i);
  if (tied >= 0) {
    const StLayer *te = &whole_m->layers[tied];
    g.tied_whole = g_new0(float, te->params);
    st_layer_impl_find(te->type->name)->init(te, g.tied_whole, 9);
    for (int r = 0; r < T; r++) {
      g.tied[r] = g_new0(float, rank_m->layers[tied].params);
      st_tp_slice(&rank_m->layers[tied], r, g.tied_whole, g.tied[r]);
    }
  }
  /* inputs */
  size_t nin = (size_t)g.N * g.in_w, nout = (size_t)g.N * g.out_w;
  g_autofree float *x = randu(rnd, nin, -1, 1);
  int vocab = (int)st_layer_attr(wl, "vocab", 1);
  g.ids = g_new(int32_t, g.N);
  for (int k = 0; k < g.N; k++)
    g.ids[k] = g_rand_int_range(rnd, 0, vocab);
  g.targets = g_new(int32_t, g.N);
  for (int k = 0; k < g.N; k++)
    g.targets[k] = k == 3 ? -1 : g_rand_int_range(rnd, 0, g.in_w); /* one ignored */
  const void *in = st_layer_takes_ids(wl) ? (const void *)g.ids : x;
  if (is_loss(wl))
    for (size_t e = 0; e < nin; e++)
      x[e] *= 4; /* logits a few units apart: the local maxima differ */
  g_autofree float *w = randu(rnd, nout, -1, 1);

  /* whole */
  g_autofree float *out_whole = g_new0(float, nout), *din_whole = g_new0(float, nin);
  g_autofree float *dw_whole = g_new0(float, MAX(wl->params, 1));
  g_autofree float *dtied_whole = tied >= 0 ? g_new0(float, whole_m->layers[tied].params) : NULL;
  float loss_whole = whole_run(&g, in, out_whole, w, st_layer_takes_ids(wl) ? NULL : din_whole,
                               dw_whole, dtied_whole);
  /* split */
  g_autofree float *out = g_new0(float, nout), *din = g_new0(float, nin);
  float *dw[T], *dtied[T];
  for (int r = 0; r < T; r++) {
    dw[r] = g_new0(float, MAX(l->params, 1));
    dtied[r] = tied >= 0 ? g_new0(float, rank_m->layers[tied].params) : NULL;
  }
  void *saved[T];
  float loss = group_forward(&g, in, out, saved);
  if (is_loss(l))
    g_assert_cmpfloat(fabs(loss - loss_whole), <=, 1e-5 * fabs(loss_whole));
  else
    close_to("output", &g, out, out_whole, nout);
  group_backward(&g, in, saved, w, st_layer_takes_ids(l) ? NULL : din, dw,
                 tied >= 0 ? dtied : NULL);
  saved_free(saved);
  if (!st_layer_takes_ids(l))
    close_to("input gradient", &g, din, din_whole, nin);
  if (l->params > 0)
    grads_match(&g, dw, dw_whole);
  if (tied >= 0) { /* the tied weights' gradient: each rank its slice */
    g_autofree float *placed = g_new0(float, whole_m->layers[tied].params);
    for (int r = 0; r < T; r++)
      st_tp_place(&rank_m->layers[tied], r, dtied[r], placed);
    close_to("tied gradient", &g, placed, dtied_whole, whole_m->layers[tied].params);
  }

  /* the split path against finite differences of its own group loss */
  FdCtx f = {&g, in, w};
  if (is_loss(l)) {
    /* loss_scale 1: dL/dlogits is the group's din */
    fd_input(&f, x, nin, din, rnd);
  } else {
    if (!st_layer_takes_ids(l))
      fd_input(&f, x, nin, din, rnd);
    for (int r = 0; r < T && l->params > 0; r++)
      fd_params(&f, r, dw[r], rnd);
  }
  for (int r = 0; r < T; r++) {
    g_free(g.p[r]);
    g_free(dw[r]);
    g_free(g.tied[r]);
    g_free(dtied[r]);
  }
  g_free(g.w_whole);
  g_free(g.tied_whole);
  g_free(g.ids);
  g_free(g.targets);
}

static void
test_split_layers(gconstpointer data)
{
  gboolean sp = GPOINTER_TO_INT(data);
  for (gsize k = 0; k < G_N_ELEMENTS(MODELS); k++) {
    g_autoptr(StModel) whole = st_test_model_parse(MODELS[k]);
    g_autoptr(GError) error = NULL;
    g_autoptr(StModel) rank = st_model_derive_as(whole, NULL, T, sp, &error);
    g_assert_no_error(error);
    for (int i = 0; i < whole->n_layers; i++)
      check_layer(whole, rank, i, sp);
  }
}

/* Spans cover each rank's vector exactly once, and the ranks' SPLIT spans
 * the whole layer's split entries exactly once; the PARTIAL ones are what
 * the simulator's schedules all-reduce per step (st_layer_tp_partial_params),
 * with and without sequence parallelism. */
static void
test_spans(void)
{
  for (gsize k = 0; k < G_N_ELEMENTS(MODELS); k++) {
    g_autoptr(StModel) whole = st_test_model_parse(MODELS[k]);
    g_autoptr(StModel) rank = st_model_derive_as(whole, NULL, T, FALSE, NULL);
    g_autoptr(StModel) rank_sp = st_model_derive_as(whole, NULL, T, TRUE, NULL);
    for (int i = 0; i < whole->n_layers; i++) {
      const StLayer *l = &rank->layers[i];
      g_assert_cmpint(st_layer_tp_partial_params(l), ==, (int64_t)st_tp_partial_elems(l));
      g_assert_cmpint(st_layer_tp_partial_params(&rank_sp->layers[i]), ==,
                      (int64_t)st_tp_partial_elems(&rank_sp->layers[i]));
      size_t P = (size_t)whole->layers[i].params;
      g_autofree int *hits = g_new0(int, MAX(P, 1));
      for (int r = 0; r < T; r++) {
        g_autofree int *mine = g_new0(int, MAX(l->params, 1));
        StTpSpan spans[ST_TP_SPANS_MAX];
        int n = st_tp_spans(l, r, spans);
        for (int s = 0; s < n; s++)
          for (size_t a = 0; a < spans[s].rows; a++)
            for (size_t b = 0; b < spans[s].len; b++) {
              size_t pi = spans[s].part + a * spans[s].part_ld + b;
              size_t wi = spans[s].whole + a * spans[s].whole_ld + b;
              g_assert_cmpuint(pi, <, (size_t)l->params);
              g_assert_cmpuint(wi, <, P);
              mine[pi]++;
              hits[wi] += spans[s].kind == ST_TP_SPAN_SPLIT ? T : 1;
            }
        for (int64_t e = 0; e < l->params; e++)
          g_assert_cmpint(mine[e], ==, 1);
      }
      for (size_t e = 0; e < P; e++)
        g_assert_cmpint(hits[e], ==, T); /* a split entry on one rank, a whole one on all */
    }
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  K = st_kernels_host();
  g_test_add_func("/layers/tp/spans", test_spans);
  g_test_add_data_func("/layers/tp/split", GINT_TO_POINTER(FALSE), test_split_layers);
  g_test_add_data_func("/layers/tp/split-sp", GINT_TO_POINTER(TRUE), test_split_layers);
  return g_test_run();
}
