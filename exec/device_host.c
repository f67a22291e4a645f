/* device_host.c: the "host" device backend. Work runs at once in the calling
 * thread on the reference kernels; an event is the time it was recorded; the
 * walker's threads already order the work, so waits are no-ops. Memory is the
 * process's (the pool's own count is the measurement). A replay (the
 * profiler's) times each call of a body with the monotonic clock; parts of a
 * run run on threads of their own, in lockstep (profile_lockstep.h). */
#include <string.h>
#include <time.h>

#include "exec/device.h"
#include "exec/exec.h"
#include "exec/profile_lockstep.h"

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
host_event_done(StExecDevice *dev, void *event)
{
  return TRUE; /* the work ran before the event was recorded */
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

/* "AMD EPYC 7B13" from /proc/cpuinfo's first "model name", or NULL. */
static char *
cpu_model(void)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/cpuinfo", &text, NULL, NULL))
    return NULL;
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (char **l = lines; *l != NULL; l++) {
    if (!g_str_has_prefix(*l, "model name"))
      continue;
    const char *colon = strchr(*l, ':');
    return colon != NULL ? g_strstrip(g_strdup(colon + 1)) : NULL;
  }
  return NULL;
}

/* A host profile names its device "host"; the machine is described. */
static void
host_facts(StExecDevice *dev, StDeviceFacts *facts)
{
  g_autofree char *cpu = cpu_model();
  *facts = (StDeviceFacts){
    .name = g_strdup("host"),
    .machine = g_strdup_printf("host: %u CPU cores%s%s%s, reference kernels",
                               g_get_num_processors(), cpu ? " (" : "", cpu ? cpu : "",
                               cpu ? ")" : ""),
  };
}

static void *
host_host_alloc(StExecDevice *dev, size_t bytes)
{
  return g_try_malloc(MAX(bytes, 1));
}

static void
host_host_free(StExecDevice *dev, void *ptr)
{
  g_free(ptr);
}

/* ---- replay --------------------------------------------------------------- */

typedef struct {
  const StReplayPart *parts;
  int n;
  int64_t *start, *end; /* [iterations * n] ns, monotonic */
} HostReplay;

static gboolean
replay_part(gpointer data, int part, int it, GError **error)
{
  HostReplay *h = data;
  const StReplayPart *p = &h->parts[part];
  size_t i = (size_t)it * (size_t)h->n + (size_t)part;
  h->start[i] = now_ns();
  gboolean ok = p->body(p->data, p->stream, error);
  h->end[i] = now_ns();
  return ok;
}

static gboolean
host_replay(StExecDevice *dev, const StReplayPart *parts, int n, gboolean graph, int warmup,
            int runs, int64_t *times_ns, GError **error)
{
  g_return_val_if_fail(n >= 1 && warmup >= 0 && runs >= 1, FALSE);
  int iterations = warmup + runs;
  g_autofree int64_t *start = g_new(int64_t, (size_t)iterations * n);
  g_autofree int64_t *end = g_new(int64_t, (size_t)iterations * n);
  HostReplay h = {parts, n, start, end};
  if (!st_lockstep_run(n, iterations, NULL, replay_part, &h, error))
    return FALSE;
  /* A run's common start: when its first part began (the barrier released
   * them all at once). A thread wakes some microseconds after another, which
   * only matters for work of a few microseconds; a part that waits for a
   * core taken by another is what sharing measures. */
  for (int r = 0; r < runs; r++) {
    size_t row = (size_t)(warmup + r) * n;
    int64_t t0 = start[row];
    for (int p = 1; p < n; p++)
      t0 = MIN(t0, start[row + p]);
    for (int p = 0; p < n; p++)
      times_ns[(size_t)r * n + p] = end[row + p] - t0;
  }
  return TRUE;
}

const StDeviceBackend st_device_host = {
  .name = "host",
  .summary = "CPU threads running the reference kernels (no GPU needed)",
  .priorities = "none on the host: every stream is a thread of equal OS priority, so "
                "background work competes for the CPU cores as an equal and only admission "
                "control holds it back",
  .open = host_open,
  .close = host_close,
  .describe = host_describe,
  .kernels = host_kernels,
  .stream_new = host_stream_new,
  .stream_free = host_stream_free,
  .event_record = host_event_record,
  .event_free = host_event_free,
  .event_done = host_event_done,
  .stream_wait = host_stream_wait,
  .event_time = host_event_time,
  .stream_sync = host_stream_sync,
  .used_bytes = host_used_bytes,
  .status_text = host_status_text,
  .facts = host_facts,
  .host_alloc = host_host_alloc,
  .host_free = host_host_free,
  .replay = host_replay,
};
