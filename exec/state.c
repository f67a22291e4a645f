/* state.c: the schedule's buffers as the model states they hold.
 *
 * A buffer that holds data (StBuffer.data) of layers [a, b] is laid out layer
 * after layer: whole weights or gradients as each layer's flat vector of
 * l->params elements in dt; slices (parts = n) as ceil(params / n) elements
 * per layer; optimizer states as, per layer, [fp32 master weights under mixed
 * precision][m][v] for Adam ([momentum] for SGD), each of the layer's (or the
 * slice's) length. Allocating such a buffer points the layers' state at it;
 * freeing it unpoints them. Buffers of activations (acts, outputs, input
 * gradients) are the executor's own business (acts.c): it allocates the real
 * tensors instead, so their measured size is what the layers really keep.
 */
#include <string.h>

#include "exec/check.h"
#include "exec/runtime.h"

static size_t
dt_size(const Rank *r)
{
  return st_kdt_size(r->x->dt);
}

size_t
state_optim_floats(const Rank *r, size_t n)
{
  gboolean mixed = r->settings->precision == ST_PRECISION_MIXED;
  int states = r->settings->optimizer == ST_OPTIMIZER_ADAM ? 2 : 1;
  return n * (size_t)(states + (mixed ? 1 : 0));
}

/* Elements of layer i held by a buffer of `parts` slices. */
static size_t
held(const Rank *r, int i, int parts)
{
  int64_t p = r->model->layers[i].params;
  return (size_t)((p + parts - 1) / parts);
}

static gboolean
is_activation(StData d)
{
  return d == ST_DATA_ACTS || d == ST_DATA_OUTPUT || d == ST_DATA_INPUT_GRAD;
}

/* Bytes a buffer's data needs, to check the schedule's size against. */
static size_t
needed_bytes(const Rank *r, const StBuffer *b)
{
  size_t total = 0;
  for (int i = b->layer; i <= b->layer_last; i++) {
    size_t n = held(r, i, b->parts);
    total += b->data == ST_DATA_OPTIM || b->data == ST_DATA_OPTIM_SHARD
               ? state_optim_floats(r, n) * sizeof(float)
               : n * dt_size(r);
  }
  return total;
}

/* The layer state field that a buffer of `data` fills. */
static void **
field_of(LayerState *ls, StData data)
{
  switch (data) {
  case ST_DATA_PARAMS:
    return &ls->params;
  case ST_DATA_GRADS:
    return &ls->grads;
  case ST_DATA_PARAMS_SHARD:
    return &ls->params_part;
  case ST_DATA_GRADS_SHARD:
    return &ls->grads_part;
  case ST_DATA_OPTIM:
  case ST_DATA_OPTIM_SHARD:
    return (void **)&ls->optim;
  default:
    return NULL;
  }
}

/* Points the layers of buffer b at `base` (binding), or, when the buffer goes,
 * unpoints those that still point into it: another buffer of the same data
 * may have been bound since (a prefetched gather for the backward while the
 * forward's is still alive). */
static void
bind(Rank *r, const StBuffer *b, char *base, gboolean binding)
{
  size_t offset = 0;
  gboolean optim = b->data == ST_DATA_OPTIM || b->data == ST_DATA_OPTIM_SHARD;
  for (int i = b->layer; i <= b->layer_last; i++) {
    LayerState *ls = &r->layers[i];
    size_t n = held(r, i, b->parts);
    void **field = field_of(ls, b->data);
    if (field != NULL && binding) {
      *field = base + offset;
      if (optim)
        ls->optim_part = b->data == ST_DATA_OPTIM_SHARD;
      if (b->parts > 1)
        ls->parts = b->parts;
    } else if (field != NULL && *field == base + offset) {
      *field = NULL;
    }
    offset += optim ? state_optim_floats(r, n) * sizeof(float) : n * dt_size(r);
  }
}

