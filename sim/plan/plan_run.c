/* plan_run.c: the search (see plan.h).
 *
 * 1. Expand the space; configurations over the GPU budget are infeasible
 *    at once.
 * 2. Bound (parallel): build each configuration's schedule, which also
 *    finds the ones its options or strategy refuse, and compute its lower
 *    bounds and fingerprint; a configuration whose memory bound exceeds the
 *    cap does not fit, without simulating it. Configurations with the same
 *    fingerprint (plan_dedup.c) are simulated once, for the first of them.
 * 3. Simulate (parallel) the rest in order of their objective bound, best
 *    first, in waves (ST_PLAN_WAVE, or the spec's); after each wave, every
 *    configuration left whose bound a simulated one beats (StPlanPrune) is
 *    pruned.
 * 4. Rank (plan_rank.c).
 * With pruning off, step 3 simulates everything (the bounds are still
 * computed, so their validity can be checked against the simulated
 * numbers), and no memory bound stands in for a simulation.
 *
 * Every evaluation writes only its own point, and pruning is decided between
 * waves from finished results, so the plan is the same for any thread
 * count. Workers report completion through an async queue; progress is
 * called from the thread that called st_plan_run.
 */
#include "plan/plan.h"

#include <math.h>
#include <string.h>

#include "base/units.h"
#include "base/util.h"
#include "engine/engine.h"
#include "output/output.h"

typedef struct {
  StPlan *plan;
  const StProfile *profile;
  gboolean simulate;        /* the phase: bound only, or simulate */
  GThreadPool *pool;        /* NULL: serial */
  GAsyncQueue *done;        /* index + 1 of each finished evaluation */
  gboolean *decided;        /* [n]: the point's status is final */
  StPlanProgress progress;
  gpointer data;
  int n_decided;
  gint kept_ops;            /* ops of the schedules kept from phase 2 (atomic) */
} Run;

/* Schedules built for their bounds are kept for their simulation up to this
 * many ops in all (about 150 bytes each), so that most are built once; the
 * rest are built again. What is kept changes no result. */
#define KEEP_OPS (1 << 20)

static void
set_reason(StPlanPoint *pt, StPlanStatus status, const char *format, ...) G_GNUC_PRINTF(3, 4);

static void
set_reason(StPlanPoint *pt, StPlanStatus status, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_free(pt->reason);
  pt->reason = g_strdup_vprintf(format, args);
  va_end(args);
  pt->status = status;
}

/* The numbers of a simulated run. */
static void
take_summary(StPlanPoint *pt, const StSummary *sum, int64_t cap)
{
  const StSchedule *s = sum->timeline->schedule;
  int steady = MAX(1, sum->steps - sum->warmup_steps);
  const StDeviceSummary *worst = &sum->devices[0];
  for (int d = 1; d < s->n_devices; d++)
    if (sum->devices[d].peak_bytes > worst->peak_bytes)
      worst = &sum->devices[d];
  pt->simulated = TRUE;
  pt->step_time_ns = sum->step_time_ns;
  pt->samples_per_s = sum->samples_per_s;
  pt->gpus_used = sum->gpus_used;
  pt->peak_bytes = worst->peak_bytes;
  memcpy(pt->peak_by_category, worst->at_peak_by_category, sizeof pt->peak_by_category);
  pt->busy_ns = (int64_t)llround(sum->devices[0].busy_fraction * (double)sum->step_time_ns);
  pt->exposed_ns = sum->comm_exposed_ns / steady;
  pt->comm_bytes = sum->comm_bytes_total / steady;
  if (pt->peak_bytes > cap) {
    g_autofree char *peak = st_format_bytes(pt->peak_bytes);
    g_autofree char *limit = st_format_bytes(cap);
    set_reason(pt, ST_PLAN_OOM, "GPU %d peaks at %s, over the cap of %s", worst->id, peak,
               limit);
  } else {
    pt->status = ST_PLAN_OK;
  }
}

static int
devices_used(const StSchedule *s)
{
  g_autofree gboolean *used = g_new0(gboolean, MAX(s->n_devices, 1));
  int n = 0;
  for (int r = 0; r < s->n_ranks; r++) {
    n += !used[s->ranks[r].device];
    used[s->ranks[r].device] = TRUE;
  }
  return n;
}

/* Options, cluster and schedule of configuration i; NULL (options
 * cleared) when its options or its strategy refuse it. */
