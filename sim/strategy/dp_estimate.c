/* dp_estimate.c: what the planner knows of a dp or zero configuration
 * before building it (StStrategy.estimate): a lower bound of its peak
 * memory from the model states every rank holds for the whole run, so that
 * a model whose states cannot fit is not built to find out (a 70B model's
 * schedules take long to build). Weights and optimizer states only (the
 * gradients of some schedules come and go); ZeRO's shards rounded down.
 * Besides, a micro-batch's forward runs every layer before its backward,
 * so every layer's saved block (less what selective recomputation drops;
 * a checkpointed layer's input instead: recompute.h) is live at once, beside the states
 * (tensors.h), but those that --offload-activations copies to the host
 * (offload.h), which may all be there by then.
 * Nothing with --sparsity (SAMO compresses the states) and no time bound
 * (the work bound covers it). */
#include "strategy/strategy_common.h"

#include "model/layer_type.h"
#include "strategy/offload.h"

/* Each layer's saved block of one micro-batch's forward (strategy_common.h). */
void
st_estimate_saved_layers(const StModel *m, const StOptions *o, StDtype dtype, int64_t *saved)
{
  StRecomputePlan plan = st_recompute_plan(o);
  g_autofree StRecompute *mode = st_recompute_layers(m, &plan);
  g_autofree gboolean *offloaded = st_offload_layers(m, o->offload_activations);
  for (int i = 0; i < m->n_layers; i++) {
    saved[i] = 0;
    if (offloaded[i] && mode[i] != ST_RECOMPUTE_FULL)
      continue;
    StLayerMemory mem;
    st_layer_memory(m, i, o->micro_batch, dtype, &mem);
    /* A checkpointed layer keeps its input for its recompute (recompute.h). */
    int64_t again = mode[i] == ST_RECOMPUTE_SELECTIVE
                      ? st_layer_memory_again(&mem, plan.ops, NULL) : 0;
    saved[i] = mode[i] == ST_RECOMPUTE_FULL ? mem.input : mem.saved - again;
  }
}

int64_t
st_estimate_saved(const StModel *m, const StOptions *o, StDtype dtype)
{
  g_autofree int64_t *saved = g_new(int64_t, MAX(m->n_layers, 1));
  st_estimate_saved_layers(m, o, dtype, saved);
  int64_t total = 0;
  for (int i = 0; i < m->n_layers; i++)
    total += saved[i];
  return total;
}

/* Communicators every rank joins with a peer on another GPU: the world
 * st_dp_frame_init adds, once there are two ranks, each on its own GPU
 * (round-robin, no more ranks than GPUs). Zero's others left out. */
static int
world_comms(const StStrategyInput *in)
{
  return in->options->ranks > 1 && in->options->ranks <= in->cluster->gpus;
}

gboolean
st_dp_estimate(const StStrategyInput *in, StEstimate *est, GError **error)
{
  const StOptions *o = in->options;
  if (o->sparsity > 0)
    return TRUE;
  StStateBytes b;
  st_state_bytes(o, &b);
  est->peak_bytes =
    in->model->params * (b.weight + b.optimizer) + st_estimate_saved(in->model, o, b.activation);
  est->comms = world_comms(in);
  return TRUE;
}

gboolean
st_zero_estimate(const StStrategyInput *in, StEstimate *est, GError **error)
{
  const StOptions *o = in->options;
  if (o->sparsity > 0)
    return TRUE;
  StStateBytes b;
  st_state_bytes(o, &b);
  int group = o->shard_group > 0 ? o->shard_group : o->ranks; /* --shard-group: HSDP */
  int64_t all = in->model->params, shard = all / MAX(group, 1);
  int stage = o->zero_stage > 0 ? o->zero_stage : 1;
  /* --offload optimizer: the optimizer states are in host memory. */
  int optimizer = o->offload == ST_OFFLOAD_OPTIMIZER ? 0
                  : stage >= 3                     ? b.shard_optimizer
                                                   : b.optimizer;
  int64_t weights = stage >= 3 ? shard * b.shard_weight : all * b.weight;
  est->peak_bytes = weights + shard * optimizer + st_estimate_saved(in->model, o, b.activation);
  est->comms = world_comms(in);
  return TRUE;
}
