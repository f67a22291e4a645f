/* cmd_sim.c: `stagger sim`: build each strategy's schedule, simulate it,
 * print the results (side by side when several) and write the outputs. */
#include <string.h>

#include "base/error.h"
#include "base/limits.h"
#include "base/units.h"
#include "cli/cli.h"
#include "cost/framework.h"
#include "engine/engine.h"
#include "interop/chakra.h"
#include "output/output.h"

typedef struct {
  char *name;            /* unique: the subdirectory when several run */
  StSchedule *schedule;
  StTimeline *timeline;
  StSummary *summary;
  StRunResult *train;    /* the whole training run (--train-tokens), or NULL */
} Run;

static void
run_free(gpointer p)
{
  Run *r = p;
  if (r->train != NULL)
    st_run_result_clear(r->train);
  g_free(r->train);
  st_summary_free(r->summary);
  st_timeline_free(r->timeline);
  st_schedule_free(r->schedule);
  g_free(r->name);
  g_free(r);
}

static void
list_strategies(void)
{
  printf("%-10s %s\n", "STRATEGY", "WHAT IT BUILDS (after: citation)");
  for (const StStrategy *const *s = st_strategies(); *s != NULL; s++) {
    g_autofree char *update = st_strategy_update_summary(*s);
    printf("%-10s %s\n%-10s   after: %s\n%-10s   update: %s\n", (*s)->name, (*s)->summary, "",
           (*s)->citation, "", update);
  }
  printf("\nupdate: what a configuration computes against synchronous SGD/Adam on the model as\n"
         "given: sync (the same update), stale (delayed gradients), pruned (a pruned model).\n"
         "stagger plan ranks only sync and pruned ones unless given --allow-stale.\n");
}

static const char *
yes(gboolean b)
{
  return b ? "yes" : "no";
}

static void
list_frameworks(void)
{
  static const char *const fuse_names[] = {"rmsnorm", "activation", "rope", "residual",
                                           "softmax", "loss", "optimizer", "moe dispatch",
                                           "grouped experts"};
  for (const StFramework *const *f = st_frameworks(); *f != NULL; f++) {
    const StFramework *x = *f;
    g_autoptr(GString) fused = g_string_new(NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(fuse_names); i++)
      if (x->fused & (1u << i))
        g_string_append_printf(fused, "%s%s", fused->len ? ", " : "", fuse_names[i]);
    g_autofree char *bucket = x->bucket_bytes == G_MAXINT64 ? g_strdup("one")
                              : x->bucket_bytes == 0       ? g_strdup("per layer / block")
                                                           : st_format_bytes(x->bucket_bytes);
    printf("%s: %s\n  (%s)\n", x->name, x->summary, x->version);
    printf("  gradients   %d bytes under mixed precision, reduced %s backward%s, bucket %s\n",
           x->grad_bytes_mixed, x->overlap_grad_reduce ? "during" : "after",
           x->overlap_zero12 != x->overlap_grad_reduce
             ? (x->overlap_zero12 ? " (during under ZeRO 1-2)" : " (after under ZeRO 1-2)")
             : "",
           bucket);
    printf("              from: %s\n", x->gradients_source);
    printf("  states      %s; ZeRO 2-3 reductions %s; ZeRO-3 shards %s\n",
           x->states_16bit ? "no fp32 master: a 16-bit model, its optimizer states and gradient "
                             "shards in 16 bits"
                           : "an fp32 master beside the 16-bit weights",
           x->defer_grad_sync ? "deferred to the last micro-batch (--defer-grad-sync)"
                              : "after every micro-batch",
           x->fp32_shards ? "are the fp32 master" : "in the weights' dtype");
    printf("  kernels     fused: %s; attention: %s; loss on fp32 logits: %s; images %s\n",
           fused->len ? fused->str : "none", st_attn_kernel_names[x->attention], yes(x->logits_fp32),
           x->nchw ? "NCHW" : "NHWC");
    printf("              from: %s\n", x->kernels_source);
    if (x->loss_autograd)
      printf("  loss        PyTorch's F.cross_entropy under autograd: its backward holds the "
             "log-probabilities' gradient%s beside them (tools/autograd/derivatives.yaml)\n",
             x->loss_16bit ? "" : " and the fp32 logits' gradient");
    if (x->dispatch_per_rank)
      printf("  experts     tokens dispatched once per rank they reach (--moe-routing)\n");
    printf("  step        gradient clipping: %s (from: %s)\n", yes(x->clip_grad),
           x->step_source);
    const StFrameworkRuntime *rt = x->runtime;
    g_autofree char *ctxb = st_format_bytes(rt->context_bytes);
    g_autofree char *nccl = st_format_bytes(rt->nccl_bytes_per_comm);
    g_autofree char *ws = st_format_bytes(rt->workspace_bytes);
    printf("  host        %.1f us to issue a kernel (from: %s)\n", rt->host_us_per_kernel,
           rt->host_source);
    printf("  memory      allocator reserve %.0f %%, context %s, NCCL %s per communicator, "
           "workspace %s\n",
           100 * rt->allocator_reserve, ctxb, nccl, ws);
    printf("              from: %s\n\n", rt->memory_source);
  }
  printf("The default: megatron for the megatron strategy, deepspeed for zero, pytorch for\n"
         "dp, ideal for the rest and for --sparsity; run and validate: ideal (what\n"
         "stagger's executor implements).\n");
}

