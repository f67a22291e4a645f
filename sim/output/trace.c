/* trace.c: trace.json in the Chrome trace event format, which Perfetto
 * (ui.perfetto.dev) and chrome://tracing open. docs/FORMATS.md describes it.
 *
 * - pid = device + 1 for each recorded device: pid 0 is the kernel's idle
 *   process to Perfetto, which treats it specially. Its name says the GPU,
 *   its node and, when folded, how many devices it stands for.
 * - tid = lane + 1 per (rank, stream) of the recorded ranks, lanes numbered
 *   as in ops.csv (device, then rank, then stream), so the trace lists rows in
 *   the Gantt's order.
 * - "X" slices for ops, "C" counters named "memory" per device (bytes of each
 *   category after every change), "s"/"f" flows for cross-stream dependencies
 *   within a rank.
 *
 * Traces reach millions of events, so this streams with fprintf into a
 * temporary file and renames it into place; no JSON tree is built. Times are
 * printed through integer arithmetic (microseconds, 3 decimals): no locale,
 * same bytes for the same timeline. */
#include <errno.h>
#include <glib/gstdio.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/units.h"
#include "output/output.h"

typedef struct {
  FILE *f;
  gboolean first; /* no event written yet: no separating comma */
} Writer;

static void
put_us(FILE *f, int64_t ns)
{
  char buf[ST_US_TEXT_LEN];
  fputs(st_us_text(ns, buf), f);
}

/* A JSON string literal; bytes >= 0x80 pass through (UTF-8 stays UTF-8). */
static void
put_string(FILE *f, const char *text)
{
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(text ? text : ""); *p != '\0'; p++) {
    switch (*p) {
    case '"':
      fputs("\\\"", f);
      break;
    case '\\':
      fputs("\\\\", f);
      break;
    case '\n':
      fputs("\\n", f);
      break;
    case '\t':
      fputs("\\t", f);
      break;
    default:
      if (*p < 0x20)
        fprintf(f, "\\u%04x", *p);
      else
        fputc(*p, f);
    }
  }
  fputc('"', f);
}

/* Starts one event object on its own line. */
static void
begin_event(Writer *w, const char *ph, int pid)
{
  fputs(w->first ? "\n" : ",\n", w->f);
  w->first = FALSE;
  fprintf(w->f, "{\"ph\":\"%s\",\"pid\":%d", ph, pid);
}

/* ---- metadata ---------------------------------------------------------------- */

static void
put_metadata(Writer *w, const StTimeline *t, const int32_t *lane_first)
{
  const StSchedule *s = t->schedule;
  g_autofree int32_t *weight = st_timeline_device_weights(t);
  for (int d = 0; d < s->n_devices; d++) {
    if (!st_timeline_device_recorded(t, d))
      continue;
    g_autofree char *name =
      weight[d] > 1 ? g_strdup_printf("%s %d (node %d) stands for %d devices",
                                      st_timeline_device_noun(t), d, s->devices[d].node,
                                      weight[d])
                    : g_strdup_printf("%s %d (node %d)", st_timeline_device_noun(t), d,
                                      s->devices[d].node);
    begin_event(w, "M", d + 1);
    fputs(",\"name\":\"process_name\",\"args\":{\"name\":", w->f);
    put_string(w->f, name);
    fputs("}}", w->f);
    begin_event(w, "M", d + 1);
    fprintf(w->f, ",\"name\":\"process_sort_index\",\"args\":{\"sort_index\":%d}}", d);
  }
  for (int r = 0; r < s->n_ranks; r++) {
    if (lane_first[r] < 0)
      continue;
    const StProgram *p = st_schedule_program_of(s, r);
    for (guint k = 0; k < p->streams->len; k++) {
      const StStream *stream = &g_array_index(p->streams, StStream, k);
      int lane = lane_first[r] + (int)k;
      g_autofree char *name = g_strdup_printf("rank %d: %s", r, stream->name);
      begin_event(w, "M", s->ranks[r].device + 1);
      fprintf(w->f, ",\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":", lane + 1);
      put_string(w->f, name);
      fputs("}}", w->f);
      begin_event(w, "M", s->ranks[r].device + 1);
      fprintf(w->f, ",\"tid\":%d,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}}",
              lane + 1, lane);
    }
  }
}

/* ---- ops and dependency flows ------------------------------------------------ */

/* Where each (rank, step, op) was recorded, to find a dependency's record:
 * index[rank][step * n_ops + op] = record + 1, 0 when not recorded. Only
 * recorded ranks get an array. */
typedef struct {
  uint32_t **index;
  int32_t steps;
} RecordIndex;

static void
record_index_init(RecordIndex *ri, const StTimeline *t)
{
  const StSchedule *s = t->schedule;
  ri->steps = t->steps;
  ri->index = g_new0(uint32_t *, s->n_ranks);
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *rec = &g_array_index(t->ops, StOpRecord, i);
    guint n_ops = st_schedule_program_of(s, rec->rank)->ops->len;
    if (rec->step < 0 || rec->step >= ri->steps || rec->op >= n_ops)
      continue;
    if (ri->index[rec->rank] == NULL)
      ri->index[rec->rank] = g_new0(uint32_t, (gsize)ri->steps * n_ops);
    ri->index[rec->rank][(gsize)rec->step * n_ops + rec->op] = i + 1;
  }
}

