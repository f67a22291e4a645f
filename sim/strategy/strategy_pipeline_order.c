/* strategy_pipeline_order.c: the order of forward and backward passes on
 * one pipeline stage (see strategy_pipeline.h).
 *
 * GPipe (Huang et al., NeurIPS 2019): all M forwards, then all M backwards.
 * Every stage holds the activations of all M micro-batches at the turn.
 *
 * 1F1B (PipeDream-Flush, Narayanan et al., ICML 2021; Megatron-LM's
 * non-interleaved schedule): stage s of S first runs W = min(S - s - 1, M)
 * forwards, then alternates one forward and one backward until the
 * forwards are done, then runs the remaining backwards. At most
 * min(S - s, M) micro-batches are in flight on stage s, and with uniform
 * stages the step takes as long as GPipe's: the bubble is the same, the
 * activation memory is not.
 *
 * In both, backwards run in micro-batch order, so every p2p channel carries
 * its tensors in micro-batch order.
 */
#include "strategy/strategy_pipeline.h"

static void
push(GArray *slots, gboolean fwd, int micro)
{
  StPipeSlot slot = {fwd, micro};
  g_array_append_val(slots, slot);
}

GArray *
st_pipe_order(StPipeOrder order, int stage, int n_stages, int n_micro)
{
  g_return_val_if_fail(stage >= 0 && stage < n_stages && n_micro >= 1, NULL);
  GArray *slots = g_array_sized_new(FALSE, FALSE, sizeof(StPipeSlot), 2 * n_micro);
  int warmup = order == ST_PIPE_GPIPE ? n_micro : MIN(n_stages - stage - 1, n_micro);
  int f = 0, b = 0;
  while (f < warmup)
    push(slots, TRUE, f++);
  while (f < n_micro) {
    push(slots, TRUE, f++);
    push(slots, FALSE, b++);
  }
  while (b < n_micro)
    push(slots, FALSE, b++);
  return slots;
}

int
st_pipe_in_flight(StPipeOrder order, int stage, int n_stages, int n_micro)
{
  if (order == ST_PIPE_GPIPE)
    return n_micro;
  return MIN(n_stages - stage, n_micro);
}
