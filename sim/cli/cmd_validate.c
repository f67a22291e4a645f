/* cmd_validate.c: `stagger validate`: the simulator against a real run of
 * the same schedule. Each case (a strategy at a rank count, the ranks
 * sharing this machine's one device; or a stored --schedule, run as
 * stored) is built once, simulated with a measured profile, executed, and
 * compared (output/compare.h).
 *
 * --out DIR gets DIR/CASE/{predicted,measured}/ (the outputs of sim and
 * run), DIR/CASE/validate.json, and over all cases DIR/validate.json, .csv
 * and .md (output/validation.h). A case that fails (out of memory, a
 * strategy the executor cannot run) is reported and recorded, and the
 * others still run.
 */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/util.h"
#include "cli/cli.h"
#include "engine/engine.h"
#include "output/output.h"
#include "output/validation.h"

/* A case of the validation, and what it needs while it runs. */
typedef struct {
  StValidationCase v; /* first: a Case * is a StValidationCase * */
  int index, n;       /* the strategy's place in --strategy, for per-run options */
  StSchedule *schedule;
  StTimeline *predicted_t;
  StSummary *predicted, *measured;
  GPtrArray *timelines; /* the measured one */
  char *admissions;     /* a multiplexed run's admission decisions (CSV), or NULL */
} Case;

static void
case_free(gpointer p)
{
  Case *c = p;
  st_summary_free(c->predicted);
  st_summary_free(c->measured);
  st_timeline_free(c->predicted_t);
  if (c->timelines != NULL)
    g_ptr_array_unref(c->timelines);
  st_schedule_free(c->schedule);
  st_validation_case_clear(&c->v);
  g_free(c->admissions);
  g_free(c);
}

typedef struct {
  StCliShared sh;
  StCliExec ex;
  char *device;         /* the profile's device the local cluster is named after */
  char *schedule;       /* --schedule FILE: the one case, as stored */
  StSchedule *stored;   /* its schedule until the case takes it */
  char **ranks;         /* --ranks as a list: every strategy runs at each */
  StModel *model;
  StProfile *profile;
  StExecOptions exec;
  StCliInputs in;       /* only its calibration: --calibration when given */
  char *command;        /* as typed, for the manifest */
} Validate;

/* --ranks is the cases' second axis, not a per-strategy list: take it out
 * of what st_cli_options_for splits. */
static gboolean
take_ranks(Validate *v, GError **error)
{
  GPtrArray *given = v->sh.given;
  g_autofree char *text = g_strdup("1");
  for (guint i = 0; given != NULL && i + 1 < given->len;) {
    if (strcmp(g_ptr_array_index(given, i), "ranks") == 0) {
      g_free(text);
      text = g_strdup(g_ptr_array_index(given, i + 1));
      g_ptr_array_remove_range(given, i, 2);
    } else {
      i += 2;
    }
  }
  v->ranks = g_strsplit(text, ",", -1);
  for (char **r = v->ranks; *r != NULL; r++) {
    gint64 n;
    if (!g_ascii_string_to_signed(g_strstrip(*r), 10, 1, 4096, &n, NULL))
      return st_cli_usage_error(error, "--ranks %s: expected a comma list of counts, 1 to 4096",
                                text);
  }
  return TRUE;
}

/* The device whose profile entries the simulator reads: --device, or the
 * profile's only one. */
static gboolean
pick_device(Validate *v, GError **error)
{
  g_auto(GStrv) devices = st_profile_devices(v->profile);
  g_autofree char *list = g_strjoinv(", ", devices);
  if (devices[0] == NULL)
    return st_cli_usage_error(error, "--profile %s holds no measurements", v->sh.profile);
  if (v->device == NULL && devices[1] != NULL)
    return st_cli_usage_error(error, "--profile %s measured several devices (%s): name one "
                                     "with --device",
                              v->sh.profile, list);
  if (v->device == NULL)
    v->device = g_strdup(devices[0]);
  else if (!g_strv_contains((const char *const *)devices, v->device))
    return st_cli_usage_error(error, "--device %s: not in --profile %s (it has %s)", v->device,
                              v->sh.profile, list);
  return TRUE;
}

/* --schedule FILE: one case, run as stored (on this machine's device, every
 * rank on it), simulated with the profile's entries for its cluster's GPU. */
