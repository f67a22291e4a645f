/* framework_fsdp.c: PyTorch FSDP (FULL_SHARD) as MosaicML's llm-foundry and
 * Composer run it in their throughput benchmarks. */
#include "cost/framework.h"

const StFramework st_framework_fsdp = {
  .name = "fsdp",
  .summary = "PyTorch FSDP as llm-foundry benchmarks it: pure bf16 (parameters, gradients and "
             "reduce-scatters), one FSDP unit per block, prefetch, eager kernels",
  .version = "llm-foundry / Composer 2023-2024",
  .grad_bytes_mixed = 2,
  .overlap_grad_reduce = TRUE,
  .bucket_bytes = 0, /* each FSDP unit (a block) reduces its gradients as one */
  .gradients_source =
    "mosaicml/llm-foundry scripts/train/benchmarking/submit_benchmarks.py: "
    "--fsdp_config_mixed_precision PURE (bf16 parameters, reductions and buffers), "
    "limit_all_gathers, backward_prefetch BACKWARD_PRE; FSDP wraps each transformer block",
  .fused = ST_FUSE_OPTIMIZER,
  .attention = ST_ATTN_FLASH2,
  .logits_fp32 = TRUE,
  .nchw = TRUE,
  .host_us_per_kernel = 0,
  .kernels_source =
    "llm-foundry MPT: flash attention (attn_impl flash/triton), LayerNorm and GELU MLP in "
    "eager PyTorch; the loss on fp32 logits",
  .clip_grad = TRUE,
  .step_source = "llm-foundry train yamls: algorithms.gradient_clipping clipping_threshold 1.0",
  .memory_source = "",
};
