/* plan.h: the what-if planner (`stagger plan`).
 *
 * Searches strategies and cluster shapes for a model under constraints and
 * ranks them by an objective. Nothing here knows a strategy by name: the
 * space is every registered strategy (st_strategies()) crossed with its own
 * declared knobs (StStrategy.knobs), cluster shapes (nodes, GPUs),
 * micro-batch sizes, gradient accumulation (or the accumulation a fixed
 * global or per-GPU batch implies) and any option the user gives a list of.
 * Each configuration is a set of option values applied by name through
 * st_options_set, built by its strategy and simulated in its own engine.
 *
 * Pieces, one file each:
 *   plan_spec.c    StPlanSpec: what the user asked for, set by option name
 *                  (value lists and ranges such as "1-64", "1-256:x2") or
 *                  from a JSON space file.
 *   plan_space.c   expanding a spec into configurations, and turning one
 *                  into options and a cluster.
 *   plan_bound.c   lower bounds of step time and peak memory from a built
 *                  schedule, without simulating it.
 *   plan_closed.c  closed forms of the steady step before building, per
 *                  strategy family (plan_closed_dp.c: dp, zero), merged
 *                  with the strategy's estimate in plan_before.c.
 *   plan_dedup.c   fingerprints: configurations that build the same schedule
 *                  are simulated once.
 *   plan_run.c     evaluation on a GThreadPool, built lazily in waves,
 *                  pruning by the bounds (a work bound before building).
 *   plan_prune.c   the best simulated objective so far per GPU count.
 *   plan_rank.c    objectives, the ranking and the Pareto fronts.
 *   plan_goodput.c the objectives of a whole training run (time-to-train,
 *                  cost, energy: run/run.h) on each point's step.
 *   plan_json.c    plan.json (every point) and plan.csv (for plots/plan.gp).
 *   plan_print.c   the ranked table and the winner against the runner-up.
 *   plan_dist.c    a search spread over processes: what they exchange
 *                  (plan_dist.h; the MPI module in plan/mpi/).
 *
 * Determinism: a search gives the same points, ranks, fronts and files
 * whatever the thread count. Every configuration's result is stored at its
 * index; configurations are built and simulated in fixed-size waves
 * (ST_PLAN_WAVE, independent of the thread count), and the pruning decided
 * when a wave ends uses the results of that wave and the ones before it
 * only, so which configurations get pruned does not depend on which thread
 * finished first.
 *
 * Steps: every configuration runs --steps auto unless the user fixes a
 * number: the engine stops once its state repeats (output/steady.h), so
 * configurations are ranked by their steady step, never by a warm-up. One
 * that does not settle within its cap is ranked by the mean of its last
 * steps, marked as not steady, and never prunes another.
 *
 * Training semantics: each strategy declares the update a configuration
 * computes (StStrategy.update). Only configurations computing synchronous
 * SGD/Adam's update (on a pruned model when the user asks --sparsity) are
 * ranked by default; stale ones (delayed gradients) are excluded before
 * being built unless allow_stale admits them, and then marked.
 *
 * Pruning is exact, never heuristic: a configuration is skipped only when a
 * valid lower bound of its step time (plan_bound.c; with --steps auto a
 * bound of the steady step, which no warm-up figure can undercut; before
 * building, the work bound) shows that an already simulated, steady
 * configuration beats it (see StPlanPrune), or when a lower bound of its
 * peak memory exceeds the cap.
 * The winner is never pruned; tests/test_plan.c checks it against the
 * unpruned search.
 */
#pragma once

#include <glib.h>

#include "cost/calibration.h"
#include <stdint.h>
#include <stdio.h>

#include "cluster/cluster.h"
#include "model/model.h"
#include "profile/profile.h"
#include "run/run.h"
#include "strategy/options.h"
#include "strategy/strategy.h"

#define ST_PLAN_ERROR (st_plan_error_quark())
GQuark st_plan_error_quark(void);

/* Configurations per wave, unless the spec says: built together, then the
 * survivors simulated together; the pruning decisions taken when wave j
 * ends use waves up to j only. Fixed (never derived from the thread count),
 * so the output does not depend on the number of threads. Larger keeps more
 * threads busy; smaller prunes sooner. */
#define ST_PLAN_WAVE 16

