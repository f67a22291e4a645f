/* profile_import_kineto.c: see profile_import_kineto.h. */
#include "profile/profile_kineto_private.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "base/limits.h"
#include "base/util.h"

void
st_kineto_import_clear(StKinetoImport *stats)
{
  g_free(stats->device);
  g_free(stats->unattributed_top);
  if (stats->missing != NULL)
    g_ptr_array_unref(stats->missing);
  *stats = (StKinetoImport){0};
}

/* ---- where each CPU event sits --------------------------------------------------- */

/* What nest() sorts by, copied out of the events: sorting indices into
 * 4·10^6 events of ~90 bytes read two scattered events per comparison. */
typedef struct {
  int64_t ts, end;
  int thread, index;
} NestKey;

static int
by_thread_then_start(const void *a, const void *b)
{
  const NestKey *x = a, *y = b;
  if (x->thread != y->thread)
    return x->thread < y->thread ? -1 : 1;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  if (x->end != y->end)
    return x->end > y->end ? -1 : 1; /* the longer first: it holds the other */
  return (x->index > y->index) - (x->index < y->index);
}

static gboolean
is_container(const Ev *e)
{
  return e->kind == EV_OPTIM || e->eval || e->comm;
}

/* One sweep per thread, in start order: the innermost evaluate_function,
 * optimizer step and communication operator holding each event (operators
 * nest properly), and whether an operator is outermost. Layer ranges are
 * found apart (layer_ranges). */
static void
nest(Kineto *k)
{
  /* The CPU events only: the sweep passes over the device's. */
  g_autofree NestKey *keys = g_new(NestKey, MAX(k->ev->len, 1));
  guint n = 0;
  for (guint i = 0; i < k->ev->len; i++) {
    const Ev *e = ev_at(k, i);
    if (e->kind != EV_DEVICE && e->kind != EV_NCCL)
      keys[n++] = (NestKey){e->ts, e->end, e->thread, (int)i};
  }
  qsort(keys, n, sizeof *keys, by_thread_then_start);
  g_autofree int *order = g_new(int, MAX(n, 1));
  for (guint o = 0; o < n; o++)
    order[o] = keys[o].index;
  g_clear_pointer(&keys, g_free);
  g_autoptr(GArray) active = g_array_new(FALSE, FALSE, sizeof(int));
  int thread = -1;
  int64_t outer_end = INT64_MIN;
  for (guint o = 0; o < n; o++) {
    Ev *e = ev_at(k, order[o]);
    if (e->thread != thread) {
      thread = e->thread;
      g_array_set_size(active, 0);
      outer_end = INT64_MIN;
    }
    for (guint a = active->len; a-- > 0;)
      if (ev_at(k, g_array_index(active, int, a))->end <= e->ts)
        g_array_remove_index(active, a);
    for (guint a = active->len; a-- > 0;) {
      int c = g_array_index(active, int, a);
      const Ev *ce = ev_at(k, c);
      if (ce->ts > e->ts || e->end > ce->end)
        continue;
      if (ce->kind == EV_OPTIM && e->in_optim < 0)
        e->in_optim = c;
      if (ce->eval && e->in_eval < 0)
        e->in_eval = c;
      if (ce->comm && e->in_comm < 0)
        e->in_comm = c;
    }
    if (e->eval)
      e->in_eval = order[o];
    if (e->comm)
      e->in_comm = order[o];
    if (e->kind == EV_OPTIM)
      e->in_optim = order[o];
    if (e->kind == EV_OP && e->ts >= outer_end) {
      e->outer = 1;
      outer_end = e->end;
    }
    if (is_container(e))
      g_array_append_val(active, order[o]);
  }
}

/* Layer ranges need not nest with the operators: a backward range opened
 * and closed by autograd hooks starts just after the first autograd node of
 * its layer began and ends just after the next layer's began. So an event
 * belongs to the innermost layer range (latest start) holding its last
 * nanosecond. Per thread, ranges by start with the running maximum of
 * their ends, so that a lookup stops where no earlier range reaches. */
