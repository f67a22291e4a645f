/* compute_roofline.c: the "roofline" compute model, the fallback that always
 * answers. It is a LOWER BOUND, labelled ST_SRC_ROOFLINE in every output:
 * a kernel at peak FLOP/s or at peak memory bandwidth, whichever is slower,
 * with no launch overhead, no tail effects and no cache reuse beyond what the
 * byte counts assume (Williams, Waterman and Patterson, "Roofline", CACM 2009).
 *
 *   t = max(FLOPs / peak_flops(dtype), bytes / memory_bandwidth)   [s]
 *
 * fp32 work takes the faster of the fp32 and TF32 peaks when the cluster
 * gives a TF32 one: frameworks run fp32 convolutions on TF32 tensor cores
 * by default (PyTorch: torch.backends.cudnn.allow_tf32), so a bound at the
 * fp32 peak would not bound them. Under --precision fp8 (StComputeCtx.fp8)
 * a layer's FLOPs take the FP8 peak where the GPU has one: its linears' GEMMs
 * run there, and a bound at the 16-bit peak would not bound them.
 *
 * Layer passes (per op of `batch` samples):
 *   fwd, recompute: FLOPs = batch * fwd_flops,
 *                   bytes = batch * fwd_io_bytes (at the compute dtype)
 *                           + params * dtype bytes (weights read once);
 *   selective recompute: FLOPs = batch * again_flops (the scores again;
 *                           element-wise ops none), bytes = 2 * batch *
 *                           act_again (written, and read back by the
 *                           softmax), each summed over the chosen ops
 *                           (st_layer_again), no weights;
 *   bwd:            FLOPs = batch * bwd_flops,
 *                   bytes = batch * bwd_io_bytes (at the compute dtype)
 *                           + 2 * params * dtype bytes (weights read, weight
 *                             gradients written);
 *   bwd_input, bwd_weight (a split backward's B and W): W the FLOPs of the
 *                   estimate's weight-gradient kernels
 *                   (st_estimate_weight_split), B the rest of the
 *                   backward's; the bytes split by W's share of the
 *                   kernels' bytes: B + W is the backward, and W counts
 *                   only its own work.
 * Elementwise passes (optim, compress, expand) move work->bytes and are
 * bandwidth bound: t = bytes / memory_bandwidth.
 */
#include "cost/cost_impl.h"

#include <math.h>

#include "cost/estimate.h"

/* Activation traffic of `samples` samples, given per sample at the model's
 * dtype, as the compute dtype moves it. */
static double
io_bytes(const StComputeCtx *ctx, double per_sample, int64_t samples)
{
  int64_t at_model_dtype = (int64_t)llround(per_sample * (double)samples);
  if (ctx->model == NULL)
    return (double)at_model_dtype;
  return (double)st_model_bytes_as(ctx->model, at_model_dtype, ctx->dtype);
}

/* FLOPs and bytes of a layer pass, as the header counts them. */
static void
layer_traffic(const StComputeCtx *ctx, const StLayer *layer, StPass pass, int64_t batch,
              unsigned again_ops, double *flops, double *bytes)
{
  double weight_bytes = (double)layer->params * st_dtype_bytes(ctx->dtype);
  if (again_ops != 0) {
    int64_t again;
    double again_flops;
    st_layer_again(layer, again_ops, &again, &again_flops);
    *flops = (double)batch * again_flops;
    *bytes = 2.0 * io_bytes(ctx, (double)again, batch);
  } else if (st_pass_is_backward(pass)) {
    double all = (double)batch * layer->bwd_flops, byte_part = 1.0;
    *flops = all;
    if (pass != ST_PASS_BWD) {
      double wf, wb, w;
      st_estimate_weight_split(ctx, layer, &wf, &wb, &w);
      w = MIN(all, (double)batch * w);
      *flops = pass == ST_PASS_BWD_WEIGHT ? w : all - w;
      byte_part = pass == ST_PASS_BWD_WEIGHT ? wb : 1.0 - wb;
    }
    *bytes = byte_part * (io_bytes(ctx, layer->bwd_io_bytes, batch) + 2 * weight_bytes);
  } else {
    *flops = (double)batch * layer->fwd_flops;
    *bytes = io_bytes(ctx, layer->fwd_io_bytes, batch) + weight_bytes;
  }
}

void
st_compute_work_traffic(const StComputeCtx *ctx, const StWork *work, double *flops,
                        double *bytes)
{
  double f = 0, b = 0;
  switch (work->pass) {
  case ST_PASS_FWD:
  case ST_PASS_BWD:
  case ST_PASS_BWD_INPUT:
  case ST_PASS_BWD_WEIGHT:
  case ST_PASS_RECOMPUTE:
    g_return_if_fail(work->layer != NULL);
    layer_traffic(ctx, work->layer, work->pass, work->batch, work->again_ops, flops, bytes);
    return;
  case ST_PASS_FWDBWD:
    g_return_if_fail(work->layer != NULL);
    layer_traffic(ctx, work->layer, ST_PASS_FWD, work->batch, 0, flops, bytes);
    layer_traffic(ctx, work->layer, ST_PASS_BWD, work->batch, 0, &f, &b);
    *flops += f;
    *bytes += b;
    return;
  default: /* optim, compress, expand: bandwidth bound, FLOPs not counted */
    *flops = 0;
    *bytes = (double)work->bytes;
    return;
  }
}

static double
time_ns(const StComputeCtx *ctx, double flops, double bytes)
{
  double peak = st_cluster_peak_flops(ctx->cluster, ctx->dtype);
  if (ctx->dtype == ST_DTYPE_FP32)
    peak = MAX(peak, ctx->cluster->gpu.tf32_flops);
  if (ctx->fp8)
    peak = MAX(peak, ctx->cluster->gpu.fp8_flops);
  double compute_s = flops / peak;
  double memory_s = bytes / ctx->cluster->gpu.memory_bandwidth;
  return MAX(compute_s, memory_s) * 1e9;
}

static gboolean
roofline_cost(const StComputeCtx *ctx, const StWork *work, double *time_ns_out,
              StCostSource *source)
{
  g_return_val_if_fail(work->pass > ST_PASS_INVALID && work->pass < ST_PASS_N, FALSE);
  double flops = 0, bytes = 0;
  if (work->pass == ST_PASS_FWDBWD) { /* each pass at its own bound */
    StWork pass = *work;
    pass.pass = ST_PASS_FWD;
    st_compute_work_traffic(ctx, &pass, &flops, &bytes);
    double fwd = time_ns(ctx, flops, bytes);
    pass.pass = ST_PASS_BWD;
    st_compute_work_traffic(ctx, &pass, &flops, &bytes);
    *time_ns_out = fwd + time_ns(ctx, flops, bytes);
  } else {
    st_compute_work_traffic(ctx, work, &flops, &bytes);
    *time_ns_out = time_ns(ctx, flops, bytes);
  }
  *source = ST_SRC_ROOFLINE;
  return TRUE;
}

const StComputeModel st_compute_roofline = {
  .name = "roofline",
  .summary = "lower bound from peak FLOP/s and memory bandwidth (no profile entry needed)",
  .citation = "S. Williams, A. Waterman, D. Patterson, Roofline: an insightful visual "
              "performance model for multicore architectures, CACM 52(4), 2009",
  .cost = roofline_cost,
};
