/* calibration.c: see calibration.h. The registry of parameters, the file,
 * and applying the factors to a cluster. */
#include "cost/calibration.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"

G_DEFINE_QUARK(st-calibration-error-quark, st_calibration_error)

#define FORMAT "stagger-calibration"

/* ---- the parameters ------------------------------------------------------ */

static double
scaled(double x, double f)
{
  return MIN(1.0, x * f);
}

static void
scale_curve(StGemmCurve *c, double f)
{
  c->eff_fp32 = scaled(c->eff_fp32, f);
  c->eff_tf32 = scaled(c->eff_tf32, f);
  c->eff_16bit = scaled(c->eff_16bit, f);
  c->eff_fp8 = scaled(c->eff_fp8, f);
}

/* The parameters on the GPU performance file find it private to the
 * cluster (st_calibration_apply copies it first), or absent. */
static void
apply_gemm(StCluster *c, double f, const char *arg)
{
  (void)arg;
  if (c->gpu.perf == NULL)
    return;
  scale_curve(&c->gpu.perf->gemm, f);
  scale_curve(&c->gpu.perf->conv, f);
  scale_curve(&c->gpu.perf->gemm_fp8, f);
}

static void
scale_attention(StAttnCurve *a, double f)
{
  for (int i = 0; i < a->n; i++) {
    a->efficiency[i] = scaled(a->efficiency[i], f);
    if (a->backward != NULL)
      a->backward[i] = scaled(a->backward[i], f);
  }
}

static void
apply_attention(StCluster *c, double f, const char *arg)
{
  (void)arg;
  if (c->gpu.perf == NULL)
    return;
  for (int k = 0; k < ST_ATTN_N; k++)
    scale_attention(&c->gpu.perf->attention[k], f);
}

static void
apply_memory(StCluster *c, double f, const char *arg)
{
  (void)arg;
  if (c->gpu.perf == NULL)
    return;
  c->gpu.perf->memory_fraction.value = scaled(c->gpu.perf->memory_fraction.value, f);
  c->gpu.perf->pool_fraction.value = scaled(c->gpu.perf->pool_fraction.value, f);
}

static void
apply_launch(StCluster *c, double f, const char *arg)
{
  (void)arg;
  if (c->gpu.perf != NULL)
    c->gpu.perf->launch_us.value *= f;
}

static void
apply_nvlink(StCluster *c, double f, const char *arg)
{
  (void)arg;
  c->links[ST_LINK_INTRA_NODE].bandwidth *= f;
}

static void
apply_network(StCluster *c, double f, const char *arg)
{
  (void)arg;
  c->links[ST_LINK_INTER_NODE].bandwidth *= f;
}

static void
apply_framework(StCluster *c, double f, const char *framework)
{
  if (c->gpu.perf != NULL)
    st_gpu_perf_set_framework_factor(c->gpu.perf, framework,
                                     f * st_gpu_perf_framework_factor(c->gpu.perf, framework));
}

#define FRAMEWORK(name)                                                                        \
  {name, "share of the published GEMM, convolution and attention efficiencies " name            \
         " reaches", 0.2, 2.0, apply_framework, name}

static const StCalibParam PARAMS[] = {
  {"gemm", "GEMM and convolution efficiencies (models/gpus/*.json gemm, conv)", 0.2, 2.0,
   apply_gemm, NULL},
  {"attention", "fused attention efficiencies (models/gpus/*.json attention)", 0.2, 2.0,
   apply_attention, NULL},
  {"memory", "bandwidth share memory-bound kernels reach (memory, pool fractions)", 0.2, 2.0,
   apply_memory, NULL},
  {"launch", "least time of a kernel (models/gpus/*.json launch.us)", 0.0, 10.0, apply_launch, NULL},
  {"nvlink", "bandwidth of the links inside a node (cluster intra_node)", 0.2, 2.0,
   apply_nvlink, NULL},
  {"network", "bandwidth of the links between nodes (cluster inter_node)", 0.2, 2.0,
   apply_network, NULL},
  FRAMEWORK("pytorch"),
  FRAMEWORK("megatron"),
  FRAMEWORK("torchtitan"),
  FRAMEWORK("fsdp"),
  FRAMEWORK("deepspeed"),
  FRAMEWORK("automodel"),
  {NULL},
};

