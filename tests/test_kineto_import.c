/* test_kineto_import.c: PyTorch profiler traces into stagger profiles
 * (profile/profile_import_kineto.h).
 *
 * - A hand-written GPU-shaped trace (tests/data/kineto/gpu-shaped.json, the
 *   layout Kineto gives a CUDA job) whose every entry is a stated number.
 * - A CPU trace made on this machine by Debian's python3-torch
 *   (tests/data/kineto/mlp-cpu.json), checked against the trace itself:
 *   a forward entry is the median over steps of the operators inside the
 *   layer's ranges, computed here from the JSON directly.
 * - The simulator costing a layer from an imported entry; bad traces.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "engine/engine.h"
#include "profile/profile_import_kineto.h"
#include "testutil.h"

static StProfile *
import(const char *relative, const char *model, const StKinetoOptions *o, StKinetoImport *stats)
{
  g_autofree char *path = st_test_src(relative);
  g_autoptr(StModel) m = st_test_model_named(model);
  g_autoptr(GError) error = NULL;
  StProfile *p = st_profile_import_kineto(path, m, o, stats, &error);
  g_assert_no_error(error);
  g_assert_nonnull(p);
  return p;
}

static double
layer_us(const StProfile *p, const char *device, const char *name, StPass pass, int64_t x)
{
  double ns = -1;
  StCostSource src;
  if (!st_profile_layer_time(p, device, name, NULL, pass, x, 0.5, &ns, &src))
    return -1;
  g_assert_cmpint(src, ==, ST_SRC_PROFILED);
  return ns / 1e3;
}

static void
test_gpu_shaped(void)
{
  /* Two steps; per step (the kernels' times in us, launched from inside):
   *   fc1 range: sgemm 50, then 70   -> fwd: median 60, spread p90 - p10 = 0.8 * 20 = 16
   *   fc2 range: sgemm 30            -> fwd 30
   *   evaluate_function with fc2's forward sequence number: 80 -> fc2 bwd 80
   *   evaluate_function with fc1's: 100                     -> fc1 bwd 100
   *   Optimizer.step#Adam.step: 200  -> "adam" at x = mlp's 669,706 parameters
   *   nccl:all_reduce of [1048576] float: kernel 400, then 420, world_size 4
   *                                  -> all_reduce, 4 ranks, 4 MiB: 410
   *   aten::zero_'s kernel: 5 us outside every range -> not attributed
   * The batch, 16, is the first dimension of fc1's first input. */
  StKinetoOptions o = {.device = "H100-SXM", .link = ST_LINK_INTRA_NODE};
  StKinetoImport stats = {0};
  g_autoptr(StProfile) p = import("tests/data/kineto/gpu-shaped.json", "mlp", &o, &stats);
  g_assert_true(stats.gpu);
  g_assert_cmpint(stats.steps, ==, 2);
  g_assert_cmpint(stats.batch, ==, 16);
  g_assert_cmpint(stats.entries, ==, 4);
  g_assert_true(stats.optimizer);
  g_assert_cmpint(stats.links, ==, 1);
  g_assert_cmpint(stats.comm_unknown, ==, 0);
  g_assert_cmpfloat_with_epsilon(stats.unattributed_ns, 5000, 1e-6);
  g_assert_cmpuint(stats.missing->len, ==, 4); /* relu1, relu2, fc3, loss */
  g_assert_cmpfloat_with_epsilon(layer_us(p, "H100-SXM", "fc1", ST_PASS_FWD, 16), 60, 1e-9);
  g_assert_cmpfloat_with_epsilon(layer_us(p, "H100-SXM", "fc1", ST_PASS_BWD, 16), 100, 1e-9);
  g_assert_cmpfloat_with_epsilon(layer_us(p, "H100-SXM", "fc2", ST_PASS_FWD, 16), 30, 1e-9);
  g_assert_cmpfloat_with_epsilon(layer_us(p, "H100-SXM", "fc2", ST_PASS_BWD, 16), 80, 1e-9);
  g_assert_cmpfloat_with_epsilon(layer_us(p, "H100-SXM", "adam", ST_PASS_OPTIM, 669706), 200,
                                 1e-9);
  double ns;
  StCostSource src;
  g_assert_true(st_profile_link_time(p, "H100-SXM", ST_COLL_ALL_REDUCE, ST_LINK_INTRA_NODE, 4,
                                     4 << 20, &ns, &src));
  g_assert_cmpfloat_with_epsilon(ns, 410e3, 1e-6);
  st_kineto_import_clear(&stats);

  /* The simulator takes fc1's forward from the entry: DP of mlp on one
   * H100 at micro-batch 16 runs it in 60 us, "profiled". */
  g_autoptr(StModel) m = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 1);
  StOptions so;
  st_options_init(&so);
  so.micro_batch = 16;
  g_autoptr(StSchedule) s = st_test_build("dp", m, c, &so);
  st_options_clear(&so);
  g_autoptr(GError) error = NULL;
  StEngineOptions eo = {p, "auto", NULL, FALSE, NULL};
  g_autoptr(StTimeline) t = st_simulate(s, &eo, NULL, &error);
  g_assert_no_error(error);
  gboolean seen = FALSE;
  const StProgram *prog = st_schedule_program_of(s, 0);
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    const StOp *op = st_program_op(prog, r->op);
    if (op->kind == ST_OP_COMP && op->sub == ST_PASS_FWD && op->layer == 0) {
      g_assert_cmpint(r->end_ns - r->start_ns, ==, 60000);
      g_assert_cmpint(r->source, ==, ST_SRC_PROFILED);
      seen = TRUE;
    }
  }
  g_assert_true(seen);
}

