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
 * Zero bubble (Qi et al., ICLR 2024, section 2): ZB-H1 and ZB-H2, the
 * paper's handcrafted schedules, with each backward in two slots, B and W
 * (strategy_pipeline.h has their parameters). With f, b, w the stage's
 * times, the B of micro-batch 0 reaches stage s after S - s forwards and
 * (S - 1 - s) b on the stages after it: ZB-H1 fills that wait with the
 * warm-up forwards of 1F1B and lets the W's that stage s defers (s of them)
 * fill the cool-down, leaving (S - 1)(f + b - w); ZB-H2 also fills the
 * start with forwards (2 (S - s) - 1) and defers 2 s W's, so that every
 * stage runs without a gap from its first forward to its last W, (S - 1)(f
 * + b - 2w) when that is positive. tests/test_pipeline.c checks both bubbles
 * and the orders; the parameters were found by simulating the candidates
 * against the closed forms over several (f, b, w), S and M.
 *
 * In all, backwards run in micro-batch order, so every p2p channel carries
 * its tensors in micro-batch order.
 *
 * Interleaved 1F1B (Megatron-LM's forward_backward_pipelining_with_
 * interleaving, Narayanan et al., SC 2021): V chunks per stage, cycled in
 * groups of S micro-batches; every chunk's channel still carries its
 * tensors in micro-batch order. The bubble shrinks V times at V times the
 * p2p traffic.
 */
#include "strategy/strategy_pipeline.h"

static void
push(GArray *slots, gboolean fwd, int micro)
{
  StPipeSlot slot = {fwd, micro, 0, ST_PASS_INVALID};
  g_array_append_val(slots, slot);
}

static void
push_half(GArray *slots, StPass half, int micro)
{
  StPipeSlot slot = {FALSE, micro, 0, half};
  g_array_append_val(slots, slot);
}

/* A zero-bubble order (see strategy_pipeline.h). */
static GArray *
zero_bubble(int n_micro, int warm, int lag)
{
  GArray *slots = g_array_sized_new(FALSE, FALSE, sizeof(StPipeSlot), 3 * n_micro);
  int f = 0, b = 0, w = 0;
  while (f < MIN(warm, n_micro))
    push(slots, TRUE, f++);
  while (b < n_micro) {
    push_half(slots, ST_PASS_BWD_INPUT, b++);
    while (b - w > lag)
      push_half(slots, ST_PASS_BWD_WEIGHT, w++);
    if (f < n_micro)
      push(slots, TRUE, f++);
  }
  while (w < n_micro)
    push_half(slots, ST_PASS_BWD_WEIGHT, w++);
  return slots;
}

GArray *
st_pipe_order(StPipeOrder order, int stage, int n_stages, int n_micro)
{
  g_return_val_if_fail(stage >= 0 && stage < n_stages && n_micro >= 1, NULL);
  if (order == ST_PIPE_ZB_H1)
    return zero_bubble(n_micro, n_stages - stage, stage);
  if (order == ST_PIPE_ZB_H2)
    return zero_bubble(n_micro, 2 * (n_stages - stage) - 1, 2 * stage);
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

/* Slot k of the interleaved order (see strategy_pipeline.h). */
static void
push_virtual(GArray *slots, gboolean fwd, int k, int n_stages, int n_chunks)
{
  int group = n_stages * n_chunks;
  int chunk = (k % group) / n_stages;
  StPipeSlot slot = {fwd, (k / group) * n_stages + k % n_stages,
                     fwd ? chunk : n_chunks - 1 - chunk, ST_PASS_INVALID};
  g_array_append_val(slots, slot);
}

GArray *
st_pipe_order_interleaved(int stage, int n_stages, int n_micro, int n_chunks)
{
  g_return_val_if_fail(stage >= 0 && stage < n_stages && n_chunks >= 1 &&
                       n_micro % n_stages == 0, NULL);
  int total = n_micro * n_chunks;
  GArray *slots = g_array_sized_new(FALSE, FALSE, sizeof(StPipeSlot), 2 * total);
  int warmup = n_micro == n_stages
                 ? total
                 : MIN(2 * (n_stages - stage - 1) + (n_chunks - 1) * n_stages, total);
  int f = 0, b = 0;
  while (f < warmup)
    push_virtual(slots, TRUE, f++, n_stages, n_chunks);
  while (f < total) {
    push_virtual(slots, TRUE, f++, n_stages, n_chunks);
    push_virtual(slots, FALSE, b++, n_stages, n_chunks);
  }
  while (b < total)
    push_virtual(slots, FALSE, b++, n_stages, n_chunks);
  return slots;
}

int
st_pipe_in_flight(StPipeOrder order, int stage, int n_stages, int n_micro)
{
  if (order == ST_PIPE_GPIPE)
    return n_micro;
  if (!st_pipe_order_splits(order))
    return MIN(n_stages - stage, n_micro);
  /* from a forward to its W: walk the order */
  g_autoptr(GArray) slots = st_pipe_order(order, stage, n_stages, n_micro);
  int now = 0, most = 0;
  for (guint k = 0; k < slots->len; k++) {
    const StPipeSlot *slot = &g_array_index(slots, StPipeSlot, k);
    now += slot->fwd ? 1 : slot->half == ST_PASS_BWD_WEIGHT ? -1 : 0;
    most = MAX(most, now);
  }
  return most;
}
