/* test_plan.c: the what-if planner (sim/plan/): the space, a search whose
 * winner is known by hand, the validity of the lower bounds and of pruning
 * against the unpruned search, determinism across thread counts, and the
 * reasons given for what was not simulated.
 */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "engine/engine.h"
#include "output/output.h"
#include "output/steady.h"
#include "plan/plan.h"
#include "testutil.h"

static char *
plan_text(const StPlan *plan)
{
  g_autoptr(cJSON) root = st_plan_to_json(plan);
  return cJSON_Print(root);
}

/* ---- the spec ------------------------------------------------------------- */

static void
test_spec_lists(void)
{
  /* Integer lists: items in order, ranges of every integer, geometric
   * ranges, repeats dropped. */
  g_autoptr(StPlanSpec) spec = st_test_plan_spec("nodes", "3,1-4,2", "micro-batch", "1-64:x2",
                                       "gpus", "6-96:x2", "zero-stage", "3,1", NULL);
  int nodes[] = {3, 1, 2, 4}, micro[] = {1, 2, 4, 8, 16, 32, 64}, gpus[] = {6, 12, 24, 48, 96};
  g_assert_cmpuint(spec->nodes->len, ==, G_N_ELEMENTS(nodes));
  for (guint i = 0; i < G_N_ELEMENTS(nodes); i++)
    g_assert_cmpint(g_array_index(spec->nodes, int, i), ==, nodes[i]);
  g_assert_cmpuint(spec->micro_batches->len, ==, G_N_ELEMENTS(micro));
  for (guint i = 0; i < G_N_ELEMENTS(micro); i++)
    g_assert_cmpint(g_array_index(spec->micro_batches, int, i), ==, micro[i]);
  g_assert_cmpuint(spec->gpus->len, ==, G_N_ELEMENTS(gpus));
  for (guint i = 0; i < G_N_ELEMENTS(gpus); i++)
    g_assert_cmpint(g_array_index(spec->gpus, int, i), ==, gpus[i]);
  const StPlanValues *z = st_plan_spec_values(spec, "zero-stage");
  g_assert_nonnull(z);
  g_assert_cmpuint(z->values->len, ==, 2);
  g_assert_cmpstr(g_ptr_array_index(z->values, 0), ==, "3");
  /* Setting again replaces. */
  g_autoptr(GError) error = NULL;
  g_assert_true(st_plan_spec_set(spec, "nodes", "8", &error));
  g_assert_cmpuint(spec->nodes->len, ==, 1);
}

