/* comm_nccl.c: the "nccl" comm backend: one process per GPU.
 *
 * Bootstrap as torchrun sets the environment (RANK, WORLD_SIZE, LOCAL_RANK,
 * MASTER_ADDR, MASTER_PORT) or mpirun does (OMPI_COMM_WORLD_RANK / _SIZE,
 * PMI_RANK / PMI_SIZE, with MASTER_ADDR / MASTER_PORT or localhost:29500):
 * rank 0 makes the NCCL unique id and hands it over a TCP connection, on
 * MASTER_PORT + 1 (torchrun's store holds MASTER_PORT) or STAGGER_PORT, to
 * each other rank; then the world communicator, and one split of it per schedule
 * communicator (color: the rank's group), created in the same order on every
 * rank. Collectives map one to one (an all-to-all is a group of ncclSend /
 * ncclRecv pairs, one per member, as nccl-tests' alltoall); reduce-scatter
 * and all-gather of a size the group does not divide go through padded
 * scratch buffers (stream ordered). A watchdog thread polls every collective's completion and
 * NCCL's asynchronous errors; past --timeout, or on an error, it aborts every
 * communicator, so the streams fail instead of hanging.
 *
 * Built into the module libstagger-nccl.so (exec/module.h), which only
 * processes that run under torchrun or mpirun load.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <netdb.h>
#include <nccl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "exec/comm.h"
#include "exec/exec.h"
#include "exec/module.h"

/* What the module exports: its table (defined at the end) and its stamp. */
extern const StCommBackend st_comm_nccl;
const StModuleStamp st_module_stamp = ST_MODULE_STAMP;

typedef struct {
  cudaEvent_t done;
  gint64 deadline_us;
  char *what;
} Pending;

struct StCommCtx {
  const StSchedule *s;
  int rank, world;
  ncclComm_t world_comm;
  ncclComm_t *comms;   /* [n schedule comms]; NULL where this rank is not a member */
  double timeout_s;
  GMutex lock;
  GPtrArray *pending;  /* Pending *: issued, not known complete */
  GThread *watchdog;
  gboolean stopping;
  gboolean aborted;
  char *failure;       /* why the watchdog aborted */
};

static gboolean
nccl_ok(ncclResult_t r, const char *call, GError **error)
{
  if (r == ncclSuccess)
    return TRUE;
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED, "%s: %s (%s)", call,
              ncclGetErrorString(r), ncclGetLastError(NULL));
  return FALSE;
}

static int
env_int(const char *const *names, int fallback)
{
  for (const char *const *n = names; *n != NULL; n++) {
    const char *v = g_getenv(*n);
    if (v != NULL)
      return atoi(v);
  }
  return fallback;
}

/* ---- bootstrap: the unique id over TCP ------------------------------------------ */

static gboolean
io_all(int fd, void *buf, size_t n, gboolean writing, GError **error)
{
  char *p = buf;
  while (n > 0) {
    ssize_t k = writing ? write(fd, p, n) : read(fd, p, n);
    if (k <= 0) {
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED, "bootstrap %s: %s",
                  writing ? "write" : "read", k == 0 ? "connection closed" : g_strerror(errno));
      return FALSE;
    }
    p += k;
    n -= (size_t)k;
  }
  return TRUE;
}

