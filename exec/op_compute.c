/* op_compute.c: what a COMP op does on a rank: a layer's forward or
 * backward on its micro-batch, or the optimizer step over every layer whose
 * states this rank holds. Inputs and outputs come from acts.c, weights,
 * gradients and states from state.c; a missing one is an error that names
 * the op (the schedule does not put it there). */
#include <string.h>

#include "exec/check.h"
#include "exec/runtime.h"

/* Scratch memory for a layer call: from the rank's pool, released after. */
typedef struct {
  Rank *r;
  int32_t step;
  uint32_t op;
  void *stream;
  GPtrArray *blocks;
  gboolean failed;
} Scratch;

static void *
scratch_alloc(gpointer data, size_t bytes)
{
  Scratch *sc = data;
  void *ptr = NULL;
  GError *error = NULL;
  g_mutex_lock(&sc->r->lock);
  gboolean ok = st_pool_alloc(sc->r->pool, bytes, ST_MEM_WORKSPACE, sc->step, sc->op, -1,
                              "layer scratch", sc->stream, &ptr, &error);
  g_mutex_unlock(&sc->r->lock);
  if (!ok) {
    exec_fail(sc->r->x, error);
    sc->failed = TRUE;
    return NULL;
  }
  g_ptr_array_add(sc->blocks, ptr);
  return ptr;
}

static void
scratch_release(Scratch *sc)
{
  for (guint i = 0; i < sc->blocks->len; i++) {
    GError *error = NULL;
    void *ev = sc->r->dev->backend->event_record(sc->r->dev, sc->stream, &error);
    g_mutex_lock(&sc->r->lock);
    st_pool_release(sc->r->pool, g_ptr_array_index(sc->blocks, i), sc->step, sc->op, ev);
    g_mutex_unlock(&sc->r->lock);
    if (error != NULL)
      exec_fail(sc->r->x, error);
  }
  g_ptr_array_unref(sc->blocks);
}

static gboolean
missing(GError **error, const Rank *r, uint32_t op, const char *what)
{
  g_autofree char *name = st_op_describe(r->x->s, r->p, op);
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
              "rank %d, op %u '%s': %s is not on this rank when the op runs (the schedule "
              "allocates nothing that holds it)",
              r->rank, op, name, what);
  return FALSE;
}

/* A tied head's weight gradient goes to the layer it is tied to, whose
 * gradient buffer may only come with that layer's own backward (a ZeRO
 * bucket): it is parked in a zeroed buffer of the rank (category grads) and
 * added there when that backward ends. */
static gboolean
park_tied_grads(Rank *r, uint32_t o, int mb, int tied, int32_t step, void *stream,
                GError **error)
{
  if (r->tied_grads[mb] != NULL)
    return TRUE;
  size_t bytes = (size_t)r->model->layers[tied].params * st_kdt_size(r->x->dt);
  g_mutex_lock(&r->lock);
  gboolean ok = st_pool_alloc(r->pool, bytes, ST_MEM_GRADS, step, o, -1, "a tied head's gradient",
                              stream, &r->tied_grads[mb], error);
  g_mutex_unlock(&r->lock);
  if (ok)
    ST_KCHECK(r->k->memset0(stream, r->tied_grads[mb], bytes), r->k->name, error);
  return ok;
}

static gboolean
add_tied_grads(Rank *r, uint32_t o, int mb, int layer, void *grads, int32_t step, void *stream,
               GError **error)
{
  if (r->tied_grads[mb] == NULL || st_model_tied_layer(r->model, layer) >= 0)
    return TRUE;
  gboolean target = FALSE;
  for (int i = 0; i < r->model->n_layers && !target; i++)
    target = st_model_tied_layer(r->model, i) == layer;
  if (!target)
    return TRUE;
  size_t n = (size_t)r->model->layers[layer].params;
  ST_KCHECK(r->k->axpy(stream, grads, r->x->dt, 1.0f, r->tied_grads[mb], r->x->dt, n),
            r->k->name, error);
  void *ev = r->dev->backend->event_record(r->dev, stream, NULL);
  g_mutex_lock(&r->lock);
  st_pool_release(r->pool, r->tied_grads[mb], step, o, ev);
  g_mutex_unlock(&r->lock);
  r->tied_grads[mb] = NULL;
  return TRUE;
}

static gboolean
is_loss(const StLayer *l)
{
  return g_strcmp0(l->type->name, "softmax_cross_entropy") == 0;
}

/* Tokens (or 1) per sample that a loss averages over. */
static int
loss_positions(const StLayer *loss)
{
  return loss->in_shape.n_dims >= 2 ? (int)loss->in_shape.dims[0] : 1;
}

