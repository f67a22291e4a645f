/* model_inputs.h (private to sim/model): the `inputs` of a layer, which
 * turn a model's list of layers into a DAG of branches (model.h).
 *
 * A layer without `inputs` reads the previous layer. With them, it reads
 * the named earlier layers: one (a branch starting from a fork) or several,
 * whose outputs it takes concatenated on the first axis (a `concat` where
 * branches meet; every other axis must agree). The list stays in execution
 * order, so every layer comes after what it reads.
 */
#pragma once

#include <cjson/cJSON.h>

#include "model/model.h"

/* Reads layer->inputs from `obj`'s "inputs" (absent: none), resolving names
 * through `seen` (name -> index of the layers before it). */
gboolean st_model_inputs_read(StLayer *layer, const cJSON *obj, GHashTable *seen,
                              GError **error);

/* The input shape of layer i, every layer before it derived. */
gboolean st_model_inputs_shape(const StModel *model, int i, StShape *out, GError **error);

/* Copies src's inputs into dst (whose fields were copied bytewise). */
void st_model_inputs_copy(StLayer *dst, const StLayer *src);

/* Adds "inputs" (names) to a layer's JSON object when it has them. */
void st_model_inputs_to_json(const StModel *model, const StLayer *layer, cJSON *obj);
