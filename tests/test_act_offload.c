/* test_act_offload.c: --offload-activations N (offload.h, docs/LLM.md
 * "Activation offload to host"): what crosses PCIe per step, what leaves
 * the device's memory, the copies' order around the passes, and the
 * refusals (other strategies, nothing to offload, the executor).
 *
 * GPT-2 124M: s = 1024, h = 768, a = 12, dense attention with dropout,
 * bf16 activations (--precision mixed). The block a transformer layer
 * saves for its backward, beside its input (the tensor between layers,
 * which stays on the device):
 *
 *   kept = 32 s b h + 5 a s^2 b + 16 s b bytes   (docs/LLM.md, checkpointing)
 *
 * 88,096,768 bytes at b = 1. */
#include <math.h>
#include <string.h>

#include "exec/exec.h"
#include "model/layer_type.h"
#include "output/output.h"
#include "sched/sched.h"
#include "strategy/offload.h"
#include "strategy/strategy.h"
#include "testutil.h"

static const int64_t S = 1024, H = 768, A = 12;

static int64_t
kept(int64_t b)
{
  return 32 * S * b * H + 5 * A * S * S * b + 16 * S * b;
}

static void
options(StOptions *o, int offload, int micro, int64_t global)
{
  st_options_init(o);
  o->precision = ST_PRECISION_MIXED;
  o->micro_batch = micro;
  o->global_batch = global;
  o->steps = 3;
  o->offload_activations = offload;
}

/* Bytes of the program's D2H and H2D copies of activations. */
static void
copied(const StSchedule *s, int64_t *down, int64_t *up)
{
  *down = *up = 0;
  for (guint p = 0; p < s->programs->len; p++) {
    const StProgram *prog = g_ptr_array_index(s->programs, p);
    for (guint i = 0; i < prog->ops->len; i++) {
      const StOp *op = st_program_op(prog, i);
      if (op->kind != ST_OP_COPY || op->data != ST_DATA_ACTS)
        continue;
      if (op->sub == ST_COPY_D2H)
        *down += op->bytes;
      else if (op->sub == ST_COPY_H2D)
        *up += op->bytes;
    }
  }
}

/* PCIe bytes per step and rank = 2 x N x kept(b) x M, M micro-batches of
 * b: each offloaded block goes down once and comes back once. dp and zero
 * on one GPU, N = 4, b = 1, M = 2: 4 x 88,096,768 x 2 = 704,774,144 bytes
 * each way (1,409,548,288 in all) in the schedule's copies and, over the steady steps, on the
 * simulated PCIe link (within 1 %: the window cuts copies); pipeline over 2
 * stages, N = 8 (the first stage's 6 blocks and 2 of the second's): the
 * same form summed over the stages' programs. */
static void
test_pcie_bytes(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  struct {
    const char *strategy;
    int gpus, n, stages;
  } cases[] = {{"dp", 1, 4, 0}, {"zero", 1, 4, 0}, {"pipeline", 2, 8, 2}};
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
    g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, cases[k].gpus);
    StOptions o;
    options(&o, cases[k].n, 1, 2);
    o.pipeline_stages = cases[k].stages;
    g_autoptr(StSchedule) s = st_test_build(cases[k].strategy, m, c, &o);
    st_options_clear(&o);
    int64_t down, up, want = cases[k].n * kept(1) * 2;
    copied(s, &down, &up);
    g_test_message("%s: %" G_GINT64_FORMAT " bytes down, %" G_GINT64_FORMAT " up, closed form %"
                   G_GINT64_FORMAT " each way", cases[k].strategy, down, up, want);
    g_assert_cmpint(down, ==, want);
    g_assert_cmpint(up, ==, want);
    g_assert_cmpfloat(st_test_note_number(s, "offload_activation_bytes_per_micro"), ==,
                      (double)(cases[k].n * kept(1)));
    StTimeline *t = NULL;
    g_autoptr(StSummary) sum = st_test_simulate(s, NULL, FALSE, &t);
    g_assert_null(sum->oom);
    g_assert_cmpint(sum->steady_steps, >=, 1);
    double per_step = sum->comm_bytes_by_link[ST_LINK_PCIE] / sum->steady_steps;
    g_assert_cmpfloat(fabs(per_step / (2.0 * want) - 1), <, 0.01);
    st_timeline_free(t);
  }
}

/* The device's activation peak, dp on one GPU, b = 2, M = 1, N = 4 of 12
 * layers. With PCIe made instant (each copy ends as it starts), an
 * offloaded block leaves the device as its forward ends and comes back
 * when the backward of the layer above it starts; the peak, at the top of
 * the model (the loss's backward), holds none of the N:
 *
 *   peak(without) - peak(with N) = N x kept(b) = 4 x 176,193,536 = 704,774,144 bytes.
 *
 * On the H100's 64 GB/s the copies lag the compute: the peak still drops,
 * by at most that, and the step grows (the forward waits for the copies). */
