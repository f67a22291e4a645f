/* testutil.h: small helpers shared by the test programs. */
#pragma once

#include <glib.h>

/* Absolute path of a file in the source tree ("models/resnet50.json").
 * Transfer full. */
char *st_test_src(const char *relative);

/* A fresh temporary directory, removed with its contents at exit. Transfer full. */
char *st_test_tmpdir(void);

/* Reads a whole file (g_assert on failure). Transfer full. */
char *st_test_read(const char *path, gsize *length);

/* ---- executor tests -------------------------------------------------------- */

#include "exec/exec.h"
#include "model/model.h"

/* A model file of the source tree, loaded (g_assert on failure). Transfer full. */
StModel *st_test_model(const char *relative);

/* Runs `schedule` on the host backend keeping the final weights; `lr` and
 * `seed` 0 take the executor's defaults. g_assert on failure. Transfer full. */
StTimeline *st_test_execute(const StSchedule *schedule, double lr, uint64_t seed,
                            StExecResult *result);

/* Largest |a - b| / (|b| + 1e-3) over every weight of two runs' kept
 * weights (b the reference): 0 when they are equal bit for bit. */
double st_test_weights_differ(const GPtrArray *a, const GPtrArray *b);
