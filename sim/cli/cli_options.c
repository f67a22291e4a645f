/* cli_options.c: the options that sim, schedule, run, validate and plan share
 * (docs/ARCHITECTURE.md lists them with their meaning). */
#include <stdlib.h>
#include <string.h>

#include "base/units.h"
#include "cli/cli.h"

void
st_cli_shared_init(StCliShared *sh)
{
  memset(sh, 0, sizeof *sh);
  st_options_init(&sh->options);
}

void
st_cli_shared_clear(StCliShared *sh)
{
  g_free(sh->model);
  g_free(sh->cluster);
  g_free(sh->profile);
  g_free(sh->strategy);
  g_free(sh->out);
  g_free(sh->optimizer_text);
  g_free(sh->precision_text);
  g_free(sh->bucket_text);
  g_free(sh->comm_algo_text);
  st_options_clear(&sh->options);
}

GOptionGroup *
st_cli_shared_group(StCliShared *sh)
{
  StOptions *o = &sh->options;
  const GOptionEntry entries[] = {
    {"model", 'm', 0, G_OPTION_ARG_FILENAME, &sh->model, "Model description (models/*.json)",
     "FILE"},
    {"cluster", 'c', 0, G_OPTION_ARG_FILENAME, &sh->cluster,
     "Cluster description (models/clusters/*.json)", "FILE"},
    {"profile", 'p', 0, G_OPTION_ARG_FILENAME, &sh->profile,
     "Measured costs: a profile file or a folder of them (default: roofline and alpha-beta "
     "estimates)",
     "PATH"},
    {"strategy", 's', 0, G_OPTION_ARG_STRING, &sh->strategy,
     "Strategy, or a comma list run side by side (default: dp)", "NAME[,NAME...]"},
    {"nodes", 0, 0, G_OPTION_ARG_INT, &o->nodes,
     "Number of copies of the cluster's node (default: as in the file)", "N"},
    {"gpus", 0, 0, G_OPTION_ARG_INT, &o->gpus, "Use the first G GPUs (default: all)", "G"},
    {"ranks", 0, 0, G_OPTION_ARG_INT, &o->ranks,
     "Data-parallel workers, round-robin on the GPUs; more ranks than GPUs share them "
     "(default: one per GPU)",
     "R"},
    {"micro-batch", 'b', 0, G_OPTION_ARG_INT, &o->micro_batch,
     "Samples per micro-batch per rank (default: 32)", "B"},
    {"global-batch", 0, 0, G_OPTION_ARG_INT64, &o->global_batch,
     "Samples per step over all ranks; a multiple of ranks x micro-batch, the quotient is "
     "gradient accumulation (default: ranks x micro-batch)",
     "N"},
    {"steps", 0, 0, G_OPTION_ARG_INT, &o->steps,
     "Training steps; with more than one, the first is warm-up (default: 1)", "N"},
    {"optimizer", 0, 0, G_OPTION_ARG_STRING, &sh->optimizer_text,
     "sgd (with momentum) or adam (default: adam)", "NAME"},
    {"precision", 0, 0, G_OPTION_ARG_STRING, &sh->precision_text,
     "fp32, or mixed: 16-bit weights, gradients and activations with fp32 master weights "
     "(default: fp32)",
     "NAME"},
    {"bucket-bytes", 0, 0, G_OPTION_ARG_STRING, &sh->bucket_text,
     "Gradient bucket size, bytes or with a unit such as 25MiB; 0 = one bucket per layer "
     "(default: 25MiB)",
     "SIZE"},
    {"zero-stage", 0, 0, G_OPTION_ARG_INT, &o->zero_stage,
     "ZeRO stage: 1 optimizer states, 2 + gradients, 3 + parameters sharded (default: 1)",
     "1|2|3"},
    {"prefetch", 0, 0, G_OPTION_ARG_INT, &o->prefetch,
     "ZeRO-3: parameter gathers issued ahead of the layer that needs them (default: 1)", "N"},
    {"comm-algo", 0, 0, G_OPTION_ARG_STRING, &sh->comm_algo_text,
     "Collective algorithm: auto (the fastest alone), ring, tree, hierarchical (default: "
     "auto)",
     "NAME"},
    {"out", 'o', 0, G_OPTION_ARG_FILENAME, &sh->out, "Output folder (a file for 'schedule')",
     "PATH"},
    {NULL},
  };
  GOptionGroup *group =
    g_option_group_new("shared", "Options shared by sim, schedule, run, validate and plan:",
                       "Show the shared options", NULL, NULL);
  g_option_group_add_entries(group, entries);
  return group;
}

