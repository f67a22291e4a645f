/* megatron_estimate.c: what the planner knows of a megatron configuration
 * before building it (StStrategy.estimate): the checks build() makes, the
 * planner's default of tensor-parallel groups inside a node, and lower
 * bounds of peak memory and of the steady step, in O(layers).
 *
 * Memory. A GPU of stage s holds, for the whole run, its chunks' model
 * states: weights, gradients and optimizer states per parameter
 * (st_state_bytes), each divided over the d data-parallel ranks from the
 * ZeRO stage that shards it on (1: optimizer states, 2: + gradients, 3: +
 * weights; an expert's over its d / e "expert data" ranks after the e
 * expert ranks split the experts). Rounded down, so never above the
 * shards' sizes. Besides, 1F1B runs min(p - s, M) forwards on stage s
 * before its first backward (interleaved: the order is walked), and each
 * keeps its layers' saved blocks (StLayerMemory.saved; under selective
 * recomputation less what it drops; under full recomputation their inputs
 * instead, which the recompute reads) until its backward: those are live
 * together, with the states (strategy/tensors.h); an EP rank's experts
 * keep theirs at e times the batch. Everything else (MoE layers under full
 * recomputation, comm buffers, scratch) is left out: a lower bound.
 *
 * Step time. On one stage, passes run one after another on the compute
 * stream with the tensor-parallel collectives between them
 * (tensor_parallel.c), so a pass takes at least its time alone as the
 * engine costs it (st_compute_time, as plan_bound.c takes it) plus its
 * collectives': each rank sends at least (t - 1) / t of a collective's
 * buffer, at most at its links' bandwidth (NVLink inside a node; every
 * link class together across nodes; none counted with a measured profile,
 * whose collectives may beat the links' model). Stage s's first forward
 * waits for micro-batch 0's forward of chunk 0 on stages 0..s-1, its last
 * pass is a backward of chunk 0, after which that micro-batch's backward
 * runs on stages s-1..0, and stage 0's next step begins after its
 * optimizer, which follows: so the steady step is at least, for every s,
 *   sum_{s' < s} (f_0(s') + b_0(s')) + M sum_{chunks c of s} (f_c + b_c)
 * with f, b a chunk's forward and backward (recompute included) per
 * micro-batch. The planner takes the largest, less the steady rule's
 * tolerance (st_steady_step_bound). The busiest stage's compute, its
 * collectives and the fill and drain before and after are reported apart.
 */
#include "strategy/megatron.h"

#include <math.h>
#include <string.h>

#include "cost/cost.h"
#include "cost/framework.h"

#include "model/layer_type.h"
#include "strategy/strategy_common.h"
#include "strategy/strategy_pipeline.h"
#include "strategy/tensor_parallel.h"

typedef struct {
  double ns[2];      /* forward, backward (recompute included) per micro-batch, alone */
  double tp_bytes;   /* collectives' bytes each rank sends per micro-batch, both passes */
  int64_t dense, experts; /* parameters held (experts: this EP rank's) */
  int64_t saved;     /* kept from a forward to its backward, per micro-batch */
} Chunk;

/* A pass's time alone, as the engine costs the op (sched/work.h). */
static double
pass_ns(const StComputeCtx *ctx, const StLayer *l, StPass pass, int64_t batch, unsigned again_ops)
{
  StWork w = {.pass = pass, .layer = l, .batch = batch, .again_ops = again_ops};
  StCostSource source;
  double ns = st_compute_time(ctx, &w, &source);
  return isfinite(ns) && ns > 0 ? ns : 0;
}

/* What one layer adds to its chunk per micro-batch. */
typedef struct {
  double fwd, bwd;   /* alone, recompute in bwd */
  double tp_bytes;
  int64_t saved;
} LayerCost;

