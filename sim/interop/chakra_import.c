/* chakra_import.c: Chakra traces into a Schedule (chakra.h; the importer's
 * files in chakra_import_private.h): finding and reading the rank files and
 * the group file, the schedule-wide parts, programs shared by identical
 * ranks, the one warning. */
#include "interop/chakra_import_private.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "sched/sched_import.h"

gboolean
im_node_fail(GError **error, const EtFile *f, guint k, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *why = g_strdup_vprintf(format, args);
  va_end(args);
  /* The file's nodes may be released (converted) by now: decoded again. */
  EtNode *again = NULL;
  const EtNode *n = et_file_node(f, k, &again); /* NULL only if never decoded */
  g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID,
              "%s: node #%u (id %" PRIu64 " '%s', byte %" PRIu64 "): %s", f->path, k,
              n != NULL ? n->id : 0, n != NULL && n->name != NULL ? n->name : "",
              g_array_index(f->offsets, uint64_t, k), why);
  if (again != NULL)
    protobuf_c_message_free_unpacked(&again->base, NULL);
  return FALSE;
}

void
im_count(GHashTable *table, const char *what)
{
  gpointer n = g_hash_table_lookup(table, what);
  g_hash_table_insert(table, g_strdup(what), GINT_TO_POINTER(GPOINTER_TO_INT(n) + 1));
}

static const EtAttr *
meta_attr(const EtFile *f, const char *name)
{
  return et_attr_find(f->meta->attr, f->meta->n_attr, name);
}

/* An integer of the metadata; FALSE with an error when it is not one. */
static gboolean
meta_int(const EtFile *f, const char *name, int64_t min, int64_t max, int64_t *out,
         gboolean *present, GError **error)
{
  const EtAttr *a = meta_attr(f, name);
  *present = a != NULL;
  if (a == NULL)
    return TRUE;
  if (!et_attr_int(a, out, error) || *out < min || *out > max) {
    g_clear_error(error);
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID,
                "%s: global metadata '%s': expected an integer in [%" G_GINT64_FORMAT
                ", %" G_GINT64_FORMAT "]", f->path, name, min, max);
    return FALSE;
  }
  return TRUE;
}

/* ---- the files ------------------------------------------------------------------ */

/* The highest rank with a file PREFIX.<rank>.et in PREFIX's folder, or -1. */
static int
highest_rank_file(const char *prefix)
{
  g_autofree char *dir = g_path_get_dirname(prefix);
  g_autofree char *base = g_path_get_basename(prefix);
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  int highest = -1;
  const char *name;
  size_t n = strlen(base);
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    if (strncmp(name, base, n) != 0 || name[n] != '.' || !g_ascii_isdigit(name[n + 1]))
      continue;
    char *end = NULL;
    long r = strtol(name + n + 1, &end, 10);
    if (strcmp(end, ".et") == 0 && r < G_MAXINT)
      highest = MAX(highest, (int)r);
  }
  return highest;
}

static gboolean
read_files(Import *im, GError **error)
{
  g_autofree char *first = st_chakra_rank_path(im->prefix, 0);
  if (!g_file_test(first, G_FILE_TEST_EXISTS)) {
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_IO, "%s: no such file (a Chakra trace PREFIX "
                "is read as PREFIX.0.et, PREFIX.1.et, ...)", first);
    return FALSE;
  }
  g_autoptr(EtFile) f0 = et_file_open(first, error);
  if (f0 == NULL)
    return FALSE;
  int64_t n = 0;
  gboolean said = FALSE;
  if (!meta_int(f0, "stagger_ranks", 1, G_MAXINT32, &n, &said, error))
    return FALSE;
  int highest = highest_rank_file(im->prefix);
  if (!said)
    n = highest + 1;
  if (said && highest >= n) {
    g_autofree char *extra = st_chakra_rank_path(im->prefix, highest);
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID, "%s: rank %d, but %s says the trace "
                "has %d ranks", extra, highest, first, (int)n);
    return FALSE;
  }
  im->n_ranks = (int)n;
  im->files = g_new0(EtFile *, n);
  im->tally = g_new0(ImTally, n);
  im->same_as = g_new(int, n);
  for (int r = 0; r < n; r++)
    im->same_as[r] = -1;
  im->files[0] = g_steal_pointer(&f0);
  for (int r = 1; r < n; r++) {
    g_autofree char *path = st_chakra_rank_path(im->prefix, r);
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
      g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_IO,
                  "%s: missing: the trace has ranks 0 to %d (%s), but no file for rank %d",
                  path, (int)n - 1, said ? "its metadata says so" : "their files say so", r);
      return FALSE;
    }
    if ((im->files[r] = et_file_open(path, error)) == NULL)
      return FALSE;
  }
  return TRUE;
}

