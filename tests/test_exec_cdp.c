/* test_exec_cdp.c: cyclic data parallelism run for real on the host backend
 * (exec/, sim/strategy/cdp.h), against a direct computation of the update
 * rules' definitions (exec_reference.h: the model's layers run on plain host
 * arrays, no schedule).
 *
 * The rules (docs/PAPERS.md section 1, docs/CDP.md). w_t are the weights
 * after t updates, w_{-1} = w_0 the first ones; g_t is the gradient of step
 * t summed over the N workers (the loss is scaled by 1 / global batch, so the
 * sum is the mean). Worker r's pass over stage l in step t reads
 * w_{t - delta(r, l)}: dp delta 0; v1 delta 1; v2 delta 0 when
 * l >= S-1-r, else 1. The update of step t makes w_t from w_{t-1} and
 * g_{t-1} (none in step 0), momentum SGD as the executor's optimizer:
 *   m_t = 0.9 m_{t-1} + g_{t-1},  w_t = w_{t-1} - lr m_t.
 * So after k steps the executor holds w_{k-1}: dp is plain SGD (k - 1
 * updates); v1 is delayed SGD, theta_{t+1} = theta_t - lr g(theta_{t-1}) with
 * theta_t = w_{t-1}; v2 mixes the two versions per stage and worker.
 */
#include <math.h>
#include <string.h>

#include "exec/exec.h"
#include "exec_reference.h"
#include "strategy/strategy.h"
#include "testutil.h"

#define N 4        /* workers */
#define S 3        /* stages */
#define MB 4       /* samples per micro-batch */
#define STEPS 4
#define LR 0.1
#define SEED 1234

typedef struct {
  const char *rule;    /* v1 | v2 | dp */
  const char *reduce;  /* chain | collective */
  int zero;            /* 0: none */
  gboolean mp;         /* --model-parallel */
  const char *split;   /* --stage-split */
  int accumulation;
  StPrecision precision; /* 0: fp32 */
  StOptimizer optimizer; /* 0: sgd */
} Case;

static StSchedule *
build(const StModel *m, const Case *c)
{
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) cl = st_cluster_load(path, &error);
  g_assert_no_error(error);
  /* Model parallelism needs up to N x S GPUs; two nodes have 16. */
  g_assert_true(st_cluster_resize(cl, c->mp ? 2 : 1, c->mp ? 16 : N, &error));
  StOptions o;
  st_options_init(&o);
  o.ranks = N;
  o.micro_batch = MB;
  o.global_batch = (int64_t)N * MB * c->accumulation;
  o.steps = STEPS;
  o.optimizer = c->optimizer;
  o.precision = c->precision;
  g_autofree char *stages = g_strdup_printf("%d", S);
  g_autofree char *zero = g_strdup_printf("%d", c->zero);
  g_assert_true(st_options_set(&o, "update-rule", c->rule, &error) &&
                st_options_set(&o, "stages", stages, &error) &&
                st_options_set(&o, "stage-split", c->split, &error) &&
                st_options_set(&o, "cdp-reduce", c->reduce, &error) &&
                (c->zero == 0 || st_options_set(&o, "zero-stage", zero, &error)) &&
                st_options_set(&o, "model-parallel", c->mp ? "true" : "false", &error) &&
                /* what the executor runs: 16-bit gradients under mixed precision */
                st_options_set(&o, "framework", "ideal", &error));
  g_assert_no_error(error);
  StSchedule *s = st_strategy_build(st_strategy_find("cdp"), m, cl, NULL, &o, &error);
  g_assert_no_error(error);
  st_options_clear(&o);
  return s;
}

/* The stage of each layer, from the schedule's note "stage_layers"
 * ("0-1,2-2,3-5"). */
static int *
stage_of(const StSchedule *s)
{
  const char *text = NULL;
  for (guint i = 0; i < s->notes->len; i++)
    if (g_strcmp0(g_array_index(s->notes, StNote, i).key, "stage_layers") == 0)
      text = g_array_index(s->notes, StNote, i).text;
  g_assert_nonnull(text);
  int *stage = g_new0(int, s->model->n_layers);
  g_auto(GStrv) ranges = g_strsplit(text, ",", -1);
  for (int l = 0; ranges[l] != NULL; l++) {
    int a = 0, b = 0;
    g_assert_cmpint(sscanf(ranges[l], "%d-%d", &a, &b), ==, 2);
    for (int i = a; i <= b; i++)
      stage[i] = l;
  }
  return stage;
}

