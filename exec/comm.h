/* comm.h: communication backends, one file each behind one table: "local"
 * (ranks of this process: copies and reductions with the device's kernels)
 * and "nccl" (one process per GPU). NCCL refuses two ranks on one GPU, so
 * ranks sharing a GPU always use local.
 *
 * Every member of a group calls collective() for the same collective with its
 * own buffers, from the thread that issues its stream; the call enqueues the
 * work on the member's stream (on the host it is done when the call returns).
 * Sizes are in elements of `dt`. A reduce-scatter or all-gather over a buffer
 * of `total` elements cuts it into n slices of slot = ceil(total / n)
 * elements (the last one shorter): member i owns slice i. An all-to-all
 * cuts both buffers into n equal slices (n must divide `total`; never in
 * place): member i's send slice j lands in member j's recv slice i.
 * A ring shift (context parallelism's ring) sends member i's buffer to
 * member i + 1 mod n's recv, `total` elements each (never in place).
 * Reductions are sums (or maxima: StCommCall.op) in member order, so results
 * are deterministic. Broadcast and reduce are rooted at the group's first
 * member.
 */
#pragma once

#include <glib.h>

#include "exec/device.h"
#include "exec/exec.h"
#include "sched/sched.h"

typedef struct StCommCtx StCommCtx;

/* The reduction of an all-reduce, reduce-scatter or reduce. */
typedef enum {
  ST_COMM_SUM = 0,
  ST_COMM_MAX, /* a split cross-entropy's row maxima (kernels.h ce_split_*) */
} StCommOp;

typedef struct {
  int rank;          /* the caller */
  int comm;          /* communicator of the schedule */
  int tag;           /* send/recv pairing */
  StCollKind kind;
  StCommOp op;       /* AR, RS, REDUCE: the reduction (0: sum) */
  const void *send;  /* AR: the buffer (in place: recv == send); RS: total elements;
                        AG: this member's slice; BCAST: the root's data; REDUCE: the input;
                        A2A: total elements, slice j for member j */
  void *recv;        /* RS: this member's slice; AG: total elements; BCAST: every member's
                        copy; REDUCE: the root's result (others NULL); A2A: total elements,
                        slice i from member i */
  size_t total;      /* elements of the whole buffer */
  StKDtype dt;
  void *stream;      /* the caller's stream */
  const char *what;  /* for messages: "all_reduce bucket 2 (grads of layers 10-14)" */
} StCommCall;

typedef struct StCommBackendS {
  const char *name;
  const char *summary;
  /* `devices[r]` is the open device of rank r when this process runs it,
   * NULL otherwise. */
  StCommCtx *(*open)(const StSchedule *schedule, StExecDevice *const *devices, double timeout_s,
                     GError **error);
  void (*close)(StCommCtx *ctx);
  /* A rank failed: wake every member waiting in a call, which then fails. */
  void (*abort)(StCommCtx *ctx);
  gboolean (*collective)(StCommCtx *ctx, const StCommCall *call, GError **error);
  /* A transfer of `total` elements from call->send to the peer (send) or into
   * call->recv from the peer (recv); `peer` is a rank. */
  gboolean (*send)(StCommCtx *ctx, const StCommCall *call, int peer, GError **error);
  gboolean (*recv)(StCommCtx *ctx, const StCommCall *call, int peer, GError **error);
} StCommBackend;

/* The built-in backend (comm_local.c); nccl lives in its module
 * (comm_nccl.c, libstagger-nccl.so). */
extern const StCommBackend st_comm_local;

/* The backend named `name` ("local", "nccl"), loading its module when it is
 * one (exec/module.h); NULL with an error as st_device_backend_load. Borrowed. */
const StCommBackend *st_comm_backend_load(const char *name, GError **error);

/* Slice i of n of a buffer of `total` elements: [*first, *first + *count). */
static inline void
st_comm_slice(size_t total, int n, int i, size_t *first, size_t *count)
{
  size_t slot = (total + (size_t)n - 1) / (size_t)n;
  size_t a = MIN((size_t)i * slot, total), b = MIN(a + slot, total);
  *first = a;
  *count = b - a;
}

/* An all-to-all's call is well formed: the group divides `total`, and it is
 * not in place; else FALSE with an error naming the call. */
static inline gboolean
st_comm_all_to_all_ok(const StCommCall *call, int n, GError **error)
{
  if (call->total % (size_t)n == 0 && (call->total == 0 || call->send != call->recv))
    return TRUE;
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
              "rank %d: %s: an all-to-all of %zu elements over %d members must cut into equal "
              "slices, out of place",
              call->rank, call->what, call->total, n);
  return FALSE;
}
