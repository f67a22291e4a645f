/* test_exec_multiplex.c: DeepPool's GPU multiplexing (strategy_multiplex.c)
 * run for real on the host backend, and the executor's admission control
 * (exec/admit.h) on constructed situations.
 *
 * Admission: the controller is driven with made-up measurements and times
 * (no clock, no threads), and each decision follows from the rules of
 * sched/admission.h worked out in the comments.
 *
 * Runs: a foreground job (dp, or burst on a constructed profile; dense or
 * SAMO-sparse) beside a "local" background job, a copy of tiny-mlp on every
 * GPU. How many iterations the background gets depends on timing; the math
 * does not:
 *  - the foreground's weights and losses equal those of the foreground run
 *    alone: its ops, their order and their sums are the same, and the host
 *    kernels are deterministic, so they agree bit for bit (tolerance 0);
 *  - each background copy's weights and per-iteration losses equal those of
 *    its model trained alone (dp on one rank, its samples) for the
 *    iterations the copy completed (at least one: a job begins its first
 *    iteration with the run), bit for bit for the same reason; and that
 *    training, run for 8 iterations, lowers the loss;
 *  - every recorded decision is the one the rules give on the state it
 *    records, and the report's multiplex figures come from the measured
 *    timeline.
 */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "exec/admit.h"
#include "exec/exec.h"
#include "output/output.h"
#include "strategy/strategy.h"
#include "testutil.h"

#define US 1000
#define MS 1e6 /* ns */

/* ---- admission on constructed situations -------------------------------------- */

/* One device with a foreground (device 0) and one without (device 1), one
 * foreground stream, 4 steps; DeepPool's constants, from_step 2. */
static StAdmitCtl *
controller(StAdmissionPolicy *p)
{
  st_admission_policy_init(p);
  p->from_step = 2;
  StAdmitCtl *c = st_admit_ctl_new(2, 1, 4);
  st_admit_ctl_device(c, 0, p, TRUE);
  st_admit_ctl_device(c, 1, p, FALSE);
  return c;
}

static StAdmitDecision
ask(StAdmitCtl *c, int device, int64_t now)
{
  return st_admit_ask(c, device, 7, 3, 0, now, NULL, NULL);
}

static void
test_admission_warmup_and_alone(void)
{
  /* Before the foreground finished its 2 alone steps nothing is admitted,
   * not even where no foreground runs. Then the device without a
   * foreground takes 4 pieces and refuses a fifth until one ends; the
   * device with one takes 1. Once the foreground finished every step, its
   * device counts as without one. */
  StAdmissionPolicy p;
  g_autoptr(StAdmitCtl) c = controller(&p);
  g_assert_cmpint(ask(c, 0, 0), ==, ST_ADMIT_NO_WARMUP);
  g_assert_cmpint(ask(c, 1, 0), ==, ST_ADMIT_NO_WARMUP);
  g_assert_true(st_admit_fg_step_done(c, 0, 0));
  g_assert_cmpint(ask(c, 1, 10), ==, ST_ADMIT_NO_WARMUP);
  g_assert_true(st_admit_fg_step_done(c, 1, 1 * MS));
  for (int k = 0; k < 4; k++)
    g_assert_cmpint(ask(c, 1, 20), ==, ST_ADMIT_YES_ALONE);
  g_assert_cmpint(ask(c, 1, 20), ==, ST_ADMIT_NO_PIECES);
  st_admit_piece_end(c, 1);
  g_assert_cmpint(ask(c, 1, 30), ==, ST_ADMIT_YES_ALONE);
  g_assert_cmpint(ask(c, 0, 30), ==, ST_ADMIT_YES);
  g_assert_cmpint(ask(c, 0, 30), ==, ST_ADMIT_NO_PIECES);
  st_admit_fg_step_done(c, 2, 2 * MS);
  g_assert_false(st_admit_fg_finished(c));
  st_admit_fg_step_done(c, 3, 3 * MS);
  g_assert_true(st_admit_fg_finished(c));
  /* One piece in flight on device 0, now under the alone limit of 4. */
  g_assert_cmpint(ask(c, 0, 40), ==, ST_ADMIT_YES_ALONE);
}

