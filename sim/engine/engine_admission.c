/* engine_admission.c: GPU multiplexing in the engine (sched/admission.h).
 *
 * Streams marked background (StStream.background) run a best-effort job
 * beside the foreground (every other stream). Their compute ops start in
 * pieces: when a background stream's next compute op is ready and it holds
 * no piece, its device's controller decides (st_admission_decide) from what
 * the engine knows there now: background pieces in flight, whether a
 * foreground collective runs, how long the foreground has waited on a
 * receive, and the moving average of the foreground kernels' slowdown
 * (their time over their time alone) and the slowdown budget the
 * foreground's steps and then this step's kernels there left
 * (st_admission_budget, counted from the step admission opens).
 * Admitted, the stream holds a piece of compute time alone sized from that
 * budget (st_admission_piece_ns), spent op by op; refused, it waits
 * on the device's list and is tried again whenever one of those facts
 * changes there. Ops are never cut: a piece ends after the op that spends
 * its budget, or before a non-compute op of its stream.
 *
 * How kernels share the GPU once started is the share model's business
 * (cost.h): under "priority", a background kernel only gets what the
 * foreground leaves, so it slows no foreground kernel.
 *
 * Best effort. While a foreground exists, a background stream is unbounded:
 * it repeats its ops (its own step counter keeps its dependencies right)
 * for as long as the foreground runs, and starts nothing once every
 * foreground stream has finished its last step; what is running then still
 * completes. Its op records carry the foreground step during which they
 * ended (or `steps` after the last), so the foreground's step times are not
 * stretched by background work. Without any foreground stream, background
 * streams run their `steps` like any other.
 *
 * Cost: O(1) per decision and per completion, plus the waiting streams of a
 * device each time its situation changes.
 */
#include "engine/engine_internal.h"

/* The foreground made no progress while background ops kept completing:
 * the foreground is stuck, and the background would cycle forever. */
#define STUCK_BACKGROUND_OPS 10000000

static inline StreamState *
stream_of(Engine *e, const OpRef *ref)
{
  SimRank *sr = &e->sims[ref->sim];
  return &sr->streams[st_program_op(sr->program, ref->op)->stream];
}

static inline const StStream *
stream_spec(const SimRank *sr, int stream)
{
  return &g_array_index(sr->program->streams, StStream, stream);
}

static void
mark_dirty(Admission *a, int device)
{
  AdmitDevice *d = &a->devices[device];
  if (d->dirty)
    return;
  d->dirty = TRUE;
  int32_t v = device;
  g_array_append_val(a->dirty, v);
}

static void
mark_all_dirty(Engine *e)
{
  for (int d = 0; d < e->s->n_devices; d++)
    if (e->adm->devices[d].policy != NULL)
      mark_dirty(e->adm, d);
}

void
admission_init(Engine *e)
{
  gboolean any = FALSE;
  for (int i = 0; i < e->n_sims && !any; i++)
    for (guint st = 0; st < e->sims[i].program->streams->len && !any; st++)
      any = stream_spec(&e->sims[i], st)->background;
  if (!any)
    return;
  Admission *a = g_new0(Admission, 1);
  e->adm = a;
  a->devices = g_new0(AdmitDevice, e->s->n_devices);
  a->fg_finished = g_array_new(FALSE, TRUE, sizeof(int32_t));
  a->fg_step_end = g_array_new(FALSE, FALSE, sizeof(int64_t));
  a->dirty = g_array_new(FALSE, FALSE, sizeof(int32_t));
  for (int d = 0; d < e->s->n_devices; d++) {
    AdmitDevice *dev = &a->devices[d];
    st_event_node_init(&dev->wake.node);
    dev->wake.kind = EV_WAKE;
    dev->device = d;
    dev->fg_slowdown = 1.0;
    dev->waiting = g_array_new(FALSE, FALSE, sizeof(int32_t));
  }
  for (int i = 0; i < e->n_sims; i++) {
    SimRank *sr = &e->sims[i];
    AdmitDevice *dev = &a->devices[sr->device];
    for (guint st = 0; st < sr->program->streams->len; st++) {
      const StStream *spec = stream_spec(sr, st);
      gboolean has_ops = sr->info->stream_ops[st]->len > 0;
      if (spec->background) {
        if (dev->policy == NULL)
          dev->policy = &spec->admission;
      } else if (has_ops) {
        a->n_fg_streams++;
        dev->has_fg = TRUE;
      }
    }
  }
  for (int i = 0; a->n_fg_streams > 0 && i < e->n_sims; i++) {
    SimRank *sr = &e->sims[i];
    for (guint st = 0; st < sr->program->streams->len; st++)
      sr->streams[st].unbounded = stream_spec(sr, st)->background;
  }
}

