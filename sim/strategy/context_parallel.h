/* context_parallel.h: the attention of one rank of a context-parallel
 * group, with the group's exchanges, as Megatron-LM runs it with
 * Transformer Engine (--context-parallel-size, --cp-comm-type p2p or a2a).
 * The rank's model holds s / c tokens of every sequence (st_model_derive_cp;
 * which layers and parts cut: layer_context.c, st_layer_cp_part); this file
 * turns the part of a pass that holds the attention into ops:
 *
 *   ring (TE's p2p, Liu et al. 2023), forward or recompute:
 *     pre | core 1 | core 2 | ... | core c | post          (pass's stream)
 *           \-X 1-/-\-X 2-/ ... X c-1                       ("cp" stream)
 *   X k (a ring_shift over "cp") brings the key/value chunk core k + 1
 *   reads while core k computes; it waits for X k - 1 (the chunk it passes
 *   on) and for core k - 1 (whose buffer it fills: two buffers, as TE
 *   double-buffers). Backward (post first, pre last): the same ring,
 *   core k computing the gradient of the keys and values of the chunk it
 *   reads, which follows the chunk one exchange behind: X m runs beside
 *   core m (after core m - 1, as the forward's) and moves the chunk core
 *   m + 1 reads (m < c) and the gradient summed through core m - 1 (m >=
 *   3; core 1 reads the rank's own chunk, whose gradient stays home); X c
 *   + 1, after the last core step, brings the last gradient home before
 *   pre reads it (st_cp_ring_bwd_carries): c + 1 exchanges (2 at c = 2),
 *   (c - 1) K of chunks and (c - 1) K of gradients.
 *
 *   all-to-all (DeepSpeed Ulysses, Jacobs et al. 2023), on the pass's
 *   stream: pre | a2a Q K V | core | a2a out | post; the core on heads / c
 *   of the whole sequence. Backward: post | a2a d out | core | a2a dQ dK dV
 *   | pre.
 *
 * Per rank, layer and micro-batch of b sequences, with K the bytes of the
 * rank's keys and values per sequence (2 kv_heads/t head_dim s/c e) and Q
 * its queries, keys and values (+ the output's q s/c e, O):
 *   ring:        forward (c - 1) b K sent and received, backward 2 (c - 1) b K
 *   all-to-all:  forward all-to-alls of b Q and b O ((c - 1)/c of each
 *                sent), backward the same
 * (tests/test_context_parallel.c checks both against the schedule.)
 *
 * Memory: the ring's two receive buffers of b K (backward 2 b K: the
 * gradient travels too) live from the first exchange to the last core
 * step; the all-to-all's output, b (Q + O) bytes, from the first
 * all-to-all to the last (comm).
 */
#pragma once

#include "sched/sched.h"

typedef enum {
  ST_CP_RING = 0,       /* Transformer Engine's p2p ring (Megatron-LM's default) */
  ST_CP_ALL_TO_ALL,     /* DeepSpeed Ulysses / TE's a2a */
} StCpComm;

typedef struct {
  int comm;      /* the context-parallel communicator ("cp") */
  int c;         /* ranks in a group; 1: none */
  StCpComm kind;
  StDtype dtype; /* activations */
} StCpSpec;

/* Steps the part `part` of a pass of `layer` runs in on a context-parallel
 * rank (the StOp.cp_steps of its COMP ops), or 0 when it runs whole. */
int st_cp_steps(const StCpSpec *cp, const StModel *model, int layer, int part);

/* Emits the core of the part (the steps between its first and last) and
 * the exchanges, after `first` (the part's first step, committed by the
 * caller, who also emits the last after the returned op). */
uint32_t st_cp_emit_core(StProgram *program, const StCpSpec *cp, const StModel *model,
                         int stream, int cp_stream, StPass pass, int layer, int part,
                         int micro, int batch, uint32_t first);

/* What the ring's backward exchange m (1 .. c + 1) carries: the key/value
 * chunk the next core step reads, the gradient summed so far; exchanges
 * carrying neither are not emitted (m = 2 at c = 2). The count emitted. */
void st_cp_ring_bwd_carries(int c, int m, gboolean *kv, gboolean *grad);
int st_cp_ring_bwd_exchanges(int c);

/* Bytes one rank's exchanges send per pass of `layer` over `batch`
 * sequences: the ring's chunks, or the all-to-alls' (c - 1) / c of their
 * buffers (what a rank puts on the wire; notes and tests). */
int64_t st_cp_pass_bytes(const StCpSpec *cp, const StModel *model, int layer, StPass pass,
                         int batch);
