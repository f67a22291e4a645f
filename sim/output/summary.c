/* summary.c: the numbers of a run, computed once from its timeline.
 *
 * Steps: step k ends when its last op ends. The step time is the mean over
 * the steady window: with --steps auto the steps the engine found steady
 * (output/steady.h; or, when it found none, the second half of what ran);
 * with a fixed number of steps every step after the warm-up (the first,
 * or what the schedule declares). Busy fractions and communication figures
 * cover the same window. Memory peaks cover the whole run. A device folded into a representative gets its numbers.
 * Events that share a time stamp are applied together before a peak is
 * taken, so a free and an allocation at the same instant (one op ends, the
 * next starts) do not make a false peak.
 */
#include "output/output.h"

#include <string.h>

#include "base/json.h"
#include "base/util.h"
#include "output/runtime_memory.h"

typedef struct {
  int64_t start, end;
} Window;

static void
step_ends(StSummary *sum, const StTimeline *t)
{
  sum->steps = t->steps;
  sum->step_end_ns = g_new0(int64_t, sum->steps > 0 ? sum->steps : 1);
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    if (r->step >= 0 && r->step < sum->steps && r->end_ns > sum->step_end_ns[r->step])
      sum->step_end_ns[r->step] = r->end_ns;
  }
  /* A step cannot end before the one before it. */
  for (int k = 1; k < sum->steps; k++)
    if (sum->step_end_ns[k] < sum->step_end_ns[k - 1])
      sum->step_end_ns[k] = sum->step_end_ns[k - 1];
  sum->steady = t->steady;
  if (t->steady.auto_steps) {
    /* The window the engine found steady, or the one it settled for. */
    sum->warmup_steps = t->steady.first;
    sum->steady_steps = t->steady.last - t->steady.first + 1;
  } else {
    /* The schedule may say how many steps its warm-up takes (cyclic DP
     * fills its pipeline of staggered workers); at least one step stays
     * steady. */
    int declared = t->schedule->warmup_steps;
    sum->warmup_steps = declared >= 0 ? declared : sum->steps > 1 ? 1 : 0;
    sum->warmup_steps = MIN(sum->warmup_steps, MAX(sum->steps - 1, 0));
    sum->steady_steps = MAX(sum->steps - sum->warmup_steps, 0);
  }
  int w = sum->warmup_steps, n = sum->steady_steps;
  g_return_if_fail(w >= 0 && n >= 0 && w + n <= MAX(sum->steps, 1));
  if (n == 0 || sum->steps == 0)
    return;
  int64_t from = w > 0 ? sum->step_end_ns[w - 1] : 0;
  sum->step_time_ns = (sum->step_end_ns[w + n - 1] - from) / n;
  sum->step_min_ns = INT64_MAX;
  for (int k = w; k < w + n; k++) {
    int64_t d = sum->step_end_ns[k] - (k > 0 ? sum->step_end_ns[k - 1] : 0);
    sum->step_min_ns = MIN(sum->step_min_ns, d);
    sum->step_max_ns = MAX(sum->step_max_ns, d);
  }
}

static Window
steady_window(const StSummary *sum)
{
  Window w = {0, 0};
  st_summary_window(sum, &w.start, &w.end);
  return w;
}

void
st_summary_window(const StSummary *sum, int64_t *start_ns, int64_t *end_ns)
{
  int w = sum->warmup_steps, n = sum->steady_steps;
  if (n == 0 || sum->steps == 0) {
    *start_ns = 0;
    *end_ns = sum->makespan_ns;
    return;
  }
  *start_ns = w > 0 ? sum->step_end_ns[w - 1] : 0;
  *end_ns = sum->step_end_ns[w + n - 1];
}

/* ---- memory ---------------------------------------------------------------- */

/* Peaks of each recorded device (st_timeline_walk_memory's visitor); the
 * device runs out of memory when the figure the device shows at a moment
 * (tensors and what the framework holds beyond them) passes its capacity. */
