/* linkmap.c: see linkmap.h. */
#include "engine/linkmap.h"

#include <string.h>

void
link_map_init(LinkMap *m)
{
  *m = (LinkMap){0};
}

void
link_map_clear(LinkMap *m)
{
  g_free(m->table);
  g_free(m->keys);
  *m = (LinkMap){0};
}

static inline guint32
slot_of(const LinkMap *m, int32_t key)
{
  return ((guint32)key * 2654435761u) & m->mask;
}

static LinkMapEntry *
probe(const LinkMap *m, int32_t key)
{
  for (guint32 at = slot_of(m, key);; at = (at + 1) & m->mask)
    if (m->table[at].key == key || m->table[at].key < 0)
      return &m->table[at];
}

static void
empty_table(LinkMapEntry *table, guint32 n)
{
  for (guint32 i = 0; i < n; i++)
    table[i] = (LinkMapEntry){-1, 0, 0};
}

/* Twice the room, entries moved over. */
static void
grow(LinkMap *m)
{
  guint32 old_n = m->table != NULL ? m->mask + 1 : 0, n = MAX(64, 2 * old_n);
  LinkMapEntry *old = m->table;
  m->table = g_new(LinkMapEntry, n);
  m->mask = n - 1;
  empty_table(m->table, n);
  for (guint32 i = 0; i < old_n; i++)
    if (old[i].key >= 0)
      *probe(m, old[i].key) = old[i];
  g_free(old);
}

void
link_map_reset(LinkMap *m)
{
  /* Every entry's position first, while the probe runs are whole; then
   * they are emptied. The keys are overwritten on the way: they go too. */
  for (guint32 i = 0; i < m->len; i++)
    m->keys[i] = (int32_t)(probe(m, m->keys[i]) - m->table);
  for (guint32 i = 0; i < m->len; i++)
    m->table[m->keys[i]].key = -1;
  m->len = 0;
}

LinkMapEntry *
link_map_find(const LinkMap *m, int32_t key)
{
  if (m->table == NULL)
    return NULL;
  LinkMapEntry *e = probe(m, key);
  return e->key == key ? e : NULL;
}

LinkMapEntry *
link_map_get(LinkMap *m, int32_t key)
{
  g_return_val_if_fail(key >= 0, NULL);
  if (m->table == NULL || 2 * (m->len + 1) > m->mask + 1)
    grow(m);
  LinkMapEntry *e = probe(m, key);
  if (e->key == key)
    return e;
  *e = (LinkMapEntry){key, 0, 0};
  if (m->len == m->cap) {
    m->cap = MAX(64, 2 * m->cap);
    m->keys = g_renew(int32_t, m->keys, m->cap);
  }
  m->keys[m->len++] = key;
  return e;
}
