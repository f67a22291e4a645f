/* strategy_common.c: see strategy_common.h. */
#include "strategy/strategy_common.h"

#include <stdarg.h>

#include "base/util.h"
#include "cost/framework.h"
#include "strategy/offload.h"

void
st_state_bytes(const StOptions *o, StStateBytes *out)
{
  gboolean mixed = st_precision_16bit(o->precision);
  const StFramework *f = st_options_framework(o);
  /* Mixed precision keeps an fp32 master copy of the weights unless the
   * framework keeps its states in bf16 (StFramework.states_16bit). */
  gboolean master = mixed && !f->states_16bit;
  int width = mixed && f->states_16bit ? 2 : 4; /* bytes of a master weight or state element */
  gboolean adam = o->optimizer == ST_OPTIMIZER_ADAM;
  int states = (adam ? 2 : 1) * width; /* m and v, or momentum */
  int grad = st_options_grad_bytes(o);
  int shard_grad = mixed && f->states_16bit ? 2 : grad;
  /* The framework's step around the optimizer: clipping reads the gradients
   * for their norm, then reads and writes them scaled; zeroing writes them. */
  int around = (f->clip_grad ? 3 * grad : 0) + (f->zero_grads ? grad : 0);
  gboolean master_shard = master && f->fp32_shards;
  /* fp8: Transformer Engine casts each updated weight into its cached FP8
   * copy and transpose on the next step's first micro-batch (reads 2 bytes,
   * writes 2), counted here with the step that updates it, over every
   * parameter (the embedding and head, which it leaves in bf16, included:
   * 13 % of Llama-3 8B's). */
  int fp8_cast = o->precision == ST_PRECISION_FP8 ? 4 : 0;
  *out = (StStateBytes){
    .weight = mixed ? 2 : 4,
    .grad = grad,
    .optimizer = states + (master ? 4 : 0),
    /* Adam reads the weight, the gradient, m and v and writes the weight, m
     * and v; momentum SGD reads the weight, the gradient and its buffer and
     * writes the weight and the buffer: each `width` bytes but the gradient,
     * in its own dtype. With a master copy, the 16-bit weight is written too. */
    .optim_traffic = (adam ? 6 : 4) * width + shard_grad + (master ? 2 : 0) + around + fp8_cast,
    .activation = mixed ? ST_DTYPE_BF16 : ST_DTYPE_FP32,
    .shard_weight = master_shard ? 4 : mixed ? 2 : 4,
    .shard_optimizer = states + (master && !master_shard ? 4 : 0),
    .shard_grad = shard_grad,
  };
}

double
st_compute_peak(const StCluster *c, const StOptions *o)
{
  StDtype dtype = ST_DTYPE_FP32;
  if (st_precision_16bit(o->precision))
    dtype = c->gpu.flops[ST_DTYPE_BF16] > 0 ? ST_DTYPE_BF16 : ST_DTYPE_FP16;
  double peak = st_cluster_peak_flops(c, dtype);
  return o->precision == ST_PRECISION_FP8 ? MAX(peak, c->gpu.fp8_flops) : peak;
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
  if (o->offload_activations > 0)
    f->act_offload = st_program_add_stream(f->program, "act offload", 0);
  s->steps = o->steps;
  s->settings.precision = o->precision;
  s->settings.recompute = (StRecompute)o->recompute;
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

static uint32_t
emit_pass(StDpFrame *f, StPass pass, int layer, int micro, const StPassHooks *hooks,
          const StPassExtra *extra, const StPassMem *pm)
{
  StOp op = st_op_comp(f->compute, pass, layer, micro, f->options->micro_batch);
  st_program_begin(f->program, &op);
  for (int i = 0; i < extra->n_after; i++)
    st_program_after(f->program, extra->after[i]);
  for (int i = 0; i < extra->n_after_prev_step; i++)
    st_program_after_prev_step(f->program, extra->after_prev_step[i]);
  for (int i = 0; i < pm->n_after; i++)
    st_program_after(f->program, pm->after[i]);
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

void
st_dp_emit_micro_batch(StDpFrame *f, int micro, const StPassHooks *hooks)
{
  const StModel *m = f->model;
  int L = m->n_layers;
  g_autofree int *batch = g_new(int, L);
  for (int i = 0; i < L; i++)
    batch[i] = f->options->micro_batch;
  StTensorsSpec spec = {
    .model = m,
    .micro = micro,
    .dtype = f->bytes.activation,
    .grad_bytes = f->bytes.grad,
    .batch = batch,
    .recompute = st_recompute_plan(f->options),
    .loss_in_place = st_options_framework(f->options)->loss_in_place,
    .loss_16bit = st_options_framework(f->options)->loss_16bit,
    .loss_autograd = st_options_framework(f->options)->loss_autograd,
    .offload = f->act_offload > 0 ? f->options->offload_activations : 0,
  };
  g_autoptr(StTensors) t = st_tensors_new(f->program, &spec);
  int copies = f->act_offload > 0 ? f->act_offload : -1;
  uint32_t last = UINT32_MAX; /* the last pass on the compute stream */
  StOffloadGate gate = ST_OFFLOAD_GATE_INIT;
  for (int i = 0; i < L; i++) {
    StPassMem pm = {0};
    StPassExtra extra;
    pass_extra(hooks, ST_PASS_FWD, i, micro, &extra);
    st_tensors_pass(t, ST_PASS_FWD, i, &pm);
    uint32_t wait = st_offload_gate_take(&gate);
    if (wait != UINT32_MAX)
      pm.after[pm.n_after++] = wait;
    last = emit_pass(f, ST_PASS_FWD, i, micro, hooks, &extra, &pm);
    st_offload_gate_copied(&gate, st_offload_down(f->program, copies, t, i, last));
  }
  for (int i = L - 1; i >= 0; i--) {
    /* Blocks on the host come back as the compute reaches the backward of
     * the layer above them: this layer's, if not yet, and the next one's. */
    st_offload_up(f->program, copies, t, i, last);
    st_offload_up(f->program, copies, t, i - 1, last);
    StPassMem pm = {0};
    StPassExtra extra;
    pass_extra(hooks, ST_PASS_BWD, i, micro, &extra);
    if (st_tensors_recomputes(t, i)) {
      /* Right before the backward, after what the backward waits for (a
       * ZeRO-3 gather of the weights both read); the backward frees it. */
      StPassMem rpm = {0};
      StPassExtra deps = {0};
      memcpy(deps.after, extra.after, sizeof(extra.after));
      deps.n_after = extra.n_after;
      st_tensors_pass(t, ST_PASS_RECOMPUTE, i, &rpm);
      emit_pass(f, ST_PASS_RECOMPUTE, i, micro, NULL, &deps, &rpm);
    }
    st_tensors_pass(t, ST_PASS_BWD, i, &pm);
    last = emit_pass(f, ST_PASS_BWD, i, micro, hooks, &extra, &pm);
  }
}

gboolean
st_strategy_refuse(GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error_literal(error, ST_STRATEGY_ERROR, ST_ERROR_INVALID, message);
  return FALSE;
}
