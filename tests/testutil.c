/* testutil.c: see testutil.h. */
#include "testutil.h"

#include <glib/gstdio.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "cluster/links.h"
#include "engine/engine.h"
#include "exec/device.h"

char *
st_test_src(const char *relative)
{
  return g_build_filename(STAGGER_SOURCE_DIR, relative, NULL);
}

static GPtrArray *tmpdirs;

static void
remove_tree(const char *path)
{
  GDir *dir = g_dir_open(path, 0, NULL);
  if (dir != NULL) {
    const char *name;
    while ((name = g_dir_read_name(dir)) != NULL) {
      g_autofree char *child = g_build_filename(path, name, NULL);
      if (g_file_test(child, G_FILE_TEST_IS_DIR) && !g_file_test(child, G_FILE_TEST_IS_SYMLINK))
        remove_tree(child);
      else
        g_unlink(child);
    }
    g_dir_close(dir);
  }
  g_rmdir(path);
}

static void
remove_tmpdirs(void)
{
  for (guint i = 0; tmpdirs != NULL && i < tmpdirs->len; i++)
    remove_tree(g_ptr_array_index(tmpdirs, i));
  if (tmpdirs != NULL)
    g_ptr_array_free(tmpdirs, TRUE);
}

char *
st_test_tmpdir(void)
{
  g_autoptr(GError) error = NULL;
  char *dir = g_dir_make_tmp("stagger-test-XXXXXX", &error);
  g_assert_no_error(error);
  if (tmpdirs == NULL) {
    tmpdirs = g_ptr_array_new_with_free_func(g_free);
    atexit(remove_tmpdirs);
  }
  g_ptr_array_add(tmpdirs, g_strdup(dir));
  return dir;
}

char *
st_test_read(const char *path, gsize *length)
{
  char *text = NULL;
  g_autoptr(GError) error = NULL;
  g_file_get_contents(path, &text, length, &error);
  g_assert_no_error(error);
  return text;
}

StModel *
st_test_model(const char *relative)
{
  g_autofree char *path = st_test_src(relative);
  g_autoptr(GError) error = NULL;
  StModel *m = st_model_load(path, &error);
  g_assert_no_error(error);
  return m;
}

StModel *
st_test_model_parse(const char *json)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(cJSON) root = st_json_parse(json, strlen(json), "<inline>", &error);
  g_assert_no_error(error);
  StModel *m = st_model_from_json(root, "<inline>", &error);
  g_assert_no_error(error);
  return m;
}

static void
assert_same_shape(const StShape *a, const StShape *b)
{
  g_assert_cmpint(a->n_dims, ==, b->n_dims);
  for (int d = 0; d < a->n_dims; d++)
    g_assert_cmpint(a->dims[d], ==, b->dims[d]);
}

