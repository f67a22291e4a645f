/* test_plan_floor.c: megatron's memory bound before building (issue 22),
 * the estimate's tensors (megatron_estimate.c: model states, one
 * micro-batch's footprint beside those 1F1B surely holds at once) and the
 * device figure the planner holds against the cap (plan_before.c: CUDA
 * context, cuBLAS workspace, NCCL's buffers per communicator, allocator's
 * reserve), and once built its bound's device figure (plan_floor.c), are
 * bounds on every simulated point, over TP, PP, interleaving,
 * micro-batch, recomputation, ZeRO and precision on Llama- and GPT-style
 * models: the planner must never refuse unbuilt a configuration that fits.
 * And it does refuse unbuilt what it puts over the cap. So do pipeline's
 * estimate (the busiest stage's states and micro-batches in flight) and
 * cdp's (the states every rank holds, one micro-batch's saved blocks). */
#include <string.h>

#include "cost/framework.h"
#include "plan/plan.h"
#include "testutil.h"

/* Llama-style: grouped key/value heads, untied head, RMSNorm. */
static const char *const SMALL_LLAMA =
  "{\"name\": \"small-llama\", \"input\": [256], \"dtype\": \"bf16\", \"layers\": ["
  "{\"name\": \"embed\", \"type\": \"embedding\", \"vocab\": 1000, \"dim\": 512},"
  "{\"repeat\": 8, \"layers\": [{\"name\": \"layers.{i}\", \"type\": \"llama_block\", "
  "\"heads\": 8, \"kv_heads\": 2, \"ffn\": 1536}]},"
  "{\"name\": \"norm\", \"type\": \"rmsnorm\"},"
  "{\"name\": \"lm_head\", \"type\": \"lm_head\", \"vocab\": 1000},"
  "{\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}";

/* Checks every simulated point of `plan` and returns how many. */
static int
check_bounds(const StPlan *plan)
{
  int checked = 0;
  for (guint i = 0; i < plan->configs->len; i++) {
    const StPlanPoint *pt = &plan->points[i];
    if (!pt->simulated || !pt->estimated || pt->estimate.peak_bytes <= 0)
      continue;
    checked++;
    if (pt->estimate.peak_bytes > pt->peak_bytes || pt->device_floor > pt->device_bytes)
      g_error("%s: estimate %" G_GINT64_FORMAT " > tensors %" G_GINT64_FORMAT
              " or device floor %" G_GINT64_FORMAT " > device %" G_GINT64_FORMAT,
              pt->description, pt->estimate.peak_bytes, pt->peak_bytes, pt->device_floor,
              pt->device_bytes);
    g_assert_cmpint(pt->device_floor, >=, pt->estimate.peak_bytes + pt->runtime_bytes);
    /* Once built: its bound's device figure (plan_floor.c). */
    g_assert_true(pt->bounded);
    if (pt->bound.peak_bytes > pt->peak_bytes || pt->bound.device_bytes > pt->device_bytes)
      g_error("%s: bound %" G_GINT64_FORMAT " > tensors %" G_GINT64_FORMAT
              " or its device figure %" G_GINT64_FORMAT " > device %" G_GINT64_FORMAT,
              pt->description, pt->bound.peak_bytes, pt->peak_bytes, pt->bound.device_bytes,
              pt->device_bytes);
    g_assert_cmpint(pt->bound.device_bytes, >, pt->bound.peak_bytes);
  }
  g_test_message("%d simulated points checked", checked);
  return checked;
}

static StPlan *
run(const StModel *m, const char *nodes, const char *extra_key, const char *extra_value,
    const char *precision, const char *seq)
{
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  g_autoptr(StPlanSpec) spec = st_test_plan_spec(
    "strategy", "megatron", "nodes", nodes, "global-batch", "16", "micro-batch", "1,2",
    "precision", precision, "tensor-parallel", "1,2,8", "pipeline-stages", "1,2,4",
    "virtual-stages", "1,2", "recompute", "none,selective,full", "prune", "off", "threads", "1",
    NULL);
  g_autoptr(GError) error = NULL;
  if (extra_key != NULL)
    g_assert_true(st_plan_spec_set(spec, extra_key, extra_value, &error));
  if (seq != NULL)
    g_assert_true(st_plan_spec_set(spec, "seq-len", seq, &error));
  g_assert_no_error(error);
  return st_test_plan_run(spec, m, c);
}

