/* cmd_plan.c: `stagger plan`: search strategies and cluster shapes under
 * constraints (sim/plan/plan.h). Progress on stderr, the ranked table on
 * stdout, plan.json and plan.csv in --out, the winner's schedule with
 * --emit-schedule. --bench runs the same search serially and on the thread
 * pool in this process and compares them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/json.h"
#include "base/units.h"
#include "cli/cli.h"
#include "engine/engine.h"
#include "interop/chakra.h"
#include "exec/module.h"
#include "plan/plan.h"
#include "plan/plan_dist.h"

typedef struct {
  char *model, *cluster, *profile, *calibration, *out, *space, *emit, *chakra;
  int top;
  gboolean bench, quiet, force;
  StPlanDist dist;        /* the processes the search spreads over (1: this one) */
  char *command;          /* as typed, for the output folder's manifest */
  StOutDir *outdir;       /* --out, written aside until the plan is complete */
  GPtrArray *given;       /* "name", "value" pairs in command-line order */
  StPlanSpec *scratch;    /* checks each value as it is given */
  StSchedule *traced;     /* --chakra: the imported schedule */
  GOptionEntry *entries;  /* owned */
} Args;

/* Options whose meaning the planner gives its own help. */
static const struct {
  const char *name, *arg, *help;
} PLANNER[] = {
  {"strategy", "LIST", "Strategies to search, a comma list or 'all' (default: all registered)"},
  {"strategies", "LIST", "Same as --strategy"},
  {"nodes", "LIST", "Node counts to search: 1,2,4 or 1-64 (every one) or 1-64:x2 (powers of "
                    "two) (default: as in the cluster file)"},
  {"gpus", "LIST", "GPU counts to search (same forms; with --nodes, a count is paired with the "
                   "node count it needs) (default: every GPU of the nodes)"},
  {"gpus-per-node", "K", "GPUs of each node the searched shapes use, spread over its NICs; "
                        "--nodes N then means N nodes of K GPUs (one count, not searched) "
                        "(default: all of the file's)"},
  {"micro-batch", "LIST", "Micro-batch sizes to search (default: 1-64:x2)"},
  {"accumulation", "LIST", "Gradient accumulation to search when no batch is fixed (default: 1)"},
  {"global-batch", "N", "Fixed samples per step (strong scaling): accumulation follows"},
  {"gpu-batch", "N", "Fixed samples per GPU per step (weak scaling): accumulation follows"},
  {"mem-cap", "SIZE", "Memory per GPU a configuration may use, at most the GPU's (default: the GPU's memory)"},
  {"gpu-budget", "N", "Most GPUs a configuration may use (default: no limit)"},
  {"objective", "NAME", "time (per step), throughput, throughput-per-gpu, gpu-hours (for "
                        "--train-steps), or for a whole training run (--train-tokens, "
                        "docs/GOODPUT.md) time-to-train, cost or energy (default: time)"},
  {"train-steps", "N", "Training steps the gpu-hours objective counts (default: 1000)"},
  {"steps", "N|auto", "Steps each configuration is simulated for: auto until its state repeats, "
                      "ranked by that steady step; N for N, the first being warm-up (default: "
                      "auto)"},
  {"prune", "MODE", "front: skip what provably neither wins nor reaches the front against "
                    "GPUs; winner: skip what provably cannot win; off (default: front)"},
  {"threads", "N", "Threads simulating configurations (default: one per processor)"},
  {"wave", "N", "Simulations per wave; pruning is decided as waves end, so the plan is the "
                "same on any number of threads (default: 16)"},
  {"max-time", "SECONDS", "Start no wave but the first after this long (90, 90s, 1.5s): what is "
                          "left is listed as not searched, and the plan then depends on the "
                          "clock (default: no limit)"},
  {"no-fold", NULL, "Simulate every rank, even where identical ranks could be folded"},
  {"allow-stale", NULL, "Also rank configurations whose update uses delayed (stale) gradients, "
                        "such as cyclic DP's update rules v1 and v2: they train differently from "
                        "synchronous SGD/Adam, and are marked 'stale' (default: only those that "
                        "compute its update; pruned models when --sparsity asks)"},
  {"tp-across-nodes", NULL, "Also search tensor-parallel groups that span nodes (megatron): "
                            "their collectives then cross the slower inter-node links on every "
                            "layer (default: a group stays inside a node, as Megatron-LM "
                            "advises)"},
};

