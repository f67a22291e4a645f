/* test_strategy.c: every registered strategy against the schedule's
 * invariants, and the worked examples of model-state and activation memory.
 */
#include <string.h>

#include "cluster/links.h"
#include "engine/engine.h"
#include "model/layer_type.h"
#include "output/output.h"
#include "strategy/strategy.h"
#include "strategy/strategy_common.h"
#include "base/limits.h"
#include "testutil.h"

static StSummary *
run(const StSchedule *s, gboolean no_fold, StTimeline **timeline)
{
  return st_test_simulate(s, "auto", no_fold, timeline);
}

/* ---- conformance ------------------------------------------------------------- */

/* The files a user reads say no link carries more than it can: comm.csv's
 * rate of each link class never above what the class's links can send at
 * once over the cluster (for intra_node, GPUs x the port bandwidth), and
 * links.csv's peak of each link never above its capacity. */
static void
assert_csv_within_capacity(const StSummary *sum)
{
  const StTimeline *t = sum->timeline;
  const StCluster *c = t->schedule->cluster;
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *comm = g_build_filename(dir, "comm.csv", NULL);
  g_autofree char *links = g_build_filename(dir, "links.csv", NULL);
  g_autoptr(GError) error = NULL;
  g_assert_true(st_csv_write_comm(t, comm, &error) && st_csv_write_links(sum, links, &error));
  double capacity[ST_LINK_N] = {0};
  for (int l = 0; l < st_net_n_links(c); l++)
    if (st_net_kind_sends(st_net_link_kind(c, l)))
      capacity[st_net_kind_class(st_net_link_kind(c, l))] += st_net_link_capacity(c, l) * 1e-9;
  g_autofree char *text = st_test_read(comm, NULL);
  g_auto(GStrv) rows = g_strsplit(text, "\n", -1);
  g_assert_cmpstr(rows[0], ==, "time_us,intra_node,inter_node,pcie,local,total");
  for (int i = 1; rows[i] != NULL && rows[i][0] != '\0'; i++) {
    g_auto(GStrv) f = g_strsplit(rows[i], ",", -1);
    for (int k = 0; k < ST_LINK_N; k++)
      if (g_ascii_strtod(f[k + 1], NULL) > capacity[k] * (1 + 1e-9) + 1e-6)
        g_error("comm.csv row %d: %s %s GB/s over the class's %.3f", i, st_link_name(k),
                f[k + 1], capacity[k]);
  }
  g_autofree char *table = st_test_read(links, NULL);
  g_auto(GStrv) lines = g_strsplit(table, "\n", -1);
  for (int i = 1; lines[i] != NULL && lines[i][0] != '\0'; i++) {
    g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
    if (g_ascii_strtod(f[9], NULL) > g_ascii_strtod(f[4], NULL) * (1 + 1e-9) + 1e-6)
      g_error("links.csv: %s peaks at %s GB/s over its %s", f[1], f[9], f[4]);
  }
}


typedef struct {
  const char *model;
  const char *cluster; /* NULL: dgx-h100 */
  int nodes, gpus, ranks;
  int micro_batch, accumulation;
  StPrecision precision;
  int zero_stage;
  int64_t bucket_bytes;
} Case;

static const Case CASES[] = {
  {"mlp", NULL, 1, 1, 0, 16, 1, ST_PRECISION_FP32, 1, 0},
  {"mlp", NULL, 1, 4, 0, 16, 3, ST_PRECISION_MIXED, 2, 1 << 20},
  {"mlp", NULL, 1, 4, 6, 8, 1, ST_PRECISION_FP32, 3, 0},          /* 6 ranks on 4 GPUs */
  {"mlp", NULL, 2, 0, 0, 4, 2, ST_PRECISION_FP32, 3, 1 << 16},    /* 16 GPUs on 2 nodes */
  {"resnet18", NULL, 1, 8, 0, 8, 1, ST_PRECISION_MIXED, 2, 25 << 20},
  {"gpt2-124m", NULL, 1, 2, 4, 1, 2, ST_PRECISION_MIXED, 3, 0},   /* 2 ranks per GPU */
  /* 2 NICs shared by 6 GPUs per node, 3 nodes */
  {"resnet18", "models/clusters/summit.json", 3, 0, 0, 4, 1, ST_PRECISION_MIXED, 3, 0},
  /* 4 nodes, 2 per leaf, 2:1 oversubscribed core, 2 NICs for 4 GPUs */
  {"mlp", "tests/data/clusters/oversubscribed.json", 4, 0, 0, 8, 2, ST_PRECISION_FP32, 2, 0},
};

