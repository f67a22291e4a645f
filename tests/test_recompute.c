/* test_recompute.c: --recompute none|selective|full and --seq-len in the
 * simulator: the activation memory per layer against Korthikanti et al.'s
 * formula (arXiv 2205.05198, section 4.1), each mode with its expected
 * deviation; the recompute ops every strategy emits and their FLOPs; the
 * model derived again at another sequence length. (The executor's side:
 * test_memory_conformance.c and test_exec.c.)
 */
#include <string.h>

#include "cost/cost.h"
#include "model/layer_type.h"
#include "sched/work.h"
#include "strategy/tensors.h"
#include "testutil.h"

/* A GPT of L blocks of width h = 64 with a = 4 heads, dropout, on s = 64
 * tokens, in bf16: every tensor a multiple of 256 bytes, so the executor's
 * alignment adds nothing. */
static StModel *
gpt(int layers)
{
  g_autofree char *json = g_strdup_printf(
    "{\"name\": \"g\", \"input\": [64], \"dtype\": \"bf16\", \"layers\": ["
    "{\"name\": \"wte\", \"type\": \"embedding\", \"vocab\": 128, \"dim\": 64},"
    "{\"repeat\": %d, \"layers\": [{\"name\": \"h{i}\", \"type\": \"transformer_block\","
    " \"heads\": 4, \"causal\": true, \"dropout\": true}]},"
    "{\"name\": \"ln\", \"type\": \"layernorm\"},"
    "{\"name\": \"head\", \"type\": \"lm_head\", \"vocab\": 128},"
    "{\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}",
    layers);
  return st_test_model_parse(json);
}

/* What one micro-batch of b samples keeps between its last forward and its
 * first backward under `mode` (the strategies' accounting, tensors.h). */
static int64_t
held(const StModel *m, int b, StRecompute mode)
{
  g_autofree int *batch = g_new(int, m->n_layers);
  for (int i = 0; i < m->n_layers; i++)
    batch[i] = b;
  StTensorsSpec spec = {.model = m, .dtype = ST_DTYPE_BF16, .grad_bytes = 2, .batch = batch,
                        .recompute = {.mode = mode}};
  int64_t h, peak;
  st_tensors_footprint(&spec, &h, &peak);
  return h;
}

static void
test_korthikanti(void)
{
  /* Per layer (the difference between 3 and 2 blocks), b = 2:
   * - none: s b h (34 + 5 a s / h) = 34 s b h + 5 a s^2 b, plus the fp32
   *   mean and 1/std of the two LayerNorms, 16 bytes per token, which the
   *   executor keeps and the paper does not count;
   * - selective: 34 s b h, plus the same 16 s b;
   * - full: 2 s b h, the block's input, exactly. */
  const int64_t s = 64, b = 2, h = 64, a = 4;
  g_autoptr(StModel) m2 = gpt(2);
  g_autoptr(StModel) m3 = gpt(3);
  int64_t none = held(m3, (int)b, ST_RECOMPUTE_NONE) - held(m2, (int)b, ST_RECOMPUTE_NONE);
  int64_t sel = held(m3, (int)b, ST_RECOMPUTE_SELECTIVE) -
                held(m2, (int)b, ST_RECOMPUTE_SELECTIVE);
  int64_t full = held(m3, (int)b, ST_RECOMPUTE_FULL) - held(m2, (int)b, ST_RECOMPUTE_FULL);
  g_test_message("per layer: none %" G_GINT64_FORMAT ", selective %" G_GINT64_FORMAT
                 ", full %" G_GINT64_FORMAT " bytes",
                 none, sel, full);
  g_assert_cmpint(none, ==, s * b * h * 34 + 5 * a * s * s * b + 16 * s * b);
  g_assert_cmpint(sel, ==, s * b * h * 34 + 16 * s * b);
  g_assert_cmpint(full, ==, 2 * s * b * h);
}

/* The same shape as LLaMA blocks with GPT's MLP and flash attention. */
static StModel *
llama(int layers)
{
  g_autofree char *json = g_strdup_printf(
    "{\"name\": \"l\", \"input\": [64], \"dtype\": \"bf16\", \"layers\": ["
    "{\"name\": \"wte\", \"type\": \"embedding\", \"vocab\": 128, \"dim\": 64},"
    "{\"repeat\": %d, \"layers\": [{\"name\": \"b{i}\", \"type\": \"llama_block\","
    " \"heads\": 4, \"ffn\": 256, \"mlp\": \"gelu\"}]},"
    "{\"name\": \"n\", \"type\": \"rmsnorm\"},"
    "{\"name\": \"head\", \"type\": \"lm_head\", \"vocab\": 128},"
    "{\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}",
    layers);
  return st_test_model_parse(json);
}

static void
test_flash_terms(void)
{
  /* A LLaMA block with flash attention keeps no s x s tensor, so selective
   * recomputation has nothing to drop: the same memory as none and no
   * recompute op. Against the formula (MHA, GELU MLP of 4h, no dropout) the
   * 5 a s^2 b term becomes flash's fp32 log-sum-exp, 4 a s b bytes; the
   * dropout masks' 2 s b h go; RMSNorm keeps one fp32 statistic a token
   * (4 s b per norm): 32 s b h + 4 a s b + 8 s b. */
  const int64_t s = 64, b = 2, h = 64, a = 4;
  g_autoptr(StModel) m2 = llama(2);
  g_autoptr(StModel) m3 = llama(3);
  int64_t none = held(m3, (int)b, ST_RECOMPUTE_NONE) - held(m2, (int)b, ST_RECOMPUTE_NONE);
  int64_t sel = held(m3, (int)b, ST_RECOMPUTE_SELECTIVE) -
                held(m2, (int)b, ST_RECOMPUTE_SELECTIVE);
  g_assert_cmpint(none, ==, 32 * s * b * h + 4 * a * s * b + 8 * s * b);
  g_assert_cmpint(sel, ==, none);
}

