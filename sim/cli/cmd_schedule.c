/* cmd_schedule.c: `stagger schedule`: build a strategy's schedule and write
 * it in one of the formats of interop/formats.h (stagger's JSON, for
 * inspection, storage, or the executor on another machine; Chakra traces,
 * for ASTRA-sim and other tools), or check a stored one. */
#include <string.h>

#include "base/util.h"
#include "cli/cli.h"
#include "interop/formats.h"

static void
describe(const StSchedule *s, const char *written)
{
  printf("%s\n", s->settings.description ? s->settings.description : "(no description)");
  g_autofree char *steps = s->steps == 0 ? g_strdup("steps until steady (auto)")
                                          : g_strdup_printf("%d step%s", s->steps,
                                                            st_plural(s->steps));
  printf("  %d rank%s on %d device%s (%d node%s), %u program%s, %u communicator%s, %s\n",
         s->n_ranks, st_plural(s->n_ranks), s->n_devices, st_plural(s->n_devices),
         s->cluster->nodes, st_plural(s->cluster->nodes), s->programs->len,
         st_plural(s->programs->len), s->comms->len, st_plural(s->comms->len), steps);
  for (guint i = 0; i < s->programs->len; i++) {
    const StProgram *p = g_ptr_array_index(s->programs, i);
    int users = 0;
    for (int r = 0; r < s->n_ranks; r++)
      users += s->ranks[r].program == (int)i;
    printf("  program '%s': %u stream%s, %u op%s, %u buffer%s, run by %d rank%s\n", p->name,
           p->streams->len, st_plural(p->streams->len), p->ops->len, st_plural(p->ops->len),
           p->buffers->len, st_plural(p->buffers->len), users, st_plural(users));
  }
  if (written != NULL)
    printf("  %s\n", written);
}

static gboolean
run(int argc, char **argv, GError **error)
{
  StCliShared sh;
  st_cli_shared_init(&sh);
  g_autofree char *check = NULL, *format_name = NULL;
  const GOptionEntry entries[] = {
    {"check", 0, 0, G_OPTION_ARG_FILENAME, &check,
     "Load a stored schedule, check its invariants and describe it", "FILE"},
    {"format", 0, 0, G_OPTION_ARG_STRING, &format_name,
     "What to write at --out (default json; the list is below)", "NAME"},
    {NULL},
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- build a schedule and write it as JSON");
  g_option_context_set_summary(
    ctx, "Builds the schedule of one --strategy, checks it (acyclic, sends matched by\n"
         "receives, collectives agreeing, buffers freed) and writes it to --out FILE: a\n"
         "self-contained JSON with the model and cluster, that 'stagger sim --schedule' and\n"
         "'stagger run --schedule' accept. --check FILE verifies a stored one.");
  GString *help = g_string_new("Formats (--format):\n");
  for (const StScheduleFormat *const *f = st_schedule_formats(); *f != NULL; f++)
    g_string_append_printf(help, "  %-8s %s\n", (*f)->name, (*f)->summary);
  g_string_append(
    help, "\nExamples:\n"
          "  stagger schedule --model models/resnet50.json --cluster models/clusters/dgx-h100.json \\\n"
          "      --strategy zero --zero-stage 3 --out r50.schedule.json\n"
          "  stagger schedule --model models/resnet50.json --cluster models/clusters/dgx-h100.json \\\n"
          "      --strategy zero --zero-stage 2 --format chakra --out et/r50\n");
  g_option_context_set_description(ctx, help->str);
  g_string_free(help, TRUE);
  GOptionGroup *shared = st_cli_shared_group(&sh);
  g_option_group_add_entries(shared, entries);
  g_option_context_set_main_group(ctx, shared);

  StCliInputs in = {0};
  g_autoptr(StSchedule) schedule = NULL;
  g_autofree char *written = NULL;
  const StScheduleFormat *format = st_schedule_formats()[0];
  gboolean ok = g_option_context_parse(ctx, &argc, &argv, error) &&
                (argc <= 1 || st_cli_usage_error(error, "unexpected argument '%s'", argv[1]));
  if (ok && format_name != NULL && (format = st_schedule_format_find(format_name)) == NULL)
    ok = st_cli_usage_error(error, "--format: unknown format '%s' (see --help)", format_name);
  if (ok && check != NULL) {
    schedule = st_schedule_load(check, error);
    ok = schedule != NULL && st_schedule_check(schedule, error);
    if (ok)
      describe(schedule, NULL);
  } else if (ok) {
    g_auto(GStrv) names = st_cli_strategy_names(&sh, error);
    ok = names != NULL;
    if (ok && g_strv_length(names) != 1)
      ok = st_cli_usage_error(error, "--strategy: give one strategy to write a schedule");
    if (ok && sh.out == NULL)
      ok = st_cli_usage_error(error, "--out is required (%s)", format->summary);
    ok = ok && st_cli_load_inputs(&sh, &in, error);
    StOptions options;
    if (ok && st_cli_options_for(&sh, 0, 1, &options, error)) {
      g_autoptr(StCluster) cluster = st_cli_cluster_for(&sh, &in, &options, error);
      g_autoptr(StCliProgress) progress = st_cli_progress_new(names[0], "building the schedule");
      if (cluster != NULL)
        schedule = st_strategy_build(st_strategy_find(names[0]), in.model, cluster,
                                     in.profile, &options, error);
      StFormatContext fc = {in.profile, options.comm_algo};
      st_cli_progress_phase(progress, "writing the schedule");
      ok = schedule != NULL && (written = format->write(schedule, sh.out, &fc, error)) != NULL;
      g_clear_pointer(&progress, st_cli_progress_free);
      st_options_clear(&options);
    } else {
      ok = FALSE;
    }
    if (ok)
      describe(schedule, written);
  }
  st_cli_inputs_clear(&in);
  st_cli_shared_clear(&sh);
  return ok;
}

const StCommand st_cmd_schedule = {
  "schedule",
  "Build a strategy's schedule and write it as JSON, or check a stored one",
  run,
};
