/* engine.c: the event loop, stream readiness and dispatch (see engine.h and
 * engine_internal.h).
 *
 * Readiness without per-step state: ops of a stream complete in order and
 * once per step, so done[op] (instances completed) says everything. The head
 * of a stream at step k may start when each same-step dependency d has
 * done[d] > k and each previous-step one has done[d] > k - 1. A stream that
 * finds a dependency unmet registers itself as a waiter of that op and is
 * retried when the op completes; each dependency is thus seen met once.
 */
#include "engine/engine_internal.h"

#include "cost/framework.h"
#include "sched/work.h"

#include <stdarg.h>
#include <string.h>

G_DEFINE_QUARK(st-engine-error-quark, st_engine_error)

void
st_engine_stats_clear(StEngineStats *stats)
{
  g_clear_pointer(&stats->fold_note, g_free);
  *stats = (StEngineStats){0};
}

void
engine_fail(Engine *e, const char *format, ...)
{
  if (e->error != NULL)
    return;
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error_literal(&e->error, ST_ENGINE_ERROR, ST_ERROR_FAILED, message);
}

gboolean
engine_failed(Engine *e)
{
  return e->error != NULL;
}

/* Streams to retry travel through a GQueue as pointers: (sim, stream) packed,
 * plus one so that no key is NULL. */
static inline gpointer
stream_key(int sim, int stream)
{
  return GSIZE_TO_POINTER((((gsize)sim << 16) | (gsize)stream) + 1);
}

static void
retry_stream(Engine *e, int sim, int stream)
{
  g_queue_push_tail(&e->ready, stream_key(sim, stream));
}

void
engine_retry_stream(Engine *e, int sim, int stream)
{
  retry_stream(e, sim, stream);
}

/* ---- per-program facts --------------------------------------------------- */

static void
prog_info_init(Engine *e, ProgInfo *info, const StProgram *p)
{
  const StSchedule *s = e->s;
  info->stream_ops = g_new(GArray *, p->streams->len);
  for (guint i = 0; i < p->streams->len; i++)
    info->stream_ops[i] = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  info->cost_ns = g_new0(double, p->ops->len);
  info->source = g_new0(uint8_t, p->ops->len);
  info->share = g_new0(StShareTraits, p->ops->len);
  StComputeCtx ctx = e->compute;
  ctx.model = st_program_model(s, p);
  for (guint i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    g_array_append_val(info->stream_ops[op->stream], i);
    if (op->kind != ST_OP_COMP)
      continue;
    const StStream *stream = &g_array_index(p->streams, StStream, op->stream);
    if (stream->host) {
      /* The host CPU's step: its bytes of host memory traffic at the node's
       * bandwidth, shared by the node's GPUs in use, whose ranks step at
       * once (ZeRO-Offload: one CPU-Adam per rank on its shard). */
      int per_node = MIN(s->cluster->gpus_per_node, s->cluster->gpus);
      info->cost_ns[i] = (double)op->bytes * per_node /
                         st_cluster_host_memory_bandwidth(s->cluster) * 1e9;
      info->source[i] = ST_SRC_ESTIMATE;
      continue;
    }
    StWork work = st_op_work(s, p, op);
    StCostSource source = ST_SRC_NONE;
    info->cost_ns[i] = st_compute_time(&ctx, &work, &source);
    info->source[i] = (uint8_t)source;
    info->share[i] = st_compute_share_traits(&ctx, &work, info->cost_ns[i]);
  }
}

static void
prog_info_clear(ProgInfo *info, const StProgram *p)
{
  for (guint i = 0; i < p->streams->len; i++)
    g_array_unref(info->stream_ops[i]);
  g_free(info->stream_ops);
  g_free(info->cost_ns);
  g_free(info->source);
  g_free(info->share);
}

/* ---- streams ------------------------------------------------------------- */

static void
start_op(Engine *e, const OpRef *ref)
{
  engine_steps_on_start(e, ref);
  memory_alloc(e, ref);
  switch ((StOpKind)engine_op(e, ref)->kind) {
  case ST_OP_COMP:
    compute_start(e, ref);
    break;
  case ST_OP_COMM_COLL:
    net_collective(e, ref);
    break;
  case ST_OP_COMM_SEND:
  case ST_OP_COMM_RECV:
    net_p2p(e, ref);
    break;
  case ST_OP_COPY:
    net_copy(e, ref);
    break;
  default:
    g_assert_not_reached();
  }
}

/* Starts the head op of a stream if its dependencies are met, or registers
 * the stream as a waiter of the first unmet one. */
