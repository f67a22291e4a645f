/* estimate.h: the "estimate" compute model's view of a layer pass, private to
 * sim/cost/ (and its tests).
 *
 * A pass is a list of kernels, as the frameworks the model describes launch
 * them (PyTorch with cuBLAS, cuDNN and fused attention): matrix multiplies
 * with their shapes (convolutions as implicit GEMMs), fused attention, and
 * memory-bound kernels with the bytes they move. estimate_kernels.c builds
 * the list per layer type (one table, one function per family);
 * compute_estimate.c turns each kernel into time with the GPU's measured
 * curves (cluster/gpu_perf.h).
 *
 * Invariants: the FLOPs of a pass's kernels add up to the layer's own
 * (batch x fwd_flops or bwd_flops) within the rounding of shapes, which
 * tests/test_estimate.c checks for every layer of the shipped models.
 */
#pragma once

#include "cost/cost.h"

typedef enum {
  ST_KERNEL_GEMM = 0, /* cuBLAS: count x (m x n) outputs, each reducing k */
  ST_KERNEL_CONV,     /* cuDNN implicit GEMM, same shape fields */
  ST_KERNEL_ATTENTION,/* fused (flash) attention: count = batch x heads, m = queries,
                         n = keys, k = head dim; flops given */
  ST_KERNEL_MEMORY,   /* element-wise, normalisation, gathers: bytes at the bandwidth */
  ST_KERNEL_POOL,     /* pooling: bytes at the pooling kernels' bandwidth */
} StKernelClass;

typedef struct {
  StKernelClass cls;
  double m, n, k, count;
  double flops;
  double bytes;        /* memory traffic, bytes */
  gboolean backward;   /* attention: the backward kernel (its own curve where measured) */
  gboolean fp8;        /* GEMM: FP8 inputs (Transformer Engine's linears under --precision
                          fp8), at the FP8 peak on the gemm_fp8 curve */
  gboolean grouped;    /* GEMM: one group of a grouped GEMM (a rank's MoE experts as one
                          kernel): its tiles share waves with the group's others, so it
                          takes its fractional share of the waves, not whole ones */
} StKernel;

#define ST_KERNELS_MAX 48

typedef struct {
  int n;
  StKernel k[ST_KERNELS_MAX];
} StKernels;

/* The kernels of `work` (a layer pass: fwd, bwd or recompute; FWDBWD is both)
 * with activations of `e` bytes each. FALSE for work that is not a layer
 * pass. Types without a decomposition of their own become one matrix
 * multiply of their FLOPs when they have FLOPs beyond a few per element,
 * else one memory-bound kernel of their roofline bytes. */
gboolean st_estimate_kernels(const StComputeCtx *ctx, const StWork *work, StKernels *out);

/* Seconds one kernel takes alone on ctx's GPU (compute_estimate.c's
 * model; 0 without a performance file). */
double st_estimate_kernel_s(const StComputeCtx *ctx, const StKernel *kernel);

/* The share of `layer`'s backward that computes its weights' gradient (W of
 * a split backward), in [0, 1]: of its kernels' FLOPs (bytes when they have
 * none), W's over the whole backward's (a tied head's wgrad included). A
 * type without a list of its own: 0 without parameters, else its forward's
 * FLOPs over its backward's, at most a half (a linear's wgrad costs its
 * forward). A profile that measured only whole backwards splits by it. */
double st_estimate_weight_share(const StComputeCtx *ctx, const StLayer *layer);
/* The same split in full: W's share of the backward's FLOPs (as above) and
 * of its bytes, and W's FLOPs per sample (a type without a list: its share
 * of the layer's backward FLOPs, the same share of bytes). The roofline
 * moves W's own traffic and FLOPs, not a FLOP share of all of them (an
 * unfused attention's backward is mostly its scores' gradient, which W
 * never reads). */
void st_estimate_weight_split(const StComputeCtx *ctx, const StLayer *layer, double *flop_share,
                              double *byte_share, double *flops);
