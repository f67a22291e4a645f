/* device_cuda.c: the "cuda" device backend: CUDA streams with the
 * schedule's priorities, events for dependencies and timing, the CUDA kernel
 * table (kernels/cuda, cuBLAS for matrix products).
 *
 * Every call first makes the rank's GPU current, since the walker's threads
 * are fresh. Priorities: the schedule's higher-runs-first integers map onto
 * CUDA's range, where lower numbers run first and 0 is the default. Errors
 * clear CUDA's sticky error and say the call and CUDA's message. No device
 * (no driver, or none visible) is ST_EXEC_ERROR_NO_DEVICE, so "auto" falls
 * back to the host.
 *
 * Built into the module libstagger-cuda.so with kernels/cuda (exec/module.h),
 * which only processes that run on a GPU load.
 */
#include <cuda_runtime_api.h>
#include <string.h>

#include "exec/device.h"
#include "exec/exec.h"
#include "exec/module.h"
#include "exec/profile_lockstep.h"

/* What the module exports: its table (defined at the end) and its stamp. */
extern const StDeviceBackend st_device_cuda;
const StModuleStamp st_module_stamp = ST_MODULE_STAMP;

typedef struct {
  int device;
  int least, greatest; /* CUDA stream priority range: least is the default (0) */
} Cuda;

static gboolean
cuda_ok(cudaError_t status, const char *call, GError **error)
{
  if (status == cudaSuccess)
    return TRUE;
  (void)cudaGetLastError(); /* clear the sticky error */
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED, "%s: %s (%s)", call,
              cudaGetErrorString(status), cudaGetErrorName(status));
  return FALSE;
}

static Cuda *
impl(StExecDevice *dev)
{
  return dev->impl;
}

static gboolean
current(StExecDevice *dev, GError **error)
{
  return cuda_ok(cudaSetDevice(impl(dev)->device), "cudaSetDevice", error);
}

static StExecDevice *
cuda_open(int gpu, GError **error)
{
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice || count == 0) {
    (void)cudaGetLastError();
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    if (status == cudaErrorInsufficientDriver && driver == 0)
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_NO_DEVICE,
                  "no NVIDIA driver here (libcuda.so.1 not found): no GPU to run on; use "
                  "--backend host");
    else if (status == cudaErrorInsufficientDriver)
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_NO_DEVICE,
                  "the NVIDIA driver supports CUDA %d.%d, older than this build's CUDA "
                  "runtime %d.%d: update the driver, or use --backend host",
                  driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    else
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_NO_DEVICE,
                  "no CUDA device answers here (%s)",
                  status == cudaSuccess ? "none visible" : cudaGetErrorString(status));
    return NULL;
  }
  if (!cuda_ok(status, "cudaGetDeviceCount", error))
    return NULL;
  if (gpu >= count) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_NO_DEVICE,
                "GPU %d asked for, but this machine has %d", gpu, count);
    return NULL;
  }
  Cuda *c = g_new0(Cuda, 1);
  c->device = gpu;
  if (!cuda_ok(cudaSetDevice(gpu), "cudaSetDevice", error) ||
      !cuda_ok(cudaDeviceGetStreamPriorityRange(&c->least, &c->greatest),
               "cudaDeviceGetStreamPriorityRange", error) ||
      st_kernels_cuda() == NULL) {
    if (error != NULL && *error == NULL)
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_NO_DEVICE, "no CUDA kernel table");
    g_free(c);
    return NULL;
  }
  StExecDevice *dev = g_new0(StExecDevice, 1);
  dev->backend = &st_device_cuda;
  dev->gpu = gpu;
  dev->impl = c;
  return dev;
}

static void
cuda_close(StExecDevice *dev)
{
  if (dev == NULL)
    return;
  g_free(dev->impl);
  g_free(dev);
}

static char *
cuda_describe(StExecDevice *dev)
{
  struct cudaDeviceProp p;
  int driver = 0, runtime = 0;
  if (cudaGetDeviceProperties(&p, impl(dev)->device) != cudaSuccess) {
    (void)cudaGetLastError();
    return g_strdup("cuda: unknown device");
  }
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  g_autofree char *mem = g_format_size_full(p.totalGlobalMem, G_FORMAT_SIZE_IEC_UNITS);
  return g_strdup_printf("cuda: %s (sm_%d%d, %s), driver %d.%d, runtime %d.%d", p.name,
                         p.major, p.minor, mem, driver / 1000, driver % 1000 / 10,
                         runtime / 1000, runtime % 1000 / 10);
}

