/* runs.h: a table of measured training runs, each a configuration stagger
 * can simulate (model, cluster, strategy, options) with what was measured
 * (step time, per-GPU memory) and where the measurement comes from. `stagger
 * calibrate` fits a calibration (cost/calibration.h) on some of them and
 * checks it on the others; docs/FORMATS.md ("runs") has the format.
 *
 *   {"format": "stagger-runs", "version": 1, "note": "...",
 *    "runs": [
 *      {"id": "narayanan21-gpt-18.4b", "set": "held-out",
 *       "source": "Narayanan et al., SC 2021, table 1",
 *       "model": "tests/data/validation/megatron-gpt-18.4b.json",
 *       "cluster": "models/clusters/dgx-a100.json",
 *       "strategy": "megatron",
 *       "options": {"nodes": 32, "tensor-parallel": 8, "global-batch": 1024,
 *                   "micro-batch": 1, "recompute": "full", "precision": "mixed"},
 *       "measured": {"step_time_s": 12.36, "memory": "61GiB", "memory_kind": "reserved"},
 *       "note": "how the step time follows from the published figure"}]}
 *
 * `set` is "calibration" (a fit may use the run), "held-out" (it may not)
 * or "excluded" (shown with its error, counted in neither: its `note` must
 * name the mechanism the model lacks); default calibration. `options` are the shared options by their
 * command-line names (strategy/options.h), values as numbers, strings or
 * booleans. Paths are relative to the runs file's folder, else to
 * $STAGGER_DATA_DIR (default: the source tree), so a table may name the
 * shipped models and clusters. `memory_kind` says which figure was
 * measured: "allocated" (torch.cuda.max_memory_allocated), "reserved"
 * (max_memory_reserved) or "device" (nvidia-smi); default allocated. A run
 * measures a step time, a memory peak, or both.
 *
 * Ownership: an StRuns owns its runs and their strings.
 */
#pragma once

#include <glib.h>

#include "base/kinds.h"

#define ST_RUNS_ERROR (st_runs_error_quark())
GQuark st_runs_error_quark(void);

typedef enum {
  ST_RUN_CALIBRATION = 0,
  ST_RUN_HELD_OUT,
  ST_RUN_EXCLUDED, /* a mechanism the model lacks decides it (its note says which): predicted
                      and shown, in no set's figures */
  ST_RUN_SETS,
} StRunSet;

typedef struct {
  char *id;
  StRunSet set;
  char *source;       /* where the measurement is published, may be NULL */
  char *note;         /* may be NULL */
  char *model;        /* resolved paths */
  char *cluster;
  char *strategy;     /* registry name */
  GPtrArray *options; /* "name", "value" pairs (char *) as st_options_set reads them */
  double step_time_s; /* measured; 0 when not */
  int64_t memory_bytes; /* measured per-GPU peak; 0 when not */
  StMemoryKind memory_kind;
} StRun;

typedef struct {
  char *path;
  char *note;      /* may be NULL */
  GPtrArray *runs; /* StRun *, owned */
} StRuns;

/* Reads a runs file strictly: unknown keys, duplicate ids, an unknown
 * strategy or option, a run with nothing measured, a missing model or
 * cluster file are errors naming the file and the run. Transfer full. */
StRuns *st_runs_load(const char *path, GError **error);
void st_runs_free(StRuns *runs);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StRuns, st_runs_free)

const char *st_run_set_name(StRunSet set);
/* The framework preset the run runs under: its "framework" option, else
 * its strategy's default (cost/framework.h). */
const char *st_run_framework(const StRun *run);
