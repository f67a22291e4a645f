/* test_fp8.c: --precision fp8, each mechanism against its source (docs/LLM.md,
 * "FP8 training"): which ops run in FP8 (Transformer Engine's linears in
 * Megatron-LM's transformer layers, nothing else), the rate they run at
 * (the GPU file's FP8 peak and gemm_fp8 curve), the memory TE adds (an FP8
 * copy of each such weight and its transpose, and the delayed-scaling
 * state), and the refusal on GPUs without FP8 tensor cores. */
#include <math.h>
#include <string.h>

#include "cost/estimate.h"
#include "cost/framework.h"
#include "model/layer_type.h"
#include "strategy/fp8.h"
#include "strategy/strategy.h"
#include "testutil.h"

static StComputeCtx
ctx_of(const StCluster *c, const StModel *m, gboolean fp8)
{
  return (StComputeCtx){c, NULL, m, ST_DTYPE_BF16, "estimate", st_framework_find("megatron"),
                        FALSE, fp8};
}

static double
pass_ns(const StComputeCtx *ctx, const StLayer *layer, StPass pass, int64_t batch)
{
  StWork w = {.pass = pass, .layer = layer, .batch = batch};
  StCostSource source;
  double t = st_compute_time(ctx, &w, &source);
  g_assert_cmpint(source, ==, ST_SRC_ESTIMATE);
  return t;
}

/* One SwiGLU MLP of Llama-3 70B's width (d 8192, f 28672) on 8192 tokens:
 * its pass is the gate-up GEMM (K = d), the down GEMM (K = f) and a few
 * memory kernels. The GEMMs' time ratio bf16 / FP8 on an H100, tiles full:
 *
 *   (1979 x 0.80 x K / (K + 384)) / (989 x 0.801 x K / (K + 128))
 *     = 1.996 (K + 128) / (K + 384):  1.935 at K = 8192, 1.979 at K = 28672
 *
 * (peaks from the H100 datasheet, efficiencies and k_half from
 * models/gpus/h100-sxm.json: MAMF's bf16 and TileLang's FP8 matmuls).
 * The pass ratio sits below the GEMMs' (its memory kernels take the same
 * time, TE's casts add to the FP8 side) but above 1.7: the GEMMs are 90 %
 * of the bf16 pass and more. */
static void
test_gemm_rate(void)
{
  g_autoptr(StModel) m = st_test_model_parse(
    "{\"name\": \"mlp-70b\", \"input\": [8192], \"dtype\": \"bf16\", \"layers\": ["
    "{\"name\": \"e\", \"type\": \"embedding\", \"vocab\": 1024, \"dim\": 8192},"
    "{\"name\": \"mlp\", \"type\": \"swiglu\", \"ffn\": 28672}]}");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 1);
  g_assert_cmpfloat(c->gpu.fp8_flops, ==, 1979e12);
  g_assert_cmpint(c->gpu.perf->gemm_fp8.tile_m, >, 0);
  StComputeCtx mixed = ctx_of(c, m, FALSE), fp8 = ctx_of(c, m, TRUE);
  const StLayer *mlp = &m->layers[1];
  for (int pass = ST_PASS_FWD; pass <= ST_PASS_BWD; pass++) {
    double ratio = pass_ns(&mixed, mlp, pass, 1) / pass_ns(&fp8, mlp, pass, 1);
    g_test_message("%s: bf16 / fp8 = %.3f", st_pass_name(pass), ratio);
    g_assert_cmpfloat(ratio, >, 1.7);
    g_assert_cmpfloat(ratio, <, 1.996 * (28672 + 128.0) / (28672 + 384.0));
  }
}

/* The kernels of `layer`'s pass that are not TE's: every FP8 GEMM and the
 * casts around them dropped (a cast: a memory kernel moving e + 2 = 4 bytes
 * per element of a GEMM operand). */
static void
kernels_of(const StComputeCtx *ctx, const StLayer *layer, StPass pass, StKernels *out,
           int *fp8_gemms)
{
  StWork w = {.pass = pass, .layer = layer, .batch = 1};
  g_assert_true(st_estimate_kernels(ctx, &w, out));
  *fp8_gemms = 0;
  for (int i = 0; i < out->n; i++)
    *fp8_gemms += out->k[i].fp8;
}

/* Which ops run in FP8 (TE in Megatron-LM: te.Linear, LayerNormLinear and
 * LayerNormMLP inside the transformer layers; the embedding, final norm,
 * output layer and loss outside fp8_autocast): a Llama block's forward has
 * 4 FP8 GEMMs (QKV, output projection, gate-up, down), its backward 8
 * (dgrad and wgrad of each; Megatron-LM's --fp8-wgrad default); its
 * attention and norms are the same kernels as under mixed precision; the
 * layers around the blocks cost exactly what they cost under mixed. */
