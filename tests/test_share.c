/* test_share.c: the "interference" GPU sharing model (cost/share_interference.c)
 * on worked examples whose closed form is stated first, its invariants over
 * random sets of kernels, where its leak comes from (a profile's sharing
 * measurement; Tally's published A100 measurements), and the GPU
 * performance file that carries it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "cluster/gpu_perf.h"
#include "cost/cost.h"
#include "testutil.h"

static const StShareModel *
model(const char *name)
{
  const StShareModel *m = st_share_model_find(name);
  g_assert_nonnull(m);
  return m;
}

static StShareClient
kernel(int priority, double fill, double mem, double leak)
{
  return (StShareClient){.priority = priority, .fill = fill, .weight = 1, .mem = mem,
                         .leak = leak};
}

/* ---- worked examples ------------------------------------------------------------ */

static void
test_alone_and_equal(void)
{
  const StShareModel *m = model("interference");
  /* Alone: rate 1 whatever its fill and memory use. */
  StShareClient one[] = {kernel(0, 0.3, 0.9, 0.8)};
  m->rates(one, 1);
  g_assert_cmpfloat_with_epsilon(one[0].rate, 1, 1e-12);
  /* Two full compute-bound kernels of one priority: demand 2, 1/2 each. */
  StShareClient two[] = {kernel(0, 1, 0, 0.8), kernel(0, 1, 0, 0.8)};
  m->rates(two, 2);
  g_assert_cmpfloat_with_epsilon(two[0].rate, 0.5, 1e-12);
  g_assert_cmpfloat_with_epsilon(two[1].rate, 0.5, 1e-12);
}

static void
test_priority_leak(void)
{
  const StShareModel *m = model("interference");
  /* High (fill 1, leak 0.8) beside low (fill 1): r0 = 1, r_eq = 1/2,
   * 1/r = 1 + 0.8 (2 - 1) = 1.8; the low one gets 1 - 1/1.8 = 4/9. */
  StShareClient pair[] = {kernel(-1, 1, 0, 0.8), kernel(1, 1, 0, 0.8)};
  m->rates(pair, 2);
  g_assert_cmpfloat_with_epsilon(pair[1].rate, 1 / 1.8, 1e-12);
  g_assert_cmpfloat_with_epsilon(pair[0].rate, 4.0 / 9, 1e-12);
  /* A small low kernel (fill 0.2) beside a full high one: at equal
   * priority both would run at 1/1.2; with leak 0.5 the high one runs at
   * 1 / (1 + 0.5 x 0.2) = 1/1.1 and the low one gets (1 - 1/1.1) / 0.2. */
  StShareClient small[] = {kernel(1, 1, 0, 0.5), kernel(0, 0.2, 0, 0.5)};
  m->rates(small, 2);
  g_assert_cmpfloat_with_epsilon(small[0].rate, 1 / 1.1, 1e-12);
  g_assert_cmpfloat_with_epsilon(small[1].rate, (1 - 1 / 1.1) / 0.2, 1e-12);
  /* A high kernel that leaves room (fill 0.6) is not slowed at all by a
   * low one that fits beside it (fill 0.4): nothing to leak. */
  StShareClient room[] = {kernel(1, 0.6, 0, 1), kernel(0, 0.4, 0, 1)};
  m->rates(room, 2);
  g_assert_cmpfloat_with_epsilon(room[0].rate, 1, 1e-12);
  g_assert_cmpfloat_with_epsilon(room[1].rate, 1, 1e-12);
}

