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
 */
#include <cuda_runtime_api.h>

#include "exec/device.h"
#include "exec/exec.h"

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

const StDeviceBackend st_device_cuda = {
  .name = "cuda",
  .summary = "NVIDIA GPUs: streams with priorities, events, cuBLAS and kernels/cuda",
  .open = cuda_open,
  .close = cuda_close,
  .describe = cuda_describe,
  .kernels = cuda_kernels,
  .stream_new = cuda_stream_new,
  .stream_free = cuda_stream_free,
  .event_record = cuda_event_record,
  .event_free = cuda_event_free,
  .stream_wait = cuda_stream_wait,
  .event_time = cuda_event_time,
  .stream_sync = cuda_stream_sync,
  .used_bytes = cuda_used_bytes,
  .status_text = cuda_status_text,
};
