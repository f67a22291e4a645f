/* test_multiplex.c: GPU multiplexing. The admission decisions on constructed
 * situations (sched/admission.h), the engine running background streams on
 * worked examples, and the multiplex strategy (strategy_multiplex.c).
 *
 * Engine examples use the unit cluster and model (tests/data/engine): one
 * layer whose forward takes 100 us and backward 200 us at batch 10; a local
 * copy moves 500 GB/s (half of 1 TB/s), with no latency.
 */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "engine/engine.h"
#include "output/output.h"
#include "sched/admission.h"
#include "strategy/strategy.h"
#include "testutil.h"

#define US 1000

/* ---- decisions ----------------------------------------------------------- */

static StAdmissionState
busy_foreground(void)
{
  return (StAdmissionState){
    .has_foreground = TRUE,
    .fg_steps_done = 5,
    .bg_in_flight = 0,
    .fg_slowdown = 1.0,
  };
}

static void
test_decisions(void)
{
  StAdmissionPolicy p;
  st_admission_policy_init(&p);
  p.from_step = 2;
  /* DeepPool's constants. */
  g_assert_cmpfloat(p.slowdown_limit, ==, 0.10);
  g_assert_cmpint(p.long_recv_ns, ==, 500 * US);
  g_assert_cmpint(p.piece_ns, ==, 500 * US);
  g_assert_cmpint(p.fg_pieces, ==, 2);
  g_assert_cmpint(p.bg_pieces, ==, 1);
  g_assert_cmpint(p.bg_pieces_alone, ==, 4);

  /* A foreground running unslowed, nothing in flight: admitted. */
  StAdmissionState s = busy_foreground();
  g_assert_cmpint(st_admission_decide(&p, &s), ==, ST_ADMIT_YES);
  /* Slowed by 9 %: still admitted; by 20 %: refused. */
  s.fg_slowdown = 1.09;
  g_assert_cmpint(st_admission_decide(&p, &s), ==, ST_ADMIT_YES);
  s.fg_slowdown = 1.20;
  g_assert_cmpint(st_admission_decide(&p, &s), ==, ST_ADMIT_NO_SLOWED);
  /* An all-reduce running: refused, even unslowed. */
  s = busy_foreground();
  s.fg_collective = TRUE;
  g_assert_cmpint(st_admission_decide(&p, &s), ==, ST_ADMIT_NO_COLLECTIVE);
  /* Waiting on a receive for 600 us (over 500): admitted even while slowed
   * and with a collective on another stream; 400 us is not long. */
  s.fg_slowdown = 1.5;
  s.fg_recv_wait_ns = 600 * US;
  g_assert_cmpint(st_admission_decide(&p, &s), ==, ST_ADMIT_YES_LONG_RECEIVE);
  s.fg_recv_wait_ns = 400 * US;
  g_assert_cmpint(st_admission_decide(&p, &s), ==, ST_ADMIT_NO_COLLECTIVE);
  /* One background piece in flight beside a foreground is the most. */
  s = busy_foreground();
  s.bg_in_flight = 1;
  g_assert_cmpint(st_admission_decide(&p, &s), ==, ST_ADMIT_NO_PIECES);
  s.fg_recv_wait_ns = 900 * US;
  g_assert_cmpint(st_admission_decide(&p, &s), ==, ST_ADMIT_NO_PIECES);
  /* Before the foreground's alone steps are done: nothing, even on a GPU
   * the foreground leaves idle. */
  s = busy_foreground();
  s.fg_steps_done = 1;
  g_assert_cmpint(st_admission_decide(&p, &s), ==, ST_ADMIT_NO_WARMUP);
  s.has_foreground = FALSE;
  g_assert_cmpint(st_admission_decide(&p, &s), ==, ST_ADMIT_NO_WARMUP);
  /* No foreground on the device: up to 4 pieces. */
  s = (StAdmissionState){.has_foreground = FALSE, .fg_steps_done = 2, .bg_in_flight = 3};
  g_assert_cmpint(st_admission_decide(&p, &s), ==, ST_ADMIT_YES_ALONE);
  s.bg_in_flight = 4;
  g_assert_cmpint(st_admission_decide(&p, &s), ==, ST_ADMIT_NO_PIECES);
  /* The foreground launches at most 2 pieces ahead. */
  g_assert_true(st_admission_fg_may_launch(&p, 1));
  g_assert_false(st_admission_fg_may_launch(&p, 2));
  g_assert_cmpstr(st_admit_decision_name(ST_ADMIT_YES_LONG_RECEIVE), ==, "long_receive");
}