static void
test_spec_errors(void)
{
  /* Each bad value is refused with the option and the value in the message. */
  const char *cases[][3] = {
    {"nodes", "4-1", "--nodes 4-1"},
    {"nodes", "two", "--nodes two"},
    {"micro-batch", "1-8:x1", "K >= 2"},
    {"micro-batch", "0", "--micro-batch"},
    {"zero-stage", "2,4", "--zero-stage 4"},
    {"precision", "fp32,fp4", "--precision fp4"},
    {"objective", "fast", "--objective fast"},
    {"mem-cap", "80", "--mem-cap 80"},
    {"strategy", "dp,nosuch", "nosuch"},
    {"no-such-option", "1", "unknown option --no-such-option"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(StPlanSpec) spec = st_plan_spec_new();
    g_autoptr(GError) error = NULL;
    g_assert_false(st_plan_spec_set(spec, cases[i][0], cases[i][1], &error));
    g_assert_nonnull(error);
    if (strstr(error->message, cases[i][2]) == NULL)
      g_error("'%s %s': message '%s' lacks '%s'", cases[i][0], cases[i][1], error->message,
              cases[i][2]);
  }
}

static void
test_spec_file(void)
{
  /* A JSON space file takes the same names; lists and numbers become the
   * command line's text; an unknown key names the file and the key. */
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *good = g_build_filename(dir, "space.json", NULL);
  g_autofree char *bad = g_build_filename(dir, "bad.json", NULL);
  g_assert_true(g_file_set_contents(
    good,
    "{\"strategy\": [\"dp\", \"zero\"], \"nodes\": \"1-4:x2\", \"zero-stage\": [2, 3],"
    " \"global-batch\": 512, \"mem-cap\": \"40GiB\", \"no-fold\": true}",
    -1, NULL));
  g_assert_true(g_file_set_contents(bad, "{\"nodez\": 4}", -1, NULL));
  g_autoptr(StPlanSpec) spec = st_plan_spec_new();
  g_autoptr(GError) error = NULL;
  g_assert_true(st_plan_spec_load(spec, good, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(spec->strategies->len, ==, 2);
  g_assert_cmpuint(spec->nodes->len, ==, 3);
  g_assert_cmpint(spec->global_batch, ==, 512);
  g_assert_cmpint(spec->mem_cap, ==, 40LL << 30);
  g_assert_true(spec->no_fold);
  g_assert_cmpuint(st_plan_spec_values(spec, "zero-stage")->values->len, ==, 2);
  g_assert_false(st_plan_spec_load(spec, bad, &error));
  g_assert_nonnull(strstr(error->message, "bad.json: key 'nodez'"));
}

/* ---- the space ------------------------------------------------------------- */

static void
test_space_knobs(void)
{
  /* Every registered strategy, crossed with its own knobs: the count is
   * sum over strategies of shapes x micro-batches x product of the knobs'
   * value counts, whatever is registered. A knob the user gives values for
   * takes those values; a list for an option no strategy declares varies
   * for every strategy. */
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  g_autoptr(StPlanSpec) spec = st_test_plan_spec("nodes", "1,2", "micro-batch", "4,8,16", NULL);
  g_autoptr(GStringChunk) strings = g_string_chunk_new(256);
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) configs = st_plan_space_expand(spec, NULL, c, strings, NULL, NULL, &error);
  g_assert_no_error(error);
  guint expected = 0;
  for (const StStrategy *const *s = st_strategies(); *s != NULL; s++) {
    guint n = 2 * 3;
    for (const StStrategyKnob *k = (*s)->knobs; k != NULL && k->option != NULL; k++) {
      if (k->values == NULL) /* only with the user's list */
        continue;
      g_auto(GStrv) values = g_strsplit(k->values, ",", -1);
      n *= g_strv_length(values);
    }
    expected += n;
  }
  g_assert_cmpuint(configs->len, ==, expected);
  /* Shapes are 8 and 16 GPUs; every setting is accepted by the option table. */
  for (guint i = 0; i < configs->len; i++) {
    const StPlanConfig *cfg = &g_array_index(configs, StPlanConfig, i);
    g_assert_true(cfg->gpus == 8 * cfg->nodes);
    StOptions o;
    g_assert_true(st_plan_config_options(spec, cfg, &o, &error));
    g_assert_no_error(error);
    g_assert_cmpint(o.micro_batch, ==, cfg->micro_batch);
    st_options_clear(&o);
  }

  /* zero declares zero-stage: given values narrow it; the precision list
   * varies for every strategy searched. */
  g_autoptr(StPlanSpec) narrow = st_test_plan_spec("strategy", "dp,zero", "micro-batch", "8",
                                         "zero-stage", "2,3", "precision", "fp32,mixed", NULL);
  g_autoptr(GArray) some = st_plan_space_expand(narrow, NULL, c, strings, NULL, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(some->len, ==, 2 + 2 * 2);
  const StPlanConfig *last = &g_array_index(some, StPlanConfig, some->len - 1);
  g_autofree char *label = st_plan_config_label(last);
  g_assert_cmpstr(label, ==, "zero-stage=3 precision=mixed");
}

/* Whether `s` lists `option` among its knobs (declared or read). */
static gboolean
knob_of(const StStrategy *s, const char *option)
{
  for (const StStrategyKnob *k = s->knobs; k != NULL && k->option != NULL; k++)
    if (strcmp(k->option, option) == 0)
      return TRUE;
  return FALSE;
}

static void
test_space_lists_whole(void)
{
  /* For every option some strategy lists as a knob, the user's list of two
   * or more values is searched whole by every strategy that lists it (with
   * values or without), each value in as many configurations as the others,
   * and by no strategy that does not read it (issue 27: zero searched one
   * value of --recompute none,selective,full). Values: a choice option's
   * every choice, an integer's 1 and 2, an undeclared number's 0 and 0.05
   * (cdp's --cdp-slack), else the knob's declared ones. */
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  g_autoptr(GStringChunk) strings = g_string_chunk_new(256);
  /* Every strategy runs passes, so every one honours --recompute
   * (docs/ARCHITECTURE.md, "Pass memory"), and so lists it. */
  for (const StStrategy *const *s = st_strategies(); *s != NULL; s++)
    g_assert_true(knob_of(*s, "recompute"));
  for (const StStrategy *const *s = st_strategies(); *s != NULL; s++) {
    for (const StStrategyKnob *k = (*s)->knobs; k != NULL && k->option != NULL; k++) {
      const StOptionSpec *option = st_option_find(k->option);
      g_assert_nonnull(option);
      g_autofree char *list = option->type == ST_OPT_CHOICE
                                ? g_strjoinv(",", (char **)option->choices)
                              : option->type == ST_OPT_INT ? g_strdup("1,2")
                              : option->type == ST_OPT_DOUBLE && k->values == NULL
                                ? g_strdup("0,0.05")
                                : g_strdup(k->values);
      g_assert_nonnull(list);
      g_auto(GStrv) values = g_strsplit(list, ",", -1);
      guint n_values = g_strv_length(values);
      if (n_values < 2)
        continue;
      g_autoptr(StPlanSpec) spec = st_test_plan_spec("micro-batch", "8", k->option, list, NULL);
      g_autoptr(GError) error = NULL;
      g_autoptr(GArray) configs = st_plan_space_expand(spec, NULL, c, strings, NULL, NULL, &error);
      g_assert_no_error(error);
      for (const StStrategy *const *t = st_strategies(); *t != NULL; t++) {
        g_autofree guint *count = g_new0(guint, n_values);
        guint total = 0;
        for (guint i = 0; i < configs->len; i++) {
          const StPlanConfig *cfg = &g_array_index(configs, StPlanConfig, i);
          if (cfg->strategy != *t)
            continue;
          total++;
          for (int j = 0; j < cfg->n_settings; j++)
            for (guint v = 0; v < n_values; v++)
              if (strcmp(cfg->settings[2 * j], k->option) == 0 &&
                  strcmp(cfg->settings[2 * j + 1], values[v]) == 0)
                count[v]++;
        }
        g_test_message("%s: --%s %s: %u configurations", (*t)->name, k->option, list, total);
        for (guint v = 0; v < n_values; v++) {
          if (knob_of(*t, k->option))
            g_assert_cmpuint(count[v] * n_values, ==, total);
          else
            g_assert_cmpuint(count[v], ==, 0);
        }
      }
    }
  }
}

/* ---- a winner known by hand ---------------------------------------------------- */

static void
test_winner_by_hand(void)
{
  /* The unit model (one layer: fwd 100 us, bwd 200 us at batch 10 by the
   * roofline, which the search pins; 1e6 fp32 parameters) on the unit node (4 GPUs, 100 GB/s, 1 us; 1 TB/s memory),
   * data parallelism, global batch 40, micro-batch 10, ring all-reduce,
   * Adam (28 bytes of traffic per parameter: 28 us). On G GPUs each rank
   * runs A = 4/G micro-batches, then all-reduces S = 4 MB of gradients,
   * then steps:
   *   step(G) = 300 A + [2(G-1)/G * S / 100 GB/s + 2(G-1) * 1 us] + 28   (us)
   *   step(1) = 1200 + 0 + 28      = 1228 us
   *   step(2) =  600 + 40 + 2 + 28 =  670 us
   *   step(4) =  300 + 60 + 6 + 28 =  394 us
   * By time per step 4 GPUs win; by GPU-hours (G x step) and by throughput
   * per GPU (40 / (G x step)) 1 GPU wins: 1228 < 1340 < 1576. */
  g_autoptr(StModel) m = st_test_model("tests/data/engine/model.json");
  g_autoptr(StCluster) c = st_test_cluster("tests/data/engine/cluster.json", 0, 0);
  const int64_t expect_ns[] = {1228000, 670000, 394000};
  const char *objectives[] = {"time", "gpu-hours", "throughput-per-gpu"};
  const int winner_gpus[] = {4, 1, 1};
  for (gsize k = 0; k < G_N_ELEMENTS(objectives); k++) {
    g_autoptr(StPlanSpec) spec =
      st_test_plan_spec("strategy", "dp", "gpus", "1,2,4", "micro-batch", "10", "global-batch", "40",
              "comm-algo", "ring", "compute-model", "roofline", "objective", objectives[k],
              NULL);
    g_autoptr(StPlan) plan = st_test_plan_run(spec, m, c);
    g_assert_cmpuint(plan->configs->len, ==, 3);
    int w = st_plan_winner(plan);
    g_assert_cmpint(w, >=, 0);
    g_assert_cmpint(plan->points[w].gpus_used, ==, winner_gpus[k]);
    for (int i = 0; i < 3; i++) {
      const StPlanPoint *pt = &plan->points[i];
      if (pt->status == ST_PLAN_PRUNED)
        continue;
      g_assert_cmpint(pt->status, ==, ST_PLAN_OK);
      g_assert_cmpint(pt->step_time_ns, ==, expect_ns[i]);
      /* No contention here: the bound is the step itself, less the steady
       * rule's tolerance (output/steady.h). */
      g_assert_cmpint(pt->bound.step_time_ns, ==, st_steady_step_bound(expect_ns[i]));
    }
  }
}

static void
test_dedupe(void)
{
  /* The unit model has one layer, so every bucket size gives the same single
   * all-reduce: the three configurations build one schedule, simulated
   * once. The communication algorithm changes the simulation, not the
   * schedule: ring and tree stay apart. */
  g_autoptr(StModel) m = st_test_model("tests/data/engine/model.json");
  g_autoptr(StCluster) c = st_test_cluster("tests/data/engine/cluster.json", 0, 0);
  g_autoptr(StPlanSpec) spec =
    st_test_plan_spec("strategy", "dp", "gpus", "4", "micro-batch", "10", "bucket-bytes", "0,25MiB,1GiB",
            "comm-algo", "ring", "prune", "off", NULL);
  g_autoptr(StPlan) plan = st_test_plan_run(spec, m, c);
  g_assert_cmpuint(plan->configs->len, ==, 3);
  g_assert_cmpint(plan->counts.simulated, ==, 1);
  g_assert_cmpint(plan->counts.duplicates, ==, 2);
  g_assert_cmpint(plan->points[0].same_as, ==, -1);
  for (int i = 1; i < 3; i++) {
    g_assert_cmpint(plan->points[i].same_as, ==, 0);
    g_assert_cmpint(plan->points[i].status, ==, ST_PLAN_OK);
    g_assert_cmpint(plan->points[i].step_time_ns, ==, plan->points[0].step_time_ns);
    g_assert_cmpint(plan->points[i].peak_bytes, ==, plan->points[0].peak_bytes);
  }
  g_assert_cmpint(st_plan_winner(plan), ==, 0);

  g_autoptr(StPlanSpec) algos = st_test_plan_spec("strategy", "dp", "gpus", "4", "micro-batch", "10",
                                        "comm-algo", "ring", NULL);
  g_autoptr(GError) error = NULL;
  /* comm-algo takes one value per option (a string): two searches. */
  g_autoptr(StPlan) ring = st_test_plan_run(algos, m, c);
  st_plan_spec_set(algos, "comm-algo", "tree", &error);
  g_assert_no_error(error);
  g_autoptr(StPlan) tree = st_test_plan_run(algos, m, c);
  g_assert_true(memcmp(ring->points[0].fingerprint, tree->points[0].fingerprint,
                       sizeof ring->points[0].fingerprint) != 0);

  /* The same ops costed differently are not the same schedule: NHWC runs
   * ResNet-18's convolutions without NCHW's transposes (4.19 against 6.61
   * ms at micro-batch 32, mixed, on an H100), and a dedupe that took the
   * memory format for an option that changes nothing copied NCHW's step
   * to NHWC. Each is simulated, and they differ. */
  g_autoptr(StModel) r18 = st_test_model_named("resnet18");
  g_autoptr(StCluster) h100 = st_test_cluster("models/clusters/dgx-h100.json", 1, 1);
  g_autoptr(StPlanSpec) formats =
    st_test_plan_spec("strategy", "dp", "gpus", "1", "micro-batch", "32", "precision", "mixed",
                      "memory-format", "nchw,nhwc", "prune", "off", NULL);
  g_autoptr(StPlan) f = st_test_plan_run(formats, r18, h100);
  g_assert_cmpuint(f->configs->len, ==, 2);
  g_assert_cmpint(f->counts.simulated, ==, 2);
  g_assert_cmpint(f->points[1].same_as, ==, -1);
  g_assert_cmpint(f->points[0].step_time_ns, !=, f->points[1].step_time_ns);
}

/* ---- ranking by the steady step ------------------------------------------------ */

/* The mean step of the last `m` steps of a fixed run of `steps`, its very
 * last step aside (nothing follows it, so it may end early). */
static int64_t
long_run_step(const StPlan *plan, int index, int steps, int m)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) s = st_plan_build(plan, NULL, index, &error);
  g_assert_no_error(error);
  s->steps = steps;
  g_autoptr(StTimeline) t = NULL;
  g_autoptr(StSummary) sum = st_test_simulate(s, "auto", FALSE, &t);
  int last = steps - 2;
  return (sum->step_end_ns[last] - sum->step_end_ns[last - m]) / m;
}

static void
test_steady_trap(void)
{
  /* Issue 11: planning GPT-3 2.7B over 1-8 nodes crowned cyclic DP v1 at
   * 282.75 ms on 64 GPUs, the time of its second step of two (the first
   * warm-up, the second ending early because no step followed it), while
   * the same configuration settles to 390-418 ms per step. The same trap
   * on 4 nodes, smaller: with two steps CDP v1 (2 stages, chain) comes out
   * at 474 ms against ZeRO's 624 ms. Ranked by the steady step the winner
   * is what a long simulation of it gives (within 1 %, the issue's
   * criterion; exact here), and no cyclic DP point ranks on a figure below
   * its own long run's. */
  g_autoptr(StModel) m = st_test_model_named("gpt3-2.7b");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 0, 0);
  const char *space[] = {"strategy", "dp,zero,cdp", "nodes", "4", "global-batch", "512",
                         "mem-cap", "80GiB", "precision", "mixed", "update-rule", "v1",
                         "stages", "2", "cdp-reduce", "chain", "stage-split", "flops",
                         "model-parallel", "false", "micro-batch", "1,2", "allow-stale",
                         "true", "compute-model", "roofline", "framework", "ideal", NULL};
  g_autoptr(StPlanSpec) two = st_plan_spec_new();
  g_autoptr(StPlanSpec) steady = st_plan_spec_new();
  g_autoptr(GError) error = NULL;
  for (int i = 0; space[i] != NULL; i += 2) {
    g_assert_true(st_plan_spec_set(two, space[i], space[i + 1], &error));
    g_assert_true(st_plan_spec_set(steady, space[i], space[i + 1], &error));
  }
  g_assert_true(st_plan_spec_set(two, "steps", "2", &error));
  g_assert_no_error(error);

  /* The trap: with two steps, cyclic DP wins on a figure that is not its
   * steady state, and the report says so. */
  g_autoptr(StPlan) old = st_test_plan_run(two, m, c);
  int w_old = st_plan_winner(old);
  g_assert_cmpstr(g_array_index(old->configs, StPlanConfig, w_old).strategy->name, ==, "cdp");
  g_assert_false(old->points[w_old].sim->steady);

  g_autoptr(StPlan) plan = st_test_plan_run(steady, m, c);
  int w = st_plan_winner(plan);
  g_assert_cmpint(w, >=, 0);
  const StPlanPoint *win = &plan->points[w];
  g_assert_true(win->sim->steady);
  int64_t truth = long_run_step(plan, w, 16, 8);
  g_test_message("winner %s: plan %" G_GINT64_FORMAT " ns, long run %" G_GINT64_FORMAT " ns",
                 g_array_index(plan->configs, StPlanConfig, w).strategy->name,
                 win->step_time_ns, truth);
  g_assert_cmpfloat(fabs((double)win->step_time_ns - (double)truth), <=, 0.01 * (double)truth);
  g_assert_cmpint(win->step_time_ns, >, old->points[w_old].step_time_ns);
  for (guint i = 0; i < plan->configs->len; i++) {
    const StPlanPoint *pt = &plan->points[i];
    if (!pt->simulated || pt->same_as >= 0 ||
        strcmp(g_array_index(plan->configs, StPlanConfig, i).strategy->name, "cdp") != 0)
      continue;
    int64_t own = long_run_step(plan, (int)i, 24, 8);
    g_assert_cmpfloat(fabs((double)pt->step_time_ns - (double)own), <=, 0.01 * (double)own);
  }
}

