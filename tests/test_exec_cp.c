/* test_exec_cp.c: context parallelism (the megatron strategy's
 * --context-parallel, sim/strategy/context_parallel.h) run for real on the
 * host backend: each rank of a 'cp' group holds its two chunks of every
 * sequence (Megatron's get_batch_on_this_cp_rank), its attention runs in
 * the schedule's steps with the ring's exchanges moving the real keys and
 * values (and backward their gradient) between them (exec/op_cp.c,
 * exec/layers/layer_decoder_cp.c, kernels ring_attn_*).
 *
 * /exec/cp/kernels: the ring's steps against flash attention on the whole
 * sequence, in the kernels alone (c = 2, 4): the outputs, log-sum-exps and
 * gradients agree within 2e-6 (measured: 2.4e-7; fp32, only the order of
 * the sums differs: chunk by chunk with the online softmax's rescaling
 * against one pass).
 *
 * /exec/cp/agreement: t x c x p x d ranks against DP on d ranks, M
 * micro-batches of b: replica k of both trains on the same samples, from
 * the same weights; the losses agree within 1e-5 and the weights within
 * 1e-4 by st_test_weights_differ's relative measure, the tolerances of the
 * other executor agreement tests (test_exec_tp.c), as only the order of
 * fp32 sums differs (the attention's, and the gradients' sum over c x d
 * ranks rather than d). Measured after 3 steps of momentum SGD at lr 0.1:
 * losses within 7.2e-7, weights within 3.2e-5 relative (an absolute
 * difference near zero on a weight near zero, as in test_exec_tp.c).
 * Leaving out the gradient that comes home at the last exchange moves the
 * losses by 4.2e-2 (c = 2) and the weights by 33 relative; RoPE turning
 * the local positions instead of the global ones, by 1.6e-2 and 15.
 *
 * --cp-comm all-to-all (DeepSpeed Ulysses, layer_decoder_ulysses.c): the
 * rank's Q, K, V of head group j sent to rank j, the whole sequence's
 * attention on a group, the output sent back: the same agreement.
 *
 * /exec/cp/ring-bytes: what the ring moved, per rank, layer and
 * micro-batch of b sequences, K = 2 kv_heads head_dim (s / c) e the rank's
 * keys and values of a sequence (docs/LLM.md, "Context parallelism"):
 * forward c - 1 exchanges of b K, backward (c - 1) b K of chunks and as
 * much of their gradient: 3 (c - 1) b K in all. The executor checks each
 * exchange's bytes against the schedule's op (op_cp.c); here the ops it
 * ran are counted against the closed form.
 */
#include <math.h>
#include <string.h>

#include "exec/exec.h"
#include "kernels/kernels.h"
#include "strategy/strategy.h"
#include "testutil.h"

#define M 2 /* micro-batches per replica and step */
#define MB 2
#define STEPS 3

/* ---- the kernels: ring steps against flash attention -------------------------- */

static void
fill(float *x, size_t n, uint32_t seed)
{
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
}

static double
worst(const float *a, const float *b, size_t n)
{
  double w = 0;
  for (size_t i = 0; i < n; i++)
    w = MAX(w, fabs((double)a[i] - b[i]));
  return w;
}