static void
test_memory_bandwidth(void)
{
  const StShareModel *m = model("interference");
  /* Two half-GPU kernels fit on the SMs but each asks 0.8 of the memory
   * bandwidth: 1.6 > 1, max-min gives each 0.5, so each runs at
   * 0.5 / 0.8 = 0.625, and priority does not change it (DRAM does not know
   * stream priorities). */
  for (int prio = 0; prio < 2; prio++) {
    StShareClient c[] = {kernel(prio, 0.5, 0.8, 0.8), kernel(0, 0.5, 0.8, 0.8)};
    m->rates(c, 2);
    g_assert_cmpfloat_with_epsilon(c[0].rate, 0.625, 1e-12);
    g_assert_cmpfloat_with_epsilon(c[1].rate, 0.625, 1e-12);
  }
  /* Max-min: a light ask (0.2) is served whole, the heavy one (1.0) gets
   * the remaining 0.8. */
  StShareClient c[] = {kernel(0, 0.3, 0.2, 0), kernel(0, 0.7, 1.0, 0)};
  m->rates(c, 2);
  g_assert_cmpfloat_with_epsilon(c[0].rate, 1, 1e-12);
  g_assert_cmpfloat_with_epsilon(c[1].rate, 0.8, 1e-12);
  /* Folded kernels: weight 3 of ask 0.5 beside one of ask 0.5: four
   * kernels share 1, a quarter each: rate 0.5 for all (fills fit: 4 x 0.25). */
  StShareClient f[] = {kernel(0, 0.25, 0.5, 0), kernel(0, 0.25, 0.5, 0)};
  f[0].weight = 3;
  m->rates(f, 2);
  g_assert_cmpfloat_with_epsilon(f[0].rate, 0.5, 1e-12);
  g_assert_cmpfloat_with_epsilon(f[1].rate, 0.5, 1e-12);
}

/* ---- invariants over random sets ------------------------------------------------- */

static void
random_set(GRand *rng, StShareClient *c, int n)
{
  for (int i = 0; i < n; i++) {
    c[i] = kernel(g_rand_int_range(rng, -1, 2), g_rand_double_range(rng, 0.05, 1.0),
                  g_rand_boolean(rng) ? 0 : g_rand_double_range(rng, 0, 1),
                  g_rand_double_range(rng, 0, 1));
    c[i].weight = g_rand_int_range(rng, 1, 4);
  }
}

static void
test_invariants(void)
{
  /* Over random kernels: rates in [0, 1]; the SM time handed out never
   * exceeds the device, nor the memory traffic the bandwidth; with every
   * leak 0 and no memory use the model is "priority" exactly; with every
   * leak 1 priorities change nothing. */
  const StShareModel *inter = model("interference"), *prio = model("priority");
  g_autoptr(GRand) rng = g_rand_new_with_seed(11);
  for (int trial = 0; trial < 2000; trial++) {
    int n = g_rand_int_range(rng, 1, 7);
    StShareClient c[6], p[6], e[6];
    random_set(rng, c, n);
    inter->rates(c, n);
    double sm = 0, mem = 0, ask = 0;
    for (int i = 0; i < n; i++) {
      g_assert_cmpfloat(c[i].rate, >=, 0);
      g_assert_cmpfloat(c[i].rate, <=, 1 + 1e-12);
      sm += c[i].rate * c[i].fill * c[i].weight;
      mem += c[i].rate * c[i].mem * c[i].weight;
      ask += c[i].mem * c[i].weight;
    }
    g_assert_cmpfloat(sm, <=, 1 + 1e-9);
    if (ask > 1)
      g_assert_cmpfloat(mem, <=, 1 + 1e-9);

    for (int i = 0; i < n; i++) {
      p[i] = c[i];
      p[i].leak = 0;
      p[i].mem = 0;
    }
    memcpy(e, p, sizeof(StShareClient) * (size_t)n);
    inter->rates(p, n);
    prio->rates(e, n);
    for (int i = 0; i < n; i++)
      g_assert_cmpfloat_with_epsilon(p[i].rate, e[i].rate, 1e-9);

    for (int i = 0; i < n; i++) {
      p[i].leak = 1;
      e[i] = p[i];
      e[i].priority = 0;
    }
    inter->rates(p, n);
    inter->rates(e, n);
    for (int i = 0; i < n; i++)
      g_assert_cmpfloat_with_epsilon(p[i].rate, e[i].rate, 1e-9);
  }
}

/* ---- where the leak comes from ----------------------------------------------------- */

