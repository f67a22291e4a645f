/* runs.c: the runs file (see runs.h). Strict like every loader. */
#include "calib/runs.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "cost/framework.h"
#include "strategy/options.h"
#include "strategy/strategy.h"

G_DEFINE_QUARK(st-runs-error-quark, st_runs_error)

#define FORMAT "stagger-runs"

const char *
st_run_set_name(StRunSet set)
{
  return set == ST_RUN_HELD_OUT ? "held-out" : set == ST_RUN_EXCLUDED ? "excluded" : "calibration";
}

static void
run_free(gpointer p)
{
  StRun *r = p;
  g_free(r->id);
  g_free(r->source);
  g_free(r->note);
  g_free(r->model);
  g_free(r->cluster);
  g_free(r->strategy);
  if (r->options != NULL)
    g_ptr_array_unref(r->options);
  g_free(r);
}

void
st_runs_free(StRuns *runs)
{
  if (runs == NULL)
    return;
  g_free(runs->path);
  g_free(runs->note);
  if (runs->runs != NULL)
    g_ptr_array_unref(runs->runs);
  g_free(runs);
}

static gboolean
fail(GError **error, GError *local, const char *origin, const char *where)
{
  g_set_error(error, ST_RUNS_ERROR, local->code, "%s: %s%s%s", origin, where ? where : "",
              where ? ": " : "", local->message);
  g_error_free(local);
  return FALSE;
}

static gboolean
bad(GError **error, const char *origin, const char *where, const char *format, ...)
  G_GNUC_PRINTF(4, 5);

static gboolean
bad(GError **error, const char *origin, const char *where, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *what = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error(error, ST_RUNS_ERROR, ST_ERROR_INVALID, "%s: %s: %s", origin, where, what);
  return FALSE;
}

/* `name` relative to the runs file's folder, else to the data folder
 * ($STAGGER_DATA_DIR, else the source tree). Transfer full. */
static char *
resolve(const char *dir, const char *name)
{
  if (g_path_is_absolute(name))
    return g_strdup(name);
  g_autofree char *near = g_build_filename(dir, name, NULL);
  if (g_file_test(near, G_FILE_TEST_EXISTS))
    return g_steal_pointer(&near);
  const char *data = g_getenv("STAGGER_DATA_DIR");
  g_autofree char *here = g_path_get_dirname(__FILE__); /* <source>/sim/calib */
  g_autofree char *root = data != NULL && *data != '\0'
                            ? g_strdup(data)
                            : g_build_filename(here, "..", "..", NULL);
  g_autofree char *shipped = g_build_filename(root, name, NULL);
  if (g_file_test(shipped, G_FILE_TEST_EXISTS))
    return g_steal_pointer(&shipped);
  return g_steal_pointer(&near);
}

/* An option's value as st_options_set reads it. Transfer full, NULL when
 * the JSON type cannot be one. */
static char *
option_text(const cJSON *item)
{
  if (cJSON_IsString(item))
    return g_strdup(item->valuestring);
  if (cJSON_IsBool(item))
    return g_strdup(cJSON_IsTrue(item) ? "true" : "false");
  if (cJSON_IsNumber(item) && isfinite(item->valuedouble)) {
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    if (item->valuedouble == floor(item->valuedouble) && fabs(item->valuedouble) < 1e15)
      return g_strdup_printf("%.0f", item->valuedouble);
    return g_strdup(g_ascii_dtostr(buf, sizeof buf, item->valuedouble));
  }
  return NULL;
}

