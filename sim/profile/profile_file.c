/* profile_file.c: reading and writing profile files (format in
 * profile.h). Parsing is strict: unknown keys, missing keys and bad values
 * are errors naming the file, the entry (layers[3]) and the key. */
#include "profile/profile_private.h"

#include <string.h>

#include "base/error.h"
#include "base/json.h"

/* ---- reading files ------------------------------------------------------ */

/* Re-homes a json.c / kinds.c error into this domain with its place in front. */
static gboolean
fail(GError **error, GError *local, const char *origin, const char *where)
{
  g_set_error(error, ST_PROFILE_ERROR, local->code, "%s: %s%s%s", origin, where ? where : "",
              where ? ": " : "", local->message);
  g_error_free(local);
  return FALSE;
}

static gboolean
parse_layer(const cJSON *item, const char *device, GPtrArray *out, GError **local)
{
  static const char *const keys[] = {"name", "signature", "pass", "x", "time_us", "spread_us",
                                     NULL};
  const char *name = NULL, *signature = NULL, *pass_text = NULL;
  int64_t x = 0;
  double time_us = 0, spread_us = 0;
  StPass pass;
  if (!cJSON_IsObject(item)) {
    g_set_error(local, ST_PROFILE_ERROR, ST_ERROR_INVALID, "expected an object");
    return FALSE;
  }
  if (!st_json_check_keys(item, keys, local) ||
      !st_json_get_string(item, "name", FALSE, &name, local) ||
      !st_json_get_string(item, "signature", FALSE, &signature, local) ||
      !st_json_get_string(item, "pass", TRUE, &pass_text, local))
    return FALSE;
  if (!st_pass_parse(pass_text, &pass, local)) {
    g_prefix_error(local, "key 'pass': ");
    return FALSE;
  }
  if (!st_json_get_int(item, "x", TRUE, 1, INT64_MAX, &x, local) ||
      !st_json_get_double(item, "time_us", TRUE, 0, &time_us, local) ||
      !st_json_get_double(item, "spread_us", FALSE, 0, &spread_us, local))
    return FALSE;
  if (name == NULL && signature == NULL) {
    g_set_error(local, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "missing key 'name' or 'signature' (an entry needs one of them)");
    return FALSE;
  }
  ProfileLayerEntry *e = g_new0(ProfileLayerEntry, 1);
  *e = (ProfileLayerEntry){g_strdup(device), g_strdup(name), g_strdup(signature), pass, x,
                    time_us * 1e3, spread_us * 1e3};
  g_ptr_array_add(out, e);
  return TRUE;
}

static gboolean
parse_link(const cJSON *item, const char *device, GPtrArray *out, GError **local)
{
  static const char *const keys[] = {"collective", "link", "ranks", "bytes", "time_us", NULL};
  const char *coll_text = NULL, *link_text = NULL;
  int64_t ranks = 0, bytes = 0;
  double time_us = 0;
  StCollKind coll;
  StLinkClass link;
  if (!cJSON_IsObject(item)) {
    g_set_error(local, ST_PROFILE_ERROR, ST_ERROR_INVALID, "expected an object");
    return FALSE;
  }
  if (!st_json_check_keys(item, keys, local) ||
      !st_json_get_string(item, "collective", TRUE, &coll_text, local))
    return FALSE;
  if (!st_coll_parse(coll_text, &coll, local)) {
    g_prefix_error(local, "key 'collective': ");
    return FALSE;
  }
  if (!st_json_get_string(item, "link", TRUE, &link_text, local))
    return FALSE;
  if (!st_link_parse(link_text, &link, local)) {
    g_prefix_error(local, "key 'link': ");
    return FALSE;
  }
  if (!st_json_get_int(item, "ranks", TRUE, 1, INT32_MAX, &ranks, local) ||
      !st_json_get_int(item, "bytes", TRUE, 1, INT64_MAX, &bytes, local) ||
      !st_json_get_double(item, "time_us", TRUE, 0, &time_us, local))
    return FALSE;
  ProfileLinkEntry *e = g_new0(ProfileLinkEntry, 1);
  *e = (ProfileLinkEntry){g_strdup(device), coll, link, (int)ranks, bytes, time_us * 1e3};
  g_ptr_array_add(out, e);
  return TRUE;
}

/* Parses the whole file before touching the profile, so a bad file leaves
 * it as it was. */
