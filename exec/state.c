/* state.c: the schedule's buffers as the model states they hold.
 *
 * A buffer that holds data (StBuffer.data) of layers [a, b] is laid out layer
 * after layer, each layer's part as long as state_elems says, in elements of
 * state_elem_bytes:
 * - dense weights and gradients: the layer's parameters in dt; slices
 *   (parts = n) ceil(params / n) of them;
 * - optimizer states: per element [fp32 master weights under mixed
 *   precision][m][v] for Adam ([momentum] for SGD), each block of the layer's
 *   (or the slice's) length;
 * - sparse kinds (SAMO) over the layer's nnz kept entries (Rank.nnz): int32
 *   indices; compressed weights and gradients in dt, their fp32 copy; and
 *   compressed states [fp32 master][m][v] (the master always: the dense
 *   weights hold zeros, so they cannot be their own master).
 * Allocating such a buffer points the layers' state at it (in the slot of
 * its StBuffer.slot, when buffers alternate by step); freeing it unpoints
 * them. Buffers of activations (acts, outputs, input gradients) are the
 * executor's own business (acts.c): it allocates the real tensors instead,
 * so their measured size is what the layers really keep.
 */
#include <string.h>

#include "exec/check.h"
#include "exec/runtime.h"

size_t
state_optim_floats(const Rank *r, size_t n)
{
  gboolean mixed = r->settings->precision == ST_PRECISION_MIXED;
  int states = r->settings->optimizer == ST_OPTIMIZER_ADAM ? 2 : 1;
  return n * (size_t)(states + (mixed ? 1 : 0));
}

static gboolean
is_activation(StData d)
{
  return d == ST_DATA_ACTS || d == ST_DATA_OUTPUT || d == ST_DATA_INPUT_GRAD;
}

static gboolean
is_sparse_kind(StData d)
{
  return d >= ST_DATA_INDEX && d <= ST_DATA_OPTIM_PACKED_SHARD;
}

StData
state_kind(StData data)
{
  return data == ST_DATA_GRADS_TOTAL ? ST_DATA_GRADS : data;
}

size_t
state_elems(const Rank *r, StData data, int layer, int parts)
{
  if (!ep_holds(r, layer)) /* another expert-parallel rank's expert */
    return 0;
  int64_t n = is_sparse_kind(data) ? r->nnz[layer] : r->model->layers[layer].params;
  return (size_t)((n + parts - 1) / MAX(parts, 1));
}

size_t
state_elem_bytes(const Rank *r, StData data)
{
  switch (state_kind(data)) {
  case ST_DATA_OPTIM:
  case ST_DATA_OPTIM_SHARD:
    return state_optim_floats(r, 1) * sizeof(float);
  case ST_DATA_OPTIM_PACKED:
  case ST_DATA_OPTIM_PACKED_SHARD:
    return (size_t)(r->settings->optimizer == ST_OPTIMIZER_ADAM ? 3 : 2) * sizeof(float);
  case ST_DATA_INDEX:
    return sizeof(int32_t);
  case ST_DATA_GRADS_PACKED_FP32:
    return sizeof(float);
  default:
    return st_kdt_size(r->x->dt);
  }
}

/* Bytes of layers [b->layer, layer) of a buffer: where `layer` starts in it. */
static size_t
offset_of(const Rank *r, const StBuffer *b, int layer)
{
  size_t offset = 0;
  for (int i = b->layer; i < layer; i++)
    offset += state_elems(r, b->data, i, b->parts);
  return offset * state_elem_bytes(r, b->data);
}

/* Bytes a buffer's data needs, to check the schedule's size against. */
static size_t
needed_bytes(const Rank *r, const StBuffer *b)
{
  return offset_of(r, b, b->layer_last + 1);
}

/* Alternating buffers of b's data and layers (1 when b stands alone). */
static int
n_slots(const Rank *r, const StBuffer *b)
{
  if (b->slot < 0)
    return 1;
  int n = 0;
  for (guint j = 0; j < r->p->buffers->len; j++) {
    const StBuffer *o = &g_array_index(r->p->buffers, StBuffer, j);
    n += o->slot >= 0 && o->data == b->data && o->layer == b->layer &&
         o->layer_last == b->layer_last;
  }
  return MIN(n, STATE_SLOTS);
}