static void
test_conformance(void)
{
  /* Every strategy, on several models and cluster sizes, builds a schedule
   * that passes st_schedule_check (st_strategy_build runs it) and simulates
   * to the end without deadlock; folding identical ranks changes nothing
   * but the work done; no link, and no link class, ever carries more than
   * its capacity (st_test_simulate checks the record, here the files). */
  for (gsize k = 0; k < G_N_ELEMENTS(CASES); k++) {
    const Case *cs = &CASES[k];
    g_autoptr(StModel) m = st_test_model_named(cs->model);
    g_autoptr(StCluster) c = st_test_cluster(cs->cluster ? cs->cluster
                                                         : "models/clusters/dgx-h100.json",
                                             cs->nodes, cs->gpus);
    StOptions o;
    st_options_init(&o);
    o.ranks = cs->ranks;
    o.micro_batch = cs->micro_batch;
    o.global_batch = (int64_t)(cs->ranks ? cs->ranks : c->gpus) * cs->micro_batch *
                     cs->accumulation;
    o.precision = cs->precision;
    o.zero_stage = cs->zero_stage;
    o.bucket_bytes = cs->bucket_bytes;
    o.steps = 2;
    for (const StStrategy *const *st = st_strategies(); *st != NULL; st++) {
      g_test_message("case %zu: %s on %s", k, (*st)->name, cs->model);
      g_autoptr(StSchedule) s = st_test_build((*st)->name, m, c, &o);
      g_assert_cmpint(s->n_ranks, ==, cs->ranks ? cs->ranks : c->gpus);
      g_assert_cmpint(s->settings.accumulation, ==, cs->accumulation);
      StTimeline *tf, *tu;
      g_autoptr(StSummary) folded = run(s, FALSE, &tf);
      g_autoptr(StSummary) unfolded = run(s, TRUE, &tu);
      g_assert_cmpint(folded->step_time_ns, >, 0);
      g_assert_cmpint(folded->step_time_ns, ==, unfolded->step_time_ns);
      g_assert_cmpint(folded->makespan_ns, ==, unfolded->makespan_ns);
      for (int d = 0; d < s->n_devices; d++)
        g_assert_cmpint(st_summary_device(folded, d)->peak_bytes, ==,
                        st_summary_device(unfolded, d)->peak_bytes);
      g_assert_cmpfloat_with_epsilon(folded->comm_bytes_total, unfolded->comm_bytes_total,
                                     1e-6 * (1 + unfolded->comm_bytes_total));
      assert_csv_within_capacity(folded);
      assert_csv_within_capacity(unfolded);
      for (int cat = 0; cat < ST_MEM_N; cat++)
        g_assert_cmpint(folded->total_peak_by_category[cat], ==,
                        unfolded->total_peak_by_category[cat]);
      st_timeline_free(tf);
      st_timeline_free(tu);
    }
    st_options_clear(&o);
  }
}

/* ---- model-state memory ----------------------------------------------------------- */

