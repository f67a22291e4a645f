/* op_ep.c: expert parallelism (the megatron strategy's --expert-parallel E,
 * sim/strategy/strategy_pipeline_moe.c) run for real. An MoE layer is a
 * router (layer r) and X experts (r + 1 .. r + X, layer_moe.c); each rank of
 * the 'ep' group routes its own b samples and owns X / E of the experts.
 * Per micro-batch, on the compute stream:
 *
 *   dispatch (all-to-all ST_DATA_EP_DISPATCH): every expert's C rows per
 *     sample gathered from the router's output (moe_gather: the slots'
 *     tokens and gates kept in "ep slots") into the op's send buffer, in
 *     expert order, so that slice j goes to the owner of experts
 *     [j X/E, (j + 1) X/E); received into "ep rows": from each member i
 *     its rows of this rank's experts, [E][X/E][b C][d];
 *   each owned expert's forward at batch E b (its rows from every member,
 *     layer_moe.c's rows mode), its outputs into "ep out" at the same
 *     places;
 *   combine (ST_DATA_EP_COMBINE): "ep out" back into "ep combined" (every
 *     expert's outputs of this rank's rows, kept for the gates' gradients);
 *     the layer's output = the running sum + gate x row at each slot's
 *     token, added in expert order (as the chain of experts adds them);
 *   combine's gradient (ST_DATA_EP_COMBINE_GRAD): the router's output
 *     gradient made here (the running sum's passes through, each gate's =
 *     dsum . Y), each slot's dY = gate dsum packed into the op's send
 *     buffer, all-to-all into "ep dy";
 *   each owned expert's backward (reverse order) from "ep dy" into "ep dx";
 *   dispatch's gradient (ST_DATA_EP_DISPATCH_GRAD): "ep dx" back into the
 *     op's own buffer, the rows' gradients added into the router output
 *     gradient's h columns at their tokens, experts in reverse order.
 *
 * So the sums are the chain's, in its order: EP trains as one rank with
 * every expert does (tests/test_exec_ep.c). Buffers handed between these
 * ops go through tp.c's table, keyed by the segment's first expert.
 */
#include "exec/check.h"
#include "exec/runtime.h"

gboolean
ep_setup(Rank *r, GError **error)
{
  r->ep_comm = -1;
  r->ep_size = 1;
  r->ep_index = 0;
  for (guint o = 0; o < r->p->ops->len; o++) {
    const StOp *op = st_program_op(r->p, o);
    if (op->kind == ST_OP_COMM_COLL && op->data >= ST_DATA_EP_DISPATCH &&
        op->data <= ST_DATA_EP_DISPATCH_GRAD) {
      r->ep_comm = op->comm;
      break;
    }
  }
  if (r->ep_comm < 0)
    return TRUE;
  const StComm *c = st_schedule_comm(r->x->s, r->ep_comm);
  int g = c->group_of[r->rank];
  r->ep_size = c->offsets[g + 1] - c->offsets[g];
  r->ep_index = c->index_of[r->rank];
  return TRUE;
}

gboolean
ep_expert(const Rank *r, const StOp *op)
{
  return r->ep_comm >= 0 && op->kind == ST_OP_COMP && op->layer >= 0 &&
         g_strcmp0(r->model->layers[op->layer].type->name, "moe_expert") == 0;
}

gboolean
ep_holds(const Rank *r, int layer)
{
  const StLayer *l = &r->model->layers[layer];
  if (r->ep_comm < 0 || r->ep_size <= 1 || g_strcmp0(l->type->name, "moe_expert") != 0)
    return TRUE;
  int n = (int)st_layer_attr(l, "experts", 1) / r->ep_size;
  return (int)st_layer_attr(l, "expert", 0) / n == r->ep_index;
}

/* A segment's geometry, from its router. */
typedef struct {
  int first, X, b, T, d, w, C;
  size_t es, block; /* element size; one expert's rows of one rank: b C d elements */
} Seg;