static gboolean
on_value(const char *option_name, const char *value, gpointer data, GError **error)
{
  Args *a = data;
  const char *name = option_name + 2; /* "--" */
  const char *text = value != NULL ? value : "true";
  g_autoptr(GError) local = NULL;
  if (!st_plan_spec_set(a->scratch, name, text, &local))
    return st_cli_usage_error(error, "%s", local->message);
  g_ptr_array_add(a->given, g_strdup(name));
  g_ptr_array_add(a->given, g_strdup(text));
  return TRUE;
}

static const char *
planner_help(const char *name, const char **arg)
{
  for (gsize i = 0; i < G_N_ELEMENTS(PLANNER); i++) {
    if (strcmp(PLANNER[i].name, name) == 0) {
      *arg = PLANNER[i].arg;
      return PLANNER[i].help;
    }
  }
  return NULL;
}

static GOptionEntry
value_entry(const char *name, const char *arg, const char *help)
{
  return (GOptionEntry){name, 0, arg == NULL ? G_OPTION_FLAG_NO_ARG : 0, G_OPTION_ARG_CALLBACK,
                        (gpointer)on_value, help, arg};
}

/* The planner's own options, then every other option of the table. */
static GOptionGroup *
search_group(Args *a)
{
  int n = 0;
  for (const StOptionSpec *s = st_option_specs(); s->name != NULL; s++)
    n++;
  a->entries = g_new0(GOptionEntry, G_N_ELEMENTS(PLANNER) + n + 1);
  GOptionEntry *e = a->entries;
  for (gsize i = 0; i < G_N_ELEMENTS(PLANNER); i++)
    *e++ = value_entry(PLANNER[i].name, PLANNER[i].arg, PLANNER[i].help);
  for (const StOptionSpec *s = st_option_specs(); s->name != NULL; s++) {
    const char *arg = NULL;
    if (planner_help(s->name, &arg) != NULL)
      continue;
    *e++ = value_entry(s->name, s->type == ST_OPT_FLAG ? NULL : s->arg, s->help);
  }
  GOptionGroup *group = g_option_group_new(
    "search", "The space, constraints and objective (a comma list of values searches each):",
    "Show the search options", a, NULL);
  g_option_group_add_entries(group, a->entries);
  return group;
}

/* ---- progress ------------------------------------------------------------ */

/* On a terminal, a bar rewritten in place; elsewhere (a log, CI) the work
 * ahead when the search starts, then a line every LOG_EVERY_US while it
 * runs, so a batch job's log shows it alive. Nothing under --quiet. */
#define LOG_EVERY_US (5 * G_USEC_PER_SEC)

typedef struct {
  gboolean quiet, tty;
  gint64 start_us, last_us;
} Bar;

static void
log_progress(Bar *bar, const StPlanCounts *c, int done, int total, gint64 now)
{
  if (done == 0 && bar->last_us == 0) {
    fprintf(stderr, "  %d configurations to decide (built and bounded, then pruned or simulated)\n",
            total);
    bar->last_us = now;
  } else if (done < total && now - bar->last_us >= LOG_EVERY_US) {
    fprintf(stderr, "  %d of %d decided: simulated %d, pruned %d, refused %d, %.0f s\n", done,
            total, c->simulated, c->pruned + c->oom_by_bound, c->infeasible,
            (now - bar->start_us) / 1e6);
    bar->last_us = now;
  }
  fflush(stderr);
}

