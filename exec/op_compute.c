/* op_compute.c: what a layer pass does on a rank: a layer's forward, its
 * recompute (activation checkpointing) or its backward on one micro-batch.
 * Inputs and outputs come from acts.c, weights and gradients from state.c
 * (the version the op reads: StOp.version); a missing one is an error that
 * names the op (the schedule does not put it there). Optimizer steps,
 * compress and expand are in op_update.c.
 *
 * Checkpointing: a layer whose micro-batch has a RECOMPUTE op keeps nothing
 * of its forward but what others read anyway (its output is the next
 * layer's input, kept until that layer's recompute or backward: the
 * checkpoint). The recompute runs the forward again from its kept input,
 * writing what the layer saves for backward and, when the backward reads the
 * layer's output, a fresh copy of it; a loss layer's recompute adds its loss
 * to a scratch sum, not to the step's.
 *
 * Selective recomputation (settings->recompute): a layer with a RECOMPUTE
 * op keeps its saved block but the part its implementation can make again
 * (StLayerImpl.again_bytes: attention scores), which its forward writes
 * into a piece of its own workspace; the recompute allocates that part
 * (activations) and makes it from the saved block; the backward reads it
 * there and frees it.
 *
 * A split backward (zero-bubble pipelines: ST_PASS_BWD_INPUT, B, then
 * ST_PASS_BWD_WEIGHT, W). The layer implementations compute both gradients
 * in one call, so B runs it for the input's gradient with the weights'
 * written into a block of the pool it throws away, and frees nothing the
 * layer read; W runs it again without an input gradient (as for a model's
 * first layer) into the layer's gradient, and frees what a backward frees.
 * The numbers are a whole backward's; the work is up to twice its (the
 * input-gradient chain inside a layer runs twice), and the thrown-away
 * block is memory the simulator does not count (it counts Qi et al.'s B,
 * which writes no weight gradient). */
#include <string.h>

#include "exec/check.h"
#include "exec/runtime.h"

/* ---- helpers shared with op_update.c -------------------------------------------- */

void *
op_scratch(Rank *r, size_t bytes, StMemCategory category, const char *what, int32_t step,
           uint32_t op, void *stream, GError **error)
{
  void *ptr = NULL;
  g_mutex_lock(&r->lock);
  gboolean ok = st_pool_alloc(r->pool, bytes, category, step, op, -1, what, stream, &ptr, error);
  g_mutex_unlock(&r->lock);
  return ok ? ptr : NULL;
}

void
op_scratch_release(Rank *r, void *ptr, int32_t step, uint32_t op, void *stream)
{
  if (ptr == NULL)
    return;
  void *ev = r->dev->backend->event_record(r->dev, stream, NULL);
  g_mutex_lock(&r->lock);
  st_pool_release(r->pool, ptr, step, op, ev);
  g_mutex_unlock(&r->lock);
}

gboolean
op_missing(GError **error, const Rank *r, uint32_t op, const char *what)
{
  g_autofree char *name = st_op_describe(r->x->s, r->p, op);
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
              "rank %d, op %u '%s': %s is not on this rank when the op runs (the schedule "
              "allocates nothing that holds it)",
              r->rank, op, name, what);
  return FALSE;
}

/* ---- layer calls ---------------------------------------------------------------- */

/* Scratch memory for a layer call: the pass's workspace in the schedule
 * when the op allocates one (an opaque workspace buffer, which the
 * strategies size with st_layer_memory: its memory is then predicted), cut
 * into ST_LAYER_ALIGN-aligned pieces as the layer asks; else blocks of the
 * rank's pool, released after. */
typedef struct {
  Rank *r;
  int32_t step;
  uint32_t op;
  void *stream;
  GPtrArray *blocks;
  char *own;         /* the schedule's workspace, or NULL */
  size_t room, used; /* its bytes, and how many the layer took */
  gboolean failed;
} Scratch;

