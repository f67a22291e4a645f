/* plan_print.c: the human side of a plan on stdout: the ranked table, the
 * counts, what did not fit and why the rest was refused, and the winner
 * against the runner-up (where each one's time and memory go). */
#include "plan/plan.h"

#include <math.h>
#include <string.h>

#include "base/units.h"
#include "output/mfu.h"

/* "23.1G", "512M", "40K": a memory cell. */
static char *
short_bytes(int64_t bytes)
{
  const double gib = 1024.0 * 1024 * 1024, mib = 1024.0 * 1024;
  if (bytes >= 100 * gib)
    return g_strdup_printf("%.0fG", bytes / gib);
  if (bytes >= gib)
    return g_strdup_printf("%.1fG", bytes / gib);
  if (bytes >= mib)
    return g_strdup_printf("%.0fM", bytes / mib);
  if (bytes > 0)
    return g_strdup_printf("%.0fK", bytes / 1024.0);
  return g_strdup("0");
}

static char *
signed_duration(int64_t ns)
{
  if (ns == 0)
    return g_strdup("0");
  g_autofree char *abs = st_format_duration(ns < 0 ? -ns : ns);
  return g_strdup_printf("%c%s", ns < 0 ? '-' : '+', abs);
}

static char *
signed_bytes(int64_t bytes)
{
  if (bytes == 0)
    return g_strdup("0");
  g_autofree char *abs = st_format_bytes(bytes < 0 ? -bytes : bytes);
  return g_strdup_printf("%c%s", bytes < 0 ? '-' : '+', abs);
}

static const StPlanConfig *
config_of(const StPlan *plan, int i)
{
  return &g_array_index(plan->configs, StPlanConfig, i);
}

/* "zero zero-stage=1, 64 GPUs, micro-batch 1 x 8". Transfer full. */
static char *
describe(const StPlan *plan, int i)
{
  const StPlanConfig *c = config_of(plan, i);
  const StPlanPoint *pt = &plan->points[i];
  g_autofree char *label = st_plan_config_label(c);
  g_autofree char *accumulation =
    pt->accumulation > 0 ? g_strdup_printf(" x %d", pt->accumulation) : g_strdup("");
  return g_strdup_printf("%s%s%s, %d GPUs on %d node%s, micro-batch %d%s", c->strategy->name,
                         label[0] ? " " : "", label, pt->gpus_used, c->nodes,
                         c->nodes == 1 ? "" : "s", c->micro_batch, accumulation);
}

/* An objective's value with its unit. Transfer full. */
static char *
objective_text(StPlanObjective o, double v)
{
  switch (o) {
  case ST_PLAN_OBJ_TIME:
    return st_format_duration((int64_t)llround(v * 1e9));
  case ST_PLAN_OBJ_THROUGHPUT:
    return g_strdup_printf("%.1f samples/s", v);
  case ST_PLAN_OBJ_THROUGHPUT_PER_GPU:
    return g_strdup_printf("%.2f samples/s/GPU", v);
  case ST_PLAN_OBJ_GPU_HOURS:
    return g_strdup_printf("%.2f GPU-hours", v);
  case ST_PLAN_OBJ_TIME_TO_TRAIN:
    return v >= 2 * 86400 ? g_strdup_printf("%.2f days", v / 86400)
                          : g_strdup_printf("%.2f h", v / 3600);
  case ST_PLAN_OBJ_COST:
    return g_strdup_printf("%.4g", v);
  case ST_PLAN_OBJ_ENERGY:
    return g_strdup_printf("%.4g MWh", v / 1000);
  default:
    g_return_val_if_reached(g_strdup("?"));
  }
}

/* The configurations that built the same schedule as each ranked one
 * (plan_dedup.c), named for its row: "= dp, pipeline pipeline-schedule=gpipe
 * and 3 more". NULL where none. [configs], transfer full. */
