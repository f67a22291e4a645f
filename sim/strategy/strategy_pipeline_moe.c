/* strategy_pipeline_moe.c: an MoE layer (a router and its X experts,
 * layer_moe.c) as a segment of a stage's program, as Megatron-LM's
 * all-to-all token dispatcher runs it (megatron/core/transformer/moe/
 * token_dispatcher.py): with expert parallelism over E ranks each keeps X/E
 * experts of every MoE layer (StPipe.expert_owner), and per micro-batch of
 * b samples, C rows per sample and expert (the capacity), d the width:
 *
 *   forward:  router (tensors.h, as any layer)
 *             all-to-all ep_dispatch   b X C d bytes: each expert's rows to its rank (a
 *                                      per-rank dispatcher, DeepEP: a token's row once per
 *                                      rank it reaches, moe_routing.h, and the combine
 *                                      likewise; the buffers stay every expert's rows)
 *             [all-gather over tp]     (sequence parallelism: the tensor ranks' rows)
 *             owned experts            each at batch E b (its rows from E ranks)
 *             [reduce-scatter over tp] (sequence parallelism: back to each rank's rows)
 *             all-to-all ep_combine    the outputs back; makes the layer after the experts'
 *                                      input, frees the router's output
 *   backward: all-to-all ep_combine_grad, [all-gather], owned experts in reverse,
 *             [reduce-scatter], all-to-all ep_dispatch_grad (makes the router's
 *             output gradient), then the router's backward.
 *
 * Without sequence parallelism the tensor ranks hold the same tokens and
 * each expert's pass all-reduces its rows (its type's tensor-parallel
 * collective); with it each tensor rank routes its own s/t tokens and the
 * experts, split over the tensor group (expert tensor parallelism = t,
 * Megatron's default), compute on the rows of all of them (the expert's
 * derived costs count t x C rows then). With --expert-tensor-parallel k <
 * t (StPipe.etp; Megatron-LM's --expert-tensor-parallel-size) the experts
 * split over k consecutive tensor ranks instead (comms->expert_tp), gather
 * the rows of those k (k x C; none with k = 1), and the EP groups span the
 * tensor ranks (strategy_megatron.c). Everything runs on the compute
 * stream. Memory: the dispatched rows (comm) until the last owned expert's
 * forward, the experts' outputs (comm) until the combine, the combined rows
 * (activations, for the gates' gradients) until the backward's first
 * all-to-all; each expert's saved block (memory() at batch E b) from its
 * forward to its backward, and its scratch. Under --recompute full the
 * segment is recomputed as a checkpointed layer is: its forward keeps no
 * expert's block (nor the combined rows), and before its backward the
 * dispatch, the owned experts' forwards and the combine run again
 * (recompute_segment), their blocks kept from there to each backward.
 *
 * What the sending side keeps and permutes (Megatron's permute/unpermute
 * around the all-to-alls; the executor's exec/op_ep.c): the dispatch packs
 * every expert's rows into a send buffer (comm, its own op's) and keeps
 * each slot's token and gate ("ep slots", int32 + fp32 per slot,
 * activations) until the dispatch's gradient; the combine adds gate x row
 * into the layer's output; the combine's gradient packs the experts'
 * output gradients into a send buffer of its own, and makes the router's
 * output gradient (the running sum's gradient passes through, the gates'
 * are dY . Y with the combined rows); the dispatch's gradient receives the
 * rows' gradients into a buffer of its own and adds them into it.
 */
#include "strategy/strategy_pipeline_stage.h"

#include <math.h>

#include "model/layer_type.h"
#include "strategy/moe_routing.h"

gboolean
st_pipe_is_expert(const StPipe *pp, int i)
{
  return pp->expert_owner != NULL && pp->expert_owner[i] >= 0;
}

