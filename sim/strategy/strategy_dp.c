/* strategy_dp.c: synchronous data parallelism, as PyTorch DDP runs it.
 *
 * Every rank holds the whole model. Micro-batches run one after another on
 * the compute stream (gradient accumulation); during the backward pass of the
 * last one, each gradient bucket is all-reduced on the comm stream as soon as
 * the backward of its last layer ends, overlapping the rest of the backward.
 * The optimizer step waits for the last all-reduce (DDP's backward returns
 * only when every bucket is reduced) and runs as one fused kernel.
 */
#include "strategy/strategy_common.h"

typedef struct {
  StDpFrame *frame;
  int comm_stream;
  const StBucket *buckets;
  int n_buckets;
  int next_bucket;
  int last_micro;
  uint32_t last_reduce;
} Dp;

static void
after_pass(gpointer data, StPass pass, int layer, int micro, uint32_t op)
{
  Dp *dp = data;
  if (pass != ST_PASS_BWD || micro != dp->last_micro || dp->next_bucket >= dp->n_buckets)
    return;
  const StBucket *b = &dp->buckets[dp->next_bucket];
  if (layer != b->last)
    return;
  StProgram *p = dp->frame->program;
  StOp reduce = st_op_coll(dp->comm_stream, ST_COLL_ALL_REDUCE, dp->frame->world,
                           b->params * dp->frame->bytes.grad);
  g_autofree char *label = g_strdup_printf("bucket %d", dp->next_bucket);
  reduce.label = st_program_label(p, label);
  st_op_moves(&reduce, ST_DATA_GRADS, b->last, b->first);
  st_program_begin(p, &reduce);
  st_program_after(p, op);
  dp->last_reduce = st_program_commit(p);
  dp->next_bucket++;
}

static StSchedule *
build(const StStrategyInput *in, GError **error)
{
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

  StSchedule *s = st_dp_frame_finish(&frame);
  s->settings.strategy = g_strdup("dp");
  s->settings.description =
    g_strdup_printf("dp: %d ranks, micro-batch %d x %d, %d gradient bucket%s", s->n_ranks,
                    o->micro_batch, o->accumulation, dp.n_buckets, dp.n_buckets == 1 ? "" : "s");
  st_schedule_note_number(s, "gradient_buckets", dp.n_buckets);
  st_schedule_note_number(s, "bucket_bytes", (double)o->bucket_bytes);
  return s;
}

const StStrategy st_strategy_dp = {
  .name = "dp",
  .summary = "data parallelism: gradient buckets all-reduced while backward runs (PyTorch DDP)",
  .citation = "Li et al., PyTorch Distributed: Experiences on Accelerating Data Parallel "
              "Training, VLDB 2020",
  .build = build,
};
