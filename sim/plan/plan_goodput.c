/* plan_goodput.c: the objectives that rank whole training runs (plan.h):
 * time-to-train, cost and energy of spec->run (run/run.h) on each simulated
 * point's step, so that a layout slower per step but losing less to
 * failures and checkpoints can win. The checkpoint interval and the spare
 * nodes are knobs of the run, not of the step: each point's run is tried at
 * every value given (run_intervals x run_spares) and keeps the best, which
 * costs no simulation. Deterministic: every run's Monte Carlo starts from
 * the spec's seed. */
#include "plan/plan.h"

gboolean
st_plan_objective_is_run(StPlanObjective o)
{
  return o == ST_PLAN_OBJ_TIME_TO_TRAIN || o == ST_PLAN_OBJ_COST || o == ST_PLAN_OBJ_ENERGY;
}

/* One run of `spec` on `step`: the objective's value, or -1 when refused. */
static double
one_run(StPlanObjective o, const StRunStep *step, const StRunSpec *spec, StPlanRunChoice *c)
{
  StRunResult r = {0};
  double v = -1;
  if (st_run_estimate(step, spec, &r, NULL)) {
    v = o == ST_PLAN_OBJ_TIME_TO_TRAIN ? r.wall_s : o == ST_PLAN_OBJ_COST ? r.cost : r.energy_kwh;
    *c = (StPlanRunChoice){r.wall_s, r.goodput, r.interval_s, spec->spare_nodes};
  }
  st_run_result_clear(&r);
  return v;
}

double
st_plan_run_objective(StPlanObjective o, const StPlanSpec *spec, const StPlanPoint *pt,
                      double step_ns, StPlanRunChoice *choice)
{
  StPlanRunChoice best = {0}, c;
  if (choice != NULL)
    *choice = best;
  g_return_val_if_fail(spec->run != NULL, 0);
  if (pt->sim == NULL || !pt->sim->has_run_step || step_ns <= 0)
    return 0;
  StRunStep step = pt->sim->run_step; /* its power's source is not kept */
  step.step_s = step_ns * 1e-9;
  StRunSpec knobbed = *spec->run; /* shallow: only numbers change */
  guint ni = spec->run_intervals != NULL ? spec->run_intervals->len : 0;
  guint ns = spec->run_spares != NULL ? spec->run_spares->len : 0;
  double value = 0;
  gboolean have = FALSE;
  for (guint i = 0; i < MAX(ni, 1); i++) {
    for (guint k = 0; k < MAX(ns, 1); k++) {
      if (ni > 0)
        knobbed.ckpt_interval_s = g_array_index(spec->run_intervals, double, i);
      if (ns > 0)
        knobbed.spare_nodes = g_array_index(spec->run_spares, int, k);
      double v = one_run(o, &step, &knobbed, &c);
      /* Ties keep the first (the order given). */
      if (v >= 0 && (!have || v < value)) {
        value = v;
        best = c;
        have = TRUE;
      }
    }
  }
  if (choice != NULL)
    *choice = best;
  return value;
}
