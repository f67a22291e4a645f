/* plan_json.c: plan.json (the search and every point) and plan.csv (the
 * simulated points, for plots/plan.gp). docs/FORMATS.md describes both.
 * Nothing that varies between runs (timings, thread count) goes in, so
 * the same search writes the same bytes. */
#include "plan/plan_private.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#include "base/json.h"

static const char *const STATUS[] = {"ok",     "out_of_memory", "infeasible",
                                     "pruned", "failed",        "excluded", "unsearched"};
G_STATIC_ASSERT(G_N_ELEMENTS(STATUS) == ST_PLAN_STATUS_N);

const char *
st_plan_status_name(StPlanStatus s)
{
  g_return_val_if_fail(s < ST_PLAN_STATUS_N, "?");
  return STATUS[s];
}

static cJSON *
int_list(GArray *list)
{
  cJSON *a = cJSON_CreateArray();
  for (guint i = 0; i < list->len; i++)
    cJSON_AddItemToArray(a, cJSON_CreateNumber(g_array_index(list, int, i)));
  return a;
}

static void
add_int_or_null(cJSON *obj, const char *key, int64_t value)
{
  if (value > 0)
    st_json_add_int(obj, key, value);
  else
    cJSON_AddNullToObject(obj, key);
}

static cJSON *
search_json(const StPlan *plan)
{
  const StPlanSpec *spec = plan->spec;
  cJSON *obj = cJSON_CreateObject();
  cJSON *strategies = cJSON_AddArrayToObject(obj, "strategies");
  const StStrategy *last = NULL;
  for (guint i = 0; i < plan->configs->len; i++) {
    const StPlanConfig *c = &g_array_index(plan->configs, StPlanConfig, i);
    if (c->strategy != last)
      cJSON_AddItemToArray(strategies, cJSON_CreateString(c->strategy->name));
    last = c->strategy;
  }
  cJSON_AddItemToObject(obj, "nodes", int_list(spec->nodes));
  cJSON_AddItemToObject(obj, "gpus", int_list(spec->gpus));
  cJSON_AddItemToObject(obj, "micro_batch", int_list(spec->micro_batches));
  cJSON_AddItemToObject(obj, "accumulation", int_list(spec->accumulations));
  add_int_or_null(obj, "global_batch", spec->global_batch);
  add_int_or_null(obj, "gpu_batch", spec->gpu_batch);
  cJSON *options = cJSON_AddObjectToObject(obj, "options");
  for (guint i = 0; i < spec->options->len; i++) {
    const StPlanValues *v = g_ptr_array_index(spec->options, i);
    cJSON *values = cJSON_AddArrayToObject(options, v->name);
    for (guint j = 0; j < v->values->len; j++)
      cJSON_AddItemToArray(values, cJSON_CreateString(g_ptr_array_index(v->values, j)));
  }
  st_json_add_int(obj, "mem_cap_bytes", plan->mem_cap);
  add_int_or_null(obj, "gpu_budget", spec->gpu_budget);
  add_int_or_null(obj, "gpus_per_node", spec->gpus_per_node);
  cJSON_AddStringToObject(obj, "objective", st_plan_objective_name(spec->objective));
  st_json_add_int(obj, "train_steps", spec->train_steps);
  cJSON_AddStringToObject(obj, "prune", st_plan_prune_name(spec->prune));
  cJSON_AddBoolToObject(obj, "allow_stale", spec->allow_stale);
  st_json_add_int(obj, "wave", spec->wave > 0 ? spec->wave : ST_PLAN_WAVE);
  cJSON_AddBoolToObject(obj, "fold", !spec->no_fold);
  if (spec->max_time_s > 0)
    cJSON_AddNumberToObject(obj, "max_time_s", spec->max_time_s);
  else
    cJSON_AddNullToObject(obj, "max_time_s");
  return obj;
}

static cJSON *
counts_json(const StPlanCounts *c)
{
  cJSON *obj = cJSON_CreateObject();
  st_json_add_int(obj, "configurations", c->configurations);
  st_json_add_int(obj, "simulated", c->simulated);
  st_json_add_int(obj, "ok", c->ok);
  st_json_add_int(obj, "out_of_memory", c->oom);
  st_json_add_int(obj, "out_of_memory_by_bound", c->oom_by_bound);
  st_json_add_int(obj, "infeasible", c->infeasible);
  st_json_add_int(obj, "pruned", c->pruned);
  st_json_add_int(obj, "failed", c->failed);
  st_json_add_int(obj, "excluded", c->excluded);
  st_json_add_int(obj, "unsearched", c->unsearched);
  st_json_add_int(obj, "same_schedule", c->duplicates);
  st_json_add_int(obj, "unlisted", c->unlisted);
  return obj;
}