static Seg
seg_of(Rank *r, int router, int micro)
{
  const StModel *m = r->model;
  const StLayer *rl = &m->layers[router], *x = &m->layers[router + 1];
  Seg s;
  s.first = router + 1;
  s.X = (int)st_layer_attr(rl, "experts", 1);
  s.b = tp_batch(r, &(StOp){.layer = router, .micro = micro});
  s.T = (int)rl->in_shape.dims[0];
  s.d = (int)rl->in_shape.dims[1];
  s.w = 2 * s.d + s.X;
  s.C = (int)st_layer_attr(x, "capacity", 1);
  s.es = st_kdt_size(r->x->dt);
  s.block = (size_t)s.b * s.C * s.d;
  return s;
}

/* Keys of the tensors handed between a segment's ops. */
enum { PART_MAIN, PART_SLOTS, PART_COMBINED };

static StOp
key(int first, int micro, int part)
{
  return (StOp){.layer = first, .micro = micro, .part = part};
}

/* In "ep slots": expert e's slots' tokens (of [X][b C] int32), then their
 * gates (of [X][b C] fp32). */
static int32_t *
slot_idx(const Seg *s, void *slots, int e)
{
  return (int32_t *)slots + (size_t)e * s->b * s->C;
}

static float *
slot_gate(const Seg *s, void *slots, int e)
{
  return (float *)((int32_t *)slots + (size_t)s->X * s->b * s->C) + (size_t)e * s->b * s->C;
}

gboolean
ep_view(Rank *r, uint32_t o, int32_t step, EpView *v, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  *v = (EpView){FALSE, NULL, NULL};
  if (!ep_expert(r, op))
    return TRUE;
  v->on = TRUE;
  const StLayer *l = &r->model->layers[op->layer];
  int e = (int)st_layer_attr(l, "expert", 0), first = op->layer - e;
  int n = (int)st_layer_attr(l, "experts", 1) / r->ep_size, q = e - r->ep_index * n;
  gboolean bwd = op->sub == ST_PASS_BWD;
  /* forward: experts in order (the first makes "ep out"); backward in reverse
   * (the last makes "ep dx", the first is the last to read "ep dy") */
  gboolean makes = bwd ? q == n - 1 : q == 0, reads_last = bwd ? q == 0 : q == n - 1;
  StData in = bwd ? ST_DATA_EP_COMBINE_GRAD : ST_DATA_EP_DISPATCH;
  StData out = bwd ? ST_DATA_EP_DISPATCH_GRAD : ST_DATA_EP_COMBINE;
  StOp k = key(first, op->micro, PART_MAIN);
  /* (the buffers themselves are the schedule's: the walker frees them) */
  v->in = reads_last ? tp_take(r, step, &k, in) : tp_peek(r, step, &k, in);
  if (makes) {
    size_t bytes = 0;
    v->out = state_own_scratch(r, o, step, ST_MEM_COMM, &bytes);
    if (v->out != NULL)
      tp_put(r, step, &k, out, v->out);
  } else {
    v->out = tp_peek(r, step, &k, out);
  }
  if (v->in == NULL || v->out == NULL)
    return op_missing(error, r, o, bwd ? "the all-to-all's gradient rows or where the experts' "
                                         "input gradients go"
                                       : "the dispatched rows or where the experts' outputs go");
  return TRUE;
}

typedef struct {
  Rank *r;
  uint32_t o;
  const StOp *op;
  int32_t step;
  void *stream;
  const char *what;
  Seg s;
  StOp main, slots, combined; /* the keys of the segment's handed tensors */
} Call;

static gboolean
a2a(Call *c, const void *send, void *recv, GError **error)
{
  StCommCall call = {
    .rank = c->r->rank,
    .comm = c->op->comm,
    .tag = c->op->tag,
    .kind = ST_COLL_ALL_TO_ALL,
    .send = send,
    .recv = recv,
    .total = (size_t)c->s.X * c->s.block,
    .dt = c->r->x->dt,
    .stream = c->stream,
    .what = c->what,
  };
  return c->r->x->comm_backend->collective(c->r->x->comm, &call, error);
}

/* The op's own buffer of `category` (allocated, or with `freed` the one it
 * frees), when it holds `bytes`; else NULL. */
