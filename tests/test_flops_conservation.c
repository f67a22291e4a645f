/* test_flops_conservation.c: whatever way a strategy cuts the work (tensor
 * and sequence parallelism, pipeline chunks, expert parallelism), the FLOPs
 * the cost models are asked to run over all ranks in one step are the whole
 * model's forward and backward FLOPs times the global batch: work split
 * must not vanish (a GPU then computes faster than it can) nor be counted
 * twice. Replicated work (norms without sequence parallelism) is real work
 * done t times; the cases here use sequence parallelism, where none is, and
 * leave out the embeddings (a vocabulary-parallel lookup reads every token on
 * every tensor rank; its FLOPs are nominal) and Megatron's vocabulary
 * padding (--vocab-multiple 1 pads only what t does not divide: GPT's 50257
 * over 2 ranks, 2e-5). The estimate's kernels carried 2/3 of them on
 * tiny-moe under sequence parallelism before the experts ran on the tensor
 * group's gathered rows (audit, 2026-11-25). */
#include <math.h>

#include "cost/cost.h"
#include "cost/estimate.h"
#include "model/layer_type.h"
#include "sched/work.h"
#include "strategy/strategy.h"
#include "testutil.h"

static double
whole_step_flops(const StModel *m, int64_t global_batch)
{
  double f = 0;
  for (int i = 0; i < m->n_layers; i++)
    if (!m->layers[i].type->takes_ids)
      f += m->layers[i].fwd_flops + m->layers[i].bwd_flops;
  return f * (double)global_batch;
}

/* The FLOPs st_compute_work_traffic charges every forward and backward op of
 * every rank (the roofline's), summed per layer name in `by_layer`; in
 * `kernels` those the estimate compute model's kernels carry. */
static double
schedule_flops(const StSchedule *s, GHashTable *by_layer, double *kernels)
{
  double total = 0;
  *kernels = 0;
  for (int r = 0; r < s->n_ranks; r++) {
    const StProgram *p = st_schedule_program_of(s, r);
    StComputeCtx ctx = {s->cluster, NULL, st_program_model(s, p), ST_DTYPE_BF16, NULL, NULL, FALSE, FALSE};
    for (guint o = 0; o < p->ops->len; o++) {
      const StOp *op = st_program_op(p, o);
      if (op->kind != ST_OP_COMP || op->layer < 0 ||
          (op->sub != ST_PASS_FWD && op->sub != ST_PASS_BWD))
        continue;
      StWork w = st_op_work(s, p, op);
      double f, bytes;
      st_compute_work_traffic(&ctx, &w, &f, &bytes);
      if (w.share > 0)
        f *= w.share; /* a part of a pass (st_compute_time's scaling) */
      if (st_program_model(s, p)->layers[op->layer].type->takes_ids)
        continue;
      total += f;
      StKernels ks;
      g_assert_true(st_estimate_kernels(&ctx, &w, &ks));
      for (int k = 0; k < ks.n; k++)
        *kernels += ks.k[k].flops * (w.share > 0 ? w.share : 1);
      const char *name = st_program_model(s, p)->layers[op->layer].name;
      double *acc = g_hash_table_lookup(by_layer, name);
      if (acc == NULL) {
        acc = g_new0(double, 1);
        g_hash_table_insert(by_layer, g_strdup(name), acc);
      }
      *acc += f;
    }
  }
  return total;
}

typedef struct {
  const char *model; /* tests/data/exec/NAME.json or models/NAME.json */
  int nodes, gpus;
  const char *opts[8]; /* KEY=VALUE */
} Case;

static const Case CASES[] = {
  {"tiny-moe", 1, 8, {"tensor-parallel=2", "sequence-parallel=true", "expert-parallel=2",
                      "pipeline-stages=2", "micro-batch=2", "global-batch=16"}},
  {"tiny-moe", 1, 4, {"tensor-parallel=2", "expert-parallel=2", "sequence-parallel=true",
                      "micro-batch=1", "global-batch=4"}},
  {"mixtral-8x7b", 8, 64, {"tensor-parallel=8", "sequence-parallel=true", "expert-parallel=8",
                          "micro-batch=1", "global-batch=16"}},
  {"llama-3-8b", 1, 8, {"tensor-parallel=4", "sequence-parallel=true", "pipeline-stages=2",
                        "virtual-stages=2", "micro-batch=1", "global-batch=4"}},
  {"gpt3-1.3b", 1, 8, {"tensor-parallel=2", "sequence-parallel=true", "pipeline-stages=2",
                       "micro-batch=2", "global-batch=8"}},
};

static void
test_megatron(gconstpointer data)
{
  const Case *c = data;
  g_autofree char *exec = g_strdup_printf("tests/data/exec/%s.json", c->model);
  g_autoptr(StModel) m = g_str_has_prefix(c->model, "tiny") ? st_test_model(exec)
                                                             : st_test_model_named(c->model);
  g_autoptr(StCluster) cl = st_test_cluster_named("dgx-h100", c->nodes, c->gpus);
  StOptions o;
  st_options_init(&o);
  o.precision = ST_PRECISION_MIXED;
  o.vocab_multiple = 1; /* Megatron's padding of the vocabulary is extra work, real but not the model's */
  for (int i = 0; i < 8 && c->opts[i] != NULL; i++) {
    g_auto(GStrv) kv = g_strsplit(c->opts[i], "=", 2);
    g_autoptr(GError) error = NULL;
    g_assert_true(st_options_set(&o, kv[0], kv[1], &error));
    g_assert_no_error(error);
  }
  g_autoptr(StSchedule) s = st_test_build("megatron", m, cl, &o);
  g_autoptr(GHashTable) by_layer = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  double kernels;
  double want = whole_step_flops(m, o.global_batch), got = schedule_flops(s, by_layer, &kernels);
  for (int i = 0; i < m->n_layers; i++) {
    const StLayer *l = &m->layers[i];
    double *acc = g_hash_table_lookup(by_layer, l->name);
    double w = (l->fwd_flops + l->bwd_flops) * (double)o.global_batch, g = acc ? *acc : 0;
    if (!l->type->takes_ids && fabs(g - w) > 1e-4 * w)
      g_test_message("  layer %d '%s' (%s): schedule %.6g, model %.6g (%.4f)", i, l->name,
                     l->type->name, g, w, w > 0 ? g / w : 0);
  }
  g_test_message("%s: schedule %.6g FLOPs, model x global batch %.6g (%.4f), the estimate's "
                 "kernels %.6g (%.4f)", c->model, got, want, got / want, kernels, kernels / want);
  g_assert_cmpfloat(fabs(got - want), <=, 1e-4 * want);
  /* The estimate compute model's kernels carry them too (memory-bound
   * kernels, norms and activations, carry none of the few FLOPs per element
   * the layers count: under 3 % here). */
  g_assert_cmpfloat(kernels, <=, want * (1 + 1e-4));
  g_assert_cmpfloat(kernels, >=, want * 0.97);
  st_options_clear(&o);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(CASES); i++) {
    g_autofree char *path = g_strdup_printf("/flops-conservation/megatron/%zu-%s", i, CASES[i].model);
    g_test_add_data_func(path, &CASES[i], test_megatron);
  }
  return g_test_run();
}
