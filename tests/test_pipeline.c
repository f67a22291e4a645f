/* test_pipeline.c: the `pipeline` strategy (strategy_pipeline*.c): orders,
 * worked examples of step time, bubble and activation memory whose closed
 * forms are stated first, the fit-to-memory search, and conformance of every
 * order, checkpointing and sparsity combination, folded and unfolded.
 *
 * The uniform pipeline is pipeline_uniform.h's.
 */
#include <string.h>

#include "pipeline_uniform.h"

/* ---- orders ------------------------------------------------------------------ */

static void
test_orders(void)
{
  /* 1F1B on stage 0 of 4 with 6 micro-batches: 3 warm-up forwards, then
   * F3 B0 F4 B1 F5 B2, then B3 B4 B5. On the last stage it alternates from
   * the start. GPipe runs F0..F5 then B0..B5 everywhere. */
  g_autoptr(GArray) first = st_pipe_order(ST_PIPE_1F1B, 0, 4, 6);
  const char *want_first = "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5";
  g_autoptr(GArray) last = st_pipe_order(ST_PIPE_1F1B, 3, 4, 6);
  const char *want_last = "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5";
  g_autoptr(GArray) gpipe = st_pipe_order(ST_PIPE_GPIPE, 1, 4, 6);
  const char *want_gpipe = "F0 F1 F2 F3 F4 F5 B0 B1 B2 B3 B4 B5";
  GArray *got[] = {first, last, gpipe};
  const char *want[] = {want_first, want_last, want_gpipe};
  for (int k = 0; k < 3; k++) {
    g_autoptr(GString) text = g_string_new(NULL);
    for (guint i = 0; i < got[k]->len; i++) {
      const StPipeSlot *slot = &g_array_index(got[k], StPipeSlot, i);
      g_string_append_printf(text, "%s%c%d", i ? " " : "", slot->fwd ? 'F' : 'B', slot->micro);
    }
    g_assert_cmpstr(text->str, ==, want[k]);
  }
  /* The most micro-batches in flight along each order is what
   * st_pipe_in_flight says: min(S - s, M) for 1F1B, M for GPipe. */
  for (int order = ST_PIPE_1F1B; order <= ST_PIPE_GPIPE; order++)
    for (int S = 1; S <= 5; S++)
      for (int M = 1; M <= 9; M++)
        for (int s = 0; s < S; s++) {
          g_autoptr(GArray) slots = st_pipe_order(order, s, S, M);
          g_assert_cmpuint(slots->len, ==, 2 * M);
          int now = 0, most = 0;
          for (guint i = 0; i < slots->len; i++) {
            now += g_array_index(slots, StPipeSlot, i).fwd ? 1 : -1;
            most = MAX(most, now);
          }
          g_assert_cmpint(most, ==, st_pipe_in_flight(order, s, S, M));
          g_assert_cmpint(most, ==, order == ST_PIPE_GPIPE ? M : MIN(S - s, M));
        }
}

/* The order as text: F, B (a whole backward, or under the zero-bubble
 * orders its input-gradient half) and W, each with its micro-batch. */
static char *
order_text(const GArray *slots)
{
  GString *text = g_string_new(NULL);
  for (guint i = 0; i < slots->len; i++) {
    const StPipeSlot *slot = &g_array_index(slots, StPipeSlot, i);
    char c = slot->fwd ? 'F' : slot->half == ST_PASS_BWD_WEIGHT ? 'W' : 'B';
    g_string_append_printf(text, "%s%c%d", i ? " " : "", c, slot->micro);
  }
  return g_string_free(text, FALSE);
}

