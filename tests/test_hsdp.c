/* test_hsdp.c: --shard-group g, hybrid sharded data parallelism (PyTorch
 * FSDP's HYBRID_SHARD; strategy_zero.c) under the zero strategy: its
 * communicators, bytes per tier against the closed forms, memory sharded
 * over the group, and the refusals. */
#include <math.h>
#include <string.h>

#include "output/output.h"
#include "sched/sched.h"
#include "strategy/strategy.h"
#include "strategy/strategy_common.h"
#include "testutil.h"

static void
hsdp_options(StOptions *o, int stage, int group)
{
  st_options_init(o);
  o->zero_stage = stage;
  o->precision = ST_PRECISION_MIXED;
  o->micro_batch = 1;
  o->steps = 3;
  o->shard_group = group;
}

static int64_t
shard_of(const StModel *m, int d)
{
  int64_t shard = 0;
  for (int i = 0; i < m->n_layers; i++)
    shard += st_shard(m->layers[i].params, d);
  return shard;
}

/* Bytes per step of the rank-0 program's collectives of `kind` on `comm`. */
static int64_t
coll_bytes(const StSchedule *s, StCollKind kind, int comm)
{
  const StProgram *p = st_schedule_program_of(s, 0);
  int64_t bytes = 0;
  for (guint i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    if (op->kind == ST_OP_COMM_COLL && op->sub == kind && op->comm == comm)
      bytes += op->bytes;
  }
  return bytes;
}

/* GPT-2 124M (P parameters), ZeRO-2 on 2 DGX H100 nodes (d = 16 ranks),
 * --shard-group 8 (g, a node; k = d / g = 2 groups), 16-bit gradients and
 * weights, one micro-batch, ring collectives. Per rank and step:
 *
 *   intra-node: reduce-scatter of 2P over g + all-gather of 2P over g:
 *               2 x (g - 1)/g x 2P = 3.5P bytes sent;
 *   inter-node: all-reduce of the shard, 2P/g, over k: 2 (k - 1)/k x 2P/g
 *               = 2P/8 bytes sent.
 *
 * The collectives' sizes in the schedule: 2P each in the group, and
 * Σ_buckets ceil(bucket / g) x 2 across groups (within 2 bytes a bucket of
 * 2P/g). Sharding over all 16 instead sends more across nodes. */
static void
test_bytes_per_tier(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 2, 16);
  const int d = 16, g = 8, k = 2;
  StOptions o;
  hsdp_options(&o, 2, g);
  g_autoptr(StSchedule) s = st_test_build("zero", m, c, &o);
  st_options_clear(&o);
  int shard = st_schedule_find_comm(s, "shard"), replicate = st_schedule_find_comm(s, "replicate");
  g_assert_cmpint(shard, >=, 0);
  g_assert_cmpint(replicate, >=, 0);
  const StComm *cs = g_ptr_array_index(s->comms, shard);
  const StComm *cr = g_ptr_array_index(s->comms, replicate);
  g_assert_cmpint(cs->n_groups, ==, k);
  g_assert_cmpint(cr->n_groups, ==, g);
  for (int r = 0; r < d; r++) {
    g_assert_cmpint(cs->group_of[r], ==, r / g); /* a node's GPUs */
    g_assert_cmpint(cr->group_of[r], ==, r % g);
  }
  int64_t P = m->params;
  g_assert_cmpint(coll_bytes(s, ST_COLL_REDUCE_SCATTER, shard), ==, 2 * P);
  g_assert_cmpint(coll_bytes(s, ST_COLL_ALL_GATHER, shard), ==, 2 * P);
  int64_t across = coll_bytes(s, ST_COLL_ALL_REDUCE, replicate);
  g_assert_cmpint(across, >=, 2 * P / g);
  g_assert_cmpint(across, <=, 2 * (P / g + m->n_layers));

  StTimeline *t = NULL;
  g_autoptr(StSummary) sum = st_test_simulate(s, "ring", FALSE, &t);
  double steps = sum->steady_steps;
  double intra = sum->comm_bytes_by_link[ST_LINK_INTRA_NODE] / (steps * d);
  double inter = sum->comm_bytes_by_link[ST_LINK_INTER_NODE] / (steps * d);
  g_test_message("per rank and step: intra %.0f (closed form %.0f), inter %.0f (%.0f)", intra,
                 2.0 * (g - 1) / g * 2 * P, inter, 2.0 * (k - 1) / k * across);
  g_assert_cmpfloat(fabs(intra / (2.0 * (g - 1) / g * 2 * P) - 1), <, 0.02);
  g_assert_cmpfloat(fabs(inter / (2.0 * (k - 1) / k * across) - 1), <, 0.02);
  st_timeline_free(t);

  /* Flat ZeRO-2 over the 16 ranks crosses the nodes with more. */
  hsdp_options(&o, 2, 0);
  g_autoptr(StSchedule) flat = st_test_build("zero", m, c, &o);
  st_options_clear(&o);
  g_assert_cmpint(st_schedule_find_comm(flat, "replicate"), <, 0);
  g_autoptr(StSummary) fsum = st_test_simulate(flat, "ring", FALSE, &t);
  double flat_inter = fsum->comm_bytes_by_link[ST_LINK_INTER_NODE] / (fsum->steady_steps * d);
  g_test_message("flat ZeRO-2: inter %.0f per rank and step", flat_inter);
  g_assert_cmpfloat(flat_inter, >, 1.5 * inter);
  st_timeline_free(t);
}

