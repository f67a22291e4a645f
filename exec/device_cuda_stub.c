/* device_cuda_stub.c: the "cuda" device backend when nvcc was not found at
 * configure time: opening it says so. */
#include "exec/device.h"
#include "exec/exec.h"

static StExecDevice *
stub_open(int gpu, GError **error)
{
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_NO_DEVICE,
              "the cuda backend is not built in: this build found no CUDA compiler (nvcc); "
              "use --backend host, or rebuild with CUDA installed");
  return NULL;
}

const StDeviceBackend st_device_cuda = {
  .name = "cuda",
  .summary = "NVIDIA GPUs: not built in (no nvcc at configure time)",
  .priorities = "not built in",
  .open = stub_open,
};
