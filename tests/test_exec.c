/* test_exec.c: the executor on the host backend, end to end: the strategies
 * of the foundation run real math and agree; loss goes down; the measured
 * timeline has the simulator's shape; faults are reported. */
#include <math.h>
#include <string.h>

#include "exec/exec.h"
#include "output/output.h"
#include "strategy/strategy.h"
#include "strategy/tensors.h"
#include "testutil.h"

static StCluster *
cluster(int gpus)
{
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  StCluster *c = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(c, 0, gpus, &error));
  return c;
}

typedef struct {
  const char *strategy;
  int zero_stage;
  int ranks, gpus, micro_batch, accumulation, steps;
  StPrecision precision;
  StOptimizer optimizer;
  int64_t bucket_bytes;
  StRecompute recompute;
} Config;

/* With --recompute-every `every` (0: not given) and the options `set`
 * names (name, value, ..., NULL; NULL: none). */
static StSchedule *
build_with(const StModel *m, const Config *c, int every, const char *const *set)
{
  g_autoptr(StCluster) cl = cluster(c->gpus);
  StOptions o;
  st_options_init(&o);
  o.ranks = c->ranks;
  o.micro_batch = c->micro_batch;
  o.global_batch = (int64_t)c->ranks * c->micro_batch * c->accumulation;
  o.steps = c->steps;
  o.precision = c->precision;
  o.optimizer = c->optimizer;
  o.zero_stage = c->zero_stage;
  o.bucket_bytes = c->bucket_bytes;
  o.recompute = c->recompute;
  o.recompute_every = every;
  g_autoptr(GError) error = NULL;
  for (int i = 0; set != NULL && set[i] != NULL; i += 2)
    g_assert_true(st_options_set(&o, set[i], set[i + 1], &error));
  StSchedule *s = st_strategy_build(st_strategy_find(c->strategy), m, cl, NULL, &o, &error);
  g_assert_no_error(error);
  st_options_clear(&o);
  return s;
}

static StSchedule *
build_every(const StModel *m, const Config *c, int every)
{
  return build_with(m, c, every, NULL);
}

static StSchedule *
build(const StModel *m, const Config *c)
{
  return build_every(m, c, 0);
}

/* Runs `base` as dp and as zero stages `first`-3 (with the options `set`)
 * and returns the worst relative weight difference to dp. */
static double
agreement_with(const char *model_path, const Config *base, int first, const char *const *set)
{
  g_autoptr(StModel) m = st_test_model(model_path);
  g_autoptr(StSchedule) ref = build(m, base);
  StExecResult ref_result;
  g_autoptr(StTimeline) ref_t = st_test_execute(ref, 0, 0, &ref_result);
  g_assert_cmpuint(ref_result.loss->len, ==, (guint)base->steps);
  double worst = 0;
  for (int stage = first; stage <= 3; stage++) {
    Config c = *base;
    c.strategy = "zero";
    c.zero_stage = stage;
    g_autoptr(StSchedule) s = build_with(m, &c, 0, set);
    StExecResult r;
    g_autoptr(StTimeline) t = st_test_execute(s, 0, 0, &r);
    double d = st_test_weights_differ(ref_result.weights, r.weights);
    g_test_message("%s: zero-%d weights differ from dp by %.3g (relative)", model_path, stage, d);
    worst = MAX(worst, d);
    for (guint k = 0; k < r.loss->len; k++)
      g_assert_cmpfloat(fabs(g_array_index(r.loss, double, k) -
                             g_array_index(ref_result.loss, double, k)),
                        <=, 1e-3);
    st_exec_result_clear(&r);
  }
  st_exec_result_clear(&ref_result);
  return worst;
}

static double
agreement(const char *model_path, const Config *base)
{
  return agreement_with(model_path, base, 1, NULL);
}

