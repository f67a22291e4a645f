/* profile_import_deeppool.c: see profile_import_deeppool.h. */
#include "profile/profile_import_deeppool.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <string.h>

#include "base/error.h"
#include "model/layer_type.h"

void
st_deeppool_import_clear(StDeepPoolImport *stats)
{
  if (stats->missing != NULL)
    g_ptr_array_unref(stats->missing);
  *stats = (StDeepPoolImport){0};
}

/* One parsed row. */
typedef struct {
  char type[64];
  cJSON *params;      /* owned */
  int64_t batch;
  StShape shape;      /* per sample */
  double avg_ms;
} Row;

static gboolean G_GNUC_PRINTF(4, 5)
bad_row(GError **error, const char *path, int line, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *why = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_PARSE, "%s: line %d: %s", path, line, why);
  return FALSE;
}

/* "[3,224,224]" or "4096" at *p; advances p. */
static gboolean
parse_shape(const char **p, StShape *shape)
{
  *shape = (StShape){0};
  const char *s = *p;
  gboolean bracket = *s == '[';
  if (bracket)
    s++;
  while (g_ascii_isdigit(*s)) {
    if (shape->n_dims == ST_SHAPE_MAX_DIMS)
      return FALSE;
    char *end;
    shape->dims[shape->n_dims++] = g_ascii_strtoll(s, &end, 10);
    s = end;
    if (!bracket || *s != ',')
      break;
    s++;
  }
  if (bracket && *s++ != ']')
    return FALSE;
  *p = s;
  return shape->n_dims > 0;
}

/* Parses one line; FALSE with `error` unset for lines to skip. */
static gboolean
parse_row(const char *text, const char *path, int line, Row *row, GError **error)
{
  const char *s = text;
  while (g_ascii_isspace(*s))
    s++;
  if (*s == '\0' || *s == '#' || g_str_has_prefix(s, "SUM("))
    return FALSE;
  const char *brace = strchr(s, '{');
  if (brace == NULL || brace - s >= (ptrdiff_t)sizeof row->type)
    return bad_row(error, path, line, "expected TYPE{...}[BATCH]SHAPE TIME_MS");
  memcpy(row->type, s, brace - s);
  row->type[brace - s] = '\0';
  int depth = 0;
  const char *close = brace;
  for (; *close != '\0'; close++) {
    depth += *close == '{' ? 1 : *close == '}' ? -1 : 0;
    if (depth == 0)
      break;
  }
  if (*close != '}')
    return bad_row(error, path, line, "unbalanced braces after '%s'", row->type);
  g_autofree char *json = g_strndup(brace, close - brace + 1);
  row->params = cJSON_Parse(json);
  if (row->params == NULL)
    return bad_row(error, path, line, "'%s' is not JSON", json);
  s = close + 1;
  char *end = NULL;
  if (*s != '[' || (row->batch = g_ascii_strtoll(s + 1, &end, 10)) < 1 || *end != ']')
    return bad_row(error, path, line, "expected [BATCH] after the parameters");
  s = end + 1;
  if (!parse_shape(&s, &row->shape))
    return bad_row(error, path, line, "expected the input shape after [%" G_GINT64_FORMAT "]",
                   row->batch);
  row->avg_ms = g_ascii_strtod(s, &end);
  if (end == s || row->avg_ms < 0)
    return bad_row(error, path, line, "expected the average time in ms");
  return TRUE;
}

static int64_t
param(const Row *row, const char *key, int64_t fallback)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(row->params, key);
  if (cJSON_IsNumber(v))
    return (int64_t)v->valuedouble;
  if (cJSON_IsBool(v))
    return cJSON_IsTrue(v);
  return fallback;
}

/* A kernel_size or padding that PyTorch takes as one number or a pair
 * [height, width]: element `hw` (0: height, 1: width). */
static int64_t
param_hw(const Row *row, const char *key, int hw, int64_t fallback)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(row->params, key);
  if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2 && cJSON_IsNumber(cJSON_GetArrayItem(v, hw)))
    return (int64_t)cJSON_GetArrayItem(v, hw)->valuedouble;
  return param(row, key, fallback);
}

