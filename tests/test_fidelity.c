/* test_fidelity.c: the costs real runs pay that a bound leaves out (issue
 * 19), each against the published measurement of its mechanism, and each
 * moving a prediction the way, and by about as much, as that source says:
 *
 *   communication kernels' SMs   NCCL's 24 channels beside a GEMM (Lee et al.,
 *                                arXiv 2507.03114: compute slowed 18.9 % on
 *                                average, 40 % at most, beside NCCL)
 *   attention kernels            2022's Triton FlashAttention against
 *                                FlashAttention-2 (Dao 2023, fwd+bwd figures)
 *   eager memory-bound kernels   an eager RMSNorm against a fused one (Liger
 *                                Kernel's benchmark: ~10.5x the fused time)
 *   TP communication overlap     Transformer Engine's userbuffers: one of t
 *                                chunks exposed (Wang et al., ASPLOS 2023)
 *   parameter-gather overlap     Megatron-LM's --overlap-param-gather
 *   runtime memory               context, NCCL buffers, the allocator's cache
 *                                (c10 CUDACachingAllocator frees its cache and
 *                                retries before it fails)
 *   framework states             FSDP's fp32 shards, a fused loss's
 *                                log-sum-exp, MoE's token dispatcher
 */
#include <math.h>
#include <string.h>

#include "cost/cost.h"
#include "cost/framework.h"
#include "output/runtime_memory.h"
#include "strategy/strategy_common.h"
#include "testutil.h"

#define US 1000

/* ---- helpers ------------------------------------------------------------------------ */

static const StFramework *
framework(const char *name)
{
  const StFramework *f = st_framework_find(name);
  g_assert_nonnull(f);
  return f;
}

/* The estimate's time of one pass of `layer` at `batch` under `framework`. */
static double
pass_ns(const StCluster *c, const StModel *m, int layer, StPass pass, int batch,
        const StFramework *framework)
{
  StComputeCtx ctx = {c, NULL, m, ST_DTYPE_BF16, "estimate", framework, FALSE, FALSE};
  StWork w = {.pass = pass, .layer = &m->layers[layer], .batch = batch};
  StCostSource source;
  return st_compute_time(&ctx, &w, &source);
}

static int
layer_named(const StModel *m, const char *name)
{
  for (int i = 0; i < m->n_layers; i++)
    if (strcmp(m->layers[i].name, name) == 0)
      return i;
  g_assert_not_reached();
}

/* A model of the source tree at `tokens` per sequence. */
static StModel *
model_at(const char *relative, int tokens)
{
  g_autoptr(StModel) m = st_test_model(relative);
  StShape input = {.n_dims = 1, .dims = {tokens}};
  g_autoptr(GError) error = NULL;
  StModel *at = st_model_derive_as(m, &input, 1, FALSE, &error);
  g_assert_no_error(error);
  return at;
}

/* Builds and simulates; the timeline (when asked for) borrows *schedule,
 * which the caller frees after it (NULL: freed here). */
static StSummary *
simulate(const char *strategy, const StModel *m, const StCluster *c, const char *const *options,
         StSchedule **schedule, StTimeline **timeline)
{
  StOptions o;
  st_options_init(&o);
  g_autoptr(GError) error = NULL;
  for (int i = 0; options[i] != NULL; i += 2)
    g_assert_true(st_options_set(&o, options[i], options[i + 1], &error));
  g_assert_no_error(error);
  g_autoptr(StSchedule) s = st_test_build(strategy, m, c, &o);
  st_options_clear(&o);
  g_autoptr(StTimeline) own = NULL;
  StSummary *sum = st_test_simulate(s, NULL, FALSE, timeline != NULL ? timeline : &own);
  if (schedule != NULL)
    *schedule = g_steal_pointer(&s);
  return sum;
}

/* ---- communication kernels' SMs ------------------------------------------------------ */

/* A forward of 100 us (the unit cluster's roofline) beside an all-reduce of
 * 200 MB on another stream, under `framework`: the forward's end. */