/* The median over steps of the summed durations of the events named `op`
 * lying inside ranges named `range` (an independent reading of the trace). */
static double
median_inside(const cJSON *events, const char *range, const char *op)
{
  GArray *v = g_array_new(FALSE, FALSE, sizeof(double));
  const cJSON *r;
  cJSON_ArrayForEach(r, events)
  {
    if (strcmp(cJSON_GetObjectItem(r, "name")->valuestring, range) != 0)
      continue;
    double t0 = cJSON_GetObjectItem(r, "ts")->valuedouble;
    double t1 = t0 + cJSON_GetObjectItem(r, "dur")->valuedouble;
    double sum = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events)
    {
      double ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
      double end = ts + cJSON_GetObjectItem(e, "dur")->valuedouble;
      if (strcmp(cJSON_GetObjectItem(e, "name")->valuestring, op) == 0 && ts >= t0 && end <= t1)
        sum += end - ts;
    }
    g_array_append_val(v, sum);
  }
  g_assert_cmpuint(v->len, ==, 3); /* one per profiled step */
  double *d = (double *)(void *)v->data;
  for (int i = 0; i < 3; i++) /* sort three */
    for (int j = i + 1; j < 3; j++)
      if (d[j] < d[i]) {
        double x = d[i];
        d[i] = d[j];
        d[j] = x;
      }
  double median = d[1];
  g_array_unref(v);
  return median;
}

static void
test_cpu_trace(void)
{
  /* Debian's torch 1.13 writes the legacy profiler's bare array: no shapes,
   * so the batch is given; the backward comes from the NAME.backward
   * ranges the trace script's hooks open. */
  StKinetoOptions o = {.batch = 32, .link = ST_LINK_INTRA_NODE};
  StKinetoImport stats = {0};
  g_autoptr(StProfile) p = import("tests/data/kineto/mlp-cpu.json", "mlp", &o, &stats);
  g_assert_false(stats.gpu);
  g_assert_cmpstr(stats.device, ==, "host");
  g_assert_cmpint(stats.steps, ==, 3);
  g_assert_cmpint(stats.entries, ==, 12); /* 6 layers, forward and backward */
  g_assert_cmpuint(stats.missing->len, ==, 0);
  g_assert_true(stats.optimizer);
  g_assert_cmpint(stats.links, ==, 0);
  st_kineto_import_clear(&stats);
  g_autofree char *path = st_test_src("tests/data/kineto/mlp-cpu.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(cJSON) events = st_json_load_file(path, &error);
  g_assert_no_error(error);
  /* A linear layer's forward is its aten::linear, the outermost operator. */
  static const char *const linears[] = {"fc1", "fc2", "fc3"};
  for (int i = 0; i < 3; i++)
    g_assert_cmpfloat_with_epsilon(layer_us(p, "host", linears[i], ST_PASS_FWD, 32),
                                   median_inside(events, linears[i], "aten::linear"), 1e-6);
  /* Every pass has a time, the backward of a linear layer at least its
   * AddmmBackward0's (the gradients of input and weights). */
  g_autoptr(StModel) m = st_test_model_named("mlp");
  for (int l = 0; l < m->n_layers; l++)
    for (int bwd = 0; bwd < 2; bwd++)
      g_assert_cmpfloat(layer_us(p, "host", m->layers[l].name, bwd ? ST_PASS_BWD : ST_PASS_FWD,
                                 32), >, 0);
  g_assert_cmpfloat(layer_us(p, "host", "sgd", ST_PASS_OPTIM, m->params), >, 0);
}

static void
expect_error(const char *text, const StKinetoOptions *o, const char *pattern)
{
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "trace.json", NULL);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  g_autoptr(StModel) m = st_test_model_named("mlp");
  g_autoptr(GError) error = NULL;
  g_autoptr(StProfile) p = st_profile_import_kineto(path, m, o, NULL, &error);
  g_assert_null(p);
  g_assert_nonnull(error);
  if (!g_pattern_match_simple(pattern, error->message))
    g_error("'%s' does not match '%s'", error->message, pattern);
}

