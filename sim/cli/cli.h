/* cli.h: the `stagger` command table and what the subcommands share.
 *
 * Each subcommand is one file (cmd_<name>.c) with its own GOptionContext and
 * --help, exporting one StCommand; cli_commands.c lists them. main() prints
 * an error once ("stagger sim: ...") and picks the exit code: 0 success,
 * 1 failure, 2 bad usage (an error in ST_CLI_ERROR / G_OPTION_ERROR).
 */
#pragma once

#include <glib.h>

#include "cluster/cluster.h"
#include "cost/calibration.h"
#include "engine/engine.h"
#include "model/model.h"
#include "output/output.h"
#include "profile/profile.h"
#include "strategy/options.h"
#include "strategy/strategy.h"

#define ST_CLI_ERROR (st_cli_error_quark())
GQuark st_cli_error_quark(void);

typedef enum {
  ST_CLI_ERROR_USAGE = 1,       /* exit 2 */
  ST_CLI_ERROR_INTERRUPTED = 2, /* Ctrl-C or SIGTERM: exit 128 + the signal (130, 143), as a
                                   shell reports it */
} StCliError;

typedef struct {
  const char *name;
  const char *summary;
  /* argv[0] is the subcommand's name. Returns TRUE on success. */
  gboolean (*run)(int argc, char **argv, GError **error);
} StCommand;

/* NULL-terminated. */
const StCommand *const *st_commands(void);

/* `stagger model import` (cmd_model_import.c); argv[0] is "import". */
gboolean st_cli_model_import(int argc, char **argv, GError **error);

/* ---- shared options (cli_options.c) ---------------------------------- */

/* The model, cluster and profile paths and the strategy list, beside the
 * StOptions every strategy reads. */
typedef struct {
  char *model;
  char *cluster;
  char *profile;
  char *calibration;  /* --calibration FILE, "none", or NULL: the shipped default */
  char *strategy;     /* comma list as given */
  char *out;
  StOptions options;  /* set through the option table (strategy/options.h) */
  gboolean no_fold;   /* --no-fold (sim, plan) */
  gboolean force;     /* --force (commands that write an output folder) */
  GOptionEntry *entries; /* built from the option table, owned */
  GPtrArray *given;   /* "name", "value" pairs in command-line order, owned */
  gboolean no_precision_note; /* the caller says st_cli_note_precision itself (plan) */
  const char *default_framework; /* --framework when not given (run, validate: the
                                    executor's own, "ideal"); NULL: the strategy's */
} StCliShared;

void st_cli_shared_init(StCliShared *shared);
void st_cli_shared_clear(StCliShared *shared);
/* The option group with --model, --cluster, --profile, --strategy, --out and
 * every option of the option table (strategy/options.h). The group writes into
 * `shared`; a bad value is a usage error. */
GOptionGroup *st_cli_shared_group(StCliShared *shared);

/* The options of run `index` of `n` side-by-side runs: a numeric or choice
 * option given as a comma list of n values ("--sparsity 0,0.9" with two
 * strategies) gives run i its i-th value; any other value applies to all.
 * `out` is initialized here; clear it with st_options_clear. */
gboolean st_cli_options_for(const StCliShared *shared, int index, int n, StOptions *out,
                            GError **error);

/* What tells run `index` of the strategies `names` (NULL-terminated) from the
 * other runs of the same strategy: its per-run values that differ from
 * theirs ("zero-stage2-sparsity0.9"), or NULL when there is none (the
 * strategy runs once). Transfer full. */
char *st_cli_run_label(const StCliShared *shared, char **names, int index);

/* What the shared options point at, loaded: the model, the cluster as in its
 * file, and the profile (NULL without --profile). */
typedef struct {
  StModel *model;
  StCluster *cluster;   /* with the calibration applied (st_calibration_apply) */
  StProfile *profile;
  StCalibration calib;  /* --calibration's, or the default; factors 1 for none */
} StCliInputs;

/* Says on stderr that `model`, written in 16 bits, trains in fp32 when
 * --precision was not `given`. */
