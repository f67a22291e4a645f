/* test_engine.c: the event queue and the engine, on worked examples whose
 * closed form is stated first.
 *
 * The unit cluster (tests/data/engine/cluster.json): 2 nodes x 4 GPUs at
 * 100 TFLOP/s fp32 and 1 TB/s; intra-node 100 GB/s with 1 us latency,
 * inter-node 10 GB/s with 5 us. The unit model has one layer that at batch 10
 * needs 1e10 FLOP forward (100 us) and 2e10 backward (200 us), compute bound.
 * Communication's worked examples are in test_net.c.
 */
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "engine/engine.h"
#include "engine/queue.h"
#include "output/output.h"
#include "testutil.h"

/* ---- queue ----------------------------------------------------------------- */

static void
test_queue_ties(void)
{
  /* Equal times pop in push order; a rescheduled node goes behind the others. */
  StEventQueue q;
  st_queue_init(&q);
  StEventNode n[5];
  for (int i = 0; i < 5; i++) {
    st_event_node_init(&n[i]);
    st_queue_push(&q, &n[i], i == 4 ? 5 : 10);
  }
  st_queue_reschedule(&q, &n[1], 10);
  st_queue_remove(&q, &n[2]);
  g_assert_false(st_event_queued(&n[2]));
  StEventNode *expect[] = {&n[4], &n[0], &n[3], &n[1]};
  for (int i = 0; i < 4; i++)
    g_assert_true(st_queue_pop(&q) == expect[i]);
  g_assert_null(st_queue_pop(&q));
  st_queue_clear(&q);
}

static void
test_queue_order(void)
{
  /* 1000 pseudo-random times pop sorted, ties in push order. */
  StEventQueue q;
  st_queue_init(&q);
  StEventNode n[1000];
  GRand *rand = g_rand_new_with_seed(7);
  for (int i = 0; i < 1000; i++) {
    st_event_node_init(&n[i]);
    st_queue_push(&q, &n[i], g_rand_int_range(rand, 0, 50));
  }
  for (int i = 0; i < 300; i++) {
    StEventNode *victim = &n[g_rand_int_range(rand, 0, 1000)];
    if (st_event_queued(victim))
      st_queue_remove(&q, victim);
  }
  g_rand_free(rand);
  StEventNode *prev = NULL;
  StEventNode *node;
  while ((node = st_queue_pop(&q)) != NULL) {
    if (prev != NULL) {
      g_assert_cmpint(prev->time_ns, <=, node->time_ns);
      if (prev->time_ns == node->time_ns)
        g_assert_cmpuint(prev->seq, <, node->seq);
    }
    prev = node;
  }
  st_queue_clear(&q);
}

/* ---- compute ---------------------------------------------------------------- */

