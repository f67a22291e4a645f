/* validation.h: the cases of a `stagger validate` run and what is written of
 * them: validate.json (every comparison), validate.csv (a row per case) and
 * validate.md (the table for docs/VALIDATION.md), and the table printed.
 *
 * Each case is a strategy at a rank count that either ran (its comparison,
 * output/compare.h) or failed (why). The totals are over the cases that ran:
 * the mean absolute percentage error (MAPE) of step time and the largest
 * memory peak error.
 */
#pragma once

#include <stdio.h>

#include "output/compare.h"

typedef struct {
  char *name;         /* "zero-r4": also its subdirectory */
  char *strategy;
  int ranks;
  char *error;        /* why it failed, or NULL: then `cmp` holds the comparison */
  StComparison cmp;
} StValidationCase;

/* Frees what the case owns (the strings), not the case. */
void st_validation_case_clear(StValidationCase *c);

typedef struct {
  const char *model, *profile, *device; /* borrowed: named in the files */
  GPtrArray *cases;                     /* StValidationCase *, borrowed */
} StValidation;

typedef struct {
  int ran;
  double step_mape;       /* mean |step error| */
  double worst_peak;      /* largest |peak error| */
} StValidationTotals;

StValidationTotals st_validation_totals(const StValidation *v);

/* One case as validate.json lists it (also CASE/validate.json). */
struct cJSON *st_validation_case_to_json(const StValidationCase *c);

/* Writes DIR/validate.json, DIR/validate.csv and DIR/validate.md (DIR made
 * when missing). The cases' own folders are the caller's. */
gboolean st_validation_write(const StValidation *v, const char *dir, GError **error);

/* The table of every case and the totals, as `stagger validate` ends. */
void st_validation_print(const StValidation *v, FILE *out);
