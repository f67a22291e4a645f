/* compute_estimate.c: the "estimate" compute model, what work takes on a GPU
 * that runs it as well as published measurements say GPUs do, rather than
 * at peak. It answers for every layer pass and element-wise step no profile
 * entry covers (source "estimate"); `--compute-model roofline` skips it.
 *
 * A pass is its kernels (estimate.h, estimate_kernels.c); each kernel costs,
 * with the GPU performance file's curves (cluster/gpu_perf.h, models/gpus/):
 *
 * - GEMM / convolution, count x (m x n) outputs reducing k: tiles of
 *   tile_m x tile_n or a half of either (the fastest, as a library picks
 *   its kernel), one per SM at a time. T = ceil(m/tile_m)
 *   ceil(n/tile_n) count tiles; when they leave SMs idle and k is long, k is
 *   split over p = min(floor(sms / T), floor(k / 256)) (split-K, as cuBLAS
 *   does); the tiles then run in W = ceil(T p / sms) waves, each tile taking
 *   2 tile_m tile_n (k/p + k_half) / (peak / sms x efficiency): k_half is
 *   the prologue and epilogue's share of a tile's work, so short reductions
 *   run below the large-size efficiency, partial tiles and partial waves
 *   cost whole ones. A split adds a pass over its fp32 partial sums. A
 *   group of a grouped GEMM (a rank's MoE experts as one kernel, as
 *   grouped_gemm and TE's GroupedLinear run them) takes W = T / sms, its
 *   share of the kernel's waves, with no split.
 *   t = max(W x tile time, bytes / achievable bandwidth).
 * - a matrix multiply without a shape (a custom layer, a type with no list
 *   of its own): its FLOPs at the curve's large-size efficiency.
 * - fused attention: FLOPs / (16-bit peak x the curve's efficiency at the
 *   sequence length), or its bytes at the bandwidth if slower.
 * - memory kernels: bytes / (bandwidth x the memory fraction); pooling at
 *   its own fraction.
 * - every kernel takes at least the launch time, `launch.us`.
 * Optimizer, compress and expand steps are one memory kernel of their bytes,
 * except an optimizer the framework does not fuse (no ST_FUSE_OPTIMIZER):
 * torch.optim before PyTorch 2.0 loops over the parameter tensors
 * (`foreach` defaulted to False: torch/optim/sgd.py and adamw.py of 1.12 and
 * 1.13, _single_tensor_sgd / _single_tensor_adamw), launching for each
 * tensor 3 kernels under momentum SGD (buf.mul_, .add_, param.add_) and 9
 * under AdamW (param.mul_ for the decay, exp_avg.mul_/add_,
 * exp_avg_sq.mul_/addcmul_, sqrt, the division, add_(eps), param.addcdiv_),
 * and one more where the framework zeroes the gradients each step
 * (StFramework.zero_grads): Optimizer.zero_grad of 1.x calls p.grad.zero_()
 * tensor by tensor unless `foreach` was asked for (torch/optim/optimizer.py).
 * Such a step over T tensors takes max(bytes / bandwidth, T x k x floor),
 * floor = the larger of the launch time and the host's time to issue a
 * kernel: a lower bound of the per-kernel sum, whose tensors' sizes the
 * step does not carry (StWork.tensors). SAMO's compression and expansion
 * (--sparsity) go tensor by tensor too, whatever the framework: the
 * paper compresses each layer's gradient as backward makes it, through that
 * layer's own index list, and expands each layer's non-zeros after the
 * step; k = 2 to compress a tensor (gather, then add into the compressed
 * gradient), 1 to expand it (scatter).
 *
 * The framework (cost/framework.h) decides which kernels a pass launches
 * (estimate_kernels.c) and what it costs the CPU to issue each: a pass
 * takes at least its kernels times the runtime's host_us_per_kernel,
 * the GPU waiting on the CPU where kernels are shorter than their issue
 * (eager PyTorch on small tensors).
 *
 * Under a power cap (the cluster's gpu.power_limit_w) the math of GEMMs,
 * convolutions and attention runs at the share of its speed the GPU file's
 * power curve keeps (its clocks drop); memory-bound kernels do not slow
 * (the memory clock is not capped).
 *
 * Which peak: 16-bit work at the 16-bit peak; fp32 GEMMs and convolutions at
 * the TF32 peak when the curve says the framework uses it there
 * (`fp32_math: tf32`, PyTorch's default for convolutions) and the cluster
 * gives one, else the fp32 peak; FP8 GEMMs (--precision fp8: the
 * transformer layers' linears, estimate_kernels.c) at the FP8 peak
 * (StGpuSpec.fp8_flops) on the GPU file's gemm_fp8 curve, its own
 * efficiency and k_half (without one, the gemm curve's 16-bit efficiency).
 *
 * Never faster than the roofline (compute_roofline.c): every kernel runs at
 * most at its peak and its bytes at most at the bandwidth, and the kernels
 * carry the layer's FLOPs (tests/test_estimate.c checks both over every
 * shipped model). The fill of a pass (what the share model reads) is the
 * time-weighted share of SMs its kernels' tiles occupy.
 */
