/* strategy_pipeline_balance.c: what each layer weighs, the split into
 * contiguous stages (stages.h does the cutting), and the memory estimate
 * that the fit-to-memory search and the report use (see strategy_pipeline.h).
 */
#include <string.h>

#include "cost/cost.h"
#include "cost/framework.h"
#include "model/layer_type.h"
#include "strategy/stages.h"
#include "strategy/strategy_pipeline.h"

/* The lowest layer of `type` whose `key` attribute is `value`, or -1. */
static int
find_layer(const StModel *m, const char *type, const char *key, int64_t value)
{
  for (int i = 0; i < m->n_layers; i++)
    if (strcmp(m->layers[i].type->name, type) == 0 &&
        st_layer_attr(&m->layers[i], key, -1) == value)
      return i;
  return -1;
}

gboolean
st_pipe_init(StPipe *pp, const StModel *m, const StCluster *c, const StProfile *profile,
             const StOptions *o, GError **error)
{
  *pp = (StPipe){
    .model = m,
    .cluster = c,
    .profile = profile,
    .options = o,
    .order = (StPipeOrder)o->pipeline_schedule,
    .n_chunks = o->pipeline_schedule == ST_PIPE_DUALPIPE_V ? 2 : 1, /* its V */
    .ep = 1,
    .tied_head = -1,
    .tied_embed = -1,
  };
  if (!st_sparse_init(&pp->sparse, o, error))
    return FALSE;
  st_state_bytes(o, &pp->bytes);
  int n = m->n_layers;
  pp->owned = g_new0(int64_t, n);
  pp->stage_of = g_new0(int32_t, n);
  pp->owned_nnz = g_new0(int64_t, n);
  pp->keeps_output = g_new0(gboolean, n);
  for (int i = 0; i < n; i++)
    pp->keeps_output[i] = (m->layers[i].type->keeps & ST_KEEPS_OUTPUT) != 0;
  pp->recompute = st_recompute_plan(o);
  pp->recomputes = st_recompute_layers(m, &pp->recompute);
  /* A tied LM head computes with the embedding's weights. */
  for (int i = 0; i < n; i++) {
    const StLayer *l = &m->layers[i];
    if (strcmp(l->type->name, "lm_head") != 0 || !st_layer_attr(l, "tied", 0))
      continue;
    int e = find_layer(m, "embedding", "vocab", st_layer_attr(l, "vocab", 0));
    if (e >= 0) {
      pp->tied_head = i;
      pp->tied_embed = e;
      pp->tied_params = m->layers[e].params;
    }
    break;
  }
  return TRUE;
}

void
st_pipe_clear(StPipe *pp)
{
  g_clear_pointer(&pp->first, g_free);
  g_clear_pointer(&pp->owned, g_free);
  g_clear_pointer(&pp->stage_of, g_free);
  g_clear_pointer(&pp->owned_nnz, g_free);
  g_clear_pointer(&pp->keeps_output, g_free);
  g_clear_pointer(&pp->recomputes, g_free);
}

/* ---- per-layer numbers ---------------------------------------------------- */

static int64_t
per_micro(const StPipe *pp, int64_t per_sample)
{
  return st_model_bytes_as(pp->model, per_sample, pp->bytes.activation) *
         pp->options->micro_batch;
}

int64_t
st_pipe_input_bytes(const StPipe *pp, int layer)
{
  return per_micro(pp, pp->model->layers[layer].in_bytes);
}

int64_t
st_pipe_boundary_bytes(const StPipe *pp, int s)
{
  return st_pipe_input_bytes(pp, pp->first[s + 1]);
}

static StDtype
compute_dtype(const StPipe *pp)
{
  if (!st_precision_16bit(pp->options->precision))
    return ST_DTYPE_FP32;
  return pp->cluster->gpu.flops[ST_DTYPE_BF16] > 0 ? ST_DTYPE_BF16 : ST_DTYPE_FP16;
}

double
st_pipe_layer_time_ns(const StPipe *pp, int layer, StPass pass)
{
  StComputeCtx ctx = {pp->cluster, pp->profile, pp->model, compute_dtype(pp),
                      pp->options->compute_model, st_options_framework(pp->options),
                      st_options_nchw(pp->options), pp->options->precision == ST_PRECISION_FP8};
  gboolean selective = pass == ST_PASS_RECOMPUTE &&
                       pp->recomputes[layer] == ST_RECOMPUTE_SELECTIVE;
  StWork work = {.pass = pass, .layer = &pp->model->layers[layer],
                 .batch = pp->options->micro_batch,
                 .again_ops = !selective              ? 0
                              : pp->recompute.ops != 0 ? pp->recompute.ops
                                                       : ST_RC_DEFAULT};
  StCostSource source;
  return st_compute_time(&ctx, &work, &source);
}

