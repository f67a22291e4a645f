/* cli_run.c: the training-run options of `sim` and `plan` (run/run.h,
 * docs/GOODPUT.md): what to train, checkpoints, failures, stragglers,
 * prices. Values are checked as they are parsed; the spec is assembled
 * once the cluster file is known (its storage and power entries). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

void
st_cli_run_init(StCliRun *r)
{
  memset(r, 0, sizeof *r);
  st_run_spec_init(&r->spec);
}

void
st_cli_run_clear(StCliRun *r)
{
  st_run_spec_clear(&r->spec);
  g_free(r->failure_rates);
  g_free(r->storage);
  g_clear_pointer(&r->intervals, g_array_unref);
  g_clear_pointer(&r->spares, g_array_unref);
}

/* "15T", "300B", "2.5e6", "1.2M": a count; K, M, B or G, T are 1e3, 1e6,
 * 1e9, 1e12. */
static gboolean
parse_amount(const char *option, const char *text, double *out, GError **error)
{
  char *end = NULL;
  double v = g_ascii_strtod(text, &end);
  double scale = 1;
  if (end != text && *end != '\0' && end[1] == '\0') {
    switch (*end) {
    case 'K': case 'k': scale = 1e3; break;
    case 'M': scale = 1e6; break;
    case 'B': case 'G': scale = 1e9; break;
    case 'T': scale = 1e12; break;
    default: scale = 0;
    }
    end++;
  }
  if (end == text || *end != '\0' || scale == 0 || !isfinite(v) || v <= 0)
    return st_cli_usage_error(error, "--%s '%s': a positive count, optionally with K, M, B "
                                     "(or G) or T (\"15T\", \"300B\", \"1e6\")",
                              option, text);
  *out = v * scale;
  return TRUE;
}

/* "90s", "30min", "2h", "1d", "0": seconds. */
static gboolean
parse_seconds(const char *option, const char *text, double *out, GError **error)
{
  static const struct {
    const char *unit;
    double s;
  } UNITS[] = {{"s", 1}, {"min", 60}, {"h", 3600}, {"d", 86400}};
  char *end = NULL;
  double v = g_ascii_strtod(text, &end);
  double scale = end != text && *end == '\0' && v == 0 ? 1 : 0;
  for (gsize i = 0; end != text && i < G_N_ELEMENTS(UNITS); i++)
    if (strcmp(g_strchug(end), UNITS[i].unit) == 0)
      scale = UNITS[i].s;
  if (end == text || scale == 0 || !isfinite(v) || v < 0)
    return st_cli_usage_error(error, "--%s '%s': a duration >= 0 with a unit s, min, h or d "
                                     "(\"30min\")",
                              option, text);
  *out = v * scale;
  return TRUE;
}

static gboolean
parse_double(const char *option, const char *text, double min, double *out, GError **error)
{
  char *end = NULL;
  double v = g_ascii_strtod(text, &end);
  if (end == text || *end != '\0' || !isfinite(v) || v < min)
    return st_cli_usage_error(error, "--%s '%s': a number >= %g", option, text, min);
  *out = v;
  return TRUE;
}

/* ---- one setter per option, and the table ------------------------------ */

typedef gboolean (*RunSetter)(StCliRun *r, const char *name, const char *value, GError **error);

static gboolean
set_tokens(StCliRun *r, const char *name, const char *value, GError **error)
{
  return parse_amount(name, value, &r->spec.train_tokens, error);
}

static gboolean
set_samples(StCliRun *r, const char *name, const char *value, GError **error)
{
  return parse_amount(name, value, &r->spec.train_samples, error);
}

static gboolean
set_ramp(StCliRun *r, const char *name, const char *value, GError **error)
{
  g_auto(GStrv) v = g_strsplit(value, ",", -1);
  double a = 0, b = 0, c = 0;
  if (g_strv_length(v) != 3 || !parse_amount(name, v[0], &a, NULL) ||
      !parse_amount(name, v[1], &b, NULL) || !parse_amount(name, v[2], &c, NULL))
    return st_cli_usage_error(error, "--%s '%s': START,INCREMENT,SAMPLES, three positive "
                                     "counts (Megatron-LM's)",
                              name, value);
  r->spec.ramp_start = (int64_t)a;
  r->spec.ramp_increment = (int64_t)b;
  r->spec.ramp_samples = c;
  return TRUE;
}

/* A comma list (plan searches it) or one value; the spec takes the first. */
static gboolean
set_interval(StCliRun *r, const char *name, const char *value, GError **error)
{
  g_auto(GStrv) items = g_strsplit(value, ",", -1);
  g_clear_pointer(&r->intervals, g_array_unref);
  r->intervals = g_array_new(FALSE, FALSE, sizeof(double));
  for (char **it = items; *it != NULL; it++) {
    double s = 0;
    const char *v = g_strstrip(*it);
    if (strcmp(v, "optimal") != 0 &&
        (!parse_seconds(name, v, &s, error) ||
         (s <= 0 && !st_cli_usage_error(error, "--%s '%s': a duration > 0, or 'optimal'", name,
                                        v))))
      return FALSE;
    g_array_append_val(r->intervals, s);
  }
  r->spec.ckpt_interval_s = g_array_index(r->intervals, double, 0);
  return TRUE;
}

