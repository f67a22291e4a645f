/* plot_rundir.c: what a run directory holds for the plots (plot_rundir.h). */
#include "output/plot_rundir.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "output/output.h"

gboolean
plot_has_file(const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  return g_file_test(path, G_FILE_TEST_IS_REGULAR);
}

/* The text of DIR/NAME, or NULL with `error` set. */
char *
plot_read_table(const char *dir, const char *name, GError **error)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  char *text = NULL;
  GError *local = NULL;
  if (!g_file_get_contents(path, &text, NULL, &local)) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return NULL;
  }
  return text;
}

/* DIR's report.json, or NULL when it has none (or it does not parse). */
static cJSON *
load_report(const char *dir)
{
  g_autofree char *path = g_build_filename(dir, "report.json", NULL);
  return g_file_test(path, G_FILE_TEST_IS_REGULAR) ? st_json_load_file(path, NULL) : NULL;
}

/* "predicted step 1.2 s (1.0 s .. 1.5 s, 90 %)" from DIR's report.json,
 * when a calibration gave the step its interval; NULL otherwise. */
char *
plot_step_interval(const char *dir)
{
  g_autoptr(cJSON) report = load_report(dir);
  const cJSON *step = cJSON_GetObjectItem(report, "step_time_s");
  const cJSON *iv = cJSON_GetObjectItem(report, "step_time_interval_s");
  if (!cJSON_IsNumber(step) || !cJSON_IsArray(iv) || cJSON_GetArraySize(iv) != 2)
    return NULL;
  g_autofree char *t = st_format_duration((int64_t)(step->valuedouble * 1e9));
  g_autofree char *lo =
    st_format_duration((int64_t)(cJSON_GetArrayItem(iv, 0)->valuedouble * 1e9));
  g_autofree char *hi =
    st_format_duration((int64_t)(cJSON_GetArrayItem(iv, 1)->valuedouble * 1e9));
  return g_strdup_printf("predicted step %s (%s .. %s, 90 %%)", t, lo, hi);
}

/* The run's name for titles: report.json's "description" (which says the
 * strategy and its settings), else its "strategy", else the directory's
 * name. */
char *
plot_run_name(const char *dir)
{
  g_autoptr(cJSON) report = load_report(dir);
  const char *strategy = cJSON_GetStringValue(cJSON_GetObjectItem(report, "strategy"));
  const char *description = cJSON_GetStringValue(cJSON_GetObjectItem(report, "description"));
  if (description != NULL && description[0] != '\0')
    return g_strdup(description);
  if (strategy != NULL)
    return g_strdup(strategy);
  return g_path_get_basename(dir);
}


void
plot_memory_info_clear(MemoryInfo *m)
{
  g_free(m->kind);
  if (m->devices)
    g_array_unref(m->devices);
  if (m->first)
    g_array_unref(m->first);
  if (m->last)
    g_array_unref(m->last);
  if (m->stands)
    g_hash_table_unref(m->stands);
}


/* "0-3,6": the ids of `ids` (ascending), runs compressed. */
static char *
id_ranges(const GArray *ids)
{
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < ids->len; i++) {
    int first = g_array_index(ids, int, i);
    while (i + 1 < ids->len && g_array_index(ids, int, i + 1) == g_array_index(ids, int, i) + 1)
      i++;
    int last = g_array_index(ids, int, i);
    g_string_append_printf(out, "%s%d", out->len ? "," : "", first);
    if (last > first)
      g_string_append_printf(out, "-%d", last);
  }
  return g_string_free(out, FALSE);
}

/* What report.json beside memory.csv says about it: predicted or measured,
 * and, when identical devices were folded, the devices each recorded one
 * stands for. Without a report: predicted, nothing folded. */
static void
memory_info_from_report(const char *dir, MemoryInfo *m)
{
  g_autoptr(cJSON) report = load_report(dir);
  const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(report, "kind"));
  m->kind = g_strdup(kind != NULL ? kind : "predicted");
  const cJSON *devices = cJSON_GetObjectItem(report, "devices");
  /* The capacity and the device that goes over it (a prediction's: the
   * executor reports running out of memory itself). */
  m->oom_device = -1;
  const cJSON *capacity = cJSON_GetObjectItem(report, "gpu_memory_bytes");
  m->capacity = cJSON_IsNumber(capacity) ? (int64_t)capacity->valuedouble : 0;
  const cJSON *oom = cJSON_GetObjectItem(report, "out_of_memory");
  const cJSON *oom_dev = cJSON_GetObjectItem(oom, "device");
  if (m->capacity > 0 && cJSON_IsNumber(oom_dev)) {
    m->oom_device = (int)oom_dev->valuedouble;
    m->oom_bytes = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(oom, "peak_bytes"));
    const cJSON *dev;
    cJSON_ArrayForEach(dev, devices)
      if ((int)cJSON_GetNumberValue(cJSON_GetObjectItem(dev, "id")) == m->oom_device)
        m->oom_ms = 1e3 * cJSON_GetNumberValue(cJSON_GetObjectItem(dev, "peak_time_s"));
  }
  g_autoptr(GHashTable) members =
    g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_array_unref);
  gboolean folded = FALSE;
  const cJSON *dev;
  cJSON_ArrayForEach(dev, devices) {
    int id = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(dev, "id"));
    int rep = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(dev, "represented_by"));
    folded = folded || rep != id;
    GArray *ids = g_hash_table_lookup(members, GINT_TO_POINTER(rep));
    if (ids == NULL) {
      ids = g_array_new(FALSE, FALSE, sizeof(int));
      g_hash_table_insert(members, GINT_TO_POINTER(rep), ids);
    }
    g_array_append_val(ids, id);
  }
  if (!folded)
    return;
  GHashTableIter iter;
  gpointer rep, ids;
  g_hash_table_iter_init(&iter, members);
  while (g_hash_table_iter_next(&iter, &rep, &ids))
    g_hash_table_replace(m->stands, rep, id_ranges(ids));
}

/* memory.csv's devices in the order of their rows (the header line first). */
gboolean
plot_memory_info_read(const char *dir, MemoryInfo *m, GError **error)
{
  m->devices = g_array_new(FALSE, FALSE, sizeof(int));
  m->first = g_array_new(FALSE, FALSE, sizeof(int));
  m->last = g_array_new(FALSE, FALSE, sizeof(int));
  m->stands = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  memory_info_from_report(dir, m);
  g_autofree char *path = g_build_filename(dir, "memory.csv", NULL);
  g_autofree char *text = plot_read_table(dir, "memory.csv", error);
  if (text == NULL)
    return FALSE;
  int last = -1, row = -1;
  gboolean header = FALSE;
  for (char *line = text, *next; line != NULL && *line != '\0'; line = next) {
    next = strchr(line, '\n');
    if (next != NULL)
      *next++ = '\0';
    int device;
    if (!header) {
      header = TRUE; /* the column names */
    } else {
      const char *comma = strchr(line, ',');
      row++;
      if (comma == NULL || sscanf(comma + 1, "%d", &device) != 1) {
        g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_PARSE, "%s: data row %d: no device", path,
                    row + 1);
        return FALSE;
      }
      /* Rows of a device are contiguous: a new value is a new device. */
      if (device != last) {
        g_array_append_val(m->devices, device);
        g_array_append_val(m->first, row);
        g_array_append_val(m->last, row);
      }
      g_array_index(m->last, int, m->last->len - 1) = row;
      last = device;
    }
  }
  if (m->devices->len == 0) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_INVALID, "%s: no rows", path);
    return FALSE;
  }
  return TRUE;
}