static void
test_slowdown_average(void)
{
  /* A slower sample is taken at once; faster ones pull the average back by
   * 1/8 of the gap each: after 1.5 then n samples of 1.0, the average is
   * 1 + 0.5 (7/8)^n. */
  StAdmissionPolicy p;
  st_admission_policy_init(&p);
  double avg = st_admission_slowdown(&p, 1.0, 1.5);
  g_assert_cmpfloat(avg, ==, 1.5);
  for (int n = 1; n <= 10; n++) {
    avg = st_admission_slowdown(&p, avg, 1.0);
    g_assert_cmpfloat_with_epsilon(avg, 1.0 + 0.5 * pow(7.0 / 8.0, n), 1e-12);
  }
  g_assert_cmpfloat(st_admission_slowdown(&p, avg, 1.3), ==, 1.3);
}

/* ---- the engine ----------------------------------------------------------- */

/* The engine's unit schedule (testutil.h), costed by the roofline. */
static StSchedule *
unit_schedule(int n_ranks, const int32_t *placement)
{
  return st_test_unit_schedule(n_ranks, placement);
}

static uint32_t
add(StProgram *p, StOp op)
{
  st_program_begin(p, &op);
  return st_program_commit(p);
}

/* A background rank: one stream of forwards of 100 us, pieces of `piece_us`. */
static void
background_rank(StSchedule *s, int rank, int piece_us, int ops)
{
  StProgram *p = st_program_new("background");
  int k = st_program_add_stream(p, "bg", -1);
  StStream *st = &g_array_index(p->streams, StStream, k);
  st->background = TRUE;
  st_admission_policy_init(&st->admission);
  st->admission.piece_ns = piece_us * US;
  for (int i = 0; i < ops; i++)
    add(p, st_op_comp(k, ST_PASS_FWD, 0, -1, 10));
  s->ranks[rank].program = st_schedule_add_program(s, p);
}

/* The admission tests state their closed forms under the "priority" share
 * model (a background kernel gets only what the foreground leaves), which
 * keeps the mechanics visible; test_foreground_slowed runs the default. */
static StTimeline *
simulate_share(const StSchedule *s, const char *share, gboolean no_fold)
{
  g_autoptr(GError) error = NULL;
  g_assert_true(st_schedule_check(s, &error));
  g_assert_no_error(error);
  StEngineOptions o = {NULL, "auto", share, no_fold, NULL};
  StTimeline *t = st_simulate(s, &o, NULL, &error);
  g_assert_no_error(error);
  return t;
}

static StTimeline *
simulate(const StSchedule *s, gboolean no_fold)
{
  return simulate_share(s, "priority", no_fold);
}

/* The records of `rank`, in completion order. */
static GArray *
records_of(const StTimeline *t, int rank)
{
  GArray *out = g_array_new(FALSE, FALSE, sizeof(StOpRecord));
  for (guint i = 0; i < t->ops->len; i++)
    if (g_array_index(t->ops, StOpRecord, i).rank == rank)
      g_array_append_val(out, g_array_index(t->ops, StOpRecord, i));
  return out;
}

