/* cli_exec.c: what `run` and `validate` share: the executor's options, the
 * one-device cluster of this machine, running one schedule, and the SIGINT
 * (Ctrl-C) or SIGTERM (what batch schedulers send before they kill) that
 * stops a run at the next op, keeping what was measured. */
#include <signal.h>
#include <string.h>

#include "base/json.h"
#include "base/units.h"
#include "base/util.h"
#include "cli/cli.h"
#include "engine/engine.h"
#include "exec/dataset.h"

void
st_cli_exec_init(StCliExec *e)
{
  /* Strings start NULL ("auto"): GOption replaces a string without freeing it. */
  *e = (StCliExec){NULL, NULL, 1234, 0, 600, NULL, NULL, 0, NULL};
}

void
st_cli_exec_clear(StCliExec *e)
{
  g_clear_pointer(&e->backend, g_free);
  g_clear_pointer(&e->comm, g_free);
  g_clear_pointer(&e->memory_limit, g_free);
  g_clear_pointer(&e->data, g_free);
  g_clear_pointer(&e->dataset, st_dataset_free);
}

void
st_cli_exec_add_entries(StCliExec *e, GOptionGroup *group)
{
  const GOptionEntry entries[] = {
    {"backend", 0, 0, G_OPTION_ARG_STRING, &e->backend,
     "Device backend: cuda, host (CPU threads and reference kernels), or auto: cuda when a GPU "
     "answers (default: auto)",
     "NAME"},
    {"comm", 0, 0, G_OPTION_ARG_STRING, &e->comm,
     "Comm backend: local (ranks of this process), nccl (one process per GPU, as torchrun "
     "starts them), or auto (default: auto)",
     "NAME"},
    {"seed", 0, 0, G_OPTION_ARG_INT64, &e->seed, "Seed of weights and data (default: 1234)", "N"},
    {"lr", 0, 0, G_OPTION_ARG_DOUBLE, &e->lr,
     "Learning rate (default: 1e-3 for adam, 1e-2 for sgd)", "LR"},
    {"timeout", 0, 0, G_OPTION_ARG_DOUBLE, &e->timeout,
     "Seconds a collective may take before the run fails (default: 600)", "S"},
    {"memory-limit", 0, 0, G_OPTION_ARG_STRING, &e->memory_limit,
     "Bytes each rank may allocate, such as 8GiB (default: what the device has)", "SIZE"},
    {"data", 0, 0, G_OPTION_ARG_FILENAME, &e->data,
     "Train on a labelled CSV data set (features, then the class; tests/data/digits) instead of "
     "synthetic samples; 20 % of its rows are held out and the report gives the held-out loss "
     "and accuracy",
     "FILE"},
    {"eval-every", 0, 0, G_OPTION_ARG_INT, &e->eval_every,
     "With --data: the held-out figures after every K steps too, each from a run of that many "
     "steps with the same seed (default: after the last step only)",
     "K"},
    {NULL},
  };
  g_option_group_add_entries(group, entries);
}

/* The signal that asked the run to stop (the executor reads it as a flag). */
static volatile int stop_requested;

static void
on_stop(int sig)
{
  stop_requested = sig;
}

int
st_cli_exec_stop_signal(void)
{
  return stop_requested;
}

gboolean
st_cli_exec_options(StCliExec *e, StExecOptions *o, GError **error)
{
  static const char *const backends[] = {"auto", "host", "cuda", NULL};
  static const char *const comms[] = {"auto", "local", "nccl", NULL};
  const char *backend = e->backend != NULL ? e->backend : "auto";
  const char *comm = e->comm != NULL ? e->comm : "auto";
  if (!g_strv_contains(backends, backend))
    return st_cli_usage_error(error, "--backend %s: expected auto, host or cuda", backend);
  if (!g_strv_contains(comms, comm))
    return st_cli_usage_error(error, "--comm %s: expected auto, local or nccl", comm);
  /* NaN fails too; beyond 11.6 days a deadline in us overflows nothing but helps no one. */
  if (!(e->timeout > 0 && e->timeout <= 1e6))
    return st_cli_usage_error(error, "--timeout %g: must be positive, at most 1e6 s",
                              e->timeout);
  st_exec_options_init(o);
  o->device = backend;
  o->comm = comm;
  o->seed = (uint64_t)e->seed;
  o->lr = e->lr;
  o->timeout_s = e->timeout;
  o->stop = &stop_requested;
  g_autoptr(GError) local = NULL;
  if (e->memory_limit != NULL &&
      (!st_parse_bytes(e->memory_limit, &o->memory_limit, &local) ||
       !st_range_check(&ST_RANGE_SIZE, (double)o->memory_limit, e->memory_limit,
                       &local)))
    return st_cli_usage_error(error, "--memory-limit: %s", local->message);
  if (e->eval_every < 0 || (e->eval_every > 0 && e->data == NULL))
    return st_cli_usage_error(error, "--eval-every %d: needs --data FILE and K >= 1",
                              e->eval_every);
  if (e->data != NULL && e->dataset == NULL &&
      (e->dataset = st_dataset_load(e->data, error)) == NULL) {
    g_prefix_error(error, "--data: ");
    return FALSE;
  }
  o->data = e->dataset;
  return TRUE;
}