typedef enum {
  ST_PLAN_OBJ_TIME = 0,           /* step time, lower is better */
  ST_PLAN_OBJ_THROUGHPUT,         /* samples/s, higher is better */
  ST_PLAN_OBJ_THROUGHPUT_PER_GPU, /* samples/s per GPU used, higher is better */
  ST_PLAN_OBJ_GPU_HOURS,          /* GPUs x step time x train_steps, lower is better */
  /* A whole training run (spec->run, run/run.h: failures, checkpoints,
   * stragglers), lower is better; plan_goodput.c: */
  ST_PLAN_OBJ_TIME_TO_TRAIN,      /* its wall time */
  ST_PLAN_OBJ_COST,               /* its price: GPU-hours and energy */
  ST_PLAN_OBJ_ENERGY,             /* its facility energy */
  ST_PLAN_OBJ_N,
} StPlanObjective;

typedef enum {
  /* Skip a configuration when a simulated one with no more GPUs beats its
   * bound: keeps the winner and the whole objective-vs-GPUs Pareto front. */
  ST_PLAN_PRUNE_FRONT = 0,
  /* Skip it when any simulated configuration beats its bound: keeps the
   * winner only (fewer simulations). */
  ST_PLAN_PRUNE_WINNER,
  ST_PLAN_PRUNE_OFF, /* simulate everything */
  ST_PLAN_PRUNE_N,
} StPlanPrune;

/* An option the user gave a list of values for ("zero-stage" "2,3"). */
typedef struct {
  char *name;         /* in the option table (strategy/options.h) */
  GPtrArray *values;  /* char *, owned: each accepted by st_options_set */
} StPlanValues;

/* What the user asked for. Set fields by name with st_plan_spec_set (the
 * command line and the JSON space file both go through it). */
typedef struct {
  GPtrArray *strategies;   /* char *, owned; empty: every registered strategy */
  GArray *nodes;           /* int; empty: the cluster file's nodes */
  GArray *gpus;            /* int, GPUs in use; empty: every GPU of the nodes */
  GArray *micro_batches;   /* int; empty: 1, 2, 4, ..., 64 */
  GArray *accumulations;   /* int, when no batch is fixed; empty: 1 */
  int64_t global_batch;    /* > 0: fixed global batch (strong scaling) */
  int64_t gpu_batch;       /* > 0: fixed samples per GPU per step (weak scaling) */
  GPtrArray *options;      /* StPlanValues *, owned, in the order given */
  int64_t mem_cap;         /* bytes per GPU; 0: the GPU's memory */
  int gpu_budget;          /* most GPUs a configuration may use; 0: no limit */
  int gpus_per_node;       /* GPUs of each node in use (st_cluster_keep_gpus_per_node),
                              the node --nodes copies; 0: all of the file's */
  StPlanObjective objective;
  int64_t train_steps;     /* for the gpu-hours objective */
  StPlanPrune prune;
  gboolean no_fold;        /* simulate every rank (slower; folding is exact) */
  gboolean allow_stale;    /* also rank configurations whose update is stale (delayed
                              gradients): by default only those computing synchronous
                              SGD/Adam's update (on a pruned model when --sparsity asks) */
  gboolean tp_across_nodes; /* also tensor-parallel groups that span nodes (by default a
                               strategy's estimate refuses them: StEstimate) */
  int threads;             /* evaluation threads; 0: one per processor */
  int wave;                /* simulations between pruning decisions; 0: ST_PLAN_WAVE */
  double max_time_s;       /* no wave but the first starts after this many seconds of
                              search; what is left is ST_PLAN_UNSEARCHED (the plan then
                              depends on the clock); 0: no limit */
  StResiduals step_spread; /* the calibration's residuals (cost/calibration.h): each step
                              time's 90 % interval, and whether the winner stands apart */
  StRunSpec *run;          /* the training run the time-to-train, cost and energy
                              objectives rank by (run/run.h); owned, NULL: none */
  GArray *run_intervals;   /* double, s of work between checkpoints (0: optimal), the knob
                              each point's run is tried at; NULL: run's own; owned */
  GArray *run_spares;      /* int, spare nodes (-1: the site's pool), likewise */
} StPlanSpec;

StPlanSpec *st_plan_spec_new(void);
void st_plan_spec_free(StPlanSpec *spec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StPlanSpec, st_plan_spec_free)

