/* gpu_perf.c: see gpu_perf.h. Strict like every loader: unknown keys,
 * numbers out of range and sections without a source are errors naming the
 * file and the key. */
#include "cluster/gpu_perf.h"

#include <string.h>

#include "base/error.h"
#include "base/json.h"

G_DEFINE_QUARK(st-gpu-perf-error-quark, st_gpu_perf_error)

#define FORMAT "stagger-gpu-performance"

const char *const st_attn_kernel_keys[ST_ATTN_N] = {"attention", "attention_cudnn",
                                                    "attention_triton"};
const char *const st_attn_kernel_names[ST_ATTN_N] = {
  "FlashAttention-2", "cuDNN fused attention", "Triton FlashAttention (2022)"};

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

static gboolean
bad(GError **error, const char *origin, const char *name, const char *what)
{
  g_set_error(error, ST_GPU_PERF_ERROR, ST_ERROR_INVALID, "%s: %s: %s", origin, name, what);
  return FALSE;
}

/* A fraction in (0, 1] at `key` of `obj`, required. */
static gboolean
get_fraction(const cJSON *obj, const char *key, double *out, const char *origin,
             const char *name, GError **error)
{
  GError *local = NULL;
  if (!st_json_get_double(obj, key, TRUE, 0, out, &local))
    return fail(error, local, origin, name);
  if (*out <= 0 || *out > 1) {
    g_autofree char *what = g_strdup_printf("key '%s': %g is not in (0, 1]", key, *out);
    return bad(error, origin, name, what);
  }
  return TRUE;
}

/* A GEMM curve. `fp8`: the optional "gemm_fp8" section, whose efficiency
 * has the one key "fp8" (of the FP8 peak) and no fp32_math; absent, tile_m
 * stays 0. */
static gboolean
parse_curve(const cJSON *root, const char *name, gboolean fp8, StGemmCurve *c,
            const char *origin, GError **error)
{
  static const char *const keys[] = {"tile", "k_half", "fp32_math", "efficiency", "source",
                                     NULL};
  static const char *const fp8_keys[] = {"tile", "k_half", "efficiency", "source", NULL};
  static const char *const eff_keys[] = {"fp32", "tf32", "16bit", NULL};
  static const char *const eff_fp8_keys[] = {"fp8", NULL};
  const cJSON *obj = NULL, *tile = NULL, *eff = NULL;
  const char *math = "fp32", *source = NULL;
  GError *local = NULL;
  if (!st_json_get_object(root, name, !fp8, &obj, &local))
    return fail(error, local, origin, NULL);
  if (obj == NULL)
    return TRUE;
  if (!st_json_check_keys(obj, fp8 ? fp8_keys : keys, &local) ||
      !st_json_get_array(obj, "tile", TRUE, &tile, &local) ||
      !st_json_get_double(obj, "k_half", TRUE, 0, &c->k_half, &local) ||
      !st_json_get_string(obj, "fp32_math", FALSE, &math, &local) ||
      !st_json_get_object(obj, "efficiency", TRUE, &eff, &local) ||
      !st_json_get_string(obj, "source", TRUE, &source, &local) ||
      !st_json_check_keys(eff, fp8 ? eff_fp8_keys : eff_keys, &local))
    return fail(error, local, origin, name);
  int64_t t[2];
  if (cJSON_GetArraySize(tile) != 2)
    return bad(error, origin, name, "key 'tile': expected [tile_m, tile_n]");
  for (int i = 0; i < 2; i++)
    if (!st_json_item_int(cJSON_GetArrayItem(tile, i), "tile", 1, 4096, &t[i], &local))
      return fail(error, local, origin, name);
  c->tile_m = (int)t[0];
  c->tile_n = (int)t[1];
  if (strcmp(math, "fp32") != 0 && strcmp(math, "tf32") != 0)
    return bad(error, origin, name, "key 'fp32_math': expected fp32 or tf32");
  c->fp32_as_tf32 = strcmp(math, "tf32") == 0;
  if (fp8 ? !get_fraction(eff, "fp8", &c->eff_fp8, origin, name, error)
          : (!get_fraction(eff, "fp32", &c->eff_fp32, origin, name, error) ||
             !get_fraction(eff, "tf32", &c->eff_tf32, origin, name, error) ||
             !get_fraction(eff, "16bit", &c->eff_16bit, origin, name, error)))
    return FALSE;
  if (*source == '\0')
    return bad(error, origin, name, "key 'source': must name the measurement it comes from");
  c->source = g_strdup(source);
  return TRUE;
}