static void
device_peaks(gpointer data, int device, int64_t t_ns, const int64_t now[ST_MEM_N],
             const StMemEvent *last_alloc)
{
  StSummary *sum = data;
  int row = sum->row_of[device];
  StDeviceSummary *d = &sum->rows[row];
  int64_t total = 0;
  for (int c = 0; c < ST_MEM_N; c++) {
    total += now[c];
    d->peak_by_category[c] = MAX(d->peak_by_category[c], now[c]);
  }
  if (total <= d->peak_bytes)
    return;
  d->peak_bytes = total;
  d->peak_ns = t_ns;
  memcpy(d->at_peak_by_category, now, sizeof(int64_t) * ST_MEM_N);
  st_runtime_memory_figures(&sum->runtime[row], total, d->memory);
  int64_t shown = d->memory[ST_MEMKIND_DEVICE];
  int64_t capacity = sum->timeline->schedule->cluster->gpu.memory_bytes;
  int64_t over = shown - capacity;
  if (capacity <= 0 || over <= 0 || (sum->oom != NULL && sum->oom->device != device &&
                                     over <= sum->oom->over_bytes))
    return;
  /* The worst device, at its peak: the allocation that reached it. */
  if (sum->oom == NULL)
    sum->oom = g_new0(StOutOfMemory, 1);
  *sum->oom = (StOutOfMemory){
    .device = device,
    .rank = last_alloc ? last_alloc->rank : -1,
    .op = last_alloc ? last_alloc->op : UINT32_MAX,
    .buffer = last_alloc ? last_alloc->buffer : -1,
    .peak_bytes = shown,
    .capacity_bytes = capacity,
    .over_bytes = over,
  };
}

int64_t
st_summary_memory_peak(const StSummary *sum, StMemoryKind kind)
{
  int64_t peak = 0;
  for (int i = 0; i < sum->n_rows; i++)
    peak = MAX(peak, sum->rows[i].memory[kind]);
  return peak;
}

const StDeviceSummary *
st_summary_worst_device(const StSummary *sum)
{
  /* Rows are in device order and a representative comes before the devices
   * folded into it, so the first row at the highest peak is the lowest
   * device there. */
  const StDeviceSummary *worst = &sum->rows[0];
  for (int i = 1; i < sum->n_rows; i++)
    if (sum->rows[i].peak_bytes > worst->peak_bytes)
      worst = &sum->rows[i];
  return worst;
}

void
st_summary_set_spread(StSummary *sum, const StResiduals *step, const StResiduals *memory)
{
  sum->step_spread = step != NULL ? *step : (StResiduals){0};
  sum->memory_spread = memory != NULL ? *memory : (StResiduals){0};
}

static int
compare_time(gconstpointer a, gconstpointer b)
{
  const StMemEvent *x = *(StMemEvent *const *)a, *y = *(StMemEvent *const *)b;
  if (x->t_ns != y->t_ns)
    return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
  return (x > y) - (x < y);
}

/* Peak over time of the sum over all devices, folded devices weighted; the
 * events of one instant are applied together. */
static void
total_peaks(StSummary *sum)
{
  const StTimeline *t = sum->timeline;
  guint n = t->mem->len;
  g_autofree int32_t *weight = st_timeline_device_weights(t);
  g_autofree const StMemEvent **ev = g_new(const StMemEvent *, n > 0 ? n : 1);
  gboolean sorted = TRUE;
  for (guint i = 0; i < n; i++) {
    ev[i] = &g_array_index(t->mem, StMemEvent, i);
    sorted = sorted && (i == 0 || ev[i - 1]->t_ns <= ev[i]->t_ns);
  }
  /* The simulator records in time order; a measured run per device only. */
  if (!sorted)
    qsort(ev, n, sizeof *ev, compare_time);
  int64_t now[ST_MEM_N] = {0};
  for (guint i = 0; i < n;) {
    int64_t at = ev[i]->t_ns;
    for (; i < n && ev[i]->t_ns == at; i++)
      now[ev[i]->category] += ev[i]->delta * weight[ev[i]->device];
    int64_t total = 0;
    for (int c = 0; c < ST_MEM_N; c++) {
      total += now[c];
      sum->total_peak_by_category[c] = MAX(sum->total_peak_by_category[c], now[c]);
    }
    sum->total_peak_bytes = MAX(sum->total_peak_bytes, total);
  }
}

/* ---- time on devices ------------------------------------------------------ */

static int
compare_interval(gconstpointer a, gconstpointer b)
{
  const Window *x = a, *y = b;
  if (x->start != y->start)
    return (x->start > y->start) - (x->start < y->start);
  return (x->end > y->end) - (x->end < y->end);
}

/* Length of the union of intervals, clipped to w. Sorts `iv`. */
static int64_t
union_length(GArray *iv, Window w)
{
  g_array_sort(iv, compare_interval);
  int64_t total = 0, cur_start = 0, cur_end = -1;
  for (guint i = 0; i < iv->len; i++) {
    Window x = g_array_index(iv, Window, i);
    x.start = MAX(x.start, w.start);
    x.end = MIN(x.end, w.end);
    if (x.end <= x.start)
      continue;
    if (x.start > cur_end) {
      if (cur_end > cur_start)
        total += cur_end - cur_start;
      cur_start = x.start;
      cur_end = x.end;
    } else if (x.end > cur_end) {
      cur_end = x.end;
    }
  }
  if (cur_end > cur_start)
    total += cur_end - cur_start;
  return total;
}

