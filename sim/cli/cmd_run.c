/* cmd_run.c: `stagger run`: execute schedules for real (the executor) and
 * write the same outputs as a simulation, from measurements. */
#include <string.h>

#include "cli/cli.h"
#include "output/output.h"

/* The schedules to run: a stored one, or each --strategy built as sim does
 * (on this machine's one device without --cluster). */
static gboolean
schedules_of(StCliShared *sh, const char *file, GPtrArray *schedules, GPtrArray *names,
             GError **error)
{
  if (file != NULL) {
    StSchedule *s = st_schedule_load(file, error);
    if (s == NULL || !st_schedule_check(s, error)) {
      st_schedule_free(s);
      return FALSE;
    }
    g_ptr_array_add(schedules, s);
    g_ptr_array_add(names, g_path_get_basename(file));
    return TRUE;
  }
  g_auto(GStrv) list = st_cli_strategy_names(sh, error);
  if (list == NULL)
    return FALSE;
  StCliInputs in = {0};
  gboolean ok;
  if (sh->cluster == NULL) {
    ok = sh->model != NULL ? TRUE : st_cli_usage_error(error, "--model FILE is required");
    ok = ok && (in.model = st_model_load(sh->model, error)) != NULL &&
         (in.cluster = st_cli_local_cluster("local", error)) != NULL;
  } else {
    ok = st_cli_load_inputs(sh, &in, error);
  }
  guint n = ok ? g_strv_length(list) : 0;
  for (guint i = 0; ok && i < n; i++) {
    StOptions o;
    if (!(ok = st_cli_options_for(sh, (int)i, (int)n, &o, error)))
      break;
    g_autoptr(StCluster) cluster = st_cli_cluster_for(sh, &in, &o, error);
    StSchedule *s = cluster != NULL ? st_strategy_build(st_strategy_find(list[i]), in.model,
                                                        cluster, in.profile, &o, error)
                                    : NULL;
    st_options_clear(&o);
    if ((ok = s != NULL)) {
      /* A strategy that runs more than once is named by its per-run values. */
      g_autofree char *label = st_cli_run_label(sh, list, (int)i);
      g_ptr_array_add(schedules, s);
      g_ptr_array_add(names, label != NULL ? g_strdup_printf("%s-%s", list[i], label)
                                           : g_strdup(list[i]));
    }
  }
  st_cli_inputs_clear(&in);
  return ok;
}

/* Runs the schedules one after another into the output folder; a schedule
 * whose steps are auto runs the window a simulation of it (with `profile`,
 * NULL: estimates) finds steady. Ctrl-C stops the one running: what it
 * measured is written (unless no step completed), no further schedule runs,
 * and `*stopped` says what was interrupted. */
static gboolean
run_all(GPtrArray *schedules, GPtrArray *names, const StExecOptions *o, int eval_every,
        const StProfile *profile, const char *comm_algo, StOutDir *outdir,
        GPtrArray *timelines, GPtrArray *summaries, guint *written, char **stopped,
        GError **error)
{
  for (guint i = 0; i < schedules->len; i++) {
    StSchedule *s = g_ptr_array_index(schedules, i);
    const char *name = g_ptr_array_index(names, i);
    g_autofree char *admissions = NULL;
    StSteady window;
    gboolean auto_steps = s->steps == 0;
    if (auto_steps && !st_cli_exec_auto_steps_simulated(s, profile, comm_algo, &window, error))
      return FALSE;
    int steps = s->steps;
    if (auto_steps)
      fprintf(stderr, "  %s: --steps auto: %d steps, steps %d-%d measured (the simulator's "
                      "steady window)\n",
              name, steps, window.first + 1, window.last + 1);
    StSummary *sum =
      st_cli_exec_run(s, name, o, eval_every, auto_steps ? &window : NULL, timelines, &admissions, error);
    if (sum == NULL)
      return FALSE;
    if (*o->stop) {
      g_autoptr(GString) what = g_string_new(NULL);
      g_string_printf(what, "during '%s' after %d of %d steps", name, sum->steps, steps);
      for (guint j = i + 1; j < schedules->len; j++)
        g_string_append_printf(what, "%s'%s'", j == i + 1 ? "; not run: " : ", ",
                               (const char *)g_ptr_array_index(names, j));
      *stopped = g_string_free(g_steal_pointer(&what), FALSE);
    }
    if (sum->steps == 0) { /* stopped before a step ended: nothing measured */
      st_summary_free(sum);
      return TRUE;
    }
    g_ptr_array_add(summaries, sum);
    if (outdir != NULL) {
      g_autofree char *dir = schedules->len == 1
                               ? g_strdup(st_outdir_path(outdir))
                               : g_build_filename(st_outdir_path(outdir), name, NULL);
      if (!st_output_write_all(sum, dir, error) ||
          !st_cli_write_admissions(dir, admissions, error)) {
        g_prefix_error(error, "nothing written, --out left as it was: ");
        return FALSE;
      }
      (*written)++;
    }
    if (*stopped != NULL)
      return TRUE;
  }
  return TRUE;
}

