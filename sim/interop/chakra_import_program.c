/* chakra_import_program.c: a rank's converted program (ImProgram, see
 * chakra_import_private.h) and the schedule's StProgram made from it.
 *
 * The importer used to write each op as the schedule's JSON and read it
 * back; the ops are now built directly, and what the reader checked is
 * checked here, in its order and with its words, the node named instead of
 * the JSON path: a field that indexes (layer, layer_last, comm, label) must
 * be below the count of what it indexes (ranges that need no schedule were
 * checked as the node was converted, chakra_import_ops.c), and one op frees
 * or allocates at most 65535 buffers. Dependencies are earlier ops (the
 * nodes are in dependency order), buffers and streams exist (checked as
 * converted), so the builder's preconditions hold.
 */
#include "interop/chakra_import_private.h"

#include <string.h>

#include "base/error.h"
#include "sched/sched_import.h"
#include "sched/sched_json_private.h"

static void
buffer_clear(gpointer data)
{
  g_free(((ImBuffer *)data)->name);
}

static void
op_clear(gpointer data)
{
  ImOp *op = data;
  g_clear_pointer(&op->alloc, g_array_unref);
  g_clear_pointer(&op->free, g_array_unref);
}

ImProgram *
im_program_new(int rank)
{
  ImProgram *p = g_new0(ImProgram, 1);
  p->rank = rank;
  p->streams = g_ptr_array_new_with_free_func(g_free);
  p->buffers = g_array_new(FALSE, FALSE, sizeof(ImBuffer));
  g_array_set_clear_func(p->buffers, buffer_clear);
  p->ops = g_array_new(FALSE, FALSE, sizeof(ImOp));
  g_array_set_clear_func(p->ops, op_clear);
  p->deps = g_array_new(FALSE, FALSE, sizeof(int32_t));
  p->prev = g_array_new(FALSE, FALSE, sizeof(int32_t));
  return p;
}

void
im_program_free(ImProgram *p)
{
  if (p == NULL)
    return;
  g_free(p->name);
  cJSON_Delete(p->head);
  g_ptr_array_unref(p->streams);
  g_array_unref(p->buffers);
  g_array_unref(p->ops);
  g_array_unref(p->deps);
  g_array_unref(p->prev);
  g_free(p);
}

ImOp *
im_program_add_op(ImProgram *p, guint node, StOpKind kind, int sub, int stream)
{
  ImOp op;
  memset(&op, 0, sizeof op);
  op.node = node;
  op.op.kind = (uint8_t)kind;
  op.op.sub = (uint8_t)sub;
  op.op.stream = (uint16_t)stream;
  for (guint f = 0; f < ST_N_OP_FIELDS; f++)
    st_op_field_set(&op.op, f, ST_OP_FIELDS[f].none);
  g_array_append_val(p->ops, op);
  return &g_array_index(p->ops, ImOp, p->ops->len - 1);
}

void
im_op_set(ImOp *op, guint f, int64_t v)
{
  if (op->given & (1u << f))
    return;
  op->given |= 1u << f;
  st_op_field_set(&op->op, f, v);
}

/* ---- equal programs --------------------------------------------------------------- */

static void
key_int(GByteArray *key, int64_t v)
{
  g_byte_array_append(key, (const guint8 *)&v, sizeof v);
}

static void
key_text(GByteArray *key, const char *text)
{
  g_byte_array_append(key, (const guint8 *)text, (guint)strlen(text) + 1);
}

static void
key_list(GByteArray *key, const int32_t *items, guint n)
{
  key_int(key, n);
  g_byte_array_append(key, (const guint8 *)items, n * (guint)sizeof *items);
}

GBytes *
im_program_key(const ImProgram *p)
{
  GByteArray *key = g_byte_array_new();
  if (p->head != NULL) {
    g_autofree char *head = cJSON_PrintUnformatted(p->head);
    key_text(key, head);
  } else {
    key_text(key, p->name);
  }
  key_int(key, p->streams->len);
  for (guint i = 0; i < p->streams->len; i++)
    key_text(key, g_ptr_array_index(p->streams, i));
  key_int(key, p->buffers->len);
  for (guint i = 0; i < p->buffers->len; i++) {
    const ImBuffer *b = &g_array_index(p->buffers, ImBuffer, i);
    key_text(key, b->name);
    key_int(key, b->bytes);
    key_int(key, b->persistent);
  }
  key_int(key, p->ops->len);
  for (guint i = 0; i < p->ops->len; i++) {
    const ImOp *r = &g_array_index(p->ops, ImOp, i);
    const StOp *op = &r->op;
    int64_t fields[] = {op->kind, op->sub, op->stream, op->data, op->part, op->sample_first,
                        op->sample_stride};
    for (guint f = 0; f < G_N_ELEMENTS(fields); f++)
      key_int(key, fields[f]);
    for (guint f = 0; f < ST_N_OP_FIELDS; f++)
      key_int(key, st_op_field_get(op, f));
    /* (an empty array has no data: no pointer into it) */
    key_list(key, r->n_deps > 0 ? &g_array_index(p->deps, int32_t, r->dep_first) : NULL,
             r->n_deps);
    key_list(key, r->n_prev > 0 ? &g_array_index(p->prev, int32_t, r->prev_first) : NULL,
             r->n_prev);
    key_list(key, r->alloc != NULL ? (const int32_t *)(const void *)r->alloc->data : NULL,
             r->alloc != NULL ? r->alloc->len : 0);
    key_list(key, r->free != NULL ? (const int32_t *)(const void *)r->free->data : NULL,
             r->free != NULL ? r->free->len : 0);
  }
  return g_byte_array_free_to_bytes(key);
}

