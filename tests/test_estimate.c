/* test_estimate.c: the "estimate" compute model (cost/compute_estimate.c,
 * cost/estimate_kernels.c): never faster than the roofline, kernels that
 * carry their layer's FLOPs, a worked example from the formula, and the
 * choice between estimate and roofline.
 */
#include <math.h>
#include <string.h>

#include "cost/estimate.h"
#include "cost/framework.h"
#include "model/layer_type.h"
#include "testutil.h"

/* Every layer family the estimate decomposes: convolutions, residual
 * blocks, GPT blocks, LLaMA blocks (GQA, RoPE, a sliding window, QKV
 * biases), mixture-of-experts, and one rank's share of a tensor-parallel
 * group (tp > 1, with and without sequence parallelism). GPT-3 XL's
 * vocabulary padded to 50304 as Megatron-LM pads it (two blocks of it). */
#define GPT_PADDED                                                                         \
  "{\"name\": \"gpt-xl-padded\", \"input\": [2048], \"layers\": ["                      \
  "{\"name\": \"wte\", \"type\": \"embedding\", \"vocab\": 50304, \"dim\": 2048},"     \
  "{\"name\": \"wpe\", \"type\": \"position_embedding\"},"                             \
  "{\"repeat\": 2, \"layers\": [{\"name\": \"h.{i}\", \"type\": \"transformer_block\", " \
  "\"heads\": 16, \"causal\": true, \"dropout\": true}]},"                              \
  "{\"name\": \"ln_f\", \"type\": \"layernorm\"},"                                     \
  "{\"name\": \"lm_head\", \"type\": \"lm_head\", \"vocab\": 50304, \"tied\": true},"  \
  "{\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}"

/* Fine-grained experts as Qwen3-30B-A3B has them (d 2048, experts of 768, 8
 * of them per token, of 128): a memory-bound expert,
 * where bytes and not FLOPs decide the bound. */
#define MOE_FINE                                                                           \
  "{\"name\": \"moe-fine\", \"input\": [4096], \"layers\": ["                        \
  "{\"name\": \"embed\", \"type\": \"embedding\", \"vocab\": 1024, \"dim\": 2048},"  \
  "{\"name\": \"attn\", \"type\": \"llama_block\", \"heads\": 16, \"kv_heads\": 4, "  \
  "\"mlp\": \"none\"},"                                                                   \
  "{\"name\": \"router\", \"type\": \"moe_router\", \"experts\": 128, \"top_k\": 8},"  \
  "{\"repeat\": 128, \"layers\": [{\"name\": \"expert.{i}\", \"type\": \"moe_expert\", " \
  "\"ffn\": 768}]},"                                                                       \
  "{\"name\": \"lm_head\", \"type\": \"lm_head\", \"vocab\": 1024},"                  \
  "{\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}"

typedef struct {
  const char *name; /* a shipped model, "gpt-xl-padded" (GPT_PADDED) or "moe-fine" (MOE_FINE) */
  int tp;
  gboolean sp;
} ModelCase;

static const ModelCase MODELS[] = {
  {"mlp", 1, FALSE},           {"resnet18", 1, FALSE},         {"resnet50", 1, FALSE},
  {"vgg16", 1, FALSE},         {"vit_b16", 1, FALSE},          {"gpt2-124m", 1, FALSE},
  {"gpt3-1.3b", 1, FALSE},     {"wide_resnet101_2", 1, FALSE}, {"llama-3-8b", 1, FALSE},
  {"mistral-7b", 1, FALSE},    {"qwen2-7b", 1, FALSE},         {"mixtral-8x7b", 1, FALSE},
  {"gpt-xl-padded", 2, FALSE}, {"gpt-xl-padded", 4, TRUE},     {"llama-3-8b", 4, FALSE},
  {"llama-3-8b", 8, TRUE},     {"mixtral-8x7b", 2, FALSE},     {"mixtral-8x7b", 8, TRUE},
  {"moe-fine", 1, FALSE},
  {NULL, 0, FALSE},
};

static StModel *
model_of(const ModelCase *mc)
{
  g_autoptr(StModel) whole = strcmp(mc->name, "gpt-xl-padded") == 0 ? st_test_model_parse(GPT_PADDED)
                             : strcmp(mc->name, "moe-fine") == 0    ? st_test_model_parse(MOE_FINE)
                                                                     : st_test_model_named(mc->name);
  if (mc->tp == 1)
    return g_steal_pointer(&whole);
  g_autoptr(GError) error = NULL;
  StModel *m = st_model_derive_as(whole, NULL, mc->tp, mc->sp, &error);
  g_assert_no_error(error);
  return m;
}