static gboolean
positive(GError **error, const char *name, int64_t value, int64_t min)
{
  if (value < min)
    return st_cli_usage_error(error, "--%s %" G_GINT64_FORMAT ": must be at least %" G_GINT64_FORMAT,
                              name, value, min);
  return TRUE;
}

/* The string-valued options, parsed; errors name the option but are not
 * yet usage errors. */
static gboolean
parse_texts(StCliShared *sh, GError **error)
{
  StOptions *o = &sh->options;
  if (sh->optimizer_text != NULL && !st_optimizer_parse(sh->optimizer_text, &o->optimizer, error)) {
    g_prefix_error(error, "--optimizer: ");
    return FALSE;
  }
  if (sh->precision_text != NULL && !st_precision_parse(sh->precision_text, &o->precision, error)) {
    g_prefix_error(error, "--precision: ");
    return FALSE;
  }
  if (sh->bucket_text != NULL) {
    char *end = NULL;
    gint64 plain = g_ascii_strtoll(sh->bucket_text, &end, 10);
    if (end != sh->bucket_text && *end == '\0' && plain >= 0) {
      o->bucket_bytes = plain;
    } else if (!st_parse_bytes(sh->bucket_text, &o->bucket_bytes, error)) {
      g_prefix_error(error, "--bucket-bytes: ");
      return FALSE;
    }
  }
  if (sh->comm_algo_text != NULL) {
    g_free(o->comm_algo);
    o->comm_algo = g_strdup(sh->comm_algo_text);
  }
  return TRUE;
}

gboolean
st_cli_shared_finish(StCliShared *sh, GError **error)
{
  g_autoptr(GError) local = NULL;
  if (!parse_texts(sh, &local))
    return st_cli_usage_error(error, "%s", local->message);
  const StOptions *o = &sh->options;
  return positive(error, "nodes", o->nodes, 0) && positive(error, "gpus", o->gpus, 0) &&
         positive(error, "ranks", o->ranks, 0) &&
         positive(error, "micro-batch", o->micro_batch, 1) &&
         positive(error, "global-batch", o->global_batch, 0) &&
         positive(error, "steps", o->steps, 1) && positive(error, "prefetch", o->prefetch, 0);
}

gboolean
st_cli_load_inputs(const StCliShared *sh, StCliInputs *in, GError **error)
{
  memset(in, 0, sizeof *in);
  if (sh->model == NULL)
    return st_cli_usage_error(error, "--model FILE is required");
  if (sh->cluster == NULL)
    return st_cli_usage_error(error, "--cluster FILE is required");
  in->model = st_model_load(sh->model, error);
  if (in->model == NULL)
    return FALSE;
  in->cluster = st_cluster_load(sh->cluster, error);
  if (in->cluster == NULL)
    return FALSE;
  if (!st_cluster_resize(in->cluster, sh->options.nodes, sh->options.gpus, error)) {
    g_prefix_error(error, "%s: ", sh->cluster);
    return FALSE;
  }
  if (sh->profile != NULL) {
    in->profile = st_profile_load(sh->profile, error);
    if (in->profile == NULL)
      return FALSE;
  }
  return TRUE;
}

void
st_cli_inputs_clear(StCliInputs *in)
{
  g_clear_pointer(&in->model, st_model_free);
  g_clear_pointer(&in->cluster, st_cluster_free);
  g_clear_pointer(&in->profile, st_profile_free);
}

char **
st_cli_strategy_names(const StCliShared *sh, GError **error)
{
  g_auto(GStrv) names = g_strsplit(sh->strategy ? sh->strategy : "dp", ",", -1);
  for (char **n = names; *n != NULL; n++) {
    g_strstrip(*n);
    if (**n == '\0') {
      st_cli_usage_error(error, "--strategy '%s': empty name in the list", sh->strategy);
      return NULL;
    }
    g_autoptr(GError) unknown = NULL;
    if (st_strategy_lookup(*n, &unknown) == NULL) {
      st_cli_usage_error(error, "--strategy: %s", unknown->message);
      return NULL;
    }
  }
  return g_steal_pointer(&names);
}
