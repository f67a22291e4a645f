/* comm_local.c: the "local" comm backend: ranks of this process (all on the
 * host, or sharing one GPU) meet in memory.
 *
 * Every call is a rendezvous: members of a collective meet per
 * (communicator, group, n-th collective); a send meets its receive per
 * (communicator, sender, receiver, tag), in order. The last to arrive (the
 * leader) does the work on its own stream after waiting for every member's
 * "ready" event, records a "done" event, and every member's stream waits on
 * it. On the host the work is done before anyone returns.
 *
 * Sums run in member order (the first member's data, plus the second's, ...),
 * so an all-reduce and an out-of-place reduce-scatter of the same data give
 * the same bits. An in-place reduce-scatter (a member's slice inside its own
 * input) starts from that member's own slice, then adds the others in order:
 * its last bits may differ (the executor never asks for one).
 */
#include <string.h>

#include "exec/check.h"
#include "exec/comm.h"
#include "exec/exec.h"

typedef struct {
  StCommCall call;
  StExecDevice *dev;
  void *ready; /* recorded on the member's stream when it arrived */
} Member;

typedef struct {
  int32_t comm, group, tag; /* collectives: tag -1 */
  int64_t seq;              /* collectives: the n-th on the group; p2p: src << 32 | dst */
} Key;

typedef struct {
  Key key;
  int expected, arrived, left;
  Member *members;    /* by index in the group (p2p: 0 sender, 1 receiver) */
  gboolean done;
  GError *error;
  void *done_event;
  StExecDevice *done_dev;
} Meeting;

struct StCommCtx {
  const StSchedule *s;
  StExecDevice **devices; /* [n_ranks] */
  double timeout_s;
  GMutex lock;
  GCond cond;
  GHashTable *meetings;   /* Key -> Meeting *: open ones */
  int64_t *coll_seq;      /* [n_ranks * n_comms]: collectives issued per rank and comm */
  GHashTable *p2p_seq;    /* "comm src dst tag send|recv" -> transfers issued on that side */
  gboolean aborted;       /* a rank failed: every waiting member gives up */
};

static guint
key_hash(gconstpointer p)
{
  const Key *k = p;
  guint h = 2166136261u;
  h = (h ^ (guint)k->comm) * 16777619u;
  h = (h ^ (guint)k->group) * 16777619u;
  h = (h ^ (guint)k->tag) * 16777619u;
  h = (h ^ (guint)(k->seq ^ (k->seq >> 32))) * 16777619u;
  return h;
}

static gboolean
key_equal(gconstpointer a, gconstpointer b)
{
  const Key *x = a, *y = b;
  return x->comm == y->comm && x->group == y->group && x->tag == y->tag && x->seq == y->seq;
}

/* A meeting and the events of its members. Open meetings of a failed run
 * (a member timed out, another rank failed) are freed with the table. */
static void
meeting_free(gpointer p)
{
  Meeting *m = p;
  for (int j = 0; j < m->expected; j++)
    if (m->members[j].ready != NULL)
      m->members[j].dev->backend->event_free(m->members[j].dev, m->members[j].ready);
  if (m->done_event != NULL)
    m->done_dev->backend->event_free(m->done_dev, m->done_event);
  g_clear_error(&m->error);
  g_free(m->members);
  g_free(m);
}

static void
local_close(StCommCtx *ctx)
{
  if (ctx == NULL)
    return;
  g_free(ctx->devices);
  g_free(ctx->coll_seq);
  g_hash_table_unref(ctx->meetings);
  g_hash_table_unref(ctx->p2p_seq);
  g_mutex_clear(&ctx->lock);
  g_cond_clear(&ctx->cond);
  g_free(ctx);
}

