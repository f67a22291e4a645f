/* strategy_burst.c: DeepPool burst parallelism (Park et al., MLSys 2022).
 *
 * The planner (burst/burst.h) gives every layer i a GPU count w_i, a power
 * of two, from the same cost models the engine uses. Each micro-batch of
 * M = ranks x micro-batch samples runs layer i on ranks 0 .. w_i - 1; at
 * width w, rank j holds the samples s with s % w == j. Between layers of
 * widths a != b (small = min, k = max / small), rank j < small keeps its own
 * samples (a local copy into the next layer's input) and exchanges the rest
 * point to point with ranks j + m * small, m = 1 .. k-1: the narrow side
 * gathers, the wide side scatters; backward moves the gradients the other
 * way. After the last micro-batch's backward of a layer, its gradients are
 * all-reduced within its w_i ranks; each rank then steps the parameters of
 * the layers it ran. Ranks outside a narrow layer's set idle meanwhile:
 * multiplexing (strategy_multiplex.c) puts background work there.
 *
 * Streams per rank: compute; sync (gradient all-reduces); send and recv
 * (transfers in program order, so a rank's receives and sends of one
 * boundary follow each other). Memory: every tensor of a micro-batch as the
 * executor makes it (tensors.h, as dp has them, at this rank's share of each
 * layer), plus the tensors of a change of width: the next layer's input
 * assembled from the local copy and what arrives (comm), the same for the
 * gradient of an output, and on the narrow side a packing buffer around
 * each transfer (comm).
 * A model with branches (model.h: `inputs`) or a plan whose branches are
 * packed on other GPUs (burst_pack.c: a set from rank first_rank) moves
 * samples along the model's edges between any two sets instead
 * (strategy_burst_dag.c); those programs are not shared and count the
 * model states and each layer's kept activations in memory.
 * Ranks with the same shares everywhere share a program. For the executor,
 * every buffer says what it holds and every transfer and copy what it moves
 * (StData of a layer), and every layer pass, transfer and copy its samples
 * (st_op_samples: every w-th of the micro-batch from the rank's own index,
 * written relative to it so that programs stay shared); the simulator
 * reads none of it.
 */
#include "strategy/strategy_burst.h"

#include <string.h>

#include "base/util.h"

/* Bytes per sample of layer i's output, in the activation dtype. */
int64_t
st_burst_out_bytes(const Burst *b, int i)
{
  return st_model_bytes_as(b->m, b->m->layers[i].out_bytes, b->bytes.activation);
}

static int
comm_for(Burst *b, GHashTable *table, int key, const char *name, const int32_t *color)
{
  gpointer found;
  if (g_hash_table_lookup_extended(table, GINT_TO_POINTER(key), NULL, &found))
    return GPOINTER_TO_INT(found);
  int c = st_schedule_add_comm(b->s, name, color);
  g_hash_table_insert(table, GINT_TO_POINTER(key), GINT_TO_POINTER(c));
  return c;
}

/* Groups {c, c + small, c + 2 small, ...} of the first `large` ranks. */
static int
xcomm(Burst *b, int small, int large)
{
  g_autofree int32_t *color = g_new(int32_t, b->s->n_ranks);
  for (int r = 0; r < b->s->n_ranks; r++)
    color[r] = r < large ? r % small : -1;
  g_autofree char *name = g_strdup_printf("burst %d/%d", small, large);
  return comm_for(b, b->xcomm, small << 16 | large, name, color);
}

/* The ranks lo .. lo + w - 1, for their gradient all-reduce. */
int
st_burst_scomm(Burst *b, int lo, int w)
{
  g_autofree int32_t *color = g_new(int32_t, b->s->n_ranks);
  for (int r = 0; r < b->s->n_ranks; r++)
    color[r] = r >= lo && r < lo + w ? 0 : -1;
  g_autofree char *name =
    lo == 0 ? g_strdup_printf("burst sync %d", w) : g_strdup_printf("burst sync %d@%d", w, lo);
  return comm_for(b, b->scomm, lo << 16 | w, name, color);
}