static void
test_agreement_sgd(void)
{
  /* DP and ZeRO 1-3 apply the same update to the same sums of gradients;
   * with gradient accumulation they add micro-batches and ranks in other
   * orders (accumulate then reduce, or reduce each micro-batch), so fp32
   * weights agree to rounding: 1e-5 relative after 3 steps of momentum SGD
   * (measured: about 1e-7). */
  Config c = {"dp", 0, 4, 4, 4, 2, 3, ST_PRECISION_FP32, ST_OPTIMIZER_SGD, 0, ST_RECOMPUTE_NONE};
  g_assert_cmpfloat(agreement("models/mlp.json", &c), <=, 1e-5);
  g_assert_cmpfloat(agreement("tests/data/exec/tiny-gpt.json", &c), <=, 1e-5);
  /* A tied head with a bias of its own (and dropout): every ZeRO stage
   * reduces and steps the bias (its gradient is made fresh as the head's,
   * not as the tied embedding's), and ZeRO-3 gathers both. Measured: 0 and
   * 6.5e-7. */
  g_assert_cmpfloat(agreement("tests/data/memory/gpt.json", &c), <=, 1e-5);
  /* The LLM layers: GQA flash attention with RoPE, SwiGLU, RMSNorm, an
   * untied head; and MoE chains (a routing decision could flip on a
   * rounding difference, and would show here as a large difference). */
  g_assert_cmpfloat(agreement("tests/data/exec/tiny-llama.json", &c), <=, 1e-5);
  g_assert_cmpfloat(agreement("tests/data/exec/tiny-moe.json", &c), <=, 1e-5);
}

static void
test_agreement_deferred(void)
{
  /* Deferred reductions (--defer-grad-sync, FSDP2's
   * set_requires_gradient_sync(False)): ZeRO 2-3 accumulate each bucket's
   * whole gradient over the micro-batches and reduce-scatter it once, the
   * same sum as dp's, added in the same order (measured: equal to dp's
   * bit for bit, where reducing every micro-batch differs by ~1e-7). Kept
   * gathered parameters (--reshard backward, step) are the same weights
   * read by more passes. */
  Config c = {"dp", 0, 4, 4, 4, 2, 3, ST_PRECISION_FP32, ST_OPTIMIZER_SGD, 0, ST_RECOMPUTE_NONE};
  const char *deferred[] = {"defer-grad-sync", "on", NULL};
  const char *kept[] = {"reshard", "backward", NULL};
  const char *both[] = {"reshard", "step", "defer-grad-sync", "on", NULL};
  g_assert_cmpfloat(agreement_with("models/mlp.json", &c, 2, deferred), <=, 1e-5);
  g_assert_cmpfloat(agreement_with("tests/data/exec/tiny-gpt.json", &c, 2, deferred), <=, 1e-5);
  g_assert_cmpfloat(agreement_with("tests/data/exec/tiny-moe.json", &c, 2, deferred), <=, 1e-5);
  g_assert_cmpfloat(agreement_with("tests/data/exec/tiny-gpt.json", &c, 3, kept), <=, 1e-5);
  g_assert_cmpfloat(agreement_with("tests/data/exec/tiny-llama.json", &c, 3, both), <=, 1e-5);
}

static void
test_agreement_adam(void)
{
  /* Adam's first steps turn any gradient into about +-lr, so a gradient of
   * 1e-10 summed in another order can flip an update: agreement under Adam
   * needs the same sums. Without accumulation every stage sums in the same
   * member order (the executor never reduces in place), so the weights are
   * identical, bit for bit. */
  Config c = {"dp", 0, 4, 4, 4, 1, 3, ST_PRECISION_FP32, ST_OPTIMIZER_ADAM, 0, ST_RECOMPUTE_NONE};
  g_assert_cmpfloat(agreement("models/mlp.json", &c), ==, 0.0);
  g_assert_cmpfloat(agreement("tests/data/exec/tiny-gpt.json", &c), ==, 0.0);
  g_assert_cmpfloat(agreement("tests/data/exec/tiny-llama.json", &c), ==, 0.0);
  g_assert_cmpfloat(agreement("tests/data/exec/tiny-moe.json", &c), ==, 0.0);
}