static gboolean
share_id(int rank, int world, ncclUniqueId *id, GError **error)
{
  const char *host = g_getenv("MASTER_ADDR") ? g_getenv("MASTER_ADDR") : "127.0.0.1";
  /* torchrun's own store already listens on MASTER_PORT (its agent hosts
   * it): rank 0 listens one above, or on STAGGER_PORT. */
  g_autofree char *port = NULL;
  if (g_getenv("STAGGER_PORT") != NULL) {
    port = g_strdup(g_getenv("STAGGER_PORT"));
  } else {
    gint64 master = 29500;
    const char *env = g_getenv("MASTER_PORT");
    if (env != NULL && !g_ascii_string_to_signed(env, 10, 1, 65534, &master, NULL)) {
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED,
                  "bootstrap: MASTER_PORT '%s' is not a port number", env);
      return FALSE;
    }
    port = g_strdup_printf("%" G_GINT64_FORMAT, master + 1);
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  if (rank == 0)
    hints.ai_flags = AI_PASSIVE;
  int rc = getaddrinfo(rank == 0 ? NULL : host, port, &hints, &ai);
  if (rc != 0) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED, "bootstrap %s:%s: %s", host, port,
                gai_strerror(rc));
    return FALSE;
  }
  gboolean ok = FALSE;
  int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
  if (rank == 0) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, world) == 0 &&
        nccl_ok(ncclGetUniqueId(id), "ncclGetUniqueId", error)) {
      ok = TRUE;
      for (int i = 1; ok && i < world; i++) {
        int c = accept(fd, NULL, NULL);
        ok = c >= 0 && io_all(c, id, sizeof *id, TRUE, error);
        if (c >= 0)
          close(c);
      }
    } else if (error != NULL && *error == NULL) {
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED, "bootstrap listen on port %s: %s",
                  port, g_strerror(errno));
    }
  } else {
    gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;
    while (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 &&
           g_get_monotonic_time() < deadline) {
      close(fd);
      g_usleep(200000); /* rank 0 may not listen yet */
      fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    }
    ok = fd >= 0 && io_all(fd, id, sizeof *id, FALSE, error);
    if (!ok && error != NULL && *error == NULL)
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED, "bootstrap: cannot reach rank 0 "
                  "at %s:%s", host, port);
  }
  if (fd >= 0)
    close(fd);
  freeaddrinfo(ai);
  return ok;
}

/* ---- the watchdog ------------------------------------------------------------------ */

static void
abort_all(StCommCtx *ctx, const char *why)
{
  if (ctx->aborted)
    return;
  ctx->aborted = TRUE;
  ctx->failure = g_strdup(why);
  for (guint c = 0; c < ctx->s->comms->len; c++)
    if (ctx->comms[c] != NULL)
      ncclCommAbort(ctx->comms[c]);
  ncclCommAbort(ctx->world_comm);
}

static gpointer
watchdog(gpointer data)
{
  StCommCtx *ctx = data;
  while (TRUE) {
    g_usleep(100000);
    g_mutex_lock(&ctx->lock);
    if (ctx->stopping || ctx->aborted) {
      g_mutex_unlock(&ctx->lock);
      return NULL;
    }
    gint64 now = g_get_monotonic_time();
    for (guint i = 0; i < ctx->pending->len;) {
      Pending *p = g_ptr_array_index(ctx->pending, i);
      cudaError_t q = cudaEventQuery(p->done);
      if (q == cudaSuccess) {
        cudaEventDestroy(p->done);
        g_free(p->what);
        g_free(p);
        g_ptr_array_remove_index_fast(ctx->pending, i);
        continue;
      }
      if (now > p->deadline_us) {
        g_autofree char *why = g_strdup_printf("%s did not complete within %.0f s", p->what,
                                               ctx->timeout_s);
        abort_all(ctx, why);
        break;
      }
      i++;
    }
    ncclResult_t async = ncclSuccess;
    for (guint c = 0; !ctx->aborted && c < ctx->s->comms->len; c++)
      if (ctx->comms[c] != NULL && ncclCommGetAsyncError(ctx->comms[c], &async) == ncclSuccess &&
          async != ncclSuccess && async != ncclInProgress)
        abort_all(ctx, ncclGetErrorString(async));
    g_mutex_unlock(&ctx->lock);
  }
}

/* ---- open and close ---------------------------------------------------------------- */

