/* compare.c: see compare.h. */
#include "output/compare.h"

#include <math.h>

#include "base/json.h"
#include "base/units.h"
#include "output/report_multiplex.h"

static const char *const CLASS_NAMES[] = {"forward", "backward", "optimizer", "other compute",
                                          "collectives", "transfers", "copies"};

const char *
st_op_class_name(StOpClass c)
{
  g_return_val_if_fail(c < ST_CLASS_N, "?");
  return CLASS_NAMES[c];
}

static StOpClass
class_of(const StOp *op)
{
  if (op->kind == ST_OP_COMP)
    return op->sub == ST_PASS_FWD || op->sub == ST_PASS_RECOMPUTE ? ST_CLASS_FORWARD
           : st_pass_is_backward((StPass)op->sub)                 ? ST_CLASS_BACKWARD
           : op->sub == ST_PASS_OPTIM                             ? ST_CLASS_OPTIMIZER
                                                                  : ST_CLASS_OTHER_COMPUTE;
  if (op->kind == ST_OP_COMM_COLL)
    return ST_CLASS_COLLECTIVE;
  return op->kind == ST_OP_COPY ? ST_CLASS_COPY : ST_CLASS_P2P;
}

/* Per steady step time of each class on `rank`. */
static void
classes(const StSummary *sum, int rank, double *out)
{
  const StTimeline *t = sum->timeline;
  const StSchedule *s = t->schedule;
  int steady = MAX(1, sum->steady_steps);
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    if (r->rank != rank || r->step < sum->warmup_steps ||
        r->step >= sum->warmup_steps + sum->steady_steps)
      continue;
    const StOp *op = st_program_op(st_schedule_program_of(s, rank), r->op);
    /* Communication counts from when this rank could start it: the wait
     * for its peers included, which the executor cannot tell apart from
     * the transfer (an NCCL kernel waits inside), so the prediction counts
     * it too. */
    int64_t from = op->kind == ST_OP_COMP || op->kind == ST_OP_COPY ? r->start_ns : r->ready_ns;
    out[class_of(op)] += (double)(r->end_ns - from) / steady;
  }
}

static double
relative(double predicted, double measured)
{
  return measured != 0 ? (predicted - measured) / measured : 0;
}

static void
add_figure(StComparison *c, const char *name, const cJSON *pred, const cJSON *meas)
{
  if (!cJSON_IsNumber(pred) || !cJSON_IsNumber(meas) ||
      c->n_multiplex == (int)G_N_ELEMENTS(c->multiplex))
    return;
  StCompareFigure *f = &c->multiplex[c->n_multiplex++];
  g_strlcpy(f->name, name, sizeof f->name);
  f->predicted = pred->valuedouble;
  f->measured = meas->valuedouble;
}

/* The multiplexing figures both reports have, side by side. */
static void
compare_multiplex(StComparison *c)
{
  g_autoptr(cJSON) p = st_report_multiplex_json(c->predicted);
  g_autoptr(cJSON) m = st_report_multiplex_json(c->measured);
  if (p == NULL || m == NULL)
    return;
  const char *keys[] = {"foreground_step_time_s", "foreground_alone_step_time_s",
                        "foreground_slowdown",    "foreground_samples_per_s",
                        "cluster_samples_per_s",  "gpu_idle_fraction",
                        "gpu_idle_fraction_alone"};
  for (gsize i = 0; i < G_N_ELEMENTS(keys); i++)
    add_figure(c, keys[i], cJSON_GetObjectItem(p, keys[i]), cJSON_GetObjectItem(m, keys[i]));
  const cJSON *pj = cJSON_GetObjectItem(p, "background"), *mj = cJSON_GetObjectItem(m, "background");
  for (int k = 0; k < cJSON_GetArraySize(pj) && k < cJSON_GetArraySize(mj); k++) {
    const cJSON *a = cJSON_GetArrayItem(pj, k), *b = cJSON_GetArrayItem(mj, k);
    g_autofree char *name = g_strdup_printf(
      "background %s samples_per_s", cJSON_GetStringValue(cJSON_GetObjectItem(a, "name")));
    add_figure(c, name, cJSON_GetObjectItem(a, "samples_per_s"),
               cJSON_GetObjectItem(b, "samples_per_s"));
  }
}

void
st_compare(const StSummary *predicted, const StSummary *measured, StComparison *c)
{
  *c = (StComparison){.predicted = predicted, .measured = measured};
  const StTimeline *pt = predicted->timeline;
  /* The first rank the prediction recorded itself (folding may skip some). */
  for (int r = 0; r < pt->schedule->n_ranks; r++) {
    if (pt->rank_rep[r] == r) {
      c->rank = r;
      break;
    }
  }
  classes(predicted, c->rank, c->class_ns[0]);
  classes(measured, c->rank, c->class_ns[1]);
  const StSummary *both[2] = {predicted, measured};
  for (int k = 0; k < 2; k++) {
    const StDeviceSummary *d = st_summary_device(both[k], 0);
    for (int cat = 0; cat < ST_MEM_N; cat++)
      c->peak[k][cat] = d->at_peak_by_category[cat];
    c->peak_total[k] = d->peak_bytes;
  }
  c->step_error = relative((double)predicted->step_time_ns, (double)measured->step_time_ns);
  c->peak_error = relative((double)c->peak_total[0], (double)c->peak_total[1]);
  compare_multiplex(c);
}