static void
on_progress(gpointer data, const StPlanCounts *c, int done, int total)
{
  Bar *bar = data;
  gint64 now = g_get_monotonic_time();
  if (bar->quiet)
    return;
  if (!bar->tty) {
    log_progress(bar, c, done, total, now);
    return;
  }
  if (done < total && now - bar->last_us < 100000)
    return;
  bar->last_us = now;
  const int width = 30;
  int filled = total > 0 ? (int)((int64_t)done * width / total) : width;
  char cells[32];
  for (int i = 0; i < width; i++)
    cells[i] = i < filled ? '#' : '.';
  cells[width] = '\0';
  fprintf(stderr, "\r  [%s] %d/%d  simulated %d, pruned %d, refused %d  %.1f s ", cells, done,
          total, c->simulated, c->pruned + c->oom_by_bound, c->infeasible,
          (now - bar->start_us) / 1e6);
  if (done == total)
    fputc('\n', stderr);
  fflush(stderr);
}

/* ---- running ------------------------------------------------------------- */

/* The training run the run objectives rank by (--train-tokens and the other
 * training-run options). */
static gboolean
with_run(StPlanSpec *spec, StCliRun *train, const char *cluster, GError **error)
{
  if (!st_cli_run_prepare(train, cluster, TRUE, error))
    return FALSE;
  gboolean wanted = st_cli_run_wanted(train);
  const char *objective = st_plan_objective_name(spec->objective);
  if (st_plan_objective_is_run(spec->objective) && !wanted)
    return st_cli_usage_error(error, "--objective %s ranks whole training runs: give "
                                     "--train-tokens or --train-samples",
                              objective);
  if (wanted && !st_plan_objective_is_run(spec->objective))
    return st_cli_usage_error(error, "--train-tokens: the training run ranks under --objective "
                                     "time-to-train, cost or energy, not %s",
                              objective);
  if (spec->objective == ST_PLAN_OBJ_COST && train->spec.price_gpu_hour <= 0 &&
      train->spec.price_kwh <= 0)
    return st_cli_usage_error(error, "--objective cost: give --price-gpu-hour or --price-kwh");
  if (wanted) {
    spec->run = g_new0(StRunSpec, 1);
    st_run_spec_copy(spec->run, &train->spec);
    /* The run's knobs: each point's run tries every value. */
    spec->run_intervals = train->intervals != NULL ? g_array_ref(train->intervals) : NULL;
    spec->run_spares = train->spares != NULL ? g_array_ref(train->spares) : NULL;
  }
  return TRUE;
}

static StPlanSpec *
make_spec(const Args *a, GError **error)
{
  g_autoptr(StPlanSpec) spec = st_plan_spec_new();
  if (a->space != NULL && !st_plan_spec_load(spec, a->space, error))
    return NULL;
  for (guint i = 0; i + 1 < a->given->len; i += 2)
    if (!st_plan_spec_set(spec, g_ptr_array_index(a->given, i),
                          g_ptr_array_index(a->given, i + 1), error))
      return NULL;
  return g_steal_pointer(&spec);
}

static void
print_timing(const StPlan *plan, FILE *out)
{
  const StPlanCounts *c = &plan->counts;
  fprintf(out, "searched %d configurations in %.3f s on %d thread%s: %.0f configurations/s, "
               "%.0f simulations/s\n",
          c->configurations, plan->seconds, plan->threads, plan->threads == 1 ? "" : "s",
          c->configurations / MAX(plan->seconds, 1e-9), c->simulated / MAX(plan->seconds, 1e-9));
}

/* CPU time of this process, s: with the wall time it says how much of the
 * machine a run had (other programs compete for the cores). */
