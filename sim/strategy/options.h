/* options.h: the options that `sim`, `schedule`, `run`, `validate` and `plan`
 * share, meaning the same thing everywhere (see docs/ARCHITECTURE.md).
 *
 * The CLI fills one StOptions; st_options_resolve() checks it against the
 * model and cluster and derives what was left implicit (ranks, global batch,
 * accumulation). Strategies read it and never change it.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "base/kinds.h"
#include "cluster/cluster.h"

#define ST_OPTIONS_ERROR (st_options_error_quark())
GQuark st_options_error_quark(void);

typedef struct {
  int nodes;            /* --nodes: copies of the cluster's node; 0 = as in the file */
  int gpus;             /* --gpus: use the first G GPUs; 0 = all */
  int ranks;            /* --ranks: data-parallel workers, round-robin on GPUs; 0 = one per GPU */
  int micro_batch;      /* --micro-batch: samples per micro-batch per rank */
  int64_t global_batch; /* --global-batch: samples per step; 0 = ranks * micro-batch */
  int steps;            /* --steps: training steps to run */
  StOptimizer optimizer;
  StPrecision precision;
  int64_t bucket_bytes; /* --bucket-bytes: gradient bucket size; 0 = one bucket per layer */
  int zero_stage;       /* --zero-stage: 1, 2 or 3 (strategy zero) */
  int prefetch;         /* --prefetch: ZeRO-3 layers gathered ahead of use */
  char *comm_algo;      /* --comm-algo: auto, ring, tree, hierarchical */
  /* Derived by st_options_resolve(): */
  int accumulation;     /* micro-batches per rank per step */
} StOptions;

/* Defaults: micro-batch 32, one step, adam, fp32, 25 MiB buckets (PyTorch
 * DDP's default), ZeRO stage 1 with prefetch 1, comm algorithm auto. */
void st_options_init(StOptions *options);
void st_options_clear(StOptions *options);
void st_options_copy(StOptions *dst, const StOptions *src);

/* Fills ranks, global_batch and accumulation for `cluster` (already resized
 * by --nodes/--gpus); fails with a message naming the option when the
 * numbers do not fit together (global batch not a multiple of ranks *
 * micro-batch, ZeRO stage out of range, ...). */
gboolean st_options_resolve(StOptions *options, const StCluster *cluster, GError **error);