static int
by_start_then_index(const void *a, const void *b)
{
  const NestKey *x = a, *y = b;
  if (x->thread != y->thread)
    return x->thread < y->thread ? -1 : 1;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

static void
layer_ranges(Kineto *k)
{
  /* The ranges' thread, start and end copied out, in their order: each
   * CPU event's binary search then reads one array, not ~20 scattered
   * events of 4·10^6. */
  guint n = 0;
  for (guint i = 0; i < k->ev->len; i++)
    n += ev_at(k, i)->kind == EV_LAYER;
  g_autofree NestKey *r = g_new(NestKey, MAX(n, 1));
  n = 0;
  for (guint i = 0; i < k->ev->len; i++) {
    const Ev *e = ev_at(k, i);
    if (e->kind == EV_LAYER)
      r[n++] = (NestKey){e->ts, e->end, e->thread, (int)i};
  }
  qsort(r, n, sizeof *r, by_start_then_index);
  g_autofree int64_t *reach = g_new(int64_t, MAX(n, 1)); /* max end of r[0..i] on its thread */
  for (guint i = 0; i < n; i++) {
    gboolean same = i > 0 && r[i - 1].thread == r[i].thread;
    reach[i] = same ? MAX(reach[i - 1], r[i].end) : r[i].end;
  }
  for (guint i = 0; i < k->ev->len; i++) {
    Ev *e = ev_at(k, i);
    if (e->kind == EV_DEVICE || e->kind == EV_NCCL || e->kind == EV_LAYER)
      continue;
    int64_t point = MAX(e->ts, e->end - 1);
    /* The last range of the thread starting at or before `point`. */
    guint lo = 0, hi = n;
    while (lo < hi) {
      guint mid = (lo + hi) / 2;
      const NestKey *m = &r[mid];
      if (m->thread < e->thread || (m->thread == e->thread && m->ts <= point))
        lo = mid + 1;
      else
        hi = mid;
    }
    for (guint j = lo; j-- > 0;) {
      const NestKey *c = &r[j];
      if (c->thread != e->thread || reach[j] <= point)
        break;
      if (point < c->end) {
        e->in_layer = c->index;
        break;
      }
    }
  }
}

static gint
by_start(gconstpointer a, gconstpointer b, gpointer data)
{
  const Ev *x = ev_at(data, *(const int *)a), *y = ev_at(data, *(const int *)b);
  return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* Steps: ProfilerStep ranges by start; an event is in the one holding its
 * start. Without any, the whole trace is step 0. */
static void
assign_steps(Kineto *k)
{
  for (guint i = 0; i < k->ev->len; i++)
    if (ev_at(k, i)->kind == EV_STEP) {
      int v = (int)i;
      g_array_append_val(k->steps, v);
    }
  g_array_sort_with_data(k->steps, by_start, k);
  k->n_steps = MAX((int)k->steps->len, 1);
  for (guint i = 0; i < k->ev->len; i++) {
    Ev *e = ev_at(k, i);
    if (k->steps->len == 0) {
      e->step = 0;
      continue;
    }
    for (guint s = 0; s < k->steps->len && e->step < 0; s++) {
      const Ev *st = ev_at(k, g_array_index(k->steps, int, s));
      if (st->ts <= e->ts && e->ts < st->end)
        e->step = (int)s;
    }
  }
}

/* ---- attributing the work --------------------------------------------------------- */

/* The key of what `anchor` did: 2 * layer + (bwd), the optimizer, or -1. */
static int
key_of(const Kineto *k, const Ev *anchor, GHashTable *seq_layer)
{
  if (anchor->in_layer >= 0) {
    const Ev *r = ev_at(k, anchor->in_layer);
    return 2 * r->layer + (r->pass == ST_PASS_BWD);
  }
  if (anchor->in_eval >= 0) {
    int64_t seq = ev_at(k, anchor->in_eval)->seq;
    gpointer l = seq >= 0 ? g_hash_table_lookup(seq_layer, &seq) : NULL;
    if (l != NULL)
      return 2 * (GPOINTER_TO_INT(l) - 1) + 1;
  }
  if (anchor->in_optim >= 0)
    return k->n_keys - 1;
  return -1;
}

static void
attribute(Kineto *k, GHashTable *seq_layer, GHashTable *launch)
{
  for (guint i = 0; i < k->ev->len; i++) {
    const Ev *e = ev_at(k, i);
    const Ev *anchor = NULL;
    if (k->gpu && e->kind == EV_DEVICE) {
      gpointer l = e->corr >= 0 ? g_hash_table_lookup(launch, &e->corr) : NULL;
      anchor = l != NULL ? ev_at(k, GPOINTER_TO_INT(l) - 1) : NULL;
      k->kernels++;
      k->orphans += anchor == NULL;
    } else if (!k->gpu && e->kind == EV_OP && e->outer) {
      anchor = e;
    } else {
      continue;
    }
    int step = anchor != NULL ? anchor->step : e->step;
    if (step < 0)
      continue; /* outside the profiled steps */
    int key = anchor != NULL ? key_of(k, anchor, seq_layer) : -1;
    double ns = (double)(e->end - e->ts);
    if (key >= 0) {
      k->sum[key * k->n_steps + step] += ns;
      continue;
    }
    k->unattributed += ns;
    double *by = g_hash_table_lookup(k->unattributed_by_name, e->name);
    if (by == NULL) {
      by = g_new0(double, 1);
      g_hash_table_insert(k->unattributed_by_name, (gpointer)e->name, by);
    }
    *by += ns;
  }
  for (guint i = 0; i < k->ev->len; i++) {
    const Ev *e = ev_at(k, i);
    if (e->step < 0)
      continue;
    if (e->kind == EV_LAYER)
      k->occ[(2 * e->layer + (e->pass == ST_PASS_BWD)) * k->n_steps + e->step]++;
    if (e->kind == EV_OPTIM)
      k->occ[(k->n_keys - 1) * k->n_steps + e->step]++;
  }
}

/* The per-occurrence time of `key` in each step that ran it: its median and
 * spread (p90 - p10). FALSE when no step did. */
static gboolean
time_of(const Kineto *k, int key, double *median, double *spread)
{
  double *v = k->step_times; /* n_steps; a fresh array per key was 2 per layer */
  int n = 0;
  gboolean bwd = key < k->n_keys - 1 && key % 2 == 1;
  for (int s = 0; s < k->n_steps; s++) {
    double sum = k->sum[key * k->n_steps + s];
    int occ = k->occ[key * k->n_steps + s];
    if (occ == 0 && bwd) /* backward found through sequence numbers: per forward */
      occ = k->occ[(key - 1) * k->n_steps + s];
    if (sum <= 0 && occ == 0)
      continue;
    v[n++] = sum / MAX(occ, 1);
  }
  if (n == 0)
    return FALSE;
  qsort(v, (size_t)n, sizeof *v, st_compare_double);
  *median = st_quantile(v, n, 0.5);
  *spread = st_quantile(v, n, 0.9) - st_quantile(v, n, 0.1);
  return TRUE;
}

/* The batch from the shapes: the first dimension of the first input of the
 * first operator inside the first forward range. */
static int64_t
batch_from_shapes(const Kineto *k)
{
  int64_t best_ts = INT64_MAX, batch = 0;
  for (guint i = 0; i < k->ev->len; i++) {
    const Ev *e = ev_at(k, i);
    if (e->kind != EV_OP || e->in_layer < 0 || ev_at(k, e->in_layer)->pass != ST_PASS_FWD ||
        e->ts >= best_ts)
      continue;
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(e->args, "Input Dims");
    const cJSON *first = cJSON_GetArrayItem(dims, 0);
    const cJSON *d0 = cJSON_GetArrayItem(first, 0);
    if (json_whole(d0, 0) >= 1) {
      best_ts = e->ts;
      batch = json_whole(d0, 0);
    }
  }
  return batch;
}

/* ---- the whole ----------------------------------------------------------------------- */

static gint
by_time_desc(gconstpointer a, gconstpointer b, gpointer table)
{
  double x = *(double *)g_hash_table_lookup(table, *(const char *const *)a);
  double y = *(double *)g_hash_table_lookup(table, *(const char *const *)b);
  return (x < y) - (x > y);
}

static char *
top_unattributed(const Kineto *k)
{
  if (g_hash_table_size(k->unattributed_by_name) == 0)
    return NULL;
  g_autoptr(GPtrArray) names = g_ptr_array_new();
  GHashTableIter it;
  gpointer key;
  g_hash_table_iter_init(&it, k->unattributed_by_name);
  while (g_hash_table_iter_next(&it, &key, NULL))
    g_ptr_array_add(names, key);
  g_ptr_array_sort_with_data(names, by_time_desc, k->unattributed_by_name);
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < names->len && i < 4; i++) {
    const char *name = g_ptr_array_index(names, i);
    double ns = *(double *)g_hash_table_lookup(k->unattributed_by_name, name);
    g_string_append_printf(s, "%s%s %.1f us", i ? ", " : "", name, ns / k->n_steps / 1e3);
  }
  return g_string_free(s, FALSE);
}

static const char *
trace_device(const cJSON *root, gboolean gpu)
{
  const cJSON *props = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root,
                                                                           "deviceProperties"), 0);
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(props, "name");
  return cJSON_IsString(name) ? name->valuestring : gpu ? "gpu" : "host";
}

