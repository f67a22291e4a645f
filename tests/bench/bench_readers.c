/* bench_readers.c: every reader of user files at 10^4, 10^5 and 10^6 nodes
 * (issue 23; docs/PERFORMANCE.md, "Issue 23: readers at 10^6 nodes").
 *
 *   bench_readers [--sizes 10000,100000,1000000] [--limit SECONDS] [FORMAT...]
 *   bench_readers --write FORMAT N DIR      writes one input and prints its path
 *   bench_readers --read FORMAT PATH        reads it once (for /usr/bin/time -v: the
 *                                           read's own peak RSS, without the writing)
 *
 * Each input is written by tests/readers.c into a temporary folder, then
 * read once; the table gives the read's CPU seconds (user + system: the
 * machine is shared) and wall seconds, the file's size, and the ratio of
 * CPU time to the previous size's (10 for a linear reader; more where the
 * larger input outgrows the caches). A read refused is said in the ratio
 * column (hf and space refuse more than 100,000 layers or values). Once a
 * read takes longer than --limit (default 60 s), larger sizes of that
 * format are skipped. */
#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "readers.h"

static int64_t
file_bytes(const char *path, const char *name)
{
  struct stat st;
  if (strcmp(name, "chakra") == 0) {
    g_autofree char *rank0 = g_strdup_printf("%s.0.et", path);
    return g_stat(rank0, &st) == 0 ? (int64_t)st.st_size : -1;
  }
  return g_stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

static void
remove_tree(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_remove(path);
  }
  g_rmdir(dir);
}

static int
write_one(const char *format, const char *count, const char *dir)
{
  const StReaderInput *r = st_reader_input_find(format);
  if (r == NULL) {
    fprintf(stderr, "bench_readers: no format '%s'\n", format);
    return 2;
  }
  g_autoptr(GError) error = NULL;
  g_mkdir_with_parents(dir, 0755);
  g_autofree char *path = r->write(dir, g_ascii_strtoll(count, NULL, 10), &error);
  if (path == NULL) {
    fprintf(stderr, "bench_readers: %s\n", error->message);
    return 1;
  }
  printf("%s\n", path);
  return 0;
}

static int
read_one(const char *format, const char *path)
{
  const StReaderInput *r = st_reader_input_find(format);
  if (r == NULL) {
    fprintf(stderr, "bench_readers: no format '%s'\n", format);
    return 2;
  }
  g_autoptr(GError) error = NULL;
  double cpu0 = st_reader_cpu_seconds();
  gboolean ok = r->read(path, &error);
  double cpu = st_reader_cpu_seconds() - cpu0;
  if (!ok) {
    fprintf(stderr, "bench_readers: %s: %.160s\n", r->name, error->message);
    return 1;
  }
  printf("%s %s: %.3f CPU s\n", r->name, path, cpu);
  return 0;
}

int
main(int argc, char **argv)
{
  if (argc == 5 && strcmp(argv[1], "--write") == 0)
    return write_one(argv[2], argv[3], argv[4]);
  if (argc == 4 && strcmp(argv[1], "--read") == 0)
    return read_one(argv[2], argv[3]);
  const char *sizes_text = "10000,100000,1000000";
  double limit = 60;
  GPtrArray *formats = g_ptr_array_new();
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
      sizes_text = argv[++i];
    else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc)
      limit = g_ascii_strtod(argv[++i], NULL);
    else if (st_reader_input_find(argv[i]) != NULL)
      g_ptr_array_add(formats, (gpointer)st_reader_input_find(argv[i]));
    else {
      fprintf(stderr, "usage: bench_readers [--sizes N,N,...] [--limit SECONDS] [FORMAT...]\n"
                      "       bench_readers --write FORMAT N DIR\n"
                      "       bench_readers --read FORMAT PATH\n");
      return 2;
    }
  }
  if (formats->len == 0)
    for (const StReaderInput *r = st_reader_inputs(); r->name != NULL; r++)
      g_ptr_array_add(formats, (gpointer)r);
  g_auto(GStrv) sizes = g_strsplit(sizes_text, ",", -1);
  printf("%-9s %-8s %9s %10s %9s %9s %7s\n", "format", "counts", "N", "file MB", "CPU s",
         "wall s", "ratio");
  int status = 0;
  for (guint f = 0; f < formats->len; f++) {
    const StReaderInput *r = g_ptr_array_index(formats, f);
    double previous = 0;
    gboolean skip = FALSE;
    for (int k = 0; sizes[k] != NULL; k++) {
      int64_t n = g_ascii_strtoll(sizes[k], NULL, 10);
      if (skip) {
        printf("%-9s %-8s %9" G_GINT64_FORMAT "   skipped: the previous size took over %g s\n",
               r->name, r->what, n, limit);
        continue;
      }
      g_autoptr(GError) error = NULL;
      g_autofree char *dir = g_dir_make_tmp("stagger-bench-readers-XXXXXX", &error);
      g_autofree char *path = dir != NULL ? r->write(dir, n, &error) : NULL;
      if (path == NULL) {
        fprintf(stderr, "bench_readers: %s: writing %" G_GINT64_FORMAT ": %s\n", r->name, n,
                error->message);
        status = 1;
        break;
      }
      double cpu0 = st_reader_cpu_seconds();
      int64_t wall0 = g_get_monotonic_time();
      gboolean ok = r->read(path, &error);
      double cpu = st_reader_cpu_seconds() - cpu0;
      double wall = (double)(g_get_monotonic_time() - wall0) * 1e-6;
      if (!ok) /* a bound of the format (hf: n_layer, space: values per option) */
        fprintf(stderr, "bench_readers: %s: reading %" G_GINT64_FORMAT ": %.160s\n", r->name,
                n, error->message);
      g_autofree char *ratio = !ok ? g_strdup("refused")
                               : previous > 0 ? g_strdup_printf("%6.1fx", cpu / previous)
                                              : g_strdup("");
      printf("%-9s %-8s %9" G_GINT64_FORMAT " %10.1f %9.3f %9.3f %7s\n", r->name, r->what, n,
             (double)file_bytes(path, r->name) / 1e6, cpu, wall, ratio);
      fflush(stdout);
      previous = cpu;
      skip = cpu > limit;
      remove_tree(dir);
    }
  }
  g_ptr_array_free(formats, TRUE);
  return status;
}
