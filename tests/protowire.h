/* protowire.h: protobuf's wire format written by hand, for tests that make
 * ONNX files without the schema's generated code (an independent writer).
 * Each field is its number and wire type: 0 (varint) or 2 (length-
 * delimited bytes, strings, messages). */
#pragma once

#include <glib.h>
#include <stdint.h>

void st_pb_varint(GByteArray *out, uint64_t v);
/* Field `field` of wire type 2. */
void st_pb_bytes(GByteArray *out, int field, const void *data, gsize length);
void st_pb_string(GByteArray *out, int field, const char *text);
/* Appends `message` as field `field` and unrefs it. */
void st_pb_message(GByteArray *out, int field, GByteArray *message);
/* Field `field` of wire type 0. */
void st_pb_int(GByteArray *out, int field, int64_t value);
