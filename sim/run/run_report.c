/* run_report.c: the training run as the summary prints it, as report.json's
 * `run` object and as the CSVs plots/goodput.gp and plots/run_timeline.gp
 * read (run.h, docs/FORMATS.md). */
#include <math.h>
#include <stdio.h>

#include "base/json.h"
#include "run/run.h"

const char *const st_run_part_names[ST_RUN_N] = {"productive", "stragglers", "checkpoint",
                                                 "lost",       "restart",    "repair"};

static void
print_time(FILE *out, double s)
{
  if (s >= 2 * 86400)
    fprintf(out, "%.1f days", s / 86400);
  else if (s >= 2 * 3600)
    fprintf(out, "%.1f h", s / 3600);
  else if (s >= 120)
    fprintf(out, "%.1f min", s / 60);
  else
    fprintf(out, "%.2f s", s);
}

void
st_run_print(const StRunResult *r, const StRunSpec *spec, FILE *out)
{
  fprintf(out, "training run (docs/GOODPUT.md; %d Monte Carlo trials, seed %u)\n", r->trials,
          spec->seed);
  fprintf(out, "  steps            %.0f", r->steps);
  if (r->ramp_steps > 0)
    fprintf(out, " (%.0f in the batch ramp)", r->ramp_steps);
  fprintf(out, "\n  wall time        ");
  print_time(out, r->wall_s);
  fprintf(out, " +- ");
  print_time(out, 1.96 * r->wall_sd_s / sqrt(MAX(r->trials, 1)));
  fprintf(out, " (95 %% CI of the mean); Daly's closed form ");
  print_time(out, r->daly_wall_s + r->parts_s[ST_RUN_REPAIR]);
  fprintf(out, "\n  goodput          %.1f %% (productive / wall); effective training time %.1f %% "
               "(stepping / wall)\n",
          100 * r->goodput, 100 * r->effective);
  for (int p = 0; p < ST_RUN_N; p++) {
    fprintf(out, "    %-14s %5.1f %%  ", st_run_part_names[p],
            r->wall_s > 0 ? 100 * r->parts_s[p] / r->wall_s : 0);
    print_time(out, r->parts_s[p]);
    fprintf(out, "\n");
  }
  fprintf(out, "  interruptions    %.1f (job MTBF ", r->interruptions);
  print_time(out, r->mtbf_s);
  fprintf(out, "):");
  for (int c = 0; c < ST_FAIL_N; c++)
    fprintf(out, " %s %.1f", st_failure_cause_names[c], r->interruptions_by_cause[c]);
  fprintf(out, "\n  checkpoints      %.0f, every ", r->checkpoints);
  print_time(out, r->interval_s);
  fprintf(out, " of work (%s; Young ", spec->ckpt_interval_s > 0 ? "given" : "optimal");
  print_time(out, r->young_s);
  fprintf(out, ", Daly ");
  print_time(out, r->daly_s);
  fprintf(out, ")\n    %s, %d writers on %d nodes, %.3g GB each, %.1f copies held; stall ",
          spec->ckpt_async ? "async" : "sync", r->ckpt.writers, r->ckpt.writer_nodes,
          r->ckpt.bytes_writer / 1e9, r->ckpt.copies);
  print_time(out, r->ckpt.stall_s);
  fprintf(out, ", write ");
  print_time(out, r->ckpt.write_s);
  fprintf(out, ", load ");
  print_time(out, r->ckpt.load_s);
  fprintf(out, " (%s)\n  restart          ", spec->storage.name);
  print_time(out, r->restart_s);
  fprintf(out, " (detect, relaunch, init, load)\n");
  fprintf(out, "  stragglers       step x %.4f (slowest of the GPUs%s)\n", r->straggler_factor,
          r->straggler_slack > 0 ? "; its stale update lets a step's jitter average out"
                                 : "");
  fprintf(out, "  GPU-hours        %.4g\n", r->gpu_hours);
  fprintf(out, "  energy           %.4g MWh (facility; %.0f W per stepping GPU)\n",
          r->energy_kwh / 1000, r->gpu_power_w);
  if (spec->price_gpu_hour > 0 || spec->price_kwh > 0)
    fprintf(out, "  cost             %.4g (GPU-hours %.4g + energy %.4g)\n", r->cost, r->cost_gpu,
            r->cost_energy);
  else
    fprintf(out, "  cost             not priced (--price-gpu-hour, --price-kwh)\n");
}

void
st_run_print_compare(const StRunResult *const *r, const char *const *names, int n, FILE *out)
{
  fprintf(out, "%-28s", "training run");
  for (int i = 0; i < n; i++)
    fprintf(out, " %19s", names[i]);
  fprintf(out, "\n");
  const struct {
    const char *label;
    int what;
  } rows[] = {{"wall time (days)", 0}, {"goodput", 1}, {"interruptions", 2},
              {"checkpoint stall (s)", 3}, {"GPU-hours", 4}, {"energy (MWh)", 5},
              {"cost", 6}};
  for (gsize k = 0; k < G_N_ELEMENTS(rows); k++) {
    fprintf(out, "%-28s", rows[k].label);
    for (int i = 0; i < n; i++) {
      double v[] = {r[i]->wall_s / 86400, 100 * r[i]->goodput, r[i]->interruptions,
                    r[i]->ckpt.stall_s, r[i]->gpu_hours, r[i]->energy_kwh / 1000, r[i]->cost};
      if (rows[k].what == 1)
        fprintf(out, " %17.1f %%", v[1]);
      else
        fprintf(out, " %19.4g", v[rows[k].what]);
    }
    fprintf(out, "\n");
  }
  int first = 0;
  for (int i = 1; i < n; i++)
    if (r[i]->wall_s < r[first]->wall_s)
      first = i;
  fprintf(out, "first to finish: %s\n", names[first]);
}

