/* test_profiler.c: `stagger profile`'s measurements (exec/profiler.h) on the
 * host backend, what they add to the profile format (profile/profile.h),
 * and the simulator using a measured fill.
 *
 * Host timings are noisy: no test asserts on their values, only on their
 * presence, sign and what the simulator and the files make of them. */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "cost/cost.h"
#include "engine/engine.h"
#include "exec/device.h"
#include "exec/profiler.h"
#include "strategy/strategy.h"
#include "testutil.h"

#define DEV "TestGPU"

static void
host_options(StProfilerOptions *o)
{
  st_profiler_options_init(o);
  o->backend = "host";
  o->warmup = 1;
  o->repeats = 5;
  o->min_bytes = 1024;
  o->max_bytes = 16384;
  o->timeout_s = 60;
}

/* ---- the fill inferred from measurements -------------------------------------- */

/* Times the "priority" share model itself predicts for k equal kernels of
 * fill f, each alone t1: all end at t1 / rate. Inferring f back from them
 * gives f when some k shows a slowdown (k f > 1), else the bound 1 / kmax. */
static void
test_fill_inference(void)
{
  const StShareModel *model = st_share_model_find("priority");
  g_assert_nonnull(model);
  static const int streams[] = {2, 4};
  static const double fills[] = {0.1, 0.2, 0.3, 0.45, 0.5, 0.7, 1.0};
  const double t1 = 1000;
  for (gsize i = 0; i < G_N_ELEMENTS(fills); i++) {
    double span[2];
    for (int c = 0; c < 2; c++) {
      StShareClient clients[4];
      for (int k = 0; k < streams[c]; k++)
        clients[k] = (StShareClient){0, fills[i], 1.0, 0.0, 0.0, 0.0};
      model->rates(clients, streams[c]);
      span[c] = t1 / clients[0].rate;
    }
    gboolean bound = FALSE;
    double f = st_profiler_fill(t1, streams, span, 2, 0.05, &bound);
    if (fills[i] > 0.25 + 1e-9) {
      g_assert_cmpfloat_with_epsilon(f, fills[i], 1e-9);
      g_assert_false(bound);
    } else {
      /* Four copies of a quarter-device kernel fit: only f <= 1/4 is known. */
      g_assert_cmpfloat_with_epsilon(f, 0.25, 1e-9);
      g_assert_true(bound);
    }
  }
  /* Noise: copies measured faster than one alone count as not slowed;
   * worse than serial (thrashing) is clamped to a full device. */
  static const double faster[] = {950, 980};
  gboolean bound = FALSE;
  g_assert_cmpfloat_with_epsilon(st_profiler_fill(1000, streams, faster, 2, 0.05, &bound), 0.25,
                                 1e-9);
  g_assert_true(bound);
  static const double thrash[] = {2500, 5000};
  g_assert_cmpfloat_with_epsilon(st_profiler_fill(1000, streams, thrash, 2, 0.05, &bound), 1.0,
                                 1e-9);
  g_assert_false(bound);
}

/* ---- the profile format's additions ----------------------------------------------- */