G_STATIC_ASSERT(G_N_ELEMENTS(PARAMS) - 1 <= ST_CALIB_MAX_PARAMS);

const StCalibParam *
st_calib_params(void)
{
  return PARAMS;
}

int
st_calib_param_count(void)
{
  return (int)G_N_ELEMENTS(PARAMS) - 1;
}

int
st_calib_param_index(const char *name)
{
  for (int i = 0; name != NULL && PARAMS[i].name != NULL; i++)
    if (strcmp(PARAMS[i].name, name) == 0)
      return i;
  return -1;
}

/* ---- the value ------------------------------------------------------------ */

void
st_calibration_init(StCalibration *c)
{
  memset(c, 0, sizeof *c);
  for (int i = 0; i < ST_CALIB_MAX_PARAMS; i++)
    c->factor[i] = 1.0;
  c->n_slots = st_calib_param_count();
}

void
st_calibration_clear(StCalibration *c)
{
  for (int i = 0; i < ST_CALIB_MAX_PARAMS; i++)
    g_free(c->scope_gpu[i]);
  g_free(c->path);
  g_free(c->note);
  g_free(c->runs);
  g_free(c->run_set);
  if (c->ids != NULL)
    g_ptr_array_unref(c->ids);
  st_calibration_init(c);
}

void
st_calibration_copy(StCalibration *dst, const StCalibration *src)
{
  *dst = *src;
  for (int i = 0; i < ST_CALIB_MAX_PARAMS; i++)
    dst->scope_gpu[i] = g_strdup(src->scope_gpu[i]);
  dst->path = g_strdup(src->path);
  dst->note = g_strdup(src->note);
  dst->runs = g_strdup(src->runs);
  dst->run_set = g_strdup(src->run_set);
  dst->ids = NULL;
  if (src->ids != NULL) {
    dst->ids = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < src->ids->len; i++)
      g_ptr_array_add(dst->ids, g_strdup(g_ptr_array_index(src->ids, i)));
  }
}

gboolean
st_calibration_active(const StCalibration *c)
{
  for (int i = 0; i < c->n_slots; i++)
    if (c->factor[i] != 1.0)
      return TRUE;
  return FALSE;
}

char *
st_calibration_describe(const StCalibration *c)
{
  g_autoptr(GString) s = g_string_new(NULL);
  for (int i = 0; i < c->n_slots; i++)
    if (c->factor[i] != 1.0) {
      g_autofree char *name = st_calibration_slot_name(c, i);
      g_string_append_printf(s, "%s%s x%.3f", s->len ? ", " : "", name, c->factor[i]);
    }
  return s->len ? g_string_free(g_steal_pointer(&s), FALSE) : g_strdup("none");
}

/* ---- slots ---------------------------------------------------------------- */

static void
unknown_param(GError **error, const char *name)
{
  g_autoptr(GString) known = g_string_new(NULL);
  for (const StCalibParam *p = PARAMS; p->name != NULL; p++)
    g_string_append_printf(known, "%s%s", known->len ? ", " : "", p->name);
  g_set_error(error, ST_CALIBRATION_ERROR, ST_ERROR_INVALID,
              "unknown parameter '%s' (known: %s, each also as NAME@GPU, the GPU "
              "performance file's gpu)",
              name, known->str);
}

int
st_calibration_slot(StCalibration *c, const char *name, GError **error)
{
  const char *at = strchr(name, '@');
  g_autofree char *base = at != NULL ? g_strndup(name, (gsize)(at - name)) : g_strdup(name);
  int param = st_calib_param_index(base);
  if (param < 0 || (at != NULL && at[1] == '\0')) {
    unknown_param(error, name);
    return -1;
  }
  if (at == NULL)
    return param;
  for (int i = st_calib_param_count(); i < c->n_slots; i++)
    if (c->scope_param[i] == param && strcmp(c->scope_gpu[i], at + 1) == 0)
      return i;
  if (c->n_slots >= ST_CALIB_MAX_PARAMS) {
    g_set_error(error, ST_CALIBRATION_ERROR, ST_ERROR_INVALID,
                "'%s': more than %d parameters", name, ST_CALIB_MAX_PARAMS);
    return -1;
  }
  int i = c->n_slots++;
  c->scope_param[i] = param;
  c->scope_gpu[i] = g_strdup(at + 1);
  c->factor[i] = 1.0;
  c->set[i] = FALSE;
  return i;
}