static gboolean
read_options(const cJSON *obj, StRun *run, const char *origin, const char *where,
             GError **error)
{
  run->options = g_ptr_array_new_with_free_func(g_free);
  if (obj == NULL)
    return TRUE;
  StOptions check;
  st_options_init(&check);
  const cJSON *item = NULL;
  gboolean ok = TRUE;
  cJSON_ArrayForEach(item, obj)
  {
    g_autofree char *text = option_text(item);
    g_autoptr(GError) local = NULL;
    if (st_option_find(item->string) == NULL)
      ok = bad(error, origin, where, "options: unknown option '%s' (stagger sim --help lists "
               "them)", item->string);
    else if (text == NULL)
      ok = bad(error, origin, where, "options: '%s': expected a number, string or boolean",
               item->string);
    else if (!st_options_set(&check, item->string, text, &local))
      ok = bad(error, origin, where, "options: %s", local->message);
    if (!ok)
      break;
    g_ptr_array_add(run->options, g_strdup(item->string));
    g_ptr_array_add(run->options, g_steal_pointer(&text));
  }
  st_options_clear(&check);
  return ok;
}

static gboolean
read_measured(const cJSON *obj, StRun *run, const char *origin, const char *where,
              GError **error)
{
  static const char *const keys[] = {"step_time_s", "memory", "memory_kind", NULL};
  const char *kind = NULL;
  GError *local = NULL;
  if (!st_json_check_keys(obj, keys, &local) ||
      !st_json_get_double_range(obj, "step_time_s", FALSE, 1e-9, 1e7, &run->step_time_s,
                                &local) ||
      !st_json_get_bytes(obj, "memory", FALSE, &ST_RANGE_DEVICE_MEMORY, &run->memory_bytes,
                         &local) ||
      !st_json_get_string(obj, "memory_kind", FALSE, &kind, &local) ||
      (kind != NULL && !st_memory_kind_parse(kind, &run->memory_kind, &local))) {
    g_autofree char *at = g_strdup_printf("%s: measured", where);
    return fail(error, local, origin, at);
  }
  if (run->step_time_s <= 0 && run->memory_bytes <= 0)
    return bad(error, origin, where, "measured: needs step_time_s, memory, or both");
  return TRUE;
}

static gboolean
read_run(const cJSON *obj, const char *dir, StRun *run, const char *origin, int index,
         GError **error)
{
  static const char *const keys[] = {"id", "set", "source", "note", "model", "cluster",
                                     "strategy", "options", "measured", NULL};
  const char *id = NULL, *set = "calibration", *source = NULL, *note = NULL, *model = NULL,
             *cluster = NULL, *strategy = NULL;
  const cJSON *options = NULL, *measured = NULL;
  GError *local = NULL;
  g_autofree char *where = g_strdup_printf("run %d", index);
  if (!cJSON_IsObject(obj))
    return bad(error, origin, where, "expected an object");
  if (!st_json_check_keys(obj, keys, &local) ||
      !st_json_get_string(obj, "id", TRUE, &id, &local))
    return fail(error, local, origin, where);
  g_free(where);
  where = g_strdup_printf("run '%s'", id);
  if (!st_json_get_string(obj, "set", FALSE, &set, &local) ||
      !st_json_get_string(obj, "source", FALSE, &source, &local) ||
      !st_json_get_string(obj, "note", FALSE, &note, &local) ||
      !st_json_get_string(obj, "model", TRUE, &model, &local) ||
      !st_json_get_string(obj, "cluster", TRUE, &cluster, &local) ||
      !st_json_get_string(obj, "strategy", FALSE, &strategy, &local) ||
      !st_json_get_object(obj, "options", FALSE, &options, &local) ||
      !st_json_get_object(obj, "measured", TRUE, &measured, &local))
    return fail(error, local, origin, where);
  if (*id == '\0')
    return bad(error, origin, where, "key 'id': must not be empty");
  if (strcmp(set, "calibration") == 0)
    run->set = ST_RUN_CALIBRATION;
  else if (strcmp(set, "held-out") == 0)
    run->set = ST_RUN_HELD_OUT;
  else if (strcmp(set, "excluded") == 0)
    run->set = ST_RUN_EXCLUDED;
  else
    return bad(error, origin, where,
               "key 'set': '%s' is none of calibration, held-out, excluded", set);
  if (run->set == ST_RUN_EXCLUDED && (note == NULL || *note == '\0'))
    return bad(error, origin, where,
               "an excluded run needs a 'note' naming the mechanism the model lacks");
  if (strategy == NULL)
    strategy = "dp";
  if (st_strategy_find(strategy) == NULL) {
    g_autoptr(GError) unknown = NULL;
    st_strategy_lookup(strategy, &unknown);
    return bad(error, origin, where, "%s", unknown->message);
  }
  run->id = g_strdup(id);
  run->source = g_strdup(source);
  run->note = g_strdup(note);
  run->strategy = g_strdup(strategy);
  run->model = resolve(dir, model);
  run->cluster = resolve(dir, cluster);
  if (!g_file_test(run->model, G_FILE_TEST_IS_REGULAR))
    return bad(error, origin, where, "model '%s' is not a file (%s)", model, run->model);
  if (!g_file_test(run->cluster, G_FILE_TEST_IS_REGULAR))
    return bad(error, origin, where, "cluster '%s' is not a file (%s)", cluster, run->cluster);
  return read_options(options, run, origin, where, error) &&
         read_measured(measured, run, origin, where, error);
}

