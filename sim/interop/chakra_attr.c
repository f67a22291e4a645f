/* chakra_attr.c: building and reading Chakra attributes (AttributeProto, a
 * name and one member of the `value` oneof), and the schema's enum names.
 * See chakra_private.h. */
#include "interop/chakra_private.h"

#include <string.h>

#include "base/error.h"
#include "interop/chakra.h"

/* ---- building --------------------------------------------------------------- */

void
et_attrs_init(EtAttrs *a)
{
  a->attrs = g_ptr_array_new_with_free_func(g_free);
  a->owned = g_ptr_array_new_with_free_func(g_free);
}

void
et_attrs_clear(EtAttrs *a)
{
  g_clear_pointer(&a->attrs, g_ptr_array_unref);
  g_clear_pointer(&a->owned, g_ptr_array_unref);
}

static EtAttr *
add(EtAttrs *a, const char *name, ChakraProtoMsg__AttributeProto__ValueCase value_case)
{
  EtAttr *attr = g_new(EtAttr, 1);
  chakra_proto_msg__attribute_proto__init(attr);
  attr->name = (char *)name;
  attr->value_case = value_case;
  g_ptr_array_add(a->attrs, attr);
  return attr;
}

static gpointer
own(EtAttrs *a, gpointer p)
{
  g_ptr_array_add(a->owned, p);
  return p;
}

void
et_attrs_int64(EtAttrs *a, const char *name, int64_t v)
{
  add(a, name, CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL)->int64_val = v;
}

void
et_attrs_int32(EtAttrs *a, const char *name, int32_t v)
{
  add(a, name, CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT32_VAL)->int32_val = v;
}

void
et_attrs_uint64(EtAttrs *a, const char *name, uint64_t v)
{
  add(a, name, CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_VAL)->uint64_val = v;
}

void
et_attrs_bool(EtAttrs *a, const char *name, gboolean v)
{
  add(a, name, CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_BOOL_VAL)->bool_val = v != FALSE;
}

void
et_attrs_string(EtAttrs *a, const char *name, const char *v)
{
  add(a, name, CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL)->string_val =
    own(a, g_strdup(v));
}

void
et_attrs_string_list(EtAttrs *a, const char *name, char *const *v, size_t n)
{
  ChakraProtoMsg__StringList *list = own(a, g_new(ChakraProtoMsg__StringList, 1));
  chakra_proto_msg__string_list__init(list);
  list->n_values = n;
  list->values = own(a, g_new(char *, MAX(n, 1)));
  for (size_t i = 0; i < n; i++)
    list->values[i] = own(a, g_strdup(v[i]));
  add(a, name, CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_LIST)->string_list = list;
}

void
et_attrs_int64_list(EtAttrs *a, const char *name, const int64_t *v, size_t n)
{
  ChakraProtoMsg__Int64List *list = own(a, g_new(ChakraProtoMsg__Int64List, 1));
  chakra_proto_msg__int64_list__init(list);
  list->n_values = n;
  list->values = own(a, g_memdup2(v, MAX(n, 1) * sizeof *v));
  add(a, name, CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_LIST)->int64_list = list;
}

/* ---- reading ------------------------------------------------------------------ */

const EtAttr *
et_attr_find(EtAttr *const *attrs, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (attrs[i]->name != NULL && strcmp(attrs[i]->name, name) == 0)
      return attrs[i];
  return NULL;
}

const char *
et_attr_kind(const EtAttr *a)
{
  const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(
    &chakra_proto_msg__attribute_proto__descriptor, (unsigned)a->value_case);
  return f != NULL ? f->name : "no value";
}

static gboolean
wrong_kind(const EtAttr *a, const char *wanted, GError **error)
{
  g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID,
              "attribute '%s': expected %s, got %s", a->name, wanted, et_attr_kind(a));
  return FALSE;
}

static gboolean
too_large(const EtAttr *a, uint64_t v, GError **error)
{
  g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID,
              "attribute '%s': %" G_GUINT64_FORMAT " is too large", a->name, v);
  return FALSE;
}

gboolean
et_attr_int(const EtAttr *a, int64_t *out, GError **error)
{
  switch (a->value_case) {
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT32_VAL: *out = a->int32_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL: *out = a->int64_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT32_VAL: *out = a->uint32_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SINT32_VAL: *out = a->sint32_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SINT64_VAL: *out = a->sint64_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_FIXED32_VAL: *out = a->fixed32_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SFIXED32_VAL: *out = a->sfixed32_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_SFIXED64_VAL: *out = a->sfixed64_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_BOOL_VAL: *out = a->bool_val; return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_VAL:
    if (a->uint64_val > INT64_MAX)
      return too_large(a, a->uint64_val, error);
    *out = (int64_t)a->uint64_val;
    return TRUE;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_FIXED64_VAL:
    if (a->fixed64_val > INT64_MAX)
      return too_large(a, a->fixed64_val, error);
    *out = (int64_t)a->fixed64_val;
    return TRUE;
  default:
    return wrong_kind(a, "an integer", error);
  }
}

gboolean
et_attr_string(const EtAttr *a, const char **out, GError **error)
{
  if (a->value_case != CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL)
    return wrong_kind(a, "string_val", error);
  *out = a->string_val != NULL ? a->string_val : "";
  return TRUE;
}

gboolean
et_attr_int_list(const EtAttr *a, GArray **out, GError **error)
{
  g_autoptr(GArray) v = g_array_new(FALSE, FALSE, sizeof(int64_t));
  switch (a->value_case) {
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_LIST:
    g_array_append_vals(v, a->int64_list->values, (guint)a->int64_list->n_values);
    break;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT32_LIST:
    for (size_t i = 0; i < a->int32_list->n_values; i++) {
      int64_t x = a->int32_list->values[i];
      g_array_append_val(v, x);
    }
    break;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT32_LIST:
    for (size_t i = 0; i < a->uint32_list->n_values; i++) {
      int64_t x = a->uint32_list->values[i];
      g_array_append_val(v, x);
    }
    break;
  case CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_LIST:
    for (size_t i = 0; i < a->uint64_list->n_values; i++) {
      if (a->uint64_list->values[i] > INT64_MAX)
        return too_large(a, a->uint64_list->values[i], error);
      int64_t x = (int64_t)a->uint64_list->values[i];
      g_array_append_val(v, x);
    }
    break;
  default:
    return wrong_kind(a, "a list of integers", error);
  }
  *out = g_steal_pointer(&v);
  return TRUE;
}

/* ---- enum names ----------------------------------------------------------------- */

static const char *
enum_name(const ProtobufCEnumDescriptor *desc, int value, const char *what)
{
  const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(desc, value);
  if (v != NULL)
    return v->name;
  g_autofree char *text = g_strdup_printf("%s %d", what, value);
  return g_intern_string(text);
}

const char *
et_node_type_name(int type)
{
  return enum_name(&chakra_proto_msg__node_type__descriptor, type, "node type");
}

const char *
et_comm_type_name(int type)
{
  return enum_name(&chakra_proto_msg__collective_comm_type__descriptor, type, "comm_type");
}
