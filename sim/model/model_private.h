/* model_private.h: what the loader (model_load.c) and the builder
 * (model_build.c) share, private to sim/model/. Both read layers into an
 * StModel (names, types, attrs, tp / sp / cp set) and then derive it the
 * same way, so a model built in code is the one its file would give.
 */
#pragma once

#include "model/layer_type.h"
#include "model/model.h"

/* Layers after expansion: with the per-layer bounds, totals stay in int64. */
#define ST_MODEL_MAX_LAYERS 1000000

/* Derives every layer in order (types, attrs, tp and sp set), each on the
 * previous one's output, then the totals. Errors name the layer, not the
 * origin. */
gboolean st_model_derive_all(StModel *model, GError **error);

/* Fails with a message in the model domain (ST_ERROR_INVALID). (model_load.c) */
gboolean st_model_fail(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);

/* The integers attr `spec` may take: a choice's index 0 .. choices - 1, a
 * flag's 0 or 1, else spec min .. max (ST_ATTR_MAX when max is 0), as the
 * loader reads a file's and the builder takes a caller's. (model_load.c) */
void st_attr_bounds(const StAttrSpec *spec, int64_t *lo, int64_t *hi);

/* The layer's signature (StLayer.signature) from its type, attrs, input
 * shape, tp, sp and cp. Transfer full. (model.c) */
char *st_layer_signature(const StLayer *layer);