static void
test_orders_zero_bubble(void)
{
  /* S = 4, M = 6. ZB-H1: stage s runs S - s forwards, then B, the W's
   * that leave s behind, a forward while any is left; the first stage
   * runs each W right after its B, the last defers 3. ZB-H2: 2 (S - s) - 1
   * forwards first (all 6 on stage 0: 7 > M), 2 s W's deferred. */
  struct {
    StPipeOrder order;
    int stage;
    const char *want;
  } cases[] = {
    {ST_PIPE_ZB_H1, 0, "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5"},
    {ST_PIPE_ZB_H1, 3, "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5"},
    {ST_PIPE_ZB_H2, 0, "F0 F1 F2 F3 F4 F5 B0 W0 B1 W1 B2 W2 B3 W3 B4 W4 B5 W5"},
    {ST_PIPE_ZB_H2, 2, "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 W0 B5 W1 W2 W3 W4 W5"},
  };
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
    g_autoptr(GArray) slots = st_pipe_order(cases[k].order, cases[k].stage, 4, 6);
    g_autofree char *text = order_text(slots);
    g_assert_cmpstr(text, ==, cases[k].want);
  }
  /* Every micro-batch's F, B and W once, B before its W, W's in order; in
   * flight (from F to W) at most what st_pipe_in_flight says: ZB-H1's
   * first stage holds 1F1B's min(S, M), and every stage at most S; ZB-H2
   * min(2 S - 1, M) on every stage. */
  for (int order = ST_PIPE_ZB_H1; order <= ST_PIPE_ZB_H2; order++)
    for (int S = 1; S <= 5; S++)
      for (int M = 1; M <= 11; M++)
        for (int s = 0; s < S; s++) {
          g_autoptr(GArray) slots = st_pipe_order(order, s, S, M);
          g_assert_cmpuint(slots->len, ==, 3 * M);
          int f = 0, b = 0, w = 0, now = 0, most = 0;
          for (guint i = 0; i < slots->len; i++) {
            const StPipeSlot *slot = &g_array_index(slots, StPipeSlot, i);
            if (slot->fwd) {
              g_assert_cmpint(slot->micro, ==, f++);
              now++;
            } else if (slot->half == ST_PASS_BWD_INPUT) {
              g_assert_cmpint(slot->micro, ==, b++);
              g_assert_cmpint(b, <=, f);
            } else {
              g_assert_cmpint(slot->half, ==, ST_PASS_BWD_WEIGHT);
              g_assert_cmpint(slot->micro, ==, w++);
              g_assert_cmpint(w, <=, b);
              now--;
            }
            most = MAX(most, now);
          }
          g_assert_cmpint(most, ==, st_pipe_in_flight(order, s, S, M));
          if (order == ST_PIPE_ZB_H1) {
            g_assert_cmpint(most, <=, MIN(S, M));
            if (s == 0)
              g_assert_cmpint(most, ==, MIN(S, M));
          } else {
            g_assert_cmpint(most, ==, MIN(2 * S - 1, M));
          }
        }
}

/* ---- the uniform pipeline ------------------------------------------------------ */

