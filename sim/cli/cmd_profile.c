/* cmd_profile.c: `stagger profile`: measured costs in the profile format
 * (profile/profile.h), from three sources:
 *   stagger profile --model M --batches LIST --out P   kernels of a model
 *   stagger profile --links --out P                    collectives and p2p
 *   stagger profile import deeppool FILE --model M --out P
 *   stagger profile --import-kineto TRACE --model M --out P
 * The first two measure on this machine through the executor's backends
 * (exec/profiler.h); the third turns a per-layer profile published by the
 * DeepPool authors into a stagger profile (profile/profile_import_deeppool.h),
 * the fourth a PyTorch profiler trace of the user's own job
 * (profile/profile_import_kineto.h).
 * Progress goes to stderr, one line redrawn when it is a terminal. */
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/units.h"
#include "cli/cli.h"
#include "exec/profiler.h"
#include "profile/profile_import_deeppool.h"
#include "profile/profile_import_kineto.h"

/* The GPU name of models/clusters/dgx-a100.json, so that the simulator uses
 * DeepPool's A100 numbers on that cluster; --device names another. */
#define DEFAULT_DEVICE "A100-SXM4-80GB"

/* A file as given, else a shipped model by name (as `stagger model` does). */
static char *
resolve_model(const char *model)
{
  if (g_file_test(model, G_FILE_TEST_EXISTS) || strchr(model, G_DIR_SEPARATOR) != NULL)
    return g_strdup(model);
  const char *data = g_getenv("STAGGER_DATA_DIR");
  if (data == NULL || data[0] == '\0')
    data = STAGGER_DATA_DIR;
  g_autofree char *file = g_str_has_suffix(model, ".json") ? g_strdup(model)
                                                            : g_strconcat(model, ".json", NULL);
  g_autofree char *shipped = g_build_filename(data, "models", file, NULL);
  return g_file_test(shipped, G_FILE_TEST_EXISTS) ? g_steal_pointer(&shipped) : g_strdup(model);
}

static gboolean
make_parent(const char *out, GError **error)
{
  g_autofree char *dir = g_path_get_dirname(out);
  if (g_mkdir_with_parents(dir, 0755) != 0) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_IO, "%s: cannot create directory", dir);
    return FALSE;
  }
  return TRUE;
}

static gboolean
import_deeppool(const char *file, const char *model_arg, const char *out, const char *device,
                GError **error)
{
  g_autofree char *model_path = resolve_model(model_arg);
  g_autoptr(StModel) model = st_model_load(model_path, error);
  if (model == NULL)
    return FALSE;
  StDeepPoolImport stats = {0};
  g_autoptr(StProfile) profile = st_profile_import_deeppool(file, model, device, &stats, error);
  if (profile == NULL)
    return FALSE;
  if (!make_parent(out, error) || !st_profile_save(profile, out, error)) {
    st_deeppool_import_clear(&stats);
    return FALSE;
  }
  printf("%s: %d rows over %d batch sizes -> %d entries (layer signature x batch, fwd+bwd) "
         "for %s on %s\n",
         out, stats.rows, stats.batches, stats.entries, model->name, device);
  if (stats.missing->len > 0) {
    printf("layers without a DeepPool row (they keep roofline estimates):");
    for (guint i = 0; i < stats.missing->len; i++)
      printf("%s %s", i ? "," : "", (const char *)g_ptr_array_index(stats.missing, i));
    printf("\n");
  }
  st_deeppool_import_clear(&stats);
  return TRUE;
}

