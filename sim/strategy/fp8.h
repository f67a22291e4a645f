/* fp8.h: the memory FP8 training adds to a schedule (--precision fp8), as
 * NVIDIA Transformer Engine keeps it for Megatron-LM's transformer layers.
 *
 * FP8 training is mixed precision (st_precision_16bit: bf16 weights,
 * gradients and activations, fp32 master weights and Adam moments, every
 * strategy's buffers unchanged) with the GEMMs of the transformer layers'
 * linears on FP8 inputs (cost/estimate_kernels.c says which, and
 * st_compute_fp8_weights counts their weights). What it adds, per program,
 * one persistent buffer "fp8 weight cache" (category params) of the layers
 * the program runs forward:
 *
 *   2 bytes per FP8-GEMM weight element: the weight cast to FP8 and its FP8
 *     transpose, which TE caches between micro-batches (te.Linear's
 *     weight_fp8 / weight_t_fp8, transformer_engine/pytorch/module/linear.py:
 *     Hopper's FP8 GEMMs take only the TN layout, so the dgrad GEMM needs
 *     W^T in FP8 of its own);
 *   the delayed-scaling state of each FP8 linear: 5 scaled tensors (forward
 *     input, weight, output; backward output gradient, input gradient, TE's
 *     fp8_meta), each an fp32 scale, scale_inv and an amax history of
 *     ST_FP8_AMAX_HISTORY entries (Megatron-LM's --fp8-amax-history-len
 *     default, 1; TE's own DelayedScaling default is 1024).
 *
 * Left out (docs/LLM.md, "FP8 training"): linear inputs saved for the
 * backward in FP8 (1 byte instead of 2: activations are counted as mixed
 * precision's), and Megatron-LM's --fp8-param-gather.
 */
#pragma once

#include "sched/sched.h"

/* Megatron-LM's --fp8-amax-history-len default (megatron/training/arguments.py). */
#define ST_FP8_AMAX_HISTORY 1
/* Tensors TE scales per FP8 GEMM module: 3 forward, 2 backward. */
#define ST_FP8_SCALED_TENSORS 5

/* Bytes of the FP8 weight cache of `layer` on a GPU of `cluster`: 2 per
 * FP8-GEMM weight element plus the scaling state of its FP8 linears; 0 where
 * none of its GEMMs runs in FP8 (or the GPU has no FP8 peak). */
int64_t st_fp8_layer_cache_bytes(const StCluster *cluster, const StModel *model,
                                 const StLayer *layer);

/* Under settings.precision fp8, adds to every program of `s` its persistent
 * "fp8 weight cache" buffer (above) for the layers it runs forward; nothing
 * otherwise or where the buffer would be empty. */
void st_fp8_add_weight_caches(StSchedule *s);