static const char *const CLUSTERS[] = {"dgx-a100", "dgx-h100", "dgx-h200", "dgx-v100", NULL};

static double
cost(const StComputeCtx *ctx, const StWork *w, StCostSource *src)
{
  return st_compute_time(ctx, w, src);
}

static void
test_never_beats_roofline(void)
{
  /* For every layer of the shipped models, on every GPU, at fp32 and 16
   * bits, forward, backward and recompute at batch 1, 8 and 64, and for
   * optimizer steps: the estimate is at least the roofline's lower bound
   * (every kernel at most at its peak, its bytes at most at the bandwidth).
   * Selective recomputes too, where a layer has one. The first layer's
   * backward computes no input gradient, half of what its count (and so the
   * roofline) holds for a conv or a linear: there the bound is that half,
   * and its W (all of its backward) too. A split backward's B and W each
   * (zero-bubble pipelines): the roofline cuts the backward by W's share of
   * its kernels' FLOPs. Under every framework preset too: fused kernels
   * (a token dispatcher, grouped experts, fused norms) move fewer bytes
   * than the eager ones, and the bound must stay below them. */
  const StFramework *const *presets = st_frameworks();
  for (int c = 0; CLUSTERS[c] != NULL; c++) {
    g_autoptr(StCluster) cl = st_test_cluster_named(CLUSTERS[c], 1, 1);
    for (int mi = 0; MODELS[mi].name != NULL; mi++) {
      g_autoptr(StModel) m = model_of(&MODELS[mi]);
      for (int fw = -1; fw < 0 || presets[fw] != NULL; fw++)
      for (int d = 0; d < 2; d++) {
        StComputeCtx est = {cl, NULL, m, d ? ST_DTYPE_BF16 : ST_DTYPE_FP32, NULL,
                            fw < 0 ? NULL : presets[fw], FALSE, FALSE};
        StComputeCtx roof = est;
        roof.fallback = "roofline";
        /* The last: a selective recompute (attention layers only). */
        static const StPass passes[] = {ST_PASS_FWD,        ST_PASS_BWD,
                                        ST_PASS_BWD_INPUT,  ST_PASS_BWD_WEIGHT,
                                        ST_PASS_RECOMPUTE, ST_PASS_RECOMPUTE};
        static const int64_t batches[] = {1, 8, 64};
        for (int i = 0; i < m->n_layers; i++)
          for (gsize p = 0; p < G_N_ELEMENTS(passes); p++)
            for (gsize b = 0; b < G_N_ELEMENTS(batches); b++) {
              gboolean selective = p == G_N_ELEMENTS(passes) - 1;
              if (selective && m->layers[i].again_flops[ST_RC_CORE_ATTN] <= 0)
                continue;
              StWork w = {.pass = passes[p], .layer = &m->layers[i], .batch = batches[b],
                          .again_ops = selective ? ST_RC_DEFAULT : 0};
              StCostSource se, sr;
              double te = cost(&est, &w, &se), tr = cost(&roof, &w, &sr);
              if (i == 0 && (passes[p] == ST_PASS_BWD || passes[p] == ST_PASS_BWD_WEIGHT))
                tr /= 2;
              if (i == 0 && passes[p] == ST_PASS_BWD_INPUT) /* nothing to compute */
                continue;
              g_assert_cmpint(se, ==, ST_SRC_ESTIMATE);
              g_assert_cmpint(sr, ==, ST_SRC_ROOFLINE);
              if (te < tr * (1 - 1e-9))
                g_error("%s (tp %d) on %s under %s, %s, layer %d '%s' %s batch %" G_GINT64_FORMAT
                        ": estimate %.6g ns beats the roofline %.6g ns",
                        MODELS[mi].name, MODELS[mi].tp, CLUSTERS[c],
                        fw < 0 ? "no framework" : presets[fw]->name, d ? "bf16" : "fp32", i,
                        m->layers[i].name,
                        st_pass_name(passes[p]), batches[b], te, tr);
            }
        StWork optim = {.pass = ST_PASS_OPTIM, .elems = m->params, .bytes = m->params * 16,
                        .kernel = "adam"};
        StCostSource s;
        g_assert_cmpfloat(cost(&est, &optim, &s), >=, cost(&roof, &optim, &s));
      }
    }
  }
}

