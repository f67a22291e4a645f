/* layer_type.c: the registry of layer types (one line each) and the helpers
 * that the families' derive() functions share. */
#include "model/layer_type.h"

#include <stdarg.h>
#include <string.h>

#include "base/error.h"
#include "model/layer_types_private.h"

/* In the order `stagger model types` lists them: dense, convolution, norm,
 * elementwise, blocks, LLM layers, custom. */
static const StLayerType *const TYPES[] = {
  &st_layer_linear,
  &st_layer_embedding,
  &st_layer_position_embedding,
  &st_layer_class_token,
  &st_layer_lm_head,
  &st_layer_conv2d,
  &st_layer_conv2d_rect,
  &st_layer_concat,
  &st_layer_maxpool2d,
  &st_layer_avgpool2d,
  &st_layer_adaptive_avgpool2d,
  &st_layer_flatten,
  &st_layer_to_tokens,
  &st_layer_batchnorm2d,
  &st_layer_layernorm,
  &st_layer_rmsnorm,
  &st_layer_relu,
  &st_layer_gelu,
  &st_layer_dropout,
  &st_layer_select_token,
  &st_layer_softmax_cross_entropy,
  &st_layer_basic_block,
  &st_layer_bottleneck,
  &st_layer_transformer_block,
  &st_layer_attention,
  &st_layer_swiglu,
  &st_layer_geglu,
  &st_layer_llama_block,
  &st_layer_mla_block,
  &st_layer_moe_router,
  &st_layer_moe_expert,
  &st_layer_custom,
  NULL,
};

const StLayerType *const *
st_layer_types(void)
{
  return TYPES;
}

const StLayerType *
st_layer_type_find(const char *name)
{
  g_return_val_if_fail(name != NULL, NULL);
  for (const StLayerType *const *t = TYPES; *t != NULL; t++)
    if (strcmp((*t)->name, name) == 0)
      return *t;
  return NULL;
}

gboolean
st_layer_check_dims(const StLayer *layer, int n_dims, const char *expected, GError **error)
{
  if (layer->in_shape.n_dims == n_dims)
    return TRUE;
  g_autofree char *shape = st_shape_format(&layer->in_shape);
  g_set_error(error, ST_MODEL_ERROR, ST_ERROR_INVALID,
              "input shape %s: %s expects %d dims %s", shape, layer->type->name, n_dims,
              expected);
  return FALSE;
}

gboolean
st_layer_check_size(double count, double max, const char *what, GError **error)
{
  if (count <= max)
    return TRUE;
  g_set_error(error, ST_MODEL_ERROR, ST_ERROR_INVALID,
              "%s would be %.3g, more than the %.3g any real layer stays under", what, count,
              max);
  return FALSE;
}

void
st_layer_set_attr(StLayer *layer, const char *key, int64_t value)
{
  for (int i = 0; i < layer->n_attrs; i++) {
    if (strcmp(layer->attrs[i].key, key) == 0) {
      layer->attrs[i].value = value;
      return;
    }
  }
  g_return_if_reached();
}

gboolean
st_layer_attr_error(GError **error, const char *key, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error(error, ST_MODEL_ERROR, ST_ERROR_INVALID, "key '%s': %s", key, message);
  return FALSE;
}

void
st_layer_no_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
}

void
st_layer_same_shape(StLayer *layer, int dtype_bytes)
{
  layer->out_shape = layer->in_shape;
  layer->out_bytes = st_shape_elems(&layer->out_shape) * dtype_bytes;
}

gboolean
st_window_out(int64_t size, int64_t kernel, int64_t stride, int64_t padding, int64_t *out,
              GError **error)
{
  if (size + 2 * padding < kernel)
    return st_layer_attr_error(error, "kernel",
                               "%" G_GINT64_FORMAT " is larger than the padded input (%"
                               G_GINT64_FORMAT " + 2 x %" G_GINT64_FORMAT ")",
                               kernel, size, padding);
  *out = (size + 2 * padding - kernel) / stride + 1;
  return TRUE;
}
