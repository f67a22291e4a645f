/* comm_registry.c: the comm backends by name. */
#include <string.h>

#include "exec/comm.h"

static const StCommBackend *const BACKENDS[] = {
  &st_comm_local,
  &st_comm_nccl,
  NULL,
};

const StCommBackend *
st_comm_backend_find(const char *name)
{
  for (const StCommBackend *const *b = BACKENDS; *b != NULL; b++)
    if (strcmp((*b)->name, name) == 0)
      return *b;
  return NULL;
}
