/* chakra_private.h: what the Chakra trace files of sim/interop/ share: the
 * stream of length-delimited messages (chakra_stream.c), attribute helpers
 * (chakra_attr.c) and the communicator-group file (chakra_groups.c). Private
 * to sim/interop/ and its tests; chakra.h is the public face.
 *
 * Decoding is protobuf-c's (the schema is chakra_et.proto, compiled at build
 * time). Before protobuf-c unpacks a message, chakra_stream.c walks its wire
 * format against the same compiled descriptors, because protobuf-c's unpack
 * only says that it failed: the walk says where and why (a truncated varint,
 * a length past the end, a wire type the schema does not give that field),
 * and counts the fields the schema does not know, which protobuf-c would
 * keep silently.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "chakra_et.pb-c.h"

typedef ChakraProtoMsg__Node EtNode;
typedef ChakraProtoMsg__GlobalMetadata EtMeta;
typedef ChakraProtoMsg__AttributeProto EtAttr;

/* ---- the stream (chakra_stream.c) -------------------------------------- */

/* Memory for decoded messages that live as long as one file: protobuf-c's
 * allocations cut from large blocks, released together by et_arena_free
 * (chakra_arena.c). */
typedef struct EtArena EtArena;
EtArena *et_arena_new(void);
void et_arena_free(EtArena *arena);
ProtobufCAllocator et_arena_allocator(EtArena *arena);

/* One trace file: its metadata decoded, its nodes decoded on demand (an
 * importer that folds identical rank files decodes the nodes of one file per
 * kind). */
typedef struct {
  char *path;
  EtMeta *meta;           /* owned (protobuf-c) */
  GPtrArray *nodes;       /* EtNode *, in `arena`, in file order; empty until
                             et_file_read_nodes and after et_file_release_nodes */
  EtArena *arena;         /* owned: where the nodes are decoded */
  GArray *offsets;        /* uint64_t: byte offset of each node's length prefix */
  /* Fields the schema does not know, by where they were met ("Node field
   * 11" -> count), for the importer's warning. char * -> GINT_TO_POINTER.
   * The metadata's in `unknown_fields`, the nodes' in `node_unknown_fields`. */
  GHashTable *unknown_fields;
  GHashTable *node_unknown_fields;
  GBytes *bytes;          /* the file's bytes, owned */
  size_t nodes_at;        /* byte offset of the first node's length prefix */
  gboolean nodes_read;
  gboolean nodes_released; /* et_file_release_nodes: `offsets` stay */
} EtFile;

/* Reads and decodes a whole file. Errors name the file, the message (the
 * metadata or "node #k", counted from 0 in file order) and its byte
 * offset. Transfer full. */
EtFile *et_file_read(const char *path, GError **error);
/* Maps a file and decodes its metadata only. Transfer full. */
EtFile *et_file_open(const char *path, GError **error);
/* Decodes the nodes of a file et_file_open opened (once; TRUE again after;
 * not after et_file_release_nodes). */
gboolean et_file_read_nodes(EtFile *file, GError **error);
/* The bytes of the node messages (their framing included), borrowed. */
const uint8_t *et_file_node_bytes(const EtFile *file, size_t *len);
/* Frees the decoded nodes (their arena) once converted, keeping their
 * offsets: a file of 10^6 nodes held them until the end of the import. */
void et_file_release_nodes(EtFile *file);
/* Node k (< offsets->len) of a file whose nodes were read: the decoded one,
 * borrowed, or after et_file_release_nodes decoded again into *again
 * (transfer full, for protobuf_c_message_free_unpacked), for a message;
 * NULL when it cannot be. */
const EtNode *et_file_node(const EtFile *file, guint k, EtNode **again);
void et_file_free(EtFile *file);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(EtFile, et_file_free)

/* Writes messages to a new file, each as a varint length then its bytes. */
typedef struct EtWriter EtWriter;
EtWriter *et_writer_open(const char *path, GError **error);
gboolean et_writer_add(EtWriter *w, const ProtobufCMessage *message, GError **error);
/* Flushes and closes; frees `w` either way. */
gboolean et_writer_close(EtWriter *w, GError **error);

