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
 * Measured profiles (`stagger profile`, exec/profiler.h) add, all optional so
 * that every older file still loads:
 *   - top level: "machine" (what measured: the backend's description) and
 *     "precision" (fp32 or mixed: the storage type the layers ran in);
 *   - layer entries: "fill" in (0, 1], the fraction of the device the kernel
 *     fills alone, inferred from the sharing measurements (the share
 *     models' SM occupancy, sim/cost/share_*.c), with
 *     "fill_bound": true when the measurement only bounds it from above;
 *   - link entries: "spread_us", and "algbw_GBps" / "busbw_GBps" as
 *     nccl-tests defines them (derived from bytes and time_us: written by
 *     save, ignored by the loader); "collective": "send_recv" for one send
 *     matched by one receive between 2 ranks (busbw = algbw);
 *   - "copies": [ {"kind": "h2d", "bytes": 1048576, "time_us": 80.1,
 *                  "spread_us": 0.4}, ... ]: memory copies (d2d, h2d, d2h);
 *   - "sharing": [ {"name": "fc1", "signature": "...", "pass": "fwd", "x": 8,
 *                   "streams": 2, "priorities": false, "alone_us": 10.0,
 *                   "end_us": [19.8, 20.1]}, ... ]: kernels run together, one
 *     per stream (with priorities: stream 0 high, the others low), each one's
 *     end from their common start: the raw data a "fill" comes from.
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

/* ---- measured profiles (profile_measure.c) --------------------------------- */

/* What measured, written into a saved profile beside set_device's facts:
 * `machine` ("cuda: NVIDIA H100 80GB HBM3 (sm_90, ...)", "host: 2 CPU
 * cores ...") and `precision` ("fp32", "mixed"). Borrowed, copied; NULL
 * leaves one out. */
void st_profile_set_machine(StProfile *profile, const char *machine, const char *precision);

/* Sets the fill of the layer entry with exactly these keys (it must exist:
 * FALSE otherwise). `fill` in (0, 1]; `bound`: the measurement only shows
 * fill <= this value. */
gboolean st_profile_set_layer_fill(StProfile *profile, const char *device, const char *name,
                                   const char *signature, StPass pass, int64_t x, double fill,
                                   gboolean bound);

/* The fill of a layer pass on `device` (name first, then signature; a
 * recompute is the caller's business): linear between profiled x, the
 * nearest profiled value beyond them, clamped to (0, 1]. FALSE (no error)
 * when no entry of that pass carries a fill. */
gboolean st_profile_layer_fill(const StProfile *profile, const char *device, const char *name,
                               const char *signature, StPass pass, int64_t x, double *fill);

/* One point-to-point transfer (a send matched by a receive) of `bytes`
 * between 2 ranks over `link`, and its lookup (bytes interpolated as links
 * are). Written as a link entry with "collective": "send_recv". */
void st_profile_add_p2p(StProfile *profile, const char *device, StLinkClass link, int64_t bytes,
                        double time_ns, double spread_ns);
gboolean st_profile_p2p_time(const StProfile *profile, const char *device, StLinkClass link,
                             int64_t bytes, double *time_ns);
/* st_profile_add_link with the measurement's spread (p90 - p10). */
void st_profile_add_link_measured(StProfile *profile, const char *device, StCollKind coll,
                                  StLinkClass link, int ranks, int64_t bytes, double time_ns,
                                  double spread_ns);

/* A memory copy of `bytes`, and its lookup: linear between measured sizes,
 * beyond them linear from the two nearest (never below proportional
 * scaling), as links. The simulator does not read them yet: a COPY op
 * could take its time from here instead of the PCIe / memory model. */
void st_profile_add_copy(StProfile *profile, const char *device, StCopyKind kind, int64_t bytes,
                         double time_ns, double spread_ns);
gboolean st_profile_copy_time(const StProfile *profile, const char *device, StCopyKind kind,
                              int64_t bytes, double *time_ns);

/* One sharing measurement (see the format above); all borrowed. */
typedef struct {
  const char *name;       /* may be NULL (not with signature) */
  const char *signature;  /* may be NULL */
  StPass pass;
  int64_t x;
  int streams;            /* kernels run together, one per stream, >= 2 */
  gboolean priorities;    /* stream 0 had the higher priority; else all equal */
  double alone_ns;        /* median time of one kernel alone */
  const double *end_ns;   /* [streams]: median end of each from their common start */
} StProfileSharing;

/* Adds (or replaces: same keys, streams and priorities) a measurement. */
void st_profile_add_sharing(StProfile *profile, const char *device, const StProfileSharing *m);

/* The priority leak of a layer pass at exactly x (name first, then
 * signature), from its two-stream measurements: s_eq, the mean slowdown of
 * two copies at equal priority, and s_hi, the high-priority copy's beside a
 * low-priority one; leak = (s_hi - 1) / (s_eq - 1), clamped to [0, 1]: the
 * share of the neighbour's effect that priority leaves (the "interference"
 * share model's parameter). FALSE when either is missing or the copies did
 * not slow each other measurably (s_eq < 1.05: nothing to leak). */
gboolean st_profile_layer_leak(const StProfile *profile, const char *device, const char *name,
                               const char *signature, StPass pass, int64_t x, double *leak);

int st_profile_n_copy_entries(const StProfile *profile);
int st_profile_n_sharing_entries(const StProfile *profile);
/* The devices the entries name, sorted, NULL-terminated. Transfer full. */
char **st_profile_devices(const StProfile *profile);
/* What measured it and when, as its file says ("host: 2 CPU cores (AMD
 * EPYC), reference kernels", "2026-11-21"); NULL when not said. Borrowed. */
const char *st_profile_machine(const StProfile *profile);
const char *st_profile_date(const StProfile *profile);