static StSchedule *
build_point(const StPlan *plan, const StProfile *profile, int i, StOptions *options,
            StPlanPoint *pt, GError **error)
{
  const StPlanConfig *c = &g_array_index(plan->configs, StPlanConfig, i);
  if (!st_plan_config_options(plan->spec, c, options, error))
    return NULL;
  g_autoptr(StCluster) cluster = st_cluster_copy(plan->cluster);
  StOptions resolved;
  st_options_copy(&resolved, options);
  gboolean ok = st_cluster_resize(cluster, options->nodes, options->gpus, error) &&
                st_options_resolve(&resolved, cluster, error);
  if (pt != NULL && ok) {
    pt->ranks = resolved.ranks;
    pt->accumulation = resolved.accumulation;
    pt->global_batch = resolved.global_batch;
  }
  st_options_clear(&resolved);
  StSchedule *s =
    ok ? st_strategy_build(c->strategy, plan->model, cluster, profile, options, error) : NULL;
  if (ok && s == NULL)
    g_prefix_error(error, "%s: ", c->strategy->name);
  if (s == NULL)
    st_options_clear(options);
  return s;
}

static int
schedule_ops(const StSchedule *s)
{
  guint n = 0;
  for (guint p = 0; p < s->programs->len; p++)
    n += ((const StProgram *)g_ptr_array_index(s->programs, p))->ops->len;
  return (int)MIN(n, (guint)G_MAXINT / 2);
}

/* Phase 2: bound and fingerprint `s` (transfer full); keep it for the
 * simulation when there is room. */
static void
bound_point(Run *run, StPlanPoint *pt, StSchedule *s, const StOptions *options)
{
  StPlan *plan = run->plan;
  pt->description = g_strdup(s->settings.description);
  pt->gpus_used = devices_used(s);
  st_plan_bound(s, run->profile, options->comm_algo, &pt->bound);
  pt->bounded = TRUE;
  st_plan_fingerprint(s, options->comm_algo, pt->fingerprint);
  if (plan->spec->prune != ST_PLAN_PRUNE_OFF && pt->bound.peak_bytes > plan->mem_cap) {
    g_autofree char *need = st_format_bytes(pt->bound.peak_bytes);
    g_autofree char *cap = st_format_bytes(plan->mem_cap);
    set_reason(pt, ST_PLAN_OOM,
               "needs at least %s on one GPU (its model states and the buffers it surely "
               "holds at once), over the cap of %s (not simulated)",
               need, cap);
    return;
  }
  int ops = schedule_ops(s);
  if (g_atomic_int_add(&run->kept_ops, ops) + ops <= KEEP_OPS)
    pt->kept = s;
  else
    st_schedule_free(s);
}

static void
evaluate(Run *run, int i)
{
  StPlan *plan = run->plan;
  StPlanPoint *pt = &plan->points[i];
  StOptions options;
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) s = g_steal_pointer(&pt->kept);
  if (s != NULL) {
    gboolean ok = st_plan_config_options(plan->spec, &g_array_index(plan->configs,
                                                                   StPlanConfig, i),
                                         &options, &error);
    g_assert(ok); /* it gave these options in phase 2 */
  } else {
    s = build_point(plan, run->profile, i, &options, pt, &error);
  }
  if (s == NULL) {
    set_reason(pt, ST_PLAN_INFEASIBLE, "%s", error->message);
    return;
  }
  if (!run->simulate) {
    bound_point(run, pt, g_steal_pointer(&s), &options);
    st_options_clear(&options);
    return;
  }
  StEngineOptions eo = {run->profile, options.comm_algo, NULL, plan->spec->no_fold};
  g_autoptr(StTimeline) t = st_simulate(s, &eo, NULL, &error);
  if (t == NULL) {
    set_reason(pt, ST_PLAN_FAILED, "simulation failed: %s", error->message);
  } else {
    g_autoptr(StSummary) sum = st_summary_new(t);
    take_summary(pt, sum, plan->mem_cap);
  }
  st_options_clear(&options);
}

static void
worker(gpointer task, gpointer data)
{
  Run *run = data;
  evaluate(run, GPOINTER_TO_INT(task) - 1);
  g_async_queue_push(run->done, task);
}

static void
count(StPlanCounts *c, const StPlanPoint *pt)
{
  c->simulated += pt->simulated && pt->same_as < 0;
  c->duplicates += pt->same_as >= 0;
  switch (pt->status) {
  case ST_PLAN_OK:
    c->ok++;
    break;
  case ST_PLAN_OOM:
    c->oom++;
    c->oom_by_bound += !pt->simulated;
    break;
  case ST_PLAN_INFEASIBLE:
    c->infeasible++;
    break;
  case ST_PLAN_PRUNED:
    c->pruned++;
    break;
  case ST_PLAN_FAILED:
  default:
    c->failed++;
    break;
  }
}

