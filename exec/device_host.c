/* device_host.c: the "host" device backend. Work runs at once in the calling
 * thread on the reference kernels; an event is the time it was recorded; the
 * walker's threads already order the work, so waits are no-ops. Memory is the
 * process's (the pool's own count is the measurement). */
#include <time.h>

#include "exec/device.h"
#include "exec/exec.h"

typedef struct {
  int64_t t_ns;
} HostEvent;

static int64_t
now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static StExecDevice *
host_open(int gpu, GError **error)
{
  StExecDevice *dev = g_new0(StExecDevice, 1);
  dev->backend = &st_device_host;
  dev->gpu = gpu;
  return dev;
}

static void
host_close(StExecDevice *dev)
{
  g_free(dev);
}

static char *
host_describe(StExecDevice *dev)
{
  return g_strdup_printf("host: %u CPU cores, reference kernels", g_get_num_processors());
}

static const StKernels *
host_kernels(StExecDevice *dev)
{
  return st_kernels_host();
}

static void *
host_stream_new(StExecDevice *dev, int priority, GError **error)
{
  /* Streams need no state on the host; a distinct pointer keeps them apart. */
  return g_new0(int, 1);
}

static void
host_stream_free(StExecDevice *dev, void *stream)
{
  g_free(stream);
}

static void *
host_event_record(StExecDevice *dev, void *stream, GError **error)
{
  HostEvent *e = g_new(HostEvent, 1);
  e->t_ns = now_ns();
  return e;
}

static void
host_event_free(StExecDevice *dev, void *event)
{
  g_free(event);
}

static gboolean
host_stream_wait(StExecDevice *dev, void *stream, void *event, GError **error)
{
  return TRUE;
}

static gboolean
host_event_time(StExecDevice *dev, void *origin, void *event, int64_t *ns, GError **error)
{
  *ns = ((HostEvent *)event)->t_ns - ((HostEvent *)origin)->t_ns;
  return TRUE;
}

static gboolean
host_stream_sync(StExecDevice *dev, void *stream, GError **error)
{
  return TRUE;
}

static int64_t
host_used_bytes(StExecDevice *dev)
{
  return -1;
}

static const char *
host_status_text(int status)
{
  return status == ST_K_EINVAL ? "invalid argument" : "host kernel error";
}

const StDeviceBackend st_device_host = {
  .name = "host",
  .summary = "CPU threads running the reference kernels (no GPU needed)",
  .open = host_open,
  .close = host_close,
  .describe = host_describe,
  .kernels = host_kernels,
  .stream_new = host_stream_new,
  .stream_free = host_stream_free,
  .event_record = host_event_record,
  .event_free = host_event_free,
  .stream_wait = host_stream_wait,
  .event_time = host_event_time,
  .stream_sync = host_stream_sync,
  .used_bytes = host_used_bytes,
  .status_text = host_status_text,
};
