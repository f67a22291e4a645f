/* outdir.c: a command's output folder, written aside and moved into place
 * whole (see outdir.h). */
#define _GNU_SOURCE /* renameat2, RENAME_EXCHANGE (glibc 2.28) */
#include "output/outdir.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/json.h"
#include "output/output.h"

struct StOutDir {
  char *dir;      /* DIR, absolute */
  char *tmp;      /* the temporary folder beside it */
  char *command, *version;
  gboolean committed;
};

static gboolean
io_error(GError **error, const char *path, const char *what, int err)
{
  g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s: %s: %s", path, what, g_strerror(err));
  return FALSE;
}

/* Deletes `path` and, for a folder, everything in it; symbolic links are
 * removed, not followed. */
static gboolean
remove_tree(const char *path, GError **error)
{
  GStatBuf st;
  if (g_lstat(path, &st) != 0)
    return errno == ENOENT ? TRUE : io_error(error, path, "cannot read", errno);
  if (S_ISDIR(st.st_mode)) {
    g_autoptr(GDir) d = g_dir_open(path, 0, error);
    if (d == NULL)
      return FALSE;
    for (const char *name; (name = g_dir_read_name(d)) != NULL;) {
      g_autofree char *child = g_build_filename(path, name, NULL);
      if (!remove_tree(child, error))
        return FALSE;
    }
    if (g_rmdir(path) != 0)
      return io_error(error, path, "cannot remove", errno);
    return TRUE;
  }
  if (g_unlink(path) != 0)
    return io_error(error, path, "cannot remove", errno);
  return TRUE;
}

/* The files under `dir`, as paths relative to it ("dp/report.json"), into
 * `out`; folders are walked, not listed. Symbolic links count as files. */
static void
list_files(const char *dir, const char *prefix, GPtrArray *out)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    g_autofree char *path = g_build_filename(dir, name, NULL);
    char *rel = prefix != NULL ? g_build_filename(prefix, name, NULL) : g_strdup(name);
    if (g_file_test(path, G_FILE_TEST_IS_DIR) && !g_file_test(path, G_FILE_TEST_IS_SYMLINK)) {
      list_files(path, rel, out);
      g_free(rel);
    } else {
      g_ptr_array_add(out, rel);
    }
  }
}

static gint
by_name(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether the folder `dir` is empty or was written by stagger: its manifest
 * says so and, where it lists the files it wrote, nothing else is there (a
 * file a user put beside them would be deleted with the folder). A manifest
 * without a list (stagger before 2026-11-29) vouches for the whole folder. */
static gboolean
is_ours(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  if (d == NULL)
    return FALSE;
  if (g_dir_read_name(d) == NULL)
    return TRUE;
  g_autofree char *path = g_build_filename(dir, ST_OUTDIR_MANIFEST, NULL);
  g_autoptr(cJSON) manifest =
    g_file_test(path, G_FILE_TEST_IS_REGULAR) ? st_json_load_file(path, NULL) : NULL;
  if (g_strcmp0(cJSON_GetStringValue(cJSON_GetObjectItem(manifest, "format")),
                "stagger-output") != 0)
    return FALSE;
  const cJSON *files = cJSON_GetObjectItem(manifest, "files");
  if (!cJSON_IsArray(files))
    return TRUE;
  g_autoptr(GHashTable) listed = g_hash_table_new(g_str_hash, g_str_equal);
  const cJSON *f;
  cJSON_ArrayForEach(f, files)
    if (cJSON_IsString(f))
      g_hash_table_add(listed, f->valuestring);
  g_autoptr(GPtrArray) found = g_ptr_array_new_with_free_func(g_free);
  list_files(dir, NULL, found);
  for (guint i = 0; i < found->len; i++) {
    const char *rel = g_ptr_array_index(found, i);
    if (strcmp(rel, ST_OUTDIR_MANIFEST) != 0 && !g_hash_table_contains(listed, rel))
      return FALSE;
  }
  return TRUE;
}

/* `a` is `b` or a folder above it. */
static gboolean
holds(const char *a, const char *b)
{
  size_t n = strlen(a);
  return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/' || strcmp(a, "/") == 0);
}

/* The folders no command replaces, even with --force. */
static gboolean
check_not_precious(const char *dir, GError **error)
{
  g_autofree char *real = realpath(dir, NULL);
  g_autofree char *cwd = g_get_current_dir();
  g_autofree char *home = realpath(g_get_home_dir(), NULL);
  const char *what = NULL;
  if (real == NULL)
    return TRUE;
  if (strcmp(real, "/") == 0)
    what = "the root of the filesystem";
  else if (home != NULL && strcmp(real, home) == 0)
    what = "your home folder";
  else if (holds(real, cwd))
    what = "the current directory or a folder above it";
  if (what == NULL)
    return TRUE;
  g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_INVALID,
              "--out %s is %s: stagger replaces its output folder whole, so give a folder of "
              "its own (such as runs/NAME)",
              dir, what);
  return FALSE;
}

