/* model_load.c: reading a model file into an StModel.
 *
 * Three steps: expand the `repeat` entries into a flat list of layer
 * objects with their names; read each layer's attrs strictly against its
 * type and derive it from the previous layer's output shape; then count
 * tensors shared by neighbours once and sum the totals. Every error is
 * prefixed with the origin and, inside a layer, "layer N 'name': ".
 */
#include <stdarg.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "model/layer_type.h"
#include "model/layer_types_private.h"
#include "model/model_inputs.h"
#include "model/model_private.h"
#include "model/model.h"

/* Repeat counts and dims beyond these are typos, not models (layer_type.h). */
#define MAX_REPEAT 100000
#define MAX_LAYERS ST_MODEL_MAX_LAYERS
#define MAX_DIM ST_ATTR_MAX

/* One layer object after expansion. */
typedef struct {
  const cJSON *obj; /* borrowed from the tree */
  char *name;       /* "{i}" substituted; NULL when the object has no string name */
} Entry;

static void
entry_clear(gpointer data)
{
  g_free(((Entry *)data)->name);
}

gboolean
st_model_fail(GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error_literal(error, ST_MODEL_ERROR, ST_ERROR_INVALID, message);
  return FALSE;
}


void
st_attr_bounds(const StAttrSpec *spec, int64_t *lo, int64_t *hi)
{
  int64_t choices = 0;
  while (spec->choices != NULL && spec->choices[choices] != NULL)
    choices++;
  *lo = spec->choices != NULL || spec->flag ? 0 : spec->min;
  *hi = spec->choices != NULL ? choices - 1
        : spec->flag         ? 1
        : spec->max > 0      ? spec->max
                             : ST_ATTR_MAX;
}

/* The object's name with "{i}" (and "{j}", inside a nested repeat)
 * replaced by the repeat indices; NULL when the name is not a string. */
static char *
entry_name(const cJSON *obj, const char *i_text, const char *j_text)
{
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(obj, "name");
  if (!cJSON_IsString(name))
    return NULL;
  char *text = g_strdup(name->valuestring);
  const char *keys[2] = {"{i}", "{j}"}, *values[2] = {i_text, j_text};
  for (int k = 0; k < 2; k++) {
    if (values[k] == NULL)
      continue;
    g_auto(GStrv) parts = g_strsplit(text, keys[k], -1);
    g_free(text);
    text = g_strjoinv(values[k], parts);
  }
  return text;
}

/* {"repeat": N, "from": k, "layers": [...]}: the body N times, "{i}" in its
 * names replaced by k, k+1, ... A body may hold repeats of its own, one
 * level deep, whose index is "{j}" (an MoE layer's experts). */
static gboolean
expand_repeat(const cJSON *item, GArray *entries, const char *outer, GError **error)
{
  static const char *const KEYS[] = {"repeat", "from", "layers", NULL};
  int64_t count = 0, from = 0;
  const cJSON *body = NULL;
  if (!st_json_check_keys(item, KEYS, error) ||
      !st_json_get_int(item, "repeat", TRUE, 1, MAX_REPEAT, &count, error) ||
      !st_json_get_int(item, "from", FALSE, 0, MAX_REPEAT, &from, error) ||
      !st_json_get_array(item, "layers", TRUE, &body, error))
    return FALSE;
  if (cJSON_GetArraySize(body) == 0)
    return st_model_fail(error, "key 'layers': is empty");
  const cJSON *layer;
  cJSON_ArrayForEach(layer, body)
  {
    if (!cJSON_IsObject(layer))
      return st_model_fail(error, "key 'layers': expected objects");
    if (cJSON_HasObjectItem(layer, "repeat") && outer != NULL)
      return st_model_fail(error,
                           "key 'repeat': repeat entries can be nested one level deep at most");
  }
  for (int64_t r = 0; r < count; r++) {
    g_autofree char *index = g_strdup_printf("%" G_GINT64_FORMAT, from + r);
    int k = 0;
    cJSON_ArrayForEach(layer, body)
    {
      if (cJSON_HasObjectItem(layer, "repeat")) {
        if (!expand_repeat(layer, entries, index, error)) {
          g_prefix_error(error, "layers[%d] (repeat): ", k);
          return FALSE;
        }
      } else {
        Entry e = {layer, outer != NULL ? entry_name(layer, outer, index)
                                        : entry_name(layer, index, NULL)};
        g_array_append_val(entries, e);
      }
      k++;
    }
    if (entries->len > MAX_LAYERS)
      return st_model_fail(error, "more than %d layers after expanding repeats", MAX_LAYERS);
  }
  return TRUE;
}