/* Whether a DeepPool row describes `layer` (the mapping in the header). */
static gboolean
row_matches(const Row *row, const StLayer *l)
{
  const char *t = l->type->name;
  if (!st_shape_equal(&row->shape, &l->in_shape))
    return FALSE;
#define ATTR(k, d) st_layer_attr(l, k, d)
  if (strcmp(row->type, "conv2d") == 0 && strcmp(t, "conv2d_rect") == 0)
    return ATTR("out_channels", 0) == param(row, "out_channels", -1) &&
           ATTR("kernel_h", 0) == param_hw(row, "kernel_size", 0, -1) &&
           ATTR("kernel_w", 0) == param_hw(row, "kernel_size", 1, -1) &&
           ATTR("padding_h", 0) == param_hw(row, "padding", 0, 0) &&
           ATTR("padding_w", 0) == param_hw(row, "padding", 1, 0) &&
           ATTR("stride", 1) == param(row, "stride", 1);
  if (strcmp(row->type, "conv2d") == 0)
    return strcmp(t, "conv2d") == 0 && ATTR("out_channels", 0) == param(row, "out_channels", -1) &&
           ATTR("kernel", 0) == param(row, "kernel_size", -1) &&
           ATTR("stride", 1) == param(row, "stride", 1) &&
           ATTR("padding", 0) == param(row, "padding", 0) && ATTR("groups", 1) == 1;
  if (strcmp(row->type, "avgPool2d") == 0)
    return strcmp(t, "avgpool2d") == 0 && ATTR("kernel", 0) == param(row, "kernel_size", -1) &&
           ATTR("stride", 0) == param(row, "stride", param(row, "kernel_size", -1)) &&
           ATTR("padding", 0) == param(row, "padding", 0);
  if (strcmp(row->type, "concat") == 0)
    return strcmp(t, "concat") == 0;
  if (strcmp(row->type, "maxPool2d") == 0)
    return strcmp(t, "maxpool2d") == 0 && ATTR("kernel", 0) == param(row, "kernel_size", -1) &&
           ATTR("stride", 0) == param(row, "stride", param(row, "kernel_size", -1)) &&
           ATTR("padding", 0) == param(row, "padding", 0);
  if (strcmp(row->type, "adAvgPool2d") == 0)
    return strcmp(t, "adaptive_avgpool2d") == 0 &&
           ATTR("output_size", 0) == param(row, "output_height", -1) &&
           ATTR("output_size", 0) == param(row, "output_width", -1);
  if (strcmp(row->type, "flatten") == 0)
    return strcmp(t, "flatten") == 0;
  if (strcmp(row->type, "linear") == 0)
    return strcmp(t, "linear") == 0 && ATTR("out_features", 0) == param(row, "out_features", -1);
  if (strcmp(row->type, "ReLU2d") == 0)
    return strcmp(t, "relu") == 0;
  if (strcmp(row->type, "ResnetBottleneck") == 0)
    return strcmp(t, "bottleneck") == 0 && ATTR("planes", 0) == param(row, "planes", -1) &&
           ATTR("stride", 1) == param(row, "stride", 1) &&
           ATTR("width_per_group", 64) == param(row, "base_width", 64) &&
           ATTR("groups", 1) == param(row, "groups", 1);
#undef ATTR
  return FALSE;
}

typedef struct {
  double sum_ms;
  int n;
} Mean;