static void
test_which_ops(void)
{
  g_autoptr(StModel) m = st_test_model_named("llama-3-8b");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 1);
  StComputeCtx mixed = ctx_of(c, m, FALSE), fp8 = ctx_of(c, m, TRUE);
  const StLayer *block = &m->layers[2];
  g_assert_cmpstr(block->type->name, ==, "llama_block");
  for (int pass = ST_PASS_FWD; pass <= ST_PASS_BWD; pass++) {
    StKernels a, b;
    int na, nb;
    kernels_of(&mixed, block, pass, &a, &na);
    kernels_of(&fp8, block, pass, &b, &nb);
    g_assert_cmpint(na, ==, 0);
    g_assert_cmpint(nb, ==, pass == ST_PASS_FWD ? 4 : 8);
    /* Forward: a cast of each linear's input; backward: of its output's
     * gradient. Everything else, kernel for kernel, as mixed. */
    int casts = 4;
    g_assert_cmpint(b.n, ==, a.n + casts);
    int j = 0;
    for (int i = 0; i < b.n; i++) {
      /* A cast: the memory kernel just before a linear's first FP8 GEMM. */
      if (b.k[i].cls == ST_KERNEL_MEMORY && i + 1 < b.n && b.k[i + 1].fp8) {
        casts--;
        continue;
      }
      g_assert_cmpint(j, <, a.n);
      g_assert_cmpint(a.k[j].cls, ==, b.k[i].cls);
      g_assert_cmpfloat(a.k[j].flops, ==, b.k[i].flops);
      if (!b.k[i].fp8) /* a 16-bit kernel moves the same bytes */
        g_assert_cmpfloat(a.k[j].bytes, ==, b.k[i].bytes);
      j++;
    }
    g_assert_cmpint(casts, ==, 0);
    g_assert_cmpint(j, ==, a.n);
  }
  /* Embedding, final norm, LM head, loss: the same time. */
  for (int i = 0; i < m->n_layers; i++) {
    const char *type = m->layers[i].type->name;
    if (strcmp(type, "llama_block") == 0)
      continue;
    for (int pass = ST_PASS_FWD; pass <= ST_PASS_BWD; pass++)
      g_assert_cmpfloat(pass_ns(&mixed, &m->layers[i], pass, 1), ==,
                        pass_ns(&fp8, &m->layers[i], pass, 1));
    g_assert_cmpint(st_compute_fp8_weights(&fp8, &m->layers[i], NULL), ==, 0);
  }
}

/* The weights TE caches in FP8, per Llama-3 8B block (d 4096, 32 heads of
 * 128, 8 kv heads, f 14336): QKV d (q + 2 kv) = 4096 x 6144, output q d =
 * 4096 x 4096, gate-up d 2f = 4096 x 28672, down f d = 14336 x 4096:
 * 218,103,808 elements in 4 linears, all of the block's parameters but its
 * two RMSNorm weights (2 d). Under TP 8 each rank holds an eighth. The cache:
 * 2 bytes per element (the FP8 copy and its transpose) + 4 linears x 5
 * scaled tensors x (scale, scale_inv, 1 amax) x 4 bytes = 240 bytes. */
static void
test_fp8_weights(void)
{
  g_autoptr(StModel) m = st_test_model_named("llama-3-8b");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  StComputeCtx fp8 = ctx_of(c, m, TRUE);
  const StLayer *block = &m->layers[2];
  int linears = 0;
  const int64_t w = 4096LL * 6144 + 4096LL * 4096 + 4096LL * 28672 + 14336LL * 4096;
  g_assert_cmpint(w, ==, 218103808);
  g_assert_cmpint(st_compute_fp8_weights(&fp8, block, &linears), ==, w);
  g_assert_cmpint(linears, ==, 4);
  g_assert_cmpint(block->params - w, ==, 2 * 4096);
  g_assert_cmpint(st_fp8_layer_cache_bytes(c, m, block), ==, 2 * w + 240);
  StShape input = {.n_dims = 1, .dims = {8192}};
  g_autoptr(StModel) tp = st_model_derive_as(m, &input, 8, TRUE, NULL);
  g_assert_nonnull(tp);
  g_assert_cmpint(st_compute_fp8_weights(&fp8, &tp->layers[2], NULL), ==, w / 8);
  /* A GPU without an FP8 peak runs nothing in FP8. */
  g_autoptr(StCluster) a100 = st_test_cluster_named("dgx-a100", 1, 1);
  g_assert_cmpint(st_fp8_layer_cache_bytes(a100, m, block), ==, 0);
}