gboolean
st_profile_merge_file(StProfile *p, const char *path, GError **error)
{
  static const char *const keys[] = {"format", "version", "device", "driver", "cuda",
                                     "date",   "source",  "note",   "layers", "links", NULL};
  g_return_val_if_fail(p != NULL && path != NULL, FALSE);
  GError *local = NULL;
  g_autoptr(cJSON) root = st_json_load_file(path, &local);
  if (root == NULL) {
    /* json.c's message names the file (and line:column). */
    g_set_error_literal(error, ST_PROFILE_ERROR, local->code, local->message);
    g_error_free(local);
    return FALSE;
  }
  if (!cJSON_IsObject(root)) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID, "%s: expected a JSON object", path);
    return FALSE;
  }
  const char *format = NULL, *device = NULL;
  const char *facts[4] = {NULL, NULL, NULL, NULL}; /* driver, cuda, date, source */
  const char *note = NULL;
  int64_t version = 0;
  const cJSON *layers = NULL, *links = NULL;
  if (!st_json_check_keys(root, keys, &local) ||
      !st_json_get_string(root, "format", TRUE, &format, &local) ||
      !st_json_get_int(root, "version", TRUE, 1, 1, &version, &local) ||
      !st_json_get_string(root, "device", TRUE, &device, &local) ||
      !st_json_get_string(root, "driver", FALSE, &facts[0], &local) ||
      !st_json_get_string(root, "cuda", FALSE, &facts[1], &local) ||
      !st_json_get_string(root, "date", FALSE, &facts[2], &local) ||
      !st_json_get_string(root, "source", FALSE, &facts[3], &local) ||
      !st_json_get_string(root, "note", FALSE, &note, &local) ||
      !st_json_get_array(root, "layers", FALSE, &layers, &local) ||
      !st_json_get_array(root, "links", FALSE, &links, &local))
    return fail(error, local, path, NULL);
  if (strcmp(format, "stagger-profile") != 0) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "%s: key 'format': '%s' is not \"stagger-profile\"", path, format);
    return FALSE;
  }
  if (*device == '\0') {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID, "%s: key 'device': must not be empty",
                path);
    return FALSE;
  }
  g_autoptr(GPtrArray) new_layers = g_ptr_array_new_with_free_func(st_profile_layer_entry_free);
  g_autoptr(GPtrArray) new_links = g_ptr_array_new_with_free_func(st_profile_link_entry_free);
  int i = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, layers)
  {
    if (!parse_layer(item, device, new_layers, &local)) {
      g_autofree char *where = g_strdup_printf("layers[%d]", i);
      return fail(error, local, path, where);
    }
    i++;
  }
  i = 0;
  cJSON_ArrayForEach(item, links)
  {
    if (!parse_link(item, device, new_links, &local)) {
      g_autofree char *where = g_strdup_printf("links[%d]", i);
      return fail(error, local, path, where);
    }
    i++;
  }
  for (guint k = 0; k < new_layers->len; k++) {
    const ProfileLayerEntry *e = g_ptr_array_index(new_layers, k);
    st_profile_add_layer(p, e->device, e->name, e->signature, e->pass, e->x, e->time_ns,
                         e->spread_ns);
  }
  for (guint k = 0; k < new_links->len; k++) {
    const ProfileLinkEntry *e = g_ptr_array_index(new_links, k);
    st_profile_add_link(p, e->device, e->coll, e->link, e->ranks, e->bytes, e->time_ns);
  }
  if (p->device == NULL)
    st_profile_set_device(p, device, facts[0], facts[1], facts[2], facts[3]);
  return TRUE;
}

/* Every *.json below `dir`, recursively, into `paths`. */
static gboolean
collect_json(const char *dir, GPtrArray *paths, GError **error)
{
  GError *local = NULL;
  g_autoptr(GDir) d = g_dir_open(dir, 0, &local);
  if (d == NULL) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return FALSE;
  }
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL) {
    g_autofree char *child = g_build_filename(dir, name, NULL);
    if (g_file_test(child, G_FILE_TEST_IS_DIR)) {
      if (!collect_json(child, paths, error))
        return FALSE;
    } else if (g_str_has_suffix(name, ".json") && g_file_test(child, G_FILE_TEST_IS_REGULAR)) {
      g_ptr_array_add(paths, g_steal_pointer(&child));
    }
  }
  return TRUE;
}

static gint
compare_paths(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

StProfile *
st_profile_load(const char *path, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_autoptr(StProfile) p = st_profile_new();
  if (!g_file_test(path, G_FILE_TEST_IS_DIR)) {
    if (!st_profile_merge_file(p, path, error))
      return NULL;
    return g_steal_pointer(&p);
  }
  g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);
  if (!collect_json(path, paths, error))
    return NULL;
  if (paths->len == 0) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "%s: no profile (*.json) files in this directory", path);
    return NULL;
  }
  /* Sorted, so that when two files measure the same point the result does
   * not depend on the order the file system lists them. */
  g_ptr_array_sort(paths, compare_paths);
  for (guint i = 0; i < paths->len; i++)
    if (!st_profile_merge_file(p, g_ptr_array_index(paths, i), error))
      return NULL;
  return g_steal_pointer(&p);
}