static int64_t
forward_beside_allreduce(const char *framework)
{
  g_autoptr(StSchedule) s = st_test_unit_schedule(2, NULL);
  g_free(s->settings.framework);
  s->settings.framework = g_strdup(framework);
  int32_t color[] = {0, 0};
  int comm = st_schedule_add_comm(s, "dp", color);
  StProgram *p = st_program_new("p");
  st_program_add_stream(p, "compute", 0);
  st_program_add_stream(p, "comm", 0);
  uint32_t fwd = st_test_add(p, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  st_test_add(p, st_op_coll(1, ST_COLL_ALL_REDUCE, comm, 200000000));
  int prog = st_schedule_add_program(s, p);
  s->ranks[0].program = s->ranks[1].program = prog;
  g_autoptr(StTimeline) t = st_test_run(s, NULL, TRUE);
  return st_test_end_of(t, 0, fwd);
}

static void
test_comm_takes_sms(void)
{
  /* NCCL's ring kernels hold 24 SMs for the whole collective (the GPU
   * file's nccl.channels); the unit cluster's GPU has the default file's
   * 108. A compute-bound forward beside them runs on the other 84: 1/(1 -
   * 24/108) = 1.286x as long, inside Lee et al.'s measured range (slowed
   * 18.9 % on average, 40 % at most). A bound (ideal) leaves it alone. */
  int64_t alone = forward_beside_allreduce("ideal");
  int64_t beside = forward_beside_allreduce("pytorch");
  g_assert_cmpint(alone, ==, 100 * US);
  double slowdown = (double)beside / (double)alone;
  g_test_message("forward beside an all-reduce: %.3fx", slowdown);
  g_assert_cmpfloat_with_epsilon(slowdown, 1.0 / (1.0 - 24.0 / 108.0), 0.01);
  g_assert_cmpfloat(slowdown, >, 1.10);
  g_assert_cmpfloat(slowdown, <=, 1.40);
}

/* ---- attention kernels ------------------------------------------------------------------ */

static double
curve_at(const StAttnCurve *a, double seq)
{
  for (int i = 0; i < a->n; i++)
    if (a->seq[i] == seq)
      return a->efficiency[i];
  g_assert_not_reached();
}

static void
test_triton_attention(void)
{
  /* The GPU file holds the FlashAttention-2 paper's A100 bars for the
   * Triton kernel (fwd+bwd, d128, non-causal: 90 TFLOPS at 2k, 95 at 16k). */
  g_autoptr(StCluster) a100 = st_test_cluster_named("dgx-a100", 1, 8);
  const StAttnCurve *tri = &a100->gpu.perf->attention[ST_ATTN_TRITON];
  g_assert_cmpint(tri->n, >, 0);
  g_assert_cmpfloat_with_epsilon(curve_at(tri, 2048) * 312, 90, 1.0);
  g_assert_cmpfloat_with_epsilon(curve_at(tri, 16384) * 312, 95, 1.0);

  /* An MPT-7B block at 16k tokens on H100, llm-foundry's Triton attention
   * against FlashAttention-2, everything else alike: slower, by less than
   * the attention alone is (the paper's A100 figure: 203 / 95 = 2.14x at
   * 16k; the block's GEMMs dilute it). */
  g_autoptr(StCluster) h100 = st_test_cluster_named("dgx-h100", 1, 8);
  g_autoptr(StModel) m = model_at("tests/data/validation/mpt-7b.json", 16384);
  int block = layer_named(m, "blocks.0");
  StFramework flash2 = *framework("fsdp");
  flash2.attention = ST_ATTN_FLASH2;
  double t_tri = pass_ns(h100, m, block, ST_PASS_FWD, 1, framework("fsdp")) +
                 pass_ns(h100, m, block, ST_PASS_BWD, 1, framework("fsdp"));
  double t_fa2 = pass_ns(h100, m, block, ST_PASS_FWD, 1, &flash2) +
                 pass_ns(h100, m, block, ST_PASS_BWD, 1, &flash2);
  g_test_message("MPT-7B block at 16k, Triton / FlashAttention-2: %.2fx", t_tri / t_fa2);
  g_assert_cmpfloat(t_tri / t_fa2, >, 1.3);
  g_assert_cmpfloat(t_tri / t_fa2, <, 203.0 / 95.0);
}

/* ---- eager kernels ----------------------------------------------------- */

static void
test_eager_rmsnorm(void)
{
  /* Liger Kernel's RMSNorm benchmark (A100, bf16): HuggingFace's eager
   * RMSNorm takes ~10.5x the fused kernel's time at large sizes, ~9-10
   * minimum-traffic passes. Here the final norm of Qwen3-30B-A3B over
   * 8 x 4096 tokens: eager (pytorch) against fused (megatron). The eager
   * chain's bytes are counted (36 per element in bf16); the fused kernel is
   * charged the roofline's three passes, not the two it moves, so the
   * ratio lands at 6x: at least half the measured one, never above it. */
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-a100", 1, 8);
  g_autoptr(StModel) m = st_test_model("tests/data/validation/qwen3-30b-a3b.json");
  int norm = layer_named(m, "norm");
  double eager = pass_ns(c, m, norm, ST_PASS_FWD, 8, framework("pytorch"));
  double fused = pass_ns(c, m, norm, ST_PASS_FWD, 8, framework("megatron"));
  g_test_message("RMSNorm forward, eager / fused: %.2fx", eager / fused);
  g_assert_cmpfloat(eager / fused, >=, 10.5 / 2);
  g_assert_cmpfloat(eager / fused, <=, 10.5);
}

/* ---- overlaps of Megatron-LM ----------------------------------------------------------- */

static void
test_tp_comm_overlap(void)
{
  /* GPT-3 1.3B, TP 8 with sequence parallelism on one DGX H100: with
   * --tp-comm-overlap only 1 of t chunks of each all-gather and
   * reduce-scatter stays on the compute stream, the rest runs beside the
   * GEMMs; the step gets shorter, by less than the hidden traffic's time
   * (the collectives' SMs slow the GEMMs they hide behind). */
  g_autoptr(StModel) m = st_test_model_named("gpt3-1.3b");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  const char *off[] = {"tensor-parallel", "8", "sequence-parallel", "true", "micro-batch", "2",
                       "global-batch", "8", "precision", "mixed", "framework", "megatron",
                       "tp-comm-overlap", "off", NULL};
  const char *on[] = {"tensor-parallel", "8", "sequence-parallel", "true", "micro-batch", "2",
                      "global-batch", "8", "precision", "mixed", "framework", "megatron",
                      "tp-comm-overlap", "on", NULL};
  g_autoptr(StSchedule) sched_off = NULL, sched_on = NULL;
  g_autoptr(StTimeline) t_off = NULL, t_on = NULL;
  g_autoptr(StSummary) s_off = simulate("megatron", m, c, off, &sched_off, &t_off);
  g_autoptr(StSummary) s_on = simulate("megatron", m, c, on, &sched_on, &t_on);
  /* Traffic is the same; on the compute stream, 1/t of the gathers' and
   * scatters'. */
  int64_t exposed_on = 0, tp_off = 0, hidden_ns = 0;
  const StSchedule *sched = t_on->schedule;
  for (guint i = 0; i < t_on->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t_on->ops, StOpRecord, i);
    const StProgram *p = st_schedule_program_of(sched, r->rank);
    const StOp *op = st_program_op(p, r->op);
    if (r->rank != 0 || op->kind != ST_OP_COMM_COLL)
      continue;
    if (op->data == ST_DATA_TP_OVERLAP)
      hidden_ns += r->end_ns - r->start_ns;
    else if (op->data == ST_DATA_TP_INPUT || op->data == ST_DATA_TP_OUTPUT ||
             op->data == ST_DATA_TP_OUTPUT_GRAD || op->data == ST_DATA_TP_INPUT_GRAD)
      exposed_on += op->bytes;
  }
  const StSchedule *so = t_off->schedule;
  for (guint i = 0; i < t_off->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t_off->ops, StOpRecord, i);
    const StProgram *p = st_schedule_program_of(so, r->rank);
    const StOp *op = st_program_op(p, r->op);
    if (r->rank == 0 && op->kind == ST_OP_COMM_COLL && op->sub != ST_COLL_ALL_REDUCE &&
        op->data >= ST_DATA_TP_INPUT && op->data <= ST_DATA_TP_INPUT_GRAD)
      tp_off += op->bytes;
  }
  g_assert_cmpint(tp_off, >, 0);
  g_assert_cmpfloat_with_epsilon((double)exposed_on / (double)tp_off, 1.0 / 8, 0.01);
  double gain = (double)(s_off->step_time_ns - s_on->step_time_ns);
  g_test_message("TP overlap: step %.3f -> %.3f ms, %.3f ms of traffic hidden",
                 s_off->step_time_ns / 1e6, s_on->step_time_ns / 1e6, hidden_ns / 1e6);
  g_assert_cmpfloat(gain, >, 0);
  g_assert_cmpfloat(gain, <, (double)hidden_ns);
}