static StCommCtx *
local_open(const StSchedule *s, StExecDevice *const *devices, double timeout_s, GError **error)
{
  for (int r = 0; r < s->n_ranks; r++) {
    if (devices[r] == NULL) {
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                  "the local comm backend runs every rank in this process, and rank %d is not "
                  "here (across processes, use the nccl backend)",
                  r);
      return NULL;
    }
  }
  StCommCtx *ctx = g_new0(StCommCtx, 1);
  ctx->s = s;
  ctx->devices = g_memdup2(devices, sizeof(StExecDevice *) * s->n_ranks);
  ctx->timeout_s = timeout_s;
  g_mutex_init(&ctx->lock);
  g_cond_init(&ctx->cond);
  ctx->meetings = g_hash_table_new_full(key_hash, key_equal, NULL, meeting_free);
  ctx->coll_seq = g_new0(int64_t, (size_t)s->n_ranks * MAX(1u, s->comms->len));
  ctx->p2p_seq = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  return ctx;
}

/* ---- the work, done by the leader on its stream ---------------------------- */

static gboolean
copy(const StKernels *k, void *stream, void *dst, const void *src, size_t elems, StKDtype dt,
     GError **error)
{
  if (dst == src || elems == 0)
    return TRUE;
  ST_KCHECK(k->copy(stream, dst, src, elems * st_kdt_size(dt), 0), k->name, error);
  return TRUE;
}

/* dst = dst (op) src: the call's reduction. */
static gboolean
add(const StKernels *k, void *stream, void *dst, const void *src, size_t elems, StKDtype dt,
    StCommOp op, GError **error)
{
  if (elems == 0)
    return TRUE;
  if (op == ST_COMM_MAX)
    ST_KCHECK(k->maximum(stream, dst, src, dt, elems), k->name, error);
  else
    ST_KCHECK(k->axpy(stream, dst, dt, 1.0f, src, dt, elems), k->name, error);
  return TRUE;
}

static inline char *
at(const void *base, size_t elems, StKDtype dt)
{
  return (char *)base + elems * st_kdt_size(dt);
}

static gboolean
do_collective(Meeting *m, const StKernels *k, void *stream, GError **error)
{
  int n = m->expected;
  const StCommCall *c0 = &m->members[0].call;
  StKDtype dt = c0->dt;
  StCommOp op = c0->op;
  size_t total = c0->total;
  switch (c0->kind) {
  case ST_COLL_ALL_REDUCE: /* member 0 sums, then everyone copies its result */
    for (int j = 1; j < n; j++)
      if (!add(k, stream, m->members[0].call.recv, m->members[j].call.send, total, dt, op,
               error))
        return FALSE;
    for (int j = 1; j < n; j++)
      if (!copy(k, stream, m->members[j].call.recv, m->members[0].call.recv, total, dt, error))
        return FALSE;
    return TRUE;
  case ST_COLL_REDUCE:
    for (int j = 0; j < n; j++) {
      gboolean ok = j == 0 ? copy(k, stream, c0->recv, m->members[0].call.send, total, dt, error)
                           : add(k, stream, c0->recv, m->members[j].call.send, total, dt, op,
                                 error);
      if (!ok)
        return FALSE;
    }
    return TRUE;
  case ST_COLL_BROADCAST:
    for (int j = 0; j < n; j++)
      if (!copy(k, stream, m->members[j].call.recv, c0->send, total, dt, error))
        return FALSE;
    return TRUE;
  case ST_COLL_REDUCE_SCATTER:
    for (int i = 0; i < n; i++) {
      size_t first, count;
      st_comm_slice(total, n, i, &first, &count);
      void *out = m->members[i].call.recv;
      gboolean in_place = out == at(m->members[i].call.send, first, dt);
      int start = in_place ? i : 0;
      if (!copy(k, stream, out, at(m->members[start].call.send, first, dt), count, dt, error))
        return FALSE;
      for (int j = 0; j < n; j++)
        if (j != start && !add(k, stream, out, at(m->members[j].call.send, first, dt), count, dt,
                               op, error))
          return FALSE;
    }
    return TRUE;
  case ST_COLL_ALL_GATHER:
    for (int j = 0; j < n; j++) {
      size_t first, count;
      st_comm_slice(total, n, j, &first, &count);
      for (int i = 0; i < n; i++)
        if (!copy(k, stream, at(m->members[i].call.recv, first, dt), m->members[j].call.send,
                  count, dt, error))
          return FALSE;
    }
    return TRUE;
  case ST_COLL_ALL_TO_ALL: { /* member i's slice j to member j's slice i */
    size_t slot = total / (size_t)n;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        if (!copy(k, stream, at(m->members[j].call.recv, (size_t)i * slot, dt),
                  at(m->members[i].call.send, (size_t)j * slot, dt), slot, dt, error))
          return FALSE;
    return TRUE;
  }
  case ST_COLL_RING_SHIFT: /* member i's buffer to member i + 1 (context parallelism) */
    for (int i = 0; i < n; i++)
      if (!copy(k, stream, m->members[(i + 1) % n].call.recv, m->members[i].call.send, total,
                dt, error))
        return FALSE;
    return TRUE;
  default:
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED, "collective %d unknown",
                c0->kind);
    return FALSE;
  }
}

