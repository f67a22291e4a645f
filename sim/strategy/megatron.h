/* megatron.h: what strategy_megatron.c shares with its estimate before
 * building (megatron_estimate.c): the layout a configuration gets, checked
 * as build() checks it, without building anything. */
#pragma once

#include "strategy/strategy.h"

typedef struct {
  int t, p, d, v, e;  /* tensor, pipeline, data, chunks per stage, expert-parallel sizes */
  int32_t *first;     /* [p v + 1]: model chunk k holds layers [first[k], first[k + 1]) */
  StModel *model;     /* one tensor rank's model (vocabulary padded), owned */
} StMegatronShape;

/* Fails with build()'s message when build() would refuse the options. */
gboolean st_megatron_shape(const StStrategyInput *input, StMegatronShape *out, GError **error);
void st_megatron_shape_clear(StMegatronShape *shape);

/* StStrategy.estimate of megatron (megatron_estimate.c). */
gboolean st_megatron_estimate(const StStrategyInput *input, StEstimate *estimate,
                              GError **error);