static void
test_zero_model_states(void)
{
  /* ZeRO paper (Rajbhandari et al. 2020, section 5.1), mixed precision Adam
   * (K = 12), P parameters, N ranks, bytes per rank of persistent model states:
   *   DP: (2 + 2 + K) P = 16 P
   *   stage 1 (Pos): 2P + 2P + K P/N
   *   stage 2 (Pos+g): 2P + (2 + K) P/N
   *   stage 3 (Pos+g+p): (2 + 2 + K) P/N
   * where P/N is each layer's share rounded up, summed (every layer is cut
   * into N slices so that one layer can be gathered). ResNet-50 on 8 GPUs. */
  g_autoptr(StModel) m = st_test_model_named("resnet50");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  const int64_t P = m->params, N = 8, K = 12;
  int64_t shard = 0;
  for (int i = 0; i < m->n_layers; i++)
    shard += (m->layers[i].params + N - 1) / N;
  g_assert_cmpint(shard, >=, P / N);
  g_assert_cmpint(shard, <, P / N + m->n_layers);
  g_assert_cmpint(P, ==, 25557032);
  StOptions o;
  st_options_init(&o);
  o.framework = g_strdup("ideal"); /* 16-bit gradients, 25 MiB buckets */
  o.precision = ST_PRECISION_MIXED;
  o.optimizer = ST_OPTIMIZER_ADAM;
  struct {
    const char *strategy;
    int stage;
    int64_t params, grads, optimizer;
  } expect[] = {
    {"dp", 0, 2 * P, 2 * P, K * P},
    {"zero", 1, 2 * P, 2 * P, K * shard},
    {"zero", 2, 2 * P, 2 * shard, K * shard},
    {"zero", 3, 2 * shard, 2 * shard, K * shard},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(expect); i++) {
    o.zero_stage = MAX(expect[i].stage, 1);
    g_autoptr(StSchedule) s = st_test_build(expect[i].strategy, m, c, &o);
    int64_t bytes[ST_MEM_N];
    st_program_persistent_bytes(g_ptr_array_index(s->programs, 0), bytes);
    g_assert_cmpint(bytes[ST_MEM_PARAMS], ==, expect[i].params);
    g_assert_cmpint(bytes[ST_MEM_GRADS], ==, expect[i].grads);
    g_assert_cmpint(bytes[ST_MEM_OPTIMIZER], ==, expect[i].optimizer);
  }
  /* fp32 Adam: DP keeps 4 + 4 + 8 = 16 bytes per parameter too. */
  o.precision = ST_PRECISION_FP32;
  g_autoptr(StSchedule) dp = st_test_build("dp", m, c, &o);
  int64_t bytes[ST_MEM_N];
  st_program_persistent_bytes(g_ptr_array_index(dp->programs, 0), bytes);
  g_assert_cmpint(bytes[ST_MEM_PARAMS] + bytes[ST_MEM_GRADS] + bytes[ST_MEM_OPTIMIZER], ==,
                  16 * P);
  st_options_clear(&o);
}

static void
test_dp_activation_peak(void)
{
  /* Plain DP keeps, at the end of a micro-batch's forward, everything each
   * layer saved for backward,
   *   A = sum over layers of act_bytes(layer) * micro_batch
   *       + the batch norms' fp32 mean and 1/std (2 C floats each, 256-byte
   *         aligned; act_bytes leaves them out), in bn1 and in each
   *         bottleneck's units (C = width, width, 4 planes, and 4 planes for
   *         a downsample),
   * and two moments hold more: the loss's forward its input (the logits,
   * which no backward reads) and its output; flatten's forward, which copies
   * the pooled map (as the executor does), that map while the loss's saved
   * probabilities do not exist yet. The activation peak per GPU is
   *   A + max(logits + loss output, pooled map - probabilities),
   * reached once per micro-batch (accumulation does not add to it), and the
   * peak over all GPUs together is N times that. */
  g_autoptr(StModel) m = st_test_model_named("resnet50");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  StOptions o;
  st_options_init(&o);
  o.micro_batch = 16;
  o.global_batch = 4 * 16 * 2;
  int64_t expected = 0;
  for (int i = 0; i < m->n_layers; i++) {
    const StLayer *l = &m->layers[i];
    expected += l->act_bytes * 16;
    if (strcmp(l->type->name, "batchnorm2d") == 0)
      expected += 2 * st_layer_aligned(4 * l->in_shape.dims[0]);
    if (strcmp(l->type->name, "bottleneck") != 0)
      continue;
    int64_t planes = st_layer_attr(l, "planes", 1);
    int64_t width = planes * st_layer_attr(l, "width_per_group", 64) / 64 *
                    st_layer_attr(l, "groups", 1);
    gboolean down = st_layer_attr(l, "stride", 1) != 1 || l->in_shape.dims[0] != 4 * planes;
    expected += 2 * (2 * st_layer_aligned(4 * width) +
                     (down ? 2 : 1) * st_layer_aligned(4 * 4 * planes));
  }
  const StLayer *loss = &m->layers[m->n_layers - 1], *flatten = &m->layers[m->n_layers - 3];
  g_assert_cmpstr(loss->type->name, ==, "softmax_cross_entropy");
  g_assert_cmpstr(flatten->type->name, ==, "flatten");
  expected += MAX(loss->in_bytes + loss->out_bytes, flatten->in_bytes - loss->act_bytes) * 16;
  g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
  StTimeline *t;
  g_autoptr(StSummary) sum = run(s, FALSE, &t);
  for (int d = 0; d < 4; d++)
    g_assert_cmpint(st_summary_device(sum, d)->peak_by_category[ST_MEM_ACTIVATIONS], ==, expected);
  g_assert_cmpint(sum->total_peak_by_category[ST_MEM_ACTIVATIONS], ==, 4 * expected);
  st_timeline_free(t);
  st_options_clear(&o);
}

