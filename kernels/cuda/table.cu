/* table.cu: the CUDA kernel table (kernels.h), in the order the struct lists
 * its entries. A new kernel: its .cu file in kernels/cuda/ (picked up by
 * name) and its row here. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.cuh"

static StKernels
make_table(void)
{
  StKernels k = {};
  k.name = "cuda";
  k.alloc = st_cu_alloc;
  k.free = st_cu_free;
  k.copy = st_cu_copy;
  k.memset0 = st_cu_memset0;
  k.convert = st_cu_convert;
  k.axpy = st_cu_axpy;
  k.add = st_cu_add;
  k.scale = st_cu_scale;
  k.gemm = st_cu_gemm;
  k.bias_add = st_cu_bias_add;
  k.bias_grad = st_cu_bias_grad;
  k.relu_fwd = st_cu_relu_fwd;
  k.relu_bwd = st_cu_relu_bwd;
  k.gelu_fwd = st_cu_gelu_fwd;
  k.gelu_bwd = st_cu_gelu_bwd;
  k.dropout_fwd = st_cu_dropout_fwd;
  k.dropout_bwd = st_cu_dropout_bwd;
  k.layernorm_fwd = st_cu_layernorm_fwd;
  k.layernorm_bwd = st_cu_layernorm_bwd;
  k.batchnorm_fwd = st_cu_batchnorm_fwd;
  k.batchnorm_bwd = st_cu_batchnorm_bwd;
  k.softmax_fwd = st_cu_softmax_fwd;
  k.softmax_bwd = st_cu_softmax_bwd;
  k.softmax_ce_fwd = st_cu_softmax_ce_fwd;
  k.softmax_ce_bwd = st_cu_softmax_ce_bwd;
  k.embedding_fwd = st_cu_embedding_fwd;
  k.embedding_bwd = st_cu_embedding_bwd;
  k.add_rows = st_cu_add_rows;
  k.add_rows_bwd = st_cu_add_rows_bwd;
  k.permute4 = st_cu_permute4;
  k.im2col = st_cu_im2col;
  k.col2im = st_cu_col2im;
  k.maxpool_fwd = st_cu_maxpool_fwd;
  k.maxpool_bwd = st_cu_maxpool_bwd;
  k.avgpool_fwd = st_cu_avgpool_fwd;
  k.avgpool_bwd = st_cu_avgpool_bwd;
  k.adamw = st_cu_adamw;
  k.sgd = st_cu_sgd;
  k.compress = st_cu_compress;
  k.expand = st_cu_expand;
  k.bias_add_chw = st_cu_bias_add_chw;
  k.bias_grad_chw = st_cu_bias_grad_chw;
  k.adaptive_avgpool_fwd = st_cu_adaptive_avgpool_fwd;
  k.adaptive_avgpool_bwd = st_cu_adaptive_avgpool_bwd;
  k.rmsnorm_fwd = st_cu_rmsnorm_fwd;
  k.rmsnorm_bwd = st_cu_rmsnorm_bwd;
  k.glu_fwd = st_cu_glu_fwd;
  k.glu_bwd = st_cu_glu_bwd;
  k.rope = st_cu_rope;
  k.flash_attn_fwd = st_cu_flash_attn_fwd;
  k.flash_attn_bwd = st_cu_flash_attn_bwd;
  k.ring_attn_fwd = st_cu_ring_attn_fwd;
  k.ring_attn_finish = st_cu_ring_attn_finish;
  k.ring_attn_bwd = st_cu_ring_attn_bwd;
  k.attn_heads = st_cu_attn_heads;
  k.attn_heads_bwd = st_cu_attn_heads_bwd;
  k.copy2d = st_cu_copy2d;
  k.moe_route_fwd = st_cu_moe_route_fwd;
  k.moe_route_bwd = st_cu_moe_route_bwd;
  k.moe_gather = st_cu_moe_gather;
  k.moe_scatter = st_cu_moe_scatter;
  k.moe_gather_grad = st_cu_moe_gather_grad;
  k.maximum = st_cu_maximum;
  k.ce_split_fwd = st_cu_ce_split_fwd;
  k.ce_split_rescale = st_cu_ce_split_rescale;
  k.ce_split_loss = st_cu_ce_split_loss;
  k.ce_split_bwd = st_cu_ce_split_bwd;
  return k;
}

/* Built once, before main (a constant initializer in effect; never written after). */
static const StKernels CUDA_TABLE = make_table();

extern "C" const StKernels *
st_kernels_cuda(void)
{
  return &CUDA_TABLE;
}