/* What a simulation may hold: --max-memory, else what this machine has. */
static int64_t
memory_budget(const StOptions *options)
{
  return options->max_memory > 0 ? options->max_memory : st_memory_available();
}

/* Simulates `run->schedule` within the memory budget, summarizes, reports
 * progress on stderr. */
static gboolean
simulate(Run *run, const StCliInputs *in, const StOptions *options, gboolean no_fold,
         GError **error)
{
  StEngineOptions eo = {in->profile, options->comm_algo, options->share_model, no_fold, NULL};
  StEngineStats stats = {0};
  gint64 t0 = g_get_monotonic_time();
  g_autoptr(StCliProgress) progress = st_cli_progress_new(run->name, "simulating");
  StEngineBudget budget = {memory_budget(options), st_cli_progress_engine(progress)};
  run->timeline = st_simulate_within(run->schedule, &eo, &budget, &stats, error);
  if (run->timeline == NULL) {
    g_prefix_error(error, "%s: ", run->name);
    return FALSE;
  }
  run->timeline->note = g_strdup(stats.fold_note);
  st_cli_progress_phase(progress, "summarizing");
  run->summary = st_summary_new(run->timeline);
  st_cli_spread(in, run->summary);
  g_clear_pointer(&progress, st_cli_progress_free);
  fprintf(stderr, "  %s: %" G_GINT64_FORMAT " ops, %" G_GINT64_FORMAT
                  " events, %d of %d ranks simulated%s, %.2f s\n",
          run->name, stats.ops, stats.events, stats.sim_ranks, run->schedule->n_ranks,
          stats.folded ? " (identical ranks folded)" : "",
          (g_get_monotonic_time() - t0) / 1e6);
  if (stats.fold_note != NULL)
    fprintf(stderr, "  %s: not folded: %s\n", run->name, stats.fold_note);
  if (run->summary->oom != NULL)
    fprintf(stderr, "  %s: WARNING: out of memory on GPU %d (see the table)\n", run->name,
            run->summary->oom->device);
  st_engine_stats_clear(&stats);
  return TRUE;
}

static char *
unique_name(GPtrArray *runs, const char *base)
{
  char *name = g_strdup(base);
  for (int k = 2;; k++) {
    gboolean taken = FALSE;
    for (guint i = 0; i < runs->len && !taken; i++)
      taken = strcmp(((Run *)g_ptr_array_index(runs, i))->name, name) == 0;
    if (!taken)
      return name;
    g_free(name);
    name = g_strdup_printf("%s-%d", base, k);
  }
}

/* Before building: every rank costs a schedule at least ST_MIN_BYTES_PER_RANK
 * (its placement, program, communicator memberships and, simulated, its
 * folding), so a count of ranks that cannot fit is refused at once. */
