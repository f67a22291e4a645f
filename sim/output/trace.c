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
 * Traces reach millions of events, so this streams through a text writer
 * (textout.h) into a temporary file renamed into place; no JSON tree is
 * built, and numbers and times are formatted by integer arithmetic
 * (microseconds, 3 decimals): no locale, same bytes for the same timeline. */
#include <string.h>

#include "output/output.h"
#include "output/textout.h"

typedef struct {
  StTextOut *o;
  gboolean first; /* no event written yet: no separating comma */
} Writer;

/* A JSON string literal; bytes >= 0x80 pass through (UTF-8 stays UTF-8). */
static void
put_string(StTextOut *o, const char *text)
{
  static const char hex[] = "0123456789abcdef";
  st_text_c(o, '"');
  for (const unsigned char *p = (const unsigned char *)(text ? text : ""); *p != '\0'; p++) {
    switch (*p) {
    case '"':
      st_text_str(o, "\\\"");
      break;
    case '\\':
      st_text_str(o, "\\\\");
      break;
    case '\n':
      st_text_str(o, "\\n");
      break;
    case '\t':
      st_text_str(o, "\\t");
      break;
    default:
      if (*p < 0x20) {
        st_text_str(o, "\\u00");
        st_text_c(o, hex[*p >> 4]);
        st_text_c(o, hex[*p & 15]);
      } else {
        st_text_c(o, (char)*p);
      }
    }
  }
  st_text_c(o, '"');
}

/* Starts one event object on its own line: {"ph":"X","pid":N */
static void
begin_event(Writer *w, const char *ph, int pid)
{
  st_text_str(w->o, w->first ? "\n" : ",\n");
  w->first = FALSE;
  st_text_str(w->o, "{\"ph\":\"");
  st_text_str(w->o, ph);
  st_text_str(w->o, "\",\"pid\":");
  st_text_int(w->o, pid);
}

/* ,"tid":N */
static void
put_tid(StTextOut *o, int tid)
{
  st_text_str(o, ",\"tid\":");
  st_text_int(o, tid);
}

/* ---- metadata ---------------------------------------------------------------- */

