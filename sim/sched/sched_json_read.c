/* sched_json_read.c: reading a Schedule from JSON, strictly (see
 * sched_json.c for the format's shape and docs/FORMATS.md). Every index is
 * validated before the builder API sees it, and every error names the origin
 * and the JSON path. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "base/limits.h"
#include "cost/cost.h"
#include "cost/framework.h"
#include "sched/sched_import.h"
#include "sched/sched_json_private.h"

/* ---- reading: helpers ----------------------------------------------------- */

/* Errors below name the place in the tree ("programs[0].ops[12]: ..."); the
 * origin is prefixed once, by st_schedule_from_json. */

gboolean
sj_fail(GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *message = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error_literal(error, ST_SCHED_ERROR, ST_ERROR_INVALID, message);
  return FALSE;
}

/* Prefixes a path segment ("programs[0]", ".ops[3]") to an error whose
 * message is a deeper path (".deps[1]: ...") or a plain message, so nested
 * readers compose "programs[0].ops[3].deps[1]: ...". */
void
sj_prefix_path(GError **error, const char *format, ...)
{
  if (error == NULL || *error == NULL)
    return;
  va_list args;
  va_start(args, format);
  g_autofree char *segment = g_strdup_vprintf(format, args);
  va_end(args);
  char first = (*error)->message[0];
  if (first == '.' || first == '[')
    g_prefix_error(error, "%s", segment);
  else
    g_prefix_error(error, "%s: ", segment);
}

/* Calls `read` on each item of `array`; an error gets the item's path
 * (`path` is "ranks" at the top level, ".ops" below it). */
gboolean
sj_read_each(const cJSON *array, const char *path, ItemReader read, gpointer ctx, GError **error)
{
  int i = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, array)
  {
    if (!read(item, i, ctx, error)) {
      sj_prefix_path(error, "%s[%d]", path, i);
      return FALSE;
    }
    i++;
  }
  return TRUE;
}

/* Reads `key` as an index into `n` things that `owner` has ("the program",
 * 2, "streams"). Leaves *out untouched when optional and absent. */
gboolean
sj_get_index(const cJSON *obj, const char *key, gboolean required, int64_t n, const char *owner,
          const char *things, int32_t *out, GError **error)
{
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (item == NULL)
    return required ? sj_fail(error, "missing key '%s'", key) : TRUE;
  int64_t v;
  if (!st_json_item_int(item, key, G_MININT32, G_MAXINT32, &v, error))
    return FALSE;
  if (v < 0 || v >= n)
    return sj_fail(error, "key '%s': %" G_GINT64_FORMAT " is out of range: %s has %" G_GINT64_FORMAT
                " %s", key, v, owner, n, things);
  *out = (int32_t)v;
  return TRUE;
}

gboolean
sj_get_int32(const cJSON *obj, const char *key, gboolean required, int32_t *out, GError **error)
{
  int64_t v = *out;
  if (!st_json_get_int(obj, key, required, G_MININT32, G_MAXINT32, &v, error))
    return FALSE;
  *out = (int32_t)v;
  return TRUE;
}

gboolean
sj_expect_object(const cJSON *item, const char *const *keys, GError **error)
{
  if (!cJSON_IsObject(item))
    return sj_fail(error, "expected an object");
  return st_json_check_keys(item, keys, error);
}

/* ---- reading: the schedule-wide parts ------------------------------------ */

