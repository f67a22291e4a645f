/* test_exec_pipeline.c: pipeline parallelism (sim/strategy/strategy_pipeline*.c)
 * run for real on the host backend: GPipe and 1F1B orders, activations and
 * their gradients sent between stages, the loss on the last stage, the
 * gradient all-reduce across pipelines, activation checkpointing, a tied LM
 * head split from its embedding.
 *
 * Agreement with DP on the same global batch: a pipeline of S stages x G
 * pipelines, M micro-batches of b samples per pipeline and step, trains on
 * the samples DP with G ranks and M accumulated micro-batches of b trains on
 * (sample g of replica d, micro-batch m: g = t B + (d M + m) b, B the global
 * batch; every stage of pipeline d computes replica d's samples). Each stage
 * accumulates its layers' gradients over the micro-batches in the same order
 * as a DP rank, and both all-reduce over the G replicas in replica order, so
 * the weights agree to fp32 rounding.
 */
#include <math.h>
#include <string.h>

#include "exec/exec.h"
#include "strategy/strategy.h"
#include "testutil.h"

#define G 2     /* pipelines (data-parallel replicas) */
#define M 6     /* micro-batches per pipeline and step: a multiple of every stage count, as
                   the options ask the global batch to be of ranks x micro-batch */
#define MB 2
#define STEPS 3

static StSchedule *
build(const StModel *m, const char *strategy, int ranks, const char *const *settings)
{
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) cl = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(cl, 1, ranks, &error));
  StOptions o;
  st_options_init(&o);
  o.ranks = ranks;
  o.micro_batch = MB;
  o.global_batch = (int64_t)G * M * MB;
  o.steps = STEPS;
  o.optimizer = ST_OPTIMIZER_SGD;
  o.precision = ST_PRECISION_FP32;
  for (int i = 0; settings != NULL && settings[i] != NULL; i += 2)
    g_assert_true(st_options_set(&o, settings[i], settings[i + 1], &error));
  g_assert_no_error(error);
  StSchedule *s = st_strategy_build(st_strategy_find(strategy), m, cl, NULL, &o, &error);
  g_assert_no_error(error);
  st_options_clear(&o);
  return s;
}

/* Largest |a - b| / (|b| + 1e-3) over every weight. */
/* Runs `settings` as pipeline of `stages` and returns the worst relative
 * weight difference to DP on the same global batch (asserting the losses
 * agree too). */
static double
against_dp(const char *model_path, int stages, const char *order, gboolean checkpoint)
{
  g_autoptr(StModel) m = st_test_model(model_path);
  const char *dp_settings[] = {NULL};
  g_autoptr(StSchedule) ref = build(m, "dp", G, dp_settings);
  g_assert_cmpint(ref->settings.accumulation, ==, M);
  StExecResult rr;
  g_autoptr(StTimeline) rt = st_test_execute(ref, 0.1, 0, &rr);
  g_autofree char *s_text = g_strdup_printf("%d", stages);
  const char *settings[] = {"pipeline-stages", s_text, "pipeline-schedule", order,
                            "recompute", checkpoint ? "full" : "none", NULL};
  g_autoptr(StSchedule) s = build(m, "pipeline", stages * G, settings);
  g_assert_cmpint(s->settings.accumulation, ==, M);
  StExecResult r;
  g_autoptr(StTimeline) t = st_test_execute(s, 0.1, 0, &r);
  double d = st_test_weights_differ(r.weights, rr.weights);
  double loss = 0;
  for (guint k = 0; k < r.loss->len; k++)
    loss = MAX(loss, fabs(g_array_index(r.loss, double, k) - g_array_index(rr.loss, double, k)));
  g_test_message("%s: pipeline %d x %d, %s%s: weights differ from dp by %.3g, losses by %.3g",
                 model_path, stages, G, order, checkpoint ? ", checkpoint" : "", d, loss);
  g_assert_cmpfloat(loss, <=, 1e-5);
  st_exec_result_clear(&r);
  st_exec_result_clear(&rr);
  return d;
}

static void
test_agreement(void)
{
  /* Both orders, with and without checkpointing (a recompute gives the
   * forward's bits again), two and three stages: the weights equal DP's to
   * fp32 rounding, 1e-5 relative after 3 steps of momentum SGD at lr 0.1
   * (measured: 0, bit for bit, for the MLP, whose sums run in the same
   * order; 2.0e-6 for the GPT, whose tied head's gradient meets the
   * embedding's in another order: DP adds it after the embedding's
   * backward, the pipeline in an all-reduce of the two stages' sums); the
   * losses to 1e-5 (measured: 0 and 3.2e-7). */
  const char *models[] = {"tests/data/exec/tiny-mlp3.json", "tests/data/exec/tiny-gpt.json"};
  const char *orders[] = {"1f1b", "gpipe"};
  for (gsize i = 0; i < G_N_ELEMENTS(models); i++)
    for (int stages = 2; stages <= 3; stages++)
      for (gsize k = 0; k < G_N_ELEMENTS(orders); k++)
        for (int ckpt = 0; ckpt <= 1; ckpt++)
          g_assert_cmpfloat(against_dp(models[i], stages, orders[k], ckpt), <=, 1e-5);
}

