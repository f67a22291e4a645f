/* plan_closed_dp.c: the closed form of a data-parallel step (dp, and zero
 * stages 1-3), before building (plan_closed.c says why it bounds).
 *
 * The cycle followed is the optimizer step's, from its end in step k to
 * its end in step k + 1 (strategy_dp.c, strategy_zero.c, zero_shard.c):
 *
 *   G      zero stages 1-2 without overlap_param_gather: the updated
 *          parameters all-gathered bucket after bucket on the comm stream,
 *          which the next forward waits for; else 0.
 *   t      the compute stream from G: every micro-batch's forwards of every
 *          layer then backwards from the last layer (each after its
 *          recomputation, if checkpointed), each at its alone time (offload
 *          copies and MoE expert chains left out).
 *   r      the reductions on the comm stream: bucket b's collective (dp:
 *          all-reduce, zero: reduce-scatter, of its gradient bytes) starts
 *          after the backward of its last layer and the reduction before
 *          it; dp, stage 1 and deferred stages 2-3 (--defer-grad-sync)
 *          reduce after the last micro-batch only, stages 2-3 after each.
 *   step   the optimizer over the rank's elements (dp: all of them, zero:
 *          its shard, each layer's slice rounded up), after the compute
 *          stream and the last reduction.
 *
 *   cycle = max(t, r) + step,  the collectives over the group of every rank
 *   (st_plan_world_shape), at the least time st_comm_plan_collective gives.
 *
 * For an MLP whose step is launch-bound this is within 1 % of the built
 * schedule's bound, and it grows with the node count as the all-reduce does,
 * which is what prunes a 1-100,000 node search.
 */
#include "plan/plan_private.h"

#include <math.h>

#include "base/limits.h"
#include "cost/cost.h"
#include "cost/framework.h"
#include "model/layer_type.h"
#include "strategy/recompute.h"
#include "strategy/strategy_common.h"

/* A COMP op's alone time, as plan_bound.c takes it from a built op. */
static int64_t
comp_ns(StPlanClosedCache *cache, const StComputeCtx *ctx, StPass pass, const StLayer *layer,
        int64_t batch, int64_t elems, int64_t bytes, const char *kernel, unsigned again_ops)
{
  StWork w = {
    .pass = pass, .layer = layer, .batch = batch, .elems = elems, .bytes = bytes,
    .kernel = kernel, .again_ops = again_ops,
  };
  return st_plan_closed_comp_ns(cache, ctx, &w);
}

static int64_t
coll_ns(const StStrategyInput *in, const StGroupShape *world, StCollKind kind, int64_t bytes)
{
  const char *algo = in->options->comm_algo != NULL ? in->options->comm_algo : "auto";
  StCommPlan plan;
  if (!st_comm_plan_collective(in->cluster, in->profile, algo, kind, bytes, world, &plan, NULL))
    return 0; /* no plan: the engine fails the run; nothing to bound */
  double t = st_comm_plan_ns(&plan);
  return isfinite(t) && t > 0 ? st_ns_floor(t) : 0;
}