static gboolean
load_schedule(Validate *v, GError **error)
{
  if (v->sh.model != NULL || v->sh.strategy != NULL || v->sh.cluster != NULL ||
      v->sh.given != NULL)
    return st_cli_usage_error(error, "--schedule FILE already holds the model, cluster, "
                                     "strategy and options: drop the others");
  if (v->sh.profile == NULL)
    return st_cli_usage_error(error, "--profile PATH is required: measure one with "
                                     "'stagger profile' on this machine");
  StSchedule *s = st_schedule_load(v->schedule, error);
  if (s == NULL || !st_schedule_check(s, error)) {
    st_schedule_free(s);
    return FALSE;
  }
  v->stored = s;
  v->model = st_model_copy(s->model);
  v->ranks = g_strsplit("", ",", -1);
  if (!st_cli_exec_options(&v->ex, &v->exec, error) ||
      (v->profile = st_profile_load(v->sh.profile, error)) == NULL)
    return FALSE;
  g_free(v->device);
  v->device = g_strdup(s->cluster->gpu.name);
  g_auto(GStrv) devices = st_profile_devices(v->profile);
  if (!g_strv_contains((const char *const *)devices, v->device))
    fprintf(stderr, "warning: --profile %s has no entries for the schedule's GPU '%s': its "
                    "costs are estimates\n",
            v->sh.profile, v->device);
  return TRUE;
}

static gboolean
load_inputs(Validate *v, GError **error)
{
  if (v->schedule != NULL)
    return load_schedule(v, error);
  if (v->sh.model == NULL)
    return st_cli_usage_error(error, "--model FILE is required");
  if (v->sh.profile == NULL)
    return st_cli_usage_error(error, "--profile PATH is required: measure one with "
                                     "'stagger profile' on this machine");
  if (v->sh.cluster != NULL)
    return st_cli_usage_error(error, "validate runs on this machine's one device: drop "
                                     "--cluster (--ranks R places R ranks on it)");
  /* This machine's own costs are measured (--profile): a calibration of
   * published runs applies only when asked for. */
  if (v->sh.calibration != NULL && !st_cli_load_calibration(v->sh.calibration, &v->in, error))
    return FALSE;
  return take_ranks(v, error) && st_cli_exec_options(&v->ex, &v->exec, error) &&
         (v->model = st_model_load(v->sh.model, error)) != NULL &&
         (v->profile = st_profile_load(v->sh.profile, error)) != NULL && pick_device(v, error);
}

/* Builds, simulates and runs one case; FALSE with `error` set when any
 * step fails (the case keeps what it got). */
static gboolean
run_case(Validate *v, Case *c, GError **error)
{
  StOptions o;
  if (!st_cli_options_for(&v->sh, c->index, c->n, &o, error))
    return FALSE;
  g_autofree char *ranks = g_strdup_printf("%d", c->v.ranks);
  g_autoptr(StCluster) cluster = NULL;
  gboolean ok = c->schedule != NULL ||
                (st_options_set(&o, "ranks", ranks, error) &&
                 (cluster = st_cli_local_cluster(v->device, error)) != NULL &&
                 (st_calibration_apply(&v->in.calib, cluster), TRUE) &&
                 (c->schedule = st_strategy_build(st_strategy_find(c->v.strategy), v->model,
                                                  cluster, v->profile, &o, error)) != NULL);
  StEngineOptions eo = {v->profile, o.comm_algo, o.share_model, FALSE, NULL};
  StEngineStats stats = {0};
  ok = ok && (c->predicted_t = st_simulate(c->schedule, &eo, &stats, error)) != NULL;
  st_engine_stats_clear(&stats);
  st_options_clear(&o);
  if (!ok)
    return FALSE;
  c->predicted = st_summary_new(c->predicted_t);
  st_cli_spread(&v->in, c->predicted);
  fprintf(stderr, "  %s: predicted step %.3f ms\n", c->v.name, c->predicted->step_time_ns / 1e6);
  c->timelines = g_ptr_array_new_with_free_func((GDestroyNotify)st_timeline_free);
  /* --steps auto: the run measures the steps the prediction found steady. */
  StSteady window;
  gboolean auto_steps = c->schedule->steps == 0;
  if (auto_steps)
    st_cli_exec_auto_steps(c->schedule, c->predicted, &window);
  c->measured = st_cli_exec_run(c->schedule, c->v.name, &v->exec, v->ex.eval_every, auto_steps ? &window : NULL,
                                c->timelines, &c->admissions, error);
  if (c->measured == NULL)
    return FALSE;
  st_compare(c->predicted, c->measured, &c->v.cmp);
  return TRUE;
}