static void
test_bad_traces(void)
{
  StKinetoOptions o = {.link = ST_LINK_INTRA_NODE};
  expect_error("{\"events\": []}", &o, "*trace.json: expected a Chrome trace*");
  expect_error("[{\"ph\": \"B\", \"name\": \"x\", \"ts\": 0}]", &o,
               "*trace.json: no complete events*");
  expect_error("[{\"ph\": \"X\", \"name\": \"fc1\", \"ts\": 0}]", &o,
               "*trace.json: event 0: a complete event*\"dur\"*");
  /* No shapes and no --batch: the batch is unknown. */
  expect_error("[{\"ph\": \"X\", \"name\": \"fc1\", \"ts\": 0, \"dur\": 5, \"tid\": 1},"
               " {\"ph\": \"X\", \"name\": \"aten::linear\", \"ts\": 1, \"dur\": 3, \"tid\": 1}]",
               &o, "*trace.json: the traced batch size is not in the trace*--batch N*");
}

/* The profile saved from `text` written as DIR/SUB/trace.json (the
 * profile names the file). Transfer full. */
static char *
saved_profile(const char *dir, const char *text, const char *sub)
{
  g_autofree char *folder = g_build_filename(dir, sub, NULL);
  g_assert_cmpint(g_mkdir_with_parents(folder, 0755), ==, 0);
  g_autofree char *path = g_build_filename(folder, "trace.json", NULL);
  g_autofree char *out = g_strconcat(path, ".profile.json", NULL);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  g_autoptr(StModel) m = st_test_model_named("mlp");
  StKinetoOptions o = {.device = "H100-SXM", .link = ST_LINK_INTRA_NODE};
  g_autoptr(GError) error = NULL;
  g_autoptr(StProfile) p = st_profile_import_kineto(path, m, &o, NULL, &error);
  g_assert_no_error(error);
  g_assert_true(st_profile_save(p, out, &error));
  g_assert_no_error(error);
  char *saved = NULL;
  g_assert_true(g_file_get_contents(out, &saved, NULL, NULL));
  return saved;
}

/* `text` with every match of `pattern` replaced (GRegex syntax). */
static char *
replaced(const char *text, const char *pattern, const char *replacement)
{
  g_autoptr(GRegex) re = g_regex_new(pattern, G_REGEX_MULTILINE, 0, NULL);
  g_assert_nonnull(re);
  char *out = g_regex_replace(re, text, -1, 0, replacement, 0, NULL);
  g_assert_nonnull(out);
  g_assert_cmpstr(out, !=, text);
  return out;
}

/* `text` with every `literal` replaced. Transfer full. */
static char *
substituted(const char *text, const char *literal, const char *replacement)
{
  g_auto(GStrv) parts = g_strsplit(text, literal, -1);
  return g_strjoinv(replacement, parts);
}

/* The profile saved from `text` (as saved_profile), or "error: " and the
 * message without the file's folder. Transfer full. */
static char *
saved_profile_or_error(const char *dir, const char *text, const char *sub)
{
  g_autofree char *folder = g_build_filename(dir, sub, NULL);
  g_assert_cmpint(g_mkdir_with_parents(folder, 0755), ==, 0);
  g_autofree char *path = g_build_filename(folder, "trace.json", NULL);
  g_autofree char *out = g_strconcat(path, ".profile.json", NULL);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  g_autoptr(StModel) m = st_test_model_named("mlp");
  StKinetoOptions o = {.device = "H100-SXM", .link = ST_LINK_INTRA_NODE};
  g_autoptr(GError) error = NULL;
  g_autoptr(StProfile) p = st_profile_import_kineto(path, m, &o, NULL, &error);
  if (p == NULL) {
    g_autofree char *message = substituted(error->message, folder, "DIR");
    return g_strconcat("error: ", message, NULL);
  }
  g_assert_true(st_profile_save(p, out, &error));
  g_assert_no_error(error);
  char *saved = NULL;
  g_assert_true(g_file_get_contents(out, &saved, NULL, NULL));
  /* the profile names its source */
  char *without = substituted(saved, sub, "SUB");
  g_free(saved);
  return without;
}

/* The events are read one at a time (profile_kineto_read.c) and, when the
 * text is unusual, from one tree: both give the same profile. A second
 * "traceEvents" (ignored by the tree, which takes the first) and a member
 * after the events send the reading to the tree; the plain file and one
 * with a member after the events stay streamed. */
