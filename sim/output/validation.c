/* validation.c: see validation.h. */
#include "output/validation.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>

#include "base/error.h"
#include "base/json.h"
#include "base/units.h"
#include "output/output.h"

void
st_validation_case_clear(StValidationCase *c)
{
  g_clear_pointer(&c->name, g_free);
  g_clear_pointer(&c->strategy, g_free);
  g_clear_pointer(&c->error, g_free);
}

static const StValidationCase *
case_at(const StValidation *v, guint i)
{
  return g_ptr_array_index(v->cases, i);
}

StValidationTotals
st_validation_totals(const StValidation *v)
{
  StValidationTotals t = {0};
  for (guint i = 0; i < v->cases->len; i++) {
    const StValidationCase *c = case_at(v, i);
    if (c->error != NULL)
      continue;
    t.ran++;
    t.step_mape += fabs(c->cmp.step_error);
    t.worst_peak = MAX(t.worst_peak, fabs(c->cmp.peak_error));
  }
  if (t.ran > 0)
    t.step_mape /= t.ran;
  return t;
}

/* The op class whose time per step differs most between prediction and
 * measurement: where to look first when a case misses. */
static StOpClass
largest_gap(const StComparison *c)
{
  StOpClass worst = 0;
  for (int k = 1; k < ST_CLASS_N; k++)
    if (fabs(c->class_ns[0][k] - c->class_ns[1][k]) >
        fabs(c->class_ns[0][worst] - c->class_ns[1][worst]))
      worst = k;
  return worst;
}

cJSON *
st_validation_case_to_json(const StValidationCase *c)
{
  cJSON *o = c->error == NULL ? st_compare_to_json(&c->cmp) : cJSON_CreateObject();
  cJSON_AddStringToObject(o, "case", c->name);
  cJSON_AddStringToObject(o, "strategy", c->strategy);
  st_json_add_int(o, "ranks", c->ranks);
  if (c->error != NULL)
    cJSON_AddStringToObject(o, "error", c->error);
  else
    cJSON_AddStringToObject(o, "measured_on", c->cmp.measured->timeline->origin);
  return o;
}

static cJSON *
to_json(const StValidation *v)
{
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", "stagger-validate");
  st_json_add_int(root, "version", 1);
  cJSON_AddStringToObject(root, "model", v->model);
  cJSON_AddStringToObject(root, "profile", v->profile);
  cJSON_AddStringToObject(root, "profile_device", v->device);
  StValidationTotals t = st_validation_totals(v);
  st_json_add_int(root, "cases_ran", t.ran);
  cJSON_AddNumberToObject(root, "step_time_mape", t.step_mape);
  cJSON_AddNumberToObject(root, "worst_peak_error", t.worst_peak);
  cJSON *list = cJSON_AddArrayToObject(root, "cases");
  for (guint i = 0; i < v->cases->len; i++)
    cJSON_AddItemToArray(list, st_validation_case_to_json(case_at(v, i)));
  return root;
}

static GString *
to_csv(const StValidation *v)
{
  GString *csv = g_string_new("case,strategy,ranks,predicted_step_ms,measured_step_ms,"
                              "step_error_pct,predicted_peak_bytes,measured_peak_bytes,"
                              "peak_error_pct,error\n");
  for (guint i = 0; i < v->cases->len; i++) {
    const StValidationCase *c = case_at(v, i);
    g_string_append_printf(csv, "%s,%s,%d,", c->name, c->strategy, c->ranks);
    if (c->error != NULL) {
      g_autofree char *why = g_strdelimit(g_strdup(c->error), ",\n\"", ';');
      g_string_append_printf(csv, ",,,,,,%s\n", why);
      continue;
    }
    const StComparison *k = &c->cmp;
    g_string_append_printf(csv, "%.6f,%.6f,%.3f,%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%.3f,\n",
                           k->predicted->step_time_ns / 1e6, k->measured->step_time_ns / 1e6,
                           100 * k->step_error, k->peak_total[0], k->peak_total[1],
                           100 * k->peak_error);
  }
  return csv;
}