/* How configurations were decided without a simulation, for a reader who
 * asks what was pruned and why (each point's reason says which rule). */
static cJSON *
rules_json(const StPlan *plan)
{
  cJSON *rules = cJSON_CreateObject();
  cJSON_AddStringToObject(
    rules, "infeasible",
    "the option table, the batch split or the strategy refused it (its message); megatron's "
    "estimate also refuses what build() would (heads, kv heads, layers not divisible; "
    "interleaving's micro-batches) and tensor-parallel groups spanning nodes unless "
    "--tp-across-nodes, before building");
  cJSON_AddStringToObject(
    rules, "out_of_memory_by_bound",
    "a lower bound of its peak memory exceeds the cap: before building, its strategy's closed "
    "form (model states as ZeRO shards them, the activations its pipeline order holds at "
    "once); after building, persistent states and buffers surely live together");
  cJSON_AddStringToObject(
    rules, "pruned",
    "a lower bound of its steady step (before building: its global batch's compute at peak, "
    "or its strategy's closed form of its busiest stage's passes at the engine's alone costs, "
    "tensor-parallel collectives at link speed and the pipeline's fill, or for dp and zero "
    "the chain of its passes, gradient collectives and optimizer step; after building: the "
    "longest dependency cycle through one step) cannot beat a simulated steady configuration "
    "on no more GPUs (--prune front) or on any (--prune winner): exact, the winner and the "
    "front against GPUs are kept");
  cJSON_AddStringToObject(rules, "same_schedule",
                          "it builds the schedule of an earlier configuration: its results");
  cJSON *unlisted = cJSON_AddArrayToObject(rules, "unlisted");
  for (guint i = 0; plan->unlisted != NULL && i < plan->unlisted->len; i++) {
    const StPlanUnlisted *u = &g_array_index(plan->unlisted, StPlanUnlisted, i);
    cJSON *obj = cJSON_CreateObject();
    cJSON_AddStringToObject(obj, "reason", u->reason);
    st_json_add_int(obj, "count", u->count);
    cJSON_AddStringToObject(obj, "example", u->example);
    cJSON_AddItemToArray(unlisted, obj);
  }
  return rules;
}