void
st_cli_exec_catch_sigint(gboolean catching)
{
  static const int signals[] = {SIGINT, SIGTERM};
  static struct sigaction old[G_N_ELEMENTS(signals)];
  for (gsize i = 0; i < G_N_ELEMENTS(signals); i++) {
    if (catching) {
      struct sigaction act = {.sa_handler = on_stop};
      sigemptyset(&act.sa_mask);
      sigaction(signals[i], &act, &old[i]);
    } else {
      sigaction(signals[i], &old[i], NULL);
    }
  }
}

/* The background jobs of a multiplexed run, a line per rank, on stderr. */
static void
print_background(const char *name, const GPtrArray *background)
{
  for (guint i = 0; background != NULL && i < background->len; i++) {
    const StExecBackground *b = g_ptr_array_index(background, i);
    fprintf(stderr, "  %s: background job %d, rank %d on GPU %d: %d iterations", name, b->job,
            b->rank, b->device, b->iterations);
    if (b->loss != NULL && b->loss->len > 0)
      fprintf(stderr, ", loss %.4f -> %.4f", g_array_index(b->loss, double, 0),
              g_array_index(b->loss, double, b->loss->len - 1));
    fprintf(stderr, "\n");
  }
}

/* Measured steps after the warm-up, at least. */
#define MEASURED_STEPS 3

void
st_cli_exec_auto_steps(StSchedule *s, const StSummary *predicted, StSteady *window)
{
  g_return_if_fail(s->steps == 0);
  int period = MAX(predicted->steady.converged ? predicted->steady.period : 1, 1);
  int first = MAX(predicted->warmup_steps, 1);
  int measured = period * ((MEASURED_STEPS + period - 1) / period);
  *window = (StSteady){.auto_steps = TRUE, .first = first, .last = first + measured - 1};
  s->steps = first + measured + 1;
}

gboolean
st_cli_exec_auto_steps_simulated(StSchedule *s, const StProfile *profile, const char *comm_algo,
                                 StSteady *window, GError **error)
{
  StEngineOptions eo = {profile, comm_algo, NULL, FALSE, NULL};
  g_autoptr(StTimeline) t = st_simulate(s, &eo, NULL, error);
  if (t == NULL) {
    g_prefix_error(error, "predicting the steady state for --steps auto: ");
    return FALSE;
  }
  g_autoptr(StSummary) predicted = st_summary_new(t);
  st_cli_exec_auto_steps(s, predicted, window);
  return TRUE;
}

/* The held-out figures of the weights a run of `steps` steps of `s` ends
 * with: a run of its own (its timeline is dropped), or `weights` when
 * given (the measured run's). */
static gboolean
evaluate_at(StSchedule *s, const StExecOptions *o, int32_t steps, const GPtrArray *weights,
            GArray *eval, GError **error)
{
  StExecResult result = {0};
  if (weights == NULL) {
    StExecOptions again = *o;
    again.keep_weights = TRUE;
    int32_t all = s->steps;
    s->steps = steps;
    StTimeline *t = st_execute(s, &again, &result, error);
    s->steps = all;
    if (t == NULL)
      return FALSE;
    st_timeline_free(t);
    weights = result.weights;
    /* steps trained: a multiplexed foreground runs some before its own */
    steps = (int32_t)result.loss->len;
  }
  StEvalPoint p = {.steps = steps};
  gboolean ok = st_dataset_evaluate(o->data, s->model, weights, &p.loss, &p.accuracy, error);
  st_exec_result_clear(&result);
  if (ok)
    g_array_append_val(eval, p);
  return ok;
}

