/* report.c: report.json and the human tables, both from a summary.
 * docs/FORMATS.md describes every key. */
#include "output/output.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "base/units.h"
#include "output/report_multiplex.h"

static cJSON *
categories(const int64_t bytes[ST_MEM_N])
{
  cJSON *obj = cJSON_CreateObject();
  for (int c = 0; c < ST_MEM_N; c++)
    st_json_add_int(obj, st_mem_name(c), bytes[c]);
  return obj;
}

static cJSON *
settings_json(const StSchedule *s)
{
  cJSON *obj = cJSON_CreateObject();
  cJSON_AddStringToObject(obj, "precision", st_precision_name(s->settings.precision));
  cJSON_AddStringToObject(obj, "optimizer", st_optimizer_name(s->settings.optimizer));
  st_json_add_int(obj, "micro_batch", s->settings.micro_batch);
  st_json_add_int(obj, "accumulation", s->settings.accumulation);
  st_json_add_int(obj, "global_batch", s->settings.global_batch);
  st_json_add_int(obj, "steps", s->steps);
  return obj;
}

static cJSON *
notes_json(const StSchedule *s)
{
  cJSON *obj = cJSON_CreateObject();
  for (guint i = 0; i < s->notes->len; i++) {
    const StNote *n = &g_array_index(s->notes, StNote, i);
    if (n->text != NULL)
      cJSON_AddStringToObject(obj, n->key, n->text);
    else
      cJSON_AddNumberToObject(obj, n->key, n->number);
  }
  return obj;
}

static cJSON *
oom_json(const StSummary *sum)
{
  const StOutOfMemory *o = sum->oom;
  if (o == NULL)
    return cJSON_CreateNull();
  const StSchedule *s = sum->timeline->schedule;
  cJSON *obj = cJSON_CreateObject();
  st_json_add_int(obj, "device", o->device);
  st_json_add_int(obj, "rank", o->rank);
  if (o->rank >= 0 && o->op != UINT32_MAX) {
    const StProgram *p = st_schedule_program_of(s, o->rank);
    g_autofree char *name = st_op_describe(s, p, o->op);
    st_json_add_int(obj, "op", o->op);
    cJSON_AddStringToObject(obj, "op_name", name);
  } else {
    cJSON_AddNullToObject(obj, "op");
    cJSON_AddStringToObject(obj, "op_name", "(persistent buffers, before the first op)");
  }
  if (o->rank >= 0 && o->buffer >= 0) {
    const StProgram *p = st_schedule_program_of(s, o->rank);
    const StBuffer *b = &g_array_index(p->buffers, StBuffer, o->buffer);
    cJSON_AddStringToObject(obj, "buffer", b->name);
    cJSON_AddStringToObject(obj, "category", st_mem_name(b->category));
  } else {
    cJSON_AddNullToObject(obj, "buffer");
  }
  st_json_add_int(obj, "peak_bytes", o->peak_bytes);
  st_json_add_int(obj, "capacity_bytes", o->capacity_bytes);
  st_json_add_int(obj, "over_bytes", o->over_bytes);
  return obj;
}

/* How the steady window was chosen (docs/FORMATS.md). */
static cJSON *
steady_json(const StSummary *sum)
{
  const StSteady *st = &sum->steady;
  cJSON *obj = cJSON_CreateObject();
  cJSON_AddStringToObject(obj, "mode", st->auto_steps ? "auto" : "fixed");
  if (st->evaluated)
    cJSON_AddBoolToObject(obj, "converged", st->converged);
  else
    cJSON_AddNullToObject(obj, "converged");
  const char *rule = !st->converged ? NULL
                     : st->exact    ? "idle_boundaries"
                     : st->settling ? "step_repeats_phases_settle"
                                    : "phases_repeat";
  if (rule != NULL)
    cJSON_AddStringToObject(obj, "rule", rule);
  else
    cJSON_AddNullToObject(obj, "rule");
  if (st->converged) {
    st_json_add_int(obj, "steady_from_step", st->first);
    st_json_add_int(obj, "period_steps", st->period);
  } else {
    cJSON_AddNullToObject(obj, "steady_from_step");
    cJSON_AddNullToObject(obj, "period_steps");
  }
  cJSON_AddNumberToObject(obj, "drift_s", st->drift_ns * 1e-9);
  if (st->auto_steps && st->evaluated)
    st_json_add_int(obj, "cap_steps", st->cap);
  else
    cJSON_AddNullToObject(obj, "cap_steps");
  st_json_add_int(obj, "steps_run", sum->steps);
  st_json_add_int(obj, "window_first_step", sum->warmup_steps);
  st_json_add_int(obj, "window_steps", sum->steady_steps);
  cJSON_AddNumberToObject(obj, "step_min_s", sum->step_min_ns * 1e-9);
  cJSON_AddNumberToObject(obj, "step_max_s", sum->step_max_ns * 1e-9);
  return obj;
}

