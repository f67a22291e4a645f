/* test_steady.c: the steady-state rule (output/steady.h) on made-up phase
 * sequences whose answer is known, and --steps auto in the engine on
 * schedules built to settle at once, slowly, or never; then every strategy:
 * the steady step of an auto run is what a long run settles to, and the
 * auto run is exactly the start of the long one. */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "engine/engine.h"
#include "output/output.h"
#include "output/steady.h"
#include "testutil.h"

/* ---- the rule on phase sequences ------------------------------------------------ */

#define MS INT64_C(1000000)

static StSteadyRule
rule_of(int first_step, int horizon)
{
  return (StSteadyRule){1e-4, 100, 4, horizon, first_step};
}

/* Feeds steps of `step_ns` with one lane whose phase (its end before the
 * step's end, in ns) is phase(k); returns the step it converged at, or -1
 * within `steps`. */
typedef int64_t (*PhaseFn)(int k);

static int
feed(const StSteadyRule *rule, PhaseFn phase, int64_t step_ns, int steps, StSteady *out)
{
  g_autoptr(StSteadyDetector) d = st_steady_detector_new(1, rule, FALSE);
  int64_t end = 0;
  for (int k = 0; k < steps; k++) {
    end += step_ns;
    int64_t first = end - step_ns / 2, last = end - phase(k);
    if (st_steady_detector_add(d, end, &first, &last, FALSE, out))
      return k;
  }
  return -1;
}

static int64_t
phase_settles(int k)
{
  return k == 0 ? 5 * MS : k == 1 ? 3 * MS : 1 * MS;
}

static int64_t
phase_alternates(int k)
{
  return k % 2 ? 1 * MS : 2 * MS;
}

static void
test_rule_repeats(void)
{
  /* A phase that changes twice, then holds from step 2 on (0-based): step 3
   * is the first to repeat the one before, steady at 3 with period 1. One
   * that alternates between two values never repeats step to
   * step, but a period of 2 steps repeats from steps 2-3 on (step 1 is the
   * first of a whole period, step 3 repeats it). */
  StSteadyRule rule = rule_of(0, 100);
  StSteady st;
  g_assert_cmpint(feed(&rule, phase_settles, 10 * MS, 50, &st), ==, 3);
  g_assert_true(st.converged);
  g_assert_false(st.exact);
  g_assert_cmpint(st.period, ==, 1);
  g_assert_cmpint(st.first, ==, 3);
  g_assert_cmpint(st.last, ==, 3);
  g_assert_cmpint(st.drift_ns, ==, 0);

  g_assert_cmpint(feed(&rule, phase_alternates, 10 * MS, 50, &st), ==, 3);
  g_assert_cmpint(st.period, ==, 2);
  g_assert_cmpint(st.first, ==, 2);
  g_assert_cmpint(st.last, ==, 3);

  /* A declared warm-up: no comparison uses a step before it, so a state
   * that repeats from the start is steady only at first_step + 1. */
  StSteadyRule late = rule_of(5, 100);
  g_assert_cmpint(feed(&late, phase_alternates, 10 * MS, 50, &st), ==, 8);
  g_assert_cmpint(st.first, ==, 7);
}

/* phase(k) = 1 s + 1 s x 0.99^k: geometric, slow (in seconds, so that
 * whole ns do not blur the ratio of successive changes). */
static int64_t
phase_geometric(int k)
{
  return (int64_t)llround(1e9 + 1e9 * pow(0.99, k));
}

/* The same moving by 2 ns per step, for ever (under the tolerance each step). */
static int64_t
phase_drifts(int k)
{
  return 1 * MS + 2 * (int64_t)k;
}

/* Pseudo-random within +-0.5 ms, never repeating. */
static int64_t
phase_chaotic(int k)
{
  guint32 x = (guint32)k * 2654435761u;
  x ^= x >> 15;
  return 1 * MS + (int64_t)(x % 1000000) - 500000;
}

/* Alternates about 1 ms by 0.5 ms x 0.98^k: a damped swing whose mean
 * holds (cyclic DP's coupled workers settle so). */
static int64_t
phase_damped(int k)
{
  return (int64_t)llround(1e6 + (k % 2 ? 0.5e6 : -0.5e6) * pow(0.98, k));
}

