/* cluster.c: see cluster.h. Parsing is strict (unknown keys, missing units
 * and impossible sizes are errors that name the file and the key); the
 * derived LOCAL link and the link checks live here so that every consumer
 * can rely on the classes it needs being present. */
#include "cluster/cluster.h"
#include "cluster/links.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "base/limits.h"
#include "base/units.h"

G_DEFINE_QUARK(st-cluster-error-quark, st_cluster_error)

/* The file's spelling of each link class that a file may describe. */
static const char *const LINK_KEYS[ST_LINK_N] = {
  [ST_LINK_INTRA_NODE] = "intra_node",
  [ST_LINK_INTER_NODE] = "inter_node",
  [ST_LINK_PCIE] = "pcie",
  [ST_LINK_LOCAL] = NULL, /* derived, never in a file */
};

/* Moves `local` (from json.c or units.c) into the cluster domain, with the
 * file and the object path in front: "x.json: links.intra_node: key ...". */
static gboolean
fail(GError **error, GError *local, const char *origin, const char *where)
{
  g_set_error(error, ST_CLUSTER_ERROR, local->code, "%s: %s%s%s", origin,
              where ? where : "", where ? ": " : "", local->message);
  g_error_free(local);
  return FALSE;
}

/* inter_node's keys for the network between nodes (cluster.h). */
static gboolean
parse_fabric(const cJSON *obj, StCluster *c, const char *origin, GError **error)
{
  GError *local = NULL;
  int64_t nics = c->gpus_per_node, leaf_nodes = 1;
  double over = 1;
  if (!st_json_get_int(obj, "nics", FALSE, 1, c->gpus_per_node, &nics, &local) ||
      !st_json_get_int(obj, "leaf_nodes", FALSE, 1, 1 << 20, &leaf_nodes, &local) ||
      !st_json_get_double_range(obj, "oversubscription", FALSE, 1, 1000, &over, &local))
    return fail(error, local, origin, "links.inter_node"); /* a GPU uses one NIC: nics <= GPUs */
  c->fabric = (StFabric){(int)nics, (int)leaf_nodes, over};
  return TRUE;
}

static gboolean
parse_link(const cJSON *obj, StLinkClass cls, StLink *link, const char *origin, GError **error)
{
  static const char *const keys[] = {"bandwidth", "latency", "topology", NULL};
  static const char *const inter_keys[] = {"bandwidth", "latency", "topology", "nics",
                                           "leaf_nodes", "oversubscription", NULL};
  g_autofree char *where = g_strdup_printf("links.%s", LINK_KEYS[cls]);
  GError *local = NULL;
  const char *topology = "switch";
  if (!st_json_check_keys(obj, cls == ST_LINK_INTER_NODE ? inter_keys : keys, &local) ||
      !st_json_get_bandwidth(obj, "bandwidth", TRUE, &ST_RANGE_LINK_BANDWIDTH, &link->bandwidth,
                             &local) ||
      !st_json_get_duration(obj, "latency", TRUE, &ST_RANGE_LATENCY, &link->latency_ns, &local) ||
      !st_json_get_string(obj, "topology", FALSE, &topology, &local))
    return fail(error, local, origin, where);
  if (strcmp(topology, "switch") == 0) {
    link->topology = ST_TOPO_SWITCH;
  } else if (strcmp(topology, "ring") == 0) {
    link->topology = ST_TOPO_RING;
  } else {
    g_set_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID,
                "%s: %s: key 'topology': unknown topology '%s' (expected switch or ring)",
                origin, where, topology);
    return FALSE;
  }
  link->present = TRUE;
  return TRUE;
}