static void
test_format_fill(void)
{
  g_autoptr(StProfile) p = st_profile_new();
  const char *sig = "linear{out=8}[8]";
  st_profile_add_layer(p, DEV, "fc", sig, ST_PASS_FWD, 8, 1000, 10);
  st_profile_add_layer(p, DEV, "fc", sig, ST_PASS_FWD, 32, 3000, 10);
  double fill = 0;
  /* No fill measured: none found (the engine then uses 1). */
  g_assert_false(st_profile_layer_fill(p, DEV, "fc", sig, ST_PASS_FWD, 8, &fill));
  /* Only on an existing entry. */
  g_assert_false(st_profile_set_layer_fill(p, DEV, "fc", sig, ST_PASS_FWD, 16, 0.5, FALSE));
  g_assert_true(st_profile_set_layer_fill(p, DEV, "fc", sig, ST_PASS_FWD, 8, 0.4, FALSE));
  g_assert_true(st_profile_set_layer_fill(p, DEV, "fc", sig, ST_PASS_FWD, 32, 0.8, TRUE));
  /* Exact; between: 0.4 + 0.4 * (16 - 8) / 24; beyond: the nearest. */
  g_assert_true(st_profile_layer_fill(p, DEV, "fc", sig, ST_PASS_FWD, 8, &fill));
  g_assert_cmpfloat_with_epsilon(fill, 0.4, 1e-12);
  g_assert_true(st_profile_layer_fill(p, DEV, "fc", sig, ST_PASS_FWD, 16, &fill));
  g_assert_cmpfloat_with_epsilon(fill, 0.4 + 0.4 / 3, 1e-12);
  g_assert_true(st_profile_layer_fill(p, DEV, "fc", sig, ST_PASS_FWD, 2, &fill));
  g_assert_cmpfloat_with_epsilon(fill, 0.4, 1e-12);
  g_assert_true(st_profile_layer_fill(p, DEV, "fc", sig, ST_PASS_FWD, 64, &fill));
  g_assert_cmpfloat_with_epsilon(fill, 0.8, 1e-12);
  /* Under the signature for another model's layer; not for another pass. */
  g_assert_true(st_profile_layer_fill(p, DEV, "other", sig, ST_PASS_FWD, 8, &fill));
  g_assert_false(st_profile_layer_fill(p, DEV, "fc", sig, ST_PASS_BWD, 8, &fill));
  /* A new time for the entry keeps its fill. */
  st_profile_add_layer(p, DEV, "fc", sig, ST_PASS_FWD, 8, 1100, 10);
  g_assert_true(st_profile_layer_fill(p, DEV, "fc", sig, ST_PASS_FWD, 8, &fill));
  g_assert_cmpfloat_with_epsilon(fill, 0.4, 1e-12);
}

static void
test_format_round_trip(void)
{
  g_autofree char *tmp = st_test_tmpdir();
  g_autoptr(StProfile) p = st_profile_new();
  st_profile_set_device(p, DEV, "580.65.06", "13.0", "2026-11-21", "stagger profile");
  st_profile_set_machine(p, "cuda: a test GPU", "mixed");
  st_profile_add_layer(p, DEV, "fc", "linear{}[8]", ST_PASS_BWD, 4, 2000, 20);
  g_assert_true(st_profile_set_layer_fill(p, DEV, "fc", "linear{}[8]", ST_PASS_BWD, 4, 0.25, TRUE));
  st_profile_add_link_measured(p, DEV, ST_COLL_ALL_GATHER, ST_LINK_INTRA_NODE, 4, 1 << 20, 50e3,
                               1e3);
  st_profile_add_p2p(p, DEV, ST_LINK_INTER_NODE, 1 << 20, 100e3, 2e3);
  st_profile_add_copy(p, DEV, ST_COPY_H2D, 1 << 20, 80e3, 0.5e3);
  st_profile_add_copy(p, DEV, ST_COPY_H2D, 4 << 20, 300e3, 0.5e3);
  const double ends[] = {2500, 2600};
  StProfileSharing m = {"fc", "linear{}[8]", ST_PASS_BWD, 4, 2, TRUE, 2000, ends};
  st_profile_add_sharing(p, DEV, &m);
  g_autofree char *path = g_build_filename(tmp, "p.json", NULL);
  g_autoptr(GError) error = NULL;
  g_assert_true(st_profile_save(p, path, &error));
  g_assert_no_error(error);

  g_autoptr(StProfile) back = st_profile_load(path, &error);
  g_assert_no_error(error);
  g_assert_cmpint(st_profile_n_layer_entries(back), ==, 1);
  g_assert_cmpint(st_profile_n_link_entries(back), ==, 2);
  g_assert_cmpint(st_profile_n_copy_entries(back), ==, 2);
  g_assert_cmpint(st_profile_n_sharing_entries(back), ==, 1);
  double v = 0;
  g_assert_true(st_profile_layer_fill(back, DEV, NULL, "linear{}[8]", ST_PASS_BWD, 4, &v));
  g_assert_cmpfloat_with_epsilon(v, 0.25, 1e-12);
  g_assert_true(st_profile_p2p_time(back, DEV, ST_LINK_INTER_NODE, 1 << 20, &v));
  g_assert_cmpfloat_with_epsilon(v, 100e3, 1e-6);
  g_assert_false(st_profile_p2p_time(back, DEV, ST_LINK_INTRA_NODE, 1 << 20, &v));
  /* Copies: 80 us at 1 MiB, 300 us at 4 MiB: at 2 MiB 80 + 220 / 3. */
  g_assert_true(st_profile_copy_time(back, DEV, ST_COPY_H2D, 2 << 20, &v));
  g_assert_cmpfloat_with_epsilon(v, 80e3 + 220e3 / 3, 1e-6);
  g_assert_false(st_profile_copy_time(back, DEV, ST_COPY_D2H, 2 << 20, &v));
  /* A p2p entry is no collective. */
  g_assert_false(st_profile_link_time(back, DEV, ST_COLL_ALL_REDUCE, ST_LINK_INTER_NODE, 2,
                                      1 << 20, &v, NULL));

  g_autofree char *text = st_test_read(path, NULL);
  g_assert_nonnull(strstr(text, "\"machine\":\t\"cuda: a test GPU\""));
  g_assert_nonnull(strstr(text, "\"precision\":\t\"mixed\""));
  g_assert_nonnull(strstr(text, "\"fill_bound\":\ttrue"));
  g_assert_nonnull(strstr(text, "\"collective\":\t\"send_recv\""));
  /* Written again from what was read: the same bytes. */
  g_autofree char *again = g_build_filename(tmp, "again.json", NULL);
  g_assert_true(st_profile_save(back, again, &error));
  g_autofree char *text2 = st_test_read(again, NULL);
  g_assert_cmpstr(text, ==, text2);

  /* Profiles made before these keys existed still load. */
  g_autofree char *old = st_test_src("traces/profiles/a100-deeppool-vgg16.json");
  g_autoptr(StProfile) imported = st_profile_load(old, &error);
  g_assert_no_error(error);
  g_assert_cmpint(st_profile_n_layer_entries(imported), >, 0);
}

