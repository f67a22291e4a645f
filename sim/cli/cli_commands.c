/* cli_commands.c: the table of subcommands. Adding one is a new cmd_*.c file
 * and one line here. */
#include "cli/cli.h"

G_DEFINE_QUARK(st-cli-error-quark, st_cli_error)

extern const StCommand st_cmd_model;
extern const StCommand st_cmd_sim;
extern const StCommand st_cmd_schedule;
extern const StCommand st_cmd_plot;
extern const StCommand st_cmd_profile;
extern const StCommand st_cmd_run;
extern const StCommand st_cmd_plan;
extern const StCommand st_cmd_validate;
extern const StCommand st_cmd_calibrate;

static const StCommand *const COMMANDS[] = {
  &st_cmd_model,
  &st_cmd_sim,
  &st_cmd_schedule,
  &st_cmd_plot,
  &st_cmd_profile,
  &st_cmd_run,
  &st_cmd_plan,
  &st_cmd_validate,
  &st_cmd_calibrate,
  NULL,
};

const StCommand *const *
st_commands(void)
{
  return COMMANDS;
}

gboolean
st_cli_usage_error(GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error_literal(error, ST_CLI_ERROR, ST_CLI_ERROR_USAGE, message);
  return FALSE;
}
