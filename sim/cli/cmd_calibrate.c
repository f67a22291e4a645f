/* cmd_calibrate.c: `stagger calibrate`: fit the calibration's factors
 * (cost/calibration.h) to a table of measured runs (calib/runs.h), print
 * each run's error, the leave-one-out error of the runs it was fitted on and
 * the error of the runs it never saw, and write the calibration file that
 * sim, plan and validate read. With --fit none it only predicts: the table
 * of a calibration against the runs (docs/VALIDATION.md is made so). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/units.h"
#include "calib/fit.h"
#include "cli/cli.h"
#include "cost/framework.h"

/* What `stagger calibrate` fits unless told: the efficiency factor of each
 * framework preset the calibration set names often enough to pin it
 * (docs/VALIDATION.md says why these and not the kernels' own). */
#define DEFAULT_FIT "frameworks"
/* Calibration runs a framework's factor needs before `frameworks` fits it. */
#define MIN_FRAMEWORK_RUNS 3

typedef struct {
  double mape, bias, worst;
  int n;
  const char *worst_id;
} Errors;

static void
add_error(Errors *e, double err, const char *id)
{
  e->mape += fabs(err);
  e->bias += err;
  if (e->n == 0 || fabs(err) > fabs(e->worst)) {
    e->worst = err;
    e->worst_id = id;
  }
  e->n++;
}

static void
finish(Errors *e)
{
  if (e->n > 0) {
    e->mape /= e->n;
    e->bias /= e->n;
  }
}

typedef struct {
  Errors step[ST_RUN_SETS]; /* by StRunSet: calibration (leave-one-out), held-out, excluded */
  Errors memory[ST_RUN_SETS];
  int ooms;         /* runs that really ran, predicted out of memory */
} Tally;

static double
rel(double predicted, double measured)
{
  return predicted / measured - 1.0;
}

static void
tally(const StRuns *runs, const StFitResult *res, Tally *t)
{
  memset(t, 0, sizeof *t);
  for (guint i = 0; i < runs->runs->len; i++) {
    const StRun *r = g_ptr_array_index(runs->runs, i);
    const StRunPrediction *p = &res->pred[i];
    if (!p->ok)
      continue;
    if (r->step_time_s > 0) {
      double pred = r->set == ST_RUN_CALIBRATION && res->fitted[i] ? res->loo_step_s[i]
                                                                    : p->step_time_s;
      add_error(&t->step[r->set], rel(pred, r->step_time_s), r->id);
    }
    if (r->memory_bytes > 0)
      add_error(&t->memory[r->set], rel((double)p->memory_bytes, (double)r->memory_bytes),
                r->id);
    t->ooms += p->oom;
  }
  for (int s = 0; s < ST_RUN_SETS; s++) {
    finish(&t->step[s]);
    finish(&t->memory[s]);
  }
}

static void
print_table(const StRuns *runs, const StFitResult *res, FILE *out)
{
  fprintf(out, "%-40s %-11s %10s %10s %8s %10s %8s   %s\n", "RUN", "SET", "MEASURED",
          "PREDICTED", "ERROR", "LOO", "LOO ERR", "MEMORY measured / predicted");
  for (guint i = 0; i < runs->runs->len; i++) {
    const StRun *r = g_ptr_array_index(runs->runs, i);
    const StRunPrediction *p = &res->pred[i];
    fprintf(out, "%-40s %-11s ", r->id, st_run_set_name(r->set));
    if (!p->ok) {
      fprintf(out, "failed: %s\n", p->error ? p->error : "?");
      continue;
    }
    if (r->step_time_s > 0) {
      fprintf(out, "%9.4gs %9.4gs %+7.1f%% ", r->step_time_s, p->step_time_s,
              100 * rel(p->step_time_s, r->step_time_s));
      if (res->fitted[i])
        fprintf(out, "%9.4gs %+7.1f%%", res->loo_step_s[i],
                100 * rel(res->loo_step_s[i], r->step_time_s));
      else
        fprintf(out, "%10s %8s", "", "");
    } else {
      fprintf(out, "%10s %10s %8s %10s %8s", "-", "-", "", "", "");
    }
    if (r->memory_bytes > 0) {
      g_autofree char *m = st_format_bytes(r->memory_bytes);
      g_autofree char *q = st_format_bytes(p->memory_bytes);
      fprintf(out, "   %s / %s (%s) %+.1f%%", m, q, st_memory_kind_name(r->memory_kind),
              100 * rel((double)p->memory_bytes, (double)r->memory_bytes));
    }
    if (p->oom)
      fprintf(out, "%s", r->memory_bytes > 0 || r->step_time_s > 0 ? "   OUT OF MEMORY" : "");
    fputc('\n', out);
  }
}