void st_cli_note_precision(const StModel *model, gboolean given);
/* Whether table option `name` was on the command line. */
gboolean st_cli_given(const StCliShared *shared, const char *name);
gboolean st_cli_load_inputs(const StCliShared *shared, StCliInputs *inputs, GError **error);
void st_cli_inputs_clear(StCliInputs *inputs);
/* Loads --calibration (`path`: a file, "none", or NULL for the shipped
 * default) into inputs->calib and applies it to inputs->cluster; says on
 * stderr which one applies. */
gboolean st_cli_load_calibration(const char *path, StCliInputs *inputs, GError **error);
/* Gives a prediction's summary the calibration's intervals. */
void st_cli_spread(const StCliInputs *inputs, StSummary *summary);

/* The cluster resized by a run's --gpus-per-node, --nodes and --gpus. Transfer full. */
StCluster *st_cli_cluster_for(const StCliShared *shared, const StCliInputs *inputs,
                              const StOptions *options, GError **error);

/* The --strategy list (default "dp"), every name checked. Transfer full. */
char **st_cli_strategy_names(const StCliShared *shared, GError **error);

/* ---- a whole training run, options of sim and plan (cli_run.c) ---------- */

#include "run/run.h"

typedef struct {
  StRunSpec spec;        /* as the options set it */
  gboolean given;        /* any training-run option given */
  char *failure_rates;   /* --failure-rates FILE, or NULL: the defaults */
  char *storage;         /* --storage NAME, or NULL: the cluster file's first tier */
  GArray *intervals;     /* --checkpoint-interval's values (double s, 0 optimal), or NULL */
  GArray *spares;        /* --spare-nodes' values (int), or NULL */
} StCliRun;

void st_cli_run_init(StCliRun *run);
void st_cli_run_clear(StCliRun *run);
/* --train-tokens, --train-samples, --rampup-batch-size, --checkpoint-*,
 * --storage, --failure-rates, --restart-time, --spare-nodes,
 * --straggler-sigma, --seed, --run-trials, --price-gpu-hour, --price-kwh:
 * each value checked as parsed (a usage error naming the option). */
GOptionGroup *st_cli_run_group(StCliRun *run);
/* Whether a training run was asked for (--train-tokens or --train-samples). */
gboolean st_cli_run_wanted(const StCliRun *run);
/* Loads --failure-rates and the cluster file's storage and power entries
 * (`cluster_path`, NULL: none) into run->spec and checks it; training-run
 * options without anything to train are a usage error, and so are lists of
 * checkpoint intervals or spare nodes unless `lists` (plan: the spec takes
 * the first, run->intervals and run->spares hold them all). */
gboolean st_cli_run_prepare(StCliRun *run, const char *cluster_path, gboolean lists,
                            GError **error);

/* ---- the executor's options, shared by run and validate (cli_exec.c) ---- */

#include "exec/exec.h"
#include "output/output.h"

typedef struct {
  char *backend, *comm; /* NULL: auto */
  gint64 seed;
  double lr, timeout;
  char *memory_limit;
  char *data;           /* --data FILE, or NULL: synthetic samples */
  gint eval_every;      /* --eval-every K: held-out figures every K steps (0: at the end) */
  struct StDataset *dataset; /* owned: --data loaded by st_cli_exec_options */
} StCliExec;

void st_cli_exec_init(StCliExec *e);
void st_cli_exec_clear(StCliExec *e);
/* --backend --comm --seed --lr --timeout --memory-limit --data --eval-every, into `group`. */
void st_cli_exec_add_entries(StCliExec *e, GOptionGroup *group);
/* Checks them (usage errors), loads --data once, and fills `options`
 * (borrowing e's data set); SIGINT stops the run. */
gboolean st_cli_exec_options(StCliExec *e, StExecOptions *options, GError **error);
/* --steps auto for the executor (a schedule whose steps are 0): what the
 * simulator predicted (`predicted`, a simulation of the same schedule)
 * decides. The run takes the predicted warm-up (at least one step: a real
 * first step also warms caches and allocators), then a measured window of
 * whole predicted periods, at least 3 steps, then one step more, so that
 * every measured step is followed by another, as in training. Sets
 * schedule->steps and the `window` st_cli_exec_run measures. */
