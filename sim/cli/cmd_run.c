/* cmd_run.c: `stagger run`: execute schedules for real (the executor) and
 * write the same outputs as a simulation, from measurements. */
#include <signal.h>
#include <string.h>

#include "base/json.h"
#include "base/units.h"
#include "cli/cli.h"
#include "exec/exec.h"
#include "output/output.h"

/* SIGINT stops the run at the next op; what was measured is still written. */
static volatile int stop_requested;

static void
on_sigint(int sig)
{
  stop_requested = 1;
}

/* Without --cluster, the run is on this machine: one device. The rates are
 * not known (the executor measures instead); the memory is the device's. */
static StCluster *
local_cluster(GError **error)
{
  const char *text =
    "{\"name\": \"local\", \"note\": \"this machine, one device; rates unknown, not used by "
    "the executor\", \"nodes\": 1, \"gpus_per_node\": 1, \"gpu\": {\"name\": \"local\", "
    "\"memory\": \"1TiB\", \"flops\": {\"fp32\": \"1TFLOP/s\"}, \"memory_bandwidth\": "
    "\"1TB/s\"}, \"links\": {}}";
  g_autoptr(cJSON) root = st_json_parse(text, strlen(text), "<local cluster>", error);
  return root != NULL ? st_cluster_from_json(root, "<local cluster>", error) : NULL;
}

typedef struct {
  char *backend, *comm;
  gint64 seed;
  double lr, timeout;
  char *memory_limit;
  char *schedule;
} RunArgs;

static gboolean
run_one(StSchedule *schedule, const char *name, const RunArgs *a, const char *out_dir,
        GPtrArray *summaries, GError **error)
{
  StExecOptions o;
  st_exec_options_init(&o);
  o.device = a->backend;
  o.comm = a->comm;
  o.seed = (uint64_t)a->seed;
  o.lr = a->lr;
  o.timeout_s = a->timeout;
  o.stop = &stop_requested;
  if (a->memory_limit != NULL && !st_parse_bytes(a->memory_limit, &o.memory_limit, error))
    return st_cli_usage_error(error, "--memory-limit: %s", (*error)->message);
  fprintf(stderr, "  %s: running %d ranks for %d steps...\n", name, schedule->n_ranks,
          schedule->steps);
  StExecResult result;
  gint64 t0 = g_get_monotonic_time();
  StTimeline *t = st_execute(schedule, &o, &result, error);
  if (t == NULL) {
    g_prefix_error(error, "%s: ", name);
    return FALSE;
  }
  fprintf(stderr, "  %s: %s, %.2f s wall%s\n", name, result.device,
          (g_get_monotonic_time() - t0) / 1e6, result.interrupted ? " (interrupted)" : "");
  StSummary *sum = st_summary_new(t);
  sum->loss = g_steal_pointer(&result.loss);
  g_ptr_array_add(summaries, sum);
  if (sum->loss->len > 0) {
    g_autoptr(GString) line = g_string_new(NULL);
    for (guint i = 0; i < sum->loss->len; i++)
      g_string_append_printf(line, "%s%.4f", i ? " " : "", g_array_index(sum->loss, double, i));
    fprintf(stderr, "  %s: loss per step: %s\n", name, line->str);
  }
  st_exec_result_clear(&result);
  if (out_dir != NULL && !st_output_write_all(sum, out_dir, error))
    return FALSE;
  return TRUE;
}

