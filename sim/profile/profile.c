/* profile.c: see profile.h. The measurements in memory, their lookup and
 * interpolation; files are read and written in profile_file.c, what
 * measured profiles add is in profile_measure.c, and the layout of both
 * views is in profile_private.h. */
#include "profile/profile_private.h"

#include <string.h>

#include "base/util.h"

G_DEFINE_QUARK(st-profile-error-quark, st_profile_error)

#define SEP ST_PROFILE_SEP

void
st_profile_layer_entry_free(gpointer data)
{
  ProfileLayerEntry *e = data;
  g_free(e->device);
  g_free(e->name);
  g_free(e->signature);
  g_free(e);
}

void
st_profile_link_entry_free(gpointer data)
{
  ProfileLinkEntry *e = data;
  g_free(e->device);
  g_free(e);
}

static void
points_free(gpointer data)
{
  g_array_unref(data);
}

/* A table owning its string keys and, through `free_value`, its values. */
static GHashTable *
keyed_by_string(GDestroyNotify free_value)
{
  return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, free_value);
}

StProfile *
st_profile_new(void)
{
  StProfile *p = g_new0(StProfile, 1);
  p->strings = g_string_chunk_new(1 << 16);
  p->entry_blocks = g_ptr_array_new_with_free_func(g_free);
  p->key = g_string_sized_new(128);
  p->layer_entries = g_hash_table_new(g_str_hash, g_str_equal);
  p->link_entries = keyed_by_string(st_profile_link_entry_free);
  p->copy_entries = keyed_by_string(st_profile_copy_entry_free);
  p->share_entries = keyed_by_string(st_profile_share_entry_free);
  p->layer_index = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, points_free);
  p->link_index = keyed_by_string(points_free);
  p->copy_index = keyed_by_string(points_free);
  p->fill_index = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, points_free);
  return p;
}

void
st_profile_free(StProfile *p)
{
  if (p == NULL)
    return;
  g_free(p->device);
  g_free(p->driver);
  g_free(p->cuda);
  g_free(p->date);
  g_free(p->source);
  g_free(p->machine);
  g_free(p->precision);
  g_hash_table_destroy(p->layer_entries);
  g_hash_table_destroy(p->link_entries);
  g_hash_table_destroy(p->copy_entries);
  g_hash_table_destroy(p->share_entries);
  g_hash_table_destroy(p->layer_index);
  g_hash_table_destroy(p->link_index);
  g_hash_table_destroy(p->copy_index);
  g_hash_table_destroy(p->fill_index);
  g_ptr_array_free(p->entry_blocks, TRUE);
  g_string_chunk_free(p->strings);
  g_string_free(p->key, TRUE);
  g_free(p);
}

void
st_profile_set_device(StProfile *p, const char *device, const char *driver, const char *cuda,
                      const char *date, const char *source)
{
  g_return_if_fail(p != NULL);
  g_free(p->device);
  g_free(p->driver);
  g_free(p->cuda);
  g_free(p->date);
  g_free(p->source);
  p->device = g_strdup(device);
  p->driver = g_strdup(driver);
  p->cuda = g_strdup(cuda);
  p->date = g_strdup(date);
  p->source = g_strdup(source);
}

/* ---- points: insertion and interpolation ------------------------------- */

/* The points of index[key], made (the key copied into p->strings) when
 * there are none. */
static GArray *
points_of(StProfile *p, GHashTable *index, const char *key)
{
  GArray *points = g_hash_table_lookup(index, key);
  if (points == NULL) {
    points = g_array_new(FALSE, FALSE, sizeof(StProfilePoint));
    g_hash_table_insert(index, g_string_chunk_insert(p->strings, key), points);
  }
  return points;
}