/* One transfer op of `samples` samples, the wide rank's share (every
 * `large`-th from `first`, relative to this rank: st_op_samples); `after`
 * (NONE: nothing) and the buffer effects. On the narrow side, the samples
 * of one peer are every k-th of the rank's tensor: the executor packs them
 * into a contiguous buffer of the transfer's size around the send or the
 * receive (exec/op_move.c), which the op allocates and frees (`packed`). */
static uint32_t
transfer(Emit *e, StOp op, int micro, int samples, int first, int large, StData data, int layer,
         uint32_t after, uint32_t after2, uint32_t alloc, uint32_t release, gboolean packed)
{
  uint32_t pack = NONE;
  if (packed) {
    g_autofree char *name = g_strdup_printf("packed %s %s m%d",
                                            data == ST_DATA_OUTPUT ? "samples" : "gradients",
                                            e->b->m->layers[layer].name, micro);
    pack = st_program_add_buffer(e->p, name, ST_MEM_COMM, op.bytes, FALSE);
  }
  op.micro = micro;
  op.batch = samples;
  st_op_moves(&op, data, layer, layer);
  st_op_samples(&op, (int)(micro * e->b->M) + first, large);
  st_program_begin(e->p, &op);
  if (after != NONE)
    st_program_after(e->p, after);
  if (after2 != NONE)
    st_program_after(e->p, after2);
  if (alloc != NONE)
    st_program_alloc(e->p, alloc);
  if (pack != NONE) {
    st_program_alloc(e->p, pack);
    st_program_free_buffer(e->p, pack);
  }
  if (release != NONE)
    st_program_free_buffer(e->p, release);
  return st_program_commit(e->p);
}

uint32_t
st_burst_transfer(Emit *e, StOp op, int micro, int samples, int first, int large, StData data,
                  int layer, uint32_t after, uint32_t after2, uint32_t alloc, uint32_t release,
                  gboolean packed)
{
  return transfer(e, op, micro, samples, first, large, data, layer, after, after2, alloc, release,
                  packed);
}

/* The last op taking boundary k's activations out (tensors.h). */
static void
sent(Emit *e, int k, gboolean backward, uint32_t op)
{
  if (!backward)
    st_tensors_sent(e->t, k, op);
}

/* Moves boundary k (`backward`: its gradient) of `P` bytes per sample from
 * width `a` to width `bw` for this rank; its data at width a (when it holds
 * any) is complete after `src_ready`. The tensors come from tensors.h: the
 * one at width a freed by the last op taking it out, the one at width bw
 * made by the first op bringing it in (assembled from the local copy and
 * what arrives: comm; received whole: the layer's own tensor). Returns the
 * op after which the data at width bw is complete. */
static uint32_t
exchange(Emit *e, int micro, int a, int bw, int64_t P, int tag, gboolean backward, int k,
         uint32_t src_ready)
{
  Burst *b = e->b;
  int j = e->j, small = MIN(a, bw), large = MAX(a, bw), n_peers = large / small;
  if (j >= large)
    return NONE;
  StData data = backward ? ST_DATA_INPUT_GRAD : ST_DATA_OUTPUT;
  int layer = backward ? k : k - 1; /* whose output or input gradient moves */
  int comm = xcomm(b, small, large);
  StMemCategory whole = backward ? ST_MEM_WORKSPACE : ST_MEM_ACTIVATIONS;
  uint32_t copy = NONE;
  if (j < small) {
    /* What it already holds of its new share stays on its GPU: a local copy
     * into the new tensor (its old one goes once the rest has left). */
    int keep = share(b, large, j);
    uint32_t dst = st_tensors_move_in(e->t, k, backward, ST_MEM_COMM);
    copy = transfer(e, st_op_copy(e->recv, ST_COPY_D2D, keep * P), micro, keep, 0, large, data,
                    layer, src_ready, NONE, dst,
                    a > bw ? st_tensors_move_out(e->t, k, backward) : NONE, FALSE);
    if (a > bw)
      sent(e, k, backward, copy);
  }
  if (a > bw) { /* gather: the narrow side receives, the others send to it */
    if (j >= bw) {
      int n = share(b, a, j);
      sent(e, k, backward,
           transfer(e, st_op_send(e->send, comm, 0, tag, n * P), micro, n, 0, large, data, layer,
                    src_ready, NONE, NONE, st_tensors_move_out(e->t, k, backward), FALSE));
      return NONE;
    }
    uint32_t done = copy;
    for (int m = 1; m < n_peers; m++) {
      int n = share(b, a, j + m * bw);
      done = transfer(e, st_op_recv(e->recv, comm, m, tag, n * P), micro, n, m * bw, large, data,
                      layer, done, NONE, NONE, NONE, TRUE);
    }
    return done;
  }
  /* scatter: the narrow side sends the others their shares */
  if (j >= a) {
    int n = share(b, bw, j);
    return transfer(e, st_op_recv(e->recv, comm, 0, tag, n * P), micro, n, 0, large, data,
                    layer, e->last_comp, NONE, st_tensors_move_in(e->t, k, backward, whole), NONE,
                    FALSE);
  }
  for (int m = 1; m < n_peers; m++) {
    int n = share(b, bw, j + m * a);
    gboolean last = m == n_peers - 1;
    uint32_t op = transfer(e, st_op_send(e->send, comm, m, tag, n * P), micro, n, m * a, large,
                           data, layer, src_ready, last ? copy : NONE, NONE,
                           last ? st_tensors_move_out(e->t, k, backward) : NONE, TRUE);
    if (last)
      sent(e, k, backward, op);
  }
  return copy;
}

