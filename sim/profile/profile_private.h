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
  GHashTable *layer_entries; /* unique key -> ProfileLayerEntry, owned */
  GHashTable *link_entries;  /* unique key -> ProfileLinkEntry, owned */
  GHashTable *copy_entries;  /* unique key -> ProfileCopyEntry, owned */
  GHashTable *share_entries; /* unique key -> ProfileShareEntry, owned */
  /* Keys join their parts with ST_PROFILE_SEP; values are GArray<StProfilePoint>. */
  GHashTable *layer_index;   /* device, n|s, name or signature, pass */
  GHashTable *link_index;    /* device, collective (or p2p), link, ranks */
  GHashTable *copy_index;    /* device, kind */
  GHashTable *fill_index;    /* as layer_index; the points' value is the fill */
};

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
/* The time at x from sorted points (profile.c: interpolation and its floor);
 * *exact says x was measured. */
double st_profile_points_at(const GArray *points, int64_t x, gboolean floor_proportional,
                            gboolean *exact);
/* Keys of layer_index / fill_index and of link_index. Transfer full. */
char *st_profile_layer_key(const char *device, char by, const char *key, StPass pass);
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
