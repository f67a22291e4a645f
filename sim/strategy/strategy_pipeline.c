/* strategy_pipeline.c: `pipeline`, inter-layer parallelism inside
 * data-parallel groups as AxoNN runs it (Singh and Bhatele, IPDPS 2022), with
 * the SAMO sparse modifier (--sparsity). strategy_pipeline.h describes the
 * layout and the parts.
 *
 * Stage count (--pipeline-stages, G_inter): given, it must divide the ranks
 * and be at most the layer count; 0 (the default) searches the divisors of
 * the ranks from 1 up for the first whose estimated peak memory per GPU
 * (st_pipe_stage_memory, an upper bound) fits the GPU: fewer stages mean
 * more pipelines for the same GPUs, a smaller bubble and less p2p. When
 * none fits, the one with the least memory is taken and the report says so.
 *
 * The notes carry estimates, each labelled: the bubble fraction of uniform
 * stages, the passes' time from the slowest stage, the p2p and all-reduce
 * bytes per GPU and their time alone on idle links. The simulated bubble of
 * a GPU is (1 - busy_fraction) x step time in the report. Under the
 * zero-bubble orders the bubble estimate is the paper's closed form over
 * the slowest stage's f, b (B) and w (W), which the notes also give
 * (stage_*_estimate_s), and the bubble itself (bubble_estimate_s).
 */
#include "strategy/strategy_pipeline.h"

#include "base/util.h"
#include "cost/cost.h"

static const char *const ORDER_NAMES[] = {"1f1b", "gpipe", "zb-h1", "zb-h2", "dualpipev"};
static const char *const BALANCE_NAMES[] = {"time", "memory", "params"};

/* Estimated peak per GPU: the worst stage, times the ranks a GPU hosts. */
static int64_t
memory_per_gpu(const StPipe *pp)
{
  int64_t worst = 0;
  for (int s = 0; s < pp->n_stages; s++)
    worst = MAX(worst, st_pipe_stage_memory(pp, s));
  int per_device = (pp->options->ranks + pp->cluster->gpus - 1) / pp->cluster->gpus;
  return worst * per_device;
}

/* Sets pp->n_stages and splits (strategy_pipeline.h). */
gboolean
st_pipe_choose_stages(StPipe *pp, const char **how, GError **error)
{
  const StOptions *o = pp->options;
  int R = o->ranks, V = MAX(pp->n_chunks, 1), L = pp->model->n_layers / V;
  StPipeBalance by = (StPipeBalance)o->balance;
  if (o->pipeline_stages > 0) {
    if (R % o->pipeline_stages != 0 || o->pipeline_stages > L) {
      g_set_error(error, ST_STRATEGY_ERROR, ST_ERROR_INVALID,
                  "--pipeline-stages %d: must divide the %d rank%s (G = G_inter x G_data) "
                  "and be at most the model's %d layers%s",
                  o->pipeline_stages, R, st_plural(R), L * V,
                  V > 1 ? " over the 2 chunks each stage holds under dualpipev" : "");
      return FALSE;
    }
    pp->n_stages = o->pipeline_stages;
    st_pipe_split(pp, by);
    *how = "given";
    return TRUE;
  }
  int64_t capacity = pp->cluster->gpu.memory_bytes;
  int best = -1;
  int64_t best_bytes = G_MAXINT64;
  for (int S = 1; S <= MIN(R, L); S++) {
    if (R % S != 0)
      continue;
    pp->n_stages = S;
    st_pipe_split(pp, by);
    int64_t bytes = memory_per_gpu(pp);
    if (capacity <= 0 || bytes <= capacity) {
      *how = "fewest stages whose estimated memory per GPU fits";
      return TRUE;
    }
    if (bytes < best_bytes) {
      best = S;
      best_bytes = bytes;
    }
  }
  pp->n_stages = best;
  st_pipe_split(pp, by);
  *how = "none fits: the stage count with the least estimated memory";
  return TRUE;
}

/* ---- estimates for the notes ---------------------------------------------- */

static double
p2p_ns(const StPipe *pp, const StSchedule *s, int from, int to, int64_t bytes)
{
  StCommPlan plan;
  st_comm_plan_p2p(s->cluster, s->ranks[from].device, s->ranks[to].device, bytes, &plan);
  return st_comm_plan_ns(&plan);
}

/* The per-GPU bubble of the order over stages of forward f, B b and W w
 * (strategy_pipeline.h), in the unit of its arguments. */
