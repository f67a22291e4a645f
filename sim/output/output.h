/* output.h: what a run leaves in --out DIR, computed from a Timeline.
 *
 * - report.json: the contract keys (step_time_s, samples_per_s, gpus_used,
 *   devices, total_peak_by_category, comm, out_of_memory, loss for executor
 *   runs) plus the schedule's settings and notes, the cost sources used and
 *   the folding applied. See docs/FORMATS.md.
 * - trace.json: Chrome trace events (Perfetto opens it): a pid per device, a
 *   tid per stream, memory counters per category, flows for dependencies and
 *   for matched communication; times in microseconds from 0.
 * - memory.csv, comm.csv, ops.csv: the tables that the gnuplot scripts in plots/ read.
 *
 * A summary holds the numbers once; the report, the CLI table and the
 * comparison table all print from it.
 */
#pragma once

#include <glib.h>
#include <stdint.h>
#include <stdio.h>

#include "cost/calibration.h"
#include "output/mfu.h"
#include "output/timeline.h"

#define ST_OUTPUT_ERROR (st_output_error_quark())
GQuark st_output_error_quark(void);

/* The numbers of one recorded device (timeline.h), which a device folded
 * into it shares: st_summary_device. */
typedef struct {
  int32_t device;                      /* the recorded device whose numbers these are */
  int64_t peak_bytes;                  /* peak of the total over time */
  int64_t peak_by_category[ST_MEM_N];  /* peak over time of each category alone */
  int64_t at_peak_by_category[ST_MEM_N]; /* the breakdown at the moment of peak_bytes */
  int64_t peak_ns;                     /* when the peak was first reached */
  int64_t memory[ST_MEMKIND_N];        /* at the peak, as the framework shows it: allocated,
                                          reserved, the device's (output/runtime_memory.h) */
  double busy_fraction;                /* time with a COMP op running / step window */
} StDeviceSummary;

typedef struct {
  int32_t device;
  int32_t rank;
  uint32_t op;          /* the op whose allocation reached the peak */
  int32_t buffer;
  int64_t peak_bytes;   /* the device's memory at that moment, as nvidia-smi would show it
                           (tensors and what the framework holds beyond them) */
  int64_t capacity_bytes;
  int64_t over_bytes;
} StOutOfMemory;

typedef struct {
  const StTimeline *timeline; /* borrowed */
  int64_t makespan_ns;
  int32_t steps;              /* steps run */
  int32_t warmup_steps;       /* steps before the steady window */
  int32_t steady_steps;       /* steps in it: warmup_steps .. warmup_steps + steady_steps - 1;
                                 the steps after it (auto runs) only end the run */
  int64_t *step_end_ns;       /* [steps]: when the last op of each step ended */
  int64_t step_time_ns;       /* mean over the steady window */
  int64_t step_min_ns, step_max_ns; /* the shortest and longest step in it */
  StSteady steady;            /* whether the run reached its steady state (timeline.h) */
  double samples_per_s;
  int32_t gpus_used;          /* devices hosting at least one rank */
  StMfu mfu;                  /* model FLOPs utilization of the steady step on gpus_used
                                 (output/mfu.h) */
  /* Per device, through st_summary_device: a row per recorded device (the
   * devices folded into one share its row), so that a folded run of a
   * million identical GPUs holds a few rows, not a million. */
  int32_t n_rows;
  StDeviceSummary *rows;      /* [n_rows], in device order */
  int32_t *row_of;            /* [n_devices]: the row of each device (its representative's) */
  int64_t total_peak_by_category[ST_MEM_N]; /* peak over time of the sum over devices */
  int64_t total_peak_bytes;   /* peak over time of the sum of everything */
  double comm_bytes_total;    /* sent over all links by all devices in the steady steps */
  double comm_bytes_by_link[ST_LINK_N];
  double comm_peak_to_mean;   /* bytes in flight per second: peak over mean, steady steps */
  /* Links, over the steady steps (simulated runs; NULL / -1 for measured ones). */
  StNetLinkStats *links;      /* [timeline->net->links->len] */
  int32_t bottleneck;         /* the link with the highest utilization, -1 when none carried
                                 anything */
  double link_imbalance;      /* the bottleneck's utilization over the mean utilization of
                                 the links of its kind (each counted as many times as it
                                 stands for): 1 is even */
  int64_t comm_exposed_ns;    /* time of the steady step with no COMP op running on device 0's
                                 representative (communication not hidden) */
  int64_t *comm_exposed_by_comm; /* [schedule's communicators]: of comm_exposed_ns, the time
                                    an op of that communicator is in flight and no COMP op
                                    runs (groups in flight together each count it) */
  int64_t ops_by_source[ST_SRC_N]; /* recorded op counts by cost source */
  StOutOfMemory *oom;         /* NULL when every device fits (its device figure within the
                                 GPU's memory) */
  struct StRuntimeMemory *runtime; /* [n_rows]: what each holds beyond tensors */
  StResiduals step_spread, memory_spread; /* ln(measured / predicted) of the calibration's
                                             runs (n 0: no interval), for the 90 % intervals
                                             of the step time and the memory peaks */
  GArray *loss;               /* double per step (executor runs), or NULL */
  GArray *eval;               /* StEvalPoint per held-out evaluation (executor runs on a
                                 data set, `run --data`), ascending steps, or NULL */
  struct cJSON *run;          /* report.json's `run` object: the whole training run this
                                 step makes (run/run.h, `sim --train-tokens`), owned, or NULL */
} StSummary;

