/* import.c: the importer registry (one line per format), running an import
 * through the model loader, and writing the result as a model file. */
#include "import/import.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "base/util.h"
#include "import/import_private.h"

G_DEFINE_QUARK(st-import-error-quark, st_import_error)

static const StImporter *const IMPORTERS[] = {
  &st_importer_hf,
  &st_importer_onnx,
  NULL,
};

const StImporter *const *
st_importers(void)
{
  return IMPORTERS;
}

const StImporter *
st_importer_find(const char *name)
{
  g_return_val_if_fail(name != NULL, NULL);
  for (const StImporter *const *i = IMPORTERS; *i != NULL; i++)
    if (strcmp((*i)->name, name) == 0)
      return *i;
  return NULL;
}

void
st_import_result_init(StImportResult *result)
{
  g_return_if_fail(result != NULL);
  memset(result, 0, sizeof(*result));
  result->warnings = g_ptr_array_new_with_free_func(g_free);
}

void
st_import_result_clear(StImportResult *result)
{
  if (result == NULL)
    return;
  g_clear_pointer(&result->model, cJSON_Delete);
  g_clear_pointer(&result->warnings, g_ptr_array_unref);
}

void
st_import_warn(StImportResult *result, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_ptr_array_add(result->warnings, g_strdup_vprintf(format, args));
  va_end(args);
}

StModel *
st_import(const StImporter *importer, const char *path, const StImportOptions *options,
          StImportResult *result, GError **error)
{
  g_return_val_if_fail(importer != NULL && path != NULL && result != NULL, NULL);
  StImportOptions none = {0};
  if (!importer->run(path, options != NULL ? options : &none, result, error))
    return NULL;
  g_assert(result->model != NULL);
  /* Built directly from the tree when it is plain (import_build.c: the
   * model the loader would make, without reading the tree again); else,
   * and for the message when it would not load, by the loader, which
   * names `path`: a layer the importer got wrong is reported against the
   * file it came from. */
  StModel *model = st_import_build_model(result->model);
  if (model != NULL)
    return model;
  g_autoptr(GError) local = NULL;
  model = st_model_from_json(result->model, path, &local);
  if (model == NULL)
    g_set_error(error, ST_IMPORT_ERROR, ST_ERROR_FAILED,
                "the imported model does not load (an importer bug): %s", local->message);
  return model;
}

/* ---- writing ------------------------------------------------------------ */

/* A string as cJSON prints it: quoted, with '"', '\\' and bytes below 32
 * escaped. Written directly when there are none to escape (a printed
 * item was two allocations and a copy, for each of 10^7 values in an
 * ONNX graph of 10^6 nodes). */
static void
append_string(GString *out, const char *text)
{
  const unsigned char *c = (const unsigned char *)text;
  while (*c >= 32 && *c != '"' && *c != '\\')
    c++;
  if (*c != '\0') {
    cJSON string = {.type = cJSON_String, .valuestring = (char *)text};
    g_autofree char *printed = cJSON_PrintUnformatted(&string);
    g_string_append(out, printed);
    return;
  }
  g_string_append_c(out, '"');
  g_string_append_len(out, text, (gssize)((const char *)c - text));
  g_string_append_c(out, '"');
}

/* "key": with JSON escapes. */
static void
append_key(GString *out, const char *key)
{
  append_string(out, key);
  g_string_append(out, ": ");
}

/* A value that is not an object or array, as cJSON_PrintUnformatted
 * prints it: a whole number within int's range as its digits (what
 * "%1.15g" writes of it), strings and literals directly; any other number
 * (-0, which prints "-0", among them) through cJSON ("%1.15g" or "%1.17g",
 * whichever reads back). */
static void
append_scalar(GString *out, const cJSON *item)
{
  if (cJSON_IsString(item) && item->valuestring != NULL) {
    append_string(out, item->valuestring);
    return;
  }
  if (cJSON_IsNumber(item) && item->valuedouble >= (double)G_MININT &&
      item->valuedouble <= (double)G_MAXINT && item->valuedouble == (double)item->valueint &&
      !signbit(item->valuedouble)) {
    st_string_append_int(out, item->valueint);
    return;
  }
  if (cJSON_IsBool(item)) {
    g_string_append(out, cJSON_IsTrue(item) ? "true" : "false");
    return;
  }
  if (cJSON_IsNull(item)) {
    g_string_append(out, "null");
    return;
  }
  g_autofree char *text = cJSON_PrintUnformatted(item);
  g_string_append(out, text);
}

/* `item` on one line, with a space after each colon and comma. */
static void
append_inline(GString *out, const cJSON *item)
{
  if (cJSON_IsObject(item) || cJSON_IsArray(item)) {
    gboolean object = cJSON_IsObject(item);
    g_string_append_c(out, object ? '{' : '[');
    const cJSON *child;
    gboolean first = TRUE;
    cJSON_ArrayForEach(child, item)
    {
      if (!first)
        g_string_append(out, ", ");
      first = FALSE;
      if (object)
        append_key(out, child->string);
      append_inline(out, child);
    }
    g_string_append_c(out, object ? '}' : ']');
    return;
  }
  append_scalar(out, item);
}

/* The layers, one per line; a repeat entry's body indented under it. */
static void
append_layers(GString *out, const cJSON *layers, const char *indent)
{
  const cJSON *layer;
  cJSON_ArrayForEach(layer, layers)
  {
    const cJSON *body = cJSON_GetObjectItemCaseSensitive(layer, "layers");
    g_string_append(out, indent);
    if (cJSON_IsArray(body)) {
      g_string_append_c(out, '{');
      const cJSON *key;
      cJSON_ArrayForEach(key, layer)
      {
        if (key == body)
          continue;
        append_key(out, key->string);
        append_inline(out, key);
        g_string_append(out, ", ");
      }
      g_string_append(out, "\"layers\": [\n");
      g_autofree char *deeper = g_strconcat(indent, "  ", NULL);
      append_layers(out, body, deeper);
      g_string_append(out, "]}");
    } else {
      append_inline(out, layer);
    }
    g_string_append(out, layer->next != NULL ? ",\n" : "\n");
  }
  if (out->len >= 2 && out->str[out->len - 1] == '\n')
    g_string_truncate(out, out->len - 1);
}

char *
st_import_format(const StImportResult *result)
{
  g_return_val_if_fail(result != NULL && result->model != NULL, NULL);
  GString *out = g_string_new("{\n");
  const cJSON *item;
  cJSON_ArrayForEach(item, result->model)
  {
    g_string_append(out, "  ");
    append_key(out, item->string);
    if (strcmp(item->string, "layers") == 0 && cJSON_IsArray(item)) {
      g_string_append(out, "[\n");
      append_layers(out, item, "    ");
      g_string_append(out, "\n  ]");
    } else {
      append_inline(out, item);
    }
    g_string_append(out, item->next != NULL ? ",\n" : "\n");
  }
  g_string_append(out, "}\n");
  return g_string_free(out, FALSE);
}