static gboolean
fits_to_build(const char *name, const StOptions *options, const StCluster *cluster,
              GError **error)
{
  int64_t ranks = options->ranks > 0 ? options->ranks : cluster->gpus;
  int64_t need = ranks * ST_MIN_BYTES_PER_RANK, limit = memory_budget(options);
  if (limit <= 0 || need <= limit)
    return TRUE;
  g_autofree char *need_text = st_format_bytes(need);
  g_autofree char *limit_text = st_format_bytes(limit);
  g_set_error(error, ST_ENGINE_ERROR, ST_ERROR_UNSUPPORTED,
              "%s: building a schedule of %" G_GINT64_FORMAT " ranks takes at least %s, more "
              "than the %s allowed (--max-memory; by default what this machine has "
              "available): run fewer ranks or GPUs (--ranks, --nodes, --gpus)",
              name, ranks, need_text, limit_text);
  return FALSE;
}

/* The calibration the cluster took, as a note of the schedule (report.json). */
static void
note_calibration(StSchedule *schedule, const StCliInputs *in)
{
  if (in->calib.path == NULL)
    return;
  g_autofree char *what = st_calibration_describe(&in->calib);
  g_autofree char *note = g_strdup_printf("%s (%s)", in->calib.path, what);
  st_schedule_note_text(schedule, "calibration", note);
}

static gboolean
build_runs(StCliShared *sh, GPtrArray *runs, StCliInputs *in, GError **error)
{
  g_auto(GStrv) names = st_cli_strategy_names(sh, error);
  if (names == NULL)
    return FALSE;
  if (!st_cli_load_inputs(sh, in, error))
    return FALSE;
  guint n = g_strv_length(names);
  for (guint i = 0; i < n; i++) {
    const StStrategy *strategy = st_strategy_find(names[i]);
    StOptions options;
    if (!st_cli_options_for(sh, (int)i, (int)n, &options, error))
      return FALSE;
    g_autoptr(StCluster) cluster = st_cli_cluster_for(sh, in, &options, error);
    gboolean ok = cluster != NULL;
    if (ok) {
      fprintf(stderr, "[%u/%u] %s: building the schedule for %s on %d x %s\n", i + 1, n,
              names[i], in->model->name, cluster->gpus, cluster->gpu.name);
      Run *run = g_new0(Run, 1);
      /* A strategy that runs more than once is named by its per-run values. */
      g_autofree char *label = st_cli_run_label(sh, names, (int)i);
      g_autofree char *base =
        label != NULL ? g_strdup_printf("%s-%s", names[i], label) : g_strdup(names[i]);
      run->name = unique_name(runs, base);
      g_ptr_array_add(runs, run);
      ok = fits_to_build(run->name, &options, cluster, error);
      if (ok) {
        g_autoptr(StCliProgress) progress =
          st_cli_progress_new(run->name, "building the schedule");
        run->schedule =
          st_strategy_build(strategy, in->model, cluster, in->profile, &options, error);
      }
      if (ok && run->schedule != NULL)
        note_calibration(run->schedule, in);
      ok = ok && run->schedule != NULL && simulate(run, in, &options, sh->no_fold, error);
    }
    st_options_clear(&options);
    if (!ok)
      return FALSE;
  }
  return TRUE;
}

/* `stagger sim --chakra PREFIX`: a Chakra trace, imported onto --cluster
 * (resized by --nodes / --gpus); a foreign trace's COMP durations become
 * entries of the profile (--profile's, or a new one). */
