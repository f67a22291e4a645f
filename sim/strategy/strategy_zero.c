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
 *
 * With --sparsity p (sparse.h), Z = nnz non-zeros: reductions and gathers
 * move compressed vectors; every rank keeps the index lists (4Z: backward
 * compresses every layer and stage 3 expands every gathered one); stages 1
 * and 2 keep the dense 16-bit weights and, after the step, gather the
 * compressed weights into a temporary copy that an expand scatters into
 * them; stage 3 keeps its slice of the compressed weights and expands each
 * gathered layer on the gather stream. Mixed Adam, per rank:
 *   stage 1: 2P + 4Z + 2Z + (4 + 12)Z/N; stage 2: 2P + 4Z + (2 + 4 + 12)Z/N;
 *   stage 3: 4Z + (2 + 2 + 4 + 12)Z/N.
 */
#include "base/util.h"
#include "strategy/sparse.h"

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
  const StSparse *sparse;    /* NULL when dense */
  uint32_t dense_grad;       /* the running backward's dense gradient (sparse) */
} Zero;

/* The layer whose weights a pass of `layer` reads: its own, or those it is
 * tied to (a tied LM head reads the embedding's); -1 when none. */
static int
weights_of(const StModel *m, int layer)
{
  int tied = st_model_tied_layer(m, layer);
  return tied >= 0 ? tied : m->layers[layer].params > 0 ? layer : -1;
}

/* Gathers the weights of `layer` for a pass of `pass_layer` (the layer
 * itself, or one whose weights a tied head reads). */
static uint32_t
emit_gather(Zero *z, int layer, int pass_layer, int micro, StPass pass)
{
  StDpFrame *f = z->frame;
  StProgram *p = f->program;
  const StLayer *l = &f->model->layers[layer];
  const StLayer *user = &f->model->layers[pass_layer];
  g_autofree char *name =
    layer == pass_layer
      ? g_strdup_printf("gathered %s %s m%d", user->name, st_pass_name(pass), micro)
      : g_strdup_printf("gathered %s (%s) %s m%d", user->name, l->name, st_pass_name(pass),
                        micro);
  uint32_t buffer = st_program_add_buffer(p, name, ST_MEM_PARAMS, l->params * f->bytes.weight,
                                          FALSE);
  st_program_buffer_holds(p, buffer, ST_DATA_PARAMS, layer, layer, micro, 1);
  /* Sparse: the slices gathered are compressed, then expanded into `buffer`. */
  int64_t nnz = z->sparse ? st_sparse_nnz(z->sparse, l->params) : l->params;
  uint32_t packed = UINT32_MAX;
  if (z->sparse != NULL) {
    g_autofree char *packed_name = g_strdup_printf("gathered compressed %s %s m%d", l->name,
                                                   st_pass_name(pass), micro);
    packed = st_program_add_buffer(p, packed_name, ST_MEM_PARAMS, nnz * f->bytes.weight, FALSE);
    st_program_buffer_holds(p, packed, ST_DATA_PARAMS_PACKED, layer, layer, micro, 1);
  }
  StOp op = st_op_coll(z->gather_stream, ST_COLL_ALL_GATHER, z->gather_comm,
                       nnz * f->bytes.weight);
  g_autofree char *label = g_strdup_printf("%s %s", user->name, st_pass_name(pass));
  op.label = st_program_label(p, label);
  st_op_moves(&op, z->sparse ? ST_DATA_PARAMS_PACKED : ST_DATA_PARAMS, layer, layer);
  op.micro = micro;
  st_program_begin(p, &op);
  st_program_alloc(p, z->sparse ? packed : buffer);
  /* At most `prefetch` gathers ahead: wait for the pass that used the
   * gather prefetch + 1 places back. The first gather of a step waits for
   * the previous step's optimizer (its shard must be updated). */
  guint n = z->gathered_passes->len;
  guint back = (guint)f->options->prefetch + 1;
  if (n >= back)
    st_program_after(p, g_array_index(z->gathered_passes, uint32_t, n - back));
  if (n == 0)
    st_program_after_prev_step(p, z->optimizer_ref);
  uint32_t gather = st_program_commit(p);
  if (z->sparse != NULL) {
    StOp expand = st_sparse_expand_op(z->sparse, z->gather_stream, layer, l->params, nnz);
    expand.micro = micro;
    st_program_begin(p, &expand);
    st_program_after(p, gather);
    st_program_alloc(p, buffer);
    st_program_free_buffer(p, packed);
    st_program_commit(p);
  }
  return buffer;
}