static cJSON *
interval_json(double lo, double hi)
{
  cJSON *a = cJSON_CreateArray();
  cJSON_AddItemToArray(a, cJSON_CreateNumber(lo));
  cJSON_AddItemToArray(a, cJSON_CreateNumber(hi));
  return a;
}

/* A device's memory figures (output/runtime_memory.h), bytes, with their
 * 90 % intervals when the calibration gives them. */
static cJSON *
memory_json(const StSummary *sum, const int64_t figures[ST_MEMKIND_N])
{
  cJSON *obj = cJSON_CreateObject();
  for (int k = 0; k < ST_MEMKIND_N; k++)
    st_json_add_int(obj, st_memory_kind_name(k), figures[k]);
  double lo, hi;
  if (st_residuals_interval(&sum->memory_spread, 1.0, &lo, &hi)) {
    cJSON *iv = cJSON_AddObjectToObject(obj, "interval");
    for (int k = 0; k < ST_MEMKIND_N; k++)
      cJSON_AddItemToObject(iv, st_memory_kind_name(k),
                            interval_json(round(figures[k] * lo), round(figures[k] * hi)));
  }
  return obj;
}

cJSON *
st_report_to_json(const StSummary *sum)
{
  const StTimeline *t = sum->timeline;
  const StSchedule *s = t->schedule;
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "kind", t->measured ? "measured" : "predicted");
  cJSON_AddStringToObject(root, "origin", t->origin ? t->origin : "");
  cJSON_AddStringToObject(root, "strategy", s->settings.strategy ? s->settings.strategy : "");
  cJSON_AddStringToObject(root, "description",
                          s->settings.description ? s->settings.description : "");
  cJSON_AddStringToObject(root, "model", s->model->name);
  cJSON_AddStringToObject(root, "cluster", s->cluster->name);
  cJSON_AddStringToObject(root, "gpu", s->cluster->gpu.name);
  /* The capacity the prediction is held to (a measured run ran elsewhere). */
  if (sum->timeline->measured)
    cJSON_AddNullToObject(root, "gpu_memory_bytes");
  else
    st_json_add_int(root, "gpu_memory_bytes", s->cluster->gpu.memory_bytes);
  cJSON_AddStringToObject(root, "device_kind", st_timeline_device_noun(t));
  st_json_add_int(root, "ranks", s->n_ranks);
  cJSON_AddItemToObject(root, "settings", settings_json(s));
  cJSON_AddItemToObject(root, "notes", notes_json(s));

  cJSON_AddNumberToObject(root, "step_time_s", sum->step_time_ns * 1e-9);
  double lo, hi;
  if (st_residuals_interval(&sum->step_spread, sum->step_time_ns * 1e-9, &lo, &hi))
    cJSON_AddItemToObject(root, "step_time_interval_s", interval_json(lo, hi));
  cJSON_AddNumberToObject(root, "samples_per_s", sum->samples_per_s);
  /* output/mfu.h: null when the device gives no peak (CPU threads on the host). */
  cJSON *mfu = cJSON_AddObjectToObject(root, "mfu");
  if (sum->mfu.mfu > 0)
    cJSON_AddNumberToObject(mfu, "value", sum->mfu.mfu);
  else
    cJSON_AddNullToObject(mfu, "value");
  cJSON_AddNumberToObject(mfu, "model_flops_per_step", sum->mfu.flops_per_step);
  cJSON_AddNumberToObject(mfu, "peak_flops_per_gpu", sum->mfu.peak_flops);
  cJSON_AddStringToObject(mfu, "peak_dtype",
                          sum->mfu.tf32 ? "tf32" : st_dtype_name(sum->mfu.dtype));
  st_json_add_int(root, "gpus_used", sum->gpus_used);
  st_json_add_int(root, "warmup_steps", sum->warmup_steps);
  cJSON_AddItemToObject(root, "steady", steady_json(sum));
  cJSON *ends = cJSON_AddArrayToObject(root, "step_end_s");
  for (int k = 0; k < sum->steps; k++)
    cJSON_AddItemToArray(ends, cJSON_CreateNumber(sum->step_end_ns[k] * 1e-9));
  cJSON_AddNumberToObject(root, "makespan_s", sum->makespan_ns * 1e-9);

  cJSON *devices = cJSON_AddArrayToObject(root, "devices");
  for (int d = 0; d < s->n_devices; d++) {
    const StDeviceSummary *ds = st_summary_device(sum, d);
    cJSON *dev = cJSON_CreateObject();
    st_json_add_int(dev, "id", d);
    st_json_add_int(dev, "node", s->devices[d].node);
    st_json_add_int(dev, "represented_by", ds->device);
    st_json_add_int(dev, "peak_bytes", ds->peak_bytes);
    cJSON_AddItemToObject(dev, "memory", memory_json(sum, ds->memory));
    cJSON_AddItemToObject(dev, "peak_by_category", categories(ds->peak_by_category));
    cJSON_AddItemToObject(dev, "at_peak_by_category", categories(ds->at_peak_by_category));
    cJSON_AddNumberToObject(dev, "peak_time_s", ds->peak_ns * 1e-9);
    cJSON_AddNumberToObject(dev, "busy_fraction", ds->busy_fraction);
    cJSON_AddItemToArray(devices, dev);
  }
  int64_t worst[ST_MEMKIND_N];
  for (int k = 0; k < ST_MEMKIND_N; k++)
    worst[k] = st_summary_memory_peak(sum, k);
  cJSON_AddItemToObject(root, "memory_peak", memory_json(sum, worst));
  cJSON_AddItemToObject(root, "total_peak_by_category", categories(sum->total_peak_by_category));
  st_json_add_int(root, "total_peak_bytes", sum->total_peak_bytes);

  cJSON *comm = cJSON_AddObjectToObject(root, "comm");
  cJSON_AddNumberToObject(comm, "bytes_total", sum->comm_bytes_total);
  cJSON *by_link = cJSON_AddObjectToObject(comm, "bytes_by_link");
  for (int l = 0; l < ST_LINK_N; l++)
    cJSON_AddNumberToObject(by_link, st_link_name(l), sum->comm_bytes_by_link[l]);
  cJSON_AddNumberToObject(comm, "peak_to_mean", sum->comm_peak_to_mean);
  cJSON_AddNumberToObject(comm, "exposed_s", sum->comm_exposed_ns * 1e-9);
  if (sum->bottleneck >= 0) {
    const StNetLink *link = &g_array_index(t->net->links, StNetLink, sum->bottleneck);
    const StNetLinkStats *st = &sum->links[sum->bottleneck];
    cJSON *b = cJSON_AddObjectToObject(comm, "bottleneck");
    cJSON_AddStringToObject(b, "link", link->name);
    cJSON_AddStringToObject(b, "class", st_link_name(link->link_class));
    cJSON_AddNumberToObject(b, "capacity_Bps", link->capacity);
    st_json_add_int(b, "stands_for", link->stands_for);
    cJSON_AddNumberToObject(b, "utilization", st->utilization);
    cJSON_AddNumberToObject(b, "busy_fraction", st->busy_fraction);
    cJSON_AddNumberToObject(b, "peak_fraction", st->peak / link->capacity);
    cJSON_AddNumberToObject(comm, "link_imbalance", sum->link_imbalance);
  } else {
    cJSON_AddNullToObject(comm, "bottleneck");
  }

  cJSON_AddItemToObject(root, "out_of_memory", oom_json(sum));
  cJSON *multiplex = st_report_multiplex_json(sum);
  if (multiplex != NULL)
    cJSON_AddItemToObject(root, "multiplex", multiplex);
  if (sum->run != NULL)
    cJSON_AddItemToObject(root, "run", cJSON_Duplicate(sum->run, TRUE));

  cJSON *sources = cJSON_AddObjectToObject(root, "cost_sources");
  for (int src = ST_SRC_PROFILED; src < ST_SRC_N; src++)
    if (sum->ops_by_source[src] > 0)
      st_json_add_int(sources, st_cost_source_name(src), sum->ops_by_source[src]);

  int recorded = 0;
  for (int r = 0; r < s->n_ranks; r++)
    recorded += t->rank_rep[r] == r;
  cJSON *fold = cJSON_AddObjectToObject(root, "folding");
  cJSON_AddBoolToObject(fold, "folded", recorded < s->n_ranks);
  st_json_add_int(fold, "recorded_ranks", recorded);
  if (t->note != NULL)
    cJSON_AddStringToObject(fold, "note", t->note);
  else
    cJSON_AddNullToObject(fold, "note");

  if (sum->loss != NULL) {
    cJSON *loss = cJSON_AddArrayToObject(root, "loss");
    for (guint i = 0; i < sum->loss->len; i++)
      cJSON_AddItemToArray(loss, cJSON_CreateNumber(g_array_index(sum->loss, double, i)));
  }
  if (sum->eval != NULL) {
    cJSON *heldout = cJSON_AddArrayToObject(root, "heldout");
    for (guint i = 0; i < sum->eval->len; i++) {
      const StEvalPoint *e = &g_array_index(sum->eval, StEvalPoint, i);
      cJSON *p = cJSON_CreateObject();
      cJSON_AddNumberToObject(p, "steps", e->steps);
      cJSON_AddNumberToObject(p, "loss", e->loss);
      cJSON_AddNumberToObject(p, "accuracy", e->accuracy);
      cJSON_AddItemToArray(heldout, p);
    }
  }
  return root;
}