static void
megatron_options(StOptions *o, StPrecision precision)
{
  st_options_init(o);
  o->framework = g_strdup("megatron"); /* fp32 gradients (--accumulate-allreduce-grads-in-fp32) */
  o->tensor_parallel = 8;
  o->sequence_parallel = TRUE;
  o->zero_stage = 1; /* --use-distributed-optimizer */
  o->micro_batch = 1;
  o->global_batch = 4;
  o->precision = precision;
}

/* Model states per GPU, Megatron-LM + distributed optimizer + TE FP8, as
 * published: bf16 weights 2 bytes per parameter, fp32 gradients 4 (the
 * main_grad buffer), fp32 master weights and Adam's two moments 12 over the
 * DP group (Megatron-LM docs, distributed optimizer: 6 + 12/d bytes per
 * parameter with bf16 weights and fp32 gradients), and TE's FP8 weight and
 * transpose, 2 per parameter of an FP8 linear: 8 + 12/d for those. Llama-3
 * 8B on 2 DGX H100 (TP 8 x DP 2): params grow by exactly the cache, grads
 * and optimizer states do not change. */
static void
test_megatron_memory(void)
{
  g_autoptr(StModel) m = st_test_model_named("llama-3-8b");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 2, 16);
  int64_t by[2][ST_MEM_N] = {{0}};
  int64_t blocks = 0, params = 0;
  for (int k = 0; k < 2; k++) {
    StOptions o;
    megatron_options(&o, k ? ST_PRECISION_FP8 : ST_PRECISION_MIXED);
    g_autoptr(StSchedule) s = st_test_build("megatron", m, c, &o);
    st_options_clear(&o);
    const StProgram *p = st_schedule_program_of(s, 0);
    for (guint b = 0; b < p->buffers->len; b++) {
      const StBuffer *buf = &g_array_index(p->buffers, StBuffer, b);
      if (buf->persistent)
        by[k][buf->category] += buf->bytes;
    }
    if (k == 1) {
      const StModel *tp = st_program_model(s, p);
      for (int i = 0; i < tp->n_layers; i++) {
        params += tp->layers[i].params;
        if (strcmp(tp->layers[i].type->name, "llama_block") == 0)
          blocks++;
      }
      g_assert_cmpint(blocks, ==, 32);
    }
  }
  const int64_t w = 218103808 / 8; /* one rank's FP8 weights per block */
  g_assert_cmpint(by[1][ST_MEM_PARAMS] - by[0][ST_MEM_PARAMS], ==, blocks * (2 * w + 240));
  g_assert_cmpint(by[1][ST_MEM_GRADS], ==, by[0][ST_MEM_GRADS]);
  g_assert_cmpint(by[1][ST_MEM_OPTIMIZER], ==, by[0][ST_MEM_OPTIMIZER]);
  /* Mixed: 2 + 4 + 12 / 2 bytes per parameter of the rank (each layer's
   * optimizer shard rounded up: within a byte per layer and DP rank). */
  g_assert_cmpint(by[0][ST_MEM_PARAMS], ==, 2 * params);
  g_assert_cmpint(by[0][ST_MEM_GRADS], ==, 4 * params);
  g_assert_cmpint(by[0][ST_MEM_OPTIMIZER], >=, 12 * params / 2);
  g_assert_cmpint(by[0][ST_MEM_OPTIMIZER], <=, 12 * (params / 2 + 64));
  /* FP8: the FP8 linears' 4 bytes of params (their bf16 weight, FP8 copy
   * and transpose) against 2 for the rest, to the byte. */
  g_assert_cmpint(by[1][ST_MEM_PARAMS], ==, 2 * params + blocks * (2 * w + 240));
}

/* --precision fp8 on an A100: refused before anything is built, naming
 * the GPU. */
static void
test_refused_without_fp8(void)
{
  g_autoptr(StModel) m = st_test_model_named("llama-3-8b");
  const char *clusters[] = {"dgx-a100", "dgx-v100"};
  for (gsize i = 0; i < G_N_ELEMENTS(clusters); i++) {
    g_autoptr(StCluster) c = st_test_cluster_named(clusters[i], 1, 8);
    StOptions o;
    megatron_options(&o, ST_PRECISION_FP8);
    g_autoptr(GError) error = st_test_build_refused("megatron", m, c, &o);
    st_options_clear(&o);
    g_assert_nonnull(strstr(error->message, "--precision fp8"));
    g_assert_nonnull(strstr(error->message, c->gpu.name));
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/fp8/gemm-rate", test_gemm_rate);
  g_test_add_func("/fp8/which-ops", test_which_ops);
  g_test_add_func("/fp8/fp8-weights", test_fp8_weights);
  g_test_add_func("/fp8/megatron-memory", test_megatron_memory);
  g_test_add_func("/fp8/refused-without-fp8", test_refused_without_fp8);
  return g_test_run();
}
