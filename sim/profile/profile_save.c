/* profile_save.c: writing profile files (format in profile.h; reading is in
 * profile_file.c). Entries come out sorted by their keys, so the same
 * measurements always give the same bytes; optional keys and sections are
 * written only when they hold something. */
#include "profile/profile_private.h"

#include <string.h>

#include "base/error.h"
#include "base/json.h"

static int
cmp_int64(int64_t a, int64_t b)
{
  return (a > b) - (a < b);
}

static int
compare_layer_entries(gconstpointer a, gconstpointer b)
{
  const ProfileLayerEntry *x = *(ProfileLayerEntry *const *)a, *y = *(ProfileLayerEntry *const *)b;
  int c = g_strcmp0(x->name, y->name);
  if (c == 0)
    c = g_strcmp0(x->signature, y->signature);
  if (c == 0)
    c = (int)x->pass - (int)y->pass;
  if (c == 0)
    c = cmp_int64(x->x, y->x);
  return c;
}

static int
compare_link_entries(gconstpointer a, gconstpointer b)
{
  const ProfileLinkEntry *x = *(ProfileLinkEntry *const *)a, *y = *(ProfileLinkEntry *const *)b;
  int c = (int)x->p2p - (int)y->p2p;
  if (c == 0)
    c = (int)x->coll - (int)y->coll;
  if (c == 0)
    c = (int)x->link - (int)y->link;
  if (c == 0)
    c = x->ranks - y->ranks;
  if (c == 0)
    c = cmp_int64(x->bytes, y->bytes);
  return c;
}

static int
compare_copy_entries(gconstpointer a, gconstpointer b)
{
  const ProfileCopyEntry *x = *(ProfileCopyEntry *const *)a, *y = *(ProfileCopyEntry *const *)b;
  int c = (int)x->kind - (int)y->kind;
  return c != 0 ? c : cmp_int64(x->bytes, y->bytes);
}

static int
compare_share_entries(gconstpointer a, gconstpointer b)
{
  const ProfileShareEntry *x = *(ProfileShareEntry *const *)a, *y = *(ProfileShareEntry *const *)b;
  int c = g_strcmp0(x->name, y->name);
  if (c == 0)
    c = g_strcmp0(x->signature, y->signature);
  if (c == 0)
    c = (int)x->pass - (int)y->pass;
  if (c == 0)
    c = cmp_int64(x->x, y->x);
  if (c == 0)
    c = (int)x->priorities - (int)y->priorities;
  if (c == 0)
    c = x->streams - y->streams;
  return c;
}

/* Every entry's first field is its device: the entry structs all start
 * with `char *device`. */
static const char *
entry_device(gconstpointer entry)
{
  return *(char *const *)entry;
}

/* The device whose entries save writes: the one set, else the only one. */
static const char *
save_device(const StProfile *p)
{
  if (p->device != NULL)
    return p->device;
  const char *only = NULL;
  GHashTable *tables[] = {p->layer_entries, p->link_entries, p->copy_entries, p->share_entries};
  for (gsize t = 0; t < G_N_ELEMENTS(tables); t++) {
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, tables[t]);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
      if (only != NULL && strcmp(only, entry_device(value)) != 0)
        return NULL;
      only = entry_device(value);
    }
  }
  return only;
}

/* The entries of `table` on `device`, sorted. Transfer container. */
static GPtrArray *
entries_of(GHashTable *table, const char *device, GCompareFunc compare)
{
  GPtrArray *out = g_ptr_array_new();
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, table);
  while (g_hash_table_iter_next(&it, NULL, &value))
    if (strcmp(entry_device(value), device) == 0)
      g_ptr_array_add(out, value);
  g_ptr_array_sort(out, compare);
  return out;
}

static void
add_optional(cJSON *obj, const char *key, const char *value)
{
  if (value != NULL)
    cJSON_AddStringToObject(obj, key, value);
}

static void
add_layer_keys(cJSON *obj, const char *name, const char *signature, StPass pass, int64_t x)
{
  add_optional(obj, "name", name);
  add_optional(obj, "signature", signature);
  cJSON_AddStringToObject(obj, "pass", st_pass_name(pass));
  st_json_add_int(obj, "x", x);
}

/* A measurement's time and, when measured, its spread (p90 - p10). */
static void
add_time(cJSON *obj, double time_ns, double spread_ns)
{
  cJSON_AddNumberToObject(obj, "time_us", time_ns / 1e3);
  if (spread_ns > 0)
    cJSON_AddNumberToObject(obj, "spread_us", spread_ns / 1e3);
}

static void
write_layers(cJSON *root, GPtrArray *layers)
{
  cJSON *array = cJSON_AddArrayToObject(root, "layers");
  for (guint i = 0; i < layers->len; i++) {
    const ProfileLayerEntry *e = g_ptr_array_index(layers, i);
    cJSON *obj = cJSON_CreateObject();
    add_layer_keys(obj, e->name, e->signature, e->pass, e->x);
    add_time(obj, e->time_ns, e->spread_ns);
    if (e->fill > 0) {
      cJSON_AddNumberToObject(obj, "fill", e->fill);
      if (e->fill_bound)
        cJSON_AddTrueToObject(obj, "fill_bound");
    }
    cJSON_AddItemToArray(array, obj);
  }
}