/* The model's layers by name, the first of each name (looked up for every
 * event: a scan of the layers made a trace of N layers quadratic). */
static GHashTable *
layers_by_name(const StModel *m)
{
  GHashTable *t = g_hash_table_new(g_str_hash, g_str_equal);
  for (int i = m->n_layers - 1; i >= 0; i--)
    g_hash_table_insert(t, m->layers[i].name, GINT_TO_POINTER(i + 1));
  return t;
}

static void
kineto_init(Kineto *k, const char *path, const StModel *model)
{
  *k = (Kineto){.path = path, .model = model, .n_keys = 2 * model->n_layers + 1};
  k->layer_of = layers_by_name(model);
  k->ev = g_array_new(FALSE, FALSE, sizeof(Ev));
  k->steps = g_array_new(FALSE, FALSE, sizeof(int));
  k->unattributed_by_name = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, g_free);
}

static void
kineto_clear(Kineto *k)
{
  if (k->names != NULL)
    g_string_chunk_free(k->names);
  k->names = NULL;
  g_clear_pointer(&k->args, g_ptr_array_unref);
  g_clear_pointer(&k->ev, g_array_unref);
  g_clear_pointer(&k->steps, g_array_unref);
  g_clear_pointer(&k->sum, g_free);
  g_clear_pointer(&k->occ, g_free);
  g_clear_pointer(&k->step_times, g_free);
  g_clear_pointer(&k->unattributed_by_name, g_hash_table_unref);
  g_clear_pointer(&k->layer_of, g_hash_table_unref);
  for (gsize i = 0; i < G_N_ELEMENTS(k->not_layer); i++)
    g_clear_pointer(&k->not_layer[i], g_free);
}

