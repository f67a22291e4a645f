/* estimate_list.h: a layer pass's kernel list as estimate_kernels.c builds
 * it, shared with the layer families in files of their own
 * (estimate_conv.c); private to those files. The primitives push kernels
 * in the framework's terms (estimate_kernels.c's header says what each
 * launches). */
#pragma once

#include "cost/estimate.h"

typedef struct {
  StKernels *out;
  double e;         /* bytes per activation element */
  gboolean fwd;     /* forward (or recompute), else backward */
  gboolean no_dgrad; /* the model's first layer: its input (the samples) takes no gradient */
  unsigned fused;   /* StFuse: what the framework runs as one kernel */
  gboolean logits_fp32; /* the loss reads fp32 logits */
  gboolean transposes;  /* NCHW images into tensor-core convolutions: cuDNN transposes */
  gboolean fp8;         /* the transformer layers' linears in FP8 (te_linear) */
  gboolean fp8_now;     /* the GEMMs being pushed take FP8 inputs */
  StPass only;          /* ST_PASS_BWD_INPUT / _WEIGHT: keep that half of a backward's
                           kernels; else every kernel */
  gboolean weights_now; /* the kernels being pushed compute a weight's gradient (W) */
  gboolean grouped_now; /* the GEMMs being pushed are groups of one grouped GEMM */
} EkList;

/* One kernel, or none where a half of a backward (EkList.only) leaves it. */
void ek_push(EkList *l, StKernel k);
/* count x (m x n) outputs reducing k, with their traffic. */
void ek_gemm(EkList *l, StKernelClass cls, double m, double n, double k, double count);
/* One memory-bound kernel making `passes` passes over `elems` elements. */
void ek_mem(EkList *l, StKernelClass cls, double elems, double passes);
/* A LayerNorm (always fused) over `elems`. */
void ek_norm(EkList *l, double elems);
/* An element-wise activation: 2 passes forward, 3 backward. */
void ek_activation(EkList *l, double elems);
/* A residual add: 3 passes forward, none backward (the gradient passes). */
void ek_residual_add(EkList *l, double elems);

/* The convolution family (estimate_conv.c): a conv2d, torchvision's
 * BasicBlock and Bottleneck. */
void ek_conv2d_layer(const StLayer *layer, double b, EkList *l);
void ek_basic_block_layer(const StLayer *layer, double b, EkList *l);
void ek_bottleneck_layer(const StLayer *layer, double b, EkList *l);