static void *
own(Call *c, StMemCategory category, gboolean freed, size_t bytes)
{
  size_t room = 0;
  void *ptr = freed ? state_freed_scratch(c->r, c->o, c->step, category, &room)
                    : state_own_scratch(c->r, c->o, c->step, category, &room);
  return room == bytes ? ptr : NULL;
}

/* Bytes of every expert's rows of one rank, and of their slots. */
static size_t
rows_bytes(const Seg *s)
{
  return (size_t)s->X * s->block * s->es;
}

static size_t
slots_bytes(const Seg *s)
{
  return (size_t)s->X * s->b * s->C * (sizeof(int32_t) + sizeof(float));
}

static char *
at(const Seg *s, void *base, int e)
{
  return (char *)base + (size_t)e * s->block * s->es;
}

static gboolean
dispatch(Call *c, GError **error)
{
  Rank *r = c->r;
  const Seg *s = &c->s;
  const StKernels *k = r->k;
  void *rows = own(c, ST_MEM_COMM, FALSE, rows_bytes(s));
  void *send = own(c, ST_MEM_COMM, TRUE, rows_bytes(s));
  void *slots = own(c, ST_MEM_ACTIVATIONS, FALSE, slots_bytes(s));
  Act *stream = acts_layer_input(r, c->step, c->op->micro, s->first);
  if (rows == NULL || send == NULL || slots == NULL || stream->ptr == NULL)
    return op_missing(error, r, c->o, "the router's output and the all-to-all's buffers (of "
                                      "the segment's rows' bytes)");
  for (int e = 0; e < s->X; e++)
    ST_KCHECK(k->moe_gather(c->stream, at(s, send, e), slot_idx(s, slots, e),
                            slot_gate(s, slots, e), stream->ptr, s->w, s->d,
                            2 * s->d + e, s->b, s->T, s->C, s->d, r->x->dt),
              k->name, error);
  if (!a2a(c, send, rows, error))
    return FALSE;
  tp_put(r, c->step, &c->main, ST_DATA_EP_DISPATCH, rows);
  tp_put(r, c->step, &c->slots, ST_DATA_EP_DISPATCH, slots);
  acts_use(r, stream, c->step, c->o, c->stream);
  return TRUE;
}

static gboolean
combine(Call *c, GError **error)
{
  Rank *r = c->r;
  const Seg *s = &c->s;
  const StKernels *k = r->k;
  int mb = c->op->micro, X_last = s->first + s->X - 1;
  void *outs = tp_take(r, c->step, &c->main, ST_DATA_EP_COMBINE);
  void *combined = own(c, ST_MEM_ACTIVATIONS, FALSE, rows_bytes(s));
  void *slots = tp_peek(r, c->step, &c->slots, ST_DATA_EP_DISPATCH);
  Act *stream = acts_layer_input(r, c->step, mb, s->first);
  if (outs == NULL || combined == NULL || slots == NULL || stream->ptr == NULL)
    return op_missing(error, r, c->o, "the experts' outputs, the slots and the router's output");
  if (!a2a(c, outs, combined, error))
    return FALSE;
  Act *out = acts_output(r, c->step, mb, X_last);
  size_t rows = (size_t)s->b * s->T;
  if (!acts_make(r, out, rows * s->d * s->es, ST_MEM_ACTIVATIONS, c->step, c->o, c->stream,
                 error))
    return FALSE;
  ST_KCHECK(k->copy2d(c->stream, out->ptr, s->d, stream->ptr, s->w, (int)rows, s->d, r->x->dt),
            k->name, error);
  for (int e = 0; e < s->X; e++)
    ST_KCHECK(k->moe_scatter(c->stream, out->ptr, s->d, 0, at(s, combined, e),
                             slot_idx(s, slots, e), slot_gate(s, slots, e), s->b,
                             s->T, s->C, s->d, r->x->dt),
              k->name, error);
  tp_put(r, c->step, &c->combined, ST_DATA_EP_COMBINE, combined);
  acts_use(r, stream, c->step, c->o, c->stream);
  return TRUE;
}

