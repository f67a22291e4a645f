/* plan_before.c: what the planner knows of a configuration before building
 * it, besides the work bound: its strategy's estimate (StStrategy.estimate:
 * refusals, a memory bound, megatron's stage chain) and its closed form
 * (plan_closed.c), and the reason a point pruned on them says. */
#include "plan/plan_private.h"

#include <string.h>

#include "base/units.h"
#include "cost/framework.h"
#include "output/runtime_memory.h"
#include "output/steady.h"

/* The closed form, on the options as st_strategy_build resolves them: the
 * framework named first (its bucket size and overlap, which resolving
 * reads), then zero's default stage. */
static void
closed(StPlanPoint *pt, const StStrategy *strategy, const StModel *model,
       const StCluster *cluster, const StProfile *profile, const StOptions *raw,
       StPlanClosedCache *cache)
{
  StOptions o;
  st_options_copy(&o, raw);
  st_strategy_name_framework(strategy, &o);
  if (strcmp(strategy->name, "zero") == 0 && o.zero_stage == 0)
    o.zero_stage = 1;
  StStrategyInput in = {model, cluster, profile, &o};
  if (st_strategy_resolve(strategy, &o, cluster, NULL)) {
    int64_t cycle = st_plan_closed_cycle(strategy, &in, cache);
    pt->closed_ns = cycle > 0 ? st_steady_step_bound(cycle) : 0;
  }
  st_options_clear(&o);
}

/* The device figure the cap applies to is at least a rank's tensors, its
 * workspace, its context and NCCL's buffers for each communicator it
 * surely joins across GPUs (StEstimate.comms), with the allocator's reserve
 * on top as far as the GPU has room for it (output/runtime_memory.c): the
 * figure of the estimate's tensors, which grows with each of them. */
static void
device_floor(StPlanPoint *pt, const StFramework *fw, const StCluster *cluster)
{
  pt->runtime_bytes = 0;
  pt->device_floor = pt->estimate.peak_bytes;
  if (fw == NULL)
    return;
  const StFrameworkRuntime *f = fw->runtime;
  StRuntimeMemory rt = {
    .workspace = f->workspace_bytes,
    .reserve = f->allocator_reserve,
    .fixed = f->context_bytes + f->nccl_bytes_per_comm * pt->estimate.comms,
    .capacity = cluster->gpu.memory_bytes,
  };
  pt->runtime_bytes = rt.workspace + rt.fixed;
  int64_t figure[ST_MEMKIND_N];
  st_runtime_memory_figures(&rt, pt->estimate.peak_bytes, figure);
  pt->device_floor = figure[ST_MEMKIND_DEVICE];
}

/* What refuses a configuration before the search (StEstimate.early_bytes):
 * that part of its tensors with the CUDA context and workspace. */
static int64_t
early_bytes(const StPlanPoint *pt, const StFramework *fw)
{
  int64_t early = pt->estimate.early_bytes > 0 ? pt->estimate.early_bytes
                                               : pt->estimate.peak_bytes;
  return early + (fw != NULL ? fw->runtime->context_bytes + fw->runtime->workspace_bytes : 0);
}

