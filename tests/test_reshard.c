/* test_reshard.c: when ZeRO-3 drops a layer's gathered parameters
 * (--reshard, FSDP2's reshard_after_forward and set_reshard_after_backward)
 * and when ZeRO 2-3 reduce the gradients (--defer-grad-sync, FSDP2's
 * set_requires_gradient_sync(False) until the last micro-batch): the number
 * of collectives per step and the memory they hold, against the counts the
 * mechanisms imply. */
#include "strategy/options.h"
#include "testutil.h"

#define MICRO 4

/* GPT-2 124M under FSDP (ZeRO-3, fp32 gradients) on 8 GPUs, MICRO micro-batches per step. */
static StSchedule *
build(const char *reshard, const char *defer)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  StOptions o;
  st_options_init(&o);
  g_autoptr(GError) error = NULL;
  const char *set[] = {"zero-stage", "3", "precision", "mixed", "framework", "fsdp", "micro-batch", "2",
                       "global-batch", "64", "reshard", reshard, "defer-grad-sync", defer,
                       NULL};
  for (int i = 0; set[i] != NULL; i += 2)
    g_assert_true(st_options_set(&o, set[i], set[i + 1], &error));
  StSchedule *s = st_test_build("zero", m, c, &o);
  st_options_clear(&o);
  return s;
}

static int
count_colls(const StSchedule *s, StCollKind kind)
{
  const StProgram *p = st_schedule_program_of(s, 0);
  int n = 0;
  for (guint i = 0; i < p->ops->len; i++) {
    const StOp *op = &g_array_index(p->ops, StOp, i);
    n += op->kind == ST_OP_COMM_COLL && op->sub == kind;
  }
  return n;
}

/* Layers with parameters of their own (a tied head reads the embedding's). */
static int
owners(const StSchedule *s)
{
  int n = 0;
  for (int i = 0; i < s->model->n_layers; i++)
    n += s->model->layers[i].params > 0;
  return n;
}

static int64_t
peak_params(const StSchedule *s)
{
  g_autoptr(StTimeline) t = NULL;
  g_autoptr(StSummary) sum = st_test_simulate(s, NULL, FALSE, &t);
  return sum->rows[0].peak_by_category[ST_MEM_PARAMS];
}

static void
test_gathers(void)
{
  /* Dropped after every pass, each layer is gathered for its forward and
   * again for its backward in every micro-batch; kept to the backward, once
   * per micro-batch; kept to the step's last backward, once per step (the
   * tied head gathers the embedding's weights for its own passes when they
   * are dropped, and reads the kept copy otherwise). */
  g_autoptr(StSchedule) fwd = build("forward", "off");
  g_autoptr(StSchedule) bwd = build("backward", "off");
  g_autoptr(StSchedule) step = build("step", "off");
  int L = owners(fwd), gathers = count_colls(fwd, ST_COLL_ALL_GATHER);
  g_test_message("%d layers with parameters: %d, %d, %d gathers", L, gathers,
                 count_colls(bwd, ST_COLL_ALL_GATHER), count_colls(step, ST_COLL_ALL_GATHER));
  g_assert_cmpint(gathers, >=, 2 * L * MICRO);
  g_assert_cmpint(count_colls(bwd, ST_COLL_ALL_GATHER), ==, L * MICRO);
  g_assert_cmpint(count_colls(step, ST_COLL_ALL_GATHER), ==, L);
  /* What they hold: kept to the backward, every layer's 16-bit weights are
   * gathered at the forward's end, the whole model (and the shards beside
   * them); dropped after each pass, a layer or two (GPT-2's tied embedding,
   * 31 % of it, twice: for itself and for the head). */
  int64_t whole = fwd->model->params * 2;
  g_test_message("params peak: %.1f, %.1f, %.1f MB of a %.1f MB model",
                 peak_params(fwd) / 1e6, peak_params(bwd) / 1e6, peak_params(step) / 1e6,
                 whole / 1e6);
  g_assert_cmpint(peak_params(fwd), <, whole);
  g_assert_cmpint(peak_params(bwd), >=, whole);
  g_assert_cmpint(peak_params(step), >=, peak_params(bwd));
}

static void
test_deferred_reductions(void)
{
  /* Reduce-scattered after every micro-batch, or once per step; deferred,
   * every layer's whole gradient is held at once (the fp32 reduce dtype of
   * fsdp: 4 bytes per parameter), not the buckets still in flight. */
  g_autoptr(StSchedule) each = build("forward", "off");
  g_autoptr(StSchedule) once = build("forward", "on");
  int rs = count_colls(each, ST_COLL_REDUCE_SCATTER);
  g_assert_cmpint(rs, ==, MICRO * count_colls(once, ST_COLL_REDUCE_SCATTER));
  g_autoptr(StTimeline) t = NULL;
  g_autoptr(StSummary) sum = st_test_simulate(once, NULL, FALSE, &t);
  g_assert_cmpint(sum->rows[0].peak_by_category[ST_MEM_GRADS], >=,
                  (int64_t)(0.95 * (double)once->model->params * 4));
  g_autoptr(StTimeline) t2 = NULL;
  g_autoptr(StSummary) sum2 = st_test_simulate(each, NULL, FALSE, &t2);
  g_test_message("gradients' peak: %.1f MB reduced each micro-batch, %.1f MB deferred",
                 sum2->rows[0].peak_by_category[ST_MEM_GRADS] / 1e6,
                 sum->rows[0].peak_by_category[ST_MEM_GRADS] / 1e6);
  g_assert_cmpint(sum2->rows[0].peak_by_category[ST_MEM_GRADS], <,
                  sum->rows[0].peak_by_category[ST_MEM_GRADS]);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/reshard/gathers", test_gathers);
  g_test_add_func("/reshard/deferred-reductions", test_deferred_reductions);
  return g_test_run();
}