static char **
alias_texts(const StPlan *plan)
{
  guint n = plan->configs->len;
  char **text = g_new0(char *, MAX(n, 1));
  g_autofree int *count = g_new0(int, MAX(n, 1));
  for (guint k = 0; k < plan->ranking->len; k++) {
    int i = g_array_index(plan->ranking, int, k), rep = plan->points[i].same_as;
    if (rep < 0)
      continue;
    if (count[rep]++ >= 2)
      continue; /* named: the first two */
    const StPlanConfig *c = config_of(plan, i);
    g_autofree char *label = st_plan_config_label(c);
    char *was = text[rep];
    text[rep] = g_strdup_printf("%s%s%s%s%s", was != NULL ? was : "= ", was != NULL ? ", " : "",
                                c->strategy->name, label[0] ? " " : "", label);
    g_free(was);
  }
  for (guint i = 0; i < n; i++)
    if (count[i] > 2) {
      char *was = text[i];
      text[i] = g_strdup_printf("%s and %d more", was, count[i] - 2);
      g_free(was);
    }
  return text;
}

static void
print_table(const StPlan *plan, int top, FILE *out)
{
  int distinct = 0;
  for (guint k = 0; k < plan->ranking->len; k++)
    distinct += plan->points[g_array_index(plan->ranking, int, k)].same_as < 0;
  int n = MIN(distinct, top);
  if (n == 0) {
    fprintf(out, "No configuration fits: nothing to rank.\n");
    return;
  }
  fprintf(out, "Best %d of %d distinct schedules that fit (%u configurations), by %s "
               "(predicted by the simulator):\n\n",
          n, distinct, plan->ranking->len, st_plan_objective_name(plan->spec->objective));
  char **aliases = alias_texts(plan);
  fprintf(out,
          "%4s  %-10s %-6s %5s %9s %11s %10s %8s %6s %7s %6s %6s %6s %6s %6s %6s %9s %5s  %s\n",
          "rank", "strategy", "update", "GPUs", "mb x acc", "step time", "samples/s", "per GPU",
          "MFU", "peak", "params", "grads", "optim", "activ", "comm", "work", "exposed", "front",
          "options");
  for (int k = 0, shown = 0; shown < n; k++) {
    int i = g_array_index(plan->ranking, int, k);
    const StPlanConfig *c = config_of(plan, i);
    const StPlanPoint *pt = &plan->points[i];
    if (pt->same_as >= 0)
      continue; /* named on its schedule's row */
    shown++;
    g_autofree char *label = st_plan_config_label(c);
    g_autofree char *batch = g_strdup_printf("%dx%d", c->micro_batch, pt->accumulation);
    g_autofree char *time = st_format_duration(pt->step_time_ns);
    g_autofree char *step = g_strdup_printf("%s%s", time, pt->sim->steady ? "" : "~");
    g_autofree char *exposed = st_format_duration(pt->sim->exposed_ns);
    g_autofree char *peak = short_bytes(pt->device_bytes);
    g_autofree char *mfu =
      pt->sim->mfu > 0 ? g_strdup_printf("%.1f%%", 100 * pt->sim->mfu) : g_strdup("-");
    fprintf(out, "%4d  %-10s %-6s %5d %9s %11s %10.1f %8.2f %6s %7s", pt->rank,
            c->strategy->name, st_update_kind_name(pt->update.kind), pt->gpus_used, batch, step,
            pt->samples_per_s, pt->samples_per_s / MAX(pt->gpus_used, 1), mfu, peak);
    for (int cat = 0; cat < ST_MEM_N; cat++) {
      g_autofree char *b = short_bytes(pt->sim->peak_by_category[cat]);
      fprintf(out, " %6s", b);
    }
    g_autofree char *front = g_strdup_printf("%s%s", pt->front_gpus ? "G" : "",
                                             pt->front_memory ? "M" : "");
    fprintf(out, " %9s %5s  %s%s%s\n", exposed, front, label[0] ? label : "-",
            aliases[i] != NULL ? "  " : "", aliases[i] != NULL ? aliases[i] : "");
  }
  for (guint i = 0; i < plan->configs->len; i++)
    g_free(aliases[i]);
  g_free(aliases);
  fprintf(out, "\nupdate: sync computes synchronous SGD/Adam's update; pruned the same on a "
               "pruned model (--sparsity);\nstale uses delayed gradients (%s).\n",
          plan->spec->allow_stale ? "admitted by --allow-stale: it trains differently"
                                  : "not ranked without --allow-stale");
  fprintf(out, "step time: the steady step (each configuration simulated until its state "
               "repeats); ~: not steady,\nthe mean of its last steps, which still vary. "
               "mb x acc: micro-batch x gradient accumulation.\nMFU: model FLOPs "
               "per step over the devices' dense peak in that time; model FLOPs%s.\npeak: memory of the GPU with "
               "the highest peak as nvidia-smi would show it (the framework's\nallocator "
               "reserve, CUDA context and NCCL buffers over the tensors: what --mem-cap "
               "limits),\nthen the tensors' split at that moment. exposed: communication not\n"
               "hidden by compute on GPU 0, per step. front: on the Pareto front of %s "
               "against GPUs (G) or\nagainst peak memory (M). = ...: configurations that build "
               "the same schedule, simulated once\nand listed on its row (rank: their place "
               "among all configurations, as in plan.json).\n",
          ST_MFU_CONVENTION, st_plan_objective_name(plan->spec->objective));
  g_autofree char *error = st_residuals_describe(&plan->spec->step_spread);
  fprintf(out, "Step times and MFU are predicted, not measured: %s.\n", error);
}

