/* model_build.c: a model made in code, layer by layer (model_build.h), for
 * importers that would otherwise write a model's JSON only to read it back
 * (a foreign Chakra trace's model of one custom layer per distinct node).
 *
 * The checks are the loader's (model_load.c): a key must be an attr of the
 * type that a file may give, a value must lie in the attr's range (and,
 * as a JSON integer, within 2^53), required attrs must be there, names
 * unique, at most ST_MODEL_MAX_LAYERS layers; then the same derivation. So
 * the model is the one st_model_from_json gives for the equivalent file,
 * which tests/test_model_build.c checks.
 */
#include <string.h>

#include "base/error.h"
#include "model/layer_type.h"
#include "model/model_build.h"
#include "model/model_private.h"


StModel *
st_model_new(const char *name, const StShape *input, StDtype dtype)
{
  g_return_val_if_fail(name != NULL && input != NULL, NULL);
  g_return_val_if_fail(input->n_dims >= 1 && input->n_dims <= ST_SHAPE_MAX_DIMS, NULL);
  StModel *model = g_new0(StModel, 1);
  model->name = g_strdup(name);
  model->dtype = dtype;
  model->input = *input;
  return model;
}

/* Attr `spec`'s value: given (checked as the loader checks a file's
 * integer), or its default. */
static gboolean
attr_value(const StLayerType *type, const StAttrSpec *spec, const char *const *keys,
           const int64_t *values, int n, int64_t *out, GError **error)
{
  *out = spec->fallback;
  int k = 0;
  while (k < n && strcmp(keys[k], spec->key) != 0)
    k++;
  if (k == n || spec->derived)
    return spec->required && !spec->derived
             ? st_model_fail(error, "key '%s': missing (required by %s)", spec->key, type->name)
             : TRUE;
  /* The range a file's integer may take (a JSON integer is exact up to
   * 2^53). */
  const int64_t exact = INT64_C(1) << 53;
  int64_t lo, hi;
  st_attr_bounds(spec, &lo, &hi);
  lo = MAX(lo, -exact);
  hi = MIN(hi, exact);
  if (values[k] < lo || values[k] > hi)
    return st_model_fail(error, "key '%s': %" G_GINT64_FORMAT " is out of range [%" G_GINT64_FORMAT
                         ", %" G_GINT64_FORMAT "]", spec->key, values[k], lo, hi);
  *out = values[k];
  return TRUE;
}

gboolean
st_model_add_layer(StModel *model, const char *name, const char *type_name,
                   const char *const *keys, const int64_t *values, int n, GError **error)
{
  g_return_val_if_fail(model != NULL && name != NULL && type_name != NULL, FALSE);
  int index = model->n_layers;
  /* A layer of the type of one of the few before (an importer's model of
   * 10^6 custom layers, or of custom layers and ReLUs in turn) takes its
   * type and its attrs' interned, sorted keys from there: no registry
   * walk, no interning. */
  const StLayer *last = NULL;
  for (int back = 1; back <= 4 && back <= index && last == NULL; back++)
    if (strcmp(model->layers[index - back].type->name, type_name) == 0)
      last = &model->layers[index - back];
  const StLayerType *type = last != NULL ? last->type : st_layer_type_find(type_name);
  if (index >= ST_MODEL_MAX_LAYERS)
    return st_model_fail(error, "more than %d layers", ST_MODEL_MAX_LAYERS);
  if (type == NULL)
    return st_model_fail(error, "layer %d '%s': key 'type': unknown layer type '%s'", index, name,
                         type_name);
  int n_attrs = 0;
  for (const StAttrSpec *spec = type->attrs; spec->key != NULL; spec++)
    n_attrs++;
  for (int k = 0; k < n; k++) {
    const StAttrSpec *spec = type->attrs;
    while (spec->key != NULL && (spec->derived || strcmp(spec->key, keys[k]) != 0))
      spec++;
    if (spec->key == NULL)
      return st_model_fail(error, "layer %d '%s': unknown key '%s' (not an attr of %s)", index,
                           name, keys[k], type->name);
  }
  /* Values in the type's order (the loader's, so the first bad one is
   * the one it names), then the attrs sorted by key as it sorts them:
   * spec order[j] at j. */
  int64_t *value = g_newa(int64_t, MAX(n_attrs, 1));
  for (int i = 0; i < n_attrs; i++)
    if (!attr_value(type, &type->attrs[i], keys, values, n, &value[i], error)) {
      g_prefix_error(error, "layer %d '%s': ", index, name);
      return FALSE;
    }
  int *order = g_newa(int, MAX(n_attrs, 1));
  for (int i = 0; i < n_attrs; i++) {
    int j = i;
    for (; j > 0 && strcmp(type->attrs[order[j - 1]].key, type->attrs[i].key) > 0; j--)
      order[j] = order[j - 1];
    order[j] = i;
  }
  gboolean same = last != NULL && last->type == type && last->n_attrs == n_attrs;
  g_autofree StAttr *attrs = g_new0(StAttr, MAX(n_attrs, 1));
  for (int j = 0; j < n_attrs; j++) {
    attrs[j].key = same ? last->attrs[j].key : g_intern_static_string(type->attrs[order[j]].key);
    attrs[j].value = value[order[j]];
  }
  /* Grown by doubling: the array's capacity is the next power of two. */
  if ((index & (index - 1)) == 0)
    model->layers = g_renew(StLayer, model->layers, MAX(2 * index, 1));
  /* tp, sp and cp as the loader sets them for a model without
   * "tensor_parallel" or "context_parallel": one rank's whole layer. */
  model->layers[index] = (StLayer){.name = g_strdup(name), .type = type,
                                   .attrs = g_steal_pointer(&attrs), .n_attrs = n_attrs,
                                   .tp = 1, .sp = FALSE, .cp = 1};
  model->n_layers = index + 1;
  return TRUE;
}

gboolean
st_model_finish(StModel *model, GError **error)
{
  g_return_val_if_fail(model != NULL, FALSE);
  if (model->n_layers == 0)
    return st_model_fail(error, "key 'layers': is empty, a model needs at least one layer");
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  for (int i = 0; i < model->n_layers; i++) {
    const StLayer *layer = &model->layers[i];
    gpointer other;
    if (g_hash_table_lookup_extended(seen, layer->name, NULL, &other))
      return st_model_fail(error, "layer %d '%s': duplicate name (also layer %d)", i, layer->name,
                           GPOINTER_TO_INT(other));
    g_hash_table_insert(seen, layer->name, GINT_TO_POINTER(i));
  }
  return st_model_derive_all(model, error);
}