/* Index of the first point with x >= `x` (n when none). */
static guint
lower_bound(const GArray *points, int64_t x)
{
  guint lo = 0, hi = points->len;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (g_array_index(points, StProfilePoint, mid).x < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static void
points_add(GArray *points, int64_t x, double value)
{
  guint i = lower_bound(points, x);
  StProfilePoint p = {x, value};
  if (i < points->len && g_array_index(points, StProfilePoint, i).x == x)
    g_array_index(points, StProfilePoint, i) = p;
  else
    g_array_insert_val(points, i, p);
}

void
st_profile_index_add(GHashTable *index, char *key, int64_t x, double value)
{
  GArray *points = g_hash_table_lookup(index, key);
  if (points == NULL) {
    points = g_array_new(FALSE, FALSE, sizeof(StProfilePoint));
    g_hash_table_insert(index, key, points);
  } else {
    g_free(key);
  }
  points_add(points, x, value);
}

void
st_profile_index_add_borrowed(StProfile *p, GHashTable *index, const char *key, int64_t x,
                              double value)
{
  points_add(points_of(p, index, key), x, value);
}

/* The time at `x` from sorted points (see profile.h). Between two points:
 * linear. Beyond them: linear from the two nearest, but when
 * `floor_proportional` never below t_near * x / x_near (a kernel that has
 * filled the GPU cannot get faster per sample), and never negative (then
 * proportional). One point: proportional. *exact says x was measured. */
double
st_profile_points_at(const GArray *points, int64_t x, gboolean floor_proportional,
                     gboolean *exact)
{
  g_assert(points->len > 0);
  guint n = points->len;
  guint i = lower_bound(points, x);
  const StProfilePoint *p = (const StProfilePoint *)(gpointer)points->data;
  *exact = i < n && p[i].x == x;
  if (*exact)
    return p[i].value;
  if (n == 1)
    return p[0].value * (double)x / (double)p[0].x;
  const StProfilePoint *a, *b, *nearest;
  if (i == 0) {
    a = &p[0];
    b = &p[1];
    nearest = a;
  } else if (i == n) {
    a = &p[n - 2];
    b = &p[n - 1];
    nearest = b;
  } else {
    a = &p[i - 1];
    b = &p[i];
    nearest = NULL;
  }
  double linear =
    a->value + (b->value - a->value) * (double)(x - a->x) / (double)(b->x - a->x);
  if (nearest == NULL)
    return MAX(linear, 0.0);
  double proportional = nearest->value * (double)x / (double)nearest->x;
  if (floor_proportional || linear < 0)
    return MAX(linear, proportional);
  return linear;
}

/* ---- adding entries ----------------------------------------------------- */

/* Keys are made for every entry added and every lookup: joined by hand,
 * not by printf (a Kineto trace or a Chakra model of 10^6 layers makes
 * millions), to the same text. */

char *
st_profile_layer_key(const char *device, char by, const char *key, StPass pass)
{
  char p[ST_INT_TEXT_SIZE], b[2] = {by, '\0'};
  return g_strconcat(device, SEP, b, SEP, key, SEP, st_int_text((int)pass, p), NULL);
}

/* `parts` joined by ST_PROFILE_SEP into `out`, one copy each. */
static const char *
join_into(GString *out, const char *const *parts, int n)
{
  gsize len[8], total = 0;
  g_assert(n <= 8);
  for (int i = 0; i < n; i++)
    total += (len[i] = strlen(parts[i])) + (i > 0);
  g_string_set_size(out, total);
  char *at = out->str;
  for (int i = 0; i < n; i++) {
    if (i > 0)
      *at++ = SEP[0];
    memcpy(at, parts[i], len[i]);
    at += len[i];
  }
  return out->str;
}

const char *
st_profile_layer_key_into(GString *out, const char *device, char by, const char *key,
                          StPass pass)
{
  char p[ST_INT_TEXT_SIZE], b[2] = {by, '\0'};
  const char *parts[] = {device, b, key, st_int_text((int)pass, p)};
  return join_into(out, parts, G_N_ELEMENTS(parts));
}

char *
st_profile_link_key(const char *device, StCollKind coll, gboolean p2p, StLinkClass link,
                    int ranks)
{
  return g_strdup_printf("%s" SEP "%d" SEP "%d" SEP "%d" SEP "%d", device, (int)coll, p2p ? 1 : 0,
                         (int)link, ranks);
}

char *
st_profile_layer_entry_key(const char *device, const char *name, const char *signature,
                           StPass pass, int64_t x)
{
  char p[ST_INT_TEXT_SIZE], n[ST_INT_TEXT_SIZE];
  return g_strconcat(device, SEP, name != NULL ? name : "", SEP,
                     signature != NULL ? signature : "", SEP, st_int_text((int)pass, p), SEP,
                     st_int_text(x, n), NULL);
}

const char *
st_profile_layer_entry_key_into(GString *out, const char *device, const char *name,
                                const char *signature, StPass pass, int64_t x)
{
  char p[ST_INT_TEXT_SIZE], n[ST_INT_TEXT_SIZE];
  const char *parts[] = {device, name != NULL ? name : "", signature != NULL ? signature : "",
                         st_int_text((int)pass, p), st_int_text(x, n)};
  return join_into(out, parts, G_N_ELEMENTS(parts));
}

/* A new entry from the profile's blocks (st_profile_free releases them). */
static ProfileLayerEntry *
new_layer_entry(StProfile *p)
{
  if (p->entry_blocks->len == 0 || p->block_used == ST_PROFILE_ENTRY_BLOCK) {
    g_ptr_array_add(p->entry_blocks, g_new(ProfileLayerEntry, ST_PROFILE_ENTRY_BLOCK));
    p->block_used = 0;
  }
  ProfileLayerEntry *block = g_ptr_array_index(p->entry_blocks, p->entry_blocks->len - 1);
  return &block[p->block_used++];
}

/* `text` copied into the profile's strings, or *last when that is the
 * same text (then kept there); NULL stays NULL. The strings are never
 * changed or freed apart, so entries may share one. */
static char *
profile_string(StProfile *p, char **last, const char *text)
{
  if (text == NULL)
    return NULL;
  if (*last == NULL || strcmp(*last, text) != 0)
    *last = g_string_chunk_insert(p->strings, text);
  return *last;
}

void
st_profile_add_layer(StProfile *p, const char *device, const char *name, const char *signature,
                     StPass pass, int64_t x, double time_ns, double spread_ns)
{
  g_return_if_fail(p != NULL && device != NULL && (name != NULL || signature != NULL));
  g_return_if_fail(pass > ST_PASS_INVALID && pass < ST_PASS_N && x > 0 && time_ns >= 0);
  const char *key = st_profile_layer_entry_key_into(p->key, device, name, signature, pass, x);
  /* A new time replaces the old entry's in place, keeping the fill
   * measured for it: the fill index still holds it, and save must agree
   * with lookups. */
  ProfileLayerEntry *e = g_hash_table_lookup(p->layer_entries, key);
  if (e == NULL) {
    e = new_layer_entry(p);
    *e = (ProfileLayerEntry){.fill = 0, .fill_bound = FALSE};
    g_hash_table_insert(p->layer_entries, g_string_chunk_insert(p->strings, key), e);
  }
  double fill = e->fill;
  gboolean fill_bound = e->fill_bound;
  /* One device for every entry, as a rule: the last one's copy is kept
   * rather than found again in the chunk's table (a hash a call). */
  if (p->device_interned == NULL || strcmp(p->device_interned, device) != 0)
    p->device_interned = g_string_chunk_insert_const(p->strings, device);
  *e = (ProfileLayerEntry){p->device_interned,
                           profile_string(p, &p->last_name, name),
                           profile_string(p, &p->last_signature, signature),
                           pass,
                           x,
                           time_ns,
                           MAX(spread_ns, 0.0),
                           fill,
                           fill_bound};
  if (name != NULL)
    st_profile_index_add_borrowed(p, p->layer_index,
                                  st_profile_layer_key_into(p->key, device, 'n', name, pass), x,
                                  time_ns);
  if (signature != NULL)
    st_profile_index_add_borrowed(p, p->layer_index,
                                  st_profile_layer_key_into(p->key, device, 's', signature, pass),
                                  x, time_ns);
}

/* A collective (p2p FALSE) or a point-to-point transfer (coll INVALID). */
void
st_profile_add_link_entry(StProfile *p, const char *device, StCollKind coll, gboolean p2p,
                          StLinkClass link, int ranks, int64_t bytes, double time_ns,
                          double spread_ns)
{
  g_return_if_fail(p != NULL && device != NULL && ranks > 0 && bytes > 0 && time_ns >= 0);
  g_return_if_fail(p2p ? coll == ST_COLL_INVALID && ranks == 2
                       : coll > ST_COLL_INVALID && coll < ST_COLL_N);
  g_return_if_fail(link >= 0 && link < ST_LINK_N);
  ProfileLinkEntry *e = g_new0(ProfileLinkEntry, 1);
  *e = (ProfileLinkEntry){g_strdup(device), coll, p2p, link, ranks, bytes, time_ns,
                          MAX(spread_ns, 0.0)};
  char *key = g_strdup_printf("%s" SEP "%d" SEP "%d" SEP "%d" SEP "%d" SEP "%" G_GINT64_FORMAT,
                              device, (int)coll, p2p ? 1 : 0, (int)link, ranks, bytes);
  g_hash_table_replace(p->link_entries, key, e);
  st_profile_index_add(p->link_index, st_profile_link_key(device, coll, p2p, link, ranks), bytes,
                       time_ns);
}

void
st_profile_add_link(StProfile *p, const char *device, StCollKind coll, StLinkClass link,
                    int ranks, int64_t bytes, double time_ns)
{
  st_profile_add_link_entry(p, device, coll, FALSE, link, ranks, bytes, time_ns, 0);
}

void
st_profile_add_link_measured(StProfile *p, const char *device, StCollKind coll,
                             StLinkClass link, int ranks, int64_t bytes, double time_ns,
                             double spread_ns)
{
  st_profile_add_link_entry(p, device, coll, FALSE, link, ranks, bytes, time_ns, spread_ns);
}

/* ---- lookups ------------------------------------------------------------ */

static const GArray *
find_layer_points(const StProfile *p, const char *device, const char *name,
                  const char *signature, StPass pass)
{
  const GArray *points = NULL;
  if (name != NULL) {
    g_autofree char *key = st_profile_layer_key(device, 'n', name, pass);
    points = g_hash_table_lookup(p->layer_index, key);
  }
  if (points == NULL && signature != NULL) {
    g_autofree char *key = st_profile_layer_key(device, 's', signature, pass);
    points = g_hash_table_lookup(p->layer_index, key);
  }
  return points;
}

gboolean
st_profile_layer_time(const StProfile *p, const char *device, const char *name,
                      const char *signature, StPass pass, int64_t x, double fwd_fraction,
                      double *time_ns, StCostSource *source)
{
  g_return_val_if_fail(p != NULL && device != NULL && time_ns != NULL && x > 0, FALSE);
  gboolean exact = FALSE;
  /* A measurement of this very pass, under the name first, then the signature. */
  const GArray *points = find_layer_points(p, device, name, signature, pass);
  if (points != NULL) {
    *time_ns = st_profile_points_at(points, x, TRUE, &exact);
    if (source != NULL)
      *source = exact ? ST_SRC_PROFILED : ST_SRC_INTERPOLATED;
    return TRUE;
  }
  /* Only fwd+bwd was measured (DeepPool's profiles): split it by FLOPs. */
  if (pass != ST_PASS_FWD && pass != ST_PASS_BWD)
    return FALSE;
  points = find_layer_points(p, device, name, signature, ST_PASS_FWDBWD);
  if (points == NULL)
    return FALSE;
  double fraction = CLAMP(fwd_fraction, 0.0, 1.0);
  double both = st_profile_points_at(points, x, TRUE, &exact);
  *time_ns = both * (pass == ST_PASS_FWD ? fraction : 1.0 - fraction);
  if (source != NULL)
    *source = ST_SRC_INTERPOLATED;
  return TRUE;
}

gboolean
st_profile_link_time(const StProfile *p, const char *device, StCollKind coll, StLinkClass link,
                     int ranks, int64_t bytes, double *time_ns, StCostSource *source)
{
  g_return_val_if_fail(p != NULL && device != NULL && time_ns != NULL, FALSE);
  if (bytes <= 0)
    return FALSE;
  g_autofree char *key = st_profile_link_key(device, coll, FALSE, link, ranks);
  const GArray *points = g_hash_table_lookup(p->link_index, key);
  if (points == NULL)
    return FALSE;
  gboolean exact;
  *time_ns = st_profile_points_at(points, bytes, FALSE, &exact);
  if (source != NULL)
    *source = ST_SRC_LINK_PROFILE;
  return TRUE;
}

int
st_profile_n_layer_entries(const StProfile *p)
{
  return (int)g_hash_table_size(p->layer_entries);
}

int
st_profile_n_link_entries(const StProfile *p)
{
  return (int)g_hash_table_size(p->link_entries);
}

static void
add_device(GPtrArray *names, const char *device)
{
  for (guint i = 0; i < names->len; i++)
    if (strcmp(g_ptr_array_index(names, i), device) == 0)
      return;
  g_ptr_array_add(names, g_strdup(device));
}

static int
compare_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

const char *
st_profile_machine(const StProfile *p)
{
  return p->machine;
}

const char *
st_profile_date(const StProfile *p)
{
  return p->date;
}

char **
st_profile_devices(const StProfile *p)
{
  GPtrArray *names = g_ptr_array_new();
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, p->layer_entries);
  while (g_hash_table_iter_next(&it, NULL, &value))
    add_device(names, ((ProfileLayerEntry *)value)->device);
  g_hash_table_iter_init(&it, p->link_entries);
  while (g_hash_table_iter_next(&it, NULL, &value))
    add_device(names, ((ProfileLinkEntry *)value)->device);
  g_ptr_array_sort(names, compare_names);
  g_ptr_array_add(names, NULL);
  return (char **)g_ptr_array_free(names, FALSE);
}