/* Memory: the states are sharded over the group of g, not the d ranks:
 * ZeRO-3's params shard 2 Σ ceil(p_i / g) (DeepSpeed's 16-bit shard) and
 * the optimizer 12 Σ ceil(p_i / g); parameter gathers run in the group. */
static void
test_memory_stage3(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 2, 16);
  StOptions o;
  hsdp_options(&o, 3, 8);
  g_autoptr(StSchedule) s = st_test_build("zero", m, c, &o);
  StStateBytes b;
  st_state_bytes(&o, &b);
  st_options_clear(&o);
  int64_t by[ST_MEM_N] = {0};
  const StProgram *p = st_schedule_program_of(s, 0);
  for (guint i = 0; i < p->buffers->len; i++) {
    const StBuffer *buf = &g_array_index(p->buffers, StBuffer, i);
    if (buf->persistent)
      by[buf->category] += buf->bytes;
  }
  int64_t shard = shard_of(m, 8);
  g_assert_cmpint(by[ST_MEM_PARAMS], ==, b.shard_weight * shard);
  g_assert_cmpint(by[ST_MEM_OPTIMIZER], ==, b.shard_optimizer * shard);
  int gather = st_schedule_find_comm(s, "gather"), reduce = st_schedule_find_comm(s, "reduce");
  g_assert_cmpint(((const StComm *)g_ptr_array_index(s->comms, gather))->n_groups, ==, 2);
  g_assert_cmpint(((const StComm *)g_ptr_array_index(s->comms, reduce))->n_groups, ==, 2);
  g_assert_cmpint(coll_bytes(s, ST_COLL_ALL_REDUCE, st_schedule_find_comm(s, "replicate")), >,
                  0);
  StTimeline *t = NULL;
  g_autoptr(StSummary) sum = st_test_simulate(s, "ring", FALSE, &t);
  g_assert_null(sum->oom);
  st_timeline_free(t);
}

/* A group that does not divide the ranks, and another strategy, refused. */
static void
test_refusals(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  const char *strategies[] = {"zero", "dp"};
  const int groups[] = {3, 4};
  for (int k = 0; k < 2; k++) {
    StOptions o;
    hsdp_options(&o, k == 0 ? 2 : 0, groups[k]);
    g_autoptr(GError) error = st_test_build_refused(strategies[k], m, c, &o);
    st_options_clear(&o);
    g_assert_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, "--shard-group"));
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/hsdp/bytes-per-tier", test_bytes_per_tier);
  g_test_add_func("/hsdp/memory-stage3", test_memory_stage3);
  g_test_add_func("/hsdp/refusals", test_refusals);
  return g_test_run();
}
