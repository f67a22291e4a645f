/* bench_sim.c: how fast the simulator is, and how its memory grows.
 *
 *   build/tests/bench_sim            the table of docs/PERFORMANCE.md
 *   build/tests/bench_sim --quick    smaller sizes, for a smoke run
 *   build/tests/bench_sim --large [STEPS]   10^7 ops unfolded, with every output
 *   build/tests/bench_sim --scale [RUNS [STAGGER]]   folded GPT-3 ZeRO-3 on 131,072 and
 *                                           1,048,576 GPUs, `stagger sim` as a user runs it
 *                                           (build/stagger, or the STAGGER binary given)
 *
 * Each configuration runs in a child process (this program started again
 * with --one ...) so that its peak RSS is its own. Every configuration is
 * simulated twice in that child: with identical ranks folded (the default)
 * and with every rank simulated (--no-fold), and the table reports the ratio,
 * measured in the same process, beside the absolute times. Times are CPU
 * seconds of the process (user + system): the machine is shared, and wall
 * time says more about the neighbours than about the simulator; a
 * simulation shorter than 50 ms is repeated and its mean reported.
 *
 * Workloads: ResNet-50 data parallelism with one all-reduce per layer
 * (--bucket-bytes 0), micro-batch 32, on 8 to 1024 H100s (nodes of 8); GPT-3
 * 2.7B ZeRO-3, micro-batch 1, mixed precision, on 64 to 1024 H100s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib/gstdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "output/output.h"

#include "engine/engine.h"
#include "strategy/strategy.h"
#include "testutil.h"

typedef struct {
  double build_s, sim_s;
  int64_t ops, events;
  int sim_ranks;
} Measure;

static double
now_s(void)
{
  return g_get_monotonic_time() / 1e6;
}

/* CPU seconds (user + system) this process used so far: the machine is
 * shared, so wall time says more about the neighbours than about us. */
static double
cpu_s(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static gboolean
measure(const char *strategy, const StModel *m, const StCluster *c, const StOptions *o,
        gboolean no_fold, Measure *out, GError **error)
{
  double t0 = cpu_s();
  g_autoptr(StSchedule) s = st_strategy_build(st_strategy_find(strategy), m, c, NULL, o, error);
  if (s == NULL)
    return FALSE;
  double t1 = cpu_s();
  /* Small simulations take microseconds: repeated until they add up to
   * 50 ms of CPU, their time is the mean. */
  StEngineOptions eo = {NULL, "auto", NULL, no_fold, NULL};
  StEngineStats stats = {0};
  int runs = 0;
  double t2;
  do {
    st_engine_stats_clear(&stats);
    g_autoptr(StTimeline) t = st_simulate(s, &eo, &stats, error);
    if (t == NULL)
      return FALSE;
    runs++;
    t2 = cpu_s();
  } while (t2 - t1 < 0.05);
  *out = (Measure){t1 - t0, (t2 - t1) / runs, stats.ops, stats.events, stats.sim_ranks};
  st_engine_stats_clear(&stats);
  return TRUE;
}

/* Child: one configuration, one line of numbers on stdout. */
/* Peak RSS so far, KiB. */
static long
max_rss(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static int
run_one(const char *strategy, const char *model, int gpus)
{
  long base = max_rss();
  g_autofree char *mfile = g_strdup_printf("models/%s.json", model);
  g_autofree char *mpath = st_test_src(mfile);
  g_autofree char *cpath = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) m = st_model_load(mpath, &error);
  g_autoptr(StCluster) c = m ? st_cluster_load(cpath, &error) : NULL;
  if (c == NULL || !st_cluster_resize(c, (gpus + 7) / 8, gpus, &error)) {
    fprintf(stderr, "bench_sim: %s\n", error->message);
    return 1;
  }
  StOptions o;
  st_options_init(&o);
  o.steps = 1; /* one step, whatever the default (auto: until steady) */
  if (strcmp(strategy, "dp") == 0) {
    o.micro_batch = 32;
    o.bucket_bytes = 0;
  } else {
    o.micro_batch = 1;
    o.zero_stage = 3;
    o.precision = ST_PRECISION_MIXED;
  }
  Measure folded, unfolded;
  gboolean ok = measure(strategy, m, c, &o, FALSE, &folded, &error) &&
                measure(strategy, m, c, &o, TRUE, &unfolded, &error);
  st_options_clear(&o);
  if (!ok) {
    fprintf(stderr, "bench_sim: %s\n", error->message);
    return 1;
  }
  printf("%.6f %.6f %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %d %.6f %.6f %" G_GINT64_FORMAT
         " %" G_GINT64_FORMAT " %ld\n",
         folded.build_s, folded.sim_s, folded.ops, folded.events, folded.sim_ranks,
         unfolded.build_s, unfolded.sim_s, unfolded.ops, unfolded.events, max_rss() - base);
  return 0;
}

/* Child for memory growth: the folded run alone, so RSS is its own. The
 * process's RSS before any work (the shared libraries: CUDA's, when the
 * executor is built with it, weigh 150 MiB) is left out. */
static int
run_rss(const char *strategy, const char *model, int gpus, gboolean no_fold)
{
  long base = max_rss();
  g_autofree char *mfile = g_strdup_printf("models/%s.json", model);
  g_autofree char *mpath = st_test_src(mfile);
  g_autofree char *cpath = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) m = st_model_load(mpath, &error);
  g_autoptr(StCluster) c = m ? st_cluster_load(cpath, &error) : NULL;
  if (c == NULL || !st_cluster_resize(c, (gpus + 7) / 8, gpus, &error))
    return 1;
  StOptions o;
  st_options_init(&o);
  o.steps = 1;
  o.micro_batch = strcmp(strategy, "dp") == 0 ? 32 : 1;
  o.bucket_bytes = 0;
  o.zero_stage = 3;
  o.precision = strcmp(strategy, "dp") == 0 ? ST_PRECISION_FP32 : ST_PRECISION_MIXED;
  Measure me;
  gboolean ok = measure(strategy, m, c, &o, no_fold, &me, &error);
  st_options_clear(&o);
  if (!ok)
    return 1;
  printf("%ld\n", max_rss() - base);
  return 0;
}