static void
test_admission_slowed(void)
{
  /* A foreground kernel that took 1.2x its alone time sets the average to
   * 1.2 at once (> 1.1) and the budget to 1.1 x 100 - 120 = -10 us (over:
   * refused); each kernel as fast as alone (50 us) then earns 5 us, so the
   * budget is back at 0 after k = 2, and moves the average by 1/8 of the
   * way: 1 + 0.2 (7/8)^k, still above 1.1 after k = 5 (1.1026: slowed) and
   * below after k = 6 (1.0898: admitted). Samples without an alone time
   * change nothing. */
  StAdmissionPolicy p;
  g_autoptr(StAdmitCtl) c = controller(&p);
  st_admit_fg_step_done(c, 0, 0);
  st_admit_fg_step_done(c, 1, 1 * MS);
  st_admit_fg_end(c, 0, ST_OP_COMP, 100 * US, 120 * US, 100 * US);
  g_assert_cmpfloat_with_epsilon(st_admit_slowdown(c, 0), 1.2, 1e-12);
  g_assert_cmpfloat_with_epsilon(st_admit_budget_ns(c, 0), -10 * US, 1e-6);
  g_assert_cmpint(ask(c, 0, 100 * US), ==, ST_ADMIT_NO_BUDGET);
  for (int k = 1; k <= 6; k++) {
    st_admit_fg_end(c, 0, ST_OP_COMP, (100 + k) * US, 50 * US, 50 * US);
    g_assert_cmpfloat_with_epsilon(st_admit_slowdown(c, 0), 1 + 0.2 * pow(7.0 / 8, k), 1e-12);
    g_assert_cmpfloat_with_epsilon(st_admit_budget_ns(c, 0), (-10 + 5 * k) * US, 1e-6);
    g_assert_cmpint(ask(c, 0, (100 + k) * US), ==,
                    k < 2 ? ST_ADMIT_NO_BUDGET : k < 6 ? ST_ADMIT_NO_SLOWED : ST_ADMIT_YES);
    if (k == 6)
      st_admit_piece_end(c, 0);
  }
  st_admit_fg_end(c, 0, ST_OP_COMP, 200 * US, 500 * US, 0);
  g_assert_cmpint(ask(c, 0, 200 * US), ==, ST_ADMIT_YES);
}