static const StKernels *
cuda_kernels(StExecDevice *dev)
{
  return st_kernels_cuda();
}

static void *
cuda_stream_new(StExecDevice *dev, int priority, GError **error)
{
  Cuda *c = impl(dev);
  /* Higher schedule priority: a lower (more negative) CUDA number. */
  int p = CLAMP(c->least - priority, c->greatest, c->least);
  cudaStream_t s = NULL;
  if (!current(dev, error) ||
      !cuda_ok(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, p),
               "cudaStreamCreateWithPriority", error))
    return NULL;
  return s;
}

static void
cuda_stream_free(StExecDevice *dev, void *stream)
{
  if (current(dev, NULL))
    cudaStreamDestroy((cudaStream_t)stream);
}

static void *
cuda_event_record(StExecDevice *dev, void *stream, GError **error)
{
  cudaEvent_t e = NULL;
  if (!current(dev, error) || !cuda_ok(cudaEventCreate(&e), "cudaEventCreate", error))
    return NULL;
  if (!cuda_ok(cudaEventRecord(e, (cudaStream_t)stream), "cudaEventRecord", error)) {
    cudaEventDestroy(e);
    return NULL;
  }
  return e;
}

static void
cuda_event_free(StExecDevice *dev, void *event)
{
  if (event != NULL && current(dev, NULL))
    cudaEventDestroy((cudaEvent_t)event);
}

static gboolean
cuda_stream_wait(StExecDevice *dev, void *stream, void *event, GError **error)
{
  return current(dev, error) &&
         cuda_ok(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0),
                 "cudaStreamWaitEvent", error);
}

static gboolean
cuda_event_done(StExecDevice *dev, void *event)
{
  if (!current(dev, NULL))
    return FALSE;
  cudaError_t status = cudaEventQuery((cudaEvent_t)event);
  if (status == cudaErrorNotReady)
    return FALSE;
  /* Done, or failed: a failure surfaces at the next synchronizing call. */
  if (status != cudaSuccess)
    (void)cudaGetLastError();
  return TRUE;
}

static gboolean
cuda_event_time(StExecDevice *dev, void *origin, void *event, int64_t *ns, GError **error)
{
  float ms = 0;
  if (!current(dev, error) ||
      !cuda_ok(cudaEventSynchronize((cudaEvent_t)event), "cudaEventSynchronize", error) ||
      !cuda_ok(cudaEventElapsedTime(&ms, (cudaEvent_t)origin, (cudaEvent_t)event),
               "cudaEventElapsedTime", error))
    return FALSE;
  *ns = (int64_t)((double)ms * 1e6);
  return TRUE;
}