static void
put_metadata(Writer *w, const StTimeline *t, const int32_t *lane_first)
{
  const StSchedule *s = t->schedule;
  StTextOut *o = w->o;
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
    st_text_str(o, ",\"name\":\"process_name\",\"args\":{\"name\":");
    put_string(o, name);
    st_text_str(o, "}}");
    begin_event(w, "M", d + 1);
    st_text_str(o, ",\"name\":\"process_sort_index\",\"args\":{\"sort_index\":");
    st_text_int(o, d);
    st_text_str(o, "}}");
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
      put_tid(o, lane + 1);
      st_text_str(o, ",\"name\":\"thread_name\",\"args\":{\"name\":");
      put_string(o, name);
      st_text_str(o, "}}");
      begin_event(w, "M", s->ranks[r].device + 1);
      put_tid(o, lane + 1);
      st_text_str(o, ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":");
      st_text_int(o, lane);
      st_text_str(o, "}}");
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
put_op(Writer *w, const StTimeline *t, StOpNames *names, const StOpRecord *rec, int tid)
{
  const StSchedule *s = t->schedule;
  StTextOut *o = w->o;
  const StProgram *p = st_schedule_program_of(s, rec->rank);
  const StOp *op = st_program_op(p, rec->op);
  begin_event(w, "X", s->ranks[rec->rank].device + 1);
  put_tid(o, tid);
  st_text_str(o, ",\"ts\":");
  st_text_us(o, rec->start_ns);
  st_text_str(o, ",\"dur\":");
  st_text_us(o, rec->end_ns - rec->start_ns);
  st_text_str(o, ",\"name\":");
  put_string(o, st_op_names_get(names, rec->rank, rec->op));
  st_text_str(o, ",\"cat\":\"");
  st_text_str(o, st_op_kind_name(op->kind));
  st_text_str(o, "\",\"args\":{\"step\":");
  st_text_int(o, rec->step);
  st_text_str(o, ",\"op\":");
  st_text_int(o, rec->op);
  const StModel *model = st_program_model(s, p);
  if (op->layer >= 0 && op->layer < model->n_layers) {
    st_text_str(o, ",\"layer\":");
    put_string(o, model->layers[op->layer].name);
  }
  if (op->micro >= 0) {
    st_text_str(o, ",\"micro\":");
    st_text_int(o, op->micro);
  }
  st_text_str(o, ",\"bytes\":");
  st_text_int(o, op->bytes);
  st_text_str(o, ",\"source\":\"");
  st_text_str(o, st_cost_source_name(rec->source < ST_SRC_N ? rec->source : 0));
  st_text_str(o, "\",\"ready_us\":");
  st_text_us(o, rec->ready_ns);
  st_text_str(o, "}}");
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
  StTextOut *o = w->o;
  int64_t at = from->end_ns > from->start_ns ? from->end_ns - 1 : from->start_ns;
  begin_event(w, "s", s->ranks[from->rank].device + 1);
  put_tid(o, from_tid);
  st_text_str(o, ",\"ts\":");
  st_text_us(o, at);
  st_text_str(o, ",\"name\":\"dep\",\"cat\":\"dep\",\"id\":");
  st_text_int(o, (int64_t)id);
  st_text_c(o, '}');
  begin_event(w, "f", s->ranks[to->rank].device + 1);
  put_tid(o, to_tid);
  st_text_str(o, ",\"ts\":");
  st_text_us(o, to->start_ns);
  st_text_str(o, ",\"name\":\"dep\",\"cat\":\"dep\",\"id\":");
  st_text_int(o, (int64_t)id);
  st_text_str(o, ",\"bp\":\"e\"}");
}

static void
put_ops(Writer *w, const StTimeline *t, const int32_t *lane_first)
{
  const StSchedule *s = t->schedule;
  RecordIndex ri;
  record_index_init(&ri, t);
  StOpNames names;
  st_op_names_init(&names, s);
  uint64_t flow_id = 0;
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *rec = &g_array_index(t->ops, StOpRecord, i);
    g_return_if_fail(lane_first[rec->rank] >= 0);
    const StProgram *p = st_schedule_program_of(s, rec->rank);
    const StOp *op = st_program_op(p, rec->op);
    int tid = lane_first[rec->rank] + op->stream + 1;
    put_op(w, t, &names, rec, tid);
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
  st_op_names_clear(&names);
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
  StTextOut *o = w->o;
  begin_event(w, "C", device + 1);
  st_text_str(o, ",\"name\":\"memory\",\"ts\":");
  st_text_us(o, t_ns);
  st_text_str(o, ",\"args\":{");
  for (int c = 0; c < ST_MEM_N; c++) {
    st_text_str(o, c > 0 ? ",\"" : "\"");
    st_text_str(o, st_mem_name(c));
    st_text_str(o, "\":");
    st_text_int(o, state[c]);
  }
  st_text_str(o, "}}");
}

/* ---- the file ------------------------------------------------------------------ */

static void
put_other_data(StTextOut *o, const StTimeline *t)
{
  const StSchedule *s = t->schedule;
  st_text_str(o, "\"otherData\":{\"origin\":");
  put_string(o, t->origin);
  st_text_str(o, t->measured ? ",\"measured\":true,\"strategy\":"
                             : ",\"measured\":false,\"strategy\":");
  put_string(o, s->settings.strategy);
  st_text_str(o, ",\"description\":");
  put_string(o, s->settings.description);
  st_text_str(o, ",\"model\":");
  put_string(o, s->model->name);
  st_text_str(o, ",\"cluster\":");
  put_string(o, s->cluster->name);
  st_text_str(o, ",\"steps\":");
  st_text_int(o, t->steps);
  st_text_str(o, ",\"devices\":");
  st_text_int(o, s->n_devices);
  st_text_str(o, ",\"ranks\":");
  st_text_int(o, s->n_ranks);
  st_text_str(o, ",\"end_us\":");
  st_text_us(o, t->end_ns);
  st_text_c(o, '}');
}

gboolean
st_trace_write(const StTimeline *t, const char *path, GError **error)
{
  StTextOut o;
  if (!st_text_open(&o, path, error))
    return FALSE;
  g_autofree int32_t *lane_first = st_timeline_lanes(t);
  Writer w = {&o, TRUE};
  st_text_str(&o, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
  put_metadata(&w, t, lane_first);
  put_ops(&w, t, lane_first);
  st_timeline_walk_memory(t, FALSE, put_counter, &w);
  st_text_str(&o, "\n],\n");
  put_other_data(&o, t);
  st_text_str(&o, "}\n");
  return st_text_close(&o, error);
}
