/* hazards.c: the order a rank's sends of model states need, beyond the
 * schedule's dependencies.
 *
 * A send of weights or gradients (cyclic DP's chains and relays) waits for
 * its receiver, on a stream of its own, while the rank's other streams go
 * on. The schedule orders what the send reads before it (its dependencies)
 * but, as the simulator needs no more, not always the next write of the same
 * memory after it: the last holder of a chain passes the stage's total on to
 * the first while its compute stream is already free to run the next
 * backward into the same gradient buffer. On a GPU or on the host, that
 * write may overtake the transfer. So every op that writes a kind of model
 * state of some layers on this rank also waits, implicitly, for the sends of
 * the same state and layers that read the data it overwrites: with n
 * alternating buffers (StBuffer.slot), the send that read data step d - n
 * when the writer writes data step d. Writers: backwards (gradients of their
 * step), the optimizer (weights w_{t+1} from data step t = step - version),
 * receives of weights or gradients (step - version); readers: sends of
 * weights, gradients and totals (step - version). Such a wait points into an
 * earlier step, so it cannot close a cycle within one; it only holds a writer
 * back when a send of an earlier step is still in flight. A guest (cyclic
 * DP's shared devices) writes its holder's gradients: it waits for the
 * holder's sends. */
#include "exec/runtime.h"

typedef struct {
  gboolean params;     /* the weights; else the gradients */
  int a, b;            /* layers */
  int shift;           /* data step - the op's step */
} Access;

/* What op `o` writes, or reads when `reading`; FALSE when neither. */
static gboolean
access_of(const Rank *r, const StOp *op, gboolean reading, Access *acc)
{
  const StModel *m = r->model;
  StData d = op->data;
  gboolean states = d == ST_DATA_PARAMS || d == ST_DATA_GRADS || d == ST_DATA_GRADS_TOTAL;
  if (reading) {
    if (op->kind != ST_OP_COMM_SEND || !states)
      return FALSE;
    *acc = (Access){d == ST_DATA_PARAMS, op->layer, op->layer_last, -op->version};
    return TRUE;
  }
  if (op->kind == ST_OP_COMM_RECV && states) {
    *acc = (Access){d == ST_DATA_PARAMS, op->layer, op->layer_last, -op->version};
    return TRUE;
  }
  if (op->kind != ST_OP_COMP || (op->layer < 0 && op->sub != ST_PASS_OPTIM))
    return FALSE;
  if (op->sub == ST_PASS_BWD || op->sub == ST_PASS_BWD_WEIGHT) { /* B writes no gradient */
    int w = state_weights_layer(m, op->layer);
    *acc = (Access){FALSE, w, w, 0};
    return m->layers[w].params > 0;
  }
  if (op->sub == ST_PASS_OPTIM) {
    int a = op->layer >= 0 ? op->layer : 0;
    int b = op->layer < 0 ? m->n_layers - 1 : MAX(op->layer_last, op->layer);
    *acc = (Access){TRUE, a, b, 1 - op->version};
    return TRUE;
  }
  return FALSE;
}

/* Alternating buffers of the weights (or gradients) of layers [a, b] here. */
static int
slots_of(const Rank *r, gboolean params, int a, int b)
{
  int n = 1;
  for (guint j = 0; j < r->p->buffers->len; j++) {
    const StBuffer *buf = &g_array_index(r->p->buffers, StBuffer, j);
    if (buf->slot >= 0 && buf->data == (params ? ST_DATA_PARAMS : ST_DATA_GRADS) &&
        buf->layer <= b && a <= buf->layer_last)
      n = MAX(n, buf->slot + 1);
  }
  return n;
}

void
hazards_find(Exec *x, Rank *r)
{
  guint n_ops = r->p->ops->len;
  GArray *found = g_array_new(FALSE, FALSE, sizeof(Hazard));
  r->hazard_first = g_new0(uint32_t, n_ops + 1);
  for (guint o = 0; o < n_ops; o++) {
    r->hazard_first[o] = found->len;
    Access w = {0};
    if (!access_of(r, st_program_op(r->p, o), FALSE, &w))
      continue;
    /* The rank whose buffers it writes: itself, or a guest's holder (whose
     * sends read the gradient the guest adds into). */
    int home = r->layers[w.a].home;
    Rank *h = &x->ranks[home];
    int n = slots_of(h, w.params, w.a, w.b);
    for (guint s = 0; s < h->p->ops->len; s++) {
      Access rd = {0};
      if (!access_of(h, st_program_op(h->p, s), TRUE, &rd) || (home == r->rank && s == o) ||
          rd.params != w.params || rd.b < w.a || w.b < rd.a)
        continue;
      /* The writer of data step k + w.shift overwrites what the send read
       * at data step k + w.shift - n, in its step k + w.shift - n - rd.shift. */
      int offset = w.shift - n - rd.shift;
      if (offset < 0) {
        Hazard hz = {s, offset, home};
        g_array_append_val(found, hz);
      }
    }
  }
  r->hazard_first[n_ops] = found->len;
  r->hazards = (Hazard *)(void *)g_array_free(found, FALSE);
}
