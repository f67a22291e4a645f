/* chakra_import_memory.c: the memory effects of a rank's nodes (see
 * chakra_import_private.h).
 *
 * The "outputs" / "inputs" attributes ([tensor, bytes] pairs, as
 * ASTRA-sim's memory tracker reads them): in a stagger trace the tensors
 * are the program's buffers ("<index>:<name>"), allocated by the ops that
 * list them in outputs and freed by those that list them in inputs. In a
 * foreign trace a tensor is allocated when the node that writes it starts
 * and freed when the last node that reads it ends (ASTRA-sim's lifetime),
 * when that reader depends on the writer; otherwise (never written, never
 * read, or read by a node not ordered after its writer) it is counted live
 * for the whole run, and the warning says how many.
 */
#include "interop/chakra_import_private.h"

#include "base/limits.h"

void
im_tensor_free(gpointer p)
{
  ImTensor *t = p;
  g_free(t->name);
  g_free(t);
}

/* The [tensor, bytes] pairs of attribute `name`. */
static gboolean
tensor_pairs(ImRank *x, guint k, const char *name, const ChakraProtoMsg__StringList **out,
             GError **error)
{
  const EtAttr *a = im_attr(im_node(x, k), name);
  *out = NULL;
  if (a == NULL)
    return TRUE;
  if (a->value_case != CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_LIST ||
      a->string_list->n_values % 2 != 0)
    return im_node_fail(error, x->f, k, "attribute '%s': expected a string_list of [tensor, "
                        "bytes] pairs", name);
  *out = a->string_list;
  return TRUE;
}

static gboolean
parse_bytes(ImRank *x, guint k, const char *text, int64_t *out, GError **error)
{
  char *end = NULL;
  *out = g_ascii_strtoll(text, &end, 10);
  if (end == text || *end != '\0' || *out < 0)
    return im_node_fail(error, x->f, k, "tensor size '%s' is not a byte count", text);
  return TRUE;
}

/* A stagger trace's tensor "<index>:<name>" as its program's buffer. */
static gboolean
stagger_buffer(ImRank *x, guint k, const char *tensor, int *out, gboolean *persistent,
               GError **error)
{
  char *end = NULL;
  int64_t b = g_ascii_strtoll(tensor, &end, 10);
  int index = (int)b;
  const cJSON *buf = end != tensor && *end == ':' && index >= 0 &&
                     (guint)index < x->buffer_items->len
                       ? g_ptr_array_index(x->buffer_items, index) : NULL;
  if (b < 0 || buf == NULL ||
      g_strcmp0(cJSON_GetStringValue(cJSON_GetObjectItem(buf, "name")), end + 1) != 0)
    return im_node_fail(error, x->f, k, "tensor '%s' is not a buffer of its program", tensor);
  *out = (int)b;
  *persistent = cJSON_IsTrue(cJSON_GetObjectItem(buf, "persistent"));
  return TRUE;
}

/* Foreign tensor `name`, made at its first mention with `bytes` (at most
 * what the schedule's reader takes of a buffer). */
static ImTensor *
foreign_tensor(ImRank *x, guint k, const char *name, int64_t bytes, GError **error)
{
  ImTensor *t = g_hash_table_lookup(x->tensor_of, name);
  if (t == NULL) {
    if (bytes > ST_MAX_BYTES) {
      im_node_fail(error, x->f, k, "tensor '%s': %" G_GINT64_FORMAT " bytes is out of range "
                   "[0, %" G_GINT64_FORMAT "]", name, bytes, ST_MAX_BYTES);
      return NULL;
    }
    t = g_new0(ImTensor, 1);
    t->name = g_strdup(name);
    t->bytes = bytes;
    t->writer = t->reader = -1;
    g_hash_table_insert(x->tensor_of, t->name, t);
    g_ptr_array_add(x->tensors, t);
  }
  return t;
}

static void
add_buffer(GArray **list, uint32_t b)
{
  if (*list == NULL)
    *list = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  g_array_append_val(*list, b);
}

gboolean
im_node_memory(ImRank *x, guint k, int32_t op_index, GError **error)
{
  for (int side = 0; side < 2; side++) { /* outputs: allocations, inputs: frees */
    const ChakraProtoMsg__StringList *list;
    if (!tensor_pairs(x, k, side == 0 ? "outputs" : "inputs", &list, error))
      return FALSE;
    for (size_t i = 0; list != NULL && i < list->n_values; i += 2) {
      int64_t bytes;
      if (!parse_bytes(x, k, list->values[i + 1], &bytes, error))
        return FALSE;
      if (x->im->stagger) {
        int b = 0;
        gboolean persistent = FALSE;
        if (!stagger_buffer(x, k, list->values[i], &b, &persistent, error))
          return FALSE;
        if (persistent)
          continue; /* listed once, for ASTRA-sim's memory tracker */
        ImOp *r = &g_array_index(x->p->ops, ImOp, op_index);
        add_buffer(side == 0 ? &r->alloc : &r->free, (uint32_t)b);
      } else {
        ImTensor *t = foreign_tensor(x, k, list->values[i], bytes, error);
        if (t == NULL)
          return FALSE;
        if (side == 1)
          t->reader = op_index;
        else if (t->writer < 0 && t->reader < 0)
          t->writer = op_index;
        else
          im_count(x->im->unused, "tensor written again, or after it was read (the first write "
                                  "counts)");
      }
    }
  }
  return TRUE;
}

/* Whether op `to` waits, directly or not, for op `from` (< to). */
static gboolean
reaches(const ImRank *x, int32_t from, int32_t to, int32_t *mark, int32_t stamp)
{
  g_autoptr(GArray) todo = g_array_new(FALSE, FALSE, sizeof(int32_t));
  g_array_append_val(todo, to);
  while (todo->len > 0) {
    int32_t o = g_array_index(todo, int32_t, todo->len - 1);
    g_array_set_size(todo, todo->len - 1);
    const GArray *deps = g_ptr_array_index(x->op_deps, o);
    for (guint i = 0; i < deps->len; i++) {
      int32_t d = g_array_index(deps, int32_t, i);
      if (d == from)
        return TRUE;
      if (d > from && mark[d] != stamp) { /* ops before `from` cannot lead to it */
        mark[d] = stamp;
        g_array_append_val(todo, d);
      }
    }
  }
  return FALSE;
}

/* A foreign trace's tensors as buffers, with their allocations and frees. */
void
im_foreign_buffers(ImRank *x)
{
  ImProgram *p = x->p;
  g_autofree int32_t *mark = g_new0(int32_t, MAX(p->ops->len, 1));
  for (guint i = 0; i < x->tensors->len; i++) {
    const ImTensor *t = g_ptr_array_index(x->tensors, i);
    gboolean lives = t->writer >= 0 && t->reader > t->writer &&
                     reaches(x, t->writer, t->reader, mark, (int32_t)i + 1);
    ImBuffer b = {g_strdup(t->name), t->bytes, !lives};
    g_array_append_val(p->buffers, b);
    if (!lives)
      im_count(x->im->unused, "tensor lifetime (never written, never read, or read by a node "
                              "not after its writer): counted live for the whole run");
    uint32_t index = p->buffers->len - 1;
    if (lives) {
      add_buffer(&g_array_index(p->ops, ImOp, t->writer).alloc, index);
      add_buffer(&g_array_index(p->ops, ImOp, t->reader).free, index);
    }
  }
}