static void
print_errors(const char *what, const Errors *e, FILE *out)
{
  if (e->n == 0)
    return;
  fprintf(out, "  %-34s %2d run%s, MAPE %5.1f %%, bias %+5.1f %%, worst %+6.1f %% (%s)\n", what,
          e->n, e->n == 1 ? " " : "s", 100 * e->mape, 100 * e->bias, 100 * e->worst,
          e->worst_id);
}

static void
print_summary(const StFitResult *res, const Tally *t, int n_params, FILE *out)
{
  fprintf(out, "\n");
  print_errors(n_params > 0 ? "step, calibration (leave-one-out):" : "step, calibration set:",
               &t->step[ST_RUN_CALIBRATION], out);
  print_errors("step, held out (never fitted):", &t->step[ST_RUN_HELD_OUT], out);
  print_errors("memory peak, calibration set:", &t->memory[ST_RUN_CALIBRATION], out);
  print_errors("memory peak, held out:", &t->memory[ST_RUN_HELD_OUT], out);
  print_errors("step, excluded (outside the model):", &t->step[ST_RUN_EXCLUDED], out);
  if (t->ooms > 0)
    fprintf(out, "  %d run%s that really ran predicted out of memory\n", t->ooms,
            t->ooms == 1 ? "" : "s");
  g_autofree char *factors = st_calibration_describe(&res->calib);
  fprintf(out, "  calibration: %s", factors);
  if (n_params > 0)
    fprintf(out, " (fitted in %d iteration%s)", res->iterations, res->iterations == 1 ? "" : "s");
  fprintf(out, "\n");
  if (res->calib.step.n >= 3)
    fprintf(out, "  interval (90 %%) of a predicted step: x%.3f .. x%.3f, from %d runs\n",
            exp(res->calib.step.mean - ST_CALIB_Z90 * res->calib.step.sd),
            exp(res->calib.step.mean + ST_CALIB_Z90 * res->calib.step.sd), res->calib.step.n);
}

/* The same as markdown, for docs/VALIDATION.md. */
/* "strategy: name value, ..." without the framework (its own column). */
static char *
run_layout(const StRun *r)
{
  GString *g = g_string_new(r->strategy);
  const char *sep = ": ";
  for (guint k = 0; k + 1 < r->options->len; k += 2) {
    const char *name = g_ptr_array_index(r->options, k);
    if (strcmp(name, "framework") == 0)
      continue;
    g_string_append_printf(g, "%s%s %s", sep, name, (char *)g_ptr_array_index(r->options, k + 1));
    sep = ", ";
  }
  return g_string_free(g, FALSE);
}

