/* fit.h: predicting measured runs (runs.h) under a calibration
 * (cost/calibration.h), and fitting the calibration's factors to them.
 *
 * Prediction: each run is built (its strategy, model, cluster resized by its
 * options, the calibration applied to the cluster) and simulated as `stagger
 * sim` would, with the estimate compute model and no profile; runs go on a
 * thread pool, one engine per thread.
 *
 * The fit (Levenberg-Marquardt on ln time): the chosen factors theta
 * minimise sum over the fitted runs of (ln measured - ln predicted(theta))^2,
 * with x = ln theta. The Jacobian is the predictions' elasticities,
 * d ln predicted / d x_j, by forward differences of h = 0.05 (one
 * simulation per run and parameter the run can feel: a framework's factor
 * moves only its runs, a factor scoped to a GPU only that GPU's, and the
 * others' elasticities are 0 without simulating); a step solves
 * (J'J + lambda diag(J'J)) dx = J'r and is kept only if it lowers the sum.
 * Factors stay in their registry ranges. A fit costs at most (P + 2)
 * simulations per run and iteration, P the parameters fitted.
 *
 * Leave-one-out: for each fitted run k, the factors a fit without k would
 * reach, one Gauss-Newton step from the full fit on the other runs'
 * residuals and Jacobian (the standard linearised LOO), and then run k
 * simulated at those factors: its error is one the fit never saw. The
 * calibration's step_time residuals are these; memory residuals are the
 * fitted runs' memory errors (no factor touches memory).
 *
 * No global state; the predictor is used from one thread at a time (it runs
 * its own pool).
 */
#pragma once

#include <glib.h>

#include "calib/runs.h"
#include "cost/calibration.h"

typedef struct {
  gboolean ok;
  char *error;          /* why it could not be predicted; NULL when ok */
  double step_time_s;   /* predicted steady step */
  int64_t memory_bytes; /* predicted per-GPU peak, the figure the run measured */
  gboolean oom;         /* predicted not to fit on its GPUs */
} StRunPrediction;

void st_run_prediction_clear(StRunPrediction *p);

typedef struct StPredictor StPredictor;

/* Loads every run's model and cluster once. `threads` >= 1. Transfer full. */
StPredictor *st_predictor_new(const StRuns *runs, int threads, GError **error);
void st_predictor_free(StPredictor *predictor);
/* Run `run`'s cluster as its file gives it (before options and calibration). */
const StCluster *st_predictor_cluster(const StPredictor *predictor, int run);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StPredictor, st_predictor_free)

/* Predicts the runs whose `which[i]` is TRUE (NULL: all) under `calib` into
 * out[i] (cleared first; others untouched). A run that fails to build or
 * simulate says why in out[i].error. */
void st_predictor_run(StPredictor *predictor, const StCalibration *calib, const gboolean *which,
                      StRunPrediction *out);

/* Called from the fitting thread as the work goes: what it does now, and
 * the simulations done out of those it will have made by the end of the
 * current iteration. */
typedef void (*StFitProgress)(const char *phase, int done, int total, gpointer data);

typedef struct {
  int n_params;
  int params[ST_CALIB_MAX_PARAMS]; /* the start calibration's slots to fit */
  int max_iterations;              /* 0: 8 */
  StFitProgress progress;          /* may be NULL */
  gpointer progress_data;
} StFitOptions;

typedef struct {
  StCalibration calib;     /* the start with the fitted factors and the residuals */
  StRunPrediction *pred;   /* [runs]: every run at the fitted factors */
  double *loo_step_s;      /* [runs]: fitted runs, predicted by the fit without them; else 0 */
  gboolean *fitted;        /* [runs]: used by the fit (calibration set, step measured, ok) */
  int iterations;
  int n_runs;
} StFitResult;

void st_fit_result_clear(StFitResult *result);

/* Fits `opts->params` from `start` on the calibration-set runs with a
 * measured step time (held-out runs never enter), then predicts every run
 * at the result and computes the leave-one-out residuals. With no parameter
 * it only predicts, and the residuals are the plain errors of the
 * calibration-set runs. Fails when fewer runs than parameters can be
 * fitted. */
gboolean st_calibration_fit(StPredictor *predictor, const StCalibration *start,
                            const StFitOptions *opts, StFitResult *result, GError **error);