/* algbw = bytes / time and busbw = algbw x nccl-tests' factor, written by save. */
static void
check_bandwidths(const char *path, gboolean expect_local)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(cJSON) root = st_json_load_file(path, &error);
  g_assert_no_error(error);
  const cJSON *links = cJSON_GetObjectItem(root, "links"), *e;
  g_assert_cmpint(cJSON_GetArraySize(links), >, 0);
  cJSON_ArrayForEach(e, links)
  {
    const char *coll = cJSON_GetStringValue(cJSON_GetObjectItem(e, "collective"));
    int ranks = cJSON_GetObjectItem(e, "ranks")->valueint;
    double bytes = cJSON_GetObjectItem(e, "bytes")->valuedouble;
    double time_us = cJSON_GetObjectItem(e, "time_us")->valuedouble;
    double algbw = cJSON_GetObjectItem(e, "algbw_GBps")->valuedouble;
    double busbw = cJSON_GetObjectItem(e, "busbw_GBps")->valuedouble;
    g_assert_cmpfloat(time_us, >, 0);
    g_assert_cmpfloat_with_epsilon(algbw, bytes / (time_us * 1e3), algbw * 1e-9);
    double factor = 1.0;
    StCollKind kind;
    if (strcmp(coll, "send_recv") != 0) {
      g_assert_true(st_coll_parse(coll, &kind, NULL));
      factor = st_coll_busbw_factor(kind, ranks);
    } else {
      g_assert_cmpint(ranks, ==, 2);
    }
    g_assert_cmpfloat_with_epsilon(busbw, algbw * factor, algbw * 1e-9 + 1e-15);
    if (expect_local)
      g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(e, "link")), ==, "local");
  }
}

