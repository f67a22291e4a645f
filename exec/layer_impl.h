/* layer_impl.h: the real forward and backward of each layer type, written
 * once against the kernel table (kernels/kernels.h), so a layer runs on the
 * host or on a GPU alike.
 *
 * Contract, for a layer `l` of the model (its attrs, shapes and parameter
 * count as sim/model derives them) and a micro-batch of `batch` samples:
 * - Parameters are one flat vector of l->params elements in `dt`; the
 *   implementation fixes the order of its tensors inside (documented in its
 *   file) and init() fills them (fp32, on the host) deterministically from a
 *   seed, so every rank and every backend starts from the same weights.
 * - forward() reads `in` ([batch, in_shape] in dt, or int32 token ids for
 *   embedding layers) and writes `out` ([batch, out_shape]). It may keep what
 *   its backward needs in `saved` (saved_bytes() long, allocated by the
 *   executor and kept until the backward). Its input and its output stay
 *   alive until its backward when the model says it keeps them
 *   (StLayerType.keeps: ST_KEEPS_INPUT / ST_KEEPS_OUTPUT), so backward gets
 *   `in` and `out` then; otherwise they are NULL there.
 * - backward() reads dout and writes din (NULL when nobody needs it: the
 *   first layer) and ACCUMULATES the weight gradients into dparams (l->params
 *   elements in dt, zeroed by the executor once per step).
 * - Temporary device memory comes from ctx->scratch (freed after the call).
 * - Loss layers read int32 targets (ctx->targets) and add the micro-batch's
 *   summed loss to ctx->loss_sum (device fp32); their backward needs no dout
 *   and scales by ctx->loss_scale (1 / samples of the global batch).
 * - A tied head (lm_head with tied) uses the weights of the model's first
 *   embedding layer through ctx->tied_params and accumulates into
 *   ctx->tied_grads.
 * Returns 0 or a kernel error code; the executor turns it into a GError.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "model/layer_type.h"
#include "model/model.h"

typedef struct {
  const StKernels *k;
  void *stream;
  StKDtype dt;            /* activations, weights and their gradients */
  uint64_t seed;          /* dropout masks: per (step, micro-batch, layer) */
  /* Temporary device memory until the call returns; NULL when out of memory. */
  void *(*scratch)(gpointer pool, size_t bytes);
  gpointer pool;
  const int32_t *targets; /* loss layers: [batch] or [batch, tokens] class ids, device */
  float *loss_sum;        /* loss layers: device fp32 scalar to add to */
  float loss_scale;       /* loss layers' backward: d(mean loss) / d(sum) */
  const void *tied_params; /* tied heads: the embedding's weights */
  void *tied_grads;        /* ... and their gradient */
  /* Selective recomputation: where the layer's again_bytes() tensors live
   * (the forward's scratch, then the recompute's block that the backward
   * reads), apart from `saved`; NULL: inside `saved`, after the rest. */
  void *again;
} StLayerCtx;

typedef struct {
  const char *type; /* the model layer type it implements */
  void (*init)(const StLayer *l, float *params, uint64_t seed);
  size_t (*saved_bytes)(const StLayer *l, int batch, StKDtype dt);
  int (*forward)(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                 const void *in, void *out, void *saved);
  int (*backward)(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                  const void *in, const void *out, const void *saved, const void *dout,
                  void *din, void *dparams);
  /* Selective recomputation (Korthikanti et al. 2022), NULL for a layer
   * with nothing to drop: again_bytes() of saved_bytes() are tensors cheap
   * to make again (attention scores); recompute() writes them into
   * c->again from the layer's input (when it keeps it) and the rest of its
   * saved block. Counted by the model's StLayerMemory.again. */
  size_t (*again_bytes)(const StLayer *l, int batch, StKDtype dt);
  int (*recompute)(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                   const void *in, const void *saved);
} StLayerImpl;

/* NULL when the type has no real implementation (custom layers). */
const StLayerImpl *st_layer_impl_find(const char *type);
/* NULL-terminated. */
const StLayerImpl *const *st_layer_impls(void);

/* Whether a layer's input is token ids (int32) rather than activations. */
gboolean st_layer_takes_ids(const StLayer *l);
