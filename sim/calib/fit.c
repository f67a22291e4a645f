/* fit.c: predicting runs and fitting a calibration (see fit.h). */
#include "calib/fit.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "engine/engine.h"
#include "output/output.h"
#include "strategy/options.h"
#include "strategy/strategy.h"

#define STEP_H 0.05 /* ln-factor step of the forward differences */

struct StPredictor {
  const StRuns *runs; /* borrowed */
  int threads;
  StModel **models;     /* [runs] */
  StCluster **clusters; /* [runs], as in their files */
};

void
st_run_prediction_clear(StRunPrediction *p)
{
  g_free(p->error);
  memset(p, 0, sizeof *p);
}

StPredictor *
st_predictor_new(const StRuns *runs, int threads, GError **error)
{
  g_return_val_if_fail(runs != NULL && threads >= 1, NULL);
  g_autoptr(StPredictor) p = g_new0(StPredictor, 1);
  guint n = runs->runs->len;
  p->runs = runs;
  p->threads = threads;
  p->models = g_new0(StModel *, n);
  p->clusters = g_new0(StCluster *, n);
  for (guint i = 0; i < n; i++) {
    const StRun *r = g_ptr_array_index(runs->runs, i);
    if ((p->models[i] = st_model_load(r->model, error)) == NULL ||
        (p->clusters[i] = st_cluster_load(r->cluster, error)) == NULL) {
      g_prefix_error(error, "%s: run '%s': ", runs->path, r->id);
      return NULL;
    }
  }
  return g_steal_pointer(&p);
}

const StCluster *
st_predictor_cluster(const StPredictor *p, int run)
{
  return p->clusters[run];
}

void
st_predictor_free(StPredictor *p)
{
  if (p == NULL)
    return;
  for (guint i = 0; p->runs != NULL && i < p->runs->runs->len; i++) {
    if (p->models != NULL)
      st_model_free(p->models[i]);
    if (p->clusters != NULL)
      st_cluster_free(p->clusters[i]);
  }
  g_free(p->models);
  g_free(p->clusters);
  g_free(p);
}

/* ---- one prediction --------------------------------------------------------- */

static gboolean
predict_one(const StPredictor *p, int i, const StCalibration *calib, StRunPrediction *out,
            GError **error)
{
  const StRun *run = g_ptr_array_index(p->runs->runs, i);
  StOptions o;
  st_options_init(&o);
  gboolean ok = TRUE;
  for (guint k = 0; ok && k + 1 < run->options->len; k += 2)
    ok = st_options_set(&o, g_ptr_array_index(run->options, k),
                        g_ptr_array_index(run->options, k + 1), error);
  g_autoptr(StCluster) cluster = ok ? st_cluster_copy(p->clusters[i]) : NULL;
  if (ok) {
    st_calibration_apply(calib, cluster);
    ok = st_cluster_resize(cluster, o.nodes, o.gpus, error);
  }
  g_autoptr(StSchedule) schedule =
    ok ? st_strategy_build(st_strategy_find(run->strategy), p->models[i], cluster, NULL, &o,
                           error)
       : NULL;
  g_autoptr(StTimeline) timeline = NULL;
  if (schedule != NULL) {
    StEngineOptions eo = {NULL, o.comm_algo, o.share_model, FALSE, NULL};
    StEngineStats stats = {0};
    timeline = st_simulate(schedule, &eo, &stats, error);
    st_engine_stats_clear(&stats);
  }
  st_options_clear(&o);
  if (timeline == NULL)
    return FALSE;
  g_autoptr(StSummary) summary = st_summary_new(timeline);
  out->step_time_s = (double)summary->step_time_ns / 1e9;
  out->memory_bytes = st_summary_memory_peak(summary, run->memory_kind);
  out->oom = summary->oom != NULL;
  out->ok = out->step_time_s > 0;
  if (!out->ok)
    g_set_error(error, ST_RUNS_ERROR, ST_ERROR_FAILED, "the simulated step took no time");
  return out->ok;
}

typedef struct {
  const StPredictor *p;
  int run;
  const StCalibration *calib;
  StRunPrediction *out;
} Task;

static void
task_run(gpointer data, gpointer user)
{
  (void)user;
  Task *t = data;
  g_autoptr(GError) error = NULL;
  st_run_prediction_clear(t->out);
  if (!predict_one(t->p, t->run, t->calib, t->out, &error)) {
    t->out->ok = FALSE;
    t->out->error = g_strdup(error != NULL ? error->message : "failed");
  }
}

