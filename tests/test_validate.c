/* test_validate.c: `stagger validate` through the binary, as a user runs it,
 * on the host backend: every case simulated and really run, the tables and
 * files it writes, model states predicted exactly, a failing case recorded
 * beside the others, and bad usage refused. The profile is written through
 * the profile library: validate reads whatever `stagger profile` would. */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>

#include "base/json.h"
#include "output/output.h"
#include "profile/profile.h"
#include "testutil.h"

typedef struct {
  int status;     /* the exit code */
  char *out, *err;
} Run;

static void
run_clear(Run *r)
{
  g_free(r->out);
  g_free(r->err);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Run, run_clear)

/* Runs `stagger COMMAND ARGS...` (`head` then `args`, each NULL-terminated). */
static void
stagger(Run *r, const char *const *head, const char *const *args)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_ptr_array_add(argv, STAGGER_BINARY_DIR "/stagger");
  for (; *head != NULL; head++)
    g_ptr_array_add(argv, (gpointer)*head);
  for (; *args != NULL; args++)
    g_ptr_array_add(argv, (gpointer)*args);
  g_ptr_array_add(argv, NULL);
  int wait = 0;
  g_autoptr(GError) error = NULL;
  *r = (Run){0};
  g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                             &r->out, &r->err, &wait, &error));
  g_assert_no_error(error);
  g_assert_true(WIFEXITED(wait));
  r->status = WEXITSTATUS(wait);
}

/* `stagger validate --backend host ARGS...` */
static void
validatev(Run *r, const char *const *args)
{
  const char *head[] = {"validate", "--backend", "host", NULL};
  stagger(r, head, args);
}

#define validate(r, ...) validatev(r, (const char *const[]){__VA_ARGS__})

/* A profile of tiny-mlp's layers on the device "host". Transfer full. */
static char *
write_profile(const char *dir)
{
  g_autoptr(StProfile) p = st_profile_new();
  st_profile_set_device(p, "host", "none", "none", "2026-11-21", "test_validate");
  const char *layers[] = {"fc1", "relu1", "fc2", "loss"};
  for (gsize i = 0; i < G_N_ELEMENTS(layers); i++)
    for (int64_t x = 4; x <= 16; x *= 2) {
      st_profile_add_layer(p, "host", layers[i], NULL, ST_PASS_FWD, x, 1000.0 * x, 0);
      st_profile_add_layer(p, "host", layers[i], NULL, ST_PASS_BWD, x, 2000.0 * x, 0);
    }
  char *path = g_build_filename(dir, "host.json", NULL);
  g_autoptr(GError) error = NULL;
  g_assert_true(st_profile_save(p, path, &error));
  g_assert_no_error(error);
  return path;
}

static cJSON *
load(const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  g_autoptr(GError) error = NULL;
  cJSON *root = st_json_load_file(path, &error);
  g_assert_no_error(error);
  return root;
}

static double
number(const cJSON *o, const char *a, const char *b, const char *c)
{
  const cJSON *x = cJSON_GetObjectItem(o, a);
  if (b != NULL)
    x = cJSON_GetObjectItem(x, b);
  if (c != NULL)
    x = cJSON_GetObjectItem(x, c);
  g_assert_true(cJSON_IsNumber(x));
  return x->valuedouble;
}