/* "nccl" (optional): {"channels": N, "hbm_per_byte": X, "source"}. */
static gboolean
parse_nccl(const cJSON *root, StGpuPerf *p, const char *origin, GError **error)
{
  static const char *const keys[] = {"channels", "hbm_per_byte", "source", NULL};
  const cJSON *obj = NULL;
  const char *source = NULL;
  GError *local = NULL;
  if (!st_json_get_object(root, "nccl", FALSE, &obj, &local))
    return fail(error, local, origin, NULL);
  if (obj == NULL)
    return TRUE;
  if (!st_json_check_keys(obj, keys, &local) ||
      !st_json_get_double_range(obj, "channels", TRUE, 1, 1024, &p->nccl_channels.value,
                                &local) ||
      !st_json_get_double_range(obj, "hbm_per_byte", TRUE, 0, 16,
                                &p->nccl_hbm_per_byte.value, &local) ||
      !st_json_get_string(obj, "source", TRUE, &source, &local))
    return fail(error, local, origin, "nccl");
  if (*source == '\0')
    return bad(error, origin, "nccl", "key 'source': must name the measurement");
  p->nccl_channels.source = g_strdup(source);
  p->nccl_hbm_per_byte.source = g_strdup(source);
  return TRUE;
}

/* "nccl_bus" (optional): {"intra_node": x, "inter_node": y,
 * "intra_node_all_reduce": z (optional), "source"}, each in (0, 1]. */
static gboolean
parse_nccl_bus(const cJSON *root, StGpuPerf *p, const char *origin, GError **error)
{
  static const char *const keys[] = {"intra_node", "intra_node_all_reduce", "inter_node",
                                     "source", NULL};
  const cJSON *obj = NULL;
  const char *source = NULL;
  GError *local = NULL;
  if (!st_json_get_object(root, "nccl_bus", FALSE, &obj, &local))
    return fail(error, local, origin, NULL);
  if (obj == NULL)
    return TRUE;
  if (!st_json_check_keys(obj, keys, &local) ||
      !st_json_get_double_range(obj, "intra_node", TRUE, 1e-3, 1, &p->bus_intra.value, &local) ||
      !st_json_get_double_range(obj, "inter_node", TRUE, 1e-3, 1, &p->bus_inter.value, &local) ||
      !st_json_get_double_range(obj, "intra_node_all_reduce", FALSE, 1e-3, 1,
                                &p->bus_intra_all_reduce.value, &local) ||
      !st_json_get_string(obj, "source", TRUE, &source, &local))
    return fail(error, local, origin, "nccl_bus");
  if (*source == '\0')
    return bad(error, origin, "nccl_bus", "key 'source': must name the measurement");
  p->bus_intra.source = g_strdup(source);
  p->bus_inter.source = g_strdup(source);
  p->bus_intra_all_reduce.source = g_strdup(source);
  return TRUE;
}

/* An array `arr` of n numbers in (0, 1] into a new array. */
static gboolean
read_fractions(const cJSON *arr, int n, double **out, const char *origin, const char *name,
               GError **error)
{
  if (cJSON_GetArraySize(arr) != n)
    return bad(error, origin, name, "its arrays need as many points");
  *out = g_new(double, n);
  for (int i = 0; i < n; i++) {
    const cJSON *y = cJSON_GetArrayItem(arr, i);
    if (!cJSON_IsNumber(y) || y->valuedouble <= 0 || y->valuedouble > 1)
      return bad(error, origin, name, "every efficiency must be in (0, 1]");
    (*out)[i] = y->valuedouble;
  }
  return TRUE;
}

