/* test_exec_sparse.c: SAMO's sparse model states (sim/strategy/sparse.h) run
 * for real on the host backend, on dp, zero 1-3 and pipeline: dense weights
 * with the pruned entries zero, fp32 master weights, gradients and optimizer
 * states for the kept entries only, one int32 index list per layer, each
 * layer's gradient compressed after its backward, the all-reduce (or
 * reduce-scatter and all-gather) on compressed vectors, the step on the
 * compressed vectors and the expand into the dense weights.
 *
 * The check: a sparse step gives the weights of a dense step with the mask
 * applied. The dense reference (exec_reference.h) trains the whole model on
 * plain host arrays: weights masked at the start (the mask of
 * st_exec_sparse_mask: nnz = P - floor(p P) entries of each layer kept), the
 * gradient of every replica summed, masked, and momentum SGD on every entry.
 * A pruned entry's gradient is zero after the mask, so its momentum and its
 * weight stay zero: the dense step moves exactly the kept entries, with the
 * arithmetic the sparse step applies to them.
 */
#include <math.h>
#include <string.h>

#include "exec/exec.h"
#include "exec_reference.h"
#include "strategy/strategy.h"
#include "testutil.h"

#define RANKS 4
#define MB 2
#define STEPS 3
#define LR 0.1
#define SEED 99

/* `settings`: option name / value pairs. The global batch is RANKS x MB x
 * `accumulation`. */
static StSchedule *
build(const StModel *m, const char *strategy, double p, int accumulation,
      const char *const *settings)
{
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) cl = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(cl, 1, RANKS, &error));
  StOptions o;
  st_options_init(&o);
  o.ranks = RANKS;
  o.micro_batch = MB;
  o.global_batch = (int64_t)RANKS * MB * accumulation;
  o.steps = STEPS;
  o.optimizer = ST_OPTIMIZER_SGD;
  o.precision = ST_PRECISION_FP32;
  o.sparsity = p;
  for (int i = 0; settings != NULL && settings[i] != NULL; i += 2)
    g_assert_true(st_options_set(&o, settings[i], settings[i + 1], &error));
  g_assert_no_error(error);
  StSchedule *s = st_strategy_build(st_strategy_find(strategy), m, cl, NULL, &o, &error);
  g_assert_no_error(error);
  st_options_clear(&o);
  return s;
}

/* Keeps the entries of `mask` of every layer's vector, zeroes the others. */
static void
apply_mask(const StModel *m, float **v, int32_t **mask, const size_t *nnz)
{
  for (int i = 0; i < m->n_layers; i++) {
    if (v[i] == NULL)
      continue;
    g_autofree float *kept = g_new0(float, m->layers[i].params);
    for (size_t j = 0; j < nnz[i]; j++)
      kept[mask[i][j]] = v[i][mask[i][j]];
    memcpy(v[i], kept, sizeof(float) * (size_t)m->layers[i].params);
  }
}

/* The dense reference: STEPS masked momentum-SGD steps; `replicas` data
 * replicas of `accumulation` micro-batches of MB samples each. */
static RefWeights
dense_masked(const StModel *m, double p, int replicas, int accumulation)
{
  int64_t gb = (int64_t)replicas * accumulation * MB;
  int32_t **mask = g_new0(int32_t *, m->n_layers);
  size_t *nnz = g_new0(size_t, m->n_layers);
  for (int i = 0; i < m->n_layers; i++)
    mask[i] = st_exec_sparse_mask(m, i, p, SEED, &nnz[i]);
  RefWeights w = ref_weights_new(m), mom = ref_weights_new(m), g = ref_weights_new(m),
             gr = ref_weights_new(m);
  ref_weights_init(&w, SEED);
  apply_mask(m, w.w, mask, nnz);
  for (int t = 0; t < STEPS; t++) {
    for (int d = 0; d < replicas; d++) {
      ref_zero(m, gr.w);
      for (int a = 0; a < accumulation; a++)
        ref_grad(m, SEED, gb, w.w, gr.w, (uint64_t)t * (uint64_t)gb +
                                           (uint64_t)(d * accumulation + a) * MB,
                 MB, t, a);
      if (d == 0)
        ref_weights_copy(&g, &gr);
      else
        ref_add(m, g.w, gr.w);
    }
    apply_mask(m, g.w, mask, nnz);
    ref_sgd(&w, &mom, g.w, LR);
  }
  for (int i = 0; i < m->n_layers; i++)
    g_free(mask[i]);
  g_free(mask);
  g_free(nnz);
  ref_weights_free(&mom);
  ref_weights_free(&g);
  ref_weights_free(&gr);
  return w;
}

