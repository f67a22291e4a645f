/* comm_registry.c: the comm backends by name. local is built in; nccl is a
 * module (module.h), loaded the first time it is asked for. */
#include <string.h>

#include "exec/comm.h"
#include "exec/exec.h"
#include "exec/module.h"

const StCommBackend *
st_comm_backend_load(const char *name, GError **error)
{
  if (strcmp(name, "local") == 0)
    return &st_comm_local;
  if (strcmp(name, "nccl") == 0)
    return st_module_symbol("nccl", "st_comm_nccl", "the nccl comm backend",
                            "NCCL (with CUDA)", error);
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
              "unknown comm backend '%s' (known: local, nccl, auto)", name);
  return NULL;
}
