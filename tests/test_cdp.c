/* test_cdp.c: cyclic data parallelism (sim/strategy/cdp.h) on worked
 * examples whose closed form is stated first, then the schedule invariants
 * over every cdp option.
 *
 * The unit cluster (tests/data/engine/cluster.json): 2 nodes x 4 GPUs at
 * 100 TFLOP/s fp32 and 1 TB/s; intra-node 100 GB/s with 1 us latency,
 * inter-node 10 GB/s with 5 us. "Uniform" models are L custom layers of
 * 1e9 FLOP per sample forward and as much backward: at batch 10 every pass
 * takes u = 100 us (compute bound), so with one layer per stage every
 * stage-pass is one time unit, as in the paper.
 */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "engine/engine.h"
#include "output/output.h"
#include "strategy/strategy.h"
#include "testutil.h"

#define U_NS 100000 /* one stage-pass of the uniform models, ns */

static StCluster *
unit_cluster(void)
{
  g_autofree char *path = st_test_src("tests/data/engine/cluster.json");
  g_autoptr(GError) error = NULL;
  StCluster *c = st_cluster_load(path, &error);
  g_assert_no_error(error);
  return c;
}

/* L uniform layers with `params` parameters and `act` bytes kept per sample;
 * outputs of 1 byte per sample, so moving them between stages is ~free. */
static StModel *
uniform_model(int layers, int64_t params, int64_t act)
{
  g_autoptr(GString) text = g_string_new("{\"name\": \"uniform\", \"input\": [1], \"layers\": [");
  for (int i = 0; i < layers; i++)
    g_string_append_printf(text,
                           "%s{\"name\": \"l%d\", \"type\": \"custom\", "
                           "\"params\": %" G_GINT64_FORMAT ", "
                           "\"fwd_flops\": 1000000000, \"bwd_flops\": 1000000000, "
                           "\"activation_bytes\": %" G_GINT64_FORMAT ", \"output_bytes\": 1}",
                           i ? ", " : "", i, params, act);
  g_string_append(text, "]}");
  g_autoptr(cJSON) root = cJSON_Parse(text->str);
  g_autoptr(GError) error = NULL;
  StModel *m = st_model_from_json(root, "uniform", &error);
  g_assert_no_error(error);
  return m;
}

static void
options(StOptions *o, int ranks, int micro_batch, int steps)
{
  st_test_options_init(o);
  o->ranks = ranks;
  o->micro_batch = micro_batch;
  o->steps = steps;
}

static void
set(StOptions *o, const char *name, const char *value)
{
  g_autoptr(GError) error = NULL;
  g_assert_true(st_options_set(o, name, value, &error));
  g_assert_no_error(error);
}

static StTimeline *
simulate(const StSchedule *s, gboolean no_fold)
{
  g_autoptr(GError) error = NULL;
  StEngineOptions eo = {NULL, "auto", NULL, no_fold, NULL};
  StTimeline *t = st_simulate(s, &eo, NULL, &error);
  g_assert_no_error(error);
  g_assert_nonnull(t);
  return t;
}

static const StNote *
note(const StSchedule *s, const char *key)
{
  for (guint i = 0; i < s->notes->len; i++) {
    const StNote *n = &g_array_index(s->notes, StNote, i);
    if (strcmp(n->key, key) == 0)
      return n;
  }
  g_assert_not_reached();
}

/* The record of (rank, op, step). */
static const StOpRecord *
record(const StTimeline *t, int rank, uint32_t op, int step)
{
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    if (r->rank == rank && r->op == op && r->step == step)
      return r;
  }
  g_assert_not_reached();
}

/* Index of the last op of `p` matching kind / pass-or-coll and layer (-2: any). */
static uint32_t
find_op(const StProgram *p, StOpKind kind, int sub, int layer, gboolean last)
{
  uint32_t found = UINT32_MAX;
  for (guint i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    if (op->kind == kind && (sub < 0 || op->sub == sub) && (layer == -2 || op->layer == layer)) {
      found = i;
      if (!last)
        break;
    }
  }
  g_assert_cmpuint(found, !=, UINT32_MAX);
  return found;
}

/* ---- activation memory -------------------------------------------------------------- */

