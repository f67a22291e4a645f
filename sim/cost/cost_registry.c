/* cost_registry.c: the three tables of cost models, in the order they are
 * tried or listed. Adding a model is one new file and one line here. */
#include "cost/cost_impl.h"

#include <string.h>

G_DEFINE_QUARK(st-cost-error-quark, st_cost_error)

/* Tried in order: measurements before estimates, the bound last. */
static const StComputeModel *const COMPUTE_MODELS[] = {
  &st_compute_profile,
  &st_compute_estimate,
  &st_compute_roofline,
  NULL,
};

gboolean
st_compute_model_known(const char *name)
{
  return name != NULL && (strcmp(name, "estimate") == 0 || strcmp(name, "roofline") == 0);
}

/* "auto" breaks ties between equal times in this order. */
static const StCommAlgo *const COMM_ALGOS[] = {
  &st_comm_ring,
  &st_comm_tree,
  &st_comm_hierarchical,
  NULL,
};

/* The first is the default. */
static const StShareModel *const SHARE_MODELS[] = {
  &st_share_interference,
  &st_share_priority,
  NULL,
};

const StComputeModel *const *
st_compute_models(void)
{
  return COMPUTE_MODELS;
}

const StCommAlgo *const *
st_comm_algos(void)
{
  return COMM_ALGOS;
}

const StCommAlgo *
st_comm_algo_find(const char *name)
{
  for (const StCommAlgo *const *a = COMM_ALGOS; name != NULL && *a != NULL; a++)
    if (strcmp((*a)->name, name) == 0)
      return *a;
  return NULL;
}

const StShareModel *const *
st_share_models(void)
{
  return SHARE_MODELS;
}

const StShareModel *
st_share_model_find(const char *name)
{
  for (const StShareModel *const *m = SHARE_MODELS; name != NULL && *m != NULL; m++)
    if (strcmp((*m)->name, name) == 0)
      return *m;
  return NULL;
}

double
st_compute_time(const StComputeCtx *ctx, const StWork *work, StCostSource *source)
{
  g_return_val_if_fail(ctx != NULL && ctx->cluster != NULL && work != NULL, 0.0);
  for (const StComputeModel *const *m = COMPUTE_MODELS; *m != NULL; m++) {
    double time_ns = 0;
    StCostSource src = ST_SRC_NONE;
    if ((*m)->cost(ctx, work, &time_ns, &src)) {
      if (source != NULL)
        *source = src;
      return work->share > 0 ? time_ns * work->share : time_ns;
    }
  }
  /* Only malformed work (a layer pass without its layer) gets here. */
  g_critical("no compute model could cost a '%s' op", st_pass_name(work->pass));
  if (source != NULL)
    *source = ST_SRC_NONE;
  return 0.0;
}

double
st_compute_fill(const StComputeCtx *ctx, const StWork *work)
{
  g_return_val_if_fail(ctx != NULL && ctx->cluster != NULL && work != NULL, 1.0);
  for (const StComputeModel *const *m = COMPUTE_MODELS; *m != NULL; m++) {
    double fill = 0;
    if ((*m)->fill != NULL && (*m)->fill(ctx, work, &fill) && fill > 0 && fill <= 1)
      return fill;
  }
  return 1.0;
}

StShareTraits
st_compute_share_traits(const StComputeCtx *ctx, const StWork *work, double time_ns)
{
  StShareTraits t = {st_compute_fill(ctx, work), 0.0, 1.0};
  const StGpuPerf *perf = ctx->cluster->gpu.perf;
  double bandwidth = ctx->cluster->gpu.memory_bandwidth * (perf ? perf->memory_fraction.value : 1);
  double flops = 0, bytes = 0;
  if (time_ns > 0 && bandwidth > 0 && (work->layer != NULL || work->pass == ST_PASS_OPTIM ||
                                       work->pass == ST_PASS_COMPRESS ||
                                       work->pass == ST_PASS_EXPAND)) {
    st_compute_work_traffic(ctx, work, &flops, &bytes);
    t.mem = CLAMP(bytes / (time_ns * 1e-9 * bandwidth), 0.0, 1.0);
  }
  /* Without a measurement nor a performance file, priority is taken to
   * protect nothing: the cautious end. */
  if (perf != NULL)
    t.leak = perf->priority_leak.value;
  for (const StComputeModel *const *m = COMPUTE_MODELS; *m != NULL; m++) {
    double leak = 0;
    if ((*m)->leak != NULL && (*m)->leak(ctx, work, &leak) && leak >= 0 && leak <= 1) {
      t.leak = leak;
      break;
    }
  }
  return t;
}