cJSON *
st_run_to_json(const StRunResult *r, const StRunSpec *spec)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "seed", spec->seed);
  cJSON_AddNumberToObject(o, "trials", r->trials);
  if (spec->train_tokens > 0)
    cJSON_AddNumberToObject(o, "train_tokens", spec->train_tokens);
  else
    cJSON_AddNumberToObject(o, "train_samples", spec->train_samples);
  cJSON_AddNumberToObject(o, "steps", r->steps);
  cJSON_AddNumberToObject(o, "wall_s", r->wall_s);
  cJSON_AddNumberToObject(o, "wall_sd_s", r->wall_sd_s);
  cJSON_AddNumberToObject(o, "daly_wall_s", r->daly_wall_s);
  cJSON_AddNumberToObject(o, "goodput", r->goodput);
  cJSON_AddNumberToObject(o, "effective_training_time", r->effective);
  cJSON *parts = cJSON_AddObjectToObject(o, "parts_s");
  for (int p = 0; p < ST_RUN_N; p++)
    cJSON_AddNumberToObject(parts, st_run_part_names[p], r->parts_s[p]);
  cJSON_AddNumberToObject(o, "mtbf_s", r->mtbf_s);
  cJSON_AddNumberToObject(o, "interruptions", r->interruptions);
  cJSON *causes = cJSON_AddObjectToObject(o, "interruptions_by_cause");
  for (int c = 0; c < ST_FAIL_N; c++)
    cJSON_AddNumberToObject(causes, st_failure_cause_names[c], r->interruptions_by_cause[c]);
  cJSON_AddStringToObject(o, "failure_rates_source", spec->rates.source);
  cJSON *ck = cJSON_AddObjectToObject(o, "checkpoint");
  cJSON_AddBoolToObject(ck, "async", spec->ckpt_async);
  cJSON_AddStringToObject(ck, "writers_mode",
                          spec->writers == ST_CKPT_WRITERS_SPREAD ? "spread" : "first");
  cJSON_AddStringToObject(ck, "storage", spec->storage.name);
  cJSON_AddNumberToObject(ck, "interval_s", r->interval_s);
  cJSON_AddNumberToObject(ck, "young_s", r->young_s);
  cJSON_AddNumberToObject(ck, "daly_s", r->daly_s);
  cJSON_AddNumberToObject(ck, "count", r->checkpoints);
  cJSON_AddNumberToObject(ck, "copies", r->ckpt.copies);
  cJSON_AddNumberToObject(ck, "writers", r->ckpt.writers);
  cJSON_AddNumberToObject(ck, "writer_nodes", r->ckpt.writer_nodes);
  cJSON_AddNumberToObject(ck, "bytes_per_writer", r->ckpt.bytes_writer);
  cJSON_AddNumberToObject(ck, "bytes_total", r->ckpt.bytes_total);
  cJSON_AddNumberToObject(ck, "stall_s", r->ckpt.stall_s);
  cJSON_AddNumberToObject(ck, "write_s", r->ckpt.write_s);
  cJSON_AddNumberToObject(ck, "load_s", r->ckpt.load_s);
  cJSON_AddNumberToObject(o, "restart_s", r->restart_s);
  cJSON_AddNumberToObject(o, "straggler_factor", r->straggler_factor);
  cJSON_AddNumberToObject(o, "straggler_slack_steps", r->straggler_slack);
  cJSON_AddNumberToObject(o, "gpu_hours", r->gpu_hours);
  cJSON_AddNumberToObject(o, "energy_kwh", r->energy_kwh);
  cJSON_AddNumberToObject(o, "gpu_power_w", r->gpu_power_w);
  cJSON_AddNumberToObject(o, "cost", r->cost);
  cJSON_AddNumberToObject(o, "cost_gpu", r->cost_gpu);
  cJSON_AddNumberToObject(o, "cost_energy", r->cost_energy);
  return o;
}

gboolean
st_run_write_csv(const StRunResult *r, const char *dir, GError **error)
{
  g_autoptr(GString) g = g_string_new("part,seconds,share\n");
  for (int p = 0; p < ST_RUN_N; p++)
    g_string_append_printf(g, "%s,%.6g,%.6g\n", st_run_part_names[p], r->parts_s[p],
                           r->wall_s > 0 ? r->parts_s[p] / r->wall_s : 0);
  g_autofree char *gpath = g_build_filename(dir, "goodput.csv", NULL);
  if (!g_file_set_contents(gpath, g->str, (gssize)g->len, error))
    return FALSE;
  g_autoptr(GString) t = g_string_new("t_h,event,durable_work_h\n");
  for (guint i = 0; r->timeline != NULL && i < r->timeline->len; i++) {
    const StRunEvent *e = &g_array_index(r->timeline, StRunEvent, i);
    g_string_append_printf(t, "%.6g,%s,%.6g\n", e->t_s / 3600,
                           e->kind == 0 ? "checkpoint" : st_failure_cause_names[e->kind - 1],
                           e->work_s / 3600);
  }
  g_autofree char *tpath = g_build_filename(dir, "run_timeline.csv", NULL);
  return g_file_set_contents(tpath, t->str, (gssize)t->len, error);
}
