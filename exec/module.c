/* module.c: finding, checking and loading backend modules (module.h). */
#include "exec/module.h"

#include <gmodule.h>
#include <string.h>

#include "exec/exec.h"

/* Set by exec/CMakeLists.txt: the modules this build made, where the build
 * tree keeps them, and where an installed tree keeps them relative to the
 * program's folder. */
static const char MODULES_BUILT[] = STAGGER_MODULES_BUILT;   /* "cuda nccl" */
static const char BUILD_DIR[] = STAGGER_BUILD_DIR;           /* the build tree */
static const char BUILD_MODULE_DIR[] = STAGGER_MODULE_BUILD_DIR;
static const char INSTALL_RELDIR[] = STAGGER_MODULE_RELDIR;  /* "../lib/stagger" */

/* Whether this build made module `name` (configure found its toolkit). */
static gboolean
built(const char *name)
{
  g_auto(GStrv) names = g_strsplit(MODULES_BUILT, " ", -1);
  return g_strv_contains((const char *const *)names, name);
}

/* The folder to look in, and how it was chosen (for messages). */
static char *
module_dir(const char **how)
{
  const char *env = g_getenv("STAGGER_MODULE_DIR");
  if (env != NULL && env[0] != '\0') {
    *how = "$STAGGER_MODULE_DIR";
    return g_strdup(env);
  }
  g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
  size_t n = strlen(BUILD_DIR);
  if (exe == NULL || (strncmp(exe, BUILD_DIR, n) == 0 && exe[n] == '/')) {
    *how = "the build tree";
    return g_strdup(BUILD_MODULE_DIR);
  }
  *how = "beside the installed program";
  g_autofree char *bindir = g_path_get_dirname(exe);
  g_autofree char *dir = g_build_filename(bindir, INSTALL_RELDIR, NULL);
  return g_canonicalize_filename(dir, NULL);
}

/* "libcublas.so.13" from the loader's "libcublas.so.13: cannot open shared
 * object file: ...", or NULL. Transfer full. */
static char *
missing_library(const char *message)
{
  const char *end = strstr(message, ": cannot open shared object file");
  if (end == NULL)
    return NULL;
  const char *start = end;
  while (start > message && start[-1] != ' ' && start[-1] != ':')
    start--;
  return g_strndup(start, (gsize)(end - start));
}

static GModule *
load(const char *name, const char *what, const char *needs, GError **error)
{
  if (!built(name)) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_NO_DEVICE,
                "%s is not built in: this build found no %s when it was configured; rebuild "
                "where it is installed",
                what, needs);
    return NULL;
  }
  const char *how = NULL;
  g_autofree char *dir = module_dir(&how);
  g_autofree char *stem = g_strdup_printf("stagger-%s", name);
  g_autofree char *path = g_module_build_path(dir, stem);
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_NO_DEVICE,
                "%s is a module, %s, which is not in %s (%s): install stagger whole, or set "
                "STAGGER_MODULE_DIR to the folder that holds it",
                what, path, dir, how);
    return NULL;
  }
  GModule *module = g_module_open(path, G_MODULE_BIND_LOCAL);
  if (module == NULL) {
    const char *why = g_module_error();
    g_autofree char *lib = missing_library(why);
    if (lib != NULL)
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_NO_DEVICE,
                  "%s needs %s, which this machine does not have (install that library, "
                  "or choose another backend)",
                  what, lib);
    else
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_NO_DEVICE, "%s: cannot load %s: %s",
                  what, path, why);
    return NULL;
  }
  const StModuleStamp mine = ST_MODULE_STAMP;
  gpointer p = NULL;
  const StModuleStamp *stamp =
    g_module_symbol(module, ST_MODULE_STAMP_SYMBOL, &p) ? (const StModuleStamp *)p : NULL;
  if (stamp == NULL || g_strcmp0(stamp->version, mine.version) != 0 ||
      stamp->device_table != mine.device_table || stamp->comm_table != mine.comm_table ||
      stamp->kernel_table != mine.kernel_table) {
    g_autofree char *built_for =
      stamp == NULL ? g_strdup("another program")
      : g_strcmp0(stamp->version, mine.version) != 0
        ? g_strdup_printf("stagger %s", stamp->version)
        : g_strdup_printf("other sources of stagger %s (its backend tables differ)",
                          stamp->version);
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_NO_DEVICE,
                "%s: %s was built for %s, not for this stagger %s: build and install the "
                "program and its modules together",
                what, path, built_for, mine.version);
    g_module_close(module);
    return NULL;
  }
  g_module_make_resident(module);
  g_debug("%s: loaded %s (%s)", what, path, how);
  return module;
}

gconstpointer
st_module_symbol(const char *name, const char *symbol, const char *what, const char *needs,
                 GError **error)
{
  GModule *module = load(name, what, needs, error);
  if (module == NULL)
    return NULL;
  gpointer p = NULL;
  if (!g_module_symbol(module, symbol, &p) || p == NULL) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_NO_DEVICE, "%s: %s has no %s", what,
                g_module_name(module), symbol);
    return NULL;
  }
  return p;
}