static void
test_activations(void)
{
  /* L = 4 uniform stages (one layer each), N = 2L = 8 workers on 8 GPUs, no
   * parameters (nothing to reduce or update), a bytes kept per sample at
   * batch 10. One step is T = 2L u = 800 us; worker k starts k d after
   * worker 0 with d = T / N = u, so in the steady state the N workers sit at
   * the N = 2L integer phases of the cycle. At phase p a worker holds p + 1
   * layers' activations during forward (p < L) and 2L - p during backward
   * (its stage's activations go when that backward ends), so the sum over
   * workers is constant:
   *   sum_{p<L} (p + 1) + sum_{p>=L} (2L - p) = L (L + 1) = 20 layers,
   * against DP's N L = 32 at the end of the forward: (L + 1) / 2L = 62.5 %.
   * One GPU still peaks at L layers, as in DP. Both also hold the tensors
   * between layers as the executor makes them (tensors.h): a forward holds
   * its input and its output (1 byte per sample each; custom layers keep
   * neither, so each goes with the forward that reads it), the first the
   * samples instead of an input (input [1] in fp32: 4 bytes per sample). So
   * a GPU peaks during its last forward, at L layers + 2 x 10 bytes, and the
   * workers at forward phases 0 .. L-1 add (40 + 10) + (L - 1) x 20 = 110
   * bytes to the sum, against DP's 2 x 10 per GPU. */
  const int L = 4, N = 8;
  const int64_t a = 1000, per_layer = a * 10;
  g_autoptr(StModel) m = uniform_model(L, 0, a);
  g_autoptr(StCluster) c = unit_cluster();
  StOptions o;
  options(&o, N, 10, 4);
  set(&o, "stages", "4");
  g_autoptr(StSchedule) cdp = st_test_build("cdp", m, c, &o);
  g_autoptr(StSchedule) dp = st_test_build("dp", m, c, &o);
  g_assert_cmpfloat_with_epsilon(note(cdp, "stagger_delay_s")->number, 100e-6, 1e-12);
  for (int k = 0; k < N; k++)
    g_assert_cmpint(cdp->ranks[k].start_ns, ==, k * U_NS);
  g_autoptr(StTimeline) tc = simulate(cdp, FALSE);
  g_autoptr(StTimeline) td = simulate(dp, FALSE);
  g_autoptr(StSummary) sc = st_summary_new(tc);
  g_autoptr(StSummary) sd = st_summary_new(td);
  g_assert_cmpint(sc->warmup_steps, ==, 1);
  g_assert_cmpint(sc->step_time_ns, ==, 2 * L * U_NS);
  g_assert_cmpint(sc->total_peak_by_category[ST_MEM_ACTIVATIONS], ==,
                  L * (L + 1) * per_layer + (4 * 10 + 10) + (L - 1) * 2 * 10);
  g_assert_cmpint(sd->total_peak_by_category[ST_MEM_ACTIVATIONS], ==,
                  N * (L * per_layer + 2 * 10));
  for (int d = 0; d < N; d++)
    g_assert_cmpint(st_summary_device(sc, d)->peak_by_category[ST_MEM_ACTIVATIONS], ==,
                    L * per_layer + 2 * 10);
  st_options_clear(&o);
}

/* ---- gradient arrival ---------------------------------------------------------------- */