void
st_test_assert_same_model(const StModel *a, const StModel *b)
{
  g_assert_cmpstr(a->name, ==, b->name);
  g_assert_cmpstr(a->path, ==, b->path);
  g_assert_cmpint(a->dtype, ==, b->dtype);
  assert_same_shape(&a->input, &b->input);
  g_assert_cmpint(a->n_layers, ==, b->n_layers);
  g_assert_cmpint(a->params, ==, b->params);
  g_assert_cmpint(a->active_params, ==, b->active_params);
  g_assert_cmpint(a->param_tensors, ==, b->param_tensors);
  g_assert_cmpfloat(a->fwd_flops, ==, b->fwd_flops);
  g_assert_cmpfloat(a->bwd_flops, ==, b->bwd_flops);
  g_assert_cmpint(a->act_bytes, ==, b->act_bytes);
  for (int i = 0; i < a->n_layers; i++) {
    const StLayer *x = &a->layers[i], *y = &b->layers[i];
    g_assert_cmpstr(x->name, ==, y->name);
    g_assert_true(x->type == y->type);
    g_assert_cmpint(x->n_attrs, ==, y->n_attrs);
    for (int k = 0; k < x->n_attrs; k++) {
      g_assert_cmpstr(x->attrs[k].key, ==, y->attrs[k].key);
      g_assert_cmpint(x->attrs[k].value, ==, y->attrs[k].value);
    }
    assert_same_shape(&x->in_shape, &y->in_shape);
    assert_same_shape(&x->out_shape, &y->out_shape);
    g_assert_cmpstr(x->signature, ==, y->signature);
    g_assert_cmpint(x->params, ==, y->params);
    g_assert_cmpint(x->param_tensors, ==, y->param_tensors);
    g_assert_cmpint(x->active_params, ==, y->active_params);
    g_assert_cmpfloat(x->fwd_flops, ==, y->fwd_flops);
    g_assert_cmpfloat(x->bwd_flops, ==, y->bwd_flops);
    g_assert_cmpint(x->act_bytes, ==, y->act_bytes);
    g_assert_cmpint(x->out_bytes, ==, y->out_bytes);
    g_assert_cmpint(x->in_bytes, ==, y->in_bytes);
    g_assert_cmpfloat(x->fwd_io_bytes, ==, y->fwd_io_bytes);
    g_assert_cmpfloat(x->bwd_io_bytes, ==, y->bwd_io_bytes);
    for (int r = 0; r < ST_RC_N; r++) {
      g_assert_cmpint(x->act_again[r], ==, y->act_again[r]);
      g_assert_cmpfloat(x->again_flops[r], ==, y->again_flops[r]);
    }
    g_assert_cmpint(x->tp, ==, y->tp);
    g_assert_cmpint(x->sp, ==, y->sp);
    g_assert_cmpint(x->cp, ==, y->cp);
    g_assert_cmpint(x->chain_open, ==, y->chain_open);
    g_assert_cmpint(x->n_inputs, ==, y->n_inputs);
    for (int k = 0; k < x->n_inputs; k++)
      g_assert_cmpint(x->inputs[k], ==, y->inputs[k]);
  }
}

StModel *
st_test_model_named(const char *name)
{
  g_autofree char *relative = g_strdup_printf("models/%s.json", name);
  return st_test_model(relative);
}

StCluster *
st_test_cluster(const char *relative, int nodes, int gpus)
{
  g_autofree char *path = st_test_src(relative);
  g_autoptr(GError) error = NULL;
  StCluster *c = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(c, nodes, gpus, &error));
  g_assert_no_error(error);
  return c;
}

StCluster *
st_test_cluster_named(const char *name, int nodes, int gpus)
{
  g_autofree char *relative = g_strdup_printf("models/clusters/%s.json", name);
  return st_test_cluster(relative, nodes, gpus);
}

StSchedule *
st_test_build(const char *strategy, const StModel *m, const StCluster *c, const StOptions *o)
{
  g_autoptr(GError) error = NULL;
  StSchedule *s = st_strategy_build(st_strategy_find(strategy), m, c, NULL, o, &error);
  g_assert_no_error(error);
  g_assert_nonnull(s);
  return s;
}

GError *
st_test_build_refused(const char *strategy, const StModel *m, const StCluster *c,
                      const StOptions *o)
{
  GError *error = NULL;
  StSchedule *s = st_strategy_build(st_strategy_find(strategy), m, c, NULL, o, &error);
  g_assert_null(s);
  g_assert_nonnull(error);
  g_test_message("%s", error->message);
  return error;
}

StSummary *
st_test_simulate(const StSchedule *s, const char *algo, gboolean no_fold, StTimeline **timeline)
{
  g_autoptr(GError) error = NULL;
  StEngineOptions eo = {NULL, algo, NULL, no_fold, NULL};
  *timeline = st_simulate(s, &eo, NULL, &error);
  g_assert_no_error(error);
  g_assert_nonnull(*timeline);
  st_test_assert_links(*timeline);
  return st_summary_new(*timeline);
}