static gboolean
import_kineto(const char *file, const char *model_arg, const char *out,
              const StKinetoOptions *options, GError **error)
{
  g_autofree char *model_path = resolve_model(model_arg);
  g_autoptr(StModel) model = st_model_load(model_path, error);
  if (model == NULL)
    return FALSE;
  StKinetoImport stats = {0};
  g_autoptr(StProfile) profile = st_profile_import_kineto(file, model, options, &stats, error);
  gboolean ok = profile != NULL && make_parent(out, error) && st_profile_save(profile, out, error);
  if (ok) {
    printf("%s: %d layer entries (forward and backward apart) at batch %" G_GINT64_FORMAT
           "%s, %d link entries, for %s on %s, from %d %s events over %d steps\n",
           out, stats.entries, stats.batch, stats.optimizer ? ", the optimizer step" : "",
           stats.links, model->name, stats.device, stats.events, stats.gpu ? "GPU" : "CPU",
           stats.steps);
    if (stats.missing->len > 0) {
      printf("layers without a range in the trace (they keep the simulator's estimates):");
      for (guint i = 0; i < stats.missing->len; i++)
        printf("%s %s", i ? "," : "", (const char *)g_ptr_array_index(stats.missing, i));
      printf("\n");
    }
    if (stats.unattributed_ns > 0)
      printf("not attributed to a layer, the optimizer or a collective: %.1f us per step (%s)\n",
             stats.unattributed_ns / 1e3, stats.unattributed_top);
    if (stats.comm_unknown > 0)
      printf("NCCL kernels without a known size or group (no link entry): %d\n",
             stats.comm_unknown);
    if (stats.orphans > 0)
      printf("GPU kernels whose correlation id matches no launch (given to no layer): %d\n",
             stats.orphans);
  }
  st_kineto_import_clear(&stats);
  return ok;
}

/* ---- progress on stderr ------------------------------------------------------- */

typedef struct {
  gboolean tty;
  int width; /* of the last line drawn, to blank what a shorter one leaves */
} Progress;

static void
progress(gpointer data, int done, int total, const char *what)
{
  Progress *p = data;
  if (!p->tty) {
    fprintf(stderr, "[%d/%d] %s\n", done, total, what);
    return;
  }
  enum { BAR = 30 };
  char bar[BAR + 1];
  int filled = total > 0 ? done * BAR / total : BAR;
  for (int i = 0; i < BAR; i++)
    bar[i] = i < filled ? '#' : '.';
  bar[BAR] = '\0';
  int width = fprintf(stderr, "\r[%s] %d/%d %.60s", bar, done, total, what);
  if (width < p->width)
    fprintf(stderr, "%*s", p->width - width, "");
  p->width = width;
  if (done >= total)
    fprintf(stderr, "\n");
  fflush(stderr);
}

/* ---- measuring ----------------------------------------------------------------- */

typedef struct {
  char *model, *out, *device, *cluster, *backend, *comm, *precision, *batches, *ranks, *sizes;
  char *kineto, *link;
  gint64 batch;
  gboolean links, sharing;
  int warmup, repeats;
  double timeout;
} Args;

static void
args_clear(Args *a)
{
  char **strings[] = {&a->model,    &a->out,       &a->device,  &a->cluster, &a->backend,
                      &a->comm,     &a->precision, &a->batches, &a->ranks,   &a->sizes,
                      &a->kineto,   &a->link};
  for (gsize i = 0; i < G_N_ELEMENTS(strings); i++)
    g_clear_pointer(strings[i], g_free);
}

/* "1,2,4" into positive ints of at least `min`; `option` names it in errors. */
static gboolean
parse_list(const char *option, const char *text, int min, GArray *out, GError **error)
{
  g_auto(GStrv) items = g_strsplit(text, ",", -1);
  for (char **it = items; *it != NULL; it++) {
    char *end = NULL;
    gint64 v = g_ascii_strtoll(g_strstrip(*it), &end, 10);
    if (**it == '\0' || end == NULL || *end != '\0' || v < min || v > G_MAXINT32)
      return st_cli_usage_error(error, "%s %s: '%s' is not an integer >= %d", option, text, *it,
                                min);
    int value = (int)v;
    g_array_append_val(out, value);
  }
  return TRUE;
}

