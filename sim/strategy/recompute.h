/* recompute.h: which layers a run recomputes before their backward, and
 * what each keeps, from --recompute, --recompute-every and --recompute-ops
 * (docs/LLM.md, "Activation checkpointing as frameworks do it").
 *
 * One answer per layer, st_recompute_layer, that tensors.c (what the
 * passes allocate), the strategies' cost and memory estimates and the
 * planner's refusals all read, so that they agree:
 * - none: every layer keeps its saved block;
 * - selective: a layer with something of the chosen ops to drop
 *   (StLayerMemory.again, st_layer_memory_again) keeps the rest and a
 *   recompute pass makes it again before its backward (Korthikanti et al.
 *   2022 with core_attn; Megatron-LM's --recompute-modules, PyTorch's
 *   selective activation checkpointing by op);
 * - full: every layer is checkpointed (keeps its input only and runs its
 *   forward again before its backward); with --recompute-every K only the
 *   transformer layers (StLayerType.block), the K-th, 2K-th, ... counted
 *   over the whole model from 1, as torchtitan's layer-selective
 *   checkpointing does with ac_freq K (its counter is per process: per
 *   pipeline stage there); the other layers keep everything.
 */
#pragma once

#include <glib.h>

#include "model/model.h"
#include "strategy/options.h"

typedef struct {
  StRecompute mode;
  int every;    /* full: checkpoint every k-th transformer layer only; 0: every layer */
  unsigned ops; /* selective: StRecomputeOp bits; 0 (or ST_RC_DEFAULT): core_attn */
} StRecomputePlan;

/* The plan `options` ask for. */
StRecomputePlan st_recompute_plan(const StOptions *options);

/* What st_recompute_check cannot see on the whole model: the tensor group
 * `tp` its layers will be split over (torchtitan's policy is modelled for
 * whole blocks). */
gboolean st_recompute_check_split(const StRecomputePlan *plan, int tp, GError **error);

/* What layer `i` does under `plan`: ST_RECOMPUTE_NONE (keeps its saved
 * block), SELECTIVE (drops the chosen ops' part: only a layer with some,
 * whatever its batch) or FULL (checkpointed). O(i). */
StRecompute st_recompute_layer(const StModel *model, const StRecomputePlan *plan, int i);

/* Whether `plan` changes what some layer of `model` keeps from forward to
 * backward, differently from every other spelling; FALSE with the reason
 * otherwise, so that sim and the planner refuse it rather than report one
 * run under two names: selective with an op no layer has anything of
 * (core_attn on a model of flash attention), --recompute-every without
 * full or on a model with fewer transformer layers than K,
 * --recompute-ops without selective. */
/* st_recompute_layer for every layer, [n_layers], in O(layers). Transfer
 * full. */
StRecompute *st_recompute_layers(const StModel *model, const StRecomputePlan *plan);

gboolean st_recompute_check(const StModel *model, const StRecomputePlan *plan, GError **error);

/* A short phrase for descriptions: "", ", full recomputation", ", full
 * recomputation of one transformer layer in 2", ", selective
 * recomputation (core_attn+mlp_act)". Transfer full. */
char *st_recompute_describe(const StRecomputePlan *plan);
