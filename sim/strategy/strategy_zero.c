/* strategy_zero.c: ZeRO-DP stages 1, 2 and 3 (Rajbhandari et al., SC 2020).
 *
 * With N ranks and P parameters, each rank keeps 1/N of:
 *   stage 1: optimizer states. Gradients are reduce-scattered per bucket
 *            when backward ends, each rank steps its shard, and the updated
 *            parameters are all-gathered before the next forward.
 *   stage 2: also gradients. Each bucket's gradient exists only from the
 *            backward of its first layer until its reduce-scatter, once per
 *            micro-batch; only the shard stays.
 *   stage 3: also parameters. Every layer's parameters are all-gathered
 *            before its forward and again before its backward and dropped
 *            after; `prefetch` gathers run ahead of the pass that needs them.
 *            Gathers and reductions use separate streams and communicators so
 *            a prefetch is not stuck behind a reduction.
 * Model states per rank (bytes, Adam in mixed precision, K = 12):
 *   stage 1: 2P + 2P + KP/N; stage 2: 2P + (2 + K)P/N; stage 3: (2 + 2 + K)P/N.
 */
#include "strategy/strategy_common.h"

typedef struct {
  StDpFrame *frame;
  int stage;
  int reduce_stream, gather_stream;
  int reduce_comm, gather_comm;
  const StBucket *buckets;
  int n_buckets;
  int next_bucket;           /* bucket the running backward fills */
  uint32_t bucket_buffer;    /* its gradient (stages 2 and 3) */
  int last_micro;
  uint32_t last_reduce;      /* UINT32_MAX until a reduction exists */
  /* Stage 3: passes that needed a gather, in order, to bound prefetching. */
  GArray *gathered_passes;   /* uint32 op ids */
  uint32_t optimizer_ref;    /* forward reference to this step's optimizer */
} Zero;

static uint32_t
emit_gather(Zero *z, int layer, int micro, StPass pass)
{
  StDpFrame *f = z->frame;
  StProgram *p = f->program;
  const StLayer *l = &f->model->layers[layer];
  g_autofree char *name = g_strdup_printf("gathered %s %s m%d", l->name, st_pass_name(pass),
                                          micro);
  uint32_t buffer = st_program_add_buffer(p, name, ST_MEM_PARAMS, l->params * f->bytes.weight,
                                          FALSE);
  st_program_buffer_holds(p, buffer, ST_DATA_PARAMS, layer, layer, micro, 1);
  StOp op = st_op_coll(z->gather_stream, ST_COLL_ALL_GATHER, z->gather_comm,
                       l->params * f->bytes.weight);
  g_autofree char *label = g_strdup_printf("%s %s", l->name, st_pass_name(pass));
  op.label = st_program_label(p, label);
  st_op_moves(&op, ST_DATA_PARAMS, layer, layer);
  op.micro = micro;
  st_program_begin(p, &op);
  st_program_alloc(p, buffer);
  /* At most `prefetch` gathers ahead: wait for the pass that used the
   * gather prefetch + 1 places back. The first gather of a step waits for
   * the previous step's optimizer (its shard must be updated). */
  guint n = z->gathered_passes->len;
  guint back = (guint)f->options->prefetch + 1;
  if (n >= back)
    st_program_after(p, g_array_index(z->gathered_passes, uint32_t, n - back));
  if (n == 0)
    st_program_after_prev_step(p, z->optimizer_ref);
  st_program_commit(p);
  return buffer;
}

