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
                            int dim, int first, int rows, StKDtype dt);
int st_cu_embedding_bwd(void *stream, void *dtable, const void *dout, const int32_t *ids,
                            int n, int dim, int first, int rows, StKDtype dt);
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

/* llm.cu */
int st_cu_rmsnorm_fwd(void *stream, void *out, float *rstd, const void *in, const void *gamma,
                      int rows, int cols, StKDtype dt);
int st_cu_rmsnorm_bwd(void *stream, void *din, void *dgamma, const void *dout, const void *in,
                      const float *rstd, const void *gamma, int rows, int cols, StKDtype dt);
int st_cu_glu_fwd(void *stream, void *h, const void *gu, int rows, int f, int act, StKDtype dt);
int st_cu_glu_bwd(void *stream, void *dgu, const void *dh, const void *gu, int rows, int f,
                  int act, StKDtype dt);
int st_cu_rope(void *stream, void *x, int batch, int tokens, int heads, int ld, int head_dim,
               int rot_dim, float theta, int inverse, StKDtype dt);
int st_cu_copy2d(void *stream, void *dst, int ld_dst, const void *src, int ld_src, int rows,
                 int cols, StKDtype dt);

/* attention.cu */
int st_cu_flash_attn_fwd(void *stream, void *o, float *lse, const void *qkv, int batch,
                         int tokens, int heads, int kv_heads, int head_dim, float scale,
                         int causal, int window, StKDtype dt);
int st_cu_flash_attn_bwd(void *stream, void *dqkv, const void *dout, const void *qkv,
                         const void *o, const float *lse, float *rowdot, int batch, int tokens,
                         int heads, int kv_heads, int head_dim, float scale, int causal,
                         int window, StKDtype dt);
int st_cu_attn_heads(void *stream, void *qh, void *kh, void *vh, const void *qkv, int batch,
                     int tokens, int heads, int kv_heads, int head_dim, StKDtype dt);
int st_cu_attn_heads_bwd(void *stream, void *dqkv, const void *dqh, const void *dkh,
                         const void *dvh, int batch, int tokens, int heads, int kv_heads,
                         int head_dim, StKDtype dt);

/* ring_attention.cu */
int st_cu_ring_attn_fwd(void *stream, float *o, float *m, float *l, const void *q, int ld_q,
                        const void *kv, int batch, int tokens, int heads, int kv_heads,
                        int head_dim, float scale, int causal, int window, int c, int rank,
                        int kv_rank, StKDtype dt);
int st_cu_ring_attn_finish(void *stream, void *y, float *lse, const float *o, const float *m,
                           const float *l, int batch, int tokens, int heads, int head_dim,
                           StKDtype dt);
int st_cu_ring_attn_bwd(void *stream, void *dq, int ld_dq, void *dkv, int ld_dkv,
                        const void *dy, const void *y, const float *lse, const void *q, int ld_q,
                        const void *kv, int batch, int tokens, int heads, int kv_heads,
                        int head_dim, float scale, int causal, int window, int c, int rank,
                        int kv_rank, StKDtype dt);

/* moe.cu */
int st_cu_moe_route_fwd(void *stream, void *gates, int ld, float *probs, int32_t *sel,
                        const void *logits, int batch, int tokens, int experts, int top_k,
                        int capacity, int norm_topk, StKDtype dt);
int st_cu_moe_route_bwd(void *stream, void *dlogits, const void *dgates, int ld,
                        const float *probs, const int32_t *sel, int rows, int experts,
                        int top_k, int norm_topk, StKDtype dt);
int st_cu_moe_gather(void *stream, void *x, int32_t *idx, float *gate, const void *src, int ld,
                     int x_col, int gate_col, int batch, int tokens, int capacity, int d,
                     StKDtype dt);
int st_cu_moe_scatter(void *stream, void *dst, int ld, int col, const void *y,
                      const int32_t *idx, const float *gate, int batch, int tokens,
                      int capacity, int d, StKDtype dt);
int st_cu_moe_gather_grad(void *stream, void *dy, void *dgates, int ld_gates, int gate_col,
                          const void *dsum, int ld_sum, const void *y, const int32_t *idx,
                          const float *gate, int batch, int tokens, int capacity, int d,
                          StKDtype dt);

/* split.cu: tensor parallelism's kernels */
int st_cu_maximum(void *stream, void *y, const void *x, StKDtype dt, size_t n);
int st_cu_ce_split_fwd(void *stream, float *exps, float *stats, const void *logits,
                       const int32_t *targets, int first, int rows, int classes, int valid,
                       StKDtype dt);
int st_cu_ce_split_rescale(void *stream, float *stats, int rows);
int st_cu_ce_split_loss(void *stream, float *loss_sum, const float *stats,
                        const int32_t *targets, int rows);
int st_cu_ce_split_bwd(void *stream, void *dlogits, const float *exps, const float *stats,
                       const int32_t *targets, int first, float scale, int rows, int classes,
                       StKDtype dt);
