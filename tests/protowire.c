/* protowire.c: see protowire.h. */
#include "protowire.h"

#include <string.h>

void
st_pb_varint(GByteArray *out, uint64_t v)
{
  do {
    uint8_t byte = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v != 0)
      byte |= 0x80;
    g_byte_array_append(out, &byte, 1);
  } while (v != 0);
}

void
st_pb_bytes(GByteArray *out, int field, const void *data, gsize length)
{
  st_pb_varint(out, (uint64_t)field << 3 | 2);
  st_pb_varint(out, length);
  g_byte_array_append(out, data, (guint)length);
}

void
st_pb_string(GByteArray *out, int field, const char *text)
{
  st_pb_bytes(out, field, text, strlen(text));
}

void
st_pb_message(GByteArray *out, int field, GByteArray *message)
{
  st_pb_bytes(out, field, message->data, message->len);
  g_byte_array_unref(message);
}

void
st_pb_int(GByteArray *out, int field, int64_t value)
{
  st_pb_varint(out, (uint64_t)field << 3);
  st_pb_varint(out, (uint64_t)value);
}
