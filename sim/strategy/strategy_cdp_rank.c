/* strategy_cdp_rank.c: one rank's step of cyclic DP (see cdp.h): the passes
 * of its stages for each micro-batch, with the activations passed between
 * stages that run on other ranks; a holder's buffers and optimizer steps; a
 * stage's gradient reduced among its holders. Then plain CDP, where every
 * worker holds every stage, as a DP replica does.
 *
 * Memory: every tensor of a micro-batch as the executor makes it
 * (tensors.h, as dp and zero have them), the stages' boundaries received
 * and sent under model parallelism.
 */
#include "strategy/cdp.h"

/* ---- marks and gates ------------------------------------------------------- */

void
cdp_mark_init(CdpMark *m)
{
  m->op = CDP_NONE;
  m->ref = CDP_NONE;
}

uint32_t
cdp_mark_prev(StProgram *p, CdpMark *m)
{
  if (m->op != CDP_NONE)
    return m->op;
  if (m->ref == CDP_NONE)
    m->ref = st_program_forward_ref(p);
  return m->ref;
}

void
cdp_mark_set(StProgram *p, CdpMark *m, uint32_t op)
{
  g_assert(m->op == CDP_NONE && op != CDP_NONE);
  m->op = op;
  if (m->ref != CDP_NONE)
    st_program_resolve(p, m->ref, op);
}

void
cdp_add_gate(CdpGate *gates, int *n, CdpMarkId mark, gboolean prev)
{
  g_assert(*n < CDP_GATES_MAX);
  gates[(*n)++] = (CdpGate){(uint8_t)mark, (uint8_t)(prev ? 1 : 0)};
}

static void
apply_gates(StProgram *p, CdpStage *st, const CdpGate *gates, int n)
{
  for (int i = 0; i < n; i++) {
    CdpMark *m = &st->marks[gates[i].mark];
    if (gates[i].prev) {
      st_program_after_prev_step(p, cdp_mark_prev(p, m));
    } else {
      g_assert(m->op != CDP_NONE); /* a same-step gate is built before the pass */
      st_program_after(p, m->op);
    }
  }
}

/* ---- the rank ------------------------------------------------------------------ */

int
cdp_rank_of(const CdpPlan *c, int worker, int stage)
{
  return c->mp ? stage * c->n + worker : worker;
}

int
cdp_stream(CdpRank *r, int *slot, const char *name, int priority)
{
  if (*slot < 0)
    *slot = st_program_add_stream(r->p, name, priority);
  return *slot;
}

int
cdp_peer_stream(CdpRank *r, const char *what, int peer, int stage)
{
  g_autofree char *name = stage >= 0 ? g_strdup_printf("%s%d s%d", what, peer, stage)
                                     : g_strdup_printf("%s%d", what, peer);
  if (r->p->streams->len >= 48 && !g_hash_table_contains(r->peer_streams, name)) {
    g_free(name);
    name = g_strdup_printf("%s(more)", what);
  }
  gpointer found = g_hash_table_lookup(r->peer_streams, name);
  if (found != NULL)
    return GPOINTER_TO_INT(found) - 1;
  int stream = st_program_add_stream(r->p, name, 0);
  g_hash_table_insert(r->peer_streams, g_steal_pointer(&name), GINT_TO_POINTER(stream + 1));
  return stream;
}

