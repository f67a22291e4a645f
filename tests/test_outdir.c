/* test_outdir.c: the output folder (output/outdir.h): written aside, moved
 * into place whole with its manifest, never mixed with what was there, and
 * what stagger did not write refused unless forced. */
#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/json.h"
#include "output/outdir.h"
#include "output/output.h"
#include "testutil.h"

static void
put(const char *dir, const char *name, const char *text)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  g_autofree char *parent = g_path_get_dirname(path);
  g_assert_cmpint(g_mkdir_with_parents(parent, 0755), ==, 0);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
}

static gboolean
exists(const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  return g_file_test(path, G_FILE_TEST_EXISTS);
}

/* Names in `dir` starting with '.', the temporary folders. */
static int
hidden(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  int n = 0;
  for (const char *name; (name = g_dir_read_name(d)) != NULL;)
    n += name[0] == '.';
  return n;
}

static cJSON *
manifest(const char *dir)
{
  g_autofree char *path = g_build_filename(dir, ST_OUTDIR_MANIFEST, NULL);
  cJSON *root = st_json_load_file(path, NULL);
  g_assert_nonnull(root);
  return root;
}

static void
test_fresh_and_replaced(void)
{
  g_autofree char *tmp = st_test_tmpdir();
  g_autofree char *dir = g_build_filename(tmp, "runs", "r", NULL);
  g_autoptr(GError) error = NULL;
  /* A fresh folder: nothing there until commit, then the files and the manifest. */
  StOutDir *out = st_outdir_begin(dir, "stagger sim --out runs/r", "9.9", FALSE, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(st_outdir_path(out), !=, dir);
  put(st_outdir_path(out), "dp/report.json", "{}");
  put(st_outdir_path(out), "zero/report.json", "{}");
  g_assert_false(g_file_test(dir, G_FILE_TEST_EXISTS));
  g_assert_true(st_outdir_commit(out, FALSE, NULL, &error));
  g_assert_no_error(error);
  g_assert_cmpstr(st_outdir_path(out), ==, dir);
  st_outdir_free(out);
  g_assert_true(exists(dir, "dp/report.json") && exists(dir, "zero/report.json"));
  g_autoptr(cJSON) m = manifest(dir);
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(m, "format")), ==, "stagger-output");
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(m, "command")), ==,
                  "stagger sim --out runs/r");
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(m, "stagger")), ==, "9.9");
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(m, "status")), ==, "complete");
  g_assert_true(cJSON_IsNull(cJSON_GetObjectItem(m, "note")));

  /* An earlier output is replaced whole: zero/ does not survive a run that
   * only wrote cdp/; the partial status and its note are recorded. */
  out = st_outdir_begin(dir, "stagger run --out runs/r", "9.9", FALSE, &error);
  g_assert_no_error(error);
  put(st_outdir_path(out), "cdp/report.json", "{}");
  g_assert_true(exists(dir, "zero/report.json")); /* untouched until commit */
  g_assert_true(st_outdir_commit(out, TRUE, "stopped after 3 of 10 steps", &error));
  st_outdir_free(out);
  g_assert_true(exists(dir, "cdp/report.json"));
  g_assert_false(exists(dir, "dp") || exists(dir, "zero"));
  g_autoptr(cJSON) m2 = manifest(dir);
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(m2, "status")), ==, "partial");
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(m2, "note")), ==,
                  "stopped after 3 of 10 steps");
  g_autofree char *parent = g_path_get_dirname(dir);
  g_assert_cmpint(hidden(parent), ==, 0);
}

/* A run that fails (no commit) leaves the folder as it was and no temporary. */
static void
test_abandoned(void)
{
  g_autofree char *tmp = st_test_tmpdir();
  g_autofree char *dir = g_build_filename(tmp, "r", NULL);
  g_autoptr(GError) error = NULL;
  StOutDir *out = st_outdir_begin(dir, "first", "1", FALSE, &error);
  put(st_outdir_path(out), "report.json", "{\"run\": 1}");
  g_assert_true(st_outdir_commit(out, FALSE, NULL, &error));
  st_outdir_free(out);
  out = st_outdir_begin(dir, "second", "1", FALSE, &error);
  g_assert_no_error(error);
  put(st_outdir_path(out), "report.json", "{\"run\": 2}");
  st_outdir_free(out);
  g_autofree char *path = g_build_filename(dir, "report.json", NULL);
  g_autofree char *text = st_test_read(path, NULL);
  g_assert_cmpstr(text, ==, "{\"run\": 1}");
  g_assert_cmpint(hidden(tmp), ==, 0);
}

/* A folder of other files, or a file, is refused unless forced; an empty
 * folder is taken; the folder holding the current directory never is. */