/* Staggered ranks (a late start_ns) run their steps later: a step ends when
 * its latest rank ends, so an early device's own steady window is the
 * common one moved back by how much earlier it started. [n_rows] of ns
 * (<= 0), all 0 without staggering (then in O(ranks) with nothing per
 * device). Transfer full. */
static int64_t *
row_shifts(const StSummary *sum)
{
  const StSchedule *s = sum->timeline->schedule;
  int64_t *row_shift = g_new0(int64_t, MAX(sum->n_rows, 1));
  gboolean staggered = FALSE;
  for (int r = 0; r < s->n_ranks && !staggered; r++)
    staggered = s->ranks[r].start_ns != 0;
  if (!staggered)
    return row_shift;
  g_autofree int64_t *shift = g_new0(int64_t, s->n_devices);
  g_autofree gboolean *seen = g_new0(gboolean, s->n_devices);
  int64_t latest = 0;
  for (int r = 0; r < s->n_ranks; r++) {
    int d = s->ranks[r].device;
    shift[d] = seen[d] ? MIN(shift[d], s->ranks[r].start_ns) : s->ranks[r].start_ns;
    seen[d] = TRUE;
  }
  for (int d = 0; d < s->n_devices; d++)
    latest = MAX(latest, shift[d]);
  for (int d = 0; d < s->n_devices; d++)
    if (sum->rows[sum->row_of[d]].device == d)
      row_shift[sum->row_of[d]] = seen[d] ? shift[d] - latest : 0;
  return row_shift;
}

static Window
moved(Window w, int64_t by)
{
  return (Window){w.start + by, w.end + by};
}

static void
busy_and_exposed(StSummary *sum, const int64_t *shift)
{
  const StTimeline *t = sum->timeline;
  const StSchedule *s = t->schedule;
  Window w = steady_window(sum);
  GArray **comp = g_new0(GArray *, MAX(sum->n_rows, 1)); /* by row */
  g_autoptr(GArray) comm0 = g_array_new(FALSE, FALSE, sizeof(Window));
  int n_comms = (int)s->comms->len;
  GArray **by_comm = g_new0(GArray *, MAX(n_comms, 1));
  int rep0 = s->n_devices > 0 ? t->device_rep[0] : -1;
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    int d = s->ranks[r->rank].device, row = sum->row_of[d];
    Window x = {r->start_ns, r->end_ns}, in = moved(w, shift[row]);
    /* union_length clips to the row's window: what lies outside adds
     * nothing there, and sorts for nothing (2 of a planner run's 3 steps). */
    if (x.end <= in.start || x.start >= in.end)
      continue;
    const StOp *op = st_program_op(st_schedule_program_of(s, r->rank), r->op);
    if (op->kind == ST_OP_COMP) {
      if (comp[row] == NULL)
        comp[row] = g_array_new(FALSE, FALSE, sizeof(Window));
      g_array_append_val(comp[row], x);
    } else if (d == rep0 && op->kind != ST_OP_COPY) {
      g_array_append_val(comm0, x);
      if (op->comm >= 0 && op->comm < n_comms) {
        if (by_comm[op->comm] == NULL)
          by_comm[op->comm] = g_array_new(FALSE, FALSE, sizeof(Window));
        g_array_append_val(by_comm[op->comm], x);
      }
    }
  }
  int64_t length = w.end - w.start;
  for (int i = 0; i < sum->n_rows; i++) {
    if (comp[i] != NULL && length > 0)
      sum->rows[i].busy_fraction =
        (double)union_length(comp[i], moved(w, shift[i])) / (double)length;
  }
  /* Exposed communication on device 0: time some comm op is in flight and no
   * kernel runs = |comm| - |comm and compute| = |comm or compute| - |compute|. */
  if (rep0 >= 0 && comm0->len > 0) {
    int row0 = sum->row_of[rep0];
    Window w0 = moved(w, shift[row0]);
    int64_t only_comp = comp[row0] ? union_length(comp[row0], w0) : 0;
    if (comp[row0] != NULL)
      g_array_append_vals(comm0, comp[row0]->data, comp[row0]->len);
    sum->comm_exposed_ns = union_length(comm0, w0) - only_comp;
    for (int c = 0; c < n_comms; c++) {
      if (by_comm[c] == NULL)
        continue;
      if (comp[row0] != NULL)
        g_array_append_vals(by_comm[c], comp[row0]->data, comp[row0]->len);
      sum->comm_exposed_by_comm[c] = union_length(by_comm[c], w0) - only_comp;
    }
  }
  for (int c = 0; c < n_comms; c++)
    if (by_comm[c] != NULL)
      g_array_unref(by_comm[c]);
  g_free(by_comm);
  for (int i = 0; i < sum->n_rows; i++)
    if (comp[i] != NULL)
      g_array_unref(comp[i]);
  g_free(comp);
}

