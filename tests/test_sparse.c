/* test_sparse.c: the SAMO sparse modifier (strategy/sparse.h) on dp, zero
 * and pipeline: model-state bytes per parameter as a function of the
 * sparsity p (and where sparse stops paying off), the schedules' persistent
 * states, compressed all-reduce bytes, the transient dense gradients, the
 * cost of compress and expand, and conformance with the modifier on.
 * Z below is the number of non-zeros, sum over layers of P_l - floor(p P_l).
 */
#include <math.h>
#include <string.h>

#include "engine/engine.h"
#include "output/output.h"
#include "strategy/sparse.h"
#include "strategy/strategy.h"
#include "testutil.h"

static int64_t
nonzeros(const StModel *m, double p, int shards)
{
  int64_t z = 0;
  for (int i = 0; i < m->n_layers; i++) {
    int64_t nnz = m->layers[i].params - (int64_t)floor(p * (double)m->layers[i].params);
    z += (nnz + shards - 1) / shards;
  }
  return z;
}

/* ---- bytes per parameter ----------------------------------------------------------- */

static void
test_bytes_per_param(void)
{
  /* Persistent model-state bytes per parameter (sparse.h), w the weight
   * bytes, as a function of p:
   *   mixed Adam: dense 2 + 2 + 12 = 16;   sparse 2 + (1-p)(2 + 4 + 12 + 4) = 2 + 22 (1-p)
   *   fp32  Adam: dense 4 + 4 + 8  = 16;   sparse 4 + (1-p)(4 + 0 + 12 + 4) = 4 + 20 (1-p)
   *   mixed SGD:  dense 2 + 2 + 8  = 12;   sparse 2 + (1-p)(2 + 4 + 8 + 4)  = 2 + 18 (1-p)
   *   fp32  SGD:  dense 4 + 4 + 4  = 12;   sparse 4 + (1-p)(4 + 0 + 8 + 4)  = 4 + 16 (1-p)
   * Sparse stops paying off below p* = 1 - (dense - w) / (sparse per non-zero):
   *   4/11, 2/5, 4/9 and 1/2: there the second gradient copy, the fp32
   * master weights kept apart and the indices cost more than pruning saves. */
  struct {
    StPrecision precision;
    StOptimizer optimizer;
    double w, dense, per_nnz, breakeven;
  } cases[] = {
    {ST_PRECISION_MIXED, ST_OPTIMIZER_ADAM, 2, 16, 22, 4.0 / 11},
    {ST_PRECISION_FP32, ST_OPTIMIZER_ADAM, 4, 16, 20, 2.0 / 5},
    {ST_PRECISION_MIXED, ST_OPTIMIZER_SGD, 2, 12, 18, 4.0 / 9},
    {ST_PRECISION_FP32, ST_OPTIMIZER_SGD, 4, 12, 16, 1.0 / 2},
  };
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
    StOptions o;
    st_test_options_init(&o);
    o.precision = cases[k].precision;
    o.optimizer = cases[k].optimizer;
    for (double p = 0; p < 0.99; p += 0.05) {
      o.sparsity = p;
      StSparse sp;
      g_assert_true(st_sparse_init(&sp, &o, NULL));
      double want = p == 0 ? cases[k].dense : cases[k].w + (1 - p) * cases[k].per_nnz;
      g_assert_cmpfloat_with_epsilon(st_sparse_bytes_per_param(&sp), want, 1e-9);
      if (p > 0) {
        g_assert_cmpfloat_with_epsilon(st_sparse_breakeven(&sp), cases[k].breakeven, 1e-12);
        /* Cheaper than dense exactly above the break-even. */
        g_assert_true((st_sparse_bytes_per_param(&sp) < cases[k].dense) ==
                      (p > cases[k].breakeven + 1e-12));
      }
    }
    st_options_clear(&o);
  }
}

