/* bench_exec.c: the executor's own overhead per step: how much longer a
 * step takes than the ops it runs.
 *
 *   build/tests/bench_exec [--backend auto|host|cuda] [--steps N] [--quick]
 *
 * For each workload (one rank, data parallelism, fp32 Adam), the executor
 * runs N steps; over the steady steps (the first is warm-up) the table gives
 * the step time and, from the same run, the time rank 0's compute stream had
 * an op running: the sum of the ops' own measured durations. The overhead is
 * step / busy - 1: the time in which the device ran none of the schedule's
 * ops (issue, synchronization, the pool). Both numbers come from one run, so
 * the ratio holds up on a loaded machine better than either time.
 *
 * Workloads: models/mlp.json at micro-batch 32, tests/data/exec/tiny-gpt.json
 * at 8, and with a GPU (cuda) GPT-2 124M at 8 and ResNet-50 at 32 (too slow
 * for the host's reference kernels; --quick leaves them out).
 */
#include <stdio.h>
#include <string.h>

#include "exec/exec.h"
#include "output/output.h"
#include "strategy/strategy.h"
#include "testutil.h"

typedef struct {
  const char *model;
  int micro_batch;
  gboolean gpu_only;
} Workload;

static const Workload WORKLOADS[] = {
  {"models/mlp.json", 32, FALSE},
  {"tests/data/exec/tiny-gpt.json", 8, FALSE},
  {"models/gpt2-124m.json", 8, TRUE},
  {"models/resnet50.json", 32, TRUE},
};

/* Time per steady step that stream `stream` of rank 0 had an op running
 * (ops on one stream do not overlap). */
static double
busy_ns(const StSummary *sum, int stream)
{
  const StTimeline *t = sum->timeline;
  const StProgram *p = st_schedule_program_of(t->schedule, 0);
  double total = 0;
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    if (r->rank == 0 && st_program_op(p, r->op)->stream == stream &&
        r->step >= sum->warmup_steps)
      total += (double)(r->end_ns - r->start_ns);
  }
  return total / MAX(1, sum->steps - sum->warmup_steps);
}

static gboolean
bench(const Workload *w, const char *backend, int steps, GError **error)
{
  g_autofree char *path = st_test_src(w->model);
  g_autofree char *cluster_path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(StModel) m = st_model_load(path, error);
  g_autoptr(StCluster) c = m != NULL ? st_cluster_load(cluster_path, error) : NULL;
  if (c == NULL || !st_cluster_resize(c, 0, 1, error))
    return FALSE;
  StOptions o;
  st_options_init(&o);
  o.ranks = 1;
  o.micro_batch = w->micro_batch;
  o.global_batch = w->micro_batch;
  o.steps = steps;
  g_autoptr(StSchedule) s = st_strategy_build(st_strategy_find("dp"), m, c, NULL, &o, error);
  st_options_clear(&o);
  if (s == NULL)
    return FALSE;
  StExecOptions eo;
  st_exec_options_init(&eo);
  eo.device = backend;
  StExecResult result = {0};
  g_autoptr(StTimeline) t = st_execute(s, &eo, &result, error);
  if (t == NULL)
    return FALSE;
  g_autoptr(StSummary) sum = st_summary_new(t);
  double busy = busy_ns(sum, 0);
  printf("%-32s %6d %12.3f %12.3f %9.1f%%   %s\n", m->name, w->micro_batch,
         sum->step_time_ns / 1e6, busy / 1e6, 100 * (sum->step_time_ns / busy - 1),
         result.device);
  st_exec_result_clear(&result);
  return TRUE;
}

int
main(int argc, char **argv)
{
  g_autofree char *backend = g_strdup("auto");
  gint steps = 10;
  gboolean quick = FALSE;
  const GOptionEntry entries[] = {
    {"backend", 0, 0, G_OPTION_ARG_STRING, &backend, "auto, host or cuda", "NAME"},
    {"steps", 0, 0, G_OPTION_ARG_INT, &steps, "Steps per run (the first is warm-up)", "N"},
    {"quick", 0, 0, G_OPTION_ARG_NONE, &quick, "Only the small models", NULL},
    {NULL},
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new("- the executor's overhead per step");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
    fprintf(stderr, "bench_exec: %s\n", error->message);
    return 2;
  }
  printf("%-32s %6s %12s %12s %10s   %s\n", "model (dp, 1 rank)", "batch", "step ms",
         "ops ms", "overhead", "device");
  for (gsize i = 0; i < G_N_ELEMENTS(WORKLOADS); i++) {
    const Workload *w = &WORKLOADS[i];
    gboolean gpu = strcmp(backend, "cuda") == 0;
    if (w->gpu_only && (quick || !gpu))
      continue;
    if (!bench(w, backend, steps, &error)) {
      fprintf(stderr, "bench_exec: %s: %s\n", w->model, error->message);
      return 1;
    }
  }
  return 0;
}