static gboolean
read_groups(Import *im, GError **error)
{
  et_groups_init(&im->groups);
  g_autofree char *path =
    im->o->groups_path != NULL ? g_strdup(im->o->groups_path) : st_chakra_groups_path(im->prefix);
  if (im->o->groups_path == NULL && !g_file_test(path, G_FILE_TEST_EXISTS))
    return TRUE;
  if (!et_groups_load(path, im->n_ranks, &im->groups, error))
    return FALSE;
  im->groups_path = g_steal_pointer(&path);
  return TRUE;
}

/* ---- communicators --------------------------------------------------------------- */

static cJSON *
group_json(const GArray *members)
{
  return cJSON_CreateIntArray((const int *)(const void *)members->data, (int)members->len);
}

static void
add_pg(Import *im, const char *pg_name, int comm, int group, const cJSON *members)
{
  PgRef *ref = g_new(PgRef, 1);
  *ref = (PgRef){comm, group, members};
  g_hash_table_insert(im->pg, g_strdup(pg_name), ref);
}

/* A stagger trace names its communicators and their group counts; their
 * groups are process groups 1, 2, ... in order, whose ranks the group file
 * gives. */
static gboolean
stagger_comms(Import *im, const cJSON *head, GError **error)
{
  const cJSON *comms = cJSON_GetObjectItem(head, "comms");
  int next = 1;
  const cJSON *c;
  cJSON_ArrayForEach(c, comms)
  {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
    const cJSON *n = cJSON_GetObjectItem(c, "groups");
    if (name == NULL || !cJSON_IsNumber(n)) {
      g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID,
                  "%s: 'stagger_schedule': a communicator needs a name and a group count",
                  im->files[0]->path);
      return FALSE;
    }
    cJSON *comm = cJSON_CreateObject();
    cJSON_AddStringToObject(comm, "name", name);
    cJSON *groups = cJSON_AddArrayToObject(comm, "groups");
    int index = im->n_comms++;
    cJSON_AddItemToArray(im->comms, comm);
    for (int g = 0; g < n->valueint; g++, next++) {
      g_autofree char *id = g_strdup_printf("%d", next);
      int k = et_groups_find(&im->groups, id);
      if (k < 0) {
        g_autofree char *path = st_chakra_groups_path(im->prefix);
        g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID,
                    "%s: process group %s (communicator '%s') is not there",
                    im->groups_path != NULL ? im->groups_path : path, id, name);
        return FALSE;
      }
      cJSON *members = group_json(g_ptr_array_index(im->groups.members, k));
      cJSON_AddItemToArray(groups, members);
      add_pg(im, id, index, g, members);
    }
  }
  return TRUE;
}