static cJSON *
point_json(const StPlan *plan, int i)
{
  const StPlanConfig *c = &g_array_index(plan->configs, StPlanConfig, i);
  const StPlanPoint *pt = &plan->points[i];
  cJSON *obj = cJSON_CreateObject();
  st_json_add_int(obj, "index", i);
  cJSON_AddStringToObject(obj, "strategy", c->strategy->name);
  cJSON *settings = cJSON_AddObjectToObject(obj, "settings");
  for (int k = 0; k < c->n_settings; k++)
    cJSON_AddStringToObject(settings, c->settings[2 * k], c->settings[2 * k + 1]);
  st_json_add_int(obj, "nodes", c->nodes);
  st_json_add_int(obj, "gpus", pt->gpus_used);
  add_int_or_null(obj, "ranks", pt->ranks);
  st_json_add_int(obj, "micro_batch", c->micro_batch);
  add_int_or_null(obj, "accumulation", pt->accumulation);
  add_int_or_null(obj, "global_batch", pt->global_batch);
  cJSON_AddStringToObject(obj, "status", st_plan_status_name(pt->status));
  if (pt->has_update) {
    cJSON_AddStringToObject(obj, "update", st_update_kind_name(pt->update.kind));
    cJSON_AddStringToObject(obj, "update_what", pt->update.what);
  } else {
    cJSON_AddNullToObject(obj, "update");
    cJSON_AddNullToObject(obj, "update_what");
  }
  char buf[ST_PLAN_REASON_MAX];
  const char *reason = st_plan_point_reason(plan, pt, buf);
  if (reason != NULL)
    cJSON_AddStringToObject(obj, "reason", reason);
  else
    cJSON_AddNullToObject(obj, "reason");
  if (pt->description != NULL)
    cJSON_AddStringToObject(obj, "description", pt->description);
  else
    cJSON_AddNullToObject(obj, "description");
  if (pt->bounded) {
    cJSON *bound = cJSON_AddObjectToObject(obj, "bound");
    cJSON_AddNumberToObject(bound, "step_time_s", (double)pt->bound.step_time_ns * 1e-9);
    st_json_add_int(bound, "peak_bytes", pt->bound.peak_bytes);
    st_json_add_int(bound, "device_bytes", pt->bound.device_bytes);
  } else {
    cJSON_AddNullToObject(obj, "bound");
  }
  if (pt->work_ns > 0)
    cJSON_AddNumberToObject(obj, "work_bound_s", (double)pt->work_ns * 1e-9);
  else
    cJSON_AddNullToObject(obj, "work_bound_s");
  if (pt->estimated) {
    /* The strategy's closed forms before building (StEstimate). */
    cJSON *est = cJSON_AddObjectToObject(obj, "estimate");
    cJSON_AddNumberToObject(est, "step_time_s", (double)pt->estimate.step_ns * 1e-9);
    cJSON_AddNumberToObject(est, "compute_s", (double)pt->estimate.compute_ns * 1e-9);
    cJSON_AddNumberToObject(est, "tp_comm_s", (double)pt->estimate.tp_comm_ns * 1e-9);
    cJSON_AddNumberToObject(est, "bubble_s", (double)pt->estimate.bubble_ns * 1e-9);
    st_json_add_int(est, "peak_bytes", pt->estimate.peak_bytes);
    st_json_add_int(est, "runtime_bytes", pt->runtime_bytes);
    st_json_add_int(est, "device_bytes", pt->device_floor);
    /* The planner's closed form of its steady step (plan_closed.c). */
    cJSON_AddNumberToObject(est, "closed_form_step_s", (double)pt->closed_ns * 1e-9);
  } else {
    cJSON_AddNullToObject(obj, "estimate");
  }
  cJSON_AddBoolToObject(obj, "simulated", pt->simulated);
  if (pt->same_as >= 0)
    st_json_add_int(obj, "same_schedule_as", pt->same_as);
  else
    cJSON_AddNullToObject(obj, "same_schedule_as");
  if (!pt->simulated)
    return obj;
  double step_s = (double)pt->step_time_ns * 1e-9;
  cJSON_AddNumberToObject(obj, "step_time_s", step_s);
  cJSON_AddBoolToObject(obj, "steady", pt->sim->steady);
  st_json_add_int(obj, "steps_simulated", pt->sim->steps_run);
  cJSON_AddNumberToObject(obj, "samples_per_s", pt->samples_per_s);
  cJSON_AddNumberToObject(obj, "samples_per_s_per_gpu",
                          pt->samples_per_s / MAX(pt->gpus_used, 1));
  if (pt->sim->mfu > 0)
    cJSON_AddNumberToObject(obj, "mfu", pt->sim->mfu);
  else
    cJSON_AddNullToObject(obj, "mfu");
  cJSON_AddNumberToObject(obj, "gpu_hours",
                          pt->gpus_used * step_s * (double)plan->spec->train_steps / 3600.0);
  if (pt->status == ST_PLAN_OK)
    cJSON_AddNumberToObject(obj, "objective", pt->objective);
  else
    cJSON_AddNullToObject(obj, "objective");
  if (pt->status == ST_PLAN_OK && st_plan_objective_is_run(plan->spec->objective)) {
    cJSON_AddNumberToObject(obj, "run_wall_s", pt->run_wall_s);
    cJSON_AddNumberToObject(obj, "run_goodput", pt->run_goodput);
    cJSON_AddNumberToObject(obj, "run_checkpoint_interval_s", pt->run_interval_s);
    cJSON_AddNumberToObject(obj, "run_spare_nodes", pt->run_spares);
  }
  double lo, hi;
  if (pt->simulated &&
      st_residuals_interval(&plan->spec->step_spread, step_s, &lo, &hi)) {
    cJSON *iv = cJSON_AddArrayToObject(obj, "step_time_interval_s");
    cJSON_AddItemToArray(iv, cJSON_CreateNumber(lo));
    cJSON_AddItemToArray(iv, cJSON_CreateNumber(hi));
  }
  st_json_add_int(obj, "peak_bytes", pt->peak_bytes);
  st_json_add_int(obj, "device_bytes", pt->device_bytes);
  cJSON *cats = cJSON_AddObjectToObject(obj, "peak_by_category");
  for (int k = 0; k < ST_MEM_N; k++)
    st_json_add_int(cats, st_mem_name(k), pt->sim->peak_by_category[k]);
  cJSON_AddNumberToObject(obj, "busy_s", (double)pt->sim->busy_ns * 1e-9);
  cJSON_AddNumberToObject(obj, "exposed_comm_s", (double)pt->sim->exposed_ns * 1e-9);
  cJSON *groups = cJSON_AddObjectToObject(obj, "exposed_comm_by_group_s");
  for (int k = 0; k < ST_PLAN_GROUPS && pt->sim->exposed_by_group[k].name[0]; k++)
    cJSON_AddNumberToObject(groups, pt->sim->exposed_by_group[k].name,
                            (double)pt->sim->exposed_by_group[k].ns * 1e-9);
  cJSON_AddNumberToObject(obj, "comm_bytes_per_step", pt->sim->comm_bytes);
  if (pt->rank > 0)
    st_json_add_int(obj, "rank", pt->rank);
  else
    cJSON_AddNullToObject(obj, "rank");
  cJSON_AddBoolToObject(obj, "pareto_gpus", pt->front_gpus);
  cJSON_AddBoolToObject(obj, "pareto_memory", pt->front_memory);
  return obj;
}