static void
nccl_close(StCommCtx *ctx)
{
  if (ctx == NULL)
    return;
  g_mutex_lock(&ctx->lock);
  ctx->stopping = TRUE;
  g_mutex_unlock(&ctx->lock);
  if (ctx->watchdog != NULL)
    g_thread_join(ctx->watchdog);
  for (guint i = 0; i < ctx->pending->len; i++) {
    Pending *p = g_ptr_array_index(ctx->pending, i);
    cudaEventDestroy(p->done);
    g_free(p->what);
    g_free(p);
  }
  g_ptr_array_unref(ctx->pending);
  for (guint c = 0; ctx->comms != NULL && c < ctx->s->comms->len; c++)
    if (ctx->comms[c] != NULL && !ctx->aborted)
      ncclCommDestroy(ctx->comms[c]);
  if (ctx->world_comm != NULL && !ctx->aborted)
    ncclCommDestroy(ctx->world_comm);
  g_free(ctx->comms);
  g_free(ctx->failure);
  g_mutex_clear(&ctx->lock);
  g_free(ctx);
}

static StCommCtx *
nccl_open(const StSchedule *s, StExecDevice *const *devices, double timeout_s, GError **error)
{
  static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", NULL};
  static const char *const size_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
  int rank = env_int(rank_vars, -1), world = env_int(size_vars, -1);
  if (rank < 0 || world <= 0) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "the nccl backend runs one process per GPU: start it with torchrun or mpirun "
                "(RANK and WORLD_SIZE are not set)");
    return NULL;
  }
  if (world != s->n_ranks || devices[rank] == NULL) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "%d processes were started for a schedule of %d ranks", world, s->n_ranks);
    return NULL;
  }
  StCommCtx *ctx = g_new0(StCommCtx, 1);
  ctx->s = s;
  ctx->rank = rank;
  ctx->world = world;
  ctx->timeout_s = timeout_s;
  ctx->comms = g_new0(ncclComm_t, MAX(1u, s->comms->len));
  ctx->pending = g_ptr_array_new();
  g_mutex_init(&ctx->lock);
  ncclUniqueId id;
  gboolean ok = share_id(rank, world, &id, error) &&
                nccl_ok(ncclCommInitRank(&ctx->world_comm, world, id, rank), "ncclCommInitRank",
                        error);
  for (guint c = 0; ok && c < s->comms->len; c++) {
    const StComm *comm = st_schedule_comm(s, c);
    int color = comm->group_of[rank] >= 0 ? comm->group_of[rank] : NCCL_SPLIT_NOCOLOR;
    ok = nccl_ok(ncclCommSplit(ctx->world_comm, color, rank, &ctx->comms[c], NULL),
                 "ncclCommSplit", error);
  }
  if (ok)
    ctx->watchdog = g_thread_try_new("nccl-watchdog", watchdog, ctx, error);
  if (!ok || ctx->watchdog == NULL) {
    nccl_close(ctx);
    return NULL;
  }
  return ctx;
}

static void
nccl_abort(StCommCtx *ctx)
{
  g_mutex_lock(&ctx->lock);
  abort_all(ctx, "another part of the run failed");
  g_mutex_unlock(&ctx->lock);
}

/* ---- calls ---------------------------------------------------------------------------- */

static ncclDataType_t
nccl_type(StKDtype dt)
{
  return dt == ST_KDT_BF16 ? ncclBfloat16 : ncclFloat32;
}

/* Checks the abort state, and after the call hands its completion to the
 * watchdog. */
static gboolean
watch(StCommCtx *ctx, const StCommCall *call, GError **error)
{
  cudaEvent_t done = NULL;
  if (cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess ||
      cudaEventRecord(done, (cudaStream_t)call->stream) != cudaSuccess) {
    (void)cudaGetLastError();
    if (done != NULL)
      cudaEventDestroy(done);
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED, "rank %d: %s: cannot watch it",
                call->rank, call->what);
    return FALSE;
  }
  Pending *p = g_new0(Pending, 1);
  p->done = done;
  p->deadline_us = g_get_monotonic_time() + (gint64)(ctx->timeout_s * G_USEC_PER_SEC);
  p->what = g_strdup(call->what);
  g_mutex_lock(&ctx->lock);
  g_ptr_array_add(ctx->pending, p);
  g_mutex_unlock(&ctx->lock);
  return TRUE;
}

