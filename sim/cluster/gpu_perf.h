/* gpu_perf.h: what a GPU achieves, as opposed to its peak: the measured
 * numbers behind the "estimate" compute model (sim/cost/compute_estimate.c)
 * and the "interference" sharing model (sim/cost/share_interference.c).
 *
 * A GPU performance file (models/gpus/NAME.json, docs/FORMATS.md) is data,
 * not code: every section carries the published measurement it comes from
 * in a "source" string, and a section without one is refused. A cluster file
 * names its GPU's file (`gpu.performance`: a path relative to the cluster
 * file, or the object inline, as st_cluster_to_json writes it); a cluster
 * that names none gets models/gpus/default.json, found under
 * $STAGGER_DATA_DIR or in the source tree this was built from.
 *
 *   {"format": "stagger-gpu-performance", "version": 1, "gpu": "A100-SXM4",
 *    "memory":  {"fraction": 0.84, "source": "..."},
 *    "sharing": {"priority_leak": 0.80, "source": "..."}}
 *
 * Invariants: every fraction is in (0, 1]; priority_leak in [0, 1].
 * Ownership: an StGpuPerf is immutable once loaded and reference counted, so
 * cluster copies share it (st_gpu_perf_ref / st_gpu_perf_unref).
 */
#pragma once

#include <glib.h>

struct cJSON;

typedef struct {
  double value;
  char *source;        /* the published measurement it comes from */
} StPerfNumber;

typedef struct {
  char *gpu;           /* the GPU the numbers were measured on ("A100-SXM4", "default") */
  char *path;          /* the file, or NULL when inline */
  char *note;          /* free text, may be NULL */
  /* memory.fraction: the share of the peak memory bandwidth that streaming
   * kernels sustain (a kernel moving bytes at this rate uses the memory
   * system fully, as far as sharing is concerned). */
  StPerfNumber memory_fraction;
  /* sharing.priority_leak: the share of a lower-priority neighbour's
   * slowdown that a higher stream priority does NOT remove (0: priority
   * isolates perfectly; 1: priority does nothing). */
  StPerfNumber priority_leak;
  int refs;
} StGpuPerf;

#define ST_GPU_PERF_ERROR (st_gpu_perf_error_quark())
GQuark st_gpu_perf_error_quark(void);

/* Reads a file; errors name it and the key. Transfer full. */
StGpuPerf *st_gpu_perf_load(const char *path, GError **error);
/* From a parsed object; `origin` names it in messages. Transfer full. */
StGpuPerf *st_gpu_perf_from_json(const struct cJSON *obj, const char *origin, GError **error);
/* models/gpus/default.json under $STAGGER_DATA_DIR, else in the source tree.
 * Transfer full. */
StGpuPerf *st_gpu_perf_load_default(GError **error);
/* The object st_gpu_perf_from_json reads back to equal numbers. Transfer full. */
struct cJSON *st_gpu_perf_to_json(const StGpuPerf *perf);

StGpuPerf *st_gpu_perf_ref(StGpuPerf *perf);
void st_gpu_perf_unref(StGpuPerf *perf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StGpuPerf, st_gpu_perf_unref)
