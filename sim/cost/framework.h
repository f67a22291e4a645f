/* framework.h: what the training framework does by default, as named presets
 * (`--framework`): the same layout in Megatron-LM and in torchtitan is not
 * the same run. A preset says, each group with the source code or
 * documentation it is read from:
 *
 * - gradients: the bytes a gradient element takes under mixed precision
 *   (2: kept and reduced in bf16; 4: fp32 gradient buffers reduced in fp32,
 *   Megatron-LM's main_grad, FSDP's fp32 reduce dtype, AMP's fp32 grads),
 *   whether data-parallel reductions start as buckets fill during backward
 *   or only after it, the default bucket size and ZeRO-3 prefetch;
 * - kernels: which memory-bound steps it fuses (a fused RMSNorm reads its
 *   input once; PyTorch eager runs each elementwise op as its own kernel),
 *   which attention kernel it calls, whether the loss reads fp32 logits, and
 *   the CPU time it takes to issue one kernel (eager dispatch; 0 under CUDA
 *   graphs), which becomes the GPU's time where kernels are shorter;
 * - the step: gradient-norm clipping, zeroing gradients;
 * - memory the process holds beyond its tensors (output/runtime_memory.h):
 *   the caching allocator's reserve over what is allocated, the CUDA
 *   context, NCCL's buffers per communicator, library workspaces.
 *
 * The presets are code, one file each (framework_<name>.c), listed in
 * framework_registry.c: adding one is a file and a line. A schedule records
 * its preset by name (settings.framework); the strategies read it for the
 * gradients, the compute model for the kernels, the summary for memory.
 * `ideal` is what stagger assumed before presets existed (everything fused,
 * nothing exposed that need not be, no memory beyond tensors): a bound, not
 * a framework.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "cluster/gpu_perf.h" /* StAttnKernel */

/* Memory-bound steps a framework may fuse into one kernel (StFramework.fused). */
typedef enum {
  ST_FUSE_NORM = 1 << 0,        /* RMSNorm in one kernel (PyTorch's LayerNorm always is one) */
  ST_FUSE_ACTIVATION = 1 << 1,  /* bias + GELU, SwiGLU's silu x up: one kernel */
  ST_FUSE_ROPE = 1 << 2,        /* rotary embedding of Q and K in one kernel */
  ST_FUSE_RESIDUAL = 1 << 3,    /* bias + dropout + residual add in one kernel */
  ST_FUSE_SOFTMAX = 1 << 4,     /* unfused attention: scale + mask + softmax in one kernel */
  ST_FUSE_LOSS = 1 << 5,        /* logits' softmax and cross-entropy (and its gradient) fused */
  ST_FUSE_OPTIMIZER = 1 << 6,   /* the optimizer's update of all tensors in one or a few
                                   kernels (fused / multi-tensor Adam) */
  ST_FUSE_DISPATCH = 1 << 7,    /* MoE: a token dispatcher permutes each expert's rows once
                                   per layer; the running token stream is not copied through
                                   every expert, as stagger's executor chains them (so not in
                                   ST_FUSE_ALL, the executor's bound) */
  ST_FUSE_GROUPED_EXPERTS = 1 << 8, /* MoE: a rank's experts run each projection as one grouped
                                       GEMM (grouped_gemm's gmm, torch._grouped_mm, TE's
                                       GroupedLinear): their tiles share waves, so no expert
                                       pays a partial last wave of its own (not in
                                       ST_FUSE_ALL either) */
} StFuse;

#define ST_FUSE_ALL 0x7f


/* What the process under a framework costs beyond its kernels: issuing
 * them from the CPU, and the memory it holds beyond tensors. Every
 * framework here runs on PyTorch, so they share one (framework_runtime.c). */
typedef struct {
  double host_us_per_kernel;     /* CPU time to issue one kernel, us */
  const char *host_source;
  double allocator_reserve;      /* reserved / allocated - 1 at the peak */
  int64_t context_bytes;         /* CUDA context and libraries outside the allocator */
  int64_t nccl_bytes_per_comm;   /* NCCL's device buffers per communicator a rank joins
                                    with peers on other GPUs */
  int64_t workspace_bytes;       /* cuBLAS workspace held in the allocator */
  const char *memory_source;
} StFrameworkRuntime;

extern const StFrameworkRuntime st_runtime_pytorch;
extern const StFrameworkRuntime st_runtime_none;

