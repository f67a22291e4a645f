/* plan_private.h: what the planner's files share and nobody else needs.
 * The contract of the planner is plan.h. */
#pragma once

#include "output/output.h"
#include "plan/plan.h"
#include "cost/cost.h"

/* ---- the best simulated so far, per GPU count (plan_prune.c) ------------ */

/* Running best objective among the OK points added, by GPU count: for a
 * candidate on g GPUs, the best point on g GPUs or fewer (front pruning),
 * or on any number (winner pruning). Ties keep the lowest index. */
typedef struct StPlanIncumbents StPlanIncumbents;

/* For the candidates `cand[0 .. n)` of `plan` (borrowed; it must outlive
 * the incumbents). Transfer full. */
StPlanIncumbents *st_plan_incumbents_new(const StPlan *plan, const int *cand, int n,
                                         gboolean per_gpus);
void st_plan_incumbents_free(StPlanIncumbents *inc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StPlanIncumbents, st_plan_incumbents_free)

/* Adds the simulated OK points among `indices`. O(GPU counts) each. */
void st_plan_incumbents_add(StPlanIncumbents *inc, const int *indices, int n);

/* The point that beats `bound` (the best objective a candidate on at least
 * `gpus` GPUs could reach) strictly, with its value in *best; -1 when
 * none. Points on more GPUs than `gpus` never count (front pruning).
 * O(log GPU counts). */
int st_plan_incumbents_beat(const StPlanIncumbents *inc, int gpus, double bound, double *best);

/* ---- the steady step over every rank at once (plan_bound_ranks.c) -------- */

/* A lower bound of the steady step's cycle (before st_steady_step_bound's
 * tolerance) over the whole schedule, each send joined to its receive;
 * `dur[program][op]` the ops' least durations (borrowed; NULL for programs
 * no rank runs). 0 when it adds nothing: no point-to-point transfers, a
 * background stream or another job, too many ops. O(steps x (ops over
 * all ranks + their dependencies)), at most 256 steps. */
int64_t st_plan_bound_ranks_cycle(const StSchedule *s, const StProfile *profile,
                                  int64_t *const *dur);
/* The same following every rank (`every_rank`), not one group of each kind
 * (tests: both must agree). */
int64_t st_plan_bound_ranks_cycle_all(const StSchedule *s, const StProfile *profile,
                                      int64_t *const *dur, gboolean every_rank);
/* The ranks that bound follows: of the groups of ranks point-to-point
 * transfers tie together, the first of each kind (plan_bound_replicas.c).
 * [n_ranks], transfer full. */
gboolean *st_plan_bound_ranks_followed(const StSchedule *s, const StProfile *profile);

/* ---- before building (plan_before.c, plan_closed.c) ------------------------- */

typedef struct StPlanClosedCache StPlanClosedCache;

/* Its strategy's estimate (StStrategy.estimate) and closed form
 * (st_plan_closed_cycle) for point `pt`, options `raw` (as the
 * configuration sets them) and `resolved` on `cluster` (resized): refused (infeasible), over the memory cap by its lower bound
 * (unless pruning is off), or, when `timed` (--steps auto), a bound of the
 * steady step that raises pt->before_ns, which orders and prunes it
 * unbuilt. */
void st_plan_estimate(const StPlan *plan, const StProfile *profile, StPlanPoint *pt,
                      const StStrategy *strategy, const StCluster *cluster,
                      const StOptions *raw, const StOptions *resolved, gboolean timed,
                      StPlanClosedCache *cache);
/* Refuses `pt` as over the memory cap by its estimate's peak (not built). */
void st_plan_refuse_over_cap(const StPlan *plan, StPlanPoint *pt, const StStrategy *strategy);

/* Once `s`, the schedule of `pt`, is bound (st_plan_bound): the device
 * figure of that bound with the least runtime memory of a device running a
 * rank (plan_floor.c), in pt->bound.device_bytes; TRUE when it refuses `pt`
 * as over the cap by it (not simulated; never with pruning off). */
gboolean st_plan_bound_device(const StPlan *plan, StPlanPoint *pt, const StSchedule *s);

/* Prunes `pt`, unbuilt: point `who` reaches `best` where it cannot do
 * better than `bound`. Its reason is not formatted here but when asked
 * (st_plan_point_reason): 700,000 of them were 150 MB of strings. O(1). */
void st_plan_prune_unbuilt(const StPlan *plan, StPlanPoint *pt, double bound, int who,
                           double best);
