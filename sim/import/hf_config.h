/* hf_config.h: a Hugging Face transformers config.json, read strictly.
 *
 * Every top-level key of the file ends in one of three places:
 *
 *   - read by the architecture's reader (hf_<arch>.c) because it changes
 *     what stagger computes (widths, heads, layers, tying, experts, ...);
 *   - read and checked but without effect on costs: numerics only (norm
 *     epsilon, rope base, attention scaling), marked with hf_numerics();
 *   - in HF_IGNORED (hf_config.c, listed in docs/MODELS.md): metadata,
 *     tokenizer ids, generation and inference settings.
 *
 * hf_config_finish() fails on any other key, naming it: stagger cannot know
 * whether a key it has never seen changes the computation. A key whose value
 * is JSON null counts as absent (transformers writes null for "default").
 * Errors are prefixed with the file's path.
 *
 * Ownership: an HfConfig owns its parsed tree; strings it returns are
 * borrowed from it.
 */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdint.h>

typedef struct HfConfig HfConfig;

/* Parses `path`. Transfer full. */
HfConfig *hf_config_load(const char *path, GError **error);
void hf_config_free(HfConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HfConfig, hf_config_free)

const char *hf_config_path(const HfConfig *config);

/* Getters: mark `key` as read. With `required` FALSE an absent (or null)
 * key leaves *out untouched (pre-load the default) and returns TRUE. */
gboolean hf_get_int(HfConfig *config, const char *key, gboolean required, int64_t min,
                    int64_t max, int64_t *out, GError **error);
gboolean hf_get_double(HfConfig *config, const char *key, gboolean required, double min,
                       double *out, GError **error);
gboolean hf_get_bool(HfConfig *config, const char *key, gboolean required, gboolean *out,
                     GError **error);
gboolean hf_get_string(HfConfig *config, const char *key, gboolean required, const char **out,
                       GError **error);
/* The raw item (NULL when absent or null), marked as read. Borrowed. */
const cJSON *hf_get_item(HfConfig *config, const char *key);

/* A string key whose value must be one of `allowed` (NULL-terminated);
 * `why` completes the error ("stagger's transformer_block runs GELU"). */
gboolean hf_get_choice(HfConfig *config, const char *key, gboolean required,
                       const char *const *allowed, const char *why, const char **out,
                       GError **error);

/* Keys that change the numbers a model computes but not its costs or
 * memory (epsilons, rope bases, scaling switches): checked to be a number
 * or a boolean (or null) and otherwise without effect. NULL-terminated. */
gboolean hf_numerics(HfConfig *config, const char *const *keys, GError **error);

/* A flag that must be false (or absent) because stagger has nothing that
 * models it being true: `what` says what that would be. */
gboolean hf_require_false(HfConfig *config, const char *key, const char *what, GError **error);

/* A dropout probability key (0 when absent): *on becomes TRUE when > 0. */
gboolean hf_get_dropout(HfConfig *config, const char *key, gboolean *on, GError **error);

/* Fails on the first key neither read nor ignored, naming it and the
 * architecture ("llama"). */
gboolean hf_config_finish(HfConfig *config, const char *arch, GError **error);
