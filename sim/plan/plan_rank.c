/* plan_rank.c: objectives, the ranking and the Pareto fronts (see plan.h).
 *
 * Ranking: the OK points (simulated, fitting the cap) by objective, best
 * first; equal values keep the order of the space (lower index first), so
 * ranks never depend on the order of evaluation.
 *
 * Fronts, over the OK points: a point is on the GPU front when no other
 * point uses no more GPUs with an objective at least as good, one of the
 * two strictly better; the memory front is the same with the peak memory
 * per GPU in place of GPUs. Points with equal coordinates are both on it.
 */
#include "plan/plan.h"

#include <math.h>

static gboolean
lower_is_better(StPlanObjective o)
{
  return o == ST_PLAN_OBJ_TIME || o == ST_PLAN_OBJ_GPU_HOURS || st_plan_objective_is_run(o);
}

gboolean
st_plan_objective_better(StPlanObjective o, double a, double b)
{
  return lower_is_better(o) ? a < b : a > b;
}

/* The objective of a point whose step takes `step_ns`. */
static double
objective_at(StPlanObjective o, const StPlanSpec *spec, const StPlanPoint *pt, double step_ns)
{
  double step_s = step_ns * 1e-9;
  double gpus = MAX(pt->gpus_used, 1);
  switch (o) {
  case ST_PLAN_OBJ_TIME:
    return step_s;
  case ST_PLAN_OBJ_THROUGHPUT:
    return step_s > 0 ? (double)pt->global_batch / step_s : INFINITY;
  case ST_PLAN_OBJ_THROUGHPUT_PER_GPU:
    return step_s > 0 ? (double)pt->global_batch / step_s / gpus : INFINITY;
  case ST_PLAN_OBJ_GPU_HOURS:
    return gpus * step_s * (double)spec->train_steps / 3600.0;
  case ST_PLAN_OBJ_TIME_TO_TRAIN:
  case ST_PLAN_OBJ_COST:
  case ST_PLAN_OBJ_ENERGY:
    return st_plan_run_objective(o, spec, pt, step_ns, NULL);
  default:
    g_return_val_if_reached(0);
  }
}

double
st_plan_objective_value(StPlanObjective o, const StPlanSpec *spec, const StPlanPoint *pt)
{
  return objective_at(o, spec, pt, (double)pt->step_time_ns);
}

double
st_plan_objective_bound(StPlanObjective o, const StPlanSpec *spec, const StPlanPoint *pt,
                        int64_t bound_ns)
{
  /* A run's failures, checkpoints and stragglers have no bound here: 0
   * prunes nothing. */
  if (st_plan_objective_is_run(o))
    return 0;
  return objective_at(o, spec, pt, (double)MAX(bound_ns, 0));
}

typedef struct {
  const StPlan *plan;
  gboolean by_memory; /* else by GPUs */
} FrontCtx;

static int64_t
cost_of(const FrontCtx *x, int i)
{
  const StPlanPoint *pt = &x->plan->points[i];
  return x->by_memory ? pt->device_bytes : pt->gpus_used;
}

/* By cost ascending, then objective best first, then index. */
static int
compare_front(gconstpointer a, gconstpointer b, gpointer data)
{
  const FrontCtx *x = data;
  int i = *(const int *)a, j = *(const int *)b;
  int64_t ci = cost_of(x, i), cj = cost_of(x, j);
  if (ci != cj)
    return (ci > cj) - (ci < cj);
  const StPlanPoint *p = &x->plan->points[i], *q = &x->plan->points[j];
  StPlanObjective o = x->plan->spec->objective;
  if (st_plan_objective_better(o, p->objective, q->objective))
    return -1;
  if (st_plan_objective_better(o, q->objective, p->objective))
    return 1;
  return (i > j) - (i < j);
}

static void
mark_front(StPlan *plan, GArray *ok, gboolean by_memory)
{
  FrontCtx x = {plan, by_memory};
  g_autoptr(GArray) order = g_array_copy(ok);
  g_array_sort_with_data(order, compare_front, &x);
  StPlanObjective o = plan->spec->objective;
  gboolean have = FALSE;
  double best_before = 0; /* best objective over strictly lower costs */
  for (guint k = 0; k < order->len;) {
    /* One cost: its best value leads (sorted), ties with it stay on the front. */
    int first = g_array_index(order, int, k);
    int64_t cost = cost_of(&x, first);
    double lead = plan->points[first].objective;
    gboolean on = !have || st_plan_objective_better(o, lead, best_before);
    for (; k < order->len && cost_of(&x, g_array_index(order, int, k)) == cost; k++) {
      StPlanPoint *pt = &plan->points[g_array_index(order, int, k)];
      gboolean front = on && pt->objective == lead;
      if (by_memory)
        pt->front_memory = front;
      else
        pt->front_gpus = front;
    }
    if (on) {
      best_before = lead;
      have = TRUE;
    }
  }
}

static int
compare_rank(gconstpointer a, gconstpointer b, gpointer data)
{
  const StPlan *plan = data;
  int i = *(const int *)a, j = *(const int *)b;
  const StPlanPoint *p = &plan->points[i], *q = &plan->points[j];
  if (st_plan_objective_better(plan->spec->objective, p->objective, q->objective))
    return -1;
  if (st_plan_objective_better(plan->spec->objective, q->objective, p->objective))
    return 1;
  return (i > j) - (i < j);
}

void
st_plan_rank(StPlan *plan)
{
  if (plan->ranking != NULL)
    g_array_unref(plan->ranking);
  plan->ranking = g_array_new(FALSE, FALSE, sizeof(int));
  for (guint i = 0; i < plan->configs->len; i++) {
    StPlanPoint *pt = &plan->points[i];
    pt->rank = 0;
    pt->front_gpus = pt->front_memory = FALSE;
    if (pt->status != ST_PLAN_OK || !pt->simulated)
      continue;
    pt->objective = st_plan_objective_value(plan->spec->objective, plan->spec, pt);
    if (st_plan_objective_is_run(plan->spec->objective)) {
      StPlanRunChoice c;
      st_plan_run_objective(plan->spec->objective, plan->spec, pt, (double)pt->step_time_ns,
                            &c);
      pt->run_wall_s = c.wall_s;
      pt->run_goodput = c.goodput;
      pt->run_interval_s = c.interval_s;
      pt->run_spares = c.spares;
    }
    int index = (int)i;
    g_array_append_val(plan->ranking, index);
  }
  g_array_sort_with_data(plan->ranking, compare_rank, plan);
  for (guint k = 0; k < plan->ranking->len; k++)
    plan->points[g_array_index(plan->ranking, int, k)].rank = (int)k + 1;
  mark_front(plan, plan->ranking, FALSE);
  mark_front(plan, plan->ranking, TRUE);
}
