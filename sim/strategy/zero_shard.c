/* zero_shard.c: see zero.h. */
#include "strategy/zero.h"

#define NONE UINT32_MAX

struct StZero {
  StZeroSpec spec;
  StZeroSpan *spans;        /* [n_spans]: the spec's, n and communicators filled */
  int *span_of;             /* [n_layers]: the span holding each layer, or -1 */
  int *bucket_span;         /* [buckets]: its span */
  GArray *buckets;          /* StBucket, in backward order, none across spans */
  int *bucket_of_first;     /* [n_layers]: the bucket whose first (highest) layer it is, or -1 */
  int *bucket_of_last;      /* [n_layers]: the bucket whose last (lowest) layer it is, or -1 */
  uint32_t *bucket_buffer;  /* [buckets]: stages 2-3, the running micro-batch's gradient */
  uint32_t last_reduce;
  int64_t shard;            /* elements of this rank's shards */
  int64_t nnz;              /* elements held here (sparse: non-zeros) */
  /* Stage 3: passes that needed a gather, in order, to bound prefetching. */
  GArray *gathered_passes;  /* uint32 op ids */
  uint32_t optimizer_ref;   /* forward reference: what the next step's first pass waits for */
  gboolean forward_seen;    /* the step's first forward was built */
  uint32_t *gather_ref;     /* [buckets], overlap_param_gather: forward references to each
                               bucket's parameter gather, which its first forward waits for */
  gboolean *gather_waited;  /* [buckets]: that forward was built */
  uint32_t dense_grad;      /* sparse: the running backward's dense gradient */
  uint32_t *held;           /* [n_layers], stage 3: the buffer holding the layer's gathered
                               parameters until `reshard` drops it, or NONE */
  uint32_t *held_gather;    /* [n_layers]: the gather that filled it */
};

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
emit_gather(StZero *z, int layer, int pass_layer, int micro, StPass pass)
{
  const StZeroSpec *sp = &z->spec;
  /* Kept beyond its pass, the copy serves other micro-batches too. */
  int holds_micro = sp->reshard == ST_RESHARD_FORWARD ? micro : -1;
  StProgram *p = sp->program;
  const StLayer *l = &sp->model->layers[layer];
  const StLayer *user = &sp->model->layers[pass_layer];
  g_autofree char *name =
    layer == pass_layer
      ? g_strdup_printf("gathered %s %s m%d", user->name, st_pass_name(pass), micro)
      : g_strdup_printf("gathered %s (%s) %s m%d", user->name, l->name, st_pass_name(pass),
                        micro);
  /* What it holds of the layer: its parameters (a tied head's copy of the
   * embedding, on a pipeline stage of its own). */
  int64_t params = sp->sparse ? l->params : sp->elems[layer];
  uint32_t buffer =
    st_program_add_buffer(p, name, ST_MEM_PARAMS, params * sp->bytes.weight, FALSE);
  st_program_buffer_holds(p, buffer, ST_DATA_PARAMS, layer, layer, holds_micro, 1);
  /* Sparse: the slices gathered are compressed, then expanded into `buffer`. */
  int64_t nnz = sp->sparse ? st_sparse_nnz(sp->sparse, l->params) : params;
  uint32_t packed = NONE;
  if (sp->sparse != NULL) {
    g_autofree char *packed_name = g_strdup_printf("gathered compressed %s %s m%d", l->name,
                                                   st_pass_name(pass), micro);
    packed = st_program_add_buffer(p, packed_name, ST_MEM_PARAMS, nnz * sp->bytes.weight, FALSE);
    st_program_buffer_holds(p, packed, ST_DATA_PARAMS_PACKED, layer, layer, holds_micro, 1);
  }
  const StZeroSpan *span = &z->spans[z->span_of[layer]];
  StOp op = st_op_coll(sp->gather_stream, ST_COLL_ALL_GATHER, span->gather_comm,
                       nnz * sp->bytes.weight);
  g_autofree char *label = g_strdup_printf("%s %s", user->name, st_pass_name(pass));
  op.label = st_program_label(p, label);
  st_op_moves(&op, sp->sparse ? ST_DATA_PARAMS_PACKED : ST_DATA_PARAMS, layer, layer);
  op.micro = micro;
  st_program_begin(p, &op);
  st_program_alloc(p, sp->sparse ? packed : buffer);
  /* At most `prefetch` gathers ahead: wait for the pass that used the
   * gather prefetch + 1 places back. The first gather of a step waits for
   * the previous step's optimizer (its shard must be updated). */
  guint n = z->gathered_passes->len;
  guint back = (guint)sp->prefetch + 1;
  if (n >= back)
    st_program_after(p, g_array_index(z->gathered_passes, uint32_t, n - back));
  if (n == 0)
    st_program_after_prev_step(p, z->optimizer_ref);
  uint32_t gather = st_program_commit(p);
  if (sp->sparse != NULL) {
    StOp expand = st_sparse_expand_op(sp->sparse, sp->gather_stream, layer, l->params, nnz);
    expand.micro = micro;
    st_program_begin(p, &expand);
    st_program_after(p, gather);
    st_program_alloc(p, buffer);
    st_program_free_buffer(p, packed);
    st_program_commit(p);
  }
  return buffer;
}