static int
delta(const char *rule, int worker, int stage)
{
  if (strcmp(rule, "dp") == 0)
    return 0;
  if (strcmp(rule, "v1") == 0)
    return 1;
  return stage >= S - 1 - worker ? 0 : 1; /* v2 */
}

/* w_{STEPS-1} computed from the definitions above (weights of every
 * version kept, one whole model per worker and micro-batch). */
static RefWeights
direct(const StModel *m, const char *rule, const int *stage, int accumulation)
{
  int64_t gb = (int64_t)N * MB * accumulation;
  RefWeights *w = g_new(RefWeights, STEPS);
  for (int t = 0; t < STEPS; t++)
    w[t] = ref_weights_new(m);
  ref_weights_init(&w[0], SEED);
  RefWeights mom = ref_weights_new(m), g = ref_weights_new(m), gr = ref_weights_new(m);
  float **version = g_new(float *, m->n_layers);
  for (int t = 0; t + 1 < STEPS; t++) {
    ref_zero(m, g.w);
    for (int r = 0; r < N; r++) {
      for (int i = 0; i < m->n_layers; i++)
        version[i] = w[MAX(t - delta(rule, r, stage[i]), 0)].w[i]; /* w_{-1} = w_0 */
      ref_zero(m, gr.w);
      for (int a = 0; a < accumulation; a++)
        ref_grad(m, SEED, gb, version, gr.w,
                 (uint64_t)t * (uint64_t)gb + (uint64_t)(r * accumulation + a) * MB, MB, t, a);
      if (r == 0)
        ref_weights_copy(&g, &gr);
      else
        ref_add(m, g.w, gr.w); /* in worker order, as the chain adds them */
    }
    ref_weights_copy(&w[t + 1], &w[t]);
    ref_sgd(&w[t + 1], &mom, g.w, LR);
  }
  RefWeights out = ref_weights_new(m);
  ref_weights_copy(&out, &w[STEPS - 1]);
  for (int t = 0; t < STEPS; t++)
    ref_weights_free(&w[t]);
  g_free(w);
  g_free(version);
  ref_weights_free(&mom);
  ref_weights_free(&g);
  ref_weights_free(&gr);
  return out;
}

/* Runs case c and returns its weights' worst relative difference to the
 * direct computation of its rule. */
static double
against_direct(const StModel *m, const Case *c)
{
  g_autoptr(StSchedule) s = build(m, c);
  g_autofree int *stage = stage_of(s);
  StExecResult r;
  g_autoptr(StTimeline) t = st_test_execute(s, LR, SEED, &r);
  g_assert_cmpuint(r.loss->len, ==, STEPS);
  for (guint k = 0; k < r.loss->len; k++)
    g_assert_true(isfinite(g_array_index(r.loss, double, k)));
  RefWeights want = direct(m, c->rule, stage, c->accumulation);
  double d = ref_differ(r.weights, &want);
  g_test_message("cdp %s, %s%s%s%s, split %s, A %d: weights differ from the direct "
                 "computation by %.3g (relative)",
                 c->rule, c->reduce, c->zero ? ", zero " : "",
                 c->zero ? (const char *[]){"", "1", "2", "3"}[c->zero] : "",
                 c->mp ? ", model parallel" : "", c->split, c->accumulation, d);
  ref_weights_free(&want);
  st_exec_result_clear(&r);
  return d;
}