static void
print_counts(const StPlan *plan, FILE *out)
{
  const StPlanCounts *c = &plan->counts;
  fprintf(out,
          "\n%d configurations: %d simulated, %d with the same schedule as one of those (%d "
          "fit, %d over the memory cap); %d pruned by the step-time bound, %d over the cap by "
          "the memory bound (not simulated), %d infeasible, %d failed, %d excluded (stale "
          "updates%s).\n",
          c->configurations, c->simulated, c->duplicates, c->ok, c->oom - c->oom_by_bound,
          c->pruned, c->oom_by_bound, c->infeasible, c->failed, c->excluded,
          c->excluded > 0 ? ": --allow-stale admits them" : "");
  if (c->unsearched > 0)
    fprintf(out, "The search stopped at --max-time %g s: %d configurations were not searched "
                 "(status unsearched). The search takes configurations best bound first, so those "
                 "left had the weakest bounds; the ranking covers the searched ones only.\n",
            plan->spec->max_time_s, c->unsearched);
  if (c->unlisted > 0)
    fprintf(out, "Besides, %" G_GINT64_FORMAT " configurations of this space of more than %d "
                 "were refused by their options or batch split before listing (%u reasons: "
                 "plan.json's decided_unsimulated.unlisted).\n",
            c->unlisted, ST_PLAN_LIST_ALL, plan->unlisted->len);
  if (plan->spec->global_batch == 0 && plan->spec->gpu_batch == 0 &&
      plan->spec->objective != ST_PLAN_OBJ_THROUGHPUT_PER_GPU &&
      plan->spec->objective != ST_PLAN_OBJ_THROUGHPUT)
    fprintf(out, "No batch is fixed: configurations train different global batches, so their "
                 "step times compare unlike work;\n--global-batch, --gpu-batch or --objective "
                 "throughput-per-gpu compare like with like.\n");
  if (plan->spec->prune == ST_PLAN_PRUNE_FRONT && c->pruned > 0)
    fprintf(out, "Pruned configurations cannot win nor reach the front against GPUs; "
                 "--prune off simulates them too.\n");
  else if (plan->spec->prune == ST_PLAN_PRUNE_WINNER && c->pruned > 0)
    fprintf(out, "Pruned configurations cannot win; the fronts cover the simulated ones.\n");
}

/* The reason with its numbers replaced by '#', to group alike reasons. */
static char *
reason_kind(const char *reason)
{
  GString *kind = g_string_new(NULL);
  for (const char *p = reason; *p != '\0'; p++) {
    if (g_ascii_isdigit(*p)) {
      while (g_ascii_isdigit(p[1]) || (p[1] == '.' && g_ascii_isdigit(p[2])))
        p++;
      g_string_append_c(kind, '#');
    } else {
      g_string_append_c(kind, *p);
    }
  }
  return g_string_free(kind, FALSE);
}

