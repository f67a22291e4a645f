/* acts.c: the activations the executor makes, and when they go.
 *
 * Per micro-batch: the input data, each layer's output and each layer's
 * input gradient are tensors made by one op (a forward, a backward, a
 * receive) and read by others (the next forward; a backward when its layer
 * keeps its input or output, as the model says; a send). Counting, once per
 * program, how many ops of a step read each tensor gives its lifetime: it is
 * freed when its last reader ends, as autograd frees what nothing holds. What
 * a layer keeps beyond its input and output (`saved`) lives from its forward
 * to its backward (op_compute.c); under checkpointing, from its recompute.
 * Cross-rank transfers count too: a send reads the tensor, a receive makes
 * it (pipelines, cyclic DP's model parallelism).
 */
#include "exec/check.h"
#include "exec/runtime.h"

static inline int
n_outputs(const Rank *r)
{
  return r->n_micro * (r->model->n_layers + 1);
}

/* Two steps' tensors of one (micro-batch, layer) may be alive at once: a
 * send of step k on its own stream may still be to run when the forward of
 * step k + 1 makes the next. They alternate by step parity; a third (a send
 * two steps late) is reported by acts_make. */
static inline int
parity(int32_t step)
{
  return step & 1;
}

Act *
acts_output(Rank *r, int32_t step, int micro, int layer)
{
  return &r->outputs[parity(step) * n_outputs(r) + micro * (r->model->n_layers + 1) + layer + 1];
}

Act *
acts_input_grad(Rank *r, int32_t step, int micro, int layer)
{
  int per = r->n_micro * r->model->n_layers;
  return &r->input_grads[parity(step) * per + micro * r->model->n_layers + layer];
}

/* The users count slot of an Act (the same for both parities). */
static int *
users_of(Rank *r, const Act *a)
{
  int per = r->n_micro * r->model->n_layers;
  if (a >= r->outputs && a < r->outputs + 2 * n_outputs(r))
    return &r->act_users[(a - r->outputs) % n_outputs(r)];
  return &r->act_users[n_outputs(r) + (a - r->input_grads) % per];
}

static void
count(Rank *r, Act *a)
{
  (*users_of(r, a))++;
}

static gboolean
keeps(const StLayer *l, unsigned what)
{
  return (l->type->keeps & what) != 0;
}

void
acts_count_users(Rank *r)
{
  const StModel *m = r->model;
  for (guint o = 0; o < r->p->ops->len; o++) {
    const StOp *op = st_program_op(r->p, o);
    int i = op->layer, mb = op->micro;
    if (mb < 0 || mb >= r->n_micro)
      continue;
    if (op->kind == ST_OP_COMP && (op->sub == ST_PASS_FWD || op->sub == ST_PASS_RECOMPUTE)) {
      count(r, acts_output(r, 0, mb, i - 1));
    } else if (op->kind == ST_OP_COMP && op->sub == ST_PASS_BWD) {
      if (keeps(&m->layers[i], ST_KEEPS_INPUT))
        count(r, acts_output(r, 0, mb, i - 1));
      /* A checkpointed layer's backward reads its recompute's output instead. */
      if (keeps(&m->layers[i], ST_KEEPS_OUTPUT) && !r->recomputed[mb * m->n_layers + i])
        count(r, acts_output(r, 0, mb, i));
      if (i + 1 < m->n_layers)
        count(r, acts_input_grad(r, 0, mb, i + 1));
    } else if (op->kind == ST_OP_COMM_SEND && op->data == ST_DATA_OUTPUT) {
      count(r, acts_output(r, 0, mb, op->layer));
    } else if (op->kind == ST_OP_COMM_SEND && op->data == ST_DATA_INPUT_GRAD) {
      count(r, acts_input_grad(r, 0, mb, op->layer));
    }
  }
}

gboolean
acts_make(Rank *r, Act *a, size_t bytes, StMemCategory category, int32_t step, uint32_t op,
          void *stream, GError **error)
{
  if (a->ptr != NULL || a->users > 0) {
    gboolean output = a >= r->outputs && a < r->outputs + 2 * n_outputs(r);
    int64_t at = output ? (a - r->outputs) % n_outputs(r)
                        : (a - r->input_grads) % (r->n_micro * r->model->n_layers);
    int per = r->model->n_layers + (output ? 1 : 0);
    g_autofree char *name = st_op_describe(r->x->s, r->p, op);
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d, step %d, op %u '%s': %s of layer %d, micro-batch %d, is still in use "
                "from two steps before (%d readers to come: the schedule reuses it too early)",
                r->rank, step + 1, op, name, output ? "the output" : "the input gradient",
                (int)(at % per) - (output ? 1 : 0), (int)(at / per), a->users);
    return FALSE;
  }
  g_autofree char *what = g_strdup_printf("activations of op %u", op);
  g_mutex_lock(&r->lock);
  gboolean ok = st_pool_alloc(r->pool, bytes, category, step, op, -1, what, stream, &a->ptr,
                              error);
  g_mutex_unlock(&r->lock);
  a->users = ok ? *users_of(r, a) : 0;
  return ok;
}

void
acts_use(Rank *r, Act *a, int32_t step, uint32_t op, void *stream)
{
  if (a->ptr == NULL || --a->users > 0)
    return;
  GError *error = NULL;
  void *last_use = r->dev->backend->event_record(r->dev, stream, &error);
  if (last_use == NULL) {
    exec_fail(r->x, error);
    return;
  }
  g_mutex_lock(&r->lock);
  st_pool_release(r->pool, a->ptr, step, op, last_use);
  g_mutex_unlock(&r->lock);
  a->ptr = NULL;
  a->users = 0;
}