static double
bubble_closed_form(StPipeOrder order, int S, double f, double b, double w)
{
  switch (order) {
  case ST_PIPE_ZB_H1:
    return MAX(0.0, (S - 1) * (f + b - w));
  case ST_PIPE_ZB_H2:
    return MAX(0.0, (S - 1) * (f + b - 2 * w));
  case ST_PIPE_DUALPIPE_V: /* (PP/2 - 1)(F&B + B - 3W), F&B = F + B, B = b + w */
    return MAX(0.0, (S - 1) * (f + 2 * b - w));
  default:
    return (S - 1) * (f + b + w);
  }
}

/* One stage's estimates: each chunk's forward, B and W (or whole
 * backward) times, its sends and receives and its buckets' all-reduces,
 * each alone. */
typedef struct {
  double f, b, w, fwd_bwd;      /* the slowest of its chunks (ns) */
  double p2p_bytes, p2p_ns;     /* summed over its chunks */
  double reduce_bytes, reduce_ns;
} StageEstimate;

static void
chunk_estimate(const StPipe *pp, const StSchedule *s, const StPipeComms *comms, int st, int k,
               StageEstimate *e)
{
  int M = pp->n_micro, K = pp->n_stages * MAX(pp->n_chunks, 1);
  double t = 0, tf = 0, tb = 0, tw = 0;
  for (int i = pp->first[k]; i < pp->first[k + 1]; i++) {
    t += st_pipe_layer_time_ns(pp, i, ST_PASS_FWD) + st_pipe_layer_time_ns(pp, i, ST_PASS_BWD);
    tf += st_pipe_layer_time_ns(pp, i, ST_PASS_FWD);
    if (st_pipe_splits(pp, i)) {
      tb += i > 0 ? st_pipe_layer_time_ns(pp, i, ST_PASS_BWD_INPUT) : 0;
      tw += st_pipe_layer_time_ns(pp, i, ST_PASS_BWD_WEIGHT);
    } else {
      tb += st_pipe_layer_time_ns(pp, i, ST_PASS_BWD);
    }
    if (pp->recomputes[i] != ST_RECOMPUTE_NONE) {
      t += st_pipe_layer_time_ns(pp, i, ST_PASS_RECOMPUTE);
      tb += st_pipe_layer_time_ns(pp, i, ST_PASS_RECOMPUTE);
    }
  }
  if (t > e->fwd_bwd)
    *e = (StageEstimate){tf, tb, tw, t, e->p2p_bytes, e->p2p_ns, e->reduce_bytes, e->reduce_ns};
  /* Pipeline 0's ranks 0 .. S-1: the chunk's boundaries with other stages. */
  for (int d = -1; d <= 1; d += 2) {
    int j = k + d;
    if (j < 0 || j >= K || st_pipe_chunk_stage(pp, j) == st)
      continue;
    int other = st_pipe_chunk_stage(pp, j);
    int64_t b = st_pipe_boundary_bytes(pp, MIN(j, k));
    e->p2p_bytes += (double)M * b;
    e->p2p_ns += M * (p2p_ns(pp, s, st, other, b) + p2p_ns(pp, s, other, st, b));
  }
  /* Its all-reduces over its data-parallel group. */
  g_autoptr(GArray) buckets = st_grad_buckets_of(pp->owned_nnz, pp->first[k], pp->first[k + 1],
                                                 pp->options->bucket_bytes, pp->bytes.grad);
  StGroupShape shape;
  st_schedule_group_shape(s, comms->data, st, &shape);
  for (guint q = 0; q < buckets->len; q++) {
    int64_t b = g_array_index(buckets, StBucket, q).params * pp->bytes.grad;
    StCommPlan plan;
    if (st_comm_plan_collective(s->cluster, pp->profile, pp->options->comm_algo,
                                ST_COLL_ALL_REDUCE, b, &shape, &plan, NULL))
      e->reduce_ns += st_comm_plan_ns(&plan);
    e->reduce_bytes += (double)b;
  }
}