/* Sets `name` from text, replacing what it held. Planner names: strategy
 * (alias strategies: a comma list or "all"), nodes, gpus, micro-batch,
 * accumulation (integer lists: "1,2,4", "1-64" every integer, "1-64:x2"
 * every power-of-two multiple), global-batch, gpu-batch, mem-cap (a size:
 * "80GiB"), gpu-budget, gpus-per-node (one count, not a list), objective
 * (time, throughput, throughput-per-gpu, gpu-hours), train-steps, prune
 * (front, winner, off), threads, wave, no-fold, allow-stale, tp-across-nodes.
 * Any other option of the table (strategy/options.h) takes a comma list of
 * values (ranges for integer options); errors name the option and value. */
gboolean st_plan_spec_set(StPlanSpec *spec, const char *name, const char *value,
                          GError **error);

/* Applies a JSON space file: an object whose keys are the names above and
 * whose values are strings (as on the command line), numbers, booleans or
 * arrays of them: {"strategy": ["dp", "zero"], "nodes": "1-64",
 * "zero-stage": [2, 3], "global-batch": 512}. Unknown keys are errors
 * naming the file. */
gboolean st_plan_spec_load(StPlanSpec *spec, const char *path, GError **error);

/* The values given for a table option, or NULL. */
const StPlanValues *st_plan_spec_values(const StPlanSpec *spec, const char *name);

const char *st_plan_objective_name(StPlanObjective objective);
const char *st_plan_prune_name(StPlanPrune prune);

/* ---- the space (plan_space.c) -------------------------------------------- */

/* One configuration: a strategy, a cluster shape, a batch split and a value
 * for each varied option. */
typedef struct {
  const StStrategy *strategy; /* borrowed from the registry */
  int nodes;                  /* 0: as in the cluster file */
  int gpus;                   /* GPUs in use; 0: all of the nodes */
  int micro_batch;
  int accumulation;           /* free batch: given; else 0 (implied by the fixed batch) */
  int n_settings;
  const char **settings;      /* [2 * n_settings]: name, value pairs; the array is
                                 owned, the strings live in the expansion's string chunk */
} StPlanConfig;

/* Spaces of more configurations than this list only those their options
 * and shape admit (StPlanKeep): the rest are counted by reason in the plan
 * (StPlan.unlisted), so that a large LLM space, most of whose shapes no
 * layout fits, is not held point by point. */
#define ST_PLAN_LIST_ALL 20000

/* Whether to keep configuration `config` of a large space. */
typedef gboolean (*StPlanKeep)(const StPlanConfig *config, gpointer data);

/* Every configuration of `spec` on `cluster` (as loaded), in a fixed order:
 * strategy (registry or given order), shape (GPUs, then nodes), micro-batch,
 * accumulation, option values. The varied options of a strategy are its
 * knobs (with the user's values when given) and every option the user gave
 * several values for that no registered strategy declares as a knob (an
 * option that is some strategy's knob varies only for the strategies that
 * declare it). Strings go into `strings` (borrowed, must outlive the
 * configurations). A knob that does not apply to `model` (StStrategy.knob_applies;
 * `model` NULL: all apply) is not varied. A space of more than ST_PLAN_LIST_ALL
 * holds only what `keep` keeps (NULL: everything). Fails on an empty space or
 * one too large to search.
 * Transfer full: a GArray of StPlanConfig that frees their settings. */
GArray *st_plan_space_expand(const StPlanSpec *spec, const StModel *model,
                             const StCluster *cluster, GStringChunk *strings, StPlanKeep keep,
                             gpointer data, GError **error);

/* The options and GPU count of `config`: defaults, then the spec's
 * single-valued options, then the configuration's values and batch, all
 * through st_options_set. `out` is initialized here (st_options_clear it).
 * Fails with the option and value at fault. */
gboolean st_plan_config_options(const StPlanSpec *spec, const StPlanConfig *config,
                                StOptions *out, GError **error);

/* "zero-stage=2 micro-batch=4": what distinguishes the configuration
 * besides its strategy and shape. Transfer full. */
char *st_plan_config_label(const StPlanConfig *config);

/* ---- lower bounds (plan_bound.c) -------------------------------------------- */

typedef struct {
  int64_t step_time_ns;  /* the summary's step time cannot be lower */
  int64_t peak_bytes;    /* the highest device peak cannot be lower */
  int64_t device_bytes;  /* nor the highest device figure (nvidia-smi's): peak_bytes with the
                            least runtime memory of a device (plan_floor.c); set by the
                            planner, not st_plan_bound */
} StPlanBound;

