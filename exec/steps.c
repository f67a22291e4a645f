/* steps.c: what a rank keeps per step: the start and end events of every
 * op instance, and its loss sum (a device fp32 scalar per step).
 *
 * A background job beside a foreground repeats its program for as long as
 * the foreground runs (exec/mux.c), so its number of steps is not known up
 * front. The storage comes in chunks of STEP_CHUNK steps from a table of
 * fixed size, each chunk made by the first stream of the rank to begin a
 * step in it (under the rank's lock); a reader of a step's slots runs after
 * an op of that step was issued, so the chunk is there and the table never
 * moves. That bounds a rank at STEP_CHUNK * STEP_CHUNKS steps. */
#include <string.h>

#include "exec/check.h"
#include "exec/runtime.h"

#define STEP_CHUNK 64
#define STEP_CHUNKS 4096

int32_t
steps_capacity(void)
{
  return STEP_CHUNK * STEP_CHUNKS;
}

void
steps_init(Rank *r)
{
  r->event_chunks = g_new0(void **, STEP_CHUNKS);
  r->loss_chunks = g_new0(float *, STEP_CHUNKS);
}

gboolean
steps_reserve(Rank *r, int32_t step, void *stream, GError **error)
{
  g_return_val_if_fail(step >= 0 && step < steps_capacity(), FALSE);
  int c = step / STEP_CHUNK;
  g_mutex_lock(&r->lock);
  gboolean ok = TRUE;
  if (r->event_chunks[c] == NULL) {
    r->event_chunks[c] = g_new0(void *, (size_t)STEP_CHUNK * r->p->ops->len * 2);
    float *loss = NULL;
    int status = r->k->alloc((void **)&loss, sizeof(float) * STEP_CHUNK);
    if (status == 0)
      status = r->k->memset0(stream, loss, sizeof(float) * STEP_CHUNK);
    if (status != 0)
      ok = st_exec_fail_status(error, __FILE__, __LINE__, "alloc / memset0 of the losses",
                               status, r->k->name);
    /* Zeroed before any stream of the rank adds to it. */
    ok = ok && r->dev->backend->stream_sync(r->dev, stream, error);
    r->loss_chunks[c] = loss;
  }
  g_mutex_unlock(&r->lock);
  return ok;
}

void **
steps_event(Rank *r, int32_t step, uint32_t op, int end)
{
  void **chunk = r->event_chunks[step / STEP_CHUNK];
  g_assert(chunk != NULL);
  return &chunk[((size_t)(step % STEP_CHUNK) * r->p->ops->len + op) * 2 + (size_t)end];
}

float *
steps_loss(Rank *r, int32_t step)
{
  float *chunk = r->loss_chunks[step / STEP_CHUNK];
  g_assert(chunk != NULL);
  return chunk + step % STEP_CHUNK;
}

gboolean
steps_losses(Rank *r, int32_t steps, float *out, GError **error)
{
  for (int32_t k = 0; k < steps; k += STEP_CHUNK) {
    int32_t n = MIN(STEP_CHUNK, steps - k);
    if (r->loss_chunks[k / STEP_CHUNK] == NULL) { /* no stream began these steps */
      memset(out + k, 0, sizeof(float) * (size_t)n);
      continue;
    }
    ST_KCHECK(r->k->copy(r->streams[0], out + k, r->loss_chunks[k / STEP_CHUNK],
                         sizeof(float) * (size_t)n, 2),
              r->k->name, error);
  }
  return TRUE;
}

void
steps_clear(Rank *r)
{
  for (int c = 0; r->event_chunks != NULL && c < STEP_CHUNKS; c++) {
    void **chunk = r->event_chunks[c];
    for (size_t i = 0; chunk != NULL && i < (size_t)STEP_CHUNK * r->p->ops->len * 2; i++)
      if (chunk[i] != NULL)
        r->dev->backend->event_free(r->dev, chunk[i]);
    g_free(chunk);
    if (r->loss_chunks[c] != NULL)
      r->k->free(r->loss_chunks[c]);
  }
  g_clear_pointer(&r->event_chunks, g_free);
  g_clear_pointer(&r->loss_chunks, g_free);
}