gboolean
im_process_group(Import *im, int rank, guint k, const char *pg_name, PgRef *out,
                 GError **error)
{
  const char *key = *pg_name == '\0' || strcmp(pg_name, "0") == 0 ? "0" : pg_name;
  PgRef *ref = g_hash_table_lookup(im->pg, key);
  if (ref == NULL && im->stagger)
    return im_node_fail(error, im->files[rank], k, "process group '%s' is not one the trace's "
                        "communicators have", pg_name);
  if (ref == NULL) {
    g_autoptr(GArray) members = g_array_new(FALSE, FALSE, sizeof(int32_t));
    if (strcmp(key, "0") == 0) {
      for (int32_t r = 0; r < im->n_ranks; r++)
        g_array_append_val(members, r);
    } else {
      int g = et_groups_find(&im->groups, key);
      if (g < 0) {
        g_autofree char *path = st_chakra_groups_path(im->prefix);
        return im_node_fail(error, im->files[rank], k, "process group '%s' is in no "
                            "communicator-group file (%s%s)", pg_name,
                            im->groups_path != NULL ? im->groups_path : path,
                            im->groups_path != NULL ? "" : " does not exist");
      }
      g_array_append_vals(members, ((GArray *)g_ptr_array_index(im->groups.members, g))->data,
                          ((GArray *)g_ptr_array_index(im->groups.members, g))->len);
    }
    cJSON *comm = cJSON_CreateObject();
    g_autofree char *name = strcmp(key, "0") == 0 ? g_strdup("world")
                                                  : g_strdup_printf("pg %s", key);
    cJSON_AddStringToObject(comm, "name", name);
    cJSON *group = group_json(members);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(comm, "groups"), group);
    cJSON_AddItemToArray(im->comms, comm);
    add_pg(im, key, im->n_comms++, 0, group);
    ref = g_hash_table_lookup(im->pg, key);
  }
  const cJSON *group = ref->members;
  const cJSON *m;
  cJSON_ArrayForEach(m, group) if (m->valueint == rank)
  {
    *out = *ref;
    return TRUE;
  }
  return im_node_fail(error, im->files[rank], k, "rank %d is not in process group '%s'", rank,
                      key);
}

/* ---- the schedule ------------------------------------------------------------------ */

static cJSON *
devices_json(const StCluster *c)
{
  cJSON *devices = cJSON_CreateArray();
  for (int d = 0; d < c->gpus; d++) {
    cJSON *o = cJSON_CreateObject();
    st_json_add_int(o, "node", d / c->gpus_per_node);
    st_json_add_int(o, "local", d % c->gpus_per_node);
    cJSON_AddItemToArray(devices, o);
  }
  return devices;
}

/* Where each rank runs: a stagger trace says it; a foreign one is placed
 * round-robin, as --ranks places ranks. */
static cJSON *
ranks_json(Import *im, const int *program_of, GError **error)
{
  cJSON *ranks = cJSON_CreateArray();
  for (int r = 0; r < im->n_ranks; r++) {
    const EtFile *f = im->files[r];
    int64_t device = r % im->o->cluster->gpus, start = 0, replica = r;
    gboolean present;
    if (!meta_int(f, "stagger_device", 0, G_MAXINT32, &device, &present, error) ||
        !meta_int(f, "stagger_start_ns", 0, INT64_MAX, &start, &present, error) ||
        !meta_int(f, "stagger_replica", 0, G_MAXINT32, &replica, &present, error)) {
      cJSON_Delete(ranks);
      return NULL;
    }
    if (device >= im->o->cluster->gpus) {
      g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID,
                  "%s: rank %d runs on GPU %d, but the cluster has %d GPUs in use (give the "
                  "cluster the trace was made for, or --nodes / --gpus)", f->path, r,
                  (int)device, im->o->cluster->gpus);
      cJSON_Delete(ranks);
      return NULL;
    }
    cJSON *o = cJSON_CreateObject();
    st_json_add_int(o, "device", device);
    st_json_add_int(o, "program", program_of[r]);
    if (start != 0)
      st_json_add_int(o, "start_ns", start);
    if (replica != r)
      st_json_add_int(o, "replica", replica);
    cJSON_AddItemToArray(ranks, o);
  }
  return ranks;
}

static GHashTable *
count_table(void)
{
  return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
}