static void
test_agreement_bf16(void)
{
  /* bf16 weights and gradients with fp32 master weights, SGD with
   * accumulation: bf16 roundings of sums made in other orders differ by a
   * few units of bf16's last place (2^-8 relative); 2e-2 bounds it. */
  Config c = {"dp", 0, 4, 4, 4, 2, 3, ST_PRECISION_MIXED, ST_OPTIMIZER_SGD, 0, ST_RECOMPUTE_NONE};
  g_assert_cmpfloat(agreement("models/mlp.json", &c), <=, 2e-2);
}

static void
test_recompute_same(void)
{
  /* Recomputation changes when tensors are made, not what they are: the
   * recompute runs the same kernels on the same inputs (dropout draws its
   * masks from the same seeds), so every mode gives the weights of no
   * recomputation bit for bit. Models: GPT blocks with dropout, dense and
   * flash LLaMA layers, MoE (whose selective mode would drop nothing, and
   * is refused: st_recompute_check); full recomputation of every layer and
   * of every K-th transformer layer only (--recompute-every 1 and 2); dp
   * and ZeRO-3 (whose recompute waits for the gathered weights). */
  const char *paths[] = {"tests/data/memory/gpt.json", "tests/data/memory/llama.json",
                         "tests/data/exec/tiny-moe.json"};
  for (gsize i = 0; i < G_N_ELEMENTS(paths); i++) {
    g_autoptr(StModel) m = st_test_model(paths[i]);
    for (int stage = 0; stage <= 3; stage += 3) {
      Config c = {stage ? "zero" : "dp", stage, 2, 2, 2, 2, 2, ST_PRECISION_FP32,
                  ST_OPTIMIZER_ADAM, 0, ST_RECOMPUTE_NONE};
      g_autoptr(StSchedule) ref = build(m, &c);
      StExecResult a;
      g_autoptr(StTimeline) ta = st_test_execute(ref, 0, 0, &a);
      static const StRecomputePlan plans[] = {
        {ST_RECOMPUTE_SELECTIVE, 0, 0}, {ST_RECOMPUTE_FULL, 0, 0},
        {ST_RECOMPUTE_FULL, 1, 0},      {ST_RECOMPUTE_FULL, 2, 0}};
      for (gsize q = 0; q < G_N_ELEMENTS(plans); q++) {
        if (!st_recompute_check(m, &plans[q], NULL))
          continue;
        StRecompute mode = plans[q].mode;
        c.recompute = mode;
        g_autoptr(StSchedule) s = build_every(m, &c, plans[q].every);
        StExecResult b;
        g_autoptr(StTimeline) tb = st_test_execute(s, 0, 0, &b);
        double d = st_test_weights_differ(a.weights, b.weights);
        g_test_message("%s %s, recompute %s every %d: weights differ by %g", paths[i],
                       c.strategy, st_recompute_name(mode), plans[q].every, d);
        g_assert_cmpfloat(d, ==, 0.0);
        for (guint k = 0; k < b.loss->len; k++)
          g_assert_cmpfloat(g_array_index(b.loss, double, k), ==,
                            g_array_index(a.loss, double, k));
        st_exec_result_clear(&b);
      }
      st_exec_result_clear(&a);
    }
  }
}