static void
test_cases(void)
{
  g_autofree char *tmp = st_test_tmpdir();
  g_autofree char *profile = write_profile(tmp);
  g_autofree char *model = st_test_src("tests/data/exec/tiny-mlp.json");
  g_autofree char *out = g_build_filename(tmp, "v", NULL);
  g_auto(Run) r;
  validate(&r, "--model", model, "--profile", profile, "--strategy", "dp,zero", "--zero-stage",
           "2", "--ranks", "1,2", "--micro-batch", "8", "--steps", "3", "--out", out, NULL);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "4 of 4 cases ran"));
  g_assert_nonnull(strstr(r.out, "step time MAPE"));

  g_autoptr(cJSON) root = load(out, "validate.json");
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(root, "format")), ==,
                  "stagger-validate");
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(root, "profile_device")), ==, "host");
  const cJSON *cases = cJSON_GetObjectItem(root, "cases");
  g_assert_cmpint(cJSON_GetArraySize(cases), ==, 4);
  const char *names[] = {"dp-r1", "dp-r2", "zero-r1", "zero-r2"};
  double mape = 0;
  for (int i = 0; i < 4; i++) {
    const cJSON *c = cJSON_GetArrayItem(cases, i);
    g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(c, "case")), ==, names[i]);
    g_assert_null(cJSON_GetObjectItem(c, "error"));
    g_assert_cmpint((int)number(c, "ranks", NULL, NULL), ==, 1 + i % 2);
    double pred = number(c, "predicted_step_time_s", NULL, NULL);
    double meas = number(c, "measured_step_time_s", NULL, NULL);
    g_assert_cmpfloat(pred, >, 0);
    g_assert_cmpfloat(meas, >, 0);
    g_assert_cmpfloat_with_epsilon(number(c, "step_time_error", NULL, NULL),
                                   (pred - meas) / meas, 1e-9);
    mape += fabs(pred - meas) / meas / 4;
    /* The profile's 1 us per sample forward of each layer, as the
     * prediction's forward time per step of one rank alone on the device
     * (two ranks share it, and take longer). */
    double forward = number(c, "time_per_step_s", "forward", "predicted");
    if (i % 2 == 0)
      g_assert_cmpfloat_with_epsilon(forward, 4 * 8 * 1e-6, 1e-9);
    else
      g_assert_cmpfloat(forward, >, 4 * 8 * 1e-6);
    /* Model states are exact: the bytes of weights and optimizer states at
     * the peak are what the executor's pool measured. */
    const cJSON *mem = cJSON_GetObjectItem(c, "device0_at_peak_bytes");
    g_assert_cmpfloat(number(mem, "params", "predicted", NULL), >, 0);
    g_assert_cmpfloat(number(mem, "params", "predicted", NULL), ==,
                      number(mem, "params", "measured", NULL));
    g_assert_cmpfloat(number(mem, "optimizer", "predicted", NULL), ==,
                      number(mem, "optimizer", "measured", NULL));
    /* Both timelines, as sim and run write them. */
    for (int k = 0; k < 2; k++) {
      g_autofree char *report =
        g_build_filename(out, names[i], k ? "measured" : "predicted", "report.json", NULL);
      g_assert_true(g_file_test(report, G_FILE_TEST_IS_REGULAR));
    }
  }
  g_assert_cmpfloat_with_epsilon(number(root, "step_time_mape", NULL, NULL), mape, 1e-9);

  g_autofree char *csv_path = g_build_filename(out, "validate.csv", NULL);
  g_autofree char *csv = st_test_read(csv_path, NULL);
  g_auto(GStrv) lines = g_strsplit(csv, "\n", -1);
  g_assert_cmpuint(g_strv_length(lines), ==, 6); /* header, 4 cases, "" */
  g_assert_true(g_str_has_prefix(lines[0], "case,strategy,ranks,predicted_step_ms"));
  g_assert_true(g_str_has_prefix(lines[4], "zero-r2,zero,2,"));
  g_autofree char *md_path = g_build_filename(out, "validate.md", NULL);
  g_autofree char *md = st_test_read(md_path, NULL);
  g_assert_nonnull(strstr(md, "| zero-r2 |"));
  g_assert_nonnull(strstr(md, "Step time MAPE"));

  /* `stagger plot` draws the step times of all cases, and each case's
   * timelines one above the other. */
  g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
  if (gnuplot == NULL) {
    g_test_message("no gnuplot: plots not checked");
    return;
  }
  const char *plot[] = {"plot", out, NULL}, *none[] = {NULL};
  g_auto(Run) plotted;
  stagger(&plotted, plot, none);
  g_assert_cmpint(plotted.status, ==, 0);
  const char *images[] = {"validate.png", "dp-r1/validate_gantt.png", "zero-r2/compare_memory.png",
                          "zero-r2/measured/gantt.png"};
  for (gsize i = 0; i < G_N_ELEMENTS(images); i++) {
    g_autofree char *path = g_build_filename(out, images[i], NULL);
    gsize length = 0;
    g_autofree char *png = st_test_read(path, &length);
    g_assert_cmpuint(length, >, 8);
    g_assert_cmpmem(png, 4, "\x89PNG", 4);
  }
}

/* One case out of memory: recorded with its reason, the other still runs
 * and is written, and the exit status says something failed. */
static void
test_failed_case(void)
{
  g_autofree char *tmp = st_test_tmpdir();
  g_autofree char *profile = write_profile(tmp);
  g_autofree char *model = st_test_src("tests/data/exec/tiny-mlp.json");
  g_autofree char *out = g_build_filename(tmp, "v", NULL);
  g_auto(Run) r;
  validate(&r, "--model", model, "--profile", profile, "--strategy", "dp,zero", "--micro-batch",
           "8,100000", "--memory-limit", "256KiB", "--steps", "3", "--out", out, NULL);
  g_assert_cmpint(r.status, ==, 1);
  g_assert_nonnull(strstr(r.err, "1 of 2 cases failed"));
  g_autoptr(cJSON) root = load(out, "validate.json");
  const cJSON *cases = cJSON_GetObjectItem(root, "cases");
  g_assert_cmpint(cJSON_GetArraySize(cases), ==, 2);
  g_assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(cases, 0), "error"));
  const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(cases, 1), "error"));
  g_assert_nonnull(why);
  g_assert_nonnull(strstr(why, "out of memory"));
  g_autofree char *kept = g_build_filename(out, "dp-r1", "measured", "report.json", NULL);
  g_assert_true(g_file_test(kept, G_FILE_TEST_IS_REGULAR));
}