static void
scratch_init(Scratch *sc, Rank *r, uint32_t o, int32_t step, void *stream)
{
  *sc = (Scratch){r, step, o, stream, g_ptr_array_new(), NULL, 0, 0, FALSE};
  sc->own = state_own_scratch(r, o, step, ST_MEM_WORKSPACE, &sc->room);
  /* A later part of a pass in parts uses the pass's workspace, which its
   * first part allocated (every part takes all of it). */
  if (sc->own == NULL && st_program_op(r->p, o)->part > 0)
    sc->own = state_freed_scratch(r, o, step, ST_MEM_WORKSPACE, &sc->room);
  /* A step of a pass cut around context parallelism's exchanges takes
   * blocks of the pool: the schedule sizes the workspace for the whole
   * pass, not per step (op_cp.c). */
  if (st_op_cp_steps(st_program_op(r->p, o)) > 0) {
    sc->own = NULL;
    sc->room = 0;
  }
}

static void *
scratch_alloc(gpointer data, size_t bytes)
{
  Scratch *sc = data;
  GError *error = NULL;
  if (sc->own != NULL) {
    size_t take = (size_t)st_layer_aligned((int64_t)bytes);
    if (sc->used + take <= sc->room) {
      sc->used += take;
      return sc->own + sc->used - take;
    }
    g_autofree char *name = st_op_describe(sc->r->x->s, sc->r->p, sc->op);
    g_set_error(&error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d, op %u '%s': the layer's scratch needs more than the schedule's %zu "
                "bytes of workspace (%zu taken, %zu more asked)",
                sc->r->rank, sc->op, name, sc->room, sc->used, bytes);
    exec_fail(sc->r->x, error);
    sc->failed = TRUE;
    return NULL;
  }
  void *ptr = op_scratch(sc->r, bytes, ST_MEM_WORKSPACE, "layer scratch", sc->step, sc->op,
                         sc->stream, &error);
  if (ptr == NULL && bytes > 0) {
    exec_fail(sc->r->x, error);
    sc->failed = TRUE;
    return NULL;
  }
  g_ptr_array_add(sc->blocks, ptr);
  return ptr;
}

/* The schedule's workspace is what the layer takes, exactly: a schedule
 * that declares more than the layer uses mispredicts memory as surely as
 * one that declares less. */
static gboolean
scratch_all_used(const Scratch *sc, GError **error)
{
  if (sc->own == NULL || sc->used == sc->room)
    return TRUE;
  g_autofree char *name = st_op_describe(sc->r->x->s, sc->r->p, sc->op);
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
              "rank %d, op %u '%s': the layer took %zu of the schedule's %zu bytes of workspace",
              sc->r->rank, sc->op, name, sc->used, sc->room);
  return FALSE;
}

static void
scratch_release(Scratch *sc)
{
  for (guint i = 0; i < sc->blocks->len; i++)
    op_scratch_release(sc->r, g_ptr_array_index(sc->blocks, i), sc->step, sc->op, sc->stream);
  g_ptr_array_unref(sc->blocks);
}

/* A tied head's weight gradient goes to the layer it is tied to, whose
 * gradient buffer may only come with that layer's own backward (a ZeRO
 * bucket): it is parked in a zeroed buffer (category grads) and added there
 * when that backward ends. The buffer is the schedule's when the head's
 * backward allocates an opaque grads buffer (the strategies' "tied grads",
 * freed by that later backward: its memory is then predicted), else the
 * rank's own. */
static gboolean
park_tied_grads(Rank *r, uint32_t o, int mb, int tied, int32_t step, void *stream,
                GError **error)
{
  if (r->tied_grads[mb] != NULL)
    return TRUE;
  size_t bytes = (size_t)r->model->layers[tied].params * st_kdt_size(r->x->dt), room = 0;
  void *own = state_own_scratch(r, o, step, ST_MEM_GRADS, &room);
  if (own != NULL && room != bytes) {
    g_autofree char *name = st_op_describe(r->x->s, r->p, o);
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d, op %u '%s': the schedule's %zu bytes for a tied head's gradient are "
                "not its %zu",
                r->rank, o, name, room, bytes);
    return FALSE;
  }
  r->tied_grads[mb] = own != NULL ? own
                                  : op_scratch(r, bytes, ST_MEM_GRADS, "a tied head's gradient",
                                               step, o, stream, error);
  if (r->tied_grads[mb] == NULL)
    return FALSE;
  ST_KCHECK(r->k->memset0(stream, r->tied_grads[mb], bytes), r->k->name, error);
  return TRUE;
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
  /* The schedule frees its own parked buffer (an opaque grads buffer this
   * op frees); the rank's goes back to the pool. */
  const StOp *op = st_program_op(r->p, o);
  const uint32_t *frees = st_program_frees(r->p, op);
  gboolean scheduled = FALSE;
  for (int j = 0; j < op->n_free && !scheduled; j++) {
    const StBuffer *b = &g_array_index(r->p->buffers, StBuffer, frees[j]);
    scheduled = b->data == ST_DATA_NONE && b->category == ST_MEM_GRADS;
  }
  if (!scheduled)
    op_scratch_release(r, r->tied_grads[mb], step, o, stream);
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

