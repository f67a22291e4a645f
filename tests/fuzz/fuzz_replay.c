/* fuzz_replay.c: every fuzz target over its seeds and its regression inputs
 * (tests/fuzz/regressions/NAME/), in any build: the ctest `fuzz_replay`.
 * A crash is a failure of the test; an error from a loader is not (most
 * regression inputs are meant to be refused).
 *
 *   fuzz_replay [NAME...]          replay every target, or the named ones
 *   fuzz_replay --seeds NAME       print NAME's seed files, one a line
 *   fuzz_replay --run NAME FILE... run NAME on the files given
 */
#include <stdio.h>
#include <string.h>

#include "fuzz_targets.h"

/* Appends the files of `root`/`glob` (a pattern in its last part) to `out`, sorted. */
static void
expand(const char *root, const char *glob, GPtrArray *out)
{
  g_autofree char *dir_rel = g_path_get_dirname(glob);
  g_autofree char *pattern = g_path_get_basename(glob);
  g_autofree char *dir = g_build_filename(root, dir_rel, NULL);
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  if (d == NULL)
    return;
  g_autoptr(GPtrArray) found = g_ptr_array_new();
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL) {
    g_autofree char *path = g_build_filename(dir, name, NULL);
    if (g_pattern_match_simple(pattern, name) && g_file_test(path, G_FILE_TEST_IS_REGULAR))
      g_ptr_array_add(found, g_steal_pointer(&path));
  }
  g_ptr_array_sort(found, (GCompareFunc)(void (*)(void))g_strcmp0);
  for (guint i = 0; i < found->len; i++)
    g_ptr_array_add(out, found->pdata[i]);
}

/* The seeds, then the regressions of `t`. Transfer full. */
static GPtrArray *
inputs(const StFuzzTarget *t, gboolean with_regressions)
{
  GPtrArray *files = g_ptr_array_new_with_free_func(g_free);
  for (int i = 0; t->seeds[i] != NULL; i++)
    expand(STAGGER_SOURCE_DIR, t->seeds[i], files);
  if (with_regressions) {
    g_autofree char *glob = g_strdup_printf("tests/fuzz/regressions/%s/*", t->name);
    expand(STAGGER_SOURCE_DIR, glob, files);
  }
  return files;
}

static int
replay(const StFuzzTarget *t)
{
  g_autoptr(GPtrArray) files = inputs(t, TRUE);
  if (files->len == 0) {
    fprintf(stderr, "fuzz_replay: %s has no seeds\n", t->name);
    return 1;
  }
  guint accepted = 0;
  for (guint i = 0; i < files->len; i++)
    accepted += t->run(files->pdata[i]) ? 1 : 0;
  printf("fuzz_replay: %s: %u inputs, %u accepted\n", t->name, files->len, accepted);
  /* A target that accepts none of its seeds fuzzes nothing but its first check. */
  if (accepted == 0) {
    fprintf(stderr, "fuzz_replay: %s accepts none of its seeds\n", t->name);
    return 1;
  }
  return 0;
}

int
main(int argc, char **argv)
{
  st_fuzz_setup();
  if (argc >= 3 && (strcmp(argv[1], "--seeds") == 0 || strcmp(argv[1], "--run") == 0)) {
    const StFuzzTarget *t = st_fuzz_target_find(argv[2]);
    if (t == NULL) {
      fprintf(stderr, "fuzz_replay: unknown target '%s'\n", argv[2]);
      return 2;
    }
    if (strcmp(argv[1], "--run") == 0) {
      for (int i = 3; i < argc; i++)
        printf("%s: %s\n", argv[i], t->run(argv[i]) ? "accepted" : "refused");
      return 0;
    }
    g_autoptr(GPtrArray) files = inputs(t, FALSE);
    for (guint i = 0; i < files->len; i++)
      printf("%s\n", (char *)files->pdata[i]);
    return 0;
  }
  int failed = 0;
  for (const StFuzzTarget *t = st_fuzz_targets(); t->name != NULL; t++) {
    gboolean named = argc == 1;
    for (int i = 1; i < argc && !named; i++)
      named = strcmp(argv[i], t->name) == 0;
    if (named)
      failed |= replay(t);
  }
  return failed;
}