void
admission_clear(Engine *e)
{
  Admission *a = e->adm;
  if (a == NULL)
    return;
  for (int d = 0; d < e->s->n_devices; d++)
    g_array_unref(a->devices[d].waiting);
  g_free(a->devices);
  g_array_unref(a->fg_finished);
  g_array_unref(a->fg_step_end);
  g_array_unref(a->dirty);
  g_free(a);
  e->adm = NULL;
}

static gboolean
foreground_finished(const Engine *e)
{
  return e->adm->n_fg_streams > 0 && e->adm->fg_steps_done >= e->steps.limit;
}

static void
end_piece(Engine *e, int device, StreamState *st)
{
  st->in_piece = FALSE;
  st->piece_left_ns = 0;
  e->adm->devices[device].bg_in_flight--;
  mark_dirty(e->adm, device);
}

/* Bookkeeping when a foreground op starts: what the controller watches. */
static void
foreground_start(Engine *e, const SimRank *sr, const StOp *op)
{
  AdmitDevice *dev = &e->adm->devices[sr->device];
  if (op->kind == ST_OP_COMM_COLL) {
    dev->fg_collectives++;
    mark_dirty(e->adm, sr->device);
  } else if (op->kind == ST_OP_COMM_RECV) {
    if (dev->fg_recvs++ == 0)
      dev->fg_recv_since = e->now;
    mark_dirty(e->adm, sr->device);
  }
}

gboolean
admission_may_start(Engine *e, const OpRef *ref)
{
  Admission *a = e->adm;
  if (a == NULL)
    return TRUE;
  SimRank *sr = &e->sims[ref->sim];
  const StOp *op = st_program_op(sr->program, ref->op);
  const StStream *spec = stream_spec(sr, op->stream);
  StreamState *st = &sr->streams[op->stream];
  if (!spec->background) {
    foreground_start(e, sr, op);
    return TRUE;
  }
  if (foreground_finished(e)) {
    if (st->in_piece)
      end_piece(e, sr->device, st);
    st->done = TRUE;
    return FALSE;
  }
  if (op->kind != ST_OP_COMP) {
    /* A transfer or collective of the background job is no GPU piece. */
    if (st->in_piece)
      end_piece(e, sr->device, st);
    return TRUE;
  }
  double cost = sr->info->cost_ns[ref->op];
  if (st->in_piece) {
    st->piece_left_ns -= cost;
    return TRUE;
  }
  AdmitDevice *dev = &a->devices[sr->device];
  StAdmissionState state = {
    .has_foreground = dev->has_fg,
    .fg_steps_done = a->n_fg_streams > 0 ? a->fg_steps_done : G_MAXINT32,
    .bg_in_flight = dev->bg_in_flight,
    .fg_collective = dev->fg_collectives > 0,
    .fg_recv_wait_ns = dev->fg_recvs > 0 ? e->now - dev->fg_recv_since : 0,
    .fg_slowdown = dev->fg_slowdown,
    .fg_budget_ns = dev->fg_budget_ns,
  };
  StAdmitDecision decision = st_admission_decide(&spec->admission, &state);
  if (st_admit_ok(decision)) {
    st->in_piece = TRUE;
    st->piece_left_ns =
      (double)st_admission_piece_ns(&spec->admission, &state, decision) - cost;
    dev->bg_in_flight++;
    return TRUE;
  }
  /* Refused while the foreground waits on a receive: look again when that
   * wait turns long, if nothing else happens first. */
  int64_t long_at = dev->fg_recv_since + spec->admission.long_recv_ns + 1;
  if (dev->fg_recvs > 0 && long_at > e->now &&
      (!st_event_queued(&dev->wake.node) || dev->wake.node.time_ns > long_at))
    st_queue_reschedule(&e->queue, &dev->wake.node, long_at);
  if (!st->waiting) {
    st->waiting = TRUE;
    int32_t pair[2] = {ref->sim, op->stream};
    g_array_append_vals(dev->waiting, pair, 2);
  }
  return FALSE;
}

int32_t
admission_record_step(Engine *e, const OpRef *ref)
{
  if (e->adm == NULL || !stream_of(e, ref)->unbounded)
    return ref->step;
  return e->adm->fg_steps_done;
}

/* Foreground step k just ended: from the step admission opens on, every
 * device's budget becomes its step budget, moved by the step's time against
 * the reference step's (the last alone, from_step - 1; there is none
 * before step 2). */