static void
test_uniform_step(gconstpointer data)
{
  /* S = 4 uniform stages, M = 8 micro-batches, one pipeline; b' = b, or
   * f + b with checkpointing (each backward recomputes its forward first,
   * once the output's gradient is here). Every stage computes M (f + b')
   * and then steps its optimizer (o; its all-reduce is over a group of one,
   * free). The passes end after (M + S - 1)(f + b') plus the transfers on
   * the critical path:
   *   GPipe: down the pipeline and back up once, 2 (S - 1) transfers:
   *     T = (M + S - 1)(f + b') + 2 (S - 1) c + o       = 3300 + 6.6 + 28 us;
   *   1F1B: stage 0's backward of micro-batch k waits for a round trip that
   *     takes 2 (S - 1) c longer than its own work in between (S - 1
   *     forwards and backwards), so the path zig-zags M/S + 1 times down and
   *     up, 2 (S - 1) transfers each, less 2 where it turns at stage 1:
   *     T = (M + S - 1)(f + b') + (2 (S - 1)(M/S + 1) - 2) c + o
   *                                                    = 3300 + 17.6 + 28 us.
   * Each GPU's bubble (idle time of the step) is T - o - M (f + b'):
   * (S - 1)(f + b') plus those transfers. The schedule's estimate of the
   * bubble fraction is (S - 1) / (M + S - 1) = 3/11. */
  const int *cfg = data; /* {order, checkpoint} */
  Uniform u;
  uniform_init(&u, cfg[0], cfg[1]);
  g_autoptr(StSchedule) s = build(u.model, u.cluster, &u.options);
  const double S = 4, M = 8;
  g_assert_cmpfloat(st_test_note_number(s, "micro_batches"), ==, M);
  g_assert_cmpfloat_with_epsilon(st_test_note_number(s, "bubble_fraction_estimate"), 3.0 / 11.0,
                                 1e-12);
  double bwd = cfg[1] ? F_NS + B_NS : B_NS;
  double transfers = cfg[0] == ST_PIPE_GPIPE ? 2 * (S - 1) : 2 * (S - 1) * (M / S + 1) - 2;
  double T = (M + S - 1) * (F_NS + bwd) + transfers * C_NS + O_NS;
  double bubble = T - O_NS - M * (F_NS + bwd);
  StTimeline *t;
  g_autoptr(StSummary) sum = simulate(s, FALSE, &t);
  g_assert_cmpfloat_with_epsilon((double)sum->step_time_ns, T, 2.0);
  for (int d = 0; d < 4; d++) {
    double idle = (1 - st_summary_device(sum, d)->busy_fraction) * (double)sum->step_time_ns;
    g_assert_cmpfloat_with_epsilon(idle, bubble, 2.0);
  }
  st_timeline_free(t);
  uniform_clear(&u);
}

static void
test_uniform_memory(gconstpointer data)
{
  /* Activation memory per GPU. Without checkpointing stage s keeps A = 40 kB
   * per micro-batch in flight: GPipe M = 8 of them on every stage, 1F1B
   * min(S - s, M) = 4, 3, 2, 1. With checkpointing it keeps each in-flight
   * micro-batch's stage input (10 kB: the data on stage 0, the received
   * tensor elsewhere) and one recomputed A. On top of that, tensors in
   * transit (the input a forward consumes and the next one, received
   * ahead; the output being sent and the next one) add at most 4 boundary
   * tensors of 10 kB:  kept <= peak <= kept + 4 x 10 kB. The schedule's
   * memory estimate counts all of them: it bounds the peak from above.
   * (Custom layers keep nothing but act_bytes, so a layer's input goes with
   * its forward, or its recompute: the tensors between layers are the
   * boundaries themselves, tensors.h.) */
  const int *cfg = data;
  Uniform u;
  uniform_init(&u, cfg[0], cfg[1]);
  g_autoptr(StSchedule) s = build(u.model, u.cluster, &u.options);
  StTimeline *t;
  g_autoptr(StSummary) sum = simulate(s, FALSE, &t);
  for (int d = 0; d < 4; d++) {
    int n = cfg[0] == ST_PIPE_GPIPE ? 8 : 4 - d;
    int64_t kept = cfg[1] ? (int64_t)n * BOUNDARY + ACT : (int64_t)n * ACT;
    int64_t peak = st_summary_device(sum, d)->peak_by_category[ST_MEM_ACTIVATIONS];
    g_test_message("device %d: activations peak %" G_GINT64_FORMAT ", kept %" G_GINT64_FORMAT,
                   d, peak, kept);
    g_assert_cmpint(peak, >=, kept);
    g_assert_cmpint(peak, <=, kept + 4 * BOUNDARY);
    g_assert_cmpfloat(st_test_note_number(s, "memory_per_rank_estimate_bytes"), >=,
                      (double)st_summary_device(sum, d)->peak_bytes);
  }
  st_timeline_free(t);
  uniform_clear(&u);
}