static uint32_t
comp(Emit *e, StPass pass, int i, int micro, uint32_t after)
{
  StPassMem pm = {0};
  st_tensors_pass(e->t, pass, i, &pm);
  StOp op = st_op_comp(e->compute, pass, i, micro,
                       share(e->b, e->b->w[i], e->j - e->b->lo[i]));
  /* This rank's samples at width w_i: every w_i-th of the micro-batch from
   * its own index (its replica, st_schedule_new's default). */
  st_op_samples(&op, (int)(micro * e->b->M), e->b->w[i]);
  st_program_begin(e->p, &op);
  if (after != NONE)
    st_program_after(e->p, after);
  st_pass_mem_apply(e->p, &pm);
  e->last_comp = st_program_commit(e->p);
  return e->last_comp;
}

static int
tag_of(const Burst *b, int micro, int boundary, int backward)
{
  return (micro * b->n + boundary) * 2 + backward;
}

static void
emit_micro(Emit *e, int micro)
{
  Burst *b = e->b;
  int n = b->n;
  StTensorsSpec spec = {
    .model = b->m,
    .micro = micro,
    .dtype = b->bytes.activation,
    .grad_bytes = b->bytes.grad,
    .batch = e->batch,
    .moved = e->moved,
    .recompute = st_recompute_plan(b->in->options),
  };
  e->t = st_tensors_new(e->p, &spec);
  for (int i = 0; i < n; i++)
    e->fwd[i] = e->bwd[i] = e->ready[i] = e->gready[i] = NONE;
  for (int i = 0; i < n; i++) {
    if (e->moved[i])
      e->ready[i] = exchange(e, micro, b->w[i - 1], b->w[i], st_burst_out_bytes(b, i - 1),
                             tag_of(b, micro, i - 1, 0), FALSE, i, e->fwd[i - 1]);
    if (part(e, i))
      e->fwd[i] = comp(e, ST_PASS_FWD, i, micro, e->ready[i]);
  }
  for (int i = n - 1; i >= 0; i--) {
    if (e->moved[i + 1])
      e->gready[i] = exchange(e, micro, b->w[i + 1], b->w[i], st_burst_out_bytes(b, i),
                              tag_of(b, micro, i, 1), TRUE, i + 1, e->bwd[i + 1]);
    if (!part(e, i))
      continue;
    const StLayer *l = &b->m->layers[i];
    if (st_tensors_recomputes(e->t, i)) /* as autograd: once the output's gradient is here */
      comp(e, ST_PASS_RECOMPUTE, i, micro, e->gready[i]);
    e->bwd[i] = comp(e, ST_PASS_BWD, i, micro, e->gready[i]);
    if (micro == b->A - 1 && b->w[i] > 1 && l->params > 0) {
      StOp reduce = st_op_coll(e->sync, ST_COLL_ALL_REDUCE, st_burst_scomm(b, 0, b->w[i]),
                               l->params * b->bytes.grad);
      st_op_moves(&reduce, ST_DATA_GRADS, i, i);
      st_program_begin(e->p, &reduce);
      st_program_after(e->p, e->bwd[i]);
      e->last_reduce = st_program_commit(e->p);
    }
  }
  g_clear_pointer(&e->t, st_tensors_free);
}


