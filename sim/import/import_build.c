/* import_build.c: an importer's model tree made into the model without the
 * model loader's second reading of it (import_private.h).
 *
 * st_import() used to give the tree an importer built to
 * st_model_from_json: expanding it into entries, looking each layer's
 * type up by name, each attr by key, a hash of names, then deriving. For
 * an ONNX graph of 10^6 nodes that was a quarter of the import. A tree of
 * the plain shape importers write ({"name", "note", "input", "dtype",
 * "layers"}, layers of a name, a type and integer, flag or choice attrs;
 * no `repeat`, `inputs`, parallelism) is given to the model builder
 * (model/model_build.h) instead, whose checks and derivation are the
 * loader's: the same model. Anything else, and any tree the builder
 * refuses, is left to the loader (NULL here), so that what is accepted and
 * every message stay the loader's.
 */
#include <math.h>
#include <string.h>

#include "import/import_private.h"
#include "model/layer_type.h"
#include "model/model_build.h"

/* The loader's bounds (model_load.c): a JSON number is exact up to 2^53,
 * an input at most 2^40 elements per sample. */
#define EXACT (INT64_C(1) << 53)
#define MAX_INPUT_ELEMS 0x1p40

/* A number the loader reads as this integer. */
static gboolean
whole(const cJSON *item, int64_t *out)
{
  if (!cJSON_IsNumber(item))
    return FALSE;
  double v = item->valuedouble;
  if (!isfinite(v) || v != floor(v) || v < (double)-EXACT || v > (double)EXACT)
    return FALSE;
  *out = (int64_t)v;
  return TRUE;
}

/* The input shape, as the loader reads it; FALSE when it would refuse. */
static gboolean
read_input(const cJSON *array, StShape *shape)
{
  int n = cJSON_GetArraySize(array);
  if (!cJSON_IsArray(array) || n < 1 || n > ST_SHAPE_MAX_DIMS)
    return FALSE;
  double elems = 1;
  shape->n_dims = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, array)
  {
    int64_t d;
    if (!whole(item, &d) || d < 1 || d > ST_ATTR_MAX)
      return FALSE;
    shape->dims[shape->n_dims++] = d;
    elems *= (double)d;
  }
  return elems <= MAX_INPUT_ELEMS;
}

/* The spec of `type` a file may give as `key`, or NULL. */
static const StAttrSpec *
given_spec(const StLayerType *type, const char *key)
{
  for (const StAttrSpec *spec = type->attrs; spec->key != NULL; spec++)
    if (!spec->derived && strcmp(spec->key, key) == 0)
      return spec;
  return NULL;
}

/* An attr's value as the loader reads it: a choice's name as its index, a
 * flag's true/false as 1/0, else a whole number (its range is the
 * builder's to check); FALSE for anything the loader would refuse. */
static gboolean
attr_value(const StAttrSpec *spec, const cJSON *item, int64_t *value)
{
  if (spec->choices != NULL) {
    if (!cJSON_IsString(item))
      return FALSE;
    for (int64_t k = 0; spec->choices[k] != NULL; k++)
      if (strcmp(spec->choices[k], item->valuestring) == 0) {
        *value = k;
        return TRUE;
      }
    return FALSE;
  }
  if (spec->flag && cJSON_IsBool(item)) {
    *value = cJSON_IsTrue(item) ? 1 : 0;
    return TRUE;
  }
  return whole(item, value);
}

/* The types met last, most recent first: a long model repeats a few. */
#define RECENT 4

static const StLayerType *
find_type(const char *name, const StLayerType *recent[RECENT])
{
  int k = 0;
  while (k < RECENT && recent[k] != NULL && strcmp(recent[k]->name, name) != 0)
    k++;
  const StLayerType *type = k < RECENT && recent[k] != NULL ? recent[k]
                                                            : st_layer_type_find(name);
  if (type == NULL)
    return NULL;
  memmove(recent + 1, recent, sizeof(*recent) * (size_t)MIN(k, RECENT - 1));
  recent[0] = type;
  return type;
}

/* Appends one layer object; FALSE when it is not of the plain shape or
 * the builder refuses it. */
static gboolean
add_layer(StModel *model, const cJSON *obj, const StLayerType *recent[RECENT])
{
  if (!cJSON_IsObject(obj))
    return FALSE;
  const char *name = NULL, *type_name = NULL;
  int n = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, obj)
  {
    gboolean is_name = strcmp(item->string, "name") == 0;
    if (is_name || strcmp(item->string, "type") == 0) {
      const char **which = is_name ? &name : &type_name;
      if (*which != NULL || !cJSON_IsString(item))
        return FALSE; /* twice: the loader reads the first */
      *which = item->valuestring;
    } else {
      n++;
    }
  }
  if (name == NULL || type_name == NULL)
    return FALSE;
  const StLayerType *type = find_type(type_name, recent);
  if (type == NULL)
    return FALSE;
  const char **keys = g_newa(const char *, MAX(n, 1));
  int64_t *values = g_newa(int64_t, MAX(n, 1));
  int k = 0;
  cJSON_ArrayForEach(item, obj)
  {
    if (strcmp(item->string, "name") == 0 || strcmp(item->string, "type") == 0)
      continue;
    const StAttrSpec *spec = given_spec(type, item->string);
    if (spec == NULL || !attr_value(spec, item, &values[k]))
      return FALSE; /* "derived", "inputs", an unknown key, a value refused */
    for (int j = 0; j < k; j++)
      if (strcmp(keys[j], item->string) == 0)
        return FALSE; /* a key twice: the loader reads the first */
    keys[k++] = item->string;
  }
  return st_model_add_layer(model, name, type->name, keys, values, k, NULL);
}

StModel *
st_import_build_model(const cJSON *root)
{
  g_return_val_if_fail(root != NULL, NULL);
  if (!cJSON_IsObject(root))
    return NULL;
  static const char *const KEYS[] = {"name", "note", "input", "dtype", "layers", NULL};
  const cJSON *found[G_N_ELEMENTS(KEYS) - 1] = {NULL};
  const cJSON *item;
  cJSON_ArrayForEach(item, root)
  {
    guint k = 0;
    while (KEYS[k] != NULL && strcmp(KEYS[k], item->string) != 0)
      k++;
    if (KEYS[k] == NULL || found[k] != NULL)
      return NULL;
    found[k] = item;
  }
  const cJSON *name = found[0], *note = found[1], *input = found[2], *dtype = found[3],
              *layers = found[4];
  StDtype type = ST_DTYPE_FP32;
  StShape shape;
  if (!cJSON_IsString(name) || (note != NULL && !cJSON_IsString(note)) ||
      (dtype != NULL && (!cJSON_IsString(dtype) ||
                         !st_dtype_parse(dtype->valuestring, &type, NULL))) ||
      !read_input(input, &shape) || !cJSON_IsArray(layers) || layers->child == NULL)
    return NULL;
  g_autoptr(StModel) model = st_model_new(name->valuestring, &shape, type);
  const StLayerType *recent[RECENT] = {NULL};
  cJSON_ArrayForEach(item, layers)
    if (!add_layer(model, item, recent))
      return NULL;
  return st_model_finish(model, NULL) ? g_steal_pointer(&model) : NULL;
}
