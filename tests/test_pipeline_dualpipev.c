/* test_pipeline_dualpipev.c: DualPipeV (--pipeline-schedule dualpipev, the
 * pipeline strategy; strategy_pipeline.h): its order against DeepSeek-AI's
 * dualpipev.py phases and the activations the repository's table gives,
 * its bubble on the uniform pipeline against the table's closed form, and
 * conformance on real models (folded = unfolded, refusals).
 */
#include <string.h>

#include "pipeline_uniform.h"

static void
test_orders_dualpipev(void)
{
  /* DualPipeV's order (dualpipev.py's eight phases) on S stages and M >= 2S
   * micro-batches: every chunk runs M forwards and M backwards, each in
   * micro-batch order; a B's W comes after it, first in first out; each
   * F&B pair is a forward then a backward. Activations in flight (a chunk's
   * micro-batch from its forward to its W or whole backward): at most
   * PP + 1 = 2S + 1 chunks' worth on a GPU, the table of DeepSeek-AI's
   * DualPipe README, reached on stage 0 once M >= 2S. */
  for (int S = 1; S <= 6; S++)
    for (int M = 2 * S; M <= 2 * S + 5; M++) {
      int most_any = 0;
      for (int s = 0; s < S; s++) {
        g_autoptr(GArray) slots = st_pipe_order(ST_PIPE_DUALPIPE_V, s, S, M);
        int f[2] = {0, 0}, b[2] = {0, 0}, now = 0, most = 0;
        g_autoptr(GQueue) ws = g_queue_new();
        for (guint i = 0; i < slots->len; i++) {
          const StPipeSlot *x = &g_array_index(slots, StPipeSlot, i);
          g_assert_cmpint(x->chunk, >=, 0);
          g_assert_cmpint(x->chunk, <=, 1);
          if (x->fwd) {
            g_assert_cmpint(x->micro, ==, f[x->chunk]++);
            now++;
          } else if (x->half == ST_PASS_BWD_WEIGHT) {
            int code = GPOINTER_TO_INT(g_queue_pop_head(ws));
            g_assert_cmpint(code, ==, (x->micro << 1 | x->chunk) + 1);
            now--;
          } else {
            g_assert_cmpint(x->micro, ==, b[x->chunk]++);
            g_assert_cmpint(x->micro, <, f[x->chunk]);
            if (x->half == ST_PASS_BWD_INPUT)
              g_queue_push_tail(ws, GINT_TO_POINTER((x->micro << 1 | x->chunk) + 1));
            else
              now--;
          }
          if (x->pair && x->fwd) {
            const StPipeSlot *y = &g_array_index(slots, StPipeSlot, i + 1);
            g_assert_true(y->pair && !y->fwd);
          }
          most = MAX(most, now);
        }
        g_assert_cmpint(f[0], ==, M);
        g_assert_cmpint(f[1], ==, M);
        g_assert_cmpint(b[0], ==, M);
        g_assert_cmpint(b[1], ==, M);
        g_assert_true(g_queue_is_empty(ws));
        g_assert_cmpint(now, ==, 0);
        g_assert_cmpint(most, ==, st_pipe_in_flight(ST_PIPE_DUALPIPE_V, s, S, M));
        most_any = MAX(most_any, most);
      }
      g_test_message("S %d M %d: at most %d chunk micro-batches in flight", S, M, most_any);
      g_assert_cmpint(most_any, ==, 2 * S + 1);
    }
}

static void
test_dualpipev_step(gconstpointer data)
{
  /* DualPipeV (DeepSeek-AI's DualPipe repository, README's table; DeepSeek-V3
   * technical report, arXiv 2412.19437, Table 2): a bubble per GPU of
   * (PP/2 - 1)(F&B + B - 3W) for PP = 2S chunks, F a chunk's forward, B its
   * whole backward (b + w), W its weights' half and F&B an overlapped
   * forward-backward pair, which runs here as F then B on one stream
   * (F&B = f + b + w): (S - 1)(f + 2b - w). S = 4 GPUs, 8 chunks of one
   * layer each, M = 8 micro-batches (at least 2S): f = w = 100 us and b = 100
   * or 200 us give 600 and 1200 us. Each GPU computes both chunks' passes,
   * 2 M (f + b + w), and its optimizer over its two layers (2 x 28 us), and
   * idles the rest of the steady step: the bubble, plus the transfers on the
   * critical path, at most the 2 x 2M receives of a GPU's step at c = 1.1 us
   * (35 us; a pair's two receives run one after the other here, where
   * DualPipe posts them together). Without the pair's waits (each pass
   * waiting for its own tensor only) the simulated bubble is half the
   * closed form's: the pairing is what the formula counts. */
  const int bwd = GPOINTER_TO_INT(data);
  const double S = 4, M = 8, f = F_NS, b = bwd == 2 ? 100000.0 : 200000.0, w = 100000.0;
  const double want = (S - 1) * (f + 2 * b - w), slack = 2 * 2 * M * C_NS;
  Uniform u;
  uniform_init(&u, ST_PIPE_DUALPIPE_V, FALSE);
  st_model_free(u.model);
  u.model = uniform_split_model(8, bwd * 1e9);
  u.options.steps = 0; /* until steady */
  g_autoptr(StSchedule) s = build(u.model, u.cluster, &u.options);
  g_assert_cmpfloat_with_epsilon(st_test_note_number(s, "bubble_estimate_s"), want * 1e-9, 1e-6);
  StTimeline *t;
  g_autoptr(StSummary) sum = simulate(s, FALSE, &t);
  double T = (double)sum->step_time_ns;
  for (int d = 0; d < 4; d++) {
    double idle = (1 - st_summary_device(sum, d)->busy_fraction) * T;
    g_test_message("GPU %d: idle %.1f us, closed form %.1f us", d, idle / 1e3, want / 1e3);
    g_assert_cmpfloat(idle, >=, want - 1000.0);
    g_assert_cmpfloat(idle, <=, want + slack);
  }
  g_assert_cmpfloat_with_epsilon(T, 2 * M * (f + b + w) + 2 * O_NS + want, slack);
  st_timeline_free(t);
  uniform_clear(&u);
}

