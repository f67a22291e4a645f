/* profile_private.h: the insides of StProfile, shared by profile.c (the
 * measurements in memory and their lookup), profile_measure.c (what
 * `stagger profile` adds: fills, point-to-point, copies, sharing) and
 * profile_file.c (reading and writing the files). Nothing outside
 * sim/profile/ includes it.
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

#define ST_PROFILE_SEP "\x1f" /* joins key parts; no name or signature contains it */

typedef struct {
  char *device;
  char *name;       /* may be NULL */
  char *signature;  /* may be NULL */
  StPass pass;
  int64_t x;        /* batch size, or elements for optim/compress/expand */
  double time_ns;   /* measured time of one op */
  double spread_ns; /* p90 - p10; 0 when not measured */
  double fill;      /* fraction of the device it fills alone, (0, 1]; 0 when not measured */
  gboolean fill_bound; /* the measurement only shows fill <= this */
} ProfileLayerEntry;

typedef struct {
  char *device;
  StCollKind coll;  /* ST_COLL_INVALID for a point-to-point transfer */
  gboolean p2p;     /* "send_recv": one send matched by one receive, 2 ranks */
  StLinkClass link;
  int ranks;
  int64_t bytes;    /* the full buffer, as nccl-tests' size */
  double time_ns;
  double spread_ns; /* p90 - p10; 0 when not measured */
} ProfileLinkEntry;

typedef struct {
  char *device;
  StCopyKind kind;
  int64_t bytes;
  double time_ns;
  double spread_ns;
} ProfileCopyEntry;

typedef struct {
  char *device;
  char *name, *signature; /* either may be NULL, not both */
  StPass pass;
  int64_t x;
  int streams;
  gboolean priorities;
  double alone_ns;
  double *end_ns;         /* [streams] */
} ProfileShareEntry;

struct StProfile {
  char *device, *driver, *cuda, *date, *source; /* facts written by save */
  char *machine, *precision;                    /* optional facts (measured profiles) */
  /* A profile of 10^6 layer entries (a Kineto trace's, a Chakra trace's
   * custom layers) made ~11 allocations an entry and freed each again: the
   * layer entries, their strings and the keys of layer_entries,
   * layer_index and fill_index live in these instead, released with the
   * profile (an entry replaced stays until then). */
  GStringChunk *strings;     /* the layer entries' strings, those three tables' keys */
  GPtrArray *entry_blocks;   /* blocks of ST_PROFILE_ENTRY_BLOCK ProfileLayerEntry, owned */
  guint block_used;          /* entries taken from the last block */
  GString *key;              /* scratch for the keys of adds */
  char *device_interned;     /* the last device added, in `strings`; NULL before the first */
  char *last_name;           /* the last entry's name and signature, in `strings` (NULL: */
  char *last_signature;      /* none yet): the next entry's when equal, as a layer's fwd and bwd */
  GHashTable *layer_entries; /* unique key -> ProfileLayerEntry, both in the above */
  GHashTable *link_entries;  /* unique key -> ProfileLinkEntry, owned */
  GHashTable *copy_entries;  /* unique key -> ProfileCopyEntry, owned */
  GHashTable *share_entries; /* unique key -> ProfileShareEntry, owned */
  /* Keys join their parts with ST_PROFILE_SEP; values are GArray<StProfilePoint>, owned. */
  GHashTable *layer_index;   /* device, n|s, name or signature, pass; keys in `strings` */
  GHashTable *link_index;    /* device, collective (or p2p), link, ranks; keys owned */
  GHashTable *copy_index;    /* device, kind; keys owned */
  GHashTable *fill_index;    /* as layer_index; the points' value is the fill */
};

#define ST_PROFILE_ENTRY_BLOCK 1024

typedef struct {
  int64_t x;        /* batch size, elements, or bytes for links and copies */
  double value;     /* time in ns, or a fill */
} StProfilePoint;

/* GDestroyNotify for the entries. */
void st_profile_layer_entry_free(gpointer entry);
void st_profile_link_entry_free(gpointer entry);
void st_profile_copy_entry_free(gpointer entry);
void st_profile_share_entry_free(gpointer entry);

/* Adds or replaces the point at x in index[key] (a later measurement wins). */
void st_profile_index_add(GHashTable *index, char *key /* transfer full */, int64_t x,
                          double value);
/* The same for layer_index and fill_index, whose keys live in p->strings:
 * `key` is borrowed and copied there when new. */
void st_profile_index_add_borrowed(StProfile *p, GHashTable *index, const char *key, int64_t x,
                                   double value);
/* The time at x from sorted points (profile.c: interpolation and its floor);
 * *exact says x was measured. */
double st_profile_points_at(const GArray *points, int64_t x, gboolean floor_proportional,
                            gboolean *exact);
/* Keys of layer_index / fill_index and of link_index. Transfer full. */
char *st_profile_layer_key(const char *device, char by, const char *key, StPass pass);
/* st_profile_layer_key's text, written into `out` (replacing its text);
 * returns out->str. */
const char *st_profile_layer_key_into(GString *out, const char *device, char by, const char *key,
                                      StPass pass);
char *st_profile_link_key(const char *device, StCollKind coll, gboolean p2p, StLinkClass link,
                          int ranks);
/* Adds a collective (p2p FALSE) or a point-to-point transfer (coll
 * ST_COLL_INVALID, ranks 2); a later entry with the same keys replaces it. */
void st_profile_add_link_entry(StProfile *p, const char *device, StCollKind coll, gboolean p2p,
                               StLinkClass link, int ranks, int64_t bytes, double time_ns,
                               double spread_ns);
/* The unique key of a layer entry. Transfer full. */
char *st_profile_layer_entry_key(const char *device, const char *name, const char *signature,
                                 StPass pass, int64_t x);
/* Its text written into `out` (replacing its text); returns out->str. */
const char *st_profile_layer_entry_key_into(GString *out, const char *device, const char *name,
                                            const char *signature, StPass pass, int64_t x);
