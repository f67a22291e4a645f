/* strategy_dp.c: synchronous data parallelism, as PyTorch DDP runs it.
 *
 * Every rank holds the whole model. Micro-batches run one after another on
 * the compute stream (gradient accumulation); during the backward pass of the
 * last one, each gradient bucket is all-reduced on the comm stream as soon as
 * the backward of its last layer ends, overlapping the rest of the backward.
 * The optimizer step waits for the last all-reduce (DDP's backward returns
 * only when every bucket is reduced) and runs as one fused kernel.
 *
 * With --sparsity p (sparse.h): each layer's backward writes a transient
 * dense gradient that a compress op gathers into the compressed gradient;
 * buckets hold non-zeros and the all-reduce moves the compressed vector; the
 * optimizer steps the non-zeros and one expand op writes the dense weights.
 */
#include "base/util.h"
#include "strategy/sparse.h"

typedef struct {
  StDpFrame *frame;
  int comm_stream;
  const StBucket *buckets;
  int n_buckets;
  int next_bucket;
  int last_micro;
  uint32_t last_reduce;
  const StSparse *sparse;  /* NULL when dense */
  uint32_t dense_grad;     /* the running backward's dense gradient (sparse) */
} Dp;

/* Sparse: the backward of a layer with weights writes its dense gradient. */
static void
before_pass(gpointer data, StPass pass, int layer, int micro, StPassExtra *extra)
{
  Dp *dp = data;
  const StLayer *l = &dp->frame->model->layers[layer];
  if (pass != ST_PASS_BWD || l->params == 0)
    return;
  dp->dense_grad = st_sparse_dense_grad_buffer(dp->sparse, dp->frame->program, l->name, layer,
                                               micro, l->params);
  extra->alloc[extra->n_alloc++] = dp->dense_grad;
}

static void
after_pass(gpointer data, StPass pass, int layer, int micro, uint32_t op)
{
  Dp *dp = data;
  StProgram *p = dp->frame->program;
  int64_t params = dp->frame->model->layers[layer].params;
  if (dp->sparse != NULL && pass == ST_PASS_BWD && params > 0)
    op = st_sparse_emit_compress(dp->sparse, p, dp->frame->compute, layer, micro, params, op,
                                 dp->dense_grad);
  if (pass != ST_PASS_BWD || micro != dp->last_micro || dp->next_bucket >= dp->n_buckets)
    return;
  const StBucket *b = &dp->buckets[dp->next_bucket];
  if (layer != b->last)
    return;
  StOp reduce = st_op_coll(dp->comm_stream, ST_COLL_ALL_REDUCE, dp->frame->world,
                           b->params * dp->frame->bytes.grad);
  g_autofree char *label = g_strdup_printf(dp->sparse ? "bucket %d compressed" : "bucket %d",
                                           dp->next_bucket);
  reduce.label = st_program_label(p, label);
  st_op_moves(&reduce, dp->sparse ? ST_DATA_GRADS_PACKED : ST_DATA_GRADS, b->last, b->first);
  st_program_begin(p, &reduce);
  st_program_after(p, op);
  dp->last_reduce = st_program_commit(p);
  dp->next_bucket++;
}

static StSchedule *
finish(StDpFrame *frame, const Dp *dp)
{
  const StOptions *o = frame->options;
  StSchedule *s = st_dp_frame_finish(frame);
  s->settings.strategy = g_strdup("dp");
  s->settings.description =
    g_strdup_printf("dp: %d rank%s, micro-batch %d x %d, %d gradient bucket%s", s->n_ranks,
                    st_plural(s->n_ranks), o->micro_batch, o->accumulation, dp->n_buckets,
                    st_plural(dp->n_buckets));
  st_schedule_note_number(s, "gradient_buckets", dp->n_buckets);
  st_schedule_note_number(s, "bucket_bytes", (double)o->bucket_bytes);
  return s;
}

/* --sparsity p > 0: compressed states, compress after each backward, the
 * compressed all-reduce, step and expand (sparse.h). */
