/* megatron_split.c: which transformer layers each of megatron's model chunks
 * holds (megatron.h, st_megatron_split).
 *
 * A unit is one of Megatron's transformer layers: it starts at each layer
 * that splits as a column- then row-parallel pair and continues no chain;
 * the layers before the first join it (the embedding), the rest the unit
 * before them (the final norm, the head, the loss). The p v model chunks
 * are contiguous runs of units in model order, chunk k on stage k mod p
 * (Megatron-LM's interleaving). How many units each holds, as Megatron-Core
 * decides it (megatron/core/transformer/transformer_config.py and
 * transformer_block.py's get_num_layers_to_build):
 *
 *   even       U / (p v) each; p v must divide U.
 *   first/last --first-stage-layers F, --last-stage-layers L (Megatron's
 *              --decoder-first/last-pipeline-num-layers): the first stage F,
 *              the last L, the stages between the rest evenly; with v > 1
 *              each stage's count is a multiple of v, split evenly over its
 *              chunks. Llama 3 405B's 126 layers on 16 stages: 7, 14 x 8, 7
 *              (Llama 3 paper, section 3.3.2).
 *   accounted  --account-for-embedding / --account-for-loss (Megatron's
 *              --account-for-{embedding,loss}-in-pipeline-split): the
 *              embedding, the loss each count as one layer; p v divides
 *              U + their number, and the first (last) chunk holds one unit
 *              fewer. Not with first/last (Megatron refuses both).
 *   balanced   --layer-split balanced: contiguous chunks of least largest
 *              forward + backward FLOPs per sample (stages.h's exact split),
 *              embedding and head included; not something Megatron does,
 *              for what-if questions.
 *
 * A chunk always holds at least one unit here (Megatron would let the
 * embedding alone be a stage's work; the stage programs need a layer).
 */
#include "strategy/megatron.h"
#include "strategy/strategy_common.h"

#include <stdarg.h>

#include "model/layer_type.h"
#include "strategy/stages.h"

/* Whether layer i closes an MoE chain (its last expert). */
static gboolean
is_moe_end(const StModel *m, int i)
{
  return i > 0 && m->layers[i - 1].chain_open && !m->layers[i].chain_open;
}

/* The first layer of each unit, ascending; transfer full. */
static GArray *
unit_firsts(const StModel *m)
{
  GArray *firsts = g_array_new(FALSE, FALSE, sizeof(int32_t));
  gboolean any = FALSE;
  for (int i = 0; i < m->n_layers; i++)
    any = any || m->layers[i].type->tp == ST_TP_PARALLEL;
  for (int i = 0; i < m->n_layers; i++) {
    gboolean continues = i > 0 && m->layers[i - 1].chain_open;
    gboolean starts = !continues && (!any || m->layers[i].type->tp == ST_TP_PARALLEL);
    if (!starts)
      continue;
    /* A cut right after an MoE layer's experts moves past the next layer,
     * so that the combine's output is read where it is made. */
    int32_t first = firsts->len == 0 ? 0 : i;
    if (first > 0 && is_moe_end(m, first - 1) && first + 1 < m->n_layers)
      first++;
    g_array_append_val(firsts, first);
  }
  if (firsts->len == 0) {
    int32_t zero = 0;
    g_array_append_val(firsts, zero);
  }
  return firsts;
}

#define EVEN_HINT                                                                            \
  "; --first-stage-layers/--last-stage-layers, --account-for-embedding/--account-for-loss " \
  "(Megatron-LM's uneven splits) or --layer-split balanced place the rest"

/* Per-stage unit counts from --first-stage-layers / --last-stage-layers. */
static gboolean
first_last(int U, int p, int v, const StOptions *o, int *per_stage, GError **error)
{
  int F = o->first_stage_layers, L = o->last_stage_layers;
  int middle = p - (F > 0) - (L > 0), rest = U - F - L;
  if (p < 2)
    return st_strategy_refuse(error, "--first-stage-layers/--last-stage-layers need --pipeline-stages > 1");
  if (rest < 0 || (middle == 0 && rest != 0) || (middle > 0 && (rest < middle || rest % middle)))
    return st_strategy_refuse(error, "--first-stage-layers %d, --last-stage-layers %d: the other %d "
                       "transformer layers do not split evenly over the %d stages between",
                F, L, MAX(rest, 0), middle);
  for (int s = 0; s < p; s++) {
    per_stage[s] = s == 0 && F > 0 ? F : s == p - 1 && L > 0 ? L : rest / MAX(middle, 1);
    if (per_stage[s] % v != 0)
      return st_strategy_refuse(error, "stage %d's %d transformer layers are not a multiple of "
                         "--virtual-stages %d (Megatron-LM's rule for uneven stages)",
                  s, per_stage[s], v);
  }
  return TRUE;
}