/* Points the layers of persistent buffer b at `base`: the binding of the
 * layer states, in the slot of alternating buffers. Transient buffers are
 * not bound: several steps' instances of one may be alive at once (a
 * staggered rank allocates the next step's while a send of this step's is
 * still to run), so they are found by the step of the op asking. */
static void
bind(Rank *r, const StBuffer *b, char *base)
{
  int slot = MAX(b->slot, 0), n = n_slots(r, b);
  for (int i = b->layer; i <= b->layer_last; i++) {
    LayerState *ls = &r->layers[i];
    /* An empty buffer (layers without weights) has no storage. */
    ls->at[b->data][slot] = base != NULL && ep_holds(r, i) ? base + offset_of(r, b, i) : NULL;
    ls->stale[b->data][slot] = FALSE;
    ls->slots[b->data] = (int8_t)n;
    if (b->parts > 1)
      ls->parts = b->parts;
  }
}

/* The key of buffer `index`'s instance of `step` (-1: persistent). A
 * background job's steps have no bound (exec/mux.c), so the step takes the
 * low 32 bits whatever the schedule's count. */
G_STATIC_ASSERT(sizeof(gsize) >= 8);

static gpointer
instance_key(const Rank *r, uint32_t index, int32_t step)
{
  return GSIZE_TO_POINTER(((gsize)index << 32) | (gsize)(uint32_t)(step + 1));
}

void
state_index_buffers(Rank *r)
{
  int L = r->model->n_layers;
  r->live = g_hash_table_new(g_direct_hash, g_direct_equal);
  r->transient_of = g_new0(GArray *, (size_t)ST_DATA_N * L);
  for (guint b = 0; b < r->p->buffers->len; b++) {
    const StBuffer *buf = &g_array_index(r->p->buffers, StBuffer, b);
    if (buf->persistent || buf->data == ST_DATA_NONE || is_activation(buf->data))
      continue;
    for (int i = buf->layer; i <= buf->layer_last; i++) {
      GArray **list = &r->transient_of[(size_t)buf->data * L + i];
      if (*list == NULL)
        *list = g_array_new(FALSE, FALSE, sizeof(uint32_t));
      g_array_append_val(*list, b);
    }
  }
}

void
state_index_clear(Rank *r)
{
  for (size_t k = 0; r->transient_of != NULL && k < (size_t)ST_DATA_N * r->model->n_layers; k++)
    if (r->transient_of[k] != NULL)
      g_array_unref(r->transient_of[k]);
  g_clear_pointer(&r->transient_of, g_free);
  g_clear_pointer(&r->live, g_hash_table_unref);
}

