/* strategy_registry.c: the one list of strategies. Adding a strategy is a new
 * strategy_<name>.c and one line here. */
#include "strategy/strategy.h"

#include <string.h>

#include "cost/framework.h"
#include "strategy/fp8.h"
#include "strategy/offload.h"
#include "strategy/strategy_common.h"
#include "strategy/tensors.h"

G_DEFINE_QUARK(st-strategy-error-quark, st_strategy_error)

extern const StStrategy st_strategy_dp;
extern const StStrategy st_strategy_zero;
extern const StStrategy st_strategy_cdp;
extern const StStrategy st_strategy_burst;
extern const StStrategy st_strategy_multiplex;
extern const StStrategy st_strategy_pipeline;
extern const StStrategy st_strategy_megatron;

static const StStrategy *const STRATEGIES[] = {
  &st_strategy_dp,
  &st_strategy_zero,
  &st_strategy_cdp,
  &st_strategy_burst,
  &st_strategy_multiplex,
  &st_strategy_pipeline,
  &st_strategy_megatron,
  NULL,
};

static const char *const UPDATE_KINDS[] = {"sync", "stale", "pruned"};
G_STATIC_ASSERT(G_N_ELEMENTS(UPDATE_KINDS) == ST_UPDATE_N);

const char *
st_update_kind_name(StUpdateKind kind)
{
  g_return_val_if_fail(kind < ST_UPDATE_N, "?");
  return UPDATE_KINDS[kind];
}

static gboolean
same_update(StUpdate a, StUpdate b)
{
  return a.kind == b.kind && g_strcmp0(a.what, b.what) == 0;
}

/* Appends "; with --NAME VALUE, kind: what" when it differs from `base`. */
static void
variant(GString *out, const StStrategy *s, StUpdate base, const char *name, const char *value,
        const char *shown)
{
  StOptions o;
  st_options_init(&o);
  if (st_options_set(&o, name, value, NULL)) {
    StUpdate u = s->update(&o);
    if (!same_update(u, base))
      g_string_append_printf(out, "; with --%s %s, %s: %s", name, shown,
                             st_update_kind_name(u.kind), u.what);
  }
  st_options_clear(&o);
}

char *
st_strategy_update_summary(const StStrategy *s)
{
  StOptions o;
  st_options_init(&o);
  StUpdate base = s->update(&o);
  st_options_clear(&o);
  GString *out = g_string_new(NULL);
  g_string_printf(out, "%s: %s", st_update_kind_name(base.kind), base.what);
  for (const StStrategyKnob *k = s->knobs; k != NULL && k->option != NULL; k++) {
    if (k->values == NULL)
      continue;
    g_auto(GStrv) values = g_strsplit(k->values, ",", -1);
    for (char **v = values; *v != NULL; v++)
      variant(out, s, base, k->option, *v, *v);
  }
  variant(out, s, base, "sparsity", "0.5", "P > 0");
  return g_string_free(out, FALSE);
}

const StStrategy *const *
st_strategies(void)
{
  return STRATEGIES;
}

const StStrategy *
st_strategy_find(const char *name)
{
  for (const StStrategy *const *s = STRATEGIES; *s != NULL; s++)
    if (strcmp((*s)->name, name) == 0)
      return *s;
  return NULL;
}

const StStrategy *
st_strategy_lookup(const char *name, GError **error)
{
  const StStrategy *s = st_strategy_find(name);
  if (s != NULL)
    return s;
  g_autoptr(GString) known = g_string_new(NULL);
  for (const StStrategy *const *k = STRATEGIES; *k != NULL; k++)
    g_string_append_printf(known, "%s%s", known->len ? ", " : "", (*k)->name);
  g_set_error(error, ST_STRATEGY_ERROR, ST_ERROR_INVALID,
              "unknown strategy '%s' (known: %s; see 'stagger sim --list-strategies')", name,
              known->str);
  return NULL;
}

gboolean
st_strategy_resolve(const StStrategy *strategy, StOptions *options, const StCluster *cluster,
                    GError **error)
{
  int group = strategy->sample_group != NULL ? strategy->sample_group(options) : 1;
  return st_options_resolve_group(options, cluster, MAX(group, 1), error);
}

void
st_strategy_name_framework(const StStrategy *strategy, StOptions *options)
{
  if (options->framework == NULL)
    options->framework =
      g_strdup(st_framework_default(strategy->name, options->sparsity > 0)->name);
}

/* Whether `strategy` reads `option`: its knobs name it. */
static gboolean
reads(const StStrategy *strategy, const char *option)
{
  for (const StStrategyKnob *k = strategy->knobs; k != NULL && k->option != NULL; k++)
    if (strcmp(k->option, option) == 0)
      return TRUE;
  return FALSE;
}

/* FALSE with a message naming the strategies that read `option` when it was
 * given (`given`) to one that does not. */
static gboolean
reads_given(const StStrategy *strategy, const char *option, gboolean given, GError **error)
{
  if (!given || reads(strategy, option))
    return TRUE;
  g_autoptr(GString) which = g_string_new(NULL);
  for (const StStrategy *const *s = st_strategies(); *s != NULL; s++)
    if (reads(*s, option))
      g_string_append_printf(which, "%s%s", which->len ? ", " : "", (*s)->name);
  g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID,
              "--%s: the %s strategy does not model it; those that do: %s", option,
              strategy->name, which->str);
  return FALSE;
}

