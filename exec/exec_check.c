/* exec_check.c: st_exec_check, what the executor can run, said up front
 * with every missing piece, rather than failing in the middle of a run. */
#include <stdarg.h>
#include <string.h>

#include "cost/framework.h"
#include "exec/runtime.h"

static gboolean
has_moe(const StModel *m)
{
  for (int i = 0; i < m->n_layers; i++)
    if (strcmp(m->layers[i].type->name, "moe_router") == 0)
      return TRUE;
  return FALSE;
}

static gboolean
comm_supported(const StOp *op)
{
  StData d = op->data;
  gboolean grads = d == ST_DATA_GRADS || d == ST_DATA_GRADS_PACKED;
  gboolean params = d == ST_DATA_PARAMS || d == ST_DATA_PARAMS_PACKED;
  gboolean tp_in = d == ST_DATA_TP_INPUT || d == ST_DATA_TP_OUTPUT_GRAD;
  gboolean tp_out = d == ST_DATA_TP_OUTPUT || d == ST_DATA_TP_INPUT_GRAD;
  if (op->kind == ST_OP_COMM_COLL)
    return (op->sub == ST_COLL_ALL_GATHER && tp_in) ||
           ((op->sub == ST_COLL_ALL_REDUCE || op->sub == ST_COLL_REDUCE_SCATTER) && tp_out) ||
           (op->sub == ST_COLL_ALL_REDUCE && d == ST_DATA_TP_GRADS) ||
           (op->sub == ST_COLL_ALL_TO_ALL && d >= ST_DATA_EP_DISPATCH &&
            d <= ST_DATA_EP_DISPATCH_GRAD) ||
           /* context parallelism's ring or all-to-alls */
           ((op->sub == ST_COLL_RING_SHIFT || op->sub == ST_COLL_ALL_TO_ALL) &&
            d == ST_DATA_CP) ||
           (op->sub == ST_COLL_ALL_REDUCE && grads) ||
           (op->sub == ST_COLL_REDUCE_SCATTER && grads) ||
           (op->sub == ST_COLL_ALL_GATHER && params) ||
           ((op->sub == ST_COLL_BROADCAST || op->sub == ST_COLL_REDUCE) &&
            (d == ST_DATA_PARAMS || d == ST_DATA_GRADS));
  return d == ST_DATA_OUTPUT || d == ST_DATA_INPUT_GRAD || d == ST_DATA_PARAMS ||
         d == ST_DATA_GRADS || d == ST_DATA_GRADS_TOTAL || (d == ST_DATA_NONE && op->bytes == 0);
}

/* Adds a problem once. */
static void G_GNUC_PRINTF(3, 4)
problem(GPtrArray *problems, GHashTable *seen, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  char *text = g_strdup_vprintf(format, args);
  va_end(args);
  if (g_hash_table_add(seen, g_strdup(text)))
    g_ptr_array_add(problems, text);
  else
    g_free(text);
}

static void
check_program(const StModel *m, const StProgram *p, GPtrArray *problems, GHashTable *seen)
{
  for (guint k = 0; k < p->streams->len; k++)
    if (g_array_index(p->streams, StStream, k).host)
      problem(problems, seen, "a stream on the host CPU ('%s': ZeRO-Offload's --offload "
              "optimizer, whose CPU optimizer step and PCIe copies only the simulator models)",
              g_array_index(p->streams, StStream, k).name);
  /* MoE segments (expert parallelism): their dispatch's all-to-all. */
  gboolean segments = FALSE;
  for (guint o = 0; o < p->ops->len && !segments; o++)
    segments = st_program_op(p, o)->data == ST_DATA_EP_DISPATCH;
  for (guint o = 0; o < p->ops->len; o++) {
    const StOp *op = st_program_op(p, o);
    if (op->kind == ST_OP_COPY && op->data == ST_DATA_ACTS)
      problem(problems, seen, "activation offload to host (--offload-activations: copies of "
              "a layer's saved activations over PCIe, which only the simulator models; run "
              "without it for the same losses)");
    else if (op->kind == ST_OP_COPY && (op->sub != ST_COPY_D2D || op->sample_stride == 0 ||
                                   (op->data != ST_DATA_OUTPUT && op->data != ST_DATA_INPUT_GRAD)))
      problem(problems, seen, "%s copies of %s%s (the executor copies activations that say "
              "their samples, on the device)",
              st_copy_name(op->sub), st_data_name(op->data),
              op->sample_stride == 0 ? " without samples" : "");
    else if (segments && op->kind == ST_OP_COMP && op->sub == ST_PASS_RECOMPUTE &&
             op->layer >= 0 && strcmp(m->layers[op->layer].type->name, "moe_expert") == 0)
      problem(problems, seen, "full recomputation of MoE experts under expert parallelism "
              "(the segment's dispatch, experts and combine again before its backward: "
              "simulated only; --expert-recompute off keeps the experts' blocks as the "
              "executor runs them)");
    else if (op->kind == ST_OP_COMP && op->sub == ST_PASS_FWDBWD)
      problem(problems, seen, "%s passes (a profile's measure, not an op to run)",
              st_pass_name(op->sub));
    else if (op->kind != ST_OP_COMP && !comm_supported(op))
      problem(problems, seen, "%s of %s%s",
              op->kind == ST_OP_COMM_COLL ? st_coll_name(op->sub) : st_op_kind_name(op->kind),
              st_data_name(op->data),
              op->data == ST_DATA_NONE && op->bytes > 0 ? " (bytes with no data kind)" : "");
  }
  for (guint b = 0; b < p->buffers->len; b++) {
    const StBuffer *buf = &g_array_index(p->buffers, StBuffer, b);
    if (buf->slot >= STATE_SLOTS)
      problem(problems, seen, "more than %d alternating versions of a buffer ('%s')",
              STATE_SLOTS, buf->name);
  }
}