/* --sizes MIN:MAX, each with a unit ("1KiB:64MiB"). */
static gboolean
parse_sizes(const char *text, int64_t *min, int64_t *max, GError **error)
{
  g_auto(GStrv) parts = g_strsplit(text, ":", -1);
  GError *local = NULL;
  if (g_strv_length(parts) != 2)
    return st_cli_usage_error(error, "--sizes %s: expected MIN:MAX, such as 1KiB:256MiB", text);
  if (!st_parse_bytes(parts[0], min, &local) || !st_parse_bytes(parts[1], max, &local)) {
    gboolean r = st_cli_usage_error(error, "--sizes %s: %s", text, local->message);
    g_error_free(local);
    return r;
  }
  if (*min < 4 || *max < *min)
    return st_cli_usage_error(error, "--sizes %s: expected 4B <= MIN <= MAX", text);
  return TRUE;
}

/* What names the entries: --device, else --cluster's GPU, else the device's
 * own name (NULL here). Transfer full. */
static gboolean
device_name(const Args *a, char **name, GError **error)
{
  *name = NULL;
  if (a->device != NULL && a->cluster != NULL)
    return st_cli_usage_error(error, "--device and --cluster both name the device: give one");
  if (a->cluster != NULL) {
    g_autoptr(StCluster) c = st_cluster_load(a->cluster, error);
    if (c == NULL)
      return FALSE;
    *name = g_strdup(c->gpu.name);
  } else {
    *name = g_strdup(a->device);
  }
  return TRUE;
}

static void
print_summary(const Args *a, const StProfile *p, const StProfilerReport *r)
{
  for (guint i = 0; i < r->notes->len; i++)
    fprintf(stderr, "note: %s\n", (const char *)g_ptr_array_index(r->notes, i));
  printf("%s: %d layer and kernel entries, %d link entries, %d copies, %d sharing "
         "measurements for device '%s'\n  measured on %s\n",
         a->out, st_profile_n_layer_entries(p), st_profile_n_link_entries(p),
         st_profile_n_copy_entries(p), st_profile_n_sharing_entries(p), r->device,
         r->machine != NULL ? r->machine : "(unknown)");
  if (a->device == NULL && a->cluster == NULL)
    printf("  the simulator uses them on a cluster whose gpu.name is '%s' (--device NAME or "
           "--cluster FILE names them otherwise)\n",
           r->device);
}