/* Removes the temporary folders a killed command left beside `base` in
 * `parent` (".BASE.stagger-PID-XXXXXX" whose PID no longer runs). */
static void
remove_leftovers(const char *parent, const char *base)
{
  g_autofree char *prefix = g_strdup_printf(".%s.stagger-", base);
  g_autoptr(GDir) d = g_dir_open(parent, 0, NULL);
  for (const char *name; d != NULL && (name = g_dir_read_name(d)) != NULL;) {
    if (!g_str_has_prefix(name, prefix))
      continue;
    char *end = NULL;
    gint64 pid = g_ascii_strtoll(name + strlen(prefix), &end, 10);
    if (pid <= 0 || end == NULL || *end != '-' || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
      continue;
    g_autofree char *path = g_build_filename(parent, name, NULL);
    remove_tree(path, NULL);
  }
}

StOutDir *
st_outdir_begin(const char *dir, const char *command, const char *version, gboolean force,
                GError **error)
{
  g_return_val_if_fail(dir != NULL, NULL);
  if (dir[0] == '\0') {
    g_set_error_literal(error, ST_OUTPUT_ERROR, ST_ERROR_INVALID, "--out: empty folder name");
    return NULL;
  }
  g_autofree char *abs = g_canonicalize_filename(dir, NULL);
  if (!check_not_precious(abs, error))
    return NULL;
  GStatBuf st;
  if (g_lstat(abs, &st) == 0) {
    gboolean ours = S_ISDIR(st.st_mode) && is_ours(abs);
    if (!ours && !force) {
      g_set_error(error, ST_OUTPUT_ERROR, ST_OUTDIR_ERROR_NOT_OURS,
                  "--out %s already holds %s that stagger did not write (no %s of a stagger "
                  "run, or files beside those its %s lists): stagger replaces its output "
                  "folder whole, so give another --out, or --force to replace %s and "
                  "everything in it",
                  dir, S_ISDIR(st.st_mode) ? "files" : "a file", ST_OUTDIR_MANIFEST,
                  ST_OUTDIR_MANIFEST, dir);
      return NULL;
    }
  } else if (errno != ENOENT) {
    io_error(error, dir, "cannot read", errno);
    return NULL;
  }
  g_autofree char *parent = g_path_get_dirname(abs);
  g_autofree char *base = g_path_get_basename(abs);
  if (g_mkdir_with_parents(parent, 0755) != 0) {
    io_error(error, parent, "cannot create", errno);
    return NULL;
  }
  remove_leftovers(parent, base);
  g_autofree char *tmp = g_strdup_printf("%s/.%s.stagger-%d-XXXXXX", parent, base, (int)getpid());
  if (g_mkdtemp_full(tmp, 0755) == NULL) {
    io_error(error, tmp, "cannot create", errno);
    return NULL;
  }
  StOutDir *out = g_new0(StOutDir, 1);
  out->dir = g_steal_pointer(&abs);
  out->tmp = g_steal_pointer(&tmp);
  out->command = g_strdup(command);
  out->version = g_strdup(version);
  return out;
}

const char *
st_outdir_path(const StOutDir *out)
{
  return out->committed ? out->dir : out->tmp;
}

static gboolean
write_manifest(StOutDir *out, gboolean partial, const char *note, GError **error)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_utc();
  g_autofree char *date = g_date_time_format(now, "%Y-%m-%dT%H:%M:%SZ");
  g_autoptr(cJSON) root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", "stagger-output");
  cJSON_AddNumberToObject(root, "version", 1);
  cJSON_AddStringToObject(root, "command", out->command ? out->command : "");
  cJSON_AddStringToObject(root, "stagger", out->version ? out->version : "");
  cJSON_AddStringToObject(root, "date", date);
  cJSON_AddStringToObject(root, "status", partial ? "partial" : "complete");
  if (note != NULL)
    cJSON_AddStringToObject(root, "note", note);
  else
    cJSON_AddNullToObject(root, "note");
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
  list_files(out->tmp, NULL, files);
  g_ptr_array_sort(files, by_name);
  cJSON *list = cJSON_AddArrayToObject(root, "files");
  for (guint i = 0; i < files->len; i++)
    cJSON_AddItemToArray(list, cJSON_CreateString(g_ptr_array_index(files, i)));
  g_autofree char *path = g_build_filename(out->tmp, ST_OUTDIR_MANIFEST, NULL);
  return st_json_write_file(path, root, error);
}

