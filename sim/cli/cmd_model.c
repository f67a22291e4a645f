/* cmd_model.c: `stagger model show [--json] MODEL` prints a model's layers
 * with their shapes, parameters, FLOPs and kept bytes (model/model.h);
 * `stagger model types` lists the layer types and their attributes
 * (model/layer_type.h); `stagger model import` is cmd_model_import.c. */
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "cli/cli.h"
#include "model/layer_type.h"
#include "model/model.h"

/* MODEL as given when it names a file, else a shipped model by name
 * ("resnet50" -> $STAGGER_DATA_DIR/models/resnet50.json, default: the source
 * tree). A name that is neither is returned as is, so the loader's error
 * names what the user typed. Transfer full. */
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
show(const char *arg, gboolean json, GError **error)
{
  g_autofree char *path = resolve_model(arg);
  g_autoptr(StModel) model = st_model_load(path, error);
  if (model == NULL)
    return FALSE;
  if (json) {
    g_autoptr(cJSON) root = st_model_to_json(model);
    g_autofree char *text = cJSON_Print(root);
    printf("%s\n", text);
  } else {
    st_model_print(model, stdout);
  }
  return TRUE;
}

static void
list_types(void)
{
  for (const StLayerType *const *t = st_layer_types(); *t != NULL; t++) {
    printf("%s\n    %s\n", (*t)->name, (*t)->summary);
    for (const StAttrSpec *a = (*t)->attrs; a->key != NULL; a++) {
      g_autofree char *fallback =
        a->derived    ? g_strdup("derived")
        : a->required ? g_strdup("required")
        : a->flag     ? g_strdup(a->fallback ? "default true" : "default false")
        : a->choices  ? g_strdup_printf("default %s", a->choices[a->fallback])
                      : g_strdup_printf("default %" G_GINT64_FORMAT, a->fallback);
      printf("    %-18s %-16s %s\n", a->key, fallback, a->help);
    }
    printf("\n");
  }
}

static gboolean
run(int argc, char **argv, GError **error)
{
  /* import has options of its own. */
  if (argc >= 2 && strcmp(argv[1], "import") == 0)
    return st_cli_model_import(argc - 1, argv + 1, error);
  gboolean json = FALSE;
  GOptionEntry entries[] = {
    {"json", 'j', 0, G_OPTION_ARG_NONE, &json,
     "show: print the expanded model as JSON, with each layer's derived numbers", NULL},
    {NULL},
  };
  g_set_prgname("stagger model");
  g_autoptr(GOptionContext) context = g_option_context_new("show [--json] MODEL | types | import ...");
  g_option_context_set_summary(context, "Show a model's layers, parameters and FLOPs.");
  g_option_context_set_description(
    context,
    "Commands:\n"
    "  show MODEL   one row per layer: index, name, type, input -> output shape,\n"
    "               parameters, forward and backward GFLOP per sample, bytes kept\n"
    "               for backward per sample; then the totals. MODEL is a file or\n"
    "               the name of a shipped model (resnet50, gpt2-124m, ...).\n"
    "  types        the layer types a model file may use, with their attributes.\n"
    "  import       a model file from a Hugging Face config.json or an ONNX file\n"
    "               ('stagger model import --help').\n"
    "\n"
    "Shipped models are read from $STAGGER_DATA_DIR/models (default: " STAGGER_DATA_DIR
    "/models).\n"
    "Example:\n"
    "  stagger model show models/resnet50.json\n");
  g_option_context_add_main_entries(context, entries, NULL);
  if (!g_option_context_parse(context, &argc, &argv, error))
    return FALSE;
  if (argc < 2)
    return st_cli_usage_error(error, "missing command: show MODEL, types, or import");

  if (strcmp(argv[1], "show") == 0) {
    if (argc < 3)
      return st_cli_usage_error(error, "show: missing MODEL (a file or a shipped model's name)");
    if (argc > 3)
      return st_cli_usage_error(error, "show: unexpected argument '%s'", argv[3]);
    return show(argv[2], json, error);
  }
  if (strcmp(argv[1], "types") == 0) {
    if (argc > 2)
      return st_cli_usage_error(error, "types: unexpected argument '%s'", argv[2]);
    if (json)
      return st_cli_usage_error(error, "--json applies to show only");
    list_types();
    return TRUE;
  }
  return st_cli_usage_error(error, "unknown command '%s' (expected show, types or import)", argv[1]);
}

const StCommand st_cmd_model = {"model", "Show a model's layers, parameters and FLOPs; import one",
                                run};
