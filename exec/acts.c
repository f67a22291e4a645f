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
 *
 * Burst parallelism moves samples between GPU sets of different widths
 * (op_move.c). A rank that computes a layer and also the next one at another
 * width keeps two tensors of the boundary: what it produced at the first
 * width, and the next layer's input assembled at the second (its own kept
 * samples copied in, the rest received), and the same for the gradient
 * coming back. The program says so with a copy of the boundary's data
 * (ST_OP_COPY of a layer's output or input gradient): the layer then reads
 * the assembled tensor (acts_layer_input, acts_layer_dout). Which samples
 * each tensor holds, in what order, is what the rank's layer passes say
 * (StOp.sample_stride; Rank.samples).
 */
#include "exec/check.h"
#include "exec/runtime.h"

static inline int
n_outputs(const Rank *r)
{
  return r->n_micro * (r->model->n_layers + 1);
}

static inline int
n_cells(const Rank *r)
{
  return r->n_micro * r->model->n_layers;
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
  return &r->input_grads[parity(step) * n_cells(r) + micro * r->model->n_layers + layer];
}

static Act *
assembled_input(Rank *r, int32_t step, int micro, int layer)
{
  return &r->inputs[parity(step) * n_cells(r) + micro * r->model->n_layers + layer];
}

static Act *
assembled_dout(Rank *r, int32_t step, int micro, int layer)
{
  return &r->output_grads[parity(step) * n_cells(r) + micro * r->model->n_layers + layer];
}

gboolean
acts_assembles_input(const Rank *r, int micro, int layer)
{
  return layer >= 0 && r->assembles[micro * r->model->n_layers + layer];
}

gboolean
acts_assembles_dout(const Rank *r, int micro, int layer)
{
  return layer >= 0 && r->assembles[n_cells(r) + micro * r->model->n_layers + layer];
}

Act *
acts_layer_input(Rank *r, int32_t step, int micro, int layer)
{
  return acts_assembles_input(r, micro, layer) ? assembled_input(r, step, micro, layer)
                                               : acts_output(r, step, micro, layer - 1);
}

Act *
acts_layer_dout(Rank *r, int32_t step, int micro, int layer)
{
  if (acts_assembles_dout(r, micro, layer))
    return assembled_dout(r, step, micro, layer);
  return layer + 1 < r->model->n_layers ? acts_input_grad(r, step, micro, layer + 1) : NULL;
}

const ActSamples *
acts_samples(const Rank *r, int micro, int layer)
{
  static const ActSamples none = {0, 0, 0};
  if (micro < 0 || micro >= r->n_micro || layer < 0 || layer >= r->model->n_layers)
    return &none;
  return &r->samples[micro * r->model->n_layers + layer];
}

/* The users count slot of an Act (the same for both parities), and what it
 * is for messages. */
static int *
users_of(Rank *r, const Act *a, const char **what, int *cell)
{
  int per = n_cells(r);
  const Act *arrays[4] = {r->outputs, r->input_grads, r->inputs, r->output_grads};
  const int sizes[4] = {n_outputs(r), per, per, per};
  const char *names[4] = {"the output", "the input gradient", "the assembled input",
                          "the assembled output gradient"};
  int base = 0;
  for (int k = 0; k < 4; k++) {
    if (a >= arrays[k] && a < arrays[k] + 2 * sizes[k]) {
      int at = (int)((a - arrays[k]) % sizes[k]);
      if (what != NULL)
        *what = names[k];
      if (cell != NULL)
        *cell = at;
      return &r->act_users[base + at];
    }
    base += sizes[k];
  }
  g_assert_not_reached();
  return NULL;
}

static void
count(Rank *r, Act *a)
{
  if (a != NULL)
    (*users_of(r, a, NULL, NULL))++;
}

static gboolean
keeps(const StLayer *l, unsigned what)
{
  return (l->type->keeps & what) != 0;
}

void
acts_setup(Rank *r)
{
  int L = r->model->n_layers, per = n_cells(r);
  r->outputs = g_new0(Act, 2 * (size_t)n_outputs(r));
  r->input_grads = g_new0(Act, 2 * (size_t)per);
  r->inputs = g_new0(Act, 2 * (size_t)per);
  r->output_grads = g_new0(Act, 2 * (size_t)per);
  r->act_users = g_new0(int, (size_t)n_outputs(r) + 3 * (size_t)per);
  r->assembles = g_new0(gboolean, 2 * (size_t)per);
  r->samples = g_new0(ActSamples, (size_t)per);
  for (guint o = 0; o < r->p->ops->len; o++) {
    const StOp *op = st_program_op(r->p, o);
    int i = op->layer, mb = op->micro;
    if (mb < 0 || mb >= r->n_micro || i < 0)
      continue;
    /* A copy of a boundary's data: the next layer (forward) or the one
     * before (backward) reads what it assembles. */
    if (op->kind == ST_OP_COPY && op->data == ST_DATA_OUTPUT && i + 1 < L)
      r->assembles[mb * L + i + 1] = TRUE;
    if (op->kind == ST_OP_COPY && op->data == ST_DATA_INPUT_GRAD && i > 0)
      r->assembles[per + mb * L + i - 1] = TRUE;
    if (op->kind == ST_OP_COMP && op->sub == ST_PASS_FWD && op->sample_stride > 0)
      r->samples[mb * L + i] = (ActSamples){op->sample_first, op->sample_stride, op->batch};
  }
}

void
acts_clear(Rank *r)
{
  g_clear_pointer(&r->outputs, g_free);
  g_clear_pointer(&r->input_grads, g_free);
  g_clear_pointer(&r->inputs, g_free);
  g_clear_pointer(&r->output_grads, g_free);
  g_clear_pointer(&r->act_users, g_free);
  g_clear_pointer(&r->assembles, g_free);
  g_clear_pointer(&r->samples, g_free);
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
    if (op->kind == ST_OP_COMP && !tp_last_part(r, op)) /* a pass in parts: its last */
      continue;
    if (ep_expert(r, op)) /* an owned expert reads the all-to-alls' buffers (op_ep.c) */
      continue;
    if (op->kind == ST_OP_COMM_COLL &&
        (op->data == ST_DATA_EP_DISPATCH || op->data == ST_DATA_EP_COMBINE)) {
      count(r, acts_layer_input(r, 0, mb, op->layer)); /* the router's output */
      continue;
    }
    if (op->kind == ST_OP_COMM_COLL && op->data == ST_DATA_EP_COMBINE_GRAD) {
      count(r, acts_layer_dout(r, 0, mb, op->layer_last));
      continue;
    }
    gboolean selective = r->settings->recompute == ST_RECOMPUTE_SELECTIVE;
    if (op->kind == ST_OP_COMP &&
        (op->sub == ST_PASS_FWD || (op->sub == ST_PASS_RECOMPUTE && !selective))) {
      /* (a selective recompute reads the saved block, and the input only
       * when the layer keeps it anyway) */
      count(r, acts_layer_input(r, 0, mb, i));
    } else if (op->kind == ST_OP_COMP &&
               (op->sub == ST_PASS_BWD || op->sub == ST_PASS_BWD_WEIGHT)) {
      /* (a split backward's B reads them too, and W after it last) */
      if (keeps(&m->layers[i], ST_KEEPS_INPUT))
        count(r, acts_layer_input(r, 0, mb, i));
      /* A checkpointed layer's backward reads its recompute's output instead. */
      if (keeps(&m->layers[i], ST_KEEPS_OUTPUT) &&
          (!r->recomputed[mb * m->n_layers + i] ||
           r->settings->recompute == ST_RECOMPUTE_SELECTIVE))
        count(r, acts_output(r, 0, mb, i));
      count(r, acts_layer_dout(r, 0, mb, i));
    } else if ((op->kind == ST_OP_COMM_SEND || op->kind == ST_OP_COPY) &&
               op->data == ST_DATA_OUTPUT) {
      count(r, acts_output(r, 0, mb, op->layer));
    } else if ((op->kind == ST_OP_COMM_SEND || op->kind == ST_OP_COPY) &&
               op->data == ST_DATA_INPUT_GRAD) {
      count(r, acts_input_grad(r, 0, mb, op->layer));
    }
  }
}