static void
test_format_bad_input(void)
{
  static const struct {
    const char *text, *fragment;
  } cases[] = {
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"layers\": ["
     "{\"name\": \"a\", \"pass\": \"fwd\", \"x\": 1, \"time_us\": 1, \"fill\": 0}]}",
     "layers[0]: key 'fill'"},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"layers\": ["
     "{\"name\": \"a\", \"pass\": \"fwd\", \"x\": 1, \"time_us\": 1, \"fill\": 1.5}]}",
     "outside (0, 1]"},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"links\": ["
     "{\"collective\": \"send_recv\", \"link\": \"local\", \"ranks\": 4, \"bytes\": 8, "
     "\"time_us\": 1}]}",
     "links[0]: key 'ranks'"},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"copies\": ["
     "{\"kind\": \"p2p\", \"bytes\": 8, \"time_us\": 1}]}",
     "copies[0]: key 'kind'"},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"sharing\": ["
     "{\"name\": \"a\", \"pass\": \"fwd\", \"x\": 1, \"streams\": 2, \"priorities\": false, "
     "\"alone_us\": 1, \"end_us\": [1]}]}",
     "sharing[0]: key 'end_us': 1 values for 2 streams"},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"precision\": "
     "\"fp4\"}",
     "key 'precision'"},
  };
  g_autofree char *tmp = st_test_tmpdir();
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *name = g_strdup_printf("bad-%zu.json", i);
    g_autofree char *path = g_build_filename(tmp, name, NULL);
    g_assert_true(g_file_set_contents(path, cases[i].text, -1, NULL));
    g_autoptr(GError) error = NULL;
    g_autoptr(StProfile) p = st_profile_load(path, &error);
    g_assert_null(p);
    g_assert_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID);
    if (strstr(error->message, cases[i].fragment) == NULL || strstr(error->message, path) == NULL)
      g_error("case %zu: '%s' does not name '%s' and the file", i, error->message,
              cases[i].fragment);
  }
}

/* ---- the device backend's replay ------------------------------------------------ */

typedef struct {
  gint calls;
  GMutex lock;
  GCond cond;
  int arrived;
  int generation;
  gboolean fail;
} Meet;

/* Every part waits for the others: only parts on threads of their own get
 * through, as local comm's ranks must. */
static gboolean
meet_body(gpointer data, void *stream, GError **error)
{
  Meet *m = data;
  g_atomic_int_inc(&m->calls);
  if (m->fail) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED, "the body failed on purpose");
    return FALSE;
  }
  g_mutex_lock(&m->lock);
  int gen = m->generation;
  if (++m->arrived == 3) {
    m->arrived = 0;
    m->generation++;
    g_cond_broadcast(&m->cond);
  }
  while (gen == m->generation)
    g_cond_wait(&m->cond, &m->lock);
  g_mutex_unlock(&m->lock);
  g_usleep(200);
  return TRUE;
}

static void
test_replay_host(void)
{
  g_autoptr(GError) error = NULL;
  StExecDevice *dev = st_device_host.open(0, &error);
  g_assert_no_error(error);
  Meet m = {0};
  g_mutex_init(&m.lock);
  g_cond_init(&m.cond);
  void *streams[3];
  StReplayPart parts[3];
  for (int p = 0; p < 3; p++) {
    streams[p] = st_device_host.stream_new(dev, 0, &error);
    parts[p] = (StReplayPart){streams[p], meet_body, &m};
  }
  int64_t times[4 * 3];
  g_assert_true(st_device_host.replay(dev, parts, 3, FALSE, 2, 4, times, &error));
  g_assert_no_error(error);
  /* 3 parts x (2 warm-up + 4 timed runs), each timed run at least the sleep. */
  g_assert_cmpint(g_atomic_int_get(&m.calls), ==, 18);
  for (int i = 0; i < 12; i++)
    g_assert_cmpint(times[i], >=, 200000);
  /* A failing body stops the replay with its error, and nothing hangs. */
  m.fail = TRUE;
  g_assert_false(st_device_host.replay(dev, parts, 3, FALSE, 1, 3, times, &error));
  g_assert_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_FAILED);
  for (int p = 0; p < 3; p++)
    st_device_host.stream_free(dev, streams[p]);
  st_device_host.close(dev);
  g_mutex_clear(&m.lock);
  g_cond_clear(&m.cond);
}