static gboolean
expand(const cJSON *layers, GArray *entries, GError **error)
{
  int index = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, layers)
  {
    if (!cJSON_IsObject(item))
      return st_model_fail(error, "layers[%d]: expected an object", index);
    if (cJSON_HasObjectItem(item, "repeat")) {
      if (!expand_repeat(item, entries, NULL, error)) {
        g_prefix_error(error, "layers[%d] (repeat): ", index);
        return FALSE;
      }
    } else {
      Entry e = {item, entry_name(item, NULL, NULL)};
      g_array_append_val(entries, e);
    }
    index++;
  }
  return TRUE;
}

static int
compare_attrs(const void *a, const void *b)
{
  return strcmp(((const StAttr *)a)->key, ((const StAttr *)b)->key);
}

/* A choice attr: one of the names, stored as its index. */
static gboolean
read_choice(const StAttrSpec *spec, const cJSON *item, int64_t *value, GError **error)
{
  if (cJSON_IsString(item))
    for (int64_t k = 0; spec->choices[k] != NULL; k++)
      if (strcmp(spec->choices[k], item->valuestring) == 0) {
        *value = k;
        return TRUE;
      }
  g_autofree char *names = g_strjoinv(", ", (char **)spec->choices);
  return st_model_fail(error, "key '%s': expected one of %s", spec->key, names);
}

/* Reads the type's attrs from `obj` (given or default), sorted by key. */
static gboolean
read_attrs(StLayer *layer, const cJSON *obj, GError **error)
{
  const StLayerType *type = layer->type;
  int n = 0;
  for (const StAttrSpec *spec = type->attrs; spec->key != NULL; spec++)
    n++;
  /* Every key must be one of these or an attr a file may give; the list
   * is made only to name them when one is not (a model of 10^6 layers, or
   * an ONNX import's proposals, made it for every layer). */
  static const char *const common[] = {"name", "type", "derived", "inputs", NULL};
  const cJSON *key;
  cJSON_ArrayForEach(key, obj)
  {
    gboolean known = g_strv_contains(common, key->string);
    for (const StAttrSpec *spec = type->attrs; !known && spec->key != NULL; spec++)
      known = !spec->derived && strcmp(spec->key, key->string) == 0;
    if (known)
      continue;
    g_autoptr(GPtrArray) allowed = g_ptr_array_new();
    for (const char *const *c = common; *c != NULL; c++)
      g_ptr_array_add(allowed, (gpointer)*c);
    for (const StAttrSpec *spec = type->attrs; spec->key != NULL; spec++)
      if (!spec->derived)
        g_ptr_array_add(allowed, (gpointer)spec->key);
    g_ptr_array_add(allowed, NULL);
    return st_json_check_keys(obj, (const char *const *)allowed->pdata, error);
  }

  layer->attrs = g_new0(StAttr, MAX(n, 1));
  layer->n_attrs = n;
  for (int i = 0; i < n; i++) {
    const StAttrSpec *spec = &type->attrs[i];
    StAttr *attr = &layer->attrs[i];
    attr->key = g_intern_static_string(spec->key);
    attr->value = spec->fallback;
    const cJSON *item =
      spec->derived ? NULL : cJSON_GetObjectItemCaseSensitive(obj, spec->key);
    if (item == NULL && spec->required)
      return st_model_fail(error, "key '%s': missing (required by %s)", spec->key, type->name);
    if (item == NULL)
      continue;
    if (spec->choices != NULL) {
      if (!read_choice(spec, item, &attr->value, error))
        return FALSE;
    } else if (spec->flag && cJSON_IsBool(item))
      attr->value = cJSON_IsTrue(item) ? 1 : 0;
    else {
      int64_t lo, hi;
      st_attr_bounds(spec, &lo, &hi);
      if (!st_json_item_int(item, spec->key, lo, hi, &attr->value, error))
        return FALSE;
    }
  }
  qsort(layer->attrs, (size_t)n, sizeof(StAttr), compare_attrs);
  return TRUE;
}