static void
test_semantics(void)
{
  /* Cyclic DP's update rules v1 and v2 step with delayed gradients: by
   * default they are excluded before being built (no schedule, no bound),
   * its rule dp is ranked; --allow-stale ranks them too, marked stale.
   * Every configuration is counted once. A --sparsity the user asks for
   * is ranked, marked pruned. */
  g_autoptr(StModel) m = st_test_model("models/mlp.json");
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  g_autoptr(StPlanSpec) spec = st_test_plan_spec("strategy", "dp,cdp", "gpus", "4", "micro-batch", "8",
                                       "stages", "2", "model-parallel", "false", NULL);
  for (int allow = 0; allow < 2; allow++) {
    g_autoptr(GError) error = NULL;
    g_assert_true(st_plan_spec_set(spec, "allow-stale", allow ? "true" : "false", &error));
    g_autoptr(StPlan) plan = st_test_plan_run(spec, m, c);
    const StPlanCounts *n = &plan->counts;
    g_assert_cmpint(n->ok + n->oom + n->infeasible + n->pruned + n->failed + n->excluded, ==,
                    n->configurations);
    int stale = 0, sync_cdp = 0;
    for (guint i = 0; i < plan->configs->len; i++) {
      const StPlanPoint *pt = &plan->points[i];
      const char *name = g_array_index(plan->configs, StPlanConfig, i).strategy->name;
      g_assert_true(pt->has_update);
      if (strcmp(name, "dp") == 0 || pt->update.kind == ST_UPDATE_SYNC) {
        g_assert_cmpint(pt->update.kind, ==, ST_UPDATE_SYNC);
        g_assert_cmpint(pt->status, !=, ST_PLAN_EXCLUDED);
        sync_cdp += strcmp(name, "cdp") == 0;
        continue;
      }
      g_assert_cmpint(pt->update.kind, ==, ST_UPDATE_STALE);
      stale++;
      if (!allow) {
        g_assert_cmpint(pt->status, ==, ST_PLAN_EXCLUDED);
        g_assert_false(pt->bounded);
        g_assert_null(pt->description);
        g_assert_nonnull(strstr(pt->reason, "--allow-stale"));
      } else {
        g_assert_cmpint(pt->status, !=, ST_PLAN_EXCLUDED);
      }
    }
    g_assert_cmpint(stale, ==, allow ? stale : n->excluded);
    g_assert_cmpint(stale, >, 0);
    g_assert_cmpint(sync_cdp, >, 0);
    g_autoptr(cJSON) root = st_plan_to_json(plan);
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "points"), 0);
    g_assert_cmpstr(cJSON_GetObjectItem(first, "update")->valuestring, ==, "sync");
  }
  g_autoptr(StPlanSpec) sparse = st_test_plan_spec("strategy", "dp", "gpus", "4", "micro-batch", "8",
                                         "sparsity", "0.9", NULL);
  g_autoptr(StPlan) pruned = st_test_plan_run(sparse, m, c);
  int w = st_plan_winner(pruned);
  g_assert_cmpint(w, >=, 0);
  g_assert_cmpint(pruned->points[w].update.kind, ==, ST_UPDATE_PRUNED);
}

