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
 *
 * Tensor parallelism (issue 13; sim/model/layer_type.h's StTpKind): a layer
 * with l->tp = t > 1 is one rank's share (its attrs describe the whole
 * layer; l->params, shapes are the rank's), ctx->tp_rank says which. Its
 * parameters are a slice of the whole layer's (tp_spans: init slices the
 * whole layer's initial weights, so a split run starts where the whole one
 * does). A PARALLEL layer computes on all N = batch x tokens rows of the
 * micro-batch (under sequence parallelism the executor hands it the rows
 * all-gathered), and its forward writes a partial sum of its output
 * (the group's all-reduce or reduce-scatter completes it); the residual and
 * the row-parallel bias are added by the rows' owner only (st_tp_own_rows),
 * so nothing is computed after the reduction. Its backward writes a
 * partial sum of the input gradient likewise. A layer whose passes run in
 * parts (sim/model's st_layer_tp_parts: llama_block, transformer_block) is
 * called once per part (ctx->part = k >= 1) with that part's input and
 * output: part 1's output lives in the saved block (tp_tensor), part 2
 * reads it. VOCAB_IN / VOCAB_OUT / VOCAB_LOSS layers hold their slice of
 * the vocabulary; the loss's statistics are reduced by the executor around
 * its forward (kernels.h ce_split_*, tp_tensor).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "model/layer_type.h"
#include "model/model.h"

/* Context parallelism (exec/op_cp.c; sim/strategy/context_parallel.h): a
 * layer with l->cp = c > 1 holds `tokens` / c of each sequence (chunks rank
 * and 2c - 1 - rank of 2c: kernels.h st_k_cp_position), and the pass of the
 * part holding its attention runs in `steps` = c + 2 calls: step 0 "pre"
 * (up to the keys and values), steps 1 .. c "core" (one chunk of keys and
 * values each), step c + 1 "post" (the rest); a backward calls them from
 * post down to pre. `state` (cp_state_bytes() of the pass) lives from the
 * pass's first call to its last; the exchanges between the steps (the
 * ring's, or Ulysses' all-to-alls) move what cp_exchange() says in it. */
typedef struct {
  int step, steps;  /* this call's step, of c + 2 (all-to-all: of 3) */
  int rank, size;   /* the rank's index in its context-parallel group, c */
  int kind;         /* ST_LAYER_CP_RING, or ST_LAYER_CP_A2A: pre | core | post around
                       the all-to-alls of DeepSpeed Ulysses (the core on heads / c of
                       the whole sequence) */
  void *state;      /* the pass's state (device memory) */
} StLayerCp;

enum { ST_LAYER_CP_RING = 0, ST_LAYER_CP_A2A = 1 }; /* StLayerCp.kind */

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
  /* Tensor parallelism (l->tp > 1, see the top): this rank's index in the
   * group, the part of a pass in parts (0: the whole pass), and the classes
   * of the vocabulary that are real when it is padded to a multiple of the
   * group (0: all; the padding takes no part in the loss). */
  int tp_rank;
  int part;
  int64_t vocab;
  /* Expert parallelism (exec/op_ep.c): an owned expert's pass over the
   * all-to-alls' buffers, the group's size (0: not such a pass) and the
   * rank's index in it (layer_moe.c's rows mode). */
  int ep, ep_index;
  /* Context parallelism: the step of a pass in steps (see above), NULL
   * when the pass runs whole. */
  const StLayerCp *cp;
} StLayerCtx;

/* How a rank's parameters sit in the whole layer's vector (tp_spans): `rows`
 * runs of `len` elements, whole[whole + i whole_ld + j] =
 * part[part + i part_ld + j]. Every element of the rank's vector is in
 * exactly one span. */
typedef enum {
  ST_TP_SPAN_SPLIT = 0, /* this rank's slice: its gradient is its own */
  ST_TP_SPAN_WHOLE,     /* every rank holds it whole and computes its whole gradient
                           (a row-parallel bias: from the full output gradient) */
  ST_TP_SPAN_PARTIAL,   /* every rank holds it whole but computes a partial sum of its
                           gradient (a norm inside a split block, on the rank's partial
                           gradient; under sequence parallelism every replicated
                           layer's, on its rows): all-reduced over the group per step */
} StTpSpanKind;

typedef struct {
  size_t whole, part;   /* element offsets of the first run */
  size_t len, rows;     /* elements per run, runs */
  size_t whole_ld, part_ld;
  StTpSpanKind kind;
} StTpSpan;

#define ST_TP_SPANS_MAX 16

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
  /* Tensor parallelism (see the top), NULL for a type that does not split
   * (REPLICATED: every rank holds the whole layer). tp_spans fills out[]
   * (at most ST_TP_SPANS_MAX) with rank `rank`'s parameters in the whole
   * layer and returns how many. */
  int (*tp_spans)(const StLayer *l, int rank, StTpSpan *out);
  /* The tensor a part's forward collective reduces when it is not the
   * layer's output, inside the saved block: part 1's output of a block in
   * parts (its x1: [N, d], or the rank's N / t rows under sequence
   * parallelism), a split loss's statistics (fp32 [4, rows]); NULL for
   * none. */
  void *(*tp_tensor)(const StLayer *l, int batch, StKDtype dt, int part, void *saved);
  /* A layer whose passes end after the group's reduction (an MoE expert:
   * its rows' MLP outputs, and their input gradients, are partial sums the
   * reduction completes before they are scattered into the stream):
   * tp_rows gives the rows the pass's collective reduces (in the saved
   * block; `elems` of them), tp_tail finishes the pass after it, into the
   * layer's output (forward) or input gradient (backward). NULL: none. */
  void *(*tp_rows)(const StLayer *l, int batch, StKDtype dt, StPass pass, void *saved,
                   size_t *elems);
  int (*tp_tail)(const StLayerCtx *c, const StLayer *l, int batch, StPass pass, void *saved,
                 void *target);
  /* Context parallelism (see StLayerCp), NULL for a type that has none:
   * the bytes of a pass's state, and what exchange k (1 .. of the pass, in
   * the schedule's order) of a group of c sends from the state and
   * receives into it, `elems` elements of dt each way, after adding
   * add_elems of add_from into add_to (0: nothing to add) (0 or an error
   * code). forward() and backward() run the steps when ctx->cp is set. */
  size_t (*cp_state_bytes)(const StLayer *l, int batch, StKDtype dt, int backward, int kind);
  int (*cp_exchange)(const StLayer *l, int batch, StKDtype dt, int backward, int kind, int k,
                     int c, void *state, const void **send, void **recv, size_t *elems,
                     void **add_to, const void **add_from, size_t *add_elems);
} StLayerImpl;