/* Everything but the points when `points` is FALSE (an empty array). */
static cJSON *
plan_json(const StPlan *plan, gboolean points)
{
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", "stagger-plan");
  st_json_add_int(root, "version", 1);
  cJSON_AddStringToObject(root, "model", plan->model->name);
  cJSON_AddStringToObject(root, "cluster", plan->cluster->name);
  cJSON_AddStringToObject(root, "gpu", plan->cluster->gpu.name);
  st_json_add_int(root, "gpus_per_node", plan->cluster->gpus_per_node);
  cJSON_AddItemToObject(root, "search", search_json(plan));
  cJSON_AddItemToObject(root, "counts", counts_json(&plan->counts));
  cJSON_AddItemToObject(root, "decided_unsimulated", rules_json(plan));
  int winner = st_plan_winner(plan), runner_up = st_plan_runner_up(plan);
  if (winner >= 0)
    st_json_add_int(root, "winner", winner);
  else
    cJSON_AddNullToObject(root, "winner");
  if (runner_up >= 0)
    st_json_add_int(root, "runner_up", runner_up);
  else
    cJSON_AddNullToObject(root, "runner_up");
  double a0, a1, b0, b1;
  if (winner >= 0 && runner_up >= 0 &&
      st_residuals_interval(&plan->spec->step_spread,
                            (double)plan->points[winner].step_time_ns, &a0, &a1) &&
      st_residuals_interval(&plan->spec->step_spread,
                            (double)plan->points[runner_up].step_time_ns, &b0, &b1))
    cJSON_AddBoolToObject(root, "winner_within_runner_up_interval",
                          (double)plan->points[winner].step_time_ns >= b0 &&
                            (double)plan->points[runner_up].step_time_ns <= a1);
  cJSON *list = cJSON_AddArrayToObject(root, "points");
  for (guint i = 0; points && i < plan->configs->len; i++)
    cJSON_AddItemToArray(list, point_json(plan, (int)i));
  return root;
}

cJSON *
st_plan_to_json(const StPlan *plan)
{
  return plan_json(plan, TRUE);
}

/* plan.json, streamed: the root as cJSON_Print formats it with no points,
 * whose tail (the empty array and the closing brace) is replaced by the
 * points printed one at a time as they stand in the tree, two levels deep
 * (st_plan_json_text). Byte for byte
 * st_plan_to_json's text, without holding a tree and a text of every point
 * at once (430 MB for 700,000 points). */
