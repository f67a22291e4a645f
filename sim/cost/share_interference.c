/* share_interference.c: the "interference" GPU sharing model (the default).
 *
 * Kernels of several streams (ranks, jobs) on one GPU contend for two
 * resources, and stream priority arbitrates only one of them, and only in
 * part:
 *
 * 1. SMs. A kernel alone occupies `fill` of the SMs. The block scheduler
 *    dispatches pending blocks of higher-priority streams first (CUDA C
 *    Programming Guide, "Stream Priorities"), but it never preempts resident
 *    blocks: a high-priority kernel waits for the tail of the low-priority
 *    blocks already running at each of its launches, and low-priority blocks
 *    fill the SMs its last wave and its launch gaps leave. So priority
 *    removes only part of a neighbour's effect. Within one priority level of
 *    demand D (sum of fill x weight) and capacity C left by the levels above,
 *      r0   = min(1, C / D)          the level's rate if priority isolated it
 *      r_eq = min(1, C / (D + D_lo)) its rate if the lower levels (demand
 *                                    D_lo) had its priority
 *      1/r  = 1/r0 + leak (1/r_eq - 1/r0)
 *    with `leak` the kernel's measured share of the neighbours' effect that
 *    priority leaves (the profile's sharing measurement of this pass, else
 *    the GPU performance file's sharing.priority_leak: 0.80, the median of
 *    Tally's A100 measurements, Zhao et al., ASPLOS 2025). leak 0 is the
 *    "priority" model; leak 1 makes priorities equal. The SMs the level uses,
 *    r x fill x weight, are gone; the lower levels share the rest alike.
 *    Equal priorities split by fill, so the SM time handed out never exceeds
 *    the device: sum of r x fill x weight <= 1.
 *
 * 2. Memory bandwidth. A kernel alone uses `mem` of the achievable
 *    bandwidth, so at rate r it asks for r x mem x weight. DRAM does not know
 *    stream priorities: when the asks exceed 1 they are cut max-min fairly
 *    (water-filling) and each kernel slows by what it got over what it
 *    asked, holding its SMs meanwhile (a stalled block keeps its slot). The
 *    memory traffic handed out never exceeds the bandwidth.
 *
 * Colocated kernels on disjoint SMs still contend for memory bandwidth, and
 * the block scheduler serialises kernels that exhaust an SM's threads
 * (Elvinger, Strati, Enright Jerger, Klimovic, "Understanding GPU Resource
 * Interference One Level Deeper", SoCC 2025). Caches are not modelled.
 * O(n log n): the sort by priority and the water-filling's sort.
 */
#include "cost/cost_impl.h"

#include <stdlib.h>

typedef struct {
  double key;
  int index;
} Slot;

/* Higher priority first, then input order: deterministic. */
static int
by_priority(const void *a, const void *b)
{
  const Slot *x = a, *y = b;
  if (x->key != y->key)
    return x->key > y->key ? -1 : 1;
  return x->index - y->index;
}

/* Smaller ask first, then input order. */
static int
by_ask(const void *a, const void *b)
{
  const Slot *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return x->index - y->index;
}

static double
demand_of(const StShareClient *c)
{
  double fill = c->fill > 0 && c->fill <= 1 ? c->fill : 1.0;
  return fill * MAX(c->weight, 1.0);
}

/* Step 1: SM shares by priority level, with each kernel's leak. */
static void
sm_rates(StShareClient *c, const Slot *order, int n)
{
  double below = 0;
  for (int i = 0; i < n; i++)
    below += demand_of(&c[i]);
  double capacity = 1.0;
  for (int start = 0; start < n;) {
    int end = start;
    double level = 0;
    while (end < n && order[end].key == order[start].key)
      level += demand_of(&c[order[end++].index]);
    below -= level;
    /* A tolerance keeps two kernels of fill 0.5 + 0.5 at rate 1 exactly. */
    double r0 = level <= capacity + 1e-12 ? 1.0 : capacity / level;
    double r_eq = level + below <= capacity + 1e-12 ? 1.0 : capacity / (level + below);
    double used = 0;
    for (int k = start; k < end; k++) {
      StShareClient *x = &c[order[k].index];
      double leak = CLAMP(x->leak, 0.0, 1.0);
      x->rate = r0 > 0 && r_eq > 0 ? 1.0 / (1.0 / r0 + leak * (1.0 / r_eq - 1.0 / r0)) : 0.0;
      used += x->rate * demand_of(x);
    }
    capacity = MAX(capacity - used, 0.0);
    start = end;
  }
}

/* Step 2: memory bandwidth, max-min fair over the kernels' asks (a client
 * of weight w is w kernels), priority-blind. */
static void
memory_rates(StShareClient *c, int n)
{
  double total = 0, kernels = 0;
  g_autofree Slot *order = g_new(Slot, n);
  for (int i = 0; i < n; i++) {
    double ask = CLAMP(c[i].mem, 0.0, 1.0) * c[i].rate; /* per kernel */
    total += ask * MAX(c[i].weight, 1.0);
    kernels += MAX(c[i].weight, 1.0);
    order[i] = (Slot){ask, i};
  }
  if (total <= 1.0 + 1e-12)
    return;
  qsort(order, (size_t)n, sizeof(Slot), by_ask);
  double left = 1.0;
  for (int k = 0; k < n; k++) {
    StShareClient *x = &c[order[k].index];
    double w = MAX(x->weight, 1.0);
    /* Each kernel not yet served may take an equal share of what is left. */
    double got = MIN(order[k].key, left / kernels);
    if (order[k].key > 0)
      x->rate *= got / order[k].key;
    left -= got * w;
    kernels -= w;
  }
}

static void
interference_rates(StShareClient *clients, int n)
{
  if (n <= 0)
    return;
  g_autofree Slot *order = g_new(Slot, n);
  for (int i = 0; i < n; i++)
    order[i] = (Slot){(double)clients[i].priority, i};
  qsort(order, (size_t)n, sizeof(Slot), by_priority);
  sm_rates(clients, order, n);
  memory_rates(clients, n);
}

const StShareModel st_share_interference = {
  .name = "interference",
  .summary = "SMs by priority with a measured leak (tail of resident blocks), memory bandwidth "
             "shared max-min regardless of priority",
  .citation = "CUDA C Programming Guide, Stream Priorities; W. Zhao et al., Tally, ASPLOS 2025 "
              "(the leak); P. Elvinger et al., Understanding GPU Resource Interference One "
              "Level Deeper, SoCC 2025",
  .rates = interference_rates,
};