static void
print_refused(const StPlan *plan, FILE *out)
{
  /* Simulated but over the cap: the closest to fitting first. */
  g_autoptr(GArray) oom = g_array_new(FALSE, FALSE, sizeof(int));
  for (guint i = 0; i < plan->configs->len; i++)
    if (plan->points[i].status == ST_PLAN_OOM && plan->points[i].simulated)
      g_array_append_val(oom, i);
  if (oom->len > 0) {
    g_autofree char *cap = st_format_bytes(plan->mem_cap);
    fprintf(out, "\nDid not fit in %s per GPU (simulated), lowest peak first:\n", cap);
    for (guint k = 0; k < MIN(oom->len, 5u); k++) {
      int best = -1;
      guint at = 0;
      for (guint j = 0; j < oom->len; j++) {
        int i = g_array_index(oom, int, j);
        if (i >= 0 &&
            (best < 0 || plan->points[i].device_bytes < plan->points[best].device_bytes)) {
          best = i;
          at = j;
        }
      }
      g_array_index(oom, int, at) = -1;
      g_autofree char *what = describe(plan, best);
      g_autofree char *peak = st_format_bytes(plan->points[best].device_bytes);
      g_autofree char *step = st_format_duration(plan->points[best].step_time_ns);
      fprintf(out, "  %s: peak %s on the device, %s per step\n", what, peak, step);
    }
  }
  /* Everything else not simulated, grouped by the kind of reason. */
  g_autoptr(GHashTable) groups = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GPtrArray) order = g_ptr_array_new();
  g_autoptr(GArray) first = g_array_new(FALSE, FALSE, sizeof(int));
  g_autoptr(GArray) counts = g_array_new(FALSE, FALSE, sizeof(int));
  for (guint i = 0; i < plan->configs->len; i++) {
    const StPlanPoint *pt = &plan->points[i];
    if (pt->status != ST_PLAN_INFEASIBLE && pt->status != ST_PLAN_FAILED &&
        pt->status != ST_PLAN_EXCLUDED && !(pt->status == ST_PLAN_OOM && !pt->simulated))
      continue;
    char *kind = reason_kind(pt->reason);
    gpointer slot = NULL;
    if (g_hash_table_lookup_extended(groups, kind, NULL, &slot)) {
      g_array_index(counts, int, GPOINTER_TO_INT(slot))++;
      g_free(kind);
      continue;
    }
    int group = (int)order->len, one = 1, index = (int)i;
    g_hash_table_insert(groups, kind, GINT_TO_POINTER(group));
    g_ptr_array_add(order, kind);
    g_array_append_val(first, index);
    g_array_append_val(counts, one);
  }
  if (order->len > 0)
    fprintf(out, "\nNot simulated, by reason (one example each; plan.json lists every one):\n");
  for (guint g = 0; g < order->len; g++) {
    int i = g_array_index(first, int, g);
    g_autofree char *what = describe(plan, i);
    fprintf(out, "  %d x %s\n      e.g. %s\n", g_array_index(counts, int, g),
            plan->points[i].reason, what);
  }
}

static void
row_duration(FILE *out, const char *name, int64_t a, int64_t b)
{
  g_autofree char *ta = st_format_duration(a);
  g_autofree char *tb = st_format_duration(b);
  g_autofree char *d = signed_duration(a - b);
  fprintf(out, "  %-28s %14s %14s %14s\n", name, ta, tb, d);
}

static void
row_bytes(FILE *out, const char *name, int64_t a, int64_t b)
{
  g_autofree char *ta = st_format_bytes(a);
  g_autofree char *tb = st_format_bytes(b);
  g_autofree char *d = signed_bytes(a - b);
  fprintf(out, "  %-28s %14s %14s %14s\n", name, ta, tb, d);
}

static int64_t
group_ns(const StPlanPoint *p, const char *name)
{
  for (int k = 0; k < ST_PLAN_GROUPS && p->sim->exposed_by_group[k].name[0]; k++)
    if (strcmp(p->sim->exposed_by_group[k].name, name) == 0)
      return p->sim->exposed_by_group[k].ns;
  return 0;
}

/* Exposed time by communicator: the winner's groups, then the runner-up's
 * others. A group in flight beside another counts in both. */
static void
rows_groups(FILE *out, const StPlanPoint *a, const StPlanPoint *b)
{
  const StPlanPoint *both[] = {a, b};
  for (int w = 0; w < 2; w++)
    for (int k = 0; k < ST_PLAN_GROUPS && both[w]->sim->exposed_by_group[k].name[0]; k++) {
      const char *name = both[w]->sim->exposed_by_group[k].name;
      if (w == 1 && group_ns(a, name) > 0)
        continue;
      g_autofree char *row = g_strdup_printf("    on \"%s\"", name);
      row_duration(out, row, group_ns(a, name), group_ns(b, name));
    }
}

