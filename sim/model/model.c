/* model.c: shapes, attribute lookup, signatures, ownership (copy, free)
 * and the JSON writer of StModel. Loading and derivation are in
 * model_load.c, building in code in model_build.c, the table in
 * model_print.c. */
#include "model/model.h"

#include <string.h>

#include "base/json.h"
#include "base/util.h"
#include "model/layer_type.h"
#include "model/model_inputs.h"
#include "model/model_private.h"

G_DEFINE_QUARK(st-model-error-quark, st_model_error)

/* ---- shapes ------------------------------------------------------------ */

int64_t
st_shape_elems(const StShape *shape)
{
  g_return_val_if_fail(shape != NULL, 0);
  int64_t n = 1;
  for (int i = 0; i < shape->n_dims; i++)
    n *= shape->dims[i];
  return n;
}

char *
st_shape_format(const StShape *shape)
{
  g_return_val_if_fail(shape != NULL, NULL);
  GString *s = g_string_new("[");
  for (int i = 0; i < shape->n_dims; i++)
    g_string_append_printf(s, "%s%" G_GINT64_FORMAT, i > 0 ? "," : "", shape->dims[i]);
  g_string_append_c(s, ']');
  return g_string_free(s, FALSE);
}

/* "type{k=v,...}[in shape]", and "/tpT" (+"sp") for one rank of a
 * tensor-parallel group: its costs differ from the whole layer's. Joined
 * by hand, not printf: a model of 10^6 layers formats 10^7 attrs. */
/* Copies `text` to `at`; returns the end. */
static char *
put(char *at, const char *text)
{
  size_t n = strlen(text);
  memcpy(at, text, n);
  return at + n;
}

char *
st_layer_signature(const StLayer *layer)
{
  gboolean choices = FALSE; /* whether any attr is written by name */
  for (const StAttrSpec *spec = layer->type->attrs; spec->key != NULL; spec++)
    choices = choices || spec->choices != NULL;
  /* Written into a buffer sized for the longest text (a name or a number
   * of ST_INT_TEXT_SIZE per attr and dim, and "/tpT" "sp" "/cpC"), then
   * copied at its length. */
  const char **names = g_newa(const char *, MAX(layer->n_attrs, 1));
  size_t size = strlen(layer->type->name) + 3 * ST_INT_TEXT_SIZE + 16;
  for (int i = 0; i < layer->n_attrs; i++) {
    names[i] = choices ? st_layer_attr_choice(layer, layer->attrs[i].key) : NULL;
    size += strlen(layer->attrs[i].key) + 2 +
            (names[i] != NULL ? strlen(names[i]) : ST_INT_TEXT_SIZE);
  }
  size += (size_t)layer->in_shape.n_dims * (ST_INT_TEXT_SIZE + 1);
  char stack[1024], number[ST_INT_TEXT_SIZE];
  g_autofree char *heap = size > sizeof stack ? g_malloc(size) : NULL;
  char *text = heap != NULL ? heap : stack, *at = put(text, layer->type->name);
  *at++ = '{';
  for (int i = 0; i < layer->n_attrs; i++) {
    if (i > 0)
      *at++ = ',';
    at = put(at, layer->attrs[i].key);
    *at++ = '=';
    at = put(at, names[i] != NULL ? names[i] : st_int_text(layer->attrs[i].value, number));
  }
  at = put(at, "}["); /* then st_shape_format's */
  for (int i = 0; i < layer->in_shape.n_dims; i++) {
    if (i > 0)
      *at++ = ',';
    at = put(at, st_int_text(layer->in_shape.dims[i], number));
  }
  *at++ = ']';
  if (layer->tp > 1) {
    at = put(at, "/tp");
    at = put(at, st_int_text(layer->tp, number));
    at = put(at, layer->sp ? "sp" : "");
  }
  if (layer->cp > 1) {
    at = put(at, "/cp");
    at = put(at, st_int_text(layer->cp, number));
  }
  g_assert((size_t)(at - text) < size);
  return g_strndup(text, (gsize)(at - text)); /* its own length, not the bound */
}

