/* strategy_pipeline_stage.c: the program of one pipeline stage (see
 * strategy_pipeline.h).
 *
 * Streams: "compute" runs the passes in the stage's order (GPipe or 1F1B);
 * each p2p channel has a stream per end ("recv act", "send act" towards the
 * next stage, "recv grad", "send grad" towards the previous one), so a
 * transfer waits only for its own channel, in micro-batch order, and sends
 * never hold up compute; "comm" runs the gradient all-reduces.
 *
 * Memory, per micro-batch: every tensor as the executor makes it
 * (tensors.h, as dp has them), the stage's input made by its receive and
 * its output freed by its send unless its backward reads it, the gradient
 * of its output made by its receive and that of its input freed by its
 * send; with --recompute full, the forward's saved blocks go at once and
 * each layer's recompute, right before its backward, makes them again
 * (selective: only what a layer drops, for the layers that drop some); with
 * --sparsity, the dense weight gradient of a layer lives from its backward
 * to its compress op.
 * The last micro-batch's backward launches each gradient bucket's
 * all-reduce across the pipelines; the tied embedding's gradient is then
 * summed between its two stages; the optimizer waits for both.
 *
 * Zero-bubble orders: a B slot runs, from the chunk's last layer down, the
 * B (ST_PASS_BWD_INPUT) of every layer that splits (st_pipe_splits) and the
 * whole backward of the others, and sends the input's gradient; the
 * model's first layer has no input gradient, so its B is skipped. A W slot
 * runs the W's (ST_PASS_BWD_WEIGHT) in the same order, and the last
 * micro-batch's W slot launches the buckets' all-reduces: a layer's
 * gradient is complete after its W. A recompute runs before the first half
 * of its layer's backward.
 */
#include "strategy/strategy_pipeline_stage.h"

#include "cost/framework.h"


static int
chunks_total(const StPipe *pp)
{
  return pp->n_stages * MAX(pp->n_chunks, 1);
}

/* Whether model chunk k's neighbour k + d (d = +-1) is on another stage:
 * a p2p between them, else (DualPipeV's turn) the tensor stays. */
