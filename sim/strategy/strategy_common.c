/* strategy_common.c: see strategy_common.h. */
#include "strategy/strategy_common.h"

#include "base/util.h"
#include "model/layer_type.h"

void
st_state_bytes(const StOptions *o, StStateBytes *out)
{
  gboolean mixed = o->precision == ST_PRECISION_MIXED;
  int states = o->optimizer == ST_OPTIMIZER_ADAM ? 8 : 4; /* fp32 m and v, or momentum */
  *out = (StStateBytes){
    .weight = mixed ? 2 : 4,
    .grad = mixed ? 2 : 4,
    .optimizer = states + (mixed ? 4 : 0),
    /* Adam reads p, g, m, v and writes p, m, v; momentum SGD reads p, g, buf and
     * writes p, buf: 4 bytes each in fp32. Mixed precision trades the fp32
     * gradient read for a 16-bit one and adds the 16-bit weight write. */
    .optim_traffic = o->optimizer == ST_OPTIMIZER_ADAM ? 28 : 20,
    .activation = mixed ? ST_DTYPE_BF16 : ST_DTYPE_FP32,
  };
}

GArray *
st_grad_buckets(const StModel *m, int64_t bucket_bytes, int grad_bytes)
{
  g_autofree int64_t *params = g_new(int64_t, m->n_layers > 0 ? m->n_layers : 1);
  for (int i = 0; i < m->n_layers; i++)
    params[i] = m->layers[i].params;
  return st_grad_buckets_of(params, 0, m->n_layers, bucket_bytes, grad_bytes);
}

GArray *
st_grad_buckets_of(const int64_t *elems, int begin, int end, int64_t bucket_bytes,
                   int grad_bytes)
{
  GArray *buckets = g_array_new(FALSE, FALSE, sizeof(StBucket));
  StBucket open = {-1, -1, 0};
  for (int i = end - 1; i >= begin; i--) {
    if (elems[i] == 0)
      continue;
    if (open.first < 0)
      open.first = i;
    open.last = i;
    open.params += elems[i];
    if (open.params * grad_bytes >= bucket_bytes) {
      g_array_append_val(buckets, open);
      open = (StBucket){-1, -1, 0};
    }
  }
  if (open.first >= 0)
    g_array_append_val(buckets, open);
  return buckets;
}

int64_t
st_shard(int64_t n, int parts)
{
  return st_div_ceil(n, parts);
}

void
st_dp_frame_init(StDpFrame *f, const StStrategyInput *in, const char *name)
{
  const StOptions *o = in->options;
  StSchedule *s = st_schedule_new(st_model_copy(in->model), st_cluster_copy(in->cluster),
                                  o->ranks, NULL);
  *f = (StDpFrame){
    .schedule = s,
    .model = s->model,
    .options = o,
    .program = st_program_new(name),
  };
  st_state_bytes(o, &f->bytes);
  f->compute = st_program_add_stream(f->program, "compute", 0);
  f->world = st_schedule_add_world(s, "world");
  s->steps = o->steps;
  s->settings.precision = o->precision;
  s->settings.optimizer = o->optimizer;
  s->settings.micro_batch = o->micro_batch;
  s->settings.accumulation = o->accumulation;
  s->settings.global_batch = o->global_batch;
}

StSchedule *
st_dp_frame_finish(StDpFrame *f)
{
  StSchedule *s = g_steal_pointer(&f->schedule);
  int p = st_schedule_add_program(s, g_steal_pointer(&f->program));
  for (int r = 0; r < s->n_ranks; r++)
    s->ranks[r].program = p;
  return s;
}

/* ---- a micro-batch's passes ------------------------------------------------ */

#define NONE UINT32_MAX
#define PASS_MEM_MAX 8

/* What one pass allocates when it starts and frees when it ends, besides
 * what its hooks add. */
typedef struct {
  uint32_t alloc[PASS_MEM_MAX], free[PASS_MEM_MAX];
  int n_alloc, n_free;
} PassMem;

static void
pass_alloc(PassMem *pm, uint32_t buffer)
{
  g_assert(pm->n_alloc < PASS_MEM_MAX);
  if (buffer != NONE)
    pm->alloc[pm->n_alloc++] = buffer;
}

static void
pass_free(PassMem *pm, uint32_t buffer)
{
  g_assert(pm->n_free < PASS_MEM_MAX);
  if (buffer != NONE)
    pm->free[pm->n_free++] = buffer;
}

