/* calibration.h: named factors on the cost models' data, fitted to measured
 * runs (`stagger calibrate`, sim/calib/), and the spread of what they left
 * unexplained, which becomes every prediction's interval.
 *
 * The cost models take their numbers from published measurements of each
 * mechanism (the GPU performance files in models/gpus/, the cluster's
 * links). A calibration does not replace them: each parameter multiplies
 * one group of those numbers (the
 * GEMM efficiencies, the links between nodes, ...), 1 meaning "as published".
 * One parameter per framework preset (named as the preset) is the share of
 * the published kernel efficiencies that framework's software reaches: what
 * its runs lose beyond the mechanisms modelled. A parameter may be scoped to
 * one GPU, "NAME@GPU" (the GPU performance file's `gpu`, "megatron@H100-SXM"):
 * it then applies only to clusters of that GPU, on top of NAME's own factor
 * (what a framework reaches of the published efficiencies differs from one
 * GPU generation to the next).
 * st_calibration_apply() gives a cluster the calibrated numbers, so every
 * consumer downstream (strategies' estimates, the engine, the planner, a
 * schedule written to JSON) sees the same figures without knowing about
 * calibration.
 *
 *   {"format": "stagger-calibration", "version": 1,
 *    "note": "...",
 *    "fitted_on": {"runs": "traces/reference/published-runs/runs.json",
 *                  "set": "calibration", "ids": ["..."]},
 *    "parameters": {"gemm": 0.95, "network": 0.9, "megatron@A100-SXM4": 0.97},
 *    "step_time": {"n": 20, "mean": 0.01, "sd": 0.06},
 *    "memory": {"n": 6, "mean": 0.0, "sd": 0.04}}
 *
 * `step_time` and `memory` are the leave-one-out residuals of the fit,
 * ln(measured / predicted) over the runs it was fitted on, each predicted by
 * a fit that did not see it: their mean and standard deviation make the 90 %
 * interval of a prediction x, [x e^(mean - 1.645 sd), x e^(mean + 1.645 sd)]
 * (a log-normal error, as multiplicative errors of a model are). Absent or
 * n < 3: no interval.
 *
 * Invariants: every parameter in its registry range; unknown names refused.
 * Factors live in slots: slot i < st_calib_param_count() is registry
 * parameter i on every GPU; later slots are scoped ones (scope_param,
 * scope_gpu), added by st_calibration_slot.
 * Ownership: StCalibration is a plain value owned by its holder.
 */
#pragma once

#include <glib.h>

#include "cluster/cluster.h"

#define ST_CALIBRATION_ERROR (st_calibration_error_quark())
GQuark st_calibration_error_quark(void);

/* One named parameter: what it multiplies, and its accepted range. */
typedef struct {
  const char *name;    /* "gemm" */
  const char *summary; /* what it scales, one line */
  double min, max;     /* accepted values of the factor */
  /* Multiplies the cluster's numbers by `factor` (efficiencies stay <= 1);
   * `arg` is the entry's own. */
  void (*apply)(StCluster *cluster, double factor, const char *arg);
  const char *arg;
} StCalibParam;

/* The registry, terminated by an entry with name NULL. */
const StCalibParam *st_calib_params(void);
int st_calib_param_count(void);
/* Index in the registry, or -1. */
int st_calib_param_index(const char *name);

#define ST_CALIB_MAX_PARAMS 32 /* slots: the registry's and the scoped ones */
#define ST_CALIB_Z90 1.6448536269514722 /* the normal's 95th percentile: a 90 % interval */

/* The spread of ln(measured / predicted) over n runs. */
typedef struct {
  int n;
  double mean, sd;
} StResiduals;

typedef struct {
  double factor[ST_CALIB_MAX_PARAMS]; /* by slot; 1 = as published */
  gboolean set[ST_CALIB_MAX_PARAMS];  /* given in the file (or fitted) */
  int scope_param[ST_CALIB_MAX_PARAMS]; /* scoped slots: the registry parameter */
  char *scope_gpu[ST_CALIB_MAX_PARAMS]; /* scoped slots: the GPU, owned; NULL below */
  int n_slots;                          /* registry count + scoped slots in use */
  StResiduals step, memory;
  char *path;        /* the file it came from, or NULL */
  char *note;        /* free text, may be NULL */
  char *runs;        /* fitted_on.runs, may be NULL */
  char *run_set;     /* fitted_on.set, may be NULL */
  GPtrArray *ids;    /* fitted_on.ids (char *), owned, may be NULL */
} StCalibration;

/* Every factor 1, no residuals. */
void st_calibration_init(StCalibration *calib);
void st_calibration_clear(StCalibration *calib);
void st_calibration_copy(StCalibration *dst, const StCalibration *src);
/* Reads a file strictly; errors name it and the key. `calib` is initialized
 * here (cleared on failure). */
gboolean st_calibration_load(const char *path, StCalibration *calib, GError **error);
gboolean st_calibration_save(const StCalibration *calib, const char *path, GError **error);
/* The shipped default, models/calibration/default.json under
 * $STAGGER_DATA_DIR or in the source tree; FALSE (no error) when it is
 * absent, so a build without data predicts from the published numbers
 * alone. */
gboolean st_calibration_load_default(StCalibration *calib, GError **error);

/* The slot of `name` ("gemm", "pytorch@A100-SXM4"), added (at factor 1,
 * not set) when a scoped one is new; -1 with an error naming the known
 * parameters when the parameter is unknown or no slot is left. */
int st_calibration_slot(StCalibration *calib, const char *name, GError **error);
/* The slot's registry parameter. */
const StCalibParam *st_calibration_slot_param(const StCalibration *calib, int slot);
/* "pytorch" or "pytorch@A100-SXM4". Transfer full. */
char *st_calibration_slot_name(const StCalibration *calib, int slot);
/* Whether the slot's factor can change a prediction for `cluster` under the
 * framework preset named `framework`: a framework's parameter only its
 * runs, a scoped one only its GPU's. */
gboolean st_calibration_slot_touches(const StCalibration *calib, int slot,
                                     const StCluster *cluster, const char *framework);

/* Applies every factor that differs from 1 to `cluster` (its GPU
 * performance file becomes a private copy with the calibrated numbers). */
void st_calibration_apply(const StCalibration *calib, StCluster *cluster);
/* Whether any factor differs from 1. */
gboolean st_calibration_active(const StCalibration *calib);
/* "gemm x0.95, network x0.90", or "none". Transfer full. */
char *st_calibration_describe(const StCalibration *calib);

/* The 90 % interval of a prediction `x` from residuals `r`: FALSE (lo = hi
 * = x) when fewer than 3 runs stand behind it. */
gboolean st_residuals_interval(const StResiduals *r, double x, double *lo, double *hi);
/* How far predictions with residuals `r` have been off on real runs, in
 * words for a summary: "on the 40 published runs behind the calibration,
 * each left out of its fit, the predicted step was off by 13 % rms, bias
 * +1 % (docs/VALIDATION.md)", or that no calibration stands behind it.
 * Transfer full. */
char *st_residuals_describe(const StResiduals *r);
/* Mean and standard deviation (n - 1) of ln(measured / predicted) over n pairs. */
StResiduals st_residuals_of(const double *log_ratio, int n);
