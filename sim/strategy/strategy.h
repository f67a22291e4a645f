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
 * unless the user narrows them: {"zero-stage", "1,2,3"}. A strategy lists
 * every option it reads that another strategy declares as a knob, with
 * values NULL when the planner should not vary it by default
 * ({"recompute", NULL}): a list the user gives for it is then searched whole
 * for this strategy too, and never for a strategy that does not read it. */
typedef struct {
  const char *option; /* a name from the option table (options.h) */
  const char *values; /* comma list, each accepted by st_options_set; NULL: only the
                         user's list */
} StStrategyKnob;

/* What update a configuration computes, against the planner's baseline:
 * synchronous SGD/Adam (every replica's gradient of this step, averaged,
 * applied to this step's weights) on the model as given. */
typedef enum {
  ST_UPDATE_SYNC = 0, /* the same update as synchronous SGD/Adam */
  ST_UPDATE_STALE,    /* delayed gradients: some weights step with a gradient computed on
                         weights of an earlier step (training converges differently) */
  ST_UPDATE_PRUNED,   /* synchronous, on a model pruned by a fixed mask (SAMO) */
  ST_UPDATE_N,
} StUpdateKind;

typedef struct {
  StUpdateKind kind;
  const char *what;   /* one line, static: "one-step-delayed gradients (update rule v1)" */
} StUpdate;

/* "sync", "stale", "pruned". */
const char *st_update_kind_name(StUpdateKind kind);

/* What the planner learns of a configuration before building it
 * (StStrategy.estimate): lower bounds, 0 when unknown. Each must hold for
 * the schedule build() makes and the engine's simulation of it, whatever
 * the timing; tests/test_plan_llm.c checks them against simulations. */
typedef struct {
  gboolean groups_across_nodes; /* in: admit tensor-parallel groups that span nodes (the
                                   planner's default refuses them; `sim` never asks) */
  int64_t step_ns;    /* out: the steady step (--steps auto, no measured profile) */
  int64_t peak_bytes; /* out: the highest device peak */
  int64_t compute_ns; /* out: of step_ns, the busiest stage's compute at peak */
  int64_t tp_comm_ns; /* out: of step_ns, its tensor-parallel collectives at link speed */
  int64_t bubble_ns;  /* out: of step_ns, the pipeline's fill and drain */
  int64_t early_bytes; /* out: a part of peak_bytes that refuses a configuration over the cap
                          before the search (what it held before issue 22's runtime and
                          footprint were counted); over the cap by the rest only, it is
                          refused in its wave, so that the waves, hence what is pruned and
                          simulated, stay as they were; 0: all of peak_bytes */
  int comms;          /* out: communicators every rank surely joins with a peer on another
                         GPU, each holding NCCL's buffers (output/runtime_memory.c); 0 unknown */
  gboolean refuse_in_turn; /* out: a peak_bytes over the memory cap refuses the configuration
                              when the search reaches it (in its wave, where building it
                              would have), not before the search: the waves, hence what is
                              pruned and simulated, stay as they were without this bound */
} StEstimate;

typedef struct {
  const char *name;     /* as given to --strategy */
  const char *summary;  /* one line */
  const char *citation; /* the paper or system it follows */
  StSchedule *(*build)(const StStrategyInput *input, GError **error);
  const StStrategyKnob *knobs; /* terminated by option NULL; NULL when none */
  /* NULL, or whether knob `option` means anything for `model` (expert
   * parallelism: a model with MoE layers); when not, the planner does not
   * vary it unless the user lists its values. */
  gboolean (*knob_applies)(const char *option, const StModel *model);
  /* The update a configuration with these options computes (required;
   * the raw options suffice, nothing resolved). */
  StUpdate (*update)(const StOptions *options);
  /* How many ranks compute the same samples under `options` (a tensor-
   * parallel group times a pipeline: megatron), for st_strategy_resolve;
   * NULL: 1, every rank its own (a pipeline strategy that cuts stages itself
   * counts them in its accumulation). */
  int (*sample_group)(const StOptions *options);
  /* TRUE when these options may place its ranks on fewer devices than one
   * per rank round-robin (cyclic DP's model parallelism shares them): the
   * planner then learns how many GPUs it uses only by building it. NULL:
   * never. */
  gboolean (*shares_devices)(const StOptions *options);
  /* Before building (the planner): refuses what build() would refuse or
   * what the planner does not try by default, with the reason, and fills
   * the lower bounds it can in O(layers). `input->model` is the model
   * build() gets (at --seq-len), `input->options` resolved;
   * `input->profile` non-NULL means measured costs (no time bound then).
   * NULL: nothing known before building. */
  gboolean (*estimate)(const StStrategyInput *input, StEstimate *estimate, GError **error);
} StStrategy;

/* The update it computes by default and how its knobs and --sparsity
 * change it, derived from `update` ("sync: synchronous SGD/Adam; with
 * --sparsity P > 0, pruned: ..."). Transfer full. */
char *st_strategy_update_summary(const StStrategy *strategy);

/* NULL-terminated, in registry order. */
const StStrategy *const *st_strategies(void);
const StStrategy *st_strategy_find(const char *name);
/* Finds `name` or fails with the list of known strategies. */
const StStrategy *st_strategy_lookup(const char *name, GError **error);

/* The strategies (a comma list) that read `option` (a table option's name,
 * without the dashes), or NULL when every strategy reads it
 * (strategy_reads.c). */
const char *st_strategy_option_readers(const char *option);
/* Whether the strategy named `strategy` reads `option`. */
gboolean st_strategy_reads_option(const char *strategy, const char *option);

/* Resolves `options` for the cluster as `strategy` reads them
 * (st_options_resolve_group with its sample group). */
gboolean st_strategy_resolve(const StStrategy *strategy, StOptions *options,
                             const StCluster *cluster, GError **error);

/* Names the framework preset the strategy runs under when the options name
 * none (st_framework_default), as building and estimating both read it. */
void st_strategy_name_framework(const StStrategy *strategy, StOptions *options);

/* Resolves the options for the cluster, then builds and checks the schedule. */
StSchedule *st_strategy_build(const StStrategy *strategy, const StModel *model,
                              const StCluster *cluster, const StProfile *profile,
                              const StOptions *options, GError **error);
