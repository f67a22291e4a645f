/* timeline.c: see timeline.h. */
#include "output/timeline.h"

#include <stdlib.h>
#include <string.h>

struct StTimelineArrays {
  GArray *ops, *mem, *comm; /* a reference each, kept between timelines */
  gboolean lent;
};

StTimelineArrays *
st_timeline_arrays_new(void)
{
  StTimelineArrays *a = g_new0(StTimelineArrays, 1);
  a->ops = g_array_new(FALSE, FALSE, sizeof(StOpRecord));
  a->mem = g_array_new(FALSE, FALSE, sizeof(StMemEvent));
  a->comm = g_array_new(FALSE, FALSE, sizeof(StCommRecord));
  return a;
}

void
st_timeline_arrays_free(StTimelineArrays *a)
{
  if (a == NULL)
    return;
  g_return_if_fail(!a->lent);
  g_array_unref(a->ops);
  g_array_unref(a->mem);
  g_array_unref(a->comm);
  g_free(a);
}

static GArray *
borrow(GArray *a)
{
  g_array_set_size(a, 0);
  return g_array_ref(a);
}

StTimeline *
st_timeline_new(const StSchedule *schedule, gboolean measured, const char *origin)
{
  return st_timeline_new_in(schedule, measured, origin, NULL);
}

StTimeline *
st_timeline_new_in(const StSchedule *schedule, gboolean measured, const char *origin,
                   StTimelineArrays *arrays)
{
  int32_t *rank_rep = g_new(int32_t, schedule->n_ranks);
  for (int r = 0; r < schedule->n_ranks; r++)
    rank_rep[r] = r;
  int32_t *device_rep = g_new(int32_t, schedule->n_devices);
  for (int d = 0; d < schedule->n_devices; d++)
    device_rep[d] = d;
  return st_timeline_new_folded(schedule, measured, origin, arrays, rank_rep, device_rep);
}

StTimeline *
st_timeline_new_folded(const StSchedule *schedule, gboolean measured, const char *origin,
                       StTimelineArrays *arrays, int32_t *rank_rep, int32_t *device_rep)
{
  StTimeline *t = g_new0(StTimeline, 1);
  t->schedule = schedule;
  t->measured = measured;
  t->on_host = g_strcmp0(schedule->cluster->gpu.name, "host") == 0;
  t->origin = g_strdup(origin);
  t->rank_rep = rank_rep;
  t->device_rep = device_rep;
  if (arrays != NULL && !arrays->lent) {
    arrays->lent = TRUE;
    t->lender = arrays;
    t->ops = borrow(arrays->ops);
    t->mem = borrow(arrays->mem);
    t->comm = borrow(arrays->comm);
  } else {
    t->ops = g_array_new(FALSE, FALSE, sizeof(StOpRecord));
    t->mem = g_array_new(FALSE, FALSE, sizeof(StMemEvent));
    t->comm = g_array_new(FALSE, FALSE, sizeof(StCommRecord));
  }
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
  if (t->lender != NULL)
    t->lender->lent = FALSE;
  g_array_unref(t->ops);
  g_array_unref(t->mem);
  g_array_unref(t->comm);
  st_net_trace_free(t->net);
  g_ptr_array_unref(t->algos);
  g_free(t);
}

/* Grows a's room to n (GArray has no reserve of its own): its length set
 * to n and back, which allocates but writes nothing. */
static void
reserve(GArray *a, guint n)
{
  guint len = a->len;
  if (n <= len)
    return;
  g_array_set_size(a, n);
  g_array_set_size(a, len);
}

void
st_timeline_reserve(StTimeline *t, guint ops, guint mem)
{
  reserve(t->ops, ops);
  reserve(t->mem, mem);
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

/* By time, then recorded order (indices of one device ascend). */
static gint
compare_mem(gconstpointer a, gconstpointer b, gpointer events)
{
  const StMemEvent *ev = events;
  const StMemEvent *x = &ev[*(const guint *)a], *y = &ev[*(const guint *)b];
  if (x->t_ns != y->t_ns)
    return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
  return (*(const guint *)a > *(const guint *)b) - (*(const guint *)a < *(const guint *)b);
}

void
st_timeline_walk_memory(const StTimeline *t, gboolean to_end, StMemVisit visit, gpointer data)
{
  /* The events' indices by device (a counting sort, stable), so each
   * device's are contiguous, then by time within a device: they are
   * recorded in time order, so that is checked and a device sorted only
   * when it is not. O(E) for the simulator's timelines; indices, not copies
   * of the events, so that a planner's thousands of walks touch a tenth of
   * the fresh memory. */
  guint n = t->mem->len;
  int n_dev = t->schedule->n_devices;
  const StMemEvent *all = (const StMemEvent *)(gpointer)t->mem->data;
  g_autofree guint *first = g_new0(guint, n_dev + 1);
  for (guint i = 0; i < n; i++)
    first[all[i].device + 1]++;
  for (int d = 0; d < n_dev; d++)
    first[d + 1] += first[d];
  g_autofree guint *idx = g_new(guint, n > 0 ? n : 1);
  g_autofree guint *fill = g_memdup2(first, sizeof(guint) * (n_dev + 1));
  for (guint i = 0; i < n; i++)
    idx[fill[all[i].device]++] = i;
  for (int d = 0; d < n_dev; d++)
    for (guint i = first[d] + 1; i < first[d + 1]; i++)
      if (all[idx[i - 1]].t_ns > all[idx[i]].t_ns) {
        g_qsort_with_data(idx + first[d], (gint)(first[d + 1] - first[d]), sizeof *idx,
                          compare_mem, (gpointer)all);
        break;
      }
  for (int d = 0; d < n_dev; d++) {
    if (!st_timeline_device_recorded(t, d))
      continue; /* events of a device that is not recorded stand for nothing */
    int64_t state[ST_MEM_N] = {0};
    int64_t last = INT64_MIN;
    guint i = first[d], end = first[d + 1];
    if (i == end || all[idx[i]].t_ns > 0) {
      visit(data, d, 0, state, NULL);
      last = 0;
    }
    while (i < end) {
      int64_t now = all[idx[i]].t_ns;
      const StMemEvent *alloc = NULL;
      for (; i < end && all[idx[i]].t_ns == now; i++) {
        const StMemEvent *e = &all[idx[i]];
        state[e->category] += e->delta;
        if (e->delta > 0)
          alloc = e;
      }
      visit(data, d, now, state, alloc);
      last = now;
    }
    if (to_end && last < t->end_ns)
      visit(data, d, t->end_ns, state, NULL);
  }
}