/* The elements of a shape, in double so that no product overflows. */
static double
elems_double(const StShape *shape)
{
  double n = 1;
  for (int i = 0; i < shape->n_dims; i++)
    n *= (double)shape->dims[i];
  return n;
}

/* What derive() produced is a tensor and non-negative counts within the
 * bounds of layer_types_private.h, so that sums stay inside int64. */
static gboolean
check_derived(const StLayer *layer, GError **error)
{
  const StShape *out = &layer->out_shape;
  gboolean ok = out->n_dims >= 1 && out->n_dims <= ST_SHAPE_MAX_DIMS;
  for (int i = 0; ok && i < out->n_dims; i++)
    ok = out->dims[i] >= 1;
  ok = ok && layer->params >= 0 && layer->act_bytes >= 0 && layer->out_bytes > 0 &&
       layer->fwd_flops >= 0 && layer->bwd_flops >= 0;
  g_return_val_if_fail(ok, st_model_fail(error, "derives an impossible output or negative counts"));
  return st_layer_check_size(elems_double(out), ST_MAX_ELEMS, "the output elements", error) &&
         st_layer_check_size((double)layer->params, ST_MAX_COUNT, "the parameters", error) &&
         st_layer_check_size((double)layer->act_bytes, 8 * ST_MAX_COUNT, "the kept bytes",
                             error);
}

/* Derives `layer` (type and attrs read, tp and sp set) on input `in`
 * after `prev` (NULL for the first layer). */
static gboolean
derive_layer(StLayer *layer, const StLayer *prev, const StShape *in, int dtype_bytes,
             GError **error)
{
  if (layer->type->link != NULL) {
    if (!layer->type->link(layer, prev, error))
      return FALSE;
  } else if (prev != NULL && prev->chain_open) {
    return st_model_fail(error,
                         "key 'type': a %s cannot follow '%s' (%s), whose chain is still open: "
                         "the layers that continue it come first",
                         layer->type->name, prev->name, prev->type->name);
  }
  layer->in_shape = *in;
  layer->in_bytes = st_shape_elems(in) * dtype_bytes;
  layer->active_params = -1;
  layer->param_tensors = -1;
  if (!layer->type->derive(layer, dtype_bytes, error) || !check_derived(layer, error))
    return FALSE;
  if (layer->active_params < 0)
    layer->active_params = layer->params;
  if (layer->param_tensors < 0 || layer->params == 0)
    layer->param_tensors = layer->params > 0 ? 1 : 0;
  /* Generic roofline traffic: forward reads the input and writes the output
   * and what it keeps; backward reads what was kept and the output gradient,
   * writes the input gradient, and touches the kept tensors once more. */
  if (layer->fwd_io_bytes == 0)
    layer->fwd_io_bytes = (double)(layer->in_bytes + layer->out_bytes + layer->act_bytes);
  if (layer->bwd_io_bytes == 0)
    layer->bwd_io_bytes =
      (double)(2 * layer->act_bytes + layer->in_bytes + layer->out_bytes);
  layer->signature = st_layer_signature(layer);
  return TRUE;
}

static gboolean
read_layer(StLayer *layer, const Entry *entry, GError **error)
{
  const char *type_name = NULL;
  if (entry->name == NULL) {
    /* Missing or not a string: the getter fails and says which. */
    if (st_json_get_string(entry->obj, "name", TRUE, &type_name, error))
      g_assert_not_reached();
    return FALSE;
  }
  layer->name = g_strdup(entry->name);
  layer->tp = 1;
  if (!st_json_get_string(entry->obj, "type", TRUE, &type_name, error))
    return FALSE;
  layer->type = st_layer_type_find(type_name);
  if (layer->type == NULL) {
    g_autoptr(GString) known = g_string_new(NULL);
    for (const StLayerType *const *t = st_layer_types(); *t != NULL; t++)
      g_string_append_printf(known, "%s%s", known->len > 0 ? ", " : "", (*t)->name);
    return st_model_fail(error, "key 'type': unknown layer type '%s' (known: %s)", type_name,
                         known->str);
  }
  return read_attrs(layer, entry->obj, error);
}

/* A tensor kept both by its producer (as output, possibly through views) and
 * by its consumer (as input) is one tensor: charge it to the producer. */
