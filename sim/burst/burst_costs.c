/* burst_costs.c: the planner's graph of a model, costed with the cost models
 * the engine uses (see burst.h), so the plan and the simulation of its
 * schedule start from the same numbers.
 *
 * Placement: rank r sits on device r % D, and a layer of width w runs on
 * ranks 0 .. w-1. Samples: at width w, rank j holds the samples s with
 * s % w == j (st_burst_share of them). Between widths a and b, with
 * small = min(a, b) and k = max(a, b) / small, rank j < small exchanges
 * with ranks j + m * small (m = 1 .. k-1) and keeps its own share: rank 0
 * moves the most, one transfer after another, so a transition costs
 *   sum over m of p2p(device 0, device of m * small, its share of bytes)
 * forward for the activations and the same backward for their gradient.
 * Between sets that start at different ranks (a packed branch) every sample
 * moves, between GPUs of one machine or, when the sets span two, over the
 * network. A layer's predecessors are the model's inputs of it (a DAG when
 * the model has branches, model.h).
 */
#include "burst/burst.h"

#include "cost/cost.h"
#include "cost/framework.h"

static double
pass_ns(const StComputeCtx *ctx, const StLayer *layer, StPass pass, int64_t batch)
{
  StWork work = {.pass = pass, .layer = layer, .batch = batch};
  return st_compute_time(ctx, &work, NULL);
}

static double
fwd_bwd_ns(const StComputeCtx *ctx, const StLayer *layer, int64_t batch)
{
  return pass_ns(ctx, layer, ST_PASS_FWD, batch) + pass_ns(ctx, layer, ST_PASS_BWD, batch);
}

/* All-reduce of `bytes` over the first w ranks. */
static gboolean
sync_ns(const StBurstCostInput *in, int w, int64_t bytes, double *out, GError **error)
{
  *out = 0;
  if (w <= 1 || bytes <= 0)
    return TRUE;
  g_autofree int32_t *gpus = g_new(int32_t, w);
  for (int i = 0; i < w; i++)
    gpus[i] = i % in->cluster->gpus;
  StGroupShape shape;
  st_cluster_group_shape(in->cluster, gpus, w, &shape);
  StCommPlan plan;
  if (!st_comm_plan_collective(in->cluster, in->profile, in->comm_algo ? in->comm_algo : "auto",
                               ST_COLL_ALL_REDUCE, bytes, &shape, &plan, error))
    return FALSE;
  *out = st_comm_plan_ns(&plan);
  return TRUE;
}

/* Moving `per_sample` bytes of each sample from width a to width b (one way). */
static double
transition_ns(const StBurstCostInput *in, int64_t batch, int a, int b, int64_t per_sample)
{
  if (a == b || per_sample <= 0)
    return 0;
  int small = MIN(a, b), large = MAX(a, b), D = in->cluster->gpus;
  double total = 0;
  for (int m = 1; m < large / small; m++) {
    int peer = m * small;
    int64_t bytes = (int64_t)st_burst_share(batch, large, peer) * per_sample;
    StCommPlan plan;
    st_comm_plan_p2p(in->cluster, 0, peer % D, bytes, &plan);
    total += st_comm_plan_ns(&plan);
  }
  return total;
}

/* The same between sets that share no rank (a packed branch): every
 * sample moves, large / small transfers of the busiest GPU (the narrow
 * side's ranks each take or give the shares of large / small wide ranks). */
static double
transition_far_ns(const StBurstCostInput *in, int64_t batch, int a, int b, int64_t per_sample,
                  int peer)
{
  if (per_sample <= 0)
    return 0;
  int small = MIN(a, b), large = MAX(a, b), D = in->cluster->gpus;
  double total = 0;
  for (int m = 0; m < large / small; m++) {
    int64_t bytes = (int64_t)st_burst_share(batch, large, m * small) * per_sample;
    StCommPlan plan;
    st_comm_plan_p2p(in->cluster, 0, peer % D, bytes, &plan);
    total += st_comm_plan_ns(&plan);
  }
  return total;
}

StBurstGraph *
st_burst_graph_for_model(const StBurstCostInput *in, GError **error)
{
  g_return_val_if_fail(in != NULL && in->model != NULL && in->cluster != NULL, NULL);
  const StModel *m = in->model;
  g_autoptr(StBurstGraph) g = st_burst_graph_new(in->ranks, in->batch);
  StComputeCtx ctx = {in->cluster, in->profile, m, in->compute_dtype, in->compute_model,
                      in->framework, in->nchw, in->fp8};
  int W = g->n_widths;
  int64_t params = 0;
  /* Rank r on device r % gpus: ranks share a machine as their devices do. */
  int per_node = in->cluster->gpus_per_node;
  g->ranks_per_node = in->cluster->gpus > per_node ? per_node : 0;
  for (int i = 0; i < m->n_layers; i++) {
    const StLayer *layer = &m->layers[i];
    int32_t inputs[ST_LAYER_MAX_INPUTS];
    int preds[ST_LAYER_MAX_INPUTS];
    int n_preds = st_model_layer_inputs(m, i, inputs);
    for (int k = 0; k < n_preds; k++)
      preds[k] = inputs[k];
    int v = st_burst_graph_add(g, layer->name, i, preds, n_preds);
    StBurstNode *n = st_burst_graph_node(g, v);
    n->single_ns = fwd_bwd_ns(&ctx, layer, in->batch);
    n->params = layer->params;
    int64_t per_sample = st_model_bytes_as(m, layer->out_bytes, in->activation_dtype);
    for (int k = 0; k < W; k++) {
      n->bwd_ns[k] = pass_ns(&ctx, layer, ST_PASS_BWD, n->batch[k]);
      n->compute_ns[k] = pass_ns(&ctx, layer, ST_PASS_FWD, n->batch[k]) + n->bwd_ns[k];
      if (!sync_ns(in, g->widths[k], layer->params * in->grad_bytes, &n->sync_ns[k], error)) {
        g_prefix_error(error, "layer %d '%s': ", i, layer->name);
        return NULL;
      }
      for (int b = 0; b < W; b++) {
        n->xfer_ns[k * W + b] =
          2 * transition_ns(in, in->batch, g->widths[k], g->widths[b], per_sample);
        n->xfer_far_ns[k * W + b] =
          2 * transition_far_ns(in, in->batch, g->widths[k], g->widths[b], per_sample, 1);
        n->xfer_net_ns[k * W + b] = 2 * transition_far_ns(in, in->batch, g->widths[k],
                                                          g->widths[b], per_sample, per_node);
      }
    }
    params += layer->params;
  }
  const StGpuPerf *perf = in->cluster->gpu.perf;
  if (in->framework != NULL && in->framework->comm_contends && perf != NULL &&
      perf->nccl_channels.value > 0 && perf->sms.value > 0)
    g->sync_drag = MIN(1.0, perf->nccl_channels.value / perf->sms.value);
  if (params > 0 && in->optimizer != NULL) {
    StWork step = {.pass = ST_PASS_OPTIM, .elems = params,
                   .bytes = params * in->optim_traffic, .kernel = in->optimizer};
    g->step_ns = st_compute_time(&ctx, &step, NULL);
  }
  return g_steal_pointer(&g);
}