static gboolean
crosses(const StPipe *pp, int k, int d)
{
  int j = k + d;
  return j >= 0 && j < chunks_total(pp) &&
         st_pipe_chunk_stage(pp, j) != st_pipe_chunk_stage(pp, k);
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

uint32_t
st_pipe_stage_pass(Stage *st, StPass pass, int i, int m, int batch, StPassMem *pm,
                   uint32_t after, const StTpSpec *tp)
{
  StPassExtra hooked = {0};
  if (st->zero != NULL)
    st->hooks.before(st->hooks.data, pass, i, m, &hooked);
  StTpSpec mine = *tp;
  mine.overlap = tp->overlap && st->tp_overlap >= 0;
  mine.overlap_stream = st->tp_overlap;
  mine.cp_stream = st->cp_stream;
  uint32_t op = st_tp_emit_pass(st->p, &mine, st->pp->model, st->compute, pass, i, m, batch, pm,
                                after, &hooked);
  if (st->zero != NULL)
    st->hooks.after(st->hooks.data, pass, i, m, op);
  st->last_pass = op;
  return op;
}

/* A layer pass of micro-batch m after `after` (NONE: only its stream),
 * with what tensors.h says it allocates and frees plus `extra` (NONE: none)
 * allocated. */
static uint32_t
emit_pass(Stage *st, StPass pass, int i, int m, uint32_t after, uint32_t extra)
{
  StPassMem pm = {0};
  st_tensors_pass(st->tensors[m], pass, i, &pm);
  st_pass_mem_alloc(&pm, extra);
  uint32_t wait = pass == ST_PASS_FWD ? st_offload_gate_take(&st->offload_gate) : NONE;
  if (wait != NONE)
    pm.after[pm.n_after++] = wait;
  /* A selective recompute makes a layer's scores again from its own heads:
   * no collective, one op. */
  gboolean selective = pass == ST_PASS_RECOMPUTE &&
                       st->pp->recomputes[i] == ST_RECOMPUTE_SELECTIVE;
  static const StTpSpec whole = {-1, 1, ST_DTYPE_FP32, FALSE, -1, NULL, -1};
  const StTpSpec *tp = st->pp->tp != NULL && !selective ? st->pp->tp : &whole;
  return st_pipe_stage_pass(st, pass, i, m, st->pp->options->micro_batch, &pm, after, tp);
}

/* Bytes per micro-batch of the tensor entering model chunk k (k > 0): its
 * first layer's input, or that layer's input gradient going back. */
static int64_t
boundary_bytes(const StPipe *pp, int k)
{
  return st_pipe_input_bytes(pp, pp->first[k]);
}

/* The send of chunk c's output for micro-batch m, after `after`. */
static void
send_forward(Stage *st, int m, int c, uint32_t after)
{
  const StPipe *pp = st->pp;
  const Chunk *ch = &st->chunks[c];
  int k = ch->k;
  if (!crosses(pp, k, +1))
    return;
  StTensors *t = st->tensors[m];
  int next = st_pipe_chunk_stage(pp, k + 1), c_next = st_pipe_chunk_local(pp, k + 1);
  st_tensors_sent(t, ch->hi,
                  emit_p2p(st, st_op_send(ch->send_act, st->comms->pipe, next, 2 * c_next,
                                          boundary_bytes(pp, k + 1)),
                           ST_DATA_OUTPUT, ch->hi - 1, m, after, NONE,
                           st_tensors_move_out(t, ch->hi, FALSE)));
}

/* p2p tags: activations into chunk c of a stage 2c, gradients into it 2c + 1.
 * The receive waits for `wait` first (NONE: nothing); with `send` FALSE the
 * output is left for send_forward. */
static void
emit_forward(Stage *st, int m, int c, uint32_t wait, gboolean send)
{
  const StPipe *pp = st->pp;
  const Chunk *ch = &st->chunks[c];
  StTensors *t = st->tensors[m];
  int k = ch->k;
  uint32_t recv = wait, last = NONE;
  if (crosses(pp, k, -1)) {
    recv = emit_p2p(st, st_op_recv(ch->recv_act, st->comms->pipe, st_pipe_chunk_stage(pp, k - 1),
                                   2 * c, boundary_bytes(pp, k)),
                    ST_DATA_OUTPUT, ch->lo - 1, m, wait,
                    st_tensors_move_in(t, ch->lo, FALSE, ST_MEM_ACTIVATIONS), NONE);
  }
  for (int i = ch->lo; i < ch->hi; i++) {
    last = emit_pass(st, ST_PASS_FWD, i, m, i == ch->lo ? recv : NONE, NONE);
    st_offload_gate_copied(&st->offload_gate, st_offload_down(st->p, st->act_offload, t, i, last));
    int experts = st_pipe_moe_experts(pp, i);
    if (experts > 0) {
      st_pipe_moe_forward(st, i, m, last);
      i += experts;
    }
  }
  if (send)
    send_forward(st, m, c, last);
}

/* The all-reduce of the bucket that layer i's gradient completes, after the
 * last micro-batch (experts' over their data-parallel group). */
void
st_pipe_maybe_reduce(Stage *st, int i, int m, uint32_t ready)
{
  const StPipe *pp = st->pp;
  int k = st->bucket_of_last[i];
  if (st->zero != NULL || m != pp->n_micro - 1 || k < 0)
    return;
  const StBucket *b = &st->buckets[k];
  gboolean sparse = st_sparse_on(&pp->sparse);
  int comm = st_pipe_is_expert(pp, i) ? st->comms->expert_data : st->comms->data;
  StOp op = st_op_coll(st->comm, ST_COLL_ALL_REDUCE, comm, b->params * pp->bytes.grad);
  g_autofree char *label = g_strdup_printf(sparse ? "bucket %d compressed" : "bucket %d", k);
  op.label = st_program_label(st->p, label);
  st_op_moves(&op, sparse ? ST_DATA_GRADS_PACKED : ST_DATA_GRADS, b->last, b->first);
  st_program_begin(st->p, &op);
  st_program_after(st->p, ready);
  st->last_reduce = st_program_commit(st->p);
}

gboolean
st_pipe_splits(const StPipe *pp, int i)
{
  return st_pipe_order_splits(pp->order) && pp->model->layers[i].params > 0 &&
         i != pp->tied_head;
}

/* The W slot of micro-batch m on chunk c (zero-bubble orders). */
static void
emit_weights(Stage *st, int m, int c)
{
  const StPipe *pp = st->pp;
  const Chunk *ch = &st->chunks[c];
  StTensors *t = st->tensors[m];
  uint32_t last = NONE;
  for (int i = ch->hi - 1; i >= ch->lo; i--) {
    if (st_pipe_splits(pp, i)) {
      /* After its B (the same stream), or where the B was skipped, after
       * the receive of its output's gradient (b_op says which). */
      uint32_t after = st->b_op[i];
      if (i == 0) /* its B was skipped: its block comes back now */
        st_offload_up(st->p, st->act_offload, t, i, st->last_pass);
      if (i == 0 && st_tensors_recomputes(t, i)) { /* its B was skipped */
        emit_pass(st, ST_PASS_RECOMPUTE, i, m, after, NONE);
        after = NONE;
      }
      last = emit_pass(st, ST_PASS_BWD_WEIGHT, i, m, after, NONE);
    }
    /* Every layer above it in the bucket has its gradient by now: the W's
     * so far in this slot, or the B slot before it. */
    uint32_t ready = last != NONE ? last : st->b_op[i];
    if (ready != NONE)
      st_pipe_maybe_reduce(st, i, m, ready);
  }
}

/* The receive of the gradient of chunk c's output for micro-batch m, or
 * NONE when the chunk after it is on this stage. */
static uint32_t
recv_backward(Stage *st, int m, int c)
{
  const StPipe *pp = st->pp;
  const Chunk *ch = &st->chunks[c];
  int k = ch->k;
  if (!crosses(pp, k, +1))
    return NONE;
  return emit_p2p(st, st_op_recv(ch->recv_grad, st->comms->pipe, st_pipe_chunk_stage(pp, k + 1),
                                 2 * c + 1, boundary_bytes(pp, k + 1)),
                  ST_DATA_INPUT_GRAD, ch->hi, m, NONE,
                  st_tensors_move_in(st->tensors[m], ch->hi, TRUE, ST_MEM_WORKSPACE), NONE);
}

/* A backward slot: `half` ST_PASS_BWD_INPUT runs the B of the layers that
 * split (their W slot comes later), ST_PASS_INVALID every layer whole;
 * `recv` the receive of its output's gradient (recv_backward). */
static void
emit_backward(Stage *st, int m, int c, StPass half, uint32_t recv)
{
  const StPipe *pp = st->pp;
  const StSparse *sp = &pp->sparse;
  const Chunk *ch = &st->chunks[c];
  StTensors *t = st->tensors[m];
  int k = ch->k;
  uint32_t bwd = NONE;
  for (int i = ch->hi - 1; i >= ch->lo; i--) {
    int router = st->moe_router_of[i];
    if (router >= 0) { /* the last expert of a segment */
      st_pipe_moe_backward(st, router, m);
      i = router;
    }
    /* Blocks on the host come back as the compute reaches the backward of
     * the layer above them: this layer's, if not yet, and the next one's. */
    st_offload_up(st->p, st->act_offload, t, i, st->last_pass);
    if (i > ch->lo)
      st_offload_up(st->p, st->act_offload, t, i - 1, st->last_pass);
    gboolean split = half == ST_PASS_BWD_INPUT && st_pipe_splits(pp, i);
    if (split && i == 0) { /* no input gradient: all of it is W, after the receive */
      st->b_op[i] = i == ch->hi - 1 ? recv : NONE;
      continue;
    }
    /* As autograd runs it: the recompute starts once the output's gradient
     * is here, not ahead of it. */
    if (st_tensors_recomputes(t, i))
      emit_pass(st, ST_PASS_RECOMPUTE, i, m, i == ch->hi - 1 ? recv : NONE, NONE);
    uint32_t dense = NONE;
    if (st_sparse_on(sp) && pp->owned[i] > 0)
      dense = st_sparse_dense_grad_buffer(sp, st->p, pp->model->layers[i].name, i, m,
                                          pp->owned[i]);
    bwd = emit_pass(st, split ? ST_PASS_BWD_INPUT : ST_PASS_BWD, i, m,
                    i == ch->hi - 1 ? recv : NONE, dense);
    if (half == ST_PASS_BWD_INPUT) { /* the W slot reduces */
      st->b_op[i] = bwd;
      continue;
    }
    uint32_t ready = bwd;
    if (dense != NONE)
      ready = st_sparse_emit_compress(sp, st->p, st->compute, i, m, pp->owned[i], bwd, dense);
    st_pipe_maybe_reduce(st, i, m, ready);
  }
  if (crosses(pp, k, -1)) {
    int prev = st_pipe_chunk_stage(pp, k - 1), c_prev = st_pipe_chunk_local(pp, k - 1);
    emit_p2p(st, st_op_send(ch->send_grad, st->comms->pipe, prev, 2 * c_prev + 1,
                            boundary_bytes(pp, k)),
             ST_DATA_INPUT_GRAD, ch->lo, m, bwd, NONE, st_tensors_move_out(t, ch->lo, TRUE));
  }
}

/* Whether one of the stage's chunks holds `layer`. */
static gboolean
holds(const Stage *st, int layer)
{
  for (int c = 0; c < st->n_chunks; c++)
    if (layer >= st->chunks[c].lo && layer < st->chunks[c].hi)
      return TRUE;
  return FALSE;
}

/* Persistent model states of the stage (one set per model chunk), and of the
 * tied copy on the head's. */
static void
add_states(Stage *st, int64_t params, int64_t nnz)
{
  const StPipe *pp = st->pp;
  const StSparse *sp = &pp->sparse;
  StProgram *p = st->p;
  gboolean copy = pp->tied_copy && holds(st, pp->tied_head);
  int64_t copy_params = copy ? pp->tied_params : 0;
  int64_t copy_nnz = copy ? st_sparse_nnz(sp, pp->tied_params) : 0;
  params -= copy_params;
  nnz -= copy_nnz;
  if (st_sparse_on(sp)) {
    g_assert(st->n_chunks == 1);
    st_sparse_add_states(sp, p, "", params, nnz, st->lo, st->hi - 1);
    if (copy)
      st_sparse_add_states(sp, p, "tied copy: ", copy_params, copy_nnz, pp->tied_embed,
                           pp->tied_embed);
    return;
  }
  for (int k = 0; k < st->n_chunks + (copy ? 1 : 0); k++) {
    gboolean tied = k == st->n_chunks;
    int a = tied ? pp->tied_embed : st->chunks[k].lo;
    int b = tied ? pp->tied_embed : st->chunks[k].hi - 1;
    int64_t n = tied ? copy_params : 0;
    for (int i = a; !tied && i <= b; i++)
      n += st->elems[i] - (copy && i == pp->tied_head ? copy_params : 0);
    g_autofree char *what = tied              ? g_strdup("tied copy: ")
                            : st->n_chunks > 1 ? g_strdup_printf("chunk %d: ", k)
                                               : g_strdup("");
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
  gboolean embed = holds(st, pp->tied_embed);
  gboolean head = holds(st, pp->tied_head);
  if (st->zero != NULL)
    st->last_reduce = st_zero_last_reduce(st->zero);
  /* The gradients every tensor-parallel rank computes partial sums of, one
   * all-reduce per chunk on the compute stream (ordered with the passes'
   * collectives on "tp"), once the data-parallel reductions are done. */
  for (int c = st->n_chunks - 1; pp->tp != NULL && c >= 0; c--) {
    const Chunk *ch = &st->chunks[c];
    int64_t partial = 0;
    for (int i = ch->lo; i < ch->hi; i++)
      partial += st_layer_tp_partial_params(&pp->model->layers[i]);
    if (partial == 0)
      continue;
    StOp op = st_op_coll(st->compute, ST_COLL_ALL_REDUCE, pp->tp->comm, partial * pp->bytes.grad);
    op.label = st_program_label(st->p, "partial grads");
    st_op_moves(&op, ST_DATA_TP_GRADS, ch->lo, ch->hi - 1);
    st_program_begin(st->p, &op);
    if (st->last_reduce != NONE)
      st_program_after(st->p, st->last_reduce);
    st->last_reduce = st_program_commit(st->p);
  }
  if (pp->tied_copy && (embed || head)) {
    /* Under ZeRO each side sums its shard: the two shard the embedding
     * alike over data-parallel groups of one size. */
    int64_t elems = st->zero != NULL ? st_shard(pp->tied_params, pp->n_data)
                                     : st_sparse_nnz(sp, pp->tied_params);
    StOp op = st_op_coll(st->comm, ST_COLL_ALL_REDUCE, st->comms->tied, elems * pp->bytes.grad);
    op.label = st_program_label(st->p, "tied embedding");
    st_op_moves(&op, st->zero != NULL       ? ST_DATA_GRADS_SHARD
                     : st_sparse_on(sp)     ? ST_DATA_GRADS_PACKED
                                            : ST_DATA_GRADS,
                pp->tied_embed, pp->tied_embed);
    st_program_begin(st->p, &op);
    if (st->last_reduce != NONE)
      st_program_after(st->p, st->last_reduce);
    st->last_reduce = st_program_commit(st->p);
  }
  if (st->zero != NULL) {
    st_zero_emit_step(st->zero, st->last_reduce);
    return;
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

/* A stream of chunk c: "NAME", or "NAME cC" with several chunks. */
static int
chunk_stream(Stage *st, const char *name, int c)
{
  g_autofree char *text =
    st->n_chunks > 1 ? g_strdup_printf("%s c%d", name, c) : g_strdup(name);
  return st_program_add_stream(st->p, text, 0);
}

/* The layers of the stage's chunks cut where expert layers start or end:
 * spans in layer order, each named by its chunk and kind (transfer full:
 * the prefixes). */
static int
runs(const Stage *st, StZeroSpan *spans)
{
  const StPipe *pp = st->pp;
  int n = 0;
  for (int c = 0; c < st->n_chunks; c++)
    for (int i = st->chunks[c].lo; i < st->chunks[c].hi;) {
      gboolean experts = st_pipe_is_expert(pp, i);
      int j = i + 1;
      while (j < st->chunks[c].hi && st_pipe_is_expert(pp, j) == experts)
        j++;
      g_autofree char *chunk = st->n_chunks > 1 ? g_strdup_printf("chunk %d", c) : g_strdup("");
      char *prefix = !experts && st->n_chunks == 1 ? g_strdup("")
                     : experts ? g_strdup_printf("%s%sexperts: ", chunk, *chunk ? " " : "")
                               : g_strdup_printf("%s: ", chunk);
      spans[n++] = (StZeroSpan){.prefix = prefix, .first = i, .last = j - 1};
      i = j;
    }
  return n;
}

StProgram *
st_pipe_stage_program(const StPipe *pp, int s, int ep_index, const StPipeComms *comms)
{
  int S = pp->n_stages, M = pp->n_micro, V = MAX(pp->n_chunks, 1);
  g_return_val_if_fail(V <= CHUNKS_MAX, NULL);
  g_autofree char *name = pp->ep > 1 ? g_strdup_printf("stage %d ep %d", s, ep_index)
                                     : g_strdup_printf("stage %d", s);
  Stage st = {
    .ep_index = ep_index,
    .pp = pp,
    .comms = comms,
    .p = st_program_new(name),
    .s = s,
    .n_chunks = V,
    .lo = pp->first[s],
    .hi = pp->first[st_pipe_chunk_at(pp, s, V - 1) + 1],
    .last_reduce = NONE,
    .act_offload = -1,
    .last_pass = NONE,
    .offload_gate = ST_OFFLOAD_GATE_INIT,
  };
  st.compute = st_program_add_stream(st.p, "compute", 0);
  for (int c = 0; c < V; c++) {
    Chunk *ch = &st.chunks[c];
    int k = st_pipe_chunk_at(pp, s, c);
    *ch = (Chunk){k, pp->first[k], pp->first[k + 1], -1, -1, -1, -1};
    if (crosses(pp, k, -1))
      ch->recv_act = chunk_stream(&st, "recv act", c);
    if (crosses(pp, k, +1)) {
      ch->send_act = chunk_stream(&st, "send act", c);
      ch->recv_grad = chunk_stream(&st, "recv grad", c);
    }
    if (crosses(pp, k, -1))
      ch->send_grad = chunk_stream(&st, "send grad", c);
  }
  st.comm = st_program_add_stream(st.p, "comm", 0);
  st.tp_overlap = pp->tp != NULL && pp->tp->overlap
                    ? st_program_add_stream(st.p, "tp overlap", 0) : -1;
  st.cp_stream = pp->tp != NULL && pp->tp->cp != NULL && pp->tp->cp->kind == ST_CP_RING
                   ? st_program_add_stream(st.p, "cp", 0) : -1;
  int offload = pp->options->offload_activations;
  if (offload > 0)
    st.act_offload = st_program_add_stream(st.p, "act offload", 0);

  /* What it keeps: its layers' states but other EP ranks' experts'. */
  int L = pp->model->n_layers;
  g_autofree int64_t *held = g_new0(int64_t, L), *held_nnz = g_new0(int64_t, L);
  int64_t params = 0, nnz = 0;
  for (int c = 0; c < V; c++)
    for (int i = st.chunks[c].lo; i < st.chunks[c].hi; i++) {
      if (st_pipe_is_expert(pp, i) && pp->expert_owner[i] != ep_index)
        continue;
      held[i] = pp->owned[i];
      held_nnz[i] = pp->owned_nnz[i];
      params += held[i];
      nnz += held_nnz[i];
    }
  st.elems = held;
  /* Runs of layers reduced over one group (experts over theirs), each
   * chunk's from its last: buckets in backward order, never across runs. */
  StZeroSpan spans[2 * CHUNKS_MAX];
  int n_spans = runs(&st, spans);
  g_autoptr(GArray) buckets = g_array_new(FALSE, FALSE, sizeof(StBucket));
  for (int k = n_spans - 1; k >= 0; k--) {
    g_autoptr(GArray) of_run = st_grad_buckets_of(held_nnz, spans[k].first, spans[k].last + 1,
                                                  pp->options->bucket_bytes, pp->bytes.grad);
    g_array_append_vals(buckets, of_run->data, of_run->len);
  }
  st.buckets = (const StBucket *)buckets->data;
  st.n_buckets = (int)buckets->len;
  g_autofree int *bucket_of_last = g_new(int, L), *router_of = g_new(int, L);
  for (int i = 0; i < L; i++)
    bucket_of_last[i] = router_of[i] = -1;
  for (int b = 0; b < st.n_buckets; b++)
    bucket_of_last[st.buckets[b].last] = b;
  st.bucket_of_last = bucket_of_last;
  g_autoptr(StZero) zero = NULL;
  if (pp->zero_stage > 0) {
    gboolean stage3 = pp->zero_stage == 3;
    int gather_stream = stage3 ? st_program_add_stream(st.p, "gather", 0) : st.comm;
    for (int k = 0; k < n_spans; k++) {
      gboolean experts = st_pipe_is_expert(pp, spans[k].first);
      spans[k].reduce_comm = experts ? comms->expert_data : comms->data;
      spans[k].gather_comm = stage3 ? (experts ? comms->expert_data_gather : comms->data_gather)
                                    : spans[k].reduce_comm;
      spans[k].n = experts ? pp->n_data / pp->ep : pp->n_data;
    }
    StZeroSpec spec = {
      .program = st.p,
      .model = pp->model,
      .bytes = pp->bytes,
      .stage = pp->zero_stage,
      .n = pp->n_data,
      .prefetch = pp->options->prefetch,
      .reshard = (StReshard)pp->options->reshard,
      .compute = st.compute,
      .reduce_stream = st.comm,
      .gather_stream = gather_stream,
      .elems = held,
      .spans = spans,
      .n_spans = n_spans,
      .bucket_bytes = pp->options->bucket_bytes,
      .overlap_param_gather = st_options_overlap_param_gather(pp->options),
      .last_micro = M - 1,
      .defer_sync = pp->zero_stage >= 2 && st_options_defer_grad_sync(pp->options),
      .offload = pp->offload,
    };
    if (pp->offload) {
      spec.copy_stream = st_program_add_stream(st.p, "offload", 0);
      spec.host_stream = st_program_add_host_stream(st.p, "cpu");
    }
    zero = st_zero_new(&spec);
    st.zero = zero;
    st.hooks = st_zero_hooks(zero);
  } else {
    add_states(&st, params, nnz);
  }

  /* Every micro-batch runs the stage's layers; each chunk's boundaries with
   * its neighbours are received and sent. */
  g_autofree int *batch = g_new0(int, L);
  g_autofree gboolean *moved = g_new0(gboolean, L + 1);
  for (int c = 0; c < V; c++) {
    const Chunk *ch = &st.chunks[c];
    for (int i = ch->lo; i < ch->hi; i++)
      batch[i] = pp->options->micro_batch;
    moved[ch->lo] = crosses(pp, ch->k, -1);
    moved[ch->hi] = crosses(pp, ch->k, +1);
    /* An MoE segment's experts run outside tensors.h: the router's output
     * leaves by the dispatch and the layer after them is made by the
     * combine (strategy_pipeline_moe.c). */
    for (int i = ch->lo; i < ch->hi; i++) {
      int experts = st_pipe_moe_experts(pp, i);
      if (experts == 0)
        continue;
      for (int e = i + 1; e <= i + experts; e++)
        batch[e] = 0;
      moved[i + 1] = moved[i + experts + 1] = TRUE;
      router_of[i + experts] = i;
    }
  }
  st.moe_router_of = router_of;
  g_autofree uint32_t *saved = g_new(uint32_t, 2 * (gsize)M * L);
  g_autofree uint32_t **saved_of = g_new(uint32_t *, 2 * (gsize)M);
  for (int k = 0; k < 2 * M * L; k++)
    saved[k] = NONE;
  for (int m = 0; m < 2 * M; m++)
    saved_of[m] = saved + (gsize)m * L;
  st.moe_saved = saved_of;
  st.moe_slots = saved_of + M;
  g_autofree StTensors **tensors = g_new(StTensors *, M);
  for (int m = 0; m < M; m++) {
    StTensorsSpec spec = {
      .model = pp->model,
      .micro = m,
      .dtype = pp->bytes.activation,
      .grad_bytes = pp->bytes.grad,
      .batch = batch,
      .moved = moved,
      .recompute = st_recompute_plan(pp->options),
      .loss_in_place = st_options_framework(pp->options)->loss_in_place,
      .loss_16bit = st_options_framework(pp->options)->loss_16bit,
      .loss_autograd = st_options_framework(pp->options)->loss_autograd,
      .offload = offload,
    };
    tensors[m] = st_tensors_new(st.p, &spec);
  }
  st.tensors = tensors;

  g_autoptr(GArray) order = V > 1 && !st_pipe_vshape(pp) ? st_pipe_order_interleaved(s, S, M, V)
                                                         : st_pipe_order(pp->order, s, S, M);
  g_autofree uint32_t *b_op = g_new(uint32_t, L);
  for (int i = 0; i < L; i++)
    b_op[i] = NONE;
  st.b_op = b_op;
  for (guint k = 0; k < order->len; k++) {
    const StPipeSlot *slot = &g_array_index(order, StPipeSlot, k);
    if (slot->fwd && slot->pair) {
      /* DualPipe's F&B (dualpipev.py, _forward_backward_chunk): both
       * receives posted and waited for before either pass, both sends
       * after both passes. */
      const StPipeSlot *b = &g_array_index(order, StPipeSlot, ++k);
      g_assert(!b->fwd && b->pair);
      uint32_t grad = recv_backward(&st, b->micro, b->chunk);
      emit_forward(&st, slot->micro, slot->chunk, grad, FALSE);
      emit_backward(&st, b->micro, b->chunk, b->half, grad);
      send_forward(&st, slot->micro, slot->chunk, st.last_pass);
    } else if (slot->fwd) {
      emit_forward(&st, slot->micro, slot->chunk, NONE, TRUE);
    } else if (slot->half == ST_PASS_BWD_WEIGHT) {
      emit_weights(&st, slot->micro, slot->chunk);
    } else {
      emit_backward(&st, slot->micro, slot->chunk, slot->half,
                    recv_backward(&st, slot->micro, slot->chunk));
    }
  }
  emit_update(&st, params, nnz);
  for (int m = 0; m < M; m++)
    st_tensors_free(tensors[m]);
  for (int k = 0; k < n_spans; k++)
    g_free((char *)spans[k].prefix);
  return st.p;
}