static gboolean
live(StCommCtx *ctx, const StCommCall *call, GError **error)
{
  g_mutex_lock(&ctx->lock);
  gboolean aborted = ctx->aborted;
  g_autofree char *why = g_strdup(ctx->failure);
  g_mutex_unlock(&ctx->lock);
  if (aborted)
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_TIMEOUT, "rank %d: %s: communicators "
                "aborted: %s", call->rank, call->what, why);
  return !aborted;
}

static gboolean
cuda_call(cudaError_t status, const char *what, GError **error)
{
  if (status == cudaSuccess)
    return TRUE;
  (void)cudaGetLastError();
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED, "%s: %s", what,
              cudaGetErrorString(status));
  return FALSE;
}

/* Reduce-scatter or all-gather of `total` elements over n members when n does
 * not divide it: through buffers padded to n equal slots. */
static gboolean
padded(StCommCtx *ctx, const StCommCall *call, ncclComm_t comm, int n, int me, GError **error)
{
  cudaStream_t stream = call->stream;
  size_t ds = st_kdt_size(call->dt);
  size_t slot = (call->total + (size_t)n - 1) / (size_t)n, first, count;
  st_comm_slice(call->total, n, me, &first, &count);
  void *whole = NULL, *part = NULL;
  gboolean ok = cuda_call(cudaMallocAsync(&whole, slot * n * ds, stream), "cudaMallocAsync",
                          error) &&
                cuda_call(cudaMallocAsync(&part, slot * ds, stream), "cudaMallocAsync", error) &&
                cuda_call(cudaMemsetAsync(whole, 0, slot * n * ds, stream), "cudaMemsetAsync",
                          error);
  if (ok && call->kind == ST_COLL_REDUCE_SCATTER) {
    ok = cuda_call(cudaMemcpyAsync(whole, call->send, call->total * ds,
                                   cudaMemcpyDeviceToDevice, stream),
                   "cudaMemcpyAsync", error) &&
         nccl_ok(ncclReduceScatter(whole, part, slot, nccl_type(call->dt),
                                   call->op == ST_COMM_MAX ? ncclMax : ncclSum, comm, stream),
                 "ncclReduceScatter", error) &&
         cuda_call(cudaMemcpyAsync(call->recv, part, count * ds, cudaMemcpyDeviceToDevice,
                                   stream),
                   "cudaMemcpyAsync", error);
  } else if (ok) {
    ok = cuda_call(cudaMemcpyAsync(part, call->send, count * ds, cudaMemcpyDeviceToDevice,
                                   stream),
                   "cudaMemcpyAsync", error) &&
         nccl_ok(ncclAllGather(part, whole, slot, nccl_type(call->dt), comm, stream),
                 "ncclAllGather", error) &&
         cuda_call(cudaMemcpyAsync(call->recv, whole, call->total * ds,
                                   cudaMemcpyDeviceToDevice, stream),
                   "cudaMemcpyAsync", error);
  }
  if (whole != NULL)
    cudaFreeAsync(whole, stream);
  if (part != NULL)
    cudaFreeAsync(part, stream);
  return ok;
}

/* Member i's slice j to member j's slice i: a group of pairwise transfers. */
static gboolean
all_to_all(const StCommCall *call, ncclComm_t comm, int n, GError **error)
{
  size_t slot = call->total / (size_t)n, ds = st_kdt_size(call->dt);
  ncclDataType_t type = nccl_type(call->dt);
  if (!nccl_ok(ncclGroupStart(), "ncclGroupStart", error))
    return FALSE;
  gboolean ok = TRUE;
  for (int j = 0; j < n && ok; j++)
    ok = nccl_ok(ncclSend((const char *)call->send + (size_t)j * slot * ds, slot, type, j, comm,
                          call->stream),
                 "ncclSend", error) &&
         nccl_ok(ncclRecv((char *)call->recv + (size_t)j * slot * ds, slot, type, j, comm,
                          call->stream),
                 "ncclRecv", error);
  /* The group is closed whatever happened inside it. */
  gboolean ended = nccl_ok(ncclGroupEnd(), "ncclGroupEnd", ok ? error : NULL);
  return ok && ended;
}