/* Runs the tasks on the predictor's threads and waits for them. */
static void
run_tasks(const StPredictor *p, Task *tasks, int n)
{
  if (n == 0)
    return;
  if (p->threads <= 1 || n == 1) {
    for (int i = 0; i < n; i++)
      task_run(&tasks[i], NULL);
    return;
  }
  GThreadPool *pool = g_thread_pool_new(task_run, NULL, MIN(p->threads, n), TRUE, NULL);
  for (int i = 0; i < n; i++)
    g_thread_pool_push(pool, &tasks[i], NULL);
  g_thread_pool_free(pool, FALSE, TRUE);
}

void
st_predictor_run(StPredictor *p, const StCalibration *calib, const gboolean *which,
                 StRunPrediction *out)
{
  int n = (int)p->runs->runs->len, m = 0;
  g_autofree Task *tasks = g_new(Task, n);
  for (int i = 0; i < n; i++)
    if (which == NULL || which[i])
      tasks[m++] = (Task){p, i, calib, &out[i]};
  run_tasks(p, tasks, m);
}

/* ---- the fit ----------------------------------------------------------------- */

typedef struct {
  StPredictor *p;
  const StFitOptions *o;
  int n;              /* runs */
  int m;              /* fitted runs */
  int *rows;          /* [m]: their indices */
  double *log_meas;   /* [m] */
  double lo[ST_CALIB_MAX_PARAMS], hi[ST_CALIB_MAX_PARAMS]; /* bounds on x = ln factor */
  int done, total;    /* simulations, for progress */
} Fit;

static void
progress(Fit *f, const char *phase)
{
  if (f->o->progress != NULL)
    f->o->progress(phase, f->done, f->total, f->o->progress_data);
}

/* The calibration `base` with x for the fitted parameters. */
static void
with_x(const Fit *f, const StCalibration *base, const double *x, StCalibration *out)
{
  *out = *base; /* shallow: only factors are read by predictions */
  for (int j = 0; j < f->o->n_params; j++)
    out->factor[f->o->params[j]] = exp(x[j]);
}

/* ln predicted step of every fitted run at each of `k` points x[k]: out[k][r].
 * A run whose skip[k m + r] is set is not simulated: its ln step is same[r]
 * (skip NULL: every run simulated). FALSE when a run fails at any point. */
static gboolean
predict_points(Fit *f, const StCalibration *base, double x[][ST_CALIB_MAX_PARAMS], int k,
               const gboolean *skip, const double *same, double **out, GError **error)
{
  g_autofree StCalibration *calibs = g_new(StCalibration, k);
  g_autofree StRunPrediction *pred = g_new0(StRunPrediction, (gsize)k * f->m);
  g_autofree Task *tasks = g_new(Task, (gsize)k * f->m);
  int n = 0;
  for (int a = 0; a < k; a++) {
    with_x(f, base, x[a], &calibs[a]);
    for (int r = 0; r < f->m; r++)
      if (skip == NULL || !skip[a * f->m + r])
        tasks[n++] = (Task){f->p, f->rows[r], &calibs[a], &pred[a * f->m + r]};
  }
  run_tasks(f->p, tasks, n);
  f->done += n;
  gboolean ok = TRUE;
  for (int i = 0; i < k * f->m; i++) {
    if (skip != NULL && skip[i]) {
      out[i / f->m][i % f->m] = same[i % f->m];
      continue;
    }
    if (ok && !pred[i].ok) {
      const StRun *run = g_ptr_array_index(f->p->runs->runs, f->rows[i % f->m]);
      g_set_error(error, ST_RUNS_ERROR, ST_ERROR_FAILED, "run '%s': %s", run->id,
                  pred[i].error ? pred[i].error : "failed");
      ok = FALSE;
    }
    if (ok)
      out[i / f->m][i % f->m] = log(pred[i].step_time_s);
    st_run_prediction_clear(&pred[i]);
  }
  return ok;
}

static double
cost_of(const Fit *f, const double *logp)
{
  double c = 0;
  for (int r = 0; r < f->m; r++)
    c += (f->log_meas[r] - logp[r]) * (f->log_meas[r] - logp[r]);
  return c;
}

/* Solves A x = b (n x n, row-major, overwritten) by Gaussian elimination
 * with partial pivoting; a singular pivot gives 0 for that unknown. */