static void
test_zero_bubble(void)
{
  /* The zero-bubble orders (each backward as B, the input's gradient, and
   * W, the weights', run later): the same agreement with DP, as W adds each
   * micro-batch's weight gradient in micro-batch order as a whole backward
   * does. Every order of both models, two and three stages, with and
   * without checkpointing; the GPT's tied head keeps its backward whole. */
  const char *models[] = {"tests/data/exec/tiny-mlp3.json", "tests/data/exec/tiny-gpt.json"};
  const char *orders[] = {"zb-h1", "zb-h2"};
  for (gsize i = 0; i < G_N_ELEMENTS(models); i++)
    for (int stages = 2; stages <= 3; stages++)
      for (gsize k = 0; k < G_N_ELEMENTS(orders); k++)
        for (int ckpt = 0; ckpt <= 1; ckpt++)
          g_assert_cmpfloat(against_dp(models[i], stages, orders[k], ckpt), <=, 1e-5);
}

static void
test_dualpipev(void)
{
  /* DualPipeV (two chunks per stage, down and back up; some backwards split
   * into B and W, others whole; F&B pairs): the same agreement with DP on
   * the host, on 2 and 3 stages (4 and 6 chunks of the 6 layers; M = 6 >=
   * 2S), with and without checkpointing; the GPT's tied head lands on a
   * chunk of the way back up, its copy's gradient summed with the
   * embedding's. */
  const char *models[] = {"tests/data/exec/tiny-mlp3.json", "tests/data/exec/tiny-gpt.json"};
  for (gsize i = 0; i < G_N_ELEMENTS(models); i++)
    for (int stages = 2; stages <= 3; stages++)
      for (int ckpt = 0; ckpt <= 1; ckpt++)
        g_assert_cmpfloat(against_dp(models[i], stages, "dualpipev", ckpt), <=, 1e-5);
}

static void
test_tied_copy(void)
{
  /* The tiny GPT cut in 3 stages puts its tied head away from the
   * embedding: the head's stage keeps a copy of its weights and the two
   * stages sum their gradients. The agreement above runs such schedules
   * (the head's gradient reaches the embedding only through that sum); this
   * makes sure they are what it runs. */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-gpt.json");
  const char *settings[] = {"pipeline-stages", "3", NULL};
  g_autoptr(StSchedule) s = build(m, "pipeline", 3 * G, settings);
  gboolean copy = FALSE;
  for (guint i = 0; i < s->notes->len; i++)
    copy = copy || g_strcmp0(g_array_index(s->notes, StNote, i).key, "tied_embedding") == 0;
  g_assert_true(copy);
}

static void
test_replicas(void)
{
  /* Every stage of pipeline d works on replica d's samples: the schedule
   * says so per rank (StRank.replica), and the executor's data index is it. */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-mlp3.json");
  const char *settings[] = {"pipeline-stages", "3", NULL};
  g_autoptr(StSchedule) s = build(m, "pipeline", 3 * G, settings);
  for (int r = 0; r < s->n_ranks; r++)
    g_assert_cmpint(s->ranks[r].replica, ==, r / 3);
}

static void
test_mixed(void)
{
  /* bf16 activations, weights and gradients sent between stages, Adam: the
   * run completes and the loss is finite (the fp32 agreement pins the math). */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-gpt.json");
  const char *settings[] = {"pipeline-stages", "2", "precision", "mixed", "optimizer", "adam",
                            "recompute", "full", NULL};
  g_autoptr(StSchedule) s = build(m, "pipeline", 2 * G, settings);
  StExecResult r;
  g_autoptr(StTimeline) t = st_test_execute(s, 0.1, 0, &r);
  for (guint k = 0; k < r.loss->len; k++)
    g_assert_true(isfinite(g_array_index(r.loss, double, k)));
  st_exec_result_clear(&r);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/exec/pipeline/agreement", test_agreement);
  g_test_add_func("/exec/pipeline/zero-bubble", test_zero_bubble);
  g_test_add_func("/exec/pipeline/dualpipev", test_dualpipev);
  g_test_add_func("/exec/pipeline/tied-copy", test_tied_copy);
  g_test_add_func("/exec/pipeline/replicas", test_replicas);
  g_test_add_func("/exec/pipeline/mixed", test_mixed);
  return g_test_run();
}
