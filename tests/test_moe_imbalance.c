/* test_moe_imbalance.c: dropless routing's load imbalance under expert
 * parallelism (--moe-imbalance F, docs/LLM.md "Modern MoE"): every MoE
 * layer waits for the busiest expert-parallel rank, whose routed tokens are
 * F times the mean, so each rank is costed as that rank.
 *
 * tiny-moe (2 MoE layers of X = 4 experts, top 2, capacity factor 1.5,
 * s = 16, d = 32, C = ceil(1.5 x 2 x 16 / 4) = 12 rows per sample and
 * expert) on t = 2 (no SP), E = 2, b = 2, M = 2 micro-batches, 8 GPUs.
 * Closed forms, per EP rank:
 *   all-to-alls: 2 x 4 x M of ceil(F b X C) d 2 bytes each (F = 1.5:
 *                ceil(144) = 144 rows, 9,216 bytes; balanced 96 rows);
 *   each expert pass (forward, backward) takes F times its balanced time,
 *                the dense layers' passes are unchanged;
 *   the experts' saved blocks ceil(F x) of the balanced x bytes;
 *   the step is longer, by less than F times (the dense layers do not grow);
 *   model FLOPs (MFU's numerator) do not change: the imbalance is waiting,
 *                not useful work.
 * F = 1 (the default) gives the balanced schedule exactly; with E = 1 one
 * rank holds every expert and F changes nothing. */
#include <math.h>
#include <string.h>

#include "output/mfu.h"
#include "sched/work.h"
#include "strategy/strategy.h"
#include "testutil.h"

static StSchedule *
build(int E, double imbalance)
{
  StOptions o;
  st_options_init(&o);
  o.framework = g_strdup("ideal");
  o.tensor_parallel = 2;
  o.micro_batch = 2;
  o.global_batch = 2 * 2 * (8 / 2);
  o.precision = ST_PRECISION_MIXED;
  o.expert_parallel = E;
  o.moe_imbalance = imbalance;
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-moe.json");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  StSchedule *s = st_test_build("megatron", m, c, &o);
  st_options_clear(&o);
  return s;
}

static int64_t
ep_bytes(const StSchedule *s, int program, int *count)
{
  int comm = st_schedule_find_comm(s, "ep");
  const StProgram *p = g_ptr_array_index(s->programs, program);
  int64_t bytes = 0;
  *count = 0;
  for (guint i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    if (op->kind == ST_OP_COMM_COLL && op->comm == comm) {
      bytes += op->bytes;
      (*count)++;
    }
  }
  return bytes;
}

/* Compute time of program 0's op k. */
static double
op_time(const StSchedule *s, guint k)
{
  const StProgram *p = g_ptr_array_index(s->programs, 0);
  StComputeCtx ctx = st_program_compute_ctx(s, p, NULL);
  StWork w = st_op_work(s, p, st_program_op(p, k));
  return st_compute_time(&ctx, &w, NULL);
}

static int64_t
step_of(const StSchedule *s)
{
  StTimeline *timeline = NULL;
  StSummary *sum = st_test_simulate(s, "auto", FALSE, &timeline);
  int64_t step = sum->step_time_ns;
  st_summary_free(sum);
  st_timeline_free(timeline);
  return step;
}

static void
test_closed_form(void)
{
  const int X = 4, b = 2, M = 2, d = 32;
  const int64_t C = 12;
  const double F = 1.5;
  g_autoptr(StSchedule) even = build(2, 1.0);
  g_autoptr(StSchedule) skew = build(2, F);
  g_assert_cmpfloat(skew->settings.moe_imbalance, ==, F);

  int n_even, n_skew;
  int64_t bytes_even = ep_bytes(even, 0, &n_even), bytes_skew = ep_bytes(skew, 0, &n_skew);
  g_assert_cmpint(n_even, ==, 2 * 4 * M);
  g_assert_cmpint(n_skew, ==, n_even);
  g_assert_cmpint(bytes_even, ==, (int64_t)n_even * b * X * C * d * 2);
  int64_t rows = (int64_t)ceil(F * b * X * C);
  g_assert_cmpint(rows, ==, 144);
  g_assert_cmpint(bytes_skew, ==, (int64_t)n_skew * rows * d * 2);

  /* Same ops in the same order; experts' passes F times as long. */
  const StProgram *pe = g_ptr_array_index(even->programs, 0);
  const StProgram *ps = g_ptr_array_index(skew->programs, 0);
  g_assert_cmpuint(pe->ops->len, ==, ps->ops->len);
  int experts = 0, dense = 0;
  for (guint k = 0; k < pe->ops->len; k++) {
    const StOp *op = st_program_op(pe, k);
    if (op->kind != ST_OP_COMP || op->layer < 0 ||
        (op->sub != ST_PASS_FWD && op->sub != ST_PASS_BWD))
      continue;
    gboolean expert = strstr(even->model->layers[op->layer].name, ".expert.") != NULL;
    double te = op_time(even, k), ts = op_time(skew, k);
    g_assert_cmpfloat(te, >, 0);
    g_assert_cmpfloat(fabs(ts - (expert ? F : 1.0) * te), <=, 1e-9 * ts);
    if (expert)
      experts++;
    else
      dense++;
  }
  g_assert_cmpint(experts, >, 0);
  g_assert_cmpint(dense, >, 0);

  /* The experts' saved blocks: ceil(F x) of x. */
  int64_t kept_even = 0, kept_skew = 0;
  for (guint i = 0; i < pe->buffers->len; i++) {
    const StBuffer *be = &g_array_index(pe->buffers, StBuffer, i);
    const StBuffer *bs = &g_array_index(ps->buffers, StBuffer, i);
    if (strncmp(be->name, "kept layers.0.expert.", 21) != 0)
      continue;
    g_assert_cmpint(bs->bytes, ==, (int64_t)ceil(F * (double)be->bytes));
    kept_even += be->bytes;
    kept_skew += bs->bytes;
  }
  g_assert_cmpint(kept_even, >, 0);

  /* Longer, but by less than F: the dense layers keep their time. */
  int64_t t_even = step_of(even), t_skew = step_of(skew);
  g_assert_cmpint(t_skew, >, t_even);
  g_assert_cmpfloat((double)t_skew, <, F * (double)t_even);

  /* Model FLOPs: unchanged. */
  StMfu a, c;
  st_mfu_of(even, t_even, 8, &a);
  st_mfu_of(skew, t_skew, 8, &c);
  g_assert_cmpfloat(a.flops_per_step, ==, c.flops_per_step);
  g_assert_cmpfloat(c.mfu, <, a.mfu);
}

/* Without expert parallelism one rank computes every expert's rows: the
 * same schedule whatever F. */
static void
test_without_ep(void)
{
  g_autoptr(StSchedule) even = build(1, 1.0);
  g_autoptr(StSchedule) skew = build(1, 2.0);
  g_assert_cmpfloat(skew->settings.moe_imbalance, ==, 1.0);
  g_assert_cmpint(step_of(even), ==, step_of(skew));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/moe-imbalance/closed-form", test_closed_form);
  g_test_add_func("/moe-imbalance/without-ep", test_without_ep);
  return g_test_run();
}
