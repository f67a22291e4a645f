/* timeline.c: see timeline.h. */
#include "output/timeline.h"

#include <stdlib.h>
#include <string.h>

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
  t->algos = g_ptr_array_new();
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
  g_ptr_array_unref(t->algos);
  g_free(t);
}

uint8_t
st_timeline_algo(StTimeline *t, const char *name)
{
  if (name == NULL)
    return 0;
  for (guint i = 0; i < t->algos->len; i++)
    if (g_ptr_array_index(t->algos, i) == name || strcmp(g_ptr_array_index(t->algos, i), name) == 0)
      return (uint8_t)(i + 1);
  g_return_val_if_fail(t->algos->len < 255, 0);
  g_ptr_array_add(t->algos, (gpointer)name);
  return (uint8_t)t->algos->len;
}

void
st_op_names_init(StOpNames *n, const StSchedule *s)
{
  n->schedule = s;
  n->names = g_new0(char **, s->programs->len);
}

const char *
st_op_names_get(StOpNames *n, int rank, uint32_t op)
{
  const StSchedule *s = n->schedule;
  int prog = s->ranks[rank].program;
  const StProgram *p = g_ptr_array_index(s->programs, prog);
  if (n->names[prog] == NULL)
    n->names[prog] = g_new0(char *, p->ops->len);
  if (n->names[prog][op] == NULL)
    n->names[prog][op] = st_op_describe(s, p, op);
  return n->names[prog][op];
}

void
st_op_names_clear(StOpNames *n)
{
  for (guint p = 0; n->names != NULL && p < n->schedule->programs->len; p++) {
    if (n->names[p] == NULL)
      continue;
    const StProgram *prog = g_ptr_array_index(n->schedule->programs, p);
    for (guint o = 0; o < prog->ops->len; o++)
      g_free(n->names[p][o]);
    g_free(n->names[p]);
  }
  g_clear_pointer(&n->names, g_free);
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

/* By time, then recorded order (the per-device copy keeps it). */
static gint
compare_mem(gconstpointer a, gconstpointer b, gpointer unused)
{
  const StMemEvent *x = a, *y = b;
  return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
}

void
st_timeline_walk_memory(const StTimeline *t, gboolean to_end, StMemVisit visit, gpointer data)
{
  /* The events copied by device (a counting sort, stable), so each device's
   * are contiguous, then by time within a device: they are recorded in time
   * order, so that is checked and a device sorted (stably, by a merge sort)
   * only when it is not. O(E) for the simulator's timelines. */
  guint n = t->mem->len;
  int n_dev = t->schedule->n_devices;
  g_autofree guint *first = g_new0(guint, n_dev + 1);
  for (guint i = 0; i < n; i++)
    first[g_array_index(t->mem, StMemEvent, i).device + 1]++;
  for (int d = 0; d < n_dev; d++)
    first[d + 1] += first[d];
  g_autofree StMemEvent *ev = g_new(StMemEvent, n > 0 ? n : 1);
  g_autofree guint *fill = g_memdup2(first, sizeof(guint) * (n_dev + 1));
  for (guint i = 0; i < n; i++) {
    const StMemEvent *e = &g_array_index(t->mem, StMemEvent, i);
    ev[fill[e->device]++] = *e;
  }
  for (int d = 0; d < n_dev; d++)
    for (guint i = first[d] + 1; i < first[d + 1]; i++)
      if (ev[i - 1].t_ns > ev[i].t_ns) {
        g_qsort_with_data(ev + first[d], (gint)(first[d + 1] - first[d]), sizeof *ev,
                          compare_mem, NULL);
        break;
      }
  for (int d = 0; d < n_dev; d++) {
    if (!st_timeline_device_recorded(t, d))
      continue; /* events of a device that is not recorded stand for nothing */
    int64_t state[ST_MEM_N] = {0};
    int64_t last = INT64_MIN;
    guint i = first[d], end = first[d + 1];
    if (i == end || ev[i].t_ns > 0) {
      visit(data, d, 0, state, NULL);
      last = 0;
    }
    while (i < end) {
      int64_t now = ev[i].t_ns;
      const StMemEvent *alloc = NULL;
      for (; i < end && ev[i].t_ns == now; i++) {
        state[ev[i].category] += ev[i].delta;
        if (ev[i].delta > 0)
          alloc = &ev[i];
      }
      visit(data, d, now, state, alloc);
      last = now;
    }
    if (to_end && last < t->end_ns)
      visit(data, d, t->end_ns, state, NULL);
  }
}
