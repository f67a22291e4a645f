/* harvest.c: what a run measured, as the simulator's Timeline: every op
 * instance from its start and end events, the bytes each transfer and
 * collective sent per link class, the pool's allocations and frees at the
 * start and end of their ops; the loss of every step of the main job; and
 * what each background job did (multiplexing).
 *
 * A background job beside a foreground repeats its program for as long as
 * the foreground runs (mux.c), so its op records carry, as the engine's do,
 * the foreground step in which they ended (`steps` after the last): they
 * neither stretch nor shorten the foreground's step times, and the report's
 * multiplex figures (foreground slowdown, background samples per second,
 * idle GPU time) come out of the measured timeline exactly as out of a
 * simulated one. */
#include "exec/check.h"
#include "exec/runtime.h"

/* Steps, or a repeating background rank's iterations, that every op of the
 * rank completed. */
static int32_t
rank_completed(const Rank *r, int32_t cap)
{
  int32_t n = cap;
  for (guint o = 0; o < r->p->ops->len; o++)
    n = MIN(n, r->done[o]);
  return n;
}

int32_t
exec_completed_steps(Exec *x)
{
  int32_t steps = x->s->steps;
  for (int rank = 0; rank < x->s->n_ranks; rank++) {
    Rank *r = &x->ranks[rank];
    if (r->dev != NULL && !mux_repeats(x, r))
      steps = MIN(steps, rank_completed(r, x->s->steps));
  }
  return steps;
}

/* Instances a rank's records cover. */
static int32_t
instances(Exec *x, const Rank *r, int32_t steps)
{
  return mux_repeats(x, r) ? rank_completed(r, G_MAXINT32) : steps;
}

static StLinkClass
link_of(const StSchedule *s, const Rank *r, const StOp *op)
{
  StGroupShape shape;
  const StComm *c = st_schedule_comm(s, op->comm);
  st_schedule_group_shape(s, op->comm, c->group_of[r->rank], &shape);
  if (op->kind != ST_OP_COMM_COLL) {
    int peer = st_schedule_peer_rank(s, r->rank, op->comm, op->peer);
    return st_cluster_link_between(s->cluster, r->device, s->ranks[peer].device);
  }
  return shape.devices <= 1 ? ST_LINK_LOCAL
         : shape.nodes > 1  ? ST_LINK_INTER_NODE
                            : ST_LINK_INTRA_NODE;
}

/* Bytes one member moves in a collective, by nccl-tests' bus bandwidth. */
static double
moved_bytes(const StSchedule *s, const Rank *r, const StOp *op)
{
  if (op->kind == ST_OP_COMM_RECV)
    return 0;
  if (op->kind != ST_OP_COMM_COLL)
    return (double)op->bytes;
  const StComm *c = st_schedule_comm(s, op->comm);
  int g = c->group_of[r->rank];
  return (double)op->bytes * st_coll_busbw_factor(op->sub, c->offsets[g + 1] - c->offsets[g]);
}

/* Every instance's start and end, [k * n_ops + op]. */
static gboolean
times_of(Exec *x, Rank *r, int32_t n, int64_t *start, int64_t *end, GError **error)
{
  const StDeviceBackend *b = r->dev->backend;
  guint n_ops = r->p->ops->len;
  for (int32_t k = 0; k < n; k++)
    for (guint o = 0; o < n_ops; o++) {
      size_t i = (size_t)k * n_ops + o;
      if (!b->event_time(r->dev, x->origins[0], *steps_event(r, k, o, 0), &start[i], error) ||
          !b->event_time(r->dev, x->origins[0], *steps_event(r, k, o, 1), &end[i], error))
        return FALSE;
    }
  return TRUE;
}

/* When each foreground step ended (its last op), never before the one
 * before. [steps], transfer full. */
static int64_t *
step_ends(Exec *x, int32_t steps, GError **error)
{
  g_autofree int64_t *ends = g_new0(int64_t, MAX(steps, 1));
  for (int rank = 0; rank < x->s->n_ranks; rank++) {
    Rank *r = &x->ranks[rank];
    if (r->dev == NULL || mux_repeats(x, r))
      continue;
    guint n_ops = r->p->ops->len;
    g_autofree int64_t *start = g_new0(int64_t, (size_t)MAX(steps, 1) * MAX(n_ops, 1));
    g_autofree int64_t *end = g_new0(int64_t, (size_t)MAX(steps, 1) * MAX(n_ops, 1));
    if (!times_of(x, r, steps, start, end, error))
      return NULL;
    for (int32_t k = 0; k < steps; k++)
      for (guint o = 0; o < n_ops; o++)
        ends[k] = MAX(ends[k], end[(size_t)k * n_ops + o]);
  }
  for (int32_t k = 1; k < steps; k++)
    ends[k] = MAX(ends[k], ends[k - 1]);
  return g_steal_pointer(&ends);
}

/* The foreground step during which `t` fell: the first whose end is not
 * before it, `steps` after the last. */