/* ---- engine worked examples ------------------------------------------------ */

void
st_test_options_init(StOptions *o)
{
  st_options_init(o);
  o->compute_model = g_strdup("roofline");
  o->framework = g_strdup("ideal"); /* the worked examples' 16-bit gradients and buckets */
}

StSchedule *
st_test_unit_schedule(int n_ranks, const int32_t *placement)
{
  StModel *model = st_test_model("tests/data/engine/model.json");
  StCluster *cluster = st_test_cluster("tests/data/engine/cluster.json", 0, 0);
  StSchedule *s = st_schedule_new(model, cluster, n_ranks, placement);
  s->settings.global_batch = 10;
  s->settings.micro_batch = 10;
  s->settings.accumulation = 1;
  s->settings.compute_model = g_strdup("roofline"); /* the worked examples' closed forms */
  return s;
}

StProgram *
st_test_program_for(StSchedule *s, int rank, int n_streams)
{
  StProgram *p = st_program_new("test");
  for (int i = 0; i < n_streams; i++) {
    g_autofree char *name = g_strdup_printf("s%d", i);
    st_program_add_stream(p, name, 0);
  }
  s->ranks[rank].program = st_schedule_add_program(s, p);
  return p;
}

uint32_t
st_test_add(StProgram *p, StOp op)
{
  st_program_begin(p, &op);
  return st_program_commit(p);
}

StTimeline *
st_test_run(const StSchedule *s, const char *algo, gboolean no_fold)
{
  g_autoptr(GError) error = NULL;
  g_assert_true(st_schedule_check(s, &error));
  g_assert_no_error(error);
  StEngineOptions o = {NULL, algo, NULL, no_fold, NULL};
  StTimeline *t = st_simulate(s, &o, NULL, &error);
  g_assert_no_error(error);
  st_test_assert_links(t);
  return t;
}

StTimeline *
st_test_collective(int n_ranks, const int32_t *placement, StCollKind kind, int64_t bytes,
                   const char *algo)
{
  StSchedule *s = st_test_unit_schedule(n_ranks, placement);
  int world = st_schedule_add_world(s, "world");
  StProgram *p = st_program_new("coll");
  st_program_add_stream(p, "comm", 0);
  st_test_add(p, st_op_coll(0, kind, world, bytes));
  int prog = st_schedule_add_program(s, p);
  for (int r = 0; r < n_ranks; r++)
    s->ranks[r].program = prog;
  StTimeline *t = st_test_run(s, algo, TRUE);
  /* The timeline borrows the schedule: keep it alive with the test's data. */
  g_test_queue_destroy((GDestroyNotify)st_schedule_free, s);
  return t;
}

int64_t
st_test_end_of(const StTimeline *t, int rank, uint32_t op)
{
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    if (r->rank == rank && r->op == op)
      return r->end_ns;
  }
  g_assert_not_reached();
}

/* The class rates of a timeline against the class's capacity. */
static void
class_within(gpointer data, int64_t t_ns, const double rate[ST_LINK_N])
{
  const double *capacity = data;
  for (int c = 0; c < ST_LINK_N; c++)
    if (rate[c] > capacity[c] * (1 + 1e-9) + 1e-3)
      g_error("at %" G_GINT64_FORMAT " ns class %s sends %.6g B/s, over its %.6g",
              t_ns, st_link_name(c), rate[c], capacity[c]);
}

