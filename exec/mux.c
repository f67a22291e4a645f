/* mux.c: GPU multiplexing at run time (DeepPool, Park et al., MLSys 2022;
 * the schedule from strategy_multiplex.c, the rules in sched/admission.h).
 *
 * A schedule with background streams (StStream.background) runs a
 * foreground job (every other stream, raised to high priority) beside
 * background jobs (low priority; on CUDA both are real stream priorities,
 * on the host there are none: device.h's `priorities`). The walker's
 * threads call in here around every op of a multiplexed run:
 *
 * Foreground. Before an op, a stream keeps at most `fg_pieces` of its ops
 * issued and not completed (DeepPool's launcher; on the host an op is done
 * when issued); a collective or a receive is announced to the controller
 * when issued. Completions are reaped from the ops' end events, without
 * waiting, by the stream itself and by background streams of the device
 * before they ask: a collective or receive then ends, and a compute op's
 * time over its time in the reference step (the last step the foreground
 * ran alone, `from_step` - 1) is one slowdown sample. The last op of a step
 * on every foreground stream completes the step.
 *
 * Background. Before a compute op, a stream that holds no piece asks its
 * device's controller (exec/admit.h: the simulator's decision on what was
 * measured); refused, it waits until something the decision reads changes,
 * until the pending receive turns long, or a poll (so that completions on a
 * GPU whose foreground thread is blocked are seen), and asks again. Every
 * admission is recorded, and a refusal when its reason differs from that
 * stream's last one. Admitted, it holds a piece of the length the controller
 * gives (st_admission_piece_ns: sized from the slowdown budget the
 * foreground's measured kernels left, at most `piece_ns`), spent op by
 * op by the ops' measured times (their time under sharing, not alone, so
 * pieces are at most as long as the policy says); a piece ends when spent,
 * or before a transfer or collective of the background job.
 *
 * Best effort. While a foreground runs, background streams repeat their
 * program (its steps are the job's iterations). The ranks that meet in a
 * collective or transfer (a `dp` background job; a `local` copy alone) agree
 * on the iterations they run: the first is begun with the run (the job is
 * launched then and waits for admission), the first stream to reach
 * iteration k > 0 decides for all, and none is begun once the foreground
 * finished; every member finishes the iterations begun (admitted as on a
 * device without a foreground once it has finished), so the job's weights
 * are those of whole iterations. Without any foreground stream, background streams run the
 * schedule's steps like any other.
 */
#include "exec/admit.h"
#include "exec/check.h"
#include "exec/runtime.h"

/* How often a refused piece looks again at the foreground when nothing
 * announced a change: completions on a GPU are only seen by reaping. */
#define POLL_NS 200000

typedef struct {
  Rank *r;
  uint32_t op;
  int32_t step;
  gboolean last; /* the last op of its stream in the step */
} Flight;

/* Ranks that meet in a collective or transfer decide their iterations
 * together. */
typedef struct {
  int32_t started; /* iterations begun */
  int32_t final;   /* no iteration from here on; -1 until decided */
} Group;

struct MuxStream {
  Mux *mux;
  Rank *r;
  int stream;
  gboolean background;
  uint32_t last_op;     /* its last op in program order */
  GQueue flight;        /* foreground: Flight *, oldest first (mux lock) */
  Group *group;         /* background */
  gboolean in_piece;
  int64_t piece_left_ns;
  StAdmitDecision refused; /* the reason of its last refusal in this wait */
};

struct Mux {
  Exec *x;
  StAdmitCtl *ctl;
  GMutex lock;
  GCond cond;
  gboolean repeat;      /* background streams repeat while a foreground runs */
  int32_t alone_step;   /* the foreground's reference step, -1 when none */
  int fg_pieces;
  int64_t **alone_ns;   /* [n_ranks][n_ops]: foreground ops' times in the reference step */
  GPtrArray *streams;   /* MuxStream *, owned */
  GPtrArray **fg_at;    /* [n_devices]: the foreground streams of each device (borrowed) */
  Group *groups;        /* [n_ranks], indexed by a group's lowest rank */
};

static const StStream *
spec(const Rank *r, int stream)
{
  return &g_array_index(r->p->streams, StStream, stream);
}

int64_t
mux_now_ns(const Exec *x)
{
  return (g_get_monotonic_time() - x->origin_us) * 1000;
}