/* size[k]: units of model chunk k, k = 0 .. p v - 1 in model order. */
static gboolean
chunk_sizes(const StModel *m, GArray *units, int p, int v, const StOptions *o, int *size,
            GError **error)
{
  int U = (int)units->len, K = p * v;
  gboolean uneven = o->first_stage_layers > 0 || o->last_stage_layers > 0;
  int accounted = (o->account_for_embedding ? 1 : 0) + (o->account_for_loss ? 1 : 0);
  if (uneven && accounted > 0)
    return st_strategy_refuse(error, "--first-stage-layers/--last-stage-layers and --account-for-embedding/"
                       "--account-for-loss exclude each other (as in Megatron-LM)");
  if ((uneven || accounted > 0) && o->layer_split != ST_LAYER_SPLIT_EVEN)
    return st_strategy_refuse(error, "--layer-split balanced chooses every chunk itself: drop the uneven "
                       "stage options");
  if (U < K)
    return st_strategy_refuse(error, "--pipeline-stages %d x --virtual-stages %d = %d model chunks, more than "
                       "the model's %d transformer layers",
                p, v, K, U);
  if (uneven) {
    g_autofree int *per_stage = g_new(int, p);
    if (!first_last(U, p, v, o, per_stage, error))
      return FALSE;
    for (int k = 0; k < K; k++)
      size[k] = per_stage[k % p] / v;
    return TRUE;
  }
  if (o->layer_split == ST_LAYER_SPLIT_BALANCED) {
    g_autofree double *layer = g_new(double, m->n_layers);
    g_autofree double *unit = g_new0(double, U);
    g_autofree int32_t *first = g_new(int32_t, K + 1);
    st_layer_weights(m, ST_SPLIT_FLOPS, layer);
    for (int u = 0, i = 0; u < U; u++)
      for (int end = u + 1 < U ? g_array_index(units, int32_t, u + 1) : m->n_layers; i < end; i++)
        unit[u] += layer[i];
    st_stages_split(unit, U, K, first);
    for (int k = 0; k < K; k++)
      size[k] = first[k + 1] - first[k];
    return TRUE;
  }
  if ((U + accounted) % K != 0)
    return st_strategy_refuse(error, "--pipeline-stages %d x --virtual-stages %d = %d model chunks do not "
                       "divide the model's %d transformer layers%s evenly (Megatron-LM's split)"
                       "%s",
                p, v, K, U, accounted ? " with the embedding and loss counted" : "",
                accounted ? "" : EVEN_HINT);
  int per = (U + accounted) / K;
  for (int k = 0; k < K; k++)
    size[k] = per;
  size[0] -= o->account_for_embedding ? 1 : 0;
  size[K - 1] -= o->account_for_loss ? 1 : 0;
  if (size[0] < 1 || size[K - 1] < 1)
    return st_strategy_refuse(error, "with the embedding and the loss counted as layers, a chunk of %d holds "
                       "no transformer layer (stagger needs one per chunk)",
                per);
  return TRUE;
}

int32_t *
st_megatron_split(const StModel *m, int p, int v, const StOptions *o, int *n_units,
                  int *stage_units, GError **error)
{
  g_autoptr(GArray) units = unit_firsts(m);
  int K = p * v;
  *n_units = (int)units->len;
  g_autofree int *size = g_new(int, K);
  if (!chunk_sizes(m, units, p, v, o, size, error))
    return NULL;
  for (int s = 0; stage_units != NULL && s < p; s++) {
    stage_units[s] = 0;
    for (int k = s; k < K; k += p)
      stage_units[s] += size[k];
  }
  int32_t *first = g_new(int32_t, K + 1);
  for (int k = 0, u = 0; k < K; u += size[k], k++)
    first[k] = g_array_index(units, int32_t, u);
  first[K] = m->n_layers;
  return first;
}