void st_cli_exec_auto_steps(StSchedule *schedule, const StSummary *predicted, StSteady *window);
/* The same from a simulation made here, with `profile` (NULL: estimates). */
gboolean st_cli_exec_auto_steps_simulated(StSchedule *schedule, const StProfile *profile,
                                          const char *comm_algo, StSteady *window,
                                          GError **error);
/* Runs one schedule, reporting progress on stderr, and summarizes it (the
 * loss in the summary) over `window` (from st_cli_exec_auto_steps; NULL:
 * the steps after the schedule's warm-up); the timeline the summary reads
 * goes to `timelines`, a multiplexed run's admission decisions to
 * `admissions_csv` (NULL when it made none). With a data set
 * (options->data), the summary's `eval` holds the held-out figures of the
 * final weights and, every `eval_every` steps (0: none), of the weights a
 * run of that many steps ends with (a separate run of the same schedule and
 * seed: the one measured is not perturbed). Errors are prefixed with
 * `name`. Transfer full. */
StSummary *st_cli_exec_run(StSchedule *schedule, const char *name,
                           const StExecOptions *options, int eval_every,
                           const StSteady *window, GPtrArray *timelines,
                           char **admissions_csv, GError **error);
/* DIR/admission.csv from st_cli_exec_run's `admissions_csv`; nothing when NULL. */
gboolean st_cli_write_admissions(const char *dir, const char *csv, GError **error);
/* Bad usage naming --`option` when the file `path` (NULL: none given) could
 * not be written at the end: its folder missing or not writable, or the path
 * a folder. For options whose file is written after long work, checked
 * before it. */
gboolean st_cli_check_writable(const char *option, const char *path, GError **error);
/* Installs (TRUE) or removes (FALSE) the SIGINT and SIGTERM handler that
 * stops runs. */
void st_cli_exec_catch_sigint(gboolean catching);
/* The signal that stopped a run (SIGINT, SIGTERM), 0 if none. */
int st_cli_exec_stop_signal(void);
/* A one-device cluster for this machine, its GPU named `gpu_name` (a
 * profile's device, so the simulator finds its entries). Transfer full. */
StCluster *st_cli_local_cluster(const char *gpu_name, GError **error);

/* ---- the output folder (cli_out.c, output/outdir.h) ------------------- */

#include "output/outdir.h"

/* "stagger sim --model m.json --out runs/r" from a subcommand's argv
 * (argv[0] its name), for the manifest; call it before parsing. Transfer full. */
char *st_cli_command_line(int argc, char **argv);
/* --force: replace an --out that stagger did not write. */
void st_cli_add_force_entry(GOptionGroup *group, gboolean *force);
/* Starts writing --out `dir` aside (st_outdir_begin with this stagger's
 * version); an --out that may not be replaced is a usage error. Transfer full. */
StOutDir *st_cli_out_begin(const char *dir, gboolean force, const char *command,
                           GError **error);
/* Sets ST_CLI_ERROR_INTERRUPTED: "interrupted (Ctrl-C) `what`; ..." saying
 * that what was measured is in `dir`, or (NULL) that nothing was written.
 * Returns FALSE. */
gboolean st_cli_interrupted_error(GError **error, const char *dir, const char *what);

/* Sets a usage error. */
gboolean st_cli_usage_error(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);

/* ---- progress on stderr (cli_progress.c) --------------------------------- */

/* A line on stderr that says what a long command is doing, once it has
 * taken more than 2 s: rewritten in place twice a second on a terminal,
 * else a line every 10 s (logs of batch jobs). The environment variable
 * STAGGER_PROGRESS_MS sets the 2 s (0, outside a terminal: a line as each
 * phase starts, however quick; for tests). */
typedef struct StCliProgress StCliProgress;

/* Starts watching `label` ("dp") doing `phase` ("building the schedule").
 * Transfer full. */
StCliProgress *st_cli_progress_new(const char *label, const char *phase);
/* What it does from now on ("simulating", "writing the outputs"). */
void st_cli_progress_phase(StCliProgress *progress, const char *phase);
/* The counters a simulation fills (StEngineBudget.progress). Borrowed. */
StEngineProgress *st_cli_progress_engine(StCliProgress *progress);
/* Stops and clears the terminal line. NULL-safe. */
void st_cli_progress_free(StCliProgress *progress);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StCliProgress, st_cli_progress_free)
