/* sparse.c: see sparse.h. */
#include "strategy/sparse.h"

StUpdate
st_sparse_update(const StOptions *o)
{
  if (o->sparsity > 0)
    return (StUpdate){ST_UPDATE_PRUNED, "synchronous SGD/Adam on the model pruned by a fixed "
                                        "mask"};
  return (StUpdate){ST_UPDATE_SYNC, "synchronous SGD/Adam"};
}

#include <math.h>

#include "strategy/strategy.h"

gboolean
st_sparse_init(StSparse *sp, const StOptions *o, GError **error)
{
  if (!(o->sparsity >= 0 && o->sparsity < 1)) {
    g_set_error(error, ST_STRATEGY_ERROR, ST_ERROR_INVALID,
                "--sparsity %g: must be at least 0 and below 1 (the fraction of weights "
                "pruned)",
                o->sparsity);
    return FALSE;
  }
  StStateBytes dense;
  st_state_bytes(o, &dense);
  gboolean mixed = st_precision_16bit(o->precision);
  int states = o->optimizer == ST_OPTIMIZER_ADAM ? 8 : 4; /* fp32 m and v, or momentum */
  *sp = (StSparse){
    .p = o->sparsity,
    .dense = dense,
    .grad = dense.grad,
    .grad_fp32 = mixed ? 4 : 0,
    .optimizer = states + 4, /* + the fp32 master weights of the non-zeros */
    .index = 4,
    .temp = dense.weight,
    /* Per non-zero: master weights read and written (4 + 4), the gradient
     * read in the compute dtype (g), under mixed precision written and read
     * back as the fp32 copy (4 + 4), the states read and written (2 x
     * states), and the compressed weights written for expansion (w). Mixed
     * Adam: 36 bytes against the dense step's 28. */
    .optim_traffic = 8 + dense.grad + (mixed ? 8 : 0) + 2 * states + dense.weight,
  };
  return TRUE;
}

int64_t
st_sparse_nnz(const StSparse *sp, int64_t params)
{
  return params - (int64_t)floor(sp->p * (double)params);
}

int64_t
st_sparse_nnz_of_layers(const StSparse *sp, const StModel *m, int begin, int end)
{
  int64_t nnz = 0;
  for (int i = begin; i < end; i++)
    nnz += st_sparse_nnz(sp, m->layers[i].params);
  return nnz;
}

int64_t *
st_sparse_layer_nnz(const StSparse *sp, const StModel *m)
{
  int64_t *nnz = g_new(int64_t, m->n_layers > 0 ? m->n_layers : 1);
  for (int i = 0; i < m->n_layers; i++)
    nnz[i] = st_sparse_nnz(sp, m->layers[i].params);
  return nnz;
}

int
st_sparse_bytes_per_nnz(const StSparse *sp)
{
  return sp->grad + sp->grad_fp32 + sp->optimizer + sp->index;
}

int64_t
st_sparse_state_bytes(const StSparse *sp, int64_t params)
{
  if (!st_sparse_on(sp))
    return params * (sp->dense.weight + sp->dense.grad + sp->dense.optimizer);
  return params * sp->dense.weight + st_sparse_nnz(sp, params) * st_sparse_bytes_per_nnz(sp);
}

double
st_sparse_bytes_per_param(const StSparse *sp)
{
  if (!st_sparse_on(sp))
    return sp->dense.weight + sp->dense.grad + sp->dense.optimizer;
  return sp->dense.weight + (1 - sp->p) * st_sparse_bytes_per_nnz(sp);
}

double
st_sparse_breakeven(const StSparse *sp)
{
  return 1.0 - (double)(sp->dense.grad + sp->dense.optimizer) / st_sparse_bytes_per_nnz(sp);
}

void
st_sparse_add_states(const StSparse *sp, StProgram *p, const char *what, int64_t params,
                     int64_t nnz, int layer, int layer_last)
{
  g_autofree char *weights = g_strdup_printf("%sparams (dense)", what);
  uint32_t w = st_program_add_buffer(p, weights, ST_MEM_PARAMS, params * sp->dense.weight, TRUE);
  st_program_buffer_holds(p, w, ST_DATA_PARAMS, layer, layer_last, -1, 1);
  g_autofree char *index = g_strdup_printf("%snon-zero indices (int32)", what);
  uint32_t x = st_program_add_buffer(p, index, ST_MEM_PARAMS, nnz * sp->index, TRUE);
  st_program_buffer_holds(p, x, ST_DATA_INDEX, layer, layer_last, -1, 1);
  g_autofree char *grads = g_strdup_printf("%sgrads (compressed)", what);
  uint32_t g = st_program_add_buffer(p, grads, ST_MEM_GRADS, nnz * sp->grad, TRUE);
  st_program_buffer_holds(p, g, ST_DATA_GRADS_PACKED, layer, layer_last, -1, 1);
  if (sp->grad_fp32 > 0) {
    g_autofree char *grads32 = g_strdup_printf("%sgrads (compressed, fp32)", what);
    uint32_t g32 = st_program_add_buffer(p, grads32, ST_MEM_GRADS, nnz * sp->grad_fp32, TRUE);
    st_program_buffer_holds(p, g32, ST_DATA_GRADS_PACKED_FP32, layer, layer_last, -1, 1);
  }
  g_autofree char *states = g_strdup_printf("%soptimizer states (compressed)", what);
  uint32_t o = st_program_add_buffer(p, states, ST_MEM_OPTIMIZER, nnz * sp->optimizer, TRUE);
  st_program_buffer_holds(p, o, ST_DATA_OPTIM_PACKED, layer, layer_last, -1, 1);
}