/* Feeds steps of 10 s + 1 s x 0.99^k, one lane whose phase holds: the
 * step itself still approaching its limit. */
static int
feed_step_geometric(const StSteadyRule *rule, int steps, StSteady *out)
{
  g_autoptr(StSteadyDetector) d = st_steady_detector_new(1, rule, FALSE);
  int64_t end = 0;
  for (int k = 0; k < steps; k++) {
    end += (int64_t)llround(1e10 + 1e9 * pow(0.99, k));
    int64_t first = end - 5000 * MS, last = end - 1 * MS;
    if (st_steady_detector_add(d, end, &first, &last, FALSE, out))
      return k;
  }
  return -1;
}

static void
test_rule_slow_and_never(void)
{
  /* A step that approaches its limit geometrically (1 s x 0.99^k still to
   * come): each change is under the tolerance (1e-4 x a 10 s step = 1 ms)
   * from k = 230 on, when 0.1 s is still to come, 100 times the tolerance.
   * The rule extrapolates the shrinking steps (ratio 0.99: 99 more steps'
   * worth) and waits until what is left is within the tolerance, 1 s x
   * 0.99^k <= 1 ms: k >= 688. Rule 3 waits as long: the mean step moves. */
  StSteadyRule rule = rule_of(0, 100);
  StSteady st;
  int k = feed_step_geometric(&rule, 2000, &st);
  g_assert_cmpint(k, >=, 687);
  g_assert_cmpint(k, <=, 690);
  g_assert_false(st.settling);
  g_assert_cmpfloat(1e9 * pow(0.99, k), <=, 1.01e6);

  /* The same approach in a lane's phase under a step that holds: rule 2
   * would wait as long (k >= 688), rule 3 takes the step once the phase
   * has shrunk its changes for 8 steps running and has less than 5 % of
   * the step still to move (1 s x 0.99^k x 0.99 / 0.01 x 0.01 <= 0.5 s:
   * k >= 69); the step it reports is the one that holds. */
  k = feed(&rule, phase_geometric, 10000 * MS, 2000, &st);
  g_assert_cmpint(k, >=, 68);
  g_assert_cmpint(k, <=, 70);
  g_assert_true(st.converged);
  g_assert_true(st.settling);
  g_assert_cmpfloat(1e9 * pow(0.99, k) * 0.99, <=, 0.05 * 1e10);

  /* A damped swing about a mean that holds: no period of one step
   * repeats (the swing is a millisecond); over two steps the change is
   * 0.5 ms x 0.98^(k-2) x 0.0396, under 10 tolerances (10 us, a 10 ms
   * step) from k = 36 on, shrinking 0.96 a period. Rule 2 would wait for
   * it to fall under 1 us with what is left: k >= 300. */
  k = feed(&rule, phase_damped, 10 * MS, 2000, &st);
  g_assert_cmpint(k, >=, 36);
  g_assert_cmpint(k, <=, 40);
  g_assert_cmpint(st.period, ==, 2);
  g_assert_true(st.settling);

  /* A drift of 2 ns per step is within the tolerance each step, but over
   * the horizon of 100 steps 200 ns exceeds the floor (100 ns, the
   * tolerance of a 10 us step): never steady. With a 10 ms step (1 us of
   * tolerance) the same drift is steady. */
  g_assert_cmpint(feed(&rule, phase_drifts, 10000, 5000, &st), ==, -1);
  g_assert_false(st.converged);
  g_assert_cmpint(st.drift_ns, ==, 2);
  g_assert_cmpint(feed(&rule, phase_drifts, 10 * MS, 5000, &st), ==, 1);

  /* Chaotic phases never repeat at any period up to the maximum. */
  g_assert_cmpint(feed(&rule, phase_chaotic, 10 * MS, 5000, &st), ==, -1);
  g_assert_cmpint(st.drift_ns, >, 1000);
}

