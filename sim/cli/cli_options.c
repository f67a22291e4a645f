/* cli_options.c: the options that sim, schedule, run, validate and plan share
 * (docs/ARCHITECTURE.md lists them with their meaning). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

void
st_cli_shared_init(StCliShared *sh)
{
  memset(sh, 0, sizeof *sh);
  st_options_init(&sh->options);
}

void
st_cli_shared_clear(StCliShared *sh)
{
  g_free(sh->model);
  g_free(sh->cluster);
  g_free(sh->profile);
  g_free(sh->calibration);
  g_free(sh->strategy);
  g_free(sh->out);
  g_free(sh->entries);
  if (sh->given != NULL)
    g_ptr_array_unref(sh->given);
  st_options_clear(&sh->options);
}

/* Whether a comma in this option's value separates per-run values. */
static gboolean
splits_per_run(const StOptionSpec *spec)
{
  return spec->type != ST_OPT_STRING;
}

/* The value run `index` of `n` takes from `value`. Transfer full. */
static char *
value_for_run(const StOptionSpec *spec, const char *value, int index, int n)
{
  if (!splits_per_run(spec) || strchr(value, ',') == NULL)
    return g_strdup(value);
  g_auto(GStrv) items = g_strsplit(value, ",", -1);
  if ((int)g_strv_length(items) != n)
    return NULL;
  return g_strdup(g_strstrip(items[index]));
}

char *
st_cli_run_label(const StCliShared *sh, char **names, int index)
{
  int n = (int)g_strv_length(names);
  g_autoptr(GString) label = g_string_new(NULL);
  for (guint i = 0; sh->given != NULL && i + 1 < sh->given->len; i += 2) {
    const char *name = g_ptr_array_index(sh->given, i);
    const char *value = g_ptr_array_index(sh->given, i + 1);
    const StOptionSpec *spec = st_option_find(name);
    if (!splits_per_run(spec) || strchr(value, ',') == NULL)
      continue;
    g_autofree char *mine = value_for_run(spec, value, index, n);
    /* Only what tells this run from another run of its strategy. */
    gboolean differs = FALSE;
    for (int j = 0; mine != NULL && j < n && !differs; j++) {
      g_autofree char *theirs = value_for_run(spec, value, j, n);
      differs = j != index && strcmp(names[j], names[index]) == 0 && theirs != NULL &&
                strcmp(theirs, mine) != 0;
    }
    if (differs)
      g_string_append_printf(label, "%s%s%s", label->len ? "-" : "", name, mine);
  }
  return label->len ? g_string_free(g_steal_pointer(&label), FALSE) : NULL;
}

gboolean
st_cli_options_for(const StCliShared *sh, int index, int n, StOptions *out, GError **error)
{
  st_options_init(out);
  for (guint i = 0; sh->given != NULL && i + 1 < sh->given->len; i += 2) {
    const char *name = g_ptr_array_index(sh->given, i);
    const char *value = g_ptr_array_index(sh->given, i + 1);
    const StOptionSpec *spec = st_option_find(name);
    g_autofree char *mine = value_for_run(spec, value, index, n);
    if (mine == NULL) {
      st_options_clear(out);
      return st_cli_usage_error(error,
                                "--%s %s: a comma list gives one value per strategy, and "
                                "%d strategies run",
                                name, value, n);
    }
    g_autoptr(GError) local = NULL;
    if (!st_options_set(out, name, mine, &local)) {
      st_options_clear(out);
      return st_cli_usage_error(error, "%s", local->message);
    }
  }
  if (out->framework == NULL && sh->default_framework != NULL)
    out->framework = g_strdup(sh->default_framework);
  return TRUE;
}

/* Every table option arrives here ("--zero-stage", "2"): each value (each
 * item of a per-run comma list) is checked now, and the text kept for
 * st_cli_options_for. sh->options takes the value too (the first item). */