static void
decide(Run *run, int i)
{
  g_assert(!run->decided[i]);
  run->decided[i] = TRUE;
  run->n_decided++;
  count(&run->plan->counts, &run->plan->points[i]);
}

static void
report(Run *run)
{
  if (run->progress != NULL)
    run->progress(run->data, &run->plan->counts, run->n_decided, (int)run->plan->configs->len);
}

/* Evaluates `indices` (all at once on the pool) and waits for them. After
 * the bound phase, a point is decided when it is no longer a candidate. */
static void
dispatch(Run *run, const int *indices, int n)
{
  for (int k = 0; k < n; k++) {
    if (run->pool == NULL)
      evaluate(run, indices[k]);
    else
      g_thread_pool_push(run->pool, GINT_TO_POINTER(indices[k] + 1), NULL);
  }
  for (int k = 0; k < n; k++) {
    int i = run->pool == NULL ? indices[k] : GPOINTER_TO_INT(g_async_queue_pop(run->done)) - 1;
    const StPlanPoint *pt = &run->plan->points[i];
    /* A bounded point that is neither refused nor over the cap waits for phase 3. */
    if (run->simulate || pt->status != ST_PLAN_OK)
      decide(run, i);
    report(run);
  }
}

/* ---- pruning ------------------------------------------------------------ */

typedef struct {
  const StPlan *plan;
  const double *bound; /* [n]: best objective each configuration could reach */
} SortCtx;

static int
compare_candidates(gconstpointer a, gconstpointer b, gpointer data)
{
  const SortCtx *x = data;
  int i = *(const int *)a, j = *(const int *)b;
  StPlanObjective o = x->plan->spec->objective;
  if (st_plan_objective_better(o, x->bound[i], x->bound[j]))
    return -1;
  if (st_plan_objective_better(o, x->bound[j], x->bound[i]))
    return 1;
  return (i > j) - (i < j);
}

/* The best simulated objective on at most each GPU count: `gpus` holds the
 * candidates' distinct counts ascending, best[k] and who[k] the best OK
 * point using gpus[k] GPUs or fewer (who -1 while none; the lowest index
 * among equals). In winner mode one bucket holds every count. */
typedef struct {
  GArray *gpus;  /* int */
  double *best;
  int *who;
} Incumbents;

/* The first bucket whose count is >= gpus (len when none). */
static guint
bucket_of(const Incumbents *inc, int gpus)
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

/* Adds the OK points among `indices`: each counts for its bucket and every
 * larger one. O(buckets) per point. */