static void
test_admission_budget(void)
{
  /* The budget rule (sched/admission.h), fed measured times. Steps end at
   * 1 and 2 ms: the reference step (step 1, the last alone) took 1 ms.
   * Step 2 takes 1.3 ms: the step budget is 1.1 - 1.3 = -0.2 ms: over, so
   * nothing is admitted, not even on a receive pending for 600 us. Step 3
   * takes 1.0 ms: -0.1 ms, still over. Step 4 takes 1.0 ms: 0, admitted,
   * with the smallest piece (1 ns: one op). Kernels as fast as alone (100 us
   * each) then earn 10 us apiece: the next piece is 10 us, and after 60 of
   * them the budget is at its cap, one full piece (500 us). A kernel that
   * took 1.8x (180 us against 100) costs it 70 us: 430 us, the piece shrinks
   * to that; nine more such kernels (-630 us) overdraw it: refused. The next
   * step ending at the reference's 1.1x sets it back to the step budget, 0:
   * one op again. */
  StAdmissionPolicy p;
  st_admission_policy_init(&p);
  p.from_step = 2;
  g_autoptr(StAdmitCtl) c = st_admit_ctl_new(1, 1, 8);
  st_admit_ctl_device(c, 0, &p, TRUE);
  int64_t piece = -1;
  st_admit_fg_step_done(c, 0, 1 * MS);
  st_admit_fg_step_done(c, 1, 2 * MS);
  st_admit_fg_step_done(c, 2, 3.3 * MS);
  g_assert_cmpfloat_with_epsilon(st_admit_budget_ns(c, 0), -0.2 * MS, 1e-3);
  g_assert_cmpint(st_admit_ask(c, 0, 1, 0, 0, 3.3 * MS, NULL, &piece), ==, ST_ADMIT_NO_BUDGET);
  g_assert_cmpint(piece, ==, 0);
  st_admit_fg_begin(c, 0, ST_OP_COMM_RECV, 3.3 * MS);
  g_assert_cmpint(st_admit_ask(c, 0, 1, 0, 0, 3.9 * MS, NULL, &piece), ==, ST_ADMIT_NO_BUDGET);
  st_admit_fg_end(c, 0, ST_OP_COMM_RECV, 4.0 * MS, 0, 0);
  st_admit_fg_step_done(c, 3, 4.3 * MS);
  g_assert_cmpfloat_with_epsilon(st_admit_budget_ns(c, 0), -0.1 * MS, 1e-3);
  g_assert_cmpint(st_admit_ask(c, 0, 1, 0, 0, 4.3 * MS, NULL, &piece), ==, ST_ADMIT_NO_BUDGET);
  st_admit_fg_step_done(c, 4, 5.3 * MS);
  g_assert_cmpfloat_with_epsilon(st_admit_budget_ns(c, 0), 0, 1e-3);
  g_assert_cmpint(st_admit_ask(c, 0, 1, 0, 0, 5.3 * MS, NULL, &piece), ==, ST_ADMIT_YES);
  g_assert_cmpint(piece, ==, 1);
  st_admit_piece_end(c, 0);
  st_admit_fg_end(c, 0, ST_OP_COMP, 5.4 * MS, 100 * US, 100 * US);
  g_assert_cmpint(st_admit_ask(c, 0, 1, 0, 0, 5.4 * MS, NULL, &piece), ==, ST_ADMIT_YES);
  g_assert_cmpint(piece, ==, 10 * US);
  st_admit_piece_end(c, 0);
  for (int k = 0; k < 60; k++)
    st_admit_fg_end(c, 0, ST_OP_COMP, 5.5 * MS, 100 * US, 100 * US);
  g_assert_cmpfloat_with_epsilon(st_admit_budget_ns(c, 0), 500 * US, 1e-3);
  g_assert_cmpint(st_admit_ask(c, 0, 1, 0, 0, 5.5 * MS, NULL, &piece), ==, ST_ADMIT_YES);
  g_assert_cmpint(piece, ==, 500 * US);
  st_admit_piece_end(c, 0);
  st_admit_fg_end(c, 0, ST_OP_COMP, 5.6 * MS, 180 * US, 100 * US);
  g_assert_cmpfloat_with_epsilon(st_admit_budget_ns(c, 0), 430 * US, 1e-3);
  /* The average (1.8) refuses first; the budget is what sizes a piece once
   * the average has recovered. */
  g_assert_cmpint(st_admit_ask(c, 0, 1, 0, 0, 5.6 * MS, NULL, &piece), ==, ST_ADMIT_NO_SLOWED);
  StAdmissionState s = {.has_foreground = TRUE, .fg_steps_done = 5, .fg_slowdown = 1.0,
                        .fg_budget_ns = st_admit_budget_ns(c, 0)};
  g_assert_cmpint(st_admission_piece_ns(&p, &s, st_admission_decide(&p, &s)), ==, 430 * US);
  for (int k = 0; k < 9; k++)
    st_admit_fg_end(c, 0, ST_OP_COMP, 5.7 * MS, 180 * US, 100 * US);
  g_assert_cmpfloat_with_epsilon(st_admit_budget_ns(c, 0), -200 * US, 1e-3);
  s.fg_budget_ns = st_admit_budget_ns(c, 0);
  g_assert_cmpint(st_admission_decide(&p, &s), ==, ST_ADMIT_NO_BUDGET);
  st_admit_fg_step_done(c, 5, 6.4 * MS);
  g_assert_cmpfloat_with_epsilon(st_admit_budget_ns(c, 0), 0, 1e-3);
}