/* The version of the weights op `o` reads at `step`: w_{step - version}. */
static int64_t
weights_step(const Rank *r, uint32_t o, int32_t step)
{
  return (int64_t)step - st_program_op(r->p, o)->version;
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
    .tp_rank = r->tp_rank,
    .part = op->part,
    .vocab = r->vocab,
    .ep = ep_expert(r, op) ? r->ep_size : 0,
    .ep_index = r->ep_index,
  };
  int t = st_model_tied_layer(m, op->layer);
  if (t >= 0) {
    /* The tied weights as the layer they belong to reads them this step
     * (its own version, under a delayed rule), when this rank runs it. */
    int64_t version = r->fwd_version[t] >= 0 ? r->fwd_version[t] : op->version;
    c->tied_params = state_data_of(r, o, step, ST_DATA_PARAMS, t, (int64_t)step - version);
    c->tied_grads = r->tied_grads[op->micro];
  }
  if (is_loss(l)) {
    c->targets = r->targets[op->micro];
    c->loss_sum = steps_loss(r, step);
    /* under context parallelism the rank's tokens are 1 / c of each
     * sequence's: the mean is over the whole sequence's (op_cp.c) */
    c->loss_scale =
      1.0f / (float)((double)r->settings->global_batch * loss_positions(l) * r->cp_size);
  }
}

static void **
cell(Rank *r, void **array, int mb, int layer)
{
  return &array[mb * r->model->n_layers + layer];
}

/* Whether layer i of micro-batch mb drops a part of its saved block that a
 * selective recompute makes again. */
static gboolean
selective(const Rank *r, int mb, int i)
{
  return r->settings->recompute == ST_RECOMPUTE_SELECTIVE &&
         r->recomputed[mb * r->model->n_layers + i];
}

/* A selective recompute: the dropped part again, from the saved block. */
static gboolean
recompute_selective(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  const StLayer *l = &r->model->layers[op->layer];
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  int mb = op->micro, i = op->layer;
  void *saved = *cell(r, r->saved, mb, i);
  size_t bytes = impl->again_bytes(l, op->batch, r->x->dt);
  if (saved == NULL && impl->saved_bytes(l, op->batch, r->x->dt) > bytes)
    return op_missing(error, r, o, "what the layer kept from its forward");
  g_autofree char *what = g_strdup_printf("what layer '%s' makes again", l->name);
  void **remade = cell(r, r->remade, mb, i);
  if ((*remade = op_scratch(r, bytes, ST_MEM_ACTIVATIONS, what, step, o, stream, error)) == NULL)
    return FALSE;
  const void *in = NULL;
  if (l->type->keeps & ST_KEEPS_INPUT)
    in = acts_layer_input(r, step, mb, i)->ptr;
  Scratch sc;
  scratch_init(&sc, r, o, step, stream);
  StLayerCtx c;
  ctx_init(&c, r, o, step, &sc);
  c.again = *remade;
  void *params = state_data_of(r, o, step, ST_DATA_PARAMS, i, weights_step(r, o, step));
  int status = impl->recompute(&c, l, op->batch, params, in, saved);
  scratch_release(&sc);
  if (sc.failed)
    return FALSE;
  if (status != 0)
    return st_exec_fail_status(error, __FILE__, __LINE__, l->name, status, r->k->name);
  return scratch_all_used(&sc, error);
}