typedef struct StFramework {
  const char *name;     /* as --framework takes it */
  const char *summary;  /* one line */
  const char *version;  /* the release whose defaults these are */

  /* Gradients and the data-parallel reductions. */
  int grad_bytes_mixed;          /* 2 or 4, see above */
  gboolean overlap_grad_reduce;  /* reductions during backward, as buckets fill */
  gboolean overlap_zero12;       /* the same under ZeRO stages 1 and 2 */
  int64_t bucket_bytes;          /* default --bucket-bytes; 0 = one bucket per layer */
  int64_t gather_bucket_elems;   /* ZeRO-3: a layer's parameters gathered in collectives of at
                                    most this many elements, one after another (each paying
                                    its latency); 0: one collective per layer */
  gboolean overlap_param_gather; /* ZeRO 1-2: the next forward waits for each layer's bucket
                                    of updated parameters, not for all of them */
  gboolean fp32_shards;          /* ZeRO-3 under mixed precision: a rank's shard of the
                                    parameters is the fp32 master copy, cast to 16 bits as
                                    it is gathered (no 16-bit shard beside it) */
  gboolean defer_grad_sync;      /* ZeRO 2-3 with gradient accumulation: no reduce-scatter until
                                    the last micro-batch; each layer's unsharded gradient is
                                    kept from its first backward, in the reduce dtype, and
                                    accumulated (FSDP2's set_requires_gradient_sync(False)) */
  gboolean states_16bit;         /* mixed precision without an fp32 master: the model is built
                                    in bf16 and torch.optim keeps its states in the
                                    parameters' dtype (Adam's m and v in bf16), so a
                                    parameter's weight, shard and states take 2 bytes each */
  const char *gradients_source;

  /* Expert parallelism. */
  gboolean dispatch_per_rank;    /* the MoE dispatcher sends a token's row once to each rank
                                    holding one of its experts, and the combine adds a rank's
                                    expert outputs before sending them back (DeepEP), instead
                                    of a row per (token, expert) both ways (Megatron-LM's
                                    all-to-all dispatcher); how many ranks a token reaches is
                                    the routing's (--moe-routing) */

  /* Tensor parallelism. */
  gboolean tp_comm_overlap;      /* sequence-parallel all-gathers and reduce-scatters pipelined
                                    in chunks with their GEMMs (Transformer Engine's
                                    userbuffers: Megatron-LM's --tp-comm-overlap) */

  /* Kernels. */
  unsigned fused;                /* StFuse */
  StAttnKernel attention;
  gboolean logits_fp32;          /* the loss casts logits to fp32 and reads them so */
  gboolean loss_in_place;        /* the fused loss keeps one fp32 statistic per row, not the
                                    probabilities, and writes its gradient over the logits */
  gboolean loss_16bit;           /* the loss keeps its log-probabilities in the logits' 16-bit
                                    dtype (F.cross_entropy on bf16 logits saves log_softmax's
                                    bf16 output), not in fp32 as stagger's executor does */
  gboolean loss_autograd;        /* the loss is PyTorch's F.cross_entropy under autograd (not
                                    a fused kernel, nor a function that writes its gradient
                                    over what it saved, as Megatron-LM's
                                    vocab_parallel_cross_entropy does): its backward holds
                                    nll_loss's dense gradient and log_softmax's input gradient,
                                    each of the logits' size in the loss's dtype, beside the
                                    saved log-probabilities, and its forward the fp32 copy of
                                    16-bit logits beside them (strategy/tensors.c) */
  gboolean nchw;                 /* images in PyTorch's default contiguous NCHW layout: cuDNN
                                    transposes them to and from the NHWC its tensor-core
                                    convolutions need (--memory-format overrides) */
  const char *kernels_source;

  /* The step. */
  gboolean clip_grad;            /* gradient-norm clipping: the gradients read for their norm,
                                    then read and written scaled */
  gboolean zero_grads;           /* the gradient buffers written with zeros every step (a
                                    persistent buffer; PyTorch's set_to_none writes nothing) */
  const char *step_source;

  /* Communication kernels take the SMs and memory bandwidth the GPU file's
   * nccl section says from the compute beside them (FALSE: a bound). */
  gboolean comm_contends;

  /* The process: kernel issue and memory beyond tensors. */
  const StFrameworkRuntime *runtime;
} StFramework;

/* NULL-terminated, in registry order. */
const StFramework *const *st_frameworks(void);
const StFramework *st_framework_find(const char *name);
/* The preset a schedule of `strategy` gets without --framework: the
 * framework its strategy's system is built on (megatron: megatron; zero:
 * deepspeed; dp: pytorch) and, for the techniques whose own code stagger
 * models (cyclic DP, DeepPool, AxoNN's pipelines, SAMO's sparse states,
 * any `sparse` run), ideal: their papers' 16-bit gradients and fused
 * kernels. Never NULL. */
const StFramework *st_framework_default(const char *strategy, gboolean sparse);