gboolean
state_alloc_buffer(Rank *r, uint32_t index, int32_t step, uint32_t op, void *stream,
                   GError **error)
{
  const StBuffer *b = &g_array_index(r->p->buffers, StBuffer, index);
  if (is_activation(b->data))
    return TRUE;
  if (b->data != ST_DATA_NONE && b->slot >= STATE_SLOTS) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d: buffer '%s' is slot %d of alternating buffers; the executor keeps at "
                "most %d",
                r->rank, b->name, b->slot, STATE_SLOTS);
    return FALSE;
  }
  if (b->data != ST_DATA_NONE && needed_bytes(r, b) > (size_t)b->bytes) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d: buffer '%s' holds %s of layers %d-%d, which need %zu bytes, but the "
                "schedule gives it %" G_GINT64_FORMAT,
                r->rank, b->name, st_data_name(b->data), b->layer, b->layer_last,
                needed_bytes(r, b), b->bytes);
    return FALSE;
  }
  g_autofree char *what = g_strdup_printf("buffer '%s'", b->name);
  void *ptr = NULL;
  if (!st_pool_alloc(r->pool, (size_t)b->bytes, b->category, step, op, (int32_t)index, what,
                     stream, &ptr, error))
    return FALSE;
  if (b->persistent)
    r->buffers[index] = ptr;
  else
    g_hash_table_insert(r->live, instance_key(r, index, step), ptr);
  /* Gradients accumulate, and so do slices of them; optimizer states and
   * a buffer that an expand fills start at zero too. */
  StData d = b->data;
  const StOp *by = op != UINT32_MAX ? st_program_op(r->p, op) : NULL;
  if (d == ST_DATA_GRADS || d == ST_DATA_GRADS_SHARD || d == ST_DATA_OPTIM ||
      d == ST_DATA_OPTIM_SHARD || d == ST_DATA_GRADS_PACKED || d == ST_DATA_GRADS_PACKED_SHARD ||
      d == ST_DATA_GRADS_PACKED_FP32 || d == ST_DATA_OPTIM_PACKED ||
      d == ST_DATA_OPTIM_PACKED_SHARD ||
      (d == ST_DATA_PARAMS && by != NULL && by->kind == ST_OP_COMP && by->sub == ST_PASS_EXPAND))
    ST_KCHECK(r->k->memset0(stream, ptr, (size_t)b->bytes), r->k->name, error);
  if (b->data != ST_DATA_NONE && b->persistent)
    bind(r, b, ptr);
  return TRUE;
}

void
state_free_buffer(Rank *r, uint32_t index, int32_t step, uint32_t op, void *last_use)
{
  const StBuffer *b = &g_array_index(r->p->buffers, StBuffer, index);
  void *ptr = NULL;
  if (!is_activation(b->data) && !b->persistent) {
    ptr = g_hash_table_lookup(r->live, instance_key(r, index, step));
    g_hash_table_remove(r->live, instance_key(r, index, step));
  }
  if (ptr == NULL) {
    if (last_use != NULL)
      r->dev->backend->event_free(r->dev, last_use);
    return;
  }
  st_pool_release(r->pool, ptr, step, op, last_use);
}

void *
state_at(const LayerState *ls, StData data, int64_t t)
{
  StData d = state_kind(data);
  int n = MAX(ls->slots[d], 1);
  int64_t slot = ((t % n) + n) % n;
  return ls->at[d][slot];
}

/* Buffer `index`'s instance of `step` (its persistent one), or NULL. */
static void *
instance(Rank *r, uint32_t index, int32_t step)
{
  const StBuffer *b = &g_array_index(r->p->buffers, StBuffer, index);
  if (b->persistent)
    return r->buffers[index];
  g_mutex_lock(&r->lock);
  void *ptr = g_hash_table_lookup(r->live, instance_key(r, index, step));
  g_mutex_unlock(&r->lock);
  return ptr;
}

/* Op o's own buffer holding `data` of `layer` (its instance of `step`), or
 * -1 (the position in its alloc + free lists). */
static int64_t
own_buffer(Rank *r, uint32_t o, int32_t step, StData data, int layer, void **ptr)
{
  const StOp *op = st_program_op(r->p, o);
  const uint32_t *mem = st_program_allocs(r->p, op);
  for (int j = 0; j < op->n_alloc + op->n_free; j++) {
    const StBuffer *b = &g_array_index(r->p->buffers, StBuffer, mem[j]);
    if (b->data != data || layer < b->layer || layer > b->layer_last)
      continue;
    void *base = instance(r, mem[j], step);
    if (base != NULL) {
      *ptr = (char *)base + offset_of(r, b, layer);
      return j;
    }
  }
  return -1;
}

void *
state_own_data(Rank *r, uint32_t o, int32_t step, StData data, int layer)
{
  void *ptr = NULL;
  own_buffer(r, o, step, state_kind(data), layer, &ptr);
  return ptr;
}

gboolean
state_own_alloc(Rank *r, uint32_t o, int32_t step, StData data, int layer)
{
  void *ptr = NULL;
  int64_t j = own_buffer(r, o, step, state_kind(data), layer, &ptr);
  return j >= 0 && j < st_program_op(r->p, o)->n_alloc;
}

