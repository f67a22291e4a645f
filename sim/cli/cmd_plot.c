/* cmd_plot.c: `stagger plot DIR [--format png|svg|dumb]`: renders the
 * memory, communication and Gantt plots of a run (or of every run of a
 * side-by-side comparison) with gnuplot; see output/plot.h. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "output/outdir.h"
#include "output/plot.h"

/* Where plots/ lives: $STAGGER_DATA_DIR, else the source tree this binary
 * was built from (STAGGER_DATA_DIR, set by sim/CMakeLists.txt). */
static char *
plots_dir(void)
{
  const char *data = g_getenv("STAGGER_DATA_DIR");
  if (data == NULL || data[0] == '\0')
    data = STAGGER_DATA_DIR;
  return g_build_filename(data, "plots", NULL);
}

static gboolean
run(int argc, char **argv, GError **error)
{
  g_autofree char *format = NULL;
  GOptionEntry entries[] = {
    {"format", 'f', 0, G_OPTION_ARG_STRING, &format,
     "png (default), svg, or dumb (text on stdout, for a terminal)", "FORMAT"},
    {NULL},
  };
  g_autoptr(GOptionContext) context = g_option_context_new("DIR");
  g_option_context_set_summary(
    context, "Render the plots of a run directory written by stagger sim, run or validate.");
  g_option_context_set_description(
    context,
    "A run directory (one holding memory.csv, comm.csv, ops.csv) gets memory.FMT\n"
    "(memory per GPU over time, stacked by category), comm.FMT (send rate over\n"
    "all GPUs per link class), groups.FMT (each communicator's traffic, from\n"
    "groups.csv), links.FMT (the busiest links) and gantt.FMT (every op on its GPU,\n"
    "rank and stream).\n"
    "A directory of runs (stagger sim --strategy a,b) gets each run rendered, then\n"
    "compare_memory.FMT and compare_comm.FMT overlaying them.\n"
    "\n"
    "The files written are printed one per line. Needs gnuplot on PATH; the\n"
    "scripts are read from $STAGGER_DATA_DIR/plots (default: " STAGGER_DATA_DIR "/plots).\n");
  g_option_context_add_main_entries(context, entries, NULL);
  if (!g_option_context_parse(context, &argc, &argv, error))
    return FALSE;
  if (argc < 2)
    return st_cli_usage_error(error, "missing DIR: the --out directory of a run");
  if (argc > 2)
    return st_cli_usage_error(error, "unexpected argument '%s'", argv[2]);
  if (format != NULL && strcmp(format, "png") != 0 && strcmp(format, "svg") != 0 &&
      strcmp(format, "dumb") != 0)
    return st_cli_usage_error(error, "unknown --format '%s' (expected png, svg or dumb)",
                              format);

  g_autofree char *plots = plots_dir();
  g_autoptr(GPtrArray) written = g_ptr_array_new_with_free_func(g_free);
  if (!st_plot_dir(argv[1], plots, format, written, error) ||
      !st_outdir_adopt(argv[1], written, error))
    return FALSE;
  for (guint i = 0; i < written->len; i++)
    printf("%s\n", (const char *)g_ptr_array_index(written, i));
  return TRUE;
}

const StCommand st_cmd_plot = {
  "plot",
  "Render a run's memory, communication and Gantt plots with gnuplot",
  run,
};