/* Persistent model states of the layers this rank runs, one buffer set per
 * run of consecutive layers. Returns the parameters held. */
static int64_t
model_states(Emit *e)
{
  Burst *b = e->b;
  int64_t held = 0;
  for (int i = 0; i < b->n;) {
    if (!part(e, i)) {
      i++;
      continue;
    }
    int last = i;
    int64_t params = 0;
    while (last < b->n && part(e, last))
      params += b->m->layers[last++].params;
    last--;
    held += params;
    const StData data[3] = {ST_DATA_PARAMS, ST_DATA_GRADS, ST_DATA_OPTIM};
    const StMemCategory cat[3] = {ST_MEM_PARAMS, ST_MEM_GRADS, ST_MEM_OPTIMIZER};
    const int per[3] = {b->bytes.weight, b->bytes.grad, b->bytes.optimizer};
    const char *what[3] = {"params", "grads", "optimizer states"};
    for (int c = 0; c < 3; c++) {
      g_autofree char *name = g_strdup_printf("%s %s-%s", what[c], b->m->layers[i].name,
                                              b->m->layers[last].name);
      uint32_t id = st_program_add_buffer(e->p, name, cat[c], params * per[c], TRUE);
      st_program_buffer_holds(e->p, id, data[c], i, last, -1, 1);
    }
    i = last + 1;
  }
  return held;
}

static StProgram *
emit_program(Burst *b, int j)
{
  g_autofree char *name = g_strdup_printf("burst rank %d", j);
  Emit e = {.b = b, .p = st_program_new(name), .j = j, .last_comp = NONE, .last_reduce = NONE};
  e.compute = st_program_add_stream(e.p, "compute", 0);
  e.sync = st_program_add_stream(e.p, "sync", 0);
  e.send = st_program_add_stream(e.p, "send", 0);
  e.recv = st_program_add_stream(e.p, "recv", 0);
  uint32_t *arrays[4];
  for (int k = 0; k < 4; k++)
    arrays[k] = g_new(uint32_t, b->n);
  e.fwd = arrays[0], e.bwd = arrays[1], e.ready = arrays[2], e.gready = arrays[3];
  g_autofree int *batch = g_new0(int, b->n);
  g_autofree gboolean *moved = g_new0(gboolean, b->n + 1);
  for (int i = 0; i < b->n; i++) {
    batch[i] = part(&e, i) ? share(b, b->w[i], j - b->lo[i]) : 0;
    moved[i] = i > 0 && b->w[i - 1] != b->w[i];
  }
  e.batch = batch;
  e.moved = moved;
  int64_t held = model_states(&e);
  for (int micro = 0; micro < b->A; micro++) {
    if (b->dag)
      st_burst_emit_micro_dag(&e, micro);
    else
      emit_micro(&e, micro);
  }
  if (held > 0) {
    StOp step = st_op_elementwise(e.compute, ST_PASS_OPTIM, -1, held, held * b->bytes.optim_traffic);
    st_program_begin(e.p, &step);
    if (e.last_reduce != NONE)
      st_program_after(e.p, e.last_reduce);
    st_program_commit(e.p);
  }
  for (int k = 0; k < 4; k++)
    g_free(arrays[k]);
  return e.p;
}

