/* main.c: `stagger SUBCOMMAND [OPTIONS]`. Finds the subcommand in the table,
 * runs it, prints its error once and chooses the exit code: 0 success,
 * 1 failure, 2 bad usage, 130 stopped by Ctrl-C, 143 by SIGTERM (after writing what it
 * had). */
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static void
print_usage(FILE *out)
{
  fprintf(out, "Usage: stagger COMMAND [OPTIONS]\n\n"
               "Simulate, run and compare distributed training schedules.\n\nCommands:\n");
  for (const StCommand *const *c = st_commands(); *c != NULL; c++)
    fprintf(out, "  %-10s %s\n", (*c)->name, (*c)->summary);
  fprintf(out, "\n'stagger COMMAND --help' explains a command and its options.\n");
}

int
main(int argc, char **argv)
{
  setlocale(LC_ALL, "C");
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    print_usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("stagger %s\n", STAGGER_VERSION);
    return 0;
  }
  for (const StCommand *const *c = st_commands(); *c != NULL; c++) {
    if (strcmp(argv[1], (*c)->name) != 0)
      continue;
    g_autoptr(GError) error = NULL;
    g_autofree char *prgname = g_strdup_printf("stagger %s", (*c)->name);
    g_set_prgname(prgname);
    if ((*c)->run(argc - 1, argv + 1, &error))
      return 0;
    g_assert(error != NULL);
    fprintf(stderr, "stagger %s: %s\n", (*c)->name, error->message);
    if (g_error_matches(error, ST_CLI_ERROR, ST_CLI_ERROR_INTERRUPTED))
      return 128 + (st_cli_exec_stop_signal() > 0 ? st_cli_exec_stop_signal() : SIGINT);
    gboolean usage = error->domain == G_OPTION_ERROR ||
                     (error->domain == ST_CLI_ERROR && error->code == ST_CLI_ERROR_USAGE);
    if (usage)
      fprintf(stderr, "Try 'stagger %s --help'.\n", (*c)->name);
    return usage ? 2 : 1;
  }
  fprintf(stderr, "stagger: unknown command '%s'\n\n", argv[1]);
  print_usage(stderr);
  return 2;
}
