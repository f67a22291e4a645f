/* chakra_stream.c: Chakra trace files as streams of length-delimited
 * protobuf messages (see chakra_private.h): the framing, a wire-format walk
 * that explains what protobuf-c's unpack would only refuse, and writing.
 *
 * The wire format (protobuf's encoding documentation): a message is a
 * sequence of (tag, value); tag = field number << 3 | wire type, a varint.
 * Wire types: 0 varint (at most 10 bytes, 7 bits each, high bit = more),
 * 1 eight bytes, 2 a varint length then that many bytes (strings, bytes,
 * sub-messages, packed repeated numbers), 5 four bytes; 3 and 4 (groups)
 * are deprecated and unused by this schema; 6 and 7 do not exist.
 */
#include "interop/chakra_private.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/util.h"
#include "interop/chakra.h"

G_DEFINE_QUARK(st-chakra-error-quark, st_chakra_error)

/* ---- reading ---------------------------------------------------------------- */

typedef struct {
  const uint8_t *data;
  size_t len;   /* of the whole file */
  GHashTable *unknown_fields;
  const char *what; /* "the metadata", "node #12" */
  const char *path;
} Walk;

static gboolean G_GNUC_PRINTF(4, 5)
walk_fail(const Walk *w, size_t at, GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *why = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_PARSE, "%s: %s (byte %zu): %s", w->path, w->what,
              at, why);
  return FALSE;
}

/* A varint at data[*at .. end); advances *at. */
static gboolean
read_varint(const Walk *w, size_t *at, size_t end, const char *what, uint64_t *out,
            GError **error)
{
  uint64_t v = 0;
  size_t start = *at;
  *out = 0; /* set on failure too: the compiler cannot see that callers stop then */
  for (int i = 0; i < 10; i++) {
    if (*at >= end)
      return walk_fail(w, start, error, "%s: truncated varint (%zu of its bytes, then the %s "
                       "ends)", what, *at - start, end == w->len ? "file" : "enclosing field");
    uint8_t b = w->data[(*at)++];
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) {
      *out = v;
      return TRUE;
    }
  }
  return walk_fail(w, start, error, "%s: varint longer than 10 bytes", what);
}

static int
expected_wire_type(ProtobufCType type)
{
  switch (type) {
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_DOUBLE:
    return 1;
  case PROTOBUF_C_TYPE_SFIXED32:
  case PROTOBUF_C_TYPE_FIXED32:
  case PROTOBUF_C_TYPE_FLOAT:
    return 5;
  case PROTOBUF_C_TYPE_STRING:
  case PROTOBUF_C_TYPE_BYTES:
  case PROTOBUF_C_TYPE_MESSAGE:
    return 2;
  default:
    return 0;
  }
}

static const char *
wire_type_name(int t)
{
  static const char *const names[] = {"varint", "64-bit", "length-delimited", "group start",
                                      "group end", "32-bit", "6 (invalid)", "7 (invalid)"};
  return names[t & 7];
}

static gboolean walk_message(const Walk *w, const ProtobufCMessageDescriptor *desc, size_t at,
                             size_t end, GError **error);

/* The contents of packed repeated field `f`: values of its element's wire type. */
static gboolean
walk_packed(const Walk *w, const ProtobufCFieldDescriptor *f, size_t at, size_t end,
            GError **error)
{
  int t = expected_wire_type(f->type);
  while (at < end) {
    uint64_t v;
    if (t == 0 && !read_varint(w, &at, end, f->name, &v, error))
      return FALSE;
    size_t size = t == 1 ? 8 : t == 5 ? 4 : 0;
    if (size > 0 && end - at < size)
      return walk_fail(w, at, error, "field '%s': packed values end inside a %zu-byte value",
                       f->name, size);
    at += size;
  }
  return TRUE;
}