static gboolean
cuda_stream_sync(StExecDevice *dev, void *stream, GError **error)
{
  return current(dev, error) &&
         cuda_ok(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize", error);
}

static int64_t
cuda_used_bytes(StExecDevice *dev)
{
  size_t free_bytes = 0, total = 0;
  if (!current(dev, NULL) || cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return (int64_t)(total - free_bytes);
}

static const char *
cuda_status_text(int status)
{
  return status == ST_K_EINVAL ? "invalid argument" : cudaGetErrorString((cudaError_t)status);
}

/* ---- for the profiler ------------------------------------------------------ */

/* "580.65.06" from the NVIDIA kernel module, or NULL (not Linux, no module). */
static char *
kernel_driver(void)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/driver/nvidia/version", &text, NULL, NULL))
    return NULL;
  /* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul ..." */
  const char *m = strstr(text, "Kernel Module");
  if (m == NULL)
    return NULL;
  m += strlen("Kernel Module");
  while (*m == ' ')
    m++;
  size_t n = strcspn(m, " \n");
  return n > 0 ? g_strndup(m, n) : NULL;
}

static void
cuda_facts(StExecDevice *dev, StDeviceFacts *facts)
{
  struct cudaDeviceProp p;
  int driver = 0, runtime = 0;
  *facts = (StDeviceFacts){0};
  if (cudaGetDeviceProperties(&p, impl(dev)->device) == cudaSuccess)
    facts->name = g_strdup(p.name);
  else
    (void)cudaGetLastError();
  facts->driver = kernel_driver();
  if (facts->driver == NULL && cudaDriverGetVersion(&driver) == cudaSuccess)
    facts->driver = g_strdup_printf("CUDA driver API %d.%d", driver / 1000, driver % 1000 / 10);
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    facts->runtime = g_strdup_printf("%d.%d", runtime / 1000, runtime % 1000 / 10);
  facts->machine = cuda_describe(dev);
}

static void *
cuda_host_alloc(StExecDevice *dev, size_t bytes)
{
  void *ptr = NULL;
  if (!current(dev, NULL) || cudaMallocHost(&ptr, MAX(bytes, 1)) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  return ptr;
}

static void
cuda_host_free(StExecDevice *dev, void *ptr)
{
  if (ptr != NULL && current(dev, NULL))
    cudaFreeHost(ptr);
}

/* Events of a replay: per iteration one start (on part 0's stream) and one
 * end per part. Run `it` starts when part 0's stream has passed the ends of
 * the other parts' run it - 1 and records the start; the other parts wait
 * for it, run, record their ends. Nothing waits for the host in between. */
typedef struct {
  StExecDevice *dev;
  const StReplayPart *parts;
  int n;
  cudaEvent_t *start;        /* [iterations] */
  cudaEvent_t *end;          /* [iterations * n] */
  cudaGraphExec_t *graphs;   /* [n] with graph, else NULL */
} CudaReplay;

static gboolean
replay_lead(gpointer data, int part, int it, GError **error)
{
  CudaReplay *r = data;
  cudaStream_t s0 = r->parts[0].stream;
  if (!current(r->dev, error))
    return FALSE;
  for (int p = 1; it > 0 && p < r->n; p++)
    if (!cuda_ok(cudaStreamWaitEvent(s0, r->end[(size_t)(it - 1) * r->n + p], 0),
                 "cudaStreamWaitEvent", error))
      return FALSE;
  return cuda_ok(cudaEventRecord(r->start[it], s0), "cudaEventRecord", error);
}

static gboolean
replay_each(gpointer data, int part, int it, GError **error)
{
  CudaReplay *r = data;
  const StReplayPart *p = &r->parts[part];
  cudaStream_t s = p->stream;
  if (!current(r->dev, error))
    return FALSE;
  if (part > 0 && !cuda_ok(cudaStreamWaitEvent(s, r->start[it], 0), "cudaStreamWaitEvent", error))
    return FALSE;
  gboolean ok = r->graphs != NULL
                  ? cuda_ok(cudaGraphLaunch(r->graphs[part], s), "cudaGraphLaunch", error)
                  : p->body(p->data, s, error);
  return ok && cuda_ok(cudaEventRecord(r->end[(size_t)it * r->n + part], s), "cudaEventRecord",
                       error);
}

/* Each part's body captured into a graph on its stream, instantiated. */
static gboolean
capture(CudaReplay *r, GError **error)
{
  for (int p = 0; p < r->n; p++) {
    cudaStream_t s = r->parts[p].stream;
    cudaGraph_t graph = NULL;
    if (!cuda_ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
                 "cudaStreamBeginCapture", error))
      return FALSE;
    GError *local = NULL;
    gboolean ok = r->parts[p].body(r->parts[p].data, s, &local);
    /* End the capture even when the body failed, so the stream is usable. */
    cudaError_t end = cudaStreamEndCapture(s, &graph);
    if (!ok) {
      g_propagate_prefixed_error(error, local, "while capturing a CUDA graph: ");
      if (graph != NULL)
        cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      return FALSE;
    }
    if (!cuda_ok(end, "cudaStreamEndCapture", error))
      return FALSE;
    cudaError_t inst = cudaGraphInstantiate(&r->graphs[p], graph, 0);
    cudaGraphDestroy(graph);
    if (!cuda_ok(inst, "cudaGraphInstantiate", error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
sync_parts(CudaReplay *r, GError **error)
{
  for (int p = 0; p < r->n; p++)
    if (!cuda_ok(cudaStreamSynchronize(r->parts[p].stream), "cudaStreamSynchronize", error))
      return FALSE;
  return TRUE;
}

static gboolean
cuda_replay(StExecDevice *dev, const StReplayPart *parts, int n, gboolean graph, int warmup,
            int runs, int64_t *times_ns, GError **error)
{
  g_return_val_if_fail(n >= 1 && warmup >= 0 && runs >= 1, FALSE);
  if (!current(dev, error))
    return FALSE;
  /* With a graph, the warm-up calls the bodies directly (they set up what
   * capture cannot: cuBLAS handles, caches) and one launch of each graph
   * uploads it; without, the warm-up runs are iterations like the others. */
  int iterations = graph ? runs + 1 : warmup + runs, skip = iterations - runs;
  CudaReplay r = {dev, parts, n, g_new0(cudaEvent_t, iterations),
                  g_new0(cudaEvent_t, (size_t)iterations * n),
                  graph ? g_new0(cudaGraphExec_t, n) : NULL};
  gboolean ok = TRUE;
  for (int i = 0; ok && i < iterations; i++)
    ok = cuda_ok(cudaEventCreate(&r.start[i]), "cudaEventCreate", error);
  for (size_t i = 0; ok && i < (size_t)iterations * n; i++)
    ok = cuda_ok(cudaEventCreate(&r.end[i]), "cudaEventCreate", error);
  if (ok && graph) {
    for (int w = 0; ok && w < MAX(warmup, 1); w++)
      for (int p = 0; ok && p < n; p++)
        ok = parts[p].body(parts[p].data, parts[p].stream, error);
    ok = ok && sync_parts(&r, error) && capture(&r, error);
    for (int i = 0; ok && i < iterations; i++) {
      ok = replay_lead(&r, 0, i, error);
      for (int p = 0; ok && p < n; p++)
        ok = replay_each(&r, p, i, error);
    }
  } else if (ok) {
    ok = st_lockstep_run(n, iterations, replay_lead, replay_each, &r, error);
  }
  ok = ok && sync_parts(&r, error);
  for (int i = 0; ok && i < runs; i++) {
    for (int p = 0; ok && p < n; p++) {
      float ms = 0;
      ok = cuda_ok(cudaEventElapsedTime(&ms, r.start[skip + i], r.end[(size_t)(skip + i) * n + p]),
                   "cudaEventElapsedTime", error);
      times_ns[(size_t)i * n + p] = (int64_t)((double)ms * 1e6);
    }
  }
  if (!ok)
    (void)sync_parts(&r, NULL); /* nothing may still use the events or graphs */
  for (int i = 0; i < iterations; i++)
    if (r.start[i] != NULL)
      cudaEventDestroy(r.start[i]);
  for (size_t i = 0; i < (size_t)iterations * n; i++)
    if (r.end[i] != NULL)
      cudaEventDestroy(r.end[i]);
  for (int p = 0; graph && p < n; p++)
    if (r.graphs[p] != NULL)
      cudaGraphExecDestroy(r.graphs[p]);
  g_free(r.start);
  g_free(r.end);
  g_free(r.graphs);
  return ok;
}

const StDeviceBackend st_device_cuda = {
  .name = "cuda",
  .summary = "NVIDIA GPUs: streams with priorities, events, cuBLAS and kernels/cuda",
  .priorities = "CUDA stream priorities (cudaStreamCreateWithPriority): a higher schedule "
                "priority is a more urgent CUDA priority, within the device's range",
  .open = cuda_open,
  .close = cuda_close,
  .describe = cuda_describe,
  .kernels = cuda_kernels,
  .stream_new = cuda_stream_new,
  .stream_free = cuda_stream_free,
  .event_record = cuda_event_record,
  .event_free = cuda_event_free,
  .event_done = cuda_event_done,
  .stream_wait = cuda_stream_wait,
  .event_time = cuda_event_time,
  .stream_sync = cuda_stream_sync,
  .used_bytes = cuda_used_bytes,
  .status_text = cuda_status_text,
  .facts = cuda_facts,
  .host_alloc = cuda_host_alloc,
  .host_free = cuda_host_free,
  .replay = cuda_replay,
};