static void
test_zero3_gathers_per_layer(void)
{
  /* ZeRO-3 moves, per step and rank, each layer's parameters gathered twice
   * (forward and backward) and their gradients reduce-scattered once: with
   * one micro-batch and 2-byte weights and gradients, every rank sends
   * (N-1)/N * (2 + 2 + 2) P bytes, against 2 (N-1)/N * 2P for DP's all-reduce:
   * 1.5 times as much, as the ZeRO paper states. GPT-2's head is tied to its
   * token embedding (P_wte = 50257 x 768), whose weights are gathered again
   * for the head's forward and backward: + (N-1)/N * 2 * 2 P_wte, so the
   * ratio is 1.5 + P_wte / P. */
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  StOptions o;
  st_options_init(&o);
  o.framework = g_strdup("ideal"); /* DP and ZeRO both reduce 16-bit gradients, as the paper */
  o.precision = ST_PRECISION_MIXED;
  o.micro_batch = 1;
  o.zero_stage = 3;
  o.comm_algo = (g_free(o.comm_algo), g_strdup("ring"));
  g_autoptr(StSchedule) z = st_test_build("zero", m, c, &o);
  g_autoptr(StSchedule) d = st_test_build("dp", m, c, &o);
  StTimeline *tz, *td;
  g_autoptr(StSummary) sz = st_test_simulate(z, "ring", FALSE, &tz);
  g_autoptr(StSummary) sd = st_test_simulate(d, "ring", FALSE, &td);
  double P = (double)m->params, N = 8;
  g_assert_cmpfloat_with_epsilon(sd->comm_bytes_total, N * 2 * (N - 1) / N * 2 * P, 1.0);
  double wte = 50257.0 * 768;
  g_assert_cmpfloat_with_epsilon(sz->comm_bytes_total / sd->comm_bytes_total, 1.5 + wte / P, 1e-9);
  st_timeline_free(tz);
  st_timeline_free(td);
  st_options_clear(&o);
}

typedef struct {
  const char *strategy;
  const char *option, *value; /* NULL: the defaults */
  StUpdateKind kind;
} UpdateCase;