/* The lowest rank this one meets in a collective or transfer. */
static int
group_of(const StSchedule *s, int rank)
{
  const StProgram *p = st_schedule_program_of(s, rank);
  int low = rank;
  for (guint o = 0; o < p->ops->len; o++) {
    const StOp *op = st_program_op(p, o);
    if (op->comm < 0)
      continue;
    const StComm *c = st_schedule_comm(s, op->comm);
    int g = c->group_of[rank];
    if (g >= 0)
      low = MIN(low, c->members[c->offsets[g]]);
  }
  return low;
}

static void
stream_free(gpointer p)
{
  MuxStream *ms = p;
  g_queue_clear_full(&ms->flight, g_free);
  g_free(ms);
}

void
mux_setup(Exec *x)
{
  const StSchedule *s = x->s;
  const StAdmissionPolicy *any = NULL;
  int fg_streams = 0;
  /* The ranks of this process: under NCCL each process watches the
   * foreground of its own GPU, which is all its admissions read. */
  for (int rk = 0; rk < s->n_ranks; rk++) {
    if (x->ranks[rk].dev == NULL)
      continue;
    const StProgram *p = st_schedule_program_of(s, rk);
    g_autofree guint *ops = g_new0(guint, p->streams->len);
    for (guint o = 0; o < p->ops->len; o++)
      ops[st_program_op(p, o)->stream]++;
    for (guint st = 0; st < p->streams->len; st++) {
      const StStream *sp = &g_array_index(p->streams, StStream, st);
      if (sp->background && any == NULL)
        any = &sp->admission;
      fg_streams += !sp->background && ops[st] > 0;
    }
  }
  if (any == NULL)
    return; /* not multiplexed */
  Mux *m = g_new0(Mux, 1);
  x->mux = m;
  m->x = x;
  g_mutex_init(&m->lock);
  g_cond_init(&m->cond);
  m->ctl = st_admit_ctl_new(s->n_devices, fg_streams, s->steps);
  m->repeat = fg_streams > 0;
  m->alone_step = any->from_step - 1;
  m->fg_pieces = MAX(any->fg_pieces, 1);
  m->alone_ns = g_new0(int64_t *, s->n_ranks);
  m->streams = g_ptr_array_new_with_free_func(stream_free);
  m->fg_at = g_new0(GPtrArray *, s->n_devices);
  m->groups = g_new0(Group, s->n_ranks);
  for (int d = 0; d < s->n_devices; d++)
    m->fg_at[d] = g_ptr_array_new();
  for (int rk = 0; rk < s->n_ranks; rk++) {
    /* A job is launched with the run: its first iteration is begun then,
     * whenever admission lets its pieces in. */
    m->groups[rk] = (Group){m->repeat ? 1 : 0, -1};
    Rank *r = &x->ranks[rk];
    if (r->dev == NULL)
      continue;
    m->alone_ns[rk] = g_new0(int64_t, MAX(r->p->ops->len, 1));
    for (guint st = 0; st < r->p->streams->len; st++) {
      const StStream *sp = spec(r, (int)st);
      MuxStream *ms = g_new0(MuxStream, 1);
      ms->mux = m;
      ms->r = r;
      ms->stream = (int)st;
      ms->background = sp->background;
      ms->refused = ST_ADMIT_N;
      ms->last_op = UINT32_MAX;
      g_queue_init(&ms->flight);
      for (guint o = 0; o < r->p->ops->len; o++)
        if (st_program_op(r->p, o)->stream == st)
          ms->last_op = o;
      if (sp->background) {
        r->background = TRUE;
        ms->group = &m->groups[group_of(s, rk)];
        st_admit_ctl_device(m->ctl, r->device, &sp->admission, FALSE);
      } else if (ms->last_op != UINT32_MAX) {
        st_admit_ctl_device(m->ctl, r->device, NULL, TRUE);
        g_ptr_array_add(m->fg_at[r->device], ms);
      }
      g_ptr_array_add(m->streams, ms);
    }
  }
}

void
mux_free(Exec *x)
{
  Mux *m = x->mux;
  if (m == NULL)
    return;
  for (int rk = 0; rk < x->s->n_ranks; rk++)
    g_free(m->alone_ns[rk]);
  g_free(m->alone_ns);
  for (int d = 0; d < x->s->n_devices; d++)
    g_ptr_array_unref(m->fg_at[d]);
  g_free(m->fg_at);
  g_ptr_array_unref(m->streams);
  g_free(m->groups);
  st_admit_ctl_free(m->ctl);
  g_mutex_clear(&m->lock);
  g_cond_clear(&m->cond);
  g_free(m);
  x->mux = NULL;
}

