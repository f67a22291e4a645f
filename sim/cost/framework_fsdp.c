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
  .fp32_shards = TRUE,
  .gradients_source =
    "mosaicml/llm-foundry scripts/train/benchmarking/README.md: the tables' MP mode DEFAULT "
    "(Composer: bf16 parameters, fp32 gradient reduction; PURE, the 16-bit reduction, is "
    "--grad-reduce 16bit); FSDP FULL_SHARD wrapping each transformer block, limit_all_gathers, "
    "backward_prefetch BACKWARD_PRE; torch/distributed/fsdp MixedPrecision: the sharded flat "
    "parameters stay in full precision and param_dtype applies to the gathered ones",
  .fused = ST_FUSE_OPTIMIZER | ST_FUSE_LOSS | ST_FUSE_DISPATCH,
  .attention = ST_ATTN_TRITON,
  .logits_fp32 = FALSE,
  .loss_in_place = TRUE,
  .nchw = TRUE,
  .kernels_source =
    "llm-foundry at its benchmark tables (commits b2a43a147, 2023-10, and 5e85bd62d, 2024-01): "
    "scripts/train/yamls/pretrain/mpt-*.yaml attn_impl triton and submit_benchmarks.py "
    "--attn_impl default 'triton' (flash_attn_triton; later releases default to flash); "
    "LayerNorm and GELU MLP in eager PyTorch; llmfoundry/models/mpt/modeling_mpt.py: loss_fn "
    "fused_crossentropy by default (flash-attn's xentropy kernel: softmax, loss and gradient "
    "in one pass over the 16-bit logits)",
  .clip_grad = TRUE,
  .step_source = "llm-foundry train yamls: algorithms.gradient_clipping clipping_threshold 1.0",
  .comm_contends = TRUE,
  .runtime = &st_runtime_pytorch,
};
