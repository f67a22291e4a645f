/* profiler.h: `stagger profile`'s measurements, written as a profile
 * (sim/profile/profile.h) that the simulator reads.
 *
 * Kernels (st_profiler_model): every layer of a model that has a real
 * implementation (exec/layers/), forward and backward separately, at each
 * requested batch size, each captured alone: on a GPU one CUDA graph
 * replayed `repeats` times after `warmup` runs, timed with events; on the
 * host each call timed with the monotonic clock. An entry holds the median
 * and the spread (p90 - p10) and is keyed by the layer's name AND its
 * signature, so it carries to other models with the same layer; layers of
 * one model with equal signatures are measured once. Then the optimizer
 * steps ("adam", "sgd"; x = elements) over the layer sizes, the whole model
 * and its halves (ZeRO's shards); the sparse modifier's "compress" and
 * "expand" over the same sizes; copies (d2d, h2d, d2h) over sizes.
 *
 * Sharing (options.sharing): each layer pass run as 2 and 4 copies on as
 * many streams of equal priority, and as a pair with one stream of higher
 * priority; the fill the "priority" share model needs is inferred from them
 * (st_profiler_fill, below) and stored on the layer entries.
 *
 * Links (st_profiler_links): collectives and a send matched by a receive
 * over sizes and rank counts. Under torchrun or mpirun (RANK, WORLD_SIZE)
 * with the cuda backend, NCCL: one process per GPU, each one rank, rank 0
 * keeps what it measured (report->writer). Otherwise the local comm
 * backend among ranks of this process on one device (threads on the host).
 *
 * Errors are in ST_EXEC_ERROR (exec.h); buffers that do not fit skip their
 * measurement with a note instead. Timings are never asserted on by tests:
 * a host is noisy.
 */
#pragma once

#include <glib.h>

#include "exec/exec.h"
#include "model/model.h"
#include "profile/profile.h"

/* Called after each measurement: `done` of `total`, and what was measured
 * ("fc1 fwd batch 4"). */
typedef void (*StProfilerProgress)(gpointer data, int done, int total, const char *what);

typedef struct {
  const char *backend;      /* device backend: "auto" (cuda when a GPU answers), "host", "cuda" */
  const char *comm;         /* links: "auto" (nccl under torchrun / mpirun), "local", "nccl" */
  const char *device_name;  /* what the entries name (a cluster's gpu.name); NULL: the
                               device's own name ("NVIDIA H100 80GB HBM3", "host") */
  StPrecision precision;    /* fp32, or mixed: layers in bf16, optimizer states fp32 */
  int warmup;               /* untimed runs before the timed ones */
  int repeats;              /* timed runs; the median is kept */
  gboolean sharing;         /* kernels: also run them together (fills) */
  int64_t min_bytes, max_bytes; /* copies and links: powers of 4 from min up to max;
                                   0: 1 KiB .. 256 MiB on a GPU, 1 KiB .. 16 MiB on the host */
  const int *ranks;         /* links: rank counts; NULL: 2, 4, 8, ... and the most there are */
  int n_ranks;
  double timeout_s;         /* links: a collective that takes longer fails */
  StProfilerProgress progress; /* may be NULL */
  gpointer progress_data;
} StProfilerOptions;

void st_profiler_options_init(StProfilerOptions *options);

typedef struct {
  char *device;             /* the name the entries carry */
  char *machine;            /* what measured, one line */
  int measured;             /* measurements taken */
  GPtrArray *notes;         /* char *: what was left out and why, one line each */
  gboolean writer;          /* this process writes the profile (not an NCCL rank > 0) */
} StProfilerReport;

void st_profiler_report_clear(StProfilerReport *report);

/* Profiles the kernels of `model` at `batches` into `profile` (its device
 * facts set). Transfer none; the report is the caller's to clear. */
gboolean st_profiler_model(const StModel *model, const int *batches, int n_batches,
                           const StProfilerOptions *options, StProfile *profile,
                           StProfilerReport *report, GError **error);

/* Profiles links into `profile`. */
gboolean st_profiler_links(const StProfilerOptions *options, StProfile *profile,
                           StProfilerReport *report, GError **error);

/* The fill in (0, 1] of the "priority" share model (sim/cost/
 * share_priority.c) from equal-priority measurements: a kernel of `alone_ns`
 * run as streams[i] copies together took span_ns[i] until all ended.
 *
 * In that model k equal kernels of fill f run at rate min(1, 1 / (k f)), so
 * the k copies end together at t_k = t_1 max(1, k f), and f_k = t_k / (k t_1)
 * = max(f, 1 / k) decreases to f as k grows: f = min over k of f_k (a
 * measured t_k below t_1 counts as t_1). When the k giving that minimum
 * showed no slowdown (t_k < t_1 (1 + tolerance)), the measurement only
 * bounds f from above (f <= 1 / k): *bound is set. */
double st_profiler_fill(double alone_ns, const int *streams, const double *span_ns, int n,
                        double tolerance, gboolean *bound);
