/* mfu.h: model FLOPs utilization (MFU), the headline figure published
 * training runs report (Chowdhery et al. 2022, PaLM, appendix B; Narayanan
 * et al. 2021): the FLOPs the model needs per step over what the GPUs in
 * use could do in that time at their dense peak.
 *
 * Model FLOPs are the model file's own count (model/layer_type.h, `stagger
 * model show`): every layer's forward and backward per sample, 2 FLOPs per
 * multiply-add, attention's score and value products included (halved
 * under a causal flash kernel, which skips the masked half), recomputation
 * not counted, the whole model (derived again from a tensor-parallel
 * rank's, with the vocabulary as padded for the group), an MoE layer's experts at what each token visits. For a dense
 * decoder this is PaLM's 6 N + 12 l d s per token less the embedding's
 * 6 V d (a lookup, no product) and, under causal flash attention, half the
 * attention term: a few percent under it. The peak is the cluster GPU's
 * dense one at the dtype the run computes in (the roofline's: bf16, or
 * fp16 where the GPU has no bf16; fp32 at TF32 where the GPU has it).
 */
#pragma once

#include "sched/sched.h"

typedef struct {
  double flops_per_sample; /* model FLOPs of one sample: forward + backward */
  double flops_per_step;   /* of the global batch */
  double peak_flops;       /* per GPU, FLOP/s; 0 when the cluster gives none */
  StDtype dtype;           /* of that peak */
  gboolean tf32;           /* the peak is TF32's (fp32 work on tensor cores) */
  double mfu;              /* flops_per_step / (step x gpus x peak_flops); 0 when unknown */
} StMfu;

/* The MFU of the main job of `schedule` at a step of `step_ns` on `gpus`
 * GPUs. O(layers); derives the whole model again when the schedule's is a
 * tensor-parallel rank's. */
void st_mfu_of(const StSchedule *schedule, int64_t step_ns, int gpus, StMfu *out);

/* How model FLOPs are counted, in a few words for a table's note. */
#define ST_MFU_CONVENTION \
  " (forward + backward of every layer as `stagger model show` counts them, no recomputation)"

/* "41.3 % of 8 x 989 TFLOP/s (bf16 dense peak); 12.3 PFLOP model FLOPs per
 * step (...convention...)", or "-" when no peak is known. Transfer full. */
char *st_mfu_describe(const StMfu *mfu, int gpus);
