/* pipeline_estimate.c: what the planner knows of a pipeline configuration
 * before building it (StStrategy.estimate): a lower bound of its peak
 * memory from the model states alone. Every layer's weights, gradients and
 * optimizer states live on the stage that holds it, for the whole run, in
 * every pipeline (strategy_pipeline_stage.c, add_states; a tied copy adds
 * to them), so the cluster's GPUs hold at least the model's states between
 * them, and the busiest at least their share: whatever the stages, the
 * balance and the placement. Without ZeRO, --sparsity (SAMO's compressed
 * states) and --offload only. Refused in its wave (refuse_in_turn), so that
 * the waves stay as they were without it: a 70B pipeline of 1,024
 * micro-batches on one node took seconds to build to find it over the cap. */
#include "strategy/strategy_common.h"

gboolean
st_pipeline_estimate(const StStrategyInput *in, StEstimate *est, GError **error)
{
  (void)error;
  const StOptions *o = in->options;
  if (o->zero_stage != 0 || o->sparsity > 0 || o->offload != ST_OFFLOAD_NONE ||
      in->cluster->gpus <= 0)
    return TRUE;
  StStateBytes b;
  st_state_bytes(o, &b);
  est->peak_bytes = in->model->params * (b.weight + b.grad + b.optimizer) / in->cluster->gpus;
  est->refuse_in_turn = TRUE;
  return TRUE;
}
