/* layer_impls.c: the registry of layer implementations, one line per model
 * layer type, in the order of sim/model/layer_type.c. "custom" has none: its
 * numbers are given, not its math; nor has "mla_block" (simulated only:
 * `stagger run` refuses it, exec/exec_check.c). */
#include <string.h>

#include "exec/layers/layers_private.h"

static const StLayerImpl *const IMPLS[] = {
  &st_impl_linear,
  &st_impl_embedding,
  &st_impl_position_embedding,
  &st_impl_class_token,
  &st_impl_lm_head,
  &st_impl_conv2d,
  &st_impl_maxpool2d,
  &st_impl_avgpool2d,
  &st_impl_adaptive_avgpool2d,
  &st_impl_flatten,
  &st_impl_to_tokens,
  &st_impl_batchnorm2d,
  &st_impl_layernorm,
  &st_impl_rmsnorm,
  &st_impl_relu,
  &st_impl_gelu,
  &st_impl_dropout,
  &st_impl_select_token,
  &st_impl_softmax_cross_entropy,
  &st_impl_basic_block,
  &st_impl_bottleneck,
  &st_impl_transformer_block,
  &st_impl_attention,
  &st_impl_swiglu,
  &st_impl_geglu,
  &st_impl_llama_block,
  &st_impl_moe_router,
  &st_impl_moe_expert,
  NULL,
};

const StLayerImpl *const *
st_layer_impls(void)
{
  return IMPLS;
}

const StLayerImpl *
st_layer_impl_find(const char *type)
{
  g_return_val_if_fail(type != NULL, NULL);
  for (const StLayerImpl *const *i = IMPLS; *i != NULL; i++)
    if (strcmp((*i)->type, type) == 0)
      return *i;
  return NULL;
}

gboolean
st_layer_takes_ids(const StLayer *l)
{
  g_return_val_if_fail(l != NULL, FALSE);
  return l->type->takes_ids;
}
