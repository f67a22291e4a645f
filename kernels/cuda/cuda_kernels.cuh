/* cuda_kernels.cuh: the CUDA kernel table's functions, one file per family
 * (kernels/cuda/), gathered into st_kernels_cuda() by table.cu. Each
 * mirrors its host reference (kernels/ref/, same name with st_ref_): the
 * same argument checks (ST_K_EINVAL before anything is enqueued), the same
 * formulas (kernels/ref/kmath.h), fp32 arithmetic on loads from `dt`. Work
 * is enqueued on `stream` (a cudaStream_t, NULL for the legacy default
 * stream); the return value is 0, ST_K_EINVAL, a cudaError_t or a
 * cublasStatus_t. Private to kernels/cuda/.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* memory.cu */
int st_cu_alloc(void **ptr, size_t bytes);
int st_cu_free(void *ptr);
int st_cu_copy(void *stream, void *dst, const void *src, size_t bytes, int kind);
int st_cu_memset0(void *stream, void *ptr, size_t bytes);

/* elementwise.cu */
int st_cu_convert(void *stream, void *dst, StKDtype dst_dt, const void *src, StKDtype src_dt,
                  size_t n);
int st_cu_axpy(void *stream, void *y, StKDtype ydt, float alpha, const void *x, StKDtype xdt,
               size_t n);
int st_cu_add(void *stream, void *out, const void *a, const void *b, StKDtype dt, size_t n);
int st_cu_scale(void *stream, void *x, StKDtype dt, float alpha, size_t n);

/* gemm.cu */
int st_cu_gemm(void *stream, int ta, int tb, int m, int n, int k, float alpha, const void *a,
               const void *b, float beta, void *c, StKDtype dt, int batch, int64_t stride_a,
               int64_t stride_b, int64_t stride_c);
int st_cu_bias_add(void *stream, void *out, const void *bias, int rows, int cols, StKDtype dt);
int st_cu_bias_grad(void *stream, void *dbias, const void *dout, int rows, int cols,
                    StKDtype dt);
int st_cu_bias_add_chw(void *stream, void *out, const void *bias, int n, int c, int hw,
                       StKDtype dt);
int st_cu_bias_grad_chw(void *stream, void *dbias, const void *dout, int n, int c, int hw,
                        StKDtype dt);

/* activations.cu */
int st_cu_relu_fwd(void *stream, void *out, const void *in, StKDtype dt, size_t n);
int st_cu_relu_bwd(void *stream, void *din, const void *dout, const void *out, StKDtype dt,
                   size_t n);
int st_cu_gelu_fwd(void *stream, void *out, const void *in, StKDtype dt, size_t n);
int st_cu_gelu_bwd(void *stream, void *din, const void *dout, const void *in, StKDtype dt,
                   size_t n);
int st_cu_dropout_fwd(void *stream, void *out, uint8_t *mask, const void *in, float p,
                      uint64_t seed, StKDtype dt, size_t n);
int st_cu_dropout_bwd(void *stream, void *din, const void *dout, const uint8_t *mask, float p,
                      StKDtype dt, size_t n);

/* normalization.cu */
int st_cu_layernorm_fwd(void *stream, void *out, float *mean, float *rstd, const void *in,
                        const void *gamma, const void *beta, int rows, int cols, StKDtype dt);
int st_cu_layernorm_bwd(void *stream, void *din, void *dgamma, void *dbeta, const void *dout,
                        const void *in, const float *mean, const float *rstd,
                        const void *gamma, int rows, int cols, StKDtype dt);
int st_cu_batchnorm_fwd(void *stream, void *out, float *mean, float *rstd, const void *in,
                        const void *gamma, const void *beta, int n, int c, int hw,
                        StKDtype dt);
int st_cu_batchnorm_bwd(void *stream, void *din, void *dgamma, void *dbeta, const void *dout,
                        const void *in, const float *mean, const float *rstd,
                        const void *gamma, int n, int c, int hw, StKDtype dt);

/* softmax.cu */
int st_cu_softmax_fwd(void *stream, void *out, const void *in, float scale, int causal,
                      int rows, int cols, StKDtype dt);
int st_cu_softmax_bwd(void *stream, void *din, const void *dout, const void *out, float scale,
                      int rows, int cols, StKDtype dt);
int st_cu_softmax_ce_fwd(void *stream, float *loss_sum, float *probs, const void *logits,
                         const int32_t *targets, int rows, int classes, StKDtype dt);
int st_cu_softmax_ce_bwd(void *stream, void *dlogits, const float *probs,
                         const int32_t *targets, float scale, int rows, int classes,
                         StKDtype dt);

/* embeddings.cu */
int st_cu_embedding_fwd(void *stream, void *out, const void *table, const int32_t *ids, int n,
                        int dim, StKDtype dt);
int st_cu_embedding_bwd(void *stream, void *dtable, const void *dout, const int32_t *ids,
                        int n, int dim, StKDtype dt);
int st_cu_add_rows(void *stream, void *out, const void *pos, int batch, int rows, int cols,
                   StKDtype dt);
int st_cu_add_rows_bwd(void *stream, void *dpos, const void *dout, int batch, int rows,
                       int cols, StKDtype dt);

/* reshape.cu */
int st_cu_permute4(void *stream, void *out, const void *in, const int d[4], const int perm[4],
                   StKDtype dt);

/* conv.c: convolution and pooling */
int st_cu_im2col(void *stream, void *cols, const void *in, int c, int h, int w, int k, int s,
                 int p, StKDtype dt);
int st_cu_col2im(void *stream, void *din, const void *cols, int c, int h, int w, int k, int s,
                 int p, StKDtype dt);

int st_cu_maxpool_fwd(void *stream, void *out, int32_t *argmax, const void *in, int nc, int h,
                      int w, int k, int s, int p, StKDtype dt);
int st_cu_maxpool_bwd(void *stream, void *din, const void *dout, const int32_t *argmax, int nc,
                      int h, int w, int k, int s, int p, StKDtype dt);
int st_cu_avgpool_fwd(void *stream, void *out, const void *in, int nc, int h, int w, int k,
                      int s, int p, StKDtype dt);
int st_cu_avgpool_bwd(void *stream, void *din, const void *dout, int nc, int h, int w, int k,
                      int s, int p, StKDtype dt);
int st_cu_adaptive_avgpool_fwd(void *stream, void *out, const void *in, int nc, int h, int w,
                               int oh, int ow, StKDtype dt);
int st_cu_adaptive_avgpool_bwd(void *stream, void *din, const void *dout, int nc, int h, int w,
                               int oh, int ow, StKDtype dt);

/* optimizers.cu */
int st_cu_adamw(void *stream, float *master, float *m, float *v, const void *grad,
                StKDtype gdt, void *param, StKDtype pdt, size_t n, float lr, float beta1,
                float beta2, float eps, float weight_decay, int t, float grad_scale);
int st_cu_sgd(void *stream, float *master, float *momentum, const void *grad, StKDtype gdt,
              void *param, StKDtype pdt, size_t n, float lr, float mu, float weight_decay,
              float grad_scale);

/* sparse.cu */
int st_cu_compress(void *stream, void *values, StKDtype vdt, const void *dense, StKDtype ddt,
                   const int32_t *index, size_t n);
int st_cu_expand(void *stream, void *dense, StKDtype ddt, const void *values, StKDtype vdt,
                 const int32_t *index, size_t n);