static void
test_dp_states(void)
{
  /* dp on GPT-2 124M, mixed Adam: persistent params 2P + 4Z (dense 16-bit
   * weights and int32 indices), grads (2 + 4) Z, optimizer 12 Z. At
   * p = 0.3 (below 4/11) the total exceeds dense's 16P; at p = 0.4 it is
   * below. */
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  StOptions o;
  st_test_options_init(&o);
  o.precision = ST_PRECISION_MIXED;
  o.micro_batch = 1;
  const double ps[] = {0.3, 0.4, 0.9};
  const int64_t P = m->params;
  for (gsize k = 0; k < G_N_ELEMENTS(ps); k++) {
    o.sparsity = ps[k];
    g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
    int64_t Z = nonzeros(m, ps[k], 1), bytes[ST_MEM_N];
    st_program_persistent_bytes(g_ptr_array_index(s->programs, 0), bytes);
    g_assert_cmpint(bytes[ST_MEM_PARAMS], ==, 2 * P + 4 * Z);
    g_assert_cmpint(bytes[ST_MEM_GRADS], ==, 6 * Z);
    g_assert_cmpint(bytes[ST_MEM_OPTIMIZER], ==, 12 * Z);
    int64_t total = bytes[ST_MEM_PARAMS] + bytes[ST_MEM_GRADS] + bytes[ST_MEM_OPTIMIZER];
    g_assert_true((total < 16 * P) == (ps[k] > 4.0 / 11));
  }
  st_options_clear(&o);
}

static void
test_zero_states(void)
{
  /* ZeRO with SAMO on 8 ranks, mixed Adam, Zs = sum over layers of
   * ceil(Z_l / 8) (each layer's non-zeros cut in 8 slices):
   *   stage 1: params 2P + 4Z, grads 2Z + 4Zs, optimizer 12 Zs
   *   stage 2: params 2P + 4Z, grads (2 + 4) Zs, optimizer 12 Zs
   *   stage 3: params 2Zs + 4Z, grads (2 + 4) Zs, optimizer 12 Zs. */
  g_autoptr(StModel) m = st_test_model_named("resnet50");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  StOptions o;
  st_test_options_init(&o);
  o.precision = ST_PRECISION_MIXED;
  o.sparsity = 0.8;
  const int64_t P = m->params, Z = nonzeros(m, 0.8, 1), Zs = nonzeros(m, 0.8, 8);
  int64_t want[3][3] = {
    {2 * P + 4 * Z, 2 * Z + 4 * Zs, 12 * Zs},
    {2 * P + 4 * Z, 6 * Zs, 12 * Zs},
    {2 * Zs + 4 * Z, 6 * Zs, 12 * Zs},
  };
  for (int stage = 1; stage <= 3; stage++) {
    o.zero_stage = stage;
    g_autoptr(StSchedule) s = st_test_build("zero", m, c, &o);
    int64_t bytes[ST_MEM_N];
    st_program_persistent_bytes(g_ptr_array_index(s->programs, 0), bytes);
    g_assert_cmpint(bytes[ST_MEM_PARAMS], ==, want[stage - 1][0]);
    g_assert_cmpint(bytes[ST_MEM_GRADS], ==, want[stage - 1][1]);
    g_assert_cmpint(bytes[ST_MEM_OPTIMIZER], ==, want[stage - 1][2]);
  }
  st_options_clear(&o);
}

/* ---- communication ------------------------------------------------------------------ */

static void
test_allreduce_bytes(void)
{
  /* dp over N = 8 GPUs with ring all-reduces of the 16-bit gradients: each
   * GPU sends 2 (N - 1)/N of the vector, so per step
   *   dense:  N x 2 (N-1)/N x 2P     sparse: N x 2 (N-1)/N x 2Z,
   * the compressed vector only (the mask is shared: no index travels). */
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  StOptions o;
  st_test_options_init(&o);
  o.precision = ST_PRECISION_MIXED;
  o.micro_batch = 1;
  g_free(o.comm_algo);
  o.comm_algo = g_strdup("ring");
  const double N = 8;
  for (int k = 0; k < 2; k++) {
    o.sparsity = k ? 0.9 : 0;
    g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
    StTimeline *t;
    g_autoptr(StSummary) sum = st_test_simulate(s, "ring", FALSE, &t);
    double elems = (double)(k ? nonzeros(m, 0.9, 1) : m->params);
    g_assert_cmpfloat_with_epsilon(sum->comm_bytes_total, N * 2 * (N - 1) / N * 2 * elems, 1.0);
    st_timeline_free(t);
  }
  st_options_clear(&o);
}

/* ---- memory and cost over time -------------------------------------------------------- */