static int
compare_doubles(gconstpointer a, gconstpointer b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void
test_leak_from_tally(void)
{
  /* Zhao et al., Tally, ASPLOS 2025 (traces/reference/tally): on one A100,
   * an inference server beside a training job under MPS, without and with
   * client priorities. Per pair, leak = (s_prio - 1) / (s_mps - 1) with s
   * the server's latency over alone; the default GPU performance file's
   * sharing.priority_leak is the median over the 12 pairs (0.80), rounded
   * to two decimals, and every pair lies in (0, 1): priority helps, but
   * never fully. */
  g_autofree char *path = st_test_src("traces/reference/tally/priority-aware-perf.csv");
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  g_autoptr(GArray) leaks = g_array_new(FALSE, FALSE, sizeof(double));
  for (int i = 1; lines[i] != NULL; i++) {
    if (*lines[i] == '\0')
      continue;
    g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
    g_assert_cmpuint(g_strv_length(f), ==, 7);
    double alone = g_ascii_strtod(f[2], NULL), mps = g_ascii_strtod(f[3], NULL),
           prio = g_ascii_strtod(f[4], NULL);
    double leak = (prio / alone - 1) / (mps / alone - 1);
    g_assert_cmpfloat(leak, >, 0);
    g_assert_cmpfloat(leak, <, 1);
    g_array_append_val(leaks, leak);
  }
  g_assert_cmpuint(leaks->len, ==, 12);
  g_array_sort(leaks, compare_doubles);
  double med = (g_array_index(leaks, double, 5) + g_array_index(leaks, double, 6)) / 2;
  g_autoptr(GError) error = NULL;
  g_autoptr(StGpuPerf) perf = st_gpu_perf_load_default(&error);
  g_assert_no_error(error);
  g_assert_cmpfloat_with_epsilon(perf->priority_leak.value, round(med * 100) / 100, 1e-12);
}

static void
test_leak_from_profile(void)
{
  /* A profile's sharing measurement of one pass: two copies at equal
   * priority end at 2.0 x alone (mean), the high-priority one of a pair at
   * 1.5 x: leak = (1.5 - 1) / (2 - 1) = 0.5. Copies that do not slow each
   * other (1.02 x) give nothing to measure. */
  g_autoptr(StProfile) p = st_profile_new();
  double eq[] = {190, 210}, hi[] = {150, 250}, flat[] = {102, 102};
  StProfileSharing m = {"fc1", "sig", ST_PASS_FWD, 8, 2, FALSE, 100, eq};
  st_profile_add_sharing(p, "GPU", &m);
  m.priorities = TRUE;
  m.end_ns = hi;
  st_profile_add_sharing(p, "GPU", &m);
  double leak = -1;
  g_assert_true(st_profile_layer_leak(p, "GPU", "fc1", NULL, ST_PASS_FWD, 8, &leak));
  g_assert_cmpfloat_with_epsilon(leak, 0.5, 1e-12);
  g_assert_true(st_profile_layer_leak(p, "GPU", "other", "sig", ST_PASS_FWD, 8, &leak));
  g_assert_false(st_profile_layer_leak(p, "GPU", "fc1", NULL, ST_PASS_BWD, 8, &leak));
  g_assert_false(st_profile_layer_leak(p, "GPU", "fc1", NULL, ST_PASS_FWD, 16, &leak));
  m.priorities = FALSE;
  m.end_ns = flat;
  st_profile_add_sharing(p, "GPU", &m);
  g_assert_false(st_profile_layer_leak(p, "GPU", "fc1", NULL, ST_PASS_FWD, 8, &leak));
}

/* ---- the GPU performance file -------------------------------------------------------- */

static void
expect_refused(const char *text, const char *needle)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(cJSON) root = cJSON_Parse(text);
  g_assert_nonnull(root);
  g_autoptr(StGpuPerf) p = st_gpu_perf_from_json(root, "x.json", &error);
  g_assert_null(p);
  g_assert_nonnull(error);
  if (strstr(error->message, needle) == NULL)
    g_error("'%s' does not say '%s'", error->message, needle);
}