/* Entries of the executor's weights the mask prunes that are not zero. */
static int64_t
pruned_nonzero(const StModel *m, const GPtrArray *weights, double p)
{
  int64_t bad = 0;
  for (int i = 0; i < m->n_layers; i++) {
    size_t nnz = 0;
    g_autofree int32_t *mask = st_exec_sparse_mask(m, i, p, SEED, &nnz);
    const GArray *w = g_ptr_array_index(weights, i);
    g_autofree gboolean *kept = g_new0(gboolean, MAX(w->len, 1));
    for (size_t j = 0; j < nnz; j++)
      kept[mask[j]] = TRUE;
    for (guint j = 0; j < w->len; j++)
      bad += !kept[j] && g_array_index(w, float, j) != 0.0f;
  }
  return bad;
}

static double
against_dense(const char *model_path, const char *strategy, double p, int replicas,
              int accumulation, const char *const *settings, const char *what)
{
  g_autoptr(StModel) m = st_test_model(model_path);
  g_autoptr(StSchedule) s = build(m, strategy, p, accumulation * replicas / RANKS, settings);
  g_assert_cmpfloat(s->settings.sparsity, ==, p);
  StExecResult r;
  g_autoptr(StTimeline) t = st_test_execute(s, LR, SEED, &r);
  RefWeights want = dense_masked(m, p, replicas, accumulation);
  double d = ref_differ(r.weights, &want);
  g_test_message("%s, %s, sparsity %g: weights differ from the masked dense steps by %.3g",
                 model_path, what, p, d);
  g_assert_cmpint(pruned_nonzero(m, r.weights, p), ==, 0);
  ref_weights_free(&want);
  st_exec_result_clear(&r);
  return d;
}

static void
test_dp(void)
{
  /* DP: every rank compresses its gradient, the all-reduce sums the
   * compressed vectors in rank order and every rank steps them: the dense
   * reference sums the same entries in the same order, so the weights agree
   * to fp32 rounding, 1e-5 relative after 3 steps (measured: 0 for the MLP,
   * bit for bit; up to 3.5e-7 for the GPT, whose tied head's gradient is
   * added to the embedding's in another order). Two models, two
   * sparsities; the GPT's tied head is compressed by its embedding's mask. */
  const char *models[] = {"tests/data/exec/tiny-mlp3.json", "tests/data/exec/tiny-gpt.json"};
  double ps[] = {0.5, 0.9};
  for (gsize i = 0; i < G_N_ELEMENTS(models); i++)
    for (gsize k = 0; k < G_N_ELEMENTS(ps); k++)
      g_assert_cmpfloat(against_dense(models[i], "dp", ps[k], RANKS, 1, NULL, "dp"), <=, 1e-5);
}