int64_t
st_plan_closed_dp_cycle(const StStrategyInput *in, gboolean zero, StPlanClosedCache *cache)
{
  const StOptions *o = in->options;
  const StModel *m = in->model;
  const StCluster *c = in->cluster;
  int n = o->ranks;
  /* Options whose chain has other ops: compressed gradients, host steps,
   * a second reduction per bucket; ranks sharing devices. */
  if (o->sparsity > 0 || n < 1 || n != c->gpus || o->accumulation < 1 || m->n_layers < 1)
    return 0;
  int stage = zero ? (o->zero_stage > 0 ? o->zero_stage : 1) : 0;
  if (zero && (o->offload != ST_OFFLOAD_NONE || (o->shard_group > 0 && o->shard_group != n)))
    return 0;

  StStateBytes b;
  st_state_bytes(o, &b);
  StDtype dtype = !st_precision_16bit(o->precision)      ? ST_DTYPE_FP32
                  : c->gpu.flops[ST_DTYPE_BF16] > 0 ? ST_DTYPE_BF16
                                                     : ST_DTYPE_FP16;
  StComputeCtx ctx = {c,
                      in->profile,
                      m,
                      dtype,
                      o->compute_model,
                      st_framework_find(o->framework),
                      st_options_nchw(o),
                      o->precision == ST_PRECISION_FP8};
  StGroupShape world;
  st_plan_world_shape(c, n, &world);

  int L = m->n_layers;
  g_autofree int64_t *fwd = g_new0(int64_t, L);
  g_autofree int64_t *bwd = g_new0(int64_t, L);
  g_autofree int64_t *reduce = g_new0(int64_t, L); /* by the bucket's last layer; -1: none */
  /* A checkpointed layer runs its forward again right before its backward
   * (full), or the part of it its forward dropped (selective: work.c's
   * again_ops). */
  StRecomputePlan recompute = st_recompute_plan(o);
  g_autofree StRecompute *mode = st_recompute_layers(m, &recompute);
  unsigned again = recompute.ops != 0 ? recompute.ops : ST_RC_DEFAULT;
  for (int i = 0; i < L; i++) {
    const StLayer *l = &m->layers[i];
    reduce[i] = -1;
    if (l->type->link != NULL) /* an MoE expert's chain: left out */
      continue;
    int64_t batch = o->micro_batch;
    fwd[i] = comp_ns(cache, &ctx, ST_PASS_FWD, l, batch, 0, 0, st_pass_name(ST_PASS_FWD), 0);
    bwd[i] = comp_ns(cache, &ctx, ST_PASS_BWD, l, batch, 0, 0, st_pass_name(ST_PASS_BWD), 0);
    if (mode[i] != ST_RECOMPUTE_NONE)
      bwd[i] = st_time_add(bwd[i], comp_ns(cache, &ctx, ST_PASS_RECOMPUTE, l, batch, 0, 0,
                                           st_pass_name(ST_PASS_RECOMPUTE),
                                           mode[i] == ST_RECOMPUTE_SELECTIVE ? again : 0));
  }
  g_autoptr(GArray) buckets = st_grad_buckets(m, o->bucket_bytes, b.grad);
  StCollKind kind = zero ? ST_COLL_REDUCE_SCATTER : ST_COLL_ALL_REDUCE;
  int64_t gathered = 0;
  gboolean gathers = zero && stage < 3 && !st_options_overlap_param_gather(o);
  for (guint k = 0; k < buckets->len; k++) {
    const StBucket *bk = &g_array_index(buckets, StBucket, k);
    reduce[bk->last] = coll_ns(in, &world, kind, bk->params * b.grad);
    if (gathers)
      gathered = st_time_add(gathered, coll_ns(in, &world, ST_COLL_ALL_GATHER,
                                               bk->params * b.weight));
  }

  int64_t t = gathered, r = 0;
  for (int micro = 0; micro < o->accumulation; micro++) {
    gboolean reduces =
      (stage >= 2 && !st_options_defer_grad_sync(o)) || micro == o->accumulation - 1;
    for (int i = 0; i < L; i++)
      t = st_time_add(t, fwd[i]);
    for (int i = L - 1; i >= 0; i--) {
      t = st_time_add(t, bwd[i]);
      if (reduces && reduce[i] >= 0)
        r = st_time_add(MAX(r, t), reduce[i]);
    }
  }
  int64_t elems = zero ? 0 : m->params;
  for (int i = 0; zero && i < L; i++)
    elems += st_shard(m->layers[i].params, n);
  int64_t step = comp_ns(cache, &ctx, ST_PASS_OPTIM, NULL, 0, elems, elems * b.optim_traffic,
                         st_optimizer_name(o->optimizer), 0);
  return st_time_add(MAX(t, r), step);
}