/* ---- what a stagger trace carries beyond Chakra's fields --------------- */

/* The keys of the schedule's JSON that rank 0's metadata carries whole
 * (`stagger_schedule`), NULL-terminated: everything schedule-wide that no
 * node says. Written by chakra_export.c, read by chakra_import.c. */
extern const char *const ET_SCHEDULE_KEYS[];

/* ---- attributes (chakra_attr.c) ----------------------------------------- */

/* Attributes of one node or metadata being written, owning what they point
 * to until et_attrs_clear. Names are borrowed (string literals). */
typedef struct {
  GPtrArray *attrs; /* EtAttr *, owned */
  GPtrArray *owned; /* everything else allocated for them */
} EtAttrs;

void et_attrs_init(EtAttrs *a);
void et_attrs_clear(EtAttrs *a);
void et_attrs_int64(EtAttrs *a, const char *name, int64_t v);
void et_attrs_int32(EtAttrs *a, const char *name, int32_t v);
void et_attrs_uint64(EtAttrs *a, const char *name, uint64_t v);
void et_attrs_bool(EtAttrs *a, const char *name, gboolean v);
void et_attrs_string(EtAttrs *a, const char *name, const char *v);
/* `v` (n strings) and the strings are copied. */
void et_attrs_string_list(EtAttrs *a, const char *name, char *const *v, size_t n);
void et_attrs_int64_list(EtAttrs *a, const char *name, const int64_t *v, size_t n);
/* Points `*attr` / `*n_attr` of a message at the attributes. */
#define et_attrs_attach(a, msg)                                                              \
  ((msg)->n_attr = (a)->attrs->len, (msg)->attr = (EtAttr **)(void *)(a)->attrs->pdata)

/* The attribute `name` of `attrs`, or NULL. Linear: nodes have a handful. */
const EtAttr *et_attr_find(EtAttr *const *attrs, size_t n, const char *name);
/* Its value as an integer, from any integer or bool member; FALSE (with
 * `error` naming the attribute and its type) otherwise, or when a uint64 is
 * over INT64_MAX. */
gboolean et_attr_int(const EtAttr *a, int64_t *out, GError **error);
/* Its string_val, or FALSE with an error. */
gboolean et_attr_string(const EtAttr *a, const char **out, GError **error);
/* Its int64 / uint64 / int32 / uint32 list as int64s (a uint64 over
 * INT64_MAX is an error). Transfer full. */
gboolean et_attr_int_list(const EtAttr *a, GArray **out, GError **error);
/* The oneof member a value is stored in ("int64_val", "string_list"). */
const char *et_attr_kind(const EtAttr *a);

/* ---- the communicator-group file (chakra_groups.c) ----------------------- */

/* ASTRA-sim's --comm-group-configuration file: a JSON object from process
 * group id (a decimal string, 1 and up) to its ranks:
 *   {"1": [0, 1, 2, 3], "2": [0, 2], ...}
 * A node names its group in the "pg_name" attribute; "" and "0" mean every
 * rank. */
typedef struct {
  GPtrArray *ids;     /* char *: group ids in file order */
  GPtrArray *members; /* GArray of int32_t ranks, ascending, per group */
} EtGroups;

void et_groups_init(EtGroups *g);
void et_groups_clear(EtGroups *g);
void et_groups_add(EtGroups *g, const char *id, const int32_t *ranks, int n);
/* The index of group `id`, or -1. */
int et_groups_find(const EtGroups *g, const char *id);
gboolean et_groups_save(const EtGroups *g, const char *path, GError **error);
/* Every rank in [0, n_ranks); members sorted. */
gboolean et_groups_load(const char *path, int n_ranks, EtGroups *g, GError **error);

/* ---- names ------------------------------------------------------------------ */

/* "COMP_NODE", "ALL_REDUCE", or "type 42" for a value the schema lacks.
 * Borrowed (static or interned). */
const char *et_node_type_name(int type);
const char *et_comm_type_name(int type);