int
st_pipe_moe_experts(const StPipe *pp, int layer)
{
  if (!pp->moe_segments || layer + 1 >= pp->model->n_layers || st_pipe_is_expert(pp, layer) ||
      !st_pipe_is_expert(pp, layer + 1))
    return 0;
  return (int)st_layer_attr(&pp->model->layers[layer], "experts", 0);
}

void
st_pipe_moe_owned(const Stage *st, int router, int *first, int *n)
{
  int X = st_pipe_moe_experts(st->pp, router);
  *n = X / st->pp->ep;
  *first = router + 1 + st->ep_index * *n;
}

typedef struct {
  int X, first, n;      /* experts, the first owned, how many */
  int batch;            /* an expert pass's samples: E b */
  int64_t rows_bytes;   /* the rows a rank's experts take (and give back) per all-to-all */
  int64_t wire_bytes;   /* what each all-to-all carries of them: all, or under a per-rank
                           dispatcher one row per rank a token reaches */
  int64_t slots_bytes;  /* each slot's token (int32) and gate (fp32) */
  double imbalance;     /* --moe-imbalance F: the busiest rank's load over the mean, >= 1 */
  gboolean sp;          /* the tensor ranks route their own tokens */
  int gather_t;         /* under sp: the experts' tensor group whose rows they gather (the
                           tensor group's t, or --expert-tensor-parallel k; 1: none) */
  int gather_comm;      /* its communicator */
  const StTpSpec *tp;   /* the experts' passes' tensor parallelism */
} Segment;

static void
segment_of(const Stage *st, int router, Segment *g)
{
  const StPipe *pp = st->pp;
  const StLayer *r = &pp->model->layers[router];
  const StLayer *x = &pp->model->layers[router + 1];
  static const StTpSpec whole = {-1, 1, ST_DTYPE_FP32, FALSE, -1, NULL, -1};
  g->X = st_pipe_moe_experts(pp, router);
  st_pipe_moe_owned(st, router, &g->first, &g->n);
  g->batch = pp->ep * pp->options->micro_batch;
  /* the busiest rank's rows under --moe-imbalance F (pp->moe_imbalance) */
  double f = pp->moe_imbalance > 1 ? pp->moe_imbalance : 1.0;
  int64_t rows = (int64_t)ceil(f * (double)(pp->options->micro_batch * g->X *
                                            st_layer_attr(x, "capacity", 1)));
  g->rows_bytes = rows * r->in_shape.dims[1] * st_dtype_bytes(pp->bytes.activation);
  /* a per-rank dispatcher (dropless: no capacity's padding) sends each of
   * the micro-batch's tokens to the ranks it reaches */
  g->wire_bytes = g->rows_bytes;
  if (pp->dispatch_per_rank && pp->ep > 1) {
    double reach = st_moe_ranks_per_token(g->X, pp->ep, (int)st_layer_attr(r, "top_k", 1),
                                          (StMoeRouting)pp->moe_routing);
    int64_t tokens = pp->options->micro_batch * r->in_shape.dims[0];
    g->wire_bytes = (int64_t)ceil(f * (double)tokens * reach) * r->in_shape.dims[1] *
                    st_dtype_bytes(pp->bytes.activation);
  }
  g->slots_bytes = rows * (int64_t)(sizeof(int32_t) + sizeof(float));
  g->imbalance = f;
  g->sp = pp->tp != NULL && r->sp;
  g->tp = pp->tp != NULL && !g->sp ? pp->tp : &whole;
  int k = pp->tp == NULL ? 1 : pp->etp > 0 ? MIN(pp->etp, pp->tp->t) : pp->tp->t;
  g->gather_t = g->sp ? k : 1;
  g->gather_comm = g->gather_t > 1 && k == pp->tp->t ? pp->tp->comm : st->comms->expert_tp;
}

static uint32_t
buffer(Stage *st, const char *what, int router, int m, StMemCategory category, int64_t bytes)
{
  g_autofree char *name =
    g_strdup_printf("%s %s m%d", what, st->pp->model->layers[router].name, m);
  return st_program_add_buffer(st->p, name, category, bytes, FALSE);
}