static gboolean
read_settings(const cJSON *obj, StSettings *st, GError **error)
{
  static const char *const keys[] = {"strategy",     "description",  "precision",
                                     "optimizer",    "micro_batch",  "accumulation",
                                     "global_batch", "sparsity",     "recompute",
                                     "compute_model", "framework", "memory_format",
                                     "gather_bucket_bytes", "recompute_ops", "moe_imbalance", NULL};
  const char *strategy = NULL, *description = NULL, *precision = NULL, *optimizer = NULL;
  const char *compute = NULL, *framework = NULL, *format = NULL;
  int64_t micro = 0, accumulation = 0;
  if (!sj_expect_object(obj, keys, error) ||
      !st_json_get_string(obj, "strategy", FALSE, &strategy, error) ||
      !st_json_get_string(obj, "description", FALSE, &description, error) ||
      !st_json_get_string(obj, "precision", TRUE, &precision, error) ||
      !st_json_get_string(obj, "optimizer", TRUE, &optimizer, error) ||
      !st_precision_parse(precision, &st->precision, error) ||
      !st_optimizer_parse(optimizer, &st->optimizer, error) ||
      !st_json_get_int(obj, "micro_batch", TRUE, 0, G_MAXINT32, &micro, error) ||
      !st_json_get_int(obj, "accumulation", TRUE, 0, G_MAXINT32, &accumulation, error) ||
      !st_json_get_int(obj, "global_batch", TRUE, 0, INT64_C(1000000000000000),
                       &st->global_batch, error) ||
      !st_json_get_string(obj, "compute_model", FALSE, &compute, error) ||
      !st_json_get_string(obj, "framework", FALSE, &framework, error) ||
      !st_json_get_string(obj, "memory_format", FALSE, &format, error) ||
      !st_json_get_int(obj, "gather_bucket_bytes", FALSE, 0, INT64_C(1) << 50,
                       &st->gather_bucket_bytes, error))
    return FALSE;
  if (format != NULL && strcmp(format, "nchw") != 0 && strcmp(format, "nhwc") != 0)
    return sj_fail(error, "key 'memory_format': expected nchw or nhwc");
  st->nchw = format != NULL && strcmp(format, "nchw") == 0;
  if (compute != NULL && !st_compute_model_known(compute))
    return sj_fail(error, "key 'compute_model': expected estimate or roofline");
  if (framework != NULL && st_framework_find(framework) == NULL)
    return sj_fail(error, "key 'framework': unknown framework (stagger sim --help lists them)");
  const cJSON *sparsity = cJSON_GetObjectItemCaseSensitive(obj, "sparsity");
  if (sparsity != NULL) {
    if (!cJSON_IsNumber(sparsity) || !(sparsity->valuedouble >= 0 && sparsity->valuedouble < 1))
      return sj_fail(error, "key 'sparsity': expected a number in [0, 1)");
    st->sparsity = sparsity->valuedouble;
  }
  const cJSON *imbalance = cJSON_GetObjectItemCaseSensitive(obj, "moe_imbalance");
  if (imbalance != NULL) {
    if (!cJSON_IsNumber(imbalance) ||
        !(imbalance->valuedouble >= 1 && imbalance->valuedouble <= 1e3))
      return sj_fail(error, "key 'moe_imbalance': expected a number in [1, 1000]");
    st->moe_imbalance = imbalance->valuedouble;
  }
  const char *recompute = NULL;
  if (!st_json_get_string(obj, "recompute", FALSE, &recompute, error) ||
      (recompute != NULL && !st_recompute_parse(recompute, &st->recompute, error)))
    return FALSE;
  const char *ops = NULL;
  if (!st_json_get_string(obj, "recompute_ops", FALSE, &ops, error) ||
      (ops != NULL && !st_recompute_ops_parse(ops, &st->recompute_ops, error)))
    return FALSE;
  st->micro_batch = (int32_t)micro;
  st->accumulation = (int32_t)accumulation;
  st->strategy = g_strdup(strategy);
  st->description = g_strdup(description);
  st->compute_model = g_strdup(compute);
  st->framework = g_strdup(framework);
  return TRUE;
}

static gboolean
read_notes(const cJSON *obj, StSchedule *s, GError **error)
{
  const cJSON *item;
  cJSON_ArrayForEach(item, obj)
  {
    if (cJSON_IsString(item))
      st_schedule_note_text(s, item->string, item->valuestring);
    else if (cJSON_IsNumber(item) && isfinite(item->valuedouble))
      st_schedule_note_number(s, item->string, item->valuedouble);
    else
      return sj_fail(error, "key '%s': expected a number or a string", item->string);
  }
  return TRUE;
}

