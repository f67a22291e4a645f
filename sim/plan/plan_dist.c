/* plan_dist.c: what a search spread over processes exchanges (plan_dist.h):
 * points as bytes, and whether a launcher started this process. */
#include "plan/plan_private.h"

#include <stdlib.h>
#include <string.h>

int
st_plan_dist_launched(void)
{
  static const char *const VARS[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", NULL};
  for (const char *const *v = VARS; *v != NULL; v++) {
    const char *text = g_getenv(*v);
    if (text != NULL && atoi(text) > 0)
      return atoi(text);
  }
  return 1;
}

static void
put_string(GByteArray *out, const char *s)
{
  guint32 n = s != NULL ? (guint32)strlen(s) + 1 : 0;
  g_byte_array_append(out, (const guint8 *)&n, sizeof n);
  if (n > 0)
    g_byte_array_append(out, (const guint8 *)s, n);
}

static gboolean
get_string(const guint8 **at, const guint8 *end, char **s)
{
  guint32 n;
  if (end - *at < (ptrdiff_t)sizeof n)
    return FALSE;
  memcpy(&n, *at, sizeof n);
  *at += sizeof n;
  if (end - *at < (ptrdiff_t)n || (n > 0 && (*at)[n - 1] != '\0'))
    return FALSE;
  g_free(*s);
  *s = n > 0 ? g_strdup((const char *)*at) : NULL;
  *at += n;
  return TRUE;
}

/* Index, the point's bytes (the receiver keeps its own pointers), whether a
 * simulation record follows and its bytes, its strings. */
static void
pack(GByteArray *out, const StPlan *plan, int i)
{
  const StPlanPoint *pt = &plan->points[i];
  gint32 index = i;
  StPlanPoint copy = *pt;
  copy.reason = copy.description = NULL;
  copy.kept = NULL;
  copy.sim = NULL;
  guint8 has_sim = pt->sim != NULL;
  g_byte_array_append(out, (const guint8 *)&index, sizeof index);
  g_byte_array_append(out, (const guint8 *)&copy, sizeof copy);
  g_byte_array_append(out, &has_sim, 1);
  if (has_sim)
    g_byte_array_append(out, (const guint8 *)pt->sim, sizeof *pt->sim);
  put_string(out, pt->reason);
  put_string(out, pt->description);
}

static gboolean
unpack(StPlan *plan, GBytes *bytes)
{
  gsize size;
  const guint8 *at = g_bytes_get_data(bytes, &size);
  if (size == 0) /* a rank with nothing to send: GLib's data is NULL then */
    return TRUE;
  const guint8 *end = at + size;
  while (at < end) {
    gint32 index;
    StPlanPoint copy;
    if (end - at < (ptrdiff_t)(sizeof index + sizeof copy))
      return FALSE;
    memcpy(&index, at, sizeof index);
    memcpy(&copy, at + sizeof index, sizeof copy);
    at += sizeof index + sizeof copy;
    if (index < 0 || index >= (gint32)plan->configs->len)
      return FALSE;
    StPlanPoint *pt = &plan->points[index];
    /* Pointers stay this process's: its strings, its kept schedule, and
     * the update's static text (made here too, before the search). */
    char *reason = pt->reason, *description = pt->description;
    StSchedule *kept = pt->kept;
    StPlanSim *sim = pt->sim;
    StUpdate update = pt->update;
    *pt = copy;
    pt->reason = reason;
    pt->description = description;
    pt->kept = kept;
    pt->sim = sim;
    pt->update = update;
    /* Its simulation record, when the sender's point has one. */
    if (at >= end)
      return FALSE;
    gboolean has_sim = *at++ != 0;
    if (!has_sim) {
      g_clear_pointer(&pt->sim, g_free);
    } else {
      if (end - at < (ptrdiff_t)sizeof *pt->sim)
        return FALSE;
      if (pt->sim == NULL)
        pt->sim = g_new(StPlanSim, 1);
      memcpy(pt->sim, at, sizeof *pt->sim);
      at += sizeof *pt->sim;
    }
    if (!get_string(&at, end, &pt->reason) || !get_string(&at, end, &pt->description))
      return FALSE;
  }
  return TRUE;
}

gboolean
st_plan_dist_exchange(const StPlanDist *dist, StPlan *plan, const int *indices, int n,
                      const int *owner, GError **error)
{
  g_autoptr(GByteArray) mine = g_byte_array_new();
  for (int k = 0; k < n; k++)
    if (owner[indices[k]] == dist->rank)
      pack(mine, plan, indices[k]);
  g_autoptr(GBytes) sent = g_byte_array_free_to_bytes(g_steal_pointer(&mine));
  g_autofree GBytes **all = g_new0(GBytes *, dist->size);
  gboolean ok = dist->allgather(dist, sent, all, error);
  for (int r = 0; r < dist->size; r++) {
    if (ok && r != dist->rank && !unpack(plan, all[r])) {
      g_set_error(error, ST_PLAN_ERROR, ST_ERROR_FAILED,
                  "process %d sent points this one cannot read (every process must run the "
                  "same stagger on the same architecture)",
                  r);
      ok = FALSE;
    }
    if (all[r] != NULL)
      g_bytes_unref(all[r]);
  }
  return ok;
}
