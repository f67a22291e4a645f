/* dataset.h: a real, small labelled data set for the executor (`stagger run
 * --data FILE`), in place of the synthetic task of exec/data.c, and the
 * held-out evaluation of a model's weights on it.
 *
 * The file is CSV, one sample a row: the features, then an integer class
 * label in [0, classes) as the last column (the UCI optical digits format:
 * 64 pixel counts 0..16 and the digit). A first line that does not parse
 * as numbers is a header and skipped. Features are divided by the largest
 * |feature| of the file, so they lie in [-1, 1] as the synthetic inputs do.
 *
 * Split and order, both deterministic: the rows are shuffled once by a
 * generator of a fixed seed (not --seed: every run evaluates on the same
 * rows) and the last `heldout` fraction of them is held out. Training sample
 * g (exec/data.c's global sample index) is row train[perm_e(g mod n)] of
 * epoch e = g / n, perm_e an affine permutation (a i + b) mod n with a
 * coprime to n, drawn from --seed and e: every strategy sees the same
 * samples in the same order, and a run is reproducible.
 *
 * Immutable after loading: threads read it without locks.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "model/model.h"

typedef struct StDataset {
  char *path;          /* as given */
  int n_features;      /* columns before the label */
  int classes;         /* largest label + 1 */
  float scale;         /* what the features were divided by */
  int n_rows;
  float *x;            /* [n_rows, n_features], scaled */
  int32_t *y;          /* [n_rows] */
  int n_train, n_heldout;
  int32_t *train;      /* [n_train]: rows of the training split */
  int32_t *heldout;    /* [n_heldout]: rows held out */
} StDataset;

/* Fraction of the rows held out by st_dataset_load. */
#define ST_DATASET_HELDOUT 0.2

/* Loads `path` (G_FILE_ERROR when unreadable; ST_EXEC_ERROR_UNSUPPORTED with
 * the line and column when a row is malformed, rows differ in width, or the
 * file has fewer than 10 rows). Transfer full. */
StDataset *st_dataset_load(const char *path, GError **error);
void st_dataset_free(StDataset *ds);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StDataset, st_dataset_free)

/* Whether `model` can train on it: its input is n_features values (not
 * token ids) and its loss has at least `classes` classes, one position. */
gboolean st_dataset_fits(const StDataset *ds, const StModel *model, GError **error);

/* The row of training sample g for `seed` (see the top). */
int32_t st_dataset_train_row(const StDataset *ds, uint64_t seed, uint64_t g);

/* Held-out mean cross-entropy and top-1 accuracy (fraction) of `model` with
 * `weights` (per layer a GArray of float, as StExecResult.weights; borrowed):
 * an fp32 forward on the host kernels, in batches. */
gboolean st_dataset_evaluate(const StDataset *ds, const StModel *model,
                             const GPtrArray *weights, double *loss, double *accuracy,
                             GError **error);
