/* options.c: see options.h. */
#include "strategy/options.h"

#include <stdarg.h>

#include "base/limits.h"
#include "cost/framework.h"

G_DEFINE_QUARK(st-options-error-quark, st_options_error)

void
st_options_init(StOptions *o)
{
  *o = (StOptions){
    .micro_batch = 0, /* not given: see st_options_resolve */
    .steps = 0, /* auto */
    .optimizer = ST_OPTIMIZER_ADAM,
    .precision = ST_PRECISION_FP32,
    .bucket_bytes = -1, /* the framework's */
    .zero_stage = 0,
    .prefetch = 1,
    .comm_algo = g_strdup("auto"),
    .cdp_slack = 0.01,
  };
}

/* The string fields of the table, owned by the options. */
static char **
string_field(StOptions *o, const StOptionSpec *spec)
{
  return (char **)(void *)((char *)o + spec->offset);
}

void
st_options_clear(StOptions *o)
{
  for (const StOptionSpec *spec = st_option_specs(); spec->name != NULL; spec++)
    if (spec->type == ST_OPT_STRING)
      g_clear_pointer(string_field(o, spec), g_free);
}

void
st_options_copy(StOptions *dst, const StOptions *src)
{
  *dst = *src;
  for (const StOptionSpec *spec = st_option_specs(); spec->name != NULL; spec++)
    if (spec->type == ST_OPT_STRING)
      *string_field(dst, spec) = g_strdup(*string_field((StOptions *)src, spec));
}

static gboolean
bad(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);

static gboolean
bad(GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error_literal(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID, message);
  return FALSE;
}

/* Without --micro-batch: the global batch over the ranks when it is given
 * (the largest divisor of the per-rank share up to 32, so accumulation makes
 * up the rest), else 32. */
static int
default_micro_batch(const StOptions *o, int replicas)
{
  if (o->global_batch <= 0 || o->global_batch % replicas != 0)
    return 32;
  int64_t share = o->global_batch / replicas;
  for (int64_t m = MIN(share, 32); m > 1; m--)
    if (share % m == 0)
      return (int)m;
  return 1;
}

const StFramework *
st_options_framework(const StOptions *o)
{
  const StFramework *f = st_framework_find(o->framework);
  return f != NULL ? f : st_framework_find("ideal");
}

int
st_options_grad_bytes(const StOptions *o)
{
  if (!st_precision_16bit(o->precision))
    return 4;
  if (o->grad_reduce != ST_GRAD_REDUCE_AUTO)
    return o->grad_reduce == ST_GRAD_REDUCE_FP32 ? 4 : 2;
  return st_options_framework(o)->grad_bytes_mixed;
}

gboolean
st_options_nchw(const StOptions *o)
{
  return o->memory_format == 0 ? st_options_framework(o)->nchw : o->memory_format == 1;
}

gboolean
st_options_overlap(const StOptions *o)
{
  if (o->overlap_grad_reduce != 0)
    return o->overlap_grad_reduce == 1;
  const StFramework *f = st_options_framework(o);
  return o->zero_stage == 1 || o->zero_stage == 2 ? f->overlap_zero12 : f->overlap_grad_reduce;
}

gboolean
st_options_tp_comm_overlap(const StOptions *o)
{
  if (o->tp_comm_overlap != 0)
    return o->tp_comm_overlap == 1;
  return st_options_framework(o)->tp_comm_overlap;
}

gboolean
st_options_overlap_param_gather(const StOptions *o)
{
  if (o->overlap_param_gather != 0)
    return o->overlap_param_gather == 1;
  return st_options_framework(o)->overlap_param_gather;
}

gboolean
st_options_defer_grad_sync(const StOptions *o)
{
  if (o->defer_grad_sync != 0)
    return o->defer_grad_sync == 1;
  return st_options_framework(o)->defer_grad_sync;
}