static gboolean
forward(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  const StLayer *l = &r->model->layers[op->layer];
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  int mb = op->micro, i = op->layer;
  gboolean again = op->sub == ST_PASS_RECOMPUTE;
  if (again && selective(r, mb, i))
    return recompute_selective(r, o, step, stream, error);
  gboolean drops = !again && selective(r, mb, i);
  size_t dts = st_kdt_size(r->x->dt);
  void *params = state_data_of(r, o, step, ST_DATA_PARAMS, i, weights_step(r, o, step));
  if (l->params > 0 && params == NULL)
    return op_missing(error, r, o, "the layer's weights");
  /* A pass in parts (tensor parallelism, tp.c): its first part makes the
   * pass's tensors, its last releases what the pass is done with. */
  gboolean first = tp_first_part(r, op), last = tp_last_part(r, op);
  if (i == 0 && !again && first && !data_make_input(r, mb, step, o, stream, error))
    return FALSE;
  /* An owned expert under expert parallelism reads and writes the
   * all-to-alls' buffers (op_ep.c), not activations. */
  EpView ev;
  if (!ep_view(r, o, step, &ev, error))
    return FALSE;
  Act *in = acts_layer_input(r, step, mb, i);
  if (in->ptr == NULL && !ev.on)
    return op_missing(error, r, o, again ? "the layer's input (its checkpoint)"
                                         : "the layer's input");
  if (is_loss(l) && !again && !data_make_targets(r, mb, step, o, stream, error))
    return FALSE;
  Act *out = acts_output(r, step, mb, i);
  size_t out_bytes = (size_t)op->batch * (size_t)st_shape_elems(&l->out_shape) * dts;
  void *out_ptr;
  if (ev.on) {
    out_ptr = ev.out;
  } else if (!first) { /* a later part or step: where the first one wrote */
    out_ptr = again ? *cell(r, r->recomputed_out, mb, i) : out->ptr;
  } else if (!again) {
    if (!acts_make(r, out, out_bytes, ST_MEM_ACTIVATIONS, step, o, stream, error))
      return FALSE;
    out_ptr = out->ptr;
  } else {
    void **kept = cell(r, r->recomputed_out, mb, i);
    if ((*kept = op_scratch(r, out_bytes, ST_MEM_ACTIVATIONS, "a recomputed output", step, o,
                            stream, error)) == NULL && out_bytes > 0)
      return FALSE;
    out_ptr = *kept;
  }
  void **saved = cell(r, r->saved, mb, i);
  size_t saved_bytes = impl->saved_bytes(l, op->batch, r->x->dt);
  size_t dropped = drops ? impl->again_bytes(l, op->batch, r->x->dt) : 0;
  saved_bytes -= dropped;
  g_autofree char *what = g_strdup_printf("what layer '%s' keeps", l->name);
  if (first &&
      (*saved = op_scratch(r, saved_bytes, ST_MEM_ACTIVATIONS, what, step, o, stream, error)) ==
        NULL &&
      saved_bytes > 0)
    return FALSE;
  TpView tv;
  if (!tp_view(r, o, step, &tv, error))
    return FALSE;
  const void *in_ptr = ev.on ? ev.in : tv.in != NULL ? tv.in : in->ptr;
  if (tv.out != NULL)
    out_ptr = tv.out;
  StLayerCp cpv;
  if (!cp_view(r, o, step, stream, &cpv, error))
    return FALSE;
  Scratch sc;
  scratch_init(&sc, r, o, step, stream);
  /* A recomputed loss adds to a sum nobody reads: a float of the pass's
   * workspace (st_pass_scratch counts it), else of the pool. */
  float *loss_sink = NULL;
  gboolean own_sink = again && is_loss(l) && sc.own != NULL;
  if (own_sink && (loss_sink = scratch_alloc(&sc, sizeof(float))) == NULL) {
    scratch_release(&sc);
    return FALSE;
  }
  if (again && is_loss(l) && !own_sink &&
      (loss_sink = op_scratch(r, sizeof(float), ST_MEM_WORKSPACE, "a recomputed loss", step, o,
                              stream, error)) == NULL) {
    scratch_release(&sc);
    return FALSE;
  }
  StLayerCtx c;
  ctx_init(&c, r, o, step, &sc);
  if (loss_sink != NULL)
    c.loss_sum = loss_sink;
  /* Selective: what the recompute makes again lives in the workspace. */
  if (dropped > 0 && (c.again = scratch_alloc(&sc, dropped)) == NULL) {
    scratch_release(&sc);
    return FALSE;
  }
  if (st_model_tied_layer(r->model, i) >= 0 && c.tied_params == NULL)
    return op_missing(error, r, o, "the weights it is tied to");
  if (ev.on && l->tp > 1) /* the reduction after it places the rows (op_tp.c) */
    tp_put(r, step, op, ST_DATA_TP_OUTPUT, ev.out);
  if (cpv.steps > 0)
    c.cp = &cpv;
  int status = impl->forward(&c, l, op->batch, params, in_ptr, out_ptr, *saved);
  scratch_release(&sc);
  cp_done(r, o, step, stream);
  if (!own_sink)
    op_scratch_release(r, loss_sink, step, o, stream);
  if (sc.failed)
    return FALSE;
  if (status != 0)
    return st_exec_fail_status(error, __FILE__, __LINE__, l->name, status, r->k->name);
  if (!scratch_all_used(&sc, error))
    return FALSE;
  if (!last || ev.on)
    return TRUE;
  acts_use(r, in, step, o, stream);
  if (!again && out->users == 0) /* nobody reads it (a loss's output) */
    acts_use(r, out, step, o, stream);
  if (!again && r->recomputed[mb * r->model->n_layers + i] && !drops) {
    /* Checkpointed: the recompute makes what the backward needs again. */
    op_scratch_release(r, *saved, step, o, stream);
    *saved = NULL;
  }
  if (again && (l->type->keeps & ST_KEEPS_OUTPUT) == 0) {
    op_scratch_release(r, out_ptr, step, o, stream);
    *cell(r, r->recomputed_out, mb, i) = NULL;
  }
  return TRUE;
}

