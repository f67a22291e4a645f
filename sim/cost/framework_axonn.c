/* framework_axonn.c: AxoNN (Singh and Bhatele, IPDPS 2022) as SAMO
 * (Singh and Bhatele, IPDPS 2023) ran it in 2022: plain PyTorch 1.x in
 * eager mode under AxoNN's own data-parallel and inter-layer scheduling, read
 * from axonn-ai/axonn at the paper's time (commit 8ebff5f, Dec. 2022; branch
 * grad-norm, Sept. 2022, which adds the pruning-aware optimizer).
 *
 * What sets it apart from `pytorch` (DDP): the gradients are one flat
 * buffer, all-reduced once after the batch's passes and waited for; the
 * optimizer is the user's torch.optim one, untouched in fp32 and pointed at
 * per-tensor fp32 copies under mixed precision, so it loops over the
 * parameter tensors as PyTorch 1.x did by default (compute_estimate.c). */
#include "cost/framework.h"

const StFramework st_framework_axonn = {
  .name = "axonn",
  .summary = "AxoNN on PyTorch 1.x eager: one flat gradient buffer all-reduced after the "
             "batch (16-bit under mixed precision), torch.optim looping over tensors",
  .version = "axonn-ai/axonn 8ebff5f (2022), PyTorch 1.x",
  .grad_bytes_mixed = 2,
  .overlap_grad_reduce = FALSE,
  .overlap_zero12 = FALSE,
  .bucket_bytes = 25 << 20, /* unused: no overlap means one bucket */
  .gradients_source =
    "axonn/axonn.py: _initialize_mixed_precision / _initialize_full_precision flatten the "
    "gradients into one buffer (_coalesce_and_reassign); run_batch ends in "
    "_allreduce_and_descale, comm_handle.allreduce(..., async_op=False) through NCCL, after "
    "every micro-batch's passes; init's fp16_allreduce=True reduces the 16-bit copy under "
    "mixed precision",
  .fused = ST_FUSE_NORM | ST_FUSE_SOFTMAX | ST_FUSE_DISPATCH,
  .attention = ST_ATTN_FLASH2, /* unused by GPT-3's transformer_block, unfused as Megatron's */
  .logits_fp32 = TRUE,
  .loss_autograd = TRUE,
  .nchw = TRUE,
  .kernels_source =
    "axonn/axonn.py: the user's torch.nn model run module by module (model.half() under "
    "mixed precision, no fusion of its own); its GPT (external/models/nvidia_transformer.py) "
    "is Megatron-LM's ParallelTransformer with masked_softmax_fusion=True and apex's "
    "FusedLayerNormAffineFunction, attention unfused; _calc_loss takes the criterion of the output cast "
    ".float(); no channels_last (examples/test_vgg16.py); the optimizer is torch.optim "
    "(examples/test_vgg16.py: AdamW), whose foreach option defaulted to False before "
    "PyTorch 2.0 (torch/optim/sgd.py, adamw.py of 1.13: 'if foreach is None: foreach = "
    "False'): one tensor after another",
  .clip_grad = FALSE,
  .zero_grads = TRUE,
  .step_source =
    "examples/test_vgg16.py calls optimizer.zero_grad() each batch (PyTorch 1.x writes zeros, "
    "set_to_none=False); under mixed precision _allreduce_and_descale zeroes the flat 16-bit "
    "buffer (model_grads_fp16.zero_())",
  .comm_contends = TRUE,
  .runtime = &st_runtime_pytorch,
};