static void
test_update(void)
{
  /* Training semantics (issue 11 part 4): every strategy declares the
   * update it computes; dp, zero, pipeline and burst compute synchronous
   * SGD/Adam's, cyclic DP's rules v1 and v2 step with delayed gradients and
   * its rule dp waits for the fresh one, SAMO trains a pruned model, and
   * multiplexing's is its foreground's. */
  static const UpdateCase UPDATES[] = {
    {"dp", NULL, NULL, ST_UPDATE_SYNC},
    {"zero", "zero-stage", "3", ST_UPDATE_SYNC},
    {"pipeline", NULL, NULL, ST_UPDATE_SYNC},
    {"burst", NULL, NULL, ST_UPDATE_SYNC},
    {"cdp", NULL, NULL, ST_UPDATE_STALE},
    {"cdp", "update-rule", "v2", ST_UPDATE_STALE},
    {"cdp", "update-rule", "dp", ST_UPDATE_SYNC},
    {"dp", "sparsity", "0.9", ST_UPDATE_PRUNED},
    {"zero", "sparsity", "0.5", ST_UPDATE_PRUNED},
    {"pipeline", "sparsity", "0.9", ST_UPDATE_PRUNED},
    {"multiplex", NULL, NULL, ST_UPDATE_SYNC},
  };
  for (const StStrategy *const *st = st_strategies(); *st != NULL; st++) {
    g_assert_nonnull((*st)->update);
    g_autofree char *summary = st_strategy_update_summary(*st);
    g_assert_true(g_str_has_prefix(summary, "sync") || g_str_has_prefix(summary, "stale") ||
                  g_str_has_prefix(summary, "pruned"));
  }
  for (gsize i = 0; i < G_N_ELEMENTS(UPDATES); i++) {
    StOptions o;
    st_options_init(&o);
    if (UPDATES[i].option != NULL)
      g_assert_true(st_options_set(&o, UPDATES[i].option, UPDATES[i].value, NULL));
    StUpdate u = st_strategy_find(UPDATES[i].strategy)->update(&o);
    g_assert_cmpint(u.kind, ==, UPDATES[i].kind);
    g_assert_nonnull(u.what);
    st_options_clear(&o);
  }
  /* Multiplexing takes its foreground's: a pruned dp foreground is pruned. */
  StOptions o;
  st_options_init(&o);
  g_assert_true(st_options_set(&o, "foreground", "dp", NULL));
  g_assert_true(st_options_set(&o, "sparsity", "0.9", NULL));
  g_assert_cmpint(st_strategy_find("multiplex")->update(&o).kind, ==, ST_UPDATE_PRUNED);
  st_options_clear(&o);
  /* The listing names the knob values that change it. */
  g_autofree char *cdp = st_strategy_update_summary(st_strategy_find("cdp"));
  g_assert_nonnull(strstr(cdp, "with --update-rule dp, sync"));
  g_assert_null(strstr(cdp, "with --update-rule v1"));
}

static void
test_knobs(void)
{
  /* Every knob a strategy offers the planner names a real option, and each of
   * its values is one that option accepts. */
  for (const StStrategy *const *st = st_strategies(); *st != NULL; st++) {
    g_assert_nonnull((*st)->summary);
    g_assert_nonnull((*st)->citation);
    for (const StStrategyKnob *k = (*st)->knobs; k != NULL && k->option != NULL; k++) {
      g_assert_nonnull(st_option_find(k->option));
      if (k->values == NULL) /* varied only over the user's list */
        continue;
      g_auto(GStrv) values = g_strsplit(k->values, ",", -1);
      g_assert_nonnull(values[0]);
      for (char **v = values; *v != NULL; v++) {
        StOptions o;
        st_options_init(&o);
        g_autoptr(GError) error = NULL;
        g_assert_true(st_options_set(&o, k->option, *v, &error));
        g_assert_no_error(error);
        g_autofree char *back = st_options_get(&o, k->option);
        g_assert_nonnull(back);
        st_options_clear(&o);
      }
    }
  }
}

