/* csv.c: memory.csv, comm.csv, groups.csv and ops.csv (see output.h; docs/FORMATS.md
 * describes every column). These are the tables the gnuplot scripts in
 * plots/ read, so their shape follows what gnuplot draws easily: rows of one
 * device are contiguous and in time order, and every table starts at time 0
 * and reaches the end of the run so that step plots span the whole axis.
 *
 * Every file starts with its header line, so that any CSV reader takes the
 * column names from it; what a table is about (predicted or measured, what
 * a folded device stands for) is in report.json beside it.
 *
 * Each file is written atomically: the small ones built in memory and
 * written with g_file_set_contents, memory.csv and ops.csv (millions of
 * rows) streamed through textout.h into a temporary file renamed into
 * place: a reader never sees half a table. Numbers are printed
 * without the locale (integers, or fixed decimals through integer
 * arithmetic), so the same timeline always gives the same bytes. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/units.h"
#include "output/output.h"
#include "output/textout.h"

G_DEFINE_QUARK(st-output-error-quark, st_output_error)

/* ---- helpers -------------------------------------------------------------- */

static void
append_us(GString *out, int64_t ns)
{
  char buf[ST_US_TEXT_LEN];
  g_string_append(out, st_us_text(ns, buf));
}

/* A CSV field, quoted only when it holds a comma, so that ordinary names
 * stay readable. A double quote becomes a single quote and a line break a
 * space: gnuplot reads quoted fields but neither the doubled quotes RFC 4180
 * escapes them with nor a row that spans lines, and would shift every later
 * column of the row. */
static void
append_field(GString *out, const char *text)
{
  if (text == NULL)
    return;
  gboolean quote = strchr(text, ',') != NULL;
  if (quote)
    g_string_append_c(out, '"');
  for (const char *p = text; *p != '\0'; p++)
    g_string_append_c(out, *p == '"' ? '\'' : *p == '\n' || *p == '\r' ? ' ' : *p);
  if (quote)
    g_string_append_c(out, '"');
}

static gboolean
write_text(const char *path, const GString *text, GError **error)
{
  GError *local = NULL;
  if (!g_file_set_contents(path, text->str, (gssize)text->len, &local)) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s: %s", path, local->message);
    g_error_free(local);
    return FALSE;
  }
  return TRUE;
}

/* ---- memory.csv ------------------------------------------------------------ */

static void
memory_row(gpointer data, int device, int64_t t_ns, const int64_t state[ST_MEM_N],
           const StMemEvent *last_alloc)
{
  StTextOut *o = data;
  int64_t total = 0;
  st_text_us(o, t_ns);
  st_text_c(o, ',');
  st_text_int(o, device);
  for (int c = 0; c < ST_MEM_N; c++) {
    st_text_c(o, ',');
    st_text_int(o, state[c]);
    total += state[c];
  }
  st_text_c(o, ',');
  st_text_int(o, total);
  st_text_c(o, '\n');
}

gboolean
st_csv_write_memory(const StTimeline *t, const char *path, GError **error)
{
  StTextOut o;
  if (!st_text_open(&o, path, error))
    return FALSE;
  st_text_str(&o, "time_us,device");
  for (int c = 0; c < ST_MEM_N; c++) {
    st_text_c(&o, ',');
    st_text_str(&o, st_mem_name(c));
  }
  st_text_str(&o, ",total\n");
  st_timeline_walk_memory(t, TRUE, memory_row, &o);
  return st_text_close(&o, error);
}

/* ---- comm.csv -------------------------------------------------------------- */

/* A rate change in one column (a link class, a communicator): a record
 * starting (+rate) or ending (-rate). */
typedef struct {
  int64_t t_ns;
  double rate;   /* GB/s, i.e. bytes per ns, already weighted */
  uint32_t seq;  /* tie-break, so float sums always run in the same order */
  int32_t column;
  int32_t begins; /* +1 start, -1 end */
} RateChange;

static int
compare_change(const void *a, const void *b)
{
  const RateChange *x = a, *y = b;
  if (x->t_ns != y->t_ns)
    return x->t_ns < y->t_ns ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* GB/s with 6 decimals (1 kB/s resolution); never "-0.000000". */
static void
append_rate(GString *out, double gbps)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  if (fabs(gbps) < 5e-7)
    gbps = 0.0;
  g_string_append_printf(out, ",%s", g_ascii_formatd(buf, sizeof buf, "%.6f", gbps));
}