static void
kernels_for(int c, int window)
{
  const StKernels *K = st_kernels_host();
  enum { B = 2, S = 16, H = 4, G = 2, D = 8 };
  const int n = (H + 2 * G) * D, w = 2 * G * D, T = S / c, q = H * D;
  float scale = 1.0f / sqrtf((float)D);
  g_autofree float *qkv = g_new(float, B * S * n), *y = g_new(float, B * S * q);
  g_autofree float *lse = g_new(float, B * H * S), *dy = g_new(float, B * S * q);
  g_autofree float *dqkv = g_new(float, B * S * n), *rowdot = g_new(float, B * H * S);
  fill(qkv, (size_t)B * S * n, 7);
  fill(dy, (size_t)B * S * q, 11);
  g_assert_cmpint(K->flash_attn_fwd(NULL, y, lse, qkv, B, S, H, G, D, scale, 1, window,
                                    ST_KDT_F32),
                  ==, 0);
  g_assert_cmpint(K->flash_attn_bwd(NULL, dqkv, dy, qkv, y, lse, rowdot, B, S, H, G, D, scale, 1,
                                    window, ST_KDT_F32),
                  ==, 0);
  /* each rank's rows, and its keys and values */
  float *lq[4], *lkv[4], *ldy[4], *ly[4], *llse[4], *ldq[4], *ldkv[4];
  for (int r = 0; r < c; r++) {
    lq[r] = g_new(float, B * T * n);
    lkv[r] = g_new(float, B * T * w);
    ldy[r] = g_new(float, B * T * q);
    for (int b = 0; b < B; b++)
      for (int t = 0; t < T; t++) {
        int pos = st_k_cp_position(t, T, c, r);
        memcpy(lq[r] + ((size_t)b * T + t) * n, qkv + ((size_t)b * S + pos) * n,
               sizeof(float) * n);
        memcpy(lkv[r] + ((size_t)b * T + t) * w, qkv + ((size_t)b * S + pos) * n + q,
               sizeof(float) * w);
        memcpy(ldy[r] + ((size_t)b * T + t) * q, dy + ((size_t)b * S + pos) * q,
               sizeof(float) * q);
      }
  }
  double fwd = 0, bwd = 0;
  for (int r = 0; r < c; r++) {
    g_autofree float *o = g_new0(float, B * T * q), *m = g_new0(float, B * H * T);
    g_autofree float *l = g_new0(float, B * H * T);
    for (int k = 1; k <= c; k++) /* the ring's order: rank r - k + 1's chunk at step k */
      g_assert_cmpint(K->ring_attn_fwd(NULL, o, m, l, lq[r], n, lkv[((r - k + 1) % c + c) % c], B,
                                       T, H, G, D, scale, 1, window, c, r,
                                       ((r - k + 1) % c + c) % c, ST_KDT_F32),
                      ==, 0);
    ly[r] = g_new(float, B * T * q);
    llse[r] = g_new(float, B * H * T);
    g_assert_cmpint(K->ring_attn_finish(NULL, ly[r], llse[r], o, m, l, B, T, H, D, ST_KDT_F32),
                    ==, 0);
    for (int b = 0; b < B; b++)
      for (int t = 0; t < T; t++) {
        int pos = st_k_cp_position(t, T, c, r);
        fwd = MAX(fwd, worst(ly[r] + ((size_t)b * T + t) * q, y + ((size_t)b * S + pos) * q, q));
        for (int h = 0; h < H; h++)
          fwd = MAX(fwd, fabs(llse[r][((size_t)b * H + h) * T + t] -
                              lse[((size_t)b * H + h) * S + pos]));
      }
  }
  for (int r = 0; r < c; r++) {
    ldq[r] = g_new0(float, B * T * n);
    ldkv[r] = g_new0(float, B * T * w);
  }
  for (int r = 0; r < c; r++)
    for (int j = 0; j < c; j++)
      g_assert_cmpint(K->ring_attn_bwd(NULL, ldq[r], n, ldkv[j], w, ldy[r], ly[r], llse[r], lq[r],
                                       n, lkv[j], B, T, H, G, D, scale, 1, window, c, r, j,
                                       ST_KDT_F32),
                      ==, 0);
  for (int r = 0; r < c; r++)
    for (int b = 0; b < B; b++)
      for (int t = 0; t < T; t++) {
        const float *ref = dqkv + ((size_t)b * S + st_k_cp_position(t, T, c, r)) * n;
        bwd = MAX(bwd, worst(ldq[r] + ((size_t)b * T + t) * n, ref, q));
        bwd = MAX(bwd, worst(ldkv[r] + ((size_t)b * T + t) * w, ref + q, w));
      }
  g_test_message("c = %d, window %d: forward within %.3g of flash attention, backward %.3g", c,
                 window, fwd, bwd);
  g_assert_cmpfloat(fwd, <=, 2e-6);
  g_assert_cmpfloat(bwd, <=, 2e-6);
  for (int r = 0; r < c; r++) {
    g_free(lq[r]);
    g_free(lkv[r]);
    g_free(ldy[r]);
    g_free(ly[r]);
    g_free(llse[r]);
    g_free(ldq[r]);
    g_free(ldkv[r]);
  }
}

static void
test_kernels(void)
{
  kernels_for(2, 0);
  kernels_for(4, 0);
  kernels_for(4, 5); /* a sliding window across the chunks */
}

/* ---- whole runs against DP ---------------------------------------------------- */

/* A LLaMA with a tied head and a parallel residual (GPT-J's). */
static const char *const PARALLEL =
  "{\"name\": \"tiny-llama-parallel\", \"input\": [16], \"layers\": ["
  " {\"name\": \"embed\", \"type\": \"embedding\", \"vocab\": 32, \"dim\": 16},"
  " {\"repeat\": 2, \"layers\": [{\"name\": \"layers.{i}\", \"type\": \"llama_block\","
  "  \"heads\": 4, \"kv_heads\": 2, \"ffn\": 32, \"parallel_residual\": true}]},"
  " {\"name\": \"norm\", \"type\": \"rmsnorm\"},"
  " {\"name\": \"lm_head\", \"type\": \"lm_head\", \"vocab\": 32, \"tied\": true},"
  " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}";