static double
cpu_seconds(void)
{
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The same search serially and on the pool, in this process. */
static gboolean
bench(StPlanSpec *spec, const StCliInputs *in, GError **error)
{
  int threads = spec->threads > 0 ? spec->threads : (int)g_get_num_processors();
  spec->threads = 1;
  double c0 = cpu_seconds();
  g_autoptr(StPlan) serial = st_plan_run(spec, in->model, in->cluster, in->profile, NULL, NULL,
                                         error);
  if (serial == NULL)
    return FALSE;
  spec->threads = threads;
  double c1 = cpu_seconds();
  g_autoptr(StPlan) parallel = st_plan_run(spec, in->model, in->cluster, in->profile, NULL,
                                           NULL, error);
  if (parallel == NULL)
    return FALSE;
  double c2 = cpu_seconds();
  g_autoptr(cJSON) a = st_plan_to_json(serial);
  g_autoptr(cJSON) b = st_plan_to_json(parallel);
  g_autofree char *ta = cJSON_Print(a);
  g_autofree char *tb = cJSON_Print(b);
  printf("serial:   ");
  print_timing(serial, stdout);
  printf("parallel: ");
  print_timing(parallel, stdout);
  printf("cpu:      serial %.3f s (%.2f cores busy), parallel %.3f s (%.2f cores busy)\n",
         c1 - c0, (c1 - c0) / MAX(serial->seconds, 1e-9), c2 - c1,
         (c2 - c1) / MAX(parallel->seconds, 1e-9));
  printf("speedup:  %.2fx on %d threads (%u processors); plans identical: %s\n",
         serial->seconds / MAX(parallel->seconds, 1e-9), threads, g_get_num_processors(),
         strcmp(ta, tb) == 0 ? "yes" : "NO");
  if (strcmp(ta, tb) != 0) {
    g_set_error(error, ST_PLAN_ERROR, ST_ERROR_FAILED,
                "the serial and parallel searches gave different plans");
    return FALSE;
  }
  return TRUE;
}

/* --chakra PREFIX: the traced schedule, imported onto the cluster as
 * loaded, for `steps` steps; its model is what the plan is for. */
static StSchedule *
import_trace(const Args *a, const StCliInputs *in, int steps, GError **error)
{
  /* A foreign trace's durations would go into this profile; it is refused. */
  g_autoptr(StProfile) scratch = st_profile_new();
  StChakraImportOptions io = {.cluster = in->cluster, .profile = scratch, .steps = steps};
  StChakraImportStats stats = {0};
  g_autoptr(StSchedule) s = st_chakra_import(a->chakra, &io, &stats, error);
  gboolean foreign = s != NULL && !stats.from_stagger;
  st_chakra_import_stats_clear(&stats);
  if (foreign) {
    g_set_error(error, ST_PLAN_ERROR, ST_ERROR_INVALID,
                "--chakra %s: a trace stagger did not write has no model of layers to plan "
                "for; simulate it with 'stagger sim --chakra'", a->chakra);
    return NULL;
  }
  return g_steal_pointer(&s);
}

/* What the plan does not say and the trace does: its global batch,
 * precision and optimizer, so that the plan trains the same way. */
static gboolean
spec_from_trace(StPlanSpec *spec, const StSchedule *s, GError **error)
{
  g_autofree char *batch = g_strdup_printf("%" G_GINT64_FORMAT, s->settings.global_batch);
  return (spec->global_batch > 0 || spec->gpu_batch > 0 || s->settings.global_batch <= 0 ||
          st_plan_spec_set(spec, "global-batch", batch, error)) &&
         (st_plan_spec_values(spec, "precision") != NULL ||
          st_plan_spec_set(spec, "precision", st_precision_name(s->settings.precision), error)) &&
         (st_plan_spec_values(spec, "optimizer") != NULL ||
          st_plan_spec_set(spec, "optimizer", st_optimizer_name(s->settings.optimizer), error));
}

/* The traced schedule simulated as the plan simulates, set beside the
 * winner. */
static gboolean
print_trace(const Args *a, const StSchedule *s, const StCliInputs *in, const StPlan *plan,
            GError **error)
{
  StEngineOptions eo = {in->profile, "auto", NULL, plan->spec->no_fold, NULL};
  g_autoptr(StTimeline) t = st_simulate(s, &eo, NULL, error);
  if (t == NULL) {
    g_prefix_error(error, "%s: ", a->chakra);
    return FALSE;
  }
  g_autoptr(StSummary) sum = st_summary_new(t);
  int64_t peak = st_summary_worst_device(sum)->peak_bytes;
  g_autofree char *mem = st_format_bytes(peak);
  printf("\nthe traced schedule (%s): %.3f ms per step, %.1f samples/s on %d GPUs, peak %s "
         "per GPU\n", s->settings.description, sum->step_time_ns / 1e6, sum->samples_per_s,
         sum->gpus_used, mem);
  int w = st_plan_winner(plan);
  if (w >= 0) {
    const StPlanPoint *p = &plan->points[w];
    printf("the plan's winner (%s): %.3f ms per step, %.1f samples/s on %d GPUs: %.2fx the "
           "trace's step time\n", p->description, p->step_time_ns / 1e6, p->samples_per_s,
           p->gpus_used, (double)p->step_time_ns / MAX(sum->step_time_ns, 1));
  }
  return TRUE;
}

static gboolean
search(Args *a, StPlanSpec *spec, const StCliInputs *in, GError **error)
{
  Bar bar = {a->quiet, isatty(STDERR_FILENO), g_get_monotonic_time(), 0};
  if (!a->quiet)
    fprintf(stderr, "planning %s on %s (%s, %d per node)\n", in->model->name,
            in->cluster->name, in->cluster->gpu.name,
            spec->gpus_per_node > 0 ? spec->gpus_per_node : in->cluster->gpus_per_node);
  int64_t device = in->cluster->gpu.memory_bytes;
  if (a->dist.rank == 0 && device > 0 && spec->mem_cap > device) {
    g_autofree char *cap = st_format_bytes(spec->mem_cap);
    g_autofree char *has = st_format_bytes(device);
    fprintf(stderr,
            "note: --mem-cap %s is more than the GPU's memory (%s: %s): configurations must "
            "fit in %s\n",
            cap, in->cluster->gpu.name, has, has);
  }
  g_autoptr(StPlan) plan = st_plan_run_spread(spec, in->model, in->cluster, in->profile,
                                              &a->dist, on_progress, &bar, error);
  if (plan == NULL)
    return FALSE;
  if (a->dist.rank != 0) /* rank 0 prints and writes what every rank found */
    return TRUE;
  if (!a->quiet)
    print_timing(plan, stderr);
  printf("\n");
  st_plan_print(plan, a->top, stdout);
  if (a->traced != NULL && !print_trace(a, a->traced, in, plan, error))
    return FALSE;
  fflush(stdout);
  if (a->outdir != NULL) {
    if (!st_plan_write(plan, st_outdir_path(a->outdir), error)) {
      g_prefix_error(error, "nothing written, %s left as it was: ", a->out);
      return FALSE;
    }
    if (!st_outdir_commit(a->outdir, FALSE, NULL, error))
      return FALSE;
    fprintf(stderr, "wrote %s (plan.json, plan.csv); plots: stagger plot %s\n", a->out, a->out);
  } else {
    fprintf(stderr, "no --out DIR given: nothing written\n");
  }
  if (a->emit == NULL)
    return TRUE;
  int winner = st_plan_winner(plan);
  if (winner < 0) {
    g_set_error(error, ST_PLAN_ERROR, ST_ERROR_FAILED,
                "--emit-schedule %s: no configuration fits, so there is no winner to write",
                a->emit);
    return FALSE;
  }
  g_autoptr(StSchedule) s = st_plan_build(plan, in->profile, winner, error);
  if (s == NULL || !st_schedule_save(s, a->emit, error))
    return FALSE;
  fprintf(stderr, "wrote the winner's schedule to %s (stagger sim --schedule %s)\n", a->emit,
          a->emit);
  return TRUE;
}

static gboolean
run(int argc, char **argv, GError **error)
{
  Args a = {.top = 20, .command = st_cli_command_line(argc, argv)};
  a.given = g_ptr_array_new_with_free_func(g_free);
  a.scratch = st_plan_spec_new();
  const GOptionEntry entries[] = {
    {"model", 'm', 0, G_OPTION_ARG_FILENAME, &a.model, "Model description (models/*.json)",
     "FILE"},
    {"cluster", 'c', 0, G_OPTION_ARG_FILENAME, &a.cluster,
     "Cluster description (models/clusters/*.json): the node that --nodes copies", "FILE"},
    {"profile", 'p', 0, G_OPTION_ARG_FILENAME, &a.profile,
     "Measured costs: a profile file or a folder of them (default: roofline and alpha-beta "
     "estimates)",
     "PATH"},
    {"calibration", 0, 0, G_OPTION_ARG_FILENAME, &a.calibration,
     "Factors fitted to measured runs (stagger calibrate), which also give each prediction "
     "its 90 % interval; none = the published numbers alone (default: "
     "models/calibration/default.json)",
     "FILE|none"},
    {"out", 'o', 0, G_OPTION_ARG_FILENAME, &a.out, "Output folder: plan.json, plan.csv", "DIR"},
    {"space", 0, 0, G_OPTION_ARG_FILENAME, &a.space,
     "JSON file of search options ({\"nodes\": \"1-64\", \"zero-stage\": [2, 3]}); the "
     "command line overrides it",
     "FILE"},
    {"emit-schedule", 0, 0, G_OPTION_ARG_FILENAME, &a.emit,
     "Write the winner's schedule (as 'stagger schedule' does), for 'stagger run --schedule' "
     "or 'stagger validate --schedule'",
     "FILE"},
    {"chakra", 0, 0, G_OPTION_ARG_FILENAME, &a.chakra,
     "Plan for the model of a Chakra trace stagger wrote (instead of --model), at its global "
     "batch, precision and optimizer unless given, and set the traced schedule beside the "
     "winner (docs/INTEROP.md)",
     "PREFIX"},
    {"top", 0, 0, G_OPTION_ARG_INT, &a.top, "Rows of the ranked table (default: 20)", "N"},
    {"quiet", 'q', 0, G_OPTION_ARG_NONE, &a.quiet, "No progress on stderr", NULL},
    {"bench", 0, 0, G_OPTION_ARG_NONE, &a.bench,
     "Run the search serially and on the thread pool in this process; print configurations "
     "per second and the speedup, and check that both plans are identical",
     NULL},
    {NULL},
  };
  g_autoptr(GOptionContext) ctx =
    g_option_context_new("- search strategies and cluster shapes under constraints");
  g_option_context_set_summary(
    ctx,
    "Crosses every registered strategy (or --strategy) and the options it declares as\n"
    "knobs with node and GPU counts, micro-batch sizes and gradient accumulation; builds\n"
    "and simulates each configuration on a thread pool; ranks those that fit by the\n"
    "objective. Lower bounds of step time and memory, computed from each schedule without\n"
    "simulating it, skip configurations that provably cannot win (the output says how many).\n"
    "Configurations that do not fit or that a strategy refuses are listed with the reason.");
  g_option_context_set_description(
    ctx,
    "Example:\n"
    "  stagger plan --model models/gpt3-2.7b.json --cluster models/clusters/dgx-h100.json \\\n"
    "      --nodes 1-64 --global-batch 512 --mem-cap 80GiB --precision mixed \\\n"
    "      --objective time --out runs/plan --emit-schedule best.json\n"
    "  stagger plot runs/plan\n\n"
    "Every option of 'stagger sim' takes a comma list here, and the planner searches each\n"
    "value: --precision fp32,mixed --zero-stage 2,3. An option that some strategy declares\n"
    "as a knob varies only for the strategies that declare it.\n"
    "--out DIR receives plan.json (every configuration: status, reason, bounds, step time,\n"
    "memory by category, rank, Pareto fronts) and plan.csv (docs/FORMATS.md), written\n"
    "aside and moved into place whole when the search ends (a DIR that stagger did not\n"
    "write is refused without --force).\n");
  g_option_context_add_main_entries(ctx, entries, NULL);
  GOptionGroup *main_group = g_option_context_get_main_group(ctx);
  st_cli_add_force_entry(main_group, &a.force);
  g_option_context_add_group(ctx, search_group(&a));
  StCliRun train;
  st_cli_run_init(&train);
  g_option_context_add_group(ctx, st_cli_run_group(&train));

  StCliInputs in = {0};
  g_autoptr(StPlanSpec) spec = NULL;
  gboolean ok = g_option_context_parse(ctx, &argc, &argv, error) &&
                (argc <= 1 || st_cli_usage_error(error, "unexpected argument '%s'", argv[1]));
  a.dist = (StPlanDist){0, 1, NULL, NULL};
  const StPlanDistBackend *mpi = NULL;
  if (ok && st_plan_dist_launched() > 1) {
    /* Under mpirun: the search spreads over the ranks (plan_dist.h). */
    mpi = st_module_symbol("mpi", ST_PLAN_DIST_SYMBOL, "the planner's MPI backend",
                           "MPI (Debian: libopenmpi-dev)", error);
    ok = mpi != NULL && mpi->open(&a.dist, error);
    if (!ok)
      mpi = NULL;
    if (ok && a.bench)
      ok = st_cli_usage_error(error, "--bench runs in one process, not under mpirun");
    if (ok && a.dist.rank != 0) {
      a.quiet = TRUE;
      g_clear_pointer(&a.out, g_free);
      g_clear_pointer(&a.emit, g_free);
    }
  }
  if (ok && a.top < 0)
    ok = st_cli_usage_error(error, "--top %d: must be 0 or more", a.top);
  if (ok && a.out != NULL && !a.bench)
    ok = (a.outdir = st_cli_out_begin(a.out, a.force, a.command, error)) != NULL;
  if (ok)
    ok = st_cli_check_writable("emit-schedule", a.emit, error);
  if (ok && a.chakra != NULL && a.model != NULL)
    ok = st_cli_usage_error(error, "give --model FILE or --chakra PREFIX, not both");
  if (ok && a.chakra != NULL && a.cluster == NULL)
    ok = st_cli_usage_error(error, "--cluster FILE is required");
  if (ok && a.chakra != NULL) {
    /* The model comes from the trace; the cluster and profile as usual. */
    ok = (in.cluster = st_cluster_load(a.cluster, error)) != NULL &&
         (a.profile == NULL || (in.profile = st_profile_load(a.profile, error)) != NULL);
  } else if (ok) {
    StCliShared sh = {.model = a.model, .cluster = a.cluster, .profile = a.profile,
                      .calibration = a.calibration, .no_precision_note = TRUE};
    ok = st_cli_load_inputs(&sh, &in, error);
  }
  if (ok) {
    spec = make_spec(&a, error);
    ok = spec != NULL;
  }
  if (ok)
    spec->step_spread = in.calib.step;
  if (ok)
    ok = with_run(spec, &train, a.cluster, error);
  if (ok && a.chakra == NULL && a.dist.rank == 0)
    st_cli_note_precision(in.model, st_plan_spec_values(spec, "precision") != NULL);
  if (ok && a.chakra != NULL) {
    const StPlanValues *steps = st_plan_spec_values(spec, "steps");
    int n = steps != NULL ? atoi(g_ptr_array_index(steps->values, 0)) : 2;
    ok = (a.traced = import_trace(&a, &in, n, error)) != NULL &&
         spec_from_trace(spec, a.traced, error);
    if (ok)
      in.model = st_model_copy(a.traced->model);
  }
  if (ok)
    ok = a.bench ? bench(spec, &in, error) : search(&a, spec, &in, error);
  if (mpi != NULL)
    mpi->close(&a.dist);
  st_cli_inputs_clear(&in);
  st_schedule_free(a.traced);
  g_free(a.chakra);
  g_free(a.model);
  g_free(a.cluster);
  g_free(a.profile);
  g_free(a.calibration);
  g_free(a.out);
  g_free(a.space);
  g_free(a.emit);
  g_free(a.entries);
  g_free(a.command);
  st_outdir_free(a.outdir);
  g_ptr_array_unref(a.given);
  st_plan_spec_free(a.scratch);
  st_cli_run_clear(&train);
  return ok;
}

const StCommand st_cmd_plan = {
  "plan",
  "Search strategies and cluster shapes under constraints; rank them, with a Pareto view",
  run,
};
