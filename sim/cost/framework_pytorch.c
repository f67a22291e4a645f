/* framework_pytorch.c: plain PyTorch in eager mode with DistributedDataParallel
 * and automatic mixed precision: the framework of CNN reference trainings
 * (torchvision's references, NVIDIA's DeepLearningExamples) and of most
 * research code; stagger's default for every strategy but megatron and zero. */
#include "cost/framework.h"

const StFramework st_framework_pytorch = {
  .name = "pytorch",
  .summary = "PyTorch eager with DistributedDataParallel and autocast: fp32 gradients reduced "
             "in 25 MiB buckets during backward, one kernel per elementwise op",
  .version = "PyTorch 2.x",
  .grad_bytes_mixed = 4,
  .overlap_grad_reduce = TRUE,
  .overlap_zero12 = TRUE,
  .bucket_bytes = 25 << 20,
  .gradients_source =
    "torch/nn/parallel/distributed.py: bucket_cap_mb=25, buckets all-reduced by autograd "
    "hooks as they fill during backward (Li et al., VLDB 2020); torch.autocast keeps the "
    "parameters, hence their gradients, in fp32",
  .fused = ST_FUSE_OPTIMIZER | ST_FUSE_DISPATCH,
  .attention = ST_ATTN_FLASH2,
  .logits_fp32 = TRUE,
  .loss_autograd = TRUE,
  .nchw = TRUE,
  .kernels_source =
    "eager: every elementwise op its own kernel, except the native layer_norm / batch_norm "
    "kernels and the fused/foreach optimizers (torch.optim.AdamW fused=True); "
    "scaled_dot_product_attention's flash backend is FlashAttention-2; autocast runs "
    "softmax and cross-entropy in fp32; tensors in the contiguous NCHW layout unless the "
    "script asks for channels_last, which cuDNN's tensor-core convolutions transpose to and "
    "from NHWC (NVIDIA, Convolutional Layers User's Guide: Tensor Layouts in Memory)",
  .clip_grad = FALSE,
  .step_source = "torch.nn.utils.clip_grad_norm_ is the script's choice; none by default",
  .comm_contends = TRUE,
  .runtime = &st_runtime_pytorch,
};
