/* op_move.c: burst parallelism's moves of samples between GPU sets
 * (strategy_burst.c; DeepPool, Park et al., MLSys 2022).
 *
 * Layer i runs on ranks 0 .. w_i - 1, rank j holding the samples s = j mod
 * w_i of each micro-batch, in order. At a change of width the ranks of both
 * sets exchange samples: a rank in both keeps its share of the wider layout
 * (a local copy, ST_OP_COPY) and sends or receives the rest; forward moves a
 * layer's output, backward the gradient of it (the next layer's input
 * gradient). Every such op says its samples (StOp.sample_first,
 * sample_stride, batch, relative to the rank's replica) and so does every
 * layer pass (acts_samples), so where a sample sits in a tensor follows:
 * position (s - first) / stride. The narrow side's samples of one peer are
 * every k-th row (k = the ratio of the widths), so they are packed into a
 * contiguous scratch before a send and unpacked after a receive (the
 * transfer's buffer in the schedule); the comm backend moves contiguous
 * buffers only.
 *
 * Tensors: what this rank produced (its layer's output, its input gradient)
 * is read by sends and the copy; the next layer's input (or the previous
 * one's output gradient) assembled at the other width is acts_assembled's,
 * made by the first op that writes into it; a receive on a rank that keeps
 * nothing makes the layer's tensor itself, as a pipeline's receive does.
 */
#include <stdarg.h>

#include "exec/check.h"
#include "exec/runtime.h"

static gboolean G_GNUC_PRINTF(4, 5)
fail_op(GError **error, const Rank *r, uint32_t o, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *why = g_strdup_vprintf(format, args);
  va_end(args);
  g_autofree char *name = st_op_describe(r->x->s, r->p, o);
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED, "rank %d, op %u '%s': %s",
              r->rank, o, name, why);
  return FALSE;
}

/* Bytes of one sample of what `op` moves: a layer's output or the gradient
 * of its input. */
static size_t
row_bytes(const Rank *r, const StOp *op)
{
  const StLayer *l = &r->model->layers[op->layer];
  const StShape *shape = op->data == ST_DATA_OUTPUT ? &l->out_shape : &l->in_shape;
  return (size_t)st_shape_elems(shape) * st_kdt_size(r->x->dt);
}

/* A tensor and the samples it holds. */
typedef struct {
  Act *act;
  const ActSamples *set;
  StMemCategory category; /* when this op makes it */
} Side;

/* What this rank produced: the layer's output, or its input gradient. */
static Side
produced(Rank *r, int32_t step, const StOp *op)
{
  Act *a = op->data == ST_DATA_OUTPUT ? acts_output(r, step, op->micro, op->layer)
                                      : acts_input_grad(r, step, op->micro, op->layer);
  return (Side){a, acts_samples(r, op->micro, op->layer), ST_MEM_ACTIVATIONS};
}

/* Where a copy or a receive writes: the tensor assembled at the other width,
 * or (a receive on a rank that keeps nothing) the layer's own, laid out for
 * the layer that reads it. */
static Side
written(Rank *r, int32_t step, const StOp *op)
{
  int reader = op->data == ST_DATA_OUTPUT ? op->layer + 1 : op->layer - 1;
  const ActSamples *set = acts_samples(r, op->micro, reader);
  Act *a = acts_assembled(r, step, op);
  if (a != NULL)
    return (Side){a, set, ST_MEM_COMM};
  Side mine = produced(r, step, op);
  mine.set = set;
  mine.category = op->data == ST_DATA_OUTPUT ? ST_MEM_ACTIVATIONS : ST_MEM_WORKSPACE;
  return mine;
}

/* Where the op's samples sit in `side`: the first one's position and the
 * distance between positions. */
static gboolean
place(const Rank *r, uint32_t o, const StOp *op, const Side *side, size_t *pos, size_t *step,
      GError **error)
{
  const ActSamples *set = side->set;
  if (set->stride <= 0)
    return fail_op(error, r, o, "moves samples of layer %d, whose passes on this rank do not "
                                "say which samples they compute",
                   op->layer);
  int64_t d = (int64_t)op->sample_first - set->first;
  if (d < 0 || d % set->stride != 0 || op->sample_stride % set->stride != 0 ||
      d / set->stride + (int64_t)(op->batch - 1) * (op->sample_stride / set->stride) >=
        set->count)
    return fail_op(error, r, o, "its %d samples (every %d from %d) are not among the %d "
                                "(every %d from %d) of the tensor it uses",
                   op->batch, op->sample_stride, op->sample_first, set->count, set->stride,
                   set->first);
  *pos = (size_t)(d / set->stride);
  *step = (size_t)(op->sample_stride / set->stride);
  return TRUE;
}