/* nccl-tests: algbw = bytes / time; busbw = algbw x the collective's factor
 * (1 for a send matched by a receive). In GB/s (1e9 bytes/s), as nccl-tests
 * prints them. */
static void
add_bandwidths(cJSON *obj, const ProfileLinkEntry *e)
{
  if (e->time_ns <= 0)
    return;
  double algbw = (double)e->bytes / e->time_ns; /* bytes/ns = GB/s */
  double factor = e->p2p ? 1.0 : st_coll_busbw_factor(e->coll, e->ranks);
  cJSON_AddNumberToObject(obj, "algbw_GBps", algbw);
  cJSON_AddNumberToObject(obj, "busbw_GBps", algbw * factor);
}

static void
write_links(cJSON *root, GPtrArray *links)
{
  cJSON *array = cJSON_AddArrayToObject(root, "links");
  for (guint i = 0; i < links->len; i++) {
    const ProfileLinkEntry *e = g_ptr_array_index(links, i);
    cJSON *obj = cJSON_CreateObject();
    cJSON_AddStringToObject(obj, "collective", e->p2p ? "send_recv" : st_coll_name(e->coll));
    cJSON_AddStringToObject(obj, "link", st_link_name(e->link));
    st_json_add_int(obj, "ranks", e->ranks);
    st_json_add_int(obj, "bytes", e->bytes);
    add_time(obj, e->time_ns, e->spread_ns);
    add_bandwidths(obj, e);
    cJSON_AddItemToArray(array, obj);
  }
}

static void
write_copies(cJSON *root, GPtrArray *copies)
{
  if (copies->len == 0)
    return;
  cJSON *array = cJSON_AddArrayToObject(root, "copies");
  for (guint i = 0; i < copies->len; i++) {
    const ProfileCopyEntry *e = g_ptr_array_index(copies, i);
    cJSON *obj = cJSON_CreateObject();
    cJSON_AddStringToObject(obj, "kind", st_copy_name(e->kind));
    st_json_add_int(obj, "bytes", e->bytes);
    add_time(obj, e->time_ns, e->spread_ns);
    cJSON_AddItemToArray(array, obj);
  }
}

static void
write_sharing(cJSON *root, GPtrArray *shares)
{
  if (shares->len == 0)
    return;
  cJSON *array = cJSON_AddArrayToObject(root, "sharing");
  for (guint i = 0; i < shares->len; i++) {
    const ProfileShareEntry *e = g_ptr_array_index(shares, i);
    cJSON *obj = cJSON_CreateObject();
    add_layer_keys(obj, e->name, e->signature, e->pass, e->x);
    st_json_add_int(obj, "streams", e->streams);
    cJSON_AddBoolToObject(obj, "priorities", e->priorities);
    cJSON_AddNumberToObject(obj, "alone_us", e->alone_ns / 1e3);
    cJSON *ends = cJSON_AddArrayToObject(obj, "end_us");
    for (int k = 0; k < e->streams; k++)
      cJSON_AddItemToArray(ends, cJSON_CreateNumber(e->end_ns[k] / 1e3));
    cJSON_AddItemToArray(array, obj);
  }
}

gboolean
st_profile_save(const StProfile *p, const char *path, GError **error)
{
  g_return_val_if_fail(p != NULL && path != NULL, FALSE);
  const char *device = save_device(p);
  if (device == NULL) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "%s: the profile holds several devices and none was set", path);
    return FALSE;
  }
  g_autoptr(GPtrArray) layers = entries_of(p->layer_entries, device, compare_layer_entries);
  g_autoptr(GPtrArray) links = entries_of(p->link_entries, device, compare_link_entries);
  g_autoptr(GPtrArray) copies = entries_of(p->copy_entries, device, compare_copy_entries);
  g_autoptr(GPtrArray) shares = entries_of(p->share_entries, device, compare_share_entries);

  g_autoptr(cJSON) root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", "stagger-profile");
  st_json_add_int(root, "version", 1);
  cJSON_AddStringToObject(root, "device", device);
  gboolean own = p->device != NULL && strcmp(p->device, device) == 0;
  add_optional(root, "driver", own ? p->driver : NULL);
  add_optional(root, "cuda", own ? p->cuda : NULL);
  add_optional(root, "date", own ? p->date : NULL);
  add_optional(root, "source", own ? p->source : NULL);
  add_optional(root, "machine", own ? p->machine : NULL);
  add_optional(root, "precision", own ? p->precision : NULL);
  write_layers(root, layers);
  write_links(root, links);
  write_copies(root, copies);
  write_sharing(root, shares);
  GError *local = NULL;
  if (!st_json_write_file(path, root, &local)) {
    /* GLib's message names the file already. */
    g_set_error_literal(error, ST_PROFILE_ERROR, local->code, local->message);
    g_error_free(local);
    return FALSE;
  }
  return TRUE;
}