/* ---- communication --------------------------------------------------------- */

typedef struct {
  int64_t t;
  double rate; /* bytes/s, + at start, - at end */
} RateStep;

static int
compare_step(gconstpointer a, gconstpointer b)
{
  const RateStep *x = a, *y = b;
  return (x->t > y->t) - (x->t < y->t);
}

/* From the links' record: each class's send rate is a step function. */
typedef struct {
  StSummary *sum;
  Window w;
  int64_t t;               /* the current step began */
  double rate[ST_LINK_N];  /* bytes/s over it */
  double peak;
} NetSweep;

static void
net_interval(NetSweep *x, int64_t until)
{
  int64_t a = MAX(x->t, x->w.start), b = MIN(until, x->w.end);
  if (b <= a)
    return;
  double total = 0;
  for (int c = 0; c < ST_LINK_N; c++) {
    double bytes = x->rate[c] * (double)(b - a) * 1e-9;
    x->sum->comm_bytes_by_link[c] += bytes;
    x->sum->comm_bytes_total += bytes;
    total += x->rate[c];
  }
  x->peak = MAX(x->peak, total);
}

static void
net_step(gpointer data, int64_t t_ns, const double rate[ST_LINK_N])
{
  NetSweep *x = data;
  net_interval(x, t_ns);
  x->t = t_ns;
  memcpy(x->rate, rate, sizeof x->rate);
}

/* Each link's figures over the window; the bottleneck, and how far above
 * the links of its kind it is. */
static void
link_balance(StSummary *sum, Window w)
{
  const StNetTrace *net = sum->timeline->net;
  sum->links = st_net_trace_link_stats(net, w.start, w.end);
  int busiest[1];
  if (st_summary_busiest_links(sum, busiest, 1) == 0)
    return;
  sum->bottleneck = busiest[0];
  int kind = g_array_index(net->links, StNetLink, busiest[0]).kind;
  double used = 0, count = 0;
  for (guint l = 0; l < net->links->len; l++) {
    const StNetLink *link = &g_array_index(net->links, StNetLink, l);
    if (link->kind != kind)
      continue;
    used += sum->links[l].utilization * link->stands_for;
    count += link->stands_for;
  }
  sum->link_imbalance = sum->links[busiest[0]].utilization / (used / count);
}

int
st_summary_busiest_links(const StSummary *sum, int32_t *out, int max)
{
  if (sum->links == NULL)
    return 0;
  int n = 0;
  guint n_links = sum->timeline->net->links->len;
  for (guint l = 0; l < n_links; l++) {
    if (sum->links[l].bytes <= 0)
      continue;
    /* Insertion into the sorted top `max`. */
    int at = n;
    while (at > 0 && sum->links[out[at - 1]].utilization < sum->links[l].utilization)
      at--;
    if (at >= max)
      continue;
    if (n < max)
      n++;
    memmove(&out[at + 1], &out[at], sizeof(int32_t) * (size_t)(n - 1 - at));
    out[at] = (int32_t)l;
  }
  return n;
}

static void
communication_net(StSummary *sum)
{
  NetSweep x = {.sum = sum, .w = steady_window(sum)};
  st_net_trace_class_rates(sum->timeline->net, net_step, &x);
  net_interval(&x, sum->makespan_ns);
  double mean = sum->comm_bytes_total / ((double)(x.w.end - x.w.start) * 1e-9);
  sum->comm_peak_to_mean = mean > 0 ? x.peak / mean : 0;
  link_balance(sum, x.w);
}