/* Llama-style, every ZeRO stage and none, mixed and fp32, on 8 and 16 GPUs. */
static void
test_llama_bound(void)
{
  g_autoptr(StModel) m = st_test_model_parse(SMALL_LLAMA);
  g_autoptr(StPlan) none = run(m, "1,2", NULL, NULL, "mixed,fp32", NULL);
  g_autoptr(StPlan) zero = run(m, "1", "zero-stage", "1,2,3", "mixed", NULL);
  int checked = check_bounds(none) + check_bounds(zero);
  g_assert_cmpint(checked, >, 100);
}

/* Llama-3 8B at 256 tokens: its 128k vocabulary's logits and loss buffers
 * weigh on the last stage; TP 8 splits its 8 key/value heads. */
static void
test_llama3_bound(void)
{
  g_autoptr(StModel) m = st_test_model("models/llama-3-8b.json");
  g_autoptr(StPlan) none = run(m, "1", NULL, NULL, "mixed,fp32", "256");
  g_autoptr(StPlan) zero = run(m, "1", "zero-stage", "1,2,3", "mixed", "256");
  g_assert_cmpint(check_bounds(none) + check_bounds(zero), >, 300);
}

/* GPT-style: a head tied to the embedding, LayerNorm, dropout. */
static void
test_gpt_bound(void)
{
  g_autoptr(StModel) m = st_test_model("models/gpt2-124m.json");
  g_autoptr(StPlan) plan = run(m, "1", "zero-stage", "1,2,3", "mixed,fp32", "256");
  g_assert_cmpint(check_bounds(plan), >, 30);
}

/* Every point whose estimated device floor is over the plan's cap was
 * refused unbuilt (neither bounded after building nor simulated), and at
 * least one was. */
static void
assert_refused_unbuilt(const StPlan *plan)
{
  int refused = 0;
  for (guint i = 0; i < plan->configs->len; i++) {
    const StPlanPoint *pt = &plan->points[i];
    if (!pt->estimated || pt->device_floor <= plan->mem_cap || pt->status == ST_PLAN_PRUNED)
      continue;
    g_assert_false(pt->bounded || pt->simulated);
    g_assert_cmpint(pt->status, ==, ST_PLAN_OOM);
    refused++;
  }
  g_assert_cmpint(refused, >, 0);
}

/* pipeline's estimate (pipeline_estimate.c): its GPUs' share of the model
 * states, and the busiest stage's states with the saved blocks of the
 * micro-batches its order runs forward before its first backward (GPipe
 * M, 1F1B and ZB-H1 min(S - s, M), ZB-H2 min(2(S - s) - 1, M)), over its
 * orders, stage counts (given and fitted), balances, micro-batches,
 * recomputation and offloaded activations; and a cap under it refuses
 * every point unbuilt. */
static void
test_pipeline_bound(void)
{
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  const char *models[] = {NULL, "models/gpt2-124m.json"};
  const char *stages[] = {NULL, "1,2,4,8"};
  int64_t most = 0;
  int tight = 0;
  for (guint k = 0; k < G_N_ELEMENTS(models); k++)
    for (guint j = 0; j < G_N_ELEMENTS(stages); j++) {
      g_autoptr(StModel) m = models[k] != NULL ? st_test_model(models[k])
                                               : st_test_model_parse(SMALL_LLAMA);
      g_autoptr(StPlanSpec) spec = st_test_plan_spec(
        "strategy", "pipeline", "nodes", "1,2", "global-batch", "32", "micro-batch", "1,2,4",
        "precision", "mixed,fp32", "pipeline-schedule", "1f1b,gpipe,zb-h1,zb-h2,dualpipev",
        "recompute", "none,full", "balance", "time,memory", "prune", "off", "threads", "1",
        "seq-len", "256", NULL);
      g_autoptr(GError) error = NULL;
      if (stages[j] != NULL)
        g_assert_true(st_plan_spec_set(spec, "pipeline-stages", stages[j], &error));
      if (k == 1 && j == 0)
        g_assert_true(st_plan_spec_set(spec, "offload-activations", "0,4", &error));
      g_assert_no_error(error);
      g_autoptr(StPlan) plan = st_test_plan_run(spec, m, c);
      g_assert_cmpint(check_bounds(plan), >, 30);
      for (guint i = 0; i < plan->configs->len; i++) {
        const StPlanPoint *pt = &plan->points[i];
        if (!pt->estimated)
          continue;
        if (k == 0 && j == 0)
          most = MAX(most, pt->device_floor);
        /* The saved blocks count: within 10 % of the simulated tensors. */
        tight += pt->simulated && pt->estimate.peak_bytes > pt->peak_bytes * 0.9;
      }
    }
  g_assert_cmpint(tight, >, 30);
  g_autoptr(StModel) m = st_test_model_parse(SMALL_LLAMA);
  g_autofree char *cap = g_strdup_printf("%" G_GINT64_FORMAT "B", most - 1);
  g_autoptr(StPlanSpec) capped = st_test_plan_spec(
    "strategy", "pipeline", "nodes", "1,2", "global-batch", "32", "micro-batch", "1,2,4",
    "precision", "mixed,fp32", "pipeline-schedule", "1f1b,gpipe,zb-h1,zb-h2,dualpipev",
    "recompute", "none,full", "balance", "time,memory", "mem-cap", cap, "threads", "1",
    "seq-len", "256", NULL);
  g_autoptr(StPlan) plan = st_test_plan_run(capped, m, c);
  assert_refused_unbuilt(plan);
}