static gboolean
write_markdown(const char *path, const StRuns *runs, const StFitResult *res, const Tally *t,
               int n_params, GError **error)
{
  g_autoptr(GString) md = g_string_new(NULL);
  static const char *const titles[ST_RUN_SETS] = {
    "**Calibration set** (the fit saw these; the error is each run's leave-one-out):",
    "**Held out** (no fit saw these):",
    "**Excluded** (a mechanism the model lacks decides these; shown, counted in no figure; "
    "each run's note in the runs file says which):"};
  for (int s = 0; s < ST_RUN_SETS; s++) {
    gboolean any = FALSE;
    for (guint i = 0; i < runs->runs->len; i++)
      any = any || (int)((StRun *)g_ptr_array_index(runs->runs, i))->set == s;
    if (!any)
      continue;
    g_string_append_printf(md, "\n%s\n\n",
                           s == ST_RUN_CALIBRATION && n_params == 0
                             ? "**Calibration set** (nothing fitted here: each run's own error):"
                             : titles[s]);
    g_string_append(md, "| run | source | layout | framework | measured step | predicted | "
                        "error | memory measured / predicted |\n"
                        "|---|---|---|---|---:|---:|---:|---|\n");
    for (guint i = 0; i < runs->runs->len; i++) {
      const StRun *r = g_ptr_array_index(runs->runs, i);
      const StRunPrediction *p = &res->pred[i];
      if ((int)r->set != s)
        continue;
      g_autofree char *layout = run_layout(r);
      g_string_append_printf(md, "| %s | %s | %s | %s | ", r->id, r->source ? r->source : "",
                             layout, st_run_framework(r));
      if (!p->ok) {
        g_string_append_printf(md, "failed: %s | | | |\n", p->error ? p->error : "?");
        continue;
      }
      double pred = res->fitted[i] ? res->loo_step_s[i] : p->step_time_s;
      if (r->step_time_s > 0)
        g_string_append_printf(md, "%.4g s | %.4g s | %+.1f %% | ", r->step_time_s, pred,
                               100 * rel(pred, r->step_time_s));
      else
        g_string_append(md, "| | | ");
      if (r->memory_bytes > 0) {
        g_autofree char *m = st_format_bytes(r->memory_bytes);
        g_autofree char *q = st_format_bytes(p->memory_bytes);
        g_string_append_printf(md, "%s / %s (%s, %+.1f %%)", m, q,
                               st_memory_kind_name(r->memory_kind),
                               100 * rel((double)p->memory_bytes, (double)r->memory_bytes));
      }
      g_string_append_printf(md, "%s |\n", p->oom ? " **predicted out of memory**" : "");
    }
  }
  g_string_append(md, "\n| set | runs | MAPE | bias | worst |\n|---|---:|---:|---:|---|\n");
  const char *names[2][2] = {{n_params > 0 ? "step, calibration (leave-one-out)"
                                            : "step, calibration",
                              "step, held out"},
                             {"memory, calibration", "memory, held out"}};
  for (int k = 0; k < 2; k++)
    for (int s = 0; s < 2; s++) {
      const Errors *e = k == 0 ? &t->step[s] : &t->memory[s];
      if (e->n > 0)
        g_string_append_printf(md, "| %s | %d | %.1f %% | %+.1f %% | %+.1f %% (%s) |\n",
                               names[k][s], e->n, 100 * e->mape, 100 * e->bias, 100 * e->worst,
                               e->worst_id);
    }
  g_autofree char *factors = st_calibration_describe(&res->calib);
  g_string_append_printf(md, "\nCalibration: %s%s.\n", factors,
                         n_params > 0 ? " (fitted on the calibration set)" : "");
  return g_file_set_contents(path, md->str, (gssize)md->len, error);
}

/* Adds parameter i once. */
static void
add_param(StFitOptions *o, int i)
{
  for (int j = 0; j < o->n_params; j++)
    if (o->params[j] == i)
      return;
  o->params[o->n_params++] = i;
}

/* `frameworks`: the factor of every preset at least MIN_FRAMEWORK_RUNS
 * calibration runs run under; the others stay at 1, said on stderr. */
static void
add_framework_params(const StRuns *runs, StFitOptions *o)
{
  for (const StFramework *const *f = st_frameworks(); *f != NULL; f++) {
    int i = st_calib_param_index((*f)->name), n = 0;
    for (guint k = 0; i >= 0 && k < runs->runs->len; k++) {
      const StRun *r = g_ptr_array_index(runs->runs, k);
      n += r->set == ST_RUN_CALIBRATION && strcmp(st_run_framework(r), (*f)->name) == 0;
    }
    if (n >= MIN_FRAMEWORK_RUNS)
      add_param(o, i);
    else if (n > 0)
      fprintf(stderr, "calibrate: %s: %d calibration run%s (fewer than %d), its factor left "
              "as it is\n", (*f)->name, n, n == 1 ? "" : "s", MIN_FRAMEWORK_RUNS);
  }
}

static gboolean
parse_fit(const char *list, const StRuns *runs, StCalibration *start, StFitOptions *o,
          GError **error)
{
  o->n_params = 0;
  if (strcmp(list, "none") == 0)
    return TRUE;
  g_auto(GStrv) names = g_strsplit(list, ",", -1);
  for (char **n = names; *n != NULL; n++) {
    if (strcmp(g_strstrip(*n), "frameworks") == 0) {
      add_framework_params(runs, o);
      continue;
    }
    g_autoptr(GError) local = NULL;
    int i = st_calibration_slot(start, *n, &local);
    if (i < 0)
      return st_cli_usage_error(error, "--fit: %s, frameworks, or none", local->message);
    for (int j = 0; j < o->n_params; j++)
      if (o->params[j] == i)
        return st_cli_usage_error(error, "--fit: '%s' is listed twice", *n);
    if (o->n_params >= ST_CALIB_MAX_PARAMS)
      return st_cli_usage_error(error, "--fit: more than %d parameters", ST_CALIB_MAX_PARAMS);
    o->params[o->n_params++] = i;
  }
  return TRUE;
}