static void
test_gradient_arrival(void)
{
  /* L = 4 uniform stages with P = 1e6 parameters each, N = 4 workers on one
   * node, rule v1, Adam in fp32: a stage's optimizer step moves 28 P bytes
   * at 1 TB/s, c = 28 us, and under v1 runs right after the stage's backward
   * (it applies the previous step's gradient in place). One worker's step:
   *   F0..F3 (4u), then B3 c B2 c B1 c B0 c: T = 8u + 4c = 912 us, d = 228 us.
   * Worker k's gradient of stage l (0-based) is complete when B_l ends:
   *   t(k, l) = k d + (2L - l) u + (L - 1 - l) c,
   * and the chain takes it in then: the hop into worker k (k >= 1) starts at
   * t(k, l), d apart from worker to worker, since the sum from k - 1 needed
   * only 4 MB / 100 GB/s + 1 us = 41 us < d to arrive. With one all-reduce
   * per stage instead, stage l's reduction starts at t(N-1, l), when the
   * last worker is done. */
  const int L = 4, N = 4;
  const int64_t c_ns = 28000, T = 8 * U_NS + 4 * c_ns, d = T / N;
  g_autoptr(StModel) m = uniform_model(L, 1000000, 4);
  g_autoptr(StCluster) c = unit_cluster();
  StOptions o;
  options(&o, N, 10, 2);
  g_autoptr(StSchedule) s = st_test_build("cdp", m, c, &o);
  g_assert_cmpfloat_with_epsilon(note(s, "step_estimate_s")->number, T * 1e-9, 1e-12);
  g_autoptr(StTimeline) t = simulate(s, FALSE);
  for (int k = 0; k < N; k++) {
    const StProgram *p = st_schedule_program_of(s, k);
    for (int l = 0; l < L; l++) {
      int64_t arrival = k * d + (2 * L - l) * U_NS + (L - 1 - l) * c_ns;
      g_assert_cmpint(record(t, k, find_op(p, ST_OP_COMP, ST_PASS_BWD, l, TRUE), 0)->end_ns, ==,
                      arrival);
      if (k == 0)
        continue;
      /* The chain's receive of stage l: the first receive moving its grads. */
      uint32_t recv = UINT32_MAX;
      for (guint i = 0; i < p->ops->len && recv == UINT32_MAX; i++) {
        const StOp *op = st_program_op(p, i);
        if (op->kind == ST_OP_COMM_RECV && op->data == ST_DATA_GRADS && op->layer == l)
          recv = i;
      }
      g_assert_cmpint(record(t, k, recv, 0)->start_ns, ==, arrival);
    }
  }
  set(&o, "cdp-reduce", "collective");
  g_autoptr(StSchedule) coll = st_test_build("cdp", m, c, &o);
  g_autoptr(StTimeline) tc = simulate(coll, FALSE);
  const StProgram *p0 = st_schedule_program_of(coll, 0);
  for (int l = 0; l < L; l++) {
    uint32_t ar = find_op(p0, ST_OP_COMM_COLL, ST_COLL_ALL_REDUCE, l, FALSE);
    g_assert_cmpint(record(tc, 0, ar, 0)->start_ns, ==,
                    (N - 1) * d + (2 * L - l) * U_NS + (L - 1 - l) * c_ns);
  }
  st_options_clear(&o);
}

/* ---- model parallelism ---------------------------------------------------------------- */

static void
test_mp_devices(void)
{
  /* L = 4 uniform stages, N = L = 4 workers, each stage on devices of its
   * own. A worker uses stage l for its forward at phase l and its backward
   * at phase 2L-1-l of each 2L-unit cycle (plus ~1 us per stage boundary to
   * move 10 bytes); the workers are d = 2L/N = 2 units apart. Two workers
   * on one device are an even number of units apart, while a forward and a
   * backward of one stage are an odd number (2L-1-2l) apart: they never
   * meet, so every stage fits on one device, 4 in all = N, where DP with the
   * same model parallelism needs one per worker and stage: N L = 16. */
  const int L = 4, N = 4;
  g_autoptr(StModel) m = uniform_model(L, 1000, 4);
  g_autoptr(StCluster) c = unit_cluster();
  StOptions o;
  options(&o, N, 10, 4);
  set(&o, "model-parallel", "true");
  g_autoptr(StSchedule) s = st_test_build("cdp", m, c, &o);
  g_assert_cmpint(s->n_ranks, ==, N * L);
  g_assert_cmpstr(note(s, "devices_per_stage")->text, ==, "1,1,1,1");
  g_assert_cmpfloat(note(s, "gpus_dp_model_parallel")->number, ==, N * L);
  g_autoptr(StTimeline) t = simulate(s, FALSE);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_cmpint(sum->gpus_used, ==, N);
  /* Rank (k, l) = l N + k runs on stage l's device; the workers shared it
   * without slowing each other: the steady step is one worker's cycle, 2L
   * units and the 2(L-1) boundary crossings (1 us each), within 1 %. */
  for (int l = 0; l < L; l++)
    for (int k = 0; k < N; k++)
      g_assert_cmpint(s->ranks[l * N + k].device, ==, l);
  g_assert_cmpfloat(sum->step_time_ns, <, 1.01 * (2 * L * U_NS + 2 * (L - 1) * 1000));
  st_options_clear(&o);
}

