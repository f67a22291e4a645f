/* tp.c: a rank's part in tensor parallelism (runtime.h): its index in the
 * tensor-parallel group, and what a layer pass in parts reads and writes
 * (exec/layer_impl.h says how a split layer computes; sim/strategy/
 * tensor_parallel.h how the schedule emits its ops):
 *
 *   forward part k:   [all-gather input]  COMP  [all-reduce | reduce-scatter output]
 *   backward part k:  [all-gather dy] [all-gather input]  COMP  [all-reduce | r-s dx]
 *
 * The all-gathers write into buffers of their own (the schedule's comm
 * buffers), which the COMP reads and frees; a COMP before a reduce-scatter
 * writes its partial sums into a buffer it allocates, which the
 * reduce-scatter reads and frees. Those tensors are handed from op to op
 * through the rank's table (per step, micro-batch, layer, part and data
 * kind). Without sequence parallelism the collectives work in place: on the
 * layer's output, on part 1's output inside the saved block (tp_tensor), on
 * the input gradient (which also carries part 1's output gradient between
 * the two backward parts). A pass's tensors are allocated by its first COMP
 * part and released by its last. */
#include "exec/runtime.h"

typedef struct {
  int32_t step, micro, layer, part, data;
  void *ptr;
} TpEntry;

static gboolean
is_tp_data(StData d)
{
  return d == ST_DATA_TP_INPUT || d == ST_DATA_TP_OUTPUT || d == ST_DATA_TP_OUTPUT_GRAD ||
         d == ST_DATA_TP_INPUT_GRAD || d == ST_DATA_TP_GRADS;
}

/* The model file's vocabulary when the schedule padded the layers' (the
 * megatron strategy notes it), else 0. */
static int64_t
vocab_unpadded(const StSchedule *s)
{
  for (guint i = 0; i < s->notes->len; i++) {
    const StNote *n = &g_array_index(s->notes, StNote, i);
    if (n->text == NULL && g_strcmp0(n->key, "vocab_unpadded") == 0)
      return (int64_t)n->number;
  }
  return 0;
}

gboolean
tp_setup(Rank *r, GError **error)
{
  r->tp_rank = 0;
  r->tp_comm = -1;
  r->vocab = r->p->job == 0 ? vocab_unpadded(r->x->s) : 0; /* the notes are the main job's */
  r->tp_tensors = g_array_new(FALSE, FALSE, sizeof(TpEntry));
  int L = r->model->n_layers;
  r->tp_batch = g_new0(int32_t, (size_t)r->n_micro * L);
  for (guint o = 0; o < r->p->ops->len; o++) {
    const StOp *op = st_program_op(r->p, o);
    if (op->kind == ST_OP_COMP && op->layer >= 0 && op->micro >= 0 && op->micro < r->n_micro)
      r->tp_batch[(size_t)op->micro * L + op->layer] = op->batch;
  }
  int t = 1;
  for (int i = 0; i < r->model->n_layers; i++)
    t = MAX(t, r->model->layers[i].tp);
  if (t == 1)
    return TRUE;
  for (guint o = 0; o < r->p->ops->len; o++) {
    const StOp *op = st_program_op(r->p, o);
    if (op->kind != ST_OP_COMM_COLL || !is_tp_data(op->data))
      continue;
    if (r->tp_comm >= 0 && op->comm != r->tp_comm) {
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                  "rank %d: tensor-parallel collectives on two communicators (%d and %d)",
                  r->rank, r->tp_comm, op->comm);
      return FALSE;
    }
    r->tp_comm = op->comm;
  }
  if (r->tp_comm < 0) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d: its model is split over %d tensor-parallel ranks, but its program has "
                "no tensor-parallel collective to say which ranks",
                r->rank, t);
    return FALSE;
  }
  const StComm *c = st_schedule_comm(r->x->s, r->tp_comm);
  int g = c->group_of[r->rank];
  if (c->offsets[g + 1] - c->offsets[g] != t) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d: communicator '%s' groups %d ranks, but the model is split over %d",
                r->rank, c->name, c->offsets[g + 1] - c->offsets[g], t);
    return FALSE;
  }
  r->tp_rank = c->index_of[r->rank];
  return TRUE;
}

StModel *
tp_whole_model(const StModel *m, GError **error)
{
  StModel *whole = st_model_derive_as(m, NULL, 1, FALSE, error);
  if (whole == NULL)
    g_prefix_error(error, "the whole layers of a tensor-parallel model: ");
  return whole;
}

void
tp_clear(Rank *r)
{
  if (r->tp_tensors != NULL)
    g_array_unref(r->tp_tensors);
  g_free(r->tp_batch);
}

int
tp_batch(const Rank *r, const StOp *op)
{
  return op->batch > 0 ? op->batch
                       : r->tp_batch[(size_t)op->micro * r->model->n_layers + op->layer];
}

void
tp_put(Rank *r, int32_t step, const StOp *op, StData data, void *ptr)
{
  TpEntry e = {step, op->micro, op->layer, op->part, data, ptr};
  g_mutex_lock(&r->lock);
  g_array_append_val(r->tp_tensors, e);
  g_mutex_unlock(&r->lock);
}