void
cdp_rank_init(CdpRank *r, const CdpPlan *c, int rank, int worker, int lo, int hi,
              const CdpHooks *hooks, gpointer data)
{
  g_autofree char *name = c->mp ? g_strdup_printf("cdp w%d s%d", worker, lo)
                                : g_strdup_printf("cdp w%d", worker);
  *r = (CdpRank){
    .c = c,
    .p = st_program_new(name),
    .rank = rank,
    .worker = worker,
    .lo = lo,
    .hi = hi,
    .update = -1,
    .grads_in = -1,
    .grads_out = -1,
    .total_in = -1,
    .total_out = -1,
    .sync = -1,
    .peer_streams = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
    .world = st_schedule_find_comm(c->schedule, "world"),
    .holders_comm = st_schedule_find_comm(c->schedule, "holders"),
    .st = g_new0(CdpStage, c->s),
    .hooks = hooks,
    .data = data,
  };
  r->compute = st_program_add_stream(r->p, "compute", 0);
  for (int l = 0; l < c->s; l++) {
    CdpStage *st = &r->st[l];
    st->delta = cdp_delta(c, worker, l);
    st->grads_step = st->relayed = CDP_NONE;
    for (int k = 0; k < CDP_MARK_N; k++)
      cdp_mark_init(&st->marks[k]);
  }
}

void
cdp_rank_clear(CdpRank *r)
{
  g_clear_pointer(&r->p, st_program_free);
  g_clear_pointer(&r->st, g_free);
  g_clear_pointer(&r->peer_streams, g_hash_table_unref);
}

int64_t
cdp_batch_bytes(const CdpPlan *c, int64_t per_sample)
{
  return st_model_bytes_as(c->model, per_sample, c->bytes.activation) * c->mb;
}

uint32_t
cdp_stage_buffer(CdpRank *r, int l, const char *what, StMemCategory category, int64_t bytes,
                 gboolean persistent, StData data)
{
  g_autofree char *name = g_strdup_printf("%s s%d", what, l);
  uint32_t b = st_program_add_buffer(r->p, name, category, bytes, persistent);
  st_program_buffer_holds(r->p, b, data, r->c->first[l], r->c->first[l + 1] - 1, -1, 1);
  return b;
}

/* ---- holders and their updates ------------------------------------------------- */

CdpSlots
cdp_slots(const CdpPlan *c, unsigned seen, gboolean serves)
{
  gboolean has0 = (seen & 1) != 0, has1 = (seen & 2) != 0;
  if (!has1)
    return (CdpSlots){1, 1}; /* every reader waits for w_t: update in place */
  if (serves)
    return (CdpSlots){2, 2}; /* others wait for w_t while w_{t-1} is still read: make it
                                as soon as the gradient is in, beside the old one */
  if (!has0 && c->rule == CDP_RULE_V1)
    return (CdpSlots){1, 2}; /* update after the backward; the old gradient waits */
  return (CdpSlots){2, 1};   /* v2: the new version made beside the one still read */
}

void
cdp_holder(CdpRank *r, int l, CdpSlots slots)
{
  const CdpPlan *c = r->c;
  CdpStage *st = &r->st[l];
  int64_t n = c->params[l];
  st->role = CDP_ROLE_HOLDER;
  st->slots = slots;
  /* Two versions or two gradient buffers alternate by step (StBuffer.slot):
   * w_t and the gradient of step t live in slot t mod 2. */
  uint32_t w = cdp_stage_buffer(r, l, "params", ST_MEM_PARAMS, n * c->bytes.weight, TRUE,
                                ST_DATA_PARAMS);
  if (slots.versions == 2) {
    st_program_buffer_slot(r->p, w, 0);
    st_program_buffer_slot(r->p,
                           cdp_stage_buffer(r, l, "params (previous version)", ST_MEM_PARAMS,
                                            n * c->bytes.weight, TRUE, ST_DATA_PARAMS),
                           1);
  }
  uint32_t g = cdp_stage_buffer(r, l, "grads", ST_MEM_GRADS, n * c->bytes.grad, TRUE,
                                ST_DATA_GRADS);
  if (slots.grads == 2) {
    st_program_buffer_slot(r->p, g, 0);
    st_program_buffer_slot(r->p,
                           cdp_stage_buffer(r, l, "grads (previous step)", ST_MEM_GRADS,
                                            n * c->bytes.grad, TRUE, ST_DATA_GRADS),
                           1);
  }
  cdp_stage_buffer(r, l, "optimizer states", ST_MEM_OPTIMIZER, n * c->bytes.optimizer, TRUE,
                   ST_DATA_OPTIM);
  /* The forward waits for the version it reads: w_t from this step's update,
   * w_{t-1} from the last one. A backward that would write the gradient
   * buffer the update still reads waits for it. */
  cdp_add_gate(st->gate_f, &st->n_gate_f, CDP_MARK_UPDATE, st->delta == 1);
  if (slots.grads == 2)
    cdp_add_gate(st->gate_b, &st->n_gate_b, CDP_MARK_UPDATE, TRUE);
  else if (st->delta == 1)
    cdp_add_gate(st->gate_b, &st->n_gate_b, CDP_MARK_UPDATE, FALSE);
}