static void
test_mp_transfers_cost_time(void)
{
  /* When moving activations costs time, the paper's count no longer holds:
   * a stage's forward and backward are no longer an odd number of units
   * apart. With L = 4 uniform stages and N = 8 workers on the unit cluster
   * (4 GPUs a node, so some workers' boundaries cross nodes at 10 GB/s and
   * 5 us, others stay at 100 GB/s and 1 us), each worker's passes are laid
   * out with its own transfers between the devices it is placed on, and the
   * placement is repeated until it holds. The report gives what free
   * transfers would need (gpus_free_transfers: max(N, L) = 8, as in the paper) and
   * what these transfers need; the simulated step is the estimate, within
   * 0.1 %: no two workers meet on a device. */
  const int L = 4, N = 8;
  g_autoptr(StModel) m = uniform_model(L, 1000, 4);
  g_autoptr(StCluster) c = unit_cluster();
  g_autoptr(GError) error = NULL;
  g_assert_true(st_cluster_resize(c, 4, 0, &error));
  StOptions o;
  options(&o, N, 10, 6);
  set(&o, "model-parallel", "true");
  g_autoptr(StSchedule) s = st_test_build("cdp", m, c, &o);
  g_assert_cmpfloat(note(s, "gpus_free_transfers")->number, ==, N);
  double needed = note(s, "gpus_needed")->number;
  g_assert_cmpfloat(needed, >, N);
  g_autoptr(StTimeline) t = simulate(s, FALSE);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_cmpint(sum->gpus_used, ==, (int)needed);
  double estimate = note(s, "step_estimate_s")->number * 1e9;
  g_assert_cmpfloat(fabs(sum->step_time_ns - estimate), <, 1e-3 * estimate);
  st_options_clear(&o);
}

/* The most that layer passes of different ranks on one device overlap, ns:
 * 0 when the device runs one worker's pass at a time. (Optimizer steps run
 * on a stream of higher priority, declared to preempt the passes.) */
static int64_t
device_overlap(const StSchedule *s, const StTimeline *t)
{
  g_autoptr(GArray) comp = g_array_new(FALSE, FALSE, sizeof(StOpRecord));
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    const StOp *op = st_program_op(st_schedule_program_of(s, r->rank), r->op);
    if (op->kind == ST_OP_COMP && op->sub != ST_PASS_OPTIM)
      g_array_append_val(comp, *r);
  }
  int64_t worst = 0;
  for (guint i = 0; i < comp->len; i++) /* O(n^2): a few thousand passes */
    for (guint j = i + 1; j < comp->len; j++) {
      const StOpRecord *a = &g_array_index(comp, StOpRecord, i);
      const StOpRecord *b = &g_array_index(comp, StOpRecord, j);
      if (a->rank == b->rank || s->ranks[a->rank].device != s->ranks[b->rank].device)
        continue;
      int64_t o = MIN(a->end_ns, b->end_ns) - MAX(a->start_ns, b->start_ns);
      worst = MAX(worst, o);
    }
  return worst;
}

/* 8 workers over 4 uniform stages on the unit cluster (4 GPUs a node, so
 * some stage boundaries cross nodes at 5 us and 10 GB/s), each pass
 * u = 100 us at batch 10 and 1 ms at batch 100, with --cdp-slack `slack`. */
static StSchedule *
mp_slack_schedule(int micro_batch, const char *slack)
{
  g_autoptr(StModel) m = uniform_model(4, 1000, 4);
  g_autoptr(StCluster) c = unit_cluster();
  g_autoptr(GError) error = NULL;
  g_assert_true(st_cluster_resize(c, 4, 0, &error));
  StOptions o;
  options(&o, 8, micro_batch, 8);
  set(&o, "model-parallel", "true");
  set(&o, "cdp-slack", slack);
  StSchedule *s = st_test_build("cdp", m, c, &o);
  st_options_clear(&o);
  return s;
}