#include "cost/cost_impl.h"

#include <math.h>
#include <string.h>

#include "cost/estimate.h"
#include "cost/framework.h"

typedef struct {
  double peak;  /* FLOP/s */
  double eff;   /* at large sizes */
} Math;

/* What the GPU keeps of its math throughput under the cluster's power cap. */
static double
power_factor(const StComputeCtx *ctx)
{
  const StGpuPerf *p = ctx->cluster->gpu.perf;
  return st_gpu_perf_power_factor(p, ctx->cluster->gpu.power_limit_w);
}

/* The share of the published GEMM and convolution efficiencies reached
 * here: the power cap's, times what a calibration found the framework's
 * software reaches with the shapes it hands cuBLAS and cuDNN
 * (cost/calibration.h; 1 without one). The attention curves take the power
 * cap's alone: they are the fused kernels' own end-to-end measurements, the
 * kernels the frameworks call as they are (the A100's long-sequence
 * llm-foundry runs, attention-bound, are within 5 % uncalibrated where its
 * short-sequence ones, GEMM-bound, are 4-17 % fast: docs/VALIDATION.md). */
static double
math_factor(const StComputeCtx *ctx)
{
  const StGpuPerf *p = ctx->cluster->gpu.perf;
  return power_factor(ctx) *
         st_gpu_perf_framework_factor(p, ctx->framework != NULL ? ctx->framework->name : NULL);
}

static Math
math_of(const StComputeCtx *ctx, const StGemmCurve *c, gboolean fp8)
{
  const StCluster *cl = ctx->cluster;
  double pw = math_factor(ctx);
  if (fp8)
    return (Math){cl->gpu.fp8_flops, MIN(1.0, (c->eff_fp8 > 0 ? c->eff_fp8 : c->eff_16bit) * pw)};
  if (ctx->dtype != ST_DTYPE_FP32)
    return (Math){st_cluster_peak_flops(cl, ctx->dtype), MIN(1.0, c->eff_16bit * pw)};
  if (c->fp32_as_tf32 && cl->gpu.tf32_flops > 0)
    return (Math){cl->gpu.tf32_flops, MIN(1.0, c->eff_tf32 * pw)};
  return (Math){st_cluster_peak_flops(cl, ST_DTYPE_FP32), MIN(1.0, c->eff_fp32 * pw)};
}

static double
memory_s(const StComputeCtx *ctx, double bytes, double fraction)
{
  return bytes / (ctx->cluster->gpu.memory_bandwidth * fraction);
}

/* Seconds of a GEMM-class kernel with tiles of tm x tn, and the SM share
 * it fills. */
static double
tiled_s(const StComputeCtx *ctx, const StGpuPerf *p, const StKernel *k, const StGemmCurve *c,
        double tm, double tn, double *fill)
{
  Math m = math_of(ctx, c, k->fp8);
  double sms = p->sms.value;
  double tiles = ceil(k->m / tm) * ceil(k->n / tn) * k->count;
  double split = 1;
  if (tiles < sms && !k->grouped)
    split = MAX(1.0, MIN(floor(sms / tiles), floor(k->k / 256.0)));
  /* a group of a grouped GEMM fills the waves its neighbours leave */
  double waves = k->grouped ? tiles / sms : ceil(tiles * split / sms);
  double tile_s = 2.0 * tm * tn * (k->k / split + c->k_half) / (m.peak / sms * m.eff);
  double partials = split > 1 ? k->m * k->n * k->count * split * 4.0 * 2.0 : 0.0;
  *fill = MIN(1.0, tiles * split / sms);
  return MAX(waves * tile_s, memory_s(ctx, k->bytes, p->memory_fraction.value)) +
         memory_s(ctx, partials, p->memory_fraction.value);
}

/* The library picks the fastest of the curve's tile and its halves (as
 * cuBLAS's heuristics choose among kernels): small outputs waste less. */
