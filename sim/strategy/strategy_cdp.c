/* strategy_cdp.c: cyclic data parallelism (Fournier and Oyallon 2024). The
 * plan every variant shares (cdp.h): the stages, the parameter version each
 * pass reads under the update rule, the stagger computed from the cost
 * model; then the builder of the variant (plain, ZeRO relay, model
 * parallel), the ranks' start times and what the report says about it.
 */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "cost/cost.h"
#include "strategy/cdp.h"
#include "strategy/stages.h"

static const char *const RULES[] = {"v1", "v2", "dp"};
static const char *const REDUCES[] = {"chain", "collective"};
static const char *const SPLITS[] = {"flops", "params", "memory"};

int
cdp_delta(const CdpPlan *c, int worker, int stage)
{
  switch (c->rule) {
  case CDP_RULE_V1:
    return 1;
  case CDP_RULE_V2:
    /* PAPERS.md: rank r, stage l uses the fresh gradient if l >= S-1-r. */
    return stage >= c->s - 1 - worker ? 0 : 1;
  case CDP_RULE_DP:
    return 0;
  }
  g_return_val_if_reached(0);
}

static void
plan_clear(CdpPlan *c)
{
  g_free(c->first);
  g_free(c->params);
  g_free(c->stage_of);
  g_free(c->fwd_ns);
  g_free(c->bwd_ns);
  g_free(c->update_ns);
  g_free(c->hop_ns);
  g_free(c->owner);
  g_free(c->hosts);
  g_free(c->base);
  if (c->schedule != NULL)
    st_schedule_free(c->schedule);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(CdpPlan, plan_clear)

/* ---- stages ---------------------------------------------------------------------- */

/* Memory a layer brings to its stage: its model states, and what one
 * micro-batch keeps of it for backward. */
static void
memory_weights(const CdpPlan *c, double *w)
{
  const StStateBytes *b = &c->bytes;
  for (int i = 0; i < c->model->n_layers; i++) {
    const StLayer *l = &c->model->layers[i];
    w[i] = (double)l->params * (b->weight + b->grad + b->optimizer) +
           (double)cdp_batch_bytes(c, l->act_bytes);
  }
}

static void
split_stages(CdpPlan *c)
{
  const StModel *m = c->model;
  g_autofree double *w = g_new(double, m->n_layers);
  if (c->split == CDP_SPLIT_MEMORY)
    memory_weights(c, w);
  else
    st_layer_weights(m, c->split == CDP_SPLIT_PARAMS ? ST_SPLIT_PARAMS : ST_SPLIT_FLOPS, w);
  c->first = g_new(int32_t, c->s + 1);
  st_stages_split(w, m->n_layers, c->s, c->first);
  c->params = g_new0(int64_t, c->s);
  c->stage_of = g_new(int32_t, m->n_layers);
  for (int l = 0; l < c->s; l++)
    for (int i = c->first[l]; i < c->first[l + 1]; i++) {
      c->params[l] += m->layers[i].params;
      c->stage_of[i] = l;
    }
}

/* ---- estimates -------------------------------------------------------------------- */

static StDtype
compute_dtype(const CdpPlan *c)
{
  if (!st_precision_16bit(c->options->precision))
    return ST_DTYPE_FP32;
  return c->cluster->gpu.flops[ST_DTYPE_BF16] > 0 ? ST_DTYPE_BF16 : ST_DTYPE_FP16;
}

/* One worker's passes per stage and the optimizer steps, alone on a GPU,
 * from the same cost models the simulator uses; the step T is what one
 * worker computes per step, and d = T / N spreads the N workers over it. */
static void
estimate(CdpPlan *c)
{
  StComputeCtx ctx = {c->cluster, c->profile, c->model, compute_dtype(c),
                      c->options->compute_model, st_options_framework(c->options),
                      st_options_nchw(c->options), c->options->precision == ST_PRECISION_FP8};
  g_free(c->fwd_ns);
  g_free(c->bwd_ns);
  g_free(c->update_ns);
  c->fwd_ns = g_new0(double, c->s);
  c->bwd_ns = g_new0(double, c->s);
  c->update_ns = g_new0(double, c->s);
  double passes = 0, updates = 0;
  StRecomputePlan plan = st_recompute_plan(c->options);
  g_autofree StRecompute *recomputes = st_recompute_layers(c->model, &plan);
  for (int l = 0; l < c->s; l++) {
    for (int i = c->first[l]; i < c->first[l + 1]; i++) {
      StWork w = {.pass = ST_PASS_FWD, .layer = &c->model->layers[i], .batch = c->mb};
      c->fwd_ns[l] += st_compute_time(&ctx, &w, NULL);
      w.pass = ST_PASS_BWD;
      c->bwd_ns[l] += st_compute_time(&ctx, &w, NULL);
      /* a recompute runs with the backward (recompute.h: which layers, how) */
      if (recomputes[i] != ST_RECOMPUTE_NONE) {
        w.pass = ST_PASS_RECOMPUTE;
        if (recomputes[i] == ST_RECOMPUTE_SELECTIVE)
          w.again_ops = plan.ops != 0 ? plan.ops : ST_RC_DEFAULT;
        c->bwd_ns[l] += st_compute_time(&ctx, &w, NULL);
      }
    }
    if (c->params[l] > 0) {
      StWork w = {.pass = ST_PASS_OPTIM,
                  .elems = c->params[l],
                  .bytes = c->params[l] * c->bytes.optim_traffic,
                  .kernel = st_optimizer_name(c->options->optimizer)};
      c->update_ns[l] = st_compute_time(&ctx, &w, NULL);
    }
    passes += c->a * (c->fwd_ns[l] + c->bwd_ns[l]);
    updates += c->update_ns[l];
  }
  if (c->zero > 0) {
    /* Only the owners step; the busiest sets the pace. */
    g_autofree double *owned = g_new0(double, c->n);
    updates = 0;
    for (int l = 0; l < c->s; l++) {
      owned[c->owner[l]] += c->update_ns[l];
      updates = MAX(updates, owned[c->owner[l]]);
    }
  }
  if (c->mp && c->hop_ns != NULL) {
    /* Updates run on the stages' devices between the passes they host;
     * each micro-batch crosses S-1 boundaries forward and back, between the
     * devices the worker is placed on: the slowest worker sets the pace. */
    updates = 0;
    double hops = 0;
    for (int k = 0; k < c->n; k++) {
      double mine = 0;
      for (int l = 0; l + 1 < c->s; l++)
        mine += c->a * 2.0 * c->hop_ns[k * c->s + l];
      hops = MAX(hops, mine);
    }
    passes += hops;
  }
  c->step_ns = passes + updates;
  c->delay_ns = (int64_t)llround(c->step_ns / c->n);
}

/* Moving a stage boundary's activations, per worker: between the devices of
 * the placement once there is one, else between two GPUs of one node (model
 * parallelism puts stages on neighbouring GPUs). `free_hops` makes every
 * transfer cost nothing (the paper's idealised count). */
static void
hop_estimate(CdpPlan *c, gboolean free_hops)
{
  g_free(c->hop_ns);
  c->hop_ns = g_new0(double, (gsize)c->n * c->s);
  for (int l = 0; l + 1 < c->s && c->cluster->gpus > 1 && !free_hops; l++) {
    int64_t bytes = cdp_batch_bytes(c, c->model->layers[c->first[l + 1] - 1].out_bytes);
    for (int k = 0; k < c->n; k++) {
      int a = c->hosts ? c->base[l] + k % c->hosts[l] : 0;
      int b = c->hosts ? c->base[l + 1] + k % c->hosts[l + 1] : 1;
      StCommPlan plan;
      st_comm_plan_p2p(c->cluster, MIN(a, c->cluster->gpus - 1), MIN(b, c->cluster->gpus - 1),
                       bytes, &plan);
      c->hop_ns[k * c->s + l] = st_comm_plan_ns(&plan);
    }
  }
}

/* Places the stages by the estimate, then again with the transfers between
 * the devices placed, until the placement holds (a stage never loses a
 * device from one round to the next, so this ends within N rounds per
 * stage). Returns the GPUs the layout spans (cdp_mp_place). */
static int
place_with_transfers(CdpPlan *c)
{
  g_clear_pointer(&c->hosts, g_free);
  g_clear_pointer(&c->base, g_free);
  hop_estimate(c, FALSE);
  estimate(c);
  int used = cdp_mp_place(c);
  for (int round = 0; round < c->n * c->s; round++) {
    g_autofree int32_t *before = g_memdup2(c->hosts, sizeof(int32_t) * c->s);
    hop_estimate(c, FALSE);
    estimate(c);
    used = cdp_mp_place(c);
    if (memcmp(before, c->hosts, sizeof(int32_t) * c->s) == 0)
      break;
  }
  return used;
}

static int
sum_hosts(const CdpPlan *c)
{
  int sum = 0;
  for (int l = 0; l < c->s; l++)
    sum += c->hosts[l];
  return sum;
}

/* Counts the devices the paper's idealisation would need (transfers free,
 * no room kept for the optimizer steps), then chooses between keeping them
 * with the stagger stretched to absorb the transfers (strategy_cdp_slack.c),
 * when that costs at most --cdp-slack of the step, and the devices the
 * transfers need unstretched (place_with_transfers). Returns the GPUs the
 * layout spans. */
static int
place(CdpPlan *c)
{
  hop_estimate(c, TRUE);
  estimate(c);
  c->step_free_ns = c->step_ns;
  memset(c->update_ns, 0, sizeof(double) * c->s);
  cdp_mp_place(c);
  c->gpus_free_hops = sum_hosts(c);
  /* The devices free transfers need, with these transfers, stretched. */
  int span = cdp_mp_lay_out(c);
  hop_estimate(c, FALSE);
  estimate(c);
  c->stretch = c->rule == CDP_RULE_DP ? INFINITY : cdp_mp_stretch(c);
  g_autofree int32_t *free_hosts = g_steal_pointer(&c->hosts);
  int used = place_with_transfers(c);
  c->gpus_unabsorbed = sum_hosts(c);
  if (c->gpus_unabsorbed <= c->gpus_free_hops || !(c->stretch <= c->slack))
    return used;
  g_free(c->hosts);
  c->hosts = g_steal_pointer(&free_hosts);
  span = cdp_mp_lay_out(c);
  hop_estimate(c, FALSE);
  estimate(c);
  c->absorbed = TRUE;
  c->absorbed_ns = cdp_mp_hop_max(c);
  c->step_ns = c->step_free_ns * (1 + c->stretch);
  c->delay_ns = (int64_t)llround(c->step_ns / c->n);
  return span;
}

/* ---- the report -------------------------------------------------------------------- */

static char *
stage_layers_text(const CdpPlan *c)
{
  g_autoptr(GString) t = g_string_new(NULL);
  for (int l = 0; l < c->s; l++)
    g_string_append_printf(t, "%s%d-%d", l ? "," : "", c->first[l], c->first[l + 1] - 1);
  return g_string_free(g_steal_pointer(&t), FALSE);
}

/* What model parallelism's placement did with the transfers (place). */
static char *
slack_text(const CdpPlan *c)
{
  if (c->absorbed)
    return g_strdup_printf(
      "absorbed up to %.2f us of transfers per stage boundary in the stagger: step +%.2f %% "
      "over free transfers (%.3f -> %.3f ms), %d GPUs instead of %d",
      c->absorbed_ns * 1e-3, 100 * c->stretch, c->step_free_ns * 1e-6, c->step_ns * 1e-6,
      c->gpus_free_hops, c->gpus_unabsorbed);
  if (c->gpus_unabsorbed <= c->gpus_free_hops)
    return g_strdup_printf("transfers need no GPUs beyond the %d free transfers would",
                           c->gpus_free_hops);
  if (!isfinite(c->stretch))
    return g_strdup_printf("transfers cannot be absorbed in the stagger%s: %d GPUs where free "
                           "transfers need %d",
                           c->rule == CDP_RULE_DP ? " (dp rule: no stagger)" : "",
                           c->gpus_unabsorbed, c->gpus_free_hops);
  return g_strdup_printf("transfers too slow for the slack (absorbing them costs +%.2f %% of "
                         "the step, --cdp-slack %.2f %%): %d GPUs where free transfers need %d",
                         100 * c->stretch, 100 * c->slack, c->gpus_unabsorbed,
                         c->gpus_free_hops);
}

static void
notes(const CdpPlan *c, StSchedule *s)
{
  st_schedule_note_number(s, "workers", c->n);
  st_schedule_note_number(s, "stages", c->s);
  g_autofree char *layers = stage_layers_text(c);
  st_schedule_note_text(s, "stage_layers", layers);
  st_schedule_note_text(s, "stage_split", SPLITS[c->split]);
  st_schedule_note_text(s, "update_rule", RULES[c->rule]);
  st_schedule_note_text(s, "gradient_reduction",
                        c->zero > 0 ? "chain to each stage's owner" : REDUCES[c->reduce]);
  st_schedule_note_number(s, "step_estimate_s", c->step_ns * 1e-9);
  st_schedule_note_number(s, "stagger_delay_s", c->delay_ns * 1e-9);
  st_schedule_note_text(s, "warmup",
                        "the first step: worker k starts k x stagger_delay_s after worker 0, and no "
                        "update has a previous step's gradient to apply yet");
  if (c->zero > 0) {
    st_schedule_note_number(s, "zero_stage", c->zero);
    st_schedule_note_number(s, "collectives_replaced", cdp_zero_collectives_replaced(c));
    g_autoptr(GString) owners = g_string_new(NULL);
    for (int l = 0; l < c->s; l++)
      g_string_append_printf(owners, "%s%d", l ? "," : "", c->owner[l]);
    st_schedule_note_text(s, "stage_owners", owners->str);
  }
  if (c->mp) {
    int used = 0;
    g_autoptr(GString) hosts = g_string_new(NULL);
    for (int l = 0; l < c->s; l++) {
      used += c->hosts[l];
      g_string_append_printf(hosts, "%s%d", l ? "," : "", c->hosts[l]);
    }
    st_schedule_note_number(s, "gpus_needed", used);
    st_schedule_note_number(s, "gpus_free_transfers", c->gpus_free_hops);
    st_schedule_note_number(s, "gpus_dp_model_parallel", (double)c->n * c->s);
    st_schedule_note_text(s, "devices_per_stage", hosts->str);
    g_autofree char *slack = slack_text(c);
    st_schedule_note_text(s, "transfers", slack);
    st_schedule_note_number(s, "cdp_slack", c->slack);
    st_schedule_note_number(s, "step_free_transfers_s", c->step_free_ns * 1e-9);
    if (isfinite(c->stretch))
      st_schedule_note_number(s, "step_stretch", c->stretch);
    st_schedule_note_number(s, "transfers_absorbed_s", c->absorbed_ns * 1e-9);
    st_schedule_note_number(s, "gpus_without_stretch", c->gpus_unabsorbed);
  }
}

/* ---- build ------------------------------------------------------------------------- */

static gboolean
check_options(const StOptions *o, GError **error)
{
  if (o->zero_stage > 0 && o->model_parallel)
    return st_strategy_refuse(error, "--zero-stage %d with --model-parallel: each stage's devices "
                   "already hold only that stage's states; use one or the other",
                   o->zero_stage);
  if (o->zero_stage > 0 && o->cdp_reduce == CDP_REDUCE_COLLECTIVE)
    return st_strategy_refuse(error, "--zero-stage %d with --cdp-reduce collective: the ZeRO relay "
                   "reduces each stage's gradient by a chain to its owner",
                   o->zero_stage);
  return TRUE;
}

static StSchedule *
build(const StStrategyInput *in, GError **error)
{
  const StOptions *o = in->options;
  if (!check_options(o, error))
    return NULL;
  g_auto(CdpPlan) c = {
    .options = o,
    .profile = in->profile,
    .model = in->model,
    .cluster = in->cluster,
    .n = o->ranks,
    .s = CLAMP(o->stages > 0 ? o->stages : 4, 1, in->model->n_layers),
    .a = o->accumulation,
    .mb = o->micro_batch,
    .rule = (CdpRule)o->update_rule,
    .reduce = (CdpReduce)o->cdp_reduce,
    .split = (CdpSplit)o->stage_split,
    .zero = o->zero_stage,
    .mp = o->model_parallel,
    .slack = o->cdp_slack,
  };
  st_state_bytes(o, &c.bytes);
  split_stages(&c);
  if (c.zero > 0) {
    /* Stage l's owner is the worker whose backward of l ends just in time
     * to pass the new parameters to worker 0's next forward of l
     * (floor(l N / S) with equal stage costs); spread over the workers. */
    c.owner = g_new(int32_t, c.s);
    for (int l = 0; l < c.s; l++)
      c.owner[l] = (int32_t)((int64_t)l * c.n / c.s);
  }
  estimate(&c);
  g_autofree int32_t *placement = NULL;
  int n_ranks = c.n;
  if (c.mp) {
    if (!cdp_mp_check(&c, place(&c), error))
      return NULL;
    n_ranks = c.n * c.s;
    placement = g_new(int32_t, n_ranks);
    for (int l = 0; l < c.s; l++)
      for (int k = 0; k < c.n; k++)
        placement[cdp_rank_of(&c, k, l)] = c.base[l] + k % c.hosts[l];
  }
  c.schedule = st_schedule_new(st_model_copy(in->model), st_cluster_copy(in->cluster), n_ranks,
                               placement);
  StSchedule *s = c.schedule;
  c.model = s->model;
  c.cluster = s->cluster;
  s->steps = o->steps;
  s->warmup_steps = o->steps > 1 ? 1 : 0;
  s->warmup_scale = c.n; /* the workers' stagger */
  s->settings.precision = o->precision;
  s->settings.recompute = (StRecompute)o->recompute;
  s->settings.optimizer = o->optimizer;
  s->settings.micro_batch = o->micro_batch;
  s->settings.accumulation = o->accumulation;
  s->settings.global_batch = o->global_batch;
  for (int l = 0; l < c.s; l++)
    for (int k = 0; k < c.n; k++) {
      s->ranks[cdp_rank_of(&c, k, l)].start_ns = (int64_t)k * c.delay_ns;
      s->ranks[cdp_rank_of(&c, k, l)].replica = k; /* every stage of worker k: its samples */
    }
  gboolean ok = c.mp          ? cdp_build_mp(&c, error)
                : c.zero > 0  ? cdp_build_zero(&c, error)
                              : cdp_build_replicas(&c, error);
  if (!ok)
    return NULL;
  s->settings.strategy = g_strdup("cdp");
  s->settings.description = g_strdup_printf(
    "cdp %s: %d workers, %d stages (%s), %s%s%s, micro-batch %d x %d", RULES[c.rule], c.n, c.s,
    SPLITS[c.split],
    c.zero > 0 ? "ZeRO relay" : c.reduce == CDP_REDUCE_CHAIN ? "chain" : "collective",
    c.zero > 0 ? (const char *[]){"", " 1", " 2", " 3"}[c.zero] : "",
    !c.mp        ? ""
    : c.absorbed ? ", model parallel, transfers absorbed in the stagger"
                 : ", model parallel",
    o->micro_batch, o->accumulation);
  notes(&c, s);
  return g_steal_pointer(&c.schedule);
}

static const StStrategyKnob KNOBS[] = {
  {"update-rule", "v1,v2,dp"},
  {"stages", "2,4,8"},
  {"cdp-reduce", "chain,collective"},
  {"model-parallel", "false,true"},
  {"cdp-slack", NULL},
  {"zero-stage", NULL},
  {"recompute", NULL},
  {"recompute-every", NULL},
  {"recompute-ops", NULL},
  {NULL},
};

/* The update rules (cdp.h, docs/CDP.md): dp waits for this step's
 * gradient and steps every stage with it, as synchronous SGD/Adam does
 * (the workers' stagger changes when, not what); v1 and v2 step some or
 * all stages with the previous step's gradient. */
static StUpdate
update(const StOptions *o)
{
  switch ((CdpRule)o->update_rule) {
  case CDP_RULE_DP:
    return (StUpdate){ST_UPDATE_SYNC, "synchronous SGD/Adam (update rule dp: every stage steps "
                                      "with this step's gradient)"};
  case CDP_RULE_V2:
    return (StUpdate){ST_UPDATE_STALE, "delayed gradients (update rule v2: worker r's first "
                                       "S-1-r stages step with the previous step's gradient)"};
  case CDP_RULE_V1:
  default:
    return (StUpdate){ST_UPDATE_STALE, "delayed gradients (update rule v1: every stage steps "
                                       "with the previous step's gradient)"};
  }
}

static gboolean
shares_devices(const StOptions *o)
{
  return o->model_parallel;
}

const StStrategy st_strategy_cdp = {
  .name = "cdp",
  .summary = "cyclic data parallelism: workers staggered by 1/N of a step, each stage's "
             "gradient reduced as they finish it; update rules v1, v2; ZeRO relay; model "
             "parallel with shared GPUs",
  .citation = "L. Fournier and E. Oyallon, Cyclic Data Parallelism for Efficient Parallelism "
              "of Deep Neural Networks, arXiv 2403.08837, 2024",
  .build = build,
  .knobs = KNOBS,
  .update = update,
  .shares_devices = shares_devices,
  .estimate = cdp_estimate,
};