/* An attention curve (optional) at `name`: {"seq": [...], "efficiency":
 * [...], "backward": [...] (optional), "source"}. */
static gboolean
parse_attention(const cJSON *root, const char *name, StAttnCurve *a, const char *origin,
                GError **error)
{
  static const char *const keys[] = {"seq", "efficiency", "backward", "source", NULL};
  const cJSON *obj = NULL, *seq = NULL, *eff = NULL, *bwd = NULL;
  const char *source = NULL;
  GError *local = NULL;
  if (!st_json_get_object(root, name, FALSE, &obj, &local))
    return fail(error, local, origin, NULL);
  if (obj == NULL)
    return TRUE;
  if (!st_json_check_keys(obj, keys, &local) ||
      !st_json_get_array(obj, "seq", TRUE, &seq, &local) ||
      !st_json_get_array(obj, "efficiency", TRUE, &eff, &local) ||
      !st_json_get_array(obj, "backward", FALSE, &bwd, &local) ||
      !st_json_get_string(obj, "source", TRUE, &source, &local))
    return fail(error, local, origin, name);
  int n = cJSON_GetArraySize(seq);
  if (n < 1)
    return bad(error, origin, name, "'seq' needs at least one point");
  if (*source == '\0')
    return bad(error, origin, name, "key 'source': must name the measurement");
  a->seq = g_new(double, n);
  a->n = n;
  for (int i = 0; i < n; i++) {
    const cJSON *x = cJSON_GetArrayItem(seq, i);
    if (!cJSON_IsNumber(x) || x->valuedouble < 1 || (i > 0 && x->valuedouble <= a->seq[i - 1]))
      return bad(error, origin, name, "'seq' must ascend from 1");
    a->seq[i] = x->valuedouble;
  }
  if (!read_fractions(eff, n, &a->efficiency, origin, name, error) ||
      (bwd != NULL && !read_fractions(bwd, n, &a->backward, origin, name, error)))
    return FALSE;
  a->source = g_strdup(source);
  return TRUE;
}

static gboolean
parse_attentions(const cJSON *root, StGpuPerf *p, const char *origin, GError **error)
{
  for (int k = 0; k < ST_ATTN_N; k++)
    if (!parse_attention(root, st_attn_kernel_keys[k], &p->attention[k], origin, error))
      return FALSE;
  return TRUE;
}

/* "power" (optional): {"tdp_w": W, "limit": [...], "throughput": [...],
 * "source"}. */
static gboolean
parse_power(const cJSON *root, StGpuPerf *p, const char *origin, GError **error)
{
  static const char *const keys[] = {"tdp_w", "limit", "throughput", "source", NULL};
  const cJSON *obj = NULL, *limit = NULL, *tput = NULL;
  const char *source = NULL;
  GError *local = NULL;
  if (!st_json_get_object(root, "power", FALSE, &obj, &local))
    return fail(error, local, origin, NULL);
  if (obj == NULL)
    return TRUE;
  if (!st_json_check_keys(obj, keys, &local) ||
      !st_json_get_double_range(obj, "tdp_w", TRUE, 1, 10000, &p->power.tdp_w, &local) ||
      !st_json_get_array(obj, "limit", TRUE, &limit, &local) ||
      !st_json_get_array(obj, "throughput", TRUE, &tput, &local) ||
      !st_json_get_string(obj, "source", TRUE, &source, &local))
    return fail(error, local, origin, "power");
  int n = cJSON_GetArraySize(limit);
  if (n < 1 || *source == '\0')
    return bad(error, origin, "power", "needs points and a source");
  if (!read_fractions(limit, n, &p->power.limit, origin, "power", error) ||
      !read_fractions(tput, n, &p->power.throughput, origin, "power", error))
    return FALSE;
  p->power.n = n;
  for (int i = 1; i < n; i++)
    if (p->power.limit[i] <= p->power.limit[i - 1])
      return bad(error, origin, "power", "'limit' must ascend");
  if (p->power.limit[n - 1] != 1 || p->power.throughput[n - 1] != 1)
    return bad(error, origin, "power", "the last point must be limit 1, throughput 1 (the "
                                        "rated power, at which the efficiencies are given)");
  p->power.source = g_strdup(source);
  return TRUE;
}