gboolean
st_shape_equal(const StShape *a, const StShape *b)
{
  g_return_val_if_fail(a != NULL && b != NULL, FALSE);
  if (a->n_dims != b->n_dims)
    return FALSE;
  for (int i = 0; i < a->n_dims; i++)
    if (a->dims[i] != b->dims[i])
      return FALSE;
  return TRUE;
}

/* ---- layers and ownership ---------------------------------------------- */

int64_t
st_layer_attr(const StLayer *layer, const char *key, int64_t fallback)
{
  g_return_val_if_fail(layer != NULL && key != NULL, fallback);
  /* Called for every op the cost models price: the first letter decides
   * most comparisons without a call (a fifth of a large plan's time was
   * strcmp here). */
  for (int i = 0; i < layer->n_attrs; i++)
    if (layer->attrs[i].key[0] == key[0] && strcmp(layer->attrs[i].key, key) == 0)
      return layer->attrs[i].value;
  return fallback;
}

const char *
st_layer_attr_choice(const StLayer *layer, const char *key)
{
  g_return_val_if_fail(layer != NULL && key != NULL, NULL);
  for (const StAttrSpec *spec = layer->type->attrs; spec->key != NULL; spec++) {
    if (strcmp(spec->key, key) != 0 || spec->choices == NULL)
      continue;
    int64_t v = st_layer_attr(layer, key, 0);
    for (int64_t k = 0; spec->choices[k] != NULL; k++)
      if (k == v)
        return spec->choices[k];
  }
  return NULL;
}

int64_t
st_model_bytes_as(const StModel *model, int64_t bytes, StDtype dtype)
{
  g_return_val_if_fail(model != NULL, bytes);
  return bytes * st_dtype_bytes(dtype) / st_dtype_bytes(model->dtype);
}

static void
layer_clear(StLayer *layer)
{
  g_free(layer->name);
  g_free(layer->attrs);
  g_free(layer->signature);
  g_free(layer->inputs);
}

void
st_model_free(StModel *model)
{
  if (model == NULL)
    return;
  for (int i = 0; i < model->n_layers; i++)
    layer_clear(&model->layers[i]);
  g_free(model->layers);
  g_free(model->name);
  g_free(model->path);
  g_free(model);
}

StModel *
st_model_copy(const StModel *model)
{
  g_return_val_if_fail(model != NULL, NULL);
  StModel *copy = g_new(StModel, 1);
  *copy = *model;
  copy->name = g_strdup(model->name);
  copy->path = g_strdup(model->path);
  copy->layers = g_new(StLayer, model->n_layers);
  for (int i = 0; i < model->n_layers; i++) {
    const StLayer *src = &model->layers[i];
    StLayer *dst = &copy->layers[i];
    *dst = *src;
    dst->name = g_strdup(src->name);
    dst->signature = g_strdup(src->signature);
    st_model_inputs_copy(dst, src);
    dst->attrs = g_new(StAttr, MAX(src->n_attrs, 1));
    if (src->n_attrs > 0)
      memcpy(dst->attrs, src->attrs, sizeof(StAttr) * (size_t)src->n_attrs);
  }
  return copy;
}

/* ---- JSON writer ------------------------------------------------------- */

static cJSON *
shape_to_json(const StShape *shape)
{
  cJSON *array = cJSON_CreateArray();
  for (int i = 0; i < shape->n_dims; i++)
    cJSON_AddItemToArray(array, cJSON_CreateNumber((double)shape->dims[i]));
  return array;
}

static const StAttrSpec *
attr_spec(const StLayerType *type, const char *key)
{
  for (const StAttrSpec *spec = type->attrs; spec->key != NULL; spec++)
    if (strcmp(spec->key, key) == 0)
      return spec;
  return NULL;
}