/* A collective of the segment on the compute stream after `after`. */
static uint32_t
coll(Stage *st, StCollKind kind, int comm, int64_t bytes, StData data, int first, int last,
     int m, uint32_t after, const uint32_t *alloc, int n_alloc, const uint32_t *free,
     int n_free)
{
  StOp op = st_op_coll(st->compute, kind, comm, bytes);
  st_op_moves(&op, data, first, last);
  op.micro = m;
  st_program_begin(st->p, &op);
  if (after != NONE)
    st_program_after(st->p, after);
  for (int i = 0; i < n_alloc; i++)
    if (alloc[i] != NONE)
      st_program_alloc(st->p, alloc[i]);
  for (int i = 0; i < n_free; i++)
    if (free[i] != NONE)
      st_program_free_buffer(st->p, free[i]);
  return st_program_commit(st->p);
}

/* Under sequence parallelism, rows gathered from the experts' tensor group
 * (the tensor group, or --expert-tensor-parallel's) into a buffer t times
 * `*rows`, which it replaces (the old one freed). */
static uint32_t
tp_gather(Stage *st, const Segment *g, int router, int m, StData data, uint32_t *rows,
          uint32_t after)
{
  int t = g->gather_t;
  uint32_t gathered = buffer(st, data == ST_DATA_TP_INPUT ? "ep rows gathered" : "ep dy gathered",
                             router, m, ST_MEM_COMM, t * g->rows_bytes);
  uint32_t op = coll(st, ST_COLL_ALL_GATHER, g->gather_comm, t * g->rows_bytes, data, g->first,
                     g->first + g->n - 1, m, after, &gathered, 1, rows, 1);
  *rows = gathered;
  return op;
}

/* Under sequence parallelism, partial sums reduce-scattered back to the
 * rank's rows, into a buffer that replaces `*rows`. */
static uint32_t
tp_scatter(Stage *st, const Segment *g, int router, int m, StData data, uint32_t *rows,
           uint32_t after)
{
  int t = g->gather_t;
  uint32_t local = buffer(st, data == ST_DATA_TP_OUTPUT ? "ep out local" : "ep dx local", router,
                          m, ST_MEM_COMM, g->rows_bytes);
  uint32_t op = coll(st, ST_COLL_REDUCE_SCATTER, g->gather_comm, t * g->rows_bytes, data,
                     g->first, g->first + g->n - 1, m, after, &local, 1, rows, 1);
  *rows = local;
  return op;
}

/* Whether a segment is recomputed: its router is, under --recompute full
 * (and every K-th under --recompute-every), unless --expert-recompute off. */
static gboolean
recomputes(const StPipe *pp, int router)
{
  return pp->recomputes[router] == ST_RECOMPUTE_FULL && pp->options->expert_recompute == 0;
}

/* The owned experts' passes (`pass` ST_PASS_FWD or ST_PASS_RECOMPUTE) on
 * the dispatched `rows` (freed by the last) into `out` (made by the first);
 * each expert's saved block stays for its backward when `keep`, else goes
 * with its pass. */
static uint32_t
experts_forward(Stage *st, const Segment *g, int m, StPass pass, gboolean keep, uint32_t rows,
                uint32_t out, uint32_t last)
{
  const StPipe *pp = st->pp;
  for (int j = g->first; j < g->first + g->n; j++) {
    StLayerMemory mem;
    st_layer_memory(pp->model, j, g->batch, pp->bytes.activation, &mem);
    StPassMem pm = {0};
    int64_t kept = (int64_t)ceil(g->imbalance * (double)mem.saved);
    uint32_t saved = kept > 0 ? buffer(st, "kept", j, m, ST_MEM_ACTIVATIONS, kept) : NONE;
    if (saved != NONE && keep)
      st_program_buffer_holds(st->p, saved, ST_DATA_ACTS, j, j, m, 1);
    st->moe_saved[m][j] = keep ? saved : NONE;
    st_pass_mem_alloc(&pm, saved);
    if (!keep)
      st_pass_mem_free(&pm, saved);
    if (j == g->first)
      st_pass_mem_alloc(&pm, out);
    uint32_t scratch = st_pass_scratch(st->p, pp->model, j, m, ST_PASS_FWD, g->batch,
                                       pp->bytes.activation, ST_RECOMPUTE_NONE, 0);
    st_pass_mem_alloc(&pm, scratch);
    st_pass_mem_free(&pm, scratch);
    if (j == g->first + g->n - 1)
      st_pass_mem_free(&pm, rows);
    last = st_pipe_stage_pass(st, pass, j, m, g->batch, &pm, last, g->tp);
  }
  return last;
}

