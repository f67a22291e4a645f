/* tensor_parallel.h: a layer pass of one rank of a tensor-parallel group,
 * with the group's collectives around it, as Megatron-LM runs it (Shoeybi
 * et al. 2019; sequence parallelism: Korthikanti et al. 2022). The layer's
 * split (which collectives a pass needs, in how many parts) is the model's
 * (StTpKind and st_layer_tp_parts in model/; the schedule's model is
 * derived as one rank, st_model_derive_as); this file turns it into ops:
 *
 *   forward, each part k in order:   [AG input]  COMP part k  [AR | RS output]
 *   backward, each part k in reverse: [AG output grad] [AG input]  COMP part k
 *                                     [AR | RS input grad]
 *
 * With StTpSpec.overlap a part's all-gathers and reduce-scatters are
 * split, one chunk exposed around the compute and the rest beside it:
 *
 *   [AG chunk] COMP part k  [RS chunk]
 *       \--[AG rest][RS rest]--/          (on the overlap stream)
 *
 * Every collective is a COMM_COLL on the tensor-parallel communicator, on
 * the pass's own stream (Megatron issues them on the compute stream and
 * waits: CUDA_DEVICE_MAX_CONNECTIONS=1), saying what it moves
 * (ST_DATA_TP_*, of the op's layer, part and micro-batch) for the
 * executor. The backward's second all-gather is Megatron's re-gather of the
 * sequence-parallel input for the weight gradient (it keeps only its s/t
 * rows, Korthikanti et al. section 4.2.2).
 *
 * With StTpSpec.cp the COMP op of the part holding a layer's attention is
 * cut in steps around context parallelism's exchanges (context_parallel.h):
 * its first step takes the pass's dependencies and allocations, its last
 * the frees and the partial sums.
 *
 * Memory: the pass's own effects (tensors.h) go on its first COMP op
 * (allocations) and its last op (frees); a gathered tensor (comm, the whole
 * sequence) lives from its all-gather to the end of its part's compute; a
 * part's partial sums before a reduce-scatter (comm) from the compute to
 * the reduce-scatter. All-reduces work in place.
 */
#pragma once

#include "sched/sched.h"
#include "strategy/context_parallel.h"
#include "strategy/strategy_common.h"
#include "strategy/tensors.h"

typedef struct {
  int comm;      /* the tensor-parallel communicator ("tp") */
  int t;         /* ranks in a group; 1: no collectives, whole passes */
  StDtype dtype; /* activations */
  /* --tp-comm-overlap: each all-gather and reduce-scatter in t chunks
   * pipelined with the part's compute (Transformer Engine's userbuffers,
   * Wang et al., ASPLOS 2023, "Overlap communication with dependent
   * computation via decomposition"). One chunk stays exposed on the pass's
   * stream (the first gathered before the compute can start, the last
   * reduced after it ends); the other t - 1 run on `overlap_stream` beside
   * the compute (ST_DATA_TP_OVERLAP), which their SMs slow as the engine's
   * contention says. All-reduces (no sequence parallelism) stay whole. */
  gboolean overlap;
  int overlap_stream;
  /* Context parallelism (context_parallel.h), or NULL: the part holding a
   * layer's attention runs in steps around the group's exchanges, the
   * ring's on `cp_stream`. */
  const StCpSpec *cp;
  int cp_stream;
} StTpSpec;

/* Emits the pass of `layer` for micro-batch `micro` over `batch` samples on
 * `stream`, with `pm`'s effects (and its `after` dependencies), `after`
 * (UINT32_MAX: none) and `extra`'s (a hook's, may be NULL: its waits and
 * allocations on the first op, its frees on the last). Returns the last op.
 * A recompute is a forward again (full recomputation), with its
 * collectives. With t = 1 one COMP op, as strategies without tensor
 * parallelism emit it. */
uint32_t st_tp_emit_pass(StProgram *program, const StTpSpec *tp, const StModel *model,
                         int stream, StPass pass, int layer, int micro, int batch,
                         const StPassMem *pm, uint32_t after, const StPassExtra *extra);

/* Bytes one rank's collectives move per pass of `layer` over `batch`
 * samples (nccl-tests' sizes summed; the notes' estimates). */
int64_t st_tp_pass_comm_bytes(const StModel *model, int layer, StPass pass, int batch,
                              StDtype dtype);
