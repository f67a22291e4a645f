/* model_inputs.c: layers that read other than their predecessor (see
 * model_inputs.h): reading, shapes, copies and the JSON writer. */
#include "model/model_inputs.h"

#include <string.h>

#include "base/error.h"
#include "base/json.h"

static gboolean
inputs_fail(GError **error, const char *message)
{
  g_set_error(error, ST_MODEL_ERROR, ST_ERROR_INVALID, "key 'inputs': %s", message);
  return FALSE;
}

gboolean
st_model_inputs_read(StLayer *layer, const cJSON *obj, GHashTable *seen, GError **error)
{
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(obj, "inputs");
  if (list == NULL)
    return TRUE;
  int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
  if (n < 1 || n > ST_LAYER_MAX_INPUTS)
    return inputs_fail(error, "expected a list of 1 to 8 earlier layers' names");
  layer->inputs = g_new(int32_t, n);
  layer->n_inputs = n;
  for (int k = 0; k < n; k++) {
    const cJSON *item = cJSON_GetArrayItem(list, k);
    gpointer index;
    if (!cJSON_IsString(item))
      return inputs_fail(error, "expected names (strings)");
    if (!g_hash_table_lookup_extended(seen, item->valuestring, NULL, &index)) {
      g_autofree char *m =
        g_strdup_printf("'%s' is not a layer before this one", item->valuestring);
      return inputs_fail(error, m);
    }
    layer->inputs[k] = GPOINTER_TO_INT(index);
  }
  return TRUE;
}

int
st_model_layer_inputs(const StModel *m, int i, int32_t out[ST_LAYER_MAX_INPUTS])
{
  g_return_val_if_fail(m != NULL && i >= 0 && i < m->n_layers, 0);
  const StLayer *layer = &m->layers[i];
  if (layer->n_inputs > 0) {
    memcpy(out, layer->inputs, sizeof(int32_t) * (size_t)layer->n_inputs);
    return layer->n_inputs;
  }
  if (i == 0)
    return 0;
  out[0] = i - 1;
  return 1;
}

gboolean
st_model_has_branches(const StModel *m)
{
  g_return_val_if_fail(m != NULL, FALSE);
  for (int i = 0; i < m->n_layers; i++) {
    const StLayer *l = &m->layers[i];
    if (l->n_inputs > 1 || (l->n_inputs == 1 && l->inputs[0] != i - 1))
      return TRUE;
  }
  return FALSE;
}

gboolean
st_model_inputs_shape(const StModel *m, int i, StShape *out, GError **error)
{
  const StLayer *layer = &m->layers[i];
  if (layer->n_inputs == 0) {
    *out = i > 0 ? m->layers[i - 1].out_shape : m->input;
    return TRUE;
  }
  *out = m->layers[layer->inputs[0]].out_shape;
  for (int k = 1; k < layer->n_inputs; k++) {
    const StLayer *other = &m->layers[layer->inputs[k]];
    const StShape *s = &other->out_shape;
    gboolean same = s->n_dims == out->n_dims;
    for (int d = 1; same && d < s->n_dims; d++)
      same = s->dims[d] == out->dims[d];
    if (!same) {
      g_autofree char *a = st_shape_format(out);
      g_autofree char *b = st_shape_format(s);
      g_autofree char *m2 = g_strdup_printf("'%s' gives %s, which does not concatenate with %s "
                                            "on the first axis", other->name, b, a);
      return inputs_fail(error, m2);
    }
    out->dims[0] += s->dims[0];
  }
  return TRUE;
}

void
st_model_inputs_copy(StLayer *dst, const StLayer *src)
{
  dst->inputs = src->n_inputs > 0 ? g_memdup2(src->inputs, sizeof(int32_t) * (size_t)src->n_inputs)
                                  : NULL;
}

void
st_model_inputs_to_json(const StModel *m, const StLayer *layer, cJSON *obj)
{
  if (layer->n_inputs == 0)
    return;
  cJSON *list = cJSON_AddArrayToObject(obj, "inputs");
  for (int k = 0; k < layer->n_inputs; k++)
    cJSON_AddItemToArray(list, cJSON_CreateString(m->layers[layer->inputs[k]].name));
}
