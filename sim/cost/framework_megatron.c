/* framework_megatron.c: Megatron-LM (Megatron-Core) with Transformer Engine,
 * as its training script runs by default under --bf16. */
#include "cost/framework.h"

const StFramework st_framework_megatron = {
  .name = "megatron",
  .summary = "Megatron-LM + Transformer Engine: fp32 main gradients reduced in fp32 after "
             "backward (no overlap unless asked), fused kernels, cuDNN/flash attention",
  .version = "Megatron-Core 0.x (2024-2025)",
  .grad_bytes_mixed = 4,
  .overlap_grad_reduce = FALSE,
  .overlap_zero12 = FALSE,
  .bucket_bytes = 160000000, /* with --overlap-grad-reduce: 4e7 fp32 gradients */
  .gradients_source =
    "megatron/training/arguments.py validate_args: under --bf16, accumulate_allreduce_grads_"
    "in_fp32 is forced on unless --grad-reduce-in-bf16 (fp32 main_grad buffers, reduced in "
    "fp32); megatron/core/distributed/distributed_data_parallel_config.py: overlap_grad_reduce "
    "False by default, and distributed_data_parallel.py sets bucket_size None (one bucket) "
    "when it is off, max(40000000, 1000000 x DP) parameters when it is on (stagger takes the "
    "40M floor: 160 MB of fp32 gradients)",
  .fused = ST_FUSE_NORM | ST_FUSE_ACTIVATION | ST_FUSE_ROPE | ST_FUSE_RESIDUAL |
           ST_FUSE_SOFTMAX | ST_FUSE_OPTIMIZER | ST_FUSE_DISPATCH,
  .attention = ST_ATTN_CUDNN,
  .logits_fp32 = TRUE,
  .nchw = TRUE,
  .kernels_source =
    "megatron/training/arguments.py: --bias-gelu-fusion, --bias-dropout-fusion, "
    "--masked-softmax-fusion, --apply-rope-fusion on by default; Transformer Engine's "
    "LayerNorm/RMSNorm and DotProductAttention (cuDNN fused attention on Hopper); "
    "cross_entropy_loss_fusion off by default, and vocab_parallel_cross_entropy reads the "
    "logits in fp32; apex/TE FusedAdam",
  .clip_grad = TRUE,
  .zero_grads = TRUE,
  .step_source = "megatron/training/arguments.py: --clip-grad 1.0 by default; "
                 "model.zero_grad_buffer() fills the main_grad buffers with zeros each step "
                 "(megatron/training/training.py train_step)",
  .comm_contends = TRUE,
  .runtime = &st_runtime_pytorch,
};
