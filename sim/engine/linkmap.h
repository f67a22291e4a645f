/* linkmap.h: a small map from link ids to a number, for the engine's
 * scratch over the links of a cluster.
 *
 * Keys are non-negative int32 (link ids, device ids); each entry holds an
 * int and a double, both 0 when the key is first met. Open addressing with
 * linear probing; the keys are also kept in the order they were first
 * inserted, which the use lists rely on (engine_links.c: a list's links in
 * the order they were first loaded). Memory is proportional to the entries
 * present, not to the largest key: a cluster of a million GPUs costs nothing
 * until its links are touched. Entry pointers are valid until the next
 * insertion.
 *
 * Costs: find and get O(1) expected; reset O(entries); no removal of single
 * keys.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

typedef struct {
  int32_t key; /* -1: empty slot */
  int32_t i;
  double d;
} LinkMapEntry;

typedef struct {
  LinkMapEntry *table; /* [mask + 1], or NULL before the first insertion */
  guint32 mask;
  int32_t *keys;       /* [len]: in order of first insertion */
  guint32 len, cap;
} LinkMap;

void link_map_init(LinkMap *m);
/* Frees the storage; the map may be initialized again. */
void link_map_clear(LinkMap *m);
/* Empties the map, keeping its storage. O(entries). */
void link_map_reset(LinkMap *m);
/* The entry of `key`, or NULL. */
LinkMapEntry *link_map_find(const LinkMap *m, int32_t key);
/* The entry of `key`, inserted (i = 0, d = 0) when absent. */
LinkMapEntry *link_map_get(LinkMap *m, int32_t key);

static inline guint
link_map_len(const LinkMap *m)
{
  return m->len;
}

/* The n-th key in order of first insertion. */
static inline int32_t
link_map_key(const LinkMap *m, guint n)
{
  return m->keys[n];
}
