/* report_multiplex.c: see report_multiplex.h. */
#include "output/report_multiplex.h"

#include <string.h>

#include "base/json.h"

/* The number note `key` of the schedule, or -1. */
static double
note_number(const StSchedule *s, const char *key)
{
  for (guint i = 0; i < s->notes->len; i++) {
    const StNote *n = &g_array_index(s->notes, StNote, i);
    if (n->text == NULL && strcmp(n->key, key) == 0)
      return n->number;
  }
  return -1;
}

typedef struct {
  int64_t start, end;
} Span;

static int
compare_span(const void *a, const void *b)
{
  const Span *x = a, *y = b;
  return (x->start > y->start) - (x->start < y->start);
}

/* Fraction of GPU time in [a, b) with no kernel running, over all devices
 * (a folded device counts as many times as it stands for). */
static double
idle_fraction(const StTimeline *t, int64_t a, int64_t b)
{
  const StSchedule *s = t->schedule;
  if (b <= a)
    return 0;
  g_autofree int32_t *weight = st_timeline_device_weights(t);
  g_autofree GArray **spans = g_new0(GArray *, s->n_devices);
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    if (st_program_op(st_schedule_program_of(s, r->rank), r->op)->kind != ST_OP_COMP)
      continue;
    int d = s->ranks[r->rank].device;
    Span x = {MAX(r->start_ns, a), MIN(r->end_ns, b)};
    if (x.end <= x.start)
      continue;
    if (spans[d] == NULL)
      spans[d] = g_array_new(FALSE, FALSE, sizeof(Span));
    g_array_append_val(spans[d], x);
  }
  double busy = 0, total = 0;
  for (int d = 0; d < s->n_devices; d++) {
    total += weight[d] * (double)(b - a);
    if (spans[d] == NULL)
      continue;
    g_array_sort(spans[d], compare_span);
    int64_t end = a, length = 0;
    for (guint i = 0; i < spans[d]->len; i++) {
      Span x = g_array_index(spans[d], Span, i);
      if (x.end > end) {
        length += x.end - MAX(x.start, end);
        end = x.end;
      }
    }
    busy += weight[d] * (double)length;
    g_array_unref(spans[d]);
  }
  return total > 0 ? 1.0 - busy / total : 0;
}

/* Foreground slowdown against its alone step, background samples per second,
 * cluster throughput and idle GPU time. A background job's progress counts
 * the FLOPs of its passes that ended in the steady window, in iterations (a
 * forward + backward of its batch), summed over its copies. */
static cJSON *
multiplex_json(const StSummary *sum, int alone)
{
  const StTimeline *t = sum->timeline;
  const StSchedule *s = t->schedule;
  int n = sum->steps;
  int64_t a, b;
  st_summary_window(sum, &a, &b);
  double window_s = (double)(b - a) * 1e-9;
  double alone_ns = alone >= 2 && n >= alone
                      ? (double)(sum->step_end_ns[alone - 1] - sum->step_end_ns[alone - 2]) : 0;
  cJSON *obj = cJSON_CreateObject();
  cJSON_AddNumberToObject(obj, "foreground_step_time_s", sum->step_time_ns * 1e-9);
  cJSON_AddNumberToObject(obj, "foreground_alone_step_time_s", alone_ns * 1e-9);
  cJSON_AddNumberToObject(obj, "foreground_slowdown",
                          alone_ns > 0 ? (double)sum->step_time_ns / alone_ns : 0);
  /* The bound admission holds it to (sched/admission.h): 1 + the limit. */
  double limit = note_number(s, "slowdown_limit");
  if (limit >= 0)
    cJSON_AddNumberToObject(obj, "foreground_slowdown_bound", 1.0 + limit);
  cJSON_AddNumberToObject(obj, "foreground_samples_per_s", sum->samples_per_s);
  g_autofree double *weight = g_new0(double, s->n_ranks);
  for (int r = 0; r < s->n_ranks; r++)
    weight[t->rank_rep[r]] += 1;
  double cluster = sum->samples_per_s;
  cJSON *jobs = cJSON_AddArrayToObject(obj, "background");
  for (int k = 1; k < st_schedule_n_jobs(s); k++) {
    const StModel *m = st_schedule_job_model(s, k);
    double per_iteration = m->fwd_flops + m->bwd_flops, done = 0;
    int copies = 0;
    for (int r = 0; r < s->n_ranks; r++)
      copies += st_schedule_program_of(s, r)->job == k;
    for (guint i = 0; i < t->ops->len; i++) {
      const StOpRecord *rec = &g_array_index(t->ops, StOpRecord, i);
      const StProgram *p = st_schedule_program_of(s, rec->rank);
      const StOp *op = st_program_op(p, rec->op);
      if (p->job != k || op->kind != ST_OP_COMP || op->layer < 0 || rec->end_ns <= a ||
          rec->end_ns > b)
        continue;
      const StLayer *l = &m->layers[op->layer];
      double flops = op->sub == ST_PASS_FWD ? l->fwd_flops : op->sub == ST_PASS_BWD ? l->bwd_flops : 0;
      done += weight[rec->rank] * flops * op->batch;
    }
    const StSettings *js = st_schedule_job_settings(s, k);
    double iterations = per_iteration > 0 ? done / (per_iteration * js->micro_batch) : 0;
    double rate = window_s > 0 ? iterations * js->micro_batch / window_s : 0;
    cluster += rate;
    cJSON *job = cJSON_CreateObject();
    cJSON_AddStringToObject(job, "name", ((const StJob *)g_ptr_array_index(s->jobs, k - 1))->name);
    st_json_add_int(job, "copies", copies);
    cJSON_AddNumberToObject(job, "iterations", iterations);
    cJSON_AddNumberToObject(job, "samples_per_s", rate);
    cJSON_AddItemToArray(jobs, job);
  }
  cJSON_AddNumberToObject(obj, "cluster_samples_per_s", cluster);
  cJSON_AddNumberToObject(obj, "gpu_idle_fraction", idle_fraction(t, a, b));
  cJSON_AddNumberToObject(obj, "gpu_idle_fraction_alone",
                          alone_ns > 0 ? idle_fraction(t, sum->step_end_ns[alone - 2],
                                                       sum->step_end_ns[alone - 1])
                                       : 0);
  return obj;
}

cJSON *
st_report_multiplex_json(const StSummary *sum)
{
  double alone = note_number(sum->timeline->schedule, "alone_steps");
  return alone >= 0 ? multiplex_json(sum, (int)alone) : NULL;
}