static void
test_mp_slack_absorbs(void)
{
  /* Transfers negligible: at batch 100 a boundary costs at most ~5 us
   * against u = 1 ms passes (0.5 %). Stretching every worker's cycle by
   * e (strategy_cdp_slack.c) leaves a gap of e p after a pass of length p,
   * so e = max h / p absorbs every transfer, and the devices free transfers
   * need, max(N, L) = 8 as in the paper, stay enough. The step is the free
   * one times (1 + e), within the default slack of 1 %; the simulation meets
   * it (within 0.1 %) and no device ever runs two workers' passes at once.
   * Without the slack the same transfers take more GPUs. */
  const int N = 8, L = 4;
  g_autoptr(StSchedule) s = mp_slack_schedule(100, "0.01");
  g_assert_cmpfloat(note(s, "gpus_free_transfers")->number, ==, MAX(N, L));
  g_assert_cmpfloat(note(s, "gpus_needed")->number, ==, MAX(N, L));
  double stretch = note(s, "step_stretch")->number;
  g_assert_cmpfloat(stretch, >, 0);
  g_assert_cmpfloat(stretch, <=, 0.01);
  g_assert_nonnull(strstr(note(s, "transfers")->text, "absorbed"));
  double free_ns = note(s, "step_free_transfers_s")->number * 1e9;
  double bound = free_ns * (1 + stretch);
  g_assert_cmpfloat(fabs(note(s, "step_estimate_s")->number * 1e9 - bound), <, 1);
  g_autoptr(StTimeline) t = simulate(s, TRUE);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_cmpint(sum->gpus_used, ==, MAX(N, L));
  g_assert_cmpfloat(sum->step_time_ns, <=, bound * 1.001);
  g_assert_cmpfloat(sum->step_time_ns, >=, free_ns);
  /* A turn more than a step back is not declared (cdp_mp_turns): that pair
   * drifts by ~60 ns a step, 0.035 % of a pass after 8 steps. */
  g_assert_cmpint(device_overlap(s, t), <, 1e-3 * 10 * U_NS);

  g_autoptr(StSchedule) none = mp_slack_schedule(100, "0");
  g_assert_cmpfloat(note(none, "gpus_needed")->number, >, MAX(N, L));
  g_assert_nonnull(strstr(note(none, "transfers")->text, "too slow for the slack"));
}

static void
test_mp_slack_too_small(void)
{
  /* Transfers of ~5 us against u = 100 us passes (5 %): beyond the default
   * 1 % slack the plan keeps today's extra devices (and says what
   * absorbing would cost); with a 10 % slack it keeps max(N, L) = 8 and
   * reports the larger step, which the simulation meets without two
   * workers on one device at once. */
  const int N = 8, L = 4;
  g_autoptr(StSchedule) tight = mp_slack_schedule(10, "0.01");
  double stretch = note(tight, "step_stretch")->number;
  g_assert_cmpfloat(stretch, >, 0.01);
  g_assert_cmpfloat(note(tight, "gpus_needed")->number, >, MAX(N, L));
  g_assert_cmpfloat(note(tight, "gpus_without_stretch")->number, ==,
                    note(tight, "gpus_needed")->number);

  g_autoptr(StSchedule) loose = mp_slack_schedule(10, "0.1");
  g_assert_cmpfloat(note(loose, "gpus_needed")->number, ==, MAX(N, L));
  g_assert_cmpfloat(note(loose, "step_stretch")->number, ==, stretch);
  double bound = note(loose, "step_free_transfers_s")->number * 1e9 * (1 + stretch);
  g_autoptr(StTimeline) t = simulate(loose, TRUE);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_cmpint(sum->gpus_used, ==, MAX(N, L));
  g_assert_cmpfloat(sum->step_time_ns, <=, bound * 1.001);
  g_assert_cmpint(device_overlap(loose, t), <, 1e-2 * U_NS);
}

/* ---- update rules --------------------------------------------------------------------- */

static void
test_versions(void)
{
  /* PAPERS.md, S stages, rank r, stage l: dp reads the current parameters
   * (version 0) everywhere; v1 the previous ones (1) everywhere; v2 the
   * current ones where l >= S-1-r, else the previous. With S = 4, N = 8:
   * rank 0 reads 1,1,1,0; rank 2 reads 1,0,0,0; ranks 3+ read 0,0,0,0.
   * Each optimizer step applies the previous step's gradient (version 1). */
  g_autoptr(StModel) m = uniform_model(4, 1000, 4);
  g_autoptr(StCluster) c = unit_cluster();
  const char *rules[] = {"dp", "v1", "v2"};
  for (gsize i = 0; i < G_N_ELEMENTS(rules); i++) {
    StOptions o;
    options(&o, 8, 10, 1);
    set(&o, "update-rule", rules[i]);
    g_autoptr(StSchedule) s = st_test_build("cdp", m, c, &o);
    for (int r = 0; r < 8; r++) {
      const StProgram *p = st_schedule_program_of(s, r);
      for (guint k = 0; k < p->ops->len; k++) {
        const StOp *op = st_program_op(p, k);
        if (op->kind != ST_OP_COMP)
          continue;
        int expect = op->sub == ST_PASS_OPTIM ? 1 : i == 0 ? 0 : i == 1 ? 1 : op->layer < 3 - r;
        g_assert_cmpint(op->version, ==, expect);
      }
    }
    st_options_clear(&o);
  }
}

