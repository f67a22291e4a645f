/* megatron_cp.c: what megatron asks of a model before cutting its
 * sequences over a context-parallel group (megatron.h), with Megatron-LM's
 * and Transformer Engine's own conditions:
 *
 * - a token model: the sequence is what is cut;
 * - the sequence a multiple of 2c, each rank holding chunks i and
 *   2c - 1 - i (Megatron-LM's get_batch_on_this_cp_rank), and with
 *   sequence parallelism of 2 c t (the rank's s / c tokens are cut again
 *   over the tensor group);
 * - a layer with flash attention (st_layer_cp_part): otherwise nothing
 *   would need the group, and it would only be data parallelism renamed;
 * - all-to-all (Ulysses): the query and key/value heads of a tensor rank
 *   divisible by c (TE's a2a asserts it; grouped-query models with few kv
 *   heads need the ring).
 */
#include "strategy/megatron.h"

#include "model/layer_type.h"
#include "strategy/context_parallel.h"
#include "strategy/strategy_common.h"

gboolean
st_megatron_cp_check(const StModel *m, const StOptions *o, GError **error)
{
  int c = MAX(o->context_parallel, 1), t = MAX(o->tensor_parallel, 1);
  gboolean sp = o->sequence_parallel && t > 1;
  if (c <= 1)
    return TRUE;
  if (!st_model_is_token(m))
    return st_strategy_refuse(error, "--context-parallel %d: model '%s' reads no sequence of "
                              "tokens to cut", c, m->name);
  int64_t s = m->input.dims[0], unit = 2 * (int64_t)c * (sp ? t : 1);
  if (s % unit != 0)
    return st_strategy_refuse(error, "--context-parallel %d: the sequence of %" G_GINT64_FORMAT
                              " tokens is not a multiple of 2 x %d%s = %" G_GINT64_FORMAT
                              " (each rank holds chunks i and 2C-1-i, so causal work is "
                              "even%s)", c, s, c, sp ? " x t" : "", unit,
                              sp ? "; sequence parallelism cuts a rank's tokens over t" : "");
  gboolean attention = FALSE;
  for (int i = 0; i < m->n_layers; i++) {
    const StLayer *l = &m->layers[i];
    if (!l->type->cp_attention)
      continue;
    attention = TRUE;
    if (!st_layer_attr(l, "flash", 1))
      return st_strategy_refuse(error, "--context-parallel %d: layer %d '%s' runs dense "
                                "attention; context parallelism needs flash attention "
                                "(Transformer Engine's fused kernels)", c, i, l->name);
    if (o->cp_comm != ST_CP_ALL_TO_ALL)
      continue;
    const char *keys[] = {"heads", "kv_heads"};
    for (int k = 0; k < 2; k++) {
      int64_t heads = st_layer_attr(l, keys[k], 0);
      if (heads % ((int64_t)t * c) != 0)
        return st_strategy_refuse(error, "--cp-comm all-to-all: layer %d '%s''s %" G_GINT64_FORMAT
                                  " %s are not a multiple of t x c = %d x %d (each rank "
                                  "computes %s / (t c) of them over the whole sequence); "
                                  "the ring has no such condition", i, l->name, heads,
                                  keys[k], t, c, keys[k]);
    }
  }
  if (!attention)
    return st_strategy_refuse(error, "--context-parallel %d: model '%s' has no layer with "
                              "attention (attention, llama_block) to cut; a transformer_block "
                              "runs dense attention", c, m->name);
  return TRUE;
}