static void
test_options_by_name(void)
{
  /* Setting by name and reading back; errors name the option. */
  StOptions o;
  st_options_init(&o);
  g_autoptr(GError) error = NULL;
  g_assert_true(st_options_set(&o, "bucket-bytes", "25MiB", &error));
  g_assert_cmpint(o.bucket_bytes, ==, 25 << 20);
  g_assert_true(st_options_set(&o, "precision", "mixed", &error));
  g_assert_cmpint(o.precision, ==, ST_PRECISION_MIXED);
  g_assert_true(st_options_set(&o, "zero-stage", "3", &error));
  g_autofree char *stage = st_options_get(&o, "zero-stage");
  g_assert_cmpstr(stage, ==, "3");
  g_assert_false(st_options_set(&o, "zero-stage", "4", &error));
  g_assert_nonnull(strstr(error->message, "--zero-stage 4"));
  g_clear_error(&error);
  g_assert_false(st_options_set(&o, "micro-batch", "2.5", &error));
  g_assert_nonnull(strstr(error->message, "integer"));
  g_clear_error(&error);
  g_assert_false(st_options_set(&o, "warp-speed", "9", &error));
  g_assert_nonnull(strstr(error->message, "--warp-speed"));
  g_clear_error(&error);
  /* Integral limits print as integers, whatever their size. */
  g_assert_false(st_options_set(&o, "nodes", "4611686018427387904", &error));
  g_assert_nonnull(strstr(error->message, "between 1 and 1000000"));
  g_clear_error(&error);
  g_assert_false(st_options_set(&o, "steps", "2000000000", &error));
  g_assert_nonnull(strstr(error->message, "--steps 2000000000"));
  g_clear_error(&error);
  g_assert_false(st_options_set(&o, "bucket-bytes", "99999999999999999999", &error));
  g_assert_nonnull(strstr(error->message, "1.00 PiB"));
  st_options_clear(&o);
}

/* More ranks than GPUs share them, up to ST_MAX_RANKS_PER_GPU each; beyond,
 * --ranks is named (issue 15: --ranks 1000000 on 8 GPUs spun silently). */
static void
test_ranks_per_gpu(void)
{
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 0);
  StOptions o;
  st_options_init(&o);
  o.ranks = 8 * ST_MAX_RANKS_PER_GPU;
  g_assert_true(st_options_resolve(&o, c, NULL));
  o.ranks = 1000000;
  g_autoptr(GError) error = NULL;
  g_assert_false(st_options_resolve(&o, c, &error));
  g_assert_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "--ranks 1000000"));
  g_assert_nonnull(strstr(error->message, "125000 ranks per GPU"));
  g_clear_error(&error);
  /* A bad field is blamed alone (steps 0 is auto). */
  o.ranks = 8;
  o.steps = -1;
  g_assert_false(st_options_resolve(&o, c, &error));
  g_assert_nonnull(strstr(error->message, "--steps -1"));
  g_assert_null(strstr(error->message, "--ranks"));
  st_options_clear(&o);
}

static void
test_unknown_strategy(void)
{
  g_autoptr(GError) error = NULL;
  g_assert_null(st_strategy_lookup("cyclic", &error));
  g_assert_error(error, ST_STRATEGY_ERROR, ST_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "'cyclic'"));
  g_assert_nonnull(strstr(error->message, "dp"));
}

static void
test_bad_batch(void)
{
  /* 100 samples cannot be split into whole micro-batches of 8 on 4 ranks. */
  g_autoptr(StModel) m = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  StOptions o;
  st_options_init(&o);
  o.micro_batch = 8;
  o.global_batch = 100;
  g_autoptr(GError) error = st_test_build_refused("dp", m, c, &o);
  g_assert_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "--global-batch 100"));
  st_options_clear(&o);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/strategy/conformance", test_conformance);
  g_test_add_func("/strategy/zero/model-states", test_zero_model_states);
  g_test_add_func("/strategy/zero/stage3-traffic", test_zero3_gathers_per_layer);
  g_test_add_func("/strategy/dp/activation-peak", test_dp_activation_peak);
  g_test_add_func("/strategy/unknown", test_unknown_strategy);
  g_test_add_func("/strategy/knobs", test_knobs);
  g_test_add_func("/strategy/update", test_update);
  g_test_add_func("/strategy/options-by-name", test_options_by_name);
  g_test_add_func("/strategy/bad-batch", test_bad_batch);
  g_test_add_func("/strategy/ranks-per-gpu", test_ranks_per_gpu);
  return g_test_run();
}
