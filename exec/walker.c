/* walker.c: the schedule walker, shared by every backend.
 *
 * One thread per (rank, stream) issues the stream's ops step after step. An
 * op is issued when each dependency has been issued (done[d] counts issued
 * instances, as in the engine: same-step dependency d of step k needs
 * done[d] > k, a previous-step one done[d] > k - 1); then the stream waits on
 * the dependencies' end events (a no-op on the host, where issuing is
 * running). Around the op: a start event, the buffers it allocates, the op,
 * the buffers it frees, an end event. A failure anywhere stops every thread:
 * waiting ones are woken and leave. A rank with a staggered start (cyclic
 * DP) issues nothing before it. In a multiplexed schedule every op also
 * passes the multiplexer (mux.c: foreground ops in flight, background pieces
 * admitted), and a background stream beside a foreground repeats its
 * program for as many iterations as its job begins.
 */
#include "exec/check.h"
#include "exec/runtime.h"

typedef struct {
  Rank *r;
  int stream;
  GArray *ops; /* uint32: this stream's ops in order */
} Task;

static inline void **
event_slot(Rank *r, int32_t step, uint32_t op, int end)
{
  return steps_event(r, step, op, end);
}

/* Waits until dependency `op` of rank `d` (this rank or another of its
 * device) was issued for step `needed`; FALSE when the run failed. */
static gboolean
wait_issued(Rank *d, uint32_t op, int32_t needed)
{
  g_mutex_lock(&d->lock);
  while (needed >= 0 && d->done[op] <= needed && !exec_failed(d->x))
    g_cond_wait(&d->cond, &d->lock);
  g_mutex_unlock(&d->lock);
  return !exec_failed(d->x);
}

/* Waits until the dependencies of op `o` at `step` were issued; FALSE when
 * the run failed meanwhile. Then the device stream waits for their
 * completion. */
