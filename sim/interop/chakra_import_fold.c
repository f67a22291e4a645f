/* chakra_import_fold.c: rank files that are one file up to the renaming of
 * ranks, decoded once (chakra_import_private.h, "identical rank files").
 *
 * A data-parallel trace of 1024 ranks is 1024 copies of one node stream:
 * only the metadata (device, start, replica) and, in other layouts, the
 * process group a collective names and the ranks a send or receive names
 * differ. Decoding and converting each copy took 90 % of `sim --chakra` on
 * such a trace. Here each file's node stream is walked once at the wire
 * level (no allocation per node) into a key: its bytes, where the value of
 * every `pg_name`, `comm_src` and `comm_dst` attribute is replaced by a
 * marker and kept aside. Two ranks with equal keys (and, for a stagger
 * trace, equal `stagger_program` metadata) have equal programs exactly when
 * the values kept aside rename consistently, as the importer maps them:
 *
 *  - a process group names the same communicator (stagger: the group's
 *    communicator; foreign: the group itself, one communicator each), of
 *    the same size, with the rank as a member;
 *  - a peer is at the same index of its group, and a send's own side
 *    (comm_src) is the rank itself exactly where the representative's is.
 *
 * A rank that passes takes its representative's program; one that does not
 * (or whose bytes are not plain: a renamed attribute in an unusual type, a
 * wire error) is decoded and converted as any, so errors are reported by
 * the ordinary path. The result is the schedule the unfolded import makes:
 * the importer already shares one program between ranks whose programs are
 * equal (tests/test_chakra_import.c compares both, schedule JSON and step).
 */
#include "interop/chakra_import_private.h"

#include <string.h>

enum { MAX_REPS_PER_KEY = 16 };

typedef enum { RENAME_PG, RENAME_SRC, RENAME_DST } RenameKind;

typedef struct {
  guint node;         /* index of the node in its file */
  RenameKind kind;
  int64_t value;      /* SRC, DST: the rank */
  const char *text;   /* PG: the group's name, in the file's bytes (not terminated) */
  size_t text_len;
} Rename;

/* A process group as the check needs it. */
typedef struct {
  int comm;
  int size;
  GHashTable *index_of; /* rank -> index in the group + 1 */
} FoldPg;

struct ImFold {
  GHashTable *rep_of;   /* key (GBytes) -> GArray of representatives (int ranks) */
  GArray **renames;     /* [n_ranks]: a representative's renames (Rename), else NULL */
  GHashTable *pgs;      /* pg name ("0" for every rank) -> FoldPg * */
};

static void
fold_pg_free(gpointer p)
{
  FoldPg *pg = p;
  g_hash_table_unref(pg->index_of);
  g_free(pg);
}

ImFold *
im_fold_new(int n_ranks)
{
  ImFold *f = g_new0(ImFold, 1);
  f->rep_of = g_hash_table_new_full(g_bytes_hash, g_bytes_equal,
                                    (GDestroyNotify)g_bytes_unref,
                                    (GDestroyNotify)g_array_unref);
  f->renames = g_new0(GArray *, n_ranks);
  f->pgs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, fold_pg_free);
  return f;
}

void
im_fold_free(ImFold *f, int n_ranks)
{
  if (f == NULL)
    return;
  g_hash_table_unref(f->rep_of);
  for (int r = 0; r < n_ranks; r++)
    if (f->renames[r] != NULL)
      g_array_unref(f->renames[r]);
  g_free(f->renames);
  g_hash_table_unref(f->pgs);
  g_free(f);
}

/* ---- the key ---------------------------------------------------------------------- */

static gboolean
varint(const uint8_t *d, size_t *at, size_t end, uint64_t *out)
{
  uint64_t v = 0;
  for (int i = 0; i < 10 && *at < end; i++) {
    uint8_t b = d[(*at)++];
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) {
      *out = v;
      return TRUE;
    }
  }
  return FALSE;
}

/* The end of the value of a field of wire type `type` at d[at..end), or 0. */
static size_t
value_end(const uint8_t *d, size_t at, size_t end, int type, size_t *content_at)
{
  uint64_t n;
  *content_at = at;
  switch (type) {
  case 0:
    return varint(d, &at, end, &n) ? at : 0;
  case 1:
    return end - at >= 8 ? at + 8 : 0;
  case 5:
    return end - at >= 4 ? at + 4 : 0;
  case 2:
    if (!varint(d, &at, end, &n) || n > end - at)
      return 0;
    *content_at = at;
    return at + (size_t)n;
  default:
    return 0;
  }
}

/* Attribute message d[at..end): when it is pg_name, comm_src or comm_dst,
 * `*r` says its value and TRUE; `*plain` FALSE when it is one of those in a
 * form the renaming does not read (then the rank is not folded). */