static gboolean
on_table_option(const char *option_name, const char *value, gpointer data, GError **error)
{
  StCliShared *sh = data;
  const char *name = g_str_has_prefix(option_name, "--") ? option_name + 2 : option_name;
  const StOptionSpec *spec = st_option_find(name);
  const char *text = value != NULL ? value : "true";
  char *whole[] = {(char *)text, NULL};
  g_auto(GStrv) items = splits_per_run(spec) ? g_strsplit(text, ",", -1) : g_strdupv(whole);
  for (int i = 0; items[i] != NULL; i++) {
    g_autoptr(GError) local = NULL;
    g_strstrip(items[i]);
    if (!st_options_set(&sh->options, name, items[i], &local))
      return st_cli_usage_error(error, "%s", local->message);
  }
  if (items[0] != NULL && !st_options_set(&sh->options, name, items[0], NULL))
    return FALSE;
  if (sh->given == NULL)
    sh->given = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(sh->given, g_strdup(name));
  g_ptr_array_add(sh->given, g_strdup(text));
  return TRUE;
}

GOptionGroup *
st_cli_shared_group(StCliShared *sh)
{
  const GOptionEntry paths[] = {
    {"model", 'm', 0, G_OPTION_ARG_FILENAME, &sh->model, "Model description (models/*.json)",
     "FILE"},
    {"cluster", 'c', 0, G_OPTION_ARG_FILENAME, &sh->cluster,
     "Cluster description (models/clusters/*.json)", "FILE"},
    {"profile", 'p', 0, G_OPTION_ARG_FILENAME, &sh->profile,
     "Measured costs: a profile file or a folder of them (default: roofline and alpha-beta "
     "estimates)",
     "PATH"},
    {"calibration", 0, 0, G_OPTION_ARG_FILENAME, &sh->calibration,
     "Factors fitted to measured runs (stagger calibrate), which also give each prediction "
     "its 90 % interval; none = the published numbers alone (default: "
     "models/calibration/default.json)",
     "FILE|none"},
    {"strategy", 's', 0, G_OPTION_ARG_STRING, &sh->strategy,
     "Strategy, or a comma list run side by side (default: dp)", "NAME[,NAME...]"},
    {"out", 'o', 0, G_OPTION_ARG_FILENAME, &sh->out, "Output folder (a file for 'schedule')",
     "PATH"},
  };
  int n = 0;
  for (const StOptionSpec *spec = st_option_specs(); spec->name != NULL; spec++)
    n++;
  g_free(sh->entries);
  sh->entries = g_new0(GOptionEntry, G_N_ELEMENTS(paths) + n + 1);
  memcpy(sh->entries, paths, sizeof paths);
  GOptionEntry *e = sh->entries + G_N_ELEMENTS(paths);
  for (const StOptionSpec *spec = st_option_specs(); spec->name != NULL; spec++, e++)
    *e = (GOptionEntry){spec->name, 0, spec->type == ST_OPT_FLAG ? G_OPTION_FLAG_NO_ARG : 0,
                        G_OPTION_ARG_CALLBACK, (gpointer)on_table_option, spec->help,
                        spec->type == ST_OPT_FLAG ? NULL : spec->arg};
  GOptionGroup *group =
    g_option_group_new("shared", "Options shared by sim, schedule, run, validate and plan:",
                       "Show the shared options", sh, NULL);
  g_option_group_add_entries(group, sh->entries);
  return group;
}

gboolean
st_cli_given(const StCliShared *sh, const char *name)
{
  for (guint i = 0; sh->given != NULL && i < sh->given->len; i += 2)
    if (strcmp(g_ptr_array_index(sh->given, i), name) == 0)
      return TRUE;
  return FALSE;
}

void
st_cli_note_precision(const StModel *model, gboolean given)
{
  /* A model written in 16 bits still trains in fp32 unless asked (as
   * PyTorch and Megatron-LM do); a step many times longer than the user
   * expects should not go unexplained. */
  if (model->dtype != ST_DTYPE_FP32 && !given)
    fprintf(stderr,
            "note: %s is written in %s, and without --precision it trains in fp32 (the "
            "default); --precision mixed trains it in 16 bits with fp32 master weights\n",
            model->name, st_dtype_name(model->dtype));
}