/* A Mistral-like sliding window of 5 over sequences of 16: cut in 2c
 * chunks, a query sees keys of its own and earlier chunks up to 4 back. */
static const char *const WINDOW =
  "{\"name\": \"tiny-window\", \"input\": [16], \"layers\": ["
  " {\"name\": \"embed\", \"type\": \"embedding\", \"vocab\": 32, \"dim\": 16},"
  " {\"repeat\": 2, \"layers\": [{\"name\": \"layers.{i}\", \"type\": \"llama_block\","
  "  \"heads\": 4, \"kv_heads\": 2, \"ffn\": 32, \"window\": 5}]},"
  " {\"name\": \"norm\", \"type\": \"rmsnorm\"},"
  " {\"name\": \"lm_head\", \"type\": \"lm_head\", \"vocab\": 32},"
  " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}";

static StSchedule *
build(const StModel *m, const char *strategy, int ranks, int d, const char *const *settings,
      GError **error)
{
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(StCluster) cl = st_cluster_load(path, error);
  g_assert_nonnull(cl);
  g_assert_true(st_cluster_resize(cl, 1, ranks, error));
  StOptions o;
  st_options_init(&o);
  o.ranks = ranks;
  o.micro_batch = MB;
  o.global_batch = (int64_t)d * M * MB;
  o.steps = STEPS;
  o.optimizer = ST_OPTIMIZER_SGD;
  o.precision = ST_PRECISION_FP32;
  for (int i = 0; settings != NULL && settings[i] != NULL; i += 2)
    g_assert_true(st_options_set(&o, settings[i], settings[i + 1], NULL));
  StSchedule *s = st_strategy_build(st_strategy_find(strategy), m, cl, NULL, &o, error);
  st_options_clear(&o);
  return s;
}

/* megatron with context parallelism c (and `settings`) on `ranks` ranks
 * against dp on d (with `ref_settings`): the losses within `losses`, the
 * weights within `weights` (st_test_weights_differ). */
static void
against_dp_within(const StModel *m, int c, int ranks, int d, const char *const *more,
                  const char *const *ref_settings, double losses, double weights)
{
  g_autofree char *cs = g_strdup_printf("%d", c);
  const char *settings[16] = {"context-parallel", cs, "vocab-multiple", "1"};
  int n = 4;
  for (int i = 0; more[i] != NULL; i++)
    settings[n++] = more[i];
  settings[n] = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) ref = build(m, "dp", d, d, ref_settings, &error);
  g_assert_no_error(error);
  StExecResult rr;
  g_autoptr(StTimeline) rt = st_test_execute(ref, 0.1, 0, &rr);
  g_autoptr(StSchedule) s = build(m, "megatron", ranks, d, settings, &error);
  g_assert_no_error(error);
  g_assert_cmpint(st_model_context_parallel(s->model), ==, c);
  StExecResult r;
  g_autoptr(StTimeline) tl = st_test_execute(s, 0.1, 0, &r);
  g_assert_cmpuint(r.loss->len, ==, STEPS);
  double loss = 0;
  for (guint k = 0; k < r.loss->len; k++)
    loss = MAX(loss, fabs(g_array_index(r.loss, double, k) - g_array_index(rr.loss, double, k)));
  double w = st_test_weights_differ(r.weights, rr.weights);
  g_autofree char *how = g_strjoinv(" ", (char **)settings);
  g_test_message("%s: %d ranks (%s): losses differ from dp on %d by %.3g, weights by %.3g "
                 "relative",
                 m->name, ranks, how, d, loss, w);
  g_assert_cmpfloat(loss, <=, losses);
  g_assert_cmpfloat(w, <=, weights);
  st_exec_result_clear(&r);
  st_exec_result_clear(&rr);
}

static void
against_dp(const StModel *m, int c, int ranks, int d, const char *const *more)
{
  const char *none[] = {NULL};
  against_dp_within(m, c, ranks, d, more, none, 1e-5, 1e-4);
}