static char *
child(const char *self, const char *const *args)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_ptr_array_add(argv, (gpointer)self);
  for (const char *const *a = args; *a != NULL; a++)
    g_ptr_array_add(argv, (gpointer)*a);
  g_ptr_array_add(argv, NULL);
  char *out = NULL;
  int status = 0;
  g_autoptr(GError) error = NULL;
  if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL,
                    &status, &error) ||
      !g_spawn_check_wait_status(status, &error)) {
    fprintf(stderr, "bench_sim: child failed: %s\n", error->message);
    g_free(out);
    return NULL;
  }
  return out;
}

/* The 10^7-op case: ResNet-50 data parallelism, one all-reduce per layer, on
 * 1024 H100s (128 nodes), every rank simulated, `steps` steps (144: 68 ops
 * per rank and step, 10.0 million ops), then every file `stagger sim --out`
 * writes, into a temporary directory removed after. Prints wall and CPU
 * seconds of each phase and the peak RSS. */
static int
run_large(int steps)
{
  g_autofree char *mpath = st_test_src("models/resnet50.json");
  g_autofree char *cpath = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) m = st_model_load(mpath, &error);
  g_autoptr(StCluster) c = m ? st_cluster_load(cpath, &error) : NULL;
  if (c == NULL || !st_cluster_resize(c, 128, 0, &error)) {
    fprintf(stderr, "bench_sim: %s\n", error->message);
    return 1;
  }
  StOptions o;
  st_options_init(&o);
  o.micro_batch = 32;
  o.bucket_bytes = 0;
  o.steps = steps;
  double w[5], u[5];
  w[0] = now_s(), u[0] = cpu_s();
  g_autoptr(StSchedule) s = st_strategy_build(st_strategy_find("dp"), m, c, NULL, &o, &error);
  st_options_clear(&o);
  w[1] = now_s(), u[1] = cpu_s();
  StEngineOptions eo = {NULL, "auto", NULL, TRUE, NULL};
  StEngineStats stats = {0};
  g_autoptr(StTimeline) t = s ? st_simulate(s, &eo, &stats, &error) : NULL;
  w[2] = now_s(), u[2] = cpu_s();
  g_autoptr(StSummary) sum = t ? st_summary_new(t) : NULL;
  w[3] = now_s(), u[3] = cpu_s();
  g_autofree char *dir = g_dir_make_tmp("stagger-bench-XXXXXX", &error);
  gboolean ok = sum != NULL && dir != NULL && st_output_write_all(sum, dir, &error);
  w[4] = now_s(), u[4] = cpu_s();
  if (dir != NULL) {
    static const char *const files[] = {"report.json", "trace.json",    "memory.csv",
                                        "comm.csv",    "links.csv",     "link_rates.csv",
                                        "ops.csv",     NULL};
    for (int i = 0; files[i] != NULL; i++) {
      g_autofree char *f = g_build_filename(dir, files[i], NULL);
      g_remove(f);
    }
    g_rmdir(dir);
  }
  if (!ok) {
    fprintf(stderr, "bench_sim: %s\n", error ? error->message : "failed");
    return 1;
  }
  printf("resnet50 dp, 1024 GPUs unfolded, %d steps: %" G_GINT64_FORMAT " ops, %" G_GINT64_FORMAT
         " events\n", steps, stats.ops, stats.events);
  static const char *const phase[] = {"build", "simulate", "summary", "write outputs"};
  for (int i = 0; i < 4; i++)
    printf("  %-14s wall %7.2f s   cpu %7.2f s\n", phase[i], w[i + 1] - w[i], u[i + 1] - u[i]);
  printf("  %-14s wall %7.2f s   cpu %7.2f s   peak RSS %.0f MiB\n", "total", w[4] - w[0],
         u[4] - u[0], max_rss() / 1024.0);
  printf("  engine: %.3g events/s, %.3g ops/s of CPU\n", stats.events / (u[2] - u[1]),
         stats.ops / (u[2] - u[1]));
  st_engine_stats_clear(&stats);
  return 0;
}

