/* run.h: from a step to a whole training run (docs/GOODPUT.md).
 *
 * A simulated step (output.h's StSummary) says how long one step of a
 * layout takes, how busy its GPUs are and what model states each holds. A
 * training run is many steps on hardware that fails: this module turns the
 * step into the run's wall time, GPU-hours, energy and cost, and names
 * where the wall time goes (goodput = productive time / wall time):
 *
 *   productive  the steps themselves at the simulated step time
 *   stragglers  what synchronous steps pay for the slowest GPU (stragglers.c)
 *   checkpoint  stalls while checkpoints are taken (checkpoint.c)
 *   lost        work redone after a failure since the last durable checkpoint
 *   restart     detection, relaunch, NCCL init, checkpoint load (failures.c)
 *   repair      waiting for a replacement node when no spare is left
 *
 * The parts add up to the wall time exactly, in every trial. The run is
 * simulated by Monte Carlo (montecarlo.c: failures a Poisson process of the
 * summed component rates, GRand seeded by the spec, so a seed gives the same
 * numbers everywhere) and checked against Daly's closed form (failures.c).
 *
 * One concept per file: failures.c (rates, Young/Daly), checkpoint.c (bytes
 * and times of a checkpoint from the layout's sharding), stragglers.c
 * (expected slowest of N GPUs), energy.c (power, PUE, cost), montecarlo.c
 * (the trials), goodput.c (a step into a run), run_site.c (the cluster
 * file's storage and power entries, the failure-rates file), run_report.c
 * (the summary block, report.json's `run`, the CSVs the plots read).
 *
 * Units: seconds (double) throughout, bytes as double, rates per hour of one
 * component. Nothing here keeps global state; every function is pure but for
 * the GRand a spec seeds inside st_run_simulate.
 */
#pragma once

#include <glib.h>
#include <stdint.h>
#include <stdio.h>

#include "output/output.h"

#define ST_RUN_ERROR (st_run_error_quark())
GQuark st_run_error_quark(void);

/* ---- failures (failures.c) ----------------------------------------------- */

/* Interruptions per hour of one component. Defaults: Llama 3's 54-day
 * snapshot (st_failure_rates_default). */
typedef struct {
  double gpu_per_h;       /* per GPU: faulty GPU, HBM, SRAM, GPU system processor, thermal,
                             silent data corruption */
  double node_per_h;      /* per node: host hardware (CPU, memory, SSD, PSU, chassis, ...) */
  double link_per_h;      /* per NIC and its cable and switch port */
  double software_per_h;  /* per node: software bugs, NCCL watchdog timeouts, dependencies */
  double planned_per_h;   /* per node: planned maintenance that stops the job */
  char *source;           /* where the figures come from; owned */
} StFailureRates;

typedef enum {
  ST_FAIL_GPU = 0,
  ST_FAIL_NODE,
  ST_FAIL_LINK,
  ST_FAIL_SOFTWARE,
  ST_FAIL_PLANNED,
  ST_FAIL_N,
} StFailureCause;

extern const char *const st_failure_cause_names[ST_FAIL_N];

void st_failure_rates_default(StFailureRates *rates);
void st_failure_rates_clear(StFailureRates *rates);
void st_failure_rates_copy(StFailureRates *dst, const StFailureRates *src);
/* Interruptions per hour of a job on `gpus` GPUs in `nodes` nodes with `nics`
 * NICs in all, by cause (out[ST_FAIL_N]); returns their sum. */
double st_failure_job_rates(const StFailureRates *rates, int gpus, int nodes, int nics,
                            double out[ST_FAIL_N]);
/* Whether a cause takes a node out until it is repaired or swapped for a spare. */
gboolean st_failure_needs_node(StFailureCause cause);

/* Young (1974): the interval between checkpoints that minimizes the waste,
 * first order: sqrt(2 delta M), delta the checkpoint's cost, M the MTBF (s). */
double st_young_interval(double delta_s, double mtbf_s);
/* Daly (2006), eq. 37: the higher-order optimum,
 * sqrt(2 d M) [1 + sqrt(d/(2M))/3 + d/(18M)] - d for d < 2M, else M. */