static void
layer_cost(const StMegatronShape *sh, const StOptions *o, const StStateBytes *b,
           const StComputeCtx *ctx, int i, StRecompute mode, LayerCost *lc)
{
  const StModel *m = sh->model;
  const StLayer *l = &m->layers[i];
  int mb = o->micro_batch;
  gboolean expert = i > 0 && m->layers[i - 1].chain_open;
  gboolean in_moe = expert || l->chain_open;
  StLayerMemory mem;
  st_layer_memory(m, i, mb, b->activation, &mem);
  /* An EP rank runs 1 / e of the experts at e times the batch. */
  int64_t batch = expert ? (int64_t)mb * sh->e : mb;
  double share = expert ? 1.0 / sh->e : 1.0;
  *lc = (LayerCost){0};
  lc->fwd = share * pass_ns(ctx, l, ST_PASS_FWD, batch, 0);
  lc->bwd = share * pass_ns(ctx, l, ST_PASS_BWD, batch, 0);
  /* What tensors.c recomputes (recompute.h; not counted inside MoE segments). */
  unsigned ops = st_recompute_plan(o).ops;
  if (!in_moe && mode == ST_RECOMPUTE_FULL)
    lc->bwd += pass_ns(ctx, l, ST_PASS_RECOMPUTE, batch, 0);
  if (!in_moe && mode == ST_RECOMPUTE_SELECTIVE)
    lc->bwd += pass_ns(ctx, l, ST_PASS_RECOMPUTE, batch, ops != 0 ? ops : ST_RC_DEFAULT);
  if (sh->t > 1 && !in_moe) {
    double bytes = (double)st_tp_pass_comm_bytes(m, i, ST_PASS_FWD, mb, b->activation) +
                   (double)st_tp_pass_comm_bytes(m, i, ST_PASS_BWD, mb, b->activation);
    if (mode == ST_RECOMPUTE_FULL)
      bytes += (double)st_tp_pass_comm_bytes(m, i, ST_PASS_RECOMPUTE, mb, b->activation);
    lc->tp_bytes = bytes * (sh->t - 1) / sh->t;
  }
  /* Under full recomputation the saved block goes, but the layer's input
   * stays for its recompute (tensors.h). */
  if (mode == ST_RECOMPUTE_FULL) {
    lc->saved = in_moe ? 0 : mem.input;
  } else {
    /* An EP rank's experts save their blocks at e times the batch: 1 / e
     * of the layers, each e b rows (the same experts, so per layer the
     * share of their sum). */
    if (expert && sh->e > 1)
      st_layer_memory(m, i, batch, b->activation, &mem);
    int64_t keep =
      mem.saved - (mode == ST_RECOMPUTE_SELECTIVE ? st_layer_memory_again(&mem, ops, NULL) : 0);
    lc->saved = expert ? keep / sh->e : keep;
  }
}

/* Whether layers i and j cost alike: the same type, attrs and shapes, and
 * the same place in or out of an MoE chain (repeated blocks). */
static gboolean
alike(const StModel *m, int i, int j)
{
  gboolean ei = i > 0 && m->layers[i - 1].chain_open, ej = j > 0 && m->layers[j - 1].chain_open;
  return ei == ej && m->layers[i].chain_open == m->layers[j].chain_open &&
         strcmp(m->layers[i].signature, m->layers[j].signature) == 0;
}

static void
chunk_of(const StMegatronShape *sh, const StOptions *o, const StStateBytes *b,
         const StComputeCtx *ctx, const StRecompute *mode, int k, Chunk *c)
{
  const StModel *m = sh->model;
  *c = (Chunk){0};
  LayerCost lc = {0};
  for (int i = sh->first[k]; i < sh->first[k + 1]; i++) {
    const StLayer *l = &m->layers[i];
    if (i == sh->first[k] || !alike(m, i, i - 1) || mode[i] != mode[i - 1])
      layer_cost(sh, o, b, ctx, i, mode[i], &lc);
    if (i > 0 && m->layers[i - 1].chain_open)
      c->experts += l->params / sh->e;
    else
      c->dense += l->params;
    c->ns[0] += lc.fwd;
    c->ns[1] += lc.bwd;
    c->tp_bytes += lc.tp_bytes;
    c->saved += lc.saved;
  }
}