static gboolean
parse_flops(const cJSON *obj, StGpuSpec *gpu, const char *origin, GError **error)
{
  static const char *const keys[] = {"fp32", "tf32", "fp16", "bf16", "fp8", NULL};
  GError *local = NULL;
  const StRange *r = &ST_RANGE_FLOP_RATE;
  if (!st_json_check_keys(obj, keys, &local) ||
      !st_json_get_flop_rate(obj, "fp32", TRUE, r, &gpu->flops[ST_DTYPE_FP32], &local) ||
      !st_json_get_flop_rate(obj, "tf32", FALSE, r, &gpu->tf32_flops, &local) ||
      !st_json_get_flop_rate(obj, "fp16", FALSE, r, &gpu->flops[ST_DTYPE_FP16], &local) ||
      !st_json_get_flop_rate(obj, "bf16", FALSE, r, &gpu->flops[ST_DTYPE_BF16], &local) ||
      !st_json_get_flop_rate(obj, "fp8", FALSE, r, &gpu->fp8_flops, &local))
    return fail(error, local, origin, "gpu.flops");
  return TRUE;
}

/* gpu.performance: a library name ("h100-sxm": models/gpus/h100-sxm.json), a
 * path (relative to the cluster file's folder), the object inline, or absent
 * (models/gpus/default.json). */
static gboolean
parse_perf(const cJSON *gpu_obj, StGpuSpec *gpu, const char *origin, GError **error)
{
  const cJSON *perf = cJSON_GetObjectItemCaseSensitive(gpu_obj, "performance");
  GError *local = NULL;
  if (perf == NULL) {
    gpu->perf = st_gpu_perf_load_default(&local);
  } else if (cJSON_IsObject(perf)) {
    g_autofree char *where = g_strdup_printf("%s: gpu.performance", origin);
    gpu->perf = st_gpu_perf_from_json(perf, where, &local);
  } else if (cJSON_IsString(perf) && st_gpu_perf_is_name(perf->valuestring)) {
    gpu->perf = st_gpu_perf_load_named(perf->valuestring, &local);
  } else if (cJSON_IsString(perf)) {
    g_autofree char *dir = g_path_get_dirname(origin);
    g_autofree char *path = g_path_is_absolute(perf->valuestring) ||
                                !g_file_test(origin, G_FILE_TEST_IS_REGULAR)
                              ? g_strdup(perf->valuestring)
                              : g_build_filename(dir, perf->valuestring, NULL);
    gpu->perf = st_gpu_perf_load(path, &local);
  } else {
    g_set_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID,
                "%s: gpu: key 'performance': expected a file name or an object", origin);
    return FALSE;
  }
  if (gpu->perf != NULL)
    return TRUE;
  g_set_error(error, ST_CLUSTER_ERROR, local->code, "%s: gpu.performance: %s", origin,
              local->message);
  g_error_free(local);
  return FALSE;
}

static gboolean
parse_gpu(const cJSON *obj, StGpuSpec *gpu, const char *origin, GError **error)
{
  static const char *const keys[] = {"name", "memory", "flops", "memory_bandwidth",
                                     "power_limit_w", "performance", NULL};
  GError *local = NULL;
  const char *name = NULL;
  const cJSON *flops = NULL;
  if (!st_json_check_keys(obj, keys, &local) ||
      !st_json_get_string(obj, "name", TRUE, &name, &local) ||
      !st_json_get_bytes(obj, "memory", TRUE, &ST_RANGE_DEVICE_MEMORY, &gpu->memory_bytes,
                         &local) ||
      !st_json_get_object(obj, "flops", TRUE, &flops, &local) ||
      !st_json_get_bandwidth(obj, "memory_bandwidth", TRUE, &ST_RANGE_MEMORY_BANDWIDTH,
                             &gpu->memory_bandwidth, &local) ||
      !st_json_get_double_range(obj, "power_limit_w", FALSE, 1, 10000, &gpu->power_limit_w,
                                &local))
    return fail(error, local, origin, "gpu");
  if (*name == '\0') {
    g_set_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID,
                "%s: gpu: key 'name': must not be empty", origin);
    return FALSE;
  }
  gpu->name = g_strdup(name);
  return parse_flops(flops, gpu, origin, error) && parse_perf(obj, gpu, origin, error);
}