/* Bytes per parameter of persistent states, as st_sparse_state_bytes counts them. */
static double
state_bytes_per_param(const StPipe *pp)
{
  return st_sparse_bytes_per_param(&pp->sparse);
}

/* ---- the split -------------------------------------------------------------- */

static void
layer_weights(const StPipe *pp, StPipeBalance by, double *w)
{
  const StModel *m = pp->model;
  int S = pp->n_stages;
  /* Micro-batches in flight on the busiest stage (the first): what a layer's
   * activations weigh against its states. */
  int in_flight = st_pipe_in_flight(pp->order, 0, S, pp->n_micro);
  for (int i = 0; i < m->n_layers; i++) {
    /* With several stages the tied head most likely lands away from the
     * embedding and keeps a copy of its weights. */
    int64_t params = m->layers[i].params + (i == pp->tied_head && S > 1 ? pp->tied_params : 0);
    switch (by) {
    case ST_PIPE_BALANCE_TIME:
      w[i] = st_pipe_layer_time_ns(pp, i, ST_PASS_FWD) + st_pipe_layer_time_ns(pp, i, ST_PASS_BWD);
      if (pp->recomputes[i] != ST_RECOMPUTE_NONE)
        w[i] += st_pipe_layer_time_ns(pp, i, ST_PASS_RECOMPUTE);
      break;
    case ST_PIPE_BALANCE_MEMORY: {
      const StLayer *l = &m->layers[i];
      int64_t again;
      double again_flops;
      st_layer_again(l, pp->recompute.ops, &again, &again_flops);
      int64_t kept = pp->recomputes[i] == ST_RECOMPUTE_FULL ? st_pipe_input_bytes(pp, i)
                     : pp->recomputes[i] == ST_RECOMPUTE_SELECTIVE
                       ? per_micro(pp, l->act_bytes - again)
                       : per_micro(pp, l->act_bytes);
      w[i] = state_bytes_per_param(pp) * (double)params + (double)in_flight * (double)kept;
      break;
    }
    case ST_PIPE_BALANCE_PARAMS:
      w[i] = (double)params;
      break;
    }
  }
}

void
st_pipe_split(StPipe *pp, StPipeBalance by)
{
  const StModel *m = pp->model;
  const StOptions *o = pp->options;
  int S = pp->n_stages;
  g_return_if_fail(S >= 1 && S * MAX(pp->n_chunks, 1) <= m->n_layers && o->ranks % S == 0);
  pp->n_data = o->ranks / S;
  /* global batch = ranks x micro-batch x accumulation = G_data x micro-batch x M. */
  pp->n_micro = o->accumulation * S;
  g_autofree double *w = g_new(double, m->n_layers);
  layer_weights(pp, by, w);
  int K = S * MAX(pp->n_chunks, 1);
  int32_t *first = g_new(int32_t, K + 1);
  st_stages_split(w, m->n_layers, K, first);
  st_pipe_set_split(pp, first);
}

void
st_pipe_set_split(StPipe *pp, int32_t *first)
{
  const StModel *m = pp->model;
  int S = pp->n_stages, K = S * MAX(pp->n_chunks, 1);
  g_free(pp->first);
  pp->first = first;
  for (int k = 0; k < K; k++)
    for (int i = pp->first[k]; i < pp->first[k + 1]; i++)
      pp->stage_of[i] = st_pipe_chunk_stage(pp, k);
  pp->tied_copy = pp->tied_head >= 0 &&
                  pp->stage_of[pp->tied_head] != pp->stage_of[pp->tied_embed];
  for (int i = 0; i < m->n_layers; i++) {
    gboolean has_copy = pp->tied_copy && i == pp->tied_head;
    pp->owned[i] = m->layers[i].params + (has_copy ? pp->tied_params : 0);
    pp->owned_nnz[i] = st_sparse_nnz(&pp->sparse, m->layers[i].params) +
                       (has_copy ? st_sparse_nnz(&pp->sparse, pp->tied_params) : 0);
  }
}