void
st_plan_estimate(const StPlan *plan, const StProfile *profile, StPlanPoint *pt,
                 const StStrategy *strategy, const StCluster *cluster, const StOptions *raw,
                 const StOptions *resolved, gboolean timed, StPlanClosedCache *cache)
{
  if (strategy->estimate == NULL && !st_plan_closed_known(strategy))
    return;
  g_autoptr(GError) error = NULL;
  /* At another --seq-len, the model st_strategy_build would derive (a
   * model that refuses it is refused when built). */
  const StModel *model = plan->model;
  g_autoptr(StModel) at_len = NULL;
  if (resolved->seq_len > 0 && resolved->seq_len != model->input.dims[0]) {
    StShape input = {.n_dims = 1, .dims = {resolved->seq_len}};
    if (!st_model_is_token(model) ||
        (at_len = st_model_derive_as(model, &input, 1, FALSE, NULL)) == NULL)
      return;
    model = at_len;
  }
  /* Under the framework the build will name. */
  StOptions named;
  st_options_copy(&named, resolved);
  st_strategy_name_framework(strategy, &named);
  StStrategyInput in = {model, cluster, profile, &named};
  pt->estimate = (StEstimate){.groups_across_nodes = plan->spec->tp_across_nodes};
  gboolean ok = strategy->estimate == NULL || strategy->estimate(&in, &pt->estimate, &error);
  const StFramework *fw = st_framework_find(named.framework);
  device_floor(pt, fw, cluster);
  st_options_clear(&named);
  if (ok && timed)
    closed(pt, strategy, model, cluster, profile, raw, cache);
  if (!ok) {
    st_plan_point_refuse(pt, ST_PLAN_INFEASIBLE, "%s: %s", strategy->name, error->message);
    return;
  }
  pt->estimated = TRUE;
  if (timed && pt->estimate.step_ns > 0)
    pt->before_ns = MAX(pt->before_ns, st_steady_step_bound(pt->estimate.step_ns));
  pt->before_ns = MAX(pt->before_ns, pt->closed_ns);
  if (plan->spec->prune != ST_PLAN_PRUNE_OFF && pt->estimate.peak_bytes > 0 &&
      pt->device_floor > plan->mem_cap) {
    if (pt->estimate.refuse_in_turn || early_bytes(pt, fw) <= plan->mem_cap)
      pt->over_in_turn = TRUE;
    else
      st_plan_refuse_over_cap(plan, pt, strategy);
  }
}

void
st_plan_refuse_over_cap(const StPlan *plan, StPlanPoint *pt, const StStrategy *strategy)
{
  g_autofree char *need = st_format_bytes(pt->device_floor);
  g_autofree char *cap = st_format_bytes(plan->mem_cap);
  st_plan_point_refuse(pt, ST_PLAN_OOM,
             "needs at least %s on one GPU (%s's closed form of its model states and what "
             "its pipeline surely holds at once, with the framework's CUDA context, "
             "workspace, NCCL buffers of the communicators it surely joins and allocator's "
             "reserve), over the cap of %s (not built)",
             need, strategy->name, cap);
}

void
st_plan_prune_unbuilt(const StPlan *plan, StPlanPoint *pt, double bound, int who, double best)
{
  (void)plan;
  g_clear_pointer(&pt->reason, g_free);
  pt->status = ST_PLAN_PRUNED;
  pt->unbuilt = TRUE;
  pt->unbuilt_who = who;
  pt->unbuilt_bound = bound;
  pt->unbuilt_best = best;
}

void
st_plan_unbuilt_reason(const StPlan *plan, const StPlanPoint *pt, char *buf, gsize size)
{
  double bound = pt->unbuilt_bound, best = pt->unbuilt_best;
  int who = pt->unbuilt_who;
  const char *objective = st_plan_objective_name(plan->spec->objective);
  const char *why =
    pt->closed_ns > 0 && pt->closed_ns >= pt->before_ns
      ? "its strategy's closed form, the chain of its compute and its gradients' collectives "
        "over every rank at their alone times"
    : pt->before_ns > pt->work_ns
      ? "its busiest stage's chain of compute at the GPUs' peak and tensor-parallel "
        "collectives at link speed, in closed form"
      : "its global batch's compute alone, at the GPUs' peak";
  int n = g_snprintf(buf, size,
                     "its %s cannot be better than %.6g (%s, takes %.6g s per step); "
                     "configuration %d reaches %.6g on %d GPUs (not built)",
                     objective, bound, why, (double)pt->before_ns * 1e-9, who, best,
                     plan->points[who].gpus_used);
  g_assert(n >= 0 && (gsize)n < size);
}