static void
test_zero(void)
{
  /* ZeRO 1-3 on compressed vectors (reduce-scatter of the compressed
   * gradient, each rank stepping its slice of the kept entries, all-gather
   * of compressed weights expanded into the dense ones): the same sums in
   * member order, with accumulation over 2 micro-batches (stages 2-3 reduce
   * each micro-batch, so micro-batches and ranks are added in another order
   * than the reference's): 1e-5 relative (measured: 0 to 1.1e-7 for the
   * MLP, 2.6e-7 for the GPT). */
  const char *stages[] = {"1", "2", "3"};
  for (gsize k = 0; k < G_N_ELEMENTS(stages); k++) {
    const char *settings[] = {"zero-stage", stages[k], NULL};
    g_autofree char *what = g_strdup_printf("zero %s", stages[k]);
    g_assert_cmpfloat(against_dense("tests/data/exec/tiny-mlp3.json", "zero", 0.75, RANKS, 2,
                                    settings, what),
                      <=, 1e-5);
    g_assert_cmpfloat(against_dense("tests/data/exec/tiny-gpt.json", "zero", 0.75, RANKS, 1,
                                    settings, what),
                      <=, 1e-5);
  }
}

static void
test_pipeline(void)
{
  /* Pipelines of 2 stages x 2 replicas, 2 micro-batches each: compressed
   * gradients all-reduced across the pipelines, the tied embedding's copy
   * summed between its two stages on compressed vectors: 1e-5 relative
   * (measured: 0 for the MLP, 6e-8 for the GPT, whose tied gradient is
   * summed in another order). */
  const char *settings[] = {"pipeline-stages", "2", NULL};
  g_assert_cmpfloat(against_dense("tests/data/exec/tiny-mlp3.json", "pipeline", 0.9, 2, 2,
                                  settings, "pipeline"),
                    <=, 1e-5);
  g_assert_cmpfloat(against_dense("tests/data/exec/tiny-gpt.json", "pipeline", 0.9, 2, 2,
                                  settings, "pipeline"),
                    <=, 1e-5);
}

static void
test_compressed_traffic(void)
{
  /* What moves is compressed: every collective of sparse dp moves the
   * kept entries of its layers, nnz x 4 bytes (fp32), no index. */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-mlp3.json");
  g_autoptr(StSchedule) s = build(m, "dp", 0.9, 1, NULL);
  const StProgram *p = st_schedule_program_of(s, 0);
  int colls = 0;
  for (guint o = 0; o < p->ops->len; o++) {
    const StOp *op = st_program_op(p, o);
    if (op->kind != ST_OP_COMM_COLL)
      continue;
    colls++;
    g_assert_cmpint(op->data, ==, ST_DATA_GRADS_PACKED);
    int64_t nnz = 0;
    for (int i = op->layer; i <= op->layer_last; i++)
      nnz += m->layers[i].params - (int64_t)floor(0.9 * (double)m->layers[i].params);
    g_assert_cmpint(op->bytes, ==, nnz * 4);
  }
  g_assert_cmpint(colls, >, 0);
}

static void
test_mixed(void)
{
  /* bf16 dense weights, fp32 compressed master weights, Adam (an fp32
   * copy of the compressed gradient): runs, the loss is finite and the
   * pruned weights stay zero. */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-gpt.json");
  const char *settings[] = {"precision", "mixed", "optimizer", "adam", NULL};
  const char *strategies[] = {"dp", "zero"};
  for (gsize k = 0; k < G_N_ELEMENTS(strategies); k++) {
    g_autoptr(StSchedule) s = build(m, strategies[k], 0.9, 1, settings);
    StExecResult r;
    g_autoptr(StTimeline) t = st_test_execute(s, LR, SEED, &r);
    for (guint i = 0; i < r.loss->len; i++)
      g_assert_true(isfinite(g_array_index(r.loss, double, i)));
    g_assert_cmpint(pruned_nonzero(m, r.weights, 0.9), ==, 0);
    st_exec_result_clear(&r);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/exec/sparse/dp", test_dp);
  g_test_add_func("/exec/sparse/zero", test_zero);
  g_test_add_func("/exec/sparse/pipeline", test_pipeline);
  g_test_add_func("/exec/sparse/compressed-traffic", test_compressed_traffic);
  g_test_add_func("/exec/sparse/mixed", test_mixed);
  return g_test_run();
}