/* That reason, as its before_ns gives it, into buf[0 .. size) (size:
 * ST_PLAN_REASON_MAX holds every one). */
void st_plan_unbuilt_reason(const StPlan *plan, const StPlanPoint *pt, char *buf, gsize size);

/* The closed form of the steady step's cycle (before st_steady_step_bound's
 * tolerance) of a configuration of `strategy` whose build would get `in`
 * (options resolved and framework named, model at its --seq-len), without
 * building it; 0 when the strategy has none or its options fall outside
 * it. A lower bound of the engine's steady step, as plan_closed.c shows.
 * O(layers x micro-batches + GPUs per node). */
int64_t st_plan_closed_cycle(const StStrategy *strategy, const StStrategyInput *in,
                             StPlanClosedCache *cache);
/* The compute passes' alone times the closed forms of one plan met, for
 * inputs of `model` (borrowed): every cluster of a plan is one node type
 * resized, so a pass costs the same in each. `cache` may be NULL (nothing
 * kept). Not thread-safe: the planner prepares serially. */
StPlanClosedCache *st_plan_closed_cache_new(const StModel *model);
void st_plan_closed_cache_free(StPlanClosedCache *cache);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(StPlanClosedCache, st_plan_closed_cache_free)
/* st_compute_time of `work` in `ctx`, floored to ns (0 when not finite),
 * through `cache`. */
int64_t st_plan_closed_comp_ns(StPlanClosedCache *cache, const StComputeCtx *ctx,
                               const StWork *work);
/* Whether `strategy` has a closed form. */
gboolean st_plan_closed_known(const StStrategy *strategy);
/* dp (zero FALSE) and zero (TRUE): plan_closed_dp.c. */
int64_t st_plan_closed_dp_cycle(const StStrategyInput *in, gboolean zero,
                                StPlanClosedCache *cache);
/* The shape st_cluster_group_shape gives the devices 0 .. n-1 of `cluster`
 * (every rank of a data-parallel schedule, one per device) in O(GPUs per
 * node). */
void st_plan_world_shape(const StCluster *cluster, int n, StGroupShape *shape);

/* ---- plan.json's text (plan_json_text.c) ----------------------------------- */

/* Appends cJSON_Print's text of `item` as it appears nested `depth` levels
 * deep (its members indented depth + 1 tabs, its closing brace depth):
 * byte for byte what cJSON_Print gives of a tree holding it there. */
void st_plan_json_text(GString *out, const struct cJSON *item, int depth);

/* ---- identical schedules (plan_dedup.c) ------------------------------------ */

/* Fingerprints seen (keys borrowed from the plan's points): the first
 * point with i's fingerprint, which is i itself when none was seen
 * (then it is remembered). O(1). */
GHashTable *st_plan_fingerprints_new(void);
int st_plan_fingerprints_first(GHashTable *first, const StPlan *plan, int i);

/* The simulated results of `src` into `dst` (its twin), in a simulation
 * record of its own without the training run's step (as before the record
 * was apart: a twin's run objective stays unknown). */
void st_plan_copy_result(StPlanPoint *dst, const StPlanPoint *src);

/* (plan_point.c) Sets a point's status and the reason it says (printf). */
void st_plan_point_refuse(StPlanPoint *pt, StPlanStatus status, const char *format, ...)
  G_GNUC_PRINTF(3, 4);
/* Frees what the point owns (reason, description, kept schedule, simulation
 * record), leaving NULLs. */
void st_plan_point_clear(StPlanPoint *pt);
/* Takes a simulated run's numbers into the point: OK, or OOM over the
 * device-memory cap `cap`. */
void st_plan_point_take_summary(StPlanPoint *pt, const StSummary *sum, int64_t cap);

/* ---- spread over processes (plan_dist.c) ----------------------------------- */

#include "plan/plan_dist.h"

/* After a phase of a wave: each process gives the points among indices[0..n)
 * that it evaluated (owner[i] == its rank) to all, and takes the others'
 * (status, reason, description, bounds, fingerprint, simulated results).
 * FALSE when the exchange fails. */
gboolean st_plan_dist_exchange(const StPlanDist *dist, StPlan *plan, const int *indices, int n,
                               const int *owner, GError **error);

/* ---- the space, listed (plan_unlisted.c) ---------------------------------- */

/* The configurations of plan's space (st_plan_space_expand) that are
 * listed: those the options or the batch split refuse before anything is
 * built are counted by reason in plan->unlisted (made here) instead.
 * Transfer full; NULL with `error` set. */
GArray *st_plan_expand_listed(StPlan *plan, GError **error);
