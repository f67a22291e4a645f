/* profile_private.h: the insides of StProfile, shared by profile.c (the
 * measurements in memory and their lookup) and profile_file.c (reading and
 * writing the files). Nothing outside sim/profile/ includes it.
 *
 * Two views of the same measurements:
 * - the entries as files hold them (for save), keyed by everything that
 *   makes one unique, so a later file or add replaces an earlier value;
 * - lookup indexes: (device, name or signature, pass) and (device,
 *   collective, link, ranks), each to a GArray of points sorted by x, so a
 *   lookup is one hash probe and a binary search: O(log points).
 * An entry that has both a name and a signature is indexed under both.
 */
#pragma once

#include "profile/profile.h"

typedef struct {
  char *device;
  char *name;       /* may be NULL */
  char *signature;  /* may be NULL */
  StPass pass;
  int64_t x;        /* batch size, or elements for optim/compress/expand */
  double time_ns;   /* measured time of one op */
  double spread_ns; /* p90 - p10; 0 when not measured */
} ProfileLayerEntry;

typedef struct {
  char *device;
  StCollKind coll;
  StLinkClass link;
  int ranks;
  int64_t bytes;    /* the full buffer, as nccl-tests' size */
  double time_ns;
} ProfileLinkEntry;

struct StProfile {
  char *device, *driver, *cuda, *date, *source; /* facts written by save */
  GHashTable *layer_entries; /* unique key -> ProfileLayerEntry, owned */
  GHashTable *link_entries;  /* unique key -> ProfileLinkEntry, owned */
  /* Keys join their parts with SEP (profile.c); values are GArray<Point>. */
  GHashTable *layer_index;   /* device, n|s, name or signature, pass */
  GHashTable *link_index;    /* device, collective, link, ranks */
};

/* GDestroyNotify for the entries. */
void st_profile_layer_entry_free(gpointer entry);
void st_profile_link_entry_free(gpointer entry);