static void
test_overlap_param_gather(void)
{
  /* ZeRO-1 (Megatron's distributed optimizer) over 2 DGX A100: with
   * --overlap-param-gather each layer's next forward waits only for its own
   * bucket of updated parameters, so the gathers hide behind the forward
   * and the steady step is shorter. */
  g_autoptr(StModel) m = st_test_model_named("gpt3-1.3b");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-a100", 2, 8);
  const char *base[] = {"micro-batch", "1", "global-batch", "32", "precision", "mixed",
                        "framework", "megatron", "zero-stage", "1", "overlap-grad-reduce",
                        "on", "overlap-param-gather", NULL, NULL};
  base[13] = "off";
  g_autoptr(StSummary) off = simulate("megatron", m, c, base, NULL, NULL);
  base[13] = "on";
  g_autoptr(StSummary) on = simulate("megatron", m, c, base, NULL, NULL);
  g_test_message("param gather overlapped: step %.2f -> %.2f ms", off->step_time_ns / 1e6,
                 on->step_time_ns / 1e6);
  g_assert_cmpint(on->step_time_ns, <, off->step_time_ns);
}

/* ---- memory as a framework holds it ----------------------------------------------------- */

static void
test_runtime_memory(void)
{
  /* The figures from the tensors: allocated adds the workspace, reserved
   * the allocator's cache, device the context and NCCL's buffers; near the
   * capacity the cache gives way (the allocator frees it and retries
   * before it fails), so only allocated + fixed can run a GPU out. */
  StRuntimeMemory rt = {.workspace = 32 << 20, .reserve = 0.15, .fixed = 1 << 30,
                        .capacity = 80LL << 30};
  int64_t fig[ST_MEMKIND_N];
  st_runtime_memory_figures(&rt, 40LL << 30, fig);
  g_assert_cmpint(fig[ST_MEMKIND_ALLOCATED], ==, (40LL << 30) + (32 << 20));
  g_assert_cmpint(fig[ST_MEMKIND_RESERVED], ==,
                  (int64_t)ceil((double)fig[ST_MEMKIND_ALLOCATED] * 1.15));
  g_assert_cmpint(fig[ST_MEMKIND_DEVICE], ==, fig[ST_MEMKIND_RESERVED] + (1 << 30));
  st_runtime_memory_figures(&rt, 75LL << 30, fig);
  g_assert_cmpint(fig[ST_MEMKIND_DEVICE], ==, 80LL << 30); /* full, not over */
  st_runtime_memory_figures(&rt, 79LL << 30, fig);
  g_assert_cmpint(fig[ST_MEMKIND_DEVICE], >, 80LL << 30); /* allocated + fixed over */

  /* A data-parallel job under PyTorch: 600 MiB of context and 440 MiB of
   * NCCL buffers per communicator with peers on other GPUs, per rank. */
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  StOptions o;
  st_options_init(&o);
  g_autoptr(GError) error = NULL;
  g_assert_true(st_options_set(&o, "framework", "pytorch", &error));
  g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
  st_options_clear(&o);
  g_autofree StRuntimeMemory *per = g_new0(StRuntimeMemory, s->n_devices);
  st_runtime_memory(s, per);
  g_assert_cmpint(per[0].fixed, ==, (600LL << 20) + (440LL << 20));
  g_assert_cmpfloat(per[0].reserve, ==, 0.15);
}

