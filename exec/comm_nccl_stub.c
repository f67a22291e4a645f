/* comm_nccl_stub.c: the "nccl" comm backend when NCCL (or CUDA) was not
 * found at configure time: opening it says so. */
#include "exec/comm.h"
#include "exec/exec.h"

static StCommCtx *
stub_open(const StSchedule *s, StExecDevice *const *devices, double timeout_s, GError **error)
{
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_NO_DEVICE,
              "the nccl comm backend is not built in: this build found no NCCL (or no CUDA); "
              "use --comm local");
  return NULL;
}

const StCommBackend st_comm_nccl = {
  .name = "nccl",
  .summary = "NCCL, one process per GPU: not built in",
  .open = stub_open,
};
