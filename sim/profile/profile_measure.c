/* profile_measure.c: what measured profiles (`stagger profile`,
 * exec/profiler.h) add to the format, in memory: the machine facts, fills of
 * layer entries and their lookup, point-to-point transfers, copies and the
 * raw sharing measurements. Files: profile_file.c; layout:
 * profile_private.h; the format: profile.h. */
#include "profile/profile_private.h"

#include <string.h>

#define SEP ST_PROFILE_SEP

void
st_profile_copy_entry_free(gpointer data)
{
  ProfileCopyEntry *e = data;
  g_free(e->device);
  g_free(e);
}

void
st_profile_share_entry_free(gpointer data)
{
  ProfileShareEntry *e = data;
  g_free(e->device);
  g_free(e->name);
  g_free(e->signature);
  g_free(e->end_ns);
  g_free(e);
}

void
st_profile_set_machine(StProfile *p, const char *machine, const char *precision)
{
  g_return_if_fail(p != NULL);
  g_free(p->machine);
  g_free(p->precision);
  p->machine = g_strdup(machine);
  p->precision = g_strdup(precision);
}

/* ---- fills ------------------------------------------------------------------ */

gboolean
st_profile_set_layer_fill(StProfile *p, const char *device, const char *name,
                          const char *signature, StPass pass, int64_t x, double fill,
                          gboolean bound)
{
  g_return_val_if_fail(p != NULL && device != NULL && (name != NULL || signature != NULL), FALSE);
  g_return_val_if_fail(fill > 0 && fill <= 1, FALSE);
  g_autofree char *key = st_profile_layer_entry_key(device, name, signature, pass, x);
  ProfileLayerEntry *e = g_hash_table_lookup(p->layer_entries, key);
  if (e == NULL)
    return FALSE;
  e->fill = fill;
  e->fill_bound = bound;
  if (name != NULL)
    st_profile_index_add_borrowed(p, p->fill_index,
                                  st_profile_layer_key_into(p->key, device, 'n', name, pass), x,
                                  fill);
  if (signature != NULL)
    st_profile_index_add_borrowed(p, p->fill_index,
                                  st_profile_layer_key_into(p->key, device, 's', signature, pass),
                                  x, fill);
  return TRUE;
}

/* Linear between the points, the nearest point's value beyond them: a fill
 * measured at batch 32 says nothing about how much more a batch of 64
 * would fill, and the device caps it anyway. */
static double
fill_at(const GArray *points, int64_t x)
{
  const StProfilePoint *pt = (const StProfilePoint *)(gpointer)points->data;
  guint n = points->len;
  if (x <= pt[0].x)
    return pt[0].value;
  if (x >= pt[n - 1].x)
    return pt[n - 1].value;
  guint i = 1;
  while (pt[i].x < x)
    i++;
  const StProfilePoint *a = &pt[i - 1], *b = &pt[i];
  return a->value + (b->value - a->value) * (double)(x - a->x) / (double)(b->x - a->x);
}

gboolean
st_profile_layer_fill(const StProfile *p, const char *device, const char *name,
                      const char *signature, StPass pass, int64_t x, double *fill)
{
  g_return_val_if_fail(p != NULL && device != NULL && fill != NULL, FALSE);
  const GArray *points = NULL;
  if (name != NULL) {
    g_autofree char *key = st_profile_layer_key(device, 'n', name, pass);
    points = g_hash_table_lookup(p->fill_index, key);
  }
  if (points == NULL && signature != NULL) {
    g_autofree char *key = st_profile_layer_key(device, 's', signature, pass);
    points = g_hash_table_lookup(p->fill_index, key);
  }
  if (points == NULL || points->len == 0)
    return FALSE;
  *fill = CLAMP(fill_at(points, x), 1e-3, 1.0);
  return TRUE;
}

/* ---- point-to-point ------------------------------------------------------- */

void
st_profile_add_p2p(StProfile *p, const char *device, StLinkClass link, int64_t bytes,
                   double time_ns, double spread_ns)
{
  st_profile_add_link_entry(p, device, ST_COLL_INVALID, TRUE, link, 2, bytes, time_ns,
                            spread_ns);
}

gboolean
st_profile_p2p_time(const StProfile *p, const char *device, StLinkClass link, int64_t bytes,
                    double *time_ns)
{
  g_return_val_if_fail(p != NULL && device != NULL && time_ns != NULL, FALSE);
  if (bytes <= 0)
    return FALSE;
  g_autofree char *key = st_profile_link_key(device, ST_COLL_INVALID, TRUE, link, 2);
  const GArray *points = g_hash_table_lookup(p->link_index, key);
  if (points == NULL)
    return FALSE;
  gboolean exact;
  *time_ns = st_profile_points_at(points, bytes, FALSE, &exact);
  return TRUE;
}

/* ---- copies ----------------------------------------------------------------- */

static char *
copy_key(const char *device, StCopyKind kind)
{
  return g_strdup_printf("%s" SEP "%d", device, (int)kind);
}

