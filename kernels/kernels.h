/* kernels.h: the math the executor's layers are made of, behind one table per
 * device: "host" (plain C references, kernels/ref/) and "cuda" (kernels/cuda/,
 * cuBLAS for matrix products). Layers (exec/layers/) are written once against
 * this table and run on either device.
 *
 * Plain C, no GLib (the .cu files include it). Every function enqueues its work
 * on `stream` (a cudaStream_t on CUDA; NULL on the host, where it runs at once)
 * and returns 0, or an error code (a cudaError_t / cublasStatus_t on CUDA,
 * ST_K_EINVAL for bad arguments): never aborts. Pointers are device pointers.
 *
 * Storage types: activations, weights and their gradients are stored in `dt`
 * (fp32, or bf16 under mixed precision); arithmetic is fp32, and optimizer
 * states and master weights are fp32. Shapes are row-major; a batch of samples
 * is the leading dimension. Backward kernels ACCUMULATE into weight gradients
 * (+=) and WRITE input gradients (=), unless stated. Element-wise kernels
 * (convert aside) and the row softmax (forward and backward) may run in
 * place: out == in.
 *
 * Every kernel has a CPU reference (kernels/ref/, tests/test_kernels.c);
 * CUDA versions are tested against it (tests/test_gpu_kernels.c, label gpu)
 * with a stated tolerance.
 */
#ifndef STAGGER_KERNELS_H
#define STAGGER_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  ST_KDT_F32 = 0,
  ST_KDT_BF16 = 1,
} StKDtype;

#define ST_K_EINVAL (-22)
/* Limits of the LLM kernels on every table (the CUDA ones keep a row's
 * share in registers): flash attention's head_dim, MoE routing's top_k. */
#define ST_K_MAX_HEAD_DIM 256
#define ST_K_MAX_TOP_K 16
/* The host table could not allocate (alloc, or a kernel's own temporary). */
#define ST_K_ENOMEM (-12)

static inline size_t
st_kdt_size(StKDtype dt)
{
  return dt == ST_KDT_BF16 ? 2 : 4;
}

