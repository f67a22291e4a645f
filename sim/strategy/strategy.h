/* strategy.h: the registry of parallelization strategies.
 *
 * A strategy turns a model, a cluster and the shared options into a Schedule.
 * Each is one file (strategy_<name>.c) filling one StStrategy, listed once in
 * strategy_registry.c: adding a strategy touches that file and one line.
 * Shared mechanics (model states per rank, gradient buckets, sharding) live in
 * strategy_common.h as parameters, not copies.
 */
#pragma once

#include <glib.h>

#include "cluster/cluster.h"
#include "model/model.h"
#include "profile/profile.h"
#include "sched/sched.h"
#include "strategy/options.h"

#define ST_STRATEGY_ERROR (st_strategy_error_quark())
GQuark st_strategy_error_quark(void);

/* What a strategy builds from. All borrowed; the strategy copies what the
 * schedule keeps. `options` is already resolved (st_options_resolve). */
typedef struct {
  const StModel *model;
  const StCluster *cluster;
  const StProfile *profile; /* may be NULL; for strategies that plan with costs */
  const StOptions *options;
} StStrategyInput;

/* An option the planner varies for a strategy, with the values it tries
 * unless the user narrows them: {"zero-stage", "1,2,3"}. */
typedef struct {
  const char *option; /* a name from the option table (options.h) */
  const char *values; /* comma list, each accepted by st_options_set */
} StStrategyKnob;

typedef struct {
  const char *name;     /* as given to --strategy */
  const char *summary;  /* one line */
  const char *citation; /* the paper or system it follows */
  StSchedule *(*build)(const StStrategyInput *input, GError **error);
  const StStrategyKnob *knobs; /* terminated by option NULL; NULL when none */
} StStrategy;

/* NULL-terminated, in registry order. */
const StStrategy *const *st_strategies(void);
const StStrategy *st_strategy_find(const char *name);
/* Finds `name` or fails with the list of known strategies. */
const StStrategy *st_strategy_lookup(const char *name, GError **error);

/* Resolves the options for the cluster, then builds and checks the schedule. */
StSchedule *st_strategy_build(const StStrategy *strategy, const StModel *model,
                              const StCluster *cluster, const StProfile *profile,
                              const StOptions *options, GError **error);