static void
test_streamed_as_tree(void)
{
  g_autofree char *path = st_test_src("tests/data/kineto/gpu-shaped.json");
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  char *close = strrchr(text, '}');
  g_assert_nonnull(close);
  g_autofree char *head = g_strndup(text, (gsize)(close - text));
  g_autofree char *twice = g_strconcat(head, ", \"traceEvents\": []}\n", NULL);
  g_autofree char *after = g_strconcat(head, ", \"x\": {\"y\": [1, 2]}} trailing", NULL);
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *plain = saved_profile(dir, text, "plain");
  g_autofree char *tree = saved_profile(dir, twice, "twice");
  g_autofree char *more = saved_profile(dir, after, "after");
  g_assert_cmpstr(plain, ==, tree);
  g_assert_cmpstr(plain, ==, more);
}

/* Flat events are read by a scan of their own text, the others by cJSON
 * (profile_kineto_read.c): each variant of the trace below, which the
 * scan reads, leaves to cJSON, or reads in part, must give the profile the
 * whole tree gives (a second "traceEvents" sends the reading there). */
static void
test_scan_as_tree(void)
{
  g_autofree char *path = st_test_src("tests/data/kineto/gpu-shaped.json");
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  static const char *const VARIANTS[][2] = {
    {"\"dur\": ([0-9]+)", "\"dur\": \\1.0e0"},             /* numbers through strtod */
    {"\"ts\": ([0-9]+)", "\"ts\": 0\\1"},                  /* leading zeros */
    {"\"pid\": ([0-9]+)", "\"pid\": \"\\1\""},             /* a pid as a string */
    {"\"tid\": ([0-9]+)", "\"tid\": -\\1"},                /* negative */
    {"\"ph\": \"X\",", "\"ph\": \"X\", \"ph\": \"B\", \"dur\": 1,"}, /* the first key wins */
    {"\"cat\": \"kernel\"", "\"cat\": \"k\\\\u0065rnel\""}, /* an escape: cJSON's */
    {"\"name\": \"fc1\"", "\"name\": \"fc\\\\u0031\""},
    {"\"ph\": ", "\"t\": true, \"f\": false, \"n\": null,\t\"ph\": "}, /* literals, tabs */
    {"\"correlation\": ([0-9]+)", "\"correlation\": \\1, \"correlation\": 99"},
    {"\"correlation\": ([0-9]+)", "\"correlation\": \\1.5"}, /* not whole: no id */
    {"\"args\": \\{", "\"args\": {\"list\": [1], "},        /* args not flat: cJSON's */
    {"\"dur\": ([0-9]+)", "\"dur\": 1e999"},                /* refused, by the tree */
    {"\"ts\": ([0-9]+)", "\"ts\": -0"},
    /* flat args that are read later (the NCCL op's sizes, a scalar "Input
     * Dims"): kept by the scan as the tree keeps them; flat args without
     * such a key (the launches') are not kept */
    {"\"Input Dims\": \\[\\s*\\[\\s*1048576\\s*\\]\\s*\\],\\s*\"Input type\": \\[\\s*\"float\"\\s*\\]",
     "\"In msg nelems\": 1048576, \"dtype\": \"Float\", \"Group size\": 4"},
    {"\"Input Dims\": \\[\\s*\\[\\s*1048576\\s*\\]\\s*\\],\\s*\"Input type\": \\[\\s*\"float\"\\s*\\]",
     "\"stream\": 7, \"Out msg nelems\": 524288, \"In msg nelems\": 524288, \"dtype\": \"c10::Half\""},
    {"\"Input Dims\": \\[\\s*\\[\\s*16,\\s*784\\s*\\],[^\"]*\"Input type\": \\[[^\\]]*\\]",
     "\"Input Dims\": 16, \"Input type\": \"float\""},
  };
  g_autofree char *dir = st_test_tmpdir();
  for (gsize i = 0; i < G_N_ELEMENTS(VARIANTS); i++) {
    g_autofree char *variant = replaced(text, VARIANTS[i][0], VARIANTS[i][1]);
    char *close = strrchr(variant, '}');
    g_autofree char *head = g_strndup(variant, (gsize)(close - variant));
    g_autofree char *twice = g_strconcat(head, ", \"traceEvents\": []}\n", NULL);
    g_autofree char *scanned_dir = g_strdup_printf("scanned%zu", i);
    g_autofree char *tree_dir = g_strdup_printf("tree%zu", i);
    g_autofree char *scanned = saved_profile_or_error(dir, variant, scanned_dir);
    g_autofree char *tree = saved_profile_or_error(dir, twice, tree_dir);
    g_test_message("variant %zu: %.80s", i, scanned);
    g_assert_cmpstr(scanned, ==, tree);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kineto/gpu-shaped", test_gpu_shaped);
  g_test_add_func("/kineto/cpu-trace", test_cpu_trace);
  g_test_add_func("/kineto/bad-traces", test_bad_traces);
  g_test_add_func("/kineto/streamed-as-tree", test_streamed_as_tree);
  g_test_add_func("/kineto/scan-as-tree", test_scan_as_tree);
  return g_test_run();
}