static int64_t
other_ns(const StPlanPoint *p)
{
  return MAX(0, p->step_time_ns - p->sim->busy_ns - p->sim->exposed_ns);
}

/* Whether the calibration can tell the winner from the runner-up: their
 * 90 % intervals of the step time, and whether each holds the other. */
static void
print_overlap(const StPlan *plan, const StPlanPoint *a, const StPlanPoint *b, FILE *out)
{
  const StResiduals *r = &plan->spec->step_spread;
  double alo, ahi, blo, bhi;
  if (!st_residuals_interval(r, (double)a->step_time_ns, &alo, &ahi) ||
      !st_residuals_interval(r, (double)b->step_time_ns, &blo, &bhi))
    return;
  g_autofree char *a0 = st_format_duration((int64_t)alo);
  g_autofree char *a1 = st_format_duration((int64_t)ahi);
  g_autofree char *b0 = st_format_duration((int64_t)blo);
  g_autofree char *b1 = st_format_duration((int64_t)bhi);
  gboolean within = (double)a->step_time_ns >= blo && (double)b->step_time_ns <= ahi;
  fprintf(out, "  %-28s %14s %14s\n", "step, 90 % interval from", a0, b0);
  fprintf(out, "  %-28s %14s %14s\n", "                        to", a1, b1);
  if (within)
    fprintf(out, "  The winner and the runner-up are within each other's 90 %% intervals: "
                 "the calibration's\n  error on runs it never saw is larger than their "
                 "difference, so either may be faster.\n");
  else
    fprintf(out, "  Each lies outside the other's 90 %% interval: the ranking holds within "
                 "the calibration's error.\n");
}