static void
append_rates_row(GString *out, int64_t t_ns, const double *rate, int n)
{
  double total = 0;
  append_us(out, t_ns);
  for (int l = 0; l < n; l++) {
    append_rate(out, rate[l]);
    total += rate[l];
  }
  append_rate(out, total);
  g_string_append_c(out, '\n');
}

static void
append_comm_row(GString *out, int64_t t_ns, const double rate[ST_LINK_N])
{
  append_rates_row(out, t_ns, rate, ST_LINK_N);
}

/* Rows of `n` rates and their total from `changes` (sorted here), after
 * `out`'s header: at 0, at every instant a rate changes, at `end_ns`. */
static gboolean
write_rates(const char *path, GString *out, GArray *changes, int n, int64_t end_ns,
            GError **error)
{
  RateChange *ch = (RateChange *)changes->data;
  guint k = changes->len;
  if (k > 0)
    qsort(ch, k, sizeof(RateChange), compare_change);
  g_autofree double *rate = g_new0(double, n);
  g_autofree int *active = g_new0(int, n);
  int64_t last = INT64_MIN;
  if (k == 0 || ch[0].t_ns > 0) {
    append_rates_row(out, 0, rate, n);
    last = 0;
  }
  for (guint i = 0; i < k;) {
    int64_t now = ch[i].t_ns;
    for (; i < k && ch[i].t_ns == now; i++) {
      rate[ch[i].column] += ch[i].rate;
      active[ch[i].column] += ch[i].begins;
      /* Adding and removing the same rates leaves rounding residue; an idle
       * column is exactly zero. */
      if (active[ch[i].column] == 0)
        rate[ch[i].column] = 0.0;
    }
    append_rates_row(out, now, rate, n);
    last = now;
  }
  if (last < end_ns)
    append_rates_row(out, end_ns, rate, n);
  return write_text(path, out, error);
}

/* From the links' record (simulated runs): rates in bytes/s. */
typedef struct {
  GString *out;
  int64_t last;
} NetRows;

static void
net_row(gpointer data, int64_t t_ns, const double rate[ST_LINK_N])
{
  NetRows *x = data;
  double gbps[ST_LINK_N];
  for (int l = 0; l < ST_LINK_N; l++)
    gbps[l] = rate[l] * 1e-9;
  append_comm_row(x->out, t_ns, gbps);
  x->last = t_ns;
}

gboolean
st_csv_write_comm(const StTimeline *t, const char *path, GError **error)
{
  if (t->net != NULL) {
    NetRows x = {g_string_new(NULL), INT64_MIN};
    g_string_append(x.out, "time_us");
    for (int l = 0; l < ST_LINK_N; l++)
      g_string_append_printf(x.out, ",%s", st_link_name(l));
    g_string_append(x.out, ",total\n");
    st_net_trace_class_rates(t->net, net_row, &x);
    if (x.last < t->end_ns) {
      double zero[ST_LINK_N] = {0};
      append_comm_row(x.out, t->end_ns, zero);
    }
    g_autoptr(GString) out = x.out;
    return write_text(path, out, error);
  }
  g_autofree int32_t *weight = st_timeline_device_weights(t);
  g_autoptr(GArray) changes = g_array_new(FALSE, FALSE, sizeof(RateChange));
  for (guint i = 0; i < t->comm->len; i++) {
    const StCommRecord *r = &g_array_index(t->comm, StCommRecord, i);
    if (r->end_ns <= r->start_ns || r->bytes == 0 || r->link >= ST_LINK_N)
      continue;
    /* bytes per ns is GB/s (1e9 B/s); a folded device sends for all it stands for. */
    double rate = r->bytes / (double)(r->end_ns - r->start_ns) * weight[r->device];
    RateChange begin = {r->start_ns, rate, 2 * i, r->link, 1};
    RateChange end = {r->end_ns, -rate, 2 * i + 1, r->link, -1};
    g_array_append_val(changes, begin);
    g_array_append_val(changes, end);
  }
  g_autoptr(GString) out = g_string_new(NULL);
  g_string_append(out, "time_us");
  for (int l = 0; l < ST_LINK_N; l++)
    g_string_append_printf(out, ",%s", st_link_name(l));
  g_string_append(out, ",total\n");
  return write_rates(path, out, changes, ST_LINK_N, t->end_ns, error);
}