static void
test_rules(void)
{
  /* Plain CDP, each stage's gradient by the chain: every worker holds every
   * stage (a replica), the chain adds the workers' gradients in worker order
   * and every replica applies the same total with the same kernel, so each
   * rule's weights equal its direct computation to fp32 rounding. The bound,
   * 1e-6 relative, is far below what a wrong version or a missed update
   * changes (the rules differ from one another by more than 1e-3 here,
   * asserted too). Measured: 0 (bit for bit). */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-mlp3.json");
  const char *rules[] = {"v1", "v2", "dp"};
  for (gsize i = 0; i < G_N_ELEMENTS(rules); i++) {
    Case c = {rules[i], "chain", 0, FALSE, "params", 1, ST_PRECISION_FP32, ST_OPTIMIZER_SGD};
    g_assert_cmpfloat(against_direct(m, &c), <=, 1e-6);
  }
  /* The check can fail: the rules' weights are far apart. */
  g_autofree int *stage = g_new0(int, m->n_layers);
  for (int i = 0; i < m->n_layers; i++)
    stage[i] = MIN(i / 2, S - 1);
  RefWeights v1 = direct(m, "v1", stage, 1), dp = direct(m, "dp", stage, 1);
  g_autoptr(GPtrArray) as_got = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  for (int i = 0; i < m->n_layers; i++) {
    GArray *a = g_array_new(FALSE, FALSE, sizeof(float));
    if (v1.w[i] != NULL)
      g_array_append_vals(a, v1.w[i], (guint)m->layers[i].params);
    g_ptr_array_add(as_got, a);
  }
  double apart = ref_differ(as_got, &dp);
  g_test_message("v1 and dp differ by %.3g (relative)", apart);
  g_assert_cmpfloat(apart, >, 1e-3);
  ref_weights_free(&v1);
  ref_weights_free(&dp);
}

static void
test_every_option(void)
{
  /* Every cdp option runs on the host and follows its rule's definition:
   * one all-reduce per stage, the ZeRO relay (stages 1-3: weights relayed
   * from each stage's owner, gradients chain-reduced to it), model
   * parallelism (a rank per worker and stage, several sharing a device,
   * activations sent between stages), other stage splits, accumulation.
   * They sum the workers' gradients in other orders (the relay's chain ends
   * at the owner; a shared device's guests add into the holder's gradient as
   * they finish), so fp32 rounding differs: 1e-5 relative bounds it after 3
   * updates (measured: 0 for one all-reduce per stage and for the splits,
   * 1e-7 to 4e-7 for the relay and model parallelism). */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-mlp3.json");
  const char *rules[] = {"v1", "v2", "dp"};
  for (gsize i = 0; i < G_N_ELEMENTS(rules); i++) {
    Case cases[] = {
      {rules[i], "collective", 0, FALSE, "params", 1, ST_PRECISION_FP32, ST_OPTIMIZER_SGD},
      {rules[i], "chain", 1, FALSE, "params", 1, ST_PRECISION_FP32, ST_OPTIMIZER_SGD},
      {rules[i], "chain", 2, FALSE, "params", 1, ST_PRECISION_FP32, ST_OPTIMIZER_SGD},
      {rules[i], "chain", 3, FALSE, "params", 1, ST_PRECISION_FP32, ST_OPTIMIZER_SGD},
      {rules[i], "chain", 0, TRUE, "params", 1, ST_PRECISION_FP32, ST_OPTIMIZER_SGD},
      {rules[i], "collective", 0, TRUE, "params", 1, ST_PRECISION_FP32, ST_OPTIMIZER_SGD},
      {rules[i], "chain", 0, FALSE, "flops", 2, ST_PRECISION_FP32, ST_OPTIMIZER_SGD},
      {rules[i], "chain", 3, FALSE, "memory", 2, ST_PRECISION_FP32, ST_OPTIMIZER_SGD},
    };
    for (gsize k = 0; k < G_N_ELEMENTS(cases); k++)
      g_assert_cmpfloat(against_direct(m, &cases[k]), <=, 1e-5);
  }
}

/* Whether rank r computes layer i, which has weights, holding none of them:
 * a guest of its device's holder. */
static gboolean
is_guest(const StSchedule *s, int r, int i)
{
  const StProgram *p = st_schedule_program_of(s, r);
  if (s->model->layers[i].params == 0)
    return FALSE;
  gboolean computes = FALSE, holds = FALSE;
  for (guint o = 0; o < p->ops->len; o++) {
    const StOp *op = st_program_op(p, o);
    computes = computes || (op->kind == ST_OP_COMP && op->sub == ST_PASS_FWD && op->layer == i);
  }
  for (guint b = 0; b < p->buffers->len; b++) {
    const StBuffer *buf = &g_array_index(p->buffers, StBuffer, b);
    holds = holds || (buf->data == ST_DATA_PARAMS && buf->layer <= i && i <= buf->layer_last);
  }
  return computes && !holds;
}