static void
test_rule_idle(void)
{
  /* Idle boundaries: the run from an idle boundary is a copy of the run
   * from the one before, so two in a row make the step steady at once,
   * whatever the phases say; the start counts as one when declared. */
  StSteadyRule rule = rule_of(0, 100);
  StSteady st;
  int64_t first = 0, last = 5;
  g_autoptr(StSteadyDetector) d = st_steady_detector_new(1, &rule, TRUE);
  g_assert_true(st_steady_detector_add(d, 10, &first, &last, TRUE, &st));
  g_assert_true(st.exact);
  g_assert_cmpint(st.first, ==, 0);

  /* Not idle at the start: steady at the second idle boundary. */
  g_autoptr(StSteadyDetector) e = st_steady_detector_new(1, &rule, FALSE);
  int64_t lasts[] = {5, 17, 29};
  int64_t ends[] = {10, 30, 50};
  g_assert_false(st_steady_detector_add(e, ends[0], &first, &lasts[0], TRUE, &st));
  g_assert_true(st_steady_detector_add(e, ends[1], &first, &lasts[1], TRUE, &st));
  g_assert_cmpint(st.first, ==, 1);
  g_assert_cmpint(st.period, ==, 1);

  /* The bound the planner uses is never above the steady step a period at
   * least that long can report, its phases within 10 tolerances under rule
   * 3: (c - 10 floor) / (1 + 10 tolerance). */
  g_assert_cmpint(st_steady_step_bound(100 * MS), ==,
                  (int64_t)floor((100.0 * MS - 1000) / (1 + 1e-3)));
  g_assert_cmpint(st_steady_step_bound(50), ==, 0);
  g_assert_cmpint(st_steady_step_bound(1000), ==, 0);
}

/* ---- the engine ------------------------------------------------------------- */

/* Two ranks on GPUs 0 and 1 of the unit cluster, each a compute stream
 * of one elementwise kernel per step (`bytes0`, `bytes1`: bandwidth bound);
 * with `coupled`, rank 0 sends a small message after its kernel (on a
 * stream of its own, so its kernels never wait) and rank 1's kernel waits
 * to receive it. Rank 1 starts `late_ns` after rank 0. */
static StSchedule *
two_ranks(int64_t bytes0, int64_t bytes1, gboolean coupled, int64_t late_ns, int steps,
          int scale)
{
  StModel *model = st_test_model("tests/data/engine/model.json");
  StCluster *cluster = st_test_cluster("tests/data/engine/cluster.json", 0, 0);
  StSchedule *s = st_schedule_new(model, cluster, 2, NULL);
  s->settings.global_batch = s->settings.micro_batch = 10;
  s->settings.accumulation = 1;
  s->settings.compute_model = g_strdup("roofline"); /* kernels of bytes / 1 TB/s */
  s->steps = steps;
  s->warmup_scale = scale;
  int world = st_schedule_add_world(s, "world");
  for (int r = 0; r < 2; r++) {
    StProgram *p = st_program_new(r ? "one" : "zero");
    int compute = st_program_add_stream(p, "compute", 0);
    if (coupled && r == 1) {
      StOp recv = st_op_recv(compute, world, 0, 0, 1024);
      st_program_begin(p, &recv);
      st_program_commit(p);
    }
    int64_t bytes = r ? bytes1 : bytes0;
    StOp k = st_op_elementwise(compute, ST_PASS_OPTIM, -1, bytes / 4, bytes);
    st_program_begin(p, &k);
    uint32_t kernel = st_program_commit(p);
    if (coupled && r == 0) {
      StOp send = st_op_send(st_program_add_stream(p, "comm", 0), world, 1, 0, 1024);
      st_program_begin(p, &send);
      st_program_after(p, kernel);
      st_program_commit(p);
    }
    s->ranks[r].program = st_schedule_add_program(s, p);
  }
  s->ranks[1].start_ns = late_ns;
  g_autoptr(GError) error = NULL;
  g_assert_true(st_schedule_check(s, &error));
  g_assert_no_error(error);
  return s;
}

static StTimeline *
run(const StSchedule *s)
{
  g_autoptr(GError) error = NULL;
  StEngineOptions o = {NULL, "ring", NULL, TRUE, NULL};
  StTimeline *t = st_simulate(s, &o, NULL, &error);
  g_assert_no_error(error);
  return t;
}