double
st_gpu_perf_power_factor(const StGpuPerf *p, double limit_w)
{
  if (p == NULL || p->power.n == 0 || limit_w <= 0 || limit_w >= p->power.tdp_w)
    return 1.0;
  double x = limit_w / p->power.tdp_w;
  const double *l = p->power.limit, *t = p->power.throughput;
  if (x <= l[0])
    return t[0] * x / l[0]; /* below the lowest point measured: proportional to power */
  for (int i = 1; i < p->power.n; i++)
    if (x <= l[i])
      return t[i - 1] + (t[i] - t[i - 1]) * (x - l[i - 1]) / (l[i] - l[i - 1]);
  return 1.0;
}

/* "framework_efficiency" (optional): {"name": factor in (0, 2], ...}. */
static gboolean
parse_framework_efficiency(const cJSON *root, StGpuPerf *p, const char *origin, GError **error)
{
  const cJSON *obj = NULL, *item = NULL;
  GError *local = NULL;
  if (!st_json_get_object(root, "framework_efficiency", FALSE, &obj, &local))
    return fail(error, local, origin, NULL);
  cJSON_ArrayForEach(item, obj)
  {
    if (!cJSON_IsNumber(item) || !(item->valuedouble > 0 && item->valuedouble <= 2))
      return bad(error, origin, "framework_efficiency", "each factor must be in (0, 2]");
    if (p->n_framework >= (int)G_N_ELEMENTS(p->framework))
      return bad(error, origin, "framework_efficiency", "too many frameworks");
    st_gpu_perf_set_framework_factor(p, item->string, item->valuedouble);
  }
  return TRUE;
}

double
st_gpu_perf_framework_factor(const StGpuPerf *p, const char *framework)
{
  for (int i = 0; p != NULL && framework != NULL && i < p->n_framework; i++)
    if (strcmp(p->framework[i].name, framework) == 0)
      return p->framework[i].factor;
  return 1.0;
}

void
st_gpu_perf_set_framework_factor(StGpuPerf *p, const char *framework, double factor)
{
  for (int i = 0; i < p->n_framework; i++)
    if (strcmp(p->framework[i].name, framework) == 0) {
      p->framework[i].factor = factor;
      return;
    }
  g_return_if_fail(p->n_framework < (int)G_N_ELEMENTS(p->framework));
  p->framework[p->n_framework].name = g_strdup(framework);
  p->framework[p->n_framework++].factor = factor;
}