static double
gemm_s(const StComputeCtx *ctx, const StGpuPerf *p, const StKernel *k, double *fill)
{
  const StGemmCurve *c = k->cls == ST_KERNEL_CONV ? &p->conv : &p->gemm;
  if (k->fp8 && p->gemm_fp8.tile_m > 0)
    c = &p->gemm_fp8;
  if (k->k <= 0) { /* no shape known: the curve's large-size efficiency */
    Math m = math_of(ctx, c, k->fp8);
    *fill = 1.0;
    return MAX(k->flops / (m.peak * m.eff), memory_s(ctx, k->bytes, p->memory_fraction.value));
  }
  double best = INFINITY;
  for (int i = 0; i < 4; i++) {
    double f, s = tiled_s(ctx, p, k, c, c->tile_m / (i & 1 ? 2.0 : 1.0),
                          c->tile_n / (i & 2 ? 2.0 : 1.0), &f);
    if (s < best) {
      best = s;
      *fill = f;
    }
  }
  return best;
}

/* The attention curve at sequence length s, forward or backward:
 * log-linear between points. */
static double
attention_eff(const StAttnCurve *a, double s, gboolean backward)
{
  const double *e = backward && a->backward != NULL ? a->backward : a->efficiency;
  if (s <= a->seq[0])
    return e[0];
  for (int i = 1; i < a->n; i++)
    if (s <= a->seq[i]) {
      double x = (log(s) - log(a->seq[i - 1])) / (log(a->seq[i]) - log(a->seq[i - 1]));
      return e[i - 1] + x * (e[i] - e[i - 1]);
    }
  return e[a->n - 1];
}

/* The curve of the kernel the framework calls (without one, cuDNN's),
 * FlashAttention-2's where the GPU file did not measure it. */
static const StAttnCurve *
attention_curve(const StComputeCtx *ctx, const StGpuPerf *p)
{
  const StAttnCurve *a = &p->attention[ctx->framework ? ctx->framework->attention : ST_ATTN_CUDNN];
  return a->n > 0 ? a : &p->attention[ST_ATTN_FLASH2];
}

static double
kernel_s(const StComputeCtx *ctx, const StGpuPerf *p, const StKernel *k, double *fill)
{
  double s;
  *fill = 1.0;
  switch (k->cls) {
  case ST_KERNEL_GEMM:
  case ST_KERNEL_CONV:
    s = gemm_s(ctx, p, k, fill);
    break;
  case ST_KERNEL_ATTENTION: {
    StDtype d = ctx->dtype == ST_DTYPE_FP32 ? ST_DTYPE_BF16 : ctx->dtype;
    double peak = st_cluster_peak_flops(ctx->cluster, d);
    double eff = MIN(1.0, power_factor(ctx) *
                            attention_eff(attention_curve(ctx, p), k->m, k->backward));
    s = MAX(k->flops / (peak * eff),
            memory_s(ctx, k->bytes, p->memory_fraction.value));
    break;
  }
  case ST_KERNEL_POOL:
    s = memory_s(ctx, k->bytes, p->pool_fraction.value);
    break;
  case ST_KERNEL_MEMORY:
  default:
    s = memory_s(ctx, k->bytes, p->memory_fraction.value);
    break;
  }
  return MAX(s, p->launch_us.value * 1e-6);
}

double
st_estimate_kernel_s(const StComputeCtx *ctx, const StKernel *kernel)
{
  const StGpuPerf *p = ctx->cluster->gpu.perf;
  double fill;
  return p != NULL ? kernel_s(ctx, p, kernel, &fill) : 0.0;
}

/* Kernels per parameter tensor of an unfused torch.optim step (header). */
static int
optimizer_kernels_per_tensor(const StFramework *f, const char *optimizer)
{
  return (optimizer != NULL && strcmp(optimizer, "adam") == 0 ? 9 : 3) + (f->zero_grads ? 1 : 0);
}

/* The shortest a kernel takes one after another: the launch, or the host's
 * time to issue it where the framework's runtime is slower (header). */
static double
kernel_floor_s(const StComputeCtx *ctx, const StGpuPerf *p)
{
  double host = ctx->framework != NULL ? ctx->framework->runtime->host_us_per_kernel : 0;
  return MAX(p->launch_us.value, host) * 1e-6;
}

/* Seconds of an optimizer step the framework does not fuse: one tensor
 * after another, each a few kernels (header); 0 when it is fused. */