static void
test_agreement(void)
{
  g_autoptr(StModel) llama = st_test_model("tests/data/exec/tiny-llama.json");
  g_autoptr(StModel) parallel = st_test_model_parse(PARALLEL);
  const char *none[] = {NULL};
  against_dp(llama, 2, 2, 1, none);
  against_dp(llama, 4, 4, 1, none);     /* chunks of 2 tokens: 8 of a sequence of 16 */
  against_dp(llama, 2, 4, 2, none);     /* CP 2 x DP 2: gradients over the dp x cp group */
  against_dp(parallel, 2, 2, 1, none);  /* a parallel residual and a tied head */
  const char *zero[] = {"zero-stage", "1", NULL};
  against_dp(llama, 2, 4, 2, zero);     /* the optimizer sharded over dp x cp */
  const char *pp[] = {"pipeline-stages", "2", NULL};
  against_dp(llama, 2, 4, 1, pp);       /* CP 2 x PP 2 (1F1B) */
  const char *again[] = {"recompute", "full", NULL};
  against_dp(llama, 2, 2, 1, again);    /* the ring again in each recompute */
  /* DeepSpeed Ulysses: the whole sequence of a head group per rank */
  const char *a2a[] = {"cp-comm", "all-to-all", NULL};
  const char *a2a_zero[] = {"cp-comm", "all-to-all", "zero-stage", "1", NULL};
  against_dp(llama, 2, 2, 1, a2a);
  against_dp(llama, 2, 4, 2, a2a_zero);
  against_dp(parallel, 2, 2, 1, a2a);
  /* a sliding window, over the ring (CP 4: chunks of 2) and Ulysses */
  g_autoptr(StModel) window = st_test_model_parse(WINDOW);
  against_dp(window, 4, 4, 1, none);
  against_dp(window, 2, 2, 1, a2a);
  /* mixed precision: activations, and the ring's chunks and gradients on
   * their way, in bf16 (8 bits of mantissa): the losses within 2e-3
   * (measured 5.5e-4 over the ring, 3.6e-4 over Ulysses; TP 2 differs from
   * DP by 2.9e-4 in bf16 too; the faults above move fp32's by 1.6e-2 and
   * more); the weights not compared, bf16's rounding near zero making the
   * relative measure meaningless (0.5) */
  const char *mixed[] = {"precision", "mixed", NULL};
  const char *mixed_a2a[] = {"precision", "mixed", "cp-comm", "all-to-all", NULL};
  against_dp_within(llama, 2, 2, 1, mixed, mixed, 2e-3, G_MAXDOUBLE);
  against_dp_within(llama, 2, 2, 1, mixed_a2a, mixed, 2e-3, G_MAXDOUBLE);
  /* TP 2 x CP 2: the attention half of each block split over the tensor
   * group in steps, with and without sequence parallelism */
  const char *tp[] = {"tensor-parallel", "2", NULL};
  const char *sp[] = {"tensor-parallel", "2", "sequence-parallel", "true", NULL};
  against_dp(llama, 2, 4, 1, tp);
  against_dp(llama, 2, 4, 1, sp);
  against_dp(llama, 2, 8, 2, sp);       /* TP 2 x CP 2 x DP 2 */
}

/* ---- the bytes the ring moved ----------------------------------------------- */

static void
ring_bytes_for(int c)
{
  g_autoptr(StModel) llama = st_test_model("tests/data/exec/tiny-llama.json");
  g_autofree char *cs = g_strdup_printf("%d", c);
  const char *settings[] = {"context-parallel", cs, NULL};
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) s = build(llama, "megatron", c, 1, settings, &error);
  g_assert_no_error(error);
  StExecResult res;
  g_autoptr(StTimeline) tl = st_test_execute(s, 0.1, 0, &res);
  st_exec_result_clear(&res);
  /* tiny-llama: 2 blocks, 2 kv heads of 8, s = 16, fp32 */
  const int64_t L = 2, b = MB, K = 2 * 2 * 8 * (16 / c) * 4;
  int cp = st_schedule_find_comm(s, "cp");
  g_assert_cmpint(cp, >=, 0);
  for (int rank = 0; rank < c; rank++) {
    int64_t fwd = 0, bwd = 0, one = 0, two = 0;
    const StProgram *p = st_schedule_program_of(s, rank);
    for (guint i = 0; i < tl->ops->len; i++) {
      const StOpRecord *rec = &g_array_index(tl->ops, StOpRecord, i);
      if (rec->rank != rank || rec->step != 0)
        continue;
      const StOp *op = st_program_op(p, rec->op);
      if (op->kind != ST_OP_COMM_COLL || op->comm != cp)
        continue;
      g_assert_cmpint(op->sub, ==, ST_COLL_RING_SHIFT);
      /* its pass: that of the next step of its layer and micro-batch
       * (forward: the core step it feeds; backward: the one after it) */
      const StOp *next = NULL;
      for (guint o = rec->op + 1; o < p->ops->len && next == NULL; o++) {
        const StOp *x = st_program_op(p, o);
        if (x->kind == ST_OP_COMP && x->layer == op->layer && x->micro == op->micro)
          next = x;
      }
      g_assert_nonnull(next);
      *(st_pass_is_backward(next->sub) ? &bwd : &fwd) += op->bytes;
      one += op->bytes == b * K;
      two += op->bytes == 2 * b * K;
    }
    g_assert_cmpint(fwd, ==, (c - 1) * b * K * L * M);
    g_assert_cmpint(bwd, ==, 2 * (c - 1) * b * K * L * M);
    /* forward c - 1 of b K; backward (the gradient one exchange behind
     * the chunk): c = 2, the chunk then the gradient home, 2 of b K; c >=
     * 3, 2 of the chunk alone, c - 3 of both, 2 of the gradient alone */
    g_assert_cmpint(one, ==, (c - 1 + (c == 2 ? 2 : 4)) * L * M);
    g_assert_cmpint(two, ==, (c == 2 ? 0 : c - 3) * L * M);
  }
}

