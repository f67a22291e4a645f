/* test_automodel.c: the mechanisms of `--framework automodel` (NeMo
 * Automodel's Transformer Engine + DeepEP recipes, cost/framework_automodel.c),
 * each against a closed form or an independent count:
 *
 * - the ranks a token reaches (strategy/moe_routing.h): the closed form for
 *   random routing against enumerating every k-subset of experts, and
 *   Automodel's FakeBalancedGate (experts tk .. tk+k-1 mod X) against
 *   walking its tokens;
 * - DeepEP's all-to-alls carry a token once per rank it reaches, without
 *   the capacity's padding: tiny-moe (X = 4 experts of top 2, capacity
 *   factor 1.5: C = 12 rows per sample and expert, s = 16, d = 32) on E = 2
 *   ranks moves b s reach d e bytes per all-to-all where Megatron-LM's
 *   dispatcher moves b X C d e;
 * - grouped-GEMM experts take their share of the waves, not whole waves;
 * - the loss keeps bf16 log-probabilities, half the fp32 ones;
 * - the executor refuses the per-rank dispatch it does not run. */
#include <math.h>
#include <string.h>

#include "cost/estimate.h"
#include "exec/exec.h"
#include "strategy/moe_routing.h"
#include "strategy/strategy.h"
#include "testutil.h"

/* Distinct owners of every k-subset of X experts (X/R per rank), averaged:
 * the subsets enumerated as bit masks. */
static double
ranks_enumerated(int X, int R, int k)
{
  double sum = 0, n = 0;
  for (unsigned mask = 0; mask < (1u << X); mask++) {
    if (__builtin_popcount(mask) != k)
      continue;
    unsigned ranks = 0;
    for (int e = 0; e < X; e++)
      if (mask & (1u << e))
        ranks |= 1u << (e / (X / R));
    sum += __builtin_popcount(ranks);
    n++;
  }
  return sum / n;
}

static void
test_ranks_random(void)
{
  static const int cases[][3] = {{8, 4, 2}, {8, 8, 2}, {12, 3, 4}, {16, 4, 3}, {16, 8, 5},
                                 {16, 2, 8}, {16, 16, 1}};
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    int X = cases[i][0], R = cases[i][1], k = cases[i][2];
    double got = st_moe_ranks_per_token(X, R, k, ST_MOE_ROUTING_RANDOM);
    g_assert_cmpfloat(fabs(got - ranks_enumerated(X, R, k)), <, 1e-12);
  }
  /* one expert per rank: a token reaches its k ranks; Mixtral's 8 of top 2 */
  g_assert_cmpfloat(st_moe_ranks_per_token(8, 8, 2, ST_MOE_ROUTING_RANDOM), ==, 2.0);
  /* Qwen3-30B-A3B on 8 ranks: 128 experts, top 8: 8 (1 - C(112,8) / C(128,8)) = 5.339 */
  double q = st_moe_ranks_per_token(128, 8, 8, ST_MOE_ROUTING_RANDOM);
  g_assert_cmpfloat(fabs(q - 5.3394), <, 0.0001);
  g_assert_cmpfloat(st_moe_ranks_per_token(128, 1, 8, ST_MOE_ROUTING_RANDOM), ==, 1.0);
}

/* FakeBalancedGate: token t's experts (t k + j) mod X, owners by X/R. */
static double
ranks_walked(int X, int R, int k, int tokens)
{
  double sum = 0;
  for (int t = 0; t < tokens; t++) {
    unsigned ranks = 0;
    for (int j = 0; j < k; j++)
      ranks |= 1u << ((t * k + j) % X / (X / R));
    sum += __builtin_popcount(ranks);
  }
  return sum / tokens;
}

static void
test_ranks_contiguous(void)
{
  static const int cases[][3] = {{128, 8, 8}, {64, 16, 8}, {128, 8, 6}, {12, 4, 5},
                                 {32, 32, 4}, {60, 6, 7}};
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    int X = cases[i][0], R = cases[i][1], k = cases[i][2];
    /* X tokens cover whole cycles of starts (the cycle divides X) */
    double got = st_moe_ranks_per_token(X, R, k, ST_MOE_ROUTING_CONTIGUOUS);
    g_assert_cmpfloat(fabs(got - ranks_walked(X, R, k, X)), <, 1e-12);
  }
  /* the Qwen3 benchmark's: every token on one rank; 4 experts a rank, top 8: two */
  g_assert_cmpfloat(st_moe_ranks_per_token(128, 8, 8, ST_MOE_ROUTING_CONTIGUOUS), ==, 1.0);
  g_assert_cmpfloat(st_moe_ranks_per_token(64, 16, 8, ST_MOE_ROUTING_CONTIGUOUS), ==, 2.0);
}

static StSchedule *
build(const char *framework, const char *routing, int E)
{
  StOptions o;
  st_options_init(&o);
  o.framework = g_strdup(framework);
  o.micro_batch = 2;
  o.global_batch = 2 * 8;
  o.precision = ST_PRECISION_MIXED;
  o.expert_parallel = E;
  o.moe_routing = strcmp(routing, "contiguous") == 0 ? ST_MOE_ROUTING_CONTIGUOUS
                                                     : ST_MOE_ROUTING_RANDOM;
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-moe.json");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  StSchedule *s = st_test_build("megatron", m, c, &o);
  st_options_clear(&o);
  return s;
}

