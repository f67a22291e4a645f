/* strategy_pipeline_stage.c: the program of one pipeline stage (see
 * strategy_pipeline.h).
 *
 * Streams: "compute" runs the passes in the stage's order (GPipe or 1F1B);
 * each p2p channel has a stream per end ("recv act", "send act" towards the
 * next stage, "recv grad", "send grad" towards the previous one), so a
 * transfer waits only for its own channel, in micro-batch order, and sends
 * never hold up compute; "comm" runs the gradient all-reduces.
 *
 * Memory, per micro-batch (the data-parallel frame's conventions, plus the
 * boundaries):
 * - a received input ("in", activations) lives until the stage's first
 *   backward when that layer keeps its input or with checkpointing (it is
 *   then the checkpoint), else until the first forward ends;
 * - a forward keeps its activations until its backward; with --checkpoint
 *   it keeps only its input, and a recompute right before the backward
 *   allocates the activations again;
 * - the last layer's output, when nothing keeps it, lives until its send;
 * - a backward allocates the gradient of its input (workspace), freed by the
 *   next backward or, at the stage's first layer, by its send; the received
 *   output gradient ("dy") is freed by the last layer's backward;
 * - with --sparsity, the dense weight gradient of a layer lives from its
 *   backward to its compress op.
 * The last micro-batch's backward launches each gradient bucket's
 * all-reduce across the pipelines; the tied embedding's gradient is then
 * summed between its two stages; the optimizer waits for both.
 */
#include "strategy/strategy_pipeline.h"

#define NONE UINT32_MAX

typedef struct {
  const StPipe *pp;
  const StPipeComms *comms;
  StProgram *p;
  int s, lo, hi;  /* stage, its layers [lo, hi) */
  int compute, recv_act, send_act, recv_grad, send_grad, comm;
  gboolean in_kept;
  const StBucket *buckets;
  int n_buckets, next_bucket;
  uint32_t last_reduce;
  /* Per (micro-batch, layer of the stage): [n_micro * (hi - lo)]. */
  uint32_t *act, *ckpt;
  uint32_t *in; /* [n_micro]: the received input */
} Stage;

#define AT(st, m, i) ((size_t)(m) * (size_t)((st)->hi - (st)->lo) + (size_t)((i) - (st)->lo))

static uint32_t
buffer(Stage *st, const char *what, int layer, int micro, StMemCategory category, int64_t bytes,
       StData data, int data_layer)
{
  const StLayer *l = &st->pp->model->layers[layer];
  g_autofree char *name = g_strdup_printf("%s %s m%d", what, l->name, micro);
  uint32_t b = st_program_add_buffer(st->p, name, category, bytes, FALSE);
  if (data != ST_DATA_NONE)
    st_program_buffer_holds(st->p, b, data, data_layer, data_layer, micro, 1);
  return b;
}

static uint32_t
emit_p2p(Stage *st, StOp op, StData data, int layer, int micro, uint32_t after, uint32_t alloc,
         uint32_t free)
{
  st_op_moves(&op, data, layer, layer);
  op.micro = micro;
  op.label = st_program_label(st->p, data == ST_DATA_OUTPUT ? "act" : "grad");
  st_program_begin(st->p, &op);
  if (after != NONE)
    st_program_after(st->p, after);
  if (alloc != NONE)
    st_program_alloc(st->p, alloc);
  if (free != NONE)
    st_program_free_buffer(st->p, free);
  return st_program_commit(st->p);
}

/* A pass's scratch (st_pass_scratch), allocated and freed by the op being
 * built. */
static void
alloc_scratch(Stage *st, uint32_t scratch)
{
  if (scratch == NONE)
    return;
  st_program_alloc(st->p, scratch);
  st_program_free_buffer(st->p, scratch);
}

