/* compute_profile.c: the "profile" compute model. Asks the profile for the
 * device named by the cluster's GPU (see profile.h for the lookup and its
 * interpolation); passes when the profile has nothing for this work, so the
 * roofline answers instead.
 *
 * Layer passes look up the layer's name, then its signature, at x = batch.
 * A recompute is the same kernels as the forward, so without its own entry
 * it takes the forward's. Optimizer / compress / expand steps look up
 * work->kernel ("adam", "compress") at x = elements. Layer passes also get
 * the fill the profile measured for them (profile_fill), which the engine
 * gives the share model, and the priority leak their sharing
 * measurements show (profile_leak).
 *
 * Half a backward (B or W of a zero-bubble pipeline) takes its own entry
 * ("bwd_input", "bwd_weight") when the profile has one, else the measured
 * backward cut as the estimate cuts it: W its estimated share of B + W's
 * time (without a GPU performance file, st_estimate_weight_share).
 */
#include "cost/cost_impl.h"

#include "cost/estimate.h"

/* fwd FLOPs / (fwd + bwd) FLOPs, which splits a fwd+bwd measurement. A
 * layer without FLOPs gets the usual 1:2 ratio of forward to backward. */
static double
fwd_fraction(const StLayer *layer)
{
  double total = layer->fwd_flops + layer->bwd_flops;
  return total > 0 ? layer->fwd_flops / total : 1.0 / 3.0;
}

/* W's share of a backward's time, as the estimate sees it. */
static double
weight_time_share(const StComputeCtx *ctx, const StWork *work)
{
  StWork b = *work, w = *work;
  b.pass = ST_PASS_BWD_INPUT;
  w.pass = ST_PASS_BWD_WEIGHT;
  double tb = 0, tw = 0;
  StCostSource src;
  if (st_compute_estimate.cost(ctx, &b, &tb, &src) && st_compute_estimate.cost(ctx, &w, &tw, &src) &&
      tb + tw > 0)
    return tw / (tb + tw);
  return st_estimate_weight_share(ctx, work->layer);
}

static gboolean
profile_cost(const StComputeCtx *ctx, const StWork *work, double *time_ns, StCostSource *source)
{
  if (ctx->profile == NULL || ctx->cluster->gpu.name == NULL)
    return FALSE;
  const char *device = ctx->cluster->gpu.name;
  switch (work->pass) {
  case ST_PASS_FWD:
  case ST_PASS_BWD:
  case ST_PASS_FWDBWD:
  case ST_PASS_RECOMPUTE: {
    const StLayer *layer = work->layer;
    /* A selective recompute is part of a forward no profile measures alone:
     * the next model estimates it from its FLOPs. */
    if (layer == NULL || work->batch <= 0 || work->again_ops != 0)
      return FALSE;
    double fraction = fwd_fraction(layer);
    if (st_profile_layer_time(ctx->profile, device, layer->name, layer->signature, work->pass,
                              work->batch, fraction, time_ns, source))
      return TRUE;
    return work->pass == ST_PASS_RECOMPUTE &&
           st_profile_layer_time(ctx->profile, device, layer->name, layer->signature,
                                 ST_PASS_FWD, work->batch, fraction, time_ns, source);
  }
  case ST_PASS_BWD_INPUT:
  case ST_PASS_BWD_WEIGHT: {
    const StLayer *layer = work->layer;
    if (layer == NULL || work->batch <= 0)
      return FALSE;
    double fraction = fwd_fraction(layer);
    if (st_profile_layer_time(ctx->profile, device, layer->name, layer->signature, work->pass,
                              work->batch, fraction, time_ns, source))
      return TRUE;
    if (!st_profile_layer_time(ctx->profile, device, layer->name, layer->signature,
                               ST_PASS_BWD, work->batch, fraction, time_ns, source))
      return FALSE;
    double w = weight_time_share(ctx, work);
    *time_ns *= work->pass == ST_PASS_BWD_WEIGHT ? w : 1.0 - w;
    *source = ST_SRC_INTERPOLATED;
    return TRUE;
  }
  case ST_PASS_OPTIM:
  case ST_PASS_COMPRESS:
  case ST_PASS_EXPAND:
    if (work->kernel == NULL || work->elems <= 0)
      return FALSE;
    return st_profile_layer_time(ctx->profile, device, work->kernel, NULL, work->pass,
                                 work->elems, 0.5, time_ns, source);
  default:
    return FALSE;
  }
}

/* A measured fill (profile.h: "fill" of layer entries, and of the
 * elementwise kernels' entries by name, measured together with --sharing
 * too). A recompute runs the forward's kernels: the forward's fill. */
static gboolean
profile_fill(const StComputeCtx *ctx, const StWork *work, double *fill)
{
  if (ctx->profile == NULL || ctx->cluster->gpu.name == NULL)
    return FALSE;
  const char *device = ctx->cluster->gpu.name;
  const StLayer *layer = work->layer;
  switch (work->pass) {
  case ST_PASS_FWD:
  case ST_PASS_BWD:
    return layer != NULL && work->batch > 0 &&
           st_profile_layer_fill(ctx->profile, device, layer->name, layer->signature,
                                 work->pass, work->batch, fill);
  case ST_PASS_RECOMPUTE:
    return layer != NULL && work->batch > 0 &&
           (st_profile_layer_fill(ctx->profile, device, layer->name, layer->signature,
                                  ST_PASS_RECOMPUTE, work->batch, fill) ||
            st_profile_layer_fill(ctx->profile, device, layer->name, layer->signature,
                                  ST_PASS_FWD, work->batch, fill));
  case ST_PASS_OPTIM:
  case ST_PASS_COMPRESS:
  case ST_PASS_EXPAND:
    return work->kernel != NULL && work->elems > 0 &&
           st_profile_layer_fill(ctx->profile, device, work->kernel, NULL, work->pass,
                                 work->elems, fill);
  default:
    return FALSE;
  }
}

/* The profile's sharing measurement of this pass (profile.h:
 * st_profile_layer_leak): a high-priority copy beside a low-priority one,
 * against two at equal priority. Layer passes only. */
static gboolean
profile_leak(const StComputeCtx *ctx, const StWork *work, double *leak)
{
  if (ctx->profile == NULL || ctx->cluster->gpu.name == NULL || work->layer == NULL ||
      work->batch <= 0)
    return FALSE;
  StPass pass = work->pass == ST_PASS_RECOMPUTE ? ST_PASS_FWD : work->pass;
  if (pass != ST_PASS_FWD && pass != ST_PASS_BWD)
    return FALSE;
  return st_profile_layer_leak(ctx->profile, ctx->cluster->gpu.name, work->layer->name,
                               work->layer->signature, pass, work->batch, leak);
}

const StComputeModel st_compute_profile = {
  .name = "profile",
  .summary = "measured kernel times, interpolated between profiled batch sizes",
  .citation = "per-layer profiling as in DeepPool (Park et al., MLSys 2022) and Daydream "
              "(Zhu et al., USENIX ATC 2020)",
  .cost = profile_cost,
  .fill = profile_fill,
  .leak = profile_leak,
};