static void
test_rule_buffers(void)
{
  /* Model states per worker, P parameters in 4 stages of P/4, fp32 Adam
   * (4 + 4 + 8 bytes per parameter):
   *   dp: 16 P;
   *   v1: + a second gradient buffer, 4 P (the gradient of t-1 waits for
   *       its update while the backward of t writes the next);
   *   v2: + a second parameter version of the stages the worker reads one
   *       step old (l < S-1-r): rank 0: 3 stages, 3 P; rank 2: 1 stage;
   *       rank 3 and later: none. */
  const int64_t P = 4000;
  g_autoptr(StModel) m = uniform_model(4, P / 4, 4);
  g_autoptr(StCluster) c = unit_cluster();
  struct {
    const char *rule;
    int rank;
    int64_t params, grads;
  } expect[] = {
    {"dp", 0, 4 * P, 4 * P},
    {"v1", 0, 4 * P, 8 * P},
    {"v1", 5, 4 * P, 8 * P},
    {"v2", 0, 4 * P + 3 * P, 4 * P},
    {"v2", 2, 4 * P + P, 4 * P},
    {"v2", 3, 4 * P, 4 * P},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(expect); i++) {
    StOptions o;
    options(&o, 8, 10, 1);
    set(&o, "update-rule", expect[i].rule);
    g_autoptr(StSchedule) s = st_test_build("cdp", m, c, &o);
    int64_t bytes[ST_MEM_N];
    st_program_persistent_bytes(st_schedule_program_of(s, expect[i].rank), bytes);
    g_assert_cmpint(bytes[ST_MEM_PARAMS], ==, expect[i].params);
    g_assert_cmpint(bytes[ST_MEM_GRADS], ==, expect[i].grads);
    g_assert_cmpint(bytes[ST_MEM_OPTIMIZER], ==, 8 * P);
    st_options_clear(&o);
  }
}

/* ---- ZeRO relay ----------------------------------------------------------------------- */

static void
test_zero_relay(void)
{
  /* 4 workers, 4 stages of P/4 parameters, fp32 Adam (K = 8 + 4 = 12 with
   * the gradient). Stage l's owner is floor(l N / S) = l. Per step, every
   * worker but the owner receives each stage's parameters once by relay and
   * sends its gradient of it once along the chain to the owner: 3 of each;
   * no collective at all. Per worker, owning one stage (a stage's buffer is
   * P/4 x 4 bytes = P bytes); under v1 the owner keeps two versions and two
   * gradient buffers of its stage, to make w_t for the relay as soon as the
   * gradient of t-1 is in:
   *   stage 1: params 3P + 2P, grads 3P + 2P, optimizer P/4 x 8 = 2P;
   *   stage 2: params 3P + 2P, grads 2P (the others' only while in flight);
   *   stage 3: params 2P (the others' from one stage before their forward
   *            to the end of their backward).
   * ZeRO-DP would issue, per step, reduce-scatters and all-gathers of the
   * same gradient buckets (and per layer at stage 3): collectives_replaced. */
  const int64_t P = 4000;
  g_autoptr(StModel) m = uniform_model(4, P / 4, 4);
  g_autoptr(StCluster) c = unit_cluster();
  for (int stage = 1; stage <= 3; stage++) {
    StOptions o;
    options(&o, 4, 10, 3);
    o.zero_stage = stage;
    g_autoptr(StSchedule) s = st_test_build("cdp", m, c, &o);
    g_assert_cmpstr(note(s, "stage_owners")->text, ==, "0,1,2,3");
    g_assert_cmpfloat(note(s, "collectives_replaced")->number, ==,
                      stage == 1 ? 2 : stage == 2 ? 2 : 1 + 2 * 4);
    for (int r = 0; r < 4; r++) {
      const StProgram *p = st_schedule_program_of(s, r);
      int relay = 0, chain = 0, coll = 0;
      for (guint k = 0; k < p->ops->len; k++) {
        const StOp *op = st_program_op(p, k);
        coll += op->kind == ST_OP_COMM_COLL;
        relay += op->kind == ST_OP_COMM_RECV && op->data == ST_DATA_PARAMS;
        chain += op->kind == ST_OP_COMM_SEND && op->data == ST_DATA_GRADS;
      }
      g_assert_cmpint(coll, ==, 0);
      g_assert_cmpint(relay, ==, 3);
      g_assert_cmpint(chain, ==, 3);
      int64_t bytes[ST_MEM_N];
      st_program_persistent_bytes(p, bytes);
      g_assert_cmpint(bytes[ST_MEM_PARAMS], ==, stage < 3 ? 3 * P + 2 * P : 2 * P);
      g_assert_cmpint(bytes[ST_MEM_GRADS], ==, stage < 2 ? 3 * P + 2 * P : 2 * P);
      g_assert_cmpint(bytes[ST_MEM_OPTIMIZER], ==, 8 * P / 4);
    }
    g_autoptr(StTimeline) t = simulate(s, FALSE);
    g_autoptr(StSummary) sum = st_summary_new(t);
    g_assert_cmpint(sum->step_time_ns, >, 0);
    st_options_clear(&o);
  }
}

