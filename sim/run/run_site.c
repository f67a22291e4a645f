/* run_site.c: the site a run lives on: the cluster file's optional
 * "storage" and "power" entries and the failure-rates file (run.h).
 *
 *   "storage": [{"name": "parallel-fs", "write": "12.5GB/s", "read": "12.5GB/s",
 *                "aggregate": "2TB/s", "max_writers": 0, "source": "..."}, ...]
 *   "power": {"gpu_busy_w": 700, "gpu_comm_w": 315, "gpu_idle_w": 70,
 *             "node_w": 2240, "pue": 1.1, "source": "..."}
 *
 * Default storage tier, "parallel-fs" (ESTIMATES but the aggregate): a
 * node writes and reads at 12.5 GB/s (one 100 Gb/s front-end NIC's worth);
 * the tier takes 2 TB/s from all nodes together (Llama 3 paper section
 * 3.3.1: Meta's Tectonic, 240 PB on 7,500 SSD servers, 2 TB/s sustained,
 * 7 TB/s peak). A "local-nvme" tier would write ~20 GB/s per node with no
 * aggregate limit (8 data-cache NVMe drives of a DGX H100 at ~2.5-3 GB/s
 * each; ESTIMATE) but a node's checkpoint dies with the node: give it in the
 * cluster file to compare.
 */
#include <string.h>

#include "base/json.h"
#include "base/units.h"
#include "run/run.h"

void
st_storage_default(StStorage *s)
{
  *s = (StStorage){
    .name = g_strdup("parallel-fs"),
    .write_bw_node = 12.5e9,
    .read_bw_node = 12.5e9,
    .aggregate_bw = 2e12,
    .max_writers = 0,
    .source = g_strdup("estimate per node; aggregate 2 TB/s sustained: Llama 3 paper 3.3.1 "
                       "(Tectonic)"),
  };
}

void
st_storage_clear(StStorage *s)
{
  g_clear_pointer(&s->name, g_free);
  g_clear_pointer(&s->source, g_free);
}

void
st_storage_copy(StStorage *dst, const StStorage *src)
{
  *dst = *src;
  dst->name = g_strdup(src->name);
  dst->source = g_strdup(src->source);
}

static gboolean
read_tier(const cJSON *t, StStorage *s, GError **error)
{
  static const char *const keys[] = {"name", "write", "read", "aggregate", "max_writers",
                                     "source", NULL};
  const char *name = NULL, *source = NULL;
  int64_t writers = 0;
  double aggregate = 0;
  if (!st_json_check_keys(t, keys, error) ||
      !st_json_get_string(t, "name", TRUE, &name, error) ||
      !st_json_get_bandwidth(t, "write", TRUE, &ST_RANGE_LINK_BANDWIDTH, &s->write_bw_node,
                             error) ||
      !st_json_get_bandwidth(t, "read", TRUE, &ST_RANGE_LINK_BANDWIDTH, &s->read_bw_node,
                             error) ||
      !st_json_get_bandwidth(t, "aggregate", FALSE, &ST_RANGE_LINK_BANDWIDTH, &aggregate,
                             error) ||
      !st_json_get_int(t, "max_writers", FALSE, 0, 1 << 30, &writers, error) ||
      !st_json_get_string(t, "source", FALSE, &source, error))
    return FALSE;
  s->aggregate_bw = aggregate;
  s->max_writers = (int)writers;
  g_free(s->name);
  s->name = g_strdup(name);
  g_free(s->source);
  s->source = g_strdup(source != NULL ? source : "the cluster file");
  return TRUE;
}

static gboolean
read_power(const cJSON *p, StPower *out, GError **error)
{
  static const char *const keys[] = {"gpu_busy_w", "gpu_comm_w", "gpu_idle_w", "node_w",
                                     "pue", "source", NULL};
  const char *source = NULL;
  if (!st_json_check_keys(p, keys, error) ||
      !st_json_get_double(p, "gpu_busy_w", TRUE, 0, &out->gpu_busy_w, error) ||
      !st_json_get_double(p, "gpu_comm_w", TRUE, 0, &out->gpu_comm_w, error) ||
      !st_json_get_double(p, "gpu_idle_w", TRUE, 0, &out->gpu_idle_w, error) ||
      !st_json_get_double(p, "node_w", TRUE, 0, &out->node_w, error) ||
      !st_json_get_double_range(p, "pue", TRUE, 1.0, 10.0, &out->pue, error) ||
      !st_json_get_string(p, "source", FALSE, &source, error))
    return FALSE;
  g_free(out->source);
  out->source = g_strdup(source != NULL ? source : "the cluster file");
  return TRUE;
}

gboolean
st_run_site_load(const char *path, const char *tier, StStorage *storage, StPower *power,
                 GError **error)
{
  g_autoptr(cJSON) root = st_json_load_file(path, error);
  if (root == NULL)
    return FALSE;
  const cJSON *tiers = cJSON_GetObjectItemCaseSensitive(root, "storage");
  gboolean found = tier == NULL;
  if (tiers != NULL) {
    if (!cJSON_IsArray(tiers)) {
      g_set_error(error, ST_RUN_ERROR, ST_ERROR_INVALID,
                  "%s: key 'storage': expected a list of storage tiers", path);
      return FALSE;
    }
    const cJSON *t;
    cJSON_ArrayForEach(t, tiers) {
      const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
      gboolean pick = tier == NULL ? t == tiers->child
                                   : cJSON_IsString(name) && strcmp(name->valuestring, tier) == 0;
      if (!pick)
        continue;
      if (!read_tier(t, storage, error)) {
        g_prefix_error(error, "%s: storage: ", path);
        return FALSE;
      }
      found = TRUE;
    }
  }
  if (!found && !(storage->name != NULL && strcmp(storage->name, tier) == 0)) {
    g_set_error(error, ST_RUN_ERROR, ST_ERROR_INVALID,
                "--storage %s: %s has no storage tier of that name (its first is the default)",
                tier, path);
    return FALSE;
  }
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "power");
  if (p != NULL && power != NULL && !read_power(p, power, error)) {
    g_prefix_error(error, "%s: power: ", path);
    return FALSE;
  }
  return TRUE;
}

gboolean
st_failure_rates_load(const char *path, StFailureRates *r, GError **error)
{
  static const char *const keys[] = {"gpu_per_h", "node_per_h", "link_per_h", "software_per_h",
                                     "planned_per_h", "source", NULL};
  g_autoptr(cJSON) root = st_json_load_file(path, error);
  if (root == NULL)
    return FALSE;
  const char *source = NULL;
  if (!cJSON_IsObject(root) || !st_json_check_keys(root, keys, error) ||
      !st_json_get_double(root, "gpu_per_h", FALSE, 0, &r->gpu_per_h, error) ||
      !st_json_get_double(root, "node_per_h", FALSE, 0, &r->node_per_h, error) ||
      !st_json_get_double(root, "link_per_h", FALSE, 0, &r->link_per_h, error) ||
      !st_json_get_double(root, "software_per_h", FALSE, 0, &r->software_per_h, error) ||
      !st_json_get_double(root, "planned_per_h", FALSE, 0, &r->planned_per_h, error) ||
      !st_json_get_string(root, "source", FALSE, &source, error)) {
    if (error != NULL && *error == NULL)
      g_set_error(error, ST_RUN_ERROR, ST_ERROR_INVALID, "expected an object of rates");
    g_prefix_error(error, "--failure-rates %s: ", path);
    return FALSE;
  }
  g_free(r->source);
  r->source = g_strdup(source != NULL ? source : path);
  return TRUE;
}
