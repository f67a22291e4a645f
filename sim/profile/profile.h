/* profile.h: measured costs, and their lookup with interpolation.
 *
 * A profile file (traces/profiles/DEVICE/NAME.json) holds what one device measured:
 *
 *   {"format": "stagger-profile", "version": 1,
 *    "device": "H100-SXM", "driver": "...", "cuda": "...", "date": "2026-11-21",
 *    "source": "stagger profile" | "imported from ...",
 *    "layers": [ {"name": "conv1", "signature": "conv2d{...}[3,224,224]",
 *                 "pass": "fwd", "x": 32, "time_us": 812.5, "spread_us": 3.1}, ... ],
 *    "links":  [ {"collective": "all_reduce", "link": "intra_node", "ranks": 8,
 *                 "bytes": 1048576, "time_us": 40.2}, ... ]}
 *
 * A layer entry is keyed by the layer's name or its signature (type, shape
 * and hyperparameters, so entries carry over between models that share a
 * layer), the pass, and x: the batch size for layer passes, the number of
 * elements for optimizer / compress / expand entries (whose name is then the
 * optimizer or kernel name: "adam", "sgd", "compress"). `spread_us` (optional)
 * is the measured spread (p90 - p10).
 *
 * Lookup order for a layer: entries under its name, then under its signature.
 * x exactly profiled: PROFILED. Otherwise linear interpolation between the two
 * nearest profiled x (linear extrapolation beyond them, never below
 * proportional scaling from the nearest point): INTERPOLATED. When only
 * "fwd+bwd" was measured, fwd and bwd are split from it by the layer's FLOP
 * ratio: INTERPOLATED. Links: exact (collective, link, ranks) with bytes
 * interpolated linearly between measured sizes.
 *
 * A profile loaded from a directory merges every *.json below it. Entries for
 * other devices are kept; lookups name the device.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "base/kinds.h"

#define ST_PROFILE_ERROR (st_profile_error_quark())
GQuark st_profile_error_quark(void);

typedef struct StProfile StProfile;

StProfile *st_profile_new(void);
/* A file, or a directory whose *.json files (recursively) are merged. */
StProfile *st_profile_load(const char *path, GError **error);
gboolean st_profile_merge_file(StProfile *profile, const char *path, GError **error);
void st_profile_free(StProfile *profile);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StProfile, st_profile_free)

/* Device facts written into a saved profile; all borrowed strings, copied. */
void st_profile_set_device(StProfile *profile, const char *device, const char *driver,
                           const char *cuda, const char *date, const char *source);

/* Records one measurement. `name` or `signature` may be NULL (not both). */
void st_profile_add_layer(StProfile *profile, const char *device, const char *name,
                          const char *signature, StPass pass, int64_t x, double time_ns,
                          double spread_ns);
void st_profile_add_link(StProfile *profile, const char *device, StCollKind coll,
                         StLinkClass link, int ranks, int64_t bytes, double time_ns);

/* Writes the entries of `device` (NULL: the device set by set_device). */
gboolean st_profile_save(const StProfile *profile, const char *path, GError **error);

/* Layer pass time on `device`. `fwd_fraction` (fwd FLOPs / fwd+bwd FLOPs)
 * splits fwd+bwd entries. FALSE (no error) when nothing matches. */
gboolean st_profile_layer_time(const StProfile *profile, const char *device, const char *name,
                               const char *signature, StPass pass, int64_t x,
                               double fwd_fraction, double *time_ns, StCostSource *source);

/* Collective time on `device` for `ranks` over `link`, or FALSE. */
gboolean st_profile_link_time(const StProfile *profile, const char *device, StCollKind coll,
                              StLinkClass link, int ranks, int64_t bytes, double *time_ns,
                              StCostSource *source);

/* Counts, for messages ("12 layer entries, 40 link entries for H100-SXM"). */
int st_profile_n_layer_entries(const StProfile *profile);
int st_profile_n_link_entries(const StProfile *profile);
/* The devices the entries name, sorted, NULL-terminated. Transfer full. */
char **st_profile_devices(const StProfile *profile);