/* Bounds of `schedule` as st_simulate with these engine settings would run
 * it (the same cost models and communication algorithm); plan_bound.c
 * shows why they hold. No events: O(sinks x steps x (ops + dependencies))
 * per program (at most 64 sinks followed each), plus O(ranks); with
 * point-to-point transfers and --steps auto, O(256 x (ops + dependencies)
 * over all ranks) more (plan_bound_ranks.c). */
void st_plan_bound(const StSchedule *schedule, const StProfile *profile, const char *comm_algo,
                   StPlanBound *out);

/* A bound of the steady step (--steps auto) of any configuration, before
 * building it: every sample of the global batch runs every layer's forward
 * and backward, and no GPU computes faster than its peak, so a step takes
 * at least (fwd + bwd FLOPs per sample) x global batch / (GPUs x peak) in
 * the compute dtype of `resolved` on `cluster` (resized). Only for the
 * cost models that never beat the peak (no measured profile: the caller
 * decides). O(1). */
int64_t st_plan_work_bound(const StModel *model, const StCluster *cluster,
                           const StOptions *resolved);

/* ---- identical schedules (plan_dedup.c) -------------------------------------- */

/* A 128-bit fingerprint of what the engine simulates in `schedule` with
 * `comm_algo`: equal fingerprints give equal results. */
void st_plan_fingerprint(const StSchedule *schedule, const char *comm_algo, guint64 out[2]);

/* ---- results ---------------------------------------------------------------- */

/* Communicators a point's exposed time is told by, and their names' room. */
#define ST_PLAN_GROUPS 8
#define ST_PLAN_GROUP_NAME 24

typedef enum {
  ST_PLAN_OK = 0,      /* simulated, fits in the memory cap */
  ST_PLAN_OOM,         /* does not fit: simulated peak, or its memory bound (not simulated) */
  ST_PLAN_INFEASIBLE,  /* the options, the GPU budget or the strategy refused it */
  ST_PLAN_PRUNED,      /* its bound shows a simulated configuration beats it */
  ST_PLAN_FAILED,      /* the simulation failed (a deadlock: a strategy bug) */
  ST_PLAN_EXCLUDED,    /* its update is stale (delayed gradients), not admitted without
                          allow_stale: not built */
  ST_PLAN_UNSEARCHED,  /* the search stopped at its time limit (max_time_s) first */
  ST_PLAN_STATUS_N,
} StPlanStatus;

/* What a point keeps of its simulation and only a simulated point fills
 * (plan_point.c): held apart from StPlanPoint, so that a point decided
 * without simulating, as most of a large space is, costs its StPlanPoint
 * alone. */
typedef struct {
  int32_t steps_run;                    /* steps the simulation took */
  gboolean steady;                      /* its steady state was reached (--steps auto), or
                                           the fixed steps after warm-up were steady */
  gboolean unsteady_auto;               /* --steps auto and not steady within the cap: the
                                           step time is a mean that never settled, and the
                                           point prunes nothing */
  double mfu;                           /* model FLOPs utilization (output/mfu.h); 0 unknown */
  int64_t peak_by_category[ST_MEM_N];   /* on the GPU with the highest peak, at that moment */
  int64_t busy_ns;                      /* GPU 0 computing, per steady step */
  int64_t exposed_ns;                   /* GPU 0 communicating, not computing, per step */
  struct {
    char name[ST_PLAN_GROUP_NAME];      /* a communicator ("tp", "data"); "" ends the list */
    int64_t ns;                         /* of exposed_ns, with one of its ops in flight */
  } exposed_by_group[ST_PLAN_GROUPS];   /* groups with exposed time, most first */
  double comm_bytes;                    /* sent over all links by all GPUs, per step */
  /* The whole training run (plan_goodput.c); a twin's is not kept: */
  gboolean has_run_step;
  StRunStep run_step;                   /* its power's source not kept (NULL) */
} StPlanSim;