/* Each rank's time from the end of its kernel of step 1 to that of step 2. */
static void
periods(const StSchedule *s, int64_t *t0, int64_t *t1)
{
  g_autoptr(StTimeline) t = run(s);
  int64_t end[2][3] = {{0}};
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    const StOp *op = st_program_op(st_schedule_program_of(s, r->rank), r->op);
    if (r->step < 3 && op->kind == ST_OP_COMP)
      end[r->rank][r->step] = MAX(end[r->rank][r->step], r->end_ns);
  }
  *t0 = end[0][2] - end[0][1];
  *t1 = end[1][2] - end[1][1];
}

static void
test_engine_never(void)
{
  /* Two ranks that never wait for each other, one 1% slower: every step
   * takes the slow rank's time, but the fast rank's phase against the step
   * boundary moves by the difference every step. The state never repeats:
   * auto runs to its cap (8 + 4 x 1 steps) and says so; the mean is over
   * the second half, where every step is the slow rank's. The fast rank had
   * begun a 13th step when the 12th ended, and finishes it. */
  int64_t t0, t1;
  {
    g_autoptr(StSchedule) s = two_ranks(100000000, 99000000, FALSE, 0, 3, 1);
    periods(s, &t0, &t1);
  }
  g_assert_cmpint(t0, >, t1);
  g_autoptr(StSchedule) s = two_ranks(100000000, 99000000, FALSE, 0, 0, 1);
  g_autoptr(StTimeline) t = run(s);
  g_assert_true(t->steady.auto_steps);
  g_assert_false(t->steady.converged);
  g_assert_cmpint(t->steady.cap, ==, 12);
  g_assert_cmpint(t->steps, ==, 13);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_cmpint(sum->warmup_steps, ==, 6);
  g_assert_cmpint(sum->steady_steps, ==, 6);
  g_assert_cmpint(sum->step_time_ns, ==, t0);
  g_assert_cmpint(sum->steady.drift_ns, ==, t0 - t1);
  g_autoptr(cJSON) report = st_report_to_json(sum);
  cJSON *steady = cJSON_GetObjectItem(report, "steady");
  g_assert_true(cJSON_IsFalse(cJSON_GetObjectItem(steady, "converged")));
  g_assert_cmpint(cJSON_GetObjectItem(steady, "cap_steps")->valueint, ==, 12);
}

static void
test_engine_slow(void)
{
  /* Rank 1 waits each step for rank 0's message. Starting late, it runs
   * back to back (receive and kernel: t1 per step), catching up d = t0 - t1
   * per step on rank 0 (t0 per step), until it waits for rank 0's message;
   * from then on every step takes t0. Rank 1 is made d ~ 5 ns faster: within the tolerance at every step,
   * so only the extrapolated drift (d per step for ever: over the horizon,
   * more than the tolerance) keeps the rule from calling the catch-up
   * steady. The steady step is t0. */
  int64_t bytes0 = 100000000, bytes1 = bytes0, t0 = 0, t1 = 0;
  for (int i = 0; i < 3; i++) {
    g_autoptr(StSchedule) s = two_ranks(bytes0, bytes1, TRUE, 1000000000, 3, 1);
    periods(s, &t0, &t1);
    bytes1 += (t0 - t1 - 5) * 1000; /* 1 TB/s: 1000 bytes per ns */
  }
  int64_t d = t0 - t1;
  g_test_message("t0 %" G_GINT64_FORMAT " ns, catching up %" G_GINT64_FORMAT " ns per step",
                 t0, d);
  g_assert_cmpint(d, >, 0);
  g_assert_cmpint(d, <, 100); /* under the tolerance floor */
  int catch_up = 40;
  /* Rank 1 posts its receive of step k at L + k t1, rank 0 its send at
   * (k + 1) t0: rank 1 is behind while k < (L - t0) / d. */
  g_autoptr(StSchedule) s = two_ranks(bytes0, bytes1, TRUE, t0 + catch_up * d, 0, 60);
  g_autoptr(StTimeline) t = run(s);
  g_assert_true(t->steady.converged);
  g_assert_cmpint(t->steady.first, >=, catch_up - 2);
  g_assert_cmpint(t->steady.first, <=, catch_up + 4);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_cmpint(sum->step_time_ns, ==, t0);
  /* What a rule comparing only the last two steps would have taken. */
  g_assert_cmpint(sum->step_end_ns[2] - sum->step_end_ns[1], ==, t1);
}