/* ---- bounds and pruning ----------------------------------------------------------- */

typedef struct {
  const char *model;
  const char *args[16]; /* name, value pairs */
} Space;

static const Space SPACES[] = {
  {"models/mlp.json", {"gpus", "1,2,4,8", "micro-batch", "4,16", "global-batch", "64", NULL}},
  {"models/mlp.json",
   {"gpus", "2,4", "micro-batch", "8", "global-batch", "32", "steps", "3", "bucket-bytes",
    "0,64KiB", NULL}},
  {"models/mlp.json", {"gpus", "4", "micro-batch", "8", "steps", "1", NULL}},
  {"models/resnet18.json",
   {"gpus", "4,8,16", "micro-batch", "8,32", "global-batch", "256", "precision", "mixed", NULL}},
  {"models/gpt2-124m.json",
   {"gpus", "2", "ranks", "4", "micro-batch", "1", "global-batch", "8", "precision", "mixed",
    NULL}},
  /* Checkpointing as frameworks do it (recompute.h): every K-th transformer
   * layer, and selective recomputation of chosen ops. */
  {"models/gpt2-124m.json",
   {"gpus", "2", "micro-batch", "1", "global-batch", "4", "precision", "mixed", "recompute",
    "full", "recompute-every", "1,2,5", NULL}},
  {"models/gpt2-124m.json",
   {"gpus", "2", "micro-batch", "1", "global-batch", "4", "precision", "mixed", "recompute",
    "selective", "recompute-ops", "core_attn+mlp_act,mlp_act+layernorm", NULL}},
  /* Activation offload to host (offload.h): dp, zero and pipeline vary it,
   * the others are refused it. */
  {"models/gpt2-124m.json",
   {"gpus", "2", "micro-batch", "1", "global-batch", "4", "precision", "mixed",
    "offload-activations", "0,4,12", NULL}},
};