static void
communication(StSummary *sum, const int64_t *shift)
{
  const StTimeline *t = sum->timeline;
  if (t->net != NULL) {
    communication_net(sum);
    return;
  }
  Window steady = steady_window(sum), w = steady;
  g_autoptr(GArray) steps = g_array_new(FALSE, FALSE, sizeof(RateStep));
  g_autofree int32_t *weight_of = st_timeline_device_weights(t);
  for (guint i = 0; i < t->comm->len; i++) {
    const StCommRecord *c = &g_array_index(t->comm, StCommRecord, i);
    w = moved(steady, shift[sum->row_of[c->device]]);
    int64_t a = MAX(c->start_ns, w.start), b = MIN(c->end_ns, w.end);
    if (c->end_ns <= c->start_ns || b <= a)
      continue;
    double weight = weight_of[c->device];
    double rate = c->bytes / ((double)(c->end_ns - c->start_ns) * 1e-9) * weight;
    double bytes = rate * (double)(b - a) * 1e-9;
    sum->comm_bytes_total += bytes;
    sum->comm_bytes_by_link[c->link] += bytes;
    RateStep up = {a, rate}, down = {b, -rate};
    g_array_append_val(steps, up);
    g_array_append_val(steps, down);
  }
  w = steady;
  if (steps->len == 0 || w.end <= w.start)
    return;
  g_array_sort(steps, compare_step);
  double rate = 0, peak = 0;
  for (guint i = 0; i < steps->len;) {
    int64_t at = g_array_index(steps, RateStep, i).t;
    for (; i < steps->len && g_array_index(steps, RateStep, i).t == at; i++)
      rate += g_array_index(steps, RateStep, i).rate;
    peak = MAX(peak, rate);
  }
  double mean = sum->comm_bytes_total / ((double)(w.end - w.start) * 1e-9);
  sum->comm_peak_to_mean = mean > 0 ? peak / mean : 0;
}

/* ---- the summary ------------------------------------------------------------ */

StSummary *
st_summary_new(const StTimeline *t)
{
  const StSchedule *s = t->schedule;
  StSummary *sum = g_new0(StSummary, 1);
  sum->timeline = t;
  sum->makespan_ns = t->end_ns;
  sum->bottleneck = -1;
  step_ends(sum, t);
  if (sum->step_time_ns > 0)
    sum->samples_per_s = (double)s->settings.global_batch / (sum->step_time_ns * 1e-9);
  /* A row per recorded device; a folded device shares its representative's. */
  sum->row_of = g_new(int32_t, MAX(s->n_devices, 1));
  for (int d = 0; d < s->n_devices; d++)
    sum->row_of[d] = t->device_rep[d] == d ? sum->n_rows++ : -1;
  sum->rows = g_new0(StDeviceSummary, MAX(sum->n_rows, 1));
  for (int d = 0; d < s->n_devices; d++)
    if (sum->row_of[d] >= 0)
      sum->rows[sum->row_of[d]].device = d;
  /* A measured run's pool is what it held; a prediction adds what the
   * framework holds beyond tensors (the recorded devices' ranks). */
  sum->runtime = g_new0(StRuntimeMemory, MAX(sum->n_rows, 1));
  if (!t->measured)
    st_runtime_memory_rows(s, sum->row_of, sum->n_rows, sum->runtime);
  for (int d = 0; d < s->n_devices; d++)
    if (sum->row_of[d] < 0)
      sum->row_of[d] = sum->row_of[t->device_rep[d]];
  /* Devices hosting a rank, one bit each. */
  g_autofree guint8 *used = g_new0(guint8, (gsize)s->n_devices / 8 + 1);
  for (int r = 0; r < s->n_ranks; r++) {
    int d = s->ranks[r].device;
    sum->gpus_used += !(used[d / 8] & (1u << (d % 8)));
    used[d / 8] |= (guint8)(1u << (d % 8));
  }
  sum->comm_exposed_by_comm = g_new0(int64_t, MAX(s->comms->len, 1));
  st_mfu_of(s, sum->step_time_ns, sum->gpus_used, &sum->mfu);
  /* CPU threads on the host have no dense peak to hold them to. */
  if (t->on_host)
    sum->mfu.peak_flops = sum->mfu.mfu = 0;
  st_timeline_walk_memory(t, FALSE, device_peaks, sum);
  for (int i = 0; i < sum->n_rows; i++)
    st_runtime_memory_figures(&sum->runtime[i], sum->rows[i].peak_bytes, sum->rows[i].memory);
  total_peaks(sum);
  g_autofree int64_t *shift = row_shifts(sum);
  busy_and_exposed(sum, shift);
  communication(sum, shift);
  for (guint i = 0; i < t->ops->len; i++)
    sum->ops_by_source[g_array_index(t->ops, StOpRecord, i).source]++;
  return sum;
}

void
st_summary_free(StSummary *sum)
{
  if (sum == NULL)
    return;
  g_free(sum->step_end_ns);
  g_free(sum->rows);
  g_free(sum->row_of);
  g_free(sum->comm_exposed_by_comm);
  g_free(sum->oom);
  g_free(sum->runtime);
  g_free(sum->links);
  cJSON_Delete(sum->run);
  if (sum->loss != NULL)
    g_array_unref(sum->loss);
  if (sum->eval != NULL)
    g_array_unref(sum->eval);
  g_free(sum);
}
