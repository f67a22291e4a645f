/* megatron.h: what strategy_megatron.c shares with its estimate before
 * building (megatron_estimate.c): the layout a configuration gets, checked
 * as build() checks it, without building anything. */
#pragma once

#include "strategy/strategy.h"

typedef struct {
  int t, p, d, v, e;  /* tensor, pipeline, data, chunks per stage, expert-parallel sizes; d
                         counts the context-parallel ranks too (the dp-cp group gradients are
                         reduced and ZeRO shards over) */
  int32_t *first;     /* [p v + 1]: model chunk k holds layers [first[k], first[k + 1]) */
  StModel *model;     /* one tensor (and context) rank's model (vocabulary padded), owned */
  int c;              /* context-parallel size */
} StMegatronShape;

/* --layer-split: how megatron's model chunks share the transformer layers
 * when no uneven option is given. */
typedef enum {
  ST_LAYER_SPLIT_EVEN = 0, /* Megatron-LM's: the same number each */
  ST_LAYER_SPLIT_BALANCED, /* least largest forward + backward FLOPs per chunk */
} StLayerSplit;

/* The first layer of each of the p v model chunks of `model` (one tensor
 * rank's), [p v + 1] with [p v] = n_layers, as Megatron-Core splits them
 * under the options (--first-stage-layers, --last-stage-layers,
 * --account-for-embedding, --account-for-loss, --layer-split;
 * megatron_split.c); *n_units: the model's transformer layers;
 * stage_units ([p], may be NULL): each stage's. NULL with Megatron-LM's
 * reason when it refuses the split. Transfer full. */
int32_t *st_megatron_split(const StModel *model, int p, int v, const StOptions *options,
                           int *n_units, int *stage_units, GError **error);

/* --context-parallel's conditions on the whole model (megatron_cp.c):
 * a token model, its sequence a multiple of 2c (the two-chunk split; under
 * sequence parallelism of 2 c t), a layer with attention, and for
 * all-to-all heads and kv heads per tensor rank divisible by c. FALSE with
 * the reason. */
gboolean st_megatron_cp_check(const StModel *model, const StOptions *options, GError **error);

/* Fails with build()'s message when build() would refuse the options. */
gboolean st_megatron_shape(const StStrategyInput *input, StMegatronShape *out, GError **error);
void st_megatron_shape_clear(StMegatronShape *shape);

/* StStrategy.estimate of megatron (megatron_estimate.c). */
gboolean st_megatron_estimate(const StStrategyInput *input, StEstimate *estimate,
                              GError **error);