gboolean
st_cli_load_inputs(const StCliShared *sh, StCliInputs *in, GError **error)
{
  memset(in, 0, sizeof *in);
  if (sh->model == NULL)
    return st_cli_usage_error(error, "--model FILE is required");
  if (sh->cluster == NULL)
    return st_cli_usage_error(error, "--cluster FILE is required");
  in->model = st_model_load(sh->model, error);
  if (in->model == NULL)
    return FALSE;
  if (!sh->no_precision_note)
    st_cli_note_precision(in->model, st_cli_given(sh, "precision"));
  in->cluster = st_cluster_load(sh->cluster, error);
  if (in->cluster == NULL || !st_cli_load_calibration(sh->calibration, in, error))
    return FALSE;
  if (sh->profile != NULL) {
    in->profile = st_profile_load(sh->profile, error);
    if (in->profile == NULL)
      return FALSE;
  }
  return TRUE;
}

gboolean
st_cli_load_calibration(const char *path, StCliInputs *in, GError **error)
{
  st_calibration_clear(&in->calib);
  if (path != NULL && strcmp(path, "none") == 0)
    return TRUE;
  if (path != NULL ? !st_calibration_load(path, &in->calib, error)
                   : !st_calibration_load_default(&in->calib, error) && error != NULL &&
                       *error != NULL)
    return FALSE;
  if (in->calib.path != NULL) {
    g_autofree char *what = st_calibration_describe(&in->calib);
    fprintf(stderr, "calibration: %s (%s)\n", in->calib.path, what);
  }
  if (in->cluster != NULL)
    st_calibration_apply(&in->calib, in->cluster);
  return TRUE;
}

void
st_cli_spread(const StCliInputs *in, StSummary *summary)
{
  st_summary_set_spread(summary, &in->calib.step, &in->calib.memory);
}

void
st_cli_inputs_clear(StCliInputs *in)
{
  st_calibration_clear(&in->calib);
  g_clear_pointer(&in->model, st_model_free);
  g_clear_pointer(&in->cluster, st_cluster_free);
  g_clear_pointer(&in->profile, st_profile_free);
}

char **
st_cli_strategy_names(const StCliShared *sh, GError **error)
{
  g_auto(GStrv) names = g_strsplit(sh->strategy ? sh->strategy : "dp", ",", -1);
  for (char **n = names; *n != NULL; n++) {
    g_strstrip(*n);
    if (**n == '\0') {
      st_cli_usage_error(error, "--strategy '%s': empty name in the list", sh->strategy);
      return NULL;
    }
    g_autoptr(GError) unknown = NULL;
    if (st_strategy_lookup(*n, &unknown) == NULL) {
      st_cli_usage_error(error, "--strategy: %s", unknown->message);
      return NULL;
    }
  }
  /* An option no strategy of the run reads is a mistake, not a no-op. */
  for (guint i = 0; sh->given != NULL && i + 1 < sh->given->len; i += 2) {
    const char *option = g_ptr_array_index(sh->given, i);
    gboolean read = FALSE;
    for (char **n = names; *n != NULL && !read; n++)
      read = st_strategy_reads_option(*n, option);
    if (!read) {
      st_cli_usage_error(error, "--%s: %s does not read it; it applies to %s", option,
                         sh->strategy ? sh->strategy : "dp", st_strategy_option_readers(option));
      return NULL;
    }
  }
  return g_steal_pointer(&names);
}

StCluster *
st_cli_cluster_for(const StCliShared *sh, const StCliInputs *in, const StOptions *options,
                   GError **error)
{
  g_autoptr(StCluster) c = st_cluster_copy(in->cluster);
  /* Its errors name the cluster's file. */
  if (!st_cluster_keep_gpus_per_node(c, options->gpus_per_node, error) ||
      !st_cluster_resize(c, options->nodes, options->gpus, error))
    return NULL;
  return g_steal_pointer(&c);
}