/* Whether bucket `b`'s reductions are deferred to the last micro-batch
 * (stages 2-3 with defer_sync): not over a span of one rank, whose shard is
 * the whole and whose "reduction" is the copy into it. */
static gboolean
deferred(const StZero *z, int b)
{
  return z->spec.defer_sync && z->spans[z->bucket_span[b]].n > 1;
}

/* Whether the backward of `micro` allocates bucket `b`'s whole gradient
 * (stages 2-3): every micro-batch's its own; deferred, the first holds one
 * for them all. */
static gboolean
holds_bucket(const StZero *z, int b, int micro)
{
  return !deferred(z, b) || micro == 0;
}

/* Whether the pass of `layer` drops the gathered parameters of `owner` (the
 * layer itself, or the one whose weights it reads) when it ends: every pass
 * (ST_RESHARD_FORWARD), or the owner's own backward of the micro-batch
 * (BACKWARD) or of the step's last micro-batch (STEP). */
static gboolean
drops_gathered(const StZero *z, int owner, int layer, StPass pass, int micro)
{
  /* A span of one rank gathers nothing from others: its copy of the shard
   * (a cast, or a copy) serves one pass, as FSDP's own would not be kept. */
  if (z->spans[z->span_of[owner]].n == 1)
    return TRUE;
  switch (z->spec.reshard) {
  case ST_RESHARD_BACKWARD:
    return pass == ST_PASS_BWD && layer == owner;
  case ST_RESHARD_STEP:
    return pass == ST_PASS_BWD && layer == owner && micro == z->spec.last_micro;
  default:
    return TRUE;
  }
}