static gboolean
attr_rename(const uint8_t *d, size_t at, size_t end, Rename *r, gboolean *plain)
{
  const uint8_t *name = NULL;
  size_t name_len = 0, value_at = 0, value_stop = 0;
  int values = 0, value_field = 0, value_type = -1;
  while (at < end) {
    uint64_t tag;
    size_t content;
    if (!varint(d, &at, end, &tag))
      return (*plain = FALSE);
    size_t stop = value_end(d, at, end, (int)(tag & 7), &content);
    if (stop == 0)
      return (*plain = FALSE);
    if (tag >> 3 == 1 && (tag & 7) == 2) {
      name = d + content;
      name_len = stop - content;
    } else { /* a value, or doc_string (the ordinary path reads those) */
      values++;
      value_field = (int)(tag >> 3);
      value_type = (int)(tag & 7);
      value_at = content;
      value_stop = stop;
    }
    at = stop;
  }
#define IS(s) (name_len == sizeof(s) - 1 && memcmp(name, s, name_len) == 0)
  gboolean pg = name != NULL && IS("pg_name");
  gboolean src = name != NULL && IS("comm_src"), dst = name != NULL && IS("comm_dst");
#undef IS
  if (!pg && !src && !dst)
    return FALSE;
  if (values != 1) /* a second value, or none: read by the ordinary path */
    return (*plain = FALSE);
  if (pg && value_field == 29 && value_type == 2) { /* string_val */
    r->kind = RENAME_PG;
    r->text = (const char *)d + value_at;
    r->text_len = value_stop - value_at;
    return TRUE;
  }
  /* int32_val, int64_val, uint32_val, uint64_val: varints */
  gboolean integer = value_type == 0 && (value_field == 7 || value_field == 9 ||
                                         value_field == 11 || value_field == 13);
  uint64_t v;
  size_t p = value_at;
  if ((src || dst) && integer && varint(d, &p, value_stop, &v)) {
    r->kind = src ? RENAME_SRC : RENAME_DST;
    r->value = value_field == 7 ? (int64_t)(int32_t)v : (int64_t)v;
    return TRUE;
  }
  return (*plain = FALSE);
}

/* The key of d[0..len) (a node stream) into `key`, the values set aside into
 * `renames`. Marks: 0 starts a node, 1 a field copied whole (self-
 * delimiting), 2 a renamed attribute then its kind. FALSE: not foldable. */
static gboolean
stream_key(const uint8_t *d, size_t len, GByteArray *key, GArray *renames)
{
  size_t at = 0;
  for (guint node = 0; at < len; node++) {
    uint64_t n;
    if (!varint(d, &at, len, &n) || n > len - at)
      return FALSE;
    size_t end = at + (size_t)n;
    g_byte_array_append(key, (const guint8 *)"\0", 1);
    while (at < end) {
      size_t field_at = at, content;
      uint64_t tag;
      if (!varint(d, &at, end, &tag))
        return FALSE;
      size_t stop = value_end(d, at, end, (int)(tag & 7), &content);
      if (stop == 0 || tag >> 3 == 0)
        return FALSE;
      Rename r = {.node = node};
      gboolean plain = TRUE;
      if (tag >> 3 == 10 && (tag & 7) == 2 && attr_rename(d, content, stop, &r, &plain)) {
        guint8 mark[2] = {2, (guint8)r.kind};
        g_byte_array_append(key, mark, 2);
        g_array_append_val(renames, r);
      } else if (!plain) {
        return FALSE;
      } else {
        g_byte_array_append(key, (const guint8 *)"\1", 1);
        g_byte_array_append(key, d + field_at, (guint)(stop - field_at));
      }
      at = stop;
    }
  }
  return TRUE;
}

/* ---- the renaming ----------------------------------------------------------------- */

/* The group `name` names, or NULL when the importer has not made it (then
 * the rank goes the ordinary way, which makes it or says why not). */
static FoldPg *
fold_pg(ImFold *f, Import *im, const char *name)
{
  FoldPg *pg = g_hash_table_lookup(f->pgs, name);
  if (pg != NULL)
    return pg;
  const PgRef *ref = g_hash_table_lookup(im->pg, name);
  if (ref == NULL)
    return NULL;
  pg = g_new0(FoldPg, 1);
  pg->comm = ref->comm;
  pg->index_of = g_hash_table_new(g_direct_hash, g_direct_equal);
  const cJSON *m;
  cJSON_ArrayForEach(m, ref->members)
    g_hash_table_insert(pg->index_of, GINT_TO_POINTER(m->valueint), GINT_TO_POINTER(++pg->size));
  g_hash_table_insert(f->pgs, g_strdup(name), pg);
  return pg;
}