/* ---- groups.csv ------------------------------------------------------------ */

gboolean
st_csv_write_groups(const StTimeline *t, const char *path, GError **error)
{
  const StSchedule *s = t->schedule;
  int n = (int)s->comms->len;
  g_autofree int32_t *weight = g_new0(int32_t, s->n_ranks);
  for (int r = 0; r < s->n_ranks; r++)
    weight[t->rank_rep[r]]++;
  g_autoptr(GArray) changes = g_array_new(FALSE, FALSE, sizeof(RateChange));
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    const StProgram *p = g_ptr_array_index(s->programs, s->ranks[r->rank].program);
    const StOp *op = st_program_op(p, r->op);
    if ((op->kind != ST_OP_COMM_COLL && op->kind != ST_OP_COMM_SEND) || op->comm < 0 ||
        op->bytes <= 0 || r->end_ns <= r->start_ns)
      continue;
    const StComm *c = st_schedule_comm(s, op->comm);
    int g = c->group_of[r->rank];
    int size = g < 0 ? 1 : c->offsets[g + 1] - c->offsets[g];
    double bus = (double)op->bytes *
                 (op->kind == ST_OP_COMM_COLL ? st_coll_busbw_factor(op->sub, size) : 1.0);
    double rate = bus / (double)(r->end_ns - r->start_ns) * weight[r->rank];
    RateChange begin = {r->start_ns, rate, 2 * i, op->comm, 1};
    RateChange end = {r->end_ns, -rate, 2 * i + 1, op->comm, -1};
    g_array_append_val(changes, begin);
    g_array_append_val(changes, end);
  }
  g_autoptr(GString) out = g_string_new("time_us");
  for (int c = 0; c < n; c++) {
    g_string_append_c(out, ',');
    append_field(out, st_schedule_comm(s, c)->name);
  }
  g_string_append(out, ",total\n");
  return write_rates(path, out, changes, n, t->end_ns, error);
}

/* ---- links.csv, link_rates.csv ------------------------------------------- */

static void
append_double(GString *out, const char *format, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  if (fabs(v) < 5e-10)
    v = 0.0;
  g_string_append_printf(out, ",%s", g_ascii_formatd(buf, sizeof buf, format, v));
}

gboolean
st_csv_write_links(const StSummary *sum, const char *path, GError **error)
{
  g_return_val_if_fail(sum->links != NULL, FALSE);
  const StNetTrace *net = sum->timeline->net;
  g_autoptr(GString) out = g_string_new("link,name,class,sends,capacity_GBps,stands_for,bytes,"
                                        "utilization,busy_fraction,peak_GBps\n");
  for (guint l = 0; l < net->links->len; l++) {
    const StNetLink *link = &g_array_index(net->links, StNetLink, l);
    const StNetLinkStats *st = &sum->links[l];
    g_string_append_printf(out, "%u,", l);
    append_field(out, link->name);
    g_string_append_printf(out, ",%s,%d", st_link_name(link->link_class), link->sends ? 1 : 0);
    append_double(out, "%.6f", link->capacity * 1e-9);
    g_string_append_printf(out, ",%d,%.0f", link->stands_for, st->bytes);
    append_double(out, "%.6f", st->utilization);
    append_double(out, "%.6f", st->busy_fraction);
    append_double(out, "%.6f", st->peak * 1e-9);
    g_string_append_c(out, '\n');
  }
  return write_text(path, out, error);
}

typedef struct {
  GString *out;
  int n;
  int64_t last;
} RateRows;

static void
rate_row(gpointer data, int64_t t_ns, const double *load)
{
  RateRows *x = data;
  append_us(x->out, t_ns);
  for (int i = 0; i < x->n; i++)
    append_rate(x->out, load[i] * 1e-9);
  g_string_append_c(x->out, '\n');
  x->last = t_ns;
}