/* ---- writing ------------------------------------------------------------ */

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
    c = (x->x > y->x) - (x->x < y->x);
  return c;
}

static int
compare_link_entries(gconstpointer a, gconstpointer b)
{
  const ProfileLinkEntry *x = *(ProfileLinkEntry *const *)a, *y = *(ProfileLinkEntry *const *)b;
  int c = (int)x->coll - (int)y->coll;
  if (c == 0)
    c = (int)x->link - (int)y->link;
  if (c == 0)
    c = x->ranks - y->ranks;
  if (c == 0)
    c = (x->bytes > y->bytes) - (x->bytes < y->bytes);
  return c;
}

/* The device whose entries save writes: the one set, else the only one. */
static const char *
save_device(const StProfile *p)
{
  if (p->device != NULL)
    return p->device;
  const char *only = NULL;
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, p->layer_entries);
  while (g_hash_table_iter_next(&it, NULL, &value)) {
    const ProfileLayerEntry *e = value;
    if (only != NULL && strcmp(only, e->device) != 0)
      return NULL;
    only = e->device;
  }
  g_hash_table_iter_init(&it, p->link_entries);
  while (g_hash_table_iter_next(&it, NULL, &value)) {
    const ProfileLinkEntry *e = value;
    if (only != NULL && strcmp(only, e->device) != 0)
      return NULL;
    only = e->device;
  }
  return only;
}

static void
add_optional(cJSON *obj, const char *key, const char *value)
{
  if (value != NULL)
    cJSON_AddStringToObject(obj, key, value);
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
  g_autoptr(GPtrArray) layers = g_ptr_array_new();
  g_autoptr(GPtrArray) links = g_ptr_array_new();
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, p->layer_entries);
  while (g_hash_table_iter_next(&it, NULL, &value))
    if (strcmp(((ProfileLayerEntry *)value)->device, device) == 0)
      g_ptr_array_add(layers, value);
  g_hash_table_iter_init(&it, p->link_entries);
  while (g_hash_table_iter_next(&it, NULL, &value))
    if (strcmp(((ProfileLinkEntry *)value)->device, device) == 0)
      g_ptr_array_add(links, value);
  g_ptr_array_sort(layers, compare_layer_entries);
  g_ptr_array_sort(links, compare_link_entries);

  g_autoptr(cJSON) root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", "stagger-profile");
  st_json_add_int(root, "version", 1);
  cJSON_AddStringToObject(root, "device", device);
  gboolean own = p->device != NULL && strcmp(p->device, device) == 0;
  add_optional(root, "driver", own ? p->driver : NULL);
  add_optional(root, "cuda", own ? p->cuda : NULL);
  add_optional(root, "date", own ? p->date : NULL);
  add_optional(root, "source", own ? p->source : NULL);
  cJSON *array = cJSON_AddArrayToObject(root, "layers");
  for (guint i = 0; i < layers->len; i++) {
    const ProfileLayerEntry *e = g_ptr_array_index(layers, i);
    cJSON *obj = cJSON_CreateObject();
    add_optional(obj, "name", e->name);
    add_optional(obj, "signature", e->signature);
    cJSON_AddStringToObject(obj, "pass", st_pass_name(e->pass));
    st_json_add_int(obj, "x", e->x);
    cJSON_AddNumberToObject(obj, "time_us", e->time_ns / 1e3);
    if (e->spread_ns > 0)
      cJSON_AddNumberToObject(obj, "spread_us", e->spread_ns / 1e3);
    cJSON_AddItemToArray(array, obj);
  }
  array = cJSON_AddArrayToObject(root, "links");
  for (guint i = 0; i < links->len; i++) {
    const ProfileLinkEntry *e = g_ptr_array_index(links, i);
    cJSON *obj = cJSON_CreateObject();
    cJSON_AddStringToObject(obj, "collective", st_coll_name(e->coll));
    cJSON_AddStringToObject(obj, "link", st_link_name(e->link));
    st_json_add_int(obj, "ranks", e->ranks);
    st_json_add_int(obj, "bytes", e->bytes);
    cJSON_AddNumberToObject(obj, "time_us", e->time_ns / 1e3);
    cJSON_AddItemToArray(array, obj);
  }
  GError *local = NULL;
  if (!st_json_write_file(path, root, &local)) {
    /* GLib's message names the file already. */
    g_set_error_literal(error, ST_PROFILE_ERROR, local->code, local->message);
    g_error_free(local);
    return FALSE;
  }
  return TRUE;
}
