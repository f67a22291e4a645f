/* plan_run.c: the search (see plan.h).
 *
 * 1. Expand the space; configurations over the GPU budget are infeasible
 *    at once.
 * 2. Prepare (nothing built): options, the update each computes (a stale
 *    one is excluded unless --allow-stale), the batch split its shape
 *    allows, the fewest GPUs it may use, and its work bound: with --steps
 *    auto and no measured profile, no step is shorter than its global
 *    batch's compute at the GPUs' peak (st_plan_work_bound).
 *    Its strategy's estimate (StStrategy.estimate) may refuse it, put it
 *    over the memory cap, or raise that bound (before_ns).
 * 3. Search, in order of the work bound's objective, best first, in waves
 *    (ST_PLAN_WAVE, or the spec's): build and bound the wave (parallel:
 *    this finds what the strategy refuses, and what its memory bound shows
 *    over the cap, not simulated); in the wave's order, a configuration
 *    whose schedule was met before (plan_dedup.c) takes that one's results,
 *    one whose step-time bound a simulated configuration beats
 *    (StPlanPrune) is pruned, the rest are simulated (parallel). As each
 *    wave ends, every configuration not yet built whose work bound a
 *    simulated one beats, on the fewest GPUs it may use, is pruned without
 *    being built: most of a space never is.
 * 4. Rank (plan_rank.c).
 * With pruning off, step 3 builds and simulates everything (the bounds are
 * still computed, so their validity can be checked against the simulated
 * numbers), and no memory bound stands in for a simulation.
 *
 * Every evaluation writes only its own point, and pruning is decided between
 * waves from finished results, so the plan is the same for any thread
 * count. Spread over processes (plan_dist.h), each evaluates its share
 * of a wave and the points are exchanged before any decision, so the plan is
 * the same for any number of processes too.
 * Workers report completion through an async queue; progress is
 * called from the thread that called st_plan_run.
 */
#include "plan/plan_private.h"

#include <math.h>
#include <string.h>

#include "base/units.h"
#include "engine/engine.h"
#include "output/output.h"
#include "output/steady.h"
#include "strategy/offload.h"
#include "strategy/tensors.h"

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
  const StPlanDist *dist;   /* spread over processes, or NULL (plan_dist.h) */
  int *owner;               /* [n]: the process that evaluates each launched configuration */
  GError *failed;           /* an exchange between processes failed */
  gint kept_ops;            /* ops of the schedules kept from building to simulating (atomic) */
  gint64 start_us;          /* when the search began (--max-time) */
  GAsyncQueue *arrays;      /* StTimelineArrays no evaluation holds: each simulation borrows
                               one, so a thread's runs reuse the same record pages */
  StPlanClosedCache *closed; /* the closed forms' pass costs (prepare, serial) */
} Run;

/* Schedules built for their bounds are kept for their simulation (in the
 * same wave) up to this many ops in all (about 150 bytes each), so that
 * most are built once; the rest are built again. What is kept changes no
 * result. */
#define KEEP_OPS (1 << 20)

/* st_recompute_check and st_offload_check on the options, before anything
 * is built. */