gboolean
st_report_write(const StSummary *sum, const char *path, GError **error)
{
  g_autoptr(cJSON) root = st_report_to_json(sum);
  if (!st_json_write_file(path, root, error)) {
    g_prefix_error(error, "writing the report: ");
    return FALSE;
  }
  return TRUE;
}

gboolean
st_output_write_all(const StSummary *sum, const char *dir, GError **error)
{
  if (g_mkdir_with_parents(dir, 0755) != 0) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s: cannot create directory: %s", dir,
                g_strerror(errno));
    return FALSE;
  }
  const StTimeline *t = sum->timeline;
  g_autofree char *report = g_build_filename(dir, "report.json", NULL);
  g_autofree char *trace = g_build_filename(dir, "trace.json", NULL);
  g_autofree char *memory = g_build_filename(dir, "memory.csv", NULL);
  g_autofree char *comm = g_build_filename(dir, "comm.csv", NULL);
  g_autofree char *groups = g_build_filename(dir, "groups.csv", NULL);
  g_autofree char *ops = g_build_filename(dir, "ops.csv", NULL);
  g_autofree char *links = g_build_filename(dir, "links.csv", NULL);
  g_autofree char *rates = g_build_filename(dir, "link_rates.csv", NULL);
  g_autofree char *loss = g_build_filename(dir, "loss.csv", NULL);
  return st_report_write(sum, report, error) && st_trace_write(t, trace, error) &&
         st_csv_write_memory(t, memory, error) && st_csv_write_comm(t, comm, error) &&
         st_csv_write_groups(t, groups, error) && st_csv_write_ops(t, ops, error) &&
         (sum->links == NULL ||
          (st_csv_write_links(sum, links, error) && st_csv_write_link_rates(sum, rates, error))) &&
         (sum->loss == NULL || st_csv_write_loss(sum, loss, error));
}