/* Bytes of the buffers of `program` whose names end in `suffix`. */
static int64_t
buffers_named(const StProgram *p, const char *suffix)
{
  int64_t bytes = 0;
  for (guint b = 0; b < p->buffers->len; b++) {
    const StBuffer *buf = &g_array_index(p->buffers, StBuffer, b);
    if (g_str_has_suffix(buf->name, suffix))
      bytes += buf->bytes;
  }
  return bytes;
}

static StSchedule *
build_with(const char *strategy, const StModel *m, const StCluster *c, const char *const *set)
{
  StOptions o;
  st_options_init(&o);
  g_autoptr(GError) error = NULL;
  for (int i = 0; set[i] != NULL; i += 2)
    g_assert_true(st_options_set(&o, set[i], set[i + 1], &error));
  StSchedule *s = st_test_build(strategy, m, c, &o);
  st_options_clear(&o);
  return s;
}

static void
test_fsdp_fp32_shards(void)
{
  /* FSDP keeps a rank's shard of the parameters as the fp32 master and
   * casts to bf16 as it gathers (torch.distributed.fsdp.MixedPrecision):
   * 4 + 8 bytes of shard and Adam states per parameter, where DeepSpeed's
   * ZeRO-3 keeps a bf16 shard and 12 bytes of fp32 master and states. */
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  const char *f[] = {"zero-stage", "3", "precision", "mixed", "framework", "fsdp", NULL};
  const char *d[] = {"zero-stage", "3", "precision", "mixed", "framework", "deepspeed", NULL};
  g_autoptr(StSchedule) fsdp = build_with("zero", m, c, f);
  g_autoptr(StSchedule) ds = build_with("zero", m, c, d);
  const StProgram *pf = st_schedule_program_of(fsdp, 0), *pd = st_schedule_program_of(ds, 0);
  int64_t shard = buffers_named(pd, "params shard") / 2;
  g_assert_cmpint(buffers_named(pf, "params shard"), ==, 4 * shard);
  g_assert_cmpint(buffers_named(pf, "optimizer states shard"), ==, 8 * shard);
  g_assert_cmpint(buffers_named(pd, "optimizer states shard"), ==, 12 * shard);
}