static gboolean
run(int argc, char **argv, GError **error)
{
  StCliShared sh;
  st_cli_shared_init(&sh);
  RunArgs a = {g_strdup("auto"), g_strdup("auto"), 1234, 0, 600, NULL, NULL};
  const GOptionEntry entries[] = {
    {"schedule", 0, 0, G_OPTION_ARG_FILENAME, &a.schedule,
     "Run a stored schedule (from 'stagger schedule') instead of building one", "FILE"},
    {"backend", 0, 0, G_OPTION_ARG_STRING, &a.backend,
     "Device backend: cuda, host (CPU threads and reference kernels), or auto: cuda when a GPU "
     "answers (default: auto)",
     "NAME"},
    {"comm", 0, 0, G_OPTION_ARG_STRING, &a.comm,
     "Comm backend: local (ranks of this process), nccl (one process per GPU, as torchrun "
     "starts them), or auto (default: auto)",
     "NAME"},
    {"seed", 0, 0, G_OPTION_ARG_INT64, &a.seed, "Seed of weights and data (default: 1234)", "N"},
    {"lr", 0, 0, G_OPTION_ARG_DOUBLE, &a.lr,
     "Learning rate (default: 1e-3 for adam, 1e-2 for sgd)", "LR"},
    {"timeout", 0, 0, G_OPTION_ARG_DOUBLE, &a.timeout,
     "Seconds a collective may take before the run fails (default: 600)", "S"},
    {"memory-limit", 0, 0, G_OPTION_ARG_STRING, &a.memory_limit,
     "Bytes each rank may allocate, such as 8GiB (default: what the device has)", "SIZE"},
    {NULL},
  };
  g_autoptr(GOptionContext) ctx =
    g_option_context_new("- run training steps for real and measure them");
  g_option_context_set_summary(
    ctx, "Builds each --strategy's schedule as 'stagger sim' does (or reads --schedule) and\n"
         "runs it: real layers on synthetic data, real optimizer steps, real collectives.\n"
         "Writes the same report.json, trace.json and CSVs as a simulation, measured, plus\n"
         "the loss of every step. Ctrl-C stops at the next op and still writes them.");
  g_option_context_set_description(
    ctx, "Examples:\n"
         "  stagger run --model models/gpt2-124m.json --strategy zero --zero-stage 2 \\\n"
         "      --ranks 4 --micro-batch 8 --steps 20 --out runs/real\n"
         "  stagger run --schedule r50.schedule.json --backend host --out runs/host\n"
         "  stagger plot runs/real\n\n"
         "Without --cluster the ranks share this machine's one device.\n");
  GOptionGroup *shared = st_cli_shared_group(&sh);
  g_option_group_add_entries(shared, entries);
  g_option_context_set_main_group(ctx, shared);

  g_autoptr(GPtrArray) schedules = g_ptr_array_new_with_free_func((GDestroyNotify)st_schedule_free);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) summaries = g_ptr_array_new_with_free_func((GDestroyNotify)st_summary_free);
  StCliInputs in = {0};
  gboolean ok = g_option_context_parse(ctx, &argc, &argv, error) &&
                (argc <= 1 || st_cli_usage_error(error, "unexpected argument '%s'", argv[1]));
  static const char *const backends[] = {"auto", "host", "cuda", NULL};
  static const char *const comms[] = {"auto", "local", "nccl", NULL};
  if (ok && !g_strv_contains(backends, a.backend))
    ok = st_cli_usage_error(error, "--backend %s: expected auto, host or cuda", a.backend);
  if (ok && !g_strv_contains(comms, a.comm))
    ok = st_cli_usage_error(error, "--comm %s: expected auto, local or nccl", a.comm);
  if (ok && a.schedule != NULL) {
    StSchedule *s = st_schedule_load(a.schedule, error);
    ok = s != NULL && st_schedule_check(s, error);
    if (s != NULL) {
      g_ptr_array_add(schedules, s);
      g_ptr_array_add(names, g_path_get_basename(a.schedule));
    }
  } else if (ok) {
    g_auto(GStrv) list = st_cli_strategy_names(&sh, error);
    ok = list != NULL;
    if (ok && sh.cluster == NULL) {
      if (sh.model == NULL)
        ok = st_cli_usage_error(error, "--model FILE is required");
      else if ((in.cluster = local_cluster(error)) == NULL ||
               (in.model = st_model_load(sh.model, error)) == NULL)
        ok = FALSE;
    } else if (ok) {
      ok = st_cli_load_inputs(&sh, &in, error);
    }
    guint n = ok ? g_strv_length(list) : 0;
    for (guint i = 0; ok && i < n; i++) {
      StOptions o;
      if (!(ok = st_cli_options_for(&sh, (int)i, (int)n, &o, error)))
        break;
      g_autoptr(StCluster) cluster = st_cluster_copy(in.cluster);
      ok = st_cluster_resize(cluster, o.nodes, o.gpus, error);
      StSchedule *s = ok ? st_strategy_build(st_strategy_find(list[i]), in.model, cluster,
                                             in.profile, &o, error)
                         : NULL;
      st_options_clear(&o);
      ok = s != NULL;
      if (ok) {
        g_ptr_array_add(schedules, s);
        g_ptr_array_add(names, g_strdup(list[i]));
      }
    }
  }
  struct sigaction act = {.sa_handler = on_sigint}, old;
  sigemptyset(&act.sa_mask);
  sigaction(SIGINT, &act, &old);
  for (guint i = 0; ok && i < schedules->len; i++) {
    g_autofree char *dir =
      sh.out == NULL         ? NULL
      : schedules->len == 1  ? g_strdup(sh.out)
                             : g_build_filename(sh.out, g_ptr_array_index(names, i), NULL);
    ok = run_one(g_ptr_array_index(schedules, i), g_ptr_array_index(names, i), &a, dir,
                 summaries, error);
  }
  sigaction(SIGINT, &old, NULL);
  for (guint i = 0; i < summaries->len; i++) {
    printf("\n");
    st_summary_print(g_ptr_array_index(summaries, i), stdout);
  }
  if (summaries->len > 1)
    st_summary_print_compare((const StSummary *const *)summaries->pdata,
                             (const char *const *)names->pdata, (int)summaries->len, stdout);
  if (ok && sh.out == NULL)
    fprintf(stderr, "no --out DIR given: nothing written\n");
  st_cli_inputs_clear(&in);
  st_cli_shared_clear(&sh);
  g_free(a.backend);
  g_free(a.comm);
  g_free(a.memory_limit);
  g_free(a.schedule);
  return ok;
}

const StCommand st_cmd_run = {
  "run",
  "Run schedules for real (GPU or host) and measure time, memory and loss",
  run,
};