static void
before_pass(gpointer data, StPass pass, int layer, int micro, StPassExtra *extra)
{
  StZero *z = data;
  const StZeroSpec *sp = &z->spec;
  const StModel *m = sp->model;
  const StLayer *l = &m->layers[layer];
  if (sp->stage == 3) {
    /* A tied head reads the weights it is tied to and, when it has one, a
     * bias of its own: both are gathered (on a pipeline stage without the
     * embedding, its own copy of the weights). */
    int tied = st_model_tied_layer(m, layer);
    int owners[2] = {tied >= 0 && z->span_of[tied] >= 0 ? tied : -1,
                     sp->elems[layer] > 0 ? layer : -1};
    for (int k = 0; k < 2; k++) {
      int o = owners[k];
      if (o < 0)
        continue;
      if (z->held[o] == NONE) {
        z->held[o] = emit_gather(z, o, layer, micro, pass);
        z->held_gather[o] = sp->program->ops->len - 1;
      }
      extra->after[extra->n_after++] = z->held_gather[o];
      if (drops_gathered(z, o, layer, pass, micro)) {
        extra->free[extra->n_free++] = z->held[o];
        z->held[o] = NONE;
      }
    }
  }
  int lowest = z->bucket_of_last[layer]; /* the first a forward meets */
  if (pass == ST_PASS_FWD && sp->overlap_param_gather && sp->stage < 3 && lowest >= 0 &&
      !z->gather_waited[lowest]) {
    extra->after_prev_step[extra->n_after_prev_step++] = z->gather_ref[lowest];
    z->gather_waited[lowest] = TRUE;
  } else if (pass == ST_PASS_FWD && !z->forward_seen && sp->stage < 3 &&
             !sp->overlap_param_gather)
    extra->after_prev_step[extra->n_after_prev_step++] = z->optimizer_ref; /* see emit_step */
  if (pass == ST_PASS_FWD)
    z->forward_seen = TRUE;
  if (pass == ST_PASS_BWD && sp->sparse != NULL && l->params > 0) {
    z->dense_grad =
      st_sparse_dense_grad_buffer(sp->sparse, sp->program, l->name, layer, micro, l->params);
    extra->alloc[extra->n_alloc++] = z->dense_grad;
  }
  int b = z->bucket_of_first[layer];
  if (pass == ST_PASS_BWD && sp->stage >= 2 && b >= 0 && holds_bucket(z, b, micro)) {
    gboolean accumulated = deferred(z, b);
    g_autofree char *name = accumulated ? g_strdup_printf("grad bucket %d (accumulated)", b)
                                        : g_strdup_printf("grad bucket %d m%d", b, micro);
    const StBucket *bk = &g_array_index(z->buckets, StBucket, b);
    z->bucket_buffer[b] =
      st_program_add_buffer(sp->program, name, ST_MEM_GRADS, bk->params * sp->bytes.grad, FALSE);
    st_program_buffer_holds(sp->program, z->bucket_buffer[b],
                            sp->sparse ? ST_DATA_GRADS_PACKED : ST_DATA_GRADS, bk->last,
                            bk->first, accumulated ? -1 : micro, 1);
    extra->alloc[extra->n_alloc++] = z->bucket_buffer[b];
  }
}

static void
after_pass(gpointer data, StPass pass, int layer, int micro, uint32_t op)
{
  StZero *z = data;
  const StZeroSpec *sp = &z->spec;
  StProgram *p = sp->program;
  int64_t params = sp->model->layers[layer].params;
  if (sp->stage == 3 && weights_of(sp->model, layer) >= 0)
    g_array_append_val(z->gathered_passes, op);
  if (sp->sparse != NULL && pass == ST_PASS_BWD && params > 0)
    op = st_sparse_emit_compress(sp->sparse, p, sp->compute, layer, micro, params, op,
                                 z->dense_grad);
  int b = z->bucket_of_last[layer];
  if (pass != ST_PASS_BWD || b < 0)
    return;
  /* Stage 1 reduces once, after the last micro-batch; stages 2 and 3 after
   * each micro-batch, since they keep no full gradient to accumulate into,
   * unless deferred. */
  if ((sp->stage < 2 || deferred(z, b)) && micro != sp->last_micro)
    return;
  const StBucket *bk = &g_array_index(z->buckets, StBucket, b);
  const StZeroSpan *span = &z->spans[z->bucket_span[b]];
  StOp rs = st_op_coll(sp->reduce_stream, ST_COLL_REDUCE_SCATTER, span->reduce_comm,
                       bk->params * sp->bytes.grad);
  g_autofree char *label = g_strdup_printf(sp->sparse ? "bucket %d compressed" : "bucket %d", b);
  rs.label = st_program_label(p, label);
  st_op_moves(&rs, sp->sparse ? ST_DATA_GRADS_PACKED : ST_DATA_GRADS, bk->last, bk->first);
  rs.micro = micro;
  /* The reduced slice lands in a buffer of its own while the collective
   * runs, then is added to (or copied into) the gradient shard: NCCL's
   * out-of-place reduce-scatter, and accumulation over micro-batches. Each
   * layer's slice is rounded up on its own: at most one element per layer
   * over the bucket's share. */
  g_autofree char *slice_name = g_strdup_printf("reduce-scatter slice, bucket %d m%d", b, micro);
  int64_t slice_elems = st_shard(bk->params, span->n) + bk->first - bk->last + 1;
  uint32_t slice =
    st_program_add_buffer(p, slice_name, ST_MEM_COMM, slice_elems * sp->bytes.grad, FALSE);
  st_program_begin(p, &rs);
  st_program_after(p, op);
  st_program_alloc(p, slice);
  st_program_free_buffer(p, slice);
  if (sp->stage >= 2)
    st_program_free_buffer(p, z->bucket_buffer[b]);
  z->last_reduce = st_program_commit(p);
  if (!sp->replicate)
    return;
  /* HSDP: the group's reduced shard summed with the other groups' copies of
   * it, in place. */
  StOp ar = st_op_coll(sp->reduce_stream, ST_COLL_ALL_REDUCE, sp->replicate_comm,
                       st_shard(bk->params, span->n) * sp->bytes.grad);
  g_autofree char *ar_label = g_strdup_printf("bucket %d shard across groups", b);
  ar.label = st_program_label(p, ar_label);
  st_op_moves(&ar, ST_DATA_GRADS_SHARD, bk->last, bk->first);
  ar.micro = micro;
  st_program_begin(p, &ar);
  st_program_after(p, z->last_reduce);
  z->last_reduce = st_program_commit(p);
}

