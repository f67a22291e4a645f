/* summary_print.c: the human tables on stdout: one run, or several side by
 * side. Numbers come from the summary only. */
#include "output/output.h"

#include <string.h>

#include "base/units.h"
#include "base/util.h"

/* Which steps the step time covers, and whether they are steady. */
static char *
steps_note(const StSummary *sum)
{
  const StSteady *st = &sum->steady;
  int a = sum->warmup_steps + 1, b = sum->warmup_steps + sum->steady_steps;
  g_autofree char *which = a == b ? g_strdup_printf("step %d", a)
                                  : g_strdup_printf("mean of steps %d-%d", a, b);
  g_autofree char *ran = g_strdup_printf("%d step%s run", sum->steps, sum->steps == 1 ? "" : "s");
  if (st->auto_steps && !st->evaluated)
    return g_strdup_printf("%s: the predicted steady window, after %d warm-up step%s; %s", which,
                           sum->warmup_steps, sum->warmup_steps == 1 ? "" : "s", ran);
  if (st->auto_steps && st->converged && st->exact)
    return g_strdup_printf("%s, steady: every step starts idle; %s", which, ran);
  if (st->auto_steps && st->converged && st->settling)
    return g_strdup_printf("%s, steady: its step repeats while the phases still settle "
                           "(every %d step%s, each change smaller); %s",
                           which, st->period, st->period == 1 ? "" : "s", ran);
  if (st->auto_steps && st->converged && st->period == 1)
    return g_strdup_printf("%s, steady: its phases repeat; %s", which, ran);
  if (st->auto_steps && st->converged)
    return g_strdup_printf("%s, steady: phases repeat every %d steps; %s", which, st->period,
                           ran);
  if (st->auto_steps) {
    g_autofree char *lo = st_format_duration(sum->step_min_ns);
    g_autofree char *hi = st_format_duration(sum->step_max_ns);
    return g_strdup_printf("%s: NOT STEADY within the cap of %d steps, steps range %s to %s",
                           which, st->cap, lo, hi);
  }
  g_autofree char *warm = sum->warmup_steps == 0   ? g_strdup("")
                          : sum->warmup_steps == 1 ? g_strdup("; step 1 is warm-up")
                                                   : g_strdup_printf("; steps 1-%d are warm-up",
                                                                     sum->warmup_steps);
  if (!st->evaluated)
    return g_strdup_printf("%s%s", which, warm);
  if (!st->converged)
    return g_strdup_printf("%s%s; NOT STEADY: the state still changes (--steps auto runs "
                           "until it repeats)",
                           which, warm);
  if (st->first > sum->warmup_steps)
    return g_strdup_printf("%s%s; NOT all steady: steady only from step %d (--steps auto "
                           "measures there)",
                           which, warm, st->first + 1);
  return g_strdup_printf("%s%s; steady", which, warm);
}

static char *
oom_text(const StSummary *sum)
{
  const StOutOfMemory *o = sum->oom;
  const char *dev = st_timeline_device_noun(sum->timeline);
  if (o == NULL && sum->timeline->measured)
    return g_strdup("no: the run allocated all it needed");
  if (o == NULL)
    return g_strdup_printf("no: every %s fits", dev);
  const StSchedule *s = sum->timeline->schedule;
  g_autofree char *peak = st_format_bytes(o->peak_bytes);
  g_autofree char *cap = st_format_bytes(o->capacity_bytes);
  g_autofree char *over = st_format_bytes(o->over_bytes);
  g_autofree char *what = NULL;
  if (o->rank >= 0 && o->op != UINT32_MAX) {
    const StProgram *p = st_schedule_program_of(s, o->rank);
    g_autofree char *op = st_op_describe(s, p, o->op);
    const char *buffer =
      o->buffer >= 0 ? g_array_index(p->buffers, StBuffer, o->buffer).name : "?";
    what = g_strdup_printf("at '%s' of rank %d allocating '%s'", op, o->rank, buffer);
  } else {
    what = g_strdup("with the persistent model states alone");
  }
  return g_strdup_printf("YES: %s %d peaks at %s > %s (over by %s) %s", dev, o->device, peak,
                         cap, over, what);
}

/* "measured on host: 2 CPU cores, reference kernels" (the device the run
 * used) or "predicted for 8 x H100-SXM" (the cluster's). Transfer full. */
