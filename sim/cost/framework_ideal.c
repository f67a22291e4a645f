/* framework_ideal.c: no framework at all: every memory-bound step fused,
 * gradients reduced in the compute dtype as they are ready, nothing held
 * beyond tensors. What stagger assumed before presets; a bound to compare a
 * framework's defaults against, not a framework anyone runs. */
#include "cost/framework.h"

const StFramework st_framework_ideal = {
  .name = "ideal",
  .summary = "a bound: every kernel fused, 16-bit gradients reduced in 25 MiB buckets during "
             "backward, no host overhead, no memory beyond tensors",
  .version = "-",
  .grad_bytes_mixed = 2,
  .overlap_grad_reduce = TRUE,
  .overlap_zero12 = TRUE,
  .bucket_bytes = 25 << 20,
  .gradients_source = "none: the best a framework could do",
  .fused = ST_FUSE_ALL,
  .attention = ST_ATTN_CUDNN,
  .logits_fp32 = FALSE,
  .nchw = FALSE,
  .kernels_source = "none: the best a framework could do",
  .clip_grad = FALSE,
  .step_source = "none",
  .runtime = &st_runtime_none,
};