static gboolean
measure(Args *a, GError **error)
{
  if (a->out == NULL)
    return st_cli_usage_error(error, "--out FILE is required");
  if (a->links == (a->model != NULL))
    return st_cli_usage_error(error, "give --model M --batches LIST (kernels) or --links, "
                                     "not both");
  if (a->model != NULL && a->batches == NULL)
    return st_cli_usage_error(error, "--model needs --batches LIST (such as 1,2,4,8)");
  if (a->links && (a->batches != NULL || a->sharing || a->precision != NULL))
    return st_cli_usage_error(error, "--batches, --sharing and --precision are for --model");
  if (!a->links && (a->ranks != NULL || a->comm != NULL))
    return st_cli_usage_error(error, "--ranks and --comm are for --links");
  static const char *const backends[] = {"auto", "host", "cuda", NULL};
  static const char *const comms[] = {"auto", "local", "nccl", NULL};
  if (a->backend != NULL && !g_strv_contains(backends, a->backend))
    return st_cli_usage_error(error, "--backend %s: expected auto, host or cuda", a->backend);
  if (a->comm != NULL && !g_strv_contains(comms, a->comm))
    return st_cli_usage_error(error, "--comm %s: expected auto, local or nccl", a->comm);
  if (a->warmup < 0 || a->warmup > 100000 || a->repeats < 1 || a->repeats > 100000)
    return st_cli_usage_error(error, "--warmup must be in [0, 100000] and --repeats in [1, "
                                     "100000]");
  if (!(a->timeout > 0 && a->timeout <= 1e6)) /* NaN fails too */
    return st_cli_usage_error(error, "--timeout must be > 0 seconds, at most 1e6");
  StProfilerOptions o;
  st_profiler_options_init(&o);
  if (a->precision != NULL && !st_precision_parse(a->precision, &o.precision, error)) {
    g_autofree char *why = g_strdup((*error)->message);
    g_clear_error(error);
    return st_cli_usage_error(error, "--precision: %s", why);
  }
  if (o.precision == ST_PRECISION_FP8)
    return st_cli_usage_error(error, "--precision fp8: the profiler's kernels run fp32 and bf16 "
                                     "(FP8 GEMMs are simulated only); profile with mixed");
  g_autoptr(GArray) batches = g_array_new(FALSE, FALSE, sizeof(int));
  g_autoptr(GArray) ranks = g_array_new(FALSE, FALSE, sizeof(int));
  if ((a->batches != NULL && !parse_list("--batches", a->batches, 1, batches, error)) ||
      (a->ranks != NULL && !parse_list("--ranks", a->ranks, 2, ranks, error)) ||
      (a->sizes != NULL && !parse_sizes(a->sizes, &o.min_bytes, &o.max_bytes, error)))
    return FALSE;
  g_autofree char *name = NULL;
  if (!device_name(a, &name, error))
    return FALSE;
  g_autofree char *model_path = a->model != NULL ? resolve_model(a->model) : NULL;
  g_autoptr(StModel) model = model_path != NULL ? st_model_load(model_path, error) : NULL;
  if (model_path != NULL && model == NULL)
    return FALSE;
  Progress bar = {isatty(STDERR_FILENO) != 0, 0};
  o.backend = a->backend != NULL ? a->backend : "auto";
  o.comm = a->comm != NULL ? a->comm : "auto";
  o.device_name = name;
  o.warmup = a->warmup;
  o.repeats = a->repeats;
  o.sharing = a->sharing;
  o.timeout_s = a->timeout;
  o.ranks = ranks->len > 0 ? (const int *)(gpointer)ranks->data : NULL;
  o.n_ranks = (int)ranks->len;
  o.progress = progress;
  o.progress_data = &bar;
  g_autoptr(StProfile) profile = st_profile_new();
  StProfilerReport report = {0};
  gboolean ok = a->links ? st_profiler_links(&o, profile, &report, error)
                         : st_profiler_model(model, (const int *)(gpointer)batches->data,
                                             (int)batches->len, &o, profile, &report, error);
  if (bar.tty && bar.width > 0 && !ok)
    fprintf(stderr, "\n");
  if (ok && report.writer)
    ok = make_parent(a->out, error) && st_profile_save(profile, a->out, error);
  if (ok && report.writer)
    print_summary(a, profile, &report);
  st_profiler_report_clear(&report);
  return ok;
}

