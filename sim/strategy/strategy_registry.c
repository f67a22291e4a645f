/* strategy_registry.c: the one list of strategies. Adding a strategy is a new
 * strategy_<name>.c and one line here. */
#include "strategy/strategy.h"

#include <string.h>

G_DEFINE_QUARK(st-strategy-error-quark, st_strategy_error)

extern const StStrategy st_strategy_dp;
extern const StStrategy st_strategy_zero;
extern const StStrategy st_strategy_cdp;
extern const StStrategy st_strategy_burst;
extern const StStrategy st_strategy_multiplex;
extern const StStrategy st_strategy_pipeline;

static const StStrategy *const STRATEGIES[] = {
  &st_strategy_dp,
  &st_strategy_zero,
  &st_strategy_cdp,
  &st_strategy_burst,
  &st_strategy_multiplex,
  &st_strategy_pipeline,
  NULL,
};

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

StSchedule *
st_strategy_build(const StStrategy *strategy, const StModel *model, const StCluster *cluster,
                  const StProfile *profile, const StOptions *options, GError **error)
{
  StOptions resolved;
  st_options_copy(&resolved, options);
  if (!st_options_resolve(&resolved, cluster, error)) {
    st_options_clear(&resolved);
    return NULL;
  }
  StStrategyInput input = {model, cluster, profile, &resolved};
  StSchedule *s = strategy->build(&input, error);
  st_options_clear(&resolved);
  if (s == NULL)
    return NULL;
  if (!st_schedule_check(s, error)) {
    g_prefix_error(error, "strategy '%s' built an invalid schedule: ", strategy->name);
    st_schedule_free(s);
    return NULL;
  }
  return s;
}