static gboolean
wait_deps(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  const StDep *deps = st_program_deps(r->p, op);
  for (uint32_t i = 0; i < op->n_deps; i++)
    if (!wait_issued(r, deps[i].op, step + deps[i].step_offset))
      return FALSE;
  /* The implicit ones (hazards.c), possibly on the device holder. */
  for (uint32_t i = r->hazard_first[o]; i < r->hazard_first[o + 1]; i++)
    if (!wait_issued(&r->x->ranks[r->hazards[i].rank], r->hazards[i].op,
                     step + r->hazards[i].step_offset))
      return FALSE;
  for (uint32_t i = 0; i < op->n_deps; i++) {
    int32_t needed = step + deps[i].step_offset;
    const StOp *d = st_program_op(r->p, deps[i].op);
    if (needed < 0 || d->stream == op->stream)
      continue;
    if (!r->dev->backend->stream_wait(r->dev, stream, *event_slot(r, needed, deps[i].op, 1),
                                      error))
      return FALSE;
  }
  for (uint32_t i = r->hazard_first[o]; i < r->hazard_first[o + 1]; i++) {
    const Hazard *hz = &r->hazards[i];
    Rank *d = &r->x->ranks[hz->rank];
    int32_t needed = step + hz->step_offset;
    if (needed < 0 || (d == r && st_program_op(r->p, hz->op)->stream == op->stream))
      continue;
    g_mutex_lock(&d->lock);
    void *ev = *event_slot(d, needed, hz->op, 1);
    g_mutex_unlock(&d->lock);
    if (!r->dev->backend->stream_wait(r->dev, stream, ev, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
run_op(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  const StDeviceBackend *b = r->dev->backend;
  if (!wait_deps(r, o, step, stream, error))
    return FALSE;
  void *start = b->event_record(r->dev, stream, error);
  if (start == NULL)
    return FALSE;
  *event_slot(r, step, o, 0) = start;
  const uint32_t *allocs = st_program_allocs(r->p, op);
  g_mutex_lock(&r->lock);
  for (int i = 0; i < op->n_alloc; i++) {
    if (!state_alloc_buffer(r, allocs[i], step, o, stream, error)) {
      g_mutex_unlock(&r->lock);
      return FALSE;
    }
  }
  g_mutex_unlock(&r->lock);
  gboolean ok;
  switch ((StOpKind)op->kind) {
  case ST_OP_COMP:
    ok = op_compute(r, o, step, stream, error);
    break;
  case ST_OP_COMM_COLL:
  case ST_OP_COMM_SEND:
  case ST_OP_COMM_RECV:
    ok = op_comm(r, o, step, stream, error);
    break;
  case ST_OP_COPY:
    ok = op_copy(r, o, step, stream, error);
    break;
  default: {
    g_autofree char *name = st_op_describe(r->x->s, r->p, o);
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d, op %u '%s': the executor does not run %s ops yet", r->rank, o, name,
                st_op_kind_name(op->kind));
    ok = FALSE;
  }
  }
  if (!ok)
    return FALSE;
  const uint32_t *frees = st_program_frees(r->p, op);
  for (int i = 0; i < op->n_free; i++) {
    void *last_use = b->event_record(r->dev, stream, error);
    if (last_use == NULL)
      return FALSE;
    g_mutex_lock(&r->lock);
    state_free_buffer(r, frees[i], step, o, last_use);
    g_mutex_unlock(&r->lock);
  }
  void *end = b->event_record(r->dev, stream, error);
  if (end == NULL)
    return FALSE;
  g_mutex_lock(&r->lock);
  *event_slot(r, step, o, 1) = end;
  r->done[o]++;
  g_cond_broadcast(&r->cond);
  g_mutex_unlock(&r->lock);
  return TRUE;
}

/* A staggered start (StRank.start_ns): the rank's streams begin issuing
 * that long after time zero. The wait is on the host: on a GPU, work issued
 * late starts late (the device runs what it was given before). FALSE when
 * the run failed or was stopped meanwhile. */
static gboolean
wait_start(Rank *r)
{
  Exec *x = r->x;
  gint64 until = x->origin_us + x->s->ranks[r->rank].start_ns / 1000;
  for (gint64 now = g_get_monotonic_time(); now < until; now = g_get_monotonic_time()) {
    if (exec_failed(x) || (x->o->stop != NULL && *x->o->stop))
      return FALSE;
    g_usleep((gulong)MIN(until - now, 10000));
  }
  return TRUE;
}

static void
interrupted(Exec *x)
{
  exec_fail(x, g_error_new(ST_EXEC_ERROR, ST_EXEC_ERROR_INTERRUPTED,
                           "interrupted: stopped after the ops already issued"));
}

/* One (rank, stream): its ops, step after step (a background job's
 * iterations beside a foreground: as many as mux.c begins), each between
 * the multiplexer's before and after. */
static gpointer
stream_main(gpointer data)
{
  Task *t = data;
  Rank *r = t->r;
  Exec *x = r->x;
  void *stream = r->streams[t->stream];
  MuxStream *ms = mux_stream(x, r, t->stream);
  if (t->ops->len == 0) /* nothing to issue (a background one would spin) */
    return NULL;
  if (x->s->ranks[r->rank].start_ns > 0 && !wait_start(r) && x->o->stop != NULL && *x->o->stop) {
    interrupted(x);
    return NULL;
  }
  GError *error = NULL;
  for (int32_t step = 0; mux_iteration(x, ms, step); step++) {
    if (!steps_reserve(r, step, stream, &error))
      break;
    for (guint i = 0; i < t->ops->len; i++) {
      if (exec_failed(x))
        return NULL;
      if (x->o->stop != NULL && *x->o->stop) {
        interrupted(x);
        return NULL;
      }
      uint32_t o = g_array_index(t->ops, uint32_t, i);
      if (!mux_before(ms, o, step, &error) || !run_op(r, o, step, stream, &error) ||
          !mux_after(ms, o, step, &error))
        break;
    }
    if (error != NULL || exec_failed(x))
      break;
  }
  if (error == NULL && !exec_failed(x))
    mux_stream_end(ms, &error);
  if (error != NULL)
    exec_fail(x, error);
  else if (!exec_failed(x) && x->o->stop != NULL && *x->o->stop)
    interrupted(x);
  return NULL;
}

gboolean
walker_run(Exec *x)
{
  g_autoptr(GPtrArray) tasks = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) threads = g_ptr_array_new();
  for (int rank = 0; rank < x->s->n_ranks; rank++) {
    Rank *r = &x->ranks[rank];
    if (r->dev == NULL)
      continue;
    for (guint st = 0; st < r->p->streams->len; st++) {
      Task *t = g_new0(Task, 1);
      t->r = r;
      t->stream = (int)st;
      t->ops = g_array_new(FALSE, FALSE, sizeof(uint32_t));
      for (guint o = 0; o < r->p->ops->len; o++)
        if (st_program_op(r->p, o)->stream == st)
          g_array_append_val(t->ops, o);
      g_ptr_array_add(tasks, t);
    }
  }
  for (guint i = 0; i < tasks->len; i++) {
    Task *t = g_ptr_array_index(tasks, i);
    g_autofree char *name = g_strdup_printf("rank%d-s%d", t->r->rank, t->stream);
    GError *local = NULL;
    GThread *th = g_thread_try_new(name, stream_main, t, &local);
    if (th == NULL) {
      exec_fail(x, local);
      break;
    }
    g_ptr_array_add(threads, th);
  }
  for (guint i = 0; i < threads->len; i++)
    g_thread_join(g_ptr_array_index(threads, i));
  for (guint i = 0; i < tasks->len; i++)
    g_array_unref(((Task *)g_ptr_array_index(tasks, i))->ops);
  return !exec_failed(x);
}