/* The gradient a tied head adds its weights' gradient to, when this rank
 * runs no backward of the layer it is tied to (a pipeline stage keeping a
 * copy of the embedding): a gradient buffer of the head's own backward (the
 * dense gradient a compress op takes, under sparsity), else the copy's. */
static void *
tied_target(Rank *r, uint32_t o, int layer, int tied, int32_t step)
{
  if (state_own_alloc(r, o, step, ST_DATA_GRADS, layer))
    return state_data_of(r, o, step, ST_DATA_GRADS, layer, step);
  return state_data_of(r, o, step, ST_DATA_GRADS, tied, step);
}

/* Runs the backward call of layer `i`; with gradients other ranks also add
 * into (a shared device's), one such backward at a time, after the last
 * one. The layer's own gradients (a tied head's bias: not those of the
 * weights it is tied to, which go through tied_grads) are made fresh first. */
static int
call_backward(Rank *r, const StLayerImpl *impl, const StLayerCtx *c, const StLayer *l, int i,
              int batch, const void *params, const void *in, const void *out, const void *saved,
              const void *dout, void *din, void *grads, int weights_layer, int64_t t,
              void *stream, GError **error)
{
  const LayerState *ls = &r->layers[weights_layer];
  if (!ls->shared) {
    if (l->params > 0 && !state_fresh(r, i, ST_DATA_GRADS, t, stream, error))
      return -1;
    return impl->backward(c, l, batch, params, in, out, saved, dout, din, grads);
  }
  Rank *home = &r->x->ranks[ls->home];
  const StDeviceBackend *b = r->dev->backend;
  g_mutex_lock(&home->share_lock);
  int status = -1;
  if ((home->share_event == NULL || b->stream_wait(r->dev, stream, home->share_event, error)) &&
      state_fresh(r, weights_layer, ST_DATA_GRADS, t, stream, error)) {
    status = impl->backward(c, l, batch, params, in, out, saved, dout, din, grads);
    void *ev = b->event_record(r->dev, stream, error);
    if (home->share_event != NULL)
      b->event_free(r->dev, home->share_event);
    home->share_event = ev;
  }
  g_mutex_unlock(&home->share_lock);
  return status;
}