static StPlanSpec *
space_spec(const Space *sp, const char *prune)
{
  StPlanSpec *spec = st_plan_spec_new();
  g_autoptr(GError) error = NULL;
  for (int i = 0; sp->args[i] != NULL; i += 2) {
    st_plan_spec_set(spec, sp->args[i], sp->args[i + 1], &error);
    g_assert_no_error(error);
  }
  st_plan_spec_set(spec, "prune", prune, &error);
  g_assert_no_error(error);
  /* Small waves, so that these small spaces get pruned at all; every
   * strategy's every update rule. */
  st_plan_spec_set(spec, "wave", "4", &error);
  g_assert_no_error(error);
  st_plan_spec_set(spec, "allow-stale", "true", &error);
  g_assert_no_error(error);
  /* Fused and free of NCCL's contention: what pruning keeps does not depend
   * on the runtime, and cyclic DP under contention runs to its step cap
   * (docs/PERFORMANCE.md, "Issue 19"). */
  st_plan_spec_set(spec, "framework", "ideal", &error);
  g_assert_no_error(error);
  return spec;
}

/* A token ring of point-to-point hops over `w` ranks (unit node: 100 GB/s,
 * 1 us): rank 0 computes and sends to rank 1, which receives, computes and
 * sends on; rank 0 receives from rank w - 1 before its next step. */