/* A layer split over a tensor-parallel group (exec/layer_impl.h). */
static void
check_split(const StSchedule *s, int job, const StLayer *l, const StLayerImpl *impl,
            GPtrArray *problems, GHashTable *seen)
{
  const StSettings *set = st_schedule_job_settings(s, job);
  const char *name = l->type->name;
  gboolean split = l->type->tp != ST_TP_REPLICATED;
  if (split && l->type->tp != ST_TP_VOCAB_LOSS && impl->tp_spans == NULL)
    problem(problems, seen, "layer type '%s' has no tensor-parallel implementation in the "
            "executor (its passes would run whole)", name);
  /* Replicated layers under sequence parallelism see the rank's rows only:
   * learned positions and an MoE router's per-sequence capacity need the
   * whole sequence. */
  if (l->sp && (strcmp(name, "position_embedding") == 0 || strcmp(name, "moe_router") == 0))
    problem(problems, seen, "layer type '%s' under sequence parallelism (its rows are a slice "
            "of the sequences)", name);
  if (split && set->recompute == ST_RECOMPUTE_FULL)
    problem(problems, seen, "full recomputation of layers split over a tensor-parallel group "
            "(--recompute selective or none)");
  if (set->sparsity > 0)
    problem(problems, seen, "sparsity with tensor parallelism");
}

/* Context parallelism (op_cp.c): layers with steps. */
static void
check_cp(const StSchedule *s, int job, GPtrArray *problems, GHashTable *seen)
{
  const StModel *m = st_schedule_job_model(s, job);
  for (int i = 0; i < m->n_layers; i++) {
    const StLayer *l = &m->layers[i];
    if (st_layer_cp_part(l) < 0)
      continue;
    const StLayerImpl *impl = st_layer_impl_find(l->type->name);
    if (impl == NULL || impl->cp_state_bytes == NULL)
      problem(problems, seen, "layer type '%s' under context parallelism (the executor's "
              "context-parallel attention is llama_block's)", l->type->name);
    else if (l->tp > 1 && st_layer_cp_part(l) != 1)
      problem(problems, seen, "context parallelism with tensor parallelism on blocks in one "
              "part (a parallel residual or no MLP: the executor's split ring attention is "
              "the attention half of a block in two)");
    else if (st_layer_attr(l, "flash", 1) == 0)
      problem(problems, seen, "context parallelism with dense attention (flash false: the "
              "executor's context-parallel attention is flash's, which keeps no scores)");
  }
}