static gboolean
combine_grad(Call *c, GError **error)
{
  Rank *r = c->r;
  const Seg *s = &c->s;
  const StKernels *k = r->k;
  int mb = c->op->micro, X_last = s->first + s->X - 1;
  void *dy = own(c, ST_MEM_COMM, FALSE, rows_bytes(s));
  void *send = own(c, ST_MEM_COMM, TRUE, rows_bytes(s));
  void *combined = tp_take(r, c->step, &c->combined, ST_DATA_EP_COMBINE);
  void *slots = tp_peek(r, c->step, &c->slots, ST_DATA_EP_DISPATCH);
  Act *dsum = acts_layer_dout(r, c->step, mb, X_last);
  if (dy == NULL || send == NULL || combined == NULL || slots == NULL || dsum == NULL ||
      dsum->ptr == NULL)
    return op_missing(error, r, c->o, "the output's gradient, the combined rows and the slots");
  Act *grad = acts_input_grad(r, c->step, mb, s->first);
  size_t rows = (size_t)s->b * s->T;
  if (!acts_make(r, grad, rows * s->w * s->es, ST_MEM_WORKSPACE, c->step, c->o, c->stream,
                 error))
    return FALSE;
  ST_KCHECK(k->memset0(c->stream, grad->ptr, rows * s->w * s->es), k->name, error);
  ST_KCHECK(k->copy2d(c->stream, grad->ptr, s->w, dsum->ptr, s->d, (int)rows, s->d, r->x->dt),
            k->name, error);
  for (int e = s->X - 1; e >= 0; e--)
    ST_KCHECK(k->moe_gather_grad(c->stream, at(s, send, e), grad->ptr, s->w, 2 * s->d + e,
                                 dsum->ptr, s->d, at(s, combined, e),
                                 slot_idx(s, slots, e), slot_gate(s, slots, e),
                                 s->b, s->T, s->C, s->d, r->x->dt),
              k->name, error);
  if (!a2a(c, send, dy, error))
    return FALSE;
  tp_put(r, c->step, &c->main, ST_DATA_EP_COMBINE_GRAD, dy);
  acts_use(r, dsum, c->step, c->o, c->stream);
  return TRUE;
}

static gboolean
dispatch_grad(Call *c, GError **error)
{
  Rank *r = c->r;
  const Seg *s = &c->s;
  const StKernels *k = r->k;
  int mb = c->op->micro;
  void *dx = tp_take(r, c->step, &c->main, ST_DATA_EP_DISPATCH_GRAD);
  void *back = own(c, ST_MEM_COMM, FALSE, rows_bytes(s));
  void *slots = tp_take(r, c->step, &c->slots, ST_DATA_EP_DISPATCH);
  Act *grad = acts_input_grad(r, c->step, mb, s->first);
  if (dx == NULL || back == NULL || slots == NULL || grad->ptr == NULL)
    return op_missing(error, r, c->o, "the experts' input gradients, the slots and the router "
                                      "output's gradient");
  if (!a2a(c, dx, back, error))
    return FALSE;
  for (int e = s->X - 1; e >= 0; e--)
    ST_KCHECK(k->moe_scatter(c->stream, grad->ptr, s->w, s->d, at(s, back, e),
                             slot_idx(s, slots, e), NULL, s->b, s->T, s->C, s->d,
                             r->x->dt),
              k->name, error);
  return TRUE;
}

gboolean
op_ep(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  g_autofree char *name = st_op_describe(r->x->s, r->p, o);
  Call c = {r, o, op, step, stream, name, seg_of(r, op->layer - 1, op->micro),
            key(op->layer, op->micro, PART_MAIN), key(op->layer, op->micro, PART_SLOTS),
            key(op->layer, op->micro, PART_COMBINED)};
  if (op->sub == ST_COLL_ALL_TO_ALL) {
    switch (op->data) {
    case ST_DATA_EP_DISPATCH:
      return dispatch(&c, error);
    case ST_DATA_EP_COMBINE:
      return combine(&c, error);
    case ST_DATA_EP_COMBINE_GRAD:
      return combine_grad(&c, error);
    case ST_DATA_EP_DISPATCH_GRAD:
      return dispatch_grad(&c, error);
    default:
      break;
    }
  }
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
              "rank %d, op %u '%s': the executor cannot run a %s of %s", r->rank, o, name,
              st_coll_name(op->sub), st_data_name(op->data));
  return FALSE;
}