static void
test_zero_bubble_step(gconstpointer data)
{
  /* Qi et al.'s closed forms (ICLR 2024, section 2), per GPU, with f, b
   * and w one stage's forward, B and W per micro-batch:
   *   1F1B  (S - 1)(f + b + w)
   *   ZB-H1 (S - 1)(f + b - w)
   *   ZB-H2 (S - 1)(f + b - 2w), at least 0.
   * A custom layer's W is its forward's FLOPs (a linear's wgrad), at most
   * half its backward: with a backward of 2e9 FLOPs f = b = w = 100 us and
   * the bubbles are 900, 300 and 0 us; with 3e9, b = 200 us, w = 100 us:
   * 1200, 600, 300 us. S = 4, M = 8; each GPU computes M (f + b + w) and
   * its optimizer (o), and idles the rest of the steady step:
   *   idle = T - M (f + b + w) - o = the bubble,
   * give or take the transfers on the critical path (at most 2 (S - 1)
   * (M / S + 1) of c = 1.1 us: 20 us) and the input layer's nanoseconds.
   * ZB-H2's 0 holds in the steady step, where each stage starts its next
   * step as soon as its optimizer is done (the paper's parallelogram). */
  const int *cfg = data; /* {order, backward FLOPs / 1e9} */
  const double S = 4, M = 8, f = F_NS, b = cfg[1] == 2 ? 100000.0 : 200000.0, w = 100000.0;
  double want = cfg[0] == ST_PIPE_ZB_H1   ? (S - 1) * (f + b - w)
                : cfg[0] == ST_PIPE_ZB_H2 ? MAX(0.0, (S - 1) * (f + b - 2 * w))
                                          : (S - 1) * (f + b + w);
  Uniform u;
  uniform_init(&u, cfg[0], FALSE);
  st_model_free(u.model);
  u.model = uniform_split_model(4, cfg[1] * 1e9);
  u.options.steps = 0; /* until steady */
  g_autoptr(StSchedule) s = build(u.model, u.cluster, &u.options);
  if (cfg[0] != ST_PIPE_1F1B) {
    g_assert_cmpfloat_with_epsilon(st_test_note_number(s, "stage_fwd_estimate_s"), f * 1e-9, 1e-7);
    g_assert_cmpfloat_with_epsilon(st_test_note_number(s, "stage_bwd_input_estimate_s"), b * 1e-9,
                                   1e-7);
    g_assert_cmpfloat_with_epsilon(st_test_note_number(s, "stage_bwd_weight_estimate_s"),
                                   w * 1e-9, 1e-7);
    g_assert_cmpfloat_with_epsilon(st_test_note_number(s, "bubble_estimate_s"), want * 1e-9, 1e-6);
  }
  StTimeline *t;
  g_autoptr(StSummary) sum = simulate(s, FALSE, &t);
  double T = (double)sum->step_time_ns;
  for (int d = 0; d < 4; d++) {
    double idle = (1 - st_summary_device(sum, d)->busy_fraction) * T;
    g_test_message("GPU %d: idle %.1f us, closed form %.1f us", d, idle / 1e3, want / 1e3);
    g_assert_cmpfloat_with_epsilon(idle, want, 25000.0);
  }
  g_assert_cmpfloat_with_epsilon(T, M * (f + b + w) + O_NS + want, 25000.0);
  st_timeline_free(t);
  uniform_clear(&u);
}