static void *
find(Rank *r, int32_t step, const StOp *op, StData data, gboolean take)
{
  void *ptr = NULL;
  g_mutex_lock(&r->lock);
  for (guint k = 0; k < r->tp_tensors->len; k++) {
    TpEntry *e = &g_array_index(r->tp_tensors, TpEntry, k);
    if (e->step == step && e->micro == op->micro && e->layer == op->layer &&
        e->part == op->part && e->data == (int32_t)data) {
      ptr = e->ptr;
      if (take)
        g_array_remove_index_fast(r->tp_tensors, k);
      break;
    }
  }
  g_mutex_unlock(&r->lock);
  return ptr;
}

void *
tp_take(Rank *r, int32_t step, const StOp *op, StData data)
{
  return find(r, step, op, data, TRUE);
}

void *
tp_peek(Rank *r, int32_t step, const StOp *op, StData data)
{
  return find(r, step, op, data, FALSE);
}

/* Parts of the pass `op` belongs to. */
static int
parts_of(const Rank *r, const StOp *op)
{
  double share[ST_TP_PARTS_MAX];
  return st_layer_tp_parts(&r->model->layers[op->layer], (StPass)op->sub, share);
}

/* A pass cut in steps around context parallelism's exchanges: is `op` its
 * first step (forward: pre; backward: post), or its last? */
static gboolean
cp_first_step(const StOp *op)
{
  int steps = st_op_cp_steps(op);
  return steps == 0 || st_op_cp_step(op) == (st_pass_is_backward(op->sub) ? steps - 1 : 0);
}

static gboolean
cp_last_step(const StOp *op)
{
  int steps = st_op_cp_steps(op);
  return steps == 0 || st_op_cp_step(op) == (st_pass_is_backward(op->sub) ? 0 : steps - 1);
}

gboolean
tp_first_part(const Rank *r, const StOp *op)
{
  if (!cp_first_step(op))
    return FALSE;
  if (op->part == 0)
    return TRUE;
  return op->sub == ST_PASS_BWD ? op->part == parts_of(r, op) : op->part == 1;
}

gboolean
tp_last_part(const Rank *r, const StOp *op)
{
  if (!cp_last_step(op))
    return FALSE;
  if (op->part == 0)
    return TRUE;
  return op->sub == ST_PASS_BWD ? op->part == 1 : op->part == parts_of(r, op);
}

void *
tp_part_output(Rank *r, const StOp *op, int32_t step)
{
  const StLayer *l = &r->model->layers[op->layer];
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  void *saved = *tp_saved_cell(r, op->micro, op->layer);
  if (op->part == 1 && parts_of(r, op) > 1 && impl->tp_tensor != NULL)
    return impl->tp_tensor(l, tp_batch(r, op), r->x->dt, 1, saved);
  return acts_output(r, step, op->micro, op->layer)->ptr;
}

void **
tp_saved_cell(Rank *r, int micro, int layer)
{
  return &r->saved[(size_t)micro * r->model->n_layers + layer];
}

gboolean
tp_view(Rank *r, uint32_t o, int32_t step, TpView *v, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  const StLayer *l = &r->model->layers[op->layer];
  *v = (TpView){tp_first_part(r, op), tp_last_part(r, op), NULL, NULL, NULL};
  if (l->tp <= 1 || ep_expert(r, op)) /* (an owned expert's buffers: op_ep.c) */
    return TRUE;
  gboolean bwd = op->sub == ST_PASS_BWD, two = parts_of(r, op) > 1;
  /* gathered by this part's all-gathers (sequence parallelism); a part cut
   * in context-parallel steps (op_cp.c) reads them in several: a forward's
   * in its first step only (the schedule frees them after it), a
   * backward's in every step, the last one taking them */
  int cp_steps = st_op_cp_steps(op), cp_step = st_op_cp_step(op);
  gboolean gone = cp_steps > 0 && !bwd && cp_step != 0;
  gboolean peek = cp_steps > 0 && bwd && cp_step != 0;
  if (!gone)
    v->in = peek ? tp_peek(r, step, op, ST_DATA_TP_INPUT) : tp_take(r, step, op, ST_DATA_TP_INPUT);
  if (bwd)
    v->dout = peek ? tp_peek(r, step, op, ST_DATA_TP_OUTPUT_GRAD)
                   : tp_take(r, step, op, ST_DATA_TP_OUTPUT_GRAD);
  /* the MLP half reads x1, kept in the saved block */
  if (v->in == NULL && op->part == 2 && two)
    v->in = tp_part_output(r, &(StOp){.layer = op->layer, .micro = op->micro, .part = 1},
                           step);
  /* without SP part 1's output gradient arrives in the input gradient */
  if (bwd && v->dout == NULL && op->part == 1 && two)
    v->dout = acts_input_grad(r, step, op->micro, op->layer)->ptr;
  /* partial sums for a reduce-scatter: the comm buffer this op allocates */
  size_t bytes = 0;
  void *partial = state_own_scratch(r, o, step, ST_MEM_COMM, &bytes);
  if (partial != NULL) {
    v->out = partial;
    tp_put(r, step, op, bwd ? ST_DATA_TP_INPUT_GRAD : ST_DATA_TP_OUTPUT, partial);
  } else if (!bwd && op->part == 1 && two) {
    v->out = tp_part_output(r, op, step);
  }
  if ((v->in == NULL && op->part == 2 && two) || (bwd && op->part == 1 && two && !v->dout)) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d, op %u: part %d of layer %d lacks what its other part made", r->rank, o,
                op->part, op->layer);
    return FALSE;
  }
  return TRUE;
}