static void
note_estimates(const StPipe *pp, StSchedule *s, const StPipeComms *comms)
{
  int S = pp->n_stages, M = pp->n_micro;
  double slowest = 0, p2p_bytes = 0, p2p_time = 0, ar_bytes = 0, ar_time = 0;
  double f_slow = 0, b_slow = 0, w_slow = 0; /* the slowest stage's (ns) */
  int64_t memory = 0;
  /* A stage's chunks: one, or DualPipeV's two (Megatron's interleaving
   * notes its own). */
  int V = st_pipe_vshape(pp) ? MAX(pp->n_chunks, 1) : 1;
  for (int st = 0; st < S; st++) {
    StageEstimate e = {0};
    for (int c = 0; c < V; c++)
      chunk_estimate(pp, s, comms, st, st_pipe_chunk_at(pp, st, c), &e);
    if (e.fwd_bwd > slowest) {
      f_slow = e.f;
      b_slow = e.b;
      w_slow = e.w;
    }
    slowest = MAX(slowest, e.fwd_bwd);
    p2p_bytes = MAX(p2p_bytes, e.p2p_bytes);
    p2p_time = MAX(p2p_time, e.p2p_ns);
    ar_bytes = MAX(ar_bytes, e.reduce_bytes);
    ar_time = MAX(ar_time, e.reduce_ns);
    memory = MAX(memory, st_pipe_stage_memory(pp, st));
  }
  if (st_pipe_order_splits(pp->order)) {
    double bubble = bubble_closed_form(pp->order, S, f_slow, b_slow, w_slow);
    st_schedule_note_number(s, "bubble_fraction_estimate",
                            bubble / (V * M * (f_slow + b_slow + w_slow) + bubble));
    st_schedule_note_number(s, "bubble_estimate_s", bubble * 1e-9);
    st_schedule_note_number(s, "stage_fwd_estimate_s", f_slow * 1e-9);
    st_schedule_note_number(s, "stage_bwd_input_estimate_s", b_slow * 1e-9);
    st_schedule_note_number(s, "stage_bwd_weight_estimate_s", w_slow * 1e-9);
  } else {
    st_schedule_note_number(s, "bubble_fraction_estimate", (double)(S - 1) / (M + S - 1));
  }
  st_schedule_note_number(s, "slowest_stage_fwd_bwd_estimate_s", slowest * 1e-9);
  st_schedule_note_number(s, "passes_time_estimate_s", (V * M + S - 1) * slowest * 1e-9);
  st_schedule_note_number(s, "p2p_bytes_per_gpu", p2p_bytes);
  st_schedule_note_number(s, "p2p_time_alone_estimate_s", p2p_time * 1e-9);
  st_schedule_note_number(s, "allreduce_bytes_per_gpu", ar_bytes);
  st_schedule_note_number(s, "allreduce_time_alone_estimate_s", ar_time * 1e-9);
  st_schedule_note_number(s, "memory_per_rank_estimate_bytes", (double)memory);
}

static char *
stages_text(const StPipe *pp)
{
  GString *text = g_string_new(NULL);
  for (int s = 0; s < pp->n_stages; s++) {
    const StModel *m = pp->model;
    g_string_append_printf(text, "%s%s..%s", s ? " | " : "", m->layers[pp->first[s]].name,
                           m->layers[pp->first[s + 1] - 1].name);
  }
  return g_string_free(text, FALSE);
}

/* ---- build ------------------------------------------------------------------ */

