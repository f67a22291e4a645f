/* engine_compute.c: kernels sharing a device.
 *
 * A COMP op becomes a kernel holding its work in ns at full speed and what
 * the share model needs to know of it (ProgInfo.share: the fraction of the
 * device it fills alone, 1 unless a profile measured it; the share of the
 * memory bandwidth it uses; its priority leak). The kernels running on one
 * device get rates from the
 * share model (a kernel alone runs at rate 1); whenever one arrives or
 * leaves, every kernel of the device is brought up to date (work done at the
 * old rate since its last update) and its finish time is recomputed at the
 * new rate. A kernel at rate 0 (starved
 * by higher priorities) is taken off the queue until its rate rises.
 *
 * Communication kernels moving bytes on the device (DeviceState.comm_*)
 * take part as one more client above every priority: their thread blocks
 * are resident (a kernel beside them gets none of their SMs back) and
 * their memory traffic is shared like any other. Their own rate is the
 * network's business (engine_share.c), so the share model's answer for
 * them is not used.
 */
#include "engine/engine_internal.h"

#include <math.h>

static void
reshare(Engine *e, DeviceState *dev)
{
  int n = (int)dev->kernels->len;
  if (n == 0)
    return;
  gboolean comm = dev->comm_kernels > 0;
  StShareClient stack[16];
  StShareClient *clients = n + comm <= 16 ? stack : g_new(StShareClient, n + comm);
  for (int i = 0; i < n; i++) {
    Kernel *k = g_ptr_array_index(dev->kernels, i);
    k->remaining_ns -= (double)(e->now - k->last_ns) * k->rate;
    if (k->remaining_ns < 0)
      k->remaining_ns = 0;
    k->last_ns = e->now;
    clients[i] = (StShareClient){.priority = k->priority,
                                 .fill = k->share.fill,
                                 .weight = 1.0,
                                 .mem = k->share.mem,
                                 .leak = k->share.leak};
  }
  if (comm)
    clients[n] = (StShareClient){.priority = G_MAXINT32,
                                 .fill = MIN(dev->comm_fill, 1.0),
                                 .weight = 1.0,
                                 .mem = MIN(dev->comm_mem, 1.0),
                                 .leak = 0};
  e->share->rates(clients, n + comm);
  for (int i = 0; i < n; i++) {
    Kernel *k = g_ptr_array_index(dev->kernels, i);
    k->rate = clients[i].rate;
    /* A kernel whose work is done ends now, even if a kernel arriving at
     * this same instant would starve it from here on. */
    if (k->remaining_ns <= 0)
      st_queue_reschedule(&e->queue, &k->ev.node, e->now);
    else if (k->rate > 0)
      st_queue_reschedule(&e->queue, &k->ev.node,
                          st_time_add(e->now, st_ns_ceil(k->remaining_ns / k->rate)));
    else if (st_event_queued(&k->ev.node))
      st_queue_remove(&e->queue, &k->ev.node);
  }
  if (clients != stack)
    g_free(clients);
}

void
compute_reshare(Engine *e, int state)
{
  reshare(e, &e->devices[state]);
}

void
compute_start(Engine *e, const OpRef *ref)
{
  SimRank *sr = &e->sims[ref->sim];
  Kernel *k = g_new0(Kernel, 1);
  st_event_node_init(&k->ev.node);
  k->ev.kind = EV_KERNEL;
  k->ref = *ref;
  k->state = sr->state;
  k->priority = g_array_index(sr->program->streams, StStream,
                              st_program_op(sr->program, ref->op)->stream)
                  .priority;
  k->share = sr->info->share[ref->op];
  k->remaining_ns = sr->info->cost_ns[ref->op];
  k->last_ns = e->now;
  k->start_ns = e->now;
  k->host = g_array_index(sr->program->streams, StStream,
                          st_program_op(sr->program, ref->op)->stream)
              .host;
  if (k->host) {
    k->rate = 1;
    g_ptr_array_add(e->devices[k->state].host_kernels, k);
    st_queue_reschedule(&e->queue, &k->ev.node, st_time_add(e->now, st_ns_ceil(k->remaining_ns)));
    return;
  }
  DeviceState *dev = &e->devices[k->state];
  g_ptr_array_add(dev->kernels, k);
  reshare(e, dev);
}

void
compute_on_event(Engine *e, Kernel *k)
{
  DeviceState *dev = &e->devices[k->state];
  if (k->host) {
    g_ptr_array_remove_fast(dev->host_kernels, k);
  } else {
    g_ptr_array_remove_fast(dev->kernels, k);
    reshare(e, dev);
  }
  const SimRank *sr = &e->sims[k->ref.sim];
  engine_complete(e, &k->ref, k->start_ns, sr->info->source[k->ref.op], NULL);
  g_free(k);
}

void
compute_clear(Engine *e)
{
  for (int d = 0; e->devices != NULL && d < e->n_dev_states; d++) {
    GPtrArray *lists[2] = {e->devices[d].kernels, e->devices[d].host_kernels};
    for (int l = 0; l < 2; l++) {
      for (guint i = 0; i < lists[l]->len; i++)
        g_free(g_ptr_array_index(lists[l], i));
      g_ptr_array_set_size(lists[l], 0);
    }
  }
}