typedef struct StKernels {
  const char *name; /* "host", "cuda" */

  /* ---- memory (the executor's pool calls these; layers do not) ---- */
  int (*alloc)(void **ptr, size_t bytes);
  int (*free)(void *ptr);
  /* kind: 0 device to device, 1 host to device, 2 device to host; a copy to
   * the host has landed when the call returns (the table has no sync). */
  int (*copy)(void *stream, void *dst, const void *src, size_t bytes, int kind);
  int (*memset0)(void *stream, void *ptr, size_t bytes);

  /* ---- elementwise ------------------------------------------------------ */
  /* dst[i] = (dst_dt) src[i] */
  int (*convert)(void *stream, void *dst, StKDtype dst_dt, const void *src, StKDtype src_dt,
                 size_t n);
  /* y[i] += alpha * x[i]: gradient accumulation, the local comm backend's reductions */
  int (*axpy)(void *stream, void *y, StKDtype ydt, float alpha, const void *x, StKDtype xdt,
              size_t n);
  /* out[i] = a[i] + b[i]; out may alias a or b (residual connections) */
  int (*add)(void *stream, void *out, const void *a, const void *b, StKDtype dt, size_t n);
  /* x[i] *= alpha */
  int (*scale)(void *stream, void *x, StKDtype dt, float alpha, size_t n);

  /* ---- matrix products --------------------------------------------------- */
  /* For each of `batch` problems (strides in elements, 0 for a shared operand):
   * C[m,n] = alpha * op(A) op(B) + beta * C, op(X) = X or X^T by ta / tb; A is
   * m x k after op, B k x n after op; row-major, all in `dt`, fp32 accumulate.
   * With beta == 0, C is not read (it may hold garbage). */
  int (*gemm)(void *stream, int ta, int tb, int m, int n, int k, float alpha, const void *a,
              const void *b, float beta, void *c, StKDtype dt, int batch, int64_t stride_a,
              int64_t stride_b, int64_t stride_c);
  /* out[r, c] += bias[c] over rows x cols */
  int (*bias_add)(void *stream, void *out, const void *bias, int rows, int cols, StKDtype dt);
  /* dbias[c] += sum over rows of dout[r, c] */
  int (*bias_grad)(void *stream, void *dbias, const void *dout, int rows, int cols, StKDtype dt);

  /* ---- activations ------------------------------------------------------- */
  int (*relu_fwd)(void *stream, void *out, const void *in, StKDtype dt, size_t n);
  /* din = dout * (out > 0); `out` is the forward's output */
  int (*relu_bwd)(void *stream, void *din, const void *dout, const void *out, StKDtype dt,
                  size_t n);
  /* GELU, tanh approximation */
  int (*gelu_fwd)(void *stream, void *out, const void *in, StKDtype dt, size_t n);
  int (*gelu_bwd)(void *stream, void *din, const void *dout, const void *in, StKDtype dt,
                  size_t n);
  /* Dropout with probability p, mask from (seed, index): out = in * mask / (1 - p);
   * mask[i] 0 or 1 (uint8), saved for backward. */
  int (*dropout_fwd)(void *stream, void *out, uint8_t *mask, const void *in, float p,
                     uint64_t seed, StKDtype dt, size_t n);
  int (*dropout_bwd)(void *stream, void *din, const void *dout, const uint8_t *mask, float p,
                     StKDtype dt, size_t n);

  /* ---- normalization ----------------------------------------------------- */
  /* Over the last dimension of rows x cols; mean, rstd fp32 [rows] saved.
   * Both norms: eps 1e-5 under the square root, biased variance; gamma /
   * beta NULL mean 1 / 0 (affine off), and din / dgamma / dbeta NULL skip
   * them. */
  int (*layernorm_fwd)(void *stream, void *out, float *mean, float *rstd, const void *in,
                       const void *gamma, const void *beta, int rows, int cols, StKDtype dt);
  int (*layernorm_bwd)(void *stream, void *din, void *dgamma, void *dbeta, const void *dout,
                       const void *in, const float *mean, const float *rstd, const void *gamma,
                       int rows, int cols, StKDtype dt);
  /* Training-mode batch norm over N x C x HW: statistics per channel, fp32
   * mean, rstd [C] saved. */
  int (*batchnorm_fwd)(void *stream, void *out, float *mean, float *rstd, const void *in,
                       const void *gamma, const void *beta, int n, int c, int hw, StKDtype dt);
  int (*batchnorm_bwd)(void *stream, void *din, void *dgamma, void *dbeta, const void *dout,
                       const void *in, const float *mean, const float *rstd, const void *gamma,
                       int n, int c, int hw, StKDtype dt);

  /* ---- softmax and loss -------------------------------------------------- */
  /* Row softmax of rows x cols times `scale`; with `causal`, row r of each
   * block of `cols` rows sees columns 0..(r mod cols) only (attention). */
  int (*softmax_fwd)(void *stream, void *out, const void *in, float scale, int causal, int rows,
                     int cols, StKDtype dt);
  /* din = scale * out * (dout - sum(dout * out)) per row */
  int (*softmax_bwd)(void *stream, void *din, const void *dout, const void *out, float scale,
                     int rows, int cols, StKDtype dt);
  /* Cross-entropy of logits [rows, classes] with targets [rows]; probs saved
   * (fp32 [rows, classes]); loss_sum (device fp32 scalar) += sum of the rows' losses.
   * A target outside [0, classes) ignores its row (no loss, zero gradient),
   * as PyTorch's ignore_index. */
  int (*softmax_ce_fwd)(void *stream, float *loss_sum, float *probs, const void *logits,
                        const int32_t *targets, int rows, int classes, StKDtype dt);
  /* dlogits = (probs - onehot(target)) * scale */
  int (*softmax_ce_bwd)(void *stream, void *dlogits, const float *probs, const int32_t *targets,
                        float scale, int rows, int classes, StKDtype dt);

  /* ---- embeddings -------------------------------------------------------- */
  /* The table holds the `rows` vocabulary ids [first, first + rows) (a
   * tensor-parallel rank's slice; the whole vocabulary: 0, vocab):
   * out[i, :] = table[ids[i] - first, :] for n ids of `dim`; an id outside
   * the slice gives a row of zeros */
  int (*embedding_fwd)(void *stream, void *out, const void *table, const int32_t *ids, int n,
                       int dim, int first, int rows, StKDtype dt);
  /* dtable[ids[i] - first, :] += dout[i, :] for the ids inside the slice */
  int (*embedding_bwd)(void *stream, void *dtable, const void *dout, const int32_t *ids, int n,
                       int dim, int first, int rows, StKDtype dt);
  /* out[b, t, d] += pos[t, d] for b < batch */
  int (*add_rows)(void *stream, void *out, const void *pos, int batch, int rows, int cols,
                  StKDtype dt);
  /* dpos[t, d] += sum over b of dout[b, t, d] */
  int (*add_rows_bwd)(void *stream, void *dpos, const void *dout, int batch, int rows, int cols,
                      StKDtype dt);

  /* ---- reshaping --------------------------------------------------------- */
  /* A 4-D permutation: in has dims d[0..3] (row-major); out[.. perm ..] where
   * out's dimension i is in's dimension perm[i]. */
  int (*permute4)(void *stream, void *out, const void *in, const int d[4], const int perm[4],
                  StKDtype dt);

  /* ---- convolution and pooling (NCHW) -------------------------------------- */
  /* cols [C*k*k, Ho*Wo] from one image in [C, H, W], stride s, padding p */
  int (*im2col)(void *stream, void *cols, const void *in, int c, int h, int w, int k, int s,
                int p, StKDtype dt);
  /* din [C, H, W] += the columns scattered back */
  int (*col2im)(void *stream, void *din, const void *cols, int c, int h, int w, int k, int s,
                int p, StKDtype dt);
  /* Max pooling over n*c planes of h x w; argmax (int32, saved) */
  int (*maxpool_fwd)(void *stream, void *out, int32_t *argmax, const void *in, int nc, int h,
                     int w, int k, int s, int p, StKDtype dt);
  int (*maxpool_bwd)(void *stream, void *din, const void *dout, const int32_t *argmax, int nc,
                     int h, int w, int k, int s, int p, StKDtype dt);
  /* Average pooling (count_include_pad = true) */
  int (*avgpool_fwd)(void *stream, void *out, const void *in, int nc, int h, int w, int k, int s,
                     int p, StKDtype dt);
  int (*avgpool_bwd)(void *stream, void *din, const void *dout, int nc, int h, int w, int k,
                     int s, int p, StKDtype dt);

  /* ---- optimizers (fp32 master weights and states) ------------------------- */
  /* AdamW with bias correction at step `t` (1-based); grad in `gdt`, scaled by
   * grad_scale first; writes the updated master to `param` (in `pdt`) too. */
  int (*adamw)(void *stream, float *master, float *m, float *v, const void *grad, StKDtype gdt,
               void *param, StKDtype pdt, size_t n, float lr, float beta1, float beta2,
               float eps, float weight_decay, int t, float grad_scale);
  /* SGD with momentum: buf = mu * buf + g + wd * w; w -= lr * buf */
  int (*sgd)(void *stream, float *master, float *momentum, const void *grad, StKDtype gdt,
             void *param, StKDtype pdt, size_t n, float lr, float mu, float weight_decay,
             float grad_scale);

  /* ---- sparse model states (SAMO) ------------------------------------------ */
  /* values[i] = dense[index[i]] (gather of the non-zeros) */
  int (*compress)(void *stream, void *values, StKDtype vdt, const void *dense, StKDtype ddt,
                  const int32_t *index, size_t n);
  /* dense[index[i]] = values[i] (scatter back; other entries untouched) */
  int (*expand)(void *stream, void *dense, StKDtype ddt, const void *values, StKDtype vdt,
                const int32_t *index, size_t n);

  /* ---- added with the layers (exec/layers/) -------------------------------- */
  /* A convolution's bias, per channel of N x C x HW: out[n, c, :] += bias[c]
   * (bias_add is per column of a row-major matrix, the wrong axis for NCHW). */
  int (*bias_add_chw)(void *stream, void *out, const void *bias, int n, int c, int hw,
                      StKDtype dt);
  /* dbias[c] += sum over n and hw of dout[n, c, hw] */
  int (*bias_grad_chw)(void *stream, void *dbias, const void *dout, int n, int c, int hw,
                       StKDtype dt);
  /* PyTorch's adaptive average pooling of nc planes of h x w to oh x ow:
   * output (i, j) averages rows floor(i h / oh) .. ceil((i+1) h / oh) - 1 and
   * the same for columns (windows of varying size, also when oh > h). */
  int (*adaptive_avgpool_fwd)(void *stream, void *out, const void *in, int nc, int h, int w,
                              int oh, int ow, StKDtype dt);
  /* din = the adjoint of the forward (written, not accumulated) */
  int (*adaptive_avgpool_bwd)(void *stream, void *din, const void *dout, int nc, int h, int w,
                              int oh, int ow, StKDtype dt);

  /* ---- LLM layers (kernels/ref/llm.c, attention.c, moe.c) ------------------ */
  /* RMSNorm over the last dim of rows x cols: out = in rstd gamma (gamma NULL:
   * 1), rstd = 1 / sqrt(mean(in^2) + eps) fp32 [rows] saved. Backward, with
   * xhat = in rstd: din = rstd (g dy - xhat mean(g dy xhat)) (written; NULL
   * skips), dgamma += sum over rows of dy xhat (NULL skips). */
  int (*rmsnorm_fwd)(void *stream, void *out, float *rstd, const void *in, const void *gamma,
                     int rows, int cols, StKDtype dt);
  int (*rmsnorm_bwd)(void *stream, void *din, void *dgamma, const void *dout, const void *in,
                     const float *rstd, const void *gamma, int rows, int cols, StKDtype dt);
  /* A gated linear unit of gu [rows, 2f]: h[r, j] = act(gu[r, j]) gu[r, f + j],
   * act SiLU (act 0) or GELU (1, tanh form); the backward writes dgu [rows, 2f]. */
  int (*glu_fwd)(void *stream, void *h, const void *gu, int rows, int f, int act, StKDtype dt);
  int (*glu_bwd)(void *stream, void *dgu, const void *dh, const void *gu, int rows, int f,
                 int act, StKDtype dt);
  /* Rotary position embedding in place on the first `heads` heads (of
   * head_dim each) of batch x tokens rows of `ld` elements; a row's position
   * is its index mod tokens. Pair (x_i, x_{i + rot/2}), i < rot / 2, turns
   * by pos theta^(-2 i / rot) (HF's rotate_half layout); the rest of a head
   * stays. `inverse` turns back: the backward (a rotation's transpose). */
  int (*rope)(void *stream, void *x, int batch, int tokens, int heads, int ld, int head_dim,
              int rot_dim, float theta, int inverse, StKDtype dt);
  /* Flash-style attention (Dao et al. 2022) without an s x s tensor: qkv
   * [batch, tokens, (heads + 2 kv_heads) head_dim] holds per token the
   * query heads, then the key heads, then the value heads; query head h
   * reads kv head h / (heads / kv_heads). o [batch, tokens, heads
   * head_dim]; lse fp32 [batch, heads, tokens], each row's log-sum-exp of
   * its scaled scores (saved for the backward). Query i sees key j when
   * j <= i (causal) and j > i - window (window > 0). */
  int (*flash_attn_fwd)(void *stream, void *o, float *lse, const void *qkv, int batch,
                        int tokens, int heads, int kv_heads, int head_dim, float scale,
                        int causal, int window, StKDtype dt);
  /* Its backward, recomputing the scores from qkv and lse: writes dqkv (all
   * of it, qkv's layout) from dout [batch, tokens, heads head_dim]; rowdot
   * fp32 [batch, heads, tokens] is scratch (rowsum(dout o)). */
  int (*flash_attn_bwd)(void *stream, void *dqkv, const void *dout, const void *qkv,
                        const void *o, const float *lse, float *rowdot, int batch, int tokens,
                        int heads, int kv_heads, int head_dim, float scale, int causal,
                        int window, StKDtype dt);
  /* Context parallelism's ring attention (Liu et al. 2023; exec/op_cp.c).
   * A rank of a group of c holds `tokens` of each sequence: chunks `rank`
   * and 2c - 1 - rank of the sequence cut in 2c (st_k_cp_position). One
   * step attends the rank's queries (rows of ld_q elements whose first
   * heads x head_dim are the query heads: qkv rows) to the keys and values
   * of rank kv_rank, kv [batch, tokens, 2 kv_heads head_dim] (the key heads,
   * then the value heads), masked by the global positions as flash_attn_fwd
   * masks indices (causal, window), and merges them into the running fp32 o
   * [batch, tokens, heads head_dim] (unnormalised), m and l [batch, heads,
   * tokens] (the running max and sum of exp; all zero to start: a row with
   * l = 0 has seen nothing).
   * Both tables have them (kernels/ref/ring_attention.c,
   * kernels/cuda/ring_attention.cu); exec refuses the ring on a table
   * that lacks one (op_cp.c). */
  int (*ring_attn_fwd)(void *stream, float *o, float *m, float *l, const void *q, int ld_q,
                       const void *kv, int batch, int tokens, int heads, int kv_heads,
                       int head_dim, float scale, int causal, int window, int c, int rank,
                       int kv_rank, StKDtype dt);
  /* The ring's end: y [batch, tokens, heads head_dim] = o / l, lse = m + log l. */
  int (*ring_attn_finish)(void *stream, void *y, float *lse, const float *o, const float *m,
                          const float *l, int batch, int tokens, int heads, int head_dim,
                          StKDtype dt);
  /* One step's backward (flash_attn_bwd's on one chunk, from lse and y):
   * ACCUMULATES the queries' gradient into dq (rows of ld_dq, the query
   * heads first) and the chunk's keys' and values' into dkv (rows of
   * ld_dkv, key heads then value heads), from dy [batch, tokens, heads
   * head_dim]. */
  int (*ring_attn_bwd)(void *stream, void *dq, int ld_dq, void *dkv, int ld_dkv, const void *dy,
                       const void *y, const float *lse, const void *q, int ld_q, const void *kv,
                       int batch, int tokens, int heads, int kv_heads, int head_dim,
                       float scale, int causal, int window, int c, int rank, int kv_rank,
                       StKDtype dt);
  /* qkv (flash_attn_fwd's layout) by head: qh, kh, vh [heads, batch, tokens,
   * head_dim], K and V repeated over their group; NULL skips one. The
   * backward writes dqkv, summing each kv head over its group. */
  int (*attn_heads)(void *stream, void *qh, void *kh, void *vh, const void *qkv, int batch,
                    int tokens, int heads, int kv_heads, int head_dim, StKDtype dt);
  int (*attn_heads_bwd)(void *stream, void *dqkv, const void *dqh, const void *dkh,
                        const void *dvh, int batch, int tokens, int heads, int kv_heads,
                        int head_dim, StKDtype dt);
  /* dst[r, c] = src[r, c] for rows x cols whose rows are ld_dst / ld_src
   * elements apart. */
  int (*copy2d)(void *stream, void *dst, int ld_dst, const void *src, int ld_src, int rows,
                int cols, StKDtype dt);
  /* MoE routing of batch x tokens rows of logits [rows, experts]: probs fp32
   * [rows, experts] = softmax, sel int32 [rows, top_k] each row's top_k
   * experts by probability (ties to the lower index; a choice the expert had
   * no room for is stored as -1 - expert), and `gates` (rows ld
   * apart, `experts` columns) each chosen expert's gate (its probability,
   * renormalized over the top_k with norm_topk), 0 for the others and where
   * the expert is full: each expert takes at most `capacity` rows of a
   * sample, every row's first choice admitted before any second choice,
   * each in row order (GShard). */
  int (*moe_route_fwd)(void *stream, void *gates, int ld, float *probs, int32_t *sel,
                       const void *logits, int batch, int tokens, int experts, int top_k,
                       int capacity, int norm_topk, StKDtype dt);
  /* dlogits [rows, experts] (written) from the gates' gradient dgates (rows
   * ld apart; a dropped gate's is not read: the gate was no function of
   * the logits). */
  int (*moe_route_bwd)(void *stream, void *dlogits, const void *dgates, int ld,
                       const float *probs, const int32_t *sel, int rows, int experts, int top_k,
                       int norm_topk, StKDtype dt);
  /* An expert's rows: per sample of `tokens` rows of src (rows ld apart),
   * the first `capacity` rows in order whose column gate_col is not 0: x
   * [batch capacity, d] their d values from column x_col, idx int32 their
   * row in the sample, gate fp32 their gate; an empty slot gets idx -1,
   * gate 0 and a zero row. */
  int (*moe_gather)(void *stream, void *x, int32_t *idx, float *gate, const void *src, int ld,
                    int x_col, int gate_col, int batch, int tokens, int capacity, int d,
                    StKDtype dt);
  /* dst[sample, idx, col + j] += g y[slot, j] for the filled slots, g the
   * slot's gate (1 when gate is NULL); dst's rows ld apart. */
  int (*moe_scatter)(void *stream, void *dst, int ld, int col, const void *y,
                     const int32_t *idx, const float *gate, int batch, int tokens, int capacity,
                     int d, StKDtype dt);
  /* The gated scatter's backward: dy[slot] = gate dsum[sample, idx] (0 for
   * an empty slot; dsum's rows ld_sum apart, from column 0), and
   * dgates[sample, idx, gate_col] += dsum[sample, idx] . y[slot] (dgates'
   * rows ld_gates apart; other rows untouched; NULL skips it). */
  int (*moe_gather_grad)(void *stream, void *dy, void *dgates, int ld_gates, int gate_col,
                         const void *dsum, int ld_sum, const void *y, const int32_t *idx,
                         const float *gate, int batch, int tokens, int capacity, int d,
                         StKDtype dt);

  /* ---- tensor parallelism (exec/layers/ split layers, issue 13) ---------------- */
  /* y[i] = max(y[i], x[i]): the local comm backend's MAX reduction */
  int (*maximum)(void *stream, void *y, const void *x, StKDtype dt, size_t n);
  /* Cross-entropy over logits split by classes (Megatron-LM's vocabulary-
   * parallel loss): this rank holds classes [first, first + classes) of
   * each row. stats fp32 [4, rows] (rows contiguous per statistic): 0 the
   * local max m, 1 a copy of it (to be MAX-reduced over the group into the
   * global max M), 2 s = sum of exp(x - m) over the local classes, 3 the
   * target's logit when the target is local, else 0; exps fp32 [rows,
   * classes] = exp(x - m). Only the first `valid` classes are the
   * vocabulary's: the rest (its padding to a multiple of the group) take no
   * part (exps 0, m over the valid ones, -inf with none). */
  int (*ce_split_fwd)(void *stream, float *exps, float *stats, const void *logits,
                      const int32_t *targets, int first, int rows, int classes, int valid,
                      StKDtype dt);
  /* After the MAX reduction of stats[1]: s *= exp(m - M), so that the SUM
   * reduction of stats[2] gives the global sum of exp(x - M) */
  int (*ce_split_rescale)(void *stream, float *stats, int rows);
  /* After the SUM reduction of stats[2..3]: loss_sum (device fp32 scalar)
   * += the sum over rows of log s + M - x_target (a row whose target is < 0
   * is ignored) */
  int (*ce_split_loss)(void *stream, float *loss_sum, const float *stats,
                       const int32_t *targets, int rows);
  /* dlogits = (exps exp(m - M) / s - onehot(target - first)) * scale; rows
   * with target < 0 get zeros */
  int (*ce_split_bwd)(void *stream, void *dlogits, const float *exps, const float *stats,
                      const int32_t *targets, int first, float scale, int rows, int classes,
                      StKDtype dt);
} StKernels;