/* cdp's estimate (strategy_cdp_estimate.c): the states every rank holds,
 * plain, under the ZeRO relay (each stage's owner) and with model
 * parallelism (the GPUs' share), and one micro-batch's saved blocks, over
 * update rules, stages, reductions, micro-batches (and so accumulation),
 * recomputation and precision; a cap under it refuses unbuilt. Returns
 * the largest estimate's device floor of the runs on `m`. */
static int64_t
cdp_bound(const StModel *m, const char *zero, const char *mp, const char *reduce)
{
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  g_autoptr(StPlanSpec) spec = st_test_plan_spec(
    "strategy", "cdp", "nodes", strcmp(mp, "true") == 0 ? "2" : "1", "allow-stale", "true",
    "global-batch", "32", "micro-batch", "1,2,4",
    "precision", "mixed,fp32", "update-rule", "v1,v2,dp", "stages", "2,4,8", "cdp-reduce",
    reduce, "model-parallel", mp, "recompute", "none,full", "prune", "off", "threads", "1",
    "seq-len", "256", NULL);
  g_autoptr(GError) error = NULL;
  if (zero != NULL)
    g_assert_true(st_plan_spec_set(spec, "zero-stage", zero, &error));
  /* Model parallelism: 4 workers, whose stages share the 16 GPUs. */
  if (strcmp(mp, "true") == 0)
    g_assert_true(st_plan_spec_set(spec, "ranks", "4", &error));
  g_assert_no_error(error);
  g_autoptr(StPlan) plan = st_test_plan_run(spec, m, c);
  g_assert_cmpint(check_bounds(plan), >, 30);
  int64_t most = 0;
  for (guint i = 0; i < plan->configs->len; i++)
    if (plan->points[i].estimated)
      most = MAX(most, plan->points[i].device_floor);
  return most;
}

static void
test_cdp_bound(void)
{
  g_autoptr(StModel) llama = st_test_model_parse(SMALL_LLAMA);
  g_autoptr(StModel) gpt = st_test_model("models/gpt2-124m.json");
  int64_t most = cdp_bound(llama, NULL, "false", "chain,collective");
  cdp_bound(llama, "1,2,3", "false", "chain");
  cdp_bound(llama, NULL, "true", "chain");
  cdp_bound(gpt, NULL, "false", "chain");
  cdp_bound(gpt, "1,3", "false", "chain");
  g_assert_cmpint(most, >, 0);
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  g_autofree char *cap = g_strdup_printf("%" G_GINT64_FORMAT "B", most - 1);
  g_autoptr(StPlanSpec) capped = st_test_plan_spec(
    "strategy", "cdp", "nodes", "1", "allow-stale", "true", "global-batch", "32", "micro-batch",
    "1,2,4", "precision", "mixed,fp32", "update-rule", "v1,v2,dp", "stages", "2,4,8",
    "cdp-reduce", "chain,collective", "model-parallel", "false", "recompute", "none,full",
    "mem-cap", cap, "threads", "1", "seq-len", "256", NULL);
  g_autoptr(StPlan) plan = st_test_plan_run(capped, llama, c);
  assert_refused_unbuilt(plan);
}