static void
test_not_ours(void)
{
  g_autofree char *tmp = st_test_tmpdir();
  g_autofree char *mine = g_build_filename(tmp, "mine", NULL);
  put(mine, "thesis.tex", "precious");
  g_autoptr(GError) error = NULL;
  g_assert_null(st_outdir_begin(mine, "c", "1", FALSE, &error));
  g_assert_error(error, ST_OUTPUT_ERROR, ST_OUTDIR_ERROR_NOT_OURS);
  g_assert_nonnull(strstr(error->message, "--force"));
  g_clear_error(&error);
  g_assert_true(exists(mine, "thesis.tex"));
  g_assert_cmpint(hidden(tmp), ==, 0);

  g_autofree char *file = g_build_filename(tmp, "afile", NULL);
  g_assert_true(g_file_set_contents(file, "x", -1, NULL));
  g_assert_null(st_outdir_begin(file, "c", "1", FALSE, &error));
  g_assert_error(error, ST_OUTPUT_ERROR, ST_OUTDIR_ERROR_NOT_OURS);
  g_clear_error(&error);

  StOutDir *out = st_outdir_begin(mine, "c", "1", TRUE, &error);
  g_assert_no_error(error);
  g_assert_true(st_outdir_commit(out, FALSE, NULL, &error));
  st_outdir_free(out);
  g_assert_false(exists(mine, "thesis.tex"));
  g_assert_true(exists(mine, ST_OUTDIR_MANIFEST));

  g_autofree char *empty = g_build_filename(tmp, "empty", NULL);
  g_assert_cmpint(g_mkdir(empty, 0755), ==, 0);
  out = st_outdir_begin(empty, "c", "1", FALSE, &error);
  g_assert_no_error(error);
  st_outdir_free(out);

  g_autofree char *cwd = g_get_current_dir();
  g_assert_null(st_outdir_begin(cwd, "c", "1", TRUE, &error));
  g_assert_error(error, ST_OUTPUT_ERROR, ST_ERROR_INVALID);
  g_clear_error(&error);
  g_assert_null(st_outdir_begin("/", "c", "1", TRUE, &error));
  g_assert_error(error, ST_OUTPUT_ERROR, ST_ERROR_INVALID);
}

/* A symbolic link inside an output being replaced is removed, never followed. */
static void
test_links_not_followed(void)
{
  g_autofree char *tmp = st_test_tmpdir();
  g_autofree char *keep = g_build_filename(tmp, "keep", NULL);
  put(keep, "data.txt", "keep me");
  g_autofree char *dir = g_build_filename(tmp, "r", NULL);
  g_autoptr(GError) error = NULL;
  StOutDir *out = st_outdir_begin(dir, "c", "1", FALSE, &error);
  g_autofree char *link = g_build_filename(st_outdir_path(out), "link", NULL);
  g_assert_cmpint(symlink(keep, link), ==, 0);
  g_assert_true(st_outdir_commit(out, FALSE, NULL, &error));
  st_outdir_free(out);
  out = st_outdir_begin(dir, "c", "1", FALSE, &error);
  g_assert_no_error(error);
  g_assert_true(st_outdir_commit(out, FALSE, NULL, &error));
  st_outdir_free(out);
  g_assert_true(exists(keep, "data.txt"));
  g_assert_false(exists(dir, "link"));
}

/* A temporary folder a killed command left (its process is gone) is removed
 * by the next command writing the same folder; one of a live process is not. */
static void
test_leftovers(void)
{
  g_autofree char *tmp = st_test_tmpdir();
  pid_t child = fork();
  if (child == 0)
    _exit(0);
  g_assert_cmpint(waitpid(child, NULL, 0), ==, child);
  g_autofree char *dead = g_strdup_printf(".r.stagger-%d-abcdef", (int)child);
  g_autofree char *live = g_strdup_printf(".r.stagger-%d-ghijkl", (int)getpid());
  g_autofree char *dead_file = g_build_filename(dead, "report.json", NULL);
  put(tmp, dead_file, "{}");
  g_autofree char *live_file = g_build_filename(live, "report.json", NULL);
  put(tmp, live_file, "{}");
  g_autofree char *dir = g_build_filename(tmp, "r", NULL);
  g_autoptr(GError) error = NULL;
  StOutDir *out = st_outdir_begin(dir, "c", "1", FALSE, &error);
  g_assert_no_error(error);
  st_outdir_free(out);
  g_assert_false(exists(tmp, dead));
  g_assert_true(exists(tmp, live));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/output/outdir/fresh-and-replaced", test_fresh_and_replaced);
  g_test_add_func("/output/outdir/abandoned", test_abandoned);
  g_test_add_func("/output/outdir/not-ours", test_not_ours);
  g_test_add_func("/output/outdir/links-not-followed", test_links_not_followed);
  g_test_add_func("/output/outdir/leftovers", test_leftovers);
  return g_test_run();
}