void
st_test_assert_links(const StTimeline *t)
{
  g_assert_nonnull(t->net);
  const StCluster *c = t->schedule->cluster;
  /* Per link: its peak over the whole run. */
  g_autofree StNetLinkStats *stats = st_net_trace_link_stats(t->net, 0, t->end_ns + 1);
  for (guint l = 0; l < t->net->links->len; l++) {
    const StNetLink *link = &g_array_index(t->net->links, StNetLink, l);
    if (stats[l].peak > link->capacity * (1 + 1e-9))
      g_error("link %s carries %.9g B/s, over its capacity %.9g", link->name, stats[l].peak,
              link->capacity);
  }
  /* Per class: what the cluster's links of the class can send at once. */
  double capacity[ST_LINK_N] = {0};
  for (int l = 0; l < st_net_n_links(c); l++) {
    StNetKind kind = st_net_link_kind(c, l);
    if (st_net_kind_sends(kind))
      capacity[st_net_kind_class(kind)] += st_net_link_capacity(c, l);
  }
  st_net_trace_class_rates(t->net, class_within, capacity);
}

StTimeline *
st_test_execute(const StSchedule *s, double lr, uint64_t seed, StExecResult *result)
{
  StExecOptions o;
  st_exec_options_init(&o);
  o.device = "host";
  o.keep_weights = TRUE;
  o.timeout_s = 60;
  if (lr > 0)
    o.lr = lr;
  if (seed != 0)
    o.seed = seed;
  g_autoptr(GError) error = NULL;
  StTimeline *t = st_execute(s, &o, result, &error);
  g_assert_no_error(error);
  g_assert_nonnull(t);
  return t;
}

double
st_test_weights_differ(const GPtrArray *a, const GPtrArray *b)
{
  g_assert_cmpuint(a->len, ==, b->len);
  double worst = 0;
  for (guint i = 0; i < a->len; i++) {
    const GArray *x = g_ptr_array_index(a, i), *y = g_ptr_array_index(b, i);
    g_assert_cmpuint(x->len, ==, y->len);
    for (guint j = 0; j < x->len; j++) {
      double u = g_array_index(x, float, j), v = g_array_index(y, float, j);
      worst = MAX(worst, fabs(u - v) / (fabs(v) + 1e-3));
    }
  }
  return worst;
}

StExecDevice *
st_test_open_gpu(void)
{
  g_autoptr(GError) error = NULL;
  StExecDevice *dev = st_device_open("cuda", 0, &error);
  if (dev == NULL)
    printf("1..0 # SKIP %s\n", error->message);
  return dev;
}

StPlanSpec *
st_test_plan_spec(const char *first, ...)
{
  StPlanSpec *spec = st_plan_spec_new();
  va_list args;
  va_start(args, first);
  for (const char *name = first; name != NULL; name = va_arg(args, const char *)) {
    const char *value = va_arg(args, const char *);
    g_autoptr(GError) error = NULL;
    st_plan_spec_set(spec, name, value, &error);
    g_assert_no_error(error);
  }
  va_end(args);
  return spec;
}

StPlan *
st_test_plan_run(const StPlanSpec *spec, const StModel *model, const StCluster *cluster)
{
  g_autoptr(GError) error = NULL;
  StPlan *plan = st_plan_run(spec, model, cluster, NULL, NULL, NULL, &error);
  g_assert_no_error(error);
  g_assert_nonnull(plan);
  return plan;
}

double
st_test_note_number(const StSchedule *s, const char *key)
{
  for (guint i = 0; i < s->notes->len; i++) {
    const StNote *n = &g_array_index(s->notes, StNote, i);
    if (g_strcmp0(n->key, key) == 0)
      return n->number;
  }
  g_error("no note '%s' in the schedule", key);
  return 0;
}

char *
st_test_group_of(const StSchedule *s, const char *name, int rank)
{
  int comm = st_schedule_find_comm(s, name);
  g_assert_cmpint(comm, >=, 0);
  const StComm *c = st_schedule_comm(s, comm);
  int g = c->group_of[rank];
  GString *text = g_string_new(NULL);
  for (int i = c->offsets[g]; i < c->offsets[g + 1]; i++)
    g_string_append_printf(text, "%s%d", text->len ? "," : "", c->members[i]);
  return g_string_free(text, FALSE);
}