/* Adds the counts of `from` to `to`. */
static void
add_counts(GHashTable *to, GHashTable *from)
{
  GHashTableIter it;
  gpointer key, n;
  g_hash_table_iter_init(&it, from);
  while (g_hash_table_iter_next(&it, &key, &n)) {
    gpointer had = g_hash_table_lookup(to, key);
    g_hash_table_insert(to, g_strdup(key), GINT_TO_POINTER(GPOINTER_TO_INT(had) +
                                                           GPOINTER_TO_INT(n)));
  }
}

/* Rank `rank`'s program, decoded and converted, what it counted kept in
 * im->tally[rank]. Transfer full. */
static ImProgram *
convert_rank(Import *im, int rank, GError **error)
{
  if (!et_file_read_nodes(im->files[rank], error))
    return NULL;
  ImTally *t = &im->tally[rank];
  GHashTable *skipped = im->skipped, *unused = im->unused;
  int64_t nodes = im->n_nodes, ops = im->n_ops;
  im->skipped = t->skipped = count_table();
  im->unused = t->unused = count_table();
  ImProgram *p = im_rank_program(im, rank, error);
  /* The program owns what it took from the nodes (names are copied):
   * their memory goes now, not with the file at the end of the import. */
  et_file_release_nodes(im->files[rank]);
  im->skipped = skipped;
  im->unused = unused;
  t->nodes = im->n_nodes - nodes;
  t->ops = im->n_ops - ops;
  add_counts(skipped, t->skipped);
  add_counts(unused, t->unused);
  return p;
}

/* Every rank's program (ImProgram *, into `programs`); ranks whose
 * programs are equal share one. A rank whose file is an earlier one's up
 * to renaming (chakra_import_fold.c) takes that one's program undecoded,
 * and counts what it counted. */
static gboolean
convert_programs(Import *im, GPtrArray *programs, int *program_of, GError **error)
{
  g_autoptr(GHashTable) seen =
    g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, NULL);
  ImFold *fold = im->o->no_fold || im->n_ranks < 2 ? NULL : im_fold_new(im->n_ranks);
  gboolean ok = TRUE;
  for (int r = 0; ok && r < im->n_ranks; r++) {
    gboolean keyed = FALSE;
    int q = fold != NULL ? im_fold_match(fold, im, r, &keyed) : -1;
    if (q >= 0) {
      const ImTally *t = &im->tally[q];
      im->same_as[r] = q;
      im->n_folded++;
      program_of[r] = program_of[q];
      im->n_nodes += t->nodes;
      im->n_ops += t->ops;
      add_counts(im->skipped, t->skipped);
      add_counts(im->unused, t->unused);
      continue;
    }
    g_autoptr(ImProgram) p = convert_rank(im, r, error);
    if (p == NULL) {
      ok = FALSE;
      break;
    }
    /* Compared whole; a trace of one rank has nothing to compare. */
    GBytes *key = im->n_ranks > 1 ? im_program_key(p) : NULL;
    gpointer v = key != NULL ? g_hash_table_lookup(seen, key) : NULL;
    if (v != NULL) {
      program_of[r] = GPOINTER_TO_INT(v) - 1;
      g_bytes_unref(key);
      continue;
    }
    program_of[r] = (int)programs->len;
    if (key != NULL)
      g_hash_table_insert(seen, key, GINT_TO_POINTER(program_of[r] + 1));
    if (!im->stagger) { /* foreign programs are named by their first rank */
      g_free(p->name);
      p->name = g_strdup_printf("rank %d", r);
    }
    g_ptr_array_add(programs, g_steal_pointer(&p));
  }
  im_fold_free(fold, im->n_ranks);
  return ok;
}

/* The schedule-wide parts a stagger trace carries in rank 0's metadata. */
static cJSON *
stagger_head(Import *im, GError **error)
{
  const EtAttr *a = meta_attr(im->files[0], "stagger_schedule");
  const char *text = NULL;
  if (!et_attr_string(a, &text, error))
    return NULL;
  cJSON *head = cJSON_Parse(text);
  if (!cJSON_IsObject(head) || !cJSON_IsArray(cJSON_GetObjectItem(head, "comms"))) {
    cJSON_Delete(head);
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_PARSE,
                "%s: global metadata 'stagger_schedule' is not the schedule's JSON",
                im->files[0]->path);
    return NULL;
  }
  return head;
}

