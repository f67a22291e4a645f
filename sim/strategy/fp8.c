/* fp8.c: see fp8.h. */
#include "strategy/fp8.h"

#include <string.h>

#include "cost/cost.h"

#define CACHE "fp8 weight cache"

/* Whether `p` has its cache already (a schedule built of schedules built,
 * as multiplexing's). */
static gboolean
has_cache(const StProgram *p)
{
  for (guint b = 0; b < p->buffers->len; b++)
    if (strcmp(g_array_index(p->buffers, StBuffer, b).name, CACHE) == 0)
      return TRUE;
  return FALSE;
}

int64_t
st_fp8_layer_cache_bytes(const StCluster *cluster, const StModel *model, const StLayer *layer)
{
  StComputeCtx ctx = {.cluster = cluster, .model = model, .dtype = ST_DTYPE_BF16, .fp8 = TRUE};
  int linears = 0;
  int64_t weights = st_compute_fp8_weights(&ctx, layer, &linears);
  int64_t state = (int64_t)linears * ST_FP8_SCALED_TENSORS * (2 + ST_FP8_AMAX_HISTORY) * 4;
  return weights > 0 ? 2 * weights + state : 0;
}

void
st_fp8_add_weight_caches(StSchedule *s)
{
  g_return_if_fail(s != NULL);
  if (s->settings.precision != ST_PRECISION_FP8)
    return;
  for (guint pi = 0; pi < s->programs->len; pi++) {
    StProgram *p = g_ptr_array_index(s->programs, pi);
    if (has_cache(p))
      continue;
    const StModel *m = st_program_model(s, p);
    g_autofree gboolean *seen = g_new0(gboolean, MAX(m->n_layers, 1));
    int64_t bytes = 0;
    for (guint o = 0; o < p->ops->len; o++) {
      const StOp *op = st_program_op(p, o);
      if (op->kind != ST_OP_COMP || op->sub != ST_PASS_FWD || op->layer < 0 ||
          op->layer >= m->n_layers || seen[op->layer])
        continue;
      seen[op->layer] = TRUE;
      bytes += st_fp8_layer_cache_bytes(s->cluster, m, &m->layers[op->layer]);
    }
    if (bytes > 0)
      st_program_add_buffer(p, CACHE, ST_MEM_PARAMS, bytes, TRUE);
  }
}