/* A job beside the main one: its name, model and settings. */
static gboolean
read_job(const cJSON *obj, int index, gpointer ctx, GError **error)
{
  static const char *const keys[] = {"name", "model", "settings", NULL};
  StSchedule *s = ctx;
  const char *name = NULL;
  const cJSON *model_obj = NULL, *settings = NULL;
  if (!sj_expect_object(obj, keys, error) || !st_json_get_string(obj, "name", TRUE, &name, error) ||
      !st_json_get_object(obj, "model", TRUE, &model_obj, error) ||
      !st_json_get_object(obj, "settings", TRUE, &settings, error))
    return FALSE;
  StModel *model = st_model_from_json(model_obj, "model", error);
  if (model == NULL)
    return FALSE;
  StSettings st = {0};
  if (!read_settings(settings, &st, error)) {
    st_model_free(model);
    sj_prefix_path(error, "settings");
    return FALSE;
  }
  st_schedule_add_job(s, name, model, &st);
  g_free(st.strategy);
  g_free(st.description);
  return TRUE;
}

/* Placement and program of each rank, read before st_schedule_new (which
 * only g_return_if_fail()s on a bad device). */
typedef struct {
  int n_devices, n_programs;
  int32_t *device, *program, *replica;
  int64_t *start_ns;
} Ranks;

static gboolean
read_rank(const cJSON *item, int r, gpointer ctx, GError **error)
{
  static const char *const keys[] = {"device", "program", "start_ns", "replica", NULL};
  Ranks *rk = ctx;
  int64_t replica = r;
  gboolean ok = sj_expect_object(item, keys, error) &&
         sj_get_index(item, "device", TRUE, rk->n_devices, "the cluster", "GPUs in use",
                   &rk->device[r], error) &&
         sj_get_index(item, "program", TRUE, rk->n_programs, "the schedule", "programs",
                   &rk->program[r], error) &&
         st_json_get_int(item, "start_ns", FALSE, 0, ST_MAX_TIME_NS, &rk->start_ns[r], error) &&
         st_json_get_int(item, "replica", FALSE, 0, G_MAXINT32, &replica, error);
  rk->replica[r] = (int32_t)replica;
  return ok;
}

static gboolean
read_device(const cJSON *item, int d, gpointer ctx, GError **error)
{
  static const char *const keys[] = {"node", "local", NULL};
  StSchedule *s = ctx;
  return sj_expect_object(item, keys, error) &&
         sj_get_index(item, "node", TRUE, s->cluster->nodes, "the cluster", "nodes",
                   &s->devices[d].node, error) &&
         sj_get_index(item, "local", TRUE, s->cluster->gpus_per_node, "a node", "GPUs",
                   &s->devices[d].local, error);
}

/* A communicator from its groups: group g becomes color g, so
 * st_schedule_add_comm rebuilds the same groups in the same order. Members
 * must be ascending, as the builder keeps them. */
static gboolean
read_comm(const cJSON *obj, int index, gpointer ctx, GError **error)
{
  static const char *const keys[] = {"name", "groups", NULL};
  StSchedule *s = ctx;
  const char *name = NULL;
  const cJSON *groups = NULL;
  if (!sj_expect_object(obj, keys, error) || !st_json_get_string(obj, "name", TRUE, &name, error) ||
      !st_json_get_array(obj, "groups", TRUE, &groups, error))
    return FALSE;
  g_autofree int32_t *color = g_new(int32_t, s->n_ranks);
  for (int r = 0; r < s->n_ranks; r++)
    color[r] = -1;
  int g = 0;
  const cJSON *group;
  cJSON_ArrayForEach(group, groups)
  {
    if (!cJSON_IsArray(group) || cJSON_GetArraySize(group) == 0)
      return sj_fail(error, ".groups[%d]: expected a non-empty array of ranks", g);
    int m = 0, previous = -1;
    const cJSON *item;
    cJSON_ArrayForEach(item, group)
    {
      int64_t r;
      if (!st_json_item_int(item, "rank", 0, s->n_ranks - 1, &r, error)) {
        sj_prefix_path(error, ".groups[%d][%d]", g, m);
        return FALSE;
      }
      if (color[r] >= 0)
        return sj_fail(error, ".groups[%d][%d]: rank %d is already in group %d", g, m, (int)r,
                    color[r]);
      if (r < previous)
        return sj_fail(error, ".groups[%d][%d]: ranks must be ascending (%d after %d)", g, m,
                    (int)r, previous);
      color[r] = g;
      previous = (int)r;
      m++;
    }
    g++;
  }
  st_schedule_add_comm(s, name, color);
  return TRUE;
}