/* ---- kernels on the host ------------------------------------------------------------ */

/* A schedule of `strategy` for `m` on one GPU named "host" (as the host
 * profiles name their device), `ranks` ranks sharing it. */
static StSchedule *
host_schedule(const StModel *m, const char *strategy, int ranks, int micro_batch,
              const StProfile *profile)
{
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) c = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(c, 0, 1, &error));
  g_free(c->gpu.name);
  c->gpu.name = g_strdup("host");
  StOptions o;
  st_options_init(&o);
  o.ranks = ranks;
  o.micro_batch = micro_batch;
  o.global_batch = (int64_t)ranks * micro_batch;
  o.steps = 2;
  StSchedule *s = st_strategy_build(st_strategy_find(strategy), m, c, profile, &o, &error);
  g_assert_no_error(error);
  st_options_clear(&o);
  return s;
}

/* Profiles `model` at batches 1, 2, 4 on the host and checks what every
 * layer got, that the file loads back, and that the simulator costs every
 * compute op from it. */
static void
profile_tiny(const char *model_path, gboolean sharing)
{
  g_autoptr(StModel) m = st_test_model(model_path);
  StProfilerOptions o;
  host_options(&o);
  o.sharing = sharing;
  static const int batches[] = {1, 2, 4};
  g_autoptr(StProfile) p = st_profile_new();
  StProfilerReport report = {0};
  g_autoptr(GError) error = NULL;
  g_assert_true(st_profiler_model(m, batches, 3, &o, p, &report, &error));
  g_assert_no_error(error);
  g_assert_cmpstr(report.device, ==, "host");
  g_assert_true(g_str_has_prefix(report.machine, "host: "));
  g_assert_true(report.writer);
  for (int i = 0; i < m->n_layers; i++) {
    const StLayer *l = &m->layers[i];
    for (int b = 0; b < 3; b++) {
      for (StPass pass = ST_PASS_FWD; pass <= ST_PASS_BWD; pass++) {
        double t = -1, fill = -1;
        StCostSource source = ST_SRC_NONE;
        g_assert_true(st_profile_layer_time(p, "host", l->name, NULL, pass, batches[b], 0.5, &t,
                                            &source));
        g_assert_cmpint(source, ==, ST_SRC_PROFILED);
        g_assert_cmpfloat(t, >, 0);
        /* Carried by the signature to any model with this layer. */
        g_assert_true(st_profile_layer_time(p, "host", NULL, l->signature, pass, batches[b], 0.5,
                                            &t, NULL));
        g_assert_cmpint(st_profile_layer_fill(p, "host", l->name, NULL, pass, batches[b], &fill),
                        ==, sharing);
        if (sharing)
          g_assert_true(fill > 0 && fill <= 1);
      }
    }
  }
  /* The optimizer over the whole model, and the sparse kernels. */
  double t = 0;
  StCostSource source;
  g_assert_true(st_profile_layer_time(p, "host", "adam", NULL, ST_PASS_OPTIM, m->params, 0.5,
                                      &t, &source));
  g_assert_cmpint(source, ==, ST_SRC_PROFILED);
  g_assert_true(st_profile_layer_time(p, "host", "sgd", NULL, ST_PASS_OPTIM, m->params / 2, 0.5,
                                      &t, NULL));
  g_assert_true(st_profile_layer_time(p, "host", "compress", NULL, ST_PASS_COMPRESS, 1000, 0.5,
                                      &t, NULL));
  g_assert_true(st_profile_copy_time(p, "host", ST_COPY_H2D, 4096, &t));
  /* Every rank sharing a device steps at once: the optimizer's and the
   * sparse kernels' fill is measured with the layers'. */
  double fill = -1;
  g_assert_cmpint(st_profile_layer_fill(p, "host", "adam", NULL, ST_PASS_OPTIM, m->params, &fill),
                  ==, sharing);
  g_assert_cmpint(st_profile_layer_fill(p, "host", "expand", NULL, ST_PASS_EXPAND, 1000, &fill),
                  ==, sharing);
  if (sharing)
    g_assert_true(fill > 0 && fill <= 1);
  /* Per layer (tiny-mlp's all differ), batch and pass: 2 and 4 copies, and
   * the pair with priorities. */
  g_assert_cmpint(st_profile_n_sharing_entries(p), ==, sharing ? m->n_layers * 3 * 2 * 3 : 0);

  /* Saved, loaded back: the same entries, the device and the machine named,
   * every spread recorded as a number >= 0. */
  g_autofree char *tmp = st_test_tmpdir();
  g_autofree char *path = g_build_filename(tmp, "profile.json", NULL);
  g_assert_true(st_profile_save(p, path, &error));
  g_autoptr(StProfile) back = st_profile_load(path, &error);
  g_assert_no_error(error);
  g_assert_cmpint(st_profile_n_layer_entries(back), ==, st_profile_n_layer_entries(p));
  g_assert_cmpint(st_profile_n_copy_entries(back), ==, st_profile_n_copy_entries(p));
  g_autoptr(cJSON) root = st_json_load_file(path, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(root, "device")), ==, "host");
  g_assert_nonnull(cJSON_GetStringValue(cJSON_GetObjectItem(root, "machine")));
  g_assert_nonnull(cJSON_GetStringValue(cJSON_GetObjectItem(root, "date")));
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "layers"))
  {
    const cJSON *spread = cJSON_GetObjectItem(e, "spread_us");
    g_assert_cmpfloat(cJSON_GetObjectItem(e, "time_us")->valuedouble, >, 0);
    g_assert_true(spread == NULL || spread->valuedouble >= 0);
  }

  /* The simulator on a GPU named "host": every compute op from the profile
   * (profiled at batches 1, 2 and 4; interpolated at 3), none roofline. */
  for (int mb = 2; mb <= 3; mb++) {
    g_autoptr(StSchedule) s = host_schedule(m, "dp", 2, mb, back);
    StEngineOptions eo = {back, NULL, NULL, TRUE, NULL};
    g_autoptr(StTimeline) tl = st_simulate(s, &eo, NULL, &error);
    g_assert_no_error(error);
    int comp = 0;
    for (guint i = 0; i < tl->ops->len; i++) {
      const StOpRecord *r = &g_array_index(tl->ops, StOpRecord, i);
      const StProgram *prog = st_schedule_program_of(s, r->rank);
      const StOp *op = st_program_op(prog, r->op);
      if (op->kind != ST_OP_COMP)
        continue;
      comp++;
      /* The optimizer step over the whole model was measured at its size. */
      gboolean exact = mb == 2 || op->sub == ST_PASS_OPTIM;
      g_assert_cmpint(r->source, ==, exact ? ST_SRC_PROFILED : ST_SRC_INTERPOLATED);
    }
    g_assert_cmpint(comp, >, 0);
  }
  st_profiler_report_clear(&report);
}