static void
test_zero_bubble_memory(void)
{
  /* Activations per GPU (A = 40 kB a micro-batch, kept from its forward to
   * its W): ZB-H1 keeps the first stage at 1F1B's S = 4 micro-batches, and
   * no stage above it; ZB-H2 keeps 2 S - 1 = 7 on every stage. As in the
   * 1F1B test, boundary tensors in transit add at most 4 x 10 kB. */
  const StPipeOrder orders[] = {ST_PIPE_1F1B, ST_PIPE_ZB_H1, ST_PIPE_ZB_H2};
  int64_t peak_of[3][4];
  for (int k = 0; k < 3; k++) {
    Uniform u;
    uniform_init(&u, orders[k], FALSE);
    st_model_free(u.model);
    u.model = uniform_split_model(4, 2e9);
    g_autoptr(StSchedule) s = build(u.model, u.cluster, &u.options);
    StTimeline *t;
    g_autoptr(StSummary) sum = simulate(s, FALSE, &t);
    for (int d = 0; d < 4; d++) {
      peak_of[k][d] = st_summary_device(sum, d)->peak_by_category[ST_MEM_ACTIVATIONS];
      g_test_message("%d GPU %d: activations peak %" G_GINT64_FORMAT, k, d, peak_of[k][d]);
      int n = orders[k] == ST_PIPE_ZB_H2 ? 7 : orders[k] == ST_PIPE_ZB_H1 ? 4 : 4 - d;
      g_assert_cmpint(peak_of[k][d], >=, (int64_t)n * ACT);
      g_assert_cmpint(peak_of[k][d], <=, (int64_t)n * ACT + 4 * BOUNDARY);
      g_assert_cmpfloat(st_test_note_number(s, "memory_per_rank_estimate_bytes"), >=,
                        (double)st_summary_device(sum, d)->peak_bytes);
    }
    st_timeline_free(t);
    uniform_clear(&u);
  }
  g_assert_cmpint(peak_of[1][0], ==, peak_of[0][0]);
}

static void
test_uniform_p2p_bytes(void)
{
  /* Per step, each of the S - 1 boundaries carries M activations forward
   * and M gradients back: 2 (S - 1) M x 10 kB = 480 kB, and nothing else
   * moves (the all-reduces are over groups of one). */
  Uniform u;
  uniform_init(&u, ST_PIPE_1F1B, FALSE);
  g_autoptr(StSchedule) s = build(u.model, u.cluster, &u.options);
  StTimeline *t;
  g_autoptr(StSummary) sum = simulate(s, FALSE, &t);
  g_assert_cmpfloat_with_epsilon(sum->comm_bytes_total, 2.0 * 3 * 8 * BOUNDARY, 1e-6);
  /* a middle stage */
  g_assert_cmpfloat(st_test_note_number(s, "p2p_bytes_per_gpu"), ==, 2.0 * 8 * BOUNDARY);
  st_timeline_free(t);
  uniform_clear(&u);
}

/* ---- fit to memory ------------------------------------------------------------- */

static void
test_fit_to_memory(void)
{
  /* GPT-3 2.7B on 512 V100s of 16 GiB (Summit), mixed precision Adam,
   * micro-batch 1, global batch 512, activation checkpointing. Dense, the
   * 16 bytes per parameter of model states (42 GB) need 4 stages before a
   * GPU's share fits; with 90% sparsity SAMO's 2 + 22 x 0.1 = 4.2 bytes per
   * parameter (11 GB) fit on one GPU, so the same 512 GPUs run 512
   * data-parallel replicas with no bubble and no p2p. The estimate is an
   * upper bound of the simulated peak, and tight. */
  g_autoptr(StModel) m = st_test_model_named("gpt3-2.7b");
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/summit.json", 86, 512);
  StOptions o;
  st_test_options_init(&o);
  o.precision = ST_PRECISION_MIXED;
  o.micro_batch = 1;
  o.global_batch = 512;
  o.recompute = ST_RECOMPUTE_FULL;
  const double want[2] = {4, 1};
  const double sparsity[2] = {0, 0.9};
  for (int k = 0; k < 2; k++) {
    o.sparsity = sparsity[k];
    o.pipeline_stages = 0;
    g_autoptr(StSchedule) s = build(m, c, &o);
    g_assert_cmpfloat(st_test_note_number(s, "pipeline_stages"), ==, want[k]);
    /* Split, the tied LM head keeps a copy of the embedding (the search must
     * not lose it on the way from 1 stage up). */
    g_assert_cmpint(st_schedule_find_comm(s, "tied") >= 0, ==, want[k] > 1);
    StTimeline *t;
    g_autoptr(StSummary) sum = simulate(s, FALSE, &t);
    g_assert_null(sum->oom);
    int64_t peak = 0;
    for (int d = 0; d < s->n_devices; d++)
      peak = MAX(peak, st_summary_device(sum, d)->peak_bytes);
    double estimate = st_test_note_number(s, "memory_per_rank_estimate_bytes");
    g_assert_cmpfloat(estimate, >=, (double)peak);
    g_assert_cmpfloat(estimate, <=, 1.05 * (double)peak);
    st_timeline_free(t);
    /* The stage count below it does not fit, by the same estimate. */
    if (want[k] > 1) {
      o.pipeline_stages = 2;
      g_autoptr(StSchedule) fewer = build(m, c, &o);
      g_assert_cmpfloat(st_test_note_number(fewer, "memory_per_rank_estimate_bytes"), >,
                        (double)c->gpu.memory_bytes);
    }
  }
  st_options_clear(&o);
}

