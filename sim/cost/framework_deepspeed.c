/* framework_deepspeed.c: DeepSpeed ZeRO with its configuration defaults. */
#include "cost/framework.h"

const StFramework st_framework_deepspeed = {
  .name = "deepspeed",
  .summary = "DeepSpeed ZeRO: 16-bit gradients reduced in 5e8-element buckets overlapped with "
             "backward, eager kernels of the model code, fused Adam",
  .version = "DeepSpeed 0.1x",
  .grad_bytes_mixed = 2,
  .overlap_grad_reduce = TRUE,
  .bucket_bytes = 1000000000, /* 5e8 elements of 2 bytes */
  .gradients_source =
    "deepspeed/runtime/zero/config.py: reduce_bucket_size 5e8 elements, overlap_comm "
    "(stage 3: on by default), communication_data_type None: gradients reduced in the "
    "model's 16-bit dtype",
  .fused = ST_FUSE_OPTIMIZER,
  .attention = ST_ATTN_FLASH2,
  .logits_fp32 = TRUE,
  .nchw = TRUE,
  .host_us_per_kernel = 0,
  .kernels_source = "the model's own PyTorch code (eager); deepspeed.ops.adam.FusedAdam",
  .clip_grad = TRUE,
  .step_source = "deepspeed/runtime/constants.py: gradient_clipping 1.0 in most configs "
                 "(0, off, is the library default)",
  .memory_source = "",
};