static void
emit_forward(Stage *st, int m)
{
  const StPipe *pp = st->pp;
  const StOptions *o = pp->options;
  int S = pp->n_stages;
  uint32_t recv = NONE;
  if (st->s > 0) {
    int64_t bytes = st_pipe_boundary_bytes(pp, st->s - 1);
    st->in[m] = buffer(st, "in", st->lo, m, ST_MEM_ACTIVATIONS, bytes, ST_DATA_OUTPUT, st->lo - 1);
    recv = emit_p2p(st, st_op_recv(st->recv_act, st->comms->pipe, st->s - 1, 0, bytes),
                    ST_DATA_OUTPUT, st->lo - 1, m, NONE, st->in[m], NONE);
  }
  uint32_t out = NONE, last = NONE;
  for (int i = st->lo; i < st->hi; i++) {
    uint32_t scratch = st_pass_scratch(st->p, pp->model, i, m, ST_PASS_FWD, o->micro_batch,
                                       pp->bytes.activation);
    StOp op = st_op_comp(st->compute, ST_PASS_FWD, i, m, o->micro_batch);
    st_program_begin(st->p, &op);
    alloc_scratch(st, scratch);
    if (i == st->lo && recv != NONE)
      st_program_after(st->p, recv);
    if (o->checkpoint) {
      if (!(i == st->lo && st->s > 0)) {
        st->ckpt[AT(st, m, i)] = buffer(st, "ckpt", i, m, ST_MEM_ACTIVATIONS,
                                        st_pipe_input_bytes(pp, i),
                                        i > 0 ? ST_DATA_OUTPUT : ST_DATA_NONE, i - 1);
        st_program_alloc(st->p, st->ckpt[AT(st, m, i)]);
      }
    } else {
      st->act[AT(st, m, i)] = buffer(st, "act", i, m, ST_MEM_ACTIVATIONS,
                                     st_pipe_act_bytes(pp, i), ST_DATA_ACTS, i);
      st_program_alloc(st->p, st->act[AT(st, m, i)]);
    }
    if (i == st->hi - 1 && st->s < S - 1 && (o->checkpoint || !pp->keeps_output[i])) {
      out = buffer(st, "out", i, m, ST_MEM_ACTIVATIONS, st_pipe_boundary_bytes(pp, st->s),
                   ST_DATA_OUTPUT, i);
      st_program_alloc(st->p, out);
    }
    if (i == st->lo && st->s > 0 && !st->in_kept)
      st_program_free_buffer(st->p, st->in[m]);
    last = st_program_commit(st->p);
  }
  if (st->s < S - 1)
    emit_p2p(st, st_op_send(st->send_act, st->comms->pipe, st->s + 1, 0,
                            st_pipe_boundary_bytes(pp, st->s)),
             ST_DATA_OUTPUT, st->hi - 1, m, last, NONE, out);
}

/* The all-reduce of the next bucket when layer i's last gradient is ready. */
static void
maybe_reduce(Stage *st, int i, int m, uint32_t ready)
{
  const StPipe *pp = st->pp;
  if (m != pp->n_micro - 1 || st->next_bucket >= st->n_buckets ||
      st->buckets[st->next_bucket].last != i)
    return;
  const StBucket *b = &st->buckets[st->next_bucket];
  gboolean sparse = st_sparse_on(&pp->sparse);
  StOp op = st_op_coll(st->comm, ST_COLL_ALL_REDUCE, st->comms->data, b->params * pp->bytes.grad);
  g_autofree char *label =
    g_strdup_printf(sparse ? "bucket %d compressed" : "bucket %d", st->next_bucket);
  op.label = st_program_label(st->p, label);
  st_op_moves(&op, sparse ? ST_DATA_GRADS_PACKED : ST_DATA_GRADS, b->last, b->first);
  st_program_begin(st->p, &op);
  st_program_after(st->p, ready);
  st->last_reduce = st_program_commit(st->p);
  st->next_bucket++;
}