const StCalibParam *
st_calibration_slot_param(const StCalibration *c, int slot)
{
  return &PARAMS[slot < st_calib_param_count() ? slot : c->scope_param[slot]];
}

char *
st_calibration_slot_name(const StCalibration *c, int slot)
{
  const StCalibParam *p = st_calibration_slot_param(c, slot);
  return slot < st_calib_param_count() ? g_strdup(p->name)
                                       : g_strdup_printf("%s@%s", p->name, c->scope_gpu[slot]);
}

/* Whether the slot's scope (none, or a GPU) holds for `cluster`. */
static gboolean
in_scope(const StCalibration *c, int slot, const StCluster *cluster)
{
  if (slot < st_calib_param_count())
    return TRUE;
  return cluster->gpu.perf != NULL && cluster->gpu.perf->gpu != NULL &&
         strcmp(cluster->gpu.perf->gpu, c->scope_gpu[slot]) == 0;
}

gboolean
st_calibration_slot_touches(const StCalibration *c, int slot, const StCluster *cluster,
                            const char *framework)
{
  const StCalibParam *p = st_calibration_slot_param(c, slot);
  if (p->apply == apply_framework && (framework == NULL || strcmp(p->arg, framework) != 0))
    return FALSE;
  return in_scope(c, slot, cluster);
}

void
st_calibration_apply(const StCalibration *c, StCluster *cluster)
{
  g_return_if_fail(c != NULL && cluster != NULL);
  if (!st_calibration_active(c))
    return;
  if (cluster->gpu.perf != NULL) { /* a private copy: others share the loaded one */
    g_autoptr(cJSON) json = st_gpu_perf_to_json(cluster->gpu.perf);
    g_autoptr(GError) error = NULL;
    StGpuPerf *own = st_gpu_perf_from_json(json, cluster->gpu.perf->gpu, &error);
    g_assert_no_error(error);
    own->path = g_strdup(cluster->gpu.perf->path);
    st_gpu_perf_unref(cluster->gpu.perf);
    cluster->gpu.perf = own;
  }
  for (int i = 0; i < c->n_slots; i++)
    if (c->factor[i] != 1.0 && in_scope(c, i, cluster)) {
      const StCalibParam *p = st_calibration_slot_param(c, i);
      p->apply(cluster, c->factor[i], p->arg);
    }
}

/* ---- residuals ------------------------------------------------------------ */

StResiduals
st_residuals_of(const double *x, int n)
{
  StResiduals r = {n, 0, 0};
  if (n <= 0)
    return r;
  for (int i = 0; i < n; i++)
    r.mean += x[i];
  r.mean /= n;
  for (int i = 0; i < n && n > 1; i++)
    r.sd += (x[i] - r.mean) * (x[i] - r.mean);
  r.sd = n > 1 ? sqrt(r.sd / (n - 1)) : 0;
  return r;
}

gboolean
st_residuals_interval(const StResiduals *r, double x, double *lo, double *hi)
{
  *lo = *hi = x;
  if (r == NULL || r->n < 3)
    return FALSE;
  *lo = x * exp(r->mean - ST_CALIB_Z90 * r->sd);
  *hi = x * exp(r->mean + ST_CALIB_Z90 * r->sd);
  return TRUE;
}

