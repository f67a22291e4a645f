/* cli_out.c: the output folder of sim, run, validate and plan (--out DIR,
 * --force), written aside and moved into place whole (output/outdir.h). */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

char *
st_cli_command_line(int argc, char **argv)
{
  g_autoptr(GString) line = g_string_new("stagger");
  for (int i = 0; i < argc; i++) {
    gboolean plain = argv[i][0] != '\0';
    for (const char *p = argv[i]; *p != '\0' && plain; p++)
      plain = g_ascii_isalnum(*p) || strchr("-_./=,:+@%", *p) != NULL;
    g_autofree char *quoted = plain ? NULL : g_shell_quote(argv[i]);
    g_string_append_printf(line, " %s", plain ? argv[i] : quoted);
  }
  return g_string_free(g_steal_pointer(&line), FALSE);
}

void
st_cli_add_force_entry(GOptionGroup *group, gboolean *force)
{
  const GOptionEntry entries[] = {
    {"force", 0, 0, G_OPTION_ARG_NONE, force,
     "Replace --out DIR even when it holds files stagger did not write (DIR and everything "
     "in it are deleted); without it, only an earlier stagger output is replaced",
     NULL},
    {NULL},
  };
  g_option_group_add_entries(group, entries);
}

StOutDir *
st_cli_out_begin(const char *dir, gboolean force, const char *command, GError **error)
{
  GError *local = NULL;
  StOutDir *out = st_outdir_begin(dir, command, STAGGER_VERSION, force, &local);
  if (out == NULL) {
    gboolean usage = local->code == ST_OUTDIR_ERROR_NOT_OURS || local->code == ST_ERROR_INVALID;
    if (usage)
      st_cli_usage_error(error, "%s", local->message);
    else
      g_propagate_error(error, g_steal_pointer(&local));
    g_clear_error(&local);
  }
  return out;
}

gboolean
st_cli_interrupted_error(GError **error, const char *dir, const char *what)
{
  const char *by = st_cli_exec_stop_signal() == SIGTERM ? "SIGTERM" : "Ctrl-C";
  if (dir != NULL)
    g_set_error(error, ST_CLI_ERROR, ST_CLI_ERROR_INTERRUPTED,
                "interrupted (%s) %s; what was measured is in %s, marked partial in its "
                "manifest.json",
                by, what, dir);
  else
    g_set_error(error, ST_CLI_ERROR, ST_CLI_ERROR_INTERRUPTED,
                "interrupted (%s) %s; nothing written", by, what);
  return FALSE;
}

gboolean
st_cli_check_writable(const char *option, const char *path, GError **error)
{
  if (path == NULL)
    return TRUE;
  if (g_file_test(path, G_FILE_TEST_IS_DIR))
    return st_cli_usage_error(error, "--%s %s: a folder, not a file", option, path);
  g_autofree char *dir = g_path_get_dirname(path);
  if (!g_file_test(dir, G_FILE_TEST_IS_DIR))
    return st_cli_usage_error(error, "--%s %s: there is no folder %s", option, path, dir);
  if (access(dir, W_OK) != 0 ||
      (g_file_test(path, G_FILE_TEST_EXISTS) && access(path, W_OK) != 0))
    return st_cli_usage_error(error, "--%s %s: cannot be written: %s", option, path,
                              g_strerror(errno));
  return TRUE;
}