static void
test_perf_file(void)
{
  /* The default file loads, round-trips through to_json, and every number
   * carries its source; numbers without one, out of range, or unknown keys
   * are refused naming the key. */
  g_autoptr(GError) error = NULL;
  g_autoptr(StGpuPerf) p = st_gpu_perf_load_default(&error);
  g_assert_no_error(error);
  g_assert_true(*p->memory_fraction.source != '\0' && *p->priority_leak.source != '\0');
  g_autoptr(cJSON) json = st_gpu_perf_to_json(p);
  g_autoptr(StGpuPerf) back = st_gpu_perf_from_json(json, "round-trip", &error);
  g_assert_no_error(error);
  g_assert_cmpfloat(back->memory_fraction.value, ==, p->memory_fraction.value);
  g_assert_cmpfloat(back->priority_leak.value, ==, p->priority_leak.value);
  g_assert_cmpstr(back->priority_leak.source, ==, p->priority_leak.source);

  const char *head = "{\"format\": \"stagger-gpu-performance\", \"version\": 1, \"gpu\": \"G\", ";
  g_autofree char *no_source = g_strconcat(
    head, "\"memory\": {\"fraction\": 0.9}, \"sharing\": {\"priority_leak\": 0.5, "
          "\"source\": \"s\"}}", NULL);
  expect_refused(no_source, "'source'");
  g_autofree char *big = g_strconcat(
    head, "\"memory\": {\"fraction\": 1.5, \"source\": \"s\"}, \"sharing\": "
          "{\"priority_leak\": 0.5, \"source\": \"s\"}}", NULL);
  expect_refused(big, "memory: key 'fraction'");
  g_autofree char *typo = g_strconcat(
    head, "\"memory\": {\"fraction\": 0.9, \"source\": \"s\"}, \"sharing\": "
          "{\"priority_leek\": 0.5, \"source\": \"s\"}}", NULL);
  expect_refused(typo, "priority_leek");
  expect_refused("{\"format\": \"other\", \"version\": 1, \"gpu\": \"G\"}", "format");
}

static void
assert_curve_eq(const StGemmCurve *a, const StGemmCurve *b)
{
  g_assert_cmpint(a->tile_m, ==, b->tile_m);
  g_assert_cmpint(a->tile_n, ==, b->tile_n);
  g_assert_cmpfloat(a->k_half, ==, b->k_half);
  g_assert_cmpfloat(a->eff_fp32, ==, b->eff_fp32);
  g_assert_cmpfloat(a->eff_tf32, ==, b->eff_tf32);
  g_assert_cmpfloat(a->eff_16bit, ==, b->eff_16bit);
  g_assert_cmpint(a->fp32_as_tf32, ==, b->fp32_as_tf32);
  g_assert_cmpstr(a->source, ==, b->source);
}

/* The file `name` as JSON with the value at [k1][k2] (k2 may go one level
 * deeper: "efficiency.16bit") replaced by `value` (parsed), refused with a
 * message saying `needle`. */
static void
expect_edit_refused(const char *name, const char *k1, const char *k2, const char *value,
                    const char *needle)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(StGpuPerf) p = st_gpu_perf_load_named(name, &error);
  g_assert_no_error(error);
  g_autoptr(cJSON) json = st_gpu_perf_to_json(p);
  cJSON *obj = cJSON_GetObjectItemCaseSensitive(json, k1);
  const char *key = k2, *dot = strchr(k2, '.');
  if (dot != NULL) { /* one level deeper: "efficiency.16bit" */
    g_autofree char *head = g_strndup(k2, (gsize)(dot - k2));
    obj = cJSON_GetObjectItemCaseSensitive(obj, head);
    key = dot + 1;
  }
  g_assert_nonnull(obj);
  g_assert_true(cJSON_ReplaceItemInObjectCaseSensitive(obj, key, cJSON_Parse(value)));
  g_autofree char *text = cJSON_PrintUnformatted(json);
  expect_refused(text, needle);
}