StProfile *
st_profile_import_deeppool(const char *path, const StModel *model, const char *device,
                           StDeepPoolImport *stats, GError **error)
{
  g_return_val_if_fail(path != NULL && model != NULL && device != NULL, NULL);
  g_autofree char *text = NULL;
  g_autoptr(GError) local = NULL;
  if (!g_file_get_contents(path, &text, NULL, &local)) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_IO, "%s: %s", path, local->message);
    return NULL;
  }
  /* (signature, batch) -> mean of the rows, in the order first seen. */
  g_autoptr(GHashTable) means = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr(GPtrArray) order = g_ptr_array_new();
  g_autoptr(GHashTable) batches = g_hash_table_new(g_direct_hash, g_direct_equal);
  g_autofree gboolean *matched = g_new0(gboolean, model->n_layers);
  /* The model's layers by input shape, in order: a row is compared with
   * those of its shape only (with every layer, rows x layers was quadratic
   * in the model). */
  g_autoptr(GHashTable) by_shape =
    g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
  for (int i = 0; i < model->n_layers; i++) {
    char *key = st_shape_format(&model->layers[i].in_shape);
    GArray *same = g_hash_table_lookup(by_shape, key);
    if (same == NULL) {
      same = g_array_new(FALSE, FALSE, sizeof(int));
      g_hash_table_insert(by_shape, key, same);
    } else {
      g_free(key);
    }
    g_array_append_val(same, i);
  }
  int rows = 0;
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (int ln = 0; lines[ln] != NULL; ln++) {
    Row row = {0};
    GError *row_error = NULL;
    gboolean ok = parse_row(lines[ln], path, ln + 1, &row, &row_error);
    if (!ok) {
      cJSON_Delete(row.params);
      if (row_error != NULL) {
        g_propagate_error(error, row_error);
        return NULL;
      }
      continue;
    }
    rows++;
    g_hash_table_add(batches, GINT_TO_POINTER((int)row.batch));
    gboolean any = FALSE;
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    g_autofree char *shape = st_shape_format(&row.shape);
    const GArray *same = g_hash_table_lookup(by_shape, shape);
    for (guint k = 0; same != NULL && k < same->len; k++) {
      int i = g_array_index(same, int, k);
      const StLayer *l = &model->layers[i];
      if (!row_matches(&row, l))
        continue;
      any = matched[i] = TRUE;
      if (g_hash_table_contains(seen, l->signature))
        continue; /* one sample per row and signature */
      g_hash_table_add(seen, l->signature);
      char *key = g_strdup_printf("%s\x1f%" G_GINT64_FORMAT, l->signature, row.batch);
      Mean *m = g_hash_table_lookup(means, key);
      if (m == NULL) {
        m = g_new0(Mean, 1);
        g_hash_table_insert(means, key, m);
        g_ptr_array_add(order, key);
      } else {
        g_free(key);
      }
      m->sum_ms += row.avg_ms;
      m->n++;
    }
    cJSON_Delete(row.params);
    if (!any) {
      bad_row(error, path, ln + 1, "no layer of %s is a %s on %s (see the mapping in "
              "profile_import_deeppool.h)", model->name, row.type, shape);
      return NULL;
    }
  }
  if (rows == 0) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_PARSE, "%s: no profile rows", path);
    return NULL;
  }
  StProfile *p = st_profile_new();
  g_autofree char *base = g_path_get_basename(path);
  g_autofree char *source = g_strdup_printf(
    "imported from DeepPool's A100 profile %s (DeepPoolML/DeepPool): fwd+bwd averages over "
    "CUDA-graph replays, mapped to %s by layer signature", base, model->name);
  st_profile_set_device(p, device, "unknown", "unknown", "2022", source);
  for (guint i = 0; i < order->len; i++) {
    const char *key = g_ptr_array_index(order, i);
    const Mean *m = g_hash_table_lookup(means, key);
    const char *sep = strchr(key, '\x1f');
    g_autofree char *signature = g_strndup(key, sep - key);
    int64_t batch = g_ascii_strtoll(sep + 1, NULL, 10);
    st_profile_add_layer(p, device, NULL, signature, ST_PASS_FWDBWD, batch,
                         m->sum_ms / m->n * 1e6, 0);
  }
  if (stats != NULL) {
    st_deeppool_import_clear(stats);
    stats->rows = rows;
    stats->entries = (int)order->len;
    stats->batches = (int)g_hash_table_size(batches);
    stats->missing = g_ptr_array_new_with_free_func(g_free);
    for (int i = 0; i < model->n_layers; i++)
      if (!matched[i])
        g_ptr_array_add(stats->missing, g_strdup(model->layers[i].name));
  }
  return p;
}