/* The held-out figures of a run's weights after `steps` training steps. */
typedef struct {
  int32_t steps;              /* steps trained (1-based: after step `steps`) */
  double loss;                /* mean cross-entropy over the held-out rows */
  double accuracy;            /* top-1, a fraction */
} StEvalPoint;

StSummary *st_summary_new(const StTimeline *timeline);
/* The numbers of `device` (any device of the schedule: a folded one has its
 * representative's). Borrowed. O(1). */
static inline const StDeviceSummary *
st_summary_device(const StSummary *summary, int device)
{
  return &summary->rows[summary->row_of[device]];
}
/* The device with the highest peak, the lowest id on ties (its `device`).
 * Borrowed. O(rows). */
const StDeviceSummary *st_summary_worst_device(const StSummary *summary);
/* The highest per-GPU peak of memory figure `kind` over the devices. */
int64_t st_summary_memory_peak(const StSummary *summary, StMemoryKind kind);
/* Gives the summary the calibration's residuals: the report and the table
 * then give each prediction its 90 % interval (cost/calibration.h). */
void st_summary_set_spread(StSummary *summary, const StResiduals *step,
                           const StResiduals *memory);
/* The steady window: from the end of the last warm-up step (0 when none)
 * to the end of its last step. */
void st_summary_window(const StSummary *summary, int64_t *start_ns, int64_t *end_ns);
void st_summary_free(StSummary *summary);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StSummary, st_summary_free)

/* Writes report.json, trace.json, memory.csv, comm.csv, groups.csv and ops.csv into `dir`
 * (created if needed). */
gboolean st_output_write_all(const StSummary *summary, const char *dir, GError **error);

struct cJSON *st_report_to_json(const StSummary *summary);
gboolean st_report_write(const StSummary *summary, const char *path, GError **error);
gboolean st_trace_write(const StTimeline *timeline, const char *path, GError **error);
gboolean st_csv_write_memory(const StTimeline *timeline, const char *path, GError **error);
gboolean st_csv_write_comm(const StTimeline *timeline, const char *path, GError **error);
/* groups.csv: the traffic of each communicator over time (docs/FORMATS.md). */
gboolean st_csv_write_groups(const StTimeline *timeline, const char *path, GError **error);
/* links.csv: one row per link of a simulated run, with its figures over the
 * steady steps; link_rates.csv: the send rate over time of the busiest
 * ST_BUSIEST_LINKS links. Only for simulated runs (summary->links). */
#define ST_BUSIEST_LINKS 8
gboolean st_csv_write_links(const StSummary *summary, const char *path, GError **error);
gboolean st_csv_write_link_rates(const StSummary *summary, const char *path, GError **error);
/* The busiest links of a simulated run, by utilization over the steady
 * steps (ties by link), that carried anything: at most `max` into `out`;
 * returns how many. */
int st_summary_busiest_links(const StSummary *summary, int32_t *out, int max);
gboolean st_csv_write_ops(const StTimeline *timeline, const char *path, GError **error);
/* loss.csv (executor runs): step, train_loss, heldout_loss, heldout_accuracy;
 * the held-out columns empty at steps not evaluated. */
gboolean st_csv_write_loss(const StSummary *summary, const char *path, GError **error);

/* The human table of one run, and of several side by side (`names[i]`
 * labels summaries[i]). */
void st_summary_print(const StSummary *summary, FILE *out);
void st_summary_print_compare(const StSummary *const *summaries, const char *const *names,
                              int n, FILE *out);
