/* runtime_memory.c: see runtime_memory.h. */
#include "output/runtime_memory.h"

#include <math.h>
#include <string.h>

#include "cost/framework.h"

/* Communicators rank r joins with a peer on another device. */
static int
comms_across_devices(const StSchedule *s, int r)
{
  int n = 0;
  int device = s->ranks[r].device;
  for (guint c = 0; c < s->comms->len; c++) {
    const StComm *comm = g_ptr_array_index(s->comms, c);
    int g = comm->group_of[r];
    if (g < 0)
      continue;
    for (int i = comm->offsets[g]; i < comm->offsets[g + 1]; i++)
      if (s->ranks[comm->members[i]].device != device) {
        n++;
        break;
      }
  }
  return n;
}

void
st_runtime_memory_rows(const StSchedule *s, const int32_t *row_of, int n_rows,
                       StRuntimeMemory *out)
{
  memset(out, 0, sizeof *out * (size_t)n_rows);
  const StFramework *fw = st_framework_find(s->settings.framework);
  if (fw == NULL)
    return;
  const StFrameworkRuntime *f = fw->runtime;
  for (int i = 0; i < n_rows; i++) {
    out[i].reserve = f->allocator_reserve;
    out[i].capacity = s->cluster->gpu.memory_bytes;
  }
  for (int r = 0; r < s->n_ranks; r++) {
    int row = row_of != NULL ? row_of[s->ranks[r].device] : s->ranks[r].device;
    if (row < 0)
      continue;
    StRuntimeMemory *m = &out[row];
    m->workspace += f->workspace_bytes;
    m->fixed += f->context_bytes;
    if (f->nccl_bytes_per_comm > 0)
      m->fixed += f->nccl_bytes_per_comm * comms_across_devices(s, r);
  }
}

void
st_runtime_memory(const StSchedule *s, StRuntimeMemory *out)
{
  st_runtime_memory_rows(s, NULL, s->n_devices, out);
}

void
st_runtime_memory_figures(const StRuntimeMemory *rt, int64_t tensors, int64_t out[ST_MEMKIND_N])
{
  out[ST_MEMKIND_ALLOCATED] = tensors + rt->workspace;
  out[ST_MEMKIND_RESERVED] =
    (int64_t)ceil((double)out[ST_MEMKIND_ALLOCATED] * (1.0 + rt->reserve));
  if (rt->capacity > 0) /* the cache gives way before an allocation fails */
    out[ST_MEMKIND_RESERVED] = MIN(out[ST_MEMKIND_RESERVED],
                                   MAX(out[ST_MEMKIND_ALLOCATED], rt->capacity - rt->fixed));
  out[ST_MEMKIND_DEVICE] = out[ST_MEMKIND_RESERVED] + rt->fixed;
}
