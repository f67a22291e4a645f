/* test_fold.c: classes of identical ranks (sched/fold.h). */
#include <string.h>

#include "sched/fold.h"
#include "testutil.h"

/* `n_ranks` ranks on a dgx-h100 resized to `gpus` GPUs over `nodes` nodes,
 * all running one program with one collective on a world communicator. */
static StSchedule *
world_schedule(int nodes, int gpus, int n_ranks, const int32_t *placement)
{
  g_autofree char *mpath = st_test_src("models/mlp.json");
  g_autofree char *cpath = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  StModel *m = st_model_load(mpath, &error);
  g_assert_no_error(error);
  StCluster *c = st_cluster_load(cpath, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(c, nodes, gpus, &error));
  StSchedule *s = st_schedule_new(m, c, n_ranks, placement);
  int world = st_schedule_add_world(s, "world");
  StProgram *p = st_program_new("p");
  st_program_add_stream(p, "comm", 0);
  StOp op = st_op_coll(0, ST_COLL_ALL_REDUCE, world, 1 << 20);
  st_program_begin(p, &op);
  st_program_commit(p);
  int prog = st_schedule_add_program(s, p);
  for (int r = 0; r < n_ranks; r++)
    s->ranks[r].program = prog;
  return s;
}

static void
test_identical(void)
{
  /* 1024 identical ranks on 128 nodes: one class, one simulated rank. */
  g_autoptr(StSchedule) s = world_schedule(128, 0, 1024, NULL);
  g_autoptr(StFold) f = st_fold_new(s, TRUE);
  g_assert_true(f->folded);
  g_assert_null(f->why_not);
  g_assert_cmpint(f->n_rank_classes, ==, 1);
  g_assert_cmpint(f->n_device_classes, ==, 1);
  g_assert_cmpint(f->n_sim_ranks, ==, 1);
  for (int r = 0; r < 1024; r++) {
    g_assert_cmpint(f->rank_rep[r], ==, 0);
    g_assert_cmpint(f->device_rep[r], ==, 0);
  }
}

static void
test_uneven_sharing(void)
{
  /* 10 ranks round-robin on 8 GPUs: GPUs 0 and 1 host two ranks, GPUs 2-7
   * one. Two device classes, represented by GPUs 0 and 2; every rank on a
   * representative device is simulated (ranks 0, 8 on GPU 0 and 2 on GPU 2),
   * and rank 9 (second rank of GPU 1) stands behind rank 8. */
  g_autoptr(StSchedule) s = world_schedule(1, 8, 10, NULL);
  g_autoptr(StFold) f = st_fold_new(s, TRUE);
  g_assert_true(f->folded);
  g_assert_cmpint(f->n_device_classes, ==, 2);
  g_assert_cmpint(f->n_sim_ranks, ==, 3);
  g_assert_cmpint(f->sim_ranks[0], ==, 0);
  g_assert_cmpint(f->sim_ranks[1], ==, 2);
  g_assert_cmpint(f->sim_ranks[2], ==, 8);
  g_assert_cmpint(f->device_rep[1], ==, 0);
  g_assert_cmpint(f->device_rep[7], ==, 2);
  g_assert_cmpint(f->rank_rep[1], ==, 0);
  g_assert_cmpint(f->rank_rep[9], ==, 8);
  g_assert_cmpint(f->rank_rep[5], ==, 2);
}

static void
test_disabled(void)
{
  g_autoptr(StSchedule) s = world_schedule(1, 8, 8, NULL);
  g_autoptr(StFold) f = st_fold_new(s, FALSE);
  g_assert_false(f->folded);
  g_assert_cmpint(f->n_sim_ranks, ==, 8);
  for (int r = 0; r < 8; r++)
    g_assert_cmpint(f->rank_rep[r], ==, r);
}

static void
test_refused(void)
{
  /* Two groups {0,3} and {1,2} of one communicator, ranks 0-1 running
   * program A and 2-3 program B, one rank per GPU: rank 3's representative
   * (rank 2) sits in the other group, so a collective of {0,3} could not
   * complete among simulated ranks. Folding is refused and says why. */
  g_autoptr(StSchedule) s = world_schedule(1, 4, 4, NULL);
  int32_t color[] = {0, 1, 1, 0};
  int pairs = st_schedule_add_comm(s, "pairs", color);
  for (int prog = 0; prog < 2; prog++) {
    StProgram *p = st_program_new(prog ? "B" : "A");
    st_program_add_stream(p, "comm", 0);
    StOp op = st_op_coll(0, ST_COLL_ALL_REDUCE, pairs, 1 << 20);
    st_program_begin(p, &op);
    st_program_commit(p);
    int index = st_schedule_add_program(s, p);
    s->ranks[2 * prog].program = s->ranks[2 * prog + 1].program = index;
  }
  g_autoptr(StFold) f = st_fold_new(s, TRUE);
  g_assert_false(f->folded);
  g_assert_nonnull(f->why_not);
  g_assert_nonnull(strstr(f->why_not, "pairs"));
  g_assert_cmpint(f->n_sim_ranks, ==, 4);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/fold/identical", test_identical);
  g_test_add_func("/fold/uneven-sharing", test_uneven_sharing);
  g_test_add_func("/fold/disabled", test_disabled);
  g_test_add_func("/fold/refused", test_refused);
  return g_test_run();
}
