/* model_private.h: what the loader (model_load.c) and the builder
 * (model_build.c) share, private to sim/model/. Both read layers into an
 * StModel (names, types, attrs, tp / sp / cp set) and then derive it the
 * same way, so a model built in code is the one its file would give.
 */
#pragma once

#include "model/model.h"

/* Layers after expansion: with the per-layer bounds, totals stay in int64. */
#define ST_MODEL_MAX_LAYERS 1000000

/* Derives every layer in order (types, attrs, tp and sp set), each on the
 * previous one's output, then the totals. Errors name the layer, not the
 * origin. */
gboolean st_model_derive_all(StModel *model, GError **error);

/* The layer's signature (StLayer.signature) from its type, attrs, input
 * shape, tp, sp and cp. Transfer full. (model.c) */
char *st_layer_signature(const StLayer *layer);