static void
try_stream(Engine *e, int sim, int stream)
{
  SimRank *sr = &e->sims[sim];
  StreamState *st = &sr->streams[stream];
  if (st->busy || st->done)
    return;
  const GArray *ops = sr->info->stream_ops[stream];
  uint32_t o = g_array_index(ops, uint32_t, st->pos);
  const StOp *op = st_program_op(sr->program, o);
  const StDep *deps = st_program_deps(sr->program, op);
  for (; st->dep_cursor < op->n_deps; st->dep_cursor++) {
    const StDep *d = &deps[st->dep_cursor];
    int32_t needed = st->step + d->step_offset; /* the instance that must be done */
    if (needed < 0 || sr->done[d->op] > needed)
      continue;
    sr->waiters[d->op] |= UINT64_C(1) << stream;
    return;
  }
  OpRef ref = {sim, o, st->step, e->now};
  if (!admission_may_start(e, &ref))
    return; /* a background piece waits for its device's admission control */
  st->busy = TRUE;
  start_op(e, &ref);
}

void
engine_complete(Engine *e, const OpRef *ref, int64_t start_ns, StCostSource source,
                const char *algo)
{
  SimRank *sr = &e->sims[ref->sim];
  const StOp *op = st_program_op(sr->program, ref->op);
  StOpRecord rec = {
    .rank = sr->rank,
    .op = ref->op,
    .step = admission_record_step(e, ref),
    .source = (uint8_t)source,
    .algo = st_timeline_algo(e->tl, algo),
    .ready_ns = ref->ready_ns,
    .start_ns = start_ns,
    .end_ns = e->now,
  };
  g_array_append_val(e->tl->ops, rec);
  e->ops_done++;
  memory_free(e, ref);
  sr->done[ref->op]++;

  StreamState *st = &sr->streams[op->stream];
  st->busy = FALSE;
  st->dep_cursor = 0;
  gboolean wrapped = FALSE;
  if (++st->pos == (int32_t)sr->info->stream_ops[op->stream]->len) {
    st->pos = 0;
    wrapped = TRUE;
    if (++st->step >= e->steps.limit && !st->unbounded)
      st->done = TRUE;
  }
  engine_steps_on_complete(e, ref, start_ns);
  admission_on_complete(e, ref, start_ns, wrapped);
  retry_stream(e, ref->sim, op->stream);
  uint64_t waiting = sr->waiters[ref->op];
  sr->waiters[ref->op] = 0;
  for (int i = 0; waiting != 0; i++, waiting >>= 1)
    if (waiting & 1)
      retry_stream(e, ref->sim, i);
}

static void
drain_ready(Engine *e)
{
  gpointer key;
  do {
    while ((key = g_queue_pop_head(&e->ready)) != NULL) {
      gsize packed = GPOINTER_TO_SIZE(key) - 1;
      try_stream(e, (int)(packed >> 16), (int)(packed & 0xffff));
    }
  } while (e->adm != NULL && admission_flush(e));
}

/* A rank begins: every stream tries its first op. */
static void
start_rank(Engine *e, int sim)
{
  engine_steps_on_rank_start(e);
  for (guint st = 0; st < e->sims[sim].program->streams->len; st++)
    retry_stream(e, sim, st);
}

/* ---- setup, loop, deadlock ------------------------------------------------ */

/* The timeline's records, sized for what the run will append (background
 * streams that repeat may add more): growing arrays of millions of records
 * by doubling would copy them again and again. A --steps auto run is sized
 * for its cap: what it does not reach is address space, never touched
 * (up to RESERVE_MAX_BYTES an array; beyond, its arrays grow). */
#define RESERVE_MAX_BYTES (G_GUINT64_CONSTANT(1) << 30)
static void
reserve_records(Engine *e)
{
  guint64 ops = 0, mem = 0, persistent = 0;
  for (int i = 0; i < e->n_sims; i++) {
    const StProgram *p = e->sims[i].program;
    ops += p->ops->len;
    for (guint o = 0; o < p->ops->len; o++) {
      const StOp *op = st_program_op(p, o);
      mem += (guint64)op->n_alloc + op->n_free;
    }
    persistent += p->buffers->len; /* at most */
  }
  gboolean fixed = e->s->steps > 0;
  guint64 steps = (guint64)(fixed ? e->s->steps : st_steady_cap(e->s));
  ops *= steps;
  mem = mem * steps + persistent;
  if (ops > G_MAXUINT / 2 || mem > G_MAXUINT / 2)
    return;
  if (!fixed && (ops * sizeof(StOpRecord) > RESERVE_MAX_BYTES ||
                 mem * sizeof(StMemEvent) > RESERVE_MAX_BYTES))
    return;
  st_timeline_reserve(e->tl, (guint)ops, (guint)mem);
}