/* The link classes a cluster of `nodes` x `per_node` needs when `gpus` are in use. */
static gboolean
check_links(const StCluster *c, int gpus, const char *origin, GError **error)
{
  int nodes_used = (gpus + c->gpus_per_node - 1) / c->gpus_per_node;
  int most_on_a_node = MIN(gpus, c->gpus_per_node);
  if (most_on_a_node > 1 && !c->links[ST_LINK_INTRA_NODE].present) {
    g_set_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID,
                "%s: links: missing key 'intra_node' (%d GPUs share a node)", origin,
                most_on_a_node);
    return FALSE;
  }
  if (nodes_used > 1 && !c->links[ST_LINK_INTER_NODE].present) {
    g_set_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID,
                "%s: links: missing key 'inter_node' (%d nodes are in use)", origin,
                nodes_used);
    return FALSE;
  }
  return TRUE;
}

static void
derive_local(StCluster *c)
{
  /* A copy within one GPU's memory reads and writes every byte. */
  c->links[ST_LINK_LOCAL] = (StLink){.present = TRUE,
                                     .bandwidth = c->gpu.memory_bandwidth / 2,
                                     .latency_ns = 0,
                                     .topology = ST_TOPO_SWITCH};
}

StCluster *
st_cluster_from_json(const cJSON *root, const char *origin, GError **error)
{
  /* "storage" and "power" belong to a training run's model (run/run.h,
   * st_run_site_load), which reads them from the same file. */
  static const char *const keys[] = {"name",  "note",    "nodes", "gpus_per_node", "gpus",
                                     "gpu",   "links",   "storage", "power", NULL};
  g_return_val_if_fail(root != NULL, NULL);
  if (origin == NULL)
    origin = "<cluster>";
  GError *local = NULL;
  if (!cJSON_IsObject(root)) {
    g_set_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID, "%s: expected a JSON object", origin);
    return NULL;
  }
  g_autoptr(StCluster) c = g_new0(StCluster, 1);
  const char *name = NULL, *note = NULL;
  int64_t nodes = 0, per_node = 0, gpus = 0;
  const cJSON *gpu = NULL, *links = NULL;
  if (!st_json_check_keys(root, keys, &local) ||
      !st_json_get_string(root, "name", TRUE, &name, &local) ||
      !st_json_get_string(root, "note", FALSE, &note, &local) ||
      !st_json_get_int(root, "nodes", TRUE, 1, 1 << 20, &nodes, &local) ||
      !st_json_get_int(root, "gpus_per_node", TRUE, 1, 1 << 16, &per_node, &local) ||
      !st_json_get_int(root, "gpus", FALSE, 1, INT32_MAX, &gpus, &local) ||
      !st_json_get_object(root, "gpu", TRUE, &gpu, &local) ||
      !st_json_get_object(root, "links", FALSE, &links, &local)) {
    fail(error, local, origin, NULL);
    return NULL;
  }
  /* Each count is bounded above, so the product fits in int64. */
  if (nodes * per_node > ST_MAX_GPUS) {
    g_set_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID,
                "%s: keys 'nodes' and 'gpus_per_node': %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT
                " = %" G_GINT64_FORMAT " GPUs, more than the %d a cluster may have "
                "(docs/RELIABILITY.md)", origin, nodes, per_node, nodes * per_node, ST_MAX_GPUS);
    return NULL;
  }
  c->name = g_strdup(name);
  c->nodes = (int)nodes;
  c->gpus_per_node = (int)per_node;
  if (gpus > nodes * per_node) {
    g_set_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID,
                "%s: key 'gpus': %" G_GINT64_FORMAT " GPUs in use but the cluster holds %"
                G_GINT64_FORMAT, origin, gpus, nodes * per_node);
    return NULL;
  }
  c->gpus = gpus > 0 ? (int)gpus : c->nodes * c->gpus_per_node;
  c->fabric = (StFabric){c->gpus_per_node, 1, 1.0};
  if (!parse_gpu(gpu, &c->gpu, origin, error))
    return NULL;
  if (links != NULL) {
    static const char *const link_keys[] = {"intra_node", "inter_node", "pcie", NULL};
    if (!st_json_check_keys(links, link_keys, &local)) {
      fail(error, local, origin, "links");
      return NULL;
    }
    for (int l = 0; l < ST_LINK_N; l++) {
      const cJSON *obj = NULL;
      if (LINK_KEYS[l] == NULL)
        continue;
      if (!st_json_get_object(links, LINK_KEYS[l], FALSE, &obj, &local)) {
        fail(error, local, origin, "links");
        return NULL;
      }
      if (obj != NULL && !parse_link(obj, (StLinkClass)l, &c->links[l], origin, error))
        return NULL;
      if (obj != NULL && l == ST_LINK_INTER_NODE && !parse_fabric(obj, c, origin, error))
        return NULL;
    }
  }
  /* The file describes a node: a multi-GPU node needs its intra-node link
   * whatever --gpus later says. */
  if (c->gpus_per_node > 1 && !c->links[ST_LINK_INTRA_NODE].present) {
    g_set_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID,
                "%s: links: missing key 'intra_node' (%d GPUs per node)", origin,
                c->gpus_per_node);
    return NULL;
  }
  if (!check_links(c, c->gpus, origin, error))
    return NULL;
  derive_local(c);
  return g_steal_pointer(&c);
}