cJSON *
st_compare_to_json(const StComparison *c)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "predicted_step_time_s", c->predicted->step_time_ns * 1e-9);
  cJSON_AddNumberToObject(o, "measured_step_time_s", c->measured->step_time_ns * 1e-9);
  cJSON_AddNumberToObject(o, "step_time_error", c->step_error);
  st_json_add_int(o, "rank", c->rank);
  cJSON *cls = cJSON_AddObjectToObject(o, "time_per_step_s");
  for (int k = 0; k < ST_CLASS_N; k++) {
    if (c->class_ns[0][k] == 0 && c->class_ns[1][k] == 0)
      continue;
    cJSON *e = cJSON_AddObjectToObject(cls, st_op_class_name(k));
    cJSON_AddNumberToObject(e, "predicted", c->class_ns[0][k] * 1e-9);
    cJSON_AddNumberToObject(e, "measured", c->class_ns[1][k] * 1e-9);
    cJSON_AddNumberToObject(e, "error", relative(c->class_ns[0][k], c->class_ns[1][k]));
  }
  cJSON *mem = cJSON_AddObjectToObject(o, "device0_at_peak_bytes");
  for (int cat = 0; cat < ST_MEM_N; cat++) {
    cJSON *e = cJSON_AddObjectToObject(mem, st_mem_name(cat));
    st_json_add_int(e, "predicted", c->peak[0][cat]);
    st_json_add_int(e, "measured", c->peak[1][cat]);
    cJSON_AddNumberToObject(e, "error", relative((double)c->peak[0][cat], (double)c->peak[1][cat]));
  }
  cJSON *total = cJSON_AddObjectToObject(mem, "total");
  st_json_add_int(total, "predicted", c->peak_total[0]);
  st_json_add_int(total, "measured", c->peak_total[1]);
  cJSON_AddNumberToObject(total, "error", c->peak_error);
  if (c->n_multiplex > 0) {
    cJSON *mux = cJSON_AddObjectToObject(o, "multiplex");
    for (int i = 0; i < c->n_multiplex; i++) {
      const StCompareFigure *f = &c->multiplex[i];
      cJSON *e = cJSON_AddObjectToObject(mux, f->name);
      cJSON_AddNumberToObject(e, "predicted", f->predicted);
      cJSON_AddNumberToObject(e, "measured", f->measured);
      cJSON_AddNumberToObject(e, "error", relative(f->predicted, f->measured));
    }
  }
  return o;
}

static void
row(FILE *out, const char *what, char *pred, char *meas, double error)
{
  fprintf(out, "  %-22s %14s %14s %+9.1f %%\n", what, pred, meas, 100.0 * error);
  g_free(pred);
  g_free(meas);
}

void
st_compare_print(const StComparison *c, const char *name, FILE *out)
{
  fprintf(out, "%s\n  %-22s %14s %14s %10s\n", name, "", "predicted", "measured", "error");
  row(out, "step time", st_format_duration(c->predicted->step_time_ns),
      st_format_duration(c->measured->step_time_ns), c->step_error);
  for (int k = 0; k < ST_CLASS_N; k++) {
    if (c->class_ns[0][k] == 0 && c->class_ns[1][k] == 0)
      continue;
    g_autofree char *label = g_strdup_printf("  %s (rank %d)", st_op_class_name(k), c->rank);
    row(out, label, st_format_duration((int64_t)c->class_ns[0][k]),
        st_format_duration((int64_t)c->class_ns[1][k]),
        relative(c->class_ns[0][k], c->class_ns[1][k]));
  }
  row(out, "peak memory, GPU 0", st_format_bytes(c->peak_total[0]),
      st_format_bytes(c->peak_total[1]), c->peak_error);
  for (int cat = 0; cat < ST_MEM_N; cat++) {
    if (c->peak[0][cat] == 0 && c->peak[1][cat] == 0)
      continue;
    g_autofree char *label = g_strdup_printf("  %s", st_mem_name(cat));
    row(out, label, st_format_bytes(c->peak[0][cat]), st_format_bytes(c->peak[1][cat]),
        relative((double)c->peak[0][cat], (double)c->peak[1][cat]));
  }
  for (int i = 0; i < c->n_multiplex; i++) {
    const StCompareFigure *f = &c->multiplex[i];
    fprintf(out, "  %-38s %12.4g %12.4g %+9.1f %%\n", f->name, f->predicted, f->measured,
            100.0 * relative(f->predicted, f->measured));
  }
}