Act *
acts_assembled(Rank *r, int32_t step, const StOp *op)
{
  if (op->data == ST_DATA_OUTPUT && acts_assembles_input(r, op->micro, op->layer + 1))
    return assembled_input(r, step, op->micro, op->layer + 1);
  if (op->data == ST_DATA_INPUT_GRAD && acts_assembles_dout(r, op->micro, op->layer - 1))
    return assembled_dout(r, step, op->micro, op->layer - 1);
  return NULL;
}

gboolean
acts_make(Rank *r, Act *a, size_t bytes, StMemCategory category, int32_t step, uint32_t op,
          void *stream, GError **error)
{
  if (a->ptr != NULL || a->users > 0) {
    const char *what = NULL;
    int at = 0;
    users_of(r, a, &what, &at);
    gboolean output = a >= r->outputs && a < r->outputs + 2 * n_outputs(r);
    int per = r->model->n_layers + (output ? 1 : 0);
    g_autofree char *name = st_op_describe(r->x->s, r->p, op);
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d, step %d, op %u '%s': %s of layer %d, micro-batch %d, is still in use "
                "from two steps before (%d readers to come: the schedule reuses it too early)",
                r->rank, step + 1, op, name, what, at % per - (output ? 1 : 0), at / per,
                a->users);
    return FALSE;
  }
  g_autofree char *what = g_strdup_printf("activations of op %u", op);
  g_mutex_lock(&r->lock);
  gboolean ok = st_pool_alloc(r->pool, bytes, category, step, op, -1, what, stream, &a->ptr,
                              error);
  g_mutex_unlock(&r->lock);
  a->users = ok ? *users_of(r, a, NULL, NULL) : 0;
  a->step = step;
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