static gboolean
write_json(const StPlan *plan, const char *path, GError **error)
{
  static const char tail[] = "[]\n}";
  g_autoptr(cJSON) root = plan_json(plan, FALSE);
  g_autofree char *head = cJSON_Print(root);
  gsize len = head != NULL ? strlen(head) : 0;
  g_return_val_if_fail(len >= sizeof tail - 1 &&
                         strcmp(head + len - (sizeof tail - 1), tail) == 0, FALSE);
  FILE *f = g_fopen(path, "w");
  if (f == NULL) {
    int saved = errno;
    g_set_error(error, ST_PLAN_ERROR, ST_ERROR_IO, "%s: cannot write: %s", path,
                g_strerror(saved));
    return FALSE;
  }
  fwrite(head, 1, len - (sizeof tail - 1), f);
  g_autoptr(GString) out = g_string_sized_new(1 << 16);
  g_string_append_c(out, '[');
  for (guint i = 0; i < plan->configs->len; i++) {
    g_autoptr(cJSON) obj = point_json(plan, (int)i);
    if (i > 0)
      g_string_append(out, ", ");
    st_plan_json_text(out, obj, 2);
    if (out->len >= (1 << 16) - 4096) {
      fwrite(out->str, 1, out->len, f);
      g_string_truncate(out, 0);
    }
  }
  g_string_append(out, "]\n}\n");
  fwrite(out->str, 1, out->len, f);
  gboolean ok = !ferror(f);
  int saved = errno;
  if (fclose(f) != 0 && ok) {
    ok = FALSE;
    saved = errno;
  }
  if (!ok)
    g_set_error(error, ST_PLAN_ERROR, ST_ERROR_IO, "%s: cannot write: %s", path,
                g_strerror(saved));
  return ok;
}

/* A CSV field: quoted, with quotes doubled. */
static void
csv_text(GString *out, const char *text)
{
  g_string_append_c(out, '"');
  for (const char *p = text; *p != '\0'; p++) {
    if (*p == '"')
      g_string_append_c(out, '"');
    g_string_append_c(out, *p);
  }
  g_string_append_c(out, '"');
}

static char *
plan_csv(const StPlan *plan)
{
  GString *out = g_string_new(NULL);
  g_string_append(out, "index,strategy,status,gpus,nodes,micro_batch,accumulation,objective,"
                       "step_time_s,samples_per_s,peak_bytes,rank,pareto_gpus,pareto_memory,"
                       "steady,update,label\n");
  for (guint i = 0; i < plan->configs->len; i++) {
    const StPlanConfig *c = &g_array_index(plan->configs, StPlanConfig, i);
    const StPlanPoint *pt = &plan->points[i];
    if (!pt->simulated)
      continue;
    /* An out-of-memory point has no objective; plots place it by its time. */
    double objective = pt->status == ST_PLAN_OK
                         ? pt->objective
                         : st_plan_objective_value(plan->spec->objective, plan->spec, pt);
    char num[3][G_ASCII_DTOSTR_BUF_SIZE];
    g_string_append_printf(
      out, "%u,%s,%s,%d,%d,%d,%d,%s,%s,%s,%" G_GINT64_FORMAT ",%d,%d,%d,%d,%s,", i,
      c->strategy->name,
      st_plan_status_name(pt->status), pt->gpus_used, c->nodes, c->micro_batch,
      pt->accumulation, g_ascii_formatd(num[0], sizeof num[0], "%.9g", objective),
      g_ascii_formatd(num[1], sizeof num[1], "%.9g", (double)pt->step_time_ns * 1e-9),
      g_ascii_formatd(num[2], sizeof num[2], "%.9g", pt->samples_per_s), pt->peak_bytes,
      pt->rank, pt->front_gpus, pt->front_memory, pt->sim->steady,
      st_update_kind_name(pt->update.kind));
    g_autofree char *label = st_plan_config_label(c);
    csv_text(out, label);
    g_string_append_c(out, '\n');
  }
  return g_string_free(out, FALSE);
}

gboolean
st_plan_write(const StPlan *plan, const char *dir, GError **error)
{
  if (g_mkdir_with_parents(dir, 0755) != 0) {
    int saved = errno;
    g_set_error(error, ST_PLAN_ERROR, ST_ERROR_IO, "%s: cannot create: %s", dir,
                g_strerror(saved));
    return FALSE;
  }
  g_autofree char *json_path = g_build_filename(dir, "plan.json", NULL);
  if (!write_json(plan, json_path, error))
    return FALSE;
  g_autofree char *csv = plan_csv(plan);
  g_autofree char *csv_path = g_build_filename(dir, "plan.csv", NULL);
  GError *local = NULL;
  if (!g_file_set_contents(csv_path, csv, -1, &local)) {
    g_set_error(error, ST_PLAN_ERROR, ST_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return FALSE;
  }
  return TRUE;
}