/* ---- every option ---------------------------------------------------------------------- */

typedef struct {
  const char *model;
  int nodes, gpus, ranks, micro_batch, accumulation;
  StPrecision precision;
} Setup;

static void
check_one(const StModel *m, const StCluster *c, const StOptions *o, const char *what)
{
  g_test_message("%s", what);
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) s = st_strategy_build(st_strategy_find("cdp"), m, c, NULL, o, &error);
  g_assert_no_error(error);
  StTimeline *tf = simulate(s, FALSE), *tu = simulate(s, TRUE);
  g_autoptr(StSummary) f = st_summary_new(tf);
  g_autoptr(StSummary) u = st_summary_new(tu);
  g_assert_cmpint(f->step_time_ns, >, 0);
  g_assert_cmpint(f->step_time_ns, ==, u->step_time_ns);
  g_assert_cmpint(f->makespan_ns, ==, u->makespan_ns);
  for (int d = 0; d < s->n_devices; d++)
    g_assert_cmpint(st_summary_device(f, d)->peak_bytes, ==, st_summary_device(u, d)->peak_bytes);
  for (int cat = 0; cat < ST_MEM_N; cat++)
    g_assert_cmpint(f->total_peak_by_category[cat], ==, u->total_peak_by_category[cat]);
  g_assert_cmpfloat_with_epsilon(f->comm_bytes_total, u->comm_bytes_total,
                                 1e-6 * (1 + u->comm_bytes_total));
  st_timeline_free(tf);
  st_timeline_free(tu);
}

static void
test_every_option(void)
{
  /* Every combination of rule, reduction, ZeRO stage, model parallelism and
   * split builds a schedule that passes st_schedule_check and simulates to
   * the end, folded or not; the two combinations that make no sense are
   * refused with the options named. Two workers and three stages: a rank
   * owns more stages than there are peers, the case in which the ZeRO
   * relays of different stages between the same two ranks used to share a
   * stream and deadlock (owner and user ordered them differently). */
  static const Setup setups[] = {
    {"mlp", 1, 8, 4, 4, 2, ST_PRECISION_MIXED},
    {"gpt2-124m", 1, 8, 4, 1, 1, ST_PRECISION_MIXED},
    {"gpt2-124m", 1, 8, 2, 1, 1, ST_PRECISION_FP32},
    {"resnet18", 2, 0, 6, 4, 1, ST_PRECISION_FP32},
  };
  const char *rules[] = {"v1", "v2", "dp"}, *reduces[] = {"chain", "collective"};
  const char *splits[] = {"flops", "params", "memory"};
  for (gsize k = 0; k < G_N_ELEMENTS(setups); k++) {
    const Setup *su = &setups[k];
    g_autoptr(StModel) m = st_test_model_named(su->model);
    g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", su->nodes, su->gpus);
    for (gsize r = 0; r < G_N_ELEMENTS(rules); r++)
      for (gsize x = 0; x < G_N_ELEMENTS(reduces); x++)
        for (int zero = 0; zero <= 3; zero++)
          for (int mp = 0; mp <= 1; mp++) {
            StOptions o;
            options(&o, su->ranks, su->micro_batch, 3);
            o.precision = su->precision;
            int ranks = su->ranks ? su->ranks : c->gpus;
            o.global_batch = (int64_t)ranks * su->micro_batch * su->accumulation;
            o.zero_stage = zero;
            o.model_parallel = mp;
            set(&o, "update-rule", rules[r]);
            set(&o, "cdp-reduce", reduces[x]);
            set(&o, "stage-split", splits[(r + x + zero) % 3]);
            set(&o, "stages", mp ? "2" : "3");
            g_autofree char *what = g_strdup_printf(
              "%s: %s %s zero %d%s, %s split", su->model, rules[r], reduces[x], zero,
              mp ? " model parallel" : "", splits[(r + x + zero) % 3]);
            if (zero > 0 && (mp || x == 1)) {
              g_autoptr(GError) error = NULL;
              g_assert_null(st_strategy_build(st_strategy_find("cdp"), m, c, NULL, &o, &error));
              g_assert_error(error, ST_STRATEGY_ERROR, ST_ERROR_INVALID);
              g_assert_nonnull(strstr(error->message, "--zero-stage"));
              g_assert_nonnull(strstr(error->message, mp ? "--model-parallel" : "collective"));
            } else {
              check_one(m, c, &o, what);
            }
            st_options_clear(&o);
          }
  }
}