void
st_pipe_moe_forward(Stage *st, int router, int m, uint32_t after)
{
  const StPipe *pp = st->pp;
  StTensors *t = st->tensors[m];
  Segment g;
  segment_of(st, router, &g);
  int t_factor = g.gather_t;
  int X_last = router + g.X;
  uint32_t rows = buffer(st, "ep rows", router, m, ST_MEM_COMM, g.rows_bytes);
  uint32_t send = buffer(st, "ep send", router, m, ST_MEM_COMM, g.rows_bytes);
  uint32_t slots = buffer(st, "ep slots", router, m, ST_MEM_ACTIVATIONS, g.slots_bytes);
  st->moe_slots[m][router] = slots;
  uint32_t made[3] = {rows, slots, send};
  uint32_t last = coll(st, ST_COLL_ALL_TO_ALL, st->comms->ep, g.wire_bytes, ST_DATA_EP_DISPATCH,
                       router + 1, X_last, m, after, made, 3, &send, 1);
  if (g.gather_t > 1)
    last = tp_gather(st, &g, router, m, ST_DATA_TP_INPUT, &rows, last);
  uint32_t out = buffer(st, "ep out", router, m, ST_MEM_COMM, t_factor * g.rows_bytes);
  gboolean again = recomputes(pp, router);
  last = experts_forward(st, &g, m, ST_PASS_FWD, !again, rows, out, last);
  if (g.gather_t > 1)
    last = tp_scatter(st, &g, router, m, ST_DATA_TP_OUTPUT, &out, last);
  /* The combined rows stay for the gates' gradients, or under full
   * recomputation come again with the rest (recompute_segment). */
  uint32_t combined = buffer(st, "ep combined", router, m, ST_MEM_ACTIVATIONS, g.rows_bytes);
  st->moe_saved[m][router] = again ? NONE : combined;
  uint32_t alloc[2] = {combined, st_tensors_move_in(t, X_last + 1, FALSE, ST_MEM_ACTIVATIONS)};
  uint32_t free[3] = {out, st_tensors_move_out(t, router + 1, FALSE), again ? combined : NONE};
  coll(st, ST_COLL_ALL_TO_ALL, st->comms->ep, g.wire_bytes, ST_DATA_EP_COMBINE, router + 1,
       X_last, m, last, alloc, 2, free, 3);
}

/* Under full recomputation, the segment's forward again before its
 * backward, as a checkpointed layer reruns it (Megatron-LM's
 * tensor_parallel.checkpoint around the whole layer): the dispatch, each
 * owned expert's forward (its saved block made again, kept for its
 * backward), the combine (its rows, for the gates' gradients). */