gboolean
st_csv_write_link_rates(const StSummary *sum, const char *path, GError **error)
{
  g_return_val_if_fail(sum->links != NULL, FALSE);
  const StNetTrace *net = sum->timeline->net;
  int32_t busiest[ST_BUSIEST_LINKS];
  int n = st_summary_busiest_links(sum, busiest, ST_BUSIEST_LINKS);
  RateRows x = {g_string_new("time_us"), n, INT64_MIN};
  g_autoptr(GString) out = x.out;
  for (int i = 0; i < n; i++) {
    g_string_append_c(out, ',');
    append_field(out, g_array_index(net->links, StNetLink, busiest[i]).name);
  }
  g_string_append_c(out, '\n');
  st_net_trace_link_loads(net, busiest, n, rate_row, &x);
  if (x.last < sum->makespan_ns) {
    double zero[ST_BUSIEST_LINKS] = {0};
    rate_row(&x, sum->makespan_ns, zero);
  }
  return write_text(path, out, error);
}

/* ---- ops.csv --------------------------------------------------------------- */

typedef struct {
  int64_t start_ns;
  int32_t lane;
  int32_t step;
  uint32_t op;
  uint32_t index; /* in timeline->ops */
} OpKey;

static int
compare_op_key(const void *a, const void *b)
{
  const OpKey *x = a, *y = b;
  if (x->lane != y->lane)
    return x->lane < y->lane ? -1 : 1;
  if (x->start_ns != y->start_ns)
    return x->start_ns < y->start_ns ? -1 : 1;
  if (x->op != y->op)
    return x->op < y->op ? -1 : 1;
  if (x->step != y->step)
    return x->step < y->step ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

static const char *
op_what(const StOp *op)
{
  switch ((StOpKind)op->kind) {
  case ST_OP_COMP:
    return st_pass_name(op->sub);
  case ST_OP_COMM_COLL:
    return st_coll_name(op->sub);
  case ST_OP_COMM_SEND:
    return "send";
  case ST_OP_COMM_RECV:
    return "recv";
  case ST_OP_COPY:
    return st_copy_name(op->sub);
  default:
    return "invalid";
  }
}

/* A CSV field into a text file, as append_field. */
static void
put_field(StTextOut *o, const char *text)
{
  if (text == NULL)
    return;
  gboolean quote = strchr(text, ',') != NULL;
  if (quote)
    st_text_c(o, '"');
  for (const char *p = text; *p != '\0'; p++)
    st_text_c(o, *p == '"' ? '\'' : *p == '\n' || *p == '\r' ? ' ' : *p);
  if (quote)
    st_text_c(o, '"');
}

static void
put_op_row(StTextOut *o, const StTimeline *t, StOpNames *names, const StOpRecord *rec,
           int32_t lane)
{
  const StSchedule *s = t->schedule;
  const StProgram *p = st_schedule_program_of(s, rec->rank);
  const StOp *op = st_program_op(p, rec->op);
  const StStream *stream = &g_array_index(p->streams, StStream, op->stream);
  const StModel *model = st_program_model(s, p);
  const char *layer =
    op->layer >= 0 && op->layer < model->n_layers ? model->layers[op->layer].name : NULL;
  const int64_t ints[] = {rec->rank, s->ranks[rec->rank].device, op->stream};
  for (int i = 0; i < 3; i++) {
    st_text_int(o, ints[i]);
    st_text_c(o, ',');
  }
  put_field(o, stream->name);
  const int64_t more[] = {lane, rec->step, rec->op};
  for (int i = 0; i < 3; i++) {
    st_text_c(o, ',');
    st_text_int(o, more[i]);
  }
  st_text_c(o, ',');
  st_text_str(o, st_op_kind_name(op->kind));
  st_text_c(o, ',');
  st_text_str(o, op_what(op));
  st_text_c(o, ',');
  put_field(o, st_op_names_get(names, rec->rank, rec->op));
  st_text_c(o, ',');
  put_field(o, layer);
  st_text_c(o, ',');
  if (op->micro >= 0)
    st_text_int(o, op->micro);
  st_text_c(o, ',');
  st_text_int(o, op->batch);
  st_text_c(o, ',');
  st_text_int(o, op->bytes);
  const int64_t times[] = {rec->ready_ns, rec->start_ns, rec->end_ns, rec->end_ns - rec->start_ns};
  for (int i = 0; i < 4; i++) {
    st_text_c(o, ',');
    st_text_us(o, times[i]);
  }
  st_text_c(o, ',');
  st_text_str(o, st_cost_source_name(rec->source < ST_SRC_N ? rec->source : 0));
  st_text_c(o, ',');
  st_text_str(o, st_timeline_algo_name(t, rec));
  st_text_c(o, '\n');
}

gboolean
st_csv_write_ops(const StTimeline *t, const char *path, GError **error)
{
  const StSchedule *s = t->schedule;
  g_autofree int32_t *lane_first = st_timeline_lanes(t);
  guint n = t->ops->len;
  /* Records in lane order by a counting sort (stable: a lane's records stay
   * in the order they were recorded, which for a stream is its order in
   * time), then each lane sorted if it is not already. */
  int32_t n_lanes = 0;
  for (int r = 0; r < s->n_ranks; r++)
    if (lane_first[r] >= 0)
      n_lanes = MAX(n_lanes, lane_first[r] + (int32_t)st_schedule_program_of(s, r)->streams->len);
  g_autofree guint *start = g_new0(guint, n_lanes + 1);
  g_autofree int32_t *lane_of = g_new(int32_t, n > 0 ? n : 1);
  for (guint i = 0; i < n; i++) {
    const StOpRecord *rec = &g_array_index(t->ops, StOpRecord, i);
    g_return_val_if_fail(rec->rank >= 0 && rec->rank < s->n_ranks, FALSE);
    g_return_val_if_fail(lane_first[rec->rank] >= 0, FALSE);
    const StOp *op = st_program_op(st_schedule_program_of(s, rec->rank), rec->op);
    lane_of[i] = lane_first[rec->rank] + op->stream;
    start[lane_of[i] + 1]++;
  }
  for (int32_t l = 0; l < n_lanes; l++)
    start[l + 1] += start[l];
  g_autofree OpKey *keys = g_new(OpKey, n > 0 ? n : 1);
  g_autofree guint *fill = g_memdup2(start, sizeof(guint) * (n_lanes + 1));
  for (guint i = 0; i < n; i++) {
    const StOpRecord *rec = &g_array_index(t->ops, StOpRecord, i);
    keys[fill[lane_of[i]]++] = (OpKey){rec->start_ns, lane_of[i], rec->step, rec->op, i};
  }
  for (int32_t l = 0; l < n_lanes; l++) {
    guint a = start[l], b = start[l + 1];
    for (guint i = a + 1; i < b; i++)
      if (compare_op_key(&keys[i - 1], &keys[i]) > 0) {
        qsort(keys + a, b - a, sizeof(OpKey), compare_op_key);
        break;
      }
  }

  StTextOut o;
  if (!st_text_open(&o, path, error))
    return FALSE;
  st_text_str(&o, "rank,device,stream,stream_name,lane,step,op,kind,what,name,layer,micro,"
                  "batch,bytes,ready_us,start_us,end_us,duration_us,source,algo\n");
  StOpNames names;
  st_op_names_init(&names, s);
  for (guint i = 0; i < n; i++)
    put_op_row(&o, t, &names, &g_array_index(t->ops, StOpRecord, keys[i].index), keys[i].lane);
  st_op_names_clear(&names);
  return st_text_close(&o, error);
}

gboolean
st_csv_write_loss(const StSummary *sum, const char *path, GError **error)
{
  g_autoptr(GString) out = g_string_new("step,train_loss,heldout_loss,heldout_accuracy\n");
  guint e = 0;
  for (guint i = 0; i < sum->loss->len; i++) {
    g_string_append_printf(out, "%u,%.9g", i + 1, g_array_index(sum->loss, double, i));
    while (sum->eval != NULL && e < sum->eval->len &&
           g_array_index(sum->eval, StEvalPoint, e).steps < (int32_t)i + 1)
      e++;
    if (sum->eval != NULL && e < sum->eval->len &&
        g_array_index(sum->eval, StEvalPoint, e).steps == (int32_t)i + 1) {
      const StEvalPoint *p = &g_array_index(sum->eval, StEvalPoint, e);
      g_string_append_printf(out, ",%.9g,%.6f\n", p->loss, p->accuracy);
    } else {
      g_string_append(out, ",,\n");
    }
  }
  return write_text(path, out, error);
}