static void
test_automodel_bf16_states(void)
{
  /* NeMo Automodel builds the model in bf16 (from_config's torch_dtype
   * "auto") and its recipes step it with torch.optim.Adam, whose m and v
   * take the parameters' dtype: 2 bytes of shard and 4 of states per
   * parameter, a third of FSDP's fp32 master (4 + 8), and the optimizer's
   * traffic with them (docs/guides/mixed-precision-training.mdx). */
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  const char *a[] = {"zero-stage", "3", "precision", "mixed", "framework", "automodel", NULL};
  const char *f[] = {"zero-stage", "3", "precision", "mixed", "framework", "fsdp", NULL};
  g_autoptr(StSchedule) am = build_with("zero", m, c, a);
  g_autoptr(StSchedule) fs = build_with("zero", m, c, f);
  const StProgram *pa = st_schedule_program_of(am, 0), *pf = st_schedule_program_of(fs, 0);
  int64_t shard = buffers_named(pf, "params shard") / 4;
  g_assert_cmpint(buffers_named(pa, "params shard"), ==, 2 * shard);
  g_assert_cmpint(buffers_named(pa, "optimizer states shard"), ==, 4 * shard);
  g_assert_cmpint(buffers_named(pa, "grads shard"), ==, 2 * shard);
  g_assert_cmpint(buffers_named(pf, "grads shard"), ==, 4 * shard);
  StOptions o;
  st_options_init(&o);
  g_autoptr(GError) error = NULL;
  g_assert_true(st_options_set(&o, "precision", "mixed", &error));
  g_assert_true(st_options_set(&o, "framework", "automodel", &error));
  StStateBytes bf16, fp32;
  st_state_bytes(&o, &bf16);
  g_assert_true(st_options_set(&o, "framework", "fsdp", &error));
  st_state_bytes(&o, &fp32);
  st_options_clear(&o);
  /* Both reduce in fp32; FSDP2 casts the reduced shard back to the
   * parameters' dtype, bf16 under Automodel, fp32 under FSDP's master. */
  g_assert_cmpint(bf16.grad, ==, 4);
  g_assert_cmpint(bf16.shard_grad, ==, 2);
  g_assert_cmpint(fp32.shard_grad, ==, 4);
  /* Adam: the weight, m and v read and written, the gradient shard read;
   * the master's step writes the 16-bit weight besides. FSDP clips (3
   * reads and writes of the fp32 gradient), Automodel's benchmark recipe
   * does not. */
  g_assert_cmpint(bf16.optim_traffic, ==, 6 * 2 + 2);
  g_assert_cmpint(fp32.optim_traffic, ==, 6 * 4 + 4 + 2 + 3 * 4);
}