static void
test_admission_allreduce_and_receive(void)
{
  /* While a foreground all-reduce runs, pieces are refused; when it ends
   * they are admitted. A receive pending since t = 1 ms makes the GPU free
   * once it has waited over 500 us: at 1.4 ms the all-reduce started
   * meanwhile still refuses, at 1.6 ms the long receive admits whatever
   * else holds, and the controller says to look again at 1.5 ms + 1 ns. */
  StAdmissionPolicy p;
  g_autoptr(StAdmitCtl) c = controller(&p);
  st_admit_fg_step_done(c, 0, 0);
  st_admit_fg_step_done(c, 1, 1 * MS);
  st_admit_fg_begin(c, 0, ST_OP_COMM_COLL, 0);
  g_assert_cmpint(ask(c, 0, 10 * US), ==, ST_ADMIT_NO_COLLECTIVE);
  st_admit_fg_end(c, 0, ST_OP_COMM_COLL, 20 * US, 20 * US, 0);
  g_assert_cmpint(ask(c, 0, 30 * US), ==, ST_ADMIT_YES);
  st_admit_piece_end(c, 0);
  g_assert_cmpint(st_admit_recheck_ns(c, 0), ==, -1);
  st_admit_fg_begin(c, 0, ST_OP_COMM_RECV, 1000 * US);
  st_admit_fg_begin(c, 0, ST_OP_COMM_COLL, 1100 * US);
  g_assert_cmpint(st_admit_recheck_ns(c, 0), ==, 1500 * US + 1);
  g_assert_cmpint(ask(c, 0, 1400 * US), ==, ST_ADMIT_NO_COLLECTIVE);
  g_assert_cmpint(ask(c, 0, 1600 * US), ==, ST_ADMIT_YES_LONG_RECEIVE);
  st_admit_fg_end(c, 0, ST_OP_COMM_RECV, 1700 * US, 700 * US, 0);
  g_assert_cmpint(st_admit_recheck_ns(c, 0), ==, -1);
}

static void
test_admission_records(void)
{
  /* Every decision is kept with its state; a request that asks again keeps
   * only the decisions that change (one refusal, then the admission). The
   * recorded state gives the recorded decision. */
  StAdmissionPolicy p;
  g_autoptr(StAdmitCtl) c = controller(&p);
  StAdmitDecision last = ST_ADMIT_N;
  for (int k = 0; k < 3; k++)
    g_assert_cmpint(st_admit_ask(c, 0, 5, 9, 2, k * US, &last, NULL), ==, ST_ADMIT_NO_WARMUP);
  st_admit_fg_step_done(c, 0, 0);
  st_admit_fg_step_done(c, 1, 1 * MS);
  g_assert_cmpint(st_admit_ask(c, 0, 5, 9, 2, 5 * US, &last, NULL), ==, ST_ADMIT_YES);
  const GArray *rec = st_admit_records(c);
  g_assert_cmpuint(rec->len, ==, 2);
  const StAdmitRecord *a = &g_array_index(rec, StAdmitRecord, 0);
  const StAdmitRecord *b = &g_array_index(rec, StAdmitRecord, 1);
  g_assert_cmpint(a->decision, ==, ST_ADMIT_NO_WARMUP);
  g_assert_cmpint(a->t_ns, ==, 0);
  g_assert_cmpint(b->decision, ==, ST_ADMIT_YES);
  g_assert_cmpint(b->state.fg_steps_done, ==, 2);
  g_assert_cmpint(b->rank, ==, 5);
  g_assert_cmpint(b->op, ==, 9);
  g_assert_cmpint(b->iteration, ==, 2);
  for (guint i = 0; i < rec->len; i++) {
    const StAdmitRecord *r = &g_array_index(rec, StAdmitRecord, i);
    g_assert_cmpint(st_admission_decide(&p, &r->state), ==, r->decision);
  }
  g_autofree char *csv = st_exec_admissions_csv(rec);
  g_auto(GStrv) lines = g_strsplit(csv, "\n", -1);
  g_assert_cmpuint(g_strv_length(lines), ==, 4); /* header, 2 rows, the empty tail */
  g_assert_true(g_str_has_prefix(lines[1], "0.000,0,5,9,2,warmup,0,"));
  g_assert_true(g_str_has_prefix(lines[2], "5.000,0,5,9,2,yes,1,"));
}