static void
test_engine_idle(void)
{
  /* Data parallelism: every step starts from an idle GPU, so the first step
   * is already steady; the auto run takes one step and it is the step of a
   * long run. */
  g_autoptr(StModel) m = st_test_model_named("resnet18");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 0);
  StOptions o;
  st_options_init(&o);
  g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
  g_autoptr(StTimeline) t = NULL;
  g_autoptr(StSummary) sum = st_test_simulate(s, "auto", FALSE, &t);
  g_assert_true(t->steady.exact);
  g_assert_cmpint(t->steps, ==, 1);
  o.steps = 5;
  g_autoptr(StSchedule) l = st_test_build("dp", m, c, &o);
  g_autoptr(StTimeline) lt = NULL;
  g_autoptr(StSummary) long_sum = st_test_simulate(l, "auto", FALSE, &lt);
  g_assert_cmpint(long_sum->step_time_ns, ==, sum->step_time_ns);
  st_options_clear(&o);
}

static void
test_engine_settling(void)
{
  /* Cyclic DP with the fresh-gradient rule, its gradients passed along a
   * chain, on 24 H100s: NCCL's kernels slow the compute they overlap, and
   * the coupled workers settle as a damped swing of the step (a millisecond
   * from one step to the next, shrinking a few % a period) about a mean
   * that holds. Rule 3 takes it within a few periods; what a run ten times
   * as long settles to is that step, within the tolerance, over each of
   * its later periods (two steps in step with the window: pairs across
   * them differ by half the swing's change) and over its last hundred
   * steps. */
  g_autoptr(StModel) m = st_test_model_named("resnet50");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 3, 0);
  StOptions o;
  st_options_init(&o);
  g_autoptr(GError) error = NULL;
  const char *args[] = {"update-rule", "dp", "stages", "4", "cdp-reduce", "chain",
                        "micro-batch", "2"};
  for (gsize a = 0; a < G_N_ELEMENTS(args); a += 2)
    g_assert_true(st_options_set(&o, args[a], args[a + 1], &error));
  g_autoptr(StSchedule) s = st_test_build("cdp", m, c, &o);
  g_autoptr(StTimeline) t = NULL;
  g_autoptr(StSummary) sum = st_test_simulate(s, "auto", FALSE, &t);
  const StSteady *st = &t->steady;
  g_assert_true(st->converged);
  g_assert_true(st->settling);
  g_assert_cmpint(st->period, ==, 2);
  g_assert_cmpint(t->steps, <, st->cap / 2);

  int n = 10 * t->steps;
  o.steps = n;
  g_autoptr(StSchedule) ls = st_test_build("cdp", m, c, &o);
  g_autoptr(StTimeline) lt = NULL;
  g_autoptr(StSummary) long_sum = st_test_simulate(ls, "auto", FALSE, &lt);
  double tol = 1e-4 * (double)sum->step_time_ns;
  const int64_t *e = long_sum->step_end_ns;
  for (int k = st->last + 2; k + 1 < n; k += 2)
    g_assert_cmpfloat(fabs((double)(e[k] - e[k - 2]) / 2 - (double)sum->step_time_ns), <=, tol);
  double tail = (double)(e[n - 2] - e[n - 102]) / 100;
  g_assert_cmpfloat(fabs(tail - (double)sum->step_time_ns), <=, tol);
  /* The swing itself is far from settled: one step to the next still
   * differs by much more than the tolerance. */
  g_assert_cmpfloat(fabs((double)(e[n - 2] - 2 * e[n - 3] + e[n - 4])), >, 10 * tol);
  st_options_clear(&o);
}

/* ---- every strategy ------------------------------------------------------------ */

typedef struct {
  const char *strategy;
  const char *args[12];
} Case;

static const Case CASES[] = {
  {"dp", {NULL}},
  {"zero", {"zero-stage", "1", NULL}},
  {"zero", {"zero-stage", "3", NULL}},
  {"cdp", {"update-rule", "v1", NULL}},
  {"cdp", {"update-rule", "v2", "cdp-reduce", "collective", NULL}},
  {"cdp", {"update-rule", "dp", "stages", "2", NULL}},
  {"cdp", {"zero-stage", "2", NULL}},
  {"pipeline", {"pipeline-stages", "2", NULL}},
  {"pipeline", {"pipeline-stages", "4", "pipeline-schedule", "gpipe", NULL}},
  {"burst", {NULL}},
  {"multiplex", {"foreground", "dp", "background", "mlp:b16", NULL}},
};