/* "host: 2 CPU cores" of "host: 2 CPU cores (AMD EPYC), reference kernels":
 * the backend and the device, without the details one run may leave out.
 * Transfer full. */
static char *
machine_core(const char *machine)
{
  gsize n = strcspn(machine, "(,");
  return g_strstrip(g_strndup(machine, n));
}

/* Where the profile's times come from, against the device that ran: the
 * prediction is the measuring machine's, so a profile measured elsewhere
 * (the one shipped in traces/profiles/, on a new machine) shows as error
 * that is not the simulator's. Printed under the table. */
static void
print_profile_origin(const Validate *v, const char *ran_on, FILE *out)
{
  const char *machine = st_profile_machine(v->profile);
  const char *date = st_profile_date(v->profile);
  g_autofree char *when = date != NULL ? g_strdup_printf(" on %s", date) : g_strdup("");
  g_autofree char *measured = machine != NULL ? g_strdup_printf("'%s'%s", machine, when)
                                              : g_strdup_printf("a machine it does not name%s",
                                                                when);
  g_autofree char *a = machine != NULL ? machine_core(machine) : NULL;
  g_autofree char *b = ran_on != NULL ? machine_core(ran_on) : NULL;
  gboolean elsewhere = a == NULL || b == NULL || strcmp(a, b) != 0;
  fprintf(out, "\n%s: the predicted times are those --profile %s measured, on %s; the cases "
               "ran on '%s'.\n",
          elsewhere ? "WARNING: the profile was measured on another machine" : "note",
          v->sh.profile, measured, ran_on != NULL ? ran_on : "?");
  fprintf(out, "%s Profile this machine first and predict from that:\n"
               "  stagger profile --model %s --batches ... --sharing --backend %s --out PROFILE\n"
               "  stagger validate ... --profile PROFILE\n",
          elsewhere ? "Step-time errors then measure the two machines' difference, not the "
                      "simulator's."
                    : "A profile shipped with stagger (traces/profiles/) or measured on another "
                      "machine of this kind predicts that machine's times.",
          v->sh.model != NULL ? v->sh.model : "MODEL", v->exec.device ? v->exec.device : "auto");
}

/* CASE/predicted/, CASE/measured/ and CASE/validate.json. */
static gboolean
write_case(const Case *c, const char *out, GError **error)
{
  g_autofree char *pred = g_build_filename(out, c->v.name, "predicted", NULL);
  g_autofree char *meas = g_build_filename(out, c->v.name, "measured", NULL);
  g_autofree char *file = g_build_filename(out, c->v.name, "validate.json", NULL);
  g_autoptr(cJSON) o = st_validation_case_to_json(&c->v);
  return st_output_write_all(c->predicted, pred, error) &&
         st_output_write_all(c->measured, meas, error) &&
         st_cli_write_admissions(meas, c->admissions, error) && st_json_write_file(file, o, error);
}

static GPtrArray *
make_cases(Validate *v, GError **error)
{
  if (v->stored != NULL) {
    GPtrArray *cases = g_ptr_array_new_with_free_func(case_free);
    Case *c = g_new0(Case, 1);
    g_autofree char *base = g_path_get_basename(v->schedule);
    c->v.name = g_str_has_suffix(base, ".json") ? g_strndup(base, strlen(base) - 5)
                                                : g_strdup(base);
    c->v.strategy = g_strdup(v->stored->settings.strategy);
    c->v.ranks = v->stored->n_ranks;
    c->n = 1;
    c->schedule = g_steal_pointer(&v->stored);
    g_ptr_array_add(cases, c);
    return cases;
  }
  g_auto(GStrv) names = st_cli_strategy_names(&v->sh, error);
  if (names == NULL)
    return NULL;
  GPtrArray *cases = g_ptr_array_new_with_free_func(case_free);
  guint n = g_strv_length(names);
  for (guint i = 0; i < n; i++) {
    /* A strategy that runs more than once is told apart by its per-run
     * values ("zero-zero-stage3-r4"). */
    g_autofree char *label = st_cli_run_label(&v->sh, names, (int)i);
    for (char **r = v->ranks; *r != NULL; r++) {
      Case *c = g_new0(Case, 1);
      c->v.strategy = g_strdup(names[i]);
      c->index = (int)i;
      c->n = (int)n;
      c->v.ranks = atoi(*r);
      c->v.name = label != NULL ? g_strdup_printf("%s-%s-r%d", names[i], label, c->v.ranks)
                              : g_strdup_printf("%s-r%d", names[i], c->v.ranks);
      g_ptr_array_add(cases, c);
    }
  }
  return cases;
}