double st_daly_interval(double delta_s, double mtbf_s);
/* Daly (2006), eq. 13: expected wall time to compute `work_s` in segments of
 * `tau_s` work, each but the last followed by a checkpoint of `delta_s`,
 * failures at rate 1/M during everything (restarts too), each costing a
 * restart of `restart_s` and the segment: about M e^{R/M} (e^{(tau+delta)/M}
 * - 1) work / tau. */
double st_daly_wall(double work_s, double tau_s, double delta_s, double restart_s,
                    double mtbf_s);

/* ---- storage and power of the site (run_site.c) ------------------------- */

typedef struct {
  char *name;              /* "parallel-fs", "local-nvme"; owned */
  double write_bw_node;    /* bytes/s one node writes at */
  double read_bw_node;     /* bytes/s one node reads at */
  double aggregate_bw;     /* bytes/s the tier takes from all nodes together; 0: no limit */
  int max_writers;         /* nodes writing at once; more wait in rounds; 0: no limit */
  char *source;            /* owned */
} StStorage;

typedef struct {
  double gpu_busy_w;   /* a GPU computing */
  double gpu_comm_w;   /* communicating, not computing */
  double gpu_idle_w;   /* waiting (restarts, checkpoint stalls, spares) */
  double node_w;       /* the rest of a node: CPUs, memory, NICs, fans, per node */
  double pue;          /* facility power / IT power, >= 1 */
  char *source;        /* owned */
} StPower;

void st_storage_clear(StStorage *storage);
void st_storage_copy(StStorage *dst, const StStorage *src);
void st_power_clear(StPower *power);
void st_power_copy(StPower *dst, const StPower *src);
/* The default storage tier: a parallel file system (estimates, sources in run_site.c). */
void st_storage_default(StStorage *storage);
/* Power of `cluster`'s GPUs and nodes: its GPU's rated power (power limit
 * when set), shares of it per state, the node overhead and PUE (estimates,
 * sources in energy.c). */
void st_power_default(StPower *power, const StCluster *cluster);
/* The cluster file's optional "storage" (a list of tiers; `tier` picks one
 * by name, NULL the first) and "power" entries, over the defaults. A file
 * without them leaves the defaults. Errors name the file and key. */
gboolean st_run_site_load(const char *cluster_path, const char *tier, StStorage *storage,
                          StPower *power, GError **error);
/* A failure-rates file: {"gpu_per_h": .., "node_per_h": .., "link_per_h": ..,
 * "software_per_h": .., "planned_per_h": .., "source": ".."}; keys left out
 * keep the defaults; negative rates are refused. */
gboolean st_failure_rates_load(const char *path, StFailureRates *rates, GError **error);

/* ---- what a run is asked (goodput.c) ------------------------------------ */

typedef enum {
  ST_CKPT_WRITERS_FIRST = 0, /* each distinct shard written once, by its first holder
                                (PyTorch DDP's rank 0, DeepSpeed's, FSDP's sharded save) */
  ST_CKPT_WRITERS_SPREAD,    /* the writes spread over every replica (Megatron-Core's
                                --ckpt-fully-parallel-save, torch DCP's deduplication) */
} StCkptWriters;

typedef struct {
  double train_tokens;     /* > 0: tokens to train (token models) */
  double train_samples;    /* > 0: samples to train; one of the two */
  int64_t ramp_start, ramp_increment; /* Megatron-LM's --rampup-batch-size; 0: none */
  double ramp_samples;
  double ckpt_interval_s;  /* work between checkpoints; 0: Daly's optimum */
  gboolean ckpt_async;     /* copy to host stalls, the write overlaps the steps */
  StCkptWriters writers;
  StFailureRates rates;
  double detect_s;         /* from the failure until the job knows */
  double relaunch_s;       /* scheduler, container, process start */
  double init_s;           /* NCCL communicators and the framework's setup */
  double repair_s;         /* a failed node back in the pool */
  int spare_nodes;         /* nodes the job holds idle (and pays for) to replace failed
                              ones, a failure with none left waiting repair_s; -1: the
                              site's pool replaces them at once, unpaid (Llama 3 ran 16K
                              GPUs of a 24K cluster) */
  double sigma_gpu;        /* per-GPU speed spread (persistent), relative std dev */
  double sigma_step;       /* per-step jitter of each GPU, relative std dev */
  guint32 seed;
  int trials;              /* Monte Carlo trials; >= 1 */
  double price_gpu_hour;   /* currency per GPU-hour; 0: not priced */
  double price_kwh;        /* currency per kWh (facility); 0: not priced */
  StStorage storage;
  StPower power;
  gboolean power_given;    /* `power` set (else st_run_step_from_summary's cluster's) */
} StRunSpec;

