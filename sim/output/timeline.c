/* timeline.c: see timeline.h. */
#include "output/timeline.h"

StTimeline *
st_timeline_new(const StSchedule *schedule, gboolean measured, const char *origin)
{
  StTimeline *t = g_new0(StTimeline, 1);
  t->schedule = schedule;
  t->measured = measured;
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