static StSchedule *
token_ring(int w)
{
  StSchedule *s = st_test_unit_schedule(w, NULL);
  s->steps = 0;
  int world = st_schedule_add_world(s, "world");
  for (int r = 0; r < w; r++) {
    StProgram *p = st_test_program_for(s, r, 1);
    if (r > 0)
      st_test_add(p, st_op_recv(0, world, r - 1, 0, 1000000));
    st_test_add(p, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
    st_test_add(p, st_op_send(0, world, (r + 1) % w, 0, 1000000));
    if (r == 0)
      st_test_add(p, st_op_recv(0, world, w - 1, 0, 1000000));
  }
  return s;
}

static void
test_bound_token_ring(void)
{
  /* The step is the ring's whole cycle, w x (compute 100 us + hop 11 us:
   * 1 us + 1 MB at 100 GB/s) = 444 us on 4 ranks, which no rank's program
   * shows alone (its receive costs only a transfer there: about 122 us).
   * The bound over every rank at once, each send joined to its receive
   * (plan_bound_ranks.c), finds the whole cycle; less the steady rule's
   * tolerance, as for a single program. */
  g_autoptr(StSchedule) s = token_ring(4);
  StPlanBound bound;
  st_plan_bound(s, NULL, NULL, &bound);
  g_autoptr(StTimeline) t = NULL;
  g_autoptr(StSummary) sum = st_test_simulate(s, NULL, TRUE, &t);
  g_assert_true(sum->steady.converged);
  g_assert_cmpint(sum->step_time_ns, ==, 444000);
  g_assert_cmpint(bound.step_time_ns, ==, st_steady_step_bound(444000));
}

static void
test_bounds_valid(void)
{
  /* Every registered strategy on small spaces, nothing pruned: the bound of
   * each simulated configuration is at most its simulated step time, so is
   * its work bound (taken before building it), and its memory bound at most
   * its simulated peak. */
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  int checked = 0;
  for (gsize k = 0; k < G_N_ELEMENTS(SPACES); k++) {
    g_autoptr(StModel) m = st_test_model(SPACES[k].model);
    g_autoptr(StPlanSpec) spec = space_spec(&SPACES[k], "off");
    g_autoptr(StPlan) plan = st_test_plan_run(spec, m, c);
    for (guint i = 0; i < plan->configs->len; i++) {
      const StPlanPoint *pt = &plan->points[i];
      if (!pt->simulated)
        continue;
      const StPlanConfig *cfg = &g_array_index(plan->configs, StPlanConfig, i);
      g_test_message("space %zu, %s (%u): step %" G_GINT64_FORMAT " bound %" G_GINT64_FORMAT,
                     k, cfg->strategy->name, i, pt->step_time_ns, pt->bound.step_time_ns);
      g_assert_true(pt->bounded);
      g_assert_cmpint(pt->bound.step_time_ns, >=, 0);
      g_assert_cmpint(pt->bound.step_time_ns, <=, pt->step_time_ns);
      g_assert_cmpint(pt->work_ns, <=, pt->step_time_ns);
      g_assert_cmpint(pt->gpus_used, >=, 1);
      g_assert_cmpint(pt->bound.peak_bytes, <=, pt->peak_bytes);
      checked++;
    }
  }
  g_assert_cmpint(checked, >, 20);
}

static void
test_prune_keeps_winner(void)
{
  /* Against the unpruned search: the same winner, and for pruning by the
   * front, the same objective-vs-GPUs front; every pruned configuration
   * either way is beaten by a simulated one. */
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  int pruned = 0;
  const char *objectives[] = {"time", "throughput-per-gpu"};
  for (gsize k = 0; k < G_N_ELEMENTS(SPACES); k++) {
    g_autoptr(StModel) m = st_test_model(SPACES[k].model);
    for (gsize o = 0; o < G_N_ELEMENTS(objectives); o++) {
      g_autoptr(StPlanSpec) off = space_spec(&SPACES[k], "off");
      g_autoptr(StPlanSpec) front = space_spec(&SPACES[k], "front");
      g_autoptr(StPlanSpec) winner = space_spec(&SPACES[k], "winner");
      st_plan_spec_set(off, "objective", objectives[o], NULL);
      st_plan_spec_set(front, "objective", objectives[o], NULL);
      st_plan_spec_set(winner, "objective", objectives[o], NULL);
      g_autoptr(StPlan) all = st_test_plan_run(off, m, c);
      g_autoptr(StPlan) pf = st_test_plan_run(front, m, c);
      g_autoptr(StPlan) pw = st_test_plan_run(winner, m, c);
      g_assert_cmpint(all->counts.pruned, ==, 0);
      g_assert_cmpint(st_plan_winner(pf), ==, st_plan_winner(all));
      g_assert_cmpint(st_plan_winner(pw), ==, st_plan_winner(all));
      for (guint i = 0; i < all->configs->len; i++) {
        g_assert_cmpint(pf->points[i].front_gpus, ==, all->points[i].front_gpus);
        if (pf->points[i].status == ST_PLAN_PRUNED || pw->points[i].status == ST_PLAN_PRUNED)
          g_assert_cmpint(all->points[i].rank, !=, 1);
        if (pf->points[i].status == ST_PLAN_PRUNED)
          g_assert_false(all->points[i].front_gpus);
      }
      pruned += pf->counts.pruned + pw->counts.pruned;
    }
  }
  /* The test means something only if something was pruned. */
  g_assert_cmpint(pruned, >, 0);
}

static void
test_threads_deterministic(void)
{
  /* The same search on 1 and on 3 threads writes the same plan. */
  g_autoptr(StModel) m = st_test_model("models/resnet18.json");
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  const char *prunes[] = {"front", "winner", "off"};
  for (gsize k = 0; k < G_N_ELEMENTS(prunes); k++) {
    g_autoptr(StPlanSpec) spec = space_spec(&SPACES[3], prunes[k]);
    spec->threads = 1;
    g_autoptr(StPlan) serial = st_test_plan_run(spec, m, c);
    spec->threads = 3;
    g_autoptr(StPlan) parallel = st_test_plan_run(spec, m, c);
    g_autofree char *a = plan_text(serial);
    g_autofree char *b = plan_text(parallel);
    g_assert_cmpstr(a, ==, b);
  }
}

/* ---- what was not simulated, and why ------------------------------------------------ */

static void
test_reasons(void)
{
  /* The unit model keeps 16 MB of persistent states per GPU (4 MB weights,
   * 4 MB gradients, 8 MB Adam states) and, at micro-batch 10, 40 kB of
   * activations (4000 bytes per sample) from its forward to its backward,
   * while the forward also holds the samples it reads (250 floats each) and
   * its output (1000 bytes each), 20 kB, all on the compute stream: the peak
   * and its bound are both 16,060,000 bytes.
   *  - 3 GPUs cannot split 40 samples in micro-batches of 10: infeasible;
   *  - 4 GPUs are over a budget of 3: infeasible;
   *  - a cap of 16,059,999 bytes: over by the bound, not simulated;
   *  - a cap of 16,060,000 bytes: fits.
   * Tensors alone: no framework's context, NCCL buffers or allocator
   * reserve (--framework ideal; test_runtime_memory covers those). */
  g_autoptr(StModel) m = st_test_model("tests/data/engine/model.json");
  g_autoptr(StCluster) c = st_test_cluster("tests/data/engine/cluster.json", 0, 0);
  g_autoptr(StPlanSpec) spec =
    st_test_plan_spec("strategy", "dp", "gpus", "1,2,3,4", "micro-batch", "10", "global-batch", "40",
            "gpu-budget", "3", "mem-cap", "16059999B", "framework", "ideal", NULL);
  g_autoptr(StPlan) plan = st_test_plan_run(spec, m, c);
  const StPlanPoint *p = plan->points;
  g_assert_cmpint(p[0].status, ==, ST_PLAN_OOM);
  g_assert_false(p[0].simulated);
  g_assert_cmpint(p[0].bound.peak_bytes, ==, 16060000);
  g_assert_nonnull(strstr(p[0].reason, "not simulated"));
  g_assert_cmpint(p[2].status, ==, ST_PLAN_INFEASIBLE);
  g_assert_nonnull(strstr(p[2].reason, "not a multiple"));
  g_assert_cmpint(p[3].status, ==, ST_PLAN_INFEASIBLE);
  g_assert_nonnull(strstr(p[3].reason, "--gpu-budget of 3"));
  g_assert_cmpint(st_plan_winner(plan), ==, -1);
  g_assert_cmpint(plan->counts.infeasible, ==, 2);
  g_assert_cmpint(plan->counts.oom_by_bound, ==, 2);
  g_assert_cmpint(plan->counts.simulated, ==, 0);

  g_autoptr(GError) error = NULL;
  st_plan_spec_set(spec, "mem-cap", "16060000B", &error);
  g_assert_no_error(error);
  g_autoptr(StPlan) fits = st_test_plan_run(spec, m, c);
  g_assert_cmpint(fits->points[0].status, ==, ST_PLAN_OK);
  g_assert_cmpint(fits->points[0].peak_bytes, ==, 16060000);

  /* ZeRO-3 on 2 GPUs keeps 8 MB of shards; the gathered weights (4 MB) and
   * a bucket's gradient (4 MB) come and go on other streams than the ones
   * that free them, so the bound leaves them out: at 12 MB the bound fits,
   * the simulation does not, and the point says by how much. */
  g_autoptr(StPlanSpec) zero =
    st_test_plan_spec("strategy", "zero", "zero-stage", "3", "gpus", "2", "micro-batch", "10",
            "global-batch", "20", "mem-cap", "12MB", "framework", "ideal", NULL);
  g_autoptr(StPlan) over = st_test_plan_run(zero, m, c);
  const StPlanPoint *z = &over->points[0];
  g_assert_cmpint(z->status, ==, ST_PLAN_OOM);
  g_assert_true(z->simulated);
  g_assert_cmpint(z->bound.peak_bytes, <=, 12000000);
  g_assert_cmpint(z->peak_bytes, >, 12000000);
  g_assert_nonnull(strstr(z->reason, "over the cap"));
}

static void
test_emit_winner(void)
{
  /* The winner's schedule, built again, is valid and simulates to the
   * winner's step time. */
  g_autoptr(StModel) m = st_test_model("models/resnet18.json");
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 0, 0);
  g_autoptr(StPlanSpec) spec = space_spec(&SPACES[3], "front");
  g_autoptr(StPlan) plan = st_test_plan_run(spec, m, c);
  int w = st_plan_winner(plan);
  g_assert_cmpint(w, >=, 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) s = st_plan_build(plan, NULL, w, &error);
  g_assert_no_error(error);
  g_assert_true(st_schedule_check(s, &error));
  StEngineOptions eo = {NULL, "auto", NULL, FALSE, NULL};
  g_autoptr(StTimeline) t = st_simulate(s, &eo, NULL, &error);
  g_assert_no_error(error);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_cmpint(sum->step_time_ns, ==, plan->points[w].step_time_ns);
  g_assert_cmpint(plan->points[w].rank, ==, 1);
  g_assert_true(plan->points[w].front_gpus);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/spec/lists", test_spec_lists);
  g_test_add_func("/plan/spec/errors", test_spec_errors);
  g_test_add_func("/plan/spec/file", test_spec_file);
  g_test_add_func("/plan/space/knobs", test_space_knobs);
  g_test_add_func("/plan/space/lists-whole", test_space_lists_whole);
  g_test_add_func("/plan/winner/by-hand", test_winner_by_hand);
  g_test_add_func("/plan/dedupe", test_dedupe);
  g_test_add_func("/plan/bounds/valid", test_bounds_valid);
  g_test_add_func("/plan/bounds/token-ring", test_bound_token_ring);
  g_test_add_func("/plan/prune/keeps-winner", test_prune_keeps_winner);
  g_test_add_func("/plan/threads/deterministic", test_threads_deterministic);
  g_test_add_func("/plan/reasons", test_reasons);
  g_test_add_func("/plan/steady/trap", test_steady_trap);
  g_test_add_func("/plan/semantics", test_semantics);
  g_test_add_func("/plan/emit/winner", test_emit_winner);
  return g_test_run();
}