static void
before_pass(gpointer data, StPass pass, int layer, int micro, StPassExtra *extra)
{
  Zero *z = data;
  StDpFrame *f = z->frame;
  const StLayer *l = &f->model->layers[layer];
  if (z->stage == 3 && l->params > 0) {
    uint32_t buffer = emit_gather(z, layer, micro, pass);
    extra->after[extra->n_after++] = f->program->ops->len - 1;
    extra->free[extra->n_free++] = buffer;
  }
  if (pass == ST_PASS_FWD && layer == 0 && micro == 0 && z->stage < 3)
    extra->after_prev_step[extra->n_after_prev_step++] = z->optimizer_ref; /* see build() */
  if (pass == ST_PASS_BWD && z->stage >= 2 && z->next_bucket < z->n_buckets &&
      layer == z->buckets[z->next_bucket].first) {
    g_autofree char *name = g_strdup_printf("grad bucket %d m%d", z->next_bucket, micro);
    const StBucket *b = &z->buckets[z->next_bucket];
    z->bucket_buffer =
      st_program_add_buffer(f->program, name, ST_MEM_GRADS, b->params * f->bytes.grad, FALSE);
    st_program_buffer_holds(f->program, z->bucket_buffer, ST_DATA_GRADS, b->last, b->first,
                            micro, 1);
    extra->alloc[extra->n_alloc++] = z->bucket_buffer;
  }
}

static void
after_pass(gpointer data, StPass pass, int layer, int micro, uint32_t op)
{
  Zero *z = data;
  StDpFrame *f = z->frame;
  StProgram *p = f->program;
  if (z->stage == 3 && f->model->layers[layer].params > 0)
    g_array_append_val(z->gathered_passes, op);
  if (pass != ST_PASS_BWD || z->next_bucket >= z->n_buckets)
    return;
  const StBucket *b = &z->buckets[z->next_bucket];
  if (layer != b->last)
    return;
  /* Stage 1 reduces once, after the last micro-batch; stages 2 and 3 after
   * each micro-batch, since they keep no full gradient to accumulate into. */
  if (z->stage >= 2 || micro == z->last_micro) {
    StOp rs = st_op_coll(z->reduce_stream, ST_COLL_REDUCE_SCATTER, z->reduce_comm,
                         b->params * f->bytes.grad);
    g_autofree char *label = g_strdup_printf("bucket %d", z->next_bucket);
    rs.label = st_program_label(p, label);
    st_op_moves(&rs, ST_DATA_GRADS, b->last, b->first);
    rs.micro = micro;
    st_program_begin(p, &rs);
    st_program_after(p, op);
    if (z->stage >= 2)
      st_program_free_buffer(p, z->bucket_buffer);
    z->last_reduce = st_program_commit(p);
  }
  z->next_bucket++;
}

