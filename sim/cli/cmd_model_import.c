/* cmd_model_import.c: `stagger model import --FORMAT FILE --out MODEL.json`,
 * a model described elsewhere (a Hugging Face config.json, an ONNX network)
 * into stagger's model format (import/import.h). One option per registered
 * importer; exactly one is given. The model is loaded through the model
 * loader before it is written, so what lands in --out is a model stagger
 * derives like any shipped one; what the import approximated is printed as
 * warnings on stderr. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "cli/cli.h"
#include "import/import.h"

typedef struct {
  char *out, *name;
  gint64 seq_len;
  gboolean no_loss;
  char **dims;          /* NAME=N */
  char *paths[8];       /* one per importer, in registry order */
} Args;

static void
args_clear(Args *a)
{
  g_free(a->out);
  g_free(a->name);
  g_strfreev(a->dims);
  for (guint i = 0; i < G_N_ELEMENTS(a->paths); i++)
    g_free(a->paths[i]);
}

/* --dim NAME=N into a table NAME -> N. */
static gboolean
parse_dims(char **dims, GHashTable *table, GError **error)
{
  for (char **d = dims; d != NULL && *d != NULL; d++) {
    const char *eq = strchr(*d, '=');
    char *end = NULL;
    gint64 value = eq != NULL ? g_ascii_strtoll(eq + 1, &end, 10) : 0;
    if (eq == NULL || eq == *d || end == eq + 1 || *end != '\0' || value < 1)
      return st_cli_usage_error(error, "--dim '%s': expected NAME=N with N >= 1", *d);
    gint64 *v = g_new(gint64, 1);
    *v = value;
    g_hash_table_replace(table, g_strndup(*d, (gsize)(eq - *d)), v);
  }
  return TRUE;
}

static void
print_summary(const char *out, const StModel *model, const StImportResult *result)
{
  printf("%s: %s, %d layers, %" G_GINT64_FORMAT " parameters, %.4g GFLOP forward per sample\n",
         out, model->name, model->n_layers, model->params, model->fwd_flops / 1e9);
  if (result->graph_nodes > 0)
    printf("graph: %d nodes, %" G_GINT64_FORMAT " parameters, %.4g GFLOP in matrix products "
           "per sample; %d custom layers\n",
           result->graph_nodes, result->graph_params, result->graph_dense_flops / 1e9,
           result->custom_layers);
  for (guint i = 0; i < result->warnings->len; i++)
    fprintf(stderr, "warning: %s\n", (const char *)result->warnings->pdata[i]);
}

static gboolean
import_one(const StImporter *importer, const char *path, const Args *a, GError **error)
{
  g_autoptr(GHashTable) dims = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  if (!parse_dims(a->dims, dims, error))
    return FALSE;
  StImportOptions options = {
    .name = a->name,
    .seq_len = a->seq_len,
    .no_loss = a->no_loss,
    .dims = g_hash_table_size(dims) > 0 ? dims : NULL,
  };
  StImportResult result;
  st_import_result_init(&result);
  g_autoptr(StModel) model = st_import(importer, path, &options, &result, error);
  gboolean ok = model != NULL;
  if (ok) {
    g_autofree char *text = st_import_format(&result);
    GError *local = NULL;
    ok = g_file_set_contents(a->out, text, -1, &local);
    if (!ok) {
      g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_IO, "%s", local->message);
      g_error_free(local);
    }
  }
  if (ok)
    print_summary(a->out, model, &result);
  st_import_result_clear(&result);
  return ok;
}

gboolean
st_cli_model_import(int argc, char **argv, GError **error)
{
  const StImporter *const *importers = st_importers();
  int n = 0;
  while (importers[n] != NULL)
    n++;
  g_assert(n <= (int)G_N_ELEMENTS(((Args *)NULL)->paths));

  Args a = {0};
  g_autofree GOptionEntry *entries = g_new0(GOptionEntry, n + 6);
  g_autoptr(GPtrArray) help = g_ptr_array_new_with_free_func(g_free);
  for (int i = 0; i < n; i++) {
    char *text = g_strdup_printf("import %s", importers[i]->summary);
    g_ptr_array_add(help, text);
    entries[i] = (GOptionEntry){importers[i]->name, 0, 0, G_OPTION_ARG_FILENAME, &a.paths[i],
                                text, importers[i]->arg};
  }
  entries[n] = (GOptionEntry){"out", 'o', 0, G_OPTION_ARG_FILENAME, &a.out,
                              "write the model file here (required)", "MODEL.json"};
  entries[n + 1] = (GOptionEntry){"name", 0, 0, G_OPTION_ARG_STRING, &a.name,
                                  "the model's name (default: from the file or its folder)",
                                  "NAME"};
  entries[n + 2] = (GOptionEntry){
    "seq-len", 0, 0, G_OPTION_ARG_INT64, &a.seq_len,
    "hf: tokens per sample (default: the config's context length)", "N"};
  entries[n + 3] = (GOptionEntry){
    "no-loss", 0, 0, G_OPTION_ARG_NONE, &a.no_loss,
    "onnx: do not append a softmax cross-entropy loss after the network's output", NULL};
  entries[n + 4] = (GOptionEntry){
    "dim", 0, 0, G_OPTION_ARG_STRING_ARRAY, &a.dims,
    "onnx: the size of a symbolic input dim other than the batch (repeatable)", "NAME=N"};

  g_set_prgname("stagger model import");
  g_autoptr(GOptionContext) context =
    g_option_context_new("--FORMAT FILE --out MODEL.json - import a model");
  g_option_context_set_summary(
    context, "Write a stagger model file from a model described elsewhere. Exactly one of\n"
             "the format options is given. The model is checked by loading it before it is\n"
             "written; where the import approximates, a warning says so on stderr.");
  g_option_context_set_description(
    context,
    "Hugging Face: every key of config.json that changes the computation is read;\n"
    "keys that cannot (metadata, tokenizer, generation) are ignored by a list; any\n"
    "other key, or an architecture stagger does not know, is an error naming it.\n"
    "ONNX: operators become stagger layers (residual blocks and transformer blocks\n"
    "recognized as such); where no layer type describes a part of the graph it\n"
    "becomes a custom layer with the numbers computed from the graph, and a\n"
    "warning. docs/MODELS.md has a worked example of each.\n"
    "\n"
    "Examples:\n"
    "  stagger model import --hf tests/data/hf/gpt2.json --out gpt2.json\n"
    "  stagger model import --onnx tests/data/onnx/resnet50.onnx --out resnet50.json\n");
  g_option_context_add_main_entries(context, entries, NULL);
  gboolean ok = g_option_context_parse(context, &argc, &argv, error);

  int chosen = -1, given = 0;
  for (int i = 0; ok && i < n; i++)
    if (a.paths[i] != NULL) {
      chosen = i;
      given++;
    }
  g_autoptr(GString) formats = g_string_new(NULL);
  for (int i = 0; i < n; i++)
    g_string_append_printf(formats, "%s--%s", i > 0 ? " or " : "", importers[i]->name);
  if (ok && argc > 1)
    ok = st_cli_usage_error(error, "unexpected argument '%s'", argv[1]);
  else if (ok && given != 1)
    ok = st_cli_usage_error(error, "give exactly one of %s", formats->str);
  else if (ok && a.out == NULL)
    ok = st_cli_usage_error(error, "--out MODEL.json is required");
  else if (ok && a.seq_len < 0)
    ok = st_cli_usage_error(error, "--seq-len: expected a positive count");
  if (ok)
    ok = import_one(importers[chosen], a.paths[chosen], &a, error);
  args_clear(&a);
  return ok;
}