static gboolean
import_chakra(StCliShared *sh, const char *prefix, const char *groups, GPtrArray *runs,
              StCliInputs *in, GError **error)
{
  if (sh->model != NULL || sh->strategy != NULL)
    return st_cli_usage_error(error, "--chakra PREFIX already holds the ops and their model; "
                                     "drop --model and --strategy");
  if (sh->cluster == NULL)
    return st_cli_usage_error(error, "--cluster FILE is required with --chakra");
  StOptions options;
  if (!st_cli_options_for(sh, 0, 1, &options, error))
    return FALSE;
  g_autoptr(StCluster) cluster = NULL;
  gboolean ok = (in->cluster = st_cluster_load(sh->cluster, error)) != NULL &&
                st_cli_load_calibration(sh->calibration, in, error) &&
                (cluster = st_cli_cluster_for(sh, in, &options, error)) != NULL;
  if (ok && sh->profile != NULL)
    ok = (in->profile = st_profile_load(sh->profile, error)) != NULL;
  else if (ok)
    in->profile = st_profile_new();
  Run *r = g_new0(Run, 1);
  r->name = g_path_get_basename(prefix);
  g_ptr_array_add(runs, r);
  StChakraImportOptions io = {
    .cluster = cluster,
    .profile = in->profile,
    .precision = options.precision,
    .optimizer = options.optimizer,
    .global_batch = options.global_batch,
    .steps = st_cli_given(sh, "steps") ? options.steps : 0,
    .groups_path = groups,
    .no_fold = sh->no_fold,
  };
  StChakraImportStats stats = {0};
  if (ok) {
    fprintf(stderr, "importing the Chakra trace %s onto %d x %s\n", prefix, cluster->gpus,
            cluster->gpu.name);
    r->schedule = st_chakra_import(prefix, &io, &stats, error);
    ok = r->schedule != NULL;
    if (ok)
      note_calibration(r->schedule, in);
  }
  if (ok) {
    fprintf(stderr, "  %s: %d ranks, %" G_GINT64_FORMAT " nodes -> %" G_GINT64_FORMAT
                    " ops (%s)\n", r->name, stats.ranks, stats.nodes, stats.ops,
            stats.from_stagger ? "written by stagger: its own model and settings"
                               : "foreign: costs from durations, else num_ops / tensor_size");
    if (stats.folded > 0)
      fprintf(stderr, "  %s: %d of %d rank files equal to an earlier one up to the renaming "
                      "of ranks: read once (--no-fold reads each)\n", r->name, stats.folded,
              stats.ranks);
    if (stats.warning != NULL)
      fprintf(stderr, "  %s: warning: %s\n", r->name, stats.warning);
    ok = simulate(r, in, &options, sh->no_fold, error);
  }
  st_chakra_import_stats_clear(&stats);
  st_options_clear(&options);
  return ok;
}

/* Into the output folder's temporary place, then into place whole. */
static gboolean
write_outputs(GPtrArray *runs, StOutDir *outdir, const char *out, GError **error)
{
  for (guint i = 0; i < runs->len; i++) {
    Run *run = g_ptr_array_index(runs, i);
    g_autofree char *dir = runs->len > 1
                             ? g_build_filename(st_outdir_path(outdir), run->name, NULL)
                             : g_strdup(st_outdir_path(outdir));
    g_autoptr(StCliProgress) progress = st_cli_progress_new(run->name, "writing the outputs");
    if (!st_output_write_all(run->summary, dir, error) ||
        (run->train != NULL && !st_run_write_csv(run->train, dir, error))) {
      g_prefix_error(error, "nothing written, %s left as it was: ", out);
      return FALSE;
    }
  }
  if (!st_outdir_commit(outdir, FALSE, NULL, error))
    return FALSE;
  gboolean trained = runs->len > 0 && ((Run *)g_ptr_array_index(runs, 0))->train != NULL;
  fprintf(stderr, "wrote %s (report.json, trace.json, memory.csv, comm.csv, groups.csv, links.csv, "
                  "link_rates.csv, ops.csv%s%s); "
                  "plots: stagger plot %s\n",
          out, trained ? ", goodput.csv, run_timeline.csv" : "",
          runs->len > 1 ? " per strategy" : "", out);
  return TRUE;
}