static gboolean
run(int argc, char **argv, GError **error)
{
  Args a = {.warmup = 5, .repeats = 30, .timeout = 300};
  const GOptionEntry entries[] = {
    {"model", 0, 0, G_OPTION_ARG_FILENAME, &a.model,
     "Profile this model's layers (a file or a shipped model's name); with import deeppool: "
     "the model the imported rows map to",
     "M"},
    {"batches", 0, 0, G_OPTION_ARG_STRING, &a.batches,
     "Batch sizes to profile every layer at, a comma list such as 1,2,4,8", "LIST"},
    {"links", 0, 0, G_OPTION_ARG_NONE, &a.links,
     "Profile collectives and send/receive instead of a model's kernels", NULL},
    {"out", 0, 0, G_OPTION_ARG_FILENAME, &a.out, "The profile file to write", "FILE"},
    {"backend", 0, 0, G_OPTION_ARG_STRING, &a.backend,
     "Device backend: cuda, host (CPU threads and reference kernels), or auto: cuda when a GPU "
     "answers (default: auto)",
     "NAME"},
    {"precision", 0, 0, G_OPTION_ARG_STRING, &a.precision,
     "fp32, or mixed: layers in bf16, optimizer states in fp32 (default: fp32)", "P"},
    {"warmup", 0, 0, G_OPTION_ARG_INT, &a.warmup,
     "Untimed runs before the timed ones (default: 5)", "N"},
    {"repeats", 0, 0, G_OPTION_ARG_INT, &a.repeats,
     "Timed runs of each measurement; the median and the spread p90 - p10 are kept "
     "(default: 30)",
     "N"},
    {"sharing", 0, 0, G_OPTION_ARG_NONE, &a.sharing,
     "Also run each layer pass as 2 and 4 copies on as many streams, and as a pair with "
     "priorities, and store the fill the simulator's sharing model needs",
     NULL},
    {"sizes", 0, 0, G_OPTION_ARG_STRING, &a.sizes,
     "Sizes of copies and links: powers of 4 from MIN to MAX (default: 1KiB:256MiB on a GPU, "
     "1KiB:16MiB on the host)",
     "MIN:MAX"},
    {"ranks", 0, 0, G_OPTION_ARG_STRING, &a.ranks,
     "Rank counts of the links, a comma list (default: 2, 4, ... up to the processes torchrun "
     "started, or 2,4 on one device)",
     "LIST"},
    {"comm", 0, 0, G_OPTION_ARG_STRING, &a.comm,
     "Comm backend of the links: local (ranks of this process on one device), nccl (one "
     "process per GPU under torchrun or mpirun), or auto (default: auto)",
     "NAME"},
    {"timeout", 0, 0, G_OPTION_ARG_DOUBLE, &a.timeout,
     "Seconds a collective may take before the profile fails (default: 300)", "S"},
    {"device", 0, 0, G_OPTION_ARG_STRING, &a.device,
     "The device name the entries carry: a cluster file's gpu.name (default: the measured "
     "device's own name, \"host\" on the host; with import deeppool: " DEFAULT_DEVICE ")",
     "NAME"},
    {"cluster", 0, 0, G_OPTION_ARG_FILENAME, &a.cluster,
     "Name the entries after this cluster's gpu.name", "FILE"},
    {"import-kineto", 0, 0, G_OPTION_ARG_FILENAME, &a.kineto,
     "Import a PyTorch profiler trace (export_chrome_trace's JSON) of --model's training: "
     "per-layer forward and backward times from its record_function ranges named after the "
     "layers, NCCL collectives as links (docs/INTEROP.md)",
     "TRACE"},
    {"batch", 0, 0, G_OPTION_ARG_INT64, &a.batch,
     "With --import-kineto: samples per traced micro-batch (default: from the traced shapes)",
     "N"},
    {"link", 0, 0, G_OPTION_ARG_STRING, &a.link,
     "With --import-kineto: the link class the traced collectives ran over (intra_node, "
     "inter_node, pcie; default: intra_node)",
     "CLASS"},
    {NULL},
  };
  g_autoptr(GOptionContext) context =
    g_option_context_new("[import deeppool FILE] - measure kernel and link costs");
  g_option_context_set_summary(
    context,
    "Measures what the simulator's cost models need, on this machine, into a profile file\n"
    "(docs/FORMATS.md) that --profile reads:\n"
    "  --model M --batches LIST  every layer of M, forward and backward separately, at each\n"
    "                            batch size, each captured alone (a CUDA graph replayed after\n"
    "                            warm-up; median and spread of --repeats runs), entries keyed by\n"
    "                            layer name and signature; the optimizer steps (adam, sgd) over\n"
    "                            the layer sizes; the sparse modifier's compress and expand;\n"
    "                            copies (d2d, h2d, d2h). --sharing adds how each pass slows\n"
    "                            when copies of it share the device, and the fill inferred.\n"
    "  --links                   all_reduce, reduce_scatter, all_gather, broadcast, reduce and\n"
    "                            send_recv over --sizes and --ranks: NCCL with one process per\n"
    "                            GPU under torchrun or mpirun (rank 0 writes the file), else\n"
    "                            the local backend among ranks of this process on one device.\n"
    "                            algbw and busbw are written as nccl-tests defines them.\n"
    "  import deeppool FILE      a per-layer profile published by the DeepPool authors (rows\n"
    "                            of TYPE{params}[batch]shape and fwd+bwd ms per batch size)\n"
    "                            into this format for --model: each row becomes an entry under\n"
    "                            the signature of the layers it matches.\n"
    "  --import-kineto TRACE     a torch.profiler trace of your own training of --model: each\n"
    "                            layer's forward and backward (kernels on a GPU, operators on\n"
    "                            the CPU) from record_function ranges named after its layers,\n"
    "                            the optimizer step, NCCL collectives whose sizes are known.");
  g_option_context_set_description(
    context,
    "Examples:\n"
    "  stagger profile --model models/gpt2-124m.json --batches 1,2,4,8,16,32 \\\n"
    "      --cluster models/clusters/dgx-h100.json --out traces/profiles/h100/gpt2-124m.json\n"
    "  torchrun --nproc-per-node 8 --no-python stagger profile --links \\\n"
    "      --cluster models/clusters/dgx-h100.json --out traces/profiles/h100/links.json\n"
    "  stagger profile --model tests/data/exec/tiny-mlp.json --batches 1,2,4 --backend host \\\n"
    "      --out traces/profiles/host/tiny-mlp.json\n"
    "  stagger profile import deeppool traces/reference/deeppool/vggLayerGpuProfileA100.txt \\\n"
    "      --model models/vgg16.json --out traces/profiles/a100-deeppool-vgg16.json\n"
    "  stagger profile --import-kineto trace.json --model models/gpt2-124m.json \\\n"
    "      --cluster models/clusters/dgx-h100.json --out traces/profiles/mine.json\n");
  g_option_context_add_main_entries(context, entries, NULL);
  gboolean ok = g_option_context_parse(context, &argc, &argv, error);
  if (ok && a.kineto != NULL) {
    StKinetoOptions ko = {.device = a.device, .batch = a.batch, .link = ST_LINK_INTRA_NODE};
    g_autoptr(StCluster) cluster = NULL;
    GError *bad = NULL;
    if (argc > 1)
      ok = st_cli_usage_error(error, "--import-kineto: unexpected argument '%s'", argv[1]);
    else if (a.model == NULL || a.out == NULL)
      ok = st_cli_usage_error(error, "--import-kineto: --model M and --out P are required");
    else if (a.batch < 0)
      ok = st_cli_usage_error(error, "--batch %" G_GINT64_FORMAT ": expected N >= 1", a.batch);
    else if (a.link != NULL && !st_link_parse(a.link, &ko.link, &bad)) {
      ok = st_cli_usage_error(error, "--link: %s", bad->message);
      g_error_free(bad);
    } else if (a.cluster != NULL && a.device == NULL) {
      ok = (cluster = st_cluster_load(a.cluster, error)) != NULL;
      ko.device = ok ? cluster->gpu.name : NULL;
    }
    ok = ok && import_kineto(a.kineto, a.model, a.out, &ko, error);
    args_clear(&a);
    return ok;
  }
  if (ok && argc < 2 && a.model == NULL && !a.links)
    ok = st_cli_usage_error(error, "missing command: import deeppool FILE, --model M --batches "
                                   "LIST, or --links");
  else if (ok && argc < 2)
    ok = measure(&a, error);
  else if (ok && strcmp(argv[1], "import") != 0)
    ok = st_cli_usage_error(error, "unknown command '%s' (expected import)", argv[1]);
  else if (ok && (argc < 3 || strcmp(argv[2], "deeppool") != 0))
    ok = st_cli_usage_error(error, "import: unknown or missing format%s%s (expected deeppool)",
                            argc < 3 ? "" : " ", argc < 3 ? "" : argv[2]);
  else if (ok && argc < 4)
    ok = st_cli_usage_error(error, "import deeppool: missing FILE");
  else if (ok && argc > 4)
    ok = st_cli_usage_error(error, "import deeppool: unexpected argument '%s'", argv[4]);
  else if (ok && (a.model == NULL || a.out == NULL))
    ok = st_cli_usage_error(error, "import deeppool: --model M and --out P are required");
  else if (ok)
    ok = import_deeppool(argv[3], a.model, a.out, a.device ? a.device : DEFAULT_DEVICE, error);
  args_clear(&a);
  return ok;
}

const StCommand st_cmd_profile = {
  "profile",
  "Measure kernel and link costs into a profile, or import DeepPool's published profiles",
  run,
};
