/* plan_point.c: what a configuration of the search keeps (plan_private.h):
 * the numbers of its simulated run (in its StPlanSim, which only simulated
 * points and their twins have), or the reason it has none. */
#include "plan/plan_private.h"

#include <math.h>
#include <string.h>

#include "base/units.h"
#include "output/output.h"

void
st_plan_point_refuse(StPlanPoint *pt, StPlanStatus status, const char *format, ...)
{
  /* Most reasons fit the stack: one allocation of the right size, where
   * g_strdup_vprintf grows its buffer a few times (a million pruned
   * points' reasons were a sixth of a large search). */
  char buf[512];
  va_list args;
  va_start(args, format);
  int n = g_vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  g_free(pt->reason);
  if (n >= 0 && n < (int)sizeof buf) {
    pt->reason = g_strndup(buf, (gsize)n);
  } else {
    va_start(args, format);
    pt->reason = g_strdup_vprintf(format, args);
    va_end(args);
  }
  pt->status = status;
  pt->unbuilt = FALSE;
}

const char *
st_plan_point_reason(const StPlan *plan, const StPlanPoint *pt, char buf[ST_PLAN_REASON_MAX])
{
  if (!pt->unbuilt)
    return pt->reason;
  st_plan_unbuilt_reason(plan, pt, buf, ST_PLAN_REASON_MAX);
  return buf;
}

void
st_plan_point_clear(StPlanPoint *pt)
{
  g_clear_pointer(&pt->reason, g_free);
  g_clear_pointer(&pt->description, g_free);
  g_clear_pointer(&pt->kept, st_schedule_free);
  g_clear_pointer(&pt->sim, g_free);
}

/* The communicators with exposed time on GPU 0, most first (ties by
 * index), per step. */
static void
exposed_by_group(StPlanSim *pt, const StSummary *sum, int steady)
{
  const StSchedule *s = sum->timeline->schedule;
  int n = (int)s->comms->len, k = 0;
  g_autofree gboolean *taken = g_new0(gboolean, MAX(n, 1));
  memset(pt->exposed_by_group, 0, sizeof pt->exposed_by_group);
  for (; k < ST_PLAN_GROUPS; k++) {
    int best = -1;
    for (int c = 0; c < n; c++)
      if (!taken[c] && sum->comm_exposed_by_comm[c] > 0 &&
          (best < 0 || sum->comm_exposed_by_comm[c] > sum->comm_exposed_by_comm[best]))
        best = c;
    if (best < 0)
      break;
    taken[best] = TRUE;
    g_strlcpy(pt->exposed_by_group[k].name, st_schedule_comm(s, best)->name,
              ST_PLAN_GROUP_NAME);
    pt->exposed_by_group[k].ns = sum->comm_exposed_by_comm[best] / steady;
  }
}

/* The numbers of a simulated run. */
void
st_plan_point_take_summary(StPlanPoint *pt, const StSummary *sum, int64_t cap)
{
  int steady = MAX(1, sum->steady_steps);
  const StDeviceSummary *worst = st_summary_worst_device(sum);
  pt->simulated = TRUE;
  if (pt->sim == NULL)
    pt->sim = g_new0(StPlanSim, 1);
  StPlanSim *sim = pt->sim;
  sim->steps_run = sum->steps;
  /* Fixed steps are steady when the steps after warm-up all were. */
  sim->steady = sum->steady.converged &&
                (sum->steady.auto_steps || sum->steady.first <= sum->warmup_steps);
  sim->unsteady_auto = sum->steady.auto_steps && !sum->steady.converged;
  pt->step_time_ns = sum->step_time_ns;
  pt->samples_per_s = sum->samples_per_s;
  sim->mfu = sum->mfu.mfu;
  pt->gpus_used = sum->gpus_used;
  pt->peak_bytes = worst->peak_bytes;
  pt->device_bytes = st_summary_memory_peak(sum, ST_MEMKIND_DEVICE);
  memcpy(sim->peak_by_category, worst->at_peak_by_category, sizeof sim->peak_by_category);
  sim->busy_ns =
    (int64_t)llround(st_summary_device(sum, 0)->busy_fraction * (double)sum->step_time_ns);
  sim->exposed_ns = sum->comm_exposed_ns / steady;
  exposed_by_group(sim, sum, steady);
  sim->comm_bytes = sum->comm_bytes_total / steady;
  /* What a whole training run needs of the step (plan_goodput.c). */
  sim->has_run_step = st_run_step_from_summary(sum, &sim->run_step, NULL);
  st_power_clear(&sim->run_step.power);
  if (pt->device_bytes > cap) {
    g_autofree char *peak = st_format_bytes(pt->device_bytes);
    g_autofree char *limit = st_format_bytes(cap);
    st_plan_point_refuse(pt, ST_PLAN_OOM, "GPU %d peaks at %s on the device, over the cap of %s",
               worst->device, peak, limit);
  } else {
    pt->status = ST_PLAN_OK;
  }
}