static void
test_kernels_carry_the_flops(void)
{
  /* The kernels of a pass add up to the layer's FLOPs (the model's own count:
   * layer_*.c) within 5 %: memory-bound kernels (norms, activations, adds)
   * carry none of the few FLOPs per element the model counts for them, 3.4 %
   * of a ResNet-50 bottleneck's forward at most; the first
   * layer's backward computes no input gradient (frameworks do not ask one
   * for the samples), so its kernels carry at most its count. */
  for (int mi = 0; MODELS[mi].name != NULL; mi++) {
    g_autoptr(StModel) m = model_of(&MODELS[mi]);
    g_autoptr(StCluster) cl = st_test_cluster_named("dgx-a100", 1, 1);
    StComputeCtx ctx = {cl, NULL, m, ST_DTYPE_BF16, NULL, NULL, FALSE, FALSE};
    for (int i = 0; i < m->n_layers; i++) {
      const StLayer *l = &m->layers[i];
      for (int p = 0; p < 2; p++) {
        StWork w = {.pass = p ? ST_PASS_BWD : ST_PASS_FWD, .layer = l, .batch = 8};
        StKernels ks;
        g_assert_true(st_estimate_kernels(&ctx, &w, &ks));
        double flops = 0;
        for (int k = 0; k < ks.n; k++)
          flops += ks.k[k].flops;
        double want = 8 * (p ? l->bwd_flops : l->fwd_flops);
        if (i == 0 && p == 1) {
          g_assert_cmpfloat(flops, <=, want * 1.02 + 1);
          continue;
        }
        if (fabs(flops - want) > 0.05 * want + 1e3)
          g_error("%s (tp %d) layer %d '%s' (%s) %s: kernels carry %.6g FLOPs, the layer %.6g",
                  MODELS[mi].name, MODELS[mi].tp, i, l->name, l->type->name, p ? "bwd" : "fwd",
                  flops, want);
      }
    }
  }
}

static void
test_split_backward(void)
{
  /* A backward split in two (zero-bubble pipelines): B's and W's kernels
   * are the backward's, each once (count, FLOPs and bytes add up; a type
   * without a list splits its one kernel by its share), W holds
   * the wgrad GEMMs and nothing for a layer without weights, and for a
   * linear of rows x in -> out W is its one GEMM of 2 rows in out FLOPs.
   * The roofline splits the same way: its B + W is its backward. */
  g_autoptr(StCluster) cl = st_test_cluster_named("dgx-h100", 1, 1);
  for (int mi = 0; MODELS[mi].name != NULL; mi++) {
    g_autoptr(StModel) m = model_of(&MODELS[mi]);
    StComputeCtx ctx = {cl, NULL, m, ST_DTYPE_BF16, NULL, NULL, FALSE, FALSE};
    StComputeCtx roof = ctx;
    roof.fallback = "roofline";
    for (int i = 0; i < m->n_layers; i++) {
      const StLayer *l = &m->layers[i];
      StKernels ks[3];
      const StPass passes[3] = {ST_PASS_BWD, ST_PASS_BWD_INPUT, ST_PASS_BWD_WEIGHT};
      double flops[3] = {0}, bytes[3] = {0};
      for (int p = 0; p < 3; p++) {
        StWork w = {.pass = passes[p], .layer = l, .batch = 8};
        g_assert_true(st_estimate_kernels(&ctx, &w, &ks[p]));
        for (int k = 0; k < ks[p].n; k++) {
          flops[p] += ks[p].k[k].flops;
          bytes[p] += ks[p].k[k].bytes;
        }
      }
      /* (a type without a list of its own: its one kernel cut in two) */
      if (ks[0].n > 1)
        g_assert_cmpint(ks[1].n + ks[2].n, ==, ks[0].n);
      g_assert_cmpfloat_with_epsilon(flops[1] + flops[2], flops[0], 1e-9 * flops[0] + 1);
      g_assert_cmpfloat_with_epsilon(bytes[1] + bytes[2], bytes[0], 1e-9 * bytes[0] + 1);
      if (l->params == 0 && st_model_tied_layer(m, i) < 0 && ks[2].n > 0)
        g_error("%s layer %d '%s' (%s) has no weights but W kernels", MODELS[mi].name, i,
                l->name, l->type->name);
      if (strcmp(l->type->name, "linear") == 0) {
        double rows = 8, in = (double)st_shape_elems(&l->in_shape),
               out = (double)st_shape_elems(&l->out_shape);
        g_assert_cmpfloat_with_epsilon(flops[2], 2 * rows * in * out, 1e-6 * flops[2]);
      }
      double t[3];
      for (int p = 0; p < 3; p++) {
        StWork w = {.pass = passes[p], .layer = l, .batch = 8};
        StCostSource src;
        double f = 0, b = 0;
        st_compute_work_traffic(&roof, &w, &f, &b);
        t[p] = f + b;
        g_assert_cmpfloat(cost(&roof, &w, &src), >=, 0);
      }
      g_assert_cmpfloat_with_epsilon(t[1] + t[2], t[0], 1e-9 * t[0] + 1);
    }
  }
}

