/* profile_private.h: what the profiler's files share (exec/profile_*.c;
 * the contract is in profiler.h):
 *   profile_device.c   the open device, its streams, timing, progress
 *   profile_layers.c   one layer pass on its own buffers (a bench)
 *   profile_kernels.c  st_profiler_model: layers, optimizer, sparse, copies
 *   profile_sharing.c  kernels run together, the fill they give
 *   profile_links.c    st_profiler_links: local and NCCL
 *   profile_lockstep.c threads in lockstep, for the backends' replay
 */
#pragma once

#include <glib.h>

#include "exec/device.h"
#include "exec/exec.h"
#include "exec/profiler.h"

/* Streams of a profiling session, kept for its whole life: cuBLAS keeps a
 * handle per stream for the life of the process (kernels/cuda/gemm.cu), so
 * streams are made once, never one per measurement. */
enum {
  PROF_STREAMS = 4,      /* equal priority (0): the alone runs use stream 0 */
  PROF_STREAM_HIGH = 4,  /* priority 1, for the pair with priorities */
  PROF_N_STREAMS = 5,
};

typedef struct {
  const StProfilerOptions *o;
  const StDeviceBackend *b;
  StExecDevice *dev;
  const StKernels *k;
  StKDtype dt;             /* layers' storage type: fp32, or bf16 under mixed */
  void *streams[PROF_N_STREAMS];
  StDeviceFacts facts;
  char *device_name;       /* what entries name */
  int done, total;         /* progress */
  StProfilerReport *report;
} ProfDev;

/* Opens the backend the options name (auto: cuda when a GPU answers), GPU
 * `gpu`, and its streams. */
gboolean prof_open(ProfDev *d, const StProfilerOptions *o, int gpu, StProfilerReport *report,
                   GError **error);
void prof_close(ProfDev *d);
/* Sets the profile's device facts (name, driver, CUDA runtime, today's
 * date, machine, precision). */
void prof_name_profile(ProfDev *d, StProfile *profile);

/* Parts of one measurement at most: kernels on the session's streams, or
 * the members of a link case here. */
#define PROF_MAX_PARTS 64

/* The median over the timed runs of each part's end and of the span (the
 * last end), and the spread (p90 - p10) of the span, in ns. */
typedef struct {
  double span_ns, spread_ns;
  double end_ns[PROF_MAX_PARTS];
} ProfTiming;

gboolean prof_measure(ProfDev *d, const StReplayPart *parts, int n, gboolean graph,
                      ProfTiming *t, GError **error);
/* A measurement is done: the progress callback hears of it. */
void prof_step(ProfDev *d, const char *what);
/* Device memory of `bytes` (zeroed), or FALSE with the error naming `what`. */
gboolean prof_alloc(ProfDev *d, void **ptr, size_t bytes, const char *what, GError **error);
/* Copies `bytes` from the host to device memory, and waits for it. */
gboolean prof_upload(ProfDev *d, void *dst, const void *src, size_t bytes, GError **error);
/* `n` floats in [-scale, scale] from `seed`, as `dt` on the device. */
gboolean prof_upload_random(ProfDev *d, void *dst, size_t n, float scale, uint64_t seed,
                            GError **error);
/* Powers of 4 times `min` up to `max` (and `max` itself). */
GArray *prof_sizes(int64_t min, int64_t max);
/* A note for the user (printf-like). */
void prof_note(ProfDev *d, const char *format, ...) G_GNUC_PRINTF(2, 3);

/* ---- profile_layers.c ---- */

typedef struct ProfLayer ProfLayer;

/* Buffers for layer `i` of `m` at `batch`, filled with data; FALSE when
 * they do not fit (the error says what). */
ProfLayer *prof_layer_new(ProfDev *d, const StModel *m, int i, int batch, GError **error);
void prof_layer_free(ProfLayer *l);
/* One forward, then one backward, run directly: they make what backward
 * reads and size the scratch arena, which graph capture cannot allocate. */
gboolean prof_layer_prepare(ProfLayer *l, GError **error);
/* Replay bodies (device.h): one forward / one backward of the bench. */
gboolean prof_layer_fwd(gpointer bench, void *stream, GError **error);
gboolean prof_layer_bwd(gpointer bench, void *stream, GError **error);

/* ---- profile_sharing.c ---- */

/* Relative slowdown below which k copies count as not slowed at all: the
 * timings' own noise. */
#define PROF_NO_SLOWDOWN 0.05

/* Runs a layer pass together with copies of itself (`benches`: PROF_STREAMS
 * prepared benches of one layer and batch, benches[0] the one measured
 * alone), records the sharing measurements and sets the fill on the entries
 * of every layer in `names` (same signature). */
gboolean prof_sharing(ProfDev *d, ProfLayer *const *benches, const StLayer *layer,
                      const GPtrArray *names, StPass pass, int batch, double alone_ns,
                      StProfile *profile, GError **error);
