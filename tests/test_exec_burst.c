/* test_exec_burst.c: DeepPool's burst parallelism (sim/strategy/strategy_burst.c)
 * run for real on the host backend: every layer on its own GPU set with its
 * share of the micro-batch, samples moved between sets by sends, receives
 * and local copies, each layer's gradients all-reduced within its set.
 *
 * The plan varies per layer because the profile says so: a constructed
 * profile (below) makes fc1 and fc3 scale with the batch and fc2 cost the
 * same at any batch, so fc2 runs on one GPU (any split only adds its
 * all-reduce) between layers on four. The tests assert that it does.
 *
 * Agreement with DP on the same global batch: burst's micro-batch m of M =
 * ranks x micro-batch samples deals sample s to rank s mod w of a layer on
 * w GPUs, and those are samples m M + s of the step: the same global batch
 * that DP with as many ranks and micro-batches trains on (sample g = t B +
 * (d A + m) b). Every layer's gradient is the same sum over the batch, in
 * another order (a narrow layer sums all samples in one matrix product, DP
 * sums per rank and all-reduces), so the weights agree to fp32 rounding.
 */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "exec/exec.h"
#include "strategy/strategy.h"
#include "testutil.h"

#define MS 1e6 /* ns */

/* fc1 and fc3 take 0.5 ms (forward) and 1 ms (backward) per sample; fc2
 * takes 1 ms each way at any batch. Everything else keeps the roofline
 * (microseconds, under the planner's 300 us exemption). */
static StProfile *
profile(const char *device)
{
  StProfile *p = st_profile_new();
  static const char *const scaling[] = {"fc1", "fc3"};
  for (int x = 1; x <= 16; x *= 2) {
    for (gsize k = 0; k < G_N_ELEMENTS(scaling); k++) {
      st_profile_add_layer(p, device, scaling[k], NULL, ST_PASS_FWD, x, 0.5 * MS * x, 0);
      st_profile_add_layer(p, device, scaling[k], NULL, ST_PASS_BWD, x, 1.0 * MS * x, 0);
    }
    st_profile_add_layer(p, device, "fc2", NULL, ST_PASS_FWD, x, 1.0 * MS, 0);
    st_profile_add_layer(p, device, "fc2", NULL, ST_PASS_BWD, x, 1.0 * MS, 0);
  }
  return p;
}

static StSchedule *
build(const StModel *m, const char *strategy, int ranks, int micro_batch, int accumulation,
      int steps)
{
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) cl = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(cl, 1, ranks, &error));
  g_autoptr(StProfile) prof = profile(cl->gpu.name);
  StOptions o;
  st_options_init(&o);
  o.ranks = ranks;
  o.micro_batch = micro_batch;
  o.global_batch = (int64_t)ranks * micro_batch * accumulation;
  o.steps = steps;
  o.optimizer = ST_OPTIMIZER_SGD;
  o.precision = ST_PRECISION_FP32;
  StSchedule *s = st_strategy_build(st_strategy_find(strategy), m, cl, prof, &o, &error);
  g_assert_no_error(error);
  st_options_clear(&o);
  return s;
}

/* The GPUs each layer runs on: the ranks with a forward of it. [n_layers],
 * transfer full. */
static int *
widths(const StSchedule *s)
{
  int *w = g_new0(int, s->model->n_layers);
  for (int r = 0; r < s->n_ranks; r++) {
    const StProgram *p = st_schedule_program_of(s, r);
    g_autofree gboolean *seen = g_new0(gboolean, s->model->n_layers);
    for (guint o = 0; o < p->ops->len; o++) {
      const StOp *op = st_program_op(p, o);
      if (op->kind == ST_OP_COMP && op->sub == ST_PASS_FWD && !seen[op->layer]) {
        seen[op->layer] = TRUE;
        w[op->layer]++;
      }
    }
  }
  return w;
}

/* Largest |a - b| / (|b| + 1e-3) over every weight. */
static int
count_kind(const StSchedule *s, StOpKind kind)
{
  int n = 0;
  for (int r = 0; r < s->n_ranks; r++) {
    const StProgram *p = st_schedule_program_of(s, r);
    for (guint o = 0; o < p->ops->len; o++)
      n += st_program_op(p, o)->kind == kind;
  }
  return n;
}

/* Burst at `ranks` x `micro_batch` x `accumulation` against DP on the same
 * global batch, 3 steps of momentum SGD at lr 0.1. */