/* ---- the schedule's program ------------------------------------------------------- */

/* The program without its ops: a stagger trace's from its
 * 'stagger_program', a foreign one's from what its nodes said. */
static StProgram *
program_head(const Import *im, const ImProgram *ip, const StSchedule *s, GError **error)
{
  if (ip->head != NULL) {
    StProgram *p = st_program_from_json_head(ip->head, st_schedule_n_jobs(s), error);
    if (p == NULL && error != NULL) {
      const char *message = (*error)->message;
      g_prefix_error(error, "%s: global metadata 'stagger_program'%s", im->files[ip->rank]->path,
                     message[0] == '.' || message[0] == '[' ? "" : ": ");
    }
    return p;
  }
  StProgram *p = st_program_new(ip->name);
  for (guint i = 0; i < ip->streams->len; i++)
    st_program_add_stream(p, g_ptr_array_index(ip->streams, i), 0);
  for (guint i = 0; i < ip->buffers->len; i++) {
    const ImBuffer *b = &g_array_index(ip->buffers, ImBuffer, i);
    st_program_add_buffer(p, b->name, ST_MEM_ACTIVATIONS, b->bytes, b->persistent);
  }
  return p;
}

/* The reader's check of an index field (sj_get_index): below `n`. */
static gboolean
check_index(const Import *im, const ImProgram *ip, const ImOp *r, guint f, int64_t n,
            const char *owner, const char *things, GError **error)
{
  int64_t v = st_op_field_get(&r->op, f);
  if (!(r->given & (1u << f)) || v < n)
    return TRUE;
  return im_node_fail(error, im->files[ip->rank], r->node, "%s %" G_GINT64_FORMAT " is out of "
                      "range: %s has %" G_GINT64_FORMAT " %s", ST_OP_FIELDS[f].key, v, owner, n,
                      things);
}

static gboolean
check_op(const Import *im, const ImProgram *ip, const ImOp *r, const StSchedule *s,
         const StProgram *p, GError **error)
{
  int64_t n_layers = st_program_model(s, p)->n_layers;
  for (guint f = 0; f < ST_N_OP_FIELDS; f++) {
    gboolean ok = ST_OP_FIELDS[f].index == INDEX_LAYER
                    ? check_index(im, ip, r, f, n_layers, "the job's model", "layers", error)
                  : ST_OP_FIELDS[f].index == INDEX_COMM
                    ? check_index(im, ip, r, f, s->comms->len, "the schedule", "communicators",
                                  error)
                  : ST_OP_FIELDS[f].index == INDEX_LABEL
                    ? check_index(im, ip, r, f, p->labels->len, "the program", "labels", error)
                    : TRUE;
    if (!ok)
      return FALSE;
  }
  guint mem = (r->alloc != NULL ? r->alloc->len : 0) + (r->free != NULL ? r->free->len : 0);
  if (mem > G_MAXUINT16)
    return im_node_fail(error, im->files[ip->rank], r->node, "more than %d buffers in one op "
                        "(%u allocated and freed)", G_MAXUINT16, mem);
  return TRUE;
}

StProgram *
im_program_build(const Import *im, const ImProgram *ip, const StSchedule *s, GError **error)
{
  g_autoptr(StProgram) p = program_head(im, ip, s, error);
  if (p == NULL)
    return NULL;
  /* A previous-step dependency on an op not built yet goes through a
   * forward reference, one per dependency (the reader's way). */
  typedef struct {
    uint32_t ref, target;
  } ForwardRef;
  g_autoptr(GArray) refs = g_array_new(FALSE, FALSE, sizeof(ForwardRef));
  for (guint i = 0; i < ip->ops->len; i++) {
    const ImOp *r = &g_array_index(ip->ops, ImOp, i);
    if (!check_op(im, ip, r, s, p, error))
      return NULL;
    st_program_begin(p, &r->op);
    for (uint32_t d = 0; d < r->n_deps; d++)
      st_program_after(p, (uint32_t)g_array_index(ip->deps, int32_t, r->dep_first + d));
    for (uint32_t d = 0; d < r->n_prev; d++) {
      uint32_t target = (uint32_t)g_array_index(ip->prev, int32_t, r->prev_first + d);
      if (target < i) {
        st_program_after_prev_step(p, target);
      } else {
        ForwardRef ref = {st_program_forward_ref(p), target};
        g_array_append_val(refs, ref);
        st_program_after_prev_step(p, ref.ref);
      }
    }
    for (guint b = 0; r->alloc != NULL && b < r->alloc->len; b++)
      st_program_alloc(p, g_array_index(r->alloc, uint32_t, b));
    for (guint b = 0; r->free != NULL && b < r->free->len; b++)
      st_program_free_buffer(p, g_array_index(r->free, uint32_t, b));
    st_program_commit(p);
  }
  for (guint i = 0; i < refs->len; i++)
    st_program_resolve(p, g_array_index(refs, ForwardRef, i).ref,
                       g_array_index(refs, ForwardRef, i).target);
  return g_steal_pointer(&p);
}
