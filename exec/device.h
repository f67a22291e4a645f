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

/* An open device: the backend that opened it and its own state. */
typedef struct StExecDevice {
  const struct StDeviceBackendS *backend;
  int gpu;
  gpointer impl; /* the backend's */
} StExecDevice;

typedef struct StDeviceBackendS {
  const char *name;
  const char *summary;
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
  /* Waits for the event, then its time in ns since `origin` (another event). */
  gboolean (*event_time)(StExecDevice *dev, void *origin, void *event, int64_t *ns,
                         GError **error);
  gboolean (*stream_sync)(StExecDevice *dev, void *stream, GError **error);
  /* Device memory in use now by everyone (cudaMemGetInfo), or -1 when unknown. */
  int64_t (*used_bytes)(StExecDevice *dev);
  /* The message of a kernel status code from this backend. Static. */
  const char *(*status_text)(int status);
} StDeviceBackend;

/* NULL-terminated: host, cuda. */
const StDeviceBackend *const *st_device_backends(void);
const StDeviceBackend *st_device_backend_find(const char *name);

/* The backends' tables (device_host.c, device_cuda.c or device_cuda_stub.c). */
extern const StDeviceBackend st_device_host;
extern const StDeviceBackend st_device_cuda;