static int
index_in(const FoldPg *pg, int64_t rank)
{
  if (rank < 0 || rank > G_MAXINT)
    return -1;
  return GPOINTER_TO_INT(g_hash_table_lookup(pg->index_of, GINT_TO_POINTER((int)rank))) - 1;
}

/* The group node `node` names: its pg_name rename at renames[i..), else
 * every rank. Transfer full. */
static char *
node_pg(const GArray *renames, guint i)
{
  guint node = g_array_index(renames, Rename, i).node;
  for (; i < renames->len && g_array_index(renames, Rename, i).node == node; i++) {
    const Rename *r = &g_array_index(renames, Rename, i);
    if (r->kind == RENAME_PG)
      return r->text_len == 0 ? g_strdup("0") : g_strndup(r->text, r->text_len);
  }
  return g_strdup("0");
}

/* Whether rank r's renames (`b`) are rank q's (`a`) renamed. */
static gboolean
renames_match(ImFold *f, Import *im, int q, const GArray *a, int r, const GArray *b)
{
  if (a->len != b->len)
    return FALSE;
  g_autofree char *last_b = NULL; /* the previous node's group, checked already */
  for (guint i = 0; i < a->len;) {
    guint node = g_array_index(a, Rename, i).node;
    g_autofree char *name_a = node_pg(a, i), *name_b = node_pg(b, i);
    FoldPg *pa = fold_pg(f, im, name_a), *pb = fold_pg(f, im, name_b);
    if (pa == NULL || pb == NULL || pa->size != pb->size ||
        (im->stagger ? pa->comm != pb->comm : strcmp(name_a, name_b) != 0))
      return FALSE;
    if (last_b == NULL || strcmp(last_b, name_b) != 0) {
      if (index_in(pb, r) < 0)
        return FALSE;
      g_free(last_b);
      last_b = g_strdup(name_b);
    }
    for (; i < a->len && g_array_index(a, Rename, i).node == node; i++) {
      const Rename *x = &g_array_index(a, Rename, i), *y = &g_array_index(b, Rename, i);
      if (x->node != y->node || x->kind != y->kind)
        return FALSE;
      if (x->kind == RENAME_PG)
        continue;
      if ((x->value == q) != (y->value == r) || index_in(pa, x->value) != index_in(pb, y->value))
        return FALSE;
    }
  }
  return TRUE;
}

/* ---- the whole ---------------------------------------------------------------------- */

int
im_fold_match(ImFold *f, Import *im, int rank, gboolean *keyed)
{
  const EtFile *file = im->files[rank];
  size_t len;
  const uint8_t *d = et_file_node_bytes(file, &len);
  g_autoptr(GByteArray) key = g_byte_array_sized_new((guint)len + 64); /* grown once at most */
  g_autoptr(GArray) renames = g_array_new(FALSE, FALSE, sizeof(Rename));
  /* The program's parts from the metadata: a mark, its length, its text
   * (mark 0: none, and the key goes on with the nodes). */
  const EtAttr *a = et_attr_find(file->meta->attr, file->meta->n_attr, "stagger_program");
  const char *program = NULL;
  gboolean has = im->stagger && a != NULL && et_attr_string(a, &program, NULL);
  g_byte_array_append(key, (const guint8 *)(has ? "\1" : "\0"), 1);
  if (has) {
    uint64_t n = strlen(program);
    g_byte_array_append(key, (const guint8 *)&n, sizeof n);
    g_byte_array_append(key, (const guint8 *)program, (guint)n);
  }
  *keyed = stream_key(d, len, key, renames);
  if (!*keyed)
    return -1;
  g_autoptr(GBytes) bytes = g_byte_array_free_to_bytes(g_steal_pointer(&key));
  GArray *reps = g_hash_table_lookup(f->rep_of, bytes);
  for (guint i = 0; reps != NULL && i < reps->len; i++) {
    int q = g_array_index(reps, int, i);
    if (renames_match(f, im, q, f->renames[q], rank, renames))
      return q;
  }
  /* A representative of its own: the first of its key, or one that renames
   * differently from those before (a bounded few, so that a trace of all
   * different ranks costs a key each, not a comparison with each). */
  if (reps == NULL) {
    reps = g_array_new(FALSE, FALSE, sizeof(int));
    g_hash_table_insert(f->rep_of, g_steal_pointer(&bytes), reps);
  }
  if (reps->len < MAX_REPS_PER_KEY) {
    g_array_append_val(reps, rank);
    f->renames[rank] = g_steal_pointer(&renames);
  }
  return -1;
}