typedef struct {
  StPlanStatus status;
  gboolean simulated;
  char *reason;            /* why it is not OK; NULL when OK or when `unbuilt`
                              (st_plan_point_reason gives every point's) */
  char *description;       /* the schedule's one line; NULL when not built */
  int nodes, gpus_used, ranks, accumulation;
  int64_t global_batch;
  gboolean has_update;     /* `update` known (the options were accepted) */
  StUpdate update;         /* what it computes against synchronous SGD/Adam (strategy.h) */
  gboolean bounded;        /* `bound` computed */
  StPlanBound bound;
  int64_t work_ns;         /* before building: the compute of its global batch at the GPUs'
                              peak, spread over all of them (st_plan_work_bound); 0 unknown */
  int gpus_at_least;       /* before building: the fewest GPUs it may use */
  gboolean estimated;      /* its strategy's estimate (StStrategy.estimate) was made */
  gboolean over_in_turn;   /* the estimate's peak is over the cap, to be refused in its wave
                              (StEstimate.refuse_in_turn) */
  StEstimate estimate;     /* lower bounds before building: step (0 unknown), peak memory */
  int64_t runtime_bytes;   /* before building: what every GPU holds beside its tensors for
                              certain under the framework, its CUDA context, cuBLAS
                              workspace and NCCL's buffers for each communicator the
                              estimate counts (StFrameworkRuntime, StEstimate.comms) */
  int64_t device_floor;    /* before building: the device figure of the estimate's tensors
                              with runtime_bytes and the allocator's reserve
                              (st_runtime_memory_figures), at most the simulated one's:
                              what the cap is held against */
  int64_t closed_ns;       /* before building: its strategy's closed form of the steady step
                              (plan_closed.c, steady rule's tolerance off); 0 none */
  int64_t before_ns;       /* before building: the largest of work_ns, the estimate's step and
                              closed_ns (steady rule's tolerance off): what orders and prunes
                              it unbuilt */
  /* Pruned before building (st_plan_prune_unbuilt, most of a large space): its
   * reason is not held but formatted from these when asked for. */
  gboolean unbuilt;
  int unbuilt_who;         /* the simulated point that beats it */
  double unbuilt_bound;    /* the best objective it could reach */
  double unbuilt_best;     /* what unbuilt_who reaches */
  /* Simulated (OK, OOM by simulation), or a simulated point's twin: */
  StPlanSim *sim;                       /* owned; NULL for every other point */
  int64_t step_time_ns;                 /* its steady step, or the mean of its last steps */
  double samples_per_s;
  int64_t peak_bytes;                   /* tensors, of the GPU with the highest peak */
  int64_t device_bytes;                 /* that GPU's memory as nvidia-smi shows it (the
                                           framework's beyond tensors, runtime_memory.h): what
                                           the cap applies to */
  double objective;                     /* OK only */
  int rank;                             /* 1 = the winner; 0 when not ranked */
  gboolean front_gpus, front_memory;    /* on a Pareto front (OK points only) */
  int same_as;                          /* -1, or the configuration with the same schedule
                                           whose results these are (plan_dedup.c) */
  /* The whole training run (simulated points; plan_goodput.c): */
  double run_wall_s, run_goodput;       /* under the run objectives, once ranked; 0 else */
  double run_interval_s;                /* the checkpoint interval its run took (the best of
                                           run_intervals) */
  int run_spares;                       /* the spare nodes its run took */
  /* private */
  guint64 fingerprint[2];
  StSchedule *kept;                     /* built for the bound, kept for the simulation */
} StPlanPoint;

typedef struct {
  int configurations, simulated, ok, oom, infeasible, pruned, failed, excluded;
  int unsearched;     /* left when the search reached its time limit (max_time_s) */
  int64_t unlisted;   /* not in configurations: refused by options or shape in a space of
                         more than ST_PLAN_LIST_ALL (StPlan.unlisted says why) */
  int duplicates;     /* with the schedule of an earlier one: its results, not simulated again */
  int oom_by_bound;   /* of oom: not simulated, the memory bound exceeds the cap */
} StPlanCounts;

typedef struct {
  const StPlanSpec *spec;      /* borrowed */
  const StModel *model;        /* borrowed */
  const StCluster *cluster;    /* as loaded (borrowed), or its nodes cut to the spec's
                                  gpus_per_node (owned, in kept_nodes) */
  StCluster *kept_nodes;       /* owned: that cut, or NULL */
  int64_t mem_cap;             /* resolved: bytes per GPU */
  GArray *configs;             /* StPlanConfig, owned */
  GStringChunk *strings;       /* owned: the configurations' setting strings */
  StPlanPoint *points;         /* [configs->len], owned */
  GArray *ranking;             /* int: OK points, best first */
  StPlanCounts counts;
  GArray *unlisted;            /* StPlanUnlisted, in order of first meeting */
  /* Timing of the run (not part of the plan: it varies between runs). */
  double seconds;
  int threads;
} StPlan;