StCluster *
st_cluster_load(const char *path, GError **error)
{
  GError *local = NULL;
  g_autoptr(cJSON) root = st_json_load_file(path, &local);
  if (root == NULL) {
    /* json.c's messages already name the file (and line:column). */
    g_set_error_literal(error, ST_CLUSTER_ERROR, local->code, local->message);
    g_error_free(local);
    return NULL;
  }
  StCluster *c = st_cluster_from_json(root, path, error);
  if (c != NULL)
    c->path = g_strdup(path);
  return c;
}

/* The shortest spelling in `units` (largest first) that reads back to exactly
 * `value`, so that to_json round-trips and stays readable ("450GB/s"). */
typedef gboolean (*ParseFn)(const char *text, double *out);

static gboolean
parse_bw(const char *text, double *out)
{
  return st_parse_bandwidth(text, out, NULL);
}

static gboolean
parse_flops_fn(const char *text, double *out)
{
  return st_parse_flop_rate(text, out, NULL);
}

static char *
format_exact(double value, const char *const *suffixes, const double *factors, ParseFn parse)
{
  char number[G_ASCII_DTOSTR_BUF_SIZE];
  for (int i = 0; suffixes[i] != NULL; i++) {
    if (value < factors[i] && factors[i] > 1)
      continue;
    g_ascii_formatd(number, sizeof number, "%.15g", value / factors[i]);
    char *text = g_strconcat(number, suffixes[i], NULL);
    double back = -1;
    if (parse(text, &back) && back == value)
      return text;
    g_free(text);
  }
  g_ascii_dtostr(number, sizeof number, value);
  /* The last suffix is the base unit. */
  int last = 0;
  while (suffixes[last + 1] != NULL)
    last++;
  return g_strconcat(number, suffixes[last], NULL);
}

static char *
format_bandwidth_exact(double v)
{
  static const char *const s[] = {"TB/s", "GB/s", "MB/s", "B/s", NULL};
  static const double f[] = {1e12, 1e9, 1e6, 1};
  return format_exact(v, s, f, parse_bw);
}

static char *
format_flops_exact(double v)
{
  static const char *const s[] = {"PFLOP/s", "TFLOP/s", "GFLOP/s", "FLOP/s", NULL};
  static const double f[] = {1e15, 1e12, 1e9, 1};
  return format_exact(v, s, f, parse_flops_fn);
}

static char *
format_bytes_exact(int64_t bytes)
{
  static const char *const s[] = {"TiB", "GiB", "MiB", "KiB", "TB", "GB", "MB", "kB", NULL};
  static const int64_t f[] = {1LL << 40, 1LL << 30, 1LL << 20, 1LL << 10,
                              1000000000000LL, 1000000000LL, 1000000LL, 1000LL};
  for (int i = 0; s[i] != NULL; i++)
    if (bytes >= f[i] && bytes % f[i] == 0)
      return g_strdup_printf("%" G_GINT64_FORMAT "%s", bytes / f[i], s[i]);
  return g_strdup_printf("%" G_GINT64_FORMAT "B", bytes);
}