static void
step_budget(Engine *e, int32_t k)
{
  Admission *a = e->adm;
  const int64_t *end = (const int64_t *)(gpointer)a->fg_step_end->data;
  for (int d = 0; d < e->s->n_devices; d++) {
    AdmitDevice *dev = &a->devices[d];
    const StAdmissionPolicy *p = dev->policy;
    if (p == NULL || p->from_step < 2 || k < p->from_step)
      continue;
    double alone = (double)(end[p->from_step - 1] - end[p->from_step - 2]);
    dev->fg_step_budget_ns = st_admission_step_budget(p, dev->fg_step_budget_ns,
                                                      (double)(end[k] - end[k - 1]), alone);
    dev->fg_budget_ns = dev->fg_step_budget_ns;
  }
}

/* A foreground stream finished step k: advance the steps finished by all. */
static void
foreground_step_done(Engine *e, int32_t k)
{
  Admission *a = e->adm;
  if (k < 0 || k >= e->steps.limit)
    return;
  if ((guint)k >= a->fg_finished->len)
    g_array_set_size(a->fg_finished, k + 1);
  g_array_index(a->fg_finished, int32_t, k)++;
  int32_t before = a->fg_steps_done;
  while (a->fg_steps_done < e->steps.limit && (guint)a->fg_steps_done < a->fg_finished->len &&
         g_array_index(a->fg_finished, int32_t, a->fg_steps_done) == a->n_fg_streams) {
    g_array_append_val(a->fg_step_end, e->now);
    a->fg_steps_done++;
    step_budget(e, a->fg_steps_done - 1);
  }
  if (a->fg_steps_done != before)
    mark_all_dirty(e); /* admission may open (from_step) or the background ends */
}

void
admission_on_complete(Engine *e, const OpRef *ref, int64_t start_ns, gboolean wrapped)
{
  Admission *a = e->adm;
  if (a == NULL)
    return;
  SimRank *sr = &e->sims[ref->sim];
  const StOp *op = st_program_op(sr->program, ref->op);
  StreamState *st = &sr->streams[op->stream];
  AdmitDevice *dev = &a->devices[sr->device];
  if (stream_spec(sr, op->stream)->background) {
    if (st->in_piece && st->piece_left_ns <= 0)
      end_piece(e, sr->device, st);
    if (a->n_fg_streams > 0 && ++a->bg_ops_since_fg > STUCK_BACKGROUND_OPS)
      engine_fail(e, "deadlock at %.3f us: the foreground made no progress while background "
                     "streams completed %d ops",
                  e->now / 1e3, STUCK_BACKGROUND_OPS);
    return;
  }
  a->bg_ops_since_fg = 0;
  if (op->kind == ST_OP_COMP && dev->policy != NULL) {
    double cost = sr->info->cost_ns[ref->op];
    if (cost > 0) {
      double sample = (double)(e->now - start_ns) / cost;
      double before = dev->fg_slowdown;
      dev->fg_slowdown = st_admission_slowdown(dev->policy, before, sample);
      if (dev->fg_slowdown != before)
        mark_dirty(a, sr->device);
      if (a->fg_steps_done >= dev->policy->from_step) {
        gboolean over = dev->fg_budget_ns < 0;
        dev->fg_budget_ns = st_admission_budget(dev->policy, dev->fg_budget_ns,
                                                (double)(e->now - start_ns), cost);
        if (over && dev->fg_budget_ns >= 0)
          mark_dirty(a, sr->device);
      }
    }
  } else if (op->kind == ST_OP_COMM_COLL) {
    dev->fg_collectives--;
    mark_dirty(a, sr->device);
  } else if (op->kind == ST_OP_COMM_RECV) {
    if (--dev->fg_recvs == 0 && st_event_queued(&dev->wake.node))
      st_queue_remove(&e->queue, &dev->wake.node);
    mark_dirty(a, sr->device);
  }
  if (wrapped)
    foreground_step_done(e, st->step - 1);
}

void
admission_on_wake(Engine *e, Event *ev)
{
  mark_dirty(e->adm, ((AdmitDevice *)(gpointer)ev)->device);
}

gboolean
admission_flush(Engine *e)
{
  Admission *a = e->adm;
  gboolean moved = FALSE;
  for (guint i = 0; i < a->dirty->len; i++) {
    AdmitDevice *dev = &a->devices[g_array_index(a->dirty, int32_t, i)];
    dev->dirty = FALSE;
    for (guint k = 0; k + 1 < dev->waiting->len; k += 2) {
      int sim = g_array_index(dev->waiting, int32_t, k);
      int stream = g_array_index(dev->waiting, int32_t, k + 1);
      e->sims[sim].streams[stream].waiting = FALSE;
      engine_retry_stream(e, sim, stream);
      moved = TRUE;
    }
    g_array_set_size(dev->waiting, 0);
  }
  g_array_set_size(a->dirty, 0);
  return moved;
}

gboolean
admission_stream_optional(const Engine *e, int sim, int stream)
{
  return e->adm != NULL && e->sims[sim].streams[stream].unbounded;
}
