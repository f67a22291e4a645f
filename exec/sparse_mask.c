/* sparse_mask.c: SAMO's fixed pruning mask (st_exec_sparse_mask, exec.h).
 *
 * The paper prunes a trained network by magnitude; the executor trains from
 * a random start, so any fixed mask does: it keeps a uniformly random subset
 * of nnz = P - floor(p P) entries of each layer (the strategies' count, so
 * the schedule's buffer sizes hold), drawn by a partial Fisher-Yates shuffle
 * from a counter-based generator seeded by (seed, layer): no state, the same
 * mask on every rank and replica. Indices ascend, so compress and expand walk
 * memory in order. */
#include <math.h>
#include <stdlib.h>

#include "exec/exec.h"
#include "exec/mix.h"

static int
ascending(const void *a, const void *b)
{
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

int32_t *
st_exec_sparse_mask(const StModel *m, int layer, double p, uint64_t seed, size_t *nnz)
{
  g_return_val_if_fail(layer >= 0 && layer < m->n_layers && p >= 0 && p < 1, NULL);
  int64_t P = m->layers[layer].params;
  *nnz = 0;
  if (P <= 0)
    return NULL;
  g_return_val_if_fail(P <= G_MAXINT32, NULL);
  int64_t keep = P - (int64_t)floor(p * (double)P);
  int32_t *all = g_new(int32_t, P);
  for (int64_t i = 0; i < P; i++)
    all[i] = (int32_t)i;
  uint64_t base = st_splitmix64(seed ^ 0x5a3d0u ^ ((uint64_t)layer << 32));
  for (int64_t j = 0; j < keep; j++) {
    int64_t k = j + (int64_t)(st_splitmix64(base + (uint64_t)j) % (uint64_t)(P - j));
    int32_t t = all[j];
    all[j] = all[k];
    all[k] = t;
  }
  qsort(all, (size_t)keep, sizeof(int32_t), ascending);
  *nnz = (size_t)keep;
  return g_renew(int32_t, all, MAX(keep, 1));
}