static void
test_dense_gradient_transient(void)
{
  /* Each layer's dense 16-bit gradient lives from its backward to its
   * compress op, and the next backward starts after that compress, so at
   * most one exists at a time; the tied LM head's dense gradient of the
   * embedding (P_e) waits from the head's backward to the embedding's, the
   * largest layer, whose own dense gradient then joins it: on one GPU,
   * mixed precision,
   *   peak grads = (2 + 4) Z + 2 max_l P_l + 2 P_e
   * where dense dp keeps 2P of gradients throughout. */
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 1);
  StOptions o;
  st_test_options_init(&o);
  o.precision = ST_PRECISION_MIXED;
  o.micro_batch = 1;
  o.global_batch = 2; /* two micro-batches: compress accumulates */
  o.sparsity = 0.9;
  int64_t largest = 0, tied = 0;
  for (int i = 0; i < m->n_layers; i++) {
    largest = MAX(largest, m->layers[i].params);
    if (st_model_tied_layer(m, i) >= 0)
      tied = m->layers[st_model_tied_layer(m, i)].params;
  }
  g_assert_cmpint(tied, ==, largest);
  g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
  StTimeline *t;
  g_autoptr(StSummary) sum = st_test_simulate(s, "auto", FALSE, &t);
  g_assert_cmpint(st_summary_device(sum, 0)->peak_by_category[ST_MEM_GRADS], ==,
                  6 * nonzeros(m, 0.9, 1) + 2 * largest + 2 * tied);
  st_timeline_free(t);
  st_options_clear(&o);
}

static void
test_compress_expand_cost(void)
{
  /* Without a profile, compress and expand are bandwidth bound (roofline)
   * over the bytes they move, at 3.35 TB/s on an H100: one compress per
   * layer with weights and micro-batch, of
   *   2 P_l (dense gradient) + 4 Z_l (indices) + 2 x 2 Z_l (accumulate)
   * bytes, and one expand of 2 Z + 4 Z + 2 P bytes after the optimizer. */
  g_autoptr(StModel) m = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  StOptions o;
  st_test_options_init(&o);
  o.precision = ST_PRECISION_MIXED;
  o.micro_batch = 8;
  o.global_batch = 2 * 8 * 3;
  o.sparsity = 0.75;
  g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
  StTimeline *t;
  g_autoptr(StSummary) sum = st_test_simulate(s, "auto", FALSE, &t);
  const StProgram *p = g_ptr_array_index(s->programs, 0);
  int with_params = 0;
  for (int i = 0; i < m->n_layers; i++)
    with_params += m->layers[i].params > 0;
  int compress = 0, expand = 0;
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    const StOp *op = st_program_op(p, r->op);
    if (r->rank != 0 || r->step != 0 || op->kind != ST_OP_COMP)
      continue;
    int64_t want = -1;
    if (op->sub == ST_PASS_COMPRESS) {
      int64_t P = m->layers[op->layer].params, Z = P - (int64_t)floor(0.75 * (double)P);
      want = 2 * P + 4 * Z + 4 * Z;
      compress++;
    } else if (op->sub == ST_PASS_EXPAND) {
      int64_t Z = nonzeros(m, 0.75, 1);
      want = 2 * Z + 4 * Z + 2 * m->params;
      expand++;
    } else {
      continue;
    }
    g_assert_cmpint(op->bytes, ==, want);
    g_assert_cmpint(r->source, ==, ST_SRC_ROOFLINE);
    double ns = (double)want / c->gpu.memory_bandwidth * 1e9;
    g_assert_cmpfloat_with_epsilon((double)(r->end_ns - r->start_ns), ns, 1.0);
  }
  g_assert_cmpint(compress, ==, 3 * with_params);
  g_assert_cmpint(expand, ==, 1);
  st_timeline_free(t);
  st_options_clear(&o);
}

/* ---- conformance and errors ------------------------------------------------------------- */