/* NULL when the type has no real implementation (custom layers). */
const StLayerImpl *st_layer_impl_find(const char *type);
/* NULL-terminated. */
const StLayerImpl *const *st_layer_impls(void);

/* Whether a layer's input is token ids (int32) rather than activations. */
gboolean st_layer_takes_ids(const StLayer *l);

/* ---- tensor parallelism (exec/layers/layer_split.c) ---------------------------------- */

/* The rows N a split layer computes on: every token of the micro-batch. */
int st_tp_rows(const StLayer *l, int batch);
/* The rows (of the N = batch x tokens a split layer computes on) whose
 * residual and row-parallel bias rank `rank` adds: all of them on rank 0
 * without sequence parallelism, none elsewhere; with it, the rank's own
 * slice [rank N / t, (rank + 1) N / t). */
void st_tp_own_rows(const StLayer *l, int batch, int rank, int *first, int *count);
/* The rank's spans (the impl's tp_spans; a REPLICATED layer: one span of all
 * its parameters, PARTIAL under sequence parallelism, else WHOLE). */
int st_tp_spans(const StLayer *l, int rank, StTpSpan *out);
/* part = the rank's elements of `whole` (fp32, the whole layer's vector). */
void st_tp_slice(const StLayer *l, int rank, const float *whole, float *part);
/* whole += ... the rank's elements put in place (gathering a split layer's
 * weights: WHOLE and PARTIAL spans written by every rank, the same values). */
void st_tp_place(const StLayer *l, int rank, const float *part, float *whole);
/* Elements of the rank's PARTIAL spans (what the group all-reduces). */
size_t st_tp_partial_elems(const StLayer *l);