static gboolean
engine_init(Engine *e, const StSchedule *s, const StEngineOptions *options, GError **error)
{
  e->s = s;
  e->options = options;
  e->comm_algo = options->comm_algo != NULL ? options->comm_algo : "auto";
  e->share = options->share_model != NULL ? st_share_model_find(options->share_model)
                                          : st_share_models()[0];
  if (e->share == NULL) {
    g_set_error(error, ST_ENGINE_ERROR, ST_ERROR_INVALID, "unknown GPU sharing model '%s'",
                options->share_model);
    return FALSE;
  }
  e->compute = (StComputeCtx){s->cluster, options->profile, s->model,
                              st_schedule_compute_dtype(s), s->settings.compute_model,
                              st_framework_find(s->settings.framework), s->settings.nchw,
                              s->settings.precision == ST_PRECISION_FP8};
  e->fold = st_fold_new(s, !options->no_fold);
  if (!engine_budget(e, error))
    return FALSE;
  /* The timeline owns the folding maps from here; the fold borrows them. */
  e->tl = st_timeline_new_folded(s, FALSE, "simulated", options->arrays, e->fold->rank_rep,
                                 e->fold->device_rep);
  e->tl_took_maps = TRUE;
  st_queue_init(&e->queue);
  g_queue_init(&e->ready);

  e->progs = g_new0(ProgInfo, s->programs->len);
  for (guint p = 0; p < s->programs->len; p++) {
    const StProgram *prog = g_ptr_array_index(s->programs, p);
    if (prog->streams->len > 64 || prog->streams->len > 0xffff) {
      g_set_error(error, ST_ENGINE_ERROR, ST_ERROR_UNSUPPORTED,
                  "program '%s' has %u streams; the engine handles at most 64", prog->name,
                  prog->streams->len);
      return FALSE;
    }
    prog_info_init(e, &e->progs[p], prog);
  }
  e->n_sims = e->fold->n_sim_ranks;
  e->sims = g_new0(SimRank, e->n_sims);
  e->sim_of_rank = g_new(int32_t, s->n_ranks);
  for (int r = 0; r < s->n_ranks; r++)
    e->sim_of_rank[r] = -1;
  for (int i = 0; i < e->n_sims; i++) {
    SimRank *sr = &e->sims[i];
    st_event_node_init(&sr->start.node);
    sr->start.kind = EV_START;
    sr->rank = e->fold->sim_ranks[i];
    sr->device = s->ranks[sr->rank].device;
    sr->program = st_schedule_program_of(s, sr->rank);
    sr->info = &e->progs[s->ranks[sr->rank].program];
    sr->streams = g_new0(StreamState, sr->program->streams->len);
    for (guint st = 0; st < sr->program->streams->len; st++)
      sr->streams[st].done = sr->info->stream_ops[st]->len == 0;
    sr->done = g_new0(int32_t, sr->program->ops->len);
    sr->waiters = g_new0(uint64_t, sr->program->ops->len);
    sr->coll_seq = g_new0(int64_t, s->comms->len);
    e->sim_of_rank[sr->rank] = i;
  }
  /* A device state per device the simulated ranks run on, in order of
   * their first rank. */
  g_autoptr(GHashTable) state_of = g_hash_table_new(g_direct_hash, g_direct_equal);
  e->devices = g_new0(DeviceState, MAX(e->n_sims, 1));
  for (int i = 0; i < e->n_sims; i++) {
    SimRank *sr = &e->sims[i];
    gpointer found;
    if (g_hash_table_lookup_extended(state_of, GINT_TO_POINTER(sr->device), NULL, &found)) {
      sr->state = GPOINTER_TO_INT(found);
      continue;
    }
    sr->state = e->n_dev_states++;
    g_hash_table_insert(state_of, GINT_TO_POINTER(sr->device), GINT_TO_POINTER(sr->state));
    e->devices[sr->state].kernels = g_ptr_array_new();
    e->devices[sr->state].host_kernels = g_ptr_array_new();
  }
  reserve_records(e);
  net_init(e);
  admission_init(e);
  engine_steps_init(e);
  engine_steps_count_ops(e);
  return TRUE;
}

static void
engine_clear(Engine *e)
{
  /* The queue only points into kernels and flows: forget it before they go. */
  st_queue_clear(&e->queue);
  compute_clear(e);
  net_clear(e);
  admission_clear(e);
  engine_steps_clear(e);
  g_queue_clear(&e->ready);
  for (int i = 0; i < e->n_sims; i++) {
    g_free(e->sims[i].streams);
    g_free(e->sims[i].done);
    g_free(e->sims[i].waiters);
    g_free(e->sims[i].coll_seq);
  }
  g_free(e->sims);
  g_free(e->sim_of_rank);
  for (guint p = 0; e->progs != NULL && p < e->s->programs->len; p++)
    if (e->progs[p].stream_ops != NULL)
      prog_info_clear(&e->progs[p], g_ptr_array_index(e->s->programs, p));
  g_free(e->progs);
  for (int d = 0; e->devices != NULL && d < e->n_dev_states; d++) {
    g_ptr_array_unref(e->devices[d].kernels);
    g_ptr_array_unref(e->devices[d].host_kernels);
  }
  g_free(e->devices);
  if (e->tl_took_maps) { /* the timeline (freed below, or returned) owns them */
    e->fold->rank_rep = NULL;
    e->fold->device_rep = NULL;
  }
  st_fold_free(e->fold);
  st_timeline_free(e->tl);
  g_clear_error(&e->error);
}