static void
test_conformance_dualpipev(void)
{
  /* DualPipeV on GPT-2 (its tied head on a chunk of the way back up, its
   * copy of the embedding summed over "tied") and on the MLP, with and
   * without checkpointing, over 2 pipelines: valid, simulated to the end,
   * folded and unfolded alike, some backwards split and some whole, the
   * memory estimate above the simulated peak; fewer than 2S micro-batches
   * and megatron are refused, naming the schedule. */
  const struct {
    const char *model;
    int gpus, stages, micro;
    StPrecision precision;
  } dual[] = {{"gpt2-124m", 8, 4, 1, ST_PRECISION_MIXED}, {"mlp", 4, 2, 8, ST_PRECISION_FP32}};
  for (gsize k = 0; k < G_N_ELEMENTS(dual); k++) {
    g_autoptr(StModel) m = st_test_model_named(dual[k].model);
    g_autoptr(StCluster) c = st_test_cluster("models/clusters/dgx-h100.json", 1, dual[k].gpus);
    for (int checkpoint = 0; checkpoint < 2; checkpoint++) {
      StOptions o;
      st_test_options_init(&o);
      o.micro_batch = dual[k].micro;
      /* two pipelines, 2S micro-batches each */
      o.global_batch = (int64_t)2 * 2 * dual[k].stages * dual[k].micro;
      o.precision = dual[k].precision;
      o.steps = 2;
      o.pipeline_stages = dual[k].stages;
      o.pipeline_schedule = ST_PIPE_DUALPIPE_V;
      o.recompute = checkpoint ? ST_RECOMPUTE_FULL : ST_RECOMPUTE_NONE;
      g_test_message("%s dualpipev, checkpoint %d", dual[k].model, checkpoint);
      g_autoptr(StSchedule) s = build(m, c, &o);
      guint halves = 0, whole = 0;
      for (guint p = 0; p < s->programs->len; p++) {
        const StProgram *prog = g_ptr_array_index(s->programs, p);
        for (guint i = 0; i < prog->ops->len; i++) {
          const StOp *op = st_program_op(prog, i);
          halves += op->kind == ST_OP_COMP && op->sub == ST_PASS_BWD_WEIGHT;
          whole += op->kind == ST_OP_COMP && op->sub == ST_PASS_BWD;
        }
      }
      g_assert_cmpuint(halves, >, 0);
      g_assert_cmpuint(whole, >, 0);
      check_folding(s);
      StTimeline *t;
      g_autoptr(StSummary) sum = simulate(s, FALSE, &t);
      for (int d = 0; d < s->n_devices; d++)
        g_assert_cmpfloat(st_test_note_number(s, "memory_per_rank_estimate_bytes"), >=,
                          (double)st_summary_device(sum, d)->peak_by_category[ST_MEM_ACTIVATIONS]);
      st_timeline_free(t);
      o.global_batch /= 2; /* S micro-batches a pipeline: fewer than 2S */
      g_autoptr(GError) few = st_test_build_refused("pipeline", m, c, &o);
      g_test_message("%s", few->message);
      g_assert_nonnull(strstr(few->message, "dualpipev"));
      g_autoptr(GError) megatron = st_test_build_refused("megatron", m, c, &o);
      g_assert_nonnull(strstr(megatron->message, "dualpipev"));
      st_options_clear(&o);
    }
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/pipeline/orders/dualpipev", test_orders_dualpipev);
  g_test_add_data_func("/pipeline/dualpipev/step/bwd-2e9", GINT_TO_POINTER(2), test_dualpipev_step);
  g_test_add_data_func("/pipeline/dualpipev/step/bwd-3e9", GINT_TO_POINTER(3), test_dualpipev_step);
  g_test_add_func("/pipeline/dualpipev/conformance", test_conformance_dualpipev);
  return g_test_run();
}