/* The most saved bytes stage s holds at once: 1F1B keeps min(p - s, M)
 * micro-batches; the interleaved order is walked (its forwards add a
 * chunk's saved blocks, its backwards take them away at their end). */
static int64_t
held(const StMegatronShape *sh, const Chunk *chunk, int s, int M)
{
  if (sh->v == 1)
    return (int64_t)MIN(sh->p - s, M) * chunk[s].saved;
  g_autoptr(GArray) order = st_pipe_order_interleaved(s, sh->p, M, sh->v);
  int64_t live = 0, most = 0;
  for (guint k = 0; k < order->len; k++) {
    const StPipeSlot *slot = &g_array_index(order, StPipeSlot, k);
    int64_t saved = chunk[slot->chunk * sh->p + s].saved;
    live += slot->fwd ? saved : 0;
    most = MAX(most, live);
    live -= slot->fwd ? 0 : saved;
  }
  return most;
}

/* One micro-batch's tensors on the stage of model chunk k as its program
 * allocates them (tensors.h, the spec strategy_pipeline_stage.c gives):
 * *held, what stays from its last forward to its first backward (saved
 * blocks, kept inputs and outputs, the boundary received), and *peak, the
 * most at once, which adds what lives only inside the passes: outputs
 * before the next layer frees them, the input gradients going back, pass
 * scratch, the loss's targets, fp32 logits and autograd buffers on the last
 * stage. FALSE where the build runs some layers outside tensors.h (MoE
 * segments). */
static gboolean
footprint(const StMegatronShape *sh, const StOptions *o, const StStateBytes *b, int k,
          int64_t *held, int64_t *peak)
{
  const StModel *m = sh->model;
  int lo = sh->first[k], hi = sh->first[k + 1], K = sh->p * sh->v;
  for (int i = 0; i < m->n_layers; i++)
    if (m->layers[i].chain_open)
      return FALSE;
  g_autofree int *batch = g_new0(int, m->n_layers);
  g_autofree gboolean *moved = g_new0(gboolean, m->n_layers + 1);
  for (int i = lo; i < hi; i++)
    batch[i] = o->micro_batch;
  /* Chunks k - 1 and k + 1 run on the stages before and after (p > 1
   * wherever there are several). */
  moved[lo] = k > 0;
  moved[hi] = k < K - 1;
  const StFramework *fw = st_options_framework(o);
  StTensorsSpec spec = {
    .model = m,
    .dtype = b->activation,
    .grad_bytes = b->grad,
    .batch = batch,
    .moved = moved,
    .recompute = st_recompute_plan(o),
    .loss_in_place = fw->loss_in_place,
    .loss_16bit = fw->loss_16bit,
    .loss_autograd = fw->loss_autograd,
    .offload = o->offload_activations,
  };
  st_tensors_footprint(&spec, held, peak);
  return TRUE;
}

/* The most tensors of micro-batches in flight stage s surely holds at once.
 * 1F1B (v = 1) runs n = min(p - s, M) forwards before its first backward:
 * the last of them runs while the n - 1 before hold their tensors, and the
 * first backward while the n - 1 after do, so at some point n - 1
 * micro-batches are held beside one at its own worst moment. The
 * interleaved order is walked, each chunk's micro-batch holding its tensors
 * from its forward to its backward. Neither is ever below the saved blocks
 * alone (`saved`, held()), which stands where the footprint is unknown.
 * Under ZeRO 2-3 each micro-batch's backward of a chunk allocates its
 * gradient bucket (`bucket`, its bytes; zero_shard.c) while the others in
 * flight hold theirs: 1F1B's first backward beside the n - 1 after it, an
 * interleaved backward beside what the walk has live. */