gboolean
state_alloc_buffer(Rank *r, uint32_t index, int32_t step, uint32_t op, void *stream,
                   GError **error)
{
  const StBuffer *b = &g_array_index(r->p->buffers, StBuffer, index);
  if (is_activation(b->data))
    return TRUE;
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
  r->buffers[index] = ptr;
  /* Gradients accumulate, and so do slices of them: they start at zero. */
  if (b->data == ST_DATA_GRADS || b->data == ST_DATA_GRADS_SHARD || b->data == ST_DATA_OPTIM ||
      b->data == ST_DATA_OPTIM_SHARD)
    ST_KCHECK(r->k->memset0(stream, ptr, (size_t)b->bytes), r->k->name, error);
  if (b->data != ST_DATA_NONE)
    bind(r, b, ptr, TRUE);
  return TRUE;
}

void
state_free_buffer(Rank *r, uint32_t index, int32_t step, uint32_t op, void *last_use)
{
  const StBuffer *b = &g_array_index(r->p->buffers, StBuffer, index);
  if (is_activation(b->data) || r->buffers[index] == NULL) {
    if (last_use != NULL)
      r->dev->backend->event_free(r->dev, last_use);
    return;
  }
  if (b->data != ST_DATA_NONE)
    bind(r, b, r->buffers[index], FALSE);
  st_pool_release(r->pool, r->buffers[index], step, op, last_use);
  r->buffers[index] = NULL;
}

/* Uploads `n` fp32 host values to `dst` stored as `dt`. */
static gboolean
upload(Rank *r, void *dst, StKDtype dt, const float *src, size_t n, void *stream, GError **error)
{
  if (n == 0 || dst == NULL)
    return TRUE;
  g_autofree void *host = NULL;
  const void *from = src;
  if (dt == ST_KDT_BF16) {
    uint16_t *h = g_new(uint16_t, n);
    for (size_t i = 0; i < n; i++)
      h[i] = st_f32_to_bf16(src[i]);
    host = h;
    from = h;
  }
  ST_KCHECK(r->k->copy(stream, dst, from, n * st_kdt_size(dt), 1), r->k->name, error);
  /* The copy reads host memory that goes away here: wait for it. */
  return r->dev->backend->stream_sync(r->dev, stream, error);
}

gboolean
state_init_weights(Rank *r, GError **error)
{
  void *stream = r->streams[0];
  gboolean mixed = r->settings->precision == ST_PRECISION_MIXED;
  for (int i = 0; i < r->model->n_layers; i++) {
    const StLayer *l = &r->model->layers[i];
    LayerState *ls = &r->layers[i];
    if (l->params == 0)
      continue;
    const StLayerImpl *impl = st_layer_impl_find(l->type->name);
    g_autofree float *w = g_new0(float, l->params);
    impl->init(l, w, r->x->o->seed);
    size_t first = 0, count = (size_t)l->params;
    if (ls->parts > 1)
      st_comm_slice((size_t)l->params, ls->parts, ls->slice, &first, &count);
    if (!upload(r, ls->params, r->x->dt, w, (size_t)l->params, stream, error) ||
        !upload(r, ls->params_part, r->x->dt, w + first, count, stream, error))
      return FALSE;
    /* Master weights: the fp32 copy under mixed precision. */
    if (ls->optim != NULL && mixed) {
      size_t n = ls->optim_part ? count : (size_t)l->params;
      if (!upload(r, ls->optim, ST_KDT_F32, w + (ls->optim_part ? first : 0), n, stream, error))
        return FALSE;
    }
  }
  return TRUE;
}

void *
state_data_of(Rank *r, uint32_t o, StData data, int layer)
{
  const StOp *op = st_program_op(r->p, o);
  const uint32_t *mem = st_program_allocs(r->p, op);
  for (int j = 0; j < op->n_alloc + op->n_free; j++) {
    const StBuffer *b = &g_array_index(r->p->buffers, StBuffer, mem[j]);
    if (b->data != data || layer < b->layer || layer > b->layer_last || r->buffers[mem[j]] == NULL)
      continue;
    size_t offset = 0;
    for (int i = b->layer; i < layer; i++)
      offset += held(r, i, b->parts) * dt_size(r);
    return (char *)r->buffers[mem[j]] + offset;
  }
  LayerState ls = r->layers[layer];
  void **field = field_of(&ls, data);
  return field != NULL ? *field : NULL;
}