static char *
origin_text(const StSummary *sum)
{
  const StTimeline *t = sum->timeline;
  const char *origin = t->origin != NULL ? t->origin : "";
  if (t->measured)
    return g_strdup_printf("measured on %s", g_str_has_prefix(origin, "measured: ")
                                                 ? origin + strlen("measured: ")
                                                 : origin);
  return g_strdup_printf("predicted for %d x %s", t->schedule->n_devices,
                         t->schedule->cluster->gpu.name);
}

/* " (54.1 s .. 66.3 s, 90 %)" when the calibration gives an interval. */
static char *
step_interval(const StSummary *sum)
{
  double lo, hi;
  if (!st_residuals_interval(&sum->step_spread, (double)sum->step_time_ns, &lo, &hi))
    return g_strdup("");
  g_autofree char *a = st_format_duration((int64_t)lo);
  g_autofree char *b = st_format_duration((int64_t)hi);
  return g_strdup_printf(" (%s .. %s, 90 %%)", a, b);
}

/* The framework's figures at the device's peak (output/runtime_memory.h),
 * with the calibration's interval on the device's. */
static char *
memory_line(const StSummary *sum, const StDeviceSummary *d)
{
  g_autofree char *alloc = st_format_bytes(d->memory[ST_MEMKIND_ALLOCATED]);
  g_autofree char *reserved = st_format_bytes(d->memory[ST_MEMKIND_RESERVED]);
  g_autofree char *device = st_format_bytes(d->memory[ST_MEMKIND_DEVICE]);
  g_autofree char *range = NULL;
  double lo, hi;
  if (st_residuals_interval(&sum->memory_spread, (double)d->memory[ST_MEMKIND_DEVICE], &lo,
                            &hi)) {
    g_autofree char *a = st_format_bytes((int64_t)lo);
    g_autofree char *b = st_format_bytes((int64_t)hi);
    range = g_strdup_printf(" (%s .. %s, 90 %%)", a, b);
  }
  const char *framework = sum->timeline->schedule->settings.framework;
  return g_strdup_printf("%s allocated, %s reserved, %s%s on the device (nvidia-smi), "
                         "under %s",
                         alloc, reserved, device, range ? range : "",
                         framework ? framework : "no framework");
}