/* A stored schedule (as `stagger plan --emit-schedule` writes one) is one
 * case, run as stored, its ranks on this machine's device. */
static void
test_stored_schedule(void)
{
  g_autofree char *tmp = st_test_tmpdir();
  g_autofree char *profile = write_profile(tmp);
  g_autofree char *model = st_test_src("tests/data/exec/tiny-mlp.json");
  g_autofree char *cluster = g_build_filename(tmp, "two.json", NULL);
  const char *text = "{\"name\": \"two\", \"nodes\": 1, \"gpus_per_node\": 2, \"gpu\": "
                     "{\"name\": \"host\", \"memory\": \"1GiB\", \"flops\": {\"fp32\": "
                     "\"1TFLOP/s\"}, \"memory_bandwidth\": \"100GB/s\"}, \"links\": "
                     "{\"intra_node\": {\"bandwidth\": \"10GB/s\", \"latency\": \"5us\"}}}";
  g_assert_true(g_file_set_contents(cluster, text, -1, NULL));
  g_autofree char *schedule = g_build_filename(tmp, "best.json", NULL);
  const char *build[] = {"schedule", "--model", model, "--cluster", cluster, "--strategy",
                         "zero", "--zero-stage", "2", "--micro-batch", "8", "--steps", "3",
                         "--out", schedule, NULL},
             *none[] = {NULL};
  g_auto(Run) built;
  stagger(&built, build, none);
  g_assert_cmpint(built.status, ==, 0);
  g_autofree char *out = g_build_filename(tmp, "v", NULL);
  g_auto(Run) r;
  validate(&r, "--schedule", schedule, "--profile", profile, "--out", out, NULL);
  g_assert_cmpint(r.status, ==, 0);
  g_autoptr(cJSON) root = load(out, "validate.json");
  const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "cases"), 0);
  g_assert_cmpint(cJSON_GetArraySize(cJSON_GetObjectItem(root, "cases")), ==, 1);
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(c, "case")), ==, "best");
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(c, "strategy")), ==, "zero");
  g_assert_cmpint((int)number(c, "ranks", NULL, NULL), ==, 2);
  const cJSON *mem = cJSON_GetObjectItem(c, "device0_at_peak_bytes");
  g_assert_cmpfloat(number(mem, "params", "predicted", NULL), ==,
                    number(mem, "params", "measured", NULL));

  g_auto(Run) mixed;
  validate(&mixed, "--schedule", schedule, "--model", model, "--profile", profile, NULL);
  g_assert_cmpint(mixed.status, ==, 2);
  g_assert_nonnull(strstr(mixed.err, "already holds"));
}

static void
test_usage(void)
{
  g_autofree char *tmp = st_test_tmpdir();
  g_autofree char *profile = write_profile(tmp);
  g_autofree char *model = st_test_src("tests/data/exec/tiny-mlp.json");
  g_autofree char *cluster = st_test_src("models/clusters/dgx-h100.json");
  struct {
    const char *args[7];
    const char *says;
  } cases[] = {
    {{"--profile", profile, NULL}, "--model FILE is required"},
    {{"--model", model, NULL}, "--profile PATH is required"},
    {{"--model", model, "--profile", profile, "--cluster", cluster, NULL}, "drop --cluster"},
    {{"--model", model, "--profile", profile, "--ranks", "0", NULL}, "--ranks 0"},
    {{"--model", model, "--profile", profile, "--device", "H100", NULL}, "--device H100: not in"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_auto(Run) r;
    validatev(&r, cases[i].args);
    g_assert_cmpint(r.status, ==, 2);
    if (strstr(r.err, cases[i].says) == NULL)
      g_error("case %zu: expected '%s' in: %s", i, cases[i].says, r.err);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/validate/cases", test_cases);
  g_test_add_func("/validate/failed-case", test_failed_case);
  g_test_add_func("/validate/stored-schedule", test_stored_schedule);
  g_test_add_func("/validate/usage", test_usage);
  return g_test_run();
}
