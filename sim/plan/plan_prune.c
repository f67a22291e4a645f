/* plan_prune.c: the best simulated objective so far for each GPU count,
 * which pruning compares candidates' bounds with (see plan_private.h and
 * StPlanPrune in plan.h).
 *
 * Buckets are the candidates' distinct GPU counts, ascending (one bucket
 * holding every count when pruning for the winner only). A point counts for
 * the first bucket whose count is at least its own and every bucket after
 * it, so bucket b holds the best point on gpus[b] GPUs or fewer; a
 * candidate looks in the last bucket at or below its count (a candidate
 * not yet built knows only the fewest GPUs it may use, which need not be a
 * bucket's). Points that ran --steps auto without settling never count
 * (plan.h).
 */
#include "plan/plan_private.h"

#include "base/util.h"

struct StPlanIncumbents {
  const StPlan *plan;
  GArray *gpus;  /* int, ascending: the buckets' GPU counts */
  double *best;  /* [buckets]: the best objective */
  int *who;      /* [buckets]: its point, -1 while none */
  gboolean per_gpus; /* else one bucket for every count (winner pruning) */
};

StPlanIncumbents *
st_plan_incumbents_new(const StPlan *plan, const int *cand, int n, gboolean per_gpus)
{
  StPlanIncumbents *inc = g_new0(StPlanIncumbents, 1);
  inc->plan = plan;
  inc->per_gpus = per_gpus;
  inc->gpus = g_array_new(FALSE, FALSE, sizeof(int));
  if (per_gpus) {
    /* The fewest GPUs each may use, and its shape's: the most it may. */
    for (int k = 0; k < n; k++) {
      g_array_append_val(inc->gpus, plan->points[cand[k]].gpus_at_least);
      g_array_append_val(inc->gpus, g_array_index(plan->configs, StPlanConfig, cand[k]).gpus);
    }
    g_array_sort(inc->gpus, st_compare_int32);
    guint kept = 0;
    for (guint k = 0; k < inc->gpus->len; k++)
      if (kept == 0 || g_array_index(inc->gpus, int, k) != g_array_index(inc->gpus, int, kept - 1))
        g_array_index(inc->gpus, int, kept++) = g_array_index(inc->gpus, int, k);
    g_array_set_size(inc->gpus, kept);
  } else {
    int every = G_MAXINT;
    g_array_append_val(inc->gpus, every);
  }
  inc->best = g_new0(double, MAX(inc->gpus->len, 1));
  inc->who = g_new(int, MAX(inc->gpus->len, 1));
  for (guint b = 0; b < inc->gpus->len; b++)
    inc->who[b] = -1;
  return inc;
}

void
st_plan_incumbents_free(StPlanIncumbents *inc)
{
  if (inc == NULL)
    return;
  g_array_unref(inc->gpus);
  g_free(inc->best);
  g_free(inc->who);
  g_free(inc);
}

/* The first bucket whose count is >= gpus (the number of buckets when none). */
static guint
bucket_of(const StPlanIncumbents *inc, int gpus)
{
  guint lo = 0, hi = inc->gpus->len;
  while (lo < hi) {
    guint mid = (lo + hi) / 2;
    if (g_array_index(inc->gpus, int, mid) < gpus)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

void
st_plan_incumbents_add(StPlanIncumbents *inc, const int *indices, int n)
{
  const StPlan *plan = inc->plan;
  StPlanObjective o = plan->spec->objective;
  for (int k = 0; k < n; k++) {
    int i = indices[k];
    const StPlanPoint *pt = &plan->points[i];
    /* A mean that never settled bounds nothing: it may sit below the
     * steady step a bound speaks of. */
    if (pt->status != ST_PLAN_OK || !pt->simulated || pt->sim->unsteady_auto)
      continue;
    double v = st_plan_objective_value(o, plan->spec, pt);
    for (guint b = bucket_of(inc, pt->gpus_used); b < inc->gpus->len; b++) {
      if (inc->who[b] < 0 || st_plan_objective_better(o, v, inc->best[b]) ||
          (v == inc->best[b] && i < inc->who[b])) {
        inc->best[b] = v;
        inc->who[b] = i;
      }
    }
  }
}

int
st_plan_incumbents_beat(const StPlanIncumbents *inc, int gpus, double bound, double *best)
{
  /* The last bucket whose count is at most `gpus`: its points use no more. */
  guint b = bucket_of(inc, gpus);
  if (inc->per_gpus && (b >= inc->gpus->len || g_array_index(inc->gpus, int, b) > gpus)) {
    if (b == 0)
      return -1;
    b--;
  }
  b = MIN(b, inc->gpus->len - 1);
  if (inc->who[b] < 0 ||
      !st_plan_objective_better(inc->plan->spec->objective, inc->best[b], bound))
    return -1;
  *best = inc->best[b];
  return inc->who[b];
}
