/* plan_goodput.c: the objectives that rank whole training runs (plan.h):
 * time-to-train, cost and energy of spec->run (run/run.h) on each simulated
 * point's step, so that a layout slower per step but losing less to
 * failures and checkpoints can win. Deterministic: every point's Monte
 * Carlo starts from the spec's seed. */
#include "plan/plan.h"

gboolean
st_plan_objective_is_run(StPlanObjective o)
{
  return o == ST_PLAN_OBJ_TIME_TO_TRAIN || o == ST_PLAN_OBJ_COST || o == ST_PLAN_OBJ_ENERGY;
}

double
st_plan_run_objective(StPlanObjective o, const StPlanSpec *spec, const StPlanPoint *pt,
                      double step_ns, double *wall_s, double *goodput)
{
  if (wall_s != NULL)
    *wall_s = 0;
  if (goodput != NULL)
    *goodput = 0;
  g_return_val_if_fail(spec->run != NULL, 0);
  if (!pt->has_run_step || step_ns <= 0)
    return 0;
  StRunStep step = pt->run_step;
  step.step_s = step_ns * 1e-9;
  st_power_default(&step.power, NULL);
  /* The point's own cluster's power: its GPU, from the point's step. */
  step.power.gpu_busy_w = pt->run_step.power.gpu_busy_w;
  step.power.gpu_comm_w = pt->run_step.power.gpu_comm_w;
  step.power.gpu_idle_w = pt->run_step.power.gpu_idle_w;
  step.power.node_w = pt->run_step.power.node_w;
  step.power.pue = pt->run_step.power.pue;
  StRunResult r = {0};
  double v = 0;
  if (st_run_estimate(&step, spec->run, &r, NULL)) {
    v = o == ST_PLAN_OBJ_TIME_TO_TRAIN ? r.wall_s : o == ST_PLAN_OBJ_COST ? r.cost : r.energy_kwh;
    if (wall_s != NULL)
      *wall_s = r.wall_s;
    if (goodput != NULL)
      *goodput = r.goodput;
  }
  st_run_result_clear(&r);
  st_run_step_clear(&step);
  return v;
}
