/* chakra_import_private.h: what the importer's files share (chakra.h has
 * the contract; docs/INTEROP.md the mapping).
 *
 * The importer converts each rank's nodes into a program's ops (ImProgram:
 * the ops' fields, dependencies and memory effects), then builds the
 * schedule directly: the schedule-wide parts (settings, cluster, devices,
 * ranks, communicators; a stagger trace's model and jobs) are written as
 * the schedule's JSON and read by st_schedule_from_json_without_programs,
 * a foreign trace's model is built in code (model_build.h), and each
 * program through the builder API (chakra_import_program.c). Every value
 * meets the checks the schedule's JSON reader made when the importer wrote
 * the whole schedule as JSON and read it back (the same schedule, in half
 * the time at 10^6 nodes); st_schedule_check checks the whole. What can
 * only be wrong in the trace (a dangling dependency, a cycle, a process
 * group no file defines, a send whose comm_src is not its rank) is found
 * first and reported with the file and the node.
 *
 *   chakra_import.c          the files, the schedule-wide parts, the warning
 *   chakra_import_ops.c      one rank's nodes -> its program's ops
 *   chakra_import_fields.c   a node's attributes -> its op's fields
 *   chakra_import_memory.c   their memory effects -> allocations and frees
 *   chakra_import_program.c  a converted program -> the schedule's StProgram
 *   chakra_import_foreign.c  what a trace not written by stagger lacks:
 *                            a model, streams, buffers, costs
 */
#pragma once

#include <cjson/cJSON.h>

#include "interop/chakra.h"
#include "interop/chakra_private.h"

typedef struct {
  int comm;  /* index in the schedule's communicators */
  int group; /* index of the group in that communicator */
  const cJSON *members; /* that group's ranks (borrowed from `comms`: found once,
                           not walked to for every node) */
} PgRef;

typedef struct ImFold ImFold;

/* What converting one rank's file added to the import's counts: the same
 * again for every rank folded onto it. */
typedef struct {
  int64_t nodes, ops;
  GHashTable *skipped, *unused; /* as Import's */
} ImTally;

typedef struct {
  const StChakraImportOptions *o;
  const char *prefix;
  int n_ranks;
  EtFile **files;         /* [n_ranks] */
  gboolean stagger;       /* written by st_chakra_export: the stagger_* parts are there */
  EtGroups groups;        /* the communicator-group file, or empty */
  char *groups_path;      /* it, or NULL when there is none */
  cJSON *comms;           /* the schedule's "comms", built as process groups are met */
  int n_comms;            /* in `comms` */
  GHashTable *pg;         /* pg_name -> PgRef * */
  /* Foreign traces: the synthesized model's custom layers, one per distinct
   * (name, num_ops, tensor_size, duration, CPU or not), built as they are
   * met; the first layer it refused, reported where the model is read. */
  StModel *model;
  GError *model_error;
  GHashTable *layer_of;   /* key -> GINT_TO_POINTER(layer + 1); keys in `layer_text` */
  GHashTable *layer_names; /* the names in `layers` (a set, in `layer_text`) */
  GStringChunk *layer_text; /* layer_of's keys and the names (were 2 allocations a layer) */
  GString *scratch;         /* a layer's key or name being made */
  /* Read and not used: "METADATA_NODE" -> count (not simulated), and
   * "attribute 'rf_id'" -> count (not understood). */
  GHashTable *skipped, *unused;
  int64_t n_nodes, n_ops;
  /* Identical rank files (chakra_import_fold.c): same_as[r] is the rank
   * whose program rank r takes without its nodes being decoded, or -1;
   * tally[q] what converting q's file counted. */
  int *same_as;           /* [n_ranks] */
  ImTally *tally;         /* [n_ranks] */
  int n_folded;
} Import;

/* Sets `error` to "FILE: node #k (id I 'NAME'): ..." and returns FALSE. */
gboolean im_node_fail(GError **error, const EtFile *f, guint k, const char *format, ...)
  G_GNUC_PRINTF(4, 5);
/* Counts one `what` in `table` (im->skipped or im->unused). */
void im_count(GHashTable *table, const char *what);

/* ---- one rank's program, converted (chakra_import_program.c) ------------- */

/* One op of a converted program: what the schedule's JSON said of it. */
typedef struct {
  StOp op;            /* kind, sub, stream, data, part, samples and the ST_OP_FIELDS
                         (sched_json_private.h); its lists are below */
  guint node;         /* its node's position in the file, for messages */
  guint given;        /* bits (1 << f) of the ST_OP_FIELDS set: the first setting of a
                         field wins, as the first of two equal keys did in its JSON */
  uint32_t dep_first, n_deps;   /* same-step dependencies: ops, in ImProgram.deps */
  uint32_t prev_first, n_prev;  /* previous-step ones, in ImProgram.prev: node
                                   positions until im_rank_program makes them ops */
  GArray *alloc, *free;         /* uint32_t buffers, or NULL when none */
} ImOp;

typedef struct {
  char *name;
  int64_t bytes;
  gboolean persistent;
} ImBuffer;

typedef struct {
  int rank;           /* whose file its nodes are in (messages) */
  char *name;         /* a foreign program's; a stagger one's is in `head` */
  cJSON *head;        /* a stagger trace's 'stagger_program' (name, job, streams,
                         buffers, labels), or NULL: foreign */
  GPtrArray *streams; /* foreign: char * names, owned (priority 0) */
  GArray *buffers;    /* foreign: ImBuffer */
  GArray *ops;        /* ImOp, dependencies first */
  GArray *deps;       /* int32_t */
  GArray *prev;       /* int32_t */
} ImProgram;

