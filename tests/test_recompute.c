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
 * first backward under `plan` (the strategies' accounting, tensors.h). */
static int64_t
held_plan(const StModel *m, int b, StRecomputePlan plan)
{
  g_autofree int *batch = g_new(int, m->n_layers);
  for (int i = 0; i < m->n_layers; i++)
    batch[i] = b;
  StTensorsSpec spec = {.model = m, .dtype = ST_DTYPE_BF16, .grad_bytes = 2, .batch = batch,
                        .recompute = plan};
  int64_t h, peak;
  st_tensors_footprint(&spec, &h, &peak);
  return h;
}

static int64_t
held(const StModel *m, int b, StRecompute mode)
{
  return held_plan(m, b, (StRecomputePlan){.mode = mode});
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
test_every(void)
{
  /* --recompute-every K (torchtitan's ac_freq): of L transformer layers the
   * K-th, 2K-th, ... are checkpointed and keep their input, 2 s b h; the
   * others keep what no recomputation keeps, 34 s b h + 5 a s^2 b + 16 s b
   * (test_korthikanti). So with K = 2, two more layers add one of each:
   *   held(4 layers) - held(2 layers) = 36 s b h + 5 a s^2 b + 16 s b,
   * and with K = 1 each layer adds 2 s b h, as under full. Layers outside
   * the blocks keep everything: K = 1 holds more than full by what the
   * embedding, the final norm, the head and the loss keep, whatever L. */
  const int64_t s = 64, b = 2, h = 64, a = 4;
  g_autoptr(StModel) m2 = gpt(2);
  g_autoptr(StModel) m3 = gpt(3);
  g_autoptr(StModel) m4 = gpt(4);
  StRecomputePlan k1 = {ST_RECOMPUTE_FULL, 1, 0}, k2 = {ST_RECOMPUTE_FULL, 2, 0};
  int64_t per_k1 = held_plan(m3, (int)b, k1) - held_plan(m2, (int)b, k1);
  int64_t two_k2 = held_plan(m4, (int)b, k2) - held_plan(m2, (int)b, k2);
  g_test_message("K = 1: %" G_GINT64_FORMAT " bytes a layer; K = 2: %" G_GINT64_FORMAT
                 " bytes two layers",
                 per_k1, two_k2);
  g_assert_cmpint(per_k1, ==, 2 * s * b * h);
  g_assert_cmpint(two_k2, ==, 36 * s * b * h + 5 * a * s * s * b + 16 * s * b);
  int64_t extra2 = held_plan(m2, (int)b, k1) - held(m2, (int)b, ST_RECOMPUTE_FULL);
  int64_t extra3 = held_plan(m3, (int)b, k1) - held(m3, (int)b, ST_RECOMPUTE_FULL);
  g_assert_cmpint(extra2, >, 0);
  g_assert_cmpint(extra2, ==, extra3);

  /* Refusals, each naming what to change. */
  g_autoptr(GError) error = NULL;
  g_assert_false(st_recompute_check(m3, &(StRecomputePlan){ST_RECOMPUTE_FULL, 4, 0}, &error));
  g_assert_nonnull(strstr(error->message, "has 3 transformer layers"));
  g_clear_error(&error);
  g_assert_false(st_recompute_check(m3, &(StRecomputePlan){ST_RECOMPUTE_NONE, 2, 0}, &error));
  g_assert_nonnull(strstr(error->message, "give --recompute full"));
  g_clear_error(&error);
  g_autoptr(StModel) mlp = st_test_model("models/mlp.json");
  g_assert_false(st_recompute_check(mlp, &k1, &error));
  g_assert_nonnull(strstr(error->message, "has 0 transformer layers"));
  g_clear_error(&error);
  g_assert_true(st_recompute_check(m3, &(StRecomputePlan){ST_RECOMPUTE_FULL, 3, 0}, &error));
}

static void
test_ops(void)
{
  /* --recompute-ops (Megatron-LM's --recompute-modules), per GPT layer with
   * dropout, b = 2, f = 4h, 16-bit: of the 34 s b h + 5 a s^2 b of no
   * recomputation (plus the norms' statistics, 16 s b),
   *   core_attn drops the scores, their dropped copy and mask: 5 a s^2 b;
   *   mlp_act the GELU's output, s b f 2 = 8 s b h;
   *   layernorm both norms' outputs, 2 x 2 s b h = 4 s b h.
   * A LLaMA layer (flash, GELU MLP of 4h) keeps 32 s b h + 4 a s b + 8 s b
   * (test_flash_terms): mlp_act and layernorm drop the same 8 and 4 s b h,
   * and core_attn nothing (refused, even with another op: that run is the
   * other op's alone). */
  const int64_t s = 64, b = 2, h = 64, a = 4;
  static const struct {
    unsigned ops;
    int64_t sbh, as2b; /* held per layer: sbh x s b h + as2b x a s^2 b + 16 s b */
  } GPT[] = {
    {1u << ST_RC_CORE_ATTN, 34, 0},
    {1u << ST_RC_MLP_ACT, 26, 5},
    {1u << ST_RC_LAYERNORM, 30, 5},
    {(1u << ST_RC_CORE_ATTN) | (1u << ST_RC_MLP_ACT), 26, 0},
    {(1u << ST_RC_CORE_ATTN) | (1u << ST_RC_MLP_ACT) | (1u << ST_RC_LAYERNORM), 22, 0},
  };
  g_autoptr(StModel) g2 = gpt(2);
  g_autoptr(StModel) g3 = gpt(3);
  for (gsize k = 0; k < G_N_ELEMENTS(GPT); k++) {
    StRecomputePlan p = {ST_RECOMPUTE_SELECTIVE, 0, GPT[k].ops};
    g_assert_true(st_recompute_check(g3, &p, NULL));
    int64_t per = held_plan(g3, (int)b, p) - held_plan(g2, (int)b, p);
    g_autofree char *name = st_recompute_ops_format(GPT[k].ops);
    g_test_message("gpt, %s: %" G_GINT64_FORMAT " bytes a layer", name, per);
    g_assert_cmpint(per, ==, GPT[k].sbh * s * b * h + GPT[k].as2b * a * s * s * b + 16 * s * b);
  }
  g_autoptr(StModel) l2 = llama(2);
  g_autoptr(StModel) l3 = llama(3);
  static const struct {
    unsigned ops;
    int64_t sbh;
  } LLAMA[] = {
    {1u << ST_RC_MLP_ACT, 24},
    {1u << ST_RC_LAYERNORM, 28},
    {(1u << ST_RC_MLP_ACT) | (1u << ST_RC_LAYERNORM), 20},
  };
  for (gsize k = 0; k < G_N_ELEMENTS(LLAMA); k++) {
    StRecomputePlan p = {ST_RECOMPUTE_SELECTIVE, 0, LLAMA[k].ops};
    int64_t per = held_plan(l3, (int)b, p) - held_plan(l2, (int)b, p);
    g_assert_cmpint(per, ==, LLAMA[k].sbh * s * b * h + 4 * a * s * b + 8 * s * b);
  }
  g_autoptr(GError) error = NULL;
  StRecomputePlan both = {ST_RECOMPUTE_SELECTIVE, 0,
                          (1u << ST_RC_CORE_ATTN) | (1u << ST_RC_MLP_ACT)};
  g_assert_false(st_recompute_check(l3, &both, &error));
  g_assert_nonnull(strstr(error->message, "--recompute-ops core_attn"));
  g_clear_error(&error);
  g_assert_false(st_recompute_check(
    l3, &(StRecomputePlan){ST_RECOMPUTE_FULL, 0, 1u << ST_RC_MLP_ACT}, &error));
  g_assert_nonnull(strstr(error->message, "give --recompute selective"));
  g_clear_error(&error);

  /* The option's choices name every set as st_recompute_ops_format does,
   * index + 1 its bits. */
  const StOptionSpec *opt = st_option_find("recompute-ops");
  for (unsigned i = 0; opt->choices[i] != NULL; i++) {
    g_autofree char *name = st_recompute_ops_format(i + 1);
    g_assert_cmpstr(opt->choices[i], ==, name);
  }
}

static void
test_torchtitan(void)
{
  /* torchtitan's per-op policy (torchtitan/distributed/activation_checkpoint.py,
   * mode selective, option op: each block's aten.mm counted afresh, the odd
   * ones' outputs and the attention kernel's kept). Llama 3 8B's block
   * (d 4096, 32 heads of 128, 8 key/value heads, SwiGLU of 14336) calls wq,
   * wk, wv, wo, w1, w3, w2: it keeps wq 4096, wv 1024, the attention's
   * output 4096 and log-sum-exp (32 fp32), w1 14336 and w2 4096 per token,
   * 27,648 bf16 values and 128 bytes: 55,424 bytes, besides its input; it
   * makes wk, wo and w3 again: 2 x 4096 x (1024 + 4096 + 14336) FLOPs a
   * token. */
  g_autoptr(StModel) m = st_test_model_named("llama-3-8b");
  const StLayer *block = &m->layers[1];
  g_assert_cmpstr(block->type->name, ==, "llama_block");
  const int64_t s = 8192;
  g_assert_cmpint(block->act_bytes - block->in_bytes - block->act_again[ST_RC_TORCHTITAN], ==,
                  55424 * s);
  g_assert_cmpfloat(block->again_flops[ST_RC_TORCHTITAN], ==,
                    2.0 * (double)s * 4096 * (1024 + 4096 + 14336));
  /* Through the strategies' accounting, on the small LLaMA (MHA h = 64, 4
   * heads, GELU MLP of 4h, so wq, wk, wv, wo, fc1, fc2: wq, wv, fc1 kept):
   * per layer its input 2 s b h, 2 s b h (wq) + 2 s b h (wv) + 2 s b h (the
   * attention's output) + 8 s b h (fc1) + 4 a s b (log-sum-exp), no norm
   * statistics: against 32 s b h + 4 a s b + 8 s b without recomputation. */
  const int64_t b = 2, h = 64, a = 4, s_small = 64;
  g_autoptr(StModel) l2 = llama(2);
  g_autoptr(StModel) l3 = llama(3);
  StRecomputePlan tt = {ST_RECOMPUTE_SELECTIVE, 0, 1u << ST_RC_TORCHTITAN};
  g_assert_true(st_recompute_check(l3, &tt, NULL));
  g_assert_cmpint(held_plan(l3, (int)b, tt) - held_plan(l2, (int)b, tt), ==,
                  16 * s_small * b * h + 4 * a * s_small * b);
  /* A whole policy: refused beside another op, and on blocks split over a
   * tensor-parallel group. */
  unsigned ops;
  g_autoptr(GError) error = NULL;
  g_assert_true(st_recompute_ops_parse("torchtitan", &ops, &error));
  g_assert_cmpuint(ops, ==, 1u << ST_RC_TORCHTITAN);
  g_assert_false(st_recompute_ops_parse("torchtitan+mlp_act", &ops, &error));
  g_assert_nonnull(strstr(error->message, "whole policy"));
  g_clear_error(&error);
  g_autoptr(StModel) split = st_model_derive_as(m, NULL, 2, FALSE, &error);
  g_assert_no_error(error);
  g_assert_false(st_recompute_check(split, &tt, &error));
  g_assert_nonnull(strstr(error->message, "tensor-parallel"));
  g_clear_error(&error);
  /* and before the split, from the options (the strategies check the whole
   * model, which megatron splits after) */
  g_assert_true(st_recompute_check_split(&tt, 1, NULL));
  g_assert_false(st_recompute_check_split(&tt, 2, &error));
  g_assert_nonnull(strstr(error->message, "--tensor-parallel 2"));
}

/* A block's forward FLOPs per sample, f = 4h: 24 s h^2 + 4 s^2 h. */
static double
block_fwd(double s, double h)
{
  return 24.0 * s * h * h + 4.0 * s * s * h;
}

static void
test_strategies_every_ops(void)
{
  /* Through every strategy that runs passes, on 4 GPT layers, b = 2, 2
   * micro-batches per rank:
   * - --recompute-every 2: blocks 2 and 4 recomputed, 2 ops a micro-batch
   *   at a block's forward, 24 s h^2 + 4 s^2 h a sample (rank 0's layers:
   *   those of them it runs);
   * - selective of all three ops: one recompute per block, at the scores'
   *   2 s^2 h a sample (the GELU and the norms count no FLOPs), and as many
   *   bytes again as the three parts take, written and read back:
   *   2 (5 a s^2 + 8 s h + 4 s h) bytes a sample at 16 bits. */
  g_autoptr(StModel) m = gpt(4);
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  static const struct {
    const char *strategy, *extra;
  } STRATEGIES[] = {
    {"dp", NULL},         {"zero", "zero-stage=3"},          {"cdp", "stages=2"},
    {"burst", NULL},      {"pipeline", "pipeline-stages=2"}, {"megatron", NULL},
  };
  const double s = 64, h = 64, a = 4;
  for (gsize k = 0; k < G_N_ELEMENTS(STRATEGIES); k++) {
    for (int variant = 0; variant < 2; variant++) {
      StOptions o;
      st_options_init(&o);
      o.micro_batch = 2;
      o.global_batch = 8;
      o.precision = ST_PRECISION_MIXED;
      g_autoptr(GError) error = NULL;
      if (variant == 0) {
        g_assert_true(st_options_set(&o, "recompute", "full", &error));
        g_assert_true(st_options_set(&o, "recompute-every", "2", &error));
      } else {
        g_assert_true(st_options_set(&o, "recompute", "selective", &error));
        g_assert_true(
          st_options_set(&o, "recompute-ops", "core_attn+mlp_act+layernorm", &error));
      }
      if (STRATEGIES[k].extra != NULL) {
        g_auto(GStrv) kv = g_strsplit(STRATEGIES[k].extra, "=", 2);
        g_assert_true(st_options_set(&o, kv[0], kv[1], &error));
      }
      g_autoptr(StSchedule) sch = st_test_build(STRATEGIES[k].strategy, m, c, &o);
      const StProgram *p = st_schedule_program_of(sch, 0);
      StComputeCtx ctx = {sch->cluster, NULL, sch->model, ST_DTYPE_BF16, NULL, NULL, FALSE,
                          FALSE};
      int n = 0, want = 0;
      double flops = 0, bytes = 0, want_flops = 0, want_bytes = 0;
      for (guint oi = 0; oi < p->ops->len; oi++) {
        const StOp *op = st_program_op(p, oi);
        if (op->kind != ST_OP_COMP || op->layer < 0)
          continue;
        const StLayer *l = &sch->model->layers[op->layer];
        gboolean block = strcmp(l->type->name, "transformer_block") == 0;
        /* the blocks are layers 1..4: block number = layer index */
        if (op->sub == ST_PASS_BWD && block && (variant == 1 || op->layer % 2 == 0)) {
          want++;
          want_flops += op->batch * (variant == 0 ? block_fwd(s, h) : 2.0 * s * s * h);
          want_bytes += variant == 0 ? 0 : op->batch * 2.0 * (5 * a * s * s + 12 * s * h);
        }
        if (op->sub != ST_PASS_RECOMPUTE)
          continue;
        n++;
        StWork w = st_op_work(sch, p, op);
        double f, by;
        st_compute_work_traffic(&ctx, &w, &f, &by);
        flops += f;
        bytes += by;
      }
      g_test_message("%s variant %d: %d recompute ops (%d wanted), %.6g FLOPs (%.6g)",
                     STRATEGIES[k].strategy, variant, n, want, flops, want_flops);
      g_assert_cmpint(n, >, 0);
      g_assert_cmpint(n, ==, want);
      g_assert_cmpfloat_with_epsilon(flops, want_flops, 1e-9 * want_flops);
      if (variant == 1)
        g_assert_cmpfloat_with_epsilon(bytes, want_bytes, 1e-9 * want_bytes);
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
  g_test_add_func("/recompute/every", test_every);
  g_test_add_func("/recompute/ops", test_ops);
  g_test_add_func("/recompute/torchtitan", test_torchtitan);
  g_test_add_func("/recompute/strategies-every-ops", test_strategies_every_ops);
  g_test_add_func("/recompute/seq-len", test_seq_len);
  return g_test_run();
}