/* One `stagger sim` (stdout and stderr dropped): its CPU seconds (user +
 * system), and the largest peak RSS (KiB) of the children so far
 * (RUSAGE_CHILDREN keeps the largest: sizes run in ascending order). FALSE
 * when it failed. */
static gboolean
run_stagger(char **argv, double *cpu, long *rss_kib)
{
  struct rusage before, after;
  getrusage(RUSAGE_CHILDREN, &before);
  pid_t pid = fork();
  if (pid < 0)
    return FALSE;
  if (pid == 0) {
    FILE *null = fopen("/dev/null", "w");
    if (null != NULL) {
      dup2(fileno(null), 1);
      dup2(fileno(null), 2);
    }
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return FALSE;
  getrusage(RUSAGE_CHILDREN, &after);
  *cpu = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) +
         (after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
         ((after.ru_utime.tv_usec - before.ru_utime.tv_usec) +
          (after.ru_stime.tv_usec - before.ru_stime.tv_usec)) / 1e6;
  *rss_kib = after.ru_maxrss;
  return TRUE;
}

static int
compare_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Issue 22's done-when: folded GPT-3 2.7B ZeRO-3 (micro-batch 1, mixed
 * precision, one step) on 131,072 and 1,048,576 H100s, the whole `stagger
 * sim` process as a user runs it (reading the inputs, building, simulating,
 * the summary and its table), `runs` times each: the least and the median
 * CPU seconds, and the largest peak RSS. `binary`: a stagger to measure
 * (another build, for before and after), NULL for the one beside tests/. */
static int
run_scale(int runs, const char *binary)
{
  g_autofree char *self = g_file_read_link("/proc/self/exe", NULL);
  g_autofree char *dir = self != NULL ? g_path_get_dirname(self) : NULL;
  g_autofree char *stagger = binary != NULL  ? g_strdup(binary)
                             : dir != NULL ? g_build_filename(dir, "..", "stagger", NULL)
                                           : NULL;
  g_autofree char *model = st_test_src("models/gpt3-2.7b.json");
  g_autofree char *cluster = st_test_src("models/clusters/dgx-h100.json");
  if (stagger == NULL || !g_file_test(stagger, G_FILE_TEST_IS_EXECUTABLE)) {
    fprintf(stderr, "bench_sim: no stagger binary at %s\n", stagger ? stagger : "?");
    return 1;
  }
  printf("stagger sim --model models/gpt3-2.7b.json --cluster models/clusters/dgx-h100.json \\\n"
         "    --nodes N --strategy zero --zero-stage 3 --micro-batch 1 --precision mixed "
         "--steps 1\n\n");
  printf("%9s %7s | %11s %11s | %13s\n", "GPUs", "nodes", "CPU s min", "CPU s med",
         "peak RSS MiB");
  const int sizes[] = {131072, 1048576};
  for (gsize i = 0; i < G_N_ELEMENTS(sizes); i++) {
    g_autofree char *nodes = g_strdup_printf("%d", sizes[i] / 8);
    char *argv[] = {stagger, "sim", "--model", model, "--cluster", cluster, "--nodes", nodes,
                    "--strategy", "zero", "--zero-stage", "3", "--micro-batch", "1",
                    "--precision", "mixed", "--steps", "1", NULL};
    g_autofree double *cpu = g_new(double, runs);
    long rss = 0;
    for (int k = 0; k < runs; k++) {
      long r = 0;
      if (!run_stagger(argv, &cpu[k], &r)) {
        fprintf(stderr, "bench_sim: stagger sim on %d GPUs failed\n", sizes[i]);
        return 1;
      }
      rss = MAX(rss, r);
    }
    qsort(cpu, (size_t)runs, sizeof(double), compare_double);
    printf("%9d %7d | %11.3f %11.3f | %13.1f\n", sizes[i], sizes[i] / 8, cpu[0], cpu[runs / 2],
           rss / 1024.0);
    fflush(stdout);
  }
  return 0;
}