void
st_summary_print(const StSummary *sum, FILE *out)
{
  const StTimeline *t = sum->timeline;
  const StSchedule *s = t->schedule;
  const char *dev = st_timeline_device_noun(t);
  const StDeviceSummary *worst = st_summary_worst_device(sum);
  g_autofree char *step = st_format_duration(sum->step_time_ns);
  g_autofree char *note = steps_note(sum);
  g_autofree char *peak = st_format_bytes(worst->peak_bytes);
  g_autofree char *comm = st_format_bytes((int64_t)(sum->comm_bytes_total /
                                                    MAX(1, sum->steady_steps)));
  g_autofree char *exposed = st_format_duration(sum->comm_exposed_ns /
                                                MAX(1, sum->steady_steps));
  g_autofree char *oom = oom_text(sum);
  g_autofree char *origin = origin_text(sum);
  /* The capacity is the cluster's, which a measured run did not run on (the
   * executor reports running out of memory itself). */
  g_autofree char *cap_bytes = st_format_bytes(s->cluster->gpu.memory_bytes);
  g_autofree char *cap = t->measured ? g_strdup("") : g_strdup_printf(" (capacity %s)", cap_bytes);
  g_autofree char *peak_row = g_strdup_printf("peak memory/%s", dev);
  g_autofree char *busy_row = g_strdup_printf("busy (%s 0)", dev);

  g_autofree char *interval = step_interval(sum);
  fprintf(out, "%s  [%s]\n", s->settings.description ? s->settings.description : "", origin);
  fprintf(out, "  %-18s %s%s  (%s)\n", "step time", step, interval, note);
  fprintf(out, "  %-18s %.1f samples/s on %d %s%s (%.1f per %s)\n", "throughput",
          sum->samples_per_s, sum->gpus_used, dev, st_plural(sum->gpus_used),
          sum->gpus_used ? sum->samples_per_s / sum->gpus_used : 0.0, dev);
  g_autofree char *mfu = st_mfu_describe(&sum->mfu, sum->gpus_used);
  fprintf(out, "  %-18s %s\n", "MFU", mfu);
  if (!t->measured) {
    g_autofree char *error = st_residuals_describe(&sum->step_spread);
    fprintf(out, "  %-18s predicted, not measured, and MFU with it: %s\n", "  how sure", error);
  }
  fprintf(out, "  %-18s %s on %s %d%s\n", peak_row, peak, dev, worst->device, cap);
  if (!t->measured) {
    g_autofree char *shown = memory_line(sum, worst);
    fprintf(out, "  %-18s %s\n", "  as it shows", shown);
  }
  fprintf(out, "  %-18s", "  at the peak");
  for (int c = 0; c < ST_MEM_N; c++) {
    g_autofree char *b = st_format_bytes(worst->at_peak_by_category[c]);
    fprintf(out, "%s %s %s", c ? " |" : "", st_mem_name(c), b);
  }
  fprintf(out, "\n  %-18s %.1f %%\n", busy_row, 100.0 * st_summary_device(sum, 0)->busy_fraction);
  fprintf(out, "  %-18s %s per step over all %ss; peak/mean %.2f; exposed %s per step on %s 0\n",
          "communication", comm, dev, sum->comm_peak_to_mean, exposed, dev);
  if (sum->bottleneck >= 0) {
    const StNetLink *link = &g_array_index(t->net->links, StNetLink, sum->bottleneck);
    const StNetLinkStats *st = &sum->links[sum->bottleneck];
    fprintf(out, "  %-18s %s: %.1f %% of its capacity over the steady steps, busy %.1f %%; "
            "%.2fx the mean of its kind\n", "busiest link", link->name, 100 * st->utilization,
            100 * st->busy_fraction, sum->link_imbalance);
  }
  fprintf(out, "  %-18s", "cost sources");
  gboolean first = TRUE;
  for (int src = ST_SRC_PROFILED; src < ST_SRC_N; src++) {
    if (sum->ops_by_source[src] == 0)
      continue;
    fprintf(out, "%s %" G_GINT64_FORMAT " %s", first ? "" : ",", sum->ops_by_source[src],
            st_cost_source_name(src));
    first = FALSE;
  }
  fprintf(out, "%s\n", first ? " none" : "");
  fprintf(out, "  %-18s %s\n", "out of memory", oom);
}

typedef char *(*CellFn)(const StSummary *sum);

static char *
cell_step(const StSummary *sum)
{
  return st_format_duration(sum->step_time_ns);
}

static char *
cell_step_range(const StSummary *sum)
{
  double lo, hi;
  if (!st_residuals_interval(&sum->step_spread, (double)sum->step_time_ns, &lo, &hi))
    return g_strdup("-");
  g_autofree char *a = st_format_duration((int64_t)lo);
  g_autofree char *b = st_format_duration((int64_t)hi);
  return g_strdup_printf("%s..%s", a, b);
}

static char *
cell_mfu(const StSummary *sum)
{
  if (sum->mfu.mfu <= 0)
    return g_strdup("-");
  return g_strdup_printf("%.1f %%", 100.0 * sum->mfu.mfu);
}

static char *
cell_device_memory(const StSummary *sum)
{
  return st_format_bytes(st_summary_memory_peak(sum, ST_MEMKIND_DEVICE));
}

static char *
cell_throughput(const StSummary *sum)
{
  return g_strdup_printf("%.1f", sum->samples_per_s);
}

static char *
cell_gpus(const StSummary *sum)
{
  return g_strdup_printf("%d", sum->gpus_used);
}

static char *
cell_peak(const StSummary *sum)
{
  return st_format_bytes(st_summary_worst_device(sum)->peak_bytes);
}

#define CATEGORY_CELL(c)                                                                      \
  static char *cell_mem_##c(const StSummary *sum)                                            \
  {                                                                                           \
    return st_format_bytes(st_summary_worst_device(sum)->at_peak_by_category[c]);             \
  }
CATEGORY_CELL(0)
CATEGORY_CELL(1)
CATEGORY_CELL(2)
CATEGORY_CELL(3)
CATEGORY_CELL(4)
CATEGORY_CELL(5)

static char *
cell_total_act(const StSummary *sum)
{
  return st_format_bytes(sum->total_peak_by_category[ST_MEM_ACTIVATIONS]);
}