void
st_profile_add_copy(StProfile *p, const char *device, StCopyKind kind, int64_t bytes,
                    double time_ns, double spread_ns)
{
  g_return_if_fail(p != NULL && device != NULL && bytes > 0 && time_ns >= 0);
  g_return_if_fail(kind > ST_COPY_INVALID && kind < ST_COPY_N);
  ProfileCopyEntry *e = g_new0(ProfileCopyEntry, 1);
  *e = (ProfileCopyEntry){g_strdup(device), kind, bytes, time_ns, MAX(spread_ns, 0.0)};
  char *key = g_strdup_printf("%s" SEP "%d" SEP "%" G_GINT64_FORMAT, device, (int)kind, bytes);
  g_hash_table_replace(p->copy_entries, key, e);
  st_profile_index_add(p->copy_index, copy_key(device, kind), bytes, time_ns);
}

gboolean
st_profile_copy_time(const StProfile *p, const char *device, StCopyKind kind, int64_t bytes,
                     double *time_ns)
{
  g_return_val_if_fail(p != NULL && device != NULL && time_ns != NULL, FALSE);
  if (bytes <= 0)
    return FALSE;
  g_autofree char *key = copy_key(device, kind);
  const GArray *points = g_hash_table_lookup(p->copy_index, key);
  if (points == NULL)
    return FALSE;
  gboolean exact;
  /* A copy, like a kernel, cannot get cheaper per byte past the largest
   * size measured: the floor applies. */
  *time_ns = st_profile_points_at(points, bytes, TRUE, &exact);
  return TRUE;
}

/* ---- sharing ------------------------------------------------------------------ */

void
st_profile_add_sharing(StProfile *p, const char *device, const StProfileSharing *m)
{
  g_return_if_fail(p != NULL && device != NULL && m != NULL);
  g_return_if_fail((m->name != NULL || m->signature != NULL) && m->streams >= 2 && m->x > 0);
  g_return_if_fail(m->pass > ST_PASS_INVALID && m->pass < ST_PASS_N && m->end_ns != NULL);
  ProfileShareEntry *e = g_new0(ProfileShareEntry, 1);
  *e = (ProfileShareEntry){g_strdup(device), g_strdup(m->name), g_strdup(m->signature),
                           m->pass, m->x, m->streams, m->priorities, MAX(m->alone_ns, 0.0),
                           g_memdup2(m->end_ns, sizeof(double) * (gsize)m->streams)};
  char *key = g_strdup_printf("%s" SEP "%s" SEP "%s" SEP "%d" SEP "%" G_GINT64_FORMAT SEP
                              "%d" SEP "%d",
                              device, m->name ? m->name : "", m->signature ? m->signature : "",
                              (int)m->pass, m->x, m->streams, m->priorities ? 1 : 0);
  g_hash_table_replace(p->share_entries, key, e);
}

/* The two-stream entry of (device, name or signature, pass, x) with or
 * without priorities; `by` 'n' matches the name, 's' the signature. */
static const ProfileShareEntry *
find_pair(const StProfile *p, const char *device, char by, const char *key, StPass pass,
          int64_t x, gboolean priorities)
{
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, p->share_entries);
  while (g_hash_table_iter_next(&it, NULL, &value)) {
    const ProfileShareEntry *e = value;
    const char *k = by == 'n' ? e->name : e->signature;
    if (e->streams == 2 && e->priorities == priorities && e->pass == pass && e->x == x &&
        e->alone_ns > 0 && k != NULL && strcmp(k, key) == 0 && strcmp(e->device, device) == 0)
      return e;
  }
  return NULL;
}

gboolean
st_profile_layer_leak(const StProfile *p, const char *device, const char *name,
                      const char *signature, StPass pass, int64_t x, double *leak)
{
  g_return_val_if_fail(p != NULL && device != NULL && leak != NULL, FALSE);
  const char *keys[2] = {name, signature};
  for (int i = 0; i < 2; i++) {
    if (keys[i] == NULL)
      continue;
    const ProfileShareEntry *eq = find_pair(p, device, "ns"[i], keys[i], pass, x, FALSE);
    const ProfileShareEntry *hi = find_pair(p, device, "ns"[i], keys[i], pass, x, TRUE);
    if (eq == NULL || hi == NULL)
      continue;
    double s_eq = (eq->end_ns[0] + eq->end_ns[1]) / 2 / eq->alone_ns;
    double s_hi = hi->end_ns[0] / hi->alone_ns;
    if (s_eq < 1.05)
      return FALSE;
    *leak = CLAMP((s_hi - 1) / (s_eq - 1), 0.0, 1.0);
    return TRUE;
  }
  return FALSE;
}

int
st_profile_n_copy_entries(const StProfile *p)
{
  return (int)g_hash_table_size(p->copy_entries);
}

int
st_profile_n_sharing_entries(const StProfile *p)
{
  return (int)g_hash_table_size(p->share_entries);
}