/* Configurations of a large space refused before being listed, by reason. */
typedef struct {
  char *reason;   /* owned */
  char *example;  /* the first one's strategy, shape and label, owned */
  int64_t count;
} StPlanUnlisted;

/* Progress, called from the thread that runs st_plan_run: `done` of `total`
 * configurations decided so far. */
typedef void (*StPlanProgress)(gpointer data, const StPlanCounts *counts, int done, int total);

/* Runs the search: expands the space, bounds, prunes, simulates, ranks.
 * Everything borrowed must outlive the plan. Fails only on a bad space
 * (unknown strategy, nothing to search) or when no thread can be started;
 * configurations that fail are points with their reason. Transfer full. */
StPlan *st_plan_run(const StPlanSpec *spec, const StModel *model, const StCluster *cluster,
                    const StProfile *profile, StPlanProgress progress, gpointer data,
                    GError **error);
/* The same search spread over the processes of `dist` (plan_dist.h; NULL:
 * this one alone): every process gets the same plan, byte for byte, as the
 * search alone gives. Every process must call it with the same inputs. */
typedef struct StPlanDist StPlanDist;
StPlan *st_plan_run_spread(const StPlanSpec *spec, const StModel *model,
                           const StCluster *cluster, const StProfile *profile,
                           const StPlanDist *dist, StPlanProgress progress, gpointer data,
                           GError **error);
void st_plan_free(StPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StPlan, st_plan_free)

/* The winner (rank 1) and the runner-up (the best ranked after it whose
 * schedule differs from the winner's), or -1. */
int st_plan_winner(const StPlan *plan);
int st_plan_runner_up(const StPlan *plan);

/* Builds the schedule of configuration `index` again (for --emit-schedule).
 * Transfer full. */
StSchedule *st_plan_build(const StPlan *plan, const StProfile *profile, int index,
                          GError **error);

/* ---- ranking (plan_rank.c) -------------------------------------------------- */

/* The objective's value for a simulated point, and the best value a point
 * with step-time bound `bound_ns` could reach. */
double st_plan_objective_value(StPlanObjective objective, const StPlanSpec *spec,
                               const StPlanPoint *point);
double st_plan_objective_bound(StPlanObjective objective, const StPlanSpec *spec,
                               const StPlanPoint *point, int64_t bound_ns);
/* Whether `objective` ranks whole training runs (plan_goodput.c). */
gboolean st_plan_objective_is_run(StPlanObjective objective);
/* What a point's best training run took and gave (plan_goodput.c). */
typedef struct {
  double wall_s, goodput, interval_s;
  int spares;
} StPlanRunChoice;
/* The run objective of a simulated point: its training run (spec->run) on
 * its step, at each checkpoint interval and spare count of the spec's knobs
 * (run_intervals x run_spares), the best of them; what it took into
 * `choice` (may be NULL). A point without a step gives 0. */
double st_plan_run_objective(StPlanObjective objective, const StPlanSpec *spec,
                             const StPlanPoint *point, double step_ns, StPlanRunChoice *choice);
/* TRUE when value a is strictly better than b. */
gboolean st_plan_objective_better(StPlanObjective objective, double a, double b);
/* Fills objective, rank, fronts and plan->ranking. */
void st_plan_rank(StPlan *plan);

/* ---- outputs (plan_json.c, plan_print.c) ---------------------------------- */

const char *st_plan_status_name(StPlanStatus status);
/* Why point `pt` of `plan` is not OK (NULL when it is): pt->reason, or the
 * reason of a point pruned before building formatted into `buf`. */
#define ST_PLAN_REASON_MAX 512
const char *st_plan_point_reason(const StPlan *plan, const StPlanPoint *pt,
                                 char buf[ST_PLAN_REASON_MAX]);

/* plan.json: the search, the counts, every point. Deterministic. */
struct cJSON *st_plan_to_json(const StPlan *plan);
/* Writes plan.json and plan.csv into `dir` (created if needed). */
gboolean st_plan_write(const StPlan *plan, const char *dir, GError **error);

/* The ranked table (`top` rows), the counts, the points that did not fit,
 * and the winner against the runner-up. */
void st_plan_print(const StPlan *plan, int top, FILE *out);