/* What a layer split over a tensor-parallel group needs from it, by kind
 * (layer_type.h). `in`, `o`: the rank's input and output bytes per
 * sample. */
int
st_layer_tp_comm(const StLayer *layer, StPass pass, int dtype_bytes, StTpComm out[2])
{
  g_return_val_if_fail(layer != NULL && out != NULL, 0);
  if (layer->tp <= 1)
    return 0;
  if (layer->type->tp_comm != NULL)
    return layer->type->tp_comm(layer, pass, dtype_bytes, out);
  gboolean fwd = pass == ST_PASS_FWD || pass == ST_PASS_RECOMPUTE;
  g_return_val_if_fail(fwd || pass == ST_PASS_BWD, 0);
  int64_t in = st_shape_elems(&layer->in_shape) * dtype_bytes;
  int64_t o = st_shape_elems(&layer->out_shape) * dtype_bytes;
  int64_t t = layer->tp;
  gboolean sp = layer->sp;
  int n = 0;
  switch (layer->type->tp) {
  case ST_TP_REPLICATED:
    break;
  case ST_TP_PARALLEL:
    /* SP: the whole sequence is t times the rank's tokens. */
    if (fwd && sp) {
      out[n++] = (StTpComm){ST_COLL_ALL_GATHER, in * t, TRUE};
      out[n++] = (StTpComm){ST_COLL_REDUCE_SCATTER, o * t, FALSE};
    } else if (fwd) {
      out[n++] = (StTpComm){ST_COLL_ALL_REDUCE, o, FALSE};
    } else if (sp) {
      out[n++] = (StTpComm){ST_COLL_ALL_GATHER, o * t, TRUE};
      out[n++] = (StTpComm){ST_COLL_REDUCE_SCATTER, in * t, FALSE};
    } else {
      out[n++] = (StTpComm){ST_COLL_ALL_REDUCE, in, FALSE};
    }
    break;
  case ST_TP_VOCAB_IN:
    if (fwd)
      out[n++] = sp ? (StTpComm){ST_COLL_REDUCE_SCATTER, o * t, FALSE}
                    : (StTpComm){ST_COLL_ALL_REDUCE, o, FALSE};
    else if (sp)
      out[n++] = (StTpComm){ST_COLL_ALL_GATHER, o * t, TRUE};
    break;
  case ST_TP_VOCAB_OUT:
    if (fwd && sp)
      out[n++] = (StTpComm){ST_COLL_ALL_GATHER, in * t, TRUE};
    else if (!fwd)
      out[n++] = sp ? (StTpComm){ST_COLL_REDUCE_SCATTER, in * t, FALSE}
                    : (StTpComm){ST_COLL_ALL_REDUCE, in, FALSE};
    break;
  case ST_TP_VOCAB_LOSS: {
    /* max, sum of exponentials, the target's logit: fp32 per token */
    const StShape *s = &layer->in_shape;
    int64_t tokens = st_shape_elems(s) / s->dims[s->n_dims - 1];
    if (fwd)
      out[n++] = (StTpComm){ST_COLL_ALL_REDUCE, 3 * (int64_t)sizeof(float) * tokens, FALSE};
    break;
  }
  }
  return n;
}

int
st_layer_tp_parts(const StLayer *layer, StPass pass, double share[ST_TP_PARTS_MAX])
{
  g_return_val_if_fail(layer != NULL && share != NULL, 0);
  share[0] = 1;
  if (layer->tp <= 1 || layer->type->tp_parts == NULL)
    return 1;
  int n = layer->type->tp_parts(layer, pass == ST_PASS_BWD ? ST_PASS_BWD : ST_PASS_FWD, share);
  g_return_val_if_fail(n >= 1 && n <= ST_TP_PARTS_MAX, 1);
  return n;
}