int
cdp_update_point(const CdpStage *st)
{
  if (st->delta == 0)
    return 0;
  if (st->slots.versions == 1)
    return 2;
  return st->slots.grads == 1 ? 1 : 0;
}

uint32_t
cdp_emit_update(CdpRank *r, int l, const uint32_t *after, int n_after,
                const uint32_t *after_prev, int n_after_prev)
{
  const CdpPlan *c = r->c;
  CdpStage *st = &r->st[l];
  /* Alone, a holder steps in program order on its compute stream, as an
   * optimizer does; when other ranks wait for the new version (a relay, a
   * shared device's guests) the update runs as soon as its gradient is in,
   * on a stream of its own that goes before the passes. */
  int stream = st->serves ? cdp_stream(r, &r->update, "update", 1) : r->compute;
  int64_t n = c->params[l];
  StOp op = st_op_elementwise(stream, ST_PASS_OPTIM, c->first[l], n,
                              n * c->bytes.optim_traffic);
  op.layer_last = c->first[l + 1] - 1;
  op.version = 1; /* reads w_{t-1} and the gradient of step t-1, makes w_t */
  g_autofree char *label = g_strdup_printf("stage %d", l);
  op.label = st_program_label(r->p, label);
  st_program_begin(r->p, &op);
  st_program_after_prev_step(r->p, cdp_mark_prev(r->p, &st->marks[CDP_MARK_TOTAL]));
  st_program_after_prev_step(r->p, cdp_mark_prev(r->p, &st->marks[CDP_MARK_B_LAST]));
  for (int i = 0; i < n_after; i++)
    st_program_after(r->p, after[i]);
  for (int i = 0; i < n_after_prev; i++)
    st_program_after_prev_step(r->p, after_prev[i]);
  if (cdp_update_point(st) == 2) /* in place, after this step's last read of w_{t-1} */
    st_program_after(r->p, st->marks[CDP_MARK_B_LAST].op);
  uint32_t id = st_program_commit(r->p);
  cdp_mark_set(r->p, &st->marks[CDP_MARK_UPDATE], id);
  return id;
}

/* ---- point to point and reduction ------------------------------------------------ */

StOp
cdp_p2p_op(CdpRank *r, gboolean send, int stream, int peer, int tag, int64_t bytes,
           StData data, int layer, int layer_last, const char *label)
{
  StOp op = send ? st_op_send(stream, r->world, peer, tag, bytes)
                 : st_op_recv(stream, r->world, peer, tag, bytes);
  if (data != ST_DATA_NONE)
    st_op_moves(&op, data, layer, layer_last);
  if (label != NULL)
    op.label = st_program_label(r->p, label);
  return op;
}