static void
test_tied_head(void)
{
  /* A tiny GPT whose LM head reads the embedding's weights (tied): the head
   * reads them in the version the embedding's own stage reads (the direct
   * computation does the same) and its gradient joins the embedding's.
   * Summed in another order than the direct computation's (the head's part
   * is added after the embedding's backward, and the embedding's gradient
   * is a sum over every token), so fp32 rounding differs: 1e-5 relative
   * after 3 updates (measured: 1.3e-6 to 1.8e-6, as the pipeline's 2.0e-6
   * against DP in test_exec_pipeline.c). */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-gpt.json");
  Case cases[] = {
    {"v1", "chain", 0, FALSE, "params", 1, ST_PRECISION_FP32, ST_OPTIMIZER_SGD},
    {"v2", "chain", 0, FALSE, "params", 1, ST_PRECISION_FP32, ST_OPTIMIZER_SGD},
    {"v2", "chain", 3, FALSE, "params", 1, ST_PRECISION_FP32, ST_OPTIMIZER_SGD},
    {"v2", "collective", 0, FALSE, "flops", 2, ST_PRECISION_FP32, ST_OPTIMIZER_SGD},
  };
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++)
    g_assert_cmpfloat(against_direct(m, &cases[k]), <=, 1e-5);
}

static void
test_shared_devices(void)
{
  /* Model parallelism shares a stage's device between workers the stagger
   * keeps apart: the schedule places some (worker, stage) ranks on a device
   * with a holder of that stage, and the executor runs them as its guests
   * (they own no weights of the stage). Checked here so that
   * test_every_option's model-parallel cases really cover sharing. */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-mlp3.json");
  Case c = {"v1", "chain", 0, TRUE, "params", 1, ST_PRECISION_FP32, ST_OPTIMIZER_SGD};
  g_autoptr(StSchedule) s = build(m, &c);
  int guests = 0;
  for (int r = 0; r < s->n_ranks; r++)
    for (int i = 0; i < m->n_layers; i++)
      guests += is_guest(s, r, i);
  g_test_message("%d (rank, layer) pairs of %d ranks compute as guests of their device's holder",
                 guests, s->n_ranks);
  g_assert_cmpint(guests, >, 0);
}

static void
test_stagger(void)
{
  /* Staggered starts: worker k's rank issues nothing before k x d
   * (StRank.start_ns), so every op it runs starts at or after it in the
   * measured timeline. */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-mlp3.json");
  Case c = {"v1", "chain", 0, FALSE, "params", 1, ST_PRECISION_FP32, ST_OPTIMIZER_SGD};
  g_autoptr(StSchedule) s = build(m, &c);
  g_assert_cmpint(s->ranks[N - 1].start_ns, >, 0);
  StExecResult r;
  g_autoptr(StTimeline) t = st_test_execute(s, LR, SEED, &r);
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *rec = &g_array_index(t->ops, StOpRecord, i);
    g_assert_cmpint(rec->start_ns, >=, s->ranks[rec->rank].start_ns);
  }
  st_exec_result_clear(&r);
}

static void
test_mixed_adam(void)
{
  /* bf16 weights and fp32 master weights, Adam, v2 with model parallelism:
   * runs, and the loss stays finite (a smoke test: the fp32 checks above
   * pin the math). */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-mlp3.json");
  Case c = {"v2", "chain", 0, TRUE, "params", 1, ST_PRECISION_MIXED, ST_OPTIMIZER_ADAM};
  g_autoptr(StSchedule) s = build(m, &c);
  StExecResult r;
  g_autoptr(StTimeline) t = st_test_execute(s, LR, SEED, &r);
  for (guint k = 0; k < r.loss->len; k++)
    g_assert_true(isfinite(g_array_index(r.loss, double, k)));
  st_exec_result_clear(&r);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/exec/cdp/rules", test_rules);
  g_test_add_func("/exec/cdp/every-option", test_every_option);
  g_test_add_func("/exec/cdp/tied-head", test_tied_head);
  g_test_add_func("/exec/cdp/shared-devices", test_shared_devices);
  g_test_add_func("/exec/cdp/stagger", test_stagger);
  g_test_add_func("/exec/cdp/mixed-adam", test_mixed_adam);
  return g_test_run();
}