static void
test_conformance(void)
{
  /* dp, zero 1-3 and pipeline with 90% sparsity on the shapes of the
   * strategy conformance test: valid, simulated, folded = unfolded. */
  struct {
    const char *model;
    int nodes, gpus, ranks, micro, accumulation;
    StPrecision precision;
  } cases[] = {
    {"mlp", 1, 1, 0, 16, 1, ST_PRECISION_FP32},
    {"mlp", 1, 4, 0, 16, 3, ST_PRECISION_MIXED},
    {"mlp", 1, 4, 6, 8, 1, ST_PRECISION_FP32},
    {"mlp", 2, 0, 0, 4, 2, ST_PRECISION_FP32},
    {"resnet18", 1, 8, 0, 8, 1, ST_PRECISION_MIXED},
    {"gpt2-124m", 1, 2, 4, 1, 2, ST_PRECISION_MIXED},
  };
  const char *strategies[] = {"dp", "zero", "zero", "zero", "pipeline", "pipeline"};
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
    g_autoptr(StModel) m = st_test_model_named(cases[k].model);
    g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", cases[k].nodes, cases[k].gpus);
    int ranks = cases[k].ranks ? cases[k].ranks : c->gpus;
    for (gsize j = 0; j < G_N_ELEMENTS(strategies); j++) {
      StOptions o;
      st_test_options_init(&o);
      o.ranks = cases[k].ranks;
      o.micro_batch = cases[k].micro;
      o.global_batch = (int64_t)ranks * cases[k].micro * cases[k].accumulation;
      o.precision = cases[k].precision;
      o.steps = 2;
      o.sparsity = 0.9;
      o.bucket_bytes = 1 << 16;
      o.zero_stage = j >= 1 && j <= 3 ? (int)j : 0;
      o.pipeline_stages = j == 5 && ranks % 2 == 0 ? 2 : 0; /* 0: fitted, likely 1 */
      g_test_message("case %zu: %s %zu", k, strategies[j], j);
      g_autoptr(StSchedule) s = st_test_build(strategies[j], m, c, &o);
      StTimeline *tf, *tu;
      g_autoptr(StSummary) folded = st_test_simulate(s, "auto", FALSE, &tf);
      g_autoptr(StSummary) unfolded = st_test_simulate(s, "auto", TRUE, &tu);
      g_assert_cmpint(folded->step_time_ns, >, 0);
      g_assert_cmpint(folded->step_time_ns, ==, unfolded->step_time_ns);
      for (int d = 0; d < s->n_devices; d++)
        g_assert_cmpint(st_summary_device(folded, d)->peak_bytes, ==,
                        st_summary_device(unfolded, d)->peak_bytes);
      g_assert_cmpfloat_with_epsilon(folded->comm_bytes_total, unfolded->comm_bytes_total,
                                     1e-6 * (1 + unfolded->comm_bytes_total));
      st_timeline_free(tf);
      st_timeline_free(tu);
      st_options_clear(&o);
    }
  }
}

static void
test_bad_sparsity(void)
{
  /* 1 would prune every weight: the table refuses it, and so does a
   * strategy given it directly, naming the option. */
  StOptions o;
  st_test_options_init(&o);
  g_autoptr(GError) error = NULL;
  g_assert_false(st_options_set(&o, "sparsity", "1", &error));
  g_assert_nonnull(strstr(error->message, "--sparsity 1"));
  g_clear_error(&error);
  g_assert_true(st_options_set(&o, "sparsity", "0.9", &error));
  g_assert_cmpfloat(o.sparsity, ==, 0.9);
  o.sparsity = 1;
  g_autoptr(StModel) m = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  const char *names[] = {"dp", "zero", "pipeline"};
  for (int k = 0; k < 3; k++) {
    g_autoptr(StSchedule) s =
      st_strategy_build(st_strategy_find(names[k]), m, c, NULL, &o, &error);
    g_assert_null(s);
    g_assert_nonnull(strstr(error->message, "--sparsity 1"));
    g_clear_error(&error);
  }
  st_options_clear(&o);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/sparse/bytes-per-param", test_bytes_per_param);
  g_test_add_func("/sparse/dp-states", test_dp_states);
  g_test_add_func("/sparse/zero-states", test_zero_states);
  g_test_add_func("/sparse/allreduce-bytes", test_allreduce_bytes);
  g_test_add_func("/sparse/dense-gradient-transient", test_dense_gradient_transient);
  g_test_add_func("/sparse/compress-expand-cost", test_compress_expand_cost);
  g_test_add_func("/sparse/conformance", test_conformance);
  g_test_add_func("/sparse/bad-sparsity", test_bad_sparsity);
  return g_test_run();
}