/* ---- runs ------------------------------------------------------------------------ */

/* As test_exec_burst.c: fc1 and fc3 scale with the batch, fc2 does not, so
 * burst runs fc2 on one GPU. */
static StProfile *
profile(const char *device)
{
  StProfile *p = st_profile_new();
  for (int x = 1; x <= 16; x *= 2) {
    st_profile_add_layer(p, device, "fc1", NULL, ST_PASS_FWD, x, 0.5 * MS * x, 0);
    st_profile_add_layer(p, device, "fc1", NULL, ST_PASS_BWD, x, 1.0 * MS * x, 0);
    st_profile_add_layer(p, device, "fc3", NULL, ST_PASS_FWD, x, 0.5 * MS * x, 0);
    st_profile_add_layer(p, device, "fc3", NULL, ST_PASS_BWD, x, 1.0 * MS * x, 0);
    st_profile_add_layer(p, device, "fc2", NULL, ST_PASS_FWD, x, 1.0 * MS, 0);
    st_profile_add_layer(p, device, "fc2", NULL, ST_PASS_BWD, x, 1.0 * MS, 0);
  }
  return p;
}

typedef struct {
  const char *foreground; /* dp or burst */
  int ranks;              /* = GPUs */
  const char *sparsity;   /* NULL: dense */
} Case;

static StSchedule *
build(const StModel *m, const Case *cs, const char *strategy, const char *background, int steps)
{
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) cl = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(cl, 1, cs->ranks, &error));
  g_autoptr(StProfile) prof = profile(cl->gpu.name);
  StOptions o;
  st_options_init(&o);
  o.ranks = cs->ranks;
  o.micro_batch = 2;
  o.global_batch = (int64_t)cs->ranks * 2;
  o.steps = steps;
  o.optimizer = ST_OPTIMIZER_SGD;
  o.precision = ST_PRECISION_FP32;
  if (cs->sparsity != NULL)
    g_assert_true(st_options_set(&o, "sparsity", cs->sparsity, &error));
  if (background != NULL) {
    g_assert_true(st_options_set(&o, "foreground", cs->foreground, &error));
    g_assert_true(st_options_set(&o, "background", background, &error));
  }
  g_assert_no_error(error);
  StSchedule *s = st_strategy_build(st_strategy_find(strategy), m, cl, prof, &o, &error);
  g_assert_no_error(error);
  st_options_clear(&o);
  return s;
}

static double
number(const cJSON *obj, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  g_assert_true(cJSON_IsNumber(v));
  return v->valuedouble;
}

/* The background copy of rank `rank` trained alone: dp on one rank with
 * its samples (replica = its rank) for `steps` iterations. */
static StExecResult
background_alone(const StSchedule *mux, int rank, int steps)
{
  const StProgram *p = st_schedule_program_of(mux, rank);
  const StModel *bm = st_schedule_job_model(mux, p->job);
  const StSettings *bs = st_schedule_job_settings(mux, p->job);
  const Case one = {"dp", 1, NULL};
  g_autoptr(StModel) copy = st_model_copy(bm);
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) cl = st_cluster_load(path, &error);
  g_assert_true(st_cluster_resize(cl, 1, 1, &error));
  StOptions o;
  st_options_init(&o);
  o.ranks = 1;
  o.micro_batch = bs->micro_batch;
  o.global_batch = bs->micro_batch;
  o.steps = steps;
  o.optimizer = bs->optimizer;
  o.precision = bs->precision;
  g_autoptr(StSchedule) s = st_strategy_build(st_strategy_find(one.foreground), copy, cl, NULL,
                                              &o, &error);
  g_assert_no_error(error);
  st_options_clear(&o);
  s->ranks[0].replica = mux->ranks[rank].replica;
  StExecResult r;
  g_autoptr(StTimeline) t = st_test_execute(s, 0.1, 0, &r);
  return r;
}