static void
solve(double *A, double *b, double *x, int n)
{
  for (int c = 0; c < n; c++) {
    int piv = c;
    for (int r = c + 1; r < n; r++)
      if (fabs(A[r * n + c]) > fabs(A[piv * n + c]))
        piv = r;
    for (int k = 0; k < n && piv != c; k++) {
      double t = A[c * n + k];
      A[c * n + k] = A[piv * n + k];
      A[piv * n + k] = t;
    }
    double tb = b[c];
    b[c] = b[piv];
    b[piv] = tb;
    if (fabs(A[c * n + c]) < 1e-300)
      continue;
    for (int r = c + 1; r < n; r++) {
      double m = A[r * n + c] / A[c * n + c];
      for (int k = c; k < n; k++)
        A[r * n + k] -= m * A[c * n + k];
      b[r] -= m * b[c];
    }
  }
  for (int c = n - 1; c >= 0; c--) {
    double s = b[c];
    for (int k = c + 1; k < n; k++)
      s -= A[c * n + k] * x[k];
    x[c] = fabs(A[c * n + c]) < 1e-300 ? 0 : s / A[c * n + c];
  }
}

/* The damped normal equations over the fitted runs but `skip` (-1: none):
 * (J'J + lambda diag(J'J) + eps) dx = J'r. */
static void
step_of(const Fit *f, double **J, const double *r, int skip, double lambda, double *dx)
{
  int P = f->o->n_params;
  double A[ST_CALIB_MAX_PARAMS * ST_CALIB_MAX_PARAMS] = {0}, b[ST_CALIB_MAX_PARAMS] = {0};
  for (int i = 0; i < f->m; i++) {
    if (i == skip)
      continue;
    for (int a = 0; a < P; a++) {
      b[a] += J[i][a] * r[i];
      for (int c = 0; c < P; c++)
        A[a * P + c] += J[i][a] * J[i][c];
    }
  }
  for (int a = 0; a < P; a++)
    A[a * P + a] += lambda * A[a * P + a] + 1e-9;
  solve(A, b, dx, P);
}

static void
clamp_x(const Fit *f, double *x)
{
  for (int j = 0; j < f->o->n_params; j++)
    x[j] = CLAMP(x[j], f->lo[j], f->hi[j]);
}

/* Jacobian at x (whose predictions are logp): J[i][j]. */
static gboolean
jacobian(Fit *f, const StCalibration *base, const double *x, const double *logp, double **J,
         GError **error)
{
  int P = f->o->n_params;
  double pts[ST_CALIB_MAX_PARAMS][ST_CALIB_MAX_PARAMS];
  g_autofree double *buf = g_new(double, (gsize)P * f->m);
  g_autofree double **rows = g_new(double *, P);
  for (int j = 0; j < P; j++) {
    memcpy(pts[j], x, sizeof(double) * ST_CALIB_MAX_PARAMS);
    /* Step inward at an upper bound. */
    pts[j][j] = x[j] + STEP_H <= f->hi[j] ? x[j] + STEP_H : x[j] - STEP_H;
    rows[j] = buf + (gsize)j * f->m;
  }
  /* A parameter that cannot touch a run (another framework's, another
   * GPU's) leaves its prediction as it is: not simulated. */
  g_autofree gboolean *skip = g_new(gboolean, (gsize)P * f->m);
  for (int j = 0; j < P; j++)
    for (int i = 0; i < f->m; i++)
      skip[j * f->m + i] = !st_calibration_slot_touches(
        base, f->o->params[j], st_predictor_cluster(f->p, f->rows[i]),
        st_run_framework(g_ptr_array_index(f->p->runs->runs, f->rows[i])));
  progress(f, "elasticities");
  if (!predict_points(f, base, pts, P, skip, logp, rows, error))
    return FALSE;
  for (int j = 0; j < P; j++)
    for (int i = 0; i < f->m; i++)
      J[i][j] = (rows[j][i] - logp[i]) / (pts[j][j] - x[j]);
  return TRUE;
}

void
st_fit_result_clear(StFitResult *res)
{
  st_calibration_clear(&res->calib);
  for (int i = 0; res->pred != NULL && i < res->n_runs; i++)
    st_run_prediction_clear(&res->pred[i]);
  g_free(res->pred);
  g_free(res->loo_step_s);
  g_free(res->fitted);
  memset(res, 0, sizeof *res);
}