static void
test_mp_too_few_gpus(void)
{
  /* Under the dp rule nothing is shared: 4 workers x 2 stages need 8 GPUs. */
  g_autoptr(StModel) m = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  StOptions o;
  options(&o, 4, 8, 1);
  set(&o, "update-rule", "dp");
  set(&o, "stages", "2");
  o.model_parallel = TRUE;
  g_autoptr(GError) error = NULL;
  g_assert_null(st_strategy_build(st_strategy_find("cdp"), m, c, NULL, &o, &error));
  g_assert_error(error, ST_STRATEGY_ERROR, ST_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "need 8 GPUs"));
  g_assert_nonnull(strstr(error->message, "has 4"));
  st_options_clear(&o);
}

static void
test_stages_clamped(void)
{
  /* --stages beyond the layers is clamped: mlp has 5 layers. The split by
   * parameters differs from the split by FLOPs on ResNet-50 (the last
   * stages hold most parameters, the first most FLOPs per parameter). */
  g_autoptr(StModel) mlp = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  StOptions o;
  options(&o, 2, 8, 1);
  set(&o, "stages", "50");
  g_autoptr(StSchedule) s = st_test_build("cdp", mlp, c, &o);
  g_assert_cmpfloat(note(s, "stages")->number, ==, mlp->n_layers);
  g_autoptr(StModel) r50 = st_test_model_named("resnet50");
  set(&o, "stages", "4");
  g_autoptr(StSchedule) by_flops = st_test_build("cdp", r50, c, &o);
  set(&o, "stage-split", "params");
  g_autoptr(StSchedule) by_params = st_test_build("cdp", r50, c, &o);
  g_assert_cmpstr(note(by_flops, "stage_layers")->text, !=,
                  note(by_params, "stage_layers")->text);
  st_options_clear(&o);
}

static void
test_option_errors(void)
{
  /* Bad values name the option and what it accepts. */
  StOptions o;
  st_test_options_init(&o);
  g_autoptr(GError) error = NULL;
  g_assert_false(st_options_set(&o, "update-rule", "v3", &error));
  g_assert_nonnull(strstr(error->message, "--update-rule v3"));
  g_assert_nonnull(strstr(error->message, "v1|v2|dp"));
  g_clear_error(&error);
  g_assert_false(st_options_set(&o, "stages", "0", &error));
  g_assert_nonnull(strstr(error->message, "--stages 0"));
  g_clear_error(&error);
  g_assert_false(st_options_set(&o, "cdp-reduce", "ring", &error));
  g_assert_nonnull(strstr(error->message, "chain|collective"));
  st_options_clear(&o);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cdp/activations", test_activations);
  g_test_add_func("/cdp/gradient-arrival", test_gradient_arrival);
  g_test_add_func("/cdp/model-parallel/devices", test_mp_devices);
  g_test_add_func("/cdp/model-parallel/too-few-gpus", test_mp_too_few_gpus);
  g_test_add_func("/cdp/model-parallel/transfers-cost-time", test_mp_transfers_cost_time);
  g_test_add_func("/cdp/model-parallel/slack-absorbs", test_mp_slack_absorbs);
  g_test_add_func("/cdp/model-parallel/slack-too-small", test_mp_slack_too_small);
  g_test_add_func("/cdp/rules/versions", test_versions);
  g_test_add_func("/cdp/rules/buffers", test_rule_buffers);
  g_test_add_func("/cdp/zero/relay", test_zero_relay);
  g_test_add_func("/cdp/stages", test_stages_clamped);
  g_test_add_func("/cdp/options/errors", test_option_errors);
  g_test_add_func("/cdp/every-option", test_every_option);
  return g_test_run();
}