/* The whole training run each simulated step makes (--train-tokens). */
static gboolean
estimate_runs(GPtrArray *runs, const StRunSpec *spec, GError **error)
{
  for (guint i = 0; i < runs->len; i++) {
    Run *r = g_ptr_array_index(runs, i);
    StRunStep step;
    r->train = g_new0(StRunResult, 1);
    gboolean ok = st_run_step_from_summary(r->summary, &step, error) &&
                  st_run_estimate(&step, spec, r->train, error);
    st_run_step_clear(&step);
    if (!ok) {
      g_prefix_error(error, "%s: ", r->name);
      return FALSE;
    }
    r->summary->run = st_run_to_json(r->train, spec);
  }
  return TRUE;
}

static gboolean
run(int argc, char **argv, GError **error)
{
  g_autofree char *command = st_cli_command_line(argc, argv);
  StCliShared sh;
  st_cli_shared_init(&sh);
  gboolean list = FALSE, list_fw = FALSE;
  g_autofree char *schedule_path = NULL, *chakra = NULL, *chakra_groups = NULL;
  const GOptionEntry entries[] = {
    {"list-strategies", 0, 0, G_OPTION_ARG_NONE, &list, "List the strategies and exit", NULL},
    {"list-frameworks", 0, 0, G_OPTION_ARG_NONE, &list_fw,
     "List the framework presets (--framework), what each does and where it is read from, "
     "and exit",
     NULL},
    {"schedule", 0, 0, G_OPTION_ARG_FILENAME, &schedule_path,
     "Simulate a stored schedule (from 'stagger schedule') instead of building one", "FILE"},
    {"chakra", 0, 0, G_OPTION_ARG_FILENAME, &chakra,
     "Simulate a Chakra execution trace PREFIX.<rank>.et on --cluster (docs/INTEROP.md)",
     "PREFIX"},
    {"chakra-groups", 0, 0, G_OPTION_ARG_FILENAME, &chakra_groups,
     "Its communicator-group file (default PREFIX.comm_groups.json, when there)", "FILE"},
    {"no-fold", 0, 0, G_OPTION_ARG_NONE, &sh.no_fold,
     "Simulate every rank, even where identical ranks could be folded into one (with --chakra, "
     "also decode every rank's file, none taken as another's renamed)", NULL},
    {NULL},
  };
  g_autoptr(GOptionContext) ctx =
    g_option_context_new("- predict training steps: time, memory, communication");
  g_option_context_set_summary(
    ctx, "Builds the schedule of each --strategy for --model on --cluster, simulates it over\n"
         "the cost models (a --profile of measured costs where given, else roofline and\n"
         "alpha-beta estimates) and prints step time, throughput, memory peaks by category\n"
         "and communication. Several strategies run side by side.");
  g_option_context_set_description(
    ctx, "Example:\n"
         "  stagger sim --model models/resnet50.json --cluster models/clusters/dgx-h100.json \\\n"
         "      --strategy dp,zero --zero-stage 2 --micro-batch 32 --out runs/r50\n"
         "  stagger plot runs/r50\n"
         "  stagger sim --chakra et/r50 --cluster models/clusters/dgx-h100.json --out runs/et\n\n"
         "--out DIR receives report.json, trace.json (open it in https://ui.perfetto.dev),\n"
         "memory.csv, comm.csv (send rate per link class), groups.csv (each communicator's\n"
         "traffic over time), links.csv (every link: capacity, utilization, peak),\n"
         "link_rates.csv (the busiest links over time) and ops.csv;\n"
         "one subfolder per strategy when several run;\n"
         "manifest.json says which command wrote it. With --train-tokens N, the whole\n"
         "training run each step makes: wall time, goodput, failures, checkpoints,\n"
         "energy, cost (docs/GOODPUT.md; --help-run), and goodput.csv, run_timeline.csv.\n"
         "The folder is written aside and replaces DIR whole when complete (a failed\n"
         "run leaves DIR as it was); a DIR that stagger did not write is refused without\n"
         "--force. docs/FORMATS.md describes every file.\n");
  GOptionGroup *shared = st_cli_shared_group(&sh);
  g_option_group_add_entries(shared, entries);
  st_cli_add_force_entry(shared, &sh.force);
  g_option_context_set_main_group(ctx, shared);
  StCliRun train;
  st_cli_run_init(&train);
  g_option_context_add_group(ctx, st_cli_run_group(&train));

  g_autoptr(GPtrArray) runs = g_ptr_array_new_with_free_func(run_free);
  StCliInputs in = {0};
  g_autoptr(StOutDir) outdir = NULL;
  gboolean ok = g_option_context_parse(ctx, &argc, &argv, error) &&
                (argc <= 1 || st_cli_usage_error(error, "unexpected argument '%s'", argv[1]));
  /* Training-run options are checked before any simulation. */
  if (ok && !list && !list_fw)
    ok = st_cli_run_prepare(&train, sh.cluster, FALSE, error);
  /* An --out that may not be replaced is refused before any work. */
  if (ok && !list && !list_fw && sh.out != NULL)
    ok = (outdir = st_cli_out_begin(sh.out, sh.force, command, error)) != NULL;
  if (ok && list_fw) {
    list_frameworks();
  } else if (ok && list) {
    list_strategies();
  } else if (ok && chakra != NULL) {
    ok = schedule_path == NULL ||
         st_cli_usage_error(error, "give --schedule FILE or --chakra PREFIX, not both");
    ok = ok && import_chakra(&sh, chakra, chakra_groups, runs, &in, error);
  } else if (ok && schedule_path != NULL) {
    if (sh.model || sh.cluster || sh.strategy) {
      ok = st_cli_usage_error(error, "--schedule FILE already holds the model, cluster and "
                                     "strategy; drop --model, --cluster and --strategy");
    } else {
      Run *r = g_new0(Run, 1);
      r->name = g_path_get_basename(schedule_path);
      g_ptr_array_add(runs, r);
      r->schedule = st_schedule_load(schedule_path, error);
      ok = r->schedule != NULL && st_schedule_check(r->schedule, error);
      if (ok && sh.profile != NULL) {
        in.profile = st_profile_load(sh.profile, error);
        ok = in.profile != NULL;
      }
      /* The schedule's cluster is as it was built (calibrated then, if at
       * all): the calibration gives the intervals only. */
      ok = ok && st_cli_load_calibration(sh.calibration, &in, error) &&
           simulate(r, &in, &sh.options, sh.no_fold, error);
    }
  } else if (ok) {
    ok = build_runs(&sh, runs, &in, error);
  }
  if (ok && runs->len > 0 && st_cli_run_wanted(&train))
    ok = estimate_runs(runs, &train.spec, error);
  if (ok && runs->len > 0) {
    printf("\n");
    for (guint i = 0; i < runs->len; i++) {
      Run *r = g_ptr_array_index(runs, i);
      st_summary_print(r->summary, stdout);
      printf("\n");
      if (r->train != NULL) {
        st_run_print(r->train, &train.spec, stdout);
        printf("\n");
      }
    }
    if (runs->len > 1) {
      g_autofree const StSummary **sums = g_new(const StSummary *, runs->len);
      g_autofree const char **names = g_new(const char *, runs->len);
      for (guint i = 0; i < runs->len; i++) {
        sums[i] = ((Run *)g_ptr_array_index(runs, i))->summary;
        names[i] = ((Run *)g_ptr_array_index(runs, i))->name;
      }
      st_summary_print_compare(sums, names, (int)runs->len, stdout);
      if (st_cli_run_wanted(&train)) {
        g_autofree const StRunResult **trains = g_new(const StRunResult *, runs->len);
        for (guint i = 0; i < runs->len; i++)
          trains[i] = ((Run *)g_ptr_array_index(runs, i))->train;
        printf("\n");
        st_run_print_compare(trains, names, (int)runs->len, stdout);
      }
    }
    fflush(stdout);
    if (outdir != NULL)
      ok = write_outputs(runs, outdir, sh.out, error);
    else
      fprintf(stderr, "no --out DIR given: nothing written\n");
  }
  st_cli_inputs_clear(&in);
  st_cli_shared_clear(&sh);
  st_cli_run_clear(&train);
  return ok;
}

const StCommand st_cmd_sim = {
  "sim",
  "Simulate strategies for a model on a cluster: step time, memory, communication",
  run,
};