static void
test_kernels_tiny_mlp(void)
{
  profile_tiny("tests/data/exec/tiny-mlp.json", TRUE);
}

static void
test_kernels_tiny_gpt(void)
{
  profile_tiny("tests/data/exec/tiny-gpt.json", FALSE);
}

/* A layer with no real implementation is left out, with a note; the rest
 * are profiled. */
static void
test_kernels_custom(void)
{
  g_autoptr(StModel) m = st_test_model("tests/data/exec/custom.json");
  StProfilerOptions o;
  host_options(&o);
  static const int batches[] = {2};
  g_autoptr(StProfile) p = st_profile_new();
  StProfilerReport report = {0};
  g_autoptr(GError) error = NULL;
  g_assert_true(st_profiler_model(m, batches, 1, &o, p, &report, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(report.notes->len, ==, 1);
  g_assert_nonnull(strstr(g_ptr_array_index(report.notes, 0), "'blob'"));
  double t;
  g_assert_false(st_profile_layer_time(p, "host", "blob", NULL, ST_PASS_FWD, 2, 0.5, &t, NULL));
  g_assert_true(st_profile_layer_time(p, "host", "fc", NULL, ST_PASS_BWD, 2, 0.5, &t, NULL));
  st_profiler_report_clear(&report);
  /* A backend that does not exist is refused. */
  o.backend = "tpu";
  g_assert_false(st_profiler_model(m, batches, 1, &o, p, &report, &error));
  g_assert_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED);
  st_profiler_report_clear(&report);
}

/* ---- links on the host ------------------------------------------------------------------ */

static void
test_links_local(void)
{
  StProfilerOptions o;
  host_options(&o);
  o.comm = "local";
  static const int ranks[] = {2, 3};
  o.ranks = ranks;
  o.n_ranks = 2;
  g_autoptr(StProfile) p = st_profile_new();
  StProfilerReport report = {0};
  g_autoptr(GError) error = NULL;
  g_assert_true(st_profiler_links(&o, p, &report, &error));
  g_assert_no_error(error);
  /* 1, 4, 16 KiB: 5 collectives x 2 rank counts, and send_recv. */
  g_assert_cmpint(st_profile_n_link_entries(p), ==, 3 * (5 * 2 + 1));
  static const StCollKind kinds[] = {ST_COLL_ALL_REDUCE, ST_COLL_REDUCE_SCATTER,
                                     ST_COLL_ALL_GATHER, ST_COLL_BROADCAST, ST_COLL_REDUCE};
  for (gsize k = 0; k < G_N_ELEMENTS(kinds); k++)
    for (int r = 2; r <= 3; r++) {
      double t = 0;
      g_assert_true(
        st_profile_link_time(p, "host", kinds[k], ST_LINK_LOCAL, r, 4096, &t, NULL));
      g_assert_cmpfloat(t, >, 0);
    }
  double t = 0;
  g_assert_true(st_profile_p2p_time(p, "host", ST_LINK_LOCAL, 16384, &t));
  g_assert_cmpfloat(t, >, 0);
  g_autofree char *tmp = st_test_tmpdir();
  g_autofree char *path = g_build_filename(tmp, "links.json", NULL);
  g_assert_true(st_profile_save(p, path, &error));
  g_assert_no_error(error);
  check_bandwidths(path, TRUE);
  st_profiler_report_clear(&report);

  /* NCCL needs one process per GPU: refused here with a reason. */
  o.comm = "nccl";
  g_autoptr(StProfile) q = st_profile_new();
  g_assert_false(st_profiler_links(&o, q, &report, &error));
  g_assert_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED);
  st_profiler_report_clear(&report);
}