/* ---- memory estimate -------------------------------------------------------- */

/* Model chunk k's states and activations on stage s (one chunk per stage
 * but under DualPipeV), as if the stage's micro-batches in flight all held
 * this chunk's: so a DualPipeV stage's two chunks summed bound it above. */
static int64_t
chunk_memory(const StPipe *pp, int s, int k)
{
  const StSparse *sp = &pp->sparse;
  const StModel *m = pp->model;
  int S = pp->n_stages, lo = pp->first[k], hi = pp->first[k + 1];
  int K = S * MAX(pp->n_chunks, 1);
  gboolean from_prev = k > 0 && st_pipe_chunk_stage(pp, k - 1) != s;
  gboolean to_next = k < K - 1 && st_pipe_chunk_stage(pp, k + 1) != s;
  int64_t params = 0, nnz = 0;
  for (int i = lo; i < hi; i++) {
    params += pp->owned[i];
    nnz += pp->owned_nnz[i];
  }
  int64_t states = st_sparse_on(sp) ? params * sp->dense.weight + nnz * st_sparse_bytes_per_nnz(sp)
                                    : params * (pp->bytes.weight + pp->bytes.grad +
                                                pp->bytes.optimizer);
  /* One micro-batch's tensors as the stage's program allocates them
   * (tensors.h): what it holds while in flight, and its worst moment. */
  g_autofree int *batch = g_new0(int, m->n_layers);
  g_autofree gboolean *moved = g_new0(gboolean, m->n_layers + 1);
  for (int i = lo; i < hi; i++)
    batch[i] = pp->options->micro_batch;
  /* Its boundaries come from outside this footprint either way (DualPipeV's
   * turn from the other chunk, without a p2p). */
  moved[lo] = k > 0;
  moved[hi] = k < K - 1;
  StTensorsSpec spec = {
    .model = m,
    .dtype = pp->bytes.activation,
    .grad_bytes = pp->bytes.grad,
    .batch = batch,
    .moved = moved,
    .recompute = st_recompute_plan(pp->options),
    .loss_in_place = st_options_framework(pp->options)->loss_in_place,
    .loss_16bit = st_options_framework(pp->options)->loss_16bit,
    .loss_autograd = st_options_framework(pp->options)->loss_autograd,
    .offload = pp->options->offload_activations,
  };
  int64_t held, peak;
  st_tensors_footprint(&spec, &held, &peak);
  /* Beside them, tensors in transit of other micro-batches (inputs received
   * ahead of their forwards: the next one and one more; outputs waiting for
   * their sends: the one being sent and the next), and (sparse) a layer's
   * dense weight gradient with its compressed values until the compress. */
  int64_t in = from_prev ? st_pipe_boundary_bytes(pp, k - 1) : 0;
  gboolean full = pp->recomputes[hi - 1] == ST_RECOMPUTE_FULL;
  int64_t out = to_next && (full || !pp->keeps_output[hi - 1]) ? st_pipe_boundary_bytes(pp, k)
                                                                : 0;
  int64_t dense = 0;
  for (int i = lo; st_sparse_on(sp) && i < hi; i++)
    dense = MAX(dense, (pp->owned[i] + st_sparse_nnz(sp, pp->owned[i])) * sp->grad);
  int in_flight = st_pipe_in_flight(pp->order, s, S, pp->n_micro);
  /* Zero-bubble orders: a micro-batch whose B ran and W did not also holds
   * the gradients of its layers' outputs, which the W's read (the most of
   * them: every layer's, and the one received). */
  if (st_pipe_order_splits(pp->order)) {
    for (int i = lo; i < hi; i++)
      held += st_pipe_input_bytes(pp, i);
    held += to_next ? st_pipe_boundary_bytes(pp, k) : 0;
  }
  int64_t acts = (int64_t)(in_flight - 1) * held + peak + 2 * in + 2 * out + dense;
  int64_t step = st_sparse_on(sp) ? nnz * sp->temp : 0;
  return states + MAX(acts, step);
}

int64_t
st_pipe_stage_memory(const StPipe *pp, int s)
{
  int64_t bytes = chunk_memory(pp, s, s);
  if (st_pipe_vshape(pp))
    bytes += chunk_memory(pp, s, st_pipe_chunk_at(pp, s, 1));
  return bytes;
}