/* Levenberg-Marquardt from x; leaves the fitted x, its predictions and J. */
static gboolean
minimise(Fit *f, const StCalibration *base, double *x, double *logp, double **J, int *iters,
         GError **error)
{
  int P = f->o->n_params, max_it = f->o->max_iterations > 0 ? f->o->max_iterations : 8;
  double lambda = 1e-3, cost = cost_of(f, logp);
  g_autofree double *r = g_new(double, f->m);
  g_autofree double *trial = g_new(double, f->m);
  for (*iters = 0; *iters < max_it; (*iters)++) {
    f->total = f->done + (P + 1) * f->m;
    if (!jacobian(f, base, x, logp, J, error))
      return FALSE;
    for (int i = 0; i < f->m; i++)
      r[i] = f->log_meas[i] - logp[i];
    gboolean moved = FALSE;
    double largest = 0;
    for (int tries = 0; tries < 6 && !moved; tries++) {
      double dx[ST_CALIB_MAX_PARAMS] = {0}, xt[ST_CALIB_MAX_PARAMS][ST_CALIB_MAX_PARAMS];
      step_of(f, J, r, -1, lambda, dx);
      memcpy(xt[0], x, sizeof xt[0]);
      for (int j = 0; j < P; j++)
        xt[0][j] += dx[j];
      clamp_x(f, xt[0]);
      largest = 0;
      for (int j = 0; j < P; j++)
        largest = MAX(largest, fabs(xt[0][j] - x[j]));
      if (largest < 1e-4)
        break;
      progress(f, "trying a step");
      if (!predict_points(f, base, xt, 1, NULL, NULL, &trial, error))
        return FALSE;
      double c = cost_of(f, trial);
      if (c < cost) {
        memcpy(x, xt[0], sizeof(double) * P);
        memcpy(logp, trial, sizeof(double) * f->m);
        cost = c;
        lambda = MAX(lambda / 3, 1e-6);
        moved = TRUE;
      } else {
        lambda *= 8;
      }
    }
    if (!moved || largest < 1e-3)
      break;
  }
  /* The Jacobian at the point reached, for the leave-one-out steps. */
  return jacobian(f, base, x, logp, J, error);
}