StRuns *
st_runs_load(const char *path, GError **error)
{
  static const char *const keys[] = {"format", "version", "note", "runs", NULL};
  GError *local = NULL;
  g_autoptr(cJSON) root = st_json_load_file(path, &local);
  if (root == NULL) {
    g_set_error_literal(error, ST_RUNS_ERROR, local->code, local->message);
    g_error_free(local);
    return NULL;
  }
  const char *format = NULL, *note = NULL;
  const cJSON *list = NULL, *item = NULL;
  int64_t version = 0;
  if (!cJSON_IsObject(root)) {
    bad(error, path, "top level", "expected a JSON object");
    return NULL;
  }
  if (!st_json_check_keys(root, keys, &local) ||
      !st_json_get_string(root, "format", TRUE, &format, &local) ||
      !st_json_get_int(root, "version", TRUE, 1, 1, &version, &local) ||
      !st_json_get_string(root, "note", FALSE, &note, &local) ||
      !st_json_get_array(root, "runs", TRUE, &list, &local)) {
    fail(error, local, path, NULL);
    return NULL;
  }
  if (strcmp(format, FORMAT) != 0) {
    bad(error, path, "key 'format'", "'%s' is not \"" FORMAT "\"", format);
    return NULL;
  }
  g_autoptr(StRuns) runs = g_new0(StRuns, 1);
  runs->path = g_strdup(path);
  runs->note = g_strdup(note);
  runs->runs = g_ptr_array_new_with_free_func(run_free);
  g_autofree char *dir = g_path_get_dirname(path);
  g_autoptr(GHashTable) ids = g_hash_table_new(g_str_hash, g_str_equal);
  int index = 0;
  cJSON_ArrayForEach(item, list)
  {
    StRun *run = g_new0(StRun, 1);
    g_ptr_array_add(runs->runs, run);
    if (!read_run(item, dir, run, path, index++, error))
      return NULL;
    if (!g_hash_table_add(ids, run->id)) {
      bad(error, path, "runs", "id '%s' appears twice", run->id);
      return NULL;
    }
  }
  if (runs->runs->len == 0) {
    bad(error, path, "runs", "the list is empty");
    return NULL;
  }
  return g_steal_pointer(&runs);
}

const char *
st_run_framework(const StRun *r)
{
  gboolean sparse = FALSE;
  for (guint k = 0; k + 1 < r->options->len; k += 2) {
    const char *name = g_ptr_array_index(r->options, k);
    const char *value = g_ptr_array_index(r->options, k + 1);
    if (strcmp(name, "framework") == 0)
      return value;
    if (strcmp(name, "sparsity") == 0)
      sparse = g_ascii_strtod(value, NULL) > 0;
  }
  return st_framework_default(r->strategy, sparse)->name;
}
