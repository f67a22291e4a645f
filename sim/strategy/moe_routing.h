/* moe_routing.h: how many expert-parallel ranks a token's row travels to.
 *
 * A dispatcher that sends one row per (token, expert) (Megatron-LM's
 * all-to-all dispatcher) moves top-k rows per token whatever the routing.
 * One that sends a token once to each rank holding one of its experts and
 * combines a rank's outputs before sending them back (DeepEP;
 * StFramework.dispatch_per_rank) moves as many rows as the ranks a token
 * reaches, which the routing decides:
 *
 * - random: each token's k experts a uniform draw of k distinct of the X
 *   (a learned router's balanced ideal): R (1 - C(X - X/R, k) / C(X, k))
 *   ranks on average, X/R experts on each of the R ranks;
 * - contiguous: token t's experts are (t k + j) mod X, j < k: NeMo
 *   Automodel's FakeBalancedGate without noise (components/moe/layers.py),
 *   which its benchmark recipes run; the mean over the cycle of starts.
 */
#pragma once

typedef enum {
  ST_MOE_ROUTING_RANDOM = 0,
  ST_MOE_ROUTING_CONTIGUOUS,
} StMoeRouting;

/* The mean number of the R ranks a token reaches, with X experts (R
 * dividing X) and top_k of them per token; in [1, min(k, R)]. */
double st_moe_ranks_per_token(int experts, int ranks, int top_k, StMoeRouting routing);