static gboolean
backward(Rank *r, uint32_t o, int32_t step, void *stream, GError **error)
{
  const StOp *op = st_program_op(r->p, o);
  const StModel *m = r->model;
  const StLayer *l = &m->layers[op->layer];
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  int mb = op->micro, i = op->layer;
  /* A split backward's halves: B makes the input's gradient, W the weights'. */
  gboolean input_half = op->sub == ST_PASS_BWD_INPUT, weight_half = op->sub == ST_PASS_BWD_WEIGHT;
  void *params = state_data_of(r, o, step, ST_DATA_PARAMS, i, weights_step(r, o, step));
  void *grads = input_half ? NULL : state_data_of(r, o, step, ST_DATA_GRADS, i, step);
  if (l->params > 0 && (params == NULL || (grads == NULL && !input_half)))
    return op_missing(error, r, o, params == NULL ? "the layer's weights" : "its gradients");
  if ((input_half || weight_half) && (st_model_tied_layer(m, i) >= 0 || l->tp > 1))
    return op_missing(error, r, o, "a split backward of a tied or tensor-parallel layer (the "
                      "schedule keeps their backwards whole)");
  gboolean keeps_in = (l->type->keeps & ST_KEEPS_INPUT) != 0;
  gboolean keeps_out = (l->type->keeps & ST_KEEPS_OUTPUT) != 0;
  gboolean sel = selective(r, mb, i);
  gboolean recomputed = r->recomputed[mb * m->n_layers + i] && !sel;
  EpView ev;
  if (!ep_view(r, o, step, &ev, error))
    return FALSE;
  if (ev.on) /* the all-to-alls' buffers (op_ep.c), not activations */
    keeps_in = keeps_out = FALSE;
  Act *in = acts_layer_input(r, step, mb, i), *out = acts_output(r, step, mb, i);
  void *out_ptr = recomputed ? *cell(r, r->recomputed_out, mb, i) : out->ptr;
  Act *dout = ev.on ? NULL : acts_layer_dout(r, step, mb, i);
  if ((keeps_in && in->ptr == NULL) || (keeps_out && out_ptr == NULL))
    return op_missing(error, r, o, "an activation the layer kept");
  if (dout != NULL && dout->ptr == NULL && !is_loss(l))
    return op_missing(error, r, o, "the gradient of the layer's output");
  Act *din = i > 0 && !ev.on && !weight_half ? acts_input_grad(r, step, mb, i) : NULL;
  gboolean first = tp_first_part(r, op), last = tp_last_part(r, op);
  if (din != NULL && first) {
    size_t bytes = (size_t)op->batch * (size_t)st_shape_elems(&l->in_shape) *
                   st_kdt_size(r->x->dt);
    if (!acts_make(r, din, bytes, ST_MEM_WORKSPACE, step, o, stream, error))
      return FALSE;
  }
  TpView tv;
  if (!tp_view(r, o, step, &tv, error))
    return FALSE;
  void **saved = cell(r, r->saved, mb, i);
  int tied = st_model_tied_layer(m, i);
  void *direct = NULL;
  if (tied >= 0 && !r->runs_bwd[tied]) {
    if ((direct = tied_target(r, o, i, tied, step)) == NULL)
      return op_missing(error, r, o, "the gradient of the weights it is tied to");
    if (!state_own_alloc(r, o, step, ST_DATA_GRADS, i) &&
        !state_fresh(r, tied, ST_DATA_GRADS, step, stream, error))
      return FALSE;
  } else if (tied >= 0 && !park_tied_grads(r, o, mb, tied, step, stream, error)) {
    return FALSE;
  }
  StLayerCp cpv;
  if (!cp_view(r, o, step, stream, &cpv, error))
    return FALSE;
  Scratch sc;
  scratch_init(&sc, r, o, step, stream);
  StLayerCtx c;
  ctx_init(&c, r, o, step, &sc);
  if (cpv.steps > 0)
    c.cp = &cpv;
  if (direct != NULL)
    c.tied_grads = direct;
  if (sel)
    c.again = *cell(r, r->remade, mb, i);
  if (tied >= 0 && c.tied_params == NULL)
    return op_missing(error, r, o, "the weights it is tied to");
  if (ev.on && l->tp > 1) /* the reduction after it places the rows (op_tp.c) */
    tp_put(r, step, op, ST_DATA_TP_INPUT_GRAD, ev.out);
  GError *local = NULL;
  const void *in_ptr = tv.in != NULL ? tv.in : keeps_in ? in->ptr : NULL;
  const void *dout_ptr = ev.on          ? ev.in
                         : tv.dout != NULL ? tv.dout
                         : dout != NULL    ? dout->ptr
                                           : NULL;
  void *din_ptr = ev.on ? ev.out : tv.out != NULL ? tv.out : din != NULL ? din->ptr : NULL;
  int status;
  if (input_half) {
    /* the weights' gradient of this call goes nowhere: W computes it */
    size_t bytes = (size_t)l->params * st_kdt_size(r->x->dt);
    void *thrown = bytes > 0 ? op_scratch(r, bytes, ST_MEM_WORKSPACE,
                                          "a B pass's weight gradient, thrown away", step, o,
                                          stream, &local)
                             : NULL;
    status = bytes > 0 && thrown == NULL
               ? -1
               : impl->backward(&c, l, op->batch, params, in_ptr, keeps_out ? out_ptr : NULL,
                                *saved, dout_ptr, din_ptr, thrown);
    op_scratch_release(r, thrown, step, o, stream);
  } else {
    status = call_backward(r, impl, &c, l, i, op->batch, params, in_ptr,
                           keeps_out ? out_ptr : NULL, *saved, dout_ptr, din_ptr, grads,
                           state_weights_layer(m, i), step, stream, &local);
  }
  scratch_release(&sc);
  cp_done(r, o, step, stream);
  if (local != NULL) {
    g_propagate_error(error, local);
    return FALSE;
  }
  if (sc.failed)
    return FALSE;
  if (status != 0)
    return st_exec_fail_status(error, __FILE__, __LINE__, l->name, status, r->k->name);
  if (!scratch_all_used(&sc, error))
    return FALSE;
  /* a pass that ends after its reduction: op_tp.c finishes it */
  if (!last || (impl->tp_tail != NULL && l->tp > 1))
    return TRUE;
  if (input_half) { /* W reads it all again */
    if (din != NULL && din->users == 0)
      acts_use(r, din, step, o, stream);
    return TRUE;
  }
  if (!add_tied_grads(r, o, mb, i, grads, step, stream, error))
    return FALSE;
  op_scratch_release(r, *saved, step, o, stream);
  *saved = NULL;
  if (sel) {
    op_scratch_release(r, *cell(r, r->remade, mb, i), step, o, stream);
    *cell(r, r->remade, mb, i) = NULL;
  }
  if (recomputed) {
    op_scratch_release(r, *cell(r, r->recomputed_out, mb, i), step, o, stream);
    *cell(r, r->recomputed_out, mb, i) = NULL;
  }
  if (is_loss(l) && r->targets[mb] != NULL) {
    op_scratch_release(r, r->targets[mb], step, o, stream);
    r->targets[mb] = NULL;
  }
  if (keeps_in)
    acts_use(r, in, step, o, stream);
  if (keeps_out && !recomputed)
    acts_use(r, out, step, o, stream);
  if (dout != NULL && dout->ptr != NULL)
    acts_use(r, dout, step, o, stream);
  if (din != NULL && din->users == 0)
    acts_use(r, din, step, o, stream);
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
  case ST_PASS_BWD_INPUT:
  case ST_PASS_BWD_WEIGHT:
    return backward(r, o, step, stream, error);
  case ST_PASS_OPTIM:
    return op_update(r, o, step, stream, error);
  case ST_PASS_COMPRESS:
    return op_compress(r, o, step, stream, error);
  case ST_PASS_EXPAND:
    return op_expand(r, o, step, stream, error);
  default: {
    g_autofree char *name = st_op_describe(r->x->s, r->p, o);
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "rank %d, op %u '%s': the executor does not run %s passes", r->rank, o, name,
                st_pass_name(op->sub));
    return FALSE;
  }
  }
}