/* Ranks whose shares are equal everywhere run the same program. */
static char *
signature(const Burst *b, int j)
{
  if (b->dag) /* peers are ranks: no two programs are the same */
    return g_strdup_printf("rank %d", j);
  GString *sig = g_string_new(NULL);
  for (int i = 0; i < b->n; i++) {
    g_string_append_printf(sig, "%d,", j < b->w[i] ? share(b, b->w[i], j) : -1);
    if (i == 0 || b->w[i - 1] == b->w[i])
      continue;
    int small = MIN(b->w[i - 1], b->w[i]), large = MAX(b->w[i - 1], b->w[i]);
    for (int m = 1; j < small && m < large / small; m++)
      g_string_append_printf(sig, "%d:%d,", share(b, b->w[i - 1], j + m * small),
                             share(b, b->w[i], j + m * small));
    g_string_append_c(sig, '|');
  }
  return g_string_free(sig, FALSE);
}

static StDtype
compute_dtype(const StOptions *o, const StCluster *c)
{
  if (!st_precision_16bit(o->precision))
    return ST_DTYPE_FP32;
  return c->gpu.flops[ST_DTYPE_BF16] > 0 ? ST_DTYPE_BF16 : ST_DTYPE_FP16;
}

static StSchedule *
build(const StStrategyInput *in, GError **error)
{
  const StOptions *o = in->options;
  Burst b = {
    .in = in,
    .m = in->model,
    .n = in->model->n_layers,
    .M = (int64_t)o->ranks * o->micro_batch,
    .A = o->accumulation,
  };
  st_state_bytes(o, &b.bytes);
  StBurstCostInput costs = {
    .model = in->model,
    .cluster = in->cluster,
    .profile = in->profile,
    .comm_algo = o->comm_algo,
    .ranks = o->ranks,
    .batch = b.M,
    .compute_dtype = compute_dtype(o, in->cluster),
    .fp8 = o->precision == ST_PRECISION_FP8,
    .compute_model = o->compute_model,
    .activation_dtype = b.bytes.activation,
    .grad_bytes = b.bytes.grad,
    .framework = st_options_framework(o),
    .nchw = st_options_nchw(o),
    .optimizer = st_optimizer_name(o->optimizer),
    .optim_traffic = b.bytes.optim_traffic,
  };
  g_autoptr(StBurstGraph) graph = st_burst_graph_for_model(&costs, error);
  if (graph == NULL)
    return NULL;
  StBurstParams params;
  st_burst_params_init(&params);
  if (o->amp_limit > 0)
    params.amp_limit = o->amp_limit;
  g_autoptr(StBurstPlan) plan = st_burst_plan_new(graph, &params, error);
  if (plan == NULL) {
    g_prefix_error(error, "burst: %s: ", in->model->name);
    return NULL;
  }
  g_autofree int32_t *w = g_new(int32_t, b.n);
  g_autofree int32_t *lo = g_new(int32_t, b.n);
  b.dag = st_model_has_branches(in->model);
  for (int i = 0; i < b.n; i++) {
    w[i] = plan->nodes[i].gpus;
    lo[i] = plan->nodes[i].first_rank;
    b.dag = b.dag || lo[i] != 0;
  }
  b.w = w;
  b.lo = lo;

  b.s = st_schedule_new(st_model_copy(in->model), st_cluster_copy(in->cluster), o->ranks, NULL);
  b.m = b.s->model;
  b.xcomm = g_hash_table_new(g_direct_hash, g_direct_equal);
  b.scomm = g_hash_table_new(g_direct_hash, g_direct_equal);
  if (b.dag)
    b.world = st_schedule_add_world(b.s, "burst world");
  g_autoptr(GHashTable) programs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (int j = 0; j < o->ranks; j++) {
    char *sig = signature(&b, j);
    gpointer id;
    if (!g_hash_table_lookup_extended(programs, sig, NULL, &id)) {
      id = GINT_TO_POINTER(st_schedule_add_program(b.s, emit_program(&b, j)));
      g_hash_table_insert(programs, sig, id);
    } else {
      g_free(sig);
    }
    b.s->ranks[j].program = GPOINTER_TO_INT(id);
    if (b.dag) /* ops name their samples absolutely: no program is shared */
      b.s->ranks[j].replica = 0;
  }
  g_hash_table_unref(b.xcomm);
  g_hash_table_unref(b.scomm);

  StSchedule *s = b.s;
  s->steps = o->steps;
  s->settings.strategy = g_strdup("burst");
  s->settings.precision = o->precision;
  s->settings.recompute = (StRecompute)o->recompute;
  s->settings.optimizer = o->optimizer;
  s->settings.micro_batch = o->micro_batch;
  s->settings.accumulation = o->accumulation;
  s->settings.global_batch = o->global_batch;
  g_autofree char *summary = st_burst_plan_summary(plan, graph);
  g_autofree char *table = st_burst_plan_table(plan, graph, &params);
  int narrowest = plan->dp_gpus;
  for (int i = 0; i < b.n; i++)
    narrowest = MIN(narrowest, w[i]);
  s->settings.description =
    g_strdup_printf("burst: %d rank%s, %" G_GINT64_FORMAT " samples per micro-batch x %d, "
                    "layers on %d-%d GPUs (planned %.2f ms, data parallel %.2f ms)",
                    o->ranks, st_plural(o->ranks), b.M, b.A, narrowest, plan->dp_gpus,
                    plan->step_ns / 1e6, plan->dp_step_ns / 1e6);
  st_schedule_note_text(s, "burst_plan", summary);
  st_schedule_note_text(s, "burst_plan_table", table);
  st_schedule_note_number(s, "amp_limit", params.amp_limit);
  st_schedule_note_number(s, "planned_step_s", plan->step_ns * 1e-9);
  st_schedule_note_number(s, "planned_dp_step_s", plan->dp_step_ns * 1e-9);
  st_schedule_note_number(s, "refined_layers", plan->refined);
  st_schedule_note_number(s, "packed_branches", plan->packed);
  st_schedule_note_number(s, "planned_unpacked_step_s", plan->unpacked_step_ns * 1e-9);
  st_schedule_note_number(s, "planned_iteration_s", plan->iteration_ns * 1e-9);
  st_schedule_note_number(s, "planned_gpu_time_s", plan->gpu_ns * 1e-9);
  st_schedule_note_number(s, "planned_dp_iteration_s", plan->dp_iteration_ns * 1e-9);
  st_schedule_note_number(s, "planned_dp_gpu_time_s", plan->dp_gpu_ns * 1e-9);
  st_schedule_note_number(s, "programs", s->programs->len);
  return s;
}

