/* table.c: the host kernel table (kernels.h): the references of every
 * family, in the order the struct lists them. Immutable, shared by all. */
#include "kernels/ref/ref.h"

static const StKernels HOST = {
  .name = "host",
  .alloc = st_ref_alloc,
  .free = st_ref_free,
  .copy = st_ref_copy,
  .memset0 = st_ref_memset0,
  .convert = st_ref_convert,
  .axpy = st_ref_axpy,
  .add = st_ref_add,
  .scale = st_ref_scale,
  .gemm = st_ref_gemm,
  .bias_add = st_ref_bias_add,
  .bias_grad = st_ref_bias_grad,
  .relu_fwd = st_ref_relu_fwd,
  .relu_bwd = st_ref_relu_bwd,
  .gelu_fwd = st_ref_gelu_fwd,
  .gelu_bwd = st_ref_gelu_bwd,
  .dropout_fwd = st_ref_dropout_fwd,
  .dropout_bwd = st_ref_dropout_bwd,
  .layernorm_fwd = st_ref_layernorm_fwd,
  .layernorm_bwd = st_ref_layernorm_bwd,
  .batchnorm_fwd = st_ref_batchnorm_fwd,
  .batchnorm_bwd = st_ref_batchnorm_bwd,
  .softmax_fwd = st_ref_softmax_fwd,
  .softmax_bwd = st_ref_softmax_bwd,
  .softmax_ce_fwd = st_ref_softmax_ce_fwd,
  .softmax_ce_bwd = st_ref_softmax_ce_bwd,
  .embedding_fwd = st_ref_embedding_fwd,
  .embedding_bwd = st_ref_embedding_bwd,
  .add_rows = st_ref_add_rows,
  .add_rows_bwd = st_ref_add_rows_bwd,
  .permute4 = st_ref_permute4,
  .im2col = st_ref_im2col,
  .col2im = st_ref_col2im,
  .maxpool_fwd = st_ref_maxpool_fwd,
  .maxpool_bwd = st_ref_maxpool_bwd,
  .avgpool_fwd = st_ref_avgpool_fwd,
  .avgpool_bwd = st_ref_avgpool_bwd,
  .adamw = st_ref_adamw,
  .sgd = st_ref_sgd,
  .compress = st_ref_compress,
  .expand = st_ref_expand,
  .bias_add_chw = st_ref_bias_add_chw,
  .bias_grad_chw = st_ref_bias_grad_chw,
  .adaptive_avgpool_fwd = st_ref_adaptive_avgpool_fwd,
  .adaptive_avgpool_bwd = st_ref_adaptive_avgpool_bwd,
};

const StKernels *
st_kernels_host(void)
{
  return &HOST;
}
