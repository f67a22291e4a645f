/* framework_torchtitan.c: torchtitan (PyTorch-native LLM training) with
 * FSDP2 and its defaults: eager mode, no torch.compile. */
#include "cost/framework.h"

const StFramework st_framework_torchtitan = {
  .name = "torchtitan",
  .summary = "torchtitan: FSDP2 with bf16 parameters and fp32 reduce-scatters during "
             "backward, PyTorch eager kernels, SDPA flash attention, fp32 loss",
  .version = "torchtitan 2024-2025 (job_config.py defaults)",
  .grad_bytes_mixed = 4,
  .overlap_grad_reduce = TRUE,
  .overlap_zero12 = TRUE,
  .bucket_bytes = 0, /* FSDP2 reduces each transformer block's gradients as one group */
  .fp32_shards = TRUE,
  .gradients_source =
    "torchtitan/config/job_config.py: mixed_precision_param bfloat16, mixed_precision_reduce "
    "float32 (FSDP2 MixedPrecisionPolicy); fully_shard per transformer block, each block's "
    "reduce-scatter issued when its backward ends",
  .fused = ST_FUSE_OPTIMIZER | ST_FUSE_DISPATCH,
  .attention = ST_ATTN_FLASH2,
  .logits_fp32 = TRUE,
  .loss_autograd = TRUE,
  .nchw = TRUE,
  .kernels_source =
    "torchtitan/config/job_config.py: compile False (eager: each elementwise op of SwiGLU and "
    "RoPE its own kernel); F.scaled_dot_product_attention (its flash backend: "
    "FlashAttention-2); the loss on logits cast to fp32; AdamW with fused=True",
  .clip_grad = TRUE,
  .step_source = "torchtitan/config/job_config.py: max_norm 1.0 (clip_grad_norm_ every step)",
  .comm_contends = TRUE,
  .runtime = &st_runtime_pytorch,
};