static void
test_peak(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  const int n = 4;
  int64_t peak[2][2], step[2][2];
  for (int fast = 0; fast < 2; fast++) {
    g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 1);
    if (fast) {
      c->links[ST_LINK_PCIE].bandwidth = 1e18;
      c->links[ST_LINK_PCIE].latency_ns = 0;
    }
    for (int with = 0; with < 2; with++) {
      StOptions o;
      options(&o, with ? n : 0, 2, 2);
      g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
      st_options_clear(&o);
      StTimeline *t = NULL;
      g_autoptr(StSummary) sum = st_test_simulate(s, NULL, FALSE, &t);
      peak[fast][with] = st_summary_device(sum, 0)->peak_by_category[ST_MEM_ACTIVATIONS];
      step[fast][with] = sum->step_time_ns;
      st_timeline_free(t);
    }
    g_test_message("%s PCIe: activation peak %" G_GINT64_FORMAT " without, %" G_GINT64_FORMAT
                   " with %d layers offloaded", fast ? "instant" : "64 GB/s", peak[fast][0],
                   peak[fast][1], n);
  }
  g_assert_cmpint(peak[1][0] - peak[1][1], ==, n * kept(2));
  g_assert_cmpint(peak[0][0], ==, peak[1][0]);
  g_assert_cmpint(peak[0][1], <, peak[0][0]);
  g_assert_cmpint(peak[0][1], >=, peak[1][1]);
  g_assert_cmpint(step[0][1], >, step[0][0]);
}

/* Under --recompute full --recompute-every 2 the 2nd and 4th blocks are
 * checkpointed (they keep only their input): of the first 4, the 1st and
 * 3rd offload, 2 x kept(1) each way per micro-batch. */
static void
test_recompute_every(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 1);
  StOptions o;
  options(&o, 4, 1, 1);
  o.recompute = ST_RECOMPUTE_FULL;
  o.recompute_every = 2;
  g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
  st_options_clear(&o);
  int64_t down, up;
  copied(s, &down, &up);
  g_assert_cmpint(down, ==, 2 * kept(1));
  g_assert_cmpint(up, ==, 2 * kept(1));
}

/* Each offloaded layer's backward waits for its H2D copy, which starts no
 * earlier than the backward above it ends (prefetch one layer ahead), and
 * the D2H frees what the forward allocated. */
static void
test_order(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 1);
  StOptions o;
  options(&o, 12, 1, 1);
  g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
  st_options_clear(&o);
  const StProgram *p = st_schedule_program_of(s, 0);
  int ups = 0, downs = 0;
  for (guint i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    if (op->kind == ST_OP_COPY && op->data == ST_DATA_ACTS) {
      if (op->sub == ST_COPY_D2H) {
        g_assert_cmpint(op->n_free, ==, 1);
        downs++;
      } else {
        g_assert_cmpint(op->n_alloc, ==, 1);
        ups++;
      }
      continue;
    }
    if (op->kind != ST_OP_COMP || op->sub != ST_PASS_BWD || !m->layers[op->layer].type->block)
      continue;
    gboolean waits = FALSE;
    const StDep *deps = &g_array_index(p->deps, StDep, op->dep_first);
    for (guint d = 0; d < op->n_deps; d++) {
      const StOp *dep = st_program_op(p, deps[d].op);
      waits = waits || (dep->kind == ST_OP_COPY && dep->sub == ST_COPY_H2D &&
                        dep->layer == op->layer);
    }
    g_assert_true(waits);
  }
  g_assert_cmpint(downs, ==, 12);
  g_assert_cmpint(ups, ==, 12);
}

/* Refused: strategies that do not model it (naming those that do), more
 * layers than the model's transformer layers, a model with none, layers
 * that all keep only their input, and the executor. */
static void
test_refusals(void)
{
  g_autoptr(StModel) m = st_test_model_named("gpt2-124m");
  g_autoptr(StModel) mlp = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  StOptions o;
  options(&o, 2, 1, 2);
  g_autoptr(GError) e1 = st_test_build_refused("megatron", m, c, &o);
  g_assert_nonnull(strstr(e1->message, "dp, zero, pipeline"));
  g_autoptr(GError) e2 = st_test_build_refused("cdp", m, c, &o);
  g_assert_nonnull(strstr(e2->message, "offload-activations"));
  o.offload_activations = 13;
  g_autoptr(GError) e3 = st_test_build_refused("dp", m, c, &o);
  g_assert_nonnull(strstr(e3->message, "12 transformer layers"));
  o.offload_activations = 1;
  g_autoptr(GError) e4 = st_test_build_refused("dp", mlp, c, &o);
  g_assert_nonnull(strstr(e4->message, "0 transformer layers"));
  o.recompute = ST_RECOMPUTE_FULL;
  g_autoptr(GError) e5 = st_test_build_refused("dp", m, c, &o);
  g_assert_nonnull(strstr(e5->message, "no saved block to offload"));
  o.recompute = ST_RECOMPUTE_NONE;
  g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
  st_options_clear(&o);
  g_autoptr(GError) e6 = NULL;
  g_assert_false(st_exec_check(s, &e6));
  g_assert_nonnull(strstr(e6->message, "activation offload to host"));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/act-offload/pcie-bytes", test_pcie_bytes);
  g_test_add_func("/act-offload/peak", test_peak);
  g_test_add_func("/act-offload/recompute-every", test_recompute_every);
  g_test_add_func("/act-offload/order", test_order);
  g_test_add_func("/act-offload/refusals", test_refusals);
  return g_test_run();
}