static void
incumbents_add(Incumbents *inc, const StPlan *plan, const int *indices, int n)
{
  StPlanObjective o = plan->spec->objective;
  for (int k = 0; k < n; k++) {
    int i = indices[k];
    const StPlanPoint *pt = &plan->points[i];
    if (pt->status != ST_PLAN_OK || !pt->simulated)
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

/* Prunes the candidates from `from` on that a simulated point beats. */
static void
prune_rest(Run *run, const Incumbents *inc, const int *cand, int from, int n,
           const double *bound)
{
  StPlan *plan = run->plan;
  StPlanObjective o = plan->spec->objective;
  for (int k = from; k < n; k++) {
    int i = cand[k];
    StPlanPoint *pt = &plan->points[i];
    if (run->decided[i])
      continue;
    guint b = bucket_of(inc, pt->gpus_used);
    int who = b < inc->gpus->len ? inc->who[b] : -1;
    if (who < 0 || !st_plan_objective_better(o, inc->best[b], bound[i]))
      continue;
    g_clear_pointer(&pt->kept, st_schedule_free);
    set_reason(pt, ST_PLAN_PRUNED,
               "its %s cannot be better than %.6g (its step time is at least %.6g s); "
               "configuration %d reaches %.6g on %d GPUs",
               st_plan_objective_name(o), bound[i], (double)pt->bound.step_time_ns * 1e-9, who,
               inc->best[b], plan->points[who].gpus_used);
    decide(run, i);
  }
  report(run);
}

/* Phase 3: candidates by bound, waves, pruning in between. */
static guint
key_hash(gconstpointer p)
{
  return (guint)((const guint64 *)p)[0];
}

static gboolean
key_equal(gconstpointer a, gconstpointer b)
{
  return memcmp(a, b, 2 * sizeof(guint64)) == 0;
}

/* Keeps in `cand` (ascending indices) the first of every set of
 * configurations with the same fingerprint; the others point to it. */
static void
dedupe(StPlan *plan, GArray *cand)
{
  g_autoptr(GHashTable) first = g_hash_table_new(key_hash, key_equal);
  guint kept = 0;
  for (guint k = 0; k < cand->len; k++) {
    int i = g_array_index(cand, int, k);
    StPlanPoint *pt = &plan->points[i];
    gpointer rep = NULL;
    if (g_hash_table_lookup_extended(first, pt->fingerprint, NULL, &rep)) {
      pt->same_as = GPOINTER_TO_INT(rep);
      g_clear_pointer(&pt->kept, st_schedule_free);
      continue;
    }
    g_hash_table_insert(first, pt->fingerprint, GINT_TO_POINTER(i));
    g_array_index(cand, int, kept++) = i;
  }
  g_array_set_size(cand, kept);
}

/* A configuration whose schedule another one has: that one's results. */
static void
copy_result(StPlanPoint *dst, const StPlanPoint *src)
{
  dst->status = src->status;
  dst->simulated = src->simulated;
  g_free(dst->reason);
  dst->reason = g_strdup(src->reason);
  dst->step_time_ns = src->step_time_ns;
  dst->samples_per_s = src->samples_per_s;
  dst->gpus_used = src->gpus_used;
  dst->peak_bytes = src->peak_bytes;
  memcpy(dst->peak_by_category, src->peak_by_category, sizeof dst->peak_by_category);
  dst->busy_ns = src->busy_ns;
  dst->exposed_ns = src->exposed_ns;
  dst->comm_bytes = src->comm_bytes;
}

static void
simulate_candidates(Run *run, GArray *cand)
{
  StPlan *plan = run->plan;
  g_autoptr(GArray) all = g_array_copy(cand);
  dedupe(plan, cand);
  int n = (int)cand->len;
  g_autofree double *bound = g_new(double, MAX(plan->configs->len, 1));
  for (int k = 0; k < n; k++) {
    int i = g_array_index(cand, int, k);
    const StPlanPoint *pt = &plan->points[i];
    bound[i] = st_plan_objective_bound(plan->spec->objective, plan->spec, pt,
                                       pt->bound.step_time_ns);
  }
  SortCtx sort = {plan, bound};
  g_array_sort_with_data(cand, compare_candidates, &sort);
  const int *c = (const int *)cand->data;

  gboolean pruning = plan->spec->prune != ST_PLAN_PRUNE_OFF;
  gboolean per_gpus = plan->spec->prune == ST_PLAN_PRUNE_FRONT;
  Incumbents inc = {g_array_new(FALSE, FALSE, sizeof(int)), NULL, NULL};
  if (per_gpus) {
    for (int k = 0; k < n; k++)
      g_array_append_val(inc.gpus, plan->points[c[k]].gpus_used);
    g_array_sort(inc.gpus, st_compare_int32);
    guint kept = 0;
    for (guint k = 0; k < inc.gpus->len; k++)
      if (kept == 0 || g_array_index(inc.gpus, int, k) != g_array_index(inc.gpus, int, kept - 1))
        g_array_index(inc.gpus, int, kept++) = g_array_index(inc.gpus, int, k);
    g_array_set_size(inc.gpus, kept);
  } else {
    int every = G_MAXINT;
    g_array_append_val(inc.gpus, every);
  }
  inc.best = g_new0(double, MAX(inc.gpus->len, 1));
  inc.who = g_new(int, MAX(inc.gpus->len, 1));
  for (guint b = 0; b < inc.gpus->len; b++)
    inc.who[b] = -1;

  int size = plan->spec->wave > 0 ? plan->spec->wave : ST_PLAN_WAVE;
  g_autofree int *wave = g_new(int, size);
  for (int k = 0; k < n;) {
    int w = 0;
    for (; k < n && w < size; k++)
      if (!run->decided[c[k]])
        wave[w++] = c[k];
    dispatch(run, wave, w);
    if (pruning && k < n) {
      incumbents_add(&inc, plan, wave, w);
      prune_rest(run, &inc, c, k, n, bound);
    }
  }
  g_array_unref(inc.gpus);
  g_free(inc.best);
  g_free(inc.who);
  for (guint k = 0; k < all->len; k++) {
    int i = g_array_index(all, int, k);
    StPlanPoint *pt = &plan->points[i];
    if (pt->same_as < 0)
      continue;
    copy_result(pt, &plan->points[pt->same_as]);
    decide(run, i);
  }
  report(run);
}

/* ---- the search ------------------------------------------------------------ */

StPlan *
st_plan_run(const StPlanSpec *spec, const StModel *model, const StCluster *cluster,
            const StProfile *profile, StPlanProgress progress, gpointer data, GError **error)
{
  g_return_val_if_fail(spec != NULL && model != NULL && cluster != NULL, NULL);
  gint64 t0 = g_get_monotonic_time();
  g_autoptr(StPlan) plan = g_new0(StPlan, 1);
  plan->spec = spec;
  plan->model = model;
  plan->cluster = cluster;
  plan->strings = g_string_chunk_new(4096);
  plan->mem_cap = spec->mem_cap > 0 ? spec->mem_cap : cluster->gpu.memory_bytes;
  plan->configs = st_plan_space_expand(spec, cluster, plan->strings, error);
  if (plan->configs == NULL)
    return NULL;
  int n = (int)plan->configs->len;
  plan->points = g_new0(StPlanPoint, MAX(n, 1));
  plan->counts.configurations = n;
  plan->threads = spec->threads > 0 ? spec->threads : (int)g_get_num_processors();

  g_autofree gboolean *decided = g_new0(gboolean, MAX(n, 1));
  Run run = {
    .plan = plan,
    .profile = profile,
    .done = g_async_queue_new(),
    .decided = decided,
    .progress = progress,
    .data = data,
  };
  if (plan->threads > 1) {
    run.pool = g_thread_pool_new(worker, &run, plan->threads, TRUE, error);
    if (run.pool == NULL) {
      g_async_queue_unref(run.done);
      return NULL;
    }
  }

  g_autoptr(GArray) todo = g_array_new(FALSE, FALSE, sizeof(int));
  for (int i = 0; i < n; i++) {
    const StPlanConfig *c = &g_array_index(plan->configs, StPlanConfig, i);
    StPlanPoint *pt = &plan->points[i];
    pt->nodes = c->nodes;
    pt->gpus_used = c->gpus;
    pt->accumulation = c->accumulation;
    pt->same_as = -1;
    if (spec->gpu_budget > 0 && c->gpus > spec->gpu_budget) {
      set_reason(pt, ST_PLAN_INFEASIBLE, "uses %d GPUs, over the --gpu-budget of %d", c->gpus,
                 spec->gpu_budget);
      decide(&run, i);
    } else {
      g_array_append_val(todo, i);
    }
  }
  report(&run);
  gint64 t1 = g_get_monotonic_time();
  dispatch(&run, (const int *)todo->data, (int)todo->len);
  guint kept = 0;
  for (guint k = 0; k < todo->len; k++)
    if (!decided[g_array_index(todo, int, k)])
      g_array_index(todo, int, kept++) = g_array_index(todo, int, k);
  g_array_set_size(todo, kept);
  run.simulate = TRUE;
  gint64 t2 = g_get_monotonic_time();
  simulate_candidates(&run, todo);
  g_debug("plan: expand %.3f s, bound %.3f s, simulate %.3f s (%d configurations, %d simulated)",
          (t1 - t0) / 1e6, (t2 - t1) / 1e6, (g_get_monotonic_time() - t2) / 1e6, n,
          plan->counts.simulated);

  if (run.pool != NULL)
    g_thread_pool_free(run.pool, FALSE, TRUE);
  g_async_queue_unref(run.done);
  st_plan_rank(plan);
  plan->seconds = (g_get_monotonic_time() - t0) / 1e6;
  return g_steal_pointer(&plan);
}

void
st_plan_free(StPlan *plan)
{
  if (plan == NULL)
    return;
  for (guint i = 0; plan->points != NULL && plan->configs != NULL && i < plan->configs->len; i++) {
    g_free(plan->points[i].reason);
    g_free(plan->points[i].description);
    st_schedule_free(plan->points[i].kept);
  }
  g_free(plan->points);
  if (plan->configs != NULL)
    g_array_unref(plan->configs);
  if (plan->ranking != NULL)
    g_array_unref(plan->ranking);
  if (plan->strings != NULL)
    g_string_chunk_free(plan->strings);
  g_free(plan);
}

int
st_plan_winner(const StPlan *plan)
{
  return plan->ranking != NULL && plan->ranking->len > 0 ? g_array_index(plan->ranking, int, 0)
                                                         : -1;
}

int
st_plan_runner_up(const StPlan *plan)
{
  return plan->ranking != NULL && plan->ranking->len > 1 ? g_array_index(plan->ranking, int, 1)
                                                         : -1;
}

StSchedule *
st_plan_build(const StPlan *plan, const StProfile *profile, int index, GError **error)
{
  g_return_val_if_fail(index >= 0 && index < (int)plan->configs->len, NULL);
  StOptions options;
  StSchedule *s = build_point(plan, profile, index, &options, NULL, error);
  if (s != NULL)
    st_options_clear(&options);
  return s;
}