/* A buffer of micro-batch `micro` named "WHAT LAYER mMICRO" holding `data`
 * of `layer` (ST_DATA_NONE: opaque); none (NONE) when `bytes` is 0. */
static uint32_t
micro_buffer(StDpFrame *f, const char *what, int layer, int micro, StMemCategory category,
             int64_t bytes, StData data)
{
  if (bytes == 0)
    return NONE;
  g_autofree char *name = g_strdup_printf("%s %s m%d", what, f->model->layers[layer].name, micro);
  uint32_t b = st_program_add_buffer(f->program, name, category, bytes, FALSE);
  if (data != ST_DATA_NONE)
    st_program_buffer_holds(f->program, b, data, layer, layer, micro, 1);
  return b;
}

uint32_t
st_pass_scratch(StProgram *p, const StModel *m, int layer, int micro, StPass pass, int batch,
                StDtype dtype)
{
  StLayerMemory mem;
  st_layer_memory(m, layer, batch, dtype, &mem);
  int64_t bytes = pass == ST_PASS_BWD ? mem.bwd_scratch : mem.fwd_scratch;
  if (bytes == 0)
    return UINT32_MAX;
  g_autofree char *name = g_strdup_printf("scratch %s %s m%d", pass == ST_PASS_BWD ? "bwd" : "fwd",
                                          m->layers[layer].name, micro);
  return st_program_add_buffer(p, name, ST_MEM_WORKSPACE, bytes, FALSE);
}

/* The scratch of this pass: allocated when it starts, freed when it ends. */
static void
pass_scratch(StDpFrame *f, PassMem *pm, StPass pass, int layer, int micro)
{
  uint32_t b = st_pass_scratch(f->program, f->model, layer, micro, pass,
                               f->options->micro_batch, f->bytes.activation);
  pass_alloc(pm, b);
  pass_free(pm, b);
}

static gboolean
keeps(const StModel *m, int layer, unsigned what)
{
  return layer >= 0 && layer < m->n_layers && (m->layers[layer].type->keeps & what) != 0;
}

/* The pass that last reads layer k's output (k = -1: the samples), which
 * frees it, as autograd frees what nothing holds: the backward of k when k
 * keeps its output; else that of k + 1 when k + 1 keeps its input; else the
 * forward of k + 1 (or of k itself, when nothing reads it: a loss's). Views
 * (flatten) are copies in the executor, so they end a chain like any layer. */
static void
last_reader(const StModel *m, int k, StPass *pass, int *layer)
{
  *pass = ST_PASS_BWD;
  if (keeps(m, k, ST_KEEPS_OUTPUT))
    *layer = k;
  else if (keeps(m, k + 1, ST_KEEPS_INPUT))
    *layer = k + 1;
  else {
    *pass = ST_PASS_FWD;
    *layer = MIN(k + 1, m->n_layers - 1);
  }
}

static uint32_t
emit_pass(StDpFrame *f, StPass pass, int layer, int micro, const StPassHooks *hooks,
          const StPassExtra *extra, const PassMem *pm)
{
  StOp op = st_op_comp(f->compute, pass, layer, micro, f->options->micro_batch);
  st_program_begin(f->program, &op);
  for (int i = 0; i < extra->n_after; i++)
    st_program_after(f->program, extra->after[i]);
  for (int i = 0; i < extra->n_after_prev_step; i++)
    st_program_after_prev_step(f->program, extra->after_prev_step[i]);
  for (int i = 0; i < pm->n_alloc; i++)
    st_program_alloc(f->program, pm->alloc[i]);
  for (int i = 0; i < extra->n_alloc; i++)
    st_program_alloc(f->program, extra->alloc[i]);
  for (int i = 0; i < pm->n_free; i++)
    st_program_free_buffer(f->program, pm->free[i]);
  for (int i = 0; i < extra->n_free; i++)
    st_program_free_buffer(f->program, extra->free[i]);
  uint32_t id = st_program_commit(f->program);
  if (hooks != NULL && hooks->after != NULL)
    hooks->after(hooks->data, pass, layer, micro, id);
  return id;
}

static void
pass_extra(const StPassHooks *hooks, StPass pass, int layer, int micro, StPassExtra *extra)
{
  *extra = (StPassExtra){0};
  if (hooks != NULL && hooks->before != NULL)
    hooks->before(hooks->data, pass, layer, micro, extra);
}