static void
test_bad_stages(void)
{
  /* 3 stages cannot divide 4 ranks: the error names the option. */
  g_autoptr(StModel) m = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 1, 4);
  StOptions o;
  st_test_options_init(&o);
  o.pipeline_stages = 3;
  g_autoptr(GError) error = st_test_build_refused("pipeline", m, c, &o);
  g_assert_error(error, ST_STRATEGY_ERROR, ST_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "--pipeline-stages 3"));
  st_options_clear(&o);
}

/* ---- the tied embedding ---------------------------------------------------------- */

static void
test_tied_embedding(void)
{
  /* GPT-2's LM head uses the token embedding's weights (V x d = 50257 x
   * 768). Split over 2 stages, the head's stage keeps a copy: its persistent
   * params are its own layers' plus V d, 4 bytes each in fp32 (and Adam's
   * 8 bytes of states each). Per step, besides M = 2 activations and 2
   * gradients of the boundary tensor, the two stages all-reduce the copy's
   * gradient: a ring of 2 sends 2 x 1/2 x 4 V d bytes from each GPU:
   *   comm per step = 2 M x boundary + 2 x 4 V d   (one pipeline: no
   *   data-parallel traffic). */
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 1, 2);
  StOptions o;
  st_test_options_init(&o);
  o.micro_batch = 1;
  o.pipeline_stages = 2;
  o.steps = 2;
  g_free(o.comm_algo);
  o.comm_algo = g_strdup("ring");
  g_autoptr(StSchedule) s = build(m, c, &o);
  g_assert_cmpint(st_schedule_find_comm(s, "tied"), >=, 0);
  const double vd = 50257.0 * 768;
  g_assert_cmpfloat(m->layers[0].params, ==, vd);
  /* Stage 1's layers: those its forward passes run. */
  const StProgram *last = g_ptr_array_index(s->programs, 1);
  int lo = m->n_layers;
  for (guint i = 0; i < last->ops->len; i++) {
    const StOp *op = st_program_op(last, i);
    if (op->kind == ST_OP_COMP && op->sub == ST_PASS_FWD)
      lo = MIN(lo, op->layer);
  }
  double own = 0;
  for (int i = lo; i < m->n_layers; i++)
    own += (double)m->layers[i].params;
  int64_t bytes[ST_MEM_N];
  st_program_persistent_bytes(last, bytes);
  g_assert_cmpfloat((double)bytes[ST_MEM_PARAMS], ==, 4 * (own + vd));
  g_assert_cmpfloat((double)bytes[ST_MEM_OPTIMIZER], ==, 8 * (own + vd));
  double boundary = (double)m->layers[lo].in_bytes; /* fp32, micro-batch 1 */
  StTimeline *t;
  g_autoptr(StSummary) sum = simulate(s, FALSE, &t);
  g_assert_cmpfloat_with_epsilon(sum->comm_bytes_total, 2 * 2 * boundary + 2 * 4 * vd, 1.0);
  st_timeline_free(t);
  st_options_clear(&o);
}

/* ---- conformance ------------------------------------------------------------------ */

static const struct {
  const char *model;
  int nodes, gpus, ranks, stages, micro, accumulation;
  StPrecision precision;
} cases[] = {
  {"gpt2-124m", 2, 0, 0, 4, 1, 2, ST_PRECISION_MIXED},
  {"mlp", 1, 4, 6, 3, 8, 1, ST_PRECISION_FP32},
};