static void
against_dp(int ranks, int micro_batch, int accumulation)
{
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-mlp3.json");
  g_autoptr(StSchedule) s = build(m, "burst", ranks, micro_batch, accumulation, 3);
  g_autofree int *w = widths(s);
  /* fc1 (layer 0) wide, fc2 (layer 2) on one GPU, fc3 (layer 4) wide again:
   * samples are gathered onto rank 0 and scattered back, both ways. */
  g_assert_cmpint(w[0], >, 1);
  g_assert_cmpint(w[2], ==, 1);
  g_assert_cmpint(w[4], >, 1);
  g_assert_cmpint(count_kind(s, ST_OP_COPY), >, 0);
  g_assert_cmpint(count_kind(s, ST_OP_COMM_SEND), >, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(st_exec_check(s, &error));
  g_assert_no_error(error);
  g_autoptr(StSchedule) ref = build(m, "dp", ranks, micro_batch, accumulation, 3);
  StExecResult rb, rd;
  g_autoptr(StTimeline) tb = st_test_execute(s, 0.1, 0, &rb);
  g_autoptr(StTimeline) td = st_test_execute(ref, 0.1, 0, &rd);
  double d = st_test_weights_differ(rb.weights, rd.weights);
  double loss = 0;
  g_assert_cmpuint(rb.loss->len, ==, 3);
  for (guint k = 0; k < rb.loss->len; k++)
    loss = MAX(loss, fabs(g_array_index(rb.loss, double, k) - g_array_index(rd.loss, double, k)));
  g_test_message("burst %d ranks x %d x %d (widths %d %d %d %d %d %d): weights differ from dp "
                 "by %.3g, losses by %.3g; loss %.4f -> %.4f",
                 ranks, micro_batch, accumulation, w[0], w[1], w[2], w[3], w[4], w[5], d, loss,
                 g_array_index(rb.loss, double, 0), g_array_index(rb.loss, double, 2));
  g_assert_cmpfloat(d, <=, 1e-5);
  g_assert_cmpfloat(loss, <=, 1e-5);
  st_exec_result_clear(&rb);
  st_exec_result_clear(&rd);
}

static void
test_agreement(void)
{
  /* The weights equal DP's to fp32 rounding: 1e-5 relative after 3 steps of
   * momentum SGD at lr 0.1, a bound the sums in another order stay far
   * under (a few ulps per step); the losses to 1e-5. */
  against_dp(4, 2, 1);
}

static void
test_accumulation(void)
{
  /* Two micro-batches per step: transfers tagged per micro-batch, gradients
   * accumulated before the per-layer all-reduce. Same bounds. */
  against_dp(4, 1, 2);
}

static void
test_uneven_shares(void)
{
  /* 6 ranks, 6 samples per micro-batch: on 4 GPUs the shares are 2, 2, 1,
   * 1 (ranks 4 and 5 idle), so the samples a narrow rank gets from each
   * peer interleave unevenly. Same bounds. */
  against_dp(6, 1, 1);
}

static void
test_samples_round_trip(void)
{
  /* What the ops say about their samples survives the schedule's JSON, so
   * `stagger run --schedule` runs the same burst. */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-mlp3.json");
  g_autoptr(StSchedule) s = build(m, "burst", 4, 2, 1, 1);
  g_autoptr(cJSON) json = st_schedule_to_json(s);
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) back = st_schedule_from_json(json, "round-trip", &error);
  g_assert_no_error(error);
  int said = 0;
  for (guint pi = 0; pi < s->programs->len; pi++) {
    const StProgram *a = g_ptr_array_index(s->programs, pi);
    const StProgram *b = g_ptr_array_index(back->programs, pi);
    g_assert_cmpuint(a->ops->len, ==, b->ops->len);
    for (guint o = 0; o < a->ops->len; o++) {
      const StOp *x = st_program_op(a, o), *y = st_program_op(b, o);
      g_assert_cmpint(x->sample_first, ==, y->sample_first);
      g_assert_cmpint(x->sample_stride, ==, y->sample_stride);
      said += x->sample_stride > 0;
    }
  }
  g_assert_cmpint(said, >, 0);
  g_assert_true(st_schedule_check(back, &error));
}

static void
test_samples_checked(void)
{
  /* A send whose samples differ from its receive's is a schedule error that
   * names both ops; the executor would put samples in the wrong rows. */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-mlp3.json");
  g_autoptr(StSchedule) s = build(m, "burst", 4, 2, 1, 1);
  gboolean changed = FALSE;
  for (guint pi = 0; pi < s->programs->len && !changed; pi++) {
    StProgram *p = g_ptr_array_index(s->programs, pi);
    for (guint o = 0; o < p->ops->len && !changed; o++) {
      StOp *op = &g_array_index(p->ops, StOp, o);
      if (op->kind == ST_OP_COMM_SEND && op->sample_stride > 0) {
        op->sample_first += 1;
        changed = TRUE;
      }
    }
  }
  g_assert_true(changed);
  g_autoptr(GError) error = NULL;
  g_assert_false(st_schedule_check(s, &error));
  g_assert_error(error, ST_SCHED_ERROR, ST_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "samples mismatch"));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/exec/burst/agreement", test_agreement);
  g_test_add_func("/exec/burst/accumulation", test_accumulation);
  g_test_add_func("/exec/burst/uneven-shares", test_uneven_shares);
  g_test_add_func("/exec/burst/samples-round-trip", test_samples_round_trip);
  g_test_add_func("/exec/burst/samples-checked", test_samples_checked);
  return g_test_run();
}