int64_t
st_layer_tp_partial_params(const StLayer *layer)
{
  g_return_val_if_fail(layer != NULL, 0);
  if (layer->tp <= 1)
    return 0;
  if (layer->type->tp == ST_TP_REPLICATED)
    return layer->sp ? layer->params : 0;
  return layer->type->tp_partial_params != NULL ? layer->type->tp_partial_params(layer) : 0;
}

/* What the loader derived, for readers of `stagger model show --json`; the
 * loader ignores it and derives again. */
static cJSON *
derived_to_json(const StLayer *layer)
{
  cJSON *d = cJSON_CreateObject();
  cJSON_AddItemToObject(d, "in_shape", shape_to_json(&layer->in_shape));
  cJSON_AddItemToObject(d, "out_shape", shape_to_json(&layer->out_shape));
  cJSON_AddStringToObject(d, "signature", layer->signature);
  st_json_add_int(d, "params", layer->params);
  if (layer->active_params != layer->params)
    st_json_add_int(d, "active_params", layer->active_params);
  cJSON_AddNumberToObject(d, "fwd_flops", layer->fwd_flops);
  cJSON_AddNumberToObject(d, "bwd_flops", layer->bwd_flops);
  st_json_add_int(d, "act_bytes", layer->act_bytes);
  /* Core attention's under the names it has always had, the other ops'
   * with theirs appended ("act_again_mlp_act"). */
  for (int op = 0; op < ST_RC_N; op++) {
    if (layer->act_again[op] <= 0)
      continue;
    g_autofree char *suffix =
      op == ST_RC_CORE_ATTN ? g_strdup("") : g_strconcat("_", st_recompute_op_name(op), NULL);
    g_autofree char *bytes = g_strconcat("act_again", suffix, NULL);
    g_autofree char *flops = g_strconcat("again_flops", suffix, NULL);
    st_json_add_int(d, bytes, layer->act_again[op]);
    cJSON_AddNumberToObject(d, flops, layer->again_flops[op]);
  }
  st_json_add_int(d, "in_bytes", layer->in_bytes);
  st_json_add_int(d, "out_bytes", layer->out_bytes);
  cJSON_AddNumberToObject(d, "fwd_io_bytes", layer->fwd_io_bytes);
  cJSON_AddNumberToObject(d, "bwd_io_bytes", layer->bwd_io_bytes);
  return d;
}

/* An MoE expert is the only type that continues a chain. */
int
st_model_expert_tp(const StModel *model)
{
  for (int i = 0; i < model->n_layers; i++)
    if (model->layers[i].type->link != NULL)
      return MAX(model->layers[i].tp, 1);
  return model->n_layers > 0 ? MAX(model->layers[0].tp, 1) : 1;
}