static void
test_conformance(void)
{
  /* Every order x checkpointing x sparsity x balance, on GPT-2 with 4
   * stages x 4 pipelines over 2 nodes, and on the MLP with 6 ranks sharing
   * 4 GPUs in 3 stages: a valid schedule (st_strategy_build checks it) that
   * simulates to the end, folded and unfolded alike. */
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
    g_autoptr(StModel) m = st_test_model_named(cases[k].model);
    g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", cases[k].nodes,
                                          cases[k].gpus);
    int ranks = cases[k].ranks ? cases[k].ranks : c->gpus;
    for (int variant = 0; variant < 24; variant++) {
      StOptions o;
      st_test_options_init(&o);
      o.ranks = cases[k].ranks;
      o.micro_batch = cases[k].micro;
      o.global_batch = (int64_t)ranks * cases[k].micro * cases[k].accumulation;
      o.precision = cases[k].precision;
      o.steps = 2;
      o.pipeline_stages = cases[k].stages;
      o.pipeline_schedule = variant % 2;
      o.recompute = (variant / 2) % 2 ? ST_RECOMPUTE_FULL : ST_RECOMPUTE_NONE;
      o.sparsity = (variant / 4) % 2 ? 0.9 : 0;
      o.balance = variant / 8;
      g_test_message("%s variant %d", cases[k].model, variant);
      g_autoptr(StSchedule) s = build(m, c, &o);
      g_assert_cmpint(s->programs->len, ==, cases[k].stages);
      check_folding(s);
      st_options_clear(&o);
    }
  }
}

static void
test_conformance_zero_bubble(void)
{
  /* The zero-bubble orders with and without checkpointing on the same
   * cases (GPT-2's tied head keeps its backward whole; every other layer
   * with weights runs B and W): valid, simulated to the end, folded and
   * unfolded alike; --sparsity is refused. */
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
    g_autoptr(StModel) m = st_test_model_named(cases[k].model);
    g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", cases[k].nodes,
                                          cases[k].gpus);
    int ranks = cases[k].ranks ? cases[k].ranks : c->gpus;
    for (int variant = 0; variant < 4; variant++) {
      StOptions o;
      st_test_options_init(&o);
      o.ranks = cases[k].ranks;
      o.micro_batch = cases[k].micro;
      o.global_batch = (int64_t)ranks * cases[k].micro * cases[k].accumulation;
      o.precision = cases[k].precision;
      o.steps = 2;
      o.pipeline_stages = cases[k].stages;
      o.pipeline_schedule = variant % 2 ? ST_PIPE_ZB_H2 : ST_PIPE_ZB_H1;
      o.recompute = variant / 2 ? ST_RECOMPUTE_FULL : ST_RECOMPUTE_NONE;
      g_test_message("%s zero-bubble variant %d", cases[k].model, variant);
      g_autoptr(StSchedule) s = build(m, c, &o);
      guint halves = 0;
      for (guint p = 0; p < s->programs->len; p++) {
        const StProgram *prog = g_ptr_array_index(s->programs, p);
        for (guint i = 0; i < prog->ops->len; i++) {
          const StOp *op = st_program_op(prog, i);
          halves += op->kind == ST_OP_COMP && (op->sub == ST_PASS_BWD_INPUT ||
                                               op->sub == ST_PASS_BWD_WEIGHT);
        }
      }
      g_assert_cmpuint(halves, >, 0);
      check_folding(s);
      o.sparsity = 0.9;
      g_autoptr(GError) error = st_test_build_refused("pipeline", m, c, &o);
      g_assert_error(error, ST_STRATEGY_ERROR, ST_ERROR_INVALID);
      st_options_clear(&o);
    }
  }
}