/* ---- reading: the whole ---------------------------------------------------- */

/* Everything after the model and cluster (taken over); errors carry no
 * origin yet. `n_programs` < 0: the programs are root's "programs"; else
 * root has none, and the ranks name programs the caller adds. */
static StSchedule *
read_schedule(const cJSON *root, StModel *model_in, StCluster *cluster_in, int n_programs,
              GError **error)
{
  g_autoptr(StModel) model = model_in;
  g_autoptr(StCluster) cluster = cluster_in;
  const cJSON *settings = NULL, *notes = NULL, *devices = NULL, *ranks = NULL, *comms = NULL,
              *programs = NULL, *jobs = NULL;
  int64_t steps = 1, warmup = -1, scale = 1;
  if (!st_json_get_object(root, "settings", TRUE, &settings, error) ||
      !st_json_get_int(root, "steps", TRUE, 0, ST_MAX_STEPS, &steps, error) ||
      !st_json_get_int(root, "warmup_steps", FALSE, 0, ST_MAX_STEPS, &warmup, error) ||
      !st_json_get_int(root, "warmup_scale", FALSE, 1, ST_MAX_STEPS, &scale, error) ||
      !st_json_get_object(root, "notes", FALSE, &notes, error) ||
      !st_json_get_array(root, "devices", TRUE, &devices, error) ||
      !st_json_get_array(root, "ranks", TRUE, &ranks, error) ||
      !st_json_get_array(root, "comms", TRUE, &comms, error) ||
      !st_json_get_array(root, "programs", n_programs < 0, &programs, error) ||
      !st_json_get_array(root, "jobs", FALSE, &jobs, error))
    return NULL;
  int n_ranks = cJSON_GetArraySize(ranks);
  if (cluster->gpus <= 0 || cluster->gpus_per_node <= 0) {
    sj_fail(error, "cluster: no GPUs in use");
    return NULL;
  }
  if (n_ranks == 0) {
    sj_fail(error, "ranks: expected at least one rank");
    return NULL;
  }
  if (cJSON_GetArraySize(devices) != cluster->gpus) {
    sj_fail(error, "devices: %d entries, but the cluster has %d GPUs in use",
         cJSON_GetArraySize(devices), cluster->gpus);
    return NULL;
  }
  g_autofree int32_t *device = g_new0(int32_t, n_ranks);
  g_autofree int32_t *program = g_new0(int32_t, n_ranks);
  g_autofree int64_t *start_ns = g_new0(int64_t, n_ranks);
  g_autofree int32_t *replica = g_new0(int32_t, n_ranks);
  Ranks rk = {cluster->gpus, n_programs < 0 ? cJSON_GetArraySize(programs) : n_programs, device,
              program, replica, start_ns};
  if (!sj_read_each(ranks, "ranks", read_rank, &rk, error))
    return NULL;

  g_autoptr(StSchedule) s = st_schedule_new(g_steal_pointer(&model),
                                            g_steal_pointer(&cluster), n_ranks, device);
  for (int r = 0; r < n_ranks; r++) {
    s->ranks[r].program = program[r];
    s->ranks[r].start_ns = start_ns[r];
    s->ranks[r].replica = replica[r];
  }
  s->steps = (int32_t)steps;
  s->warmup_steps = (int32_t)warmup;
  s->warmup_scale = (int32_t)scale;
  if (!read_settings(settings, &s->settings, error)) {
    sj_prefix_path(error, "settings");
    return NULL;
  }
  if (notes != NULL && !read_notes(notes, s, error)) {
    sj_prefix_path(error, "notes");
    return NULL;
  }
  if ((jobs != NULL && !sj_read_each(jobs, "jobs", read_job, s, error)) ||
      !sj_read_each(devices, "devices", read_device, s, error) ||
      !sj_read_each(comms, "comms", read_comm, s, error) ||
      (n_programs < 0 && !sj_read_each(programs, "programs", sj_read_program, s, error)))
    return NULL;
  return g_steal_pointer(&s);
}