/* ---- the engine uses a profile's fill ------------------------------------------------------ */

/* Two ranks on one unit GPU each run layer a's forward (100 us alone at
 * batch 10, profiled). The share model gives two kernels of fill f rate
 * min(1, 1 / (2 f)): both end at 100 us x max(1, 2 f). */
static int64_t
shared_end(double fill)
{
  g_autofree char *mpath = st_test_src("tests/data/engine/model.json");
  g_autofree char *cpath = st_test_src("tests/data/engine/cluster.json");
  g_autoptr(GError) error = NULL;
  StModel *model = st_model_load(mpath, &error);
  g_assert_no_error(error);
  StCluster *cluster = st_cluster_load(cpath, &error);
  g_assert_no_error(error);
  int32_t placement[] = {0, 0};
  g_autoptr(StSchedule) s = st_schedule_new(model, cluster, 2, placement);
  s->settings.global_batch = 20;
  s->settings.micro_batch = 10;
  s->settings.accumulation = 1;
  for (int r = 0; r < 2; r++) {
    StProgram *p = st_program_new("fwd");
    st_program_add_stream(p, "compute", 0);
    StOp op = st_op_comp(0, ST_PASS_FWD, 0, 0, 10);
    st_program_begin(p, &op);
    st_program_commit(p);
    s->ranks[r].program = st_schedule_add_program(s, p);
  }
  g_autoptr(StProfile) profile = st_profile_new();
  st_profile_add_layer(profile, "UNIT", "a", NULL, ST_PASS_FWD, 10, 100e3, 0);
  if (fill > 0)
    g_assert_true(st_profile_set_layer_fill(profile, "UNIT", "a", NULL, ST_PASS_FWD, 10, fill,
                                            FALSE));
  StEngineOptions o = {profile, NULL, NULL, TRUE, NULL};
  g_autoptr(StTimeline) t = st_simulate(s, &o, NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(t->ops->len, ==, 2);
  int64_t end = g_array_index(t->ops, StOpRecord, 0).end_ns;
  g_assert_cmpint(g_array_index(t->ops, StOpRecord, 1).end_ns, ==, end);
  g_assert_cmpint(g_array_index(t->ops, StOpRecord, 0).source, ==, ST_SRC_PROFILED);
  return end;
}

static void
test_engine_fill(void)
{
  /* No fill in the profile: each fills the GPU, they split it: 200 us. */
  g_assert_cmpint(shared_end(0), ==, 200000);
  g_assert_cmpint(shared_end(1.0), ==, 200000);
  /* Half each: they overlap fully, 100 us. */
  g_assert_cmpint(shared_end(0.5), ==, 100000);
  g_assert_cmpint(shared_end(0.3), ==, 100000);
  /* 0.75 each: demand 1.5, rate 2/3: 150 us. */
  g_assert_cmpint(shared_end(0.75), ==, 150000);
}

/* The compute cost registry hands the fill over; a recompute takes the
 * forward's. */
static void
test_compute_fill(void)
{
  g_autofree char *cpath = st_test_src("tests/data/engine/cluster.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) cluster = st_cluster_load(cpath, &error);
  g_assert_no_error(error);
  g_autoptr(StModel) model = st_test_model("tests/data/engine/model.json");
  g_autoptr(StProfile) profile = st_profile_new();
  st_profile_add_layer(profile, "UNIT", "a", NULL, ST_PASS_FWD, 10, 100e3, 0);
  g_assert_true(st_profile_set_layer_fill(profile, "UNIT", "a", NULL, ST_PASS_FWD, 10, 0.6, FALSE));
  StComputeCtx ctx = {cluster, profile, model, ST_DTYPE_FP32, NULL, NULL, FALSE, FALSE};
  StWork fwd = {.pass = ST_PASS_FWD, .layer = &model->layers[0], .batch = 10};
  StWork rec = {.pass = ST_PASS_RECOMPUTE, .layer = &model->layers[0], .batch = 10};
  StWork bwd = {.pass = ST_PASS_BWD, .layer = &model->layers[0], .batch = 10};
  StWork optim = {.pass = ST_PASS_OPTIM, .elems = 100, .bytes = 1600, .kernel = "adam"};
  g_assert_cmpfloat_with_epsilon(st_compute_fill(&ctx, &fwd), 0.6, 1e-12);
  g_assert_cmpfloat_with_epsilon(st_compute_fill(&ctx, &rec), 0.6, 1e-12);
  g_assert_cmpfloat_with_epsilon(st_compute_fill(&ctx, &bwd), 1.0, 1e-12);
  g_assert_cmpfloat_with_epsilon(st_compute_fill(&ctx, &optim), 1.0, 1e-12);
  ctx.profile = NULL;
  g_assert_cmpfloat_with_epsilon(st_compute_fill(&ctx, &fwd), 1.0, 1e-12);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/profiler/fill-inference", test_fill_inference);
  g_test_add_func("/profiler/format/fill", test_format_fill);
  g_test_add_func("/profiler/format/round-trip", test_format_round_trip);
  g_test_add_func("/profiler/format/bad-input", test_format_bad_input);
  g_test_add_func("/profiler/replay/host", test_replay_host);
  g_test_add_func("/profiler/kernels/tiny-mlp", test_kernels_tiny_mlp);
  g_test_add_func("/profiler/kernels/tiny-gpt", test_kernels_tiny_gpt);
  g_test_add_func("/profiler/kernels/custom", test_kernels_custom);
  g_test_add_func("/profiler/links/local", test_links_local);
  g_test_add_func("/profiler/engine/fill", test_engine_fill);
  g_test_add_func("/profiler/engine/compute-fill", test_compute_fill);
  return g_test_run();
}
