/* pipeline_estimate.c: what the planner knows of a pipeline configuration
 * before building it (StStrategy.estimate): a lower bound of its peak
 * memory. Every layer's weights, gradients and optimizer states live on
 * the stage that holds it, for the whole run, in every pipeline
 * (strategy_pipeline_stage.c, add_states; a tied copy adds to them), so
 * the cluster's GPUs hold at least the model's states between them, and
 * the busiest at least their share: whatever the stages, the balance and
 * the placement.
 *
 * And on the stages build() chooses (st_pipe_choose_stages: the same
 * count and split, from the same options), stage s runs the forwards of
 * k micro-batches before its first backward (st_pipe_order: GPipe M,
 * 1F1B and ZB-H1 min(S - s, M), ZB-H2 min(2(S - s) - 1, M)), so their
 * saved blocks of its layers are all live then, beside its states: each
 * layer's saved block less what selective recomputation drops, a
 * checkpointed layer's input instead, none of a layer whose activations
 * are offloaded (st_estimate_saved_layers, as tensors.h keeps them). The
 * busiest stage's sum is the bound. DualPipeV's stage s holds two chunks
 * (the s-th and the (2S - 1 - s)-th of the V) and runs 2S - s - 1
 * forwards of the first and s + 1 of the second before its first
 * backward (st_pipe_order_dualpipev, phases 1 and 2). Not with MoE layers
 * (their experts run outside tensors.h: strategy_pipeline_moe.c).
 *
 * Without ZeRO, --sparsity (SAMO's compressed states) and --offload only.
 * Refused in its wave (refuse_in_turn), so that the waves stay as they
 * were without it: a 70B pipeline of 1,024 micro-batches on one node took
 * seconds to build to find it over the cap, and 532 pipelines of 2-128
 * nodes were built only to be found over it (their stage 0's 1F1B
 * micro-batches). */
#include "strategy/strategy_common.h"

#include <string.h>

#include "model/layer_type.h"
#include "strategy/strategy_pipeline.h"

/* Forwards of its chunk `local` (0, or 1 of DualPipeV's V) stage s runs
 * before its first backward under `order` (st_pipe_order,
 * st_pipe_order_dualpipev): their micro-batches' saved blocks of the
 * chunk are all live then. */
static int
in_flight(StPipeOrder order, int s, int local, int n_stages, int n_micro)
{
  switch (order) {
  case ST_PIPE_GPIPE:
    return n_micro;
  case ST_PIPE_1F1B:
  case ST_PIPE_ZB_H1:
    return MIN(n_stages - s, n_micro);
  case ST_PIPE_ZB_H2:
    return MIN(2 * (n_stages - s) - 1, n_micro);
  case ST_PIPE_DUALPIPE_V: /* its phases 1 and 2 */
    return MIN(local == 0 ? 2 * n_stages - s - 1 : s + 1, n_micro);
  default:
    return 0;
  }
}

static gboolean
has_moe(const StModel *m)
{
  for (int i = 0; i < m->n_layers; i++)
    if (strcmp(m->layers[i].type->name, "moe_router") == 0)
      return TRUE;
  return FALSE;
}

/* The busiest stage's states and saved blocks in flight, on the stages
 * build() chooses; 0 when it would refuse them. */
static int64_t
stages_held(const StStrategyInput *in, const StStateBytes *b)
{
  const StModel *m = in->model;
  StPipe pp;
  int64_t most = 0;
  const char *how = NULL;
  if (st_pipe_init(&pp, m, in->cluster, in->profile, in->options, NULL) &&
      st_pipe_choose_stages(&pp, &how, NULL)) {
    int S = pp.n_stages, K = S * MAX(pp.n_chunks, 1);
    g_autofree int64_t *saved = g_new(int64_t, MAX(m->n_layers, 1));
    g_autofree int64_t *held = g_new0(int64_t, S);
    st_estimate_saved_layers(m, in->options, b->activation, saved);
    for (int k = 0; k < K; k++) {
      int s = st_pipe_chunk_stage(&pp, k);
      int64_t states = 0, act = 0;
      for (int i = pp.first[k]; i < pp.first[k + 1]; i++) {
        states += pp.owned[i] * (b->weight + b->grad + b->optimizer);
        act += saved[i];
      }
      held[s] += states + in_flight(pp.order, s, st_pipe_chunk_local(&pp, k), S, pp.n_micro) * act;
    }
    for (int s = 0; s < S; s++)
      most = MAX(most, held[s]);
  }
  st_pipe_clear(&pp);
  return most;
}

gboolean
st_pipeline_estimate(const StStrategyInput *in, StEstimate *est, GError **error)
{
  (void)error;
  const StOptions *o = in->options;
  const StModel *m = in->model;
  if (o->zero_stage != 0 || o->sparsity > 0 || o->offload != ST_OFFLOAD_NONE ||
      in->cluster->gpus <= 0)
    return TRUE;
  StStateBytes b;
  st_state_bytes(o, &b);
  est->peak_bytes = m->params * (b.weight + b.grad + b.optimizer) / in->cluster->gpus;
  if (m->n_layers > 0 && !has_moe(m))
    est->peak_bytes = MAX(est->peak_bytes, stages_held(in, &b));
  est->refuse_in_turn = TRUE;
  return TRUE;
}