static GString *
to_markdown(const StValidation *v)
{
  GString *md = g_string_new(NULL);
  g_string_append_printf(md, "Model `%s`, profile `%s` (device %s).\n\n", v->model, v->profile,
                         v->device);
  g_string_append(md, "| case | predicted step | measured step | error | predicted peak | "
                      "measured peak | error | largest time gap (per step, rank 0) |\n"
                      "|---|---:|---:|---:|---:|---:|---:|---|\n");
  for (guint i = 0; i < v->cases->len; i++) {
    const StValidationCase *c = case_at(v, i);
    if (c->error != NULL) {
      g_string_append_printf(md, "| %s | failed: %s |||||||\n", c->name, c->error);
      continue;
    }
    const StComparison *k = &c->cmp;
    StOpClass gap = largest_gap(k);
    g_autofree char *ps = st_format_duration(k->predicted->step_time_ns);
    g_autofree char *ms = st_format_duration(k->measured->step_time_ns);
    g_autofree char *pp = st_format_bytes(k->peak_total[0]);
    g_autofree char *mp = st_format_bytes(k->peak_total[1]);
    g_autofree char *gp = st_format_duration((int64_t)k->class_ns[0][gap]);
    g_autofree char *gm = st_format_duration((int64_t)k->class_ns[1][gap]);
    g_string_append_printf(md, "| %s | %s | %s | %+.1f%% | %s | %s | %+.2f%% | %s: %s vs %s |\n",
                           c->name, ps, ms, 100 * k->step_error, pp, mp, 100 * k->peak_error,
                           st_op_class_name(gap), gp, gm);
  }
  StValidationTotals t = st_validation_totals(v);
  g_string_append_printf(md, "\n%d of %u cases ran. Step time MAPE **%.1f%%**; worst memory "
                             "peak error **%.2f%%**.\n",
                         t.ran, v->cases->len, 100 * t.step_mape, 100 * t.worst_peak);
  return md;
}

static gboolean
write_text(const char *dir, const char *name, const GString *text, GError **error)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  GError *local = NULL;
  if (g_file_set_contents(path, text->str, (gssize)text->len, &local))
    return TRUE;
  g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s", local->message);
  g_error_free(local);
  return FALSE;
}

gboolean
st_validation_write(const StValidation *v, const char *dir, GError **error)
{
  if (g_mkdir_with_parents(dir, 0777) != 0) {
    int saved = errno;
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s: cannot create: %s", dir,
                g_strerror(saved));
    return FALSE;
  }
  g_autoptr(cJSON) json = to_json(v);
  g_autofree char *json_path = g_build_filename(dir, "validate.json", NULL);
  g_autoptr(GString) csv = to_csv(v);
  g_autoptr(GString) md = to_markdown(v);
  return st_json_write_file(json_path, json, error) &&
         write_text(dir, "validate.csv", csv, error) && write_text(dir, "validate.md", md, error);
}

void
st_validation_print(const StValidation *v, FILE *out)
{
  fprintf(out, "\n%-26s %12s %12s %9s %12s %12s %9s\n", "CASE", "PRED STEP", "MEAS STEP",
          "ERROR", "PRED PEAK", "MEAS PEAK", "ERROR");
  for (guint i = 0; i < v->cases->len; i++) {
    const StValidationCase *c = case_at(v, i);
    if (c->error != NULL) {
      fprintf(out, "%-26s failed: %s\n", c->name, c->error);
      continue;
    }
    const StComparison *k = &c->cmp;
    g_autofree char *ps = st_format_duration(k->predicted->step_time_ns);
    g_autofree char *ms = st_format_duration(k->measured->step_time_ns);
    g_autofree char *pp = st_format_bytes(k->peak_total[0]);
    g_autofree char *mp = st_format_bytes(k->peak_total[1]);
    fprintf(out, "%-26s %12s %12s %+8.1f%% %12s %12s %+8.2f%%\n", c->name, ps, ms,
            100 * k->step_error, pp, mp, 100 * k->peak_error);
  }
  StValidationTotals t = st_validation_totals(v);
  fprintf(out, "%d of %u cases ran; step time MAPE %.1f%%, worst memory peak error %.2f%%\n",
          t.ran, v->cases->len, 100 * t.step_mape, 100 * t.worst_peak);
}