/* st_schedule_from_json, and st_schedule_from_json_without_programs
 * (sched_import.h) when `model_in` is given or `n_programs` >= 0. */
static StSchedule *
from_json(const cJSON *root, StModel *model_in, int n_programs, const char *origin,
          GError **error)
{
  g_autoptr(StModel) given = model_in;
  static const char *const keys[] = {"format", "version", "model",  "cluster", "settings",
                                     "steps",  "notes",   "devices", "ranks",  "comms",
                                     "programs", "jobs", "warmup_steps", "warmup_scale", NULL};
  g_return_val_if_fail(root != NULL, NULL);
  if (origin == NULL)
    origin = "<schedule>";
  const char *format = NULL;
  int64_t version = 0;
  const cJSON *model_obj = NULL, *cluster_obj = NULL;
  gboolean ok = cJSON_IsObject(root) ? st_json_check_keys(root, keys, error)
                                     : sj_fail(error, "expected a JSON object");
  ok = ok && st_json_get_string(root, "format", TRUE, &format, error) &&
       st_json_get_int(root, "version", TRUE, 0, G_MAXINT32, &version, error) &&
       st_json_get_object(root, "model", given == NULL, &model_obj, error) &&
       st_json_get_object(root, "cluster", TRUE, &cluster_obj, error);
  if (ok && g_strcmp0(format, ST_SCHEDULE_FORMAT) != 0)
    ok = sj_fail(error, "key 'format': '%s' is not a schedule (expected '%s')", format,
              ST_SCHEDULE_FORMAT);
  if (ok && version != ST_SCHEDULE_VERSION)
    ok = sj_fail(error, "key 'version': version %d is not supported (this build reads %d)",
              (int)version, ST_SCHEDULE_VERSION);
  if (!ok) {
    g_prefix_error(error, "%s: ", origin);
    return NULL;
  }
  /* The model and cluster loaders name their origin themselves. */
  g_autofree char *model_origin = g_strdup_printf("%s: model", origin);
  g_autofree char *cluster_origin = g_strdup_printf("%s: cluster", origin);
  g_autoptr(StModel) model = given != NULL ? g_steal_pointer(&given)
                                           : st_model_from_json(model_obj, model_origin, error);
  if (model == NULL)
    return NULL;
  g_autoptr(StCluster) cluster = st_cluster_from_json(cluster_obj, cluster_origin, error);
  if (cluster == NULL)
    return NULL;
  StSchedule *s = read_schedule(root, g_steal_pointer(&model), g_steal_pointer(&cluster),
                                n_programs, error);
  if (s == NULL)
    g_prefix_error(error, "%s: ", origin);
  return s;
}

StSchedule *
st_schedule_from_json(const cJSON *root, const char *origin, GError **error)
{
  return from_json(root, NULL, -1, origin, error);
}

StSchedule *
st_schedule_from_json_without_programs(const cJSON *root, StModel *model, int n_programs,
                                       const char *origin, GError **error)
{
  g_return_val_if_fail(n_programs >= 0, (st_model_free(model), NULL));
  return from_json(root, model, n_programs, origin, error);
}

StSchedule *
st_schedule_load(const char *path, GError **error)
{
  g_autoptr(cJSON) root = st_json_load_file(path, error);
  if (root == NULL)
    return NULL;
  return st_schedule_from_json(root, path, error);
}