uint32_t
st_sparse_dense_grad_buffer(const StSparse *sp, StProgram *p, const char *layer_name,
                            int layer, int micro, int64_t params)
{
  g_autofree char *name = g_strdup_printf("dense grad %s m%d", layer_name, micro);
  uint32_t b = st_program_add_buffer(p, name, ST_MEM_GRADS, params * sp->grad, FALSE);
  st_program_buffer_holds(p, b, ST_DATA_GRADS, layer, layer, micro, 1);
  return b;
}

StOp
st_sparse_compress_op(const StSparse *sp, int stream, int layer, int micro, int64_t params)
{
  int64_t nnz = st_sparse_nnz(sp, params);
  StOp op = st_op_elementwise(stream, ST_PASS_COMPRESS, layer, nnz,
                              params * sp->grad + nnz * sp->index + 2 * nnz * sp->grad);
  op.micro = micro;
  return op;
}

StOp
st_sparse_expand_op(const StSparse *sp, int stream, int layer, int64_t params, int64_t nnz)
{
  return st_op_elementwise(stream, ST_PASS_EXPAND, layer, nnz,
                           nnz * (sp->temp + sp->index) + params * sp->dense.weight);
}

StOp
st_sparse_optim_op(const StSparse *sp, int stream, int64_t nnz)
{
  return st_op_elementwise(stream, ST_PASS_OPTIM, -1, nnz, nnz * sp->optim_traffic);
}

uint32_t
st_sparse_emit_compress(const StSparse *sp, StProgram *p, int stream, int layer, int micro,
                        int64_t params, uint32_t bwd, uint32_t dense_grad)
{
  /* The values gathered before they are added in: opaque, so the executor
   * allocates it and op_compress uses it (exec/op_update.c). */
  g_autofree char *name = g_strdup_printf("compressed values of layer %d m%d", layer, micro);
  uint32_t values = st_program_add_buffer(p, name, ST_MEM_WORKSPACE,
                                          st_sparse_nnz(sp, params) * sp->grad, FALSE);
  StOp op = st_sparse_compress_op(sp, stream, layer, micro, params);
  st_program_begin(p, &op);
  st_program_after(p, bwd);
  st_program_alloc(p, values);
  st_program_free_buffer(p, values);
  st_program_free_buffer(p, dense_grad);
  return st_program_commit(p);
}

uint32_t
st_sparse_emit_step(const StSparse *sp, StProgram *p, int stream, int64_t params,
                    const StSparseSpan *spans, int n_spans, uint32_t after)
{
  g_autofree uint32_t *temp = g_new(uint32_t, MAX(n_spans, 1));
  int64_t nnz = 0;
  for (int k = 0; k < n_spans; k++) {
    g_autofree char *name = g_strdup_printf("%scompressed weights (optimizer step)",
                                            spans[k].what);
    temp[k] = st_program_add_buffer(p, name, ST_MEM_PARAMS, spans[k].nnz * sp->temp, FALSE);
    st_program_buffer_holds(p, temp[k], ST_DATA_PARAMS_PACKED, spans[k].layer,
                            spans[k].layer_last, -1, 1);
    nnz += spans[k].nnz;
  }
  StOp step = st_sparse_optim_op(sp, stream, nnz);
  st_program_begin(p, &step);
  if (after != UINT32_MAX)
    st_program_after(p, after);
  for (int k = 0; k < n_spans; k++)
    st_program_alloc(p, temp[k]);
  uint32_t optim = st_program_commit(p);
  StOp expand = st_sparse_expand_op(sp, stream, -1, params, nnz);
  st_program_begin(p, &expand);
  st_program_after(p, optim);
  for (int k = 0; k < n_spans; k++)
    st_program_free_buffer(p, temp[k]);
  return st_program_commit(p);
}

void
st_sparse_note(const StSparse *sp, StSchedule *s, int64_t nnz)
{
  if (!st_sparse_on(sp))
    return;
  s->settings.sparsity = sp->p;
  st_schedule_note_number(s, "sparsity", sp->p);
  StSparse dense = *sp;
  dense.p = 0;
  st_schedule_note_number(s, "nonzeros", (double)nnz);
  st_schedule_note_number(s, "model_state_bytes_per_param", st_sparse_bytes_per_param(sp));
  st_schedule_note_number(s, "model_state_bytes_per_param_dense",
                          st_sparse_bytes_per_param(&dense));
  st_schedule_note_number(s, "sparse_breakeven", st_sparse_breakeven(sp));
}