char *
st_residuals_describe(const StResiduals *r)
{
  if (r == NULL || r->n < 3)
    return g_strdup("no calibration stands behind it (--calibration none, or no "
                    "residuals): how far it is off is unknown (docs/VALIDATION.md has the "
                    "published runs' error)");
  /* The root mean square of ln(measured / predicted), from its mean and
   * its (n - 1) standard deviation. */
  double rms = sqrt(r->mean * r->mean + r->sd * r->sd * (r->n - 1) / r->n);
  return g_strdup_printf("on the %d published runs behind the calibration, each left out of "
                         "its fit, the predicted step was off by %.0f %% rms, bias %+.0f %% "
                         "(docs/VALIDATION.md)",
                         r->n, 100.0 * expm1(rms), 100.0 * expm1(r->mean));
}

/* ---- the file ------------------------------------------------------------- */

static gboolean
fail(GError **error, GError *local, const char *origin, const char *where)
{
  g_set_error(error, ST_CALIBRATION_ERROR, local->code, "%s: %s%s%s", origin,
              where ? where : "", where ? ": " : "", local->message);
  g_error_free(local);
  return FALSE;
}

static gboolean
read_residuals(const cJSON *root, const char *key, StResiduals *r, const char *origin,
               GError **error)
{
  static const char *const keys[] = {"n", "mean", "sd", NULL};
  const cJSON *obj = NULL;
  int64_t n = 0;
  GError *local = NULL;
  if (!st_json_get_object(root, key, FALSE, &obj, &local))
    return fail(error, local, origin, NULL);
  if (obj == NULL)
    return TRUE;
  if (!st_json_check_keys(obj, keys, &local) ||
      !st_json_get_int(obj, "n", TRUE, 0, 1000000, &n, &local) ||
      !st_json_get_double_range(obj, "mean", TRUE, -10, 10, &r->mean, &local) ||
      !st_json_get_double_range(obj, "sd", TRUE, 0, 10, &r->sd, &local))
    return fail(error, local, origin, key);
  r->n = (int)n;
  return TRUE;
}

static gboolean
read_parameters(const cJSON *root, StCalibration *c, const char *origin, GError **error)
{
  const cJSON *obj = NULL, *item = NULL;
  GError *local = NULL;
  if (!st_json_get_object(root, "parameters", TRUE, &obj, &local))
    return fail(error, local, origin, NULL);
  cJSON_ArrayForEach(item, obj)
  {
    int i = st_calibration_slot(c, item->string, &local);
    if (i < 0)
      return fail(error, local, origin, "parameters");
    const StCalibParam *p = st_calibration_slot_param(c, i);
    if (!st_json_get_double_range(obj, item->string, TRUE, p->min, p->max, &c->factor[i],
                                  &local))
      return fail(error, local, origin, "parameters");
    c->set[i] = TRUE;
  }
  return TRUE;
}

static gboolean
read_fitted_on(const cJSON *root, StCalibration *c, const char *origin, GError **error)
{
  static const char *const keys[] = {"runs", "set", "ids", NULL};
  const cJSON *obj = NULL, *ids = NULL, *id = NULL;
  const char *runs = NULL, *set = NULL;
  GError *local = NULL;
  if (!st_json_get_object(root, "fitted_on", FALSE, &obj, &local))
    return fail(error, local, origin, NULL);
  if (obj == NULL)
    return TRUE;
  if (!st_json_check_keys(obj, keys, &local) ||
      !st_json_get_string(obj, "runs", FALSE, &runs, &local) ||
      !st_json_get_string(obj, "set", FALSE, &set, &local) ||
      !st_json_get_array(obj, "ids", FALSE, &ids, &local))
    return fail(error, local, origin, "fitted_on");
  c->runs = g_strdup(runs);
  c->run_set = g_strdup(set);
  if (ids != NULL) {
    c->ids = g_ptr_array_new_with_free_func(g_free);
    cJSON_ArrayForEach(id, ids)
    {
      if (!cJSON_IsString(id)) {
        g_set_error(error, ST_CALIBRATION_ERROR, ST_ERROR_INVALID,
                    "%s: fitted_on: key 'ids': expected strings", origin);
        return FALSE;
      }
      g_ptr_array_add(c->ids, g_strdup(id->valuestring));
    }
  }
  return TRUE;
}