/* The profile from the events read into `k`; `stats` filled. */
static StProfile *
build(Kineto *k, const cJSON *root, const StKinetoOptions *options, StKinetoImport *stats,
      GError **error)
{
  const StModel *model = k->model;
  nest(k);
  layer_ranges(k);
  assign_steps(k);
  /* Sequence numbers of forward operators, and the launches of kernels. */
  g_autoptr(GHashTable) seq_layer = g_hash_table_new(g_int64_hash, g_int64_equal);
  g_autoptr(GHashTable) launch = g_hash_table_new(g_int64_hash, g_int64_equal);
  for (guint i = 0; i < k->ev->len; i++) {
    Ev *e = ev_at(k, i);
    if (e->kind == EV_DEVICE || e->kind == EV_NCCL)
      continue;
    if (e->seq >= 0 && e->in_layer >= 0 && ev_at(k, e->in_layer)->pass == ST_PASS_FWD &&
        !g_hash_table_contains(seq_layer, &e->seq))
      g_hash_table_insert(seq_layer, &e->seq, GINT_TO_POINTER(ev_at(k, e->in_layer)->layer + 1));
    if (e->corr >= 0)
      g_hash_table_insert(launch, &e->corr, GINT_TO_POINTER((int)i + 1));
  }
  k->sum = g_new0(double, (gsize)k->n_keys * k->n_steps);
  k->step_times = g_new(double, k->n_steps);
  k->occ = g_new0(int, (gsize)k->n_keys * k->n_steps);
  attribute(k, seq_layer, launch);

  gboolean ranges = FALSE;
  for (guint i = 0; i < k->ev->len && !ranges; i++)
    ranges = ev_at(k, i)->kind == EV_LAYER;
  if (!ranges) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "%s: no range in the trace is named as a layer of model '%s' (e.g. '%s', from "
                "record_function or the module's name): nothing to import",
                k->path, model->name, model->n_layers > 0 ? model->layers[0].name : "");
    return NULL;
  }
  stats->events = (int)k->ev->len;
  stats->steps = k->n_steps;
  stats->gpu = k->gpu;
  stats->batch = options->batch > 0 ? options->batch : batch_from_shapes(k);
  stats->device = g_strdup(options->device != NULL ? options->device : trace_device(root, k->gpu));
  if (stats->batch <= 0) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "%s: the traced batch size is not in the trace (profile with record_shapes=True, "
                "or give --batch N)", k->path);
    return NULL;
  }
  stats->orphans = k->orphans;
  if (k->kernels > 0 && k->orphans == k->kernels) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "%s: none of the %d GPU kernels' correlation ids matches a CPU launch in the "
                "trace (\"args\": {\"correlation\": N} on both): no kernel can be given to a layer",
                k->path, k->kernels);
    return NULL;
  }
  g_autoptr(StProfile) p = st_profile_new();
  g_autofree char *base = g_path_get_basename(k->path);
  g_autofree char *source = g_strdup_printf(
    "imported from the PyTorch profiler trace %s (%s, %d steps): per-layer %s time by "
    "record_function ranges, median over steps", base, k->gpu ? "GPU kernels" : "CPU operators",
    k->n_steps, k->gpu ? "kernel" : "operator");
  st_profile_set_device(p, stats->device, "unknown", "unknown", "unknown", source);
  stats->missing = g_ptr_array_new_with_free_func(g_free);
  double t, spread, total = 0;
  for (int l = 0; l < model->n_layers; l++) {
    const StLayer *layer = &model->layers[l];
    for (int bwd = 0; bwd < 2; bwd++)
      if (time_of(k, 2 * l + bwd, &t, &spread)) {
        st_profile_add_layer(p, stats->device, layer->name, layer->signature,
                             bwd ? ST_PASS_BWD : ST_PASS_FWD, stats->batch, t, spread);
        stats->entries++;
        total += t;
      } else if (!bwd) {
        g_ptr_array_add(stats->missing, g_strdup(layer->name));
      }
  }
  if (stats->entries == 0) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "%s: no layer range of model '%s' in the trace holds work: nothing to import",
                k->path, model->name);
    return NULL;
  }
  if (total <= 0) {
    g_set_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID,
                "%s: every layer of model '%s' found in the trace measures 0 us (its events "
                "have no durations): a profile of zeros would make every later simulation free",
                k->path, model->name);
    return NULL;
  }
  for (guint i = 0; i < k->ev->len && !stats->optimizer; i++) {
    const Ev *e = ev_at(k, i);
    if (e->kind != EV_OPTIM || !time_of(k, k->n_keys - 1, &t, &spread) || model->params <= 0)
      continue;
    g_autofree char *cls = g_ascii_strdown(e->name + strlen("Optimizer.step#"), -1);
    const char *name = g_str_has_prefix(cls, "sgd.") ? "sgd"
                       : g_str_has_prefix(cls, "adam") ? "adam" : NULL;
    if (name != NULL) {
      st_profile_add_layer(p, stats->device, name, NULL, ST_PASS_OPTIM, model->params, t,
                           spread);
      stats->optimizer = TRUE;
    }
  }
  const cJSON *dist = cJSON_GetObjectItemCaseSensitive(root, "distributedInfo");
  int64_t world = arg_int(dist, "world_size", 0);
  kineto_add_links(k, p, stats->device, options->link, launch,
                   world > 0 && world <= ST_MAX_GPUS ? (int)world : 0, stats);
  stats->unattributed_ns = k->unattributed / k->n_steps;
  stats->unattributed_top = top_unattributed(k);
  return g_steal_pointer(&p);
}

StProfile *
st_profile_import_kineto(const char *path, const StModel *model, const StKinetoOptions *options,
                         StKinetoImport *stats_out, GError **error)
{
  g_return_val_if_fail(path != NULL && model != NULL && options != NULL, NULL);
  Kineto k;
  kineto_init(&k, path, model);
  g_autoptr(cJSON) root = kineto_read_trace(&k, error);
  StKinetoImport stats = {0};
  StProfile *p = root != NULL ? build(&k, root, options, &stats, error) : NULL;
  kineto_clear(&k);
  if (p != NULL && stats_out != NULL)
    *stats_out = stats;
  else
    st_kineto_import_clear(&stats);
  return p;
}