static gboolean
set_async(StCliRun *r, const char *name, const char *value, GError **error)
{
  (void)name, (void)value, (void)error;
  r->spec.ckpt_async = TRUE;
  return TRUE;
}

static gboolean
set_writers(StCliRun *r, const char *name, const char *value, GError **error)
{
  if (strcmp(value, "first") != 0 && strcmp(value, "spread") != 0)
    return st_cli_usage_error(error, "--%s '%s': first or spread", name, value);
  r->spec.writers = value[0] == 's' ? ST_CKPT_WRITERS_SPREAD : ST_CKPT_WRITERS_FIRST;
  return TRUE;
}

static gboolean
set_storage(StCliRun *r, const char *name, const char *value, GError **error)
{
  (void)name, (void)error;
  g_free(r->storage);
  r->storage = g_strdup(value);
  return TRUE;
}

static gboolean
set_rates(StCliRun *r, const char *name, const char *value, GError **error)
{
  (void)name, (void)error;
  g_free(r->failure_rates);
  r->failure_rates = g_strdup(value);
  return TRUE;
}

static gboolean
set_restart(StCliRun *r, const char *name, const char *value, GError **error)
{
  StRunSpec *s = &r->spec;
  g_auto(GStrv) items = g_strsplit(value, ",", -1);
  for (char **it = items; *it != NULL; it++) {
    g_auto(GStrv) kv = g_strsplit(g_strstrip(*it), "=", 2);
    double *field = NULL;
    if (kv[0] != NULL && kv[1] != NULL)
      field = strcmp(kv[0], "detect") == 0     ? &s->detect_s
              : strcmp(kv[0], "relaunch") == 0 ? &s->relaunch_s
              : strcmp(kv[0], "init") == 0     ? &s->init_s
              : strcmp(kv[0], "repair") == 0   ? &s->repair_s
                                               : NULL;
    if (field == NULL)
      return st_cli_usage_error(error, "--%s '%s': KEY=DURATION,... with keys detect, "
                                       "relaunch, init, repair",
                                name, value);
    if (!parse_seconds(name, kv[1], field, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
set_spares(StCliRun *r, const char *name, const char *value, GError **error)
{
  g_auto(GStrv) items = g_strsplit(value, ",", -1);
  g_clear_pointer(&r->spares, g_array_unref);
  r->spares = g_array_new(FALSE, FALSE, sizeof(int));
  for (char **it = items; *it != NULL; it++) {
    double v = 0;
    if (!parse_double(name, g_strstrip(*it), 0, &v, error))
      return FALSE;
    int n = (int)MIN(v, 1e6);
    g_array_append_val(r->spares, n);
  }
  r->spec.spare_nodes = g_array_index(r->spares, int, 0);
  return TRUE;
}

static gboolean
set_sigma(StCliRun *r, const char *name, const char *value, GError **error)
{
  StRunSpec *s = &r->spec;
  g_auto(GStrv) v = g_strsplit(value, ",", -1);
  guint n = g_strv_length(v);
  if (n < 1 || n > 2)
    return st_cli_usage_error(error, "--%s '%s': GPU[,STEP]", name, value);
  if (!parse_double(name, v[0], 0, &s->sigma_gpu, error) ||
      (n == 2 && !parse_double(name, v[1], 0, &s->sigma_step, error)))
    return FALSE;
  return (s->sigma_gpu <= 1 && s->sigma_step <= 1) ||
         st_cli_usage_error(error, "--%s '%s': relative spreads in [0, 1]", name, value);
}

static gboolean
set_seed(StCliRun *r, const char *name, const char *value, GError **error)
{
  double v = 0;
  if (!parse_double(name, value, 0, &v, error))
    return FALSE;
  if (v > G_MAXUINT32 || v != floor(v))
    return st_cli_usage_error(error, "--%s '%s': an integer 0 .. %u", name, value, G_MAXUINT32);
  r->spec.seed = (guint32)v;
  return TRUE;
}

static gboolean
set_trials(StCliRun *r, const char *name, const char *value, GError **error)
{
  double v = 0;
  if (!parse_double(name, value, 1, &v, error))
    return FALSE;
  r->spec.trials = (int)MIN(v, 1e6);
  return TRUE;
}

static gboolean
set_price_gpu(StCliRun *r, const char *name, const char *value, GError **error)
{
  return parse_double(name, value, 0, &r->spec.price_gpu_hour, error);
}

static gboolean
set_price_kwh(StCliRun *r, const char *name, const char *value, GError **error)
{
  return parse_double(name, value, 0, &r->spec.price_kwh, error);
}

static const struct {
  const char *name, *arg, *help;
  RunSetter set;
} RUN_OPTIONS[] = {
  {"train-tokens", "N", "A whole training run of N tokens (\"15T\"): wall time, goodput, "
                        "GPU-hours, energy (docs/GOODPUT.md)", set_tokens},
  {"train-samples", "N", "The same in samples, for models that read no tokens", set_samples},
  {"rampup-batch-size", "START,INCR,SAMPLES",
   "Batch-size warm-up as Megatron-LM's: from START by INCR over SAMPLES samples", set_ramp},
  {"checkpoint-interval", "DURATION|optimal",
   "Work between checkpoints (\"30min\"; default: optimal, Daly 2006); plan: a list to try",
   set_interval},
  {"checkpoint-async", NULL,
   "Asynchronous checkpoints: the steps wait for the copy to host, the write overlaps",
   set_async},
  {"checkpoint-writers", "first|spread",
   "Who writes: each shard once by its first holder (default), or spread over replicas",
   set_writers},
  {"storage", "NAME", "The cluster file's storage tier to write to (default: its first; "
                      "without any, parallel-fs estimates)", set_storage},
  {"failure-rates", "FILE", "Interruption rates per GPU, node, link (JSON; default: Llama 3's "
                            "54-day snapshot, Table 5)", set_rates},
  {"restart-time", "KEY=DURATION,...",
   "detect (2min), relaunch (5min), init (1min), repair (4h) (defaults in brackets)",
   set_restart},
  {"spare-nodes", "N", "Nodes the job holds to replace failed ones (default: the site's pool "
                       "replaces them at once); plan: a list to try", set_spares},
  {"straggler-sigma", "GPU[,STEP]",
   "Spread of GPU speeds, persistent and per step (default: 0.011,0.01)", set_sigma},
  {"seed", "N", "Seed of the training run's Monte Carlo (default: 1)", set_seed},
  {"run-trials", "N", "Monte Carlo trials of the training run (default: 400)", set_trials},
  {"price-gpu-hour", "PRICE", "Price of a GPU-hour (default: not priced)", set_price_gpu},
  {"price-kwh", "PRICE", "Price of a kWh at the facility (default: not priced)", set_price_kwh},
};

static gboolean
on_run_option(const char *option_name, const char *value, gpointer data, GError **error)
{
  StCliRun *r = data;
  const char *name = option_name + 2; /* "--" */
  r->given = TRUE;
  for (gsize i = 0; i < G_N_ELEMENTS(RUN_OPTIONS); i++)
    if (strcmp(RUN_OPTIONS[i].name, name) == 0)
      return RUN_OPTIONS[i].set(r, name, value, error);
  g_return_val_if_reached(FALSE);
}

GOptionGroup *
st_cli_run_group(StCliRun *r)
{
  GOptionEntry entries[G_N_ELEMENTS(RUN_OPTIONS) + 1];
  for (gsize i = 0; i < G_N_ELEMENTS(RUN_OPTIONS); i++)
    entries[i] = (GOptionEntry){RUN_OPTIONS[i].name,
                                0,
                                RUN_OPTIONS[i].arg == NULL ? G_OPTION_FLAG_NO_ARG : 0,
                                G_OPTION_ARG_CALLBACK,
                                (gpointer)on_run_option,
                                RUN_OPTIONS[i].help,
                                RUN_OPTIONS[i].arg};
  entries[G_N_ELEMENTS(RUN_OPTIONS)] = (GOptionEntry){NULL};
  GOptionGroup *group =
    g_option_group_new("run", "A whole training run (docs/GOODPUT.md):",
                       "Show the training-run options", r, NULL);
  /* The group copies the entries. */
  g_option_group_add_entries(group, entries);
  return group;
}

gboolean
st_cli_run_wanted(const StCliRun *r)
{
  return r->spec.train_tokens > 0 || r->spec.train_samples > 0;
}

gboolean
st_cli_run_prepare(StCliRun *r, const char *cluster_path, gboolean lists, GError **error)
{
  if (!r->given)
    return TRUE;
  if (!lists && ((r->intervals != NULL && r->intervals->len > 1) ||
                 (r->spares != NULL && r->spares->len > 1)))
    return st_cli_usage_error(error, "--checkpoint-interval, --spare-nodes: one value here; "
                                     "stagger plan tries a list");
  if (!st_cli_run_wanted(r))
    return st_cli_usage_error(error, "the training-run options need --train-tokens or "
                                     "--train-samples: what to train");
  if (r->failure_rates != NULL && !st_failure_rates_load(r->failure_rates, &r->spec.rates, error))
    return FALSE;
  if (cluster_path != NULL) {
    st_power_clear(&r->spec.power);
    r->spec.power.pue = 0;
    if (!st_run_site_load(cluster_path, r->storage, &r->spec.storage, &r->spec.power, error))
      return FALSE;
    r->spec.power_given = r->spec.power.pue >= 1;
  } else if (r->storage != NULL && strcmp(r->storage, r->spec.storage.name) != 0) {
    return st_cli_usage_error(error, "--storage %s: no cluster file names it", r->storage);
  }
  g_autoptr(GError) local = NULL;
  if (!st_run_spec_check(&r->spec, &local))
    return st_cli_usage_error(error, "%s", local->message);
  return TRUE;
}