static int64_t
in_flight(const StMegatronShape *sh, const StOptions *o, const StStateBytes *b,
          const Chunk *chunk, int s, int M, int64_t saved, const int64_t *bucket)
{
  int K = sh->p * sh->v;
  g_autofree int64_t *hold = g_new(int64_t, K);
  int64_t peak = 0;
  for (int k = s; k < K; k += sh->p)
    if (!footprint(sh, o, b, k, &hold[k], &peak))
      return saved;
  if (sh->v == 1) {
    int n = MIN(sh->p - s, M);
    return MAX(saved, (int64_t)(n - 1) * hold[s] + MAX(peak, bucket[s]));
  }
  g_autoptr(GArray) order = st_pipe_order_interleaved(s, sh->p, M, sh->v);
  int64_t live = 0, most = 0;
  for (guint k = 0; k < order->len; k++) {
    const StPipeSlot *slot = &g_array_index(order, StPipeSlot, k);
    int64_t bytes = hold[slot->chunk * sh->p + s];
    live += slot->fwd ? bytes : 0;
    most = MAX(most, slot->fwd ? live : live - bytes + bucket[slot->chunk * sh->p + s]);
    live -= slot->fwd ? 0 : bytes;
  }
  return MAX(saved, most);
}

/* Communicators each rank joins with peers on other GPUs, as build() adds
 * them (strategy_megatron.c, add_comms), counted where a rank's group has
 * more than one member, each on its own GPU (no more ranks than GPUs, rank
 * r on GPU r): its tensor group (t), context group (c), pipeline (p), its
 * data group (d, the dp-cp group) and under ZeRO-3 the data gather beside
 * it. The experts' and the tied embedding's groups are left out. */
static int
comms_of(const StMegatronShape *sh, const StOptions *o, const StCluster *cl)
{
  if (o->ranks > cl->gpus)
    return 0;
  return (sh->t > 1) + (sh->c > 1) + (sh->p > 1) + (sh->d > 1) * (o->zero_stage == 3 ? 2 : 1);
}

/* Model-state bytes of `params` on one GPU, ZeRO stage z sharding over n;
 * none of the optimizer's under --offload optimizer. */
static int64_t
states(int64_t params, int z, int n, gboolean offload, const StStateBytes *b)
{
  int64_t shard = params / MAX(n, 1);
  int64_t weights = z >= 3 ? shard * b->shard_weight : params * b->weight;
  int64_t grads = z >= 2 ? shard * b->shard_grad : params * b->grad;
  int optimizer = z >= 3 ? b->shard_optimizer : b->optimizer;
  return weights + grads + (offload ? 0 : (z >= 1 ? shard : params) * optimizer);
}