static char *
format_duration_exact(int64_t ns)
{
  if (ns > 0 && ns % 1000000 == 0)
    return g_strdup_printf("%" G_GINT64_FORMAT "ms", ns / 1000000);
  if (ns > 0 && ns % 1000 == 0)
    return g_strdup_printf("%" G_GINT64_FORMAT "us", ns / 1000);
  return g_strdup_printf("%" G_GINT64_FORMAT "ns", ns);
}

static void
add_owned_string(cJSON *obj, const char *key, char *text)
{
  cJSON_AddStringToObject(obj, key, text);
  g_free(text);
}

cJSON *
st_cluster_to_json(const StCluster *c)
{
  g_return_val_if_fail(c != NULL, NULL);
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "name", c->name);
  st_json_add_int(root, "nodes", c->nodes);
  st_json_add_int(root, "gpus_per_node", c->gpus_per_node);
  if (c->gpus != c->nodes * c->gpus_per_node)
    st_json_add_int(root, "gpus", c->gpus);

  cJSON *gpu = cJSON_AddObjectToObject(root, "gpu");
  cJSON_AddStringToObject(gpu, "name", c->gpu.name);
  add_owned_string(gpu, "memory", format_bytes_exact(c->gpu.memory_bytes));
  cJSON *flops = cJSON_AddObjectToObject(gpu, "flops");
  static const char *const dtype_keys[ST_DTYPE_N] = {
    [ST_DTYPE_FP32] = "fp32", [ST_DTYPE_FP16] = "fp16", [ST_DTYPE_BF16] = "bf16"};
  for (int d = 0; d < ST_DTYPE_N; d++)
    if (c->gpu.flops[d] > 0)
      add_owned_string(flops, dtype_keys[d], format_flops_exact(c->gpu.flops[d]));
  if (c->gpu.tf32_flops > 0)
    add_owned_string(flops, "tf32", format_flops_exact(c->gpu.tf32_flops));
  if (c->gpu.fp8_flops > 0)
    add_owned_string(flops, "fp8", format_flops_exact(c->gpu.fp8_flops));
  add_owned_string(gpu, "memory_bandwidth", format_bandwidth_exact(c->gpu.memory_bandwidth));
  if (c->gpu.power_limit_w > 0)
    cJSON_AddNumberToObject(gpu, "power_limit_w", c->gpu.power_limit_w);
  if (c->gpu.perf != NULL)
    cJSON_AddItemToObject(gpu, "performance", st_gpu_perf_to_json(c->gpu.perf));

  cJSON *links = cJSON_AddObjectToObject(root, "links");
  for (int l = 0; l < ST_LINK_N; l++) {
    const StLink *link = &c->links[l];
    if (LINK_KEYS[l] == NULL || !link->present)
      continue;
    cJSON *obj = cJSON_AddObjectToObject(links, LINK_KEYS[l]);
    add_owned_string(obj, "bandwidth", format_bandwidth_exact(link->bandwidth));
    add_owned_string(obj, "latency", format_duration_exact(link->latency_ns));
    cJSON_AddStringToObject(obj, "topology", link->topology == ST_TOPO_RING ? "ring" : "switch");
    if (l != ST_LINK_INTER_NODE)
      continue;
    if (c->fabric.nics != c->gpus_per_node)
      st_json_add_int(obj, "nics", c->fabric.nics);
    if (c->fabric.leaf_nodes != 1)
      st_json_add_int(obj, "leaf_nodes", c->fabric.leaf_nodes);
    if (c->fabric.oversubscription != 1)
      cJSON_AddNumberToObject(obj, "oversubscription", c->fabric.oversubscription);
  }
  return root;
}

StCluster *
st_cluster_copy(const StCluster *c)
{
  g_return_val_if_fail(c != NULL, NULL);
  StCluster *copy = g_new(StCluster, 1);
  *copy = *c;
  copy->name = g_strdup(c->name);
  copy->path = g_strdup(c->path);
  copy->gpu.name = g_strdup(c->gpu.name);
  if (c->gpu.perf != NULL)
    copy->gpu.perf = st_gpu_perf_ref(c->gpu.perf);
  return copy;
}

void
st_cluster_free(StCluster *c)
{
  if (c == NULL)
    return;
  g_free(c->name);
  g_free(c->path);
  g_free(c->gpu.name);
  st_gpu_perf_unref(c->gpu.perf);
  g_free(c);
}

