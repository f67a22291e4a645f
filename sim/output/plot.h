/* plot.h: renders a run's tables (memory.csv, comm.csv, ops.csv, see
 * output.h) into images with gnuplot and the scripts in plots/.
 *
 * gnuplot is a separate program, found on PATH when a plot is asked for; the
 * rest of stagger works without it. Each script takes its inputs as gnuplot
 * variables set with -e (the comment at the top of each script lists them),
 * so the scripts can also be run by hand on any run directory.
 *
 * Images are written next to the tables, through a temporary name renamed
 * into place once gnuplot succeeded, so a failed plot leaves no half image.
 */
#pragma once

#include <glib.h>

/* Renders the plots of `dir` with the scripts in `plots_dir`.
 *
 * `format`: "png" (default when NULL; pngcairo when gnuplot has it, else
 * gd's png), "svg", or "dumb" (text on stdout, for a terminal: nothing is
 * written). A run directory (one that holds memory.csv) gets memory.FMT,
 * plus comm.FMT and gantt.FMT when comm.csv and ops.csv are there. A
 * directory whose subdirectories are runs (`stagger sim --strategy a,b`)
 * gets each subdirectory rendered, in name order, then compare_memory.FMT
 * and compare_comm.FMT overlaying them, labelled by subdirectory name.
 *
 * The path of every file written is appended to `written` (transfer full:
 * the array must free its elements with g_free). Errors are in
 * ST_OUTPUT_ERROR: ST_ERROR_INVALID for an unknown format or a directory
 * with no run in it, ST_ERROR_UNSUPPORTED when gnuplot is not installed,
 * ST_ERROR_IO for unreadable inputs, ST_ERROR_FAILED when gnuplot fails
 * (with its message). */
gboolean st_plot_dir(const char *dir, const char *plots_dir, const char *format,
                     GPtrArray *written, GError **error);
