/* sparse.h: SAMO, the sparse model-state modifier (Singh and Bhatele,
 * "Exploiting Sparsity in Pruned Neural Networks to Optimize Large Model
 * Training", IPDPS 2023), shared by dp, zero and pipeline (--sparsity p).
 *
 * The model is pruned to sparsity p by a fixed mask that every replica
 * shares; every layer keeps nnz(P) = P - floor(p * P) of its P parameters
 * (pruning assumed uniform over layers). The compute weights stay dense,
 * zeros stored, so forward and backward run dense kernels. Everything else
 * is kept for the non-zeros only, plus one int32 index list per layer:
 *
 *   per parameter  weights in the compute dtype             w = 2 (mixed) | 4 (fp32)
 *   per non-zero   gradient in the compute dtype            g = 2 | 4
 *                  fp32 gradient (mixed only: the second    4 | 0
 *                  copy; under fp32 the two coincide)
 *                  fp32 master weights + optimizer states   4 + 8 (Adam) | 4 + 4 (SGD)
 *                  int32 index                              4
 *   during the optimizer step, a compressed copy of the weights in the
 *   compute dtype (w per non-zero), expanded into the dense weights after it.
 *
 * So, mixed precision with Adam, persistent model-state bytes per parameter:
 *   dense  2 + 2 + 12                 = 16
 *   sparse 2 + (1 - p)(2 + 4 + 12 + 4) = 2 + 22 (1 - p)
 * and sparse is smaller only for p > 1 - 14/22 = 4/11 (about 0.36): below
 * that, the second gradient copy and the indices cost more than pruning
 * saves (st_sparse_breakeven). With p = 0 the modifier is off and the
 * strategies build exactly their dense schedules.
 *
 * What buffers hold (StBuffer.data, for the executor): the dense weights
 * ST_DATA_PARAMS, the indices ST_DATA_INDEX, the compressed gradients
 * ST_DATA_GRADS_PACKED (and _FP32, the copy), the compressed master weights
 * and states ST_DATA_OPTIM_PACKED, the compressed weights of the step
 * ST_DATA_PARAMS_PACKED; compressed collectives move ST_DATA_GRADS_PACKED
 * or ST_DATA_PARAMS_PACKED. The mask itself is the executor's (a seeded
 * generator at settings.sparsity): the schedule carries only p.
 *
 * Ops. Each layer's backward writes its dense gradient into a transient
 * buffer that a COMPRESS op right after it gathers into the compressed
 * gradient (so the dense gradient of the whole model never exists at once);
 * data-parallel reductions move the compressed vector (nnz x g bytes: the
 * mask is the same everywhere, so no index travels); the optimizer steps the
 * non-zeros and an EXPAND op scatters them into the dense weights. Compress
 * and expand are costed from a profile's "compress" / "expand" kernels at
 * x = non-zeros when it has them, else as bandwidth-bound elementwise work
 * over the bytes st_sparse_compress_op / st_sparse_expand_op state (a
 * roofline estimate, labelled so).
 */
#pragma once

#include "strategy/strategy.h"
#include "strategy/strategy_common.h"

typedef struct {
  double p;              /* fraction of weights pruned, [0, 1); 0 = off */
  StStateBytes dense;    /* the layout without the modifier */
  int grad;              /* per non-zero: gradient in the compute dtype */
  int grad_fp32;         /* per non-zero: the fp32 gradient copy (mixed only, else 0) */
  int optimizer;         /* per non-zero: fp32 master weights + optimizer states */
  int index;             /* per non-zero: int32 index */
  int temp;              /* per non-zero: compressed weights during the optimizer step */
  int optim_traffic;     /* bytes read and written per non-zero by one optimizer step */
} StSparse;

/* The update of dp, zero and pipeline: synchronous, on the pruned model
 * when --sparsity p > 0 (StStrategy.update). */
StUpdate st_sparse_update(const StOptions *options);

/* The layout for the options; fails naming --sparsity when p is not in [0, 1). */
gboolean st_sparse_init(StSparse *sparse, const StOptions *options, GError **error);

static inline gboolean
st_sparse_on(const StSparse *sparse)
{
  return sparse->p > 0;
}

/* Non-zeros of `params` parameters: params - floor(p * params); params when off. */
int64_t st_sparse_nnz(const StSparse *sparse, int64_t params);

/* Non-zeros of layers [begin, end) of `model`, layer by layer: the sum of
 * st_sparse_nnz over their parameters. */