/* Defaults: nothing to train (set tokens or samples), interval optimal,
 * sync, writers first, Llama 3's rates, detect 2 min, relaunch 5 min, init
 * 1 min, repair 4 h, no spares, sigma_gpu 1.1 %, sigma_step 1 %, seed 1,
 * 400 trials, not priced, the default storage (sources in goodput.c). */
void st_run_spec_init(StRunSpec *spec);
void st_run_spec_clear(StRunSpec *spec);
void st_run_spec_copy(StRunSpec *dst, const StRunSpec *src);
/* Refuses what cannot describe a run, naming the option: nothing to train,
 * negative rates or times, a ramp larger than the batch. */
gboolean st_run_spec_check(const StRunSpec *spec, GError **error);

/* ---- what a step gives the run (goodput.c) ------------------------------ */

typedef struct {
  double step_s;           /* the steady step */
  int64_t global_batch;    /* samples per step */
  double tokens_per_sample; /* sequence length; 0 for models that read no tokens */
  int gpus, nodes, gpus_per_node, nics;
  double busy_fraction;    /* of the step, a GPU computing */
  double comm_fraction;    /* of the step, communicating, not computing */
  double state_bytes_rank; /* model states (weights + optimizer) on the GPU holding most */
  double state_bytes_model; /* one copy of the whole model's states */
  double host_bw;          /* bytes/s of a GPU's link to host memory */
  int stale_slack;         /* steps of delay the update tolerates (stale: 1) */
  StPower power;           /* the cluster's defaults */
} StRunStep;

void st_run_step_clear(StRunStep *step);
/* The step of a simulated run (its steady step and first device's busy
 * share, the model states by memory category, the cluster's shape and
 * power). FALSE when the summary has no step (nothing ran). */
gboolean st_run_step_from_summary(const StSummary *summary, StRunStep *out, GError **error);
/* The bytes of one copy of a model's checkpoint: weights and optimizer
 * states, no gradients (ZeRO's Psi (2 + K) with mixed precision and Adam). */
double st_checkpoint_model_bytes(int64_t params, StPrecision precision, StOptimizer optimizer);

/* ---- checkpoints (checkpoint.c) ------------------------------------------ */

typedef struct {
  double copies;           /* replicas of the states the layout holds: N S / U */
  int writers;             /* ranks writing */
  int writer_nodes;        /* nodes writing */
  double bytes_writer;     /* written by each */
  double bytes_total;      /* written in all */
  double copy_s;           /* GPU to host of a writer's bytes */
  double write_s;          /* host to storage, the slowest node or the tier's limit */
  double stall_s;          /* what the steps wait: sync copy + write, async copy */
  double load_s;           /* a restart reading it back (every rank its states) */
} StCheckpointCost;

void st_checkpoint_cost(const StRunStep *step, const StRunSpec *spec, StCheckpointCost *out);
/* The model states a rank of `schedule` keeps between steps, most over the
 * main job's ranks: its persistent weights and optimizer buffers, one
 * version of each (what its checkpoint holds); 0 when it has none. */
double st_checkpoint_rank_bytes(const StSchedule *schedule);

/* ---- stragglers (stragglers.c) ------------------------------------------- */

/* E[max of n standard normal draws], by quadrature of n phi(x) Phi(x)^{n-1} x
 * (exact to 1e-7); 0 for n <= 1. */
double st_expected_max_normal(int n);
/* Blom's (1958) approximation Phi^-1((n - 0.375) / (n + 0.25)), a cross-check. */
double st_expected_max_normal_blom(int n);
/* The factor a step is stretched by: 1 + busy * sigma * E[max of gpus]; a
 * schedule that tolerates `slack` steps of delay averages each GPU's jitter
 * over slack + 1 steps: sigma^2 = sigma_gpu^2 + sigma_step^2 / (slack + 1). */