gboolean
st_calibration_load(const char *path, StCalibration *c, GError **error)
{
  static const char *const keys[] = {"format", "version", "note", "fitted_on", "parameters",
                                     "step_time", "memory", NULL};
  st_calibration_init(c);
  GError *local = NULL;
  g_autoptr(cJSON) root = st_json_load_file(path, &local);
  if (root == NULL) {
    g_set_error_literal(error, ST_CALIBRATION_ERROR, local->code, local->message);
    g_error_free(local);
    return FALSE;
  }
  const char *format = NULL, *note = NULL;
  int64_t version = 0;
  if (!cJSON_IsObject(root)) {
    g_set_error(error, ST_CALIBRATION_ERROR, ST_ERROR_INVALID, "%s: expected a JSON object",
                path);
    return FALSE;
  }
  if (!st_json_check_keys(root, keys, &local) ||
      !st_json_get_string(root, "format", TRUE, &format, &local) ||
      !st_json_get_int(root, "version", TRUE, 1, 1, &version, &local) ||
      !st_json_get_string(root, "note", FALSE, &note, &local))
    return fail(error, local, path, NULL);
  if (strcmp(format, FORMAT) != 0) {
    g_set_error(error, ST_CALIBRATION_ERROR, ST_ERROR_INVALID,
                "%s: key 'format': '%s' is not \"" FORMAT "\"", path, format);
    return FALSE;
  }
  if (!read_parameters(root, c, path, error) || !read_fitted_on(root, c, path, error) ||
      !read_residuals(root, "step_time", &c->step, path, error) ||
      !read_residuals(root, "memory", &c->memory, path, error)) {
    st_calibration_clear(c);
    return FALSE;
  }
  c->note = g_strdup(note);
  c->path = g_strdup(path);
  return TRUE;
}

static void
add_residuals(cJSON *root, const char *key, const StResiduals *r)
{
  if (r->n <= 0)
    return;
  cJSON *obj = cJSON_AddObjectToObject(root, key);
  st_json_add_int(obj, "n", r->n);
  cJSON_AddNumberToObject(obj, "mean", round(r->mean * 1e6) / 1e6);
  cJSON_AddNumberToObject(obj, "sd", round(r->sd * 1e6) / 1e6);
}

gboolean
st_calibration_save(const StCalibration *c, const char *path, GError **error)
{
  g_autoptr(cJSON) root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", FORMAT);
  st_json_add_int(root, "version", 1);
  if (c->note != NULL)
    cJSON_AddStringToObject(root, "note", c->note);
  if (c->runs != NULL || c->run_set != NULL || c->ids != NULL) {
    cJSON *fit = cJSON_AddObjectToObject(root, "fitted_on");
    if (c->runs != NULL)
      cJSON_AddStringToObject(fit, "runs", c->runs);
    if (c->run_set != NULL)
      cJSON_AddStringToObject(fit, "set", c->run_set);
    if (c->ids != NULL) {
      cJSON *ids = cJSON_AddArrayToObject(fit, "ids");
      for (guint i = 0; i < c->ids->len; i++)
        cJSON_AddItemToArray(ids, cJSON_CreateString(g_ptr_array_index(c->ids, i)));
    }
  }
  cJSON *params = cJSON_AddObjectToObject(root, "parameters");
  for (int i = 0; i < c->n_slots; i++)
    if (c->set[i]) {
      g_autofree char *name = st_calibration_slot_name(c, i);
      cJSON_AddNumberToObject(params, name, round(c->factor[i] * 1e6) / 1e6);
    }
  add_residuals(root, "step_time", &c->step);
  add_residuals(root, "memory", &c->memory);
  return st_json_write_file(path, root, error);
}

gboolean
st_calibration_load_default(StCalibration *c, GError **error)
{
  st_calibration_init(c);
  const char *data = g_getenv("STAGGER_DATA_DIR");
  g_autofree char *here = g_path_get_dirname(__FILE__); /* <source>/sim/cost */
  g_autofree char *path =
    data != NULL && *data != '\0'
      ? g_build_filename(data, "models", "calibration", "default.json", NULL)
      : g_build_filename(here, "..", "..", "models", "calibration", "default.json", NULL);
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR))
    return FALSE;
  if (!st_calibration_load(path, c, error))
    return FALSE;
  return TRUE;
}