static int32_t
step_at(const int64_t *ends, int32_t steps, int64_t t)
{
  int32_t lo = 0, hi = steps;
  while (lo < hi) {
    int32_t mid = (lo + hi) / 2;
    if (ends[mid] < t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

gboolean
exec_harvest(Exec *x, StTimeline *t, int32_t steps, GError **error)
{
  const StSchedule *s = x->s;
  t->steps = steps;
  g_autofree int64_t *ends = x->mux != NULL ? step_ends(x, steps, error) : NULL;
  if (x->mux != NULL && ends == NULL)
    return FALSE;
  for (int rank = 0; rank < s->n_ranks; rank++) {
    Rank *r = &x->ranks[rank];
    if (r->dev == NULL)
      continue;
    gboolean repeats = mux_repeats(x, r);
    int32_t n = instances(x, r, steps);
    guint n_ops = r->p->ops->len;
    g_autofree int64_t *start = g_new0(int64_t, (size_t)MAX(n, 1) * MAX(n_ops, 1));
    g_autofree int64_t *end = g_new0(int64_t, (size_t)MAX(n, 1) * MAX(n_ops, 1));
    if (!times_of(x, r, n, start, end, error))
      return FALSE;
    for (int32_t k = 0; k < n; k++) {
      for (guint o = 0; o < n_ops; o++) {
        size_t i = (size_t)k * n_ops + o;
        int32_t step = repeats ? step_at(ends, steps, end[i]) : k;
        StOpRecord rec = {.rank = rank, .op = o, .step = step, .source = ST_SRC_MEASURED,
                          .ready_ns = start[i], .start_ns = start[i], .end_ns = end[i]};
        g_array_append_val(t->ops, rec);
        t->end_ns = MAX(t->end_ns, end[i]);
        const StOp *op = st_program_op(r->p, o);
        double bytes = op->kind == ST_OP_COMP || op->kind == ST_OP_COPY
                         ? 0
                         : moved_bytes(s, r, op);
        if (bytes > 0) {
          StCommRecord cr = {start[i], end[i], bytes, r->device, rank, o,
                             (uint8_t)link_of(s, r, op)};
          g_array_append_val(t->comm, cr);
        }
      }
    }
    /* Memory: allocations at their op's start, frees at its end. */
    const GArray *records = st_pool_records(r->pool);
    for (guint i = 0; i < records->len; i++) {
      const StPoolRecord *pr = &g_array_index(records, StPoolRecord, i);
      if (pr->step >= n)
        continue;
      int64_t at = 0;
      if (pr->step >= 0 && pr->op != UINT32_MAX) {
        size_t slot = (size_t)pr->step * n_ops + pr->op;
        at = pr->delta > 0 ? start[slot] : end[slot];
      }
      StMemEvent ev = {at, pr->delta, r->device, rank, pr->buffer, pr->op, pr->category};
      g_array_append_val(t->mem, ev);
    }
  }
  return TRUE;
}

/* Tokens (or 1) per sample that a model's loss averages over. */
static int
positions(const StModel *m)
{
  const StLayer *loss = &m->layers[m->n_layers - 1];
  return loss->in_shape.n_dims >= 2 ? (int)loss->in_shape.dims[0] : 1;
}

gboolean
exec_losses(Exec *x, int32_t steps, GArray *out, GError **error)
{
  g_autofree double *sum = g_new0(double, MAX(steps, 1));
  gboolean any = FALSE;
  for (int rank = 0; rank < x->s->n_ranks; rank++) {
    Rank *r = &x->ranks[rank];
    if (r->dev == NULL || r->p->job != 0)
      continue;
    g_autofree float *host = g_new0(float, MAX(steps, 1));
    if (!steps_losses(r, steps, host, error) ||
        !r->dev->backend->stream_sync(r->dev, r->streams[0], error))
      return FALSE;
    for (int32_t k = 0; k < steps; k++)
      sum[k] += host[k];
    any = TRUE;
  }
  /* a context-parallel rank's loss sums its 1 / c of each sequence's tokens */
  double samples = (double)x->s->settings.global_batch * positions(x->s->model) *
                   st_model_context_parallel(x->s->model);
  for (int32_t k = 0; any && k < steps; k++) {
    double mean = sum[k] / samples;
    g_array_append_val(out, mean);
  }
  return TRUE;
}

static void
background_free(gpointer p)
{
  StExecBackground *b = p;
  if (b->loss != NULL)
    g_array_unref(b->loss);
  if (b->weights != NULL)
    g_ptr_array_unref(b->weights);
  g_free(b);
}

gboolean
exec_backgrounds(Exec *x, int32_t steps, gboolean weights, GPtrArray **out, GError **error)
{
  *out = g_ptr_array_new_with_free_func(background_free);
  for (int rank = 0; rank < x->s->n_ranks; rank++) {
    Rank *r = &x->ranks[rank];
    if (r->dev == NULL || !r->background)
      continue;
    StExecBackground *b = g_new0(StExecBackground, 1);
    g_ptr_array_add(*out, b);
    b->rank = rank;
    b->job = r->p->job;
    b->device = r->device;
    b->iterations = instances(x, r, steps);
    b->loss = g_array_new(FALSE, FALSE, sizeof(double));
    g_autofree float *host = g_new0(float, MAX(b->iterations, 1));
    if (!steps_losses(r, b->iterations, host, error) ||
        !r->dev->backend->stream_sync(r->dev, r->streams[0], error))
      return FALSE;
    /* The mean over the samples this rank computed in an iteration. */
    double samples = (double)r->settings->micro_batch * r->settings->accumulation *
                     positions(r->model);
    for (int32_t k = 0; k < b->iterations; k++) {
      double mean = host[k] / samples;
      g_array_append_val(b->loss, mean);
    }
    if (weights) {
      b->weights = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
      if (!exec_rank_weights(r, b->weights, error))
        return FALSE;
    }
  }
  return TRUE;
}