static gboolean
walk_message(const Walk *w, const ProtobufCMessageDescriptor *desc, size_t at, size_t end,
             GError **error)
{
  while (at < end) {
    size_t tag_at = at;
    uint64_t tag;
    if (!read_varint(w, &at, end, "field tag", &tag, error))
      return FALSE;
    uint32_t number = (uint32_t)(tag >> 3);
    int type = (int)(tag & 7);
    if (number == 0 || tag >> 3 > 0x1fffffff)
      return walk_fail(w, tag_at, error, "field number %" G_GUINT64_FORMAT " is not valid",
                       tag >> 3);
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(desc, number);
    if (type == 3 || type == 4 || type > 5)
      return walk_fail(w, tag_at, error, "%s field %u: wire type %s is not used by this schema",
                       desc->short_name, number, wire_type_name(type));
    if (f != NULL) {
      int want = expected_wire_type(f->type);
      gboolean packed = type == 2 && want != 2 && f->label == PROTOBUF_C_LABEL_REPEATED;
      if (type != want && !packed)
        return walk_fail(w, tag_at, error, "%s field %u ('%s'): wire type %s, but the schema "
                         "gives it %s", desc->short_name, number, f->name,
                         wire_type_name(type), wire_type_name(want));
    } else {
      g_autofree char *key = g_strdup_printf("%s field %u", desc->short_name, number);
      gpointer n = g_hash_table_lookup(w->unknown_fields, key);
      g_hash_table_insert(w->unknown_fields, g_steal_pointer(&key),
                          GINT_TO_POINTER(GPOINTER_TO_INT(n) + 1));
    }
    const char *name = f != NULL ? f->name : "unknown field";
    uint64_t v;
    switch (type) {
    case 0:
      if (!read_varint(w, &at, end, name, &v, error))
        return FALSE;
      break;
    case 1:
    case 5: {
      size_t size = type == 1 ? 8 : 4;
      if (end - at < size)
        return walk_fail(w, at, error, "%s: %zu-byte value, but only %zu bytes are left", name,
                         size, end - at);
      at += size;
      break;
    }
    case 2: {
      if (!read_varint(w, &at, end, name, &v, error))
        return FALSE;
      if (v > end - at)
        return walk_fail(w, at, error, "%s: length %" G_GUINT64_FORMAT " runs past the end "
                         "(%zu bytes are left)", name, v, end - at);
      size_t inner_end = at + (size_t)v;
      if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE &&
          !walk_message(w, f->descriptor, at, inner_end, error))
        return FALSE;
      if (f != NULL && expected_wire_type(f->type) != 2 && !walk_packed(w, f, at, inner_end, error))
        return FALSE;
      at = inner_end;
      break;
    }
    }
  }
  return TRUE;
}

/* One framed message at *at: walked, then unpacked with `allocator` (NULL:
 * malloc's). Advances *at. */
static ProtobufCMessage *
read_message(Walk *w, const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *allocator,
             size_t *at, GError **error)
{
  uint64_t len;
  size_t start = *at;
  if (!read_varint(w, at, w->len, "length prefix", &len, error))
    return NULL;
  if (len > w->len - *at) {
    walk_fail(w, start, error, "length prefix says %" G_GUINT64_FORMAT " bytes, but only %zu "
              "are left (a truncated file?)", len, w->len - *at);
    return NULL;
  }
  size_t end = *at + (size_t)len;
  if (!walk_message(w, desc, *at, end, error))
    return NULL;
  ProtobufCMessage *m = protobuf_c_message_unpack(desc, allocator, (size_t)len, w->data + *at);
  if (m == NULL) {
    walk_fail(w, start, error, "protobuf-c cannot decode this %s", desc->short_name);
    return NULL;
  }
  *at = end;
  return m;
}

EtFile *
et_file_open(const char *path, GError **error)
{
  /* Read, not mapped: a trace is many small files, and unmapping each
   * cost more than reading it (a TLB flush per file). */
  g_autoptr(GError) local = NULL;
  char *data = NULL;
  gsize len = 0;
  if (!g_file_get_contents(path, &data, &len, &local)) {
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_IO, "%s", local->message);
    return NULL;
  }
  g_autoptr(EtFile) file = g_new0(EtFile, 1);
  file->bytes = g_bytes_new_take(data, len);
  file->path = g_strdup(path);
  file->nodes = g_ptr_array_new();
  file->arena = et_arena_new();
  file->offsets = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  file->unknown_fields = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  file->node_unknown_fields = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  Walk w = {(const uint8_t *)data, len, file->unknown_fields, "the global metadata", path};
  if (w.len == 0) {
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_PARSE,
                "%s: empty file (a trace starts with its global metadata)", path);
    return NULL;
  }
  size_t at = 0;
  file->meta =
    (EtMeta *)read_message(&w, &chakra_proto_msg__global_metadata__descriptor, NULL, &at,
                           error);
  if (file->meta == NULL)
    return NULL;
  file->nodes_at = at;
  return g_steal_pointer(&file);
}