static void
count_shared_once(StModel *model)
{
  gboolean producer_keeps = FALSE;
  for (int i = 0; i < model->n_layers; i++) {
    StLayer *layer = &model->layers[i];
    unsigned keeps = layer->type->keeps;
    if (producer_keeps && (keeps & ST_KEEPS_INPUT)) {
      g_assert(layer->act_bytes >= layer->in_bytes);
      layer->act_bytes -= layer->in_bytes;
    }
    if (!(keeps & ST_OUTPUT_IS_VIEW))
      producer_keeps = (keeps & ST_KEEPS_OUTPUT) != 0;
  }
}

static gboolean
sum_totals(StModel *model, GError **error)
{
  double params = 0, act = 0; /* checked before the exact int64 sums */
  model->fwd_flops = model->bwd_flops = 0;
  for (int i = 0; i < model->n_layers; i++) {
    const StLayer *layer = &model->layers[i];
    params += (double)layer->params;
    act += (double)layer->act_bytes;
    model->fwd_flops += layer->fwd_flops;
    model->bwd_flops += layer->bwd_flops;
  }
  if (params > 0x1p62 || act > 0x1p62)
    return st_model_fail(error, "the model's parameters or kept bytes pass 2^62");
  model->params = model->act_bytes = model->active_params = model->param_tensors = 0;
  for (int i = 0; i < model->n_layers; i++) {
    const StLayer *layer = &model->layers[i];
    model->params += layer->params;
    model->param_tensors += layer->param_tensors;
    model->act_bytes += layer->act_bytes;
    model->active_params += layer->active_params;
  }
  return TRUE;
}

/* Derives every layer in order (types, attrs, tp and sp set), each on the
 * previous one's output, then the totals. */
gboolean
st_model_derive_all(StModel *model, GError **error)
{
  int dtype_bytes = st_dtype_bytes(model->dtype);
  for (int i = 0; i < model->n_layers; i++) {
    StLayer *layer = &model->layers[i];
    StShape shape;
    if (!st_model_inputs_shape(model, i, &shape, error) ||
        !derive_layer(layer, i > 0 ? &model->layers[i - 1] : NULL, &shape, dtype_bytes,
                      error)) {
      g_prefix_error(error, "layer %d '%s': ", i, layer->name);
      return FALSE;
    }
  }
  const StLayer *last = &model->layers[model->n_layers - 1];
  if (last->chain_open)
    return st_model_fail(error,
                         "layer %d '%s' (%s): the model ends inside its chain: the layers that "
                         "continue it are missing",
                         model->n_layers - 1, last->name, last->type->name);
  count_shared_once(model);
  return sum_totals(model, error);
}

static gboolean
read_input(const cJSON *root, StShape *input, GError **error)
{
  const cJSON *array = NULL;
  if (!st_json_get_array(root, "input", TRUE, &array, error))
    return FALSE;
  int n = cJSON_GetArraySize(array);
  if (n < 1 || n > ST_SHAPE_MAX_DIMS)
    return st_model_fail(error, "key 'input': expected 1 to %d dims, got %d", ST_SHAPE_MAX_DIMS, n);
  input->n_dims = n;
  for (int i = 0; i < n; i++)
    if (!st_json_item_int(cJSON_GetArrayItem(array, i), "input", 1, MAX_DIM, &input->dims[i],
                          error))
      return FALSE;
  if (elems_double(input) > ST_MAX_ELEMS)
    return st_model_fail(error, "key 'input': more than 2^40 elements per sample");
  return TRUE;
}

/* "tensor_parallel": {"ranks": t, "sequence_parallel": bool,
 * "expert_ranks": k}: the model as one rank of a tensor-parallel group
 * (st_model_derive_etp), as a schedule's JSON carries it; absent: t = 1;
 * expert_ranks absent: k = t. */
