/* share_priority.c: the "priority" GPU sharing model.
 *
 * Kernels from streams of different priority share one GPU the way CUDA
 * stream priorities schedule them: the block scheduler dispatches pending
 * work of higher-priority streams first (CUDA C Programming Guide, "Stream
 * Priorities"), so a background kernel only gets the SMs the foreground
 * leaves idle. This is the multiplexing model of DeepPool (S. Park et al.,
 * "Efficient strong scaling through burst parallel training", MLSys 2022).
 *
 * Each client asks for `fill` of the device (what it occupies alone) times
 * its `weight` (identical kernels folded into it). Levels are served from
 * the highest priority down, with capacity C starting at 1:
 *   - if a level's demand D = sum(fill * weight) fits (D <= C), every kernel
 *     gets its fill and C -= D;
 *   - otherwise C is split in proportion to fill * weight: every kernel of
 *     the level gets C * fill / D, and nothing is left for lower levels.
 * rate = granted / fill, so a kernel alone runs at 1, two equal full kernels
 * of one priority at 1/2 each, and a low-priority kernel beside a full
 * high-priority one at 0 (it waits). O(n log n) for the sort by priority.
 */
#include "cost/cost_impl.h"

#include <stdlib.h>

typedef struct {
  int priority;
  int index; /* keeps equal priorities in input order: deterministic */
} Slot;

static int
compare_slots(const void *a, const void *b)
{
  const Slot *x = a, *y = b;
  if (x->priority != y->priority)
    return x->priority > y->priority ? -1 : 1;
  return x->index - y->index;
}

/* A fill outside (0, 1] is a caller's slip; treat it as a full kernel. */
static double
demand_of(const StShareClient *c)
{
  double fill = c->fill > 0 && c->fill <= 1 ? c->fill : 1.0;
  return fill * MAX(c->weight, 1.0);
}

static void
priority_rates(StShareClient *clients, int n)
{
  if (n <= 0)
    return;
  g_autofree Slot *order = g_new(Slot, n);
  for (int i = 0; i < n; i++)
    order[i] = (Slot){clients[i].priority, i};
  qsort(order, (size_t)n, sizeof(Slot), compare_slots);
  double capacity = 1.0;
  for (int start = 0; start < n;) {
    int end = start;
    double demand = 0;
    while (end < n && order[end].priority == order[start].priority)
      demand += demand_of(&clients[order[end++].index]);
    /* A tolerance keeps two kernels of fill 0.5 + 0.5 at rate 1 exactly. */
    double rate = demand <= capacity + 1e-12 ? 1.0 : capacity / demand;
    for (int k = start; k < end; k++)
      clients[order[k].index].rate = rate;
    capacity = MAX(capacity - demand, 0.0);
    start = end;
  }
}

const StShareModel st_share_priority = {
  .name = "priority",
  .summary = "higher stream priority served first; equal priorities split what is left by fill",
  .citation = "CUDA C Programming Guide, Stream Priorities; S. Park et al., Efficient strong "
              "scaling through burst parallel training (DeepPool), MLSys 2022",
  .rates = priority_rates,
};
