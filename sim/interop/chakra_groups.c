/* chakra_groups.c: ASTRA-sim's communicator-group file (see
 * chakra_private.h): process group id -> ranks. ASTRA-sim reads each key
 * with std::stoi, so keys are decimal ids from 1 and the object holds
 * nothing else. */
#include "interop/chakra_private.h"

#include <stdlib.h>

#include "base/error.h"
#include "base/json.h"
#include "base/util.h"
#include "interop/chakra.h"

static void
free_members(gpointer p)
{
  g_array_unref(p);
}

void
et_groups_init(EtGroups *g)
{
  g->ids = g_ptr_array_new_with_free_func(g_free);
  g->members = g_ptr_array_new_with_free_func(free_members);
}

void
et_groups_clear(EtGroups *g)
{
  g_clear_pointer(&g->ids, g_ptr_array_unref);
  g_clear_pointer(&g->members, g_ptr_array_unref);
}

void
et_groups_add(EtGroups *g, const char *id, const int32_t *ranks, int n)
{
  GArray *m = g_array_sized_new(FALSE, FALSE, sizeof(int32_t), (guint)n);
  g_array_append_vals(m, ranks, (guint)n);
  g_ptr_array_add(g->ids, g_strdup(id));
  g_ptr_array_add(g->members, m);
}

int
et_groups_find(const EtGroups *g, const char *id)
{
  for (guint i = 0; i < g->ids->len; i++)
    if (g_strcmp0(g_ptr_array_index(g->ids, i), id) == 0)
      return (int)i;
  return -1;
}

gboolean
et_groups_save(const EtGroups *g, const char *path, GError **error)
{
  g_autoptr(cJSON) root = cJSON_CreateObject();
  for (guint i = 0; i < g->ids->len; i++) {
    const GArray *m = g_ptr_array_index(g->members, i);
    cJSON_AddItemToObject(root, g_ptr_array_index(g->ids, i),
                          cJSON_CreateIntArray((const int *)(const void *)m->data, (int)m->len));
  }
  return st_json_write_file(path, root, error);
}

gboolean
et_groups_load(const char *path, int n_ranks, EtGroups *g, GError **error)
{
  g_autoptr(cJSON) root = st_json_load_file(path, error);
  if (root == NULL)
    return FALSE;
  if (!cJSON_IsObject(root)) {
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_PARSE,
                "%s: expected an object of process group id -> ranks", path);
    return FALSE;
  }
  const cJSON *item;
  cJSON_ArrayForEach(item, root)
  {
    char *end = NULL;
    long id = strtol(item->string, &end, 10);
    if (end == item->string || *end != '\0' || id < 1) {
      g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID,
                  "%s: key '%s': a process group id is a decimal number from 1", path,
                  item->string);
      return FALSE;
    }
    if (et_groups_find(g, item->string) >= 0) {
      g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID, "%s: group '%s' appears twice",
                  path, item->string);
      return FALSE;
    }
    if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) == 0) {
      g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID,
                  "%s: group '%s': expected a non-empty array of ranks", path, item->string);
      return FALSE;
    }
    g_autoptr(GArray) m = g_array_new(FALSE, FALSE, sizeof(int32_t));
    const cJSON *r;
    cJSON_ArrayForEach(r, item)
    {
      int64_t rank;
      if (!st_json_item_int(r, "rank", 0, n_ranks - 1, &rank, error)) {
        g_prefix_error(error, "%s: group '%s': ", path, item->string);
        return FALSE;
      }
      int32_t v = (int32_t)rank;
      g_array_append_val(m, v);
    }
    g_array_sort(m, st_compare_int32);
    for (guint i = 1; i < m->len; i++)
      if (g_array_index(m, int32_t, i) == g_array_index(m, int32_t, i - 1)) {
        g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID, "%s: group '%s': rank %d twice",
                    path, item->string, g_array_index(m, int32_t, i));
        return FALSE;
      }
    et_groups_add(g, item->string, (const int32_t *)(const void *)m->data, (int)m->len);
  }
  return TRUE;
}