/* The runtime counts NCCL's buffers for each group of more than one rank:
 * TP 2 x PP 2 x DP 2 joins three communicators, ZeRO-3 a fourth (its
 * gather's); TP 2 x DP 4 two, DP 8 one. A cap under a
 * fitting point's device floor refuses it unbuilt, and the reserve counts
 * where the cap leaves room under the GPU's memory. */
static void
test_comms_and_refusal(void)
{
  g_autoptr(StModel) m = st_test_model_parse(SMALL_LLAMA);
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  const StFrameworkRuntime *rt = st_framework_find("megatron")->runtime;
  int64_t base = rt->context_bytes + rt->workspace_bytes, nccl = rt->nccl_bytes_per_comm;
  const struct {
    const char *tp, *pp, *zero;
    int comms;
  } cases[] = {{"2", "2", "1", 3}, {"2", "2", "3", 4}, {"2", "1", "1", 2}, {"1", "1", "2", 1}};
  for (guint k = 0; k < G_N_ELEMENTS(cases); k++) {
    g_autoptr(StPlanSpec) spec = st_test_plan_spec(
      "strategy", "megatron", "nodes", "1", "global-batch", "16", "micro-batch", "1",
      "precision", "mixed", "tensor-parallel", cases[k].tp, "pipeline-stages", cases[k].pp,
      "zero-stage", cases[k].zero, "recompute", "none", "threads", "1", NULL);
    g_autoptr(StPlan) plan = st_test_plan_run(spec, m, c);
    int found = 0;
    for (guint i = 0; i < plan->configs->len; i++) {
      const StPlanPoint *pt = &plan->points[i];
      if (!pt->estimated)
        continue;
      found++;
      g_assert_cmpint(pt->runtime_bytes, ==, base + cases[k].comms * nccl);
    }
    if (found == 0)
      g_error("case %u: nothing estimated", k);
  }
  /* The cap: just under the device floor of a point that fits. */
  g_autoptr(StPlan) all = run(m, "1", "zero-stage", "1", "mixed", NULL);
  const StPlanPoint *fit = NULL;
  for (guint i = 0; i < all->configs->len; i++) {
    const StPlanPoint *pt = &all->points[i];
    if (pt->status == ST_PLAN_OK && pt->estimated && (fit == NULL || pt->device_floor > fit->device_floor))
      fit = pt;
  }
  g_assert_nonnull(fit);
  int64_t allocated = fit->estimate.peak_bytes + rt->workspace_bytes;
  g_assert_cmpint(fit->device_floor, >, allocated + fit->runtime_bytes - rt->workspace_bytes);
  g_autofree char *cap = g_strdup_printf("%" G_GINT64_FORMAT "B", fit->device_floor - 1);
  g_autoptr(StPlanSpec) capped = st_test_plan_spec(
    "strategy", "megatron", "nodes", "1", "global-batch", "16", "micro-batch", "1,2",
    "precision", "mixed", "tensor-parallel", "1,2,8", "pipeline-stages", "1,2,4",
    "virtual-stages", "1,2", "recompute", "none,selective,full", "zero-stage", "1",
    "mem-cap", cap, "threads", "1", NULL);
  g_autoptr(StPlan) plan = st_test_plan_run(capped, m, c);
  const StPlanPoint *same = &plan->points[fit - all->points];
  g_assert_cmpint(same->device_floor, ==, fit->device_floor);
  g_assert_false(same->bounded || same->simulated);
  g_assert_cmpint(same->status, ==, ST_PLAN_OOM);
  g_assert_nonnull(strstr(same->reason, "NCCL"));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/floor/llama", test_llama_bound);
  g_test_add_func("/plan/floor/llama-3-8b", test_llama3_bound);
  g_test_add_func("/plan/floor/gpt", test_gpt_bound);
  g_test_add_func("/plan/floor/pipeline", test_pipeline_bound);
  g_test_add_func("/plan/floor/cdp", test_cdp_bound);
  g_test_add_func("/plan/floor/comms-and-refusal", test_comms_and_refusal);
  return g_test_run();
}