static StSchedule *
build(const StStrategyInput *in, GError **error)
{
  const StOptions *o = in->options;
  StPipe pp;
  if (!st_pipe_init(&pp, in->model, in->cluster, in->profile, o, error)) {
    st_pipe_clear(&pp);
    return NULL;
  }
  /* The split backward is written for the dense stage programs of this
   * strategy: SAMO's compress after each backward is not (yet) placed
   * after its W. */
  if (st_pipe_order_splits(pp.order) && st_sparse_on(&pp.sparse)) {
    st_pipe_clear(&pp);
    st_strategy_refuse(error, "--pipeline-schedule %s with --sparsity: the zero-bubble orders "
                       "are built for dense models only", ORDER_NAMES[pp.order]);
    return NULL;
  }
  const char *how = NULL;
  if (!st_pipe_choose_stages(&pp, &how, error)) {
    st_pipe_clear(&pp);
    return NULL;
  }
  if (st_pipe_vshape(&pp) && pp.n_micro < 2 * pp.n_stages) {
    st_strategy_refuse(error, "--pipeline-schedule dualpipev: %d micro-batch%s per pipeline, "
                       "where DualPipeV needs at least 2 x %d stages = %d (raise "
                       "--global-batch or lower --micro-batch)",
                       pp.n_micro, pp.n_micro == 1 ? "" : "es", pp.n_stages, 2 * pp.n_stages);
    st_pipe_clear(&pp);
    return NULL;
  }
  int R = o->ranks, S = pp.n_stages;
  StSchedule *s = st_schedule_new(st_model_copy(in->model), st_cluster_copy(in->cluster), R,
                                  NULL);
  g_autofree int32_t *color = g_new(int32_t, R);
  StPipeComms comms = {.tied = -1, .data_gather = -1, .ep = -1, .expert_data = -1,
                       .expert_data_gather = -1, .expert_tp = -1};
  for (int r = 0; r < R; r++)
    color[r] = r / S;
  comms.pipe = st_schedule_add_comm(s, "pipe", color);
  for (int r = 0; r < R; r++)
    color[r] = r % S;
  comms.data = st_schedule_add_comm(s, "data", color);
  if (pp.tied_copy) {
    for (int r = 0; r < R; r++) {
      gboolean member = pp.stage_of[pp.tied_head] == r % S || pp.stage_of[pp.tied_embed] == r % S;
      color[r] = member ? r / S : -1;
    }
    comms.tied = st_schedule_add_comm(s, "tied", color);
  }
  for (int st = 0; st < S; st++) {
    int program = st_schedule_add_program(s, st_pipe_stage_program(&pp, st, 0, &comms));
    for (int r = st; r < R; r += S) {
      s->ranks[r].program = program;
      s->ranks[r].replica = r / S; /* every stage of pipeline r / S works on its samples */
    }
  }

  s->steps = o->steps;
  s->warmup_scale = S; /* the stages fill */
  s->settings.strategy = g_strdup("pipeline");
  s->settings.precision = o->precision;
  s->settings.recompute = (StRecompute)o->recompute;
  s->settings.optimizer = o->optimizer;
  s->settings.micro_batch = o->micro_batch;
  s->settings.accumulation = pp.n_micro;
  s->settings.global_batch = o->global_batch;
  g_autofree char *sparsity =
    st_sparse_on(&pp.sparse) ? g_strdup_printf(", sparsity %g", pp.sparse.p) : g_strdup("");
  g_autofree char *recompute = st_recompute_describe(&pp.recompute);
  s->settings.description = g_strdup_printf(
    "pipeline: %d stage%s x %d pipeline%s (%d ranks), %s, %d micro-batches of %d per "
    "pipeline, balanced by %s%s%s",
    S, S == 1 ? "" : "s", pp.n_data, pp.n_data == 1 ? "" : "s", R, ORDER_NAMES[pp.order],
    pp.n_micro, o->micro_batch, BALANCE_NAMES[o->balance], recompute, sparsity);
  st_schedule_note_number(s, "pipeline_stages", S);
  st_schedule_note_text(s, "pipeline_stages_chosen", how);
  st_schedule_note_number(s, "data_groups", pp.n_data);
  st_schedule_note_number(s, "micro_batches", pp.n_micro);
  st_schedule_note_text(s, "pipeline_schedule", ORDER_NAMES[pp.order]);
  st_schedule_note_text(s, "balance", BALANCE_NAMES[o->balance]);
  st_schedule_note_text(s, "recompute", st_recompute_name((StRecompute)o->recompute));
  g_autofree char *stages = stages_text(&pp);
  st_schedule_note_text(s, "stages", stages);
  if (pp.tied_copy)
    st_schedule_note_text(s, "tied_embedding", "the head's stage keeps a copy; gradients summed");
  if (o->zero_stage > 0)
    st_schedule_note_text(s, "zero_stage", "not applied: each stage keeps its states whole");
  note_estimates(&pp, s, &comms);
  int64_t nnz = 0;
  for (int i = 0; i < in->model->n_layers; i++)
    nnz += pp.owned_nnz[i];
  if (!st_sparse_on(&pp.sparse))
    st_schedule_note_number(s, "sparsity", 0);
  st_sparse_note(&pp.sparse, s, nnz);
  st_pipe_clear(&pp);
  return s;
}

static const StStrategyKnob KNOBS[] = {
  {"pipeline-schedule", "1f1b,gpipe,zb-h1,zb-h2,dualpipev"},
  {"recompute", "none,full"},
  {"recompute-every", NULL},
  {"recompute-ops", NULL},
  {"offload-activations", NULL},
  {"balance", "time,memory"},
  {"pipeline-stages", NULL}, /* by default the fewest that fit (0) */
  {NULL},
};

const StStrategy st_strategy_pipeline = {
  .name = "pipeline",
  .summary = "inter-layer (pipeline) parallelism inside data-parallel groups, GPipe, 1F1B, "
             "zero bubble (ZB-H1, ZB-H2) or DualPipeV; with --sparsity, SAMO's compressed model "
             "states",
  .citation = "Singh and Bhatele, AxoNN: An asynchronous, message-driven parallel framework "
              "for extreme-scale deep learning, IPDPS 2022; Singh and Bhatele, Exploiting "
              "Sparsity in Pruned Neural Networks to Optimize Large Model Training, IPDPS 2023; "
              "Qi, Wan, Huang and Lin, Zero Bubble Pipeline Parallelism, ICLR 2024; "
              "DeepSeek-AI, DeepSeek-V3 Technical Report (DualPipe), arXiv 2412.19437",
  .build = build,
  .estimate = st_pipeline_estimate,
  .update = st_sparse_update,
  .knobs = KNOBS,
};