MuxStream *
mux_stream(Exec *x, Rank *r, int stream)
{
  if (x->mux == NULL)
    return NULL;
  for (guint i = 0; i < x->mux->streams->len; i++) {
    MuxStream *ms = g_ptr_array_index(x->mux->streams, i);
    if (ms->r == r && ms->stream == stream)
      return ms;
  }
  return NULL;
}

gboolean
mux_repeats(const Exec *x, const Rank *r)
{
  return x->mux != NULL && x->mux->repeat && r->background;
}

void
mux_wake(Exec *x)
{
  if (x->mux == NULL)
    return;
  g_mutex_lock(&x->mux->lock);
  g_cond_broadcast(&x->mux->cond);
  g_mutex_unlock(&x->mux->lock);
}

GArray *
mux_steal_records(Exec *x)
{
  return x->mux != NULL ? st_admit_steal_records(x->mux->ctl) : NULL;
}

/* ---- the foreground ------------------------------------------------------------ */

/* The op's measured time; *end_ns (may be NULL): its end since the run's
 * origin. -1 on error. */
static int64_t
duration(Rank *r, int32_t step, uint32_t o, int64_t *end_ns, GError **error)
{
  const StDeviceBackend *b = r->dev->backend;
  void *origin = r->x->origins[0];
  int64_t start = 0, end = 0;
  if (!b->event_time(r->dev, origin, *steps_event(r, step, o, 0), &start, error) ||
      !b->event_time(r->dev, origin, *steps_event(r, step, o, 1), &end, error))
    return -1;
  if (end_ns != NULL)
    *end_ns = end;
  return end - start;
}

/* Takes the completed ops off the front of a foreground stream's queue and
 * tells the controller. Under the mux lock; never waits. */
static gboolean
reap(MuxStream *ms, GError **error)
{
  Mux *m = ms->mux;
  gboolean changed = FALSE;
  while (!g_queue_is_empty(&ms->flight)) {
    Flight *f = g_queue_peek_head(&ms->flight);
    Rank *r = f->r;
    if (!r->dev->backend->event_done(r->dev, *steps_event(r, f->step, f->op, 1)))
      break;
    g_queue_pop_head(&ms->flight);
    g_autofree Flight *done = f;
    int64_t end = 0, took = duration(r, f->step, f->op, &end, error);
    if (took < 0)
      return FALSE;
    const StOp *op = st_program_op(r->p, f->op);
    int64_t *alone = &m->alone_ns[r->rank][f->op];
    if (f->step == m->alone_step)
      *alone = took;
    st_admit_fg_end(m->ctl, r->device, op->kind, mux_now_ns(m->x), took,
                    f->step > m->alone_step ? *alone : 0);
    if (f->last)
      st_admit_fg_step_done(m->ctl, f->step, end);
    changed = TRUE;
  }
  if (changed)
    g_cond_broadcast(&m->cond);
  return TRUE;
}

static gboolean
reap_device(Mux *m, int device, GError **error)
{
  GPtrArray *fg = m->fg_at[device];
  for (guint i = 0; i < fg->len; i++)
    if (!reap(g_ptr_array_index(fg, i), error))
      return FALSE;
  return TRUE;
}

/* Fewer than `limit` ops issued and not completed: waits for the oldest. */
static gboolean
throttle(MuxStream *ms, int limit, GError **error)
{
  Mux *m = ms->mux;
  g_mutex_lock(&m->lock);
  gboolean ok = reap(ms, error);
  while (ok && g_queue_get_length(&ms->flight) >= (guint)limit) {
    Flight *f = g_queue_peek_head(&ms->flight);
    void *end = *steps_event(f->r, f->step, f->op, 1);
    int64_t ignored;
    g_mutex_unlock(&m->lock);
    ok = ms->r->dev->backend->event_time(ms->r->dev, m->x->origins[0], end, &ignored, error);
    g_mutex_lock(&m->lock);
    ok = ok && reap(ms, error);
  }
  g_mutex_unlock(&m->lock);
  return ok;
}

/* ---- the background ------------------------------------------------------------ */