static void
print_explanation(const StPlan *plan, FILE *out)
{
  int w = st_plan_winner(plan), r = st_plan_runner_up(plan);
  if (w < 0)
    return;
  const StPlanPoint *a = &plan->points[w];
  g_autofree char *wd = describe(plan, w);
  fprintf(out, "\nWinner: %s\n  %s\n", wd, a->description ? a->description : "");
  if (!a->sim->steady)
    fprintf(out, "  WARNING: its step time is not a steady state (%d steps simulated): "
                 "simulate it longer with stagger sim before trusting the ranking.\n",
            a->sim->steps_run);
  if (a->update.kind != ST_UPDATE_SYNC)
    fprintf(out, "  NOTE: its update is %s: %s.\n", st_update_kind_name(a->update.kind),
            a->update.what);
  if (r < 0) {
    fprintf(out, "No runner-up: only one configuration fits.\n");
    return;
  }
  const StPlanPoint *b = &plan->points[r];
  g_autofree char *rd = describe(plan, r);
  fprintf(out, "Runner-up: %s\n\n", rd);
  fprintf(out, "  %-28s %14s %14s %14s\n", "", "winner", "runner-up", "difference");
  StPlanObjective o = plan->spec->objective;
  g_autofree char *oa = objective_text(o, a->objective);
  g_autofree char *ob = objective_text(o, b->objective);
  g_autofree char *oname = g_strdup_printf("objective (%s)", st_plan_objective_name(o));
  fprintf(out, "  %-28s %14s %14s\n", oname, oa, ob);
  if (st_plan_objective_is_run(o)) {
    g_autofree char *ga = g_strdup_printf("%.1f %%", 100 * a->run_goodput);
    g_autofree char *gb = g_strdup_printf("%.1f %%", 100 * b->run_goodput);
    fprintf(out, "  %-28s %14s %14s\n", "goodput of the run", ga, gb);
    g_autofree char *ia = g_strdup_printf("%.0f s", a->run_interval_s);
    g_autofree char *ib = g_strdup_printf("%.0f s", b->run_interval_s);
    fprintf(out, "  %-28s %14s %14s\n", "  checkpoint interval", ia, ib);
    if (a->run_spares >= 0 || b->run_spares >= 0)
      fprintf(out, "  %-28s %14d %14d\n", "  spare nodes", a->run_spares, b->run_spares);
  }
  row_duration(out, "step time", a->step_time_ns, b->step_time_ns);
  row_duration(out, "  computing (GPU 0)", a->sim->busy_ns, b->sim->busy_ns);
  row_duration(out, "  exposed communication", a->sim->exposed_ns, b->sim->exposed_ns);
  rows_groups(out, a, b);
  row_duration(out, "  waiting, idle (bubble)", other_ns(a), other_ns(b));
  if (a->estimated && b->estimated && a->estimate.step_ns > 0 && b->estimate.step_ns > 0) {
    fprintf(out, "  %s\n", "closed form, before building:");
    row_duration(out, "    busiest stage computing", a->estimate.compute_ns,
                 b->estimate.compute_ns);
    row_duration(out, "    its TP collectives", a->estimate.tp_comm_ns, b->estimate.tp_comm_ns);
    row_duration(out, "    pipeline fill + drain", a->estimate.bubble_ns, b->estimate.bubble_ns);
    row_bytes(out, "    memory at least", a->estimate.peak_bytes, b->estimate.peak_bytes);
  }
  row_bytes(out, "communication, all GPUs", (int64_t)a->sim->comm_bytes,
            (int64_t)b->sim->comm_bytes);
  row_bytes(out, "memory per GPU (nvidia-smi)", a->device_bytes, b->device_bytes);
  row_bytes(out, "tensors at the peak", a->peak_bytes, b->peak_bytes);
  for (int c = 0; c < ST_MEM_N; c++) {
    g_autofree char *name = g_strdup_printf("  %s", st_mem_name(c));
    row_bytes(out, name, a->sim->peak_by_category[c], b->sim->peak_by_category[c]);
  }

  /* The part of the step that differs most, and the memory category. */
  const char *parts[] = {"computing", "exposed communication", "waiting"};
  int64_t deltas[] = {a->sim->busy_ns - b->sim->busy_ns, a->sim->exposed_ns - b->sim->exposed_ns,
                      other_ns(a) - other_ns(b)};
  int most = 0;
  for (int k = 1; k < 3; k++)
    if (ABS(deltas[k]) > ABS(deltas[most]))
      most = k;
  int cat = 0;
  for (int c = 1; c < ST_MEM_N; c++)
    if (ABS(a->sim->peak_by_category[c] - b->sim->peak_by_category[c]) >
        ABS(a->sim->peak_by_category[cat] - b->sim->peak_by_category[cat]))
      cat = c;
  print_overlap(plan, a, b, out);
  if (st_plan_objective_is_run(o) && a->step_time_ns > b->step_time_ns)
    fprintf(out,
            "\nThe winner's step is slower than the runner-up's, but its whole training run %s: "
            "it loses less to failures, checkpoints and stragglers (goodput %.1f %% against "
            "%.1f %%, docs/GOODPUT.md).\n",
            o == ST_PLAN_OBJ_TIME_TO_TRAIN ? "finishes first"
            : o == ST_PLAN_OBJ_COST        ? "costs less"
                                           : "takes less energy",
            100 * a->run_goodput, 100 * b->run_goodput);
  g_autofree char *dt = signed_duration(a->step_time_ns - b->step_time_ns);
  g_autofree char *dpart = signed_duration(deltas[most]);
  g_autofree char *dmem = signed_bytes(a->peak_bytes - b->peak_bytes);
  g_autofree char *dcat =
    signed_bytes(a->sim->peak_by_category[cat] - b->sim->peak_by_category[cat]);
  fprintf(out, "\nAgainst the runner-up, ");
  if (a->step_time_ns == b->step_time_ns)
    fprintf(out, "the winner's step takes the same time (it ranks first by its place in the "
                 "space);\n");
  else
    fprintf(out, "the winner's step changes by %s, most in %s (%s);\n", dt, parts[most], dpart);
  if (a->peak_bytes == b->peak_bytes)
    fprintf(out, "its peak memory per GPU is the same.\n");
  else
    fprintf(out, "its peak memory per GPU changes by %s, most in %s (%s).\n", dmem,
            st_mem_name(cat), dcat);
}

void
st_plan_print(const StPlan *plan, int top, FILE *out)
{
  print_table(plan, top, out);
  print_counts(plan, out);
  print_refused(plan, out);
  print_explanation(plan, out);
}