static void
ctx_init(StLayerCtx *c, Rank *r, uint32_t o, int32_t step, Scratch *sc)
{
  const StOp *op = st_program_op(r->p, o);
  const StModel *m = r->model;
  const StLayer *l = &m->layers[op->layer];
  *c = (StLayerCtx){
    .k = r->k,
    .stream = sc->stream,
    .dt = r->x->dt,
    .seed = r->x->o->seed ^ ((uint64_t)step << 40) ^ ((uint64_t)op->micro << 20) ^
            (uint64_t)op->layer,
    .scratch = scratch_alloc,
    .pool = sc,
  };
  int t = st_model_tied_layer(m, op->layer);
  if (t >= 0) {
    c->tied_params = state_data_of(r, o, ST_DATA_PARAMS, t);
    c->tied_grads = r->tied_grads[op->micro];
  }
  if (is_loss(l)) {
    c->targets = r->targets[op->micro];
    c->loss_sum = r->loss + step;
    c->loss_scale =
      1.0f / (float)((double)r->settings->global_batch * loss_positions(l));
  }
}

static gboolean
forward(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  const StLayer *l = &r->model->layers[op->layer];
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  int mb = op->micro, i = op->layer;
  void *params = state_data_of(r, o, ST_DATA_PARAMS, i);
  if (l->params > 0 && params == NULL)
    return missing(error, r, o, "the layer's weights");
  if (i == 0 && !data_make_input(r, mb, step, o, stream, error))
    return FALSE;
  Act *in = acts_output(r, mb, i - 1);
  if (in->ptr == NULL)
    return missing(error, r, o, "the layer's input");
  if (is_loss(l) && !data_make_targets(r, mb, step, o, stream, error))
    return FALSE;
  Act *out = acts_output(r, mb, i);
  size_t out_bytes = (size_t)op->batch * (size_t)st_shape_elems(&l->out_shape) * st_kdt_size(r->x->dt);
  if (!acts_make(r, out, out_bytes, ST_MEM_ACTIVATIONS, step, o, stream, error))
    return FALSE;
  void **saved = &r->saved[mb * r->model->n_layers + i];
  size_t saved_bytes = impl->saved_bytes(l, op->batch, r->x->dt);
  g_autofree char *what = g_strdup_printf("what layer '%s' keeps", l->name);
  g_mutex_lock(&r->lock);
  gboolean ok = st_pool_alloc(r->pool, saved_bytes, ST_MEM_ACTIVATIONS, step, o, -1, what,
                              stream, saved, error);
  g_mutex_unlock(&r->lock);
  if (!ok)
    return FALSE;
  Scratch sc = {r, step, o, stream, g_ptr_array_new(), FALSE};
  StLayerCtx c;
  ctx_init(&c, r, o, step, &sc);
  if (st_model_tied_layer(r->model, i) >= 0 && c.tied_params == NULL)
    return missing(error, r, o, "the weights it is tied to");
  int status = impl->forward(&c, l, op->batch, params, in->ptr, out->ptr, *saved);
  scratch_release(&sc);
  if (sc.failed)
    return FALSE;
  if (status != 0)
    return st_exec_fail_status(error, __FILE__, __LINE__, l->name, status, r->k->name);
  acts_use(r, in, step, o, stream);
  if (out->users == 0) /* nobody reads it (a loss's output) */
    acts_use(r, out, step, o, stream);
  return TRUE;
}

static gboolean
backward(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  const StModel *m = r->model;
  const StLayer *l = &m->layers[op->layer];
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  int mb = op->micro, i = op->layer;
  void *params = state_data_of(r, o, ST_DATA_PARAMS, i);
  void *grads = state_data_of(r, o, ST_DATA_GRADS, i);
  if (l->params > 0 && (params == NULL || grads == NULL))
    return missing(error, r, o, params == NULL ? "the layer's weights" : "its gradients");
  gboolean keeps_in = (l->type->keeps & ST_KEEPS_INPUT) != 0;
  gboolean keeps_out = (l->type->keeps & ST_KEEPS_OUTPUT) != 0;
  Act *in = acts_output(r, mb, i - 1), *out = acts_output(r, mb, i);
  Act *dout = i + 1 < m->n_layers ? acts_input_grad(r, mb, i + 1) : NULL;
  if ((keeps_in && in->ptr == NULL) || (keeps_out && out->ptr == NULL))
    return missing(error, r, o, "an activation the layer kept");
  if (dout != NULL && dout->ptr == NULL && !is_loss(l))
    return missing(error, r, o, "the gradient of the layer's output");
  Act *din = i > 0 ? acts_input_grad(r, mb, i) : NULL;
  if (din != NULL) {
    size_t bytes = (size_t)op->batch * (size_t)st_shape_elems(&l->in_shape) *
                   st_kdt_size(r->x->dt);
    if (!acts_make(r, din, bytes, ST_MEM_WORKSPACE, step, o, stream, error))
      return FALSE;
  }
  void **saved = &r->saved[mb * m->n_layers + i];
  int tied = st_model_tied_layer(m, i);
  if (tied >= 0 && !park_tied_grads(r, o, mb, tied, step, stream, error))
    return FALSE;
  Scratch sc = {r, step, o, stream, g_ptr_array_new(), FALSE};
  StLayerCtx c;
  ctx_init(&c, r, o, step, &sc);
  if (tied >= 0 && c.tied_params == NULL)
    return missing(error, r, o, "the weights it is tied to");
  int status = impl->backward(&c, l, op->batch, params, keeps_in ? in->ptr : NULL,
                              keeps_out ? out->ptr : NULL, *saved,
                              dout != NULL ? dout->ptr : NULL, din != NULL ? din->ptr : NULL,
                              grads);
  scratch_release(&sc);
  if (sc.failed)
    return FALSE;
  if (status != 0)
    return st_exec_fail_status(error, __FILE__, __LINE__, l->name, status, r->k->name);
  if (!add_tied_grads(r, o, mb, i, grads, step, stream, error))
    return FALSE;
  GError *local = NULL;
  void *ev = r->dev->backend->event_record(r->dev, stream, &local);
  if (ev == NULL) {
    g_propagate_error(error, local);
    return FALSE;
  }
  g_mutex_lock(&r->lock);
  st_pool_release(r->pool, *saved, step, o, ev);
  *saved = NULL;
  if (is_loss(l) && r->targets[mb] != NULL) {
    void *ev2 = r->dev->backend->event_record(r->dev, stream, NULL);
    st_pool_release(r->pool, r->targets[mb], step, o, ev2);
    r->targets[mb] = NULL;
  }
  g_mutex_unlock(&r->lock);
  if (keeps_in)
    acts_use(r, in, step, o, stream);
  if (keeps_out)
    acts_use(r, out, step, o, stream);
  if (dout != NULL && dout->ptr != NULL)
    acts_use(r, dout, step, o, stream);
  if (din != NULL && din->users == 0)
    acts_use(r, din, step, o, stream);
  return TRUE;
}