cJSON *
st_model_to_json(const StModel *model)
{
  g_return_val_if_fail(model != NULL, NULL);
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "name", model->name);
  cJSON_AddStringToObject(root, "dtype", st_dtype_name(model->dtype));
  cJSON_AddItemToObject(root, "input", shape_to_json(&model->input));
  if (model->n_layers > 0 && model->layers[0].tp > 1) {
    cJSON *tp = cJSON_AddObjectToObject(root, "tensor_parallel");
    st_json_add_int(tp, "ranks", model->layers[0].tp);
    cJSON_AddBoolToObject(tp, "sequence_parallel", model->layers[0].sp);
    if (st_model_expert_tp(model) != model->layers[0].tp)
      st_json_add_int(tp, "expert_ranks", st_model_expert_tp(model));
  }
  if (st_model_context_parallel(model) > 1) {
    cJSON *cp = cJSON_AddObjectToObject(root, "context_parallel");
    st_json_add_int(cp, "ranks", st_model_context_parallel(model));
  }
  cJSON *layers = cJSON_AddArrayToObject(root, "layers");
  for (int i = 0; i < model->n_layers; i++) {
    const StLayer *layer = &model->layers[i];
    cJSON *obj = cJSON_CreateObject();
    cJSON_AddStringToObject(obj, "name", layer->name);
    cJSON_AddStringToObject(obj, "type", layer->type->name);
    st_model_inputs_to_json(model, layer, obj);
    for (int a = 0; a < layer->n_attrs; a++) {
      const StAttr *attr = &layer->attrs[a];
      const char *choice = st_layer_attr_choice(layer, attr->key);
      const StAttrSpec *spec = attr_spec(layer->type, attr->key);
      if (spec->derived)
        continue;
      if (choice != NULL)
        cJSON_AddStringToObject(obj, attr->key, choice);
      else if (spec->flag)
        cJSON_AddBoolToObject(obj, attr->key, attr->value != 0);
      else
        st_json_add_int(obj, attr->key, attr->value);
    }
    cJSON_AddItemToObject(obj, "derived", derived_to_json(layer));
    cJSON_AddItemToArray(layers, obj);
  }
  cJSON *totals = cJSON_AddObjectToObject(root, "totals");
  st_json_add_int(totals, "params", model->params);
  st_json_add_int(totals, "active_params", model->active_params);
  cJSON_AddNumberToObject(totals, "fwd_flops", model->fwd_flops);
  cJSON_AddNumberToObject(totals, "bwd_flops", model->bwd_flops);
  st_json_add_int(totals, "act_bytes", model->act_bytes);
  return root;
}

gboolean
st_model_is_token(const StModel *m)
{
  g_return_val_if_fail(m != NULL, FALSE);
  return m->input.n_dims == 1 && m->n_layers > 0 && m->layers[0].type->takes_ids;
}

int
st_model_tied_layer(const StModel *m, int i)
{
  if (i < 0 || i >= m->n_layers || !st_layer_attr(&m->layers[i], "tied", 0))
    return -1;
  for (int j = 0; j < m->n_layers; j++)
    if (strcmp(m->layers[j].type->name, "embedding") == 0)
      return j;
  return -1;
}

void
st_layer_memory(const StModel *m, int i, int batch, StDtype dtype, StLayerMemory *out)
{
  g_return_if_fail(m != NULL && i >= 0 && i < m->n_layers && batch > 0 && out != NULL);
  const StLayer *l = &m->layers[i];
  *out = (StLayerMemory){0};
  /* Between layers, tensors are at the run's dtype: a custom layer's
   * output_bytes converted like any activation. */
  int64_t in = st_model_bytes_as(m, l->in_bytes, dtype) * batch;
  out->input = l->type->takes_ids ? st_shape_elems(&l->in_shape) * (int64_t)sizeof(int32_t) * batch
                                  : in;
  out->output = st_model_bytes_as(m, l->out_bytes, dtype) * batch;
  out->input_grad = in;
  if (l->type->memory != NULL)
    l->type->memory(l, batch, st_dtype_bytes(dtype), out);
  else
    out->saved = st_model_bytes_as(m, l->act_bytes, dtype) * batch;
}

void
st_layer_again(const StLayer *l, unsigned ops, int64_t *bytes, double *flops)
{
  if (ops == 0)
    ops = ST_RC_DEFAULT;
  *bytes = 0;
  *flops = 0;
  for (int op = 0; op < ST_RC_N; op++)
    if ((ops & (1u << op)) != 0) {
      *bytes += l->act_again[op];
      *flops += l->again_flops[op];
    }
}

int64_t
st_layer_memory_again(const StLayerMemory *mem, unsigned ops, int64_t *scratch)
{
  if (ops == 0)
    ops = ST_RC_DEFAULT;
  int64_t bytes = 0, most = 0;
  for (int op = 0; op < ST_RC_N; op++)
    if ((ops & (1u << op)) != 0 && mem->again[op] > 0) {
      bytes += mem->again[op];
      most = MAX(most, mem->again_scratch[op]);
    }
  if (scratch != NULL)
    *scratch = most;
  return bytes;
}