/* The recompute ops of a schedule, and the FLOPs the cost models charge
 * them, per rank 0's program. */
static int
recompute_ops(const StSchedule *s, double *flops)
{
  const StProgram *p = st_schedule_program_of(s, 0);
  StComputeCtx ctx = {s->cluster, NULL, s->model, ST_DTYPE_BF16, NULL, NULL, FALSE, FALSE};
  int n = 0;
  *flops = 0;
  for (guint o = 0; o < p->ops->len; o++) {
    const StOp *op = st_program_op(p, o);
    if (op->kind != ST_OP_COMP || op->sub != ST_PASS_RECOMPUTE)
      continue;
    n++;
    StWork w = st_op_work(s, p, op);
    double f, bytes;
    st_compute_work_traffic(&ctx, &w, &f, &bytes);
    *flops += f;
  }
  return n;
}

static void
test_strategies_emit(void)
{
  /* Every strategy that runs passes honours --recompute: selective gives
   * one recompute op per block and micro-batch whose FLOPs are the scores
   * again, QK^T: 2 s^2 h per sample (b = 2, 2 micro-batches, 3 blocks);
   * full one per layer and micro-batch at the layer's forward FLOPs. */
  g_autoptr(StModel) m = gpt(3);
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  static const struct {
    const char *strategy, *extra;
  } STRATEGIES[] = {
    {"dp", NULL},         {"zero", "zero-stage=3"},          {"cdp", "stages=2"},
    {"burst", NULL},      {"pipeline", "pipeline-stages=2"}, {"megatron", NULL},
  };
  const double s = 64, h = 64;
  for (gsize k = 0; k < G_N_ELEMENTS(STRATEGIES); k++) {
    for (int mode = ST_RECOMPUTE_NONE; mode <= ST_RECOMPUTE_FULL; mode++) {
      StOptions o;
      st_options_init(&o);
      o.micro_batch = 2;
      o.global_batch = 8; /* 2 ranks x 2 micro-batches of 2 */
      o.precision = ST_PRECISION_MIXED;
      o.recompute = mode;
      g_autoptr(GError) error = NULL;
      if (STRATEGIES[k].extra != NULL) {
        g_auto(GStrv) kv = g_strsplit(STRATEGIES[k].extra, "=", 2);
        g_assert_true(st_options_set(&o, kv[0], kv[1], &error));
      }
      g_autoptr(StSchedule) sch = st_test_build(STRATEGIES[k].strategy, m, c, &o);
      g_assert_cmpint(sch->settings.recompute, ==, mode);
      double flops;
      int n = recompute_ops(sch, &flops);
      /* rank 0 of a pipeline runs its stage's layers: count over all programs */
      int want_layers = 0;
      double want_flops = 0;
      const StProgram *p = st_schedule_program_of(sch, 0);
      for (guint oi = 0; oi < p->ops->len; oi++) {
        const StOp *op = st_program_op(p, oi);
        if (op->kind != ST_OP_COMP || op->sub != ST_PASS_BWD)
          continue;
        const StLayer *l = &sch->model->layers[op->layer];
        if (mode == ST_RECOMPUTE_FULL) {
          want_layers++;
          want_flops += op->batch * l->fwd_flops;
        } else if (mode == ST_RECOMPUTE_SELECTIVE && l->act_again[ST_RC_CORE_ATTN] > 0) {
          want_layers++;
          want_flops += op->batch * 2.0 * s * s * h;
        }
      }
      g_test_message("%s %s: %d recompute ops, %.4g FLOPs", STRATEGIES[k].strategy,
                     st_recompute_name(mode), n, flops);
      g_assert_cmpint(n, ==, want_layers);
      g_assert_cmpfloat_with_epsilon(flops, want_flops, 1e-9 * want_flops + 1e-9);
      if (mode != ST_RECOMPUTE_NONE)
        g_assert_cmpint(n, >, 0);
      st_options_clear(&o);
    }
  }
}

static void
test_seq_len(void)
{
  /* --seq-len derives the model again: a LLaMA at 32 tokens instead of 16;
   * an image model or a learned position table shorter than the sequence
   * refuses, naming the option. */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-llama.json");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 1);
  StOptions o;
  st_options_init(&o);
  o.micro_batch = 1;
  o.seq_len = 32;
  g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
  g_assert_cmpint(s->model->input.dims[0], ==, 32);
  g_assert_cmpint(s->model->layers[1].in_shape.dims[0], ==, 32);
  g_assert_cmpint(s->model->params, ==, m->params);
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) img = st_test_model("models/resnet18.json");
  g_autoptr(StSchedule) bad = st_strategy_build(st_strategy_find("dp"), img, c, NULL, &o, &error);
  g_assert_null(bad);
  g_assert_nonnull(strstr(error->message, "--seq-len 32"));
  g_assert_nonnull(strstr(error->message, "not a sequence of token ids"));
  g_clear_error(&error);
  g_autoptr(StModel) g = st_test_model("tests/data/exec/tiny-gpt.json");
  g_autoptr(StSchedule) bad2 = st_strategy_build(st_strategy_find("dp"), g, c, NULL, &o, &error);
  g_assert_null(bad2);
  g_assert_nonnull(strstr(error->message, "key 'positions'"));
  st_options_clear(&o);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/recompute/korthikanti", test_korthikanti);
  g_test_add_func("/recompute/flash", test_flash_terms);
  g_test_add_func("/recompute/strategies", test_strategies_emit);
  g_test_add_func("/recompute/seq-len", test_seq_len);
  return g_test_run();
}