gboolean
st_options_resolve(StOptions *o, const StCluster *cluster, GError **error)
{
  return st_options_resolve_group(o, cluster, 1, error);
}

gboolean
st_options_resolve_group(StOptions *o, const StCluster *cluster, int group, GError **error)
{
  g_return_val_if_fail(group >= 1, FALSE);
  if (o->ranks == 0 && cluster != NULL)
    o->ranks = cluster->gpus;
  if (o->ranks > 0 && o->micro_batch == 0)
    o->micro_batch = default_micro_batch(o, o->ranks % group == 0 ? o->ranks / group : 1);
  /* Each message names the option at fault: the table's ranges keep what
   * the command line gives in range, so these catch callers that set fields. */
  if (o->ranks < 0)
    return bad(error, "--ranks %d: must be positive", o->ranks);
  if (o->micro_batch <= 0)
    return bad(error, "--micro-batch %d: must be positive", o->micro_batch);
  if (o->global_batch < 0)
    return bad(error, "--global-batch %" G_GINT64_FORMAT ": cannot be negative",
               o->global_batch);
  if (o->steps < 0 || o->steps > ST_MAX_STEPS)
    return bad(error, "--steps %d: must be between 1 and %d, or auto", o->steps, ST_MAX_STEPS);
  if (cluster != NULL && o->ranks > (int64_t)cluster->gpus * ST_MAX_RANKS_PER_GPU)
    return bad(error,
               "--ranks %d: %d ranks per GPU on %d GPU%s; at most %d ranks may share a GPU "
               "(docs/RELIABILITY.md): give fewer ranks or more --nodes",
               o->ranks, (o->ranks + cluster->gpus - 1) / cluster->gpus, cluster->gpus,
               cluster->gpus == 1 ? "" : "s", ST_MAX_RANKS_PER_GPU);
  if (o->precision == ST_PRECISION_FP8 && cluster != NULL && cluster->gpu.fp8_flops <= 0)
    return bad(error,
               "--precision fp8: the %s has no FP8 tensor cores (the cluster gives no "
               "gpu.flops.fp8; FP8 GEMMs start with Hopper and Ada): use --precision mixed",
               cluster->gpu.name);
  if (o->bucket_bytes < 0)
    o->bucket_bytes = st_options_framework(o)->bucket_bytes;
  if (!st_options_overlap(o)) /* one bucket, when the backward is done */
    o->bucket_bytes = G_MAXINT64;
  if (o->zero_stage < 0 || o->zero_stage > 3)
    return bad(error, "--zero-stage %d: must be 1, 2 or 3", o->zero_stage);
  if (o->prefetch < 0)
    return bad(error, "--prefetch %d: must be 0 or more", o->prefetch);
  if (o->ranks == 0)
    o->ranks = cluster->gpus;
  if (o->ranks % group != 0)
    return bad(error, "%d ranks cannot be cut into groups of %d that compute the same samples "
               "(--tensor-parallel x --context-parallel x --pipeline-stages)", o->ranks, group);
  int replicas = o->ranks / group;
  int64_t per_micro = (int64_t)replicas * o->micro_batch;
  if (o->global_batch == 0)
    o->global_batch = per_micro;
  if (o->global_batch % per_micro != 0)
    return bad(error,
               "--global-batch %" G_GINT64_FORMAT " is not a multiple of %s x micro-batch "
               "= %d x %d = %" G_GINT64_FORMAT " (gradient accumulation needs whole "
               "micro-batches)",
               o->global_batch, group > 1 ? "data-parallel ranks" : "ranks", replicas,
               o->micro_batch, per_micro);
  int64_t accumulation = o->global_batch / per_micro;
  if (accumulation > 100000)
    return bad(error, "--global-batch %" G_GINT64_FORMAT " needs %" G_GINT64_FORMAT
               " micro-batches per rank; raise --micro-batch or --ranks",
               o->global_batch, accumulation);
  o->accumulation = (int)accumulation;
  return TRUE;
}