static gboolean
read_tensor_parallel(const cJSON *root, int *tp, gboolean *sp, int *etp, GError **error)
{
  const cJSON *obj = NULL;
  *tp = *etp = 1;
  *sp = FALSE;
  if (!st_json_get_object(root, "tensor_parallel", FALSE, &obj, error))
    return FALSE;
  if (obj == NULL)
    return TRUE;
  static const char *const KEYS[] = {"ranks", "sequence_parallel", "expert_ranks", NULL};
  int64_t ranks = 1, experts = 0;
  if (!st_json_check_keys(obj, KEYS, error) ||
      !st_json_get_int(obj, "ranks", TRUE, 1, 1 << 20, &ranks, error) ||
      !st_json_get_bool(obj, "sequence_parallel", FALSE, sp, error) ||
      !st_json_get_int(obj, "expert_ranks", FALSE, 1, 1 << 20, &experts, error)) {
    g_prefix_error(error, "key 'tensor_parallel': ");
    return FALSE;
  }
  if (experts > 0 && ranks % experts != 0)
    return st_model_fail(error, "key 'tensor_parallel': expert_ranks %" G_GINT64_FORMAT " does not "
                         "divide ranks %" G_GINT64_FORMAT, experts, ranks);
  *tp = (int)ranks;
  *etp = experts > 0 ? (int)experts : *tp;
  *sp = *sp && ranks > 1;
  return TRUE;
}

/* Sets a layer's split before derive(): an MoE expert (the only type that
 * continues a chain) over etp ranks, every other layer over tp. */
static void
set_split(StLayer *layer, int tp, gboolean sp, int cp, int etp)
{
  int t = layer->type->link != NULL ? etp : tp;
  layer->tp = t;
  layer->sp = sp && t > 1;
  layer->cp = cp;
}

/* "context_parallel": {"ranks": c}: the model as one rank of a
 * context-parallel group (st_model_derive_cp; its input is already the
 * rank's s / c tokens); absent: c = 1. */
static gboolean
read_context_parallel(const cJSON *root, int *cp, GError **error)
{
  const cJSON *obj = NULL;
  *cp = 1;
  if (!st_json_get_object(root, "context_parallel", FALSE, &obj, error))
    return FALSE;
  if (obj == NULL)
    return TRUE;
  static const char *const KEYS[] = {"ranks", NULL};
  int64_t ranks = 1;
  if (!st_json_check_keys(obj, KEYS, error) ||
      !st_json_get_int(obj, "ranks", TRUE, 1, 1 << 20, &ranks, error)) {
    g_prefix_error(error, "key 'context_parallel': ");
    return FALSE;
  }
  *cp = (int)ranks;
  return TRUE;
}

static gboolean
read_header(const cJSON *root, StModel *model, const cJSON **layers, GError **error)
{
  static const char *const KEYS[] = {"name", "note", "input", "dtype", "layers", "totals",
                                     "tensor_parallel", "context_parallel", NULL};
  const char *name = NULL, *note = NULL, *dtype = "fp32";
  if (!cJSON_IsObject(root))
    return st_model_fail(error, "expected a JSON object");
  if (!st_json_check_keys(root, KEYS, error) ||
      !st_json_get_string(root, "name", TRUE, &name, error) ||
      !st_json_get_string(root, "note", FALSE, &note, error) ||
      !st_json_get_string(root, "dtype", FALSE, &dtype, error))
    return FALSE;
  model->name = g_strdup(name);
  if (!st_dtype_parse(dtype, &model->dtype, error)) {
    g_prefix_error(error, "key 'dtype': ");
    return FALSE;
  }
  if (!read_input(root, &model->input, error) ||
      !st_json_get_array(root, "layers", TRUE, layers, error))
    return FALSE;
  if (cJSON_GetArraySize(*layers) == 0)
    return st_model_fail(error, "key 'layers': is empty, a model needs at least one layer");
  return TRUE;
}