/* The tensor of `side`, made by this op when nobody made it in this step. */
static gboolean
ensure(Rank *r, Side *side, size_t row, int32_t step, uint32_t o, void *stream, GError **error)
{
  Act *a = side->act;
  if (a->ptr != NULL && a->step == step)
    return TRUE;
  return acts_make(r, a, (size_t)side->set->count * row, side->category, step, o, stream,
                   error);
}

/* n rows of `row` bytes: dst row dp + t * ds from src row sp + t * ss. */
static gboolean
copy_rows(Rank *r, void *stream, char *dst, size_t dp, size_t ds, const char *src, size_t sp,
          size_t ss, size_t n, size_t row, GError **error)
{
  if (ds == 1 && ss == 1) {
    ST_KCHECK(r->k->copy(stream, dst + dp * row, src + sp * row, n * row, 0), r->k->name, error);
    return TRUE;
  }
  for (size_t t = 0; t < n; t++)
    ST_KCHECK(r->k->copy(stream, dst + (dp + t * ds) * row, src + (sp + t * ss) * row, row, 0),
              r->k->name, error);
  return TRUE;
}

gboolean
op_copy(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  if (op->sub != ST_COPY_D2D ||
      (op->data != ST_DATA_OUTPUT && op->data != ST_DATA_INPUT_GRAD) || op->sample_stride == 0)
    return fail_op(error, r, o, "the executor copies only activations that say their samples "
                                "on the device (d2d)");
  size_t row = row_bytes(r, op), sp, ss, dp, ds;
  Side from = produced(r, step, op), to = written(r, step, op);
  if (acts_assembled(r, step, op) == NULL)
    return fail_op(error, r, o, "no layer here reads what it assembles");
  if (from.act->ptr == NULL)
    return op_missing(error, r, o, "the activations it copies");
  if (!place(r, o, op, &from, &sp, &ss, error) || !place(r, o, op, &to, &dp, &ds, error) ||
      !ensure(r, &to, row, step, o, stream, error) ||
      !copy_rows(r, stream, to.act->ptr, dp, ds, from.act->ptr, sp, ss, (size_t)op->batch, row,
                 error))
    return FALSE;
  acts_use(r, from.act, step, o, stream);
  return TRUE;
}

gboolean
op_move_p2p(Rank *r, uint32_t o, int32_t step, void *stream, int peer, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  gboolean sending = op->kind == ST_OP_COMM_SEND;
  size_t row = row_bytes(r, op), pos, at;
  size_t n = (size_t)op->batch, bytes = n * row;
  if ((int64_t)bytes != op->bytes)
    return fail_op(error, r, o, "moves %" G_GINT64_FORMAT " bytes, but %zu samples of %zu "
                                "bytes are %zu",
                   op->bytes, n, row, bytes);
  Side side = sending ? produced(r, step, op) : written(r, step, op);
  if (sending && side.act->ptr == NULL)
    return op_missing(error, r, o, "the activations it sends");
  if (!place(r, o, op, &side, &pos, &at, error) ||
      (!sending && !ensure(r, &side, row, step, o, stream, error)))
    return FALSE;
  char *base = side.act->ptr;
  /* Every at-th row: through a contiguous scratch, the op's buffer in the
   * schedule when it allocates one (strategy_burst.c: its memory is then
   * predicted), else a block of the pool. */
  void *scratch = NULL;
  size_t room = 0;
  void *own = at != 1 ? state_own_scratch(r, o, step, ST_MEM_COMM, &room) : NULL;
  if (own != NULL && room != bytes)
    return fail_op(error, r, o, "packs %zu bytes into the schedule's buffer of %zu", bytes, room);
  if (at != 1 && (scratch = own != NULL ? own
                                        : op_scratch(r, bytes, ST_MEM_COMM,
                                                     "samples packed for a transfer", step, o,
                                                     stream, error)) == NULL)
    return FALSE;
  if (sending && scratch != NULL &&
      !copy_rows(r, stream, scratch, 0, 1, base, pos, at, n, row, error))
    return FALSE;
  g_autofree char *name = st_op_describe(r->x->s, r->p, o);
  char *contiguous = scratch != NULL ? scratch : base + pos * row;
  StCommCall call = {
    .rank = r->rank,
    .comm = op->comm,
    .tag = op->tag,
    .send = sending ? contiguous : NULL,
    .recv = sending ? NULL : contiguous,
    .total = bytes / st_kdt_size(r->x->dt),
    .dt = r->x->dt,
    .stream = stream,
    .what = name,
  };
  const StCommBackend *b = r->x->comm_backend;
  if (!(sending ? b->send : b->recv)(r->x->comm, &call, peer, error))
    return FALSE;
  if (!sending && scratch != NULL &&
      !copy_rows(r, stream, base, pos, at, scratch, 0, 1, n, row, error))
    return FALSE;
  if (own == NULL)
    op_scratch_release(r, scratch, step, o, stream);
  if (sending || side.act->users == 0)
    acts_use(r, side.act, step, o, stream);
  return TRUE;
}