/* Every all-to-all of program 0 carries `bytes`; how many there are. */
static int
all_to_alls(const StSchedule *s, int64_t bytes)
{
  const StProgram *p = g_ptr_array_index(s->programs, 0);
  int n = 0;
  for (guint i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    if (op->kind == ST_OP_COMM_COLL && op->sub == ST_COLL_ALL_TO_ALL) {
      g_assert_cmpint(op->bytes, ==, bytes);
      n++;
    }
  }
  return n;
}

static void
test_dispatch_bytes(void)
{
  const int64_t b = 2, s = 16, X = 4, C = 12, d = 32, e = 2;
  g_autoptr(StSchedule) megatron = build("megatron", "random", 2);
  g_autoptr(StSchedule) random = build("automodel", "random", 2);
  g_autoptr(StSchedule) contiguous = build("automodel", "contiguous", 2);
  int n = all_to_alls(megatron, b * X * C * d * e);
  g_assert_cmpint(n, >, 0);
  /* random: 2 (1 - C(2,2) / C(4,2)) = 5/3 ranks a token */
  g_assert_cmpint(all_to_alls(random, (int64_t)ceil(b * s * 5.0 / 3.0) * d * e), ==, n);
  /* contiguous: experts {0, 1} or {2, 3}, one rank */
  g_assert_cmpint(all_to_alls(contiguous, b * s * d * e), ==, n);
  /* less on the wire: a step no longer */
  StTimeline *t_fast = NULL, *t_slow = NULL;
  StSummary *fast = st_test_simulate(contiguous, "auto", FALSE, &t_fast);
  StSummary *slow = st_test_simulate(random, "auto", FALSE, &t_slow);
  g_assert_cmpint(fast->step_time_ns, <=, slow->step_time_ns);
  st_summary_free(fast);
  st_summary_free(slow);
  st_timeline_free(t_fast);
  st_timeline_free(t_slow);
}

/* The loss's saved log-probabilities: 16 x 64 bf16 per sample under
 * automodel, fp32 under megatron (one rank's whole vocabulary). */
static int64_t
loss_kept(const StSchedule *s)
{
  const StProgram *p = g_ptr_array_index(s->programs, 0);
  for (guint i = 0; i < p->buffers->len; i++) {
    const StBuffer *buf = &g_array_index(p->buffers, StBuffer, i);
    if (strcmp(buf->name, "kept loss m0") == 0)
      return buf->bytes;
  }
  g_assert_not_reached();
}

static void
test_loss_16bit(void)
{
  g_autoptr(StSchedule) megatron = build("megatron", "random", 2);
  g_autoptr(StSchedule) automodel = build("automodel", "random", 2);
  const StLayer *loss = &megatron->model->layers[megatron->model->n_layers - 1];
  int64_t logits = st_shape_elems(&loss->in_shape) * 2;
  g_assert_cmpint(loss_kept(megatron), >=, logits * 4);
  g_assert_cmpint(loss_kept(automodel), ==, logits * 2);
}

/* A GEMM of 133 tiles of 128 x 128 on 132 SMs (k 4096: no split-K).
 * Alone the library takes the fastest of the tile and its halves, whole
 * waves each: 64 x 64 tiles, 532 in 5 waves of a quarter tile's time
 * (1.25 tiles' time); as a group of a grouped GEMM, 133/132 of a wave of
 * whole tiles, whichever tile. */
static void
test_grouped_waves(void)
{
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 1);
  StComputeCtx ctx = {c, NULL, NULL, ST_DTYPE_BF16, NULL, NULL, FALSE, FALSE};
  StKernel k = {ST_KERNEL_GEMM, 128 * 133, 128, 4096, 1, 2.0 * 128 * 133 * 128 * 4096, 0,
                FALSE, FALSE, FALSE};
  double best = G_MAXDOUBLE;
  for (int h = 0; h < 4; h++) {
    double tm = h & 1 ? 64 : 128, tn = h & 2 ? 64 : 128;
    double tiles = ceil(k.m / tm) * ceil(k.n / tn);
    best = MIN(best, ceil(tiles / 132) * tm * tn / (128.0 * 128.0));
  }
  g_assert_cmpfloat(best, ==, 1.25);
  double alone = st_estimate_kernel_s(&ctx, &k);
  k.grouped = TRUE;
  double grouped = st_estimate_kernel_s(&ctx, &k);
  g_assert_cmpfloat(fabs(grouped / alone - (133.0 / 132.0) / best), <, 1e-9);
  /* sharing waves never runs a group above the GPU's bf16 peak */
  g_assert_cmpfloat(grouped, >=, k.flops / st_cluster_peak_flops(c, ST_DTYPE_BF16));
}

static void
test_executor_refuses(void)
{
  g_autoptr(StSchedule) s = build("automodel", "random", 2);
  g_autoptr(GError) error = NULL;
  g_assert_false(st_exec_check(s, &error));
  g_assert_nonnull(strstr(error->message, "once per rank"));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/automodel/ranks/random", test_ranks_random);
  g_test_add_func("/automodel/ranks/contiguous", test_ranks_contiguous);
  g_test_add_func("/automodel/dispatch-bytes", test_dispatch_bytes);
  g_test_add_func("/automodel/loss-16bit", test_loss_16bit);
  g_test_add_func("/automodel/grouped-waves", test_grouped_waves);
  g_test_add_func("/automodel/executor-refuses", test_executor_refuses);
  return g_test_run();
}