static void
test_engine_fills_gap(void)
{
  /* Device 0: the foreground runs fwd [0, 100], a local copy of 1e8 bytes
   * [100, 300] (no kernel), bwd [300, 500] us; one step. The background
   * (priority -1, one piece of 500 us) is admitted at 0 but gets no GPU
   * while a foreground kernel runs: its first forward runs [100, 200], the
   * second [200, 300], the third starts at 300, waits for the foreground's
   * backward, and finishes at 600 after the foreground's last step ended
   * at 500, so nothing more starts. Records of background ops carry the
   * foreground step they ended in (0, 0), then 1 = steps; the step ends at
   * 500 us. */
  int32_t placement[] = {0, 0};
  g_autoptr(StSchedule) s = unit_schedule(2, placement);
  StProgram *p = st_program_new("fg");
  st_program_add_stream(p, "compute", 1);
  add(p, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  add(p, st_op_copy(0, ST_COPY_D2D, 100000000));
  add(p, st_op_comp(0, ST_PASS_BWD, 0, 0, 10));
  s->ranks[0].program = st_schedule_add_program(s, p);
  background_rank(s, 1, 500, 1);
  g_autoptr(StTimeline) t = simulate(s, FALSE);
  g_autoptr(GArray) bg = records_of(t, 1);
  g_assert_cmpuint(bg->len, ==, 3);
  const int64_t end[] = {200 * US, 300 * US, 600 * US};
  const int32_t step[] = {0, 0, 1};
  for (guint i = 0; i < bg->len; i++) {
    g_assert_cmpint(g_array_index(bg, StOpRecord, i).end_ns, ==, end[i]);
    g_assert_cmpint(g_array_index(bg, StOpRecord, i).step, ==, step[i]);
  }
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_cmpint(sum->step_end_ns[0], ==, 500 * US);
  g_assert_cmpint(sum->makespan_ns, ==, 600 * US);
}

static void
test_engine_no_admission_during_allreduce(void)
{
  /* Ranks 0 and 1 (devices 0, 1) run fwd [0, 100], an all-reduce of 20 MB
   * taking T, then bwd. The background on device 0 cuts pieces of 100 us
   * (one forward each): its first, admitted at 0, runs [100, 200] while the
   * all-reduce moves bytes; the next asks at 200, is refused while the
   * all-reduce runs, and starts when it ends, at 100 + T (the foreground's
   * backward starts then too and has the GPU first). */
  int32_t placement[] = {0, 1, 0};
  g_autoptr(StSchedule) s = unit_schedule(3, placement);
  int32_t color[] = {0, 0, -1};
  int comm = st_schedule_add_comm(s, "fg", color);
  StProgram *p = st_program_new("fg");
  st_program_add_stream(p, "compute", 1);
  add(p, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  uint32_t reduce = add(p, st_op_coll(0, ST_COLL_ALL_REDUCE, comm, 20000000));
  add(p, st_op_comp(0, ST_PASS_BWD, 0, 0, 10));
  int prog = st_schedule_add_program(s, p);
  s->ranks[0].program = s->ranks[1].program = prog;
  background_rank(s, 2, 100, 1);
  g_autoptr(StTimeline) t = simulate(s, TRUE);
  int64_t reduce_end = -1;
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    if (r->rank == 0 && r->op == reduce)
      reduce_end = r->end_ns;
  }
  g_assert_cmpint(reduce_end, >, 300 * US); /* T > 200 us: the test needs a long one */
  g_autoptr(GArray) bg = records_of(t, 2);
  g_assert_cmpuint(bg->len, >=, 2);
  g_assert_cmpint(g_array_index(bg, StOpRecord, 0).start_ns, ==, 0);
  g_assert_cmpint(g_array_index(bg, StOpRecord, 0).end_ns, ==, 200 * US);
  g_assert_cmpint(g_array_index(bg, StOpRecord, 1).start_ns, ==, reduce_end);
}

static void
test_engine_long_receive(void)
{
  /* Device 0: the foreground runs two forwards at once on two streams (they
   * share the GPU: both end at 200 us, slowed 2x), then waits on a receive
   * from rank 1, which computes for 1000 us on device 1 first. The
   * background (pieces of 100 us) is admitted at 0 and runs [200, 300]. The
   * two forwards left the budget at 2 (1.1 x 100 - 200) = -180 us: the
   * foreground is owed time, so even the receive that turns long at 700 us
   * admits nothing (the op a piece starts could outlast the wait), and the
   * foreground's last forward (+10 us) leaves it owed: the background gets
   * no second piece before the foreground ends. With a budget in hand, the
   * receive admits: see /multiplex/engine/long-receive-budget. */
  int32_t placement[] = {0, 1, 0};
  g_autoptr(StSchedule) s = unit_schedule(3, placement);
  int comm = st_schedule_add_world(s, "world");
  StProgram *p0 = st_program_new("fg0");
  st_program_add_stream(p0, "a", 1);
  st_program_add_stream(p0, "b", 1);
  add(p0, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  add(p0, st_op_comp(1, ST_PASS_FWD, 0, 0, 10));
  add(p0, st_op_recv(0, comm, 1, 0, 1));
  add(p0, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  s->ranks[0].program = st_schedule_add_program(s, p0);
  StProgram *p1 = st_program_new("fg1");
  st_program_add_stream(p1, "a", 1);
  for (int i = 0; i < 10; i++)
    add(p1, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  add(p1, st_op_send(0, comm, 0, 0, 1));
  s->ranks[1].program = st_schedule_add_program(s, p1);
  background_rank(s, 2, 100, 1);
  g_autoptr(StTimeline) t = simulate(s, TRUE);
  g_autoptr(GArray) bg = records_of(t, 2);
  g_assert_cmpuint(bg->len, ==, 1);
  g_assert_cmpint(g_array_index(bg, StOpRecord, 0).end_ns, ==, 300 * US);
}

static void
test_engine_long_receive_budget(void)
{
  /* As above, with a limit of 90 % and a budget in hand. The foreground
   * first runs one forward alone, [0, 100], earning 1.9 x 100 - 100 = 90 us;
   * then the pair at once, [100, 300], slowed 2x: the average goes to
   * 2.0 > 1.9 (refused), the budget to 90 + 2 (190 - 200) = 70 us. The
   * background's first piece, admitted at 0, gets the GPU only when the
   * foreground leaves it ("priority" sharing): [0, 400]. The receive posted
   * at 300 us turns long at 800 us: over the average but within the budget,
   * the next piece starts at 800 us + 1 ns, sized 70 us: one forward, to
   * 900 us + 1 ns. */
  int32_t placement[] = {0, 1, 0};
  g_autoptr(StSchedule) s = unit_schedule(3, placement);
  int comm = st_schedule_add_world(s, "world");
  StProgram *p0 = st_program_new("fg0");
  st_program_add_stream(p0, "a", 1);
  st_program_add_stream(p0, "b", 1);
  add(p0, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  add(p0, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  StOp second = st_op_comp(1, ST_PASS_FWD, 0, 0, 10);
  st_program_begin(p0, &second);
  st_program_after(p0, 0);
  st_program_commit(p0);
  add(p0, st_op_recv(0, comm, 1, 0, 1));
  add(p0, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  s->ranks[0].program = st_schedule_add_program(s, p0);
  StProgram *p1 = st_program_new("fg1");
  st_program_add_stream(p1, "a", 1);
  for (int i = 0; i < 12; i++)
    add(p1, st_op_comp(0, ST_PASS_FWD, 0, 0, 10));
  add(p1, st_op_send(0, comm, 0, 0, 1));
  s->ranks[1].program = st_schedule_add_program(s, p1);
  background_rank(s, 2, 100, 1);
  StStream *bg_stream =
    &g_array_index(((StProgram *)g_ptr_array_index(s->programs, s->ranks[2].program))->streams,
                   StStream, 0);
  bg_stream->admission.slowdown_limit = 0.9;
  g_autoptr(StTimeline) t = simulate(s, TRUE);
  g_autoptr(GArray) bg = records_of(t, 2);
  g_assert_cmpuint(bg->len, >=, 2);
  g_assert_cmpint(g_array_index(bg, StOpRecord, 0).end_ns, ==, 400 * US);
  g_assert_cmpint(g_array_index(bg, StOpRecord, 1).start_ns, ==, 800 * US + 1);
  g_assert_cmpint(g_array_index(bg, StOpRecord, 1).end_ns, ==, 900 * US + 1);
}

static void
test_engine_background_alone(void)
{
  /* Without any foreground, background streams run their steps like any
   * other stream: 3 steps of one 100 us forward, records of steps 0, 1, 2. */
  g_autoptr(StSchedule) s = unit_schedule(1, NULL);
  s->steps = 3;
  background_rank(s, 0, 500, 1);
  g_autoptr(StTimeline) t = simulate(s, FALSE);
  g_assert_cmpuint(t->ops->len, ==, 3);
  for (int k = 0; k < 3; k++) {
    g_assert_cmpint(g_array_index(t->ops, StOpRecord, k).step, ==, k);
    g_assert_cmpint(g_array_index(t->ops, StOpRecord, k).end_ns, ==, (k + 1) * 100 * US);
  }
}

/* ---- the strategy ----------------------------------------------------------- */

typedef struct {
  const char *model;
  int nodes, gpus, ranks, micro_batch, accumulation;
  const char *foreground;
  const char *background;
} Case;

static const Case CASES[] = {
  {"mlp", 1, 1, 0, 16, 1, "burst", "mlp:b8"},
  {"mlp", 1, 4, 0, 16, 3, "dp", "mlp:b4:dp"},
  {"mlp", 1, 4, 6, 8, 1, "burst", "mlp:b8,mlp:b2:dp"},
  {"mlp", 2, 0, 0, 4, 2, "zero", "mlp:b4"},
  {"resnet18", 1, 8, 0, 8, 1, "burst", "resnet18:b8"},
  {"gpt2-124m", 1, 2, 4, 1, 2, "burst", "mlp:b16"},
};

static void
set_options(StOptions *o, const Case *cs, const StCluster *c, int steps)
{
  st_options_init(o);
  o->ranks = cs->ranks;
  o->micro_batch = cs->micro_batch;
  o->global_batch =
    (int64_t)(cs->ranks ? cs->ranks : c->gpus) * cs->micro_batch * cs->accumulation;
  o->steps = steps;
  g_autoptr(GError) error = NULL;
  g_assert_true(st_options_set(o, "foreground", cs->foreground, &error));
  g_assert_true(st_options_set(o, "background", cs->background, &error));
}

static void
test_conformance(void)
{
  /* The conformance cases of test_strategy, now with background jobs (local
   * and dp, one or two of them): the schedule checks (st_strategy_build),
   * simulates, and folding changes nothing but the work done. */
  for (gsize k = 0; k < G_N_ELEMENTS(CASES); k++) {
    const Case *cs = &CASES[k];
    g_test_message("case %zu: %s + %s on %s", k, cs->foreground, cs->background, cs->model);
    g_autoptr(StModel) m = st_test_model_named(cs->model);
    g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", cs->nodes, cs->gpus);
    StOptions o;
    set_options(&o, cs, c, 2);
    g_autoptr(StSchedule) s = st_test_build("multiplex", m, c, &o);
    g_assert_cmpint(s->jobs->len, ==, strchr(cs->background, ',') ? 2 : 1);
    g_autoptr(StTimeline) tf = simulate(s, FALSE);
    g_autoptr(StTimeline) tu = simulate(s, TRUE);
    g_autoptr(StSummary) f = st_summary_new(tf);
    g_autoptr(StSummary) u = st_summary_new(tu);
    g_assert_cmpint(f->step_time_ns, >, 0);
    g_assert_cmpint(f->step_time_ns, ==, u->step_time_ns);
    g_assert_cmpint(f->makespan_ns, ==, u->makespan_ns);
    for (int d = 0; d < s->n_devices; d++)
      g_assert_cmpint(st_summary_device(f, d)->peak_bytes, ==, st_summary_device(u, d)->peak_bytes);
    g_assert_cmpfloat_with_epsilon(f->comm_bytes_total, u->comm_bytes_total,
                                   1e-6 * (1 + u->comm_bytes_total));
    st_options_clear(&o);
  }
}

static double
number(const cJSON *obj, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  g_assert_true(cJSON_IsNumber(v));
  return v->valuedouble;
}

static void
test_foreground_untouched(void)
{
  /* Under the priority share model a background kernel only gets what the
   * foreground leaves, and its records are labelled with the foreground
   * step they end in: the foreground's step ends are those of the same
   * foreground run alone, to the nanosecond, and the report's slowdown is
   * 1. Burst on ResNet-18 leaves GPUs idle during its narrow layers: the
   * background gets work done there, so the cluster's throughput is the
   * foreground's plus a positive background rate, and less GPU time idles
   * than in the alone step. */
  g_autoptr(StModel) m = st_test_model_named("resnet18");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  const Case cs = {"resnet18", 1, 8, 0, 8, 1, "burst", "resnet18:b8"};
  StOptions o;
  set_options(&o, &cs, c, 4);
  g_autoptr(StSchedule) mux = st_test_build("multiplex", m, c, &o);
  o.steps = mux->steps; /* the alone and start steps come first */
  g_autoptr(StSchedule) alone = st_test_build("burst", m, c, &o);
  g_autoptr(StTimeline) tm = simulate(mux, FALSE);
  g_autoptr(StTimeline) ta = simulate(alone, FALSE);
  g_autoptr(StSummary) sm = st_summary_new(tm);
  g_autoptr(StSummary) sa = st_summary_new(ta);
  g_assert_cmpint(sm->steps, ==, 7);
  for (int k = 0; k < sm->steps; k++)
    g_assert_cmpint(sm->step_end_ns[k], ==, sa->step_end_ns[k]);
  g_autoptr(cJSON) report = st_report_to_json(sm);
  const cJSON *mx = cJSON_GetObjectItemCaseSensitive(report, "multiplex");
  g_assert_nonnull(mx);
  g_assert_cmpfloat_with_epsilon(number(mx, "foreground_slowdown"), 1.0, 1e-9);
  const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(mx, "background");
  g_assert_cmpint(cJSON_GetArraySize(jobs), ==, 1);
  double bg = number(cJSON_GetArrayItem(jobs, 0), "samples_per_s");
  g_assert_cmpfloat(bg, >, 0);
  g_assert_cmpfloat_with_epsilon(number(mx, "cluster_samples_per_s"),
                                 number(mx, "foreground_samples_per_s") + bg, 1e-6);
  g_assert_cmpfloat(number(mx, "gpu_idle_fraction"), <, number(mx, "gpu_idle_fraction_alone"));
  st_options_clear(&o);
}

static void
test_foreground_slowed(void)
{
  /* The same run under the default "interference" model: a background
   * kernel beside a foreground one still takes 1 - 1/(1 + leak) of the
   * SMs when both fill the GPU, so the foreground is slowed (the report's
   * slowdown is above 1), its steps end no earlier than alone, and it gets
   * fewer samples through than under "priority"; the background still gets
   * work done. */
  g_autoptr(StModel) m = st_test_model_named("resnet18");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 8);
  const Case cs = {"resnet18", 1, 8, 0, 8, 1, "burst", "resnet18:b8"};
  StOptions o;
  set_options(&o, &cs, c, 4);
  g_autoptr(StSchedule) mux = st_test_build("multiplex", m, c, &o);
  o.steps = mux->steps;
  g_autoptr(StSchedule) alone = st_test_build("burst", m, c, &o);
  g_autoptr(StTimeline) ti = simulate_share(mux, NULL, FALSE);
  g_autoptr(StTimeline) tp = simulate_share(mux, "priority", FALSE);
  g_autoptr(StTimeline) ta = simulate(alone, FALSE);
  g_autoptr(StSummary) si = st_summary_new(ti);
  g_autoptr(StSummary) sp = st_summary_new(tp);
  g_autoptr(StSummary) sa = st_summary_new(ta);
  for (int k = 0; k < si->steps; k++)
    g_assert_cmpint(si->step_end_ns[k], >=, sa->step_end_ns[k]);
  g_autoptr(cJSON) ri = st_report_to_json(si);
  g_autoptr(cJSON) rp = st_report_to_json(sp);
  const cJSON *mi = cJSON_GetObjectItemCaseSensitive(ri, "multiplex");
  const cJSON *mp = cJSON_GetObjectItemCaseSensitive(rp, "multiplex");
  g_assert_cmpfloat(number(mi, "foreground_slowdown"), >, 1.0 + 1e-6);
  double bg_i = number(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(mi, "background"), 0),
                       "samples_per_s");
  double bg_p = number(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(mp, "background"), 0),
                       "samples_per_s");
  g_assert_cmpfloat(bg_p, >, 0);
  g_assert_cmpfloat(bg_i, >, 0);
  g_assert_cmpfloat(number(mi, "foreground_samples_per_s"), <,
                    number(mp, "foreground_samples_per_s"));
  st_options_clear(&o);
}

static void
test_json_round_trip(void)
{
  /* A background stream and its admission policy survive the schedule's
   * JSON (what `stagger schedule` writes and the executor reads). */
  g_autoptr(StModel) m = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  const Case cs = {"mlp", 1, 2, 0, 4, 1, "dp", "mlp:b2"};
  StOptions o;
  set_options(&o, &cs, c, 1);
  g_autoptr(GError) error = NULL;
  g_assert_true(st_options_set(&o, "mux-piece-us", "250", &error));
  g_assert_true(st_options_set(&o, "mux-slowdown", "5", &error));
  g_autoptr(StSchedule) s = st_test_build("multiplex", m, c, &o);
  g_autoptr(cJSON) json = st_schedule_to_json(s);
  g_autoptr(StSchedule) back = st_schedule_from_json(json, "round-trip", &error);
  g_assert_no_error(error);
  const StProgram *p = st_schedule_program_of(back, back->n_ranks - 1);
  g_assert_cmpint(p->job, ==, 1);
  const StStream *st = &g_array_index(p->streams, StStream, 0);
  g_assert_true(st->background);
  g_assert_cmpint(st->priority, ==, -1);
  g_assert_cmpint(st->admission.piece_ns, ==, 250 * US);
  g_assert_cmpfloat_with_epsilon(st->admission.slowdown_limit, 0.05, 1e-12);
  g_assert_cmpint(st->admission.from_step, ==, 2);
  const StStream *fg = &g_array_index(st_schedule_program_of(back, 0)->streams, StStream, 0);
  g_assert_false(fg->background);
  g_assert_cmpint(fg->priority, ==, 1);
  st_options_clear(&o);
}

static void
test_bad_background(void)
{
  /* Errors name the option, the item and what is wrong; an unknown model
   * says where it was looked for. */
  g_autoptr(StModel) m = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  const char *bad[] = {"mlp", "mlp:16", "mlp:b0", "mlp:b4:zero", "no-such-model:b4"};
  const char *why[] = {"not MODEL:bBATCH", "the batch", "the batch", "local or dp", "tried"};
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    StOptions o;
    st_options_init(&o);
    g_autoptr(GError) error = NULL;
    g_assert_true(st_options_set(&o, "background", bad[i], &error));
    g_autoptr(StSchedule) s =
      st_strategy_build(st_strategy_find("multiplex"), m, c, NULL, &o, &error);
    g_assert_null(s);
    g_assert_error(error, ST_STRATEGY_ERROR, ST_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, "--background"));
    g_assert_nonnull(strstr(error->message, why[i]));
    st_options_clear(&o);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/multiplex/admission/decisions", test_decisions);
  g_test_add_func("/multiplex/admission/slowdown-average", test_slowdown_average);
  g_test_add_func("/multiplex/engine/fills-gap", test_engine_fills_gap);
  g_test_add_func("/multiplex/engine/all-reduce", test_engine_no_admission_during_allreduce);
  g_test_add_func("/multiplex/engine/long-receive", test_engine_long_receive);
  g_test_add_func("/multiplex/engine/long-receive-budget", test_engine_long_receive_budget);
  g_test_add_func("/multiplex/engine/no-foreground", test_engine_background_alone);
  g_test_add_func("/multiplex/strategy/conformance", test_conformance);
  g_test_add_func("/multiplex/strategy/foreground-untouched", test_foreground_untouched);
  g_test_add_func("/multiplex/strategy/foreground-slowed", test_foreground_slowed);
  g_test_add_func("/multiplex/strategy/json-round-trip", test_json_round_trip);
  g_test_add_func("/multiplex/strategy/bad-background", test_bad_background);
  return g_test_run();
}