static char *
cell_comm(const StSummary *sum)
{
  return st_format_bytes(
    (int64_t)(sum->comm_bytes_total / MAX(1, sum->steady_steps)));
}

static char *
cell_ptm(const StSummary *sum)
{
  return g_strdup_printf("%.2f", sum->comm_peak_to_mean);
}

static char *
cell_bottleneck(const StSummary *sum)
{
  if (sum->bottleneck < 0)
    return g_strdup("-");
  return g_strdup_printf("%.1f %%", 100 * sum->links[sum->bottleneck].utilization);
}

static char *
cell_exposed(const StSummary *sum)
{
  return st_format_duration(sum->comm_exposed_ns / MAX(1, sum->steady_steps));
}

static char *
cell_busy(const StSummary *sum)
{
  return g_strdup_printf("%.1f %%", 100.0 * st_summary_device(sum, 0)->busy_fraction);
}

static char *
cell_fits(const StSummary *sum)
{
  if (sum->oom == NULL)
    return g_strdup("yes");
  g_autofree char *over = st_format_bytes(sum->oom->over_bytes);
  return g_strdup_printf("NO (+%s)", over);
}

static const struct {
  const char *name;
  CellFn cell;
} ROWS[] = {
  {"step time", cell_step},
  {"  90 % interval", cell_step_range},
  {"samples/s", cell_throughput},
  {"MFU", cell_mfu},
  {"GPUs used", cell_gpus},
  {"peak memory / GPU", cell_peak},
  {"  params", cell_mem_0},
  {"  grads", cell_mem_1},
  {"  optimizer", cell_mem_2},
  {"  activations", cell_mem_3},
  {"  comm", cell_mem_4},
  {"  workspace", cell_mem_5},
  {"on the device / GPU", cell_device_memory},
  {"activations, all GPUs", cell_total_act},
  {"comm per step", cell_comm},
  {"comm peak/mean", cell_ptm},
  {"busiest link used", cell_bottleneck},
  {"exposed comm / step", cell_exposed},
  {"busy GPU 0", cell_busy},
  {"fits in memory", cell_fits},
};

void
st_summary_print_compare(const StSummary *const *sums, const char *const *names, int n,
                         FILE *out)
{
  /* Every cell first: a column is as wide as its widest cell, two spaces apart. */
  gsize n_rows = G_N_ELEMENTS(ROWS);
  g_autoptr(GPtrArray) cells = g_ptr_array_new_with_free_func(g_free);
  int width = 14;
  for (int i = 0; i < n; i++)
    width = MAX(width, (int)strlen(names[i]) + 2);
  for (gsize r = 0; r < n_rows; r++)
    for (int i = 0; i < n; i++) {
      char *cell = ROWS[r].cell(sums[i]);
      width = MAX(width, (int)strlen(cell) + 2);
      g_ptr_array_add(cells, cell);
    }
  /* Rows name the devices as the runs do (all on the host: CPUs). */
  gboolean host = TRUE;
  for (int i = 0; i < n; i++)
    host = host && sums[i]->timeline->on_host;
  fprintf(out, "%-24s", "");
  for (int i = 0; i < n; i++)
    fprintf(out, "%*s", width, names[i]);
  fputc('\n', out);
  for (gsize r = 0; r < n_rows; r++) {
    g_auto(GStrv) parts = g_strsplit(ROWS[r].name, "GPU", -1);
    g_autofree char *name = g_strjoinv(host ? "CPU" : "GPU", parts);
    fprintf(out, "%-24s", name);
    for (int i = 0; i < n; i++)
      fprintf(out, "%*s", width, (const char *)g_ptr_array_index(cells, r * n + i));
    fputc('\n', out);
  }
  /* What MFU counts, and how far a prediction of it may be off. */
  fprintf(out, "\nMFU: model FLOPs per step over the devices' dense peak in that time; model "
               "FLOPs%s.\n", ST_MFU_CONVENTION);
  gboolean predicted = FALSE;
  for (int i = 0; i < n; i++)
    predicted = predicted || !sums[i]->timeline->measured;
  if (predicted) {
    g_autofree char *error = st_residuals_describe(&sums[0]->step_spread);
    fprintf(out, "Step time and MFU are predicted, not measured: %s.\n", error);
  }
}