StGpuPerf *
st_gpu_perf_from_json(const cJSON *root, const char *origin, GError **error)
{
  static const char *const keys[] = {"format", "version", "gpu",  "note", "sms",
                                     "launch", "memory",  "pool", "gemm", "conv",
                                     "gemm_fp8", "attention", "attention_cudnn", "attention_triton",
                                     "sharing", "nccl", "nccl_bus", "power", "framework_efficiency",
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
      !parse_number(root, "sharing", "priority_leak", 0, 1, &p->priority_leak, origin, error) ||
      !parse_number(root, "sms", "count", 1, 1e5, &p->sms, origin, error) ||
      !parse_number(root, "launch", "us", 0, 1e4, &p->launch_us, origin, error) ||
      !parse_number(root, "pool", "fraction", 1e-3, 1, &p->pool_fraction, origin, error) ||
      !parse_curve(root, "gemm", FALSE, &p->gemm, origin, error) ||
      !parse_curve(root, "conv", FALSE, &p->conv, origin, error) ||
      !parse_curve(root, "gemm_fp8", TRUE, &p->gemm_fp8, origin, error) ||
      !parse_attentions(root, p, origin, error) || !parse_nccl(root, p, origin, error) ||
      !parse_nccl_bus(root, p, origin, error) || !parse_power(root, p, origin, error) ||
      !parse_framework_efficiency(root, p, origin, error))
    return NULL;
  if (p->sms.value != (double)(int64_t)p->sms.value) {
    bad(error, origin, "sms", "key 'count': expected an integer");
    return NULL;
  }
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
st_gpu_perf_load_named(const char *name, GError **error)
{
  g_return_val_if_fail(name != NULL, NULL);
  if (!st_gpu_perf_is_name(name)) {
    g_set_error(error, ST_GPU_PERF_ERROR, ST_ERROR_INVALID,
                "'%s' is not a GPU performance file name (letters, digits, '-', '_', '.')",
                name);
    return NULL;
  }
  g_autofree char *file = g_strconcat(name, ".json", NULL);
  g_autoptr(GPtrArray) tried = g_ptr_array_new_with_free_func(g_free);
  const char *data = g_getenv("STAGGER_DATA_DIR");
  if (data != NULL)
    g_ptr_array_add(tried, g_build_filename(data, "models", "gpus", file, NULL));
  g_autofree char *here = g_path_get_dirname(__FILE__); /* <source>/sim/cluster */
  g_ptr_array_add(tried, g_build_filename(here, "..", "..", "models", "gpus", file, NULL));
  for (guint i = 0; i < tried->len; i++) {
    const char *path = g_ptr_array_index(tried, i);
    if (g_file_test(path, G_FILE_TEST_IS_REGULAR))
      return st_gpu_perf_load(path, error);
  }
  g_set_error(error, ST_GPU_PERF_ERROR, ST_ERROR_IO,
              "no GPU performance file '%s': models/gpus/%s is neither under "
              "$STAGGER_DATA_DIR nor in %s",
              name, file, (const char *)g_ptr_array_index(tried, tried->len - 1));
  return NULL;
}

gboolean
st_gpu_perf_is_name(const char *s)
{
  if (s == NULL || *s == '\0' || *s == '.' || g_str_has_suffix(s, ".json"))
    return FALSE;
  for (const char *c = s; *c; c++)
    if (!g_ascii_isalnum(*c) && *c != '-' && *c != '_' && *c != '.')
      return FALSE;
  return TRUE;
}

StGpuPerf *
st_gpu_perf_load_default(GError **error)
{
  return st_gpu_perf_load_named("default", error);
}

static void
add_number(cJSON *root, const char *name, const char *key, const StPerfNumber *n)
{
  cJSON *obj = cJSON_AddObjectToObject(root, name);
  cJSON_AddNumberToObject(obj, key, n->value);
  cJSON_AddStringToObject(obj, "source", n->source);
}

static void
add_curve(cJSON *root, const char *name, const StGemmCurve *c)
{
  cJSON *obj = cJSON_AddObjectToObject(root, name);
  int tile[2] = {c->tile_m, c->tile_n};
  cJSON_AddItemToObject(obj, "tile", cJSON_CreateIntArray(tile, 2));
  cJSON_AddNumberToObject(obj, "k_half", c->k_half);
  cJSON_AddStringToObject(obj, "fp32_math", c->fp32_as_tf32 ? "tf32" : "fp32");
  cJSON *eff = cJSON_AddObjectToObject(obj, "efficiency");
  cJSON_AddNumberToObject(eff, "fp32", c->eff_fp32);
  cJSON_AddNumberToObject(eff, "tf32", c->eff_tf32);
  cJSON_AddNumberToObject(eff, "16bit", c->eff_16bit);
  cJSON_AddStringToObject(obj, "source", c->source);
}

static void
add_attention(cJSON *root, const char *name, const StAttnCurve *a)
{
  if (a->n == 0)
    return;
  cJSON *obj = cJSON_AddObjectToObject(root, name);
  cJSON_AddItemToObject(obj, "seq", cJSON_CreateDoubleArray(a->seq, a->n));
  cJSON_AddItemToObject(obj, "efficiency", cJSON_CreateDoubleArray(a->efficiency, a->n));
  if (a->backward != NULL)
    cJSON_AddItemToObject(obj, "backward", cJSON_CreateDoubleArray(a->backward, a->n));
  cJSON_AddStringToObject(obj, "source", a->source);
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
  add_number(root, "sms", "count", &p->sms);
  add_number(root, "launch", "us", &p->launch_us);
  add_number(root, "memory", "fraction", &p->memory_fraction);
  add_number(root, "pool", "fraction", &p->pool_fraction);
  add_curve(root, "gemm", &p->gemm);
  add_curve(root, "conv", &p->conv);
  if (p->gemm_fp8.tile_m > 0) {
    cJSON *obj = cJSON_AddObjectToObject(root, "gemm_fp8");
    int tile[2] = {p->gemm_fp8.tile_m, p->gemm_fp8.tile_n};
    cJSON_AddItemToObject(obj, "tile", cJSON_CreateIntArray(tile, 2));
    cJSON_AddNumberToObject(obj, "k_half", p->gemm_fp8.k_half);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(obj, "efficiency"), "fp8",
                            p->gemm_fp8.eff_fp8);
    cJSON_AddStringToObject(obj, "source", p->gemm_fp8.source);
  }
  for (int k = 0; k < ST_ATTN_N; k++)
    add_attention(root, st_attn_kernel_keys[k], &p->attention[k]);
  if (p->power.n > 0) {
    cJSON *pw = cJSON_AddObjectToObject(root, "power");
    cJSON_AddNumberToObject(pw, "tdp_w", p->power.tdp_w);
    cJSON_AddItemToObject(pw, "limit", cJSON_CreateDoubleArray(p->power.limit, p->power.n));
    cJSON_AddItemToObject(pw, "throughput",
                          cJSON_CreateDoubleArray(p->power.throughput, p->power.n));
    cJSON_AddStringToObject(pw, "source", p->power.source);
  }
  add_number(root, "sharing", "priority_leak", &p->priority_leak);
  if (p->n_framework > 0) {
    cJSON *fw = cJSON_AddObjectToObject(root, "framework_efficiency");
    for (int i = 0; i < p->n_framework; i++)
      cJSON_AddNumberToObject(fw, p->framework[i].name, p->framework[i].factor);
  }
  if (p->nccl_channels.value > 0) {
    cJSON *n = cJSON_AddObjectToObject(root, "nccl");
    cJSON_AddNumberToObject(n, "channels", p->nccl_channels.value);
    cJSON_AddNumberToObject(n, "hbm_per_byte", p->nccl_hbm_per_byte.value);
    cJSON_AddStringToObject(n, "source", p->nccl_channels.source);
  }
  if (p->bus_intra.value > 0) {
    cJSON *n = cJSON_AddObjectToObject(root, "nccl_bus");
    cJSON_AddNumberToObject(n, "intra_node", p->bus_intra.value);
    if (p->bus_intra_all_reduce.value > 0)
      cJSON_AddNumberToObject(n, "intra_node_all_reduce", p->bus_intra_all_reduce.value);
    cJSON_AddNumberToObject(n, "inter_node", p->bus_inter.value);
    cJSON_AddStringToObject(n, "source", p->bus_intra.source);
  }
  return root;
}

static void
attention_clear(StAttnCurve *a)
{
  g_free(a->seq);
  g_free(a->efficiency);
  g_free(a->backward);
  g_free(a->source);
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
  clear_number(&p->sms);
  clear_number(&p->launch_us);
  clear_number(&p->pool_fraction);
  clear_number(&p->nccl_channels);
  clear_number(&p->nccl_hbm_per_byte);
  clear_number(&p->bus_intra);
  clear_number(&p->bus_intra_all_reduce);
  clear_number(&p->bus_inter);
  g_free(p->gemm.source);
  g_free(p->conv.source);
  g_free(p->gemm_fp8.source);
  for (int k = 0; k < ST_ATTN_N; k++)
    attention_clear(&p->attention[k]);
  for (int i = 0; i < p->n_framework; i++)
    g_free(p->framework[i].name);
  g_free(p->power.limit);
  g_free(p->power.throughput);
  g_free(p->power.source);
  g_free(p);
}