static StSchedule *
build(const StStrategyInput *in, GError **error)
{
  const StOptions *o = in->options;
  StDpFrame frame;
  st_dp_frame_init(&frame, in, "zero");
  StProgram *p = frame.program;
  const StModel *m = frame.model;
  int n = o->ranks;
  /* Each layer's parameters are cut into n slices (the last may be short), so
   * a single layer can be gathered; a rank keeps one slice of each. */
  int64_t shard = 0;
  for (int i = 0; i < m->n_layers; i++)
    shard += st_shard(m->layers[i].params, n);
  g_autoptr(GArray) buckets = st_grad_buckets(m, o->bucket_bytes, frame.bytes.grad);
  g_autoptr(GArray) gathered = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  Zero z = {
    .frame = &frame,
    .stage = o->zero_stage > 0 ? o->zero_stage : 1,
    .buckets = (const StBucket *)buckets->data,
    .n_buckets = (int)buckets->len,
    .last_micro = o->accumulation - 1,
    .last_reduce = UINT32_MAX,
    .gathered_passes = gathered,
    .optimizer_ref = st_program_forward_ref(p),
  };
  if (z.stage == 3) {
    z.gather_stream = st_program_add_stream(p, "gather", 0);
    z.reduce_stream = st_program_add_stream(p, "reduce", 0);
    z.gather_comm = st_schedule_add_world(frame.schedule, "gather");
    z.reduce_comm = st_schedule_add_world(frame.schedule, "reduce");
  } else {
    z.reduce_stream = z.gather_stream = st_program_add_stream(p, "comm", 0);
    z.reduce_comm = z.gather_comm = frame.world;
  }
  int last = m->n_layers - 1;
  uint32_t params =
    st_program_add_buffer(p, z.stage == 3 ? "params shard" : "params", ST_MEM_PARAMS,
                          (z.stage == 3 ? shard : m->params) * frame.bytes.weight, TRUE);
  uint32_t grads =
    st_program_add_buffer(p, z.stage >= 2 ? "grads shard" : "grads", ST_MEM_GRADS,
                          (z.stage >= 2 ? shard : m->params) * frame.bytes.grad, TRUE);
  uint32_t states = st_program_add_buffer(p, "optimizer states shard", ST_MEM_OPTIMIZER,
                                          shard * frame.bytes.optimizer, TRUE);
  st_program_buffer_holds(p, params, z.stage == 3 ? ST_DATA_PARAMS_SHARD : ST_DATA_PARAMS, 0,
                          last, -1, z.stage == 3 ? n : 1);
  st_program_buffer_holds(p, grads, z.stage >= 2 ? ST_DATA_GRADS_SHARD : ST_DATA_GRADS, 0, last,
                          -1, z.stage >= 2 ? n : 1);
  st_program_buffer_holds(p, states, ST_DATA_OPTIM_SHARD, 0, last, -1, n);

  StPassHooks hooks = {&z, before_pass, after_pass};
  for (int micro = 0; micro < o->accumulation; micro++) {
    z.next_bucket = 0;
    st_dp_emit_micro_batch(&frame, micro, &hooks);
  }

  StOp step = st_op_elementwise(frame.compute, ST_PASS_OPTIM, -1, shard,
                                shard * frame.bytes.optim_traffic);
  st_program_begin(p, &step);
  if (z.last_reduce != UINT32_MAX)
    st_program_after(p, z.last_reduce);
  uint32_t optimizer = st_program_commit(p);
  /* Stages 1 and 2 gather the updated parameters right after the step; the
   * next forward waits for the last gather. Stage 3 gathers them on use. */
  uint32_t next_step_waits_for = optimizer;
  for (int b = 0; z.stage < 3 && b < z.n_buckets; b++) {
    StOp ag = st_op_coll(z.gather_stream, ST_COLL_ALL_GATHER, z.gather_comm,
                         z.buckets[b].params * frame.bytes.weight);
    g_autofree char *label = g_strdup_printf("bucket %d params", b);
    ag.label = st_program_label(p, label);
    st_op_moves(&ag, ST_DATA_PARAMS, z.buckets[b].last, z.buckets[b].first);
    st_program_begin(p, &ag);
    st_program_after(p, optimizer);
    next_step_waits_for = st_program_commit(p);
  }
  st_program_resolve(p, z.optimizer_ref, next_step_waits_for);

  StSchedule *s = st_dp_frame_finish(&frame);
  s->settings.strategy = g_strdup("zero");
  s->settings.description =
    g_strdup_printf("zero stage %d: %d ranks, micro-batch %d x %d, %d gradient bucket%s%s",
                    z.stage, s->n_ranks, o->micro_batch, o->accumulation, z.n_buckets,
                    z.n_buckets == 1 ? "" : "s",
                    z.stage == 3 ? ", parameters gathered per layer" : "");
  st_schedule_note_number(s, "zero_stage", z.stage);
  st_schedule_note_number(s, "gradient_buckets", z.n_buckets);
  if (z.stage == 3)
    st_schedule_note_number(s, "prefetch", o->prefetch);
  return s;
}

static const StStrategyKnob KNOBS[] = {
  {"zero-stage", "1,2,3"},
  {NULL},
};

const StStrategy st_strategy_zero = {
  .name = "zero",
  .summary = "ZeRO-DP: optimizer states (1), gradients (2) and parameters (3) sharded over "
             "ranks; reduce-scatter + all-gather",
  .citation = "Rajbhandari et al., ZeRO: Memory Optimizations Toward Training Trillion "
              "Parameter Models, SC 2020",
  .build = build,
  .knobs = KNOBS,
};