uint32_t
cdp_emit_p2p(CdpRank *r, gboolean send, int stream, int peer, int tag, int64_t bytes,
             StData data, int l, const char *label, const uint32_t *after, int n_after)
{
  const CdpPlan *c = r->c;
  gboolean whole = data != ST_DATA_NONE;
  /* A chain's partial sum arrives layer by layer, each layer's into a
   * buffer before it is added to the receiver's gradient: one buffer of the
   * stage's largest layer (opaque: the executor allocates it and receives
   * into it, exec/op_comm.c). */
  uint32_t got = CDP_NONE;
  if (!send && data == ST_DATA_GRADS) {
    int64_t largest = 0;
    for (int i = c->first[l]; i < c->first[l + 1]; i++)
      largest = MAX(largest, c->model->layers[i].params * c->bytes.grad);
    g_autofree char *name = g_strdup_printf("received grads s%d", l);
    if (largest > 0)
      got = st_program_add_buffer(r->p, name, ST_MEM_COMM, largest, FALSE);
  }
  StOp op = cdp_p2p_op(r, send, stream, peer, tag, bytes, data, whole ? c->first[l] : -1,
                       whole ? c->first[l + 1] - 1 : -1, label);
  st_program_begin(r->p, &op);
  for (int i = 0; i < n_after; i++)
    st_program_after(r->p, after[i]);
  if (got != CDP_NONE) {
    st_program_alloc(r->p, got);
    st_program_free_buffer(r->p, got);
  }
  return st_program_commit(r->p);
}

void
cdp_emit_reduction(CdpRank *r, int l, const int32_t *holders, int n, int me,
                   const uint32_t *after, int n_after)
{
  const CdpPlan *c = r->c;
  CdpStage *st = &r->st[l];
  CdpMark *total = &st->marks[CDP_MARK_TOTAL];
  int64_t bytes = c->params[l] * c->bytes.grad;
  g_autofree char *label = g_strdup_printf("grads s%d", l);
  g_autofree char *total_label = g_strdup_printf("total s%d", l);
  /* The gradient is ready once this rank's backward and its guests' are in. */
  g_autofree uint32_t *ready = g_new(uint32_t, n_after + 1);
  ready[0] = st->marks[CDP_MARK_B_LAST].op;
  for (int i = 0; i < n_after; i++)
    ready[i + 1] = after[i];
  if (n == 1) {
    /* The only holder: complete when the last contribution is in. The
     * update also waits for this rank's own backward (cdp_emit_update);
     * guests' events arrive in order on one stream, so the last is enough. */
    cdp_mark_set(r->p, total, n_after > 0 ? after[n_after - 1] : ready[0]);
    return;
  }
  if (c->reduce == CDP_REDUCE_COLLECTIVE) {
    StOp op = st_op_coll(cdp_stream(r, &r->grads_out, "grads out", 0), ST_COLL_ALL_REDUCE,
                         r->holders_comm, bytes);
    st_op_moves(&op, ST_DATA_GRADS, c->first[l], c->first[l + 1] - 1);
    op.label = st_program_label(r->p, label);
    st_program_begin(r->p, &op);
    for (int i = 0; i <= n_after; i++)
      st_program_after(r->p, ready[i]);
    cdp_mark_set(r->p, total, st_program_commit(r->p));
    return;
  }
  /* The chain: holders[0] sends its gradient to holders[1], which adds its
   * own (the receive adds, see cdp.h) and passes the sum on; the last holds
   * the total and sends it round to holders[0], 1, ..., n-2. Receives and
   * sends sit on streams of their own, so a send waiting for a late
   * receiver never holds up the next receive. */
  uint32_t got = CDP_NONE, sent = CDP_NONE;
  int tag = CDP_TAG(CDP_TAG_REDUCE, l);
  if (me > 0)
    got = cdp_emit_p2p(r, FALSE, cdp_stream(r, &r->grads_in, "grads in", 0), holders[me - 1],
                       tag, bytes, ST_DATA_GRADS, l, label, ready, n_after + 1);
  if (me < n - 1) {
    /* The first holder sends its own gradient once ready, the others the
     * sum once received. */
    int out = cdp_stream(r, &r->grads_out, "grads out", 0);
    sent = got != CDP_NONE ? cdp_emit_p2p(r, TRUE, out, holders[me + 1], tag, bytes,
                                          ST_DATA_GRADS, l, label, &got, 1)
                           : cdp_emit_p2p(r, TRUE, out, holders[me + 1], tag, bytes,
                                          ST_DATA_GRADS, l, label, ready, n_after + 1);
  }
  if (me == n - 1) {
    cdp_mark_set(r->p, total, got);
    cdp_emit_p2p(r, TRUE, cdp_stream(r, &r->total_out, "total out", 0), holders[0],
                 CDP_TAG(CDP_TAG_TOTAL, l), bytes, ST_DATA_GRADS_TOTAL, l, total_label, &got,
                 1);
    return;
  }
  /* The total overwrites this holder's gradient once its own sum has left. */
  uint32_t in = cdp_emit_p2p(r, FALSE, cdp_stream(r, &r->total_in, "total in", 0),
                             holders[me == 0 ? n - 1 : me - 1], CDP_TAG(CDP_TAG_TOTAL, l), bytes,
                             ST_DATA_GRADS_TOTAL, l, total_label, &sent, 1);
  cdp_mark_set(r->p, total, in);
  if (me + 1 < n - 1)
    cdp_emit_p2p(r, TRUE, cdp_stream(r, &r->total_out, "total out", 0), holders[me + 1],
                 CDP_TAG(CDP_TAG_TOTAL, l), bytes, ST_DATA_GRADS_TOTAL, l, total_label, &in,
                 1);
}

