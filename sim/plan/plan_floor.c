/* plan_floor.c: the device figure a built configuration's memory bound
 * means (issue 22). The cap applies to the figure nvidia-smi shows
 * (output/runtime_memory.h): a device's tensors, the library workspaces in
 * the allocator and its reserve, the CUDA context and NCCL's buffers for
 * each communicator its ranks join across GPUs. Once built, the schedule
 * says which communicators those are, so the bound of its tensors
 * (st_plan_bound) is held against the cap with the least runtime memory of
 * any device that runs a rank: every figure grows with the tensors and
 * with that memory (st_runtime_memory_figures), so it is at most the
 * simulated peak's. */
#include "plan/plan_private.h"

#include "base/units.h"
#include "output/runtime_memory.h"

gboolean
st_plan_bound_device(const StPlan *plan, StPlanPoint *pt, const StSchedule *s)
{
  g_autofree StRuntimeMemory *rt = g_new(StRuntimeMemory, MAX(s->n_devices, 1));
  st_runtime_memory(s, rt);
  g_autofree gboolean *used = g_new0(gboolean, MAX(s->n_devices, 1));
  for (int r = 0; r < s->n_ranks; r++)
    used[s->ranks[r].device] = TRUE;
  StRuntimeMemory least = {0};
  gboolean any = FALSE;
  for (int d = 0; d < s->n_devices; d++) {
    if (!used[d])
      continue;
    if (!any) {
      least = rt[d];
    } else {
      least.workspace = MIN(least.workspace, rt[d].workspace);
      least.fixed = MIN(least.fixed, rt[d].fixed);
      least.reserve = MIN(least.reserve, rt[d].reserve);
      least.capacity = MIN(least.capacity, rt[d].capacity);
    }
    any = TRUE;
  }
  int64_t figure[ST_MEMKIND_N];
  st_runtime_memory_figures(&least, pt->bound.peak_bytes, figure);
  pt->bound.device_bytes = any ? figure[ST_MEMKIND_DEVICE] : pt->bound.peak_bytes;
  if (plan->spec->prune == ST_PLAN_PRUNE_OFF || pt->bound.device_bytes <= plan->mem_cap)
    return FALSE;
  g_autofree char *need = st_format_bytes(pt->bound.device_bytes);
  g_autofree char *cap = st_format_bytes(plan->mem_cap);
  st_plan_point_refuse(pt, ST_PLAN_OOM,
             "needs at least %s on one GPU (its model states and the buffers it surely "
             "holds at once, with the framework's CUDA context, workspace, NCCL buffers "
             "and allocator's reserve), over the cap of %s (not simulated)",
             need, cap);
  return TRUE;
}