static void
emit_backward(Stage *st, int m)
{
  const StPipe *pp = st->pp;
  const StOptions *o = pp->options;
  const StSparse *sp = &pp->sparse;
  int S = pp->n_stages;
  uint32_t prev = NONE, recv = NONE;
  if (st->s < S - 1) {
    int64_t bytes = st_pipe_boundary_bytes(pp, st->s);
    prev = buffer(st, "dy", st->hi - 1, m, ST_MEM_WORKSPACE, bytes, ST_DATA_INPUT_GRAD, st->hi);
    recv = emit_p2p(st, st_op_recv(st->recv_grad, st->comms->pipe, st->s + 1, 1, bytes),
                    ST_DATA_INPUT_GRAD, st->hi, m, NONE, prev, NONE);
  }
  uint32_t bwd = NONE;
  for (int i = st->hi - 1; i >= st->lo; i--) {
    if (o->checkpoint) {
      st->act[AT(st, m, i)] = buffer(st, "act", i, m, ST_MEM_ACTIVATIONS,
                                     st_pipe_act_bytes(pp, i), ST_DATA_ACTS, i);
      /* As autograd runs it: the recompute starts once the output's
       * gradient is here, not ahead of it. */
      uint32_t scratch = st_pass_scratch(st->p, pp->model, i, m, ST_PASS_RECOMPUTE,
                                         o->micro_batch, pp->bytes.activation);
      StOp re = st_op_comp(st->compute, ST_PASS_RECOMPUTE, i, m, o->micro_batch);
      st_program_begin(st->p, &re);
      alloc_scratch(st, scratch);
      if (i == st->hi - 1 && recv != NONE)
        st_program_after(st->p, recv);
      st_program_alloc(st->p, st->act[AT(st, m, i)]);
      st_program_commit(st->p);
    }
    uint32_t dx = NONE, dense = NONE;
    if (i > 0)
      dx = buffer(st, "dx", i, m, ST_MEM_WORKSPACE, st_pipe_input_bytes(pp, i),
                  ST_DATA_INPUT_GRAD, i);
    if (st_sparse_on(sp) && pp->owned[i] > 0)
      dense = st_sparse_dense_grad_buffer(sp, st->p, pp->model->layers[i].name, i, m,
                                          pp->owned[i]);
    uint32_t scratch = st_pass_scratch(st->p, pp->model, i, m, ST_PASS_BWD, o->micro_batch,
                                       pp->bytes.activation);
    StOp op = st_op_comp(st->compute, ST_PASS_BWD, i, m, o->micro_batch);
    st_program_begin(st->p, &op);
    if (i == st->hi - 1 && recv != NONE)
      st_program_after(st->p, recv);
    alloc_scratch(st, scratch);
    if (dx != NONE)
      st_program_alloc(st->p, dx);
    if (dense != NONE)
      st_program_alloc(st->p, dense);
    st_program_free_buffer(st->p, st->act[AT(st, m, i)]);
    if (st->ckpt[AT(st, m, i)] != NONE)
      st_program_free_buffer(st->p, st->ckpt[AT(st, m, i)]);
    if (prev != NONE)
      st_program_free_buffer(st->p, prev);
    if (i == st->lo && st->s > 0 && st->in_kept)
      st_program_free_buffer(st->p, st->in[m]);
    bwd = st_program_commit(st->p);
    uint32_t ready = bwd;
    if (dense != NONE)
      ready = st_sparse_emit_compress(sp, st->p, st->compute, i, m, pp->owned[i], bwd, dense);
    maybe_reduce(st, i, m, ready);
    prev = dx;
  }
  if (st->s > 0)
    emit_p2p(st, st_op_send(st->send_grad, st->comms->pipe, st->s - 1, 1,
                            st_pipe_boundary_bytes(pp, st->s - 1)),
             ST_DATA_INPUT_GRAD, st->lo, m, bwd, NONE, prev);
}

/* Persistent model states of the stage, and of the tied copy on the head's. */
static void
add_states(Stage *st, int64_t params, int64_t nnz)
{
  const StPipe *pp = st->pp;
  const StSparse *sp = &pp->sparse;
  StProgram *p = st->p;
  gboolean copy = pp->tied_copy && pp->tied_head >= st->lo && pp->tied_head < st->hi;
  int64_t copy_params = copy ? pp->tied_params : 0;
  int64_t copy_nnz = copy ? st_sparse_nnz(sp, pp->tied_params) : 0;
  params -= copy_params;
  nnz -= copy_nnz;
  if (st_sparse_on(sp)) {
    st_sparse_add_states(sp, p, "", params, nnz, st->lo, st->hi - 1);
    if (copy)
      st_sparse_add_states(sp, p, "tied copy: ", copy_params, copy_nnz, pp->tied_embed,
                           pp->tied_embed);
    return;
  }
  for (int k = 0; k < (copy ? 2 : 1); k++) {
    int64_t n = k == 0 ? params : copy_params;
    int a = k == 0 ? st->lo : pp->tied_embed, b = k == 0 ? st->hi - 1 : pp->tied_embed;
    const char *what = k == 0 ? "" : "tied copy: ";
    g_autofree char *pn = g_strdup_printf("%sparams", what);
    g_autofree char *gn = g_strdup_printf("%sgrads", what);
    g_autofree char *on = g_strdup_printf("%soptimizer states", what);
    uint32_t w = st_program_add_buffer(p, pn, ST_MEM_PARAMS, n * pp->bytes.weight, TRUE);
    uint32_t g = st_program_add_buffer(p, gn, ST_MEM_GRADS, n * pp->bytes.grad, TRUE);
    uint32_t os = st_program_add_buffer(p, on, ST_MEM_OPTIMIZER, n * pp->bytes.optimizer, TRUE);
    st_program_buffer_holds(p, w, ST_DATA_PARAMS, a, b, -1, 1);
    st_program_buffer_holds(p, g, ST_DATA_GRADS, a, b, -1, 1);
    st_program_buffer_holds(p, os, ST_DATA_OPTIM, a, b, -1, 1);
  }
}

/* After the buckets: the tied embedding's gradient summed between its two
 * stages, then the optimizer (and, sparse, the expand). */
