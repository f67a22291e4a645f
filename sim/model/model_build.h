/* model_build.h: a model built in code (model_build.c), for importers that
 * would otherwise write a model's JSON only to read it back.
 *
 * st_model_new gives a model with no layers yet (transfer full);
 * st_model_add_layer appends a layer of type `type` whose attrs keys[i]
 * take values[i] (i < n; the others their defaults), checked as the loader
 * checks a file's layer (a key the type has, a value in its range);
 * st_model_finish checks that names are unique and derives every layer and
 * the totals. The result is the model st_model_from_json gives for the
 * equivalent file ({"name", "input", "dtype", "layers"} without repeats,
 * inputs, tensor or context parallelism). Errors name the layer ("layer 4
 * 'x': key 'fwd_flops': ..."), not the origin: the caller prefixes it.
 */
#pragma once

#include "model/model.h"

StModel *st_model_new(const char *name, const StShape *input, StDtype dtype);
gboolean st_model_add_layer(StModel *model, const char *name, const char *type,
                            const char *const *keys, const int64_t *values, int n,
                            GError **error);
gboolean st_model_finish(StModel *model, GError **error);