gboolean
st_exec_check(const StSchedule *s, GError **error)
{
  g_autoptr(GPtrArray) problems = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  if (s->steps == 0)
    problem(problems, seen, "its steps are 'auto' (until its state repeats), which only the "
                            "simulator can tell: give it a number of steps (stagger run and "
                            "validate take theirs from a simulation)");
  for (int j = 0; j < st_schedule_n_jobs(s); j++)
    if (st_schedule_job_settings(s, j)->precision == ST_PRECISION_FP8)
      problem(problems, seen, "precision fp8 (FP8 GEMMs are simulated only: the executor's "
                              "kernels run fp32 and bf16; --precision mixed runs the same "
                              "schedule in bf16)");
  for (int j = 0; j < st_schedule_n_jobs(s); j++) {
    const StModel *m = st_schedule_job_model(s, j);
    if (m->n_layers > 0 && st_model_expert_tp(m) != MAX(m->layers[0].tp, 1))
      problem(problems, seen, "--expert-tensor-parallel other than --tensor-parallel (the "
                              "executor splits experts over the tensor group)");
  }
  for (int j = 0; j < st_schedule_n_jobs(s); j++)
    if (st_schedule_job_settings(s, j)->moe_imbalance > 1)
      problem(problems, seen, "--moe-imbalance (an assumed routing skew the simulator costs; "
                              "the executor's router routes the data it is given)");
  for (int j = 0; j < st_schedule_n_jobs(s); j++) {
    const StFramework *f = st_framework_find(st_schedule_job_settings(s, j)->framework);
    if (f != NULL && f->dispatch_per_rank && has_moe(st_schedule_job_model(s, j)))
      problem(problems, seen, "--framework %s's MoE dispatch (a token's row sent once per rank "
              "it reaches, as DeepEP does, is simulated only; the executor sends a row per "
              "expert: any other framework runs the same layout)", f->name);
  }
  for (int j = 0; j < st_schedule_n_jobs(s); j++)
    if (st_model_context_parallel(st_schedule_job_model(s, j)) > 1)
      check_cp(s, j, problems, seen);
  for (int j = 0; j < st_schedule_n_jobs(s); j++) {
    const StSettings *set = st_schedule_job_settings(s, j);
    if (set->recompute == ST_RECOMPUTE_SELECTIVE && set->recompute_ops != 0 &&
        set->recompute_ops != ST_RC_DEFAULT)
      problem(problems, seen, "--recompute-ops other than core_attn (the executor's layers "
                              "make only the attention scores again; the MLP's activation and "
                              "the norms' outputs are simulated only)");
  }
  for (int j = 0; j < st_schedule_n_jobs(s); j++) {
    const StModel *m = st_schedule_job_model(s, j);
    if (st_model_has_branches(m))
      problem(problems, seen, "%s has branches (layers that name their inputs: the executor "
                              "runs a chain of layers; docs/DEEPPOOL.md)", m->name);
    for (int i = 0; i < m->n_layers; i++) {
      const StLayer *l = &m->layers[i];
      const StLayerImpl *impl = st_layer_impl_find(l->type->name);
      if (impl == NULL)
        problem(problems, seen, "layer type '%s' (layer '%s' of %s) has no real implementation",
                l->type->name, l->name, m->name);
      else if (l->tp > 1)
        check_split(s, j, l, impl, problems, seen);
      else if (st_schedule_job_settings(s, j)->recompute == ST_RECOMPUTE_SELECTIVE &&
               l->act_again[ST_RC_CORE_ATTN] > 0 && impl->recompute == NULL)
        problem(problems, seen, "layer type '%s' (layer '%s' of %s) cannot recompute what "
                "selective recomputation drops", l->type->name, l->name, m->name);
    }
  }
  for (guint pi = 0; pi < s->programs->len; pi++)
    check_program(st_program_model(s, g_ptr_array_index(s->programs, pi)),
                  g_ptr_array_index(s->programs, pi), problems, seen);
  /* A rank computing weights it does not hold reads those of its device's
   * holder (cyclic DP's shared devices); with none, it has nothing to read. */
  g_autoptr(GHashTable) guests = g_hash_table_new_full(NULL, NULL, NULL, g_free);
  for (int r = 0; r < s->n_ranks && problems->len == 0; r++) {
    const StModel *m = st_program_model(s, st_schedule_program_of(s, r));
    gpointer key = GINT_TO_POINTER(s->ranks[r].program + 1);
    gboolean *guest = g_hash_table_lookup(guests, key); /* per program: which layers */
    if (guest == NULL) {
      guest = g_new0(gboolean, MAX(m->n_layers, 1));
      for (int i = 0; i < m->n_layers; i++)
        guest[i] = exec_is_guest(s, r, i);
      g_hash_table_insert(guests, key, guest);
    }
    for (int i = 0; i < m->n_layers; i++)
      if (guest[i] && exec_device_holder(s, r, i) < 0)
        problem(problems, seen,
                "rank %d computes layer '%s' but neither it nor a rank of its device holds its "
                "weights",
                r, m->layers[i].name);
  }
  if (problems->len == 0)
    return TRUE;
  g_ptr_array_add(problems, NULL);
  g_autofree char *list = g_strjoinv("; ", (char **)problems->pdata);
  g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
              "the executor cannot run this schedule: %s", list);
  return FALSE;
}