/* After the queue ran dry: every stream must be done, else name one stuck op. */
static gboolean
check_finished(Engine *e, GError **error)
{
  for (int i = 0; i < e->n_sims; i++) {
    SimRank *sr = &e->sims[i];
    for (guint st = 0; st < sr->program->streams->len; st++) {
      StreamState *ss = &sr->streams[st];
      if (ss->done || admission_stream_optional(e, i, (int)st))
        continue;
      uint32_t o = g_array_index(sr->info->stream_ops[st], uint32_t, ss->pos);
      g_autofree char *what = st_op_describe(e->s, sr->program, o);
      g_autofree char *why = ss->busy ? net_describe_wait(e, sr, o, ss->step)
                                      : g_strdup("a dependency that never completes");
      g_set_error(error, ST_ENGINE_ERROR, ST_ERROR_FAILED,
                  "deadlock at %.3f us: rank %d, stream '%s', op %u '%s' (step %d) waits for "
                  "%s",
                  e->now / 1e3, sr->rank,
                  g_array_index(sr->program->streams, StStream, st).name, o, what, ss->step,
                  why);
      return FALSE;
    }
  }
  return TRUE;
}

StTimeline *
st_simulate(const StSchedule *s, const StEngineOptions *options, StEngineStats *stats,
            GError **error)
{
  return st_simulate_within(s, options, NULL, stats, error);
}

StTimeline *
st_simulate_within(const StSchedule *s, const StEngineOptions *options,
                   const StEngineBudget *budget, StEngineStats *stats, GError **error)
{
  g_return_val_if_fail(s != NULL && options != NULL, NULL);
  Engine e = {0};
  if (budget != NULL)
    e.budget = *budget;
  if (!engine_init(&e, s, options, error)) {
    engine_clear(&e);
    return NULL;
  }
  memory_persistent(&e);
  for (int i = 0; i < e.n_sims; i++) {
    SimRank *sr = &e.sims[i];
    if (s->ranks[sr->rank].start_ns > 0)
      st_queue_push(&e.queue, &sr->start.node, s->ranks[sr->rank].start_ns);
    else
      start_rank(&e, i);
  }
  drain_ready(&e);
  StEventNode *node;
  for (;;) {
    /* Links re-rated once per instant, after everything that happens in it. */
    if (share_pending(&e) && (st_queue_peek(&e.queue) == NULL ||
                              st_queue_peek(&e.queue)->time_ns > e.now))
      share_flush(&e);
    if (engine_failed(&e) || (node = st_queue_pop(&e.queue)) == NULL)
      break;
    if (node->time_ns == ST_TIME_MAX) {
      /* Saturated (limits.h): a rate too slow for the work it was given. */
      engine_fail(&e, "the simulated run would last longer than the clock holds (292 years "
                      "in int64 ns): a bandwidth or FLOP rate too small for the bytes or "
                      "FLOPs of an op, or far too many steps");
      break;
    }
    e.now = node->time_ns;
    if ((++e.events & 4095) == 0)
      engine_report_progress(&e);
    Event *ev = (Event *)node;
    if (ev->kind == EV_KERNEL)
      compute_on_event(&e, (Kernel *)ev);
    else if (ev->kind == EV_FLOW)
      net_on_event(&e, (Flow *)ev);
    else if (ev->kind == EV_WAKE)
      admission_on_wake(&e, ev);
    else
      start_rank(&e, (int)((SimRank *)ev - e.sims));
    drain_ready(&e);
  }
  if (engine_failed(&e)) {
    g_propagate_error(error, g_steal_pointer(&e.error));
    engine_clear(&e);
    return NULL;
  }
  if (!check_finished(&e, error)) {
    engine_clear(&e);
    return NULL;
  }
  engine_report_progress(&e);
  e.tl->end_ns = e.now;
  engine_steps_finish(&e, &e.tl->steady, &e.tl->steps);
  if (stats != NULL) {
    stats->events = e.events;
    stats->ops = e.ops_done;
    stats->sim_ranks = e.n_sims;
    stats->folded = e.fold->folded;
    stats->fold_note = g_strdup(e.fold->why_not);
  }
  StTimeline *tl = g_steal_pointer(&e.tl);
  engine_clear(&e);
  return tl;
}
