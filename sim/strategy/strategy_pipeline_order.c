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
 * DualPipeV: the phases of dualpipev.py's step (strategy_pipeline.h), with
 * its F&B pairs as a forward then a backward.
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
  StPipeSlot slot = {fwd, micro, 0, ST_PASS_INVALID, FALSE};
  g_array_append_val(slots, slot);
}

static void
push_half(GArray *slots, StPass half, int micro)
{
  StPipeSlot slot = {FALSE, micro, 0, half, FALSE};
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
  if (order == ST_PIPE_DUALPIPE_V)
    return st_pipe_order_dualpipev(stage, n_stages, n_micro);
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

/* ---- DualPipeV --------------------------------------------------------------- */

/* The order being written: the next forward and backward micro-batch of
 * each chunk, and the split backwards whose W is still to run (FIFO). */
typedef struct {
  GArray *slots;
  int f[2], b[2];
  GQueue pending; /* (micro << 1 | chunk) + 1 */
} DualOrder;

static void
dual_forward(DualOrder *o, int chunk)
{
  StPipeSlot slot = {TRUE, o->f[chunk]++, chunk, ST_PASS_INVALID, FALSE};
  g_array_append_val(o->slots, slot);
}

/* A backward, whole or (zb) its B, its W queued. */
static void
dual_backward(DualOrder *o, int chunk, gboolean zb)
{
  int micro = o->b[chunk]++;
  StPipeSlot slot = {FALSE, micro, chunk, zb ? ST_PASS_BWD_INPUT : ST_PASS_INVALID, FALSE};
  g_array_append_val(o->slots, slot);
  if (zb)
    g_queue_push_tail(&o->pending, GINT_TO_POINTER((micro << 1 | chunk) + 1));
}

static void
dual_weight(DualOrder *o)
{
  int code = GPOINTER_TO_INT(g_queue_pop_head(&o->pending)) - 1;
  g_return_if_fail(code >= 0);
  StPipeSlot slot = {FALSE, code >> 1, code & 1, ST_PASS_BWD_WEIGHT, FALSE};
  g_array_append_val(o->slots, slot);
}

/* A forward and a backward that DualPipe overlaps (F&B): marked a pair,
 * run one after the other on the compute stream. */
static void
dual_pair(DualOrder *o, int fwd_chunk, int bwd_chunk)
{
  dual_forward(o, fwd_chunk);
  dual_backward(o, bwd_chunk, FALSE);
  g_array_index(o->slots, StPipeSlot, o->slots->len - 2).pair = TRUE;
  g_array_index(o->slots, StPipeSlot, o->slots->len - 1).pair = TRUE;
}

GArray *
st_pipe_order_dualpipev(int stage, int n_stages, int n_micro)
{
  g_return_val_if_fail(stage >= 0 && stage < n_stages && n_micro >= 2 * n_stages, NULL);
  int S = n_stages, s = stage, M = n_micro;
  DualOrder o = {g_array_sized_new(FALSE, FALSE, sizeof(StPipeSlot), 6 * M), {0, 0}, {0, 0},
                 G_QUEUE_INIT};
  /* 1: forwards of chunk 0 until the first micro-batch turns. */
  for (int i = 0; i < 2 * (S - s - 1); i++)
    dual_forward(&o, 0);
  /* 2: chunk 0 and chunk 1 in turn. */
  for (int i = 0; i < s + 1; i++) {
    dual_forward(&o, 0);
    dual_forward(&o, 1);
  }
  /* 3: the first backwards of chunk 1, split, each W at once, a forward. */
  for (int i = 0; i < S - s - 1; i++) {
    dual_backward(&o, 1, TRUE);
    dual_weight(&o);
    dual_forward(&o, 1);
  }
  /* 4: the steady pairs. */
  for (int i = 0; i < M - 2 * S + s + 1; i++) {
    dual_pair(&o, 0, 1);
    dual_pair(&o, 1, 0);
  }
  /* 5: chunk 1's backwards and the last forwards. */
  for (int i = 0; i < S - s - 1; i++) {
    dual_backward(&o, 1, FALSE);
    dual_pair(&o, 1, 0);
  }
  /* 6: the backwards of both chunks, the second half of them split (an odd
   * stage from its chunk 1 on, an even one from its chunk 0). */
  gboolean zb = FALSE;
  for (int i = 0; i < s + 1; i++) {
    if (i == (s + 1) / 2 && s % 2 == 1)
      zb = TRUE;
    dual_backward(&o, 1, zb);
    if (i == (s + 1) / 2 && s % 2 == 0)
      zb = TRUE;
    dual_backward(&o, 0, zb);
  }
  /* 7: a W, then a split backward of chunk 0. */
  for (int i = 0; i < S - s - 1; i++) {
    dual_weight(&o);
    dual_backward(&o, 0, TRUE);
  }
  /* 8: the W's left. */
  while (!g_queue_is_empty(&o.pending))
    dual_weight(&o);
  g_assert(o.f[0] == M && o.f[1] == M && o.b[0] == M && o.b[1] == M);
  return o.slots;
}

/* Slot k of the interleaved order (see strategy_pipeline.h). */
static void
push_virtual(GArray *slots, gboolean fwd, int k, int n_stages, int n_chunks)
{
  int group = n_stages * n_chunks;
  int chunk = (k % group) / n_stages;
  StPipeSlot slot = {fwd, (k / group) * n_stages + k % n_stages,
                     fwd ? chunk : n_chunks - 1 - chunk, ST_PASS_INVALID, FALSE};
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
  if (order == ST_PIPE_DUALPIPE_V && n_micro < 2 * n_stages)
    return 2 * n_stages + 1; /* no such order (the build refuses it): its bound at M >= 2S */
  /* from a forward to its W (or its whole backward): walk the order;
   * DualPipeV's chunk forwards count one each */
  g_autoptr(GArray) slots = st_pipe_order(order, stage, n_stages, n_micro);
  int now = 0, most = 0;
  for (guint k = 0; k < slots->len; k++) {
    const StPipeSlot *slot = &g_array_index(slots, StPipeSlot, k);
    now += slot->fwd ? 1 : slot->half != ST_PASS_BWD_INPUT ? -1 : 0;
    most = MAX(most, now);
  }
  return most;
}