static void
end_piece(MuxStream *ms)
{
  if (!ms->in_piece)
    return;
  Mux *m = ms->mux;
  ms->in_piece = FALSE;
  g_mutex_lock(&m->lock);
  st_admit_piece_end(m->ctl, ms->r->device);
  g_cond_broadcast(&m->cond);
  g_mutex_unlock(&m->lock);
}

static gboolean
stopped(const Exec *x)
{
  return exec_failed((Exec *)x) || (x->o->stop != NULL && *x->o->stop);
}

/* Waits for a piece; FALSE when the run failed or stopped meanwhile. */
static gboolean
admit(MuxStream *ms, uint32_t o, int32_t step, GError **error)
{
  Mux *m = ms->mux;
  Rank *r = ms->r;
  ms->refused = ST_ADMIT_N;
  int64_t piece = 0;
  g_mutex_lock(&m->lock);
  for (;;) {
    if (stopped(m->x) || !reap_device(m, r->device, error)) {
      g_mutex_unlock(&m->lock);
      return FALSE;
    }
    int64_t now = mux_now_ns(m->x);
    StAdmitDecision d =
      st_admit_ask(m->ctl, r->device, r->rank, o, step, now, &ms->refused, &piece);
    if (st_admit_ok(d))
      break;
    int64_t until = now + POLL_NS, recheck = st_admit_recheck_ns(m->ctl, r->device);
    if (recheck > now)
      until = MIN(until, recheck);
    g_cond_wait_until(&m->cond, &m->lock, m->x->origin_us + until / 1000 + 1);
  }
  g_mutex_unlock(&m->lock);
  ms->in_piece = TRUE;
  ms->piece_left_ns = piece;
  return TRUE;
}

/* ---- around every op ------------------------------------------------------------ */

gboolean
mux_iteration(Exec *x, MuxStream *ms, int32_t step)
{
  if (ms == NULL || !ms->background || !ms->mux->repeat)
    return step < x->s->steps;
  Mux *m = ms->mux;
  Group *g = ms->group;
  g_mutex_lock(&m->lock);
  gboolean go;
  if (step < g->started)
    go = TRUE;
  else if (g->final >= 0 && step >= g->final)
    go = FALSE;
  else if (st_admit_fg_finished(m->ctl) || step >= steps_capacity() || stopped(x))
    go = FALSE, g->final = step;
  else
    go = TRUE, g->started = step + 1;
  g_mutex_unlock(&m->lock);
  return go;
}

gboolean
mux_before(MuxStream *ms, uint32_t o, int32_t step, GError **error)
{
  if (ms == NULL)
    return TRUE;
  const StOp *op = st_program_op(ms->r->p, o);
  if (!ms->background) {
    if (!throttle(ms, ms->mux->fg_pieces, error))
      return FALSE;
    if (op->kind == ST_OP_COMM_COLL || op->kind == ST_OP_COMM_RECV) {
      g_mutex_lock(&ms->mux->lock);
      st_admit_fg_begin(ms->mux->ctl, ms->r->device, op->kind, mux_now_ns(ms->mux->x));
      g_cond_broadcast(&ms->mux->cond);
      g_mutex_unlock(&ms->mux->lock);
    }
    return TRUE;
  }
  if (op->kind != ST_OP_COMP) { /* a transfer or collective is no GPU piece */
    end_piece(ms);
    return TRUE;
  }
  return ms->in_piece || admit(ms, o, step, error);
}

gboolean
mux_after(MuxStream *ms, uint32_t o, int32_t step, GError **error)
{
  if (ms == NULL)
    return TRUE;
  Mux *m = ms->mux;
  if (!ms->background) {
    Flight *f = g_new(Flight, 1);
    *f = (Flight){ms->r, o, step, o == ms->last_op};
    g_mutex_lock(&m->lock);
    g_queue_push_tail(&ms->flight, f);
    gboolean ok = reap(ms, error);
    g_mutex_unlock(&m->lock);
    return ok;
  }
  if (!ms->in_piece)
    return TRUE;
  int64_t took = duration(ms->r, step, o, NULL, error); /* on a GPU: waits for the op */
  if (took < 0)
    return FALSE;
  ms->piece_left_ns -= took;
  if (ms->piece_left_ns <= 0)
    end_piece(ms);
  return TRUE;
}

gboolean
mux_stream_end(MuxStream *ms, GError **error)
{
  if (ms == NULL)
    return TRUE;
  end_piece(ms);
  if (ms->background)
    return TRUE;
  /* Every op seen complete, so the last steps count as done. */
  return throttle(ms, 1, error);
}
