/* timeline.c: see timeline.h. */
#include "output/timeline.h"

#include <stdlib.h>

StTimeline *
st_timeline_new(const StSchedule *schedule, gboolean measured, const char *origin)
{
  StTimeline *t = g_new0(StTimeline, 1);
  t->schedule = schedule;
  t->measured = measured;
  t->on_host = g_strcmp0(schedule->cluster->gpu.name, "host") == 0;
  t->origin = g_strdup(origin);
  t->rank_rep = g_new(int32_t, schedule->n_ranks);
  for (int r = 0; r < schedule->n_ranks; r++)
    t->rank_rep[r] = r;
  t->device_rep = g_new(int32_t, schedule->n_devices);
  for (int d = 0; d < schedule->n_devices; d++)
    t->device_rep[d] = d;
  t->ops = g_array_new(FALSE, FALSE, sizeof(StOpRecord));
  t->mem = g_array_new(FALSE, FALSE, sizeof(StMemEvent));
  t->comm = g_array_new(FALSE, FALSE, sizeof(StCommRecord));
  t->steps = schedule->steps;
  return t;
}

void
st_timeline_free(StTimeline *t)
{
  if (t == NULL)
    return;
  g_free(t->origin);
  g_free(t->note);
  g_free(t->rank_rep);
  g_free(t->device_rep);
  g_array_unref(t->ops);
  g_array_unref(t->mem);
  g_array_unref(t->comm);
  st_net_trace_free(t->net);
  g_free(t);
}

int
st_timeline_device_weight(const StTimeline *t, int rep)
{
  int n = 0;
  for (int d = 0; d < t->schedule->n_devices; d++)
    n += t->device_rep[d] == rep;
  return n;
}

int32_t *
st_timeline_device_weights(const StTimeline *t)
{
  int32_t *weight = g_new0(int32_t, t->schedule->n_devices);
  for (int d = 0; d < t->schedule->n_devices; d++)
    weight[t->device_rep[d]]++;
  return weight;
}

int32_t *
st_timeline_lanes(const StTimeline *t)
{
  const StSchedule *s = t->schedule;
  /* Counting sort of ranks by device keeps ranks ascending within a device. */
  g_autofree int32_t *start = g_new0(int32_t, s->n_devices + 1);
  for (int r = 0; r < s->n_ranks; r++)
    start[s->ranks[r].device + 1]++;
  for (int d = 0; d < s->n_devices; d++)
    start[d + 1] += start[d];
  g_autofree int32_t *by_device = g_new(int32_t, s->n_ranks);
  for (int r = 0; r < s->n_ranks; r++)
    by_device[start[s->ranks[r].device]++] = r;
  int32_t *first = g_new(int32_t, s->n_ranks);
  int32_t lane = 0;
  for (int i = 0; i < s->n_ranks; i++) {
    int r = by_device[i];
    first[r] = t->rank_rep[r] == r ? lane : -1;
    if (first[r] >= 0)
      lane += (int32_t)st_schedule_program_of(s, r)->streams->len;
  }
  return first;
}

/* By device, then time, then recorded order (pointers into one array). */
static int
compare_mem(const void *a, const void *b)
{
  const StMemEvent *x = *(StMemEvent *const *)a, *y = *(StMemEvent *const *)b;
  if (x->device != y->device)
    return (x->device > y->device) - (x->device < y->device);
  if (x->t_ns != y->t_ns)
    return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
  return (x > y) - (x < y);
}

void
st_timeline_walk_memory(const StTimeline *t, gboolean to_end, StMemVisit visit, gpointer data)
{
  guint n = t->mem->len;
  g_autofree const StMemEvent **ev = g_new(const StMemEvent *, n > 0 ? n : 1);
  for (guint i = 0; i < n; i++)
    ev[i] = &g_array_index(t->mem, StMemEvent, i);
  qsort(ev, n, sizeof *ev, compare_mem);
  guint i = 0;
  for (int d = 0; d < t->schedule->n_devices; d++) {
    while (i < n && ev[i]->device < d)
      i++; /* events of a device that is not recorded stand for nothing */
    if (!st_timeline_device_recorded(t, d))
      continue;
    int64_t state[ST_MEM_N] = {0};
    int64_t last = INT64_MIN;
    if (i == n || ev[i]->device != d || ev[i]->t_ns > 0) {
      visit(data, d, 0, state, NULL);
      last = 0;
    }
    while (i < n && ev[i]->device == d) {
      int64_t now = ev[i]->t_ns;
      const StMemEvent *alloc = NULL;
      for (; i < n && ev[i]->device == d && ev[i]->t_ns == now; i++) {
        state[ev[i]->category] += ev[i]->delta;
        if (ev[i]->delta > 0)
          alloc = ev[i];
      }
      visit(data, d, now, state, alloc);
      last = now;
    }
    if (to_end && last < t->end_ns)
      visit(data, d, t->end_ns, state, NULL);
  }
}
