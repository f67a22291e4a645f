/* device.h: device backends, one file each behind one table (exec/device_*.c):
 * "host" and "cuda". The walker (walker.c) drives every backend the same way.
 *
 * Streams and events follow CUDA: work enqueued on a stream runs in order; an
 * event recorded on a stream completes when the work before it does; a stream
 * made to wait on an event runs later work only after it. On the host, work
 * runs at once in the calling thread, so events are just timestamps and waits
 * are no-ops (the walker already ordered the threads).
 */
#pragma once

#include <glib.h>

#include "kernels/kernels.h"

/* A piece of work that a replay runs again and again (the profiler's
 * kernels, exec/profiler.h): it enqueues its work on `stream` (on the host:
 * does it) and returns FALSE with `error` set when it cannot. */
typedef gboolean (*StReplayBody)(gpointer data, void *stream, GError **error);

typedef struct {
  void *stream;      /* the part's own stream (stream_new), borrowed */
  StReplayBody body;
  gpointer data;     /* borrowed */
} StReplayPart;

/* What a profile file names about the device (all transfer full; NULL when
 * the backend does not know). */
typedef struct {
  char *name;        /* "NVIDIA H100 80GB HBM3", or "host" */
  char *driver;      /* the NVIDIA kernel driver "580.65.06" (else the CUDA driver API) */
  char *runtime;     /* the CUDA runtime "13.0" */
  char *machine;     /* one line: "cuda: NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB), driver
                        13.0, runtime 13.0", "host: 2 CPU cores (AMD EPYC), reference kernels" */
} StDeviceFacts;

static inline void
st_device_facts_clear(StDeviceFacts *facts)
{
  g_clear_pointer(&facts->name, g_free);
  g_clear_pointer(&facts->driver, g_free);
  g_clear_pointer(&facts->runtime, g_free);
  g_clear_pointer(&facts->machine, g_free);
}

/* An open device: the backend that opened it and its own state. */
typedef struct StExecDevice {
  const struct StDeviceBackendS *backend;
  int gpu;
  gpointer impl; /* the backend's */
} StExecDevice;

typedef struct StDeviceBackendS {
  const char *name;
  const char *summary;
  /* What the schedule's stream priorities become here, one line (reports
   * of multiplexed runs say it). */
  const char *priorities;
  /* Opens GPU `gpu` (ignored on the host). Fails with ST_EXEC_ERROR_NO_DEVICE
   * when the backend is not built in or no device answers. */
  StExecDevice *(*open)(int gpu, GError **error);
  void (*close)(StExecDevice *dev);
  /* "NVIDIA H100 80GB HBM3, driver 580.1, CUDA 13.0" or "host: 2 cores". Transfer full. */
  char *(*describe)(StExecDevice *dev);
  const StKernels *(*kernels)(StExecDevice *dev);
  /* Streams; priority: higher runs first, as in the schedule. */
  void *(*stream_new)(StExecDevice *dev, int priority, GError **error);
  void (*stream_free)(StExecDevice *dev, void *stream);
  /* An event recorded on `stream` now. Transfer full (event_free). */
  void *(*event_record)(StExecDevice *dev, void *stream, GError **error);
  void (*event_free)(StExecDevice *dev, void *event);
  gboolean (*stream_wait)(StExecDevice *dev, void *stream, void *event, GError **error);
  /* Whether the work before the event has completed, without waiting (the
   * multiplexer's view of the foreground, exec/mux.c). */
  gboolean (*event_done)(StExecDevice *dev, void *event);
  /* Waits for the event, then its time in ns since `origin` (another event). */
  gboolean (*event_time)(StExecDevice *dev, void *origin, void *event, int64_t *ns,
                         GError **error);
  gboolean (*stream_sync)(StExecDevice *dev, void *stream, GError **error);
  /* Device memory in use now by everyone (cudaMemGetInfo), or -1 when unknown. */
  int64_t (*used_bytes)(StExecDevice *dev);
  /* The message of a kernel status code from this backend. Static. */
  const char *(*status_text)(int status);

  /* ---- for the profiler (exec/profiler.h) ---- */
  void (*facts)(StExecDevice *dev, StDeviceFacts *facts);
  /* Host memory that copies may read and write asynchronously (page-locked
   * on CUDA, so that a copy from it can be timed and captured). NULL when
   * out of memory. */
  void *(*host_alloc)(StExecDevice *dev, size_t bytes);
  void (*host_free)(StExecDevice *dev, void *ptr);
  /* Runs `n` parts together, `warmup` times untimed, then `runs` times
   * timed. Every run starts the parts together once every part of the
   * previous run has ended; times_ns[run * n + part] is the time from that
   * common start to the part's end. A part's stream serves that part only.
   *  - graph TRUE (kernels): the cuda backend calls each body for the
   *    warm-up, then once more under stream capture into a CUDA graph, and
   *    replays the graphs with events around them (the body must enqueue
   *    the same work each call, allocate nothing and not wait on other
   *    parts or on the host);
   *  - graph FALSE (communication, copies that wait for the host): bodies
   *    are called for every run, each part from a thread of its own when
   *    n > 1, so that parts may meet one another (the local comm backend's
   *    ranks); cuda events time them.
   * The host backend always calls the bodies (parts on threads of their own
   * when n > 1) and times them with the monotonic clock from when the first
   * thread began the run (threads released together wake some microseconds
   * apart); its streams have no priorities. */
  gboolean (*replay)(StExecDevice *dev, const StReplayPart *parts, int n, gboolean graph,
                     int warmup, int runs, int64_t *times_ns, GError **error);
} StDeviceBackend;

/* The backend named `name` ("host", "cuda"), loading its module when it is
 * one (exec/module.h): NULL with ST_EXEC_ERROR_NO_DEVICE when the module is
 * not built, missing or unloadable, ST_EXEC_ERROR_UNSUPPORTED for an unknown
 * name. Borrowed. */
const StDeviceBackend *st_device_backend_load(const char *name, GError **error);

/* Opens GPU `gpu` of backend `name`, or for "auto" the cuda backend's when
 * it loads and a device answers, else the host. The device's `backend` is
 * the table that opened it. Transfer full (dev->backend->close). */
StExecDevice *st_device_open(const char *name, int gpu, GError **error);

/* The built-in backend (device_host.c); cuda lives in its module
 * (device_cuda.c, libstagger-cuda.so). */
extern const StDeviceBackend st_device_host;