gboolean
et_file_read_nodes(EtFile *file, GError **error)
{
  /* Released nodes are not read again (nodes would stay empty). */
  g_return_val_if_fail(!file->nodes_released, FALSE);
  if (file->nodes_read)
    return TRUE;
  gsize len = 0;
  const uint8_t *data = g_bytes_get_data(file->bytes, &len);
  Walk w = {data, len, file->node_unknown_fields, NULL, file->path};
  size_t at = file->nodes_at;
  ProtobufCAllocator allocator = et_arena_allocator(file->arena);
  char what[6 + ST_INT_TEXT_SIZE] = "node #"; /* "node #<k>", not printf: one per node */
  w.what = what;
  while (at < w.len) {
    st_int_text(file->nodes->len, what + 6);
    uint64_t offset = at;
    ProtobufCMessage *node =
      read_message(&w, &chakra_proto_msg__node__descriptor, &allocator, &at, error);
    if (node == NULL)
      return FALSE;
    g_ptr_array_add(file->nodes, node);
    g_array_append_val(file->offsets, offset);
  }
  file->nodes_read = TRUE;
  return TRUE;
}

const uint8_t *
et_file_node_bytes(const EtFile *file, size_t *len)
{
  gsize size = 0;
  const uint8_t *data = g_bytes_get_data(file->bytes, &size);
  *len = size - file->nodes_at;
  return data + file->nodes_at;
}

void
et_file_release_nodes(EtFile *file)
{
  g_return_if_fail(file != NULL && file->nodes_read);
  g_ptr_array_set_size(file->nodes, 0);
  et_arena_free(file->arena);
  file->arena = et_arena_new();
  file->nodes_released = TRUE;
}

const EtNode *
et_file_node(const EtFile *file, guint k, EtNode **again)
{
  *again = NULL;
  if (k < file->nodes->len)
    return g_ptr_array_index(file->nodes, k);
  if (k >= file->offsets->len)
    return NULL;
  gsize len = 0;
  const uint8_t *data = g_bytes_get_data(file->bytes, &len);
  Walk w = {data, len, NULL, "node", file->path};
  size_t at = (size_t)g_array_index(file->offsets, uint64_t, k);
  uint64_t size;
  if (!read_varint(&w, &at, len, "length prefix", &size, NULL) || size > len - at)
    return NULL;
  *again = (EtNode *)protobuf_c_message_unpack(&chakra_proto_msg__node__descriptor, NULL,
                                               (size_t)size, data + at);
  return *again;
}

EtFile *
et_file_read(const char *path, GError **error)
{
  g_autoptr(EtFile) file = et_file_open(path, error);
  if (file == NULL || !et_file_read_nodes(file, error))
    return NULL;
  return g_steal_pointer(&file);
}

void
et_file_free(EtFile *file)
{
  if (file == NULL)
    return;
  if (file->meta != NULL)
    protobuf_c_message_free_unpacked(&file->meta->base, NULL);
  if (file->nodes != NULL)
    g_ptr_array_unref(file->nodes);
  et_arena_free(file->arena); /* the nodes' memory */
  if (file->offsets != NULL)
    g_array_unref(file->offsets);
  if (file->unknown_fields != NULL)
    g_hash_table_unref(file->unknown_fields);
  if (file->node_unknown_fields != NULL)
    g_hash_table_unref(file->node_unknown_fields);
  if (file->bytes != NULL)
    g_bytes_unref(file->bytes);
  g_free(file->path);
  g_free(file);
}

/* ---- writing ------------------------------------------------------------------ */

struct EtWriter {
  FILE *f;
  char *path;
  GByteArray *buf; /* reused for each message */
};

EtWriter *
et_writer_open(const char *path, GError **error)
{
  FILE *f = fopen(path, "wb");
  if (f == NULL) {
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_IO, "%s: %s", path, g_strerror(errno));
    return NULL;
  }
  EtWriter *w = g_new0(EtWriter, 1);
  w->f = f;
  w->path = g_strdup(path);
  w->buf = g_byte_array_new();
  return w;
}

gboolean
et_writer_add(EtWriter *w, const ProtobufCMessage *message, GError **error)
{
  size_t size = protobuf_c_message_get_packed_size(message);
  uint8_t prefix[10];
  size_t n = 0;
  for (uint64_t v = size;; v >>= 7) {
    prefix[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
    if (v < 0x80)
      break;
  }
  g_byte_array_set_size(w->buf, (guint)size);
  protobuf_c_message_pack(message, w->buf->data);
  if (fwrite(prefix, 1, n, w->f) != n || fwrite(w->buf->data, 1, size, w->f) != size) {
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_IO, "%s: %s", w->path, g_strerror(errno));
    return FALSE;
  }
  return TRUE;
}

gboolean
et_writer_close(EtWriter *w, GError **error)
{
  gboolean ok = ferror(w->f) == 0;
  ok = fclose(w->f) == 0 && ok;
  if (!ok)
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_IO, "%s: %s", w->path, g_strerror(errno));
  g_byte_array_unref(w->buf);
  g_free(w->path);
  g_free(w);
  return ok;
}
