/* framework_automodel.c: NVIDIA NeMo Automodel with FSDP2 and its
 * Transformer Engine + DeepEP backend, as its LLM benchmark recipes
 * (examples/llm_benchmark, its te_deepep YAML files) configure it. */
#include "cost/framework.h"

const StFramework st_framework_automodel = {
  .name = "automodel",
  .summary = "NeMo Automodel: a bf16 model (bf16 Adam states, no fp32 master) under FSDP2 with "
             "fp32 reduce-scatters, Transformer Engine attention, norms and RoPE, grouped-GEMM "
             "experts behind DeepEP, the loss on bf16 logits",
  .version = "NeMo Automodel 2025 (llm_benchmark recipes)",
  .grad_bytes_mixed = 4,
  .overlap_grad_reduce = TRUE,
  .overlap_zero12 = TRUE,
  .bucket_bytes = 0, /* FSDP2: each transformer block's gradients reduced as one group */
  .defer_grad_sync = TRUE,
  .states_16bit = TRUE,
  .gradients_source =
    "nemo_automodel/components/distributed/config.py and parallelizer.py: "
    "MixedPrecisionPolicy(param_dtype bfloat16, reduce_dtype float32), fully_shard per "
    "transformer block; _transformers/auto_model.py from_config: torch_dtype 'auto' selects "
    "torch.bfloat16, which the llm_benchmark recipes leave unset, with torch.optim.Adam, whose "
    "exp_avg and exp_avg_sq take the parameters' dtype (docs/guides/"
    "mixed-precision-training.mdx, 'Risky Pattern: torch AdamW with bf16 Model Storage'); "
    "FSDP2Config.defer_fsdp_grad_sync True (distributed/utils.py get_sync_ctx: "
    "set_requires_gradient_sync only on the optimizer step's micro-batch; "
    "moe/fsdp_mixin.py prepare_for_grad_accumulation), under which torch's "
    "FSDPParam.to_accumulated_grad_if_needed keeps each unsharded gradient in the reduce "
    "dtype",
  .dispatch_per_rank = TRUE,
  .fused = ST_FUSE_NORM | ST_FUSE_ROPE | ST_FUSE_OPTIMIZER | ST_FUSE_DISPATCH |
           ST_FUSE_GROUPED_EXPERTS,
  .attention = ST_ATTN_CUDNN,
  .logits_fp32 = FALSE,
  .loss_16bit = TRUE,
  .loss_autograd = TRUE,
  .nchw = TRUE,
  .kernels_source =
    "examples/llm_benchmark/qwen/qwen3_moe_30b_te_deepep.yaml (and the other *_te_deepep "
    "recipes): backend attn te (Transformer Engine's DotProductAttention: cuDNN fused "
    "attention on Hopper), linear te, rms_norm te, rope_fusion true, experts gmm "
    "(grouped_gemm.ops.gmm: one GEMM per projection for all of a rank's experts), dispatcher "
    "deepep (components/models/common/utils.py BackendConfig; DeepEP sends a token once per "
    "destination rank), loss MaskedCrossEntropy with fp32_upcast false; torch.optim.Adam "
    "(foreach: multi-tensor kernels); SwiGLU and residual adds as eager ops",
  .clip_grad = FALSE,
  .step_source = "nemo_automodel/recipes/llm/benchmark.py "
                 "(BenchmarkingRecipeForNextTokenPrediction, the llm_benchmark recipes' "
                 "recipe): opt.zero_grad() (set_to_none), the "
                 "micro-batches between prepare_for_grad_accumulation and "
                 "prepare_for_final_backward, then opt.step() with no gradient clipping "
                 "(docs/performance-summary.mdx: 'No gradient clipping applied')",
  .comm_contends = TRUE,
  .runtime = &st_runtime_pytorch,
};