static gboolean
activations_ok(const StModel *model, const StCluster *cluster, const StOptions *options,
               GError **error)
{
  StRecomputePlan recompute = st_recompute_plan(options);
  return st_recompute_check(model, &recompute, error) &&
         st_recompute_check_split(&recompute, options->tensor_parallel, error) &&
         st_offload_check(model, cluster, options->offload_activations, &recompute, error);
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
                st_strategy_resolve(c->strategy, &resolved, cluster, error);
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

/* Phase 2, nothing built: what it computes (a stale update not admitted
 * is excluded), whether its options fit its shape, its batch split, the
 * GPUs it uses at least, and the work bound of its step. */
static void
prepare(Run *run, int i)
{
  StPlan *plan = run->plan;
  StPlanPoint *pt = &plan->points[i];
  const StPlanConfig *c = &g_array_index(plan->configs, StPlanConfig, i);
  g_autoptr(GError) error = NULL;
  StOptions options, resolved;
  if (!st_plan_config_options(plan->spec, c, &options, &error)) {
    st_plan_point_refuse(pt, ST_PLAN_INFEASIBLE, "%s", error->message);
    return;
  }
  pt->has_update = TRUE;
  pt->update = c->strategy->update(&options);
  g_autoptr(StCluster) cluster = st_cluster_copy(plan->cluster);
  st_options_copy(&resolved, &options);
  if (pt->update.kind == ST_UPDATE_STALE && !plan->spec->allow_stale) {
    st_plan_point_refuse(pt, ST_PLAN_EXCLUDED,
               "its update is not synchronous SGD/Adam's: %s (--allow-stale admits it)",
               pt->update.what);
  } else if (!st_cluster_resize(cluster, options.nodes, options.gpus, &error) ||
             !st_strategy_resolve(c->strategy, &resolved, cluster, &error) ||
             !activations_ok(plan->model, cluster, &resolved, &error)) {
    st_plan_point_refuse(pt, ST_PLAN_INFEASIBLE, "%s", error->message);
  } else {
    pt->ranks = resolved.ranks;
    pt->accumulation = resolved.accumulation;
    pt->global_batch = resolved.global_batch;
    gboolean shares = c->strategy->shares_devices != NULL && c->strategy->shares_devices(&options);
    pt->gpus_at_least = shares ? 1 : MIN(c->gpus, resolved.ranks);
    if (run->profile == NULL && options.steps == 0)
      pt->work_ns = st_plan_work_bound(plan->model, cluster, &resolved);
    pt->before_ns = pt->work_ns;
    st_plan_estimate(plan, run->profile, pt, c->strategy, cluster, &options, &resolved,
                     options.steps == 0, run->closed);
  }
  st_options_clear(&resolved);
  st_options_clear(&options);
}

static int
schedule_ops(const StSchedule *s)
{
  guint n = 0;
  for (guint p = 0; p < s->programs->len; p++)
    n += ((const StProgram *)g_ptr_array_index(s->programs, p))->ops->len;
  return (int)MIN(n, (guint)G_MAXINT / 2);
}

/* Drops a kept schedule and gives its ops back to the budget. */
static void
release_kept(Run *run, StPlanPoint *pt)
{
  if (pt->kept == NULL)
    return;
  g_atomic_int_add(&run->kept_ops, -schedule_ops(pt->kept));
  g_clear_pointer(&pt->kept, st_schedule_free);
}

/* Building: bound and fingerprint `s` (transfer full); keep it for the
 * simulation when there is room. */
static void
bound_point(Run *run, StPlanPoint *pt, StSchedule *schedule, const StOptions *options)
{
  StPlan *plan = run->plan;
  g_autoptr(StSchedule) s = schedule;
  pt->description = g_strdup(s->settings.description);
  pt->gpus_used = devices_used(s);
  st_plan_bound(s, run->profile, options->comm_algo, &pt->bound);
  pt->bounded = TRUE;
  st_plan_fingerprint(s, options->comm_algo, pt->fingerprint);
  if (st_plan_bound_device(plan, pt, s))
    return;
  int ops = schedule_ops(s);
  if (g_atomic_int_add(&run->kept_ops, ops) + ops <= KEEP_OPS)
    pt->kept = g_steal_pointer(&s);
  else
    g_atomic_int_add(&run->kept_ops, -ops);
}

static void
evaluate(Run *run, int i)
{
  StPlan *plan = run->plan;
  StPlanPoint *pt = &plan->points[i];
  StOptions options;
  g_autoptr(GError) error = NULL;
  const StPlanConfig *c = &g_array_index(plan->configs, StPlanConfig, i);
  if (!run->simulate && pt->over_in_turn) {
    /* Where building would have found it over the cap, without building. */
    st_plan_refuse_over_cap(plan, pt, c->strategy);
    return;
  }
  g_autoptr(StSchedule) s = g_steal_pointer(&pt->kept);
  if (s != NULL)
    g_atomic_int_add(&run->kept_ops, -schedule_ops(s));
  /* A kept schedule needs its options again (they were accepted when it was built). */
  if (s != NULL && !st_plan_config_options(plan->spec, c, &options, &error))
    g_clear_pointer(&s, st_schedule_free);
  else if (s == NULL)
    s = build_point(plan, run->profile, i, &options, pt, &error);
  if (s == NULL) {
    if (pt->status != ST_PLAN_EXCLUDED)
      st_plan_point_refuse(pt, ST_PLAN_INFEASIBLE, "%s", error->message);
    return;
  }
  if (!run->simulate) {
    bound_point(run, pt, g_steal_pointer(&s), &options);
    st_options_clear(&options);
    return;
  }
  StTimelineArrays *arrays = g_async_queue_try_pop(run->arrays);
  StEngineOptions eo = {run->profile, options.comm_algo, options.share_model,
                        plan->spec->no_fold,
                        arrays != NULL ? arrays : st_timeline_arrays_new()};
  /* --max-memory bounds each configuration's simulation (none by default:
   * the search holds only summaries, a configuration at a time per thread). */
  StEngineBudget budget = {options.max_memory, NULL};
  StTimeline *t = st_simulate_within(s, &eo, &budget, NULL, &error);
  if (t == NULL) {
    st_plan_point_refuse(pt, ST_PLAN_FAILED, "simulation failed: %s", error->message);
  } else {
    StSummary *sum = st_summary_new(t);
    st_plan_point_take_summary(pt, sum, plan->mem_cap);
    st_summary_free(sum);
    st_timeline_free(t);
  }
  g_async_queue_push(run->arrays, eo.arrays);
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
  case ST_PLAN_EXCLUDED:
    c->excluded++;
    break;
  case ST_PLAN_UNSEARCHED:
    c->unsearched++;
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

/* Evaluations in flight are grouped in waves: launch() starts one (on the
 * pool, or at once when serial), wait_wave() returns when all of it is
 * done; completions of later waves met meanwhile are counted for them. */
typedef struct {
  int left;            /* evaluations not finished */
} Wave;

typedef struct {
  GArray *waves;       /* Wave */
  int *wave_of;        /* [n]: the wave of each configuration launched */
} Flight;

static int
launch(Run *run, Flight *f, const int *indices, int n)
{
  int id = (int)f->waves->len, mine = 0;
  int rank = run->dist != NULL ? run->dist->rank : 0;
  int size = run->dist != NULL ? run->dist->size : 1;
  /* Building decides who evaluates a configuration; it also simulates it. */
  for (int k = 0; k < n; k++) {
    if (!run->simulate)
      run->owner[indices[k]] = k % size;
    mine += run->owner[indices[k]] == rank;
  }
  Wave w = {mine};
  g_array_append_val(f->waves, w);
  for (int k = 0; k < n; k++) {
    if (run->owner[indices[k]] != rank)
      continue;
    f->wave_of[indices[k]] = id;
    if (run->pool != NULL) {
      g_thread_pool_push(run->pool, GINT_TO_POINTER(indices[k] + 1), NULL);
    } else {
      evaluate(run, indices[k]);
      g_async_queue_push(run->done, GINT_TO_POINTER(indices[k] + 1));
    }
  }
  return id;
}

/* After the bound phase, a point is decided when it is no longer a
 * candidate; in the simulation phase, when its simulation ends. */
static void
finished(Run *run, int i)
{
  const StPlanPoint *pt = &run->plan->points[i];
  if (run->simulate || pt->status != ST_PLAN_OK)
    decide(run, i);
}

/* Spread over processes: waits for this one's share of `indices`, then
 * takes the others' results (plan_dist.h). */
static void
wait_wave(Run *run, Flight *f, int id, const int *indices, int n)
{
  while (g_array_index(f->waves, Wave, id).left > 0) {
    int i = GPOINTER_TO_INT(g_async_queue_pop(run->done)) - 1;
    g_array_index(f->waves, Wave, f->wave_of[i]).left--;
    finished(run, i);
    report(run);
  }
  if (run->dist == NULL || run->dist->size == 1 || run->failed != NULL)
    return;
  if (!st_plan_dist_exchange(run->dist, run->plan, indices, n, run->owner, &run->failed))
    return;
  for (int k = 0; k < n; k++)
    if (run->owner[indices[k]] != run->dist->rank)
      finished(run, indices[k]);
  report(run);
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

/* Prunes the undecided candidates from `from` on whose work bound (before
 * building) a simulated point beats, on their fewest possible GPUs. */
static void
prune_unbuilt(Run *run, const StPlanIncumbents *inc, const int *cand, int from, int n,
              const double *work)
{
  StPlan *plan = run->plan;
  for (int k = from; k < n; k++) {
    int i = cand[k];
    StPlanPoint *pt = &plan->points[i];
    double best = 0;
    int who = run->decided[i] || pt->before_ns <= 0
                ? -1
                : st_plan_incumbents_beat(inc, pt->gpus_at_least, work[i], &best);
    if (who < 0)
      continue;
    st_plan_prune_unbuilt(plan, pt, work[i], who, best);
    decide(run, i);
  }
}

/* Phase 3 (see the top of the file): candidates in order of their work
 * bound, in waves of `size`, each built and bounded, deduplicated, pruned by
 * its full bound, then simulated; pruning between waves. */
/* --max-time: whether the next wave must not start. Spread over
 * processes, process 0's clock decides for all (one allgather a wave), so
 * that they stop together. */
static gboolean
out_of_time(Run *run)
{
  double limit = run->plan->spec->max_time_s;
  if (!(limit > 0))
    return FALSE;
  guint8 late = (double)(g_get_monotonic_time() - run->start_us) >= limit * 1e6;
  if (run->dist == NULL || run->dist->size <= 1)
    return late;
  g_autoptr(GBytes) mine = g_bytes_new(&late, 1);
  g_autofree GBytes **all = g_new0(GBytes *, run->dist->size);
  gboolean ok = run->dist->allgather(run->dist, mine, all, &run->failed);
  gsize len = 0;
  const guint8 *first = ok && all[0] != NULL ? g_bytes_get_data(all[0], &len) : NULL;
  gboolean stop = !ok || (len == 1 && first[0] != 0);
  for (int p = 0; p < run->dist->size; p++)
    if (all[p] != NULL)
      g_bytes_unref(all[p]);
  return stop;
}

/* What the time limit left undecided among c[from .. n). */
static void
leave_unsearched(Run *run, const int *c, int from, int n)
{
  for (int k = from; k < n; k++) {
    if (run->decided[c[k]])
      continue;
    release_kept(run, &run->plan->points[c[k]]);
    st_plan_point_refuse(&run->plan->points[c[k]], ST_PLAN_UNSEARCHED,
                         "not searched: the search reached --max-time %g s first",
                         run->plan->spec->max_time_s);
    decide(run, c[k]);
  }
}

static void
search(Run *run, GArray *cand)
{
  StPlan *plan = run->plan;
  StPlanObjective o = plan->spec->objective;
  int n = (int)cand->len;
  g_autofree double *work = g_new(double, MAX(plan->configs->len, 1));
  for (int k = 0; k < n; k++) {
    int i = g_array_index(cand, int, k);
    work[i] = st_plan_objective_bound(o, plan->spec, &plan->points[i], plan->points[i].before_ns);
  }
  SortCtx sort = {plan, work};
  g_array_sort_with_data(cand, compare_candidates, &sort);
  const int *c = (const int *)cand->data;

  gboolean pruning = plan->spec->prune != ST_PLAN_PRUNE_OFF;
  g_autoptr(StPlanIncumbents) inc =
    st_plan_incumbents_new(plan, c, n, plan->spec->prune == ST_PLAN_PRUNE_FRONT);
  g_autoptr(GHashTable) first = st_plan_fingerprints_new();
  g_autoptr(GArray) twins = g_array_new(FALSE, FALSE, sizeof(int));
  g_autoptr(GArray) wave = g_array_new(FALSE, FALSE, sizeof(int));
  g_autoptr(GArray) run_now = g_array_new(FALSE, FALSE, sizeof(int));
  g_autofree int *wave_of = g_new(int, MAX(plan->configs->len, 1));
  int size = plan->spec->wave > 0 ? plan->spec->wave : ST_PLAN_WAVE;
  report(run); /* the work ahead, before the first wave */
  for (int next = 0; next < n;) {
    if (next > 0 && out_of_time(run)) { /* one wave at least: an answer */
      if (run->failed == NULL)
        leave_unsearched(run, c, next, n);
      break;
    }
    g_array_set_size(wave, 0);
    for (; next < n && (int)wave->len < size; next++)
      if (!run->decided[c[next]])
        g_array_append_val(wave, c[next]);
    if (wave->len == 0)
      break;
    /* Build and bound; what does not build or fit is decided there. */
    Flight built = {g_array_new(FALSE, FALSE, sizeof(Wave)), wave_of};
    run->simulate = FALSE;
    wait_wave(run, &built, launch(run, &built, (const int *)wave->data, (int)wave->len),
              (const int *)wave->data, (int)wave->len);
    if (run->failed != NULL)
      break;
    g_array_unref(built.waves);
    /* In the wave's order: a twin of a schedule met before copies its
     * results at the end; the rest are pruned by their bound or run. */
    g_array_set_size(run_now, 0);
    for (guint k = 0; k < wave->len; k++) {
      int i = g_array_index(wave, int, k);
      StPlanPoint *pt = &plan->points[i];
      if (run->decided[i])
        continue;
      int rep = st_plan_fingerprints_first(first, plan, i);
      if (rep != i) {
        pt->same_as = rep;
        release_kept(run, pt);
        g_array_append_val(twins, i);
        continue;
      }
      /* Both bounds hold; the estimate's may be the larger. */
      int64_t step = MAX(pt->bound.step_time_ns, pt->before_ns);
      double bound = st_plan_objective_bound(o, plan->spec, pt, step), best = 0;
      int who = pruning ? st_plan_incumbents_beat(inc, pt->gpus_used, bound, &best) : -1;
      if (who >= 0) {
        release_kept(run, pt);
        st_plan_point_refuse(pt, ST_PLAN_PRUNED,
                   "its %s cannot be better than %.6g (its step time is at least %.6g s); "
                   "configuration %d reaches %.6g on %d GPUs",
                   st_plan_objective_name(o), bound, (double)step * 1e-9,
                   who, best, plan->points[who].gpus_used);
        decide(run, i);
        continue;
      }
      g_array_append_val(run_now, i);
    }
    Flight simulated = {g_array_new(FALSE, FALSE, sizeof(Wave)), wave_of};
    run->simulate = TRUE;
    wait_wave(run, &simulated,
              launch(run, &simulated, (const int *)run_now->data, (int)run_now->len),
              (const int *)run_now->data, (int)run_now->len);
    if (run->failed != NULL)
      break;
    g_array_unref(simulated.waves);
    if (pruning) {
      st_plan_incumbents_add(inc, (const int *)run_now->data, (int)run_now->len);
      prune_unbuilt(run, inc, c, next, n, work);
    }
    report(run);
  }
  for (guint k = 0; k < twins->len; k++) {
    int i = g_array_index(twins, int, k);
    StPlanPoint *pt = &plan->points[i];
    st_plan_copy_result(pt, &plan->points[pt->same_as]);
    decide(run, i);
  }
  report(run);
}

/* ---- the search ------------------------------------------------------------ */

StPlan *
st_plan_run(const StPlanSpec *spec, const StModel *model, const StCluster *cluster,
            const StProfile *profile, StPlanProgress progress, gpointer data, GError **error)
{
  return st_plan_run_spread(spec, model, cluster, profile, NULL, progress, data, error);
}

StPlan *
st_plan_run_spread(const StPlanSpec *spec, const StModel *model, const StCluster *cluster,
                   const StProfile *profile, const StPlanDist *dist, StPlanProgress progress,
                   gpointer data, GError **error)
{
  g_return_val_if_fail(spec != NULL && model != NULL && cluster != NULL, NULL);
  gint64 t0 = g_get_monotonic_time();
  g_autoptr(StPlan) plan = g_new0(StPlan, 1);
  plan->spec = spec;
  plan->model = model;
  plan->cluster = cluster;
  if (spec->gpus_per_node > 0) {
    /* Every shape searched is made of the cut node. */
    plan->kept_nodes = st_cluster_copy(cluster);
    if (!st_cluster_keep_gpus_per_node(plan->kept_nodes, spec->gpus_per_node, error))
      return NULL;
    plan->cluster = cluster = plan->kept_nodes;
  }
  plan->strings = g_string_chunk_new(4096);
  /* A cap above the GPU's memory would call fitting what cannot run. */
  plan->mem_cap = cluster->gpu.memory_bytes;
  if (spec->mem_cap > 0 && (plan->mem_cap <= 0 || spec->mem_cap < plan->mem_cap))
    plan->mem_cap = spec->mem_cap;
  plan->configs = st_plan_expand_listed(plan, error);
  if (plan->configs == NULL)
    return NULL;
  int n = (int)plan->configs->len;
  plan->points = g_new0(StPlanPoint, MAX(n, 1));
  plan->counts.configurations = n;
  plan->threads = spec->threads > 0 ? spec->threads : (int)g_get_num_processors();

  g_autofree gboolean *decided = g_new0(gboolean, MAX(n, 1));
  g_autofree int *owner = g_new0(int, MAX(n, 1));
  g_autoptr(StPlanClosedCache) closed = st_plan_closed_cache_new(model);
  Run run = {
    .closed = closed,
    .dist = dist,
    .owner = owner,
    .plan = plan,
    .profile = profile,
    .done = g_async_queue_new(),
    .arrays = g_async_queue_new_full((GDestroyNotify)st_timeline_arrays_free),
    .decided = decided,
    .progress = progress,
    .data = data,
    .start_us = g_get_monotonic_time(),
  };
  if (plan->threads > 1) {
    run.pool = g_thread_pool_new(worker, &run, plan->threads, TRUE, error);
    if (run.pool == NULL) {
      g_async_queue_unref(run.done);
      g_async_queue_unref(run.arrays);
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
      st_plan_point_refuse(pt, ST_PLAN_INFEASIBLE, "uses %d GPUs, over the --gpu-budget of %d", c->gpus,
                 spec->gpu_budget);
      decide(&run, i);
    } else {
      g_array_append_val(todo, i);
    }
  }
  report(&run);
  gint64 t1 = g_get_monotonic_time();
  guint kept = 0;
  for (guint k = 0; k < todo->len; k++) {
    int i = g_array_index(todo, int, k);
    prepare(&run, i);
    if (plan->points[i].status != ST_PLAN_OK)
      decide(&run, i);
    else
      g_array_index(todo, int, kept++) = i;
  }
  g_array_set_size(todo, kept);
  report(&run);
  gint64 t2 = g_get_monotonic_time();
  search(&run, todo);
  g_debug("plan: expand %.3f s, prepare %.3f s, search %.3f s (%d configurations, %d simulated)",
          (t1 - t0) / 1e6, (t2 - t1) / 1e6, (g_get_monotonic_time() - t2) / 1e6, n,
          plan->counts.simulated);

  if (run.pool != NULL)
    g_thread_pool_free(run.pool, FALSE, TRUE);
  g_async_queue_unref(run.done);
  g_async_queue_unref(run.arrays);
  if (run.failed != NULL) {
    g_propagate_error(error, run.failed);
    return NULL;
  }
  st_plan_rank(plan);
  plan->seconds = (g_get_monotonic_time() - t0) / 1e6;
  return g_steal_pointer(&plan);
}

void
st_plan_free(StPlan *plan)
{
  if (plan == NULL)
    return;
  for (guint i = 0; plan->points != NULL && plan->configs != NULL && i < plan->configs->len; i++)
    st_plan_point_clear(&plan->points[i]);
  g_free(plan->points);
  if (plan->configs != NULL)
    g_array_unref(plan->configs);
  if (plan->ranking != NULL)
    g_array_unref(plan->ranking);
  if (plan->unlisted != NULL)
    g_array_unref(plan->unlisted);
  if (plan->strings != NULL)
    g_string_chunk_free(plan->strings);
  st_cluster_free(plan->kept_nodes);
  g_free(plan);
}

int
st_plan_winner(const StPlan *plan)
{
  return plan->ranking != NULL && plan->ranking->len > 0 ? g_array_index(plan->ranking, int, 0)
                                                         : -1;
}

/* The best point with another schedule than the winner's (a twin of it,
 * same_as, would explain nothing). */
int
st_plan_runner_up(const StPlan *plan)
{
  int w = st_plan_winner(plan);
  if (w < 0)
    return -1;
  int ws = plan->points[w].same_as >= 0 ? plan->points[w].same_as : w;
  for (guint k = 1; k < plan->ranking->len; k++) {
    int i = g_array_index(plan->ranking, int, k);
    if ((plan->points[i].same_as >= 0 ? plan->points[i].same_as : i) != ws)
      return i;
  }
  return -1;
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