gboolean
st_cluster_keep_gpus_per_node(StCluster *c, int gpus_per_node, GError **error)
{
  g_return_val_if_fail(c != NULL, FALSE);
  const char *origin = c->path ? c->path : c->name;
  if (gpus_per_node == 0 || gpus_per_node == c->gpus_per_node)
    return TRUE;
  if (gpus_per_node < 0 || gpus_per_node > c->gpus_per_node) {
    g_set_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID,
                "%s: --gpus-per-node %d: a node holds %d GPUs", origin,
                gpus_per_node, c->gpus_per_node);
    return FALSE;
  }
  StCluster kept = *c; /* shallow: only its counts change */
  int total = c->nodes * gpus_per_node;
  kept.gpus_per_node = gpus_per_node;
  kept.gpus = c->gpus == c->nodes * c->gpus_per_node ? total : MIN(c->gpus, total);
  kept.fabric.nics = MIN(c->fabric.nics, gpus_per_node);
  if (!check_links(&kept, kept.gpus, origin, error))
    return FALSE;
  c->gpus_per_node = kept.gpus_per_node;
  c->gpus = kept.gpus;
  c->fabric.nics = kept.fabric.nics;
  return TRUE;
}

gboolean
st_cluster_resize(StCluster *c, int nodes, int gpus, GError **error)
{
  g_return_val_if_fail(c != NULL, FALSE);
  const char *origin = c->path ? c->path : c->name;
  if (nodes < 0 || gpus < 0) {
    g_set_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID,
                "%s: --%s %d: must be positive (0 keeps the cluster's own)", origin,
                nodes < 0 ? "nodes" : "gpus", nodes < 0 ? nodes : gpus);
    return FALSE;
  }
  gboolean was_full = c->gpus == c->nodes * c->gpus_per_node;
  int new_nodes = nodes > 0 ? nodes : c->nodes;
  /* In 64 bits: --nodes and the file's GPUs per node are each bounded, their
   * product is not (a file's own product is checked when it is read). */
  int64_t total = (int64_t)new_nodes * c->gpus_per_node;
  if (total > ST_MAX_GPUS) {
    g_set_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID,
                "%s: --nodes %d: %d nodes x %d GPUs per node = %" G_GINT64_FORMAT
                " GPUs, more than the %d a cluster may have (docs/RELIABILITY.md)",
                origin, new_nodes, new_nodes, c->gpus_per_node, total, ST_MAX_GPUS);
    return FALSE;
  }
  int new_gpus = gpus > 0 ? gpus : was_full ? (int)total : MIN(c->gpus, (int)total);
  if (new_gpus > total) {
    g_set_error(error, ST_CLUSTER_ERROR, ST_ERROR_INVALID,
                "%s: --gpus %d: the cluster holds only %" G_GINT64_FORMAT " GPUs (%d node%s x %d)",
                origin, new_gpus, total, new_nodes, new_nodes == 1 ? "" : "s", c->gpus_per_node);
    return FALSE;
  }
  if (!check_links(c, new_gpus, origin, error))
    return FALSE;
  c->nodes = new_nodes;
  c->gpus = new_gpus;
  return TRUE;
}

double
st_cluster_host_memory_bandwidth(const StCluster *c)
{
  g_return_val_if_fail(c != NULL, 0);
  return 100e9;
}

double
st_cluster_peak_flops(const StCluster *c, StDtype dtype)
{
  g_return_val_if_fail(c != NULL && dtype >= 0 && dtype < ST_DTYPE_N, 0);
  const double *f = c->gpu.flops;
  if (f[dtype] > 0)
    return f[dtype];
  /* GPUs without bf16 (V100) run 16-bit work as fp16, and the reverse; a GPU
   * with neither runs it at its fp32 rate (which the loader requires). */
  if (dtype == ST_DTYPE_BF16 && f[ST_DTYPE_FP16] > 0)
    return f[ST_DTYPE_FP16];
  if (dtype == ST_DTYPE_FP16 && f[ST_DTYPE_BF16] > 0)
    return f[ST_DTYPE_BF16];
  return f[ST_DTYPE_FP32];
}