/* ---- the step ----------------------------------------------------------------------- */

/* A layer pass of stage `st` with the memory of `pm`, gated by `gates` and
 * `turn` (may be NULL). */
static uint32_t
emit_pass(CdpRank *r, StPass pass, int layer, int micro, CdpStage *st, const CdpGate *gates,
          int n_gates, const CdpGate *more, int n_more, const StDep *turn, const StPassMem *pm)
{
  StOp op = st_op_comp(r->compute, pass, layer, micro, r->c->mb);
  op.version = st->delta;
  st_program_begin(r->p, &op);
  apply_gates(r->p, st, gates, n_gates);
  apply_gates(r->p, st, more, n_more);
  if (turn != NULL && turn->step_offset < 0)
    st_program_after_prev_step(r->p, turn->op);
  else if (turn != NULL)
    st_program_after(r->p, turn->op);
  st_pass_mem_apply(r->p, pm);
  return st_program_commit(r->p);
}

/* Activations to or from the rank running the next or previous stage. */
static uint32_t
emit_act_p2p(CdpRank *r, gboolean send, int peer_stage, int tag, int64_t bytes, StData data,
             int layer, int micro, uint32_t alloc, uint32_t free)
{
  StOp op = cdp_p2p_op(r, send, r->compute, cdp_rank_of(r->c, r->worker, peer_stage), tag,
                       bytes, data, layer, layer, data == ST_DATA_OUTPUT ? "act" : "grad");
  op.micro = micro;
  st_program_begin(r->p, &op);
  if (alloc != CDP_NONE)
    st_program_alloc(r->p, alloc);
  if (free != CDP_NONE)
    st_program_free_buffer(r->p, free);
  return st_program_commit(r->p);
}

/* One micro-batch's passes over the rank's layers [lo, end) (tensors.h:
 * what each allocates and frees), with the activations to and from the
 * ranks of the neighbouring stages under model parallelism. */