static void
test_ring_bytes(void)
{
  ring_bytes_for(2);
  ring_bytes_for(4);
}

/* Ulysses (c = 2): per layer and micro-batch, forward an all-to-all of the
 * rank's Q, K, V, b Q = b (4 + 2 x 2) 8 x 8 tokens x 4 bytes = 4 KiB, and
 * of its output, b O = b 4 x 8 x 8 x 4 = 2 KiB; backward the same two (the
 * output's gradient in, Q, K, V's back); a rank sends (c - 1) / c of each
 * buffer. */
static void
test_a2a_bytes(void)
{
  g_autoptr(StModel) llama = st_test_model("tests/data/exec/tiny-llama.json");
  const char *settings[] = {"context-parallel", "2", "cp-comm", "all-to-all", NULL};
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) s = build(llama, "megatron", 2, 1, settings, &error);
  g_assert_no_error(error);
  StExecResult res;
  g_autoptr(StTimeline) tl = st_test_execute(s, 0.1, 0, &res);
  st_exec_result_clear(&res);
  const int64_t L = 2, b = MB, Q = (4 + 2 * 2) * 8 * 8 * 4, O = 4 * 8 * 8 * 4;
  int cp = st_schedule_find_comm(s, "cp");
  for (int rank = 0; rank < 2; rank++) {
    int64_t q = 0, out = 0;
    for (guint i = 0; i < tl->ops->len; i++) {
      const StOpRecord *rec = &g_array_index(tl->ops, StOpRecord, i);
      if (rec->rank != rank || rec->step != 0)
        continue;
      const StOp *op = st_program_op(st_schedule_program_of(s, rank), rec->op);
      if (op->kind != ST_OP_COMM_COLL || op->comm != cp)
        continue;
      g_assert_cmpint(op->sub, ==, ST_COLL_ALL_TO_ALL);
      q += op->bytes == b * Q;
      out += op->bytes == b * O;
    }
    g_assert_cmpint(q, ==, 2 * L * M);
    g_assert_cmpint(out, ==, 2 * L * M);
  }
}

/* What the executor's context parallelism does not run is said up front
 * (dense attention under CP the strategy refuses already). */
static void
test_refused(void)
{
  g_autoptr(StModel) parallel = st_test_model_parse(PARALLEL);
  struct {
    const StModel *m;
    const char *settings[8];
    int ranks;
    const char *says;
  } cases[] = {
    {parallel, {"context-parallel", "2", "tensor-parallel", "2", NULL}, 4,
     "with tensor parallelism on blocks in one part"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(StSchedule) s = build(cases[i].m, "megatron", cases[i].ranks, 1, cases[i].settings,
                                    &error);
    g_assert_no_error(error);
    g_assert_false(st_exec_check(s, &error));
    g_assert_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED);
    g_test_message("%s", error->message);
    g_assert_nonnull(strstr(error->message, cases[i].says));
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/exec/cp/kernels", test_kernels);
  g_test_add_func("/exec/cp/agreement", test_agreement);
  g_test_add_func("/exec/cp/ring-bytes", test_ring_bytes);
  g_test_add_func("/exec/cp/all-to-all-bytes", test_a2a_bytes);
  g_test_add_func("/exec/cp/refused", test_refused);
  return g_test_run();
}
