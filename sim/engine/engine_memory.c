/* engine_memory.c: buffer effects as memory events.
 *
 * Persistent buffers of every simulated rank are allocated at time 0 (before
 * the first op); an op allocates its buffers when it starts and frees its
 * buffers when it ends. Events go to the timeline on the rank's device, which
 * is a representative device, so its events already hold every rank on it.
 */
#include "engine/engine_internal.h"

static void
emit(Engine *e, const SimRank *sr, uint32_t op, uint32_t buffer, int sign)
{
  const StBuffer *b = &g_array_index(sr->program->buffers, StBuffer, buffer);
  if (b->bytes == 0)
    return;
  StMemEvent ev = {
    .t_ns = e->now,
    .delta = sign * b->bytes,
    .device = sr->device,
    .rank = sr->rank,
    .buffer = (int32_t)buffer,
    .op = op,
    .category = b->category,
  };
  g_array_append_val(e->tl->mem, ev);
}

void
memory_persistent(Engine *e)
{
  for (int i = 0; i < e->n_sims; i++) {
    const SimRank *sr = &e->sims[i];
    for (guint b = 0; b < sr->program->buffers->len; b++)
      if (g_array_index(sr->program->buffers, StBuffer, b).persistent)
        emit(e, sr, UINT32_MAX, b, +1);
  }
}

void
memory_alloc(Engine *e, const OpRef *ref)
{
  const SimRank *sr = &e->sims[ref->sim];
  const StOp *op = st_program_op(sr->program, ref->op);
  const uint32_t *bufs = st_program_allocs(sr->program, op);
  for (int i = 0; i < op->n_alloc; i++)
    emit(e, sr, ref->op, bufs[i], +1);
}

void
memory_free(Engine *e, const OpRef *ref)
{
  const SimRank *sr = &e->sims[ref->sim];
  const StOp *op = st_program_op(sr->program, ref->op);
  const uint32_t *bufs = st_program_frees(sr->program, op);
  for (int i = 0; i < op->n_free; i++)
    emit(e, sr, ref->op, bufs[i], -1);
}