static void
before_pass(gpointer data, StPass pass, int layer, int micro, StPassExtra *extra)
{
  Zero *z = data;
  StDpFrame *f = z->frame;
  const StLayer *l = &f->model->layers[layer];
  if (z->stage == 3) {
    /* A tied head reads the weights it is tied to and, when it has one, a
     * bias of its own: both are gathered. */
    int tied = st_model_tied_layer(f->model, layer);
    int owners[2] = {tied, l->params > 0 ? layer : -1};
    for (int k = 0; k < 2; k++) {
      if (owners[k] < 0)
        continue;
      uint32_t buffer = emit_gather(z, owners[k], layer, micro, pass);
      extra->after[extra->n_after++] = f->program->ops->len - 1;
      extra->free[extra->n_free++] = buffer;
    }
  }
  if (pass == ST_PASS_FWD && layer == 0 && micro == 0 && z->stage < 3)
    extra->after_prev_step[extra->n_after_prev_step++] = z->optimizer_ref; /* see build() */
  if (pass == ST_PASS_BWD && z->sparse != NULL && l->params > 0) {
    z->dense_grad =
      st_sparse_dense_grad_buffer(z->sparse, f->program, l->name, layer, micro, l->params);
    extra->alloc[extra->n_alloc++] = z->dense_grad;
  }
  if (pass == ST_PASS_BWD && z->stage >= 2 && z->next_bucket < z->n_buckets &&
      layer == z->buckets[z->next_bucket].first) {
    g_autofree char *name = g_strdup_printf("grad bucket %d m%d", z->next_bucket, micro);
    const StBucket *b = &z->buckets[z->next_bucket];
    z->bucket_buffer =
      st_program_add_buffer(f->program, name, ST_MEM_GRADS, b->params * f->bytes.grad, FALSE);
    st_program_buffer_holds(f->program, z->bucket_buffer,
                            z->sparse ? ST_DATA_GRADS_PACKED : ST_DATA_GRADS, b->last, b->first,
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
  int64_t params = f->model->layers[layer].params;
  if (z->stage == 3 && weights_of(f->model, layer) >= 0)
    g_array_append_val(z->gathered_passes, op);
  if (z->sparse != NULL && pass == ST_PASS_BWD && params > 0)
    op = st_sparse_emit_compress(z->sparse, p, f->compute, layer, micro, params, op,
                                 z->dense_grad);
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
    g_autofree char *label =
      g_strdup_printf(z->sparse ? "bucket %d compressed" : "bucket %d", z->next_bucket);
    rs.label = st_program_label(p, label);
    st_op_moves(&rs, z->sparse ? ST_DATA_GRADS_PACKED : ST_DATA_GRADS, b->last, b->first);
    rs.micro = micro;
    /* The reduced slice lands in a buffer of its own while the collective
     * runs, then is added to (or copied into) the gradient shard: NCCL's
     * out-of-place reduce-scatter, and accumulation over micro-batches.
     * Each layer's slice is rounded up on its own: at most one element per
     * layer over the bucket's share. */
    g_autofree char *slice_name =
      g_strdup_printf("reduce-scatter slice, bucket %d m%d", z->next_bucket, micro);
    int64_t slice_elems = st_shard(b->params, f->options->ranks) + b->first - b->last + 1;
    uint32_t slice =
      st_program_add_buffer(p, slice_name, ST_MEM_COMM, slice_elems * f->bytes.grad, FALSE);
    st_program_begin(p, &rs);
    st_program_after(p, op);
    st_program_alloc(p, slice);
    st_program_free_buffer(p, slice);
    if (z->stage >= 2)
      st_program_free_buffer(p, z->bucket_buffer);
    z->last_reduce = st_program_commit(p);
  }
  z->next_bucket++;
}

/* Sparse persistent states (see the top): `shard` non-zeros of `nnz` here. */
static void
add_sparse_states(const Zero *z, int64_t shard, int64_t nnz)
{
  const StSparse *sp = z->sparse;
  StProgram *p = z->frame->program;
  const StModel *m = z->frame->model;
  int n = z->frame->options->ranks, last = m->n_layers - 1;
  uint32_t b;
  if (z->stage < 3) {
    b = st_program_add_buffer(p, "params (dense)", ST_MEM_PARAMS, m->params * sp->dense.weight,
                              TRUE);
    st_program_buffer_holds(p, b, ST_DATA_PARAMS, 0, last, -1, 1);
  } else {
    b = st_program_add_buffer(p, "params shard (compressed)", ST_MEM_PARAMS,
                              shard * sp->dense.weight, TRUE);
    st_program_buffer_holds(p, b, ST_DATA_PARAMS_PACKED_SHARD, 0, last, -1, n);
  }
  b = st_program_add_buffer(p, "non-zero indices (int32)", ST_MEM_PARAMS, nnz * sp->index, TRUE);
  st_program_buffer_holds(p, b, ST_DATA_INDEX, 0, last, -1, 1);
  if (z->stage == 1) {
    b = st_program_add_buffer(p, "grads (compressed)", ST_MEM_GRADS, nnz * sp->grad, TRUE);
    st_program_buffer_holds(p, b, ST_DATA_GRADS_PACKED, 0, last, -1, 1);
  } else {
    b = st_program_add_buffer(p, "grads shard (compressed)", ST_MEM_GRADS, shard * sp->grad,
                              TRUE);
    st_program_buffer_holds(p, b, ST_DATA_GRADS_PACKED_SHARD, 0, last, -1, n);
  }
  if (sp->grad_fp32 > 0) {
    b = st_program_add_buffer(p, "grads shard (compressed, fp32)", ST_MEM_GRADS,
                              shard * sp->grad_fp32, TRUE);
    st_program_buffer_holds(p, b, ST_DATA_GRADS_PACKED_FP32, 0, last, -1, n);
  }
  b = st_program_add_buffer(p, "optimizer states shard (compressed)", ST_MEM_OPTIMIZER,
                            shard * sp->optimizer, TRUE);
  st_program_buffer_holds(p, b, ST_DATA_OPTIM_PACKED_SHARD, 0, last, -1, n);
}

static StSchedule *
build(const StStrategyInput *in, GError **error)
{
  const StOptions *o = in->options;
  StSparse sparse;
  if (!st_sparse_init(&sparse, o, error))
    return NULL;
  const StSparse *sp = st_sparse_on(&sparse) ? &sparse : NULL;
  StDpFrame frame;
  st_dp_frame_init(&frame, in, "zero");
  StProgram *p = frame.program;
  const StModel *m = frame.model;
  int n = o->ranks;
  /* What gradients, shards and gathers hold per layer: its parameters, or
   * their non-zeros. */
  g_autofree int64_t *elems = sp ? st_sparse_layer_nnz(sp, m) : g_new(int64_t, m->n_layers);
  for (int i = 0; sp == NULL && i < m->n_layers; i++)
    elems[i] = m->layers[i].params;
  /* Each layer's parameters are cut into n slices (the last may be short), so
   * a single layer can be gathered; a rank keeps one slice of each. */
  int64_t shard = 0, nnz = 0;
  for (int i = 0; i < m->n_layers; i++) {
    shard += st_shard(elems[i], n);
    nnz += elems[i];
  }
  g_autoptr(GArray) buckets =
    st_grad_buckets_of(elems, 0, m->n_layers, o->bucket_bytes, frame.bytes.grad);
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
    .sparse = sp,
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
  if (sp != NULL) {
    add_sparse_states(&z, shard, nnz);
  } else {
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
    st_program_buffer_holds(p, grads, z.stage >= 2 ? ST_DATA_GRADS_SHARD : ST_DATA_GRADS, 0,
                            last, -1, z.stage >= 2 ? n : 1);
    st_program_buffer_holds(p, states, ST_DATA_OPTIM_SHARD, 0, last, -1, n);
  }

  StPassHooks hooks = {&z, before_pass, after_pass};
  for (int micro = 0; micro < o->accumulation; micro++) {
    z.next_bucket = 0;
    st_dp_emit_micro_batch(&frame, micro, &hooks);
  }

  /* Sparse stages 1-2: the step writes its slice of the compressed weights
   * into a full compressed copy that the gathers fill and an expand empties. */
  uint32_t temp = UINT32_MAX;
  if (sp != NULL && z.stage < 3)
    temp = st_program_add_buffer(p, "compressed weights (optimizer step)", ST_MEM_PARAMS,
                                 nnz * sp->temp, FALSE);
  if (temp != UINT32_MAX)
    st_program_buffer_holds(p, temp, ST_DATA_PARAMS_PACKED, 0, m->n_layers - 1, -1, 1);
  StOp step = sp != NULL ? st_sparse_optim_op(sp, frame.compute, shard)
                         : st_op_elementwise(frame.compute, ST_PASS_OPTIM, -1, shard,
                                             shard * frame.bytes.optim_traffic);
  st_program_begin(p, &step);
  if (z.last_reduce != UINT32_MAX)
    st_program_after(p, z.last_reduce);
  if (temp != UINT32_MAX)
    st_program_alloc(p, temp);
  uint32_t optimizer = st_program_commit(p);
  /* Stages 1 and 2 gather the updated parameters right after the step; the
   * next forward waits for the last gather. Stage 3 gathers them on use. */
  uint32_t next_step_waits_for = optimizer;
  for (int b = 0; z.stage < 3 && b < z.n_buckets; b++) {
    StOp ag = st_op_coll(z.gather_stream, ST_COLL_ALL_GATHER, z.gather_comm,
                         z.buckets[b].params * frame.bytes.weight);
    g_autofree char *label =
      g_strdup_printf(sp ? "bucket %d params compressed" : "bucket %d params", b);
    ag.label = st_program_label(p, label);
    st_op_moves(&ag, sp ? ST_DATA_PARAMS_PACKED : ST_DATA_PARAMS, z.buckets[b].last,
                z.buckets[b].first);
    st_program_begin(p, &ag);
    st_program_after(p, optimizer);
    next_step_waits_for = st_program_commit(p);
  }
  if (temp != UINT32_MAX) {
    StOp expand = st_sparse_expand_op(sp, frame.compute, -1, m->params, nnz);
    st_program_begin(p, &expand);
    st_program_after(p, next_step_waits_for);
    st_program_free_buffer(p, temp);
    next_step_waits_for = st_program_commit(p);
  }
  st_program_resolve(p, z.optimizer_ref, next_step_waits_for);

  StSchedule *s = st_dp_frame_finish(&frame);
  s->settings.strategy = g_strdup("zero");
  s->settings.description =
    g_strdup_printf("zero stage %d: %d rank%s, micro-batch %d x %d, %d gradient bucket%s%s",
                    z.stage, s->n_ranks, st_plural(s->n_ranks), o->micro_batch, o->accumulation,
                    z.n_buckets, st_plural(z.n_buckets),
                    z.stage == 3 ? ", parameters gathered per layer" : "");
  st_schedule_note_number(s, "zero_stage", z.stage);
  st_schedule_note_number(s, "gradient_buckets", z.n_buckets);
  if (z.stage == 3)
    st_schedule_note_number(s, "prefetch", o->prefetch);
  if (sp != NULL)
    st_sparse_note(sp, s, nnz);
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
  .update = st_sparse_update,
  .knobs = KNOBS,
};
