/* zero.h: ZeRO's sharded data parallelism (Rajbhandari et al., SC 2020) as
 * a piece of any strategy's program: the `zero` strategy over every layer
 * of a data-parallel rank, megatron over the layers of a pipeline stage
 * (the distributed optimizer of Megatron-LM is stage 1).
 *
 * With n ranks in the data-parallel group, each keeps 1/n of:
 *   stage 1: optimizer states. Gradients are reduce-scattered per bucket
 *            after the last micro-batch's backward, each rank steps its
 *            shard, and the updated parameters are all-gathered after the
 *            step, before the next forward.
 *   stage 2: also gradients. Each bucket's gradient exists from the
 *            backward of its first layer until its reduce-scatter, once per
 *            micro-batch; only the shard stays.
 *   deferred (stages 2-3, FSDP2's set_requires_gradient_sync(False)):
 *            the reductions wait for the last micro-batch as in stage 1,
 *            each bucket's whole gradient held and accumulated until then.
 *   stage 3: also parameters. Every layer's parameters are all-gathered
 *            before each pass that reads them and dropped after (or, with
 *            `reshard`, kept to the micro-batch's backward or the step's
 *            last, each pass between reading the same copy); `prefetch`
 *            gathers run ahead of the pass that needs them, on a stream and
 *            communicator of their own so that a prefetch is not stuck
 *            behind a reduction.
 * Each layer's parameters are cut into n slices (the last may be short), so
 * a single layer can be gathered; a rank keeps one slice of each.
 *
 * The strategy drives it: st_zero_hooks() around every pass (the
 * data-parallel frame's StPassHooks), then st_zero_emit_step() once the
 * passes are built. Buckets never span two of its spans (a pipeline
 * stage's model chunks), and are found by layer, so the backwards of
 * different micro-batches may interleave (1F1B, interleaved pipelines).
 *
 * With offload (ZeRO-Offload, Ren et al., USENIX ATC 2021; DeepSpeed's
 * offload_optimizer {device: cpu}; stages 1-2, dense): the fp32 master
 * weights and optimizer states live in host memory (no ST_MEM_OPTIMIZER
 * buffer on the GPU), and the step is: the gradient shard copied to the
 * host (D2H, shard x grad bytes) on the `copy_stream` once the last
 * reduction is done, the optimizer step on the `host_stream` (StStream.host:
 * shard x optim_traffic bytes of host memory), the updated 16-bit parameter
 * shard copied back (H2D, shard x weight bytes), then the all-gathers as
 * without. Per rank and step 4P/n bytes over PCIe in mixed precision with
 * 16-bit gradients: the paper's 4M over the ranks. Its one-step delayed
 * parameter update is not modelled.
 *
 * With --sparsity (SAMO, sparse.h; the `zero` strategy only): reductions and
 * gathers move compressed vectors, states are the sparse layout's (see
 * strategy_zero.c).
 */
#pragma once

#include "strategy/sparse.h"

/* A range of layers whose states are one set of buffers, named with
 * `prefix` ("" or "chunk 1: "), sharded over `n` ranks of their own
 * communicators (MoE experts over their expert data-parallel group); n 0:
 * the spec's n and communicators. */
typedef struct {
  const char *prefix;
  int first, last;
  int n;
  int reduce_comm, gather_comm;
} StZeroSpan;

typedef struct {
  StProgram *program;       /* borrowed */
  const StModel *model;     /* borrowed */
  StStateBytes bytes;
  int stage;                /* 1, 2 or 3 */
  int n;                    /* ranks the states are sharded over */
  int prefetch;             /* stage 3: gathers ahead of use */
  StReshard reshard;        /* stage 3: when a gathered layer is dropped (options.h) */
  int compute;              /* stream of the passes and of the optimizer step */
  int reduce_stream, gather_stream;
  int reduce_comm, gather_comm;
  const int64_t *elems;     /* [n_layers], borrowed: gradient elements of each layer held
                               here (0: not here); the non-zeros when sparse */
  const StZeroSpan *spans;  /* [n_spans], borrowed: the layers held here */
  int n_spans;
  int64_t bucket_bytes;     /* --bucket-bytes */
  gboolean overlap_param_gather; /* stages 1-2, dense: each layer's first forward of the
                               next step waits for its own bucket's gather, not for all
                               (Megatron-LM's --overlap-param-gather) */
  int last_micro;           /* the step's last micro-batch */
  gboolean defer_sync;      /* stages 2-3 (--defer-grad-sync): each bucket's whole gradient
                               is held from its first micro-batch's backward and reduced only
                               after the last (but over a span of one rank, whose shard is
                               the whole) */
  const StSparse *sparse;   /* NULL when dense */
  gboolean replicate;       /* HSDP (strategy_zero.c): each reduce-scatter's shard is then
                               all-reduced over `replicate_comm`, the ranks holding the same
                               shard in the other groups of n */
  int replicate_comm;
  gboolean offload;         /* ZeRO-Offload (above): stages 1-2, dense */
  int copy_stream;          /* offload: the PCIe copies' stream */
  int host_stream;          /* offload: the CPU step's stream (StStream.host) */
} StZeroSpec;

typedef struct StZero StZero;

/* Adds the persistent states (dense: params or their shard, grads or
 * theirs, the optimizer states' shard, per span; sparse: the sparse
 * layout's over the whole model). The spec's arrays must outlive it. */
StZero *st_zero_new(const StZeroSpec *spec);
void st_zero_free(StZero *zero);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StZero, st_zero_free)

/* Hooks for every pass the program runs (gathers, bucket buffers,
 * reductions); `data` is the StZero. */
StPassHooks st_zero_hooks(StZero *zero);

/* The last reduction emitted so far, UINT32_MAX when none. */
uint32_t st_zero_last_reduce(const StZero *zero);
/* Elements of this rank's shards (the optimizer step's). */
int64_t st_zero_shard_elems(const StZero *zero);
int st_zero_n_buckets(const StZero *zero);

/* The optimizer step over the shards after the last reduction and `after`
 * (UINT32_MAX: none), then (stages 1-2) the all-gathers of the updated
 * parameters; the next step's first forward (stage 3: first gather) waits
 * for the last of them. Returns the step op. */
uint32_t st_zero_emit_step(StZero *zero, uint32_t after);