gboolean
st_megatron_estimate(const StStrategyInput *in, StEstimate *est, GError **error)
{
  const StOptions *o = in->options;
  const StCluster *cl = in->cluster;
  int t = MAX(o->tensor_parallel, 1), per = cl->gpus_per_node;
  gboolean inside = per % t == 0;
  if (!est->groups_across_nodes && t > 1 && !inside)
    return st_strategy_refuse(error,
                  "--tensor-parallel %d: the group would span nodes of %d GPUs (the planner keeps "
                  "tensor parallelism inside a node unless --tp-across-nodes)",
                  t, per);
  StMegatronShape sh;
  if (!st_megatron_shape(in, &sh, error))
    return FALSE;
  StStateBytes b;
  st_state_bytes(o, &b);
  int K = sh.p * sh.v, M = o->accumulation;
  StDtype dtype = !st_precision_16bit(o->precision)   ? ST_DTYPE_FP32
                  : cl->gpu.flops[ST_DTYPE_BF16] > 0 ? ST_DTYPE_BF16
                                                     : ST_DTYPE_FP16;
  StComputeCtx ctx = {cl, in->profile, sh.model, dtype, o->compute_model,
                      st_options_framework(o), st_options_nchw(o),
                      o->precision == ST_PRECISION_FP8};
  g_autofree Chunk *chunk = g_new(Chunk, K);
  StRecomputePlan plan = st_recompute_plan(o);
  g_autofree StRecompute *mode = st_recompute_layers(sh.model, &plan);
  for (int k = 0; k < K; k++)
    chunk_of(&sh, o, &b, &ctx, mode, k, &chunk[k]);

  /* ZeRO's gradient buckets: without --overlap-grad-reduce one per chunk,
   * all its layers' gradients (at least their own parameters': a tied
   * copy adds to them), found by the build only for dense models. */
  gboolean one_bucket = !st_options_overlap(o);
  for (int i = 0; i < sh.model->n_layers; i++)
    one_bucket = one_bucket && !sh.model->layers[i].chain_open;
  g_autofree int64_t *bucket = g_new0(int64_t, K);
  for (int k = 0; k < K && one_bucket && o->zero_stage >= 2; k++)
    bucket[k] = chunk[k].dense * b.grad;

  /* Memory: the stage whose states and in-flight activations weigh most. */
  int64_t peak = 0, early = 0;
  for (int s = 0; s < sh.p; s++) {
    int64_t dense = 0, experts = 0;
    for (int k = s; k < K; k += sh.p) {
      dense += chunk[k].dense;
      experts += chunk[k].experts;
    }
    gboolean offload = o->offload == ST_OFFLOAD_OPTIMIZER;
    int64_t bytes = states(dense, o->zero_stage, sh.d, offload, &b) +
                    states(experts, o->zero_stage, sh.d / sh.e, offload, &b);
    int64_t saved = held(&sh, chunk, s, M);
    early = MAX(early, bytes + saved);
    peak = MAX(peak, bytes + in_flight(&sh, o, &b, chunk, s, M, saved, bucket));
    /* ZeRO's reduce-scatter of a bucket, after its last backward, lands
     * its shard in a buffer of its own beside the states (zero_shard.c). */
    for (int k = s; k < K && one_bucket && o->zero_stage >= 1; k += sh.p)
      peak = MAX(peak, bytes + st_shard(chunk[k].dense, sh.d) * b.grad);
  }
  est->peak_bytes = peak;
  est->early_bytes = early;
  est->comms = comms_of(&sh, o, cl);

  /* Time: the longest chain through one step (see the top). Measured
   * collectives may beat the links' model: none counted then. */
  const StLink *links = cl->links;
  double across = links[ST_LINK_INTRA_NODE].bandwidth + links[ST_LINK_INTER_NODE].bandwidth +
                  links[ST_LINK_PCIE].bandwidth;
  double bw = in->profile != NULL ? INFINITY
              : inside            ? links[ST_LINK_INTRA_NODE].bandwidth
                                  : across;
  gboolean timed = bw > 0 && o->ranks <= cl->gpus;
  double best = 0, fill = 0;
  for (int s = 0; timed && s < sh.p; s++) {
    double compute = 0, comm = 0;
    for (int k = s; k < K; k += sh.p) {
      compute += (chunk[k].ns[0] + chunk[k].ns[1]) * 1e-9;
      comm += chunk[k].tp_bytes / bw;
    }
    double total = fill + M * (compute + comm);
    if (total > best) {
      best = total;
      est->compute_ns = (int64_t)floor(M * compute * 1e9);
      est->tp_comm_ns = (int64_t)floor(M * comm * 1e9);
      est->bubble_ns = (int64_t)floor(fill * 1e9);
    }
    fill += (chunk[s].ns[0] + chunk[s].ns[1]) * 1e-9 + chunk[s].tp_bytes / bw;
  }
  est->step_ns = isfinite(best) ? (int64_t)floor(best * 1e9) : 0;
  st_megatron_shape_clear(&sh);
  return TRUE;
}