static gboolean
validate(Validate *v, GError **error)
{
  g_autoptr(StOutDir) outdir = NULL;
  if (v->sh.out != NULL &&
      (outdir = st_cli_out_begin(v->sh.out, v->sh.force, v->command, error)) == NULL)
    return FALSE;
  g_autoptr(GPtrArray) cases = make_cases(v, error);
  if (cases == NULL)
    return FALSE;
  int failed = 0;
  g_autofree char *stopped = NULL; /* the case Ctrl-C stopped */
  st_cli_exec_catch_sigint(TRUE);
  for (guint i = 0; i < cases->len && stopped == NULL; i++) {
    Case *c = g_ptr_array_index(cases, i);
    fprintf(stderr, "[%u/%u] %s: %s with %d rank%s on one %s\n", i + 1, cases->len, c->v.name,
            c->v.strategy, c->v.ranks, st_plural(c->v.ranks), v->device);
    g_autoptr(GError) local = NULL;
    gboolean ran = run_case(v, c, &local);
    if (*v->exec.stop)
      stopped = g_strdup_printf("during case '%s'", c->v.name);
    if (ran && c->measured->steps == 0) { /* stopped before a step ended */
      c->v.error = g_strdup("not run: interrupted before its first step ended");
      continue;
    }
    if (ran) {
      st_compare_print(&c->v.cmp, c->v.name, stdout);
      continue;
    }
    if (g_error_matches(local, ST_CLI_ERROR, ST_CLI_ERROR_USAGE)) {
      g_propagate_error(error, g_steal_pointer(&local));
      st_cli_exec_catch_sigint(FALSE);
      return FALSE;
    }
    /* The executor's errors already name the case. */
    g_autofree char *prefix = g_strdup_printf("%s: ", c->v.name);
    const char *why = g_str_has_prefix(local->message, prefix) ? local->message + strlen(prefix)
                                                                : local->message;
    fprintf(stderr, "  %s: FAILED: %s\n", c->v.name, why);
    c->v.error = g_strdup(why);
    failed++;
  }
  for (guint i = 0; i < cases->len; i++) {
    Case *c = g_ptr_array_index(cases, i);
    if (c->measured == NULL && c->v.error == NULL)
      c->v.error = g_strdup("not run: interrupted");
  }
  StValidation result = {v->model->name, v->sh.profile, v->device, cases};
  st_validation_print(&result, stdout);
  const char *ran_on = NULL;
  for (guint i = 0; i < cases->len && ran_on == NULL; i++) {
    const Case *c = g_ptr_array_index(cases, i);
    const char *origin = c->measured != NULL ? c->measured->timeline->origin : NULL;
    if (origin != NULL)
      ran_on = g_str_has_prefix(origin, "measured: ") ? origin + strlen("measured: ") : origin;
  }
  if (v->profile != NULL)
    print_profile_origin(v, ran_on, stdout);
  gboolean ok = TRUE;
  if (outdir == NULL) {
    fprintf(stderr, "no --out DIR given: nothing written\n");
  } else {
    const char *dir = st_outdir_path(outdir);
    for (guint i = 0; i < cases->len && ok; i++) {
      const Case *c = g_ptr_array_index(cases, i);
      ok = c->v.error != NULL || write_case(c, dir, error);
    }
    ok = ok && st_validation_write(&result, dir, error);
    if (!ok)
      g_prefix_error(error, "nothing written, %s left as it was: ", v->sh.out);
    ok = ok && st_outdir_commit(outdir, stopped != NULL, stopped, error);
    if (ok)
      fprintf(stderr, "wrote %s (validate.json, .csv, .md; per case predicted/ and measured/); "
                      "plots: stagger plot %s\n",
              v->sh.out, v->sh.out);
  }
  st_cli_exec_catch_sigint(FALSE);
  if (!ok)
    return FALSE;
  if (stopped != NULL)
    return st_cli_interrupted_error(error, v->sh.out, stopped);
  if (failed > 0)
    g_set_error(error, ST_CLI_ERROR, 0, "%d of %u cases failed (see above)", failed,
                cases->len);
  return failed == 0;
}