static void
emit_micro(CdpRank *r, int micro, const int *batch, const gboolean *moved)
{
  const CdpPlan *c = r->c;
  const StModel *m = c->model;
  const CdpHooks *h = r->hooks;
  gboolean first_micro = micro == 0, last_micro = micro == c->a - 1;
  int lo = c->first[r->lo], end = c->first[r->hi]; /* the rank's layers [lo, end) */
  StTensorsSpec spec = {
    .model = m,
    .micro = micro,
    .dtype = c->bytes.activation,
    .grad_bytes = c->bytes.grad,
    .batch = batch,
    .moved = moved,
    .recompute = st_recompute_plan(c->options),
  };
  g_autoptr(StTensors) t = st_tensors_new(r->p, &spec);
  if (r->lo > 0)
    emit_act_p2p(r, FALSE, r->lo - 1, CDP_TAG_ACT,
                 cdp_batch_bytes(c, m->layers[lo - 1].out_bytes), ST_DATA_OUTPUT, lo - 1, micro,
                 st_tensors_move_in(t, lo, FALSE, ST_MEM_ACTIVATIONS), CDP_NONE);
  for (int l = r->lo; l < r->hi; l++) {
    CdpStage *st = &r->st[l];
    if (first_micro && h->before_pass != NULL)
      h->before_pass(r, l, FALSE);
    StDep turn;
    gboolean turns = h->turn_in != NULL && h->turn_in(r, l, micro, FALSE, &turn);
    uint32_t op = CDP_NONE;
    for (int i = c->first[l]; i < c->first[l + 1]; i++) {
      StPassMem pm = {0};
      st_tensors_pass(t, ST_PASS_FWD, i, &pm);
      gboolean gated = first_micro && i == c->first[l];
      op = emit_pass(r, ST_PASS_FWD, i, micro, st, st->gate_f, gated ? st->n_gate_f : 0, NULL, 0,
                     turns && i == c->first[l] ? &turn : NULL, &pm);
      if (gated) {
        cdp_mark_set(r->p, &st->marks[CDP_MARK_F_FIRST], op);
        if (h->after_forward != NULL)
          h->after_forward(r, l);
      }
    }
    if (h->turn_out != NULL && op != CDP_NONE)
      h->turn_out(r, l, micro, FALSE, op);
  }
  if (r->hi < c->s) {
    st_tensors_sent(t, end,
                    emit_act_p2p(r, TRUE, r->hi, CDP_TAG_ACT,
                                 cdp_batch_bytes(c, m->layers[end - 1].out_bytes), ST_DATA_OUTPUT,
                                 end - 1, micro, CDP_NONE, st_tensors_move_out(t, end, FALSE)));
    /* The gradient of the next stage's input, as that stage sends it. */
    emit_act_p2p(r, FALSE, r->hi, CDP_TAG_GRAD, cdp_batch_bytes(c, m->layers[end].in_bytes),
                 ST_DATA_INPUT_GRAD, end, micro,
                 st_tensors_move_in(t, end, TRUE, ST_MEM_WORKSPACE), CDP_NONE);
  }
  for (int l = r->hi - 1; l >= r->lo; l--) {
    CdpStage *st = &r->st[l];
    if (first_micro && h->before_pass != NULL)
      h->before_pass(r, l, TRUE);
    StDep turn;
    gboolean turns = h->turn_in != NULL && h->turn_in(r, l, micro, TRUE, &turn);
    uint32_t id = CDP_NONE;
    for (int i = c->first[l + 1] - 1; i >= c->first[l]; i--) {
      gboolean opens = first_micro && i == c->first[l + 1] - 1;
      gboolean closes = last_micro && i == c->first[l];
      const StDep *first_turn = turns && i == c->first[l + 1] - 1 ? &turn : NULL;
      StPassMem pm = {0};
      if (st_tensors_recomputes(t, i)) {
        /* before the backward, on the weights it reads, behind its gates */
        st_tensors_pass(t, ST_PASS_RECOMPUTE, i, &pm);
        emit_pass(r, ST_PASS_RECOMPUTE, i, micro, st, st->gate_b, opens ? st->n_gate_b : 0,
                  NULL, 0, first_turn, &pm);
        first_turn = NULL;
        pm = (StPassMem){0};
      }
      st_tensors_pass(t, ST_PASS_BWD, i, &pm);
      if (opens)
        st_pass_mem_alloc(&pm, st->grads_step);
      if (closes)
        st_pass_mem_free(&pm, st->relayed);
      id = emit_pass(r, ST_PASS_BWD, i, micro, st, st->gate_b, opens ? st->n_gate_b : 0,
                     st->gate_b_last, closes ? st->n_gate_b_last : 0, first_turn, &pm);
      if (opens)
        cdp_mark_set(r->p, &st->marks[CDP_MARK_B_FIRST], id);
      if (closes)
        cdp_mark_set(r->p, &st->marks[CDP_MARK_B_LAST], id);
    }
    if (h->turn_out != NULL && id != CDP_NONE)
      h->turn_out(r, l, micro, TRUE, id);
    if (last_micro && h->after_backward != NULL)
      h->after_backward(r, l);
  }
  if (r->lo > 0)
    emit_act_p2p(r, TRUE, r->lo - 1, CDP_TAG_GRAD, cdp_batch_bytes(c, m->layers[lo].in_bytes),
                 ST_DATA_INPUT_GRAD, lo, micro, CDP_NONE, st_tensors_move_out(t, lo, TRUE));
}