/* One optimizer step over every layer whose states this rank holds: the
 * whole layer, or its slice. Gradients are sums over the global batch's
 * samples of the loss scaled by 1 / samples, so they need no further
 * scaling; they are zeroed after use for the next step. */
static gboolean
optimizer(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StModel *m = r->model;
  const StSettings *st = r->settings;
  gboolean mixed = st->precision == ST_PRECISION_MIXED;
  gboolean adam = st->optimizer == ST_OPTIMIZER_ADAM;
  StKDtype dt = r->x->dt;
  size_t ds = st_kdt_size(dt);
  double lr = r->x->o->lr > 0 ? r->x->o->lr : adam ? 1e-3 : 1e-2;
  for (int i = 0; i < m->n_layers; i++) {
    LayerState *ls = &r->layers[i];
    size_t total = (size_t)m->layers[i].params;
    if (total == 0 || ls->optim == NULL)
      continue;
    size_t first = 0, n = total;
    if (ls->optim_part)
      st_comm_slice(total, MAX(ls->parts, 1), ls->slice, &first, &n);
    /* The gradient: of the slice, or the slice of the whole (in place). */
    void *grad = ls->optim_part && ls->grads_part != NULL ? ls->grads_part
                 : ls->grads != NULL ? (char *)ls->grads + first * ds
                                     : NULL;
    void *param = ls->optim_part && ls->params_part != NULL ? ls->params_part
                  : ls->params != NULL ? (char *)ls->params + first * ds
                                       : NULL;
    if (grad == NULL || param == NULL)
      return missing(error, r, o, grad == NULL ? "a layer's gradients" : "a layer's weights");
    /* fp32: the weights are their own master copy. */
    float *master = mixed ? ls->optim : (float *)param;
    float *state = mixed ? ls->optim + n : ls->optim;
    if (adam)
      ST_KCHECK(r->k->adamw(stream, master, state, state + n, grad, dt, param, dt, n, (float)lr,
                            0.9f, 0.999f, 1e-8f, 0.0f, step + 1, 1.0f),
                r->k->name, error);
    else
      ST_KCHECK(r->k->sgd(stream, master, state, grad, dt, param, dt, n, (float)lr, 0.9f, 0.0f,
                          1.0f),
                r->k->name, error);
  }
  for (int i = 0; i < m->n_layers; i++) {
    LayerState *ls = &r->layers[i];
    size_t total = (size_t)m->layers[i].params, first, n = total;
    if (ls->grads != NULL)
      ST_KCHECK(r->k->memset0(stream, ls->grads, total * ds), r->k->name, error);
    if (ls->grads_part != NULL) {
      st_comm_slice(total, MAX(ls->parts, 1), ls->slice, &first, &n);
      ST_KCHECK(r->k->memset0(stream, ls->grads_part, n * ds), r->k->name, error);
    }
  }
  return TRUE;
}

gboolean
op_compute(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  switch ((StPass)op->sub) {
  case ST_PASS_FWD:
  case ST_PASS_RECOMPUTE:
    return forward(r, o, step, stream, error);
  case ST_PASS_BWD:
    return backward(r, o, step, stream, error);
  case ST_PASS_OPTIM:
    return optimizer(r, o, step, stream, error);
  default: {
    g_autofree char *name = st_op_describe(r->x->s, r->p, o);
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d, op %u '%s': the executor does not run %s passes yet", r->rank, o,
                name, st_pass_name(op->sub));
    return FALSE;
  }
  }
}