/* "MAPE,MAX" in percent. */
static gboolean
parse_check(const char *text, double *mape, double *max, GError **error)
{
  char *end = NULL;
  *mape = g_ascii_strtod(text, &end);
  if (end == text || *end != ',' || !isfinite(*mape) || *mape < 0)
    return st_cli_usage_error(error, "--check '%s': expected MAPE,MAX in percent (10,25)",
                              text);
  const char *second = end + 1;
  *max = g_ascii_strtod(second, &end);
  if (end == second || *end != '\0' || !isfinite(*max) || *max < 0)
    return st_cli_usage_error(error, "--check '%s': expected MAPE,MAX in percent (10,25)",
                              text);
  return TRUE;
}

typedef struct {
  StCliProgress *line;
} Progress;

static void
on_progress(const char *phase, int done, int total, gpointer data)
{
  Progress *p = data;
  g_autofree char *text =
    g_strdup_printf("%s (%d of %d simulations this round)", phase, done, total);
  st_cli_progress_phase(p->line, text);
}

static gboolean
run(int argc, char **argv, GError **error)
{
  g_autofree char *runs_path = NULL, *fit = NULL, *calib_path = NULL, *out = NULL,
                  *markdown = NULL, *check = NULL;
  int threads = 0, iterations = 0;
  const GOptionEntry entries[] = {
    {"runs", 'r', 0, G_OPTION_ARG_FILENAME, &runs_path,
     "The measured runs (format: docs/FORMATS.md, \"runs\"; the shipped published runs: "
     "traces/reference/published-runs/runs.json)",
     "FILE"},
    {"fit", 0, 0, G_OPTION_ARG_STRING, &fit,
     "Parameters to fit, comma-separated, each NAME or NAME@GPU (only on that GPU, the GPU "
     "performance file's gpu: megatron@H100-SXM); frameworks = the factor of every framework "
     "preset at least 3 calibration runs run under; none = only predict (default: " DEFAULT_FIT
     ")",
     "LIST"},
    {"calibration", 0, 0, G_OPTION_ARG_FILENAME, &calib_path,
     "Start from this calibration (with --fit none: the one evaluated); none = the published "
     "numbers alone (default: none when fitting, models/calibration/default.json with --fit "
     "none)",
     "FILE|none"},
    {"out", 'o', 0, G_OPTION_ARG_FILENAME, &out, "Write the fitted calibration here", "FILE"},
    {"markdown", 0, 0, G_OPTION_ARG_FILENAME, &markdown,
     "Write the tables as markdown here (docs/VALIDATION.md's)", "FILE"},
    {"threads", 'j', 0, G_OPTION_ARG_INT, &threads,
     "Simulations at once (default: the processors)", "N"},
    {"iterations", 0, 0, G_OPTION_ARG_INT, &iterations, "Most fitting iterations (default: 8)",
     "N"},
    {"check", 0, 0, G_OPTION_ARG_STRING, &check,
     "Fail (exit 1) when the held-out runs' step MAPE exceeds MAPE % or any of them is off by "
     "more than MAX %",
     "MAPE,MAX"},
    {NULL},
  };
  g_autoptr(GOptionContext) ctx =
    g_option_context_new("- fit the cost models' factors to measured runs");
  g_option_context_set_summary(
    ctx,
    "Simulates every run of --runs (each a configuration with what was measured: step time,\n"
    "per-GPU memory), fits the named factors (--fit) on the runs of the calibration set by\n"
    "least squares on log time, and reports each run's error: for the runs it was fitted on,\n"
    "the prediction of a fit that left that run out (leave-one-out); for the held-out runs,\n"
    "the error of a fit that never saw them. --out writes the calibration file (factors and\n"
    "the leave-one-out residuals, which give every prediction its 90 % interval) that sim,\n"
    "plan and validate read with --calibration.");
  GString *help = g_string_new("Parameters (each multiplies published numbers; 1 = as "
                               "published):\n");
  for (const StCalibParam *p = st_calib_params(); p->name != NULL; p++)
    g_string_append_printf(help, "  %-10s %s [%g, %g]\n", p->name, p->summary, p->min, p->max);
  g_string_append(help,
                  "\nExamples:\n"
                  "  stagger calibrate --runs my-runs.json --out my-calibration.json\n"
                  "  stagger sim ... --calibration my-calibration.json\n"
                  "  stagger calibrate --runs traces/reference/published-runs/runs.json "
                  "--fit none\n");
  g_option_context_set_description(ctx, help->str);
  g_string_free(help, TRUE);
  g_option_context_add_main_entries(ctx, entries, NULL);
  if (!g_option_context_parse(ctx, &argc, &argv, error))
    return FALSE;
  if (argc > 1)
    return st_cli_usage_error(error, "unexpected argument '%s'", argv[1]);
  if (runs_path == NULL)
    return st_cli_usage_error(error, "--runs FILE is required");
  if (threads < 0 || threads > 1024)
    return st_cli_usage_error(error, "--threads %d: must be between 1 and 1024", threads);
  if (iterations < 0 || iterations > 1000)
    return st_cli_usage_error(error, "--iterations %d: must be between 1 and 1000",
                              iterations);
  StFitOptions fo = {0};
  double max_mape = 0, max_err = 0;
  const char *fit_list = fit != NULL ? fit : DEFAULT_FIT;
  gboolean predict_only = strcmp(fit_list, "none") == 0;
  if (check != NULL && !parse_check(check, &max_mape, &max_err, error))
    return FALSE;
  if (!st_cli_check_writable("out", out, error) ||
      !st_cli_check_writable("markdown", markdown, error))
    return FALSE;
  fo.max_iterations = iterations;

  StCalibration start;
  st_calibration_init(&start);
  gboolean ok = TRUE;
  if (calib_path != NULL && strcmp(calib_path, "none") != 0)
    ok = st_calibration_load(calib_path, &start, error);
  else if (calib_path == NULL && predict_only)
    ok = st_calibration_load_default(&start, error) || error == NULL || *error == NULL;
  g_autoptr(StRuns) runs = ok ? st_runs_load(runs_path, error) : NULL;
  if (runs != NULL && !parse_fit(fit_list, runs, &start, &fo, error))
    g_clear_pointer(&runs, st_runs_free);
  g_autoptr(StPredictor) predictor =
    runs != NULL ? st_predictor_new(runs, threads > 0 ? threads : (int)g_get_num_processors(),
                                    error)
                 : NULL;
  if (predictor == NULL) {
    st_calibration_clear(&start);
    return FALSE;
  }
  fprintf(stderr, "calibrate: %u runs from %s; %s\n", runs->runs->len, runs_path,
          fo.n_params > 0 ? "fitting" : "predicting");
  Progress prog = {st_cli_progress_new("calibrate", "predicting every run")};
  fo.progress = on_progress;
  fo.progress_data = &prog;
  gint64 t0 = g_get_monotonic_time();
  StFitResult res;
  ok = st_calibration_fit(predictor, &start, &fo, &res, error);
  st_cli_progress_free(prog.line);
  st_calibration_clear(&start);
  if (!ok) {
    st_fit_result_clear(&res);
    return FALSE;
  }
  fprintf(stderr, "calibrate: done in %.1f s\n", (g_get_monotonic_time() - t0) / 1e6);
  Tally t;
  tally(runs, &res, &t);
  print_table(runs, &res, stdout);
  print_summary(&res, &t, fo.n_params, stdout);
  if (out != NULL) {
    if (res.calib.note == NULL)
      res.calib.note = g_strdup_printf("fitted by stagger calibrate --runs %s --fit %s",
                                       runs_path, fit_list);
    ok = st_calibration_save(&res.calib, out, error);
    if (ok)
      printf("wrote %s\n", out);
  }
  if (ok && markdown != NULL)
    ok = write_markdown(markdown, runs, &res, &t, fo.n_params, error);
  if (ok && check != NULL) {
    const Errors *h = &t.step[ST_RUN_HELD_OUT];
    if (h->n == 0)
      g_set_error(error, ST_RUNS_ERROR, ST_ERROR_FAILED,
                  "--check: %s has no held-out run with a measured step time", runs_path),
        ok = FALSE;
    else if (100 * h->mape > max_mape || 100 * fabs(h->worst) > max_err) {
      g_set_error(error, ST_RUNS_ERROR, ST_ERROR_FAILED,
                  "held-out runs: step MAPE %.1f %% (limit %g %%), worst %+.1f %% in %s "
                  "(limit %g %%)",
                  100 * h->mape, max_mape, 100 * h->worst, h->worst_id, max_err);
      ok = FALSE;
    }
  }
  st_fit_result_clear(&res);
  return ok;
}

const StCommand st_cmd_calibrate = {
  .name = "calibrate",
  .summary = "fit the cost models' factors to measured runs, with leave-one-out and held-out "
             "errors",
  .run = run,
};