static void
run_case(const Case *cs)
{
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-mlp3.json");
  g_autoptr(StSchedule) mux = build(m, cs, "multiplex", "tiny-mlp:b8", 3);
  g_assert_cmpint(mux->steps, ==, 6); /* 2 alone, 1 to start, 3 multiplexed */
  g_autoptr(StSchedule) alone = build(m, cs, cs->foreground, NULL, mux->steps);
  /* The foreground keeps its samples and its mask. */
  int R = alone->n_ranks;
  for (int r = 0; r < R; r++)
    g_assert_cmpint(mux->ranks[r].replica, ==, alone->ranks[r].replica);
  g_assert_cmpfloat(mux->settings.sparsity, ==, alone->settings.sparsity);
  StExecResult rm, ra;
  g_autoptr(StTimeline) tm = st_test_execute(mux, 0.1, 0, &rm);
  g_autoptr(StTimeline) ta = st_test_execute(alone, 0.1, 0, &ra);

  double fg = st_test_weights_differ(rm.weights, ra.weights);
  g_assert_cmpuint(rm.loss->len, ==, ra.loss->len);
  double loss = 0;
  for (guint k = 0; k < rm.loss->len; k++)
    loss = MAX(loss, fabs(g_array_index(rm.loss, double, k) - g_array_index(ra.loss, double, k)));
  g_test_message("%s%s%s x %d + tiny-mlp:b8 local: foreground weights differ from alone by %g, "
                 "losses by %g",
                 cs->foreground, cs->sparsity ? " sparsity " : "", cs->sparsity ? cs->sparsity : "",
                 cs->ranks, fg, loss);
  g_assert_cmpfloat(fg, ==, 0);
  g_assert_cmpfloat(loss, ==, 0);

  /* Each background copy trained as its model alone would have. */
  g_assert_nonnull(rm.background);
  g_assert_cmpuint(rm.background->len, ==, (guint)(mux->n_ranks - R));
  for (guint i = 0; i < rm.background->len; i++) {
    const StExecBackground *b = g_ptr_array_index(rm.background, i);
    g_assert_cmpint(b->job, ==, 1);
    g_assert_cmpint(b->iterations, >=, 1);
    g_assert_cmpuint(b->loss->len, ==, (guint)b->iterations);
    StExecResult ref = background_alone(mux, b->rank, b->iterations);
    const StModel *bm = st_schedule_job_model(mux, 1);
    g_autoptr(GPtrArray) mine = g_ptr_array_new();
    for (int l = 0; l < bm->n_layers; l++)
      g_ptr_array_add(mine, g_ptr_array_index(b->weights, l));
    double bw = st_test_weights_differ(mine, ref.weights), bl = 0;
    for (int k = 0; k < b->iterations; k++)
      bl = MAX(bl, fabs(g_array_index(b->loss, double, k) - g_array_index(ref.loss, double, k)));
    g_test_message("  background rank %d on GPU %d: %d iterations, loss %.4f -> %.4f; weights "
                   "differ from alone by %g, losses by %g",
                   b->rank, b->device, b->iterations, g_array_index(b->loss, double, 0),
                   g_array_index(b->loss, double, b->iterations - 1), bw, bl);
    g_assert_cmpfloat(bw, ==, 0);
    g_assert_cmpfloat(bl, ==, 0);
    st_exec_result_clear(&ref);
  }

  /* Every recorded decision is the rules' on its recorded state, and some
   * piece was admitted (every copy completed an iteration of compute). */
  g_assert_nonnull(rm.admissions);
  int admitted = 0;
  for (guint i = 0; i < rm.admissions->len; i++) {
    const StAdmitRecord *r = &g_array_index(rm.admissions, StAdmitRecord, i);
    const StProgram *p = st_schedule_program_of(mux, r->rank);
    const StStream *st = &g_array_index(p->streams, StStream, st_program_op(p, r->op)->stream);
    g_assert_true(st->background);
    g_assert_cmpint(st_admission_decide(&st->admission, &r->state), ==, r->decision);
    admitted += st_admit_ok(r->decision);
  }
  g_assert_cmpint(admitted, >, 0);
  g_assert_nonnull(rm.priorities);

  /* The report's multiplex figures, from the measured timeline: the
   * cluster's throughput is the foreground's plus the background's. */
  g_autoptr(StSummary) sum = st_summary_new(tm);
  g_autoptr(cJSON) report = st_report_to_json(sum);
  const cJSON *mx = cJSON_GetObjectItemCaseSensitive(report, "multiplex");
  g_assert_nonnull(mx);
  g_assert_cmpfloat(number(mx, "foreground_slowdown"), >, 0);
  const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(mx, "background");
  g_assert_cmpint(cJSON_GetArraySize(jobs), ==, 1);
  double bg = number(cJSON_GetArrayItem(jobs, 0), "samples_per_s");
  g_assert_cmpfloat(bg, >=, 0);
  g_assert_cmpfloat_with_epsilon(number(mx, "cluster_samples_per_s"),
                                 number(mx, "foreground_samples_per_s") + bg,
                                 1e-9 * (1 + number(mx, "cluster_samples_per_s")));
  double idle = number(mx, "gpu_idle_fraction");
  g_assert_cmpfloat(idle, >=, 0);
  g_assert_cmpfloat(idle, <=, 1);
  g_test_message("  measured: foreground slowdown %.3f, background %.1f samples/s, GPU idle "
                 "%.3f (alone %.3f); %u decisions, %d admitted",
                 number(mx, "foreground_slowdown"), bg, idle,
                 number(mx, "gpu_idle_fraction_alone"), rm.admissions->len, admitted);
  st_exec_result_clear(&rm);
  st_exec_result_clear(&ra);
}