static gboolean
nccl_collective(StCommCtx *ctx, const StCommCall *call, GError **error)
{
  if (!live(ctx, call, error))
    return FALSE;
  const StComm *c = st_schedule_comm(ctx->s, call->comm);
  int g = c->group_of[call->rank];
  int n = c->offsets[g + 1] - c->offsets[g], me = c->index_of[call->rank];
  ncclComm_t comm = ctx->comms[call->comm];
  cudaStream_t stream = call->stream;
  ncclDataType_t type = nccl_type(call->dt);
  ncclRedOp_t op = call->op == ST_COMM_MAX ? ncclMax : ncclSum;
  size_t first, count;
  st_comm_slice(call->total, n, me, &first, &count);
  gboolean even = call->total % (size_t)n == 0, ok;
  switch (call->kind) {
  case ST_COLL_ALL_REDUCE:
    ok = nccl_ok(ncclAllReduce(call->send, call->recv, call->total, type, op, comm, stream),
                 "ncclAllReduce", error);
    break;
  case ST_COLL_REDUCE_SCATTER:
    ok = even ? nccl_ok(ncclReduceScatter(call->send, call->recv, count, type, op, comm, stream),
                        "ncclReduceScatter", error)
              : padded(ctx, call, comm, n, me, error);
    break;
  case ST_COLL_ALL_GATHER:
    ok = even ? nccl_ok(ncclAllGather(call->send, call->recv, count, type, comm, stream),
                        "ncclAllGather", error)
              : padded(ctx, call, comm, n, me, error);
    break;
  case ST_COLL_BROADCAST:
    ok = nccl_ok(ncclBroadcast(call->send, call->recv, call->total, type, 0, comm, stream),
                 "ncclBroadcast", error);
    break;
  case ST_COLL_REDUCE:
    ok = nccl_ok(ncclReduce(call->send, call->recv, call->total, type, op, 0, comm, stream),
                 "ncclReduce", error);
    break;
  case ST_COLL_ALL_TO_ALL:
    ok = st_comm_all_to_all_ok(call, n, error) && all_to_all(call, comm, n, error);
    break;
  default:
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED, "collective %d", call->kind);
    ok = FALSE;
  }
  if (!ok) {
    g_prefix_error(error, "rank %d: %s: ", call->rank, call->what);
    return FALSE;
  }
  return watch(ctx, call, error);
}

static gboolean
nccl_p2p(StCommCtx *ctx, const StCommCall *call, int peer, gboolean sending, GError **error)
{
  if (!live(ctx, call, error))
    return FALSE;
  const StComm *c = st_schedule_comm(ctx->s, call->comm);
  int to = c->index_of[peer];
  ncclComm_t comm = ctx->comms[call->comm];
  ncclResult_t r = sending ? ncclSend(call->send, call->total, nccl_type(call->dt), to, comm,
                                      call->stream)
                           : ncclRecv(call->recv, call->total, nccl_type(call->dt), to, comm,
                                      call->stream);
  if (!nccl_ok(r, sending ? "ncclSend" : "ncclRecv", error)) {
    g_prefix_error(error, "rank %d: %s: ", call->rank, call->what);
    return FALSE;
  }
  return watch(ctx, call, error);
}

static gboolean
nccl_send(StCommCtx *ctx, const StCommCall *call, int peer, GError **error)
{
  return nccl_p2p(ctx, call, peer, TRUE, error);
}

static gboolean
nccl_recv(StCommCtx *ctx, const StCommCall *call, int peer, GError **error)
{
  return nccl_p2p(ctx, call, peer, FALSE, error);
}

const StCommBackend st_comm_nccl = {
  .name = "nccl",
  .summary = "NCCL, one process per GPU (torchrun or mpirun), with a timeout watchdog",
  .open = nccl_open,
  .close = nccl_close,
  .abort = nccl_abort,
  .collective = nccl_collective,
  .send = nccl_send,
  .recv = nccl_recv,
};