static void
test_strategies(void)
{
  /* ResNet-18 on 8 GPUs, micro-batch 8 x 2: each strategy with --steps
   * auto, then with a fixed number of steps, 6 beyond the auto run's. Up to
   * the end of the auto run's window the two runs are the same events (the
   * auto run took no step it could not take in the long one), so their step
   * ends agree to the ns; and when the auto run called it steady, every
   * later period of the long run (its last step aside, which nothing
   * follows) takes the same time within the tolerance. The engine's own
   * bookkeeping agrees with the rule applied to the long run's records. */
  g_autoptr(StModel) m = st_test_model_named("resnet18");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 0);
  for (gsize i = 0; i < G_N_ELEMENTS(CASES); i++) {
    StOptions o;
    st_options_init(&o);
    g_autoptr(GError) error = NULL;
    for (int a = 0; CASES[i].args[a] != NULL; a += 2) {
      g_assert_true(st_options_set(&o, CASES[i].args[a], CASES[i].args[a + 1], &error));
      g_assert_no_error(error);
    }
    g_assert_true(st_options_set(&o, "micro-batch", "8", &error));
    g_assert_true(st_options_set(&o, "global-batch", "128", &error));
    g_autoptr(StSchedule) s = st_test_build(CASES[i].strategy, m, c, &o);
    g_autoptr(StTimeline) t = NULL;
    g_autoptr(StSummary) sum = st_test_simulate(s, "auto", TRUE, &t);
    const StSteady *st = &t->steady;
    g_test_message("%s %s: %d steps, %s, window %d-%d, step %" G_GINT64_FORMAT " ns",
                   CASES[i].strategy, CASES[i].args[0] ? CASES[i].args[1] : "",
                   t->steps, st->converged ? "steady" : "NOT steady", sum->warmup_steps,
                   sum->warmup_steps + sum->steady_steps - 1, sum->step_time_ns);
    g_assert_true(st->auto_steps);
    int last = sum->warmup_steps + sum->steady_steps - 1;

    o.steps = t->steps + 6;
    g_autoptr(StSchedule) ls = st_test_build(CASES[i].strategy, m, c, &o);
    g_autoptr(StTimeline) lt = NULL;
    g_autoptr(StSummary) ls_sum = st_test_simulate(ls, "auto", TRUE, &lt);
    for (int k = 0; k <= last; k++)
      g_assert_cmpint(ls_sum->step_end_ns[k], ==, sum->step_end_ns[k]);
    if (st->converged) {
      int p = st->period;
      double tol = MAX(1e-4 * (double)sum->step_time_ns, 100.0);
      for (int k = last + p; k + 1 < ls_sum->steps; k += p) {
        double mean = (double)(ls_sum->step_end_ns[k] - ls_sum->step_end_ns[k - p]) / p;
        g_assert_cmpfloat(fabs(mean - (double)sum->step_time_ns), <=, 2 * tol);
      }
    }
    /* The rule over the long run's records finds the same as the engine. */
    StSteadyRule rule;
    st_steady_rule_init(&rule, s, st->cap);
    StSteady again;
    st_steady_of_timeline(lt, t->steps, &rule, &again);
    g_assert_cmpint(again.converged, ==, st->converged);
    if (st->converged) {
      g_assert_cmpint(again.first, ==, st->first);
      g_assert_cmpint(again.period, ==, st->period);
      g_assert_cmpint(again.exact, ==, st->exact);
    }
    st_options_clear(&o);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/steady/rule/repeats", test_rule_repeats);
  g_test_add_func("/steady/rule/slow-and-never", test_rule_slow_and_never);
  g_test_add_func("/steady/rule/idle", test_rule_idle);
  g_test_add_func("/steady/engine/never", test_engine_never);
  g_test_add_func("/steady/engine/slow", test_engine_slow);
  g_test_add_func("/steady/engine/idle", test_engine_idle);
  g_test_add_func("/steady/engine/settling", test_engine_settling);
  g_test_add_func("/steady/strategies", test_strategies);
  return g_test_run();
}
