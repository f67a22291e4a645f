/* test_plan_replicas.c: the planner's bound over every rank
 * (plan_bound_ranks.c) follows one group of each kind among the ranks that
 * point-to-point transfers tie together (plan_bound_replicas.c), and must
 * give the same bound, to the nanosecond, as following every rank: on
 * pipelines and Megatron layouts whose data-parallel replicas repeat (some
 * straddling a node boundary, so not all alike), cyclic DP's chain of every
 * rank, and a token ring. The durations are arbitrary per (program, op): the
 * equality holds for any. */
#include <string.h>

#include "plan/plan_private.h"
#include "strategy/options.h"
#include "testutil.h"

/* Durations in ns, made up per program and op (fixed seed). */
static int64_t **
made_up_durations(const StSchedule *s, GRand *rand)
{
  int64_t **dur = g_new0(int64_t *, MAX(s->programs->len, 1));
  for (guint p = 0; p < s->programs->len; p++) {
    const StProgram *prog = g_ptr_array_index(s->programs, p);
    dur[p] = g_new(int64_t, MAX(prog->ops->len, 1));
    for (guint i = 0; i < prog->ops->len; i++)
      dur[p][i] = g_rand_int_range(rand, 0, 50000);
  }
  return dur;
}

static void
free_durations(const StSchedule *s, int64_t **dur)
{
  for (guint p = 0; p < s->programs->len; p++)
    g_free(dur[p]);
  g_free(dur);
}

/* Both ways on `s`; returns the ranks followed. */
static int
check(const StSchedule *s, GRand *rand)
{
  int64_t **dur = made_up_durations(s, rand);
  int64_t some = st_plan_bound_ranks_cycle(s, NULL, dur);
  int64_t every = st_plan_bound_ranks_cycle_all(s, NULL, dur, TRUE);
  g_test_message("%s: %d ranks, bound %" G_GINT64_FORMAT " ns", s->settings.description,
                 s->n_ranks, every);
  g_assert_cmpint(some, ==, every);
  g_assert_cmpint(every, >, 0);
  free_durations(s, dur);
  g_autofree gboolean *in = st_plan_bound_ranks_followed(s, NULL);
  int n = 0;
  for (int r = 0; r < s->n_ranks; r++)
    n += in[r];
  return n;
}

static void
test_pipelines(void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(22);
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  /* 3 nodes of 8: pipelines of 2 and 4 stages repeat alike; of 3 and 6,
   * some cross a node boundary where others do not. */
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 3, 0);
  const int stages[] = {2, 3, 4, 6};
  const int orders[] = {0, 1, 2};
  for (guint k = 0; k < G_N_ELEMENTS(stages); k++) {
    for (guint j = 0; j < G_N_ELEMENTS(orders); j++) {
      StOptions o;
      st_options_init(&o);
      o.micro_batch = 1;
      o.global_batch = 24 * 4;
      o.pipeline_stages = stages[k];
      o.pipeline_schedule = orders[j];
      o.steps = 0;
      g_autoptr(StSchedule) s = st_test_build("pipeline", m, c, &o);
      int followed = check(s, rand);
      g_assert_cmpint(followed, <, s->n_ranks);
      if (8 % stages[k] == 0)
        g_assert_cmpint(followed, ==, stages[k]); /* one pipeline */
      st_options_clear(&o);
    }
  }
}

static void
test_megatron(void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(23);
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 2, 0);
  const int tp[] = {1, 2, 4};
  const int pp[] = {2, 4};
  for (guint a = 0; a < G_N_ELEMENTS(tp); a++) {
    for (guint b = 0; b < G_N_ELEMENTS(pp); b++) {
      StOptions o;
      st_options_init(&o);
      o.micro_batch = 1;
      o.global_batch = 64;
      o.tensor_parallel = tp[a];
      o.pipeline_stages = pp[b];
      o.precision = ST_PRECISION_MIXED;
      o.steps = 0;
      g_autoptr(StSchedule) s = st_test_build("megatron", m, c, &o);
      g_assert_cmpint(check(s, rand), <, s->n_ranks);
      st_options_clear(&o);
    }
  }
}

/* Cyclic DP's chain reduce ties every worker together, staggered: one
 * group, every rank followed. */
static void
test_cdp_chain(void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(24);
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 1, 0);
  StOptions o;
  st_options_init(&o);
  o.micro_batch = 1;
  o.steps = 0;
  g_autoptr(StSchedule) s = st_test_build("cdp", m, c, &o);
  g_assert_cmpint(check(s, rand), ==, s->n_ranks);
  st_options_clear(&o);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/bounds/replicas/pipelines", test_pipelines);
  g_test_add_func("/plan/bounds/replicas/megatron", test_megatron);
  g_test_add_func("/plan/bounds/replicas/cdp-chain", test_cdp_chain);
  return g_test_run();
}