/* The host table (always built) and the CUDA table (kernels/cuda, built into
 * the cuda device backend's module with exec/device_cuda.c: reach it through
 * that backend's kernels(), exec/device.h). */
const StKernels *st_kernels_host(void);
const StKernels *st_kernels_cuda(void);

/* bf16 helpers for host code: round to nearest even. */
static inline uint16_t
st_f32_to_bf16(float f)
{
  union {
    float f;
    uint32_t u;
  } x = {f};
  if ((x.u & 0x7f800000u) == 0x7f800000u && (x.u & 0x007fffffu)) /* NaN stays NaN */
    return (uint16_t)((x.u >> 16) | 0x40u);
  x.u += 0x7fffu + ((x.u >> 16) & 1u);
  return (uint16_t)(x.u >> 16);
}

static inline float
st_bf16_to_f32(uint16_t h)
{
  union {
    uint32_t u;
    float f;
  } x = {(uint32_t)h << 16};
  return x.f;
}

/* Under nvcc, what follows is also a device function (the CUDA ring
 * kernels mask by it: one formula on both sides); plain C elsewhere. */
#ifdef __CUDACC__
#define ST_K_HOSTDEV __host__ __device__
#else
#define ST_K_HOSTDEV
#endif

/* The global position of token t of the `tokens` a rank of a
 * context-parallel group of c holds (Megatron-LM's get_batch_on_this_cp_rank:
 * the sequence in 2c chunks of tokens / 2, rank r holding chunks r and
 * 2c - 1 - r, so that each rank has the same share of the causal pairs). */
static inline ST_K_HOSTDEV int
st_k_cp_position(int t, int tokens, int c, int rank)
{
  int h = tokens / 2;
  return t < h ? rank * h + t : (2 * c - 1 - rank) * h + (t - h);
}

#ifdef __cplusplus
}
#endif

#endif /* STAGGER_KERNELS_H */
