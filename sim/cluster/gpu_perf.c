/* gpu_perf.c: see gpu_perf.h. Strict like every loader: unknown keys,
 * numbers out of range and sections without a source are errors naming the
 * file and the key. */
#include "cluster/gpu_perf.h"

#include <string.h>

#include "base/error.h"
#include "base/json.h"

G_DEFINE_QUARK(st-gpu-perf-error-quark, st_gpu_perf_error)

#define FORMAT "stagger-gpu-performance"

static gboolean
fail(GError **error, GError *local, const char *origin, const char *where)
{
  g_set_error(error, ST_GPU_PERF_ERROR, local->code, "%s: %s%s%s", origin, where ? where : "",
              where ? ": " : "", local->message);
  g_error_free(local);
  return FALSE;
}

/* Section `name` of `root`: {"<key>": number in [lo, hi], "source": "..."}. */
static gboolean
parse_number(const cJSON *root, const char *name, const char *key, double lo, double hi,
             StPerfNumber *out, const char *origin, GError **error)
{
  const char *const keys[] = {key, "source", NULL};
  const cJSON *obj = NULL;
  const char *source = NULL;
  GError *local = NULL;
  if (!st_json_get_object(root, name, TRUE, &obj, &local))
    return fail(error, local, origin, NULL);
  if (!st_json_check_keys(obj, keys, &local) ||
      !st_json_get_double(obj, key, TRUE, lo, &out->value, &local) ||
      !st_json_get_string(obj, "source", TRUE, &source, &local))
    return fail(error, local, origin, name);
  if (out->value > hi) {
    g_set_error(error, ST_GPU_PERF_ERROR, ST_ERROR_INVALID,
                "%s: %s: key '%s': %g is more than %g", origin, name, key, out->value, hi);
    return FALSE;
  }
  if (lo > 0 && out->value <= 0) {
    g_set_error(error, ST_GPU_PERF_ERROR, ST_ERROR_INVALID,
                "%s: %s: key '%s': must be more than 0", origin, name, key);
    return FALSE;
  }
  if (*source == '\0') {
    g_set_error(error, ST_GPU_PERF_ERROR, ST_ERROR_INVALID,
                "%s: %s: key 'source': must name the measurement the number comes from",
                origin, name);
    return FALSE;
  }
  out->source = g_strdup(source);
  return TRUE;
}

static void
clear_number(StPerfNumber *n)
{
  g_free(n->source);
}

StGpuPerf *
st_gpu_perf_from_json(const cJSON *root, const char *origin, GError **error)
{
  static const char *const keys[] = {"format", "version", "gpu", "note", "memory", "sharing",
                                     NULL};
  g_return_val_if_fail(root != NULL && origin != NULL, NULL);
  GError *local = NULL;
  const char *format = NULL, *gpu = NULL, *note = NULL;
  int64_t version = 0;
  if (!cJSON_IsObject(root)) {
    g_set_error(error, ST_GPU_PERF_ERROR, ST_ERROR_INVALID, "%s: expected a JSON object",
                origin);
    return NULL;
  }
  if (!st_json_check_keys(root, keys, &local) ||
      !st_json_get_string(root, "format", TRUE, &format, &local) ||
      !st_json_get_int(root, "version", TRUE, 1, 1, &version, &local) ||
      !st_json_get_string(root, "gpu", TRUE, &gpu, &local) ||
      !st_json_get_string(root, "note", FALSE, &note, &local)) {
    fail(error, local, origin, NULL);
    return NULL;
  }
  if (strcmp(format, FORMAT) != 0) {
    g_set_error(error, ST_GPU_PERF_ERROR, ST_ERROR_INVALID,
                "%s: key 'format': '%s' is not \"" FORMAT "\"", origin, format);
    return NULL;
  }
  g_autoptr(StGpuPerf) p = g_new0(StGpuPerf, 1);
  p->refs = 1;
  p->gpu = g_strdup(gpu);
  p->note = g_strdup(note);
  if (!parse_number(root, "memory", "fraction", 1e-3, 1, &p->memory_fraction, origin, error) ||
      !parse_number(root, "sharing", "priority_leak", 0, 1, &p->priority_leak, origin, error))
    return NULL;
  return g_steal_pointer(&p);
}

StGpuPerf *
st_gpu_perf_load(const char *path, GError **error)
{
  GError *local = NULL;
  g_autoptr(cJSON) root = st_json_load_file(path, &local);
  if (root == NULL) {
    g_set_error_literal(error, ST_GPU_PERF_ERROR, local->code, local->message);
    g_error_free(local);
    return NULL;
  }
  StGpuPerf *p = st_gpu_perf_from_json(root, path, error);
  if (p != NULL)
    p->path = g_strdup(path);
  return p;
}

StGpuPerf *
st_gpu_perf_load_default(GError **error)
{
  g_autoptr(GPtrArray) tried = g_ptr_array_new_with_free_func(g_free);
  const char *data = g_getenv("STAGGER_DATA_DIR");
  if (data != NULL)
    g_ptr_array_add(tried, g_build_filename(data, "models", "gpus", "default.json", NULL));
  g_autofree char *here = g_path_get_dirname(__FILE__); /* <source>/sim/cluster */
  g_ptr_array_add(tried,
                  g_build_filename(here, "..", "..", "models", "gpus", "default.json", NULL));
  for (guint i = 0; i < tried->len; i++) {
    const char *path = g_ptr_array_index(tried, i);
    if (g_file_test(path, G_FILE_TEST_IS_REGULAR))
      return st_gpu_perf_load(path, error);
  }
  g_set_error(error, ST_GPU_PERF_ERROR, ST_ERROR_IO,
              "no GPU performance data: the cluster names no gpu.performance file and "
              "models/gpus/default.json is neither under $STAGGER_DATA_DIR nor in %s",
              (const char *)g_ptr_array_index(tried, tried->len - 1));
  return NULL;
}

static void
add_number(cJSON *root, const char *name, const char *key, const StPerfNumber *n)
{
  cJSON *obj = cJSON_AddObjectToObject(root, name);
  cJSON_AddNumberToObject(obj, key, n->value);
  cJSON_AddStringToObject(obj, "source", n->source);
}

cJSON *
st_gpu_perf_to_json(const StGpuPerf *p)
{
  g_return_val_if_fail(p != NULL, NULL);
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", FORMAT);
  st_json_add_int(root, "version", 1);
  cJSON_AddStringToObject(root, "gpu", p->gpu);
  if (p->note != NULL)
    cJSON_AddStringToObject(root, "note", p->note);
  add_number(root, "memory", "fraction", &p->memory_fraction);
  add_number(root, "sharing", "priority_leak", &p->priority_leak);
  return root;
}

StGpuPerf *
st_gpu_perf_ref(StGpuPerf *p)
{
  g_return_val_if_fail(p != NULL, NULL);
  g_atomic_int_inc(&p->refs);
  return p;
}

void
st_gpu_perf_unref(StGpuPerf *p)
{
  if (p == NULL || !g_atomic_int_dec_and_test(&p->refs))
    return;
  g_free(p->gpu);
  g_free(p->path);
  g_free(p->note);
  clear_number(&p->memory_fraction);
  clear_number(&p->priority_leak);
  g_free(p);
}