static void
emit_update(Stage *st, int64_t params, int64_t nnz)
{
  const StPipe *pp = st->pp;
  const StSparse *sp = &pp->sparse;
  gboolean embed = pp->tied_embed >= st->lo && pp->tied_embed < st->hi;
  gboolean head = pp->tied_head >= st->lo && pp->tied_head < st->hi;
  if (pp->tied_copy && (embed || head)) {
    int64_t elems = st_sparse_nnz(sp, pp->tied_params);
    StOp op = st_op_coll(st->comm, ST_COLL_ALL_REDUCE, st->comms->tied, elems * pp->bytes.grad);
    op.label = st_program_label(st->p, "tied embedding");
    st_op_moves(&op, st_sparse_on(sp) ? ST_DATA_GRADS_PACKED : ST_DATA_GRADS, pp->tied_embed,
                pp->tied_embed);
    st_program_begin(st->p, &op);
    if (st->last_reduce != NONE)
      st_program_after(st->p, st->last_reduce);
    st->last_reduce = st_program_commit(st->p);
  }
  if (params == 0)
    return;
  if (st_sparse_on(sp)) {
    /* The stage's own layers, and the tied copy of the embedding on the head's. */
    gboolean copy = pp->tied_copy && head;
    int64_t copy_nnz = copy ? st_sparse_nnz(sp, pp->tied_params) : 0;
    StSparseSpan spans[2] = {{"", st->lo, st->hi - 1, nnz - copy_nnz},
                             {"tied copy: ", pp->tied_embed, pp->tied_embed, copy_nnz}};
    st_sparse_emit_step(sp, st->p, st->compute, params, spans, copy ? 2 : 1, st->last_reduce);
    return;
  }
  StOp step = st_op_elementwise(st->compute, ST_PASS_OPTIM, -1, params,
                                params * pp->bytes.optim_traffic);
  st_program_begin(st->p, &step);
  if (st->last_reduce != NONE)
    st_program_after(st->p, st->last_reduce);
  st_program_commit(st->p);
}

StProgram *
st_pipe_stage_program(const StPipe *pp, int s, const StPipeComms *comms)
{
  int S = pp->n_stages, M = pp->n_micro;
  g_autofree char *name = g_strdup_printf("stage %d", s);
  Stage st = {
    .pp = pp,
    .comms = comms,
    .p = st_program_new(name),
    .s = s,
    .lo = pp->first[s],
    .hi = pp->first[s + 1],
    .recv_act = -1, .send_act = -1, .recv_grad = -1, .send_grad = -1,
    .last_reduce = NONE,
  };
  st.in_kept = s > 0 && (pp->options->checkpoint || pp->keeps_input[st.lo]);
  st.compute = st_program_add_stream(st.p, "compute", 0);
  if (s > 0)
    st.recv_act = st_program_add_stream(st.p, "recv act", 0);
  if (s < S - 1) {
    st.send_act = st_program_add_stream(st.p, "send act", 0);
    st.recv_grad = st_program_add_stream(st.p, "recv grad", 0);
  }
  if (s > 0)
    st.send_grad = st_program_add_stream(st.p, "send grad", 0);
  st.comm = st_program_add_stream(st.p, "comm", 0);

  int64_t params = 0, nnz = 0;
  for (int i = st.lo; i < st.hi; i++) {
    params += pp->owned[i];
    nnz += pp->owned_nnz[i];
  }
  add_states(&st, params, nnz);
  g_autoptr(GArray) buckets =
    st_grad_buckets_of(pp->owned_nnz, st.lo, st.hi, pp->options->bucket_bytes, pp->bytes.grad);
  st.buckets = (const StBucket *)buckets->data;
  st.n_buckets = (int)buckets->len;

  size_t cells = (size_t)M * (size_t)(st.hi - st.lo);
  g_autofree uint32_t *act = g_new(uint32_t, cells);
  g_autofree uint32_t *ckpt = g_new(uint32_t, cells);
  g_autofree uint32_t *in = g_new(uint32_t, M);
  memset(act, 0xff, cells * sizeof(uint32_t)); /* NONE */
  memset(ckpt, 0xff, cells * sizeof(uint32_t));
  memset(in, 0xff, (size_t)M * sizeof(uint32_t));
  st.act = act;
  st.ckpt = ckpt;
  st.in = in;

  g_autoptr(GArray) order = st_pipe_order(pp->order, s, S, M);
  for (guint k = 0; k < order->len; k++) {
    const StPipeSlot *slot = &g_array_index(order, StPipeSlot, k);
    if (slot->fwd)
      emit_forward(&st, slot->micro);
    else
      emit_backward(&st, slot->micro);
  }
  emit_update(&st, params, nnz);
  return st.p;
}