static void
test_loss_in_place(void)
{
  /* llm-foundry's fused cross-entropy (flash-attn's xentropy) keeps one
   * fp32 log-sum-exp per token and writes the gradient over the logits; an
   * unfused loss keeps fp32 probabilities, 4 bytes per logit. GPT-2 over
   * 8 x 1024 tokens: 8 x 1024 x 4 bytes against 8 x 1024 x 50257 x 4. */
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 1);
  const char *fsdp[] = {"micro-batch", "8", "precision", "mixed", "framework", "fsdp",
                        "zero-stage", "3", NULL};
  const char *torch[] = {"micro-batch", "8", "precision", "mixed", "framework", "torchtitan",
                         "zero-stage", "3", NULL};
  g_autoptr(StSchedule) a = build_with("zero", m, c, fsdp);
  g_autoptr(StSchedule) b = build_with("zero", m, c, torch);
  g_assert_cmpint(buffers_named(st_schedule_program_of(a, 0), "kept loss m0"), ==, 8 * 1024 * 4);
  g_assert_cmpint(buffers_named(st_schedule_program_of(b, 0), "kept loss m0"), ==,
                  8LL * 1024 * 50257 * 4);
}

static void
test_moe_dispatch(void)
{
  /* A framework's token dispatcher permutes each expert's rows once per
   * layer; stagger's executor chains its experts and copies the token
   * stream through each, which the bound (ideal) counts. Qwen3-30B-A3B's
   * expert at 16 samples: the megatron pass is shorter by about the
   * stream's two copies at HBM speed. */
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  g_autoptr(StModel) m = st_test_model("tests/data/validation/qwen3-30b-a3b.json");
  int x = layer_named(m, "layers.0.expert.0");
  double chained = pass_ns(c, m, x, ST_PASS_FWD, 16, framework("ideal"));
  StFramework ideal_dispatch = *framework("ideal");
  ideal_dispatch.fused |= ST_FUSE_DISPATCH;
  double dispatched = pass_ns(c, m, x, ST_PASS_FWD, 16, &ideal_dispatch);
  double stream = 16.0 * 4096 * (2 * 2048 + 128) * 2 * 2; /* bytes, on and back */
  double hbm = c->gpu.memory_bandwidth * c->gpu.perf->memory_fraction.value;
  g_test_message("expert forward: %.0f us chained, %.0f us dispatched", chained / US,
                 dispatched / US);
  g_assert_cmpfloat(dispatched, <, chained);
  g_assert_cmpfloat(fabs((chained - dispatched) - stream / hbm * 1e9), <,
                    0.25 * stream / hbm * 1e9);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/fidelity/comm-takes-sms", test_comm_takes_sms);
  g_test_add_func("/fidelity/attention/triton", test_triton_attention);
  g_test_add_func("/fidelity/kernels/eager-rmsnorm", test_eager_rmsnorm);
  g_test_add_func("/fidelity/megatron/tp-comm-overlap", test_tp_comm_overlap);
  g_test_add_func("/fidelity/megatron/overlap-param-gather", test_overlap_param_gather);
  g_test_add_func("/fidelity/memory/runtime", test_runtime_memory);
  g_test_add_func("/fidelity/memory/fsdp-fp32-shards", test_fsdp_fp32_shards);
  g_test_add_func("/fidelity/memory/automodel-bf16-states", test_automodel_bf16_states);
  g_test_add_func("/fidelity/memory/loss-in-place", test_loss_in_place);
  g_test_add_func("/fidelity/moe/dispatch", test_moe_dispatch);
  return g_test_run();
}
