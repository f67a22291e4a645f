/* framework_deepspeed.c: DeepSpeed ZeRO with its configuration defaults. */
#include "cost/framework.h"

const StFramework st_framework_deepspeed = {
  .name = "deepspeed",
  .summary = "DeepSpeed ZeRO: 16-bit gradients reduced in 5e8-element buckets, overlapped with "
             "backward under ZeRO-3 only; eager kernels of the model code, fused Adam",
  .version = "DeepSpeed 0.1x",
  .grad_bytes_mixed = 2,
  .overlap_grad_reduce = TRUE,
  .overlap_zero12 = FALSE,
  .bucket_bytes = 1000000000, /* 5e8 elements of 2 bytes */
  .gather_bucket_elems = 50000000,
  .gradients_source =
    "deepspeed/runtime/zero/config.py: reduce_bucket_size 5e8 elements, "
    "stage3_prefetch_bucket_size 5e7 elements (the parameters of a gather); overlap_comm None, "
    "which its validator makes True for stage 3 and False for stages 1 and 2; "
    "engine.py communication_data_type: the model's 16-bit dtype when not configured",
  .fused = ST_FUSE_OPTIMIZER | ST_FUSE_DISPATCH,
  .attention = ST_ATTN_FLASH2,
  .logits_fp32 = TRUE,
  .loss_autograd = TRUE,
  .nchw = TRUE,
  .kernels_source = "the model's own PyTorch code (eager); deepspeed.ops.adam.FusedAdam",
  .clip_grad = FALSE,
  .step_source = "deepspeed/runtime/constants.py: GRADIENT_CLIPPING_DEFAULT 0 (off)",
  .comm_contends = TRUE,
  .runtime = &st_runtime_pytorch,
};