StLinkClass
st_cluster_link_between(const StCluster *c, int gpu_a, int gpu_b)
{
  if (gpu_a == gpu_b)
    return ST_LINK_LOCAL;
  if (st_cluster_node_of(c, gpu_a) == st_cluster_node_of(c, gpu_b))
    return ST_LINK_INTRA_NODE;
  return ST_LINK_INTER_NODE;
}

static int
compare_int32(const void *a, const void *b)
{
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

void
st_cluster_group_shape(const StCluster *c, const int32_t *member_gpus, int n, StGroupShape *shape)
{
  g_return_if_fail(c != NULL && shape != NULL && (n == 0 || member_gpus != NULL));
  *shape = (StGroupShape){.ranks = n};
  if (n == 0)
    return;
  /* Sorted, equal GPUs are adjacent and (as node = gpu / gpus_per_node) so
   * are the GPUs of one node: run lengths give every count. O(n log n), O(n)
   * for members already in GPU order (most groups: ranks placed in order). */
  gboolean in_order = TRUE;
  for (int i = 1; i < n && in_order; i++)
    in_order = member_gpus[i - 1] <= member_gpus[i];
  g_autofree int32_t *copy = NULL;
  const int32_t *sorted = member_gpus;
  if (!in_order) {
    copy = g_new(int32_t, n);
    memcpy(copy, member_gpus, sizeof(int32_t) * (size_t)n);
    qsort(copy, (size_t)n, sizeof(int32_t), compare_int32);
    sorted = copy;
  }
  /* NICs and leaves are numbered in GPU order too. Per node, the devices on
   * each of its NICs are kept until the node's count is known. */
  int run_members = 0, run_devices = 0, run_nic = 0, node_first_nic = 0;
  g_autofree int32_t *nic_devices = g_new0(int32_t, c->fabric.nics);
  for (int i = 0; i <= n; i++) {
    int node = i < n ? st_cluster_node_of(c, sorted[i]) : -1;
    gboolean new_node = i == 0 || i == n || node != st_cluster_node_of(c, sorted[i - 1]);
    if (new_node && i > 0) {
      /* The node before is complete: its NICs' shares of its traffic. */
      for (int k = 0; k < c->fabric.nics; k++) {
        shape->nic_share = MAX(shape->nic_share, (double)nic_devices[k] / run_devices);
        nic_devices[k] = 0;
      }
    }
    if (i == n)
      break;
    gboolean new_device = i == 0 || sorted[i] != sorted[i - 1];
    gboolean new_nic = i == 0 || st_net_nic_of(c, sorted[i]) != st_net_nic_of(c, sorted[i - 1]);
    gboolean new_leaf = i == 0 || node / c->fabric.leaf_nodes !=
                                    st_cluster_node_of(c, sorted[i - 1]) / c->fabric.leaf_nodes;
    run_members = new_device ? 1 : run_members + 1;
    if (new_node) {
      shape->nodes++;
      run_devices = 0;
      node_first_nic = node * c->fabric.nics;
    }
    if (new_leaf)
      shape->leaves++;
    if (new_nic)
      run_nic = 0;
    if (new_device) {
      shape->devices++;
      run_devices++;
      run_nic++;
      nic_devices[st_net_nic_of(c, sorted[i]) - node_first_nic]++;
    }
    shape->per_device = MAX(shape->per_device, run_members);
    shape->per_node = MAX(shape->per_node, run_devices);
    shape->per_nic = MAX(shape->per_nic, run_nic);
  }
}

double
st_cluster_link_bandwidth(const StCluster *c, StLinkClass link)
{
  g_return_val_if_fail(c != NULL && link >= 0 && link < ST_LINK_N, 0);
  if (link == ST_LINK_LOCAL)
    return c->gpu.memory_bandwidth / 2;
  return c->links[link].bandwidth;
}

int64_t
st_cluster_link_latency(const StCluster *c, StLinkClass link)
{
  g_return_val_if_fail(c != NULL && link >= 0 && link < ST_LINK_N, 0);
  if (link == ST_LINK_LOCAL)
    return 0;
  return c->links[link].latency_ns;
}