static void
test_dp_foreground(void)
{
  const Case cs = {"dp", 2, NULL};
  run_case(&cs);
}

static void
test_burst_foreground(void)
{
  const Case cs = {"burst", 4, NULL};
  run_case(&cs);
}

static void
test_sparse_foreground(void)
{
  /* SAMO's mask comes from settings.sparsity, which the foreground keeps. */
  const Case cs = {"dp", 2, "0.5"};
  run_case(&cs);
}

static void
test_background_trains(void)
{
  /* tiny-mlp:b8 alone, 8 iterations at lr 0.1 (the reference each copy is
   * compared with): the mean loss of the last 3 is below that of the first
   * 3. */
  g_autoptr(StModel) m = st_test_model("tests/data/exec/tiny-mlp3.json");
  const Case cs = {"dp", 2, NULL};
  g_autoptr(StSchedule) mux = build(m, &cs, "multiplex", "tiny-mlp:b8", 1);
  StExecResult r = background_alone(mux, mux->n_ranks - 1, 8);
  double first = 0, last = 0;
  for (int k = 0; k < 3; k++) {
    first += g_array_index(r.loss, double, k) / 3;
    last += g_array_index(r.loss, double, 5 + k) / 3;
  }
  g_test_message("tiny-mlp:b8 alone: loss %.4f over the first 3 iterations, %.4f over the last 3",
                 first, last);
  g_assert_cmpfloat(last, <, first);
  st_exec_result_clear(&r);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/exec/multiplex/admission/warmup-and-alone", test_admission_warmup_and_alone);
  g_test_add_func("/exec/multiplex/admission/slowed", test_admission_slowed);
  g_test_add_func("/exec/multiplex/admission/budget", test_admission_budget);
  g_test_add_func("/exec/multiplex/admission/allreduce-and-receive",
                  test_admission_allreduce_and_receive);
  g_test_add_func("/exec/multiplex/admission/records", test_admission_records);
  g_test_add_func("/exec/multiplex/background-trains", test_background_trains);
  g_test_add_func("/exec/multiplex/dp-foreground", test_dp_foreground);
  g_test_add_func("/exec/multiplex/burst-foreground", test_burst_foreground);
  g_test_add_func("/exec/multiplex/sparse-foreground", test_sparse_foreground);
  return g_test_run();
}