static void
test_loss_goes_down(void)
{
  /* The synthetic tasks are learnable: a tiny MLP learns the classes of a
   * linear teacher on its 16 inputs, the token models a bigram table. Over
   * 16 steps of Adam at 2e-2 on 64 samples each, the loss falls by a fifth
   * at least (measured: about a half for the MLP and the GPT, over nine
   * tenths for the LLaMA and the MoE). */
  const char *paths[] = {"tests/data/exec/tiny-mlp.json", "tests/data/exec/tiny-gpt.json",
                         "tests/data/exec/tiny-llama.json", "tests/data/exec/tiny-moe.json"};
  for (gsize i = 0; i < G_N_ELEMENTS(paths); i++) {
    g_autoptr(StModel) m = st_test_model(paths[i]);
    Config c = {"dp", 0, 2, 2, 32, 1, 16, ST_PRECISION_FP32, ST_OPTIMIZER_ADAM, 0,
                ST_RECOMPUTE_NONE};
    g_autoptr(StSchedule) s = build(m, &c);
    StExecOptions o;
    st_exec_options_init(&o);
    o.device = "host";
    o.lr = 2e-2;
    StExecResult r;
    g_autoptr(GError) error = NULL;
    g_autoptr(StTimeline) t = st_execute(s, &o, &r, &error);
    g_assert_no_error(error);
    double first = g_array_index(r.loss, double, 0), last = g_array_index(r.loss, double, 15);
    g_test_message("%s: loss %.4f -> %.4f", paths[i], first, last);
    g_assert_true(isfinite(last));
    g_assert_cmpfloat(last, <, 0.8 * first);
    st_exec_result_clear(&r);
  }
}

static void
test_measured_timeline(void)
{
  /* Every op of every rank and step is recorded, in order on each stream;
   * memory comes back to the persistent states; the report has the contract
   * keys and the loss. */
  g_autoptr(StModel) m = st_test_model("models/mlp.json");
  Config c = {"zero", 3, 2, 2, 8, 2, 2, ST_PRECISION_FP32, ST_OPTIMIZER_SGD, 0, ST_RECOMPUTE_NONE};
  g_autoptr(StSchedule) s = build(m, &c);
  StExecResult r;
  g_autoptr(StTimeline) t = st_test_execute(s, 0, 0, &r);
  g_assert_true(t->measured);
  const StProgram *p = g_ptr_array_index(s->programs, 0);
  g_assert_cmpuint(t->ops->len, ==, (guint)(s->n_ranks * s->steps) * p->ops->len);
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *rec = &g_array_index(t->ops, StOpRecord, i);
    g_assert_cmpint(rec->source, ==, ST_SRC_MEASURED);
    g_assert_cmpint(rec->end_ns, >=, rec->start_ns);
  }
  int64_t persistent[ST_MEM_N];
  st_program_persistent_bytes(p, persistent);
  int64_t net[ST_MEM_N] = {0};
  for (guint i = 0; i < t->mem->len; i++) {
    const StMemEvent *e = &g_array_index(t->mem, StMemEvent, i);
    if (e->rank == 0)
      net[e->category] += e->delta;
  }
  /* What stays after the run on rank 0: its persistent model states. */
  for (int cat = ST_MEM_PARAMS; cat <= ST_MEM_OPTIMIZER; cat++)
    g_assert_cmpint(net[cat], ==, persistent[cat]);
  g_assert_cmpint(net[ST_MEM_ACTIVATIONS], ==, 0);
  g_autoptr(StSummary) sum = st_summary_new(t);
  sum->loss = g_steal_pointer(&r.loss);
  g_assert_cmpint(st_summary_device(sum, 0)->peak_by_category[ST_MEM_PARAMS], >=,
                  persistent[ST_MEM_PARAMS]);
  g_autofree char *dir = st_test_tmpdir();
  g_autoptr(GError) error = NULL;
  g_assert_true(st_output_write_all(sum, dir, &error));
  g_autofree char *report = g_build_filename(dir, "report.json", NULL);
  g_autofree char *text = st_test_read(report, NULL);
  g_assert_nonnull(strstr(text, "\"kind\":\t\"measured\""));
  g_assert_nonnull(strstr(text, "\"loss\":"));
  st_exec_result_clear(&r);
}

static void
test_out_of_memory(void)
{
  /* 300 KiB per rank cannot hold the MLP's states (2.7 MB of weights): the
   * error names the buffer. */
  g_autoptr(StModel) m = st_test_model("models/mlp.json");
  Config c = {"dp", 0, 2, 2, 8, 1, 1, ST_PRECISION_FP32, ST_OPTIMIZER_ADAM, 0, ST_RECOMPUTE_NONE};
  g_autoptr(StSchedule) s = build(m, &c);
  StExecOptions o;
  st_exec_options_init(&o);
  o.device = "host";
  o.memory_limit = 300 * 1024;
  StExecResult r;
  g_autoptr(GError) error = NULL;
  g_autoptr(StTimeline) t = st_execute(s, &o, &r, &error);
  g_assert_null(t);
  g_assert_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_OOM);
  g_assert_nonnull(strstr(error->message, "buffer 'params'"));
}

