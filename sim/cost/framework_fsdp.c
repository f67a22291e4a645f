/* framework_fsdp.c: PyTorch FSDP (FULL_SHARD) as MosaicML's llm-foundry and
 * Composer run it in their throughput benchmarks. */
#include "cost/framework.h"

const StFramework st_framework_fsdp = {
  .name = "fsdp",
  .summary = "PyTorch FSDP as llm-foundry benchmarks it: bf16 parameters, fp32 reduce-scatters "
             "(mixed precision DEFAULT), one FSDP unit per block, eager kernels",
  .version = "llm-foundry / Composer 2023-2024",
  .grad_bytes_mixed = 4,
  .overlap_grad_reduce = TRUE,
  .overlap_zero12 = TRUE,
  .bucket_bytes = 0, /* each FSDP unit (a block) reduces its gradients as one */
  .gradients_source =
    "mosaicml/llm-foundry scripts/train/benchmarking/README.md: the tables' MP mode DEFAULT "
    "(Composer: bf16 parameters, fp32 gradient reduction; PURE, the 16-bit reduction, is "
    "--grad-reduce 16bit); FSDP FULL_SHARD wrapping each transformer block, limit_all_gathers, "
    "backward_prefetch BACKWARD_PRE",
  .fused = ST_FUSE_OPTIMIZER,
  .attention = ST_ATTN_FLASH2,
  .logits_fp32 = TRUE,
  .nchw = TRUE,
  .kernels_source =
    "llm-foundry MPT: flash attention (attn_impl flash/triton), LayerNorm and GELU MLP in "
    "eager PyTorch; the loss on fp32 logits",
  .clip_grad = TRUE,
  .step_source = "llm-foundry train yamls: algorithms.gradient_clipping clipping_threshold 1.0",
  .runtime = &st_runtime_pytorch,
};