/* FALSE when --reshard or --defer-grad-sync on was given to a layout whose
 * ZeRO stage has nothing for it: gathered parameters (stage 3), sharded
 * gradients (stages 2-3). */
static gboolean
sharding_given(const StOptions *o, GError **error)
{
  static const char *const reshard[] = {"forward", "backward", "step"};
  if (o->reshard != ST_RESHARD_FORWARD && o->zero_stage != 3) {
    g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID,
                "--reshard %s: keeps ZeRO-3's gathered parameters, and this layout gathers "
                "none (--zero-stage 3 under zero or megatron does)",
                reshard[o->reshard]);
    return FALSE;
  }
  if (o->defer_grad_sync == 1 && o->zero_stage < 2) {
    g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID,
                "--defer-grad-sync on: defers the reduce-scatters of sharded gradients, and "
                "this layout shards none (--zero-stage 2 or 3 under zero or megatron does)");
    return FALSE;
  }
  return TRUE;
}

StSchedule *
st_strategy_build(const StStrategy *strategy, const StModel *model, const StCluster *cluster,
                  const StProfile *profile, const StOptions *options, GError **error)
{
  StOptions resolved;
  st_options_copy(&resolved, options);
  st_strategy_name_framework(strategy, &resolved);
  /* zero's stage when not given, so that the framework's ZeRO 1-2 defaults apply. */
  if (strcmp(strategy->name, "zero") == 0 && resolved.zero_stage == 0)
    resolved.zero_stage = 1;
  if (!reads_given(strategy, "context-parallel", resolved.context_parallel > 1, error) ||
      !st_strategy_resolve(strategy, &resolved, cluster, error)) {
    st_options_clear(&resolved);
    return NULL;
  }
  if (!reads_given(strategy, "shard-group", resolved.shard_group > 0, error) ||
      !reads_given(strategy, "offload", resolved.offload != ST_OFFLOAD_NONE, error) ||
      !reads_given(strategy, "offload-activations", resolved.offload_activations > 0, error) ||
      !sharding_given(&resolved, error)) {
    st_options_clear(&resolved);
    return NULL;
  }
  /* --seq-len: the model derived again at that many tokens per sequence. */
  g_autoptr(StModel) at_len = NULL;
  if (resolved.seq_len > 0 && resolved.seq_len != model->input.dims[0]) {
    if (!st_model_is_token(model)) {
      g_autofree char *shape = st_shape_format(&model->input);
      g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID,
                  "--seq-len %d: model '%s' takes %s per sample, not a sequence of token ids",
                  resolved.seq_len, model->name, shape);
      st_options_clear(&resolved);
      return NULL;
    }
    StShape input = {.n_dims = 1, .dims = {resolved.seq_len}};
    if ((at_len = st_model_derive_as(model, &input, 1, FALSE, error)) == NULL) {
      g_prefix_error(error, "--seq-len %d: ", resolved.seq_len);
      st_options_clear(&resolved);
      return NULL;
    }
    model = at_len;
  }
  StRecomputePlan recompute = st_recompute_plan(&resolved);
  if (!st_recompute_check(model, &recompute, error) ||
      !st_recompute_check_split(&recompute, resolved.tensor_parallel, error) ||
      !st_offload_check(model, cluster, resolved.offload_activations, &recompute, error)) {
    st_options_clear(&resolved);
    return NULL;
  }
  StStrategyInput input = {model, cluster, profile, &resolved};
  StSchedule *s = strategy->build(&input, error);
  if (s != NULL && s->settings.recompute == ST_RECOMPUTE_SELECTIVE)
    s->settings.recompute_ops = recompute.ops;
  if (s != NULL && resolved.offload_activations > 0) {
    StStateBytes b;
    st_state_bytes(&resolved, &b);
    st_offload_note(s, model, resolved.offload_activations, &recompute, resolved.micro_batch,
                    b.activation);
    char *d = s->settings.description;
    s->settings.description =
      g_strdup_printf("%s, activations of %d transformer layer%s offloaded to the host", d,
                      resolved.offload_activations, resolved.offload_activations == 1 ? "" : "s");
    g_free(d);
  }
  if (s != NULL && s->settings.compute_model == NULL)
    s->settings.compute_model = g_strdup(resolved.compute_model);
  if (s != NULL && s->settings.framework == NULL) {
    s->settings.framework = g_strdup(resolved.framework);
    s->settings.nchw = st_options_nchw(&resolved);
    StStateBytes bytes;
    st_state_bytes(&resolved, &bytes);
    s->settings.gather_bucket_bytes =
      st_options_framework(&resolved)->gather_bucket_elems * bytes.weight;
  }
  st_options_clear(&resolved);
  if (s == NULL)
    return NULL;
  st_fp8_add_weight_caches(s);
  if (!st_schedule_check(s, error)) {
    g_prefix_error(error, "strategy '%s' built an invalid schedule: ", strategy->name);
    st_schedule_free(s);
    return NULL;
  }
  return s;
}