StPassHooks
st_zero_hooks(StZero *z)
{
  return (StPassHooks){z, before_pass, after_pass};
}

/* ---- states ---------------------------------------------------------------- */

/* Sparse persistent states, over the whole model (strategy_zero.c). */
static void
add_sparse_states(const StZero *z)
{
  const StZeroSpec *spec = &z->spec;
  const StSparse *sp = spec->sparse;
  StProgram *p = spec->program;
  const StModel *m = spec->model;
  int n = spec->n, last = m->n_layers - 1;
  int64_t shard = z->shard, nnz = z->nnz;
  uint32_t b;
  if (spec->stage < 3) {
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
  if (spec->stage == 1) {
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

static void
add_dense_states(const StZero *z)
{
  const StZeroSpec *sp = &z->spec;
  StProgram *p = sp->program;
  int stage = sp->stage;
  for (int k = 0; k < sp->n_spans; k++) {
    const StZeroSpan *span = &z->spans[k];
    int n = span->n;
    int64_t whole = 0, shard = 0;
    for (int i = span->first; i <= span->last; i++) {
      whole += sp->elems[i];
      shard += st_shard(sp->elems[i], n);
    }
    g_autofree char *pn = g_strdup_printf("%s%s", span->prefix, stage == 3 ? "params shard"
                                                                          : "params");
    g_autofree char *gn = g_strdup_printf("%s%s", span->prefix, stage >= 2 ? "grads shard"
                                                                          : "grads");
    g_autofree char *on = g_strdup_printf("%soptimizer states shard", span->prefix);
    int64_t params_bytes = stage == 3 ? shard * sp->bytes.shard_weight : whole * sp->bytes.weight;
    uint32_t params = st_program_add_buffer(p, pn, ST_MEM_PARAMS, params_bytes, TRUE);
    int64_t grads_bytes = stage >= 2 ? shard * sp->bytes.shard_grad : whole * sp->bytes.grad;
    uint32_t grads = st_program_add_buffer(p, gn, ST_MEM_GRADS, grads_bytes, TRUE);
    st_program_buffer_holds(p, params, stage == 3 ? ST_DATA_PARAMS_SHARD : ST_DATA_PARAMS,
                            span->first, span->last, -1, stage == 3 ? n : 1);
    st_program_buffer_holds(p, grads, stage >= 2 ? ST_DATA_GRADS_SHARD : ST_DATA_GRADS,
                            span->first, span->last, -1, stage >= 2 ? n : 1);
    /* ZeRO-Offload: the optimizer states and fp32 master weights are in
     * host memory, none of them on the GPU. */
    if (sp->offload)
      continue;
    int optimizer = stage == 3 ? sp->bytes.shard_optimizer : sp->bytes.optimizer;
    uint32_t states = st_program_add_buffer(p, on, ST_MEM_OPTIMIZER, shard * optimizer, TRUE);
    st_program_buffer_holds(p, states, ST_DATA_OPTIM_SHARD, span->first, span->last, -1, n);
  }
}

StZero *
st_zero_new(const StZeroSpec *spec)
{
  g_return_val_if_fail(spec->stage >= 1 && spec->stage <= 3 && spec->n >= 1, NULL);
  g_return_val_if_fail(!spec->offload || (spec->stage < 3 && spec->sparse == NULL), NULL);
  StZero *z = g_new0(StZero, 1);
  z->spec = *spec;
  int L = spec->model->n_layers;
  z->spans = g_new(StZeroSpan, MAX(spec->n_spans, 1));
  z->span_of = g_new(int, L);
  for (int i = 0; i < L; i++)
    z->span_of[i] = -1;
  GArray *bucket_span = g_array_new(FALSE, FALSE, sizeof(int));
  z->buckets = g_array_new(FALSE, FALSE, sizeof(StBucket));
  for (int k = 0; k < spec->n_spans; k++) {
    StZeroSpan *span = &z->spans[k];
    *span = spec->spans[k];
    if (span->n == 0) {
      span->n = spec->n;
      span->reduce_comm = spec->reduce_comm;
      span->gather_comm = spec->gather_comm;
    }
    for (int i = span->first; i <= span->last; i++)
      z->span_of[i] = k;
  }
  for (int k = spec->n_spans - 1; k >= 0; k--) {
    const StZeroSpan *span = &z->spans[k];
    g_autoptr(GArray) of_span = st_grad_buckets_of(spec->elems, span->first, span->last + 1,
                                                   spec->bucket_bytes, spec->bytes.grad);
    g_array_append_vals(z->buckets, of_span->data, of_span->len);
    for (guint b = 0; b < of_span->len; b++)
      g_array_append_val(bucket_span, k);
    for (int i = span->first; i <= span->last; i++) {
      z->shard += st_shard(spec->elems[i], span->n);
      z->nnz += spec->elems[i];
    }
  }
  z->bucket_span = (int *)(void *)g_array_free(bucket_span, FALSE);
  z->bucket_of_first = g_new(int, L);
  z->bucket_of_last = g_new(int, L);
  for (int i = 0; i < L; i++)
    z->bucket_of_first[i] = z->bucket_of_last[i] = -1;
  for (guint b = 0; b < z->buckets->len; b++) {
    const StBucket *bk = &g_array_index(z->buckets, StBucket, b);
    z->bucket_of_first[bk->first] = (int)b;
    z->bucket_of_last[bk->last] = (int)b;
  }
  z->bucket_buffer = g_new(uint32_t, MAX(z->buckets->len, 1));
  z->last_reduce = NONE;
  z->gathered_passes = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  z->held = g_new(uint32_t, MAX(L, 1));
  z->held_gather = g_new(uint32_t, MAX(L, 1));
  for (int i = 0; i < L; i++)
    z->held[i] = NONE;
  z->optimizer_ref = st_program_forward_ref(spec->program);
  z->gather_ref = g_new(uint32_t, MAX(z->buckets->len, 1));
  z->gather_waited = g_new0(gboolean, MAX(z->buckets->len, 1));
  z->spec.overlap_param_gather = spec->overlap_param_gather && spec->stage < 3 &&
                                 spec->sparse == NULL;
  for (guint b = 0; z->spec.overlap_param_gather && b < z->buckets->len; b++)
    z->gather_ref[b] = st_program_forward_ref(spec->program);
  if (spec->sparse != NULL)
    add_sparse_states(z);
  else
    add_dense_states(z);
  return z;
}

void
st_zero_free(StZero *z)
{
  if (z == NULL)
    return;
  g_array_unref(z->buckets);
  g_array_unref(z->gathered_passes);
  g_free(z->bucket_of_first);
  g_free(z->bucket_of_last);
  g_free(z->bucket_buffer);
  g_free(z->gather_ref);
  g_free(z->gather_waited);
  g_free(z->held);
  g_free(z->held_gather);
  g_free(z->spans);
  g_free(z->span_of);
  g_free(z->bucket_span);
  g_free(z);
}

uint32_t
st_zero_last_reduce(const StZero *z)
{
  return z->last_reduce;
}

int64_t
st_zero_shard_elems(const StZero *z)
{
  return z->shard;
}

int
st_zero_n_buckets(const StZero *z)
{
  return (int)z->buckets->len;
}

/* ---- the step ------------------------------------------------------------------ */

uint32_t
st_zero_emit_step(StZero *z, uint32_t after)
{
  const StZeroSpec *sp = &z->spec;
  const StSparse *sparse = sp->sparse;
  StProgram *p = sp->program;
  const StModel *m = sp->model;
  /* Sparse stages 1-2: the step writes its slice of the compressed weights
   * into a full compressed copy that the gathers fill and an expand empties. */
  uint32_t temp = NONE;
  if (sparse != NULL && sp->stage < 3) {
    temp = st_program_add_buffer(p, "compressed weights (optimizer step)", ST_MEM_PARAMS,
                                 z->nnz * sparse->temp, FALSE);
    st_program_buffer_holds(p, temp, ST_DATA_PARAMS_PACKED, 0, m->n_layers - 1, -1, 1);
  }
  /* ZeRO-Offload: the gradient shard goes down to the host first. */
  uint32_t down = NONE;
  if (sp->offload) {
    StOp d2h = st_op_copy(sp->copy_stream, ST_COPY_D2H, z->shard * sp->bytes.grad);
    d2h.label = st_program_label(p, "grads shard to host");
    st_op_moves(&d2h, ST_DATA_GRADS_SHARD, 0, m->n_layers - 1);
    st_program_begin(p, &d2h);
    if (z->last_reduce != NONE)
      st_program_after(p, z->last_reduce);
    if (after != NONE)
      st_program_after(p, after);
    down = st_program_commit(p);
  }
  StOp step = sparse != NULL ? st_sparse_optim_op(sparse, sp->compute, z->shard)
                             : st_op_elementwise(sp->offload ? sp->host_stream : sp->compute,
                                                 ST_PASS_OPTIM, -1, z->shard,
                                                 z->shard * sp->bytes.optim_traffic);
  st_program_begin(p, &step);
  if (z->last_reduce != NONE)
    st_program_after(p, z->last_reduce);
  if (after != NONE)
    st_program_after(p, after);
  if (down != NONE)
    st_program_after(p, down);
  if (temp != NONE)
    st_program_alloc(p, temp);
  uint32_t optimizer = st_program_commit(p);
  uint32_t updated = optimizer; /* where the updated 16-bit parameters are on the GPU */
  if (sp->offload) {
    StOp h2d = st_op_copy(sp->copy_stream, ST_COPY_H2D, z->shard * sp->bytes.weight);
    h2d.label = st_program_label(p, "params shard from host");
    st_op_moves(&h2d, ST_DATA_PARAMS_SHARD, 0, m->n_layers - 1);
    st_program_begin(p, &h2d);
    st_program_after(p, optimizer);
    updated = st_program_commit(p);
  }
  /* Stages 1 and 2 gather the updated parameters right after the step; the
   * next forward waits for the last gather, or with overlap_param_gather
   * each of its layers for its own bucket's, gathered in forward order.
   * Stage 3 gathers them on use. */
  uint32_t next_step_waits_for = updated;
  guint n_buckets = sp->stage < 3 ? z->buckets->len : 0;
  for (guint k = 0; k < n_buckets; k++) {
    guint b = sp->overlap_param_gather ? n_buckets - 1 - k : k;
    const StBucket *bk = &g_array_index(z->buckets, StBucket, b);
    StOp ag = st_op_coll(sp->gather_stream, ST_COLL_ALL_GATHER,
                         z->spans[z->bucket_span[b]].gather_comm, bk->params * sp->bytes.weight);
    g_autofree char *label =
      g_strdup_printf(sparse ? "bucket %u params compressed" : "bucket %u params", b);
    ag.label = st_program_label(p, label);
    st_op_moves(&ag, sparse ? ST_DATA_PARAMS_PACKED : ST_DATA_PARAMS, bk->last, bk->first);
    st_program_begin(p, &ag);
    st_program_after(p, updated);
    next_step_waits_for = st_program_commit(p);
    if (sp->overlap_param_gather)
      st_program_resolve(p, z->gather_ref[b], next_step_waits_for);
  }
  if (temp != NONE) {
    StOp expand = st_sparse_expand_op(sparse, sp->compute, -1, m->params, z->nnz);
    st_program_begin(p, &expand);
    st_program_after(p, next_step_waits_for);
    st_program_free_buffer(p, temp);
    next_step_waits_for = st_program_commit(p);
  }
  st_program_resolve(p, z->optimizer_ref, next_step_waits_for);
  return optimizer;
}