StSummary *
st_cli_exec_run(StSchedule *schedule, const char *name, const StExecOptions *options,
                int eval_every, const StSteady *window, GPtrArray *timelines,
                char **admissions_csv, GError **error)
{
  StExecOptions kept = *options; /* with a data set, the final weights are evaluated */
  kept.keep_weights = options->keep_weights || options->data != NULL;
  const StExecOptions *o = &kept;
  g_autoptr(GArray) eval = o->data != NULL ? g_array_new(FALSE, FALSE, sizeof(StEvalPoint)) : NULL;
  for (int32_t k = eval_every; eval != NULL && k > 0 && k < schedule->steps; k += eval_every)
    if (!evaluate_at(schedule, options, k, NULL, eval, error)) {
      g_prefix_error(error, "%s: held-out evaluation after %d steps: ", name, k);
      return NULL;
    }
  fprintf(stderr, "  %s: running %d rank%s for %d step%s...\n", name, schedule->n_ranks,
          st_plural(schedule->n_ranks), schedule->steps, st_plural(schedule->steps));
  StExecResult result;
  gint64 t0 = g_get_monotonic_time();
  StTimeline *t = st_execute(schedule, o, &result, error);
  if (t == NULL) {
    g_prefix_error(error, "%s: ", name);
    return NULL;
  }
  fprintf(stderr, "  %s: %s, %.2f s wall%s\n", name, result.device,
          (g_get_monotonic_time() - t0) / 1e6, result.interrupted ? " (interrupted)" : "");
  if (result.priorities != NULL)
    fprintf(stderr, "  %s: stream priorities: %s\n", name, result.priorities);
  g_ptr_array_add(timelines, t);
  if (window != NULL && t->steps > 0) {
    /* The predicted window, as much of it as ran (Ctrl-C); the schedule
     * says auto again, as it was given (the report shows the steps run). */
    t->steady = *window;
    t->steady.last = MIN(t->steady.last, t->steps - 1);
    t->steady.first = MIN(t->steady.first, t->steady.last);
    schedule->steps = 0;
  }
  StSummary *sum = st_summary_new(t);
  sum->loss = g_steal_pointer(&result.loss);
  if (eval != NULL && sum->loss->len > 0) {
    if (!evaluate_at(schedule, o, (int32_t)sum->loss->len, result.weights, eval, error)) {
      g_prefix_error(error, "%s: held-out evaluation: ", name);
      st_exec_result_clear(&result);
      st_summary_free(sum);
      return NULL;
    }
    const StEvalPoint *last = &g_array_index(eval, StEvalPoint, eval->len - 1);
    fprintf(stderr, "  %s: held-out (%d rows of %s) after %d steps: loss %.4f, accuracy %.2f %%\n",
            name, o->data->n_heldout, o->data->path, last->steps, last->loss,
            100 * last->accuracy);
    sum->eval = g_steal_pointer(&eval);
  }
  if (sum->loss->len > 0) {
    g_autoptr(GString) line = g_string_new(NULL);
    for (guint i = 0; i < sum->loss->len; i++)
      g_string_append_printf(line, "%s%.4f", i ? " " : "", g_array_index(sum->loss, double, i));
    fprintf(stderr, "  %s: loss per step: %s\n", name, line->str);
  }
  print_background(name, result.background);
  *admissions_csv = result.admissions != NULL && result.admissions->len > 0
                      ? st_exec_admissions_csv(result.admissions)
                      : NULL;
  st_exec_result_clear(&result);
  return sum;
}

gboolean
st_cli_write_admissions(const char *dir, const char *csv, GError **error)
{
  if (csv == NULL)
    return TRUE;
  g_autofree char *path = g_build_filename(dir, "admission.csv", NULL);
  return g_file_set_contents(path, csv, -1, error);
}

StCluster *
st_cli_local_cluster(const char *gpu_name, GError **error)
{
  g_autofree char *text = g_strdup_printf(
    "{\"name\": \"local\", \"note\": \"this machine, one device; rates unknown (a profile of "
    "the device gives measured ones)\", \"nodes\": 1, \"gpus_per_node\": 1, \"gpu\": "
    "{\"name\": \"%s\", \"memory\": \"1TiB\", \"flops\": {\"fp32\": \"1TFLOP/s\"}, "
    "\"memory_bandwidth\": \"100GB/s\"}, \"links\": {}}",
    gpu_name);
  g_autoptr(cJSON) root = st_json_parse(text, strlen(text), "<local cluster>", error);
  return root != NULL ? st_cluster_from_json(root, "<local cluster>", error) : NULL;
}