static void
test_unsupported(void)
{
  /* A custom layer has no real math: refused up front, naming it. */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/custom.json");
  Config c = {"dp", 0, 1, 1, 4, 1, 1, ST_PRECISION_FP32, ST_OPTIMIZER_ADAM, 0, ST_RECOMPUTE_NONE};
  g_autoptr(StSchedule) s = build(m, &c);
  g_autoptr(GError) error = NULL;
  g_assert_false(st_exec_check(s, &error));
  g_assert_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED);
  g_assert_nonnull(strstr(error->message, "'custom'"));
  g_assert_nonnull(strstr(error->message, "'blob'"));
}

static void
test_interrupted(void)
{
  /* A stop request before the first op: no step completes, nothing crashes,
   * and the (empty) timeline still comes back. */
  g_autoptr(StModel) m = st_test_model("models/mlp.json");
  Config c = {"dp", 0, 2, 2, 8, 1, 3, ST_PRECISION_FP32, ST_OPTIMIZER_ADAM, 0, ST_RECOMPUTE_NONE};
  g_autoptr(StSchedule) s = build(m, &c);
  StExecOptions o;
  st_exec_options_init(&o);
  o.device = "host";
  volatile int stop = 1;
  o.stop = &stop;
  StExecResult r;
  g_autoptr(GError) error = NULL;
  g_autoptr(StTimeline) t = st_execute(s, &o, &r, &error);
  g_assert_no_error(error);
  g_assert_nonnull(t);
  g_assert_true(r.interrupted);
  g_assert_cmpint(t->steps, ==, 0);
  st_exec_result_clear(&r);
}

static void
test_timeout(void)
{
  /* Rank 1 never joins rank 0's all-reduce (a schedule that would not pass
   * st_schedule_check): rank 0 gives up after the timeout, naming the op. */
  g_autoptr(StModel) m = st_test_model("models/mlp.json");
  Config c = {"dp", 0, 2, 2, 8, 1, 1, ST_PRECISION_FP32, ST_OPTIMIZER_ADAM, 0, ST_RECOMPUTE_NONE};
  g_autoptr(StSchedule) s = build(m, &c);
  StProgram *lonely = st_program_new("lonely");
  st_program_add_stream(lonely, "compute", 0);
  s->ranks[1].program = st_schedule_add_program(s, lonely);
  StExecOptions o;
  st_exec_options_init(&o);
  o.device = "host";
  o.timeout_s = 0.3;
  StExecResult r;
  g_autoptr(GError) error = NULL;
  g_autoptr(StTimeline) t = st_execute(s, &o, &r, &error);
  g_assert_null(t);
  g_assert_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_TIMEOUT);
  g_assert_nonnull(strstr(error->message, "all_reduce"));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/exec/agreement/sgd-fp32", test_agreement_sgd);
  g_test_add_func("/exec/agreement/adam-fp32", test_agreement_adam);
  g_test_add_func("/exec/agreement/deferred", test_agreement_deferred);
  g_test_add_func("/exec/agreement/sgd-bf16", test_agreement_bf16);
  g_test_add_func("/exec/loss-goes-down", test_loss_goes_down);
  g_test_add_func("/exec/recompute-same", test_recompute_same);
  g_test_add_func("/exec/measured-timeline", test_measured_timeline);
  g_test_add_func("/exec/out-of-memory", test_out_of_memory);
  g_test_add_func("/exec/unsupported", test_unsupported);
  g_test_add_func("/exec/interrupted", test_interrupted);
  g_test_add_func("/exec/timeout", test_timeout);
  return g_test_run();
}