gboolean
st_calibration_fit(StPredictor *p, const StCalibration *start, const StFitOptions *o,
                   StFitResult *res, GError **error)
{
  memset(res, 0, sizeof *res);
  int n = (int)p->runs->runs->len, P = o->n_params;
  g_return_val_if_fail(P >= 0 && P <= ST_CALIB_MAX_PARAMS, FALSE);
  res->n_runs = n;
  res->pred = g_new0(StRunPrediction, n);
  res->loo_step_s = g_new0(double, n);
  res->fitted = g_new0(gboolean, n);
  st_calibration_copy(&res->calib, start);
  Fit f = {p, o, n, 0, g_new(int, n), g_new(double, n), {0}, {0}, 0, 0};
  g_autofree int *rows = f.rows;
  g_autofree double *log_meas = f.log_meas;
  for (int j = 0; j < P; j++) {
    const StCalibParam *param = st_calibration_slot_param(start, o->params[j]);
    f.lo[j] = log(MAX(param->min, 1e-3));
    f.hi[j] = log(param->max);
  }
  /* Every run at the start: which can be fitted, and the start's predictions. */
  f.total = n;
  progress(&f, "predicting every run");
  st_predictor_run(p, &res->calib, NULL, res->pred);
  f.done = n;
  for (int i = 0; i < n; i++) {
    const StRun *run = g_ptr_array_index(p->runs->runs, i);
    if (run->set == ST_RUN_CALIBRATION && run->step_time_s > 0 && res->pred[i].ok) {
      res->fitted[i] = TRUE;
      f.rows[f.m] = i;
      f.log_meas[f.m++] = log(run->step_time_s);
    }
  }
  if (P > 0 && f.m < P + 1) {
    g_set_error(error, ST_RUNS_ERROR, ST_ERROR_INVALID,
                "%s: %d calibration run%s with a measured step time that simulate%s, too "
                "few to fit %d parameter%s (at least %d)",
                p->runs->path, f.m, f.m == 1 ? "" : "s", f.m == 1 ? "s" : "", P,
                P == 1 ? "" : "s", P + 1);
    return FALSE;
  }
  double x[ST_CALIB_MAX_PARAMS] = {0};
  for (int j = 0; j < P; j++)
    x[j] = CLAMP(log(start->factor[o->params[j]]), f.lo[j], f.hi[j]);
  g_autofree double *logp = g_new(double, MAX(f.m, 1));
  g_autofree double *Jbuf = g_new0(double, (gsize)MAX(f.m, 1) * MAX(P, 1));
  g_autofree double **J = g_new(double *, MAX(f.m, 1));
  for (int i = 0; i < f.m; i++) {
    J[i] = Jbuf + (gsize)i * MAX(P, 1);
    logp[i] = log(res->pred[f.rows[i]].step_time_s);
  }
  /* The start's own factors, clamped, may differ from what was predicted. */
  gboolean clamped = FALSE;
  for (int j = 0; j < P; j++)
    clamped = clamped || fabs(x[j] - log(start->factor[o->params[j]])) > 1e-12;
  if (clamped && !predict_points(&f, &res->calib, (double(*)[ST_CALIB_MAX_PARAMS])x, 1, NULL,
                                 NULL, &logp, error))
    return FALSE;
  if (P > 0 && !minimise(&f, &res->calib, x, logp, J, &res->iterations, error))
    return FALSE;
  for (int j = 0; j < P; j++) {
    res->calib.factor[o->params[j]] = exp(x[j]);
    res->calib.set[o->params[j]] = TRUE;
  }
  /* Every run at the fitted factors. */
  if (P > 0) {
    f.total = f.done + n;
    progress(&f, "predicting every run");
    st_predictor_run(p, &res->calib, NULL, res->pred);
    f.done += n;
  }
  /* Leave one out: each fitted run predicted by the fit on the others. */
  g_autofree double *loo = g_new(double, MAX(f.m, 1));
  g_autofree double *r = g_new(double, MAX(f.m, 1));
  for (int i = 0; i < f.m; i++)
    r[i] = f.log_meas[i] - logp[i];
  if (P > 0) {
    g_autofree StCalibration *calibs = g_new(StCalibration, f.m);
    g_autofree StRunPrediction *pred = g_new0(StRunPrediction, f.m);
    g_autofree Task *tasks = g_new(Task, f.m);
    for (int k = 0; k < f.m; k++) {
      double dx[ST_CALIB_MAX_PARAMS] = {0}, xk[ST_CALIB_MAX_PARAMS];
      step_of(&f, J, r, k, 0, dx);
      for (int j = 0; j < P; j++)
        xk[j] = x[j] + dx[j];
      clamp_x(&f, xk);
      with_x(&f, &res->calib, xk, &calibs[k]);
      tasks[k] = (Task){p, f.rows[k], &calibs[k], &pred[k]};
    }
    f.total = f.done + f.m;
    progress(&f, "leaving one out");
    run_tasks(p, tasks, f.m);
    for (int k = 0; k < f.m; k++) {
      if (!pred[k].ok) {
        const StRun *run = g_ptr_array_index(p->runs->runs, f.rows[k]);
        g_set_error(error, ST_RUNS_ERROR, ST_ERROR_FAILED, "run '%s' left out: %s", run->id,
                    pred[k].error ? pred[k].error : "failed");
        for (int j = k; j < f.m; j++)
          st_run_prediction_clear(&pred[j]);
        return FALSE;
      }
      res->loo_step_s[f.rows[k]] = pred[k].step_time_s;
      st_run_prediction_clear(&pred[k]);
    }
  } else {
    for (int k = 0; k < f.m; k++)
      res->loo_step_s[f.rows[k]] = res->pred[f.rows[k]].step_time_s;
  }
  for (int k = 0; k < f.m; k++)
    loo[k] = f.log_meas[k] - log(res->loo_step_s[f.rows[k]]);
  res->calib.step = st_residuals_of(loo, f.m);
  /* Memory: the calibration runs' errors (no factor moves memory). */
  g_autofree double *mem = g_new(double, n);
  g_autofree gboolean *used = g_new0(gboolean, n);
  for (int k = 0; k < f.m; k++)
    used[f.rows[k]] = TRUE;
  int nm = 0;
  for (int i = 0; i < n; i++) {
    const StRun *run = g_ptr_array_index(p->runs->runs, i);
    if (run->set == ST_RUN_CALIBRATION && run->memory_bytes > 0 && res->pred[i].ok &&
        res->pred[i].memory_bytes > 0) {
      mem[nm++] = log((double)run->memory_bytes / (double)res->pred[i].memory_bytes);
      used[i] = TRUE;
    }
  }
  res->calib.memory = st_residuals_of(mem, nm);
  /* What it was fitted on: the step times' runs and the memory peaks'. */
  g_clear_pointer(&res->calib.ids, g_ptr_array_unref);
  res->calib.ids = g_ptr_array_new_with_free_func(g_free);
  for (int i = 0; i < n; i++)
    if (used[i])
      g_ptr_array_add(res->calib.ids,
                      g_strdup(((StRun *)g_ptr_array_index(p->runs->runs, i))->id));
  g_free(res->calib.runs);
  res->calib.runs = g_strdup(p->runs->path);
  g_free(res->calib.run_set);
  res->calib.run_set = g_strdup("calibration");
  g_clear_pointer(&res->calib.path, g_free);
  return TRUE;
}