int
main(int argc, char **argv)
{
  if (argc >= 2 && strcmp(argv[1], "--large") == 0)
    return run_large(argc >= 3 ? atoi(argv[2]) : 144);
  if (argc >= 2 && strcmp(argv[1], "--scale") == 0)
    return run_scale(argc >= 3 ? MAX(1, atoi(argv[2])) : 5, argc >= 4 ? argv[3] : NULL);
  if (argc == 5 && strcmp(argv[1], "--one") == 0)
    return run_one(argv[2], argv[3], atoi(argv[4]));
  if (argc == 6 && strcmp(argv[1], "--rss") == 0)
    return run_rss(argv[2], argv[3], atoi(argv[4]), strcmp(argv[5], "nofold") == 0);
  gboolean quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  g_autofree char *self = g_file_read_link("/proc/self/exe", NULL);
  struct {
    const char *strategy, *model;
    int gpus;
  } configs[] = {
    {"dp", "resnet50", 8},      {"dp", "resnet50", 64},     {"dp", "resnet50", 256},
    {"dp", "resnet50", 1024},   {"zero", "gpt3-2.7b", 64},  {"zero", "gpt3-2.7b", 256},
    {"zero", "gpt3-2.7b", 1024},
  };
  printf("%-24s %5s | %9s %9s %8s %11s %8s | %9s %11s %11s | %7s\n", "workload", "GPUs",
         "build s", "sim s", "ops", "events/s", "RSS MiB", "nofold s", "ops/s", "events/s",
         "ratio");
  for (gsize i = 0; i < G_N_ELEMENTS(configs); i++) {
    if (quick && configs[i].gpus > 64)
      continue;
    g_autofree char *gpus = g_strdup_printf("%d", configs[i].gpus);
    const char *args[] = {"--one", configs[i].strategy, configs[i].model, gpus, NULL};
    g_autofree char *out = child(self, args);
    if (out == NULL)
      return 1;
    double fb, fs, ub, us;
    long long fo, fe, uo, ue, rss;
    int fr;
    if (sscanf(out, "%lf %lf %lld %lld %d %lf %lf %lld %lld %lld", &fb, &fs, &fo, &fe, &fr, &ub,
               &us, &uo, &ue, &rss) != 10) {
      fprintf(stderr, "bench_sim: unexpected child output '%s'\n", out);
      return 1;
    }
    g_autofree char *label = g_strdup_printf("%s %s", configs[i].model,
                                             strcmp(configs[i].strategy, "dp") == 0
                                               ? "dp"
                                               : "zero-3");
    printf("%-24s %5d | %9.4f %9.4f %8lld %11.3g %8.1f | %9.4f %11.3g %11.3g | %6.1fx\n", label,
           configs[i].gpus, fb, fs, fo, fe / MAX(fs, 1e-9), rss / 1024.0, us,
           uo / MAX(us, 1e-9), ue / MAX(us, 1e-9), us / MAX(fs, 1e-9));
    fflush(stdout);
  }
  /* Memory against the number of identical ranks: the folded simulation
   * alone in a child, ResNet-50 DP from 8 to 1024 GPUs. */
  printf("\npeak RSS of the folded simulation alone (MiB), resnet50 dp:");
  int sizes[] = {8, 64, 256, 1024};
  for (gsize i = 0; i < G_N_ELEMENTS(sizes); i++) {
    if (quick && sizes[i] > 64)
      continue;
    g_autofree char *gpus = g_strdup_printf("%d", sizes[i]);
    const char *args[] = {"--rss", "dp", "resnet50", gpus, "fold", NULL};
    g_autofree char *out = child(self, args);
    if (out == NULL)
      return 1;
    printf(" %d GPUs %.1f%s", sizes[i], atol(out) / 1024.0, i + 1 < G_N_ELEMENTS(sizes) ? "," : "");
  }
  printf("\n");
  return 0;
}