static double
unfused_optimizer_s(const StComputeCtx *ctx, const StGpuPerf *p, const StWork *work)
{
  if (ctx->framework == NULL || (ctx->framework->fused & ST_FUSE_OPTIMIZER) != 0 ||
      work->tensors <= 1)
    return 0;
  double kernels =
    (double)work->tensors * optimizer_kernels_per_tensor(ctx->framework, work->kernel);
  return kernels * kernel_floor_s(ctx, p);
}

/* Seconds of SAMO's compression or expansion, tensor by tensor (header):
 * compressing a tensor's gradient gathers its non-zeros through the index
 * list into a buffer and adds them into the compressed gradient, 2 kernels
 * (strategy/sparse.c: st_sparse_emit_compress's "compressed values");
 * expanding scatters the updated non-zeros into the dense weights, 1. SAMO
 * launches them itself, so no framework fuses them. */
static double
sparse_tensors_s(const StComputeCtx *ctx, const StGpuPerf *p, const StWork *work)
{
  if (work->tensors < 1)
    return 0;
  int kernels = work->pass == ST_PASS_COMPRESS ? 2 : 1;
  return (double)work->tensors * kernels * kernel_floor_s(ctx, p);
}

/* Time and fill of `work`, FALSE when the model cannot cost it. */
static gboolean
estimate(const StComputeCtx *ctx, const StWork *work, double *time_ns, double *fill)
{
  const StGpuPerf *p = ctx->cluster->gpu.perf;
  if (p == NULL || (ctx->fallback != NULL && strcmp(ctx->fallback, "estimate") != 0))
    return FALSE;
  if (work->pass == ST_PASS_OPTIM || work->pass == ST_PASS_COMPRESS ||
      work->pass == ST_PASS_EXPAND) {
    StKernel k = {ST_KERNEL_MEMORY, 0, 0, 0, 0, 0, (double)work->bytes, FALSE, FALSE, FALSE};
    double s = kernel_s(ctx, p, &k, fill);
    double loop = work->pass == ST_PASS_OPTIM ? unfused_optimizer_s(ctx, p, work)
                                              : sparse_tensors_s(ctx, p, work);
    if (loop > s) { /* small kernels one after another: the SMs idle between them */
      *fill *= s / loop;
      s = loop;
    }
    *time_ns = s * 1e9;
    return TRUE;
  }
  StKernels ks;
  if (!st_estimate_kernels(ctx, work, &ks))
    return FALSE;
  if (ks.n == 0 && (work->pass == ST_PASS_BWD_INPUT || work->pass == ST_PASS_BWD_WEIGHT)) {
    /* half a backward with no kernel of its own (a norm's scale gradient
     * comes with its input's): nothing to run */
    *time_ns = 0;
    *fill = 1.0;
    return TRUE;
  }
  if (ks.n == 0)
    return FALSE;
  double total = 0, filled = 0;
  for (int i = 0; i < ks.n; i++) {
    double f, s = kernel_s(ctx, p, &ks.k[i], &f);
    total += s;
    filled += s * f;
  }
  double host =
    ctx->framework != NULL ? ks.n * ctx->framework->runtime->host_us_per_kernel * 1e-6 : 0;
  if (host > total) { /* the GPU idles between kernels: the fill drops with it */
    filled *= total / host;
    total = host;
  }
  *time_ns = total * 1e9;
  *fill = total > 0 ? MAX(filled / total, 1e-3) : 1.0;
  return TRUE;
}

static gboolean
estimate_cost(const StComputeCtx *ctx, const StWork *work, double *time_ns, StCostSource *source)
{
  double fill;
  if (!estimate(ctx, work, time_ns, &fill))
    return FALSE;
  *source = ST_SRC_ESTIMATE;
  return TRUE;
}

static gboolean
estimate_fill(const StComputeCtx *ctx, const StWork *work, double *fill)
{
  double time_ns;
  return work->layer != NULL && estimate(ctx, work, &time_ns, fill);
}

const StComputeModel st_compute_estimate = {
  .name = "estimate",
  .summary = "kernels at the efficiency published measurements show, by shape and GPU "
             "(models/gpus/): GEMM and convolution tiles and waves, fused attention, "
             "memory-bound kernels at achievable bandwidth, a launch floor",
  .citation = "NVIDIA, Matrix Multiplication Background User's Guide (tile and wave "
              "quantization); the measurements each models/gpus/*.json file names",
  .cost = estimate_cost,
  .fill = estimate_fill,
};
