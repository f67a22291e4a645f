/* ref.h: the host reference kernels, one file per family (kernels/ref/),
 * gathered into st_kernels_host() by table.c. Private to kernels/ref/.
 *
 * Each function is the plain-C meaning of its kernels.h entry: loops in
 * fp32 over elements loaded from and stored to `dt` (bf16 rounds to nearest
 * even on every store). `stream` is ignored: the work is done on return.
 * Arguments are checked (negative sizes, NULL where data is needed) and
 * answered with ST_K_EINVAL; zero-sized work is a no-op that accepts NULL.
 */
#ifndef STAGGER_KERNELS_REF_H
#define STAGGER_KERNELS_REF_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* Element i of a tensor stored in dt, as fp32. */
static inline float
st_ref_ld(const void *p, StKDtype dt, size_t i)
{
  return dt == ST_KDT_BF16 ? st_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline void
st_ref_st(void *p, StKDtype dt, size_t i, float v)
{
  if (dt == ST_KDT_BF16)
    ((uint16_t *)p)[i] = st_f32_to_bf16(v);
  else
    ((float *)p)[i] = v;
}

/* The dot product of k elements of x from xo and of y from yo, in fp32. */
static inline float
st_ref_dot(const void *x, size_t xo, const void *y, size_t yo, int k, StKDtype dt)
{
  float s = 0.0f;
  for (int c = 0; c < k; c++)
    s += st_ref_ld(x, dt, xo + c) * st_ref_ld(y, dt, yo + c);
  return s;
}

static inline int
st_ref_dt_ok(StKDtype dt)
{
  return dt == ST_KDT_F32 || dt == ST_KDT_BF16;
}

/* memory.c */
int st_ref_alloc(void **ptr, size_t bytes);
int st_ref_free(void *ptr);
int st_ref_copy(void *stream, void *dst, const void *src, size_t bytes, int kind);
int st_ref_memset0(void *stream, void *ptr, size_t bytes);

/* elementwise.c */
int st_ref_convert(void *stream, void *dst, StKDtype dst_dt, const void *src, StKDtype src_dt,
                   size_t n);
int st_ref_axpy(void *stream, void *y, StKDtype ydt, float alpha, const void *x, StKDtype xdt,
                size_t n);
int st_ref_add(void *stream, void *out, const void *a, const void *b, StKDtype dt, size_t n);
int st_ref_scale(void *stream, void *x, StKDtype dt, float alpha, size_t n);

/* gemm.c */
int st_ref_gemm(void *stream, int ta, int tb, int m, int n, int k, float alpha, const void *a,
                const void *b, float beta, void *c, StKDtype dt, int batch, int64_t stride_a,
                int64_t stride_b, int64_t stride_c);
int st_ref_bias_add(void *stream, void *out, const void *bias, int rows, int cols, StKDtype dt);
int st_ref_bias_grad(void *stream, void *dbias, const void *dout, int rows, int cols,
                     StKDtype dt);
int st_ref_bias_add_chw(void *stream, void *out, const void *bias, int n, int c, int hw,
                        StKDtype dt);
int st_ref_bias_grad_chw(void *stream, void *dbias, const void *dout, int n, int c, int hw,
                         StKDtype dt);

/* activations.c */
int st_ref_relu_fwd(void *stream, void *out, const void *in, StKDtype dt, size_t n);
int st_ref_relu_bwd(void *stream, void *din, const void *dout, const void *out, StKDtype dt,
                    size_t n);
int st_ref_gelu_fwd(void *stream, void *out, const void *in, StKDtype dt, size_t n);
int st_ref_gelu_bwd(void *stream, void *din, const void *dout, const void *in, StKDtype dt,
                    size_t n);
int st_ref_dropout_fwd(void *stream, void *out, uint8_t *mask, const void *in, float p,
                       uint64_t seed, StKDtype dt, size_t n);
int st_ref_dropout_bwd(void *stream, void *din, const void *dout, const uint8_t *mask, float p,
                       StKDtype dt, size_t n);

/* normalization.c */
int st_ref_layernorm_fwd(void *stream, void *out, float *mean, float *rstd, const void *in,
                         const void *gamma, const void *beta, int rows, int cols, StKDtype dt);
int st_ref_layernorm_bwd(void *stream, void *din, void *dgamma, void *dbeta, const void *dout,
                         const void *in, const float *mean, const float *rstd,
                         const void *gamma, int rows, int cols, StKDtype dt);
int st_ref_batchnorm_fwd(void *stream, void *out, float *mean, float *rstd, const void *in,
                         const void *gamma, const void *beta, int n, int c, int hw,
                         StKDtype dt);
int st_ref_batchnorm_bwd(void *stream, void *din, void *dgamma, void *dbeta, const void *dout,
                         const void *in, const float *mean, const float *rstd,
                         const void *gamma, int n, int c, int hw, StKDtype dt);

/* softmax.c */
int st_ref_softmax_fwd(void *stream, void *out, const void *in, float scale, int causal,
                       int rows, int cols, StKDtype dt);
int st_ref_softmax_bwd(void *stream, void *din, const void *dout, const void *out, float scale,
                       int rows, int cols, StKDtype dt);
int st_ref_softmax_ce_fwd(void *stream, float *loss_sum, float *probs, const void *logits,
                          const int32_t *targets, int rows, int classes, StKDtype dt);
int st_ref_softmax_ce_bwd(void *stream, void *dlogits, const float *probs,
                          const int32_t *targets, float scale, int rows, int classes,
                          StKDtype dt);

/* embeddings.c */
int st_ref_embedding_fwd(void *stream, void *out, const void *table, const int32_t *ids, int n,
                             int dim, int first, int rows, StKDtype dt);
int st_ref_embedding_bwd(void *stream, void *dtable, const void *dout, const int32_t *ids,
                             int n, int dim, int first, int rows, StKDtype dt);
int st_ref_add_rows(void *stream, void *out, const void *pos, int batch, int rows, int cols,
                    StKDtype dt);
int st_ref_add_rows_bwd(void *stream, void *dpos, const void *dout, int batch, int rows,
                        int cols, StKDtype dt);

/* reshape.c */
int st_ref_permute4(void *stream, void *out, const void *in, const int d[4], const int perm[4],
                    StKDtype dt);

/* conv.c: convolution and pooling */
int st_ref_im2col(void *stream, void *cols, const void *in, int c, int h, int w, int k, int s,
                  int p, StKDtype dt);
int st_ref_col2im(void *stream, void *din, const void *cols, int c, int h, int w, int k, int s,
                  int p, StKDtype dt);

int st_ref_maxpool_fwd(void *stream, void *out, int32_t *argmax, const void *in, int nc, int h,
                       int w, int k, int s, int p, StKDtype dt);
int st_ref_maxpool_bwd(void *stream, void *din, const void *dout, const int32_t *argmax, int nc,
                       int h, int w, int k, int s, int p, StKDtype dt);
int st_ref_avgpool_fwd(void *stream, void *out, const void *in, int nc, int h, int w, int k,
                       int s, int p, StKDtype dt);
int st_ref_avgpool_bwd(void *stream, void *din, const void *dout, int nc, int h, int w, int k,
                       int s, int p, StKDtype dt);
int st_ref_adaptive_avgpool_fwd(void *stream, void *out, const void *in, int nc, int h, int w,
                                int oh, int ow, StKDtype dt);
int st_ref_adaptive_avgpool_bwd(void *stream, void *din, const void *dout, int nc, int h, int w,
                                int oh, int ow, StKDtype dt);

/* optimizers.c */
int st_ref_adamw(void *stream, float *master, float *m, float *v, const void *grad,
                 StKDtype gdt, void *param, StKDtype pdt, size_t n, float lr, float beta1,
                 float beta2, float eps, float weight_decay, int t, float grad_scale);
int st_ref_sgd(void *stream, float *master, float *momentum, const void *grad, StKDtype gdt,
               void *param, StKDtype pdt, size_t n, float lr, float mu, float weight_decay,
               float grad_scale);

/* sparse.c */
int st_ref_compress(void *stream, void *values, StKDtype vdt, const void *dense, StKDtype ddt,
                    const int32_t *index, size_t n);
int st_ref_expand(void *stream, void *dense, StKDtype ddt, const void *values, StKDtype vdt,
                  const int32_t *index, size_t n);

/* llm.c: RMSNorm, gated linear units, RoPE, strided copies */
int st_ref_rmsnorm_fwd(void *stream, void *out, float *rstd, const void *in, const void *gamma,
                       int rows, int cols, StKDtype dt);
int st_ref_rmsnorm_bwd(void *stream, void *din, void *dgamma, const void *dout, const void *in,
                       const float *rstd, const void *gamma, int rows, int cols, StKDtype dt);
int st_ref_glu_fwd(void *stream, void *h, const void *gu, int rows, int f, int act, StKDtype dt);
int st_ref_glu_bwd(void *stream, void *dgu, const void *dh, const void *gu, int rows, int f,
                   int act, StKDtype dt);
int st_ref_rope(void *stream, void *x, int batch, int tokens, int heads, int ld, int head_dim,
                int rot_dim, float theta, int inverse, StKDtype dt);
int st_ref_copy2d(void *stream, void *dst, int ld_dst, const void *src, int ld_src, int rows,
                  int cols, StKDtype dt);

/* attention.c: flash-style attention, heads split for the dense path */
int st_ref_ring_attn_fwd(void *stream, float *o, float *m, float *l, const void *q, int ld_q,
                        const void *kv, int batch, int tokens, int heads, int kv_heads,
                        int head_dim, float scale, int causal, int window, int c, int rank,
                        int kv_rank, StKDtype dt);
int st_ref_ring_attn_finish(void *stream, void *y, float *lse, const float *o, const float *m,
                           const float *l, int batch, int tokens, int heads, int head_dim,
                           StKDtype dt);
int st_ref_ring_attn_bwd(void *stream, void *dq, int ld_dq, void *dkv, int ld_dkv,
                        const void *dy, const void *y, const float *lse, const void *q, int ld_q,
                        const void *kv, int batch, int tokens, int heads, int kv_heads,
                        int head_dim, float scale, int causal, int window, int c, int rank,
                        int kv_rank, StKDtype dt);
int st_ref_flash_attn_fwd(void *stream, void *o, float *lse, const void *qkv, int batch,
                          int tokens, int heads, int kv_heads, int head_dim, float scale,
                          int causal, int window, StKDtype dt);
int st_ref_flash_attn_bwd(void *stream, void *dqkv, const void *dout, const void *qkv,
                          const void *o, const float *lse, float *rowdot, int batch, int tokens,
                          int heads, int kv_heads, int head_dim, float scale, int causal,
                          int window, StKDtype dt);
int st_ref_attn_heads(void *stream, void *qh, void *kh, void *vh, const void *qkv, int batch,
                      int tokens, int heads, int kv_heads, int head_dim, StKDtype dt);
int st_ref_attn_heads_bwd(void *stream, void *dqkv, const void *dqh, const void *dkh,
                          const void *dvh, int batch, int tokens, int heads, int kv_heads,
                          int head_dim, StKDtype dt);

/* moe.c: routing, an expert's gather and scatter */
int st_ref_moe_route_fwd(void *stream, void *gates, int ld, float *probs, int32_t *sel,
                         const void *logits, int batch, int tokens, int experts, int top_k,
                         int capacity, int norm_topk, StKDtype dt);
int st_ref_moe_route_bwd(void *stream, void *dlogits, const void *dgates, int ld,
                         const float *probs, const int32_t *sel, int rows, int experts,
                         int top_k, int norm_topk, StKDtype dt);
int st_ref_moe_gather(void *stream, void *x, int32_t *idx, float *gate, const void *src, int ld,
                      int x_col, int gate_col, int batch, int tokens, int capacity, int d,
                      StKDtype dt);
int st_ref_moe_scatter(void *stream, void *dst, int ld, int col, const void *y,
                       const int32_t *idx, const float *gate, int batch, int tokens,
                       int capacity, int d, StKDtype dt);
int st_ref_moe_gather_grad(void *stream, void *dy, void *dgates, int ld_gates, int gate_col,
                           const void *dsum, int ld_sum, const void *y, const int32_t *idx,
                           const float *gate, int batch, int tokens, int capacity, int d,
                           StKDtype dt);

/* split.c: tensor parallelism's kernels */
int st_ref_maximum(void *stream, void *y, const void *x, StKDtype dt, size_t n);
int st_ref_ce_split_fwd(void *stream, float *exps, float *stats, const void *logits,
                        const int32_t *targets, int first, int rows, int classes, int valid,
                        StKDtype dt);
int st_ref_ce_split_rescale(void *stream, float *stats, int rows);
int st_ref_ce_split_loss(void *stream, float *loss_sum, const float *stats,
                         const int32_t *targets, int rows);
int st_ref_ce_split_bwd(void *stream, void *dlogits, const float *exps, const float *stats,
                        const int32_t *targets, int first, float scale, int rows, int classes,
                        StKDtype dt);

#endif /* STAGGER_KERNELS_REF_H */