static gboolean
do_transfer(Meeting *m, const StKernels *k, void *stream, GError **error)
{
  return copy(k, stream, m->members[1].call.recv, m->members[0].call.send,
              m->members[0].call.total, m->members[0].call.dt, error);
}

/* ---- meeting ------------------------------------------------------------------ */

typedef gboolean (*Work)(Meeting *m, const StKernels *k, void *stream, GError **error);

/* The leader's part, called without the lock: wait for everyone's data, do
 * the work, mark its end. */
static void
lead(Meeting *m, int me, Work work)
{
  StExecDevice *dev = m->members[me].dev;
  const StDeviceBackend *b = dev->backend;
  void *stream = m->members[me].call.stream;
  GError *error = NULL;
  for (int j = 0; j < m->expected && error == NULL; j++)
    if (j != me)
      b->stream_wait(dev, stream, m->members[j].ready, &error);
  if (error == NULL)
    work(m, b->kernels(dev), stream, &error);
  if (error == NULL)
    m->done_event = b->event_record(dev, stream, &error);
  m->done_dev = dev;
  m->error = error;
}

/* Joins the meeting `key` of `expected` members as member `index`; returns
 * when the work is enqueued (done on the host), or fails on a timeout or on
 * the leader's error. */
static gboolean
meet(StCommCtx *ctx, const Key *key, int expected, int index, const StCommCall *call, Work work,
     GError **error)
{
  StExecDevice *dev = ctx->devices[call->rank];
  const StDeviceBackend *b = dev->backend;
  GError *local = NULL;
  void *ready = b->event_record(dev, call->stream, &local);
  if (ready == NULL) {
    g_propagate_error(error, local);
    return FALSE;
  }
  g_mutex_lock(&ctx->lock);
  Meeting *m = g_hash_table_lookup(ctx->meetings, key);
  if (m == NULL) {
    m = g_new0(Meeting, 1);
    m->key = *key;
    m->expected = expected;
    m->members = g_new0(Member, expected);
    g_hash_table_insert(ctx->meetings, &m->key, m);
  }
  m->members[index] = (Member){*call, dev, ready};
  gboolean leader = ++m->arrived == m->expected;
  if (ctx->aborted) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED, "rank %d: %s abandoned: another rank failed",
                call->rank, call->what);
    g_mutex_unlock(&ctx->lock);
    return FALSE;
  }
  if (leader) {
    g_hash_table_steal(ctx->meetings, &m->key); /* later calls on the key start anew */
    g_mutex_unlock(&ctx->lock);
    lead(m, index, work);
    g_mutex_lock(&ctx->lock);
    m->done = TRUE;
    g_cond_broadcast(&ctx->cond);
  } else {
    gint64 deadline = g_get_monotonic_time() + (gint64)(ctx->timeout_s * G_USEC_PER_SEC);
    while (!m->done) {
      gboolean timed_out = !g_cond_wait_until(&ctx->cond, &ctx->lock, deadline) && !m->done;
      if (timed_out || ctx->aborted) {
        if (timed_out)
          g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_TIMEOUT,
                      "rank %d: %s did not complete within %.0f s: %d of %d members arrived",
                      call->rank, call->what, ctx->timeout_s, m->arrived, m->expected);
        else
          g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED,
                      "rank %d: %s abandoned: another rank failed", call->rank, call->what);
        /* The run is failing. A meeting still open is freed with the table; one
         * that its leader took out is freed by the last member to leave. */
        ctx->aborted = TRUE;
        g_cond_broadcast(&ctx->cond);
        if (++m->left == m->expected)
          meeting_free(m);
        g_mutex_unlock(&ctx->lock);
        return FALSE;
      }
    }
  }
  gboolean ok = m->error == NULL;
  if (!ok)
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED, "rank %d: %s: %s", call->rank,
                call->what, m->error->message);
  else if (!leader)
    ok = b->stream_wait(dev, call->stream, m->done_event, error);
  if (++m->left == m->expected)
    meeting_free(m);
  g_mutex_unlock(&ctx->lock);
  return ok;
}