static void
test_worked_gemm(void)
{
  /* One linear of 4096 -> 4096 features over 8192 rows (a batch of 8 of
   * [1024, 4096] tokens) on an A100 in bf16: one GEMM, m = 8192, n = k =
   * 4096. With the curve's 128 x 128 tiles: 64 x 32 = 2048 tiles over 108
   * SMs, ceil(2048 / 108) = 19 waves; each tile 2 x 128 x 128 x (4096 + 128)
   * FLOPs at (312 TFLOP/s / 108) x 0.859 per SM. A half tile in either
   * dimension gives the same work per wave-slot with more waves of less
   * waste: 4096 tiles of 64 x 128 in 38 waves, i.e. the same time; the
   * fastest is what the model takes. The bytes (2 x (8192 x 4096 + 4096^2 +
   * 8192 x 4096) = 168 MB at 0.84 x 2.039 TB/s = 98 us) are faster than the
   * math (about 1,900 us), and the launch floor (20 us) does not bind. */
  g_autoptr(StModel) m = st_test_model_parse(
    "{\"name\": \"one\", \"input\": [1024, 4096], \"layers\": ["
    "{\"name\": \"fc\", \"type\": \"linear\", \"out_features\": 4096, \"bias\": false}]}");
  g_autoptr(StCluster) cl = st_test_cluster_named("dgx-a100", 1, 1);
  const StGpuPerf *p = cl->gpu.perf;
  g_assert_cmpfloat(p->sms.value, ==, 108);
  g_assert_cmpint(p->gemm.tile_m, ==, 128);
  StComputeCtx ctx = {cl, NULL, m, ST_DTYPE_BF16, NULL, NULL, FALSE, FALSE};
  /* A later layer (the first skips its input gradient): use the forward. */
  StWork w = {.pass = ST_PASS_FWD, .layer = &m->layers[0], .batch = 8};
  StCostSource src;
  double t = st_compute_time(&ctx, &w, &src);
  g_assert_cmpint(src, ==, ST_SRC_ESTIMATE);
  double per_sm = 312e12 / 108 * p->gemm.eff_16bit;
  double tile = 2.0 * 128 * 128 * (4096 + p->gemm.k_half) / per_sm;
  double expect = 19 * tile;
  g_assert_cmpfloat(fabs(t - expect * 1e9), <, 1e-6 * expect * 1e9);
  /* And it is the roofline's 1,762 us over the efficiency and the waves:
   * 19 waves of 108 for 2048 tiles (0.998), 4096 / 4224 of each tile. */
  double roof = 2.0 * 8192 * 4096 * 4096 / 312e12;
  g_assert_cmpfloat_with_epsilon(t * 1e-9 / roof,
                                 (19 * 108 / 2048.0) * (4224 / 4096.0) / p->gemm.eff_16bit,
                                 1e-9);
}

static void
test_choice(void)
{
  /* --compute-model roofline makes the roofline answer where no profile
   * does, through the schedule (settings.compute_model) to the engine; the
   * default is the estimate; a profile entry wins over either. */
  g_autoptr(StModel) m = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  for (int r = 0; r < 2; r++) {
    StOptions o;
    st_options_init(&o);
    o.micro_batch = 8;
    if (r)
      o.compute_model = g_strdup("roofline");
    g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
    g_assert_cmpstr(s->settings.compute_model, ==, r ? "roofline" : NULL);
    StTimeline *t = NULL;
    g_autoptr(StSummary) sum = st_test_simulate(s, NULL, FALSE, &t);
    for (guint i = 0; i < t->ops->len; i++) {
      const StOpRecord *rec = &g_array_index(t->ops, StOpRecord, i);
      const StProgram *prog = st_schedule_program_of(s, rec->rank);
      if (st_program_op(prog, rec->op)->kind == ST_OP_COMP)
        g_assert_cmpint(rec->source, ==, r ? ST_SRC_ROOFLINE : ST_SRC_ESTIMATE);
    }
    st_timeline_free(t);
    st_options_clear(&o);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/estimate/never-beats-roofline", test_never_beats_roofline);
  g_test_add_func("/estimate/kernels-carry-the-flops", test_kernels_carry_the_flops);
  g_test_add_func("/estimate/worked-gemm", test_worked_gemm);
  g_test_add_func("/estimate/split-backward", test_split_backward);
  g_test_add_func("/estimate/choice", test_choice);
  return g_test_run();
}