double st_straggler_factor(const StRunStep *step, const StRunSpec *spec);

/* ---- the run (goodput.c, montecarlo.c, energy.c) ------------------------- */

typedef enum {
  ST_RUN_PRODUCTIVE = 0,
  ST_RUN_STRAGGLERS,
  ST_RUN_CHECKPOINT,
  ST_RUN_LOST,
  ST_RUN_RESTART,
  ST_RUN_REPAIR,
  ST_RUN_N,
} StRunPart;

extern const char *const st_run_part_names[ST_RUN_N];

/* One event of a trial's timeline (the run_timeline plot). */
typedef struct {
  double t_s;
  int kind;               /* 0 checkpoint durable, 1 + StFailureCause: a failure */
  double work_s;          /* durable work after it */
} StRunEvent;

typedef struct {
  double steps;              /* training steps (fractional at the end) */
  double ramp_steps;         /* of them, in the batch ramp */
  double work_s;             /* productive: steps at the simulated step time */
  double straggler_factor;
  int straggler_slack;       /* steps of delay the update tolerates (StRunStep.stale_slack) */
  double mtbf_s;             /* the job's mean time between interruptions */
  double rate_by_cause[ST_FAIL_N]; /* per hour */
  StCheckpointCost ckpt;
  double interval_s;         /* work between checkpoints used */
  double young_s, daly_s;    /* the optimal intervals (closed form) */
  double restart_s;          /* detect + relaunch + init + load */
  double daly_wall_s;        /* Daly's closed-form expected wall time (no repair waits) */
  /* Monte Carlo, means over the trials: */
  int trials;
  double wall_s, wall_sd_s;  /* mean and standard deviation of the wall time */
  double parts_s[ST_RUN_N];  /* sum to wall_s */
  double interruptions;      /* mean count */
  double interruptions_by_cause[ST_FAIL_N];
  double checkpoints;        /* mean count taken */
  double goodput;            /* parts_s[PRODUCTIVE] / wall_s */
  double effective;          /* (productive + stragglers) / wall: the time stepping, Llama
                                3's "effective training time" */
  double gpu_hours;          /* (gpus + spare GPUs) x wall */
  double energy_kwh;         /* facility energy (x PUE) */
  double gpu_power_w;        /* mean power of a training GPU while stepping */
  double cost_gpu, cost_energy, cost; /* currency; 0 when not priced */
  GArray *timeline;          /* StRunEvent of the first trial, owned */
} StRunResult;

void st_run_result_clear(StRunResult *result);
/* The run of `spec` on `step`: closed forms, then spec->trials Monte Carlo
 * trials from spec->seed. Fails on a spec st_run_spec_check refuses or a
 * model that reads no tokens given --train-tokens. */
gboolean st_run_estimate(const StRunStep *step, const StRunSpec *spec, StRunResult *out,
                         GError **error);

/* Monte Carlo (montecarlo.c): fills the means of `out` from `trials` trials
 * of the run whose closed-form fields (work_s, interval_s, ckpt, restart_s,
 * rate_by_cause, straggler_factor) are set. */
void st_run_simulate(const StRunStep *step, const StRunSpec *spec, StRunResult *out);

/* Energy and cost of a simulated run (energy.c): energy_kwh, gpu_power_w,
 * gpu_hours, cost. */
void st_run_energy(const StRunStep *step, const StRunSpec *spec, StRunResult *out);

/* ---- output (run_report.c) ------------------------------------------------ */

/* The "training run" block of the summary. */
void st_run_print(const StRunResult *result, const StRunSpec *spec, FILE *out);
/* The training runs of several layouts side by side (`names[i]` labels
 * results[i]), and which finishes first. */
void st_run_print_compare(const StRunResult *const *results, const char *const *names, int n,
                          FILE *out);
/* report.json's `run` object. Transfer full. */
struct cJSON *st_run_to_json(const StRunResult *result, const StRunSpec *spec);
/* goodput.csv (part, seconds, share) and run_timeline.csv (t_h, event,
 * durable_work_h) into `dir`. */
gboolean st_run_write_csv(const StRunResult *result, const char *dir, GError **error);