static void
record_index_clear(RecordIndex *ri, int n_ranks)
{
  for (int r = 0; r < n_ranks; r++)
    g_free(ri->index[r]);
  g_free(ri->index);
}

static const StOpRecord *
record_find(const RecordIndex *ri, const StTimeline *t, int rank, int step, uint32_t op)
{
  guint n_ops = st_schedule_program_of(t->schedule, rank)->ops->len;
  if (step < 0 || step >= ri->steps || ri->index[rank] == NULL || op >= n_ops)
    return NULL;
  uint32_t i = ri->index[rank][(gsize)step * n_ops + op];
  return i > 0 ? &g_array_index(t->ops, StOpRecord, i - 1) : NULL;
}

static void
put_op(Writer *w, const StTimeline *t, const StOpRecord *rec, int tid)
{
  const StSchedule *s = t->schedule;
  const StProgram *p = st_schedule_program_of(s, rec->rank);
  const StOp *op = st_program_op(p, rec->op);
  g_autofree char *name = st_op_describe(s, p, rec->op);
  begin_event(w, "X", s->ranks[rec->rank].device + 1);
  fprintf(w->f, ",\"tid\":%d,\"ts\":", tid);
  put_us(w->f, rec->start_ns);
  fputs(",\"dur\":", w->f);
  put_us(w->f, rec->end_ns - rec->start_ns);
  fputs(",\"name\":", w->f);
  put_string(w->f, name);
  fprintf(w->f, ",\"cat\":\"%s\",\"args\":{\"step\":%d,\"op\":%u", st_op_kind_name(op->kind),
          rec->step, rec->op);
  const StModel *model = st_program_model(s, st_schedule_program_of(s, rec->rank));
  if (op->layer >= 0 && op->layer < model->n_layers) {
    fputs(",\"layer\":", w->f);
    put_string(w->f, model->layers[op->layer].name);
  }
  if (op->micro >= 0)
    fprintf(w->f, ",\"micro\":%d", op->micro);
  fprintf(w->f, ",\"bytes\":%" PRId64 ",\"source\":\"%s\",\"ready_us\":", op->bytes,
          st_cost_source_name(rec->source < ST_SRC_N ? rec->source : 0));
  put_us(w->f, rec->ready_ns);
  fputs("}}", w->f);
}

/* One flow from `from`'s end to `to`'s start. The start is put on the last
 * nanosecond of `from` rather than its end, so viewers bind it to that slice
 * and not to whatever follows on the stream; "bp":"e" binds the finish to the
 * slice that encloses it, the dependent op. */
static void
put_flow(Writer *w, const StTimeline *t, const StOpRecord *from, int from_tid,
         const StOpRecord *to, int to_tid, uint64_t id)
{
  const StSchedule *s = t->schedule;
  int64_t at = from->end_ns > from->start_ns ? from->end_ns - 1 : from->start_ns;
  begin_event(w, "s", s->ranks[from->rank].device + 1);
  fprintf(w->f, ",\"tid\":%d,\"ts\":", from_tid);
  put_us(w->f, at);
  fprintf(w->f, ",\"name\":\"dep\",\"cat\":\"dep\",\"id\":%" PRIu64 "}", id);
  begin_event(w, "f", s->ranks[to->rank].device + 1);
  fprintf(w->f, ",\"tid\":%d,\"ts\":", to_tid);
  put_us(w->f, to->start_ns);
  fprintf(w->f, ",\"name\":\"dep\",\"cat\":\"dep\",\"id\":%" PRIu64 ",\"bp\":\"e\"}", id);
}