StProgram *
cdp_rank_finish(CdpRank *r)
{
  const CdpPlan *c = r->c;
  int L = c->model->n_layers, lo = c->first[r->lo], end = c->first[r->hi];
  g_autofree int *batch = g_new0(int, L);
  g_autofree gboolean *moved = g_new0(gboolean, L + 1);
  for (int i = lo; i < end; i++)
    batch[i] = c->mb;
  moved[lo] = lo > 0;
  moved[end] = end < L;
  if (r->hooks->step_begin != NULL)
    r->hooks->step_begin(r);
  for (int micro = 0; micro < c->a; micro++)
    emit_micro(r, micro, batch, moved);
  /* Every mark handed out as a forward reference must have been built. */
  for (int l = r->lo; l < r->hi; l++)
    for (int k = 0; k < CDP_MARK_N; k++)
      g_assert(r->st[l].marks[k].ref == CDP_NONE || r->st[l].marks[k].op != CDP_NONE);
  return g_steal_pointer(&r->p);
}

/* ---- plain CDP: every worker a replica --------------------------------------------- */

typedef struct {
  int32_t *workers; /* [n]: 0 .. n-1, the holders of every stage in chain order */
} Replicas;

static void
replica_before(CdpRank *r, int l, gboolean backward)
{
  const CdpStage *st = &r->st[l];
  if (st->role == CDP_ROLE_HOLDER && cdp_update_point(st) == (backward ? 1 : 0))
    cdp_emit_update(r, l, NULL, 0, NULL, 0);
}

static void
replica_after(CdpRank *r, int l)
{
  const Replicas *rp = r->data;
  const CdpStage *st = &r->st[l];
  if (st->role != CDP_ROLE_HOLDER)
    return;
  cdp_emit_reduction(r, l, rp->workers, r->c->n, r->worker, NULL, 0);
  if (cdp_update_point(st) == 2)
    cdp_emit_update(r, l, NULL, 0, NULL, 0);
}

gboolean
cdp_build_replicas(CdpPlan *c, GError **error)
{
  (void)error;
  StSchedule *s = c->schedule;
  st_schedule_add_world(s, "world");
  st_schedule_add_world(s, "holders");
  g_autofree int32_t *workers = g_new(int32_t, c->n);
  for (int k = 0; k < c->n; k++)
    workers[k] = k;
  Replicas rp = {workers};
  static const CdpHooks hooks = {NULL, replica_before, NULL, replica_after, NULL, NULL};
  for (int k = 0; k < c->n; k++) {
    CdpRank r;
    cdp_rank_init(&r, c, k, k, 0, c->s, &hooks, &rp);
    for (int l = 0; l < c->s; l++)
      if (c->params[l] > 0)
        cdp_holder(&r, l, cdp_slots(c, 1u << r.st[l].delta, FALSE));
    s->ranks[k].program = st_schedule_add_program(s, cdp_rank_finish(&r));
    cdp_rank_clear(&r);
  }
  return TRUE;
}