static void
test_perf_curves(void)
{
  /* Every shipped GPU file round-trips with its curves (sms, launch floor,
   * pooling, GEMM and convolution curves, fused attention) and names a
   * source for each; a curve out of range, of the wrong shape or with an
   * unknown math mode is refused, naming the file's part and key. */
  static const char *const names[] = {"default", "a100-sxm4", "h100-sxm", "h200-sxm",
                                      "v100-sxm2", NULL};
  for (int i = 0; names[i] != NULL; i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(StGpuPerf) p = st_gpu_perf_load_named(names[i], &error);
    g_assert_no_error(error);
    g_autoptr(cJSON) json = st_gpu_perf_to_json(p);
    g_autoptr(StGpuPerf) back = st_gpu_perf_from_json(json, "round-trip", &error);
    g_assert_no_error(error);
    g_assert_cmpfloat(back->sms.value, ==, p->sms.value);
    g_assert_cmpfloat(back->launch_us.value, ==, p->launch_us.value);
    g_assert_cmpfloat(back->pool_fraction.value, ==, p->pool_fraction.value);
    g_assert_true(*p->sms.source && *p->launch_us.source && *p->pool_fraction.source);
    assert_curve_eq(&back->gemm, &p->gemm);
    assert_curve_eq(&back->conv, &p->conv);
    g_assert_cmpint(back->attention[ST_ATTN_FLASH2].n, ==, p->attention[ST_ATTN_FLASH2].n);
    for (int k = 0; k < p->attention[ST_ATTN_FLASH2].n; k++) {
      g_assert_cmpfloat(back->attention[ST_ATTN_FLASH2].seq[k], ==, p->attention[ST_ATTN_FLASH2].seq[k]);
      g_assert_cmpfloat(back->attention[ST_ATTN_FLASH2].efficiency[k], ==, p->attention[ST_ATTN_FLASH2].efficiency[k]);
    }
    g_assert_cmpstr(back->attention[ST_ATTN_FLASH2].source, ==, p->attention[ST_ATTN_FLASH2].source);
  }
  expect_edit_refused("h100-sxm", "gemm", "efficiency.16bit", "1.2",
                      "x.json: gemm: key '16bit': 1.2 is not in (0, 1]");
  expect_edit_refused("h100-sxm", "conv", "tile", "[128]", "conv: key 'tile'");
  expect_edit_refused("h100-sxm", "conv", "fp32_math", "\"fp16\"", "key 'fp32_math'");
  expect_edit_refused("h100-sxm", "gemm", "source", "\"\"", "gemm: key 'source'");
  expect_edit_refused("h100-sxm", "attention", "seq", "[512, 1024, 4096, 2048, 8192, 16384]",
                      "'seq' must ascend");
  expect_edit_refused("h100-sxm", "sms", "count", "131.5", "sms: key 'count'");
  expect_edit_refused("h100-sxm", "launch", "us", "-1", "launch");
}

static void
test_cluster_names_its_file(void)
{
  /* Every shipped cluster loads its GPU performance data, and a cluster
   * carries it inline through to_json, so a schedule file is self-contained. */
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-a100", 0, 0);
  g_assert_nonnull(c->gpu.perf);
  g_autoptr(cJSON) json = st_cluster_to_json(c);
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) back = st_cluster_from_json(json, "round-trip", &error);
  g_assert_no_error(error);
  g_assert_cmpfloat(back->gpu.perf->priority_leak.value, ==, c->gpu.perf->priority_leak.value);
  g_assert_cmpstr(back->gpu.perf->gpu, ==, c->gpu.perf->gpu);

  /* A name finds the library file wherever the cluster file lies (a copy in
   * /tmp included); anything with a '/' or ending in .json is a path. */
  g_assert_true(st_gpu_perf_is_name("h100-sxm"));
  g_assert_false(st_gpu_perf_is_name("../gpus/h100-sxm.json"));
  g_assert_false(st_gpu_perf_is_name("h100-sxm.json"));
  g_assert_false(st_gpu_perf_is_name(".."));
  g_autoptr(StGpuPerf) h100 = st_gpu_perf_load_named("h100-sxm", &error);
  g_assert_no_error(error);
  g_assert_cmpfloat(h100->sms.value, ==, 132);
  g_autoptr(StGpuPerf) none = st_gpu_perf_load_named("no-such-gpu", &error);
  g_assert_null(none);
  g_assert_error(error, ST_GPU_PERF_ERROR, ST_ERROR_IO);
  g_assert_nonnull(strstr(error->message, "models/gpus/no-such-gpu.json"));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/share/interference/alone-and-equal", test_alone_and_equal);
  g_test_add_func("/share/interference/priority-leak", test_priority_leak);
  g_test_add_func("/share/interference/memory-bandwidth", test_memory_bandwidth);
  g_test_add_func("/share/interference/invariants", test_invariants);
  g_test_add_func("/share/leak/tally", test_leak_from_tally);
  g_test_add_func("/share/leak/profile", test_leak_from_profile);
  g_test_add_func("/share/perf-file/strict", test_perf_file);
  g_test_add_func("/share/perf-file/curves", test_perf_curves);
  g_test_add_func("/share/perf-file/cluster", test_cluster_names_its_file);
  return g_test_run();
}