static void
put_ops(Writer *w, const StTimeline *t, const int32_t *lane_first)
{
  const StSchedule *s = t->schedule;
  RecordIndex ri;
  record_index_init(&ri, t);
  uint64_t flow_id = 0;
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *rec = &g_array_index(t->ops, StOpRecord, i);
    g_return_if_fail(lane_first[rec->rank] >= 0);
    const StProgram *p = st_schedule_program_of(s, rec->rank);
    const StOp *op = st_program_op(p, rec->op);
    int tid = lane_first[rec->rank] + op->stream + 1;
    put_op(w, t, rec, tid);
    /* Same-stream order is implied by the row itself; only waits on another
     * stream are worth an arrow. */
    const StDep *deps = st_program_deps(p, op);
    for (uint32_t k = 0; k < op->n_deps; k++) {
      const StOp *dep_op = st_program_op(p, deps[k].op);
      if (dep_op->stream == op->stream)
        continue;
      const StOpRecord *from =
        record_find(&ri, t, rec->rank, rec->step + deps[k].step_offset, deps[k].op);
      if (from == NULL)
        continue;
      put_flow(w, t, from, lane_first[rec->rank] + dep_op->stream + 1, rec, tid, ++flow_id);
    }
  }
  record_index_clear(&ri, s->n_ranks);
}

/* ---- memory counters ---------------------------------------------------------- */

/* The same states as the rows of memory.csv: per recorded device, the
 * bytes of each category at time 0 and after all events of each instant. */
static void
put_counter(gpointer data, int device, int64_t t_ns, const int64_t state[ST_MEM_N],
            const StMemEvent *last_alloc)
{
  Writer *w = data;
  begin_event(w, "C", device + 1);
  fputs(",\"name\":\"memory\",\"ts\":", w->f);
  put_us(w->f, t_ns);
  fputs(",\"args\":{", w->f);
  for (int c = 0; c < ST_MEM_N; c++)
    fprintf(w->f, "%s\"%s\":%" PRId64, c > 0 ? "," : "", st_mem_name(c), state[c]);
  fputs("}}", w->f);
}

/* ---- the file ------------------------------------------------------------------ */

static void
put_other_data(FILE *f, const StTimeline *t)
{
  const StSchedule *s = t->schedule;
  fputs("\"otherData\":{\"origin\":", f);
  put_string(f, t->origin);
  fprintf(f, ",\"measured\":%s,\"strategy\":", t->measured ? "true" : "false");
  put_string(f, s->settings.strategy);
  fputs(",\"description\":", f);
  put_string(f, s->settings.description);
  fputs(",\"model\":", f);
  put_string(f, s->model->name);
  fputs(",\"cluster\":", f);
  put_string(f, s->cluster->name);
  fprintf(f, ",\"steps\":%d,\"devices\":%d,\"ranks\":%d,\"end_us\":", t->steps, s->n_devices,
          s->n_ranks);
  put_us(f, t->end_ns);
  fputs("}", f);
}

gboolean
st_trace_write(const StTimeline *t, const char *path, GError **error)
{
  g_autofree char *tmp = g_strconcat(path, ".tmp", NULL);
  FILE *f = g_fopen(tmp, "wb");
  if (f == NULL) {
    int saved = errno;
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s: cannot create: %s", tmp,
                g_strerror(saved));
    return FALSE;
  }
  /* Large writes: a bigger buffer saves system calls. */
  setvbuf(f, NULL, _IOFBF, 1 << 20);

  g_autofree int32_t *lane_first = st_timeline_lanes(t);
  Writer w = {f, TRUE};
  fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", f);
  put_metadata(&w, t, lane_first);
  put_ops(&w, t, lane_first);
  st_timeline_walk_memory(t, FALSE, put_counter, &w);
  fputs("\n],\n", f);
  put_other_data(f, t);
  fputs("}\n", f);

  gboolean failed = ferror(f) != 0;
  int saved = errno;
  if (fclose(f) != 0 && !failed) {
    failed = TRUE;
    saved = errno;
  }
  if (failed) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s: write failed: %s", tmp,
                g_strerror(saved));
    g_unlink(tmp);
    return FALSE;
  }
  if (g_rename(tmp, path) != 0) {
    saved = errno;
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s: cannot rename from %s: %s", path, tmp,
                g_strerror(saved));
    g_unlink(tmp);
    return FALSE;
  }
  return TRUE;
}
