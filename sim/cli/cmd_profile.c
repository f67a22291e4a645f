/* cmd_profile.c: `stagger profile`: measured costs in the profile format
 * (profile/profile.h). For now one source: `stagger profile import deeppool
 * FILE --model M --out P` turns a per-layer profile published by the
 * DeepPool authors into a stagger profile for model M
 * (profile/profile_import_deeppool.h). Measuring kernels on a GPU comes to
 * this command later. */
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "profile/profile_import_deeppool.h"

/* The GPU name of models/clusters/dgx-a100.json, so that the simulator uses
 * DeepPool's A100 numbers on that cluster; --device names another. */
#define DEFAULT_DEVICE "A100-SXM4-80GB"

/* A file as given, else a shipped model by name (as `stagger model` does). */
static char *
resolve_model(const char *model)
{
  if (g_file_test(model, G_FILE_TEST_EXISTS) || strchr(model, G_DIR_SEPARATOR) != NULL)
    return g_strdup(model);
  const char *data = g_getenv("STAGGER_DATA_DIR");
  if (data == NULL || data[0] == '\0')
    data = STAGGER_DATA_DIR;
  g_autofree char *file = g_str_has_suffix(model, ".json") ? g_strdup(model)
                                                            : g_strconcat(model, ".json", NULL);
  g_autofree char *shipped = g_build_filename(data, "models", file, NULL);
  return g_file_test(shipped, G_FILE_TEST_EXISTS) ? g_steal_pointer(&shipped) : g_strdup(model);
}

static gboolean
import_deeppool(const char *file, const char *model_arg, const char *out, const char *device,
                GError **error)
{
  g_autofree char *model_path = resolve_model(model_arg);
  g_autoptr(StModel) model = st_model_load(model_path, error);
  if (model == NULL)
    return FALSE;
  StDeepPoolImport stats = {0};
  g_autoptr(StProfile) profile = st_profile_import_deeppool(file, model, device, &stats, error);
  if (profile == NULL)
    return FALSE;
  g_autofree char *dir = g_path_get_dirname(out);
  if (g_mkdir_with_parents(dir, 0755) != 0) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_IO, "%s: cannot create directory", dir);
    st_deeppool_import_clear(&stats);
    return FALSE;
  }
  if (!st_profile_save(profile, out, error)) {
    st_deeppool_import_clear(&stats);
    return FALSE;
  }
  printf("%s: %d rows over %d batch sizes -> %d entries (layer signature x batch, fwd+bwd) "
         "for %s on %s\n",
         out, stats.rows, stats.batches, stats.entries, model->name, device);
  if (stats.missing->len > 0) {
    printf("layers without a DeepPool row (they keep roofline estimates):");
    for (guint i = 0; i < stats.missing->len; i++)
      printf("%s %s", i ? "," : "", (const char *)g_ptr_array_index(stats.missing, i));
    printf("\n");
  }
  st_deeppool_import_clear(&stats);
  return TRUE;
}

static gboolean
run(int argc, char **argv, GError **error)
{
  g_autofree char *model = NULL, *out = NULL, *device = NULL;
  const GOptionEntry entries[] = {
    {"model", 0, 0, G_OPTION_ARG_FILENAME, &model,
     "The stagger model the profile's layers map to (a file or a shipped model's name)", "M"},
    {"out", 0, 0, G_OPTION_ARG_FILENAME, &out, "The profile file to write", "P"},
    {"device", 0, 0, G_OPTION_ARG_STRING, &device,
     "GPU name the entries are for: a cluster file's gpu.name (default: " DEFAULT_DEVICE
     ", as in models/clusters/dgx-a100.json)",
     "NAME"},
    {NULL},
  };
  g_autoptr(GOptionContext) context = g_option_context_new("import deeppool FILE - profiles");
  g_option_context_set_summary(
    context, "Commands:\n"
             "  import deeppool FILE   a per-layer profile published by the DeepPool authors\n"
             "                         (rows of TYPE{params}[batch]shape and fwd+bwd ms per\n"
             "                         batch size) into stagger's profile format for --model:\n"
             "                         each row becomes an entry under the signature of the\n"
             "                         layers it matches (profile/profile_import_deeppool.h).");
  g_option_context_set_description(
    context, "Example:\n"
             "  stagger profile import deeppool ../shared/data/deeppool/vggLayerGpuProfileA100.txt \\\n"
             "      --model models/vgg16.json --out traces/profiles/a100-deeppool-vgg16.json\n");
  g_option_context_add_main_entries(context, entries, NULL);
  if (!g_option_context_parse(context, &argc, &argv, error))
    return FALSE;
  if (argc < 2)
    return st_cli_usage_error(error, "missing command: import deeppool FILE");
  if (strcmp(argv[1], "import") != 0)
    return st_cli_usage_error(error, "unknown command '%s' (expected import)", argv[1]);
  if (argc < 3 || strcmp(argv[2], "deeppool") != 0)
    return st_cli_usage_error(error, "import: unknown or missing format%s%s (expected deeppool)",
                              argc < 3 ? "" : " ", argc < 3 ? "" : argv[2]);
  if (argc < 4)
    return st_cli_usage_error(error, "import deeppool: missing FILE");
  if (argc > 4)
    return st_cli_usage_error(error, "import deeppool: unexpected argument '%s'", argv[4]);
  if (model == NULL || out == NULL)
    return st_cli_usage_error(error, "import deeppool: --model M and --out P are required");
  return import_deeppool(argv[3], model, out, device ? device : DEFAULT_DEVICE, error);
}

const StCommand st_cmd_profile = {
  "profile",
  "Profiles of layer and link costs: import DeepPool's published per-layer profiles",
  run,
};