/* Puts the finished folder at DIR; what was there ends at `*old` (to be
 * removed), or nowhere when DIR was absent. */
static gboolean
swap_into_place(StOutDir *out, char **old, GError **error)
{
  *old = NULL;
  if (renameat2(AT_FDCWD, out->tmp, AT_FDCWD, out->dir, RENAME_EXCHANGE) == 0) {
    *old = g_strdup(out->tmp); /* the exchange left the old one there */
    return TRUE;
  }
  if (errno == ENOENT) { /* nothing at DIR */
    if (g_rename(out->tmp, out->dir) != 0)
      return io_error(error, out->dir, "cannot move the finished output into place", errno);
    return TRUE;
  }
  /* No exchange on this filesystem: the old one aside, then the new one in. */
  g_autofree char *aside = g_strdup_printf("%s.old-%08x", out->tmp, g_random_int());
  if (g_rename(out->dir, aside) != 0)
    return io_error(error, out->dir, "cannot move the previous output aside", errno);
  if (g_rename(out->tmp, out->dir) != 0) {
    int err = errno;
    g_rename(aside, out->dir);
    return io_error(error, out->dir, "cannot move the finished output into place", err);
  }
  *old = g_steal_pointer(&aside);
  return TRUE;
}

gboolean
st_outdir_commit(StOutDir *out, gboolean partial, const char *note, GError **error)
{
  g_return_val_if_fail(out != NULL && !out->committed, FALSE);
  g_autofree char *old = NULL;
  if (!write_manifest(out, partial, note, error) || !swap_into_place(out, &old, error)) {
    remove_tree(out->tmp, NULL);
    return FALSE;
  }
  out->committed = TRUE;
  if (old != NULL && !remove_tree(old, error)) {
    g_prefix_error(error, "the new output is in %s, but the previous one is left at %s: ",
                   out->dir, old);
    return FALSE;
  }
  return TRUE;
}

void
st_outdir_free(StOutDir *out)
{
  if (out == NULL)
    return;
  if (!out->committed)
    remove_tree(out->tmp, NULL);
  g_free(out->dir);
  g_free(out->tmp);
  g_free(out->command);
  g_free(out->version);
  g_free(out);
}

gboolean
st_outdir_adopt(const char *dir, const GPtrArray *files, GError **error)
{
  g_autofree char *at = g_canonicalize_filename(dir, NULL);
  for (;;) {
    g_autofree char *path = g_build_filename(at, ST_OUTDIR_MANIFEST, NULL);
    if (g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
      g_autoptr(cJSON) manifest = st_json_load_file(path, NULL);
      cJSON *list = cJSON_GetObjectItem(manifest, "files");
      if (!cJSON_IsArray(list))
        return TRUE;
      g_autoptr(GHashTable) listed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
      const cJSON *f;
      cJSON_ArrayForEach(f, list)
        if (cJSON_IsString(f))
          g_hash_table_add(listed, g_strdup(f->valuestring));
      gsize n = strlen(at);
      for (guint i = 0; i < files->len; i++) {
        g_autofree char *abs = g_canonicalize_filename(g_ptr_array_index(files, i), NULL);
        if (!g_str_has_prefix(abs, at) || abs[n] != G_DIR_SEPARATOR ||
            !g_hash_table_add(listed, g_strdup(abs + n + 1)))
          continue;
        cJSON_AddItemToArray(list, cJSON_CreateString(abs + n + 1));
      }
      return st_json_write_file(path, manifest, error);
    }
    g_autofree char *up = g_path_get_dirname(at);
    if (strcmp(up, at) == 0)
      return TRUE;
    g_free(at);
    at = g_steal_pointer(&up);
  }
}