/* The schedule-wide parts as the schedule's JSON: everything but the
 * programs (`programs`, converted here) and a foreign trace's model. */
static cJSON *
build_root(Import *im, GPtrArray *programs, GError **error)
{
  g_autoptr(cJSON) root = cJSON_CreateObject();
  g_autoptr(cJSON) head = NULL;
  cJSON_AddStringToObject(root, "format", "stagger-schedule");
  st_json_add_int(root, "version", 1);
  if (im->stagger) {
    if ((head = stagger_head(im, error)) == NULL || !stagger_comms(im, head, error))
      return NULL;
    for (const char *const *k = ET_SCHEDULE_KEYS; *k != NULL; k++) {
      cJSON *item = cJSON_DetachItemFromObjectCaseSensitive(head, *k);
      if (item != NULL)
        cJSON_AddItemToObject(root, *k, item);
    }
  }
  g_autofree int *program_of = g_new(int, im->n_ranks);
  if (!convert_programs(im, programs, program_of, error))
    return NULL;
  cJSON *ranks = ranks_json(im, program_of, error);
  if (ranks == NULL)
    return NULL;
  cJSON_AddItemToObject(root, "ranks", ranks);
  if (!im->stagger) {
    cJSON_AddItemToObject(root, "settings", im_foreign_settings(im));
    st_json_add_int(root, "steps", 1);
  }
  if (im->o->steps > 0)
    cJSON_ReplaceItemInObject(root, "steps", cJSON_CreateNumber(im->o->steps));
  cJSON_AddItemToObject(root, "cluster", st_cluster_to_json(im->o->cluster));
  cJSON_AddItemToObject(root, "devices", devices_json(im->o->cluster));
  cJSON_AddItemToObject(root, "comms", im->comms);
  im->comms = NULL;
  return g_steal_pointer(&root);
}

/* The schedule: its schedule-wide parts read as JSON, then each program
 * built directly. Transfer full. */
static StSchedule *
build_schedule(Import *im, GError **error)
{
  g_autoptr(GPtrArray) programs = g_ptr_array_new_with_free_func((GDestroyNotify)im_program_free);
  g_autoptr(cJSON) root = build_root(im, programs, error);
  if (root == NULL)
    return NULL;
  StModel *model = NULL;
  if (!im->stagger && (model = im_foreign_model(im, error)) == NULL)
    return NULL;
  g_autoptr(StSchedule) s = st_schedule_from_json_without_programs(root, model,
                                                                   (int)programs->len,
                                                                   im->prefix, error);
  if (s == NULL)
    return NULL;
  for (guint i = 0; i < programs->len; i++) {
    StProgram *p = im_program_build(im, g_ptr_array_index(programs, i), s, error);
    if (p == NULL)
      return NULL;
    st_schedule_add_program(s, p);
    g_clear_pointer(&g_ptr_array_index(programs, i), im_program_free); /* its records */
  }
  return g_steal_pointer(&s);
}

/* ---- the warning --------------------------------------------------------------------- */