static void
test_scale(void)
{
  /* GPT-3 13B on 2048 Summit GPUs (342 nodes) in 8 stages: built and
   * simulated in well under a second, because the 256 pipelines fold. */
  g_autoptr(StModel) m = st_test_model_named("gpt3-13b");
  g_autoptr(StCluster) c = st_test_cluster("models/clusters/summit.json", 342, 2048);
  StOptions o;
  st_test_options_init(&o);
  o.precision = ST_PRECISION_MIXED;
  o.micro_batch = 1;
  o.global_batch = 2048;
  o.pipeline_stages = 8;
  o.recompute = ST_RECOMPUTE_FULL;
  o.sparsity = 0.9;
  gint64 t0 = g_get_monotonic_time();
  g_autoptr(StSchedule) s = build(m, c, &o);
  StTimeline *t;
  g_autoptr(StSummary) sum = simulate(s, FALSE, &t);
  double seconds = (g_get_monotonic_time() - t0) / 1e6;
  g_test_message("built and simulated in %.3f s", seconds);
  g_assert_cmpfloat(seconds, <, 1.0);
  g_assert_cmpint(sum->step_time_ns, >, 0);
  st_timeline_free(t);
  st_options_clear(&o);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  static const int gpipe[2] = {ST_PIPE_GPIPE, 0}, f1b1[2] = {ST_PIPE_1F1B, 0};
  static const int gpipe_ck[2] = {ST_PIPE_GPIPE, 1}, f1b1_ck[2] = {ST_PIPE_1F1B, 1};
  g_test_add_func("/pipeline/orders", test_orders);
  g_test_add_func("/pipeline/orders/zero-bubble", test_orders_zero_bubble);
  g_test_add_data_func("/pipeline/uniform/step/gpipe", gpipe, test_uniform_step);
  g_test_add_data_func("/pipeline/uniform/step/1f1b", f1b1, test_uniform_step);
  g_test_add_data_func("/pipeline/uniform/step/gpipe-checkpoint", gpipe_ck, test_uniform_step);
  g_test_add_data_func("/pipeline/uniform/step/1f1b-checkpoint", f1b1_ck, test_uniform_step);
  g_test_add_data_func("/pipeline/uniform/memory/gpipe", gpipe, test_uniform_memory);
  g_test_add_data_func("/pipeline/uniform/memory/1f1b", f1b1, test_uniform_memory);
  g_test_add_data_func("/pipeline/uniform/memory/gpipe-checkpoint", gpipe_ck,
                       test_uniform_memory);
  g_test_add_data_func("/pipeline/uniform/memory/1f1b-checkpoint", f1b1_ck,
                       test_uniform_memory);
  g_test_add_func("/pipeline/uniform/p2p-bytes", test_uniform_p2p_bytes);
  static const int zb[][2] = {{ST_PIPE_1F1B, 2}, {ST_PIPE_ZB_H1, 2}, {ST_PIPE_ZB_H2, 2},
                              {ST_PIPE_1F1B, 3}, {ST_PIPE_ZB_H1, 3}, {ST_PIPE_ZB_H2, 3}};
  static const char *const zb_names[] = {"1f1b", "zb-h1", "zb-h2"};
  for (gsize k = 0; k < G_N_ELEMENTS(zb); k++) {
    g_autofree char *path = g_strdup_printf("/pipeline/zero-bubble/step/%s/bwd-%de9",
                                            zb_names[k % 3], zb[k][1]);
    g_test_add_data_func(path, zb[k], test_zero_bubble_step);
  }
  g_test_add_func("/pipeline/zero-bubble/memory", test_zero_bubble_memory);
  g_test_add_func("/pipeline/fit-to-memory", test_fit_to_memory);
  g_test_add_func("/pipeline/bad-stages", test_bad_stages);
  g_test_add_func("/pipeline/tied-embedding", test_tied_embedding);
  g_test_add_func("/pipeline/conformance", test_conformance);
  g_test_add_func("/pipeline/zero-bubble/conformance", test_conformance_zero_bubble);
  g_test_add_func("/pipeline/scale", test_scale);
  return g_test_run();
}