int64_t st_sparse_nnz_of_layers(const StSparse *sparse, const StModel *model, int begin,
                                int end);

/* Non-zeros per layer ([n_layers], transfer full): what gradient buckets
 * hold under the modifier. */
int64_t *st_sparse_layer_nnz(const StSparse *sparse, const StModel *model);

/* Persistent compressed-state bytes per non-zero: grad + grad_fp32 + optimizer + index. */
int st_sparse_bytes_per_nnz(const StSparse *sparse);

/* Persistent model-state bytes of `params` parameters held whole (weights,
 * gradients, optimizer states, indices): the dense layout when off. */
int64_t st_sparse_state_bytes(const StSparse *sparse, int64_t params);

/* The same per parameter as a real number, w + (1 - p) * bytes_per_nnz
 * (the closed form above; dense: weight + grad + optimizer). */
double st_sparse_bytes_per_param(const StSparse *sparse);

/* The sparsity above which the sparse layout's persistent states are smaller
 * than the dense ones: 1 - (grad + optimizer) / bytes_per_nnz. */
double st_sparse_breakeven(const StSparse *sparse);

/* Declares the persistent model states of layers [layer, layer_last] holding
 * `params` parameters (`nnz` non-zeros) whole, sparse layout: dense weights,
 * indices, compressed gradients (one or two copies) and compressed optimizer
 * states. `what` prefixes the names ("" or "tied wte "). */
void st_sparse_add_states(const StSparse *sparse, StProgram *program, const char *what,
                          int64_t params, int64_t nnz, int layer, int layer_last);

/* A transient buffer (grads) for the dense gradient a layer's backward
 * writes: `params` elements in the compute dtype, micro-batch `micro`. */
uint32_t st_sparse_dense_grad_buffer(const StSparse *sparse, StProgram *program,
                                     const char *layer_name, int layer, int micro,
                                     int64_t params);

/* Op templates (elementwise COMP; the caller adds dependencies and memory).
 * compress: reads the layer's dense gradient (g * params: at the sparsities
 * of interest every 32-byte sector holds a non-zero, so all of it is read),
 * the indices (4 nnz), and adds into the compressed gradient (2 g nnz).
 * expand: reads compressed weights (w nnz) and indices (4 nnz) and writes
 * into the dense weights (w * params, whole sectors). Elements: nnz. */
StOp st_sparse_compress_op(const StSparse *sparse, int stream, int layer, int micro,
                           int64_t params);
StOp st_sparse_expand_op(const StSparse *sparse, int stream, int layer, int64_t params,
                         int64_t nnz);
/* The optimizer over `nnz` non-zeros (optim_traffic bytes each). */
StOp st_sparse_optim_op(const StSparse *sparse, int stream, int64_t nnz);

/* Layers whose non-zeros one optimizer step covers: a contiguous range (a
 * pipeline's tied copy of the embedding is a second one). */
typedef struct {
  const char *what;        /* prefix of its buffer's name ("" or "tied copy: ") */
  int layer, layer_last;
  int64_t nnz;             /* their non-zeros */
} StSparseSpan;

/* The optimizer step over the non-zeros of `spans` (of `params` parameters
 * in all), after `after` (UINT32_MAX: nothing), then the expand into the
 * dense weights, both on `stream`: the step allocates the compressed weights
 * of each span (params category, temp bytes per non-zero; data
 * ST_DATA_PARAMS_PACKED) that the expand frees. Returns the expand. */
uint32_t st_sparse_emit_step(const StSparse *sparse, StProgram *program, int stream,
                             int64_t params, const StSparseSpan *spans, int n_spans,
                             uint32_t after);

/* Notes for the report when on (none when off, so dense schedules stay as
 * they were): sparsity, non-zeros, model-state bytes per parameter (dense
 * and sparse) and the break-even sparsity; and the schedule's
 * settings.sparsity, from which an executor derives the mask. */
void st_sparse_note(const StSparse *sparse, StSchedule *schedule, int64_t nnz);

/* Emits compress right after `bwd` (its dependency) on `stream`, freeing
 * `dense_grad`; it allocates and frees a workspace of nnz x grad bytes into
 * which it gathers the values before adding them in. Returns the op. */
uint32_t st_sparse_emit_compress(const StSparse *sparse, StProgram *program, int stream,
                                 int layer, int micro, int64_t params, uint32_t bwd,
                                 uint32_t dense_grad);