static gboolean
run(int argc, char **argv, GError **error)
{
  Validate v = {.command = st_cli_command_line(argc, argv)};
  st_calibration_init(&v.in.calib);
  st_cli_shared_init(&v.sh);
  v.sh.default_framework = "ideal"; /* what the executor implements: 16-bit gradients */
  st_cli_exec_init(&v.ex);
  const GOptionEntry entries[] = {
    {"device", 0, 0, G_OPTION_ARG_STRING, &v.device,
     "The device of --profile to predict with, when it measured several", "NAME"},
    {"schedule", 0, 0, G_OPTION_ARG_FILENAME, &v.schedule,
     "Validate a stored schedule (from 'stagger schedule' or 'stagger plan --emit-schedule') "
     "instead of building cases; its ranks all run on this machine's device",
     "FILE"},
    {NULL},
  };
  g_autoptr(GOptionContext) ctx =
    g_option_context_new("- check the simulator's predictions against real runs");
  g_option_context_set_summary(
    ctx, "For each --strategy at each of --ranks (a comma list; the ranks share this\n"
         "machine's one device): builds the schedule, simulates it with the measured\n"
         "--profile, runs it for real, and compares step time, time per op class and the\n"
         "memory peak by category. Prints a table per case and one over all cases with\n"
         "the mean absolute percentage error (MAPE) of step time.");
  g_option_context_set_description(
    ctx, "Example:\n"
         "  stagger profile --model models/gpt2-124m.json --batches 8 --out prof/gpt2.json\n"
         "  stagger validate --model models/gpt2-124m.json --strategy dp,zero,cdp \\\n"
         "      --ranks 1,2,4 --micro-batch 8 --profile prof --out runs/validate\n"
         "  stagger plot runs/validate\n\n"
         "--out DIR gets validate.json and validate.csv over all cases, and per case\n"
         "CASE/predicted/ and CASE/measured/ (the outputs of sim and run) and\n"
         "CASE/validate.json. With --steps auto (the default) the simulation runs until\n"
         "its state repeats and the real run measures the steps it found steady (at\n"
         "least 3, after at least one warm-up step, with one more after them); with\n"
         "--steps N the first step is warm-up and not compared. A failed case is\n"
         "recorded and the others still run; the exit status is then 1. Ctrl-C (or\n"
         "SIGTERM) stops the case running, writes what ran (marked partial in\n"
         "manifest.json) and exits 130 (143). DIR is written aside and replaces --out whole.\n");
  GOptionGroup *shared = st_cli_shared_group(&v.sh);
  g_option_group_add_entries(shared, entries);
  st_cli_exec_add_entries(&v.ex, shared);
  st_cli_add_force_entry(shared, &v.sh.force);
  g_option_context_set_main_group(ctx, shared);
  gboolean ok = g_option_context_parse(ctx, &argc, &argv, error) &&
                (argc <= 1 || st_cli_usage_error(error, "unexpected argument '%s'", argv[1])) &&
                load_inputs(&v, error) && validate(&v, error);
  st_profile_free(v.profile);
  st_model_free(v.model);
  st_schedule_free(v.stored);
  g_free(v.schedule);
  g_strfreev(v.ranks);
  g_free(v.device);
  g_free(v.command);
  st_cli_exec_clear(&v.ex);
  st_cli_shared_clear(&v.sh);
  st_calibration_clear(&v.in.calib);
  return ok;
}

const StCommand st_cmd_validate = {
  "validate",
  "Simulate and really run the same schedules, and compare time and memory",
  run,
};