static void
recompute_segment(Stage *st, const Segment *g, int router, int m)
{
  int t_factor = g->gather_t;
  int X_last = router + g->X;
  uint32_t rows = buffer(st, "ep rows again", router, m, ST_MEM_COMM, g->rows_bytes);
  uint32_t send = buffer(st, "ep send again", router, m, ST_MEM_COMM, g->rows_bytes);
  uint32_t made[2] = {rows, send};
  uint32_t last = coll(st, ST_COLL_ALL_TO_ALL, st->comms->ep, g->wire_bytes, ST_DATA_EP_DISPATCH,
                       router + 1, X_last, m, NONE, made, 2, &send, 1);
  if (g->gather_t > 1)
    last = tp_gather(st, g, router, m, ST_DATA_TP_INPUT, &rows, last);
  uint32_t out = buffer(st, "ep out again", router, m, ST_MEM_COMM, t_factor * g->rows_bytes);
  last = experts_forward(st, g, m, ST_PASS_RECOMPUTE, TRUE, rows, out, last);
  if (g->gather_t > 1)
    last = tp_scatter(st, g, router, m, ST_DATA_TP_OUTPUT, &out, last);
  uint32_t combined = buffer(st, "ep combined again", router, m, ST_MEM_ACTIVATIONS,
                             g->rows_bytes);
  st->moe_saved[m][router] = combined;
  coll(st, ST_COLL_ALL_TO_ALL, st->comms->ep, g->wire_bytes, ST_DATA_EP_COMBINE, router + 1,
       X_last, m, last, &combined, 1, &out, 1);
}

void
st_pipe_moe_backward(Stage *st, int router, int m)
{
  const StPipe *pp = st->pp;
  StTensors *t = st->tensors[m];
  Segment g;
  segment_of(st, router, &g);
  int t_factor = g.gather_t;
  int X_last = router + g.X;
  if (recomputes(pp, router))
    recompute_segment(st, &g, router, m);
  uint32_t dy = buffer(st, "ep dy", router, m, ST_MEM_COMM, g.rows_bytes);
  uint32_t send = buffer(st, "ep dy send", router, m, ST_MEM_COMM, g.rows_bytes);
  uint32_t made[3] = {dy, send, st_tensors_move_in(t, router + 1, TRUE, ST_MEM_WORKSPACE)};
  uint32_t free[3] = {st_tensors_move_out(t, X_last + 1, TRUE), st->moe_saved[m][router], send};
  uint32_t last = coll(st, ST_COLL_ALL_TO_ALL, st->comms->ep, g.wire_bytes,
                       ST_DATA_EP_COMBINE_GRAD, router + 1, X_last, m, NONE, made, 3, free, 3);
  if (g.gather_t > 1)
    last = tp_gather(st, &g, router, m, ST_DATA_TP_OUTPUT_GRAD, &dy, last);
  uint32_t dx = buffer(st, "ep dx", router, m, ST_MEM_COMM, t_factor * g.rows_bytes);
  for (int j = g.first + g.n - 1; j >= g.first; j--) {
    StPassMem pm = {0};
    if (j == g.first + g.n - 1)
      st_pass_mem_alloc(&pm, dx);
    uint32_t scratch = st_pass_scratch(st->p, pp->model, j, m, ST_PASS_BWD, g.batch,
                                       pp->bytes.activation, ST_RECOMPUTE_NONE, 0);
    st_pass_mem_alloc(&pm, scratch);
    st_pass_mem_free(&pm, scratch);
    st_pass_mem_free(&pm, st->moe_saved[m][j]);
    if (j == g.first)
      st_pass_mem_free(&pm, dy);
    last = st_pipe_stage_pass(st, ST_PASS_BWD, j, m, g.batch, &pm, last, g.tp);
    st_pipe_maybe_reduce(st, j, m, last);
  }
  if (g.gather_t > 1)
    last = tp_scatter(st, &g, router, m, ST_DATA_TP_INPUT_GRAD, &dx, last);
  uint32_t back = buffer(st, "ep dx rows", router, m, ST_MEM_COMM, g.rows_bytes);
  uint32_t gone[3] = {dx, st->moe_slots[m][router], back};
  coll(st, ST_COLL_ALL_TO_ALL, st->comms->ep, g.wire_bytes, ST_DATA_EP_DISPATCH_GRAD, router + 1,
       X_last, m, last, &back, 1, gone, 3);
}