ImProgram *im_program_new(int rank);
void im_program_free(ImProgram *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ImProgram, im_program_free)
/* Appends op (kind, sub, stream) of node `node`, every other field "none"
 * (as the schedule's reader leaves an absent key). Borrowed, valid until
 * the next op is added. */
ImOp *im_program_add_op(ImProgram *p, guint node, StOpKind kind, int sub, int stream);
/* Sets ST_OP_FIELDS[f] of `op` to v, unless an earlier call set it. */
void im_op_set(ImOp *op, guint f, int64_t v);
/* Everything the program says, as bytes: equal for equal programs (ranks
 * whose programs are equal share one). Transfer full. */
GBytes *im_program_key(const ImProgram *p);
/* The program as the schedule's, its indices checked against `s` (the
 * jobs' models, the communicators, its own labels) as the schedule's
 * reader checked them. Transfer full. */
StProgram *im_program_build(const Import *im, const ImProgram *p, const StSchedule *s,
                            GError **error);

/* ---- one rank (chakra_import_ops.c, chakra_import_memory.c) ------------- */

typedef struct {
  int64_t bytes;
  int32_t writer, reader; /* ops, -1 when none */
  char *name;
} ImTensor;

typedef struct {
  Import *im;
  int rank;
  const EtFile *f;
  guint n;
  ImProgram *p;          /* what the nodes become */
  int n_streams;         /* a stagger program's (its 'stagger_program' says them) */
  GHashTable *pos_of;    /* &node->id -> position + 1; NULL when the ids are dense */
  uint64_t first_id;     /* dense ids: node k's id is first_id + k (no table needed) */
  GArray *order;         /* guint positions, dependencies first */
  int32_t *op_of;        /* [n]: op index, or -1 when contracted */
  GArray **through;      /* [n]: a contracted node's dependencies, as ops */
  GPtrArray *buffer_items; /* a stagger trace's buffers' items by index (borrowed: cJSON
                              finds an index by walking the list) */
  GArray *last;          /* int32_t per stream: its latest op, -1 */
  GHashTable *stream_of; /* foreign: stream name -> index + 1 */
  GPtrArray *op_deps;    /* GArray of int32_t per op: every op it waits for (foreign memory) */
  GHashTable *tensor_of; /* foreign: name -> ImTensor * */
  GPtrArray *tensors;    /* ImTensor *, in order of first mention */
} ImRank;

static inline const EtNode *
im_node(const ImRank *x, guint k)
{
  return g_ptr_array_index(x->f->nodes, k);
}

static inline const EtAttr *
im_attr(const EtNode *n, const char *name)
{
  return et_attr_find(n->attr, n->n_attr, name);
}

/* Attribute `name` of node k as an integer (*present says whether it is
 * there; may be NULL) or a string; untouched when absent. */
gboolean im_get_int(const ImRank *x, guint k, const char *name, int64_t *out, gboolean *present,
                    GError **error);
gboolean im_get_string(const ImRank *x, guint k, const char *name, const char **out,
                       GError **error);
/* The fields of the op node k becomes (kind, sub for a collective and
 * stream set): stagger_* attributes, or a foreign node's layer, direction
 * and bytes; and a communication node's communicator, peer, tag and bytes.
 * (chakra_import_fields.c) */
gboolean im_op_fields(ImRank *x, guint k, StOpKind kind, gboolean barrier, ImOp *r,
                      GError **error);

/* Node k's memory effects: allocations and frees of op `op` in a stagger
 * trace; a foreign trace's tensors are recorded, and become buffers once
 * every op is made (im_foreign_buffers). */
gboolean im_node_memory(ImRank *x, guint k, int32_t op, GError **error);
void im_foreign_buffers(ImRank *x);
void im_tensor_free(gpointer tensor);

/* Rank `rank`'s program, converted from its trace file. Transfer full.
 * (chakra_import_ops.c) */
ImProgram *im_rank_program(Import *im, int rank, GError **error);

/* The communicator and group of process group `pg_name` for `rank`'s node
 * k, made on first use for a foreign trace ("" and "0": every rank). */
gboolean im_process_group(Import *im, int rank, guint k, const char *pg_name, PgRef *out,
                          GError **error);

/* ---- foreign traces (chakra_import_foreign.c) ------------------------------ */

/* The index of the custom layer that costs foreign COMP node `n` (made on
 * first use), adding its duration to the profile when it has one. */
int im_foreign_layer(Import *im, const EtNode *n, int64_t num_ops, int64_t tensor_size,
                     gboolean cpu);
/* The synthesized model, derived (im->model taken), or NULL with the
 * error the schedule's reader gave for its JSON. Transfer full. */
StModel *im_foreign_model(Import *im, GError **error);
/* Settings of a foreign trace, from the import options. Transfer full. */
cJSON *im_foreign_settings(Import *im);

/* ---- identical rank files (chakra_import_fold.c) ----------------------------- */

ImFold *im_fold_new(int n_ranks);
void im_fold_free(ImFold *fold, int n_ranks);
/* The earlier rank whose program `rank` takes (its node stream equal up to
 * the renaming of ranks in process groups, checked against the groups made
 * so far), or -1, when `rank` becomes a representative if its file could be
 * keyed (`*keyed`). Call for ranks in order, after the representatives
 * before it were converted (a foreign trace's groups are made then). */
int im_fold_match(ImFold *fold, Import *im, int rank, gboolean *keyed);