static gboolean
run(int argc, char **argv, GError **error)
{
  g_autofree char *command = st_cli_command_line(argc, argv);
  StCliShared sh;
  st_cli_shared_init(&sh);
  sh.default_framework = "ideal"; /* what the executor implements: 16-bit gradients */
  StCliExec ex;
  st_cli_exec_init(&ex);
  g_autofree char *schedule = NULL;
  const GOptionEntry entries[] = {
    {"schedule", 0, 0, G_OPTION_ARG_FILENAME, &schedule,
     "Run a stored schedule (from 'stagger schedule') instead of building one", "FILE"},
    {NULL},
  };
  g_autoptr(GOptionContext) ctx =
    g_option_context_new("- run training steps for real and measure them");
  g_option_context_set_summary(
    ctx, "Builds each --strategy's schedule as 'stagger sim' does (or reads --schedule) and\n"
         "runs it: real layers on synthetic data (or --data FILE), real optimizer steps,\n"
         "real collectives.\n"
         "Writes the same report.json, trace.json and CSVs as a simulation, measured, plus\n"
         "the loss of every step. Ctrl-C (or SIGTERM, as batch schedulers send) stops at the\n"
         "next op, writes the steps measured so far (marked partial in manifest.json), runs\n"
         "no further strategy and exits 130 (143 after SIGTERM).");
  g_option_context_set_description(
    ctx, "Examples:\n"
         "  stagger run --model models/gpt2-124m.json --strategy zero --zero-stage 2 \\\n"
         "      --ranks 4 --micro-batch 8 --steps 20 --out runs/real\n"
         "  stagger run --schedule r50.schedule.json --backend host --out runs/host\n"
         "  stagger plot runs/real\n\n"
         "Without --cluster the ranks share this machine's one device. --out DIR is\n"
         "written aside and replaces DIR whole when the run ends (as 'stagger sim' does).\n");
  GOptionGroup *shared = st_cli_shared_group(&sh);
  g_option_group_add_entries(shared, entries);
  st_cli_exec_add_entries(&ex, shared);
  st_cli_add_force_entry(shared, &sh.force);
  g_option_context_set_main_group(ctx, shared);

  g_autoptr(GPtrArray) schedules =
    g_ptr_array_new_with_free_func((GDestroyNotify)st_schedule_free);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) timelines =
    g_ptr_array_new_with_free_func((GDestroyNotify)st_timeline_free);
  g_autoptr(GPtrArray) summaries =
    g_ptr_array_new_with_free_func((GDestroyNotify)st_summary_free);
  guint written = 0; /* runs written into --out */
  g_autoptr(StOutDir) outdir = NULL;
  g_autofree char *stopped = NULL;
  StExecOptions o;
  gboolean ok = g_option_context_parse(ctx, &argc, &argv, error) &&
                (argc <= 1 || st_cli_usage_error(error, "unexpected argument '%s'", argv[1])) &&
                st_cli_exec_options(&ex, &o, error) &&
                (sh.out == NULL ||
                 (outdir = st_cli_out_begin(sh.out, sh.force, command, error)) != NULL);
  g_autoptr(StProfile) profile = NULL;
  if (ok && sh.profile != NULL)
    ok = (profile = st_profile_load(sh.profile, error)) != NULL;
  if (ok) {
    st_cli_exec_catch_sigint(TRUE);
    ok = schedules_of(&sh, schedule, schedules, names, error) &&
         run_all(schedules, names, &o, ex.eval_every, profile, sh.options.comm_algo, outdir, timelines,
                 summaries, &written, &stopped, error);
    /* What was measured goes into place, even when stopped; when nothing
     * was, --out stays as it was. */
    if (ok && outdir != NULL && written > 0)
      ok = st_outdir_commit(outdir, stopped != NULL, stopped, error);
    st_cli_exec_catch_sigint(FALSE);
  }
  for (guint i = 0; i < summaries->len; i++) {
    printf("\n");
    st_summary_print(g_ptr_array_index(summaries, i), stdout);
  }
  if (summaries->len > 1)
    st_summary_print_compare((const StSummary *const *)summaries->pdata,
                             (const char *const *)names->pdata, (int)summaries->len, stdout);
  if (ok && sh.out == NULL)
    fprintf(stderr, "no --out DIR given: nothing written\n");
  else if (ok && written == 0)
    fprintf(stderr, "nothing measured: %s left as it was\n", sh.out);
  else if (ok)
    fprintf(stderr, "wrote %s%s; plots: stagger plot %s\n", sh.out,
            stopped != NULL ? " (partial)" : "", sh.out);
  if (ok && stopped != NULL)
    ok = st_cli_interrupted_error(error, written > 0 ? sh.out : NULL, stopped);
  st_cli_exec_clear(&ex);
  st_cli_shared_clear(&sh);
  return ok;
}

const StCommand st_cmd_run = {
  "run",
  "Run schedules for real (GPU or host) and measure time, memory and loss",
  run,
};