static StSchedule *
build_sparse(const StStrategyInput *in, const StSparse *sparse)
{
  StDpFrame frame;
  st_dp_frame_init(&frame, in, "dp");
  StProgram *p = frame.program;
  const StModel *m = frame.model;
  const StOptions *o = in->options;
  g_autofree int64_t *nnz = st_sparse_layer_nnz(sparse, m);
  int64_t total_nnz = st_sparse_nnz_of_layers(sparse, m, 0, m->n_layers);
  g_autoptr(GArray) buckets =
    st_grad_buckets_of(nnz, 0, m->n_layers, o->bucket_bytes, frame.bytes.grad);
  Dp dp = {
    .frame = &frame,
    .comm_stream = st_program_add_stream(p, "comm", 0),
    .buckets = (const StBucket *)buckets->data,
    .n_buckets = (int)buckets->len,
    .last_micro = o->accumulation - 1,
    .last_reduce = UINT32_MAX,
    .sparse = sparse,
  };
  st_sparse_add_states(sparse, p, "", m->params, total_nnz, 0, m->n_layers - 1);
  StPassHooks hooks = {&dp, before_pass, after_pass};
  for (int micro = 0; micro < o->accumulation; micro++)
    st_dp_emit_micro_batch(&frame, micro, &hooks);
  StSparseSpan all = {"", 0, m->n_layers - 1, total_nnz};
  st_sparse_emit_step(sparse, p, frame.compute, m->params, &all, 1, dp.last_reduce);
  StSchedule *s = finish(&frame, &dp);
  st_sparse_note(sparse, s, total_nnz);
  return s;
}

static StSchedule *
build(const StStrategyInput *in, GError **error)
{
  StSparse sparse;
  if (!st_sparse_init(&sparse, in->options, error))
    return NULL;
  if (st_sparse_on(&sparse))
    return build_sparse(in, &sparse);
  StDpFrame frame;
  st_dp_frame_init(&frame, in, "dp");
  StProgram *p = frame.program;
  const StModel *m = frame.model;
  const StOptions *o = in->options;
  g_autoptr(GArray) buckets = st_grad_buckets(m, o->bucket_bytes, frame.bytes.grad);
  Dp dp = {
    .frame = &frame,
    .comm_stream = st_program_add_stream(p, "comm", 0),
    .buckets = (const StBucket *)buckets->data,
    .n_buckets = (int)buckets->len,
    .last_micro = o->accumulation - 1,
    .last_reduce = UINT32_MAX,
  };
  int last = m->n_layers - 1;
  uint32_t params =
    st_program_add_buffer(p, "params", ST_MEM_PARAMS, m->params * frame.bytes.weight, TRUE);
  uint32_t grads =
    st_program_add_buffer(p, "grads", ST_MEM_GRADS, m->params * frame.bytes.grad, TRUE);
  uint32_t states = st_program_add_buffer(p, "optimizer states", ST_MEM_OPTIMIZER,
                                          m->params * frame.bytes.optimizer, TRUE);
  st_program_buffer_holds(p, params, ST_DATA_PARAMS, 0, last, -1, 1);
  st_program_buffer_holds(p, grads, ST_DATA_GRADS, 0, last, -1, 1);
  st_program_buffer_holds(p, states, ST_DATA_OPTIM, 0, last, -1, 1);

  StPassHooks hooks = {&dp, NULL, after_pass};
  for (int micro = 0; micro < o->accumulation; micro++)
    st_dp_emit_micro_batch(&frame, micro, &hooks);

  StOp step = st_op_elementwise(frame.compute, ST_PASS_OPTIM, -1, m->params,
                                m->params * frame.bytes.optim_traffic);
  st_program_begin(p, &step);
  if (dp.last_reduce != UINT32_MAX)
    st_program_after(p, dp.last_reduce);
  st_program_commit(p);
  return finish(&frame, &dp);
}

/* What the planner varies only over the user's list (strategy.h). */
static const StStrategyKnob KNOBS[] = {
  {"recompute", NULL},
  {"recompute-every", NULL},
  {"recompute-ops", NULL},
  {"offload-activations", NULL},
  {NULL},
};

const StStrategy st_strategy_dp = {
  .name = "dp",
  .summary = "data parallelism: gradient buckets all-reduced while backward runs (PyTorch DDP)",
  .citation = "Li et al., PyTorch Distributed: Experiences on Accelerating Data Parallel "
              "Training, VLDB 2020",
  .build = build,
  .update = st_sparse_update,
  .estimate = st_dp_estimate,
  .knobs = KNOBS,
};