static void
test_compute_alone(void)
{
  /* fwd then bwd of batch 10 on an idle GPU: 100 us, then 200 us more. */
  g_autoptr(StSchedule) s = st_test_unit_schedule(1, NULL);
  StProgram *p = st_test_program_for(s, 0, 1);
  uint32_t f = st_test_add(p, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  uint32_t b = st_test_add(p, st_op_comp(0, ST_PASS_BWD, 0, 0, 10));
  g_autoptr(StTimeline) t = st_test_run(s, NULL, FALSE);
  g_assert_cmpint(st_test_end_of(t, 0, f), ==, 100000);
  g_assert_cmpint(st_test_end_of(t, 0, b), ==, 300000);
  g_assert_cmpint(g_array_index(t->ops, StOpRecord, 0).source, ==, ST_SRC_ROOFLINE);
}

/* A run longer than int64 ns hold (292 years) is an error, not a wrapped
 * clock: 1e10 FLOP at 1e-9 FLOP/s is 1e19 s, and 2^40 bytes at 1e-3 B/s
 * 1.1e15 s. The loaders refuse such rates (units.h ranges); the engine must
 * still not convert them into negative timestamps (issue 15: a "3 us" step). */
static void
expect_clock_overflow(StSchedule *s)
{
  StEngineOptions o = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(StTimeline) t = st_simulate(s, &o, NULL, &error);
  g_assert_null(t);
  g_assert_error(error, ST_ENGINE_ERROR, ST_ERROR_FAILED);
  g_assert_nonnull(strstr(error->message, "292 years"));
}

static void
test_clock_overflow(void)
{
  g_autoptr(StSchedule) c = st_test_unit_schedule(1, NULL);
  st_test_add(st_test_program_for(c, 0, 1), st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  for (int d = 0; d < ST_DTYPE_N; d++)
    c->cluster->gpu.flops[d] = 1e-9;
  expect_clock_overflow(c);

  g_autoptr(StSchedule) n = st_test_unit_schedule(2, NULL);
  int world = st_schedule_add_world(n, "world");
  st_test_add(st_test_program_for(n, 0, 1), st_op_send(0, world, 1, 0, INT64_C(1) << 40));
  st_test_add(st_test_program_for(n, 1, 1), st_op_recv(0, world, 0, 0, INT64_C(1) << 40));
  n->cluster->links[ST_LINK_INTRA_NODE].bandwidth = 1e-3;
  expect_clock_overflow(n);
}

/* The budget counts op executions before simulating: 2 ranks (programs of
 * their own, so nothing folds) x 3 ops x 4 steps = 24, at 512 B each 12288
 * B, plus each rank's counters (12 B per op); a progress watcher learns the
 * total first and the count done at the end. */
static void
test_budget(void)
{
  g_autoptr(StSchedule) s = st_test_unit_schedule(2, NULL);
  for (int r = 0; r < 2; r++) {
    StProgram *p = st_test_program_for(s, r, 1);
    for (int i = 0; i < 3; i++)
      st_test_add(p, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  }
  s->steps = 4;
  StEngineOptions o = {0};
  StEngineProgress progress = {0};
  StEngineBudget tight = {24 * 512, &progress};
  g_autoptr(GError) error = NULL;
  g_autoptr(StTimeline) refused = st_simulate_within(s, &o, &tight, NULL, &error);
  g_assert_null(refused);
  g_assert_error(error, ST_ENGINE_ERROR, ST_ERROR_UNSUPPORTED);
  g_assert_nonnull(strstr(error->message, "2 of 2 ranks for 4 steps means 24 op executions"));
  g_assert_nonnull(strstr(error->message, "fewer --steps (4 now)"));
  g_assert_cmpint(atomic_load(&progress.ops_total), ==, 24);
  StEngineBudget enough = {24 * 512 + 2 * 12 * 3, &progress};
  g_autoptr(StTimeline) t = st_simulate_within(s, &o, &enough, NULL, NULL);
  g_assert_nonnull(t);
  g_assert_cmpint(atomic_load(&progress.ops_done), ==, 24);
  g_assert_cmpint(t->ops->len, ==, 24);
}

static void
test_compute_shared(void)
{
  /* Two ranks on one GPU, equal priority, 100 us of work each: they split the
   * GPU and both end at 200 us. */
  int32_t placement[] = {0, 0};
  g_autoptr(StSchedule) s = st_test_unit_schedule(2, placement);
  for (int r = 0; r < 2; r++)
    st_test_add(st_test_program_for(s, r, 1), st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  g_autoptr(StTimeline) t = st_test_run(s, NULL, FALSE);
  g_assert_cmpint(st_test_end_of(t, 0, 0), ==, 200000);
  g_assert_cmpint(st_test_end_of(t, 1, 0), ==, 200000);
}

/* Two ranks on one GPU, 100 us of work each (compute bound: no memory
 * contention), rank 0's stream of higher priority, under `share`. */
static StTimeline *
two_priorities(StSchedule **out, const char *share)
{
  int32_t placement[] = {0, 0};
  StSchedule *s = st_test_unit_schedule(2, placement);
  for (int r = 0; r < 2; r++) {
    StProgram *p = st_test_program_for(s, r, 1);
    g_array_index(p->streams, StStream, 0).priority = r == 0 ? 1 : 0;
    st_test_add(p, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  }
  g_autoptr(GError) error = NULL;
  StEngineOptions o = {NULL, "auto", share, FALSE, NULL};
  StTimeline *t = st_simulate(s, &o, NULL, &error);
  g_assert_no_error(error);
  *out = s;
  return t;
}

static void
test_compute_priority(void)
{
  /* The "priority" model: rank 0 runs alone (ends at 100 us); rank 1
   * waits, then runs alone (ends at 200 us). */
  g_autoptr(StSchedule) s = NULL;
  g_autoptr(StTimeline) t = two_priorities(&s, "priority");
  g_assert_cmpint(st_test_end_of(t, 0, 0), ==, 100000);
  g_assert_cmpint(st_test_end_of(t, 1, 0), ==, 200000);
}

static void
test_compute_interference(void)
{
  /* The "interference" model (the default), leak 0.80 from the default GPU
   * performance file: both fill the GPU, so at equal priority each would
   * run at 1/2; the high one runs at 1 / (1 + 0.8 (2 - 1)) = 1/1.8 and ends
   * at 180 us. The low one gets the rest, 1 - 1/1.8 = 4/9: 80 us of its
   * work by 180 us, the last 20 us alone: it ends at 200 us, as at equal
   * priority (the SMs never idle). */
  g_autoptr(StSchedule) s = NULL;
  g_autoptr(StTimeline) t = two_priorities(&s, NULL);
  g_assert_cmpint(st_test_end_of(t, 0, 0), ==, 180000);
  g_assert_cmpint(st_test_end_of(t, 1, 0), ==, 200000);
}

static void
test_deadlock(void)
{
  /* Both ranks receive before they send: nothing can start. */
  g_autoptr(StSchedule) s = st_test_unit_schedule(2, NULL);
  int world = st_schedule_add_world(s, "world");
  for (int r = 0; r < 2; r++) {
    StProgram *p = st_test_program_for(s, r, 1);
    st_test_add(p, st_op_recv(0, world, 1 - r, 0, 1000));
    st_test_add(p, st_op_send(0, world, 1 - r, 0, 1000));
  }
  g_autoptr(GError) error = NULL;
  StEngineOptions o = {0};
  g_autoptr(StTimeline) t = st_simulate(s, &o, NULL, &error);
  g_assert_null(t);
  g_assert_error(error, ST_ENGINE_ERROR, ST_ERROR_FAILED);
  g_assert_nonnull(strstr(error->message, "deadlock"));
  g_assert_nonnull(strstr(error->message, "recv"));
}

/* ---- steps and memory -------------------------------------------------------------- */

/* One rank's `steps` steps of fwd (100 us) + bwd (200 us), the forward
 * keeping 40000 B of activations until the backward ends, beside 4 MB of
 * persistent weights. Transfer full. */
static StSchedule *
memory_schedule(int steps)
{
  StSchedule *s = st_test_unit_schedule(1, NULL);
  s->steps = steps;
  StProgram *p = st_test_program_for(s, 0, 1);
  uint32_t w = st_program_add_buffer(p, "weights", ST_MEM_PARAMS, 4000000, TRUE);
  uint32_t act = st_program_add_buffer(p, "act", ST_MEM_ACTIVATIONS, 40000, FALSE);
  (void)w;
  uint32_t bwd_ref = st_program_forward_ref(p);
  StOp fwd = st_op_comp(0, ST_PASS_FWD, 0, 0, 10);
  st_program_begin(p, &fwd);
  st_program_alloc(p, act);
  st_program_after_prev_step(p, bwd_ref);
  st_program_commit(p);
  StOp bwd = st_op_comp(0, ST_PASS_BWD, 0, 0, 10);
  st_program_begin(p, &bwd);
  st_program_free_buffer(p, act);
  st_program_resolve(p, bwd_ref, st_program_commit(p));
  return s;
}

static void
test_steps_and_memory(void)
{
  /* 3 steps of fwd (100 us) + bwd (200 us) on one rank: steps end at 300,
   * 600 and 900 us; the step time (steps 2-3) is 300 us. The forward keeps
   * 4000 B/sample x 10 = 40000 B of activations until the backward ends; the
   * weights (4 MB) are persistent. A previous-step dependency of the forward
   * on the backward is met in step 0 and changes nothing after. */
  g_autoptr(StSchedule) s = memory_schedule(3);
  g_autoptr(StTimeline) t = st_test_run(s, NULL, FALSE);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_cmpint(sum->steps, ==, 3);
  g_assert_cmpint(sum->step_end_ns[0], ==, 300000);
  g_assert_cmpint(sum->step_end_ns[2], ==, 900000);
  g_assert_cmpint(sum->step_time_ns, ==, 300000);
  g_assert_cmpint(st_summary_device(sum, 0)->peak_bytes, ==, 4040000);
  g_assert_cmpint(st_summary_device(sum, 0)->peak_by_category[ST_MEM_ACTIVATIONS], ==, 40000);
  g_assert_cmpint(st_summary_device(sum, 0)->peak_by_category[ST_MEM_PARAMS], ==, 4000000);
  g_assert_cmpfloat_with_epsilon(st_summary_device(sum, 0)->busy_fraction, 1.0, 1e-12);
  g_assert_null(sum->oom);
}

/* Record arrays lent to one timeline after another (the planner's threads)
 * give the records a fresh timeline has, whatever ran in them before; a
 * timeline built while another holds them gets arrays of its own, and the
 * holder's records stay as they were. */
static void
assert_same_records(const StTimeline *a, const StTimeline *b)
{
  /* Field by field: the structs' padding is not part of a record. */
  g_assert_cmpuint(a->ops->len, ==, b->ops->len);
  g_assert_cmpuint(a->mem->len, ==, b->mem->len);
  for (guint i = 0; i < a->ops->len; i++) {
    const StOpRecord *x = &g_array_index(a->ops, StOpRecord, i);
    const StOpRecord *y = &g_array_index(b->ops, StOpRecord, i);
    g_assert_true(x->rank == y->rank && x->op == y->op && x->step == y->step &&
                  x->source == y->source && x->algo == y->algo && x->ready_ns == y->ready_ns &&
                  x->start_ns == y->start_ns && x->end_ns == y->end_ns);
  }
  for (guint i = 0; i < a->mem->len; i++) {
    const StMemEvent *x = &g_array_index(a->mem, StMemEvent, i);
    const StMemEvent *y = &g_array_index(b->mem, StMemEvent, i);
    g_assert_true(x->t_ns == y->t_ns && x->delta == y->delta && x->device == y->device &&
                  x->rank == y->rank && x->buffer == y->buffer && x->op == y->op &&
                  x->category == y->category);
  }
}

static void
test_records_reused(void)
{
  g_autoptr(StSchedule) longer = memory_schedule(5);
  g_autoptr(StSchedule) shorter = memory_schedule(2);
  StEngineOptions fresh = {0};
  g_autoptr(StTimeline) want_long = st_simulate(longer, &fresh, NULL, NULL);
  g_autoptr(StTimeline) want_short = st_simulate(shorter, &fresh, NULL, NULL);

  StTimelineArrays *arrays = st_timeline_arrays_new();
  StEngineOptions lent = {.arrays = arrays};
  StTimeline *first = st_simulate(longer, &lent, NULL, NULL);
  g_assert_true(first->lender == arrays);
  assert_same_records(first, want_long);
  StTimeline *beside = st_simulate(shorter, &lent, NULL, NULL);
  g_assert_null(beside->lender);
  assert_same_records(beside, want_short);
  assert_same_records(first, want_long);
  st_timeline_free(beside);
  st_timeline_free(first);

  StTimeline *again = st_simulate(shorter, &lent, NULL, NULL);
  g_assert_true(again->lender == arrays);
  assert_same_records(again, want_short);
  g_autoptr(StSummary) got = st_summary_new(again);
  g_autoptr(StSummary) want = st_summary_new(want_short);
  g_assert_cmpint(st_summary_device(got, 0)->peak_bytes, ==,
                  st_summary_device(want, 0)->peak_bytes);
  g_assert_cmpint(got->step_time_ns, ==, want->step_time_ns);
  st_timeline_free(again);
  st_timeline_arrays_free(arrays);
}

static void
test_out_of_memory(void)
{
  /* A 20 GiB buffer on a 16 GiB GPU: out of memory by 4 GiB, at the forward
   * that allocates it. */
  g_autoptr(StSchedule) s = st_test_unit_schedule(1, NULL);
  StProgram *p = st_test_program_for(s, 0, 1);
  uint32_t big = st_program_add_buffer(p, "big", ST_MEM_ACTIVATIONS, INT64_C(20) << 30, FALSE);
  StOp fwd = st_op_comp(0, ST_PASS_FWD, 0, 0, 10);
  st_program_begin(p, &fwd);
  st_program_alloc(p, big);
  uint32_t f = st_program_commit(p);
  StOp bwd = st_op_comp(0, ST_PASS_BWD, 0, 0, 10);
  st_program_begin(p, &bwd);
  st_program_free_buffer(p, big);
  st_program_commit(p);
  g_autoptr(StTimeline) t = st_test_run(s, NULL, FALSE);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_nonnull(sum->oom);
  g_assert_cmpint(sum->oom->device, ==, 0);
  g_assert_cmpuint(sum->oom->op, ==, f);
  g_assert_cmpint(sum->oom->buffer, ==, (int)big);
  g_assert_cmpint(sum->oom->over_bytes, ==, INT64_C(4) << 30);
}

static void
test_start_offset(void)
{
  /* Rank 1 starts 50 us late on its own GPU: its forward (100 us) ends at
   * 150 us while rank 0's ends at 100 us. The two ranks run the same program
   * but cannot fold together. */
  g_autoptr(StSchedule) s = st_test_unit_schedule(2, NULL);
  StProgram *p = st_program_new("same");
  st_program_add_stream(p, "s0", 0);
  st_test_add(p, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  int prog = st_schedule_add_program(s, p);
  s->ranks[0].program = s->ranks[1].program = prog;
  s->ranks[1].start_ns = 50000;
  g_autoptr(StTimeline) t = st_test_run(s, NULL, FALSE);
  g_assert_cmpint(st_test_end_of(t, 0, 0), ==, 100000);
  g_assert_cmpint(st_test_end_of(t, 1, 0), ==, 150000);
  g_assert_cmpint(t->rank_rep[1], ==, 1);
}

static void
test_second_job(void)
{
  /* A program of job 1 indexes job 1's model: its layer of 4e9 FLOP per
   * sample at batch 10 takes 4e10 / 100 TFLOP/s = 400 us, while the main
   * job's layer 0 takes 100 us. Both share GPU 0 at equal priority: the main
   * job's kernel runs at half speed until it ends at 200 us, then job 1's
   * alone: it ends at 200 + (400 - 100) = 500 us. */
  int32_t placement[] = {0, 0};
  g_autoptr(StSchedule) s = st_test_unit_schedule(2, placement);
  g_autoptr(GError) error = NULL;
  const char *text = "{\"name\": \"bg\", \"input\": [250], \"layers\": [{\"name\": \"b\", "
                     "\"type\": \"custom\", \"fwd_flops\": 4000000000, \"bwd_flops\": 0, "
                     "\"output_bytes\": 1000}]}";
  g_autoptr(cJSON) root = cJSON_Parse(text);
  StModel *bg = st_model_from_json(root, "bg", &error);
  g_assert_no_error(error);
  StSettings settings = {.strategy = "dp", .micro_batch = 10, .accumulation = 1,
                         .global_batch = 10};
  int job = st_schedule_add_job(s, "background", bg, &settings);
  g_assert_cmpint(job, ==, 1);
  st_test_add(st_test_program_for(s, 0, 1), st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  StProgram *p = st_test_program_for(s, 1, 1);
  p->job = job;
  st_test_add(p, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  g_autoptr(StTimeline) t = st_test_run(s, NULL, FALSE);
  g_assert_cmpint(st_test_end_of(t, 0, 0), ==, 200000);
  g_assert_cmpint(st_test_end_of(t, 1, 0), ==, 500000);
}

/* ---- determinism ----------------------------------------------------------------- */

static void
test_deterministic(void)
{
  /* The same schedule twice gives the same records, byte for byte. */
  g_autoptr(StTimeline) a = st_test_collective(8, NULL, ST_COLL_ALL_GATHER, 12345678, "auto");
  g_autoptr(StTimeline) b = st_test_collective(8, NULL, ST_COLL_ALL_GATHER, 12345678, "auto");
  g_assert_cmpuint(a->ops->len, ==, b->ops->len);
  for (guint i = 0; i < a->ops->len; i++) {
    const StOpRecord *x = &g_array_index(a->ops, StOpRecord, i);
    const StOpRecord *y = &g_array_index(b->ops, StOpRecord, i);
    g_assert_cmpint(x->rank, ==, y->rank);
    g_assert_cmpuint(x->op, ==, y->op);
    g_assert_cmpint(x->start_ns, ==, y->start_ns);
    g_assert_cmpint(x->end_ns, ==, y->end_ns);
    g_assert_cmpint(x->ready_ns, ==, y->ready_ns);
  }
  g_assert_cmpuint(a->net->rates->len, ==, b->net->rates->len);
  g_assert_cmpint(memcmp(a->net->rates->data, b->net->rates->data,
                         a->net->rates->len * sizeof(StNetRate)), ==, 0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/engine/queue/tie-order", test_queue_ties);
  g_test_add_func("/engine/queue/order", test_queue_order);
  g_test_add_func("/engine/compute/alone", test_compute_alone);
  g_test_add_func("/engine/clock-overflow", test_clock_overflow);
  g_test_add_func("/engine/budget", test_budget);
  g_test_add_func("/engine/compute/shared-equal", test_compute_shared);
  g_test_add_func("/engine/compute/shared-priority", test_compute_priority);
  g_test_add_func("/engine/compute/shared-interference", test_compute_interference);
  g_test_add_func("/engine/deadlock", test_deadlock);
  g_test_add_func("/engine/steps-and-memory", test_steps_and_memory);
  g_test_add_func("/engine/records-reused", test_records_reused);
  g_test_add_func("/engine/out-of-memory", test_out_of_memory);
  g_test_add_func("/engine/deterministic", test_deterministic);
  g_test_add_func("/engine/start-offset", test_start_offset);
  g_test_add_func("/engine/second-job", test_second_job);
  return g_test_run();
}