static gboolean
read_model(const cJSON *root, StModel *model, GError **error)
{
  const cJSON *layers = NULL;
  if (!read_header(root, model, &layers, error))
    return FALSE;
  g_autoptr(GArray) entries = g_array_new(FALSE, TRUE, sizeof(Entry));
  g_array_set_clear_func(entries, entry_clear);
  if (!expand(layers, entries, error))
    return FALSE;
  if (entries->len > MAX_LAYERS)
    return st_model_fail(error, "key 'layers': %u layers after expanding repeats, more than %d",
                         entries->len, MAX_LAYERS);

  model->layers = g_new0(StLayer, entries->len);
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < entries->len; i++) {
    const Entry *entry = &g_array_index(entries, Entry, i);
    StLayer *layer = &model->layers[i];
    model->n_layers = (int)i + 1; /* so st_model_free releases what was read */
    gboolean ok = read_layer(layer, entry, error) &&
                  st_model_inputs_read(layer, entry->obj, seen, error);
    gpointer other;
    if (ok && g_hash_table_lookup_extended(seen, layer->name, NULL, &other))
      ok = st_model_fail(error, "duplicate name (also layer %d)", GPOINTER_TO_INT(other));
    if (!ok) {
      if (entry->name != NULL)
        g_prefix_error(error, "layer %u '%s': ", i, entry->name);
      else
        g_prefix_error(error, "layer %u: ", i);
      return FALSE;
    }
    g_hash_table_insert(seen, layer->name, GINT_TO_POINTER(i));
  }
  int tp, cp, etp;
  gboolean sp;
  if (!read_tensor_parallel(root, &tp, &sp, &etp, error) ||
      !read_context_parallel(root, &cp, error))
    return FALSE;
  for (int i = 0; i < model->n_layers; i++)
    set_split(&model->layers[i], tp, sp, cp, etp);
  return st_model_derive_all(model, error);
}

StModel *
st_model_from_json(const cJSON *root, const char *origin, GError **error)
{
  g_return_val_if_fail(root != NULL, NULL);
  g_autoptr(StModel) model = g_new0(StModel, 1);
  GError *local = NULL;
  if (!read_model(root, model, &local)) {
    /* One domain for callers, whatever helper failed. */
    g_set_error(error, ST_MODEL_ERROR, local->code, "%s: %s",
                origin != NULL ? origin : "<model>", local->message);
    g_error_free(local);
    return NULL;
  }
  return g_steal_pointer(&model);
}

StModel *
st_model_load(const char *path, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  GError *local = NULL;
  g_autoptr(cJSON) root = st_json_load_file(path, &local);
  if (root == NULL) {
    /* Messages already name the file. */
    g_set_error_literal(error, ST_MODEL_ERROR, local->code, local->message);
    g_error_free(local);
    return NULL;
  }
  StModel *model = st_model_from_json(root, path, error);
  if (model != NULL)
    model->path = g_strdup(path);
  return model;
}

StModel *
st_model_derive_as(const StModel *model, const StShape *input, int tp, gboolean sp,
                   GError **error)
{
  return st_model_derive_cp(model, input, tp, sp, 1, error);
}

int
st_model_context_parallel(const StModel *model)
{
  return model->n_layers > 0 ? MAX(model->layers[0].cp, 1) : 1;
}

StModel *
st_model_derive_cp(const StModel *model, const StShape *input, int tp, gboolean sp, int cp,
                   GError **error)
{
  return st_model_derive_etp(model, input, tp, sp, cp, tp, error);
}

StModel *
st_model_derive_etp(const StModel *model, const StShape *input, int tp, gboolean sp, int cp,
                    int etp, GError **error)
{
  g_return_val_if_fail(model != NULL && tp >= 1 && cp >= 1 && etp >= 1 && tp % etp == 0, NULL);
  g_autoptr(StModel) copy = st_model_copy(model);
  if (input != NULL)
    copy->input = *input;
  if (cp > 1) {
    if (!st_model_is_token(copy) || copy->input.dims[0] % cp != 0) {
      g_set_error(error, ST_MODEL_ERROR, ST_ERROR_INVALID,
                  "%s: context parallelism over %d ranks needs a token model whose sequence "
                  "(%" G_GINT64_FORMAT ") they divide",
                  model->path != NULL ? model->path : model->name, cp, copy->input.dims[0]);
      return NULL;
    }
    copy->input.dims[0] /= cp;
  }
  for (int i = 0; i < copy->n_layers; i++) {
    StLayer *layer = &copy->layers[i];
    g_clear_pointer(&layer->signature, g_free);
    /* Everything derived starts again from the attrs. */
    *layer = (StLayer){.name = layer->name, .type = layer->type, .attrs = layer->attrs,
                       .n_attrs = layer->n_attrs, .inputs = layer->inputs,
                       .n_inputs = layer->n_inputs};
    set_split(layer, tp, sp, cp, etp);
  }
  GError *local = NULL;
  if (!st_model_derive_all(copy, &local)) {
    g_set_error(error, ST_MODEL_ERROR, local->code, "%s: %s",
                model->path != NULL ? model->path : model->name, local->message);
    g_error_free(local);
    return NULL;
  }
  return g_steal_pointer(&copy);
}