/* Frees, in `pm`, each tensor between layers whose last reader is this pass
 * (x[k + 1]: layer k's output, x[0] the samples). */
static void
free_last_read(const StModel *m, const uint32_t *x, StPass pass, int layer, PassMem *pm)
{
  for (int k = layer - 1; k <= layer; k++) {
    StPass at;
    int by;
    last_reader(m, k, &at, &by);
    if (at == pass && by == layer)
      pass_free(pm, x[k + 1]);
  }
}

void
st_dp_emit_micro_batch(StDpFrame *f, int micro, const StPassHooks *hooks)
{
  const StModel *m = f->model;
  int L = m->n_layers;
  g_autofree StLayerMemory *mem = g_new(StLayerMemory, L);
  g_autofree uint32_t *x = g_new(uint32_t, L + 1);
  g_autofree uint32_t *saved = g_new(uint32_t, L);
  g_autofree uint32_t *dx = g_new(uint32_t, L + 1);
  g_autofree uint32_t *parked = g_new(uint32_t, L);
  uint32_t targets = NONE;
  for (int i = 0; i < L; i++) {
    st_layer_memory(m, i, f->options->micro_batch, f->bytes.activation, &mem[i]);
    parked[i] = NONE;
  }
  /* Forward: layer i makes its output and what it keeps for its backward;
   * the first makes the samples (held as what layer 0 reads). */
  x[0] = micro_buffer(f, "input", 0, micro, ST_MEM_ACTIVATIONS, mem[0].input, ST_DATA_ACTS);
  for (int i = 0; i < L; i++) {
    PassMem pm = {0};
    StPassExtra extra;
    pass_extra(hooks, ST_PASS_FWD, i, micro, &extra);
    if (i == 0)
      pass_alloc(&pm, x[0]);
    x[i + 1] = micro_buffer(f, "out", i, micro, ST_MEM_ACTIVATIONS, mem[i].output,
                            ST_DATA_OUTPUT);
    saved[i] = micro_buffer(f, "kept", i, micro, ST_MEM_ACTIVATIONS, mem[i].saved, ST_DATA_ACTS);
    pass_alloc(&pm, x[i + 1]);
    pass_alloc(&pm, saved[i]);
    if (mem[i].targets > 0) {
      targets = micro_buffer(f, "targets", i, micro, ST_MEM_WORKSPACE, mem[i].targets,
                             ST_DATA_ACTS);
      pass_alloc(&pm, targets);
    }
    pass_scratch(f, &pm, ST_PASS_FWD, i, micro);
    free_last_read(m, x, ST_PASS_FWD, i, &pm);
    emit_pass(f, ST_PASS_FWD, i, micro, hooks, &extra, &pm);
  }
  /* Backward: layer i frees what it kept and the gradient of its output (made
   * by layer i + 1), and makes the gradient of its input (the first layer's
   * input is data: no gradient). */
  dx[L] = NONE;
  for (int i = L - 1; i >= 0; i--) {
    PassMem pm = {0};
    StPassExtra extra;
    pass_extra(hooks, ST_PASS_BWD, i, micro, &extra);
    dx[i] = i > 0 ? micro_buffer(f, "dx", i, micro, ST_MEM_WORKSPACE, mem[i].input_grad,
                                 ST_DATA_INPUT_GRAD)
                  : NONE;
    pass_alloc(&pm, dx[i]);
    pass_scratch(f, &pm, ST_PASS_BWD, i, micro);
    /* A tied head's weight gradient waits in a buffer of its own until the
     * backward of the layer it is tied to adds it to that layer's gradient
     * (which, in a ZeRO bucket, only comes with that backward; the executor
     * parks it under every strategy, so DP and ZeRO sum in one order). */
    int t = st_model_tied_layer(m, i);
    if (t >= 0 && parked[t] == NONE) {
      parked[t] = micro_buffer(f, "tied grads", t, micro, ST_MEM_GRADS,
                               m->layers[t].params * f->bytes.grad, ST_DATA_NONE);
      pass_alloc(&pm, parked[t]);
    }
    pass_free(&pm, parked[i]);
    pass_free(&pm, saved[i]);
    if (mem[i].targets > 0)
      pass_free(&pm, targets);
    pass_free(&pm, dx[i + 1]);
    free_last_read(m, x, ST_PASS_BWD, i, &pm);
    emit_pass(f, ST_PASS_BWD, i, micro, hooks, &extra, &pm);
  }
}