void *
state_own_scratch(Rank *r, uint32_t o, int32_t step, StMemCategory category, size_t *bytes)
{
  const StOp *op = st_program_op(r->p, o);
  const uint32_t *allocs = st_program_allocs(r->p, op);
  for (int j = 0; j < op->n_alloc; j++) {
    const StBuffer *b = &g_array_index(r->p->buffers, StBuffer, allocs[j]);
    if (b->data == ST_DATA_NONE && b->category == category) {
      *bytes = (size_t)b->bytes;
      return instance(r, allocs[j], step);
    }
  }
  return NULL;
}

void *
state_freed_scratch(Rank *r, uint32_t o, int32_t step, StMemCategory category, size_t *bytes)
{
  const StOp *op = st_program_op(r->p, o);
  const uint32_t *frees = st_program_frees(r->p, op);
  for (int j = 0; j < op->n_free; j++) {
    const StBuffer *b = &g_array_index(r->p->buffers, StBuffer, frees[j]);
    void *ptr = b->data == ST_DATA_NONE && b->category == category ? instance(r, frees[j], step)
                                                                    : NULL;
    if (ptr != NULL) {
      *bytes = (size_t)b->bytes;
      return ptr;
    }
  }
  return NULL;
}

void *
state_find(Rank *r, StData data, int layer, int64_t t, int32_t step, int micro)
{
  StData d = state_kind(data);
  const GArray *list = r->transient_of[(size_t)d * r->model->n_layers + layer];
  for (guint k = 0; list != NULL && k < list->len; k++) {
    uint32_t index = g_array_index(list, uint32_t, k);
    int bm = g_array_index(r->p->buffers, StBuffer, index).micro;
    if (micro >= 0 && bm >= 0 && bm != micro) /* another micro-batch's bucket */
      continue;
    void *base = instance(r, index, step);
    if (base != NULL)
      return (char *)base + offset_of(r, &g_array_index(r->p->buffers, StBuffer, index), layer);
  }
  return state_at(&r->layers[layer], d, t);
}

void *
state_data_of(Rank *r, uint32_t o, int32_t step, StData data, int layer, int64_t t)
{
  void *own = state_own_data(r, o, step, data, layer);
  return own != NULL ? own : state_find(r, data, layer, t, step, st_program_op(r->p, o)->micro);
}

/* ---- gradients zeroed lazily ---------------------------------------------------- */

static int
slot_of(const LayerState *ls, StData d, int64_t t)
{
  int n = MAX(ls->slots[d], 1);
  return (int)(((t % n) + n) % n);
}

/* The layer state holding the flags: the home rank's (a guest's holder). */
static LayerState *
home_of(Rank *r, int layer)
{
  return &r->x->ranks[r->layers[layer].home].layers[layer];
}

void
state_mark_stale(Rank *r, int layer, StData data, int64_t t)
{
  StData d = state_kind(data);
  LayerState *ls = home_of(r, layer);
  if (state_at(ls, d, t) != NULL)
    ls->stale[d][slot_of(ls, d, t)] = TRUE;
}

void
state_clear_stale(Rank *r, int layer, StData data, int64_t t)
{
  StData d = state_kind(data);
  LayerState *ls = home_of(r, layer);
  ls->stale[d][slot_of(ls, d, t)] = FALSE;
}

gboolean
state_fresh(Rank *r, int layer, StData data, int64_t t, void *stream, GError **error)
{
  StData d = state_kind(data);
  LayerState *ls = home_of(r, layer);
  int slot = slot_of(ls, d, t);
  if (!ls->stale[d][slot])
    return TRUE;
  ls->stale[d][slot] = FALSE;
  size_t total = state_elems(r, d, layer, 1), first = 0, n = total;
  if (d == ST_DATA_GRADS_SHARD || d == ST_DATA_GRADS_PACKED_SHARD)
    st_comm_slice(total, MAX(ls->parts, 1), ls->slice, &first, &n);
  void *g = ls->at[d][slot];
  if (g != NULL && n > 0)
    ST_KCHECK(r->k->memset0(stream, g, n * state_elem_bytes(r, d)), r->k->name, error);
  return TRUE;
}
