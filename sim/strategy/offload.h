/* offload.h: activation offload to host memory, --offload-activations N
 * (docs/LLM.md, "Activation offload to host").
 *
 * As Megatron-LM and Transformer Engine's CPU offloading (--cpu-offloading
 * --cpu-offloading-num-layers N) and PyTorch's
 * torch.autograd.graph.save_on_cpu run it: after the forward of an
 * offloaded layer, the block it saved for its backward (tensors.h's
 * "kept") is copied device to host (ST_COPY_D2H over the node's PCIe, the
 * cluster's links.pcie, shared by its GPUs as the engine models it) on a
 * copy stream of its own, beside the next layers' forwards; the device
 * buffer is freed when the copy ends. Before its backward the block is
 * copied back (ST_COPY_H2D) into a fresh device buffer, issued once the
 * compute reaches the backward of the layer above it (prefetched one layer
 * ahead), and the layer's recompute and backward wait for it.
 *
 * Back-pressure: the forward after an offloaded layer waits for the copy
 * of the offloaded layer before it (StOffloadGate), so that while the
 * forward runs at most two offloaded blocks are on the device, the one
 * being copied and the one being made, as a double-buffered offload
 * handler (Transformer Engine's) keeps them; where PCIe is slower than
 * the compute, the forward slows to its pace rather than holding every
 * block.
 *
 * Which layers: the first N transformer layers (StLayerType.block) of the
 * model, counted from 1 over the whole model (a pipeline's first stages
 * hold them), that keep a saved block: a layer checkpointed by --recompute
 * full keeps only its input, so there is nothing to offload; under
 * selective recomputation what the layer keeps is offloaded and the
 * dropped part is made again on the device. The tensors between layers
 * (each layer's input and output) stay on the device. Host memory is no
 * device category: the schedule's notes say what it holds.
 *
 * Everything here is a function of the model and options, as recompute.h
 * is: tensors.c (which buffers the copies free and allocate), the
 * strategies (where the copies go), their estimates and the notes read the
 * same answer.
 */
#pragma once

#include <glib.h>

#include "model/model.h"
#include "sched/sched.h"
#include "strategy/recompute.h"

struct StTensors;

/* [n_layers]: TRUE for the first `n` transformer layers of `model` (n = 0:
 * none); a checkpointed one is listed but has nothing to offload (tensors.c
 * asks). Transfer full. O(layers). */
gboolean *st_offload_layers(const StModel *model, int n);

/* Bytes of saved blocks that the first `n` transformer layers copy to the
 * host and back per micro-batch of `batch` samples with activations in
 * `dtype` under `plan`: each way, what crosses PCIe per micro-batch. */
int64_t st_offload_bytes(const StModel *model, int n, const StRecomputePlan *plan, int batch,
                         StDtype dtype);

/* Whether --offload-activations `n` can run on `model` and `cluster`
 * and changes something: FALSE with the reason when `n` exceeds the
 * model's transformer layers, when none of the first `n` keeps a saved
 * block under `plan` (all checkpointed), or when the cluster has no pcie
 * link. n = 0: TRUE. */
gboolean st_offload_check(const StModel *model, const StCluster *cluster, int n,
                          const StRecomputePlan *plan, GError **error);

/* The D2H copy of layer `layer`'s saved block of `tensors`' micro-batch on
 * `stream` of `program`, after that layer's forward `fwd`: it frees the
 * device copy when it ends. Returns it; UINT32_MAX (nothing) when the
 * layer offloads nothing or `stream` is negative. */
uint32_t st_offload_down(StProgram *program, int stream, struct StTensors *tensors, int layer,
                     uint32_t fwd);

/* The H2D copy of the block back, after `after` (UINT32_MAX: its stream
 * only): allocates the device buffer the layer's backward reads and frees,
 * and makes its recompute and backward wait for it. Once per layer and
 * micro-batch (a second call does nothing); nothing when the layer
 * offloads nothing or `stream` is negative. */
void st_offload_up(StProgram *program, int stream, struct StTensors *tensors, int layer,
                   uint32_t after);

/* The back-pressure above: `copied` takes each D2H copy (UINT32_MAX:
 * none) and `take` returns, once, the copy the next forward waits for
 * (UINT32_MAX: none). Start from ST_OFFLOAD_GATE_INIT. */
typedef struct {
  uint32_t last; /* the latest copy down */
  uint32_t wait; /* the one before it, for the next forward */
} StOffloadGate;
#define ST_OFFLOAD_GATE_INIT {UINT32_MAX, UINT32_MAX}
void st_offload_gate_copied(StOffloadGate *gate, uint32_t copy);
uint32_t st_offload_gate_take(StOffloadGate *gate);

/* Notes "offload_activation_layers" (n) and "offload_activation_bytes_per_micro"
 * (st_offload_bytes: the host memory one micro-batch takes, and what
 * crosses PCIe each way for it), when n > 0. */
void st_offload_note(StSchedule *schedule, const StModel *model, int n,
                     const StRecomputePlan *plan, int batch, StDtype dtype);