static void
local_abort(StCommCtx *ctx)
{
  g_mutex_lock(&ctx->lock);
  ctx->aborted = TRUE;
  g_cond_broadcast(&ctx->cond);
  g_mutex_unlock(&ctx->lock);
}

static gboolean
local_collective(StCommCtx *ctx, const StCommCall *call, GError **error)
{
  const StComm *comm = st_schedule_comm(ctx->s, call->comm);
  int group = comm->group_of[call->rank];
  int n = comm->offsets[group + 1] - comm->offsets[group];
  if (call->kind == ST_COLL_ALL_TO_ALL && !st_comm_all_to_all_ok(call, n, error))
    return FALSE;
  g_mutex_lock(&ctx->lock);
  int64_t seq = ctx->coll_seq[(size_t)call->rank * ctx->s->comms->len + call->comm]++;
  g_mutex_unlock(&ctx->lock);
  Key key = {call->comm, group, -1, seq};
  return meet(ctx, &key, n, comm->index_of[call->rank], call, do_collective, error);
}

/* The n-th transfer from src to dst with `tag` on `comm`, counted on one side. */
static int64_t
p2p_next(StCommCtx *ctx, const StCommCall *call, int src, int dst, gboolean sending)
{
  g_autofree char *name =
    g_strdup_printf("%d %d %d %d %c", call->comm, src, dst, call->tag, sending ? 's' : 'r');
  g_mutex_lock(&ctx->lock);
  gpointer n = g_hash_table_lookup(ctx->p2p_seq, name);
  g_hash_table_replace(ctx->p2p_seq, g_steal_pointer(&name),
                       GINT_TO_POINTER(GPOINTER_TO_INT(n) + 1));
  g_mutex_unlock(&ctx->lock);
  return GPOINTER_TO_INT(n);
}

static gboolean
local_p2p(StCommCtx *ctx, const StCommCall *call, int peer, gboolean sending, GError **error)
{
  int src = sending ? call->rank : peer, dst = sending ? peer : call->rank;
  int64_t n = p2p_next(ctx, call, src, dst, sending);
  /* The n-th transfer from src to dst with this tag on this comm. */
  Key key = {call->comm, src, call->tag, ((int64_t)dst << 32) | n};
  return meet(ctx, &key, 2, sending ? 0 : 1, call, do_transfer, error);
}

static gboolean
local_send(StCommCtx *ctx, const StCommCall *call, int peer, GError **error)
{
  return local_p2p(ctx, call, peer, TRUE, error);
}

static gboolean
local_recv(StCommCtx *ctx, const StCommCall *call, int peer, GError **error)
{
  return local_p2p(ctx, call, peer, FALSE, error);
}

const StCommBackend st_comm_local = {
  .name = "local",
  .summary = "ranks of this process (the host, or one shared GPU): copies and reductions",
  .open = local_open,
  .close = local_close,
  .abort = local_abort,
  .collective = local_collective,
  .send = local_send,
  .recv = local_recv,
};
