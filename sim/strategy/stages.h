/* stages.h: cutting a model into contiguous stages of balanced weight.
 *
 * Cyclic DP and pipeline parallelism both split the layers into S stages,
 * each a contiguous block. The weight of a layer is what the caller balances:
 * FLOPs, parameters, memory or time (the last two depend on the batch, the
 * precision and the cost model, so the strategy computes them). The split
 * minimizes the heaviest stage exactly (dynamic programming, O(S * L^2) for L
 * layers), ties broken towards earlier cuts, so it is deterministic.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "model/model.h"

/* Weights a strategy can ask for without a cost model. */
typedef enum {
  ST_SPLIT_FLOPS = 0, /* forward + backward FLOPs per sample */
  ST_SPLIT_PARAMS,    /* parameters */
} StSplitBy;

/* weights[i] for each layer of `model` ([n_layers], caller-allocated). */
void st_layer_weights(const StModel *model, StSplitBy by, double *weights);

/* Cuts n weights into `n_stages` contiguous non-empty stages minimizing the
 * largest stage sum; first[s] is stage s's first layer, first[n_stages] = n.
 * Requires 1 <= n_stages <= n. */
void st_stages_split(const double *weights, int n, int n_stages, int32_t *first);
