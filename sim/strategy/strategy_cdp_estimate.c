/* strategy_cdp_estimate.c: what the planner knows of a cdp configuration
 * before building it (StStrategy.estimate): a lower bound of its peak
 * memory from what every rank surely holds for the whole run.
 *
 * A stage's holder keeps its parameters, gradients and optimizer states in
 * persistent buffers (cdp_holder; a second version or gradient buffer of
 * the update rules v1 and v2 left out). So:
 * - plain CDP (strategy_cdp_rank.c): every worker holds every stage, the
 *   model's states;
 * - ZeRO relay (strategy_cdp_zero.c): under ZeRO 1-2 every worker keeps
 *   every stage's parameters, under 1 also its gradients (users and owner
 *   alike); the rest of a stage's states lives on its owner, one of at
 *   most min(S, N) workers (floor(l N / S)), the busiest of which holds
 *   at least their share of it;
 * - model parallelism (strategy_cdp_mp.c): every stage has a holder on
 *   each of its devices, no more than the cluster's GPUs, whose busiest
 *   holds at least their share of the model's states.
 * Without model parallelism a worker runs every layer of its micro-batch,
 * forward then backward (emit_micro), so one micro-batch's saved blocks
 * of every layer are live at once beside the states
 * (st_estimate_saved). Nothing with --sparsity or --offload (not what the
 * builders read). Refused in its wave (refuse_in_turn), so that the waves
 * stay as they were without it: 210 cdp schedules of Llama-3 70B were
 * built only to be found over the cap. */
#include "strategy/cdp.h"

gboolean
cdp_estimate(const StStrategyInput *in, StEstimate *est, GError **error)
{
  (void)error;
  const StOptions *o = in->options;
  const StModel *m = in->model;
  if (o->sparsity > 0 || o->offload != ST_OFFLOAD_NONE || in->cluster->gpus <= 0 ||
      m->n_layers <= 0)
    return TRUE;
  StStateBytes b;
  st_state_bytes(o, &b);
  int64_t params = 0; /* the stages' parameters, as split_stages sums them */
  for (int i = 0; i < m->n_layers; i++)
    params += m->layers[i].params;
  int64_t all = b.weight + b.grad + b.optimizer;
  if (o->model_parallel) {
    est->peak_bytes = params * all / in->cluster->gpus;
  } else {
    int n = MAX(o->ranks, 1), s = CLAMP(o->stages > 0 ? o->stages : 4, 1, m->n_layers);
    int zero = o->zero_stage;
    int64_t every = zero == 0 ? all : (zero < 3 ? b.weight : 0) + (zero < 2 ? b.grad : 0);
    int64_t owned = zero == 0 ? 0 : all - every;
    est->peak_bytes = params * every + params * owned / MIN(s, n) +
                      st_estimate_saved(m, o, b.activation);
  }
  est->refuse_in_turn = TRUE;
  return TRUE;
}