static const StStrategyKnob KNOBS[] = {
  {"amp-limit", "1.5,2,4"},
  {"recompute", NULL},
  {"recompute-every", NULL},
  {"recompute-ops", NULL},
  {NULL},
};

/* Before building (StStrategy.estimate): a lower bound of the peak. A model
 * without branches is a chain, whose sets all start at rank 0 (packing
 * moves only branches, burst_pack.c), so rank 0 runs every layer and holds
 * every layer's weights, gradients and optimizer states for the whole run
 * (model_states above). The planner refuses unbuilt what cannot fit: a
 * Llama-3 70B burst plan holds 1.1 TB on rank 0, and its planning took
 * seconds a configuration (issue 22). A model with branches may place
 * them elsewhere: no bound. */
static gboolean
estimate(const StStrategyInput *in, StEstimate *est, GError **error)
{
  const StModel *m = in->model;
  if (st_model_has_branches(m))
    return TRUE;
  StStateBytes bytes;
  st_state_bytes(in->options, &bytes);
  int64_t params = 0;
  for (int i = 0; i < m->n_layers; i++)
    params += m->layers[i].params;
  est->peak_bytes = params * (bytes.weight + bytes.grad + bytes.optimizer);
  est->refuse_in_turn = TRUE; /* in its wave, where building found it over: same waves */
  return TRUE;
}

/* Every layer's gradient is reduced within the set of GPUs that ran it
 * before the step: the update of synchronous SGD/Adam. */
static StUpdate
update(const StOptions *options)
{
  return (StUpdate){ST_UPDATE_SYNC, "synchronous SGD/Adam"};
}

const StStrategy st_strategy_burst = {
  .name = "burst",
  .summary = "DeepPool burst parallelism: per-layer GPU counts from a planner, samples moved "
             "between GPU sets, gradients reduced within each layer's set",
  .citation = "Park et al., Efficient Strong Scaling Through Burst Parallel Training "
              "(DeepPool), MLSys 2022",
  .build = build,
  .estimate = estimate,
  .knobs = KNOBS,
  .update = update,
};