static gint
compare_keys(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void
append_counts(GString *out, const char *title, GHashTable *table, const char *unit)
{
  if (g_hash_table_size(table) == 0)
    return;
  g_autofree gpointer *keys = g_hash_table_get_keys_as_array(table, NULL);
  guint n = g_hash_table_size(table);
  qsort(keys, n, sizeof *keys, (int (*)(const void *, const void *))compare_keys);
  g_string_append_printf(out, "%s%s: ", out->len > 0 ? "; " : "", title);
  for (guint i = 0; i < n; i++)
    g_string_append_printf(out, "%s%s (%d %s)", i > 0 ? ", " : "", (const char *)keys[i],
                           GPOINTER_TO_INT(g_hash_table_lookup(table, keys[i])), unit);
}

static char *
warning(Import *im)
{
  g_autoptr(GHashTable) fields = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (int r = 0; r < im->n_ranks; r++) {
    GHashTableIter it;
    gpointer key, n;
    g_hash_table_iter_init(&it, im->files[r]->unknown_fields);
    while (g_hash_table_iter_next(&it, &key, &n))
      for (int i = 0; i < GPOINTER_TO_INT(n); i++)
        im_count(fields, key);
    int nodes_of = im->same_as[r] >= 0 ? im->same_as[r] : r; /* whose nodes were read */
    add_counts(fields, im->files[nodes_of]->node_unknown_fields);
  }
  GString *out = g_string_new(NULL);
  append_counts(out, "not simulated (their dependencies kept)", im->skipped, "nodes");
  append_counts(out, "not used", im->unused, "times");
  append_counts(out, "fields the schema does not have", fields, "times");
  return out->len > 0 ? g_string_free(out, FALSE) : (g_string_free(out, TRUE), NULL);
}

/* ---- the whole ---------------------------------------------------------------------- */

static void
import_clear(Import *im)
{
  for (int r = 0; im->files != NULL && r < im->n_ranks; r++)
    et_file_free(im->files[r]);
  g_free(im->files);
  for (int r = 0; im->tally != NULL && r < im->n_ranks; r++) {
    if (im->tally[r].skipped != NULL)
      g_hash_table_unref(im->tally[r].skipped);
    if (im->tally[r].unused != NULL)
      g_hash_table_unref(im->tally[r].unused);
  }
  g_free(im->tally);
  g_free(im->same_as);
  if (im->groups.ids != NULL)
    et_groups_clear(&im->groups);
  g_free(im->groups_path);
  cJSON_Delete(im->comms);
  st_model_free(im->model);
  g_clear_error(&im->model_error);
  g_clear_pointer(&im->pg, g_hash_table_unref);
  g_clear_pointer(&im->layer_of, g_hash_table_unref);
  g_clear_pointer(&im->layer_names, g_hash_table_unref);
  if (im->layer_text != NULL)
    g_string_chunk_free(im->layer_text);
  if (im->scratch != NULL)
    g_string_free(im->scratch, TRUE);
  g_clear_pointer(&im->skipped, g_hash_table_unref);
  g_clear_pointer(&im->unused, g_hash_table_unref);
}

void
st_chakra_import_stats_clear(StChakraImportStats *stats)
{
  g_free(stats->warning);
  *stats = (StChakraImportStats){0};
}

StSchedule *
st_chakra_import(const char *prefix, const StChakraImportOptions *options,
                 StChakraImportStats *stats, GError **error)
{
  g_return_val_if_fail(prefix != NULL && options != NULL && options->cluster != NULL, NULL);
  Import im = {.o = options, .prefix = prefix};
  im.comms = cJSON_CreateArray();
  im.pg = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  im.layer_of = g_hash_table_new(g_str_hash, g_str_equal);
  im.layer_names = g_hash_table_new(g_str_hash, g_str_equal);
  im.layer_text = g_string_chunk_new(1 << 16);
  im.scratch = g_string_sized_new(128);
  im.skipped = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  im.unused = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  StSchedule *s = NULL;
  if (read_files(&im, error) && read_groups(&im, error)) {
    im.stagger = meta_attr(im.files[0], "stagger_schedule") != NULL;
    g_return_val_if_fail(im.stagger || options->profile != NULL, (import_clear(&im), NULL));
    s = build_schedule(&im, error);
    if (s != NULL && !st_schedule_check(s, error)) {
      g_prefix_error(error, "%s: ", prefix);
      g_clear_pointer(&s, st_schedule_free);
    }
  }
  if (s != NULL && stats != NULL) {
    *stats = (StChakraImportStats){.ranks = im.n_ranks, .from_stagger = im.stagger,
                                   .nodes = im.n_nodes, .ops = im.n_ops,
                                   .folded = im.n_folded,
                                   .warning = warning(&im)};
  }
  import_clear(&im);
  return s;
}
