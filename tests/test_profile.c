/* test_profile.c: profile lookups (exact, interpolated, extrapolated, split
 * from fwd+bwd, name before signature), link lookups, directory merges,
 * save and reload, and refused files. Times in ns unless named _us. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "base/error.h"
#include "profile/profile.h"
#include "testutil.h"

#define DEV "TestGPU"
#define SIG "linear{out=1024}[1024]"

static double
layer_time(const StProfile *p, const char *name, const char *sig, StPass pass, int64_t x,
           StCostSource expected_source)
{
  double t = -1;
  StCostSource source = ST_SRC_NONE;
  g_assert_true(st_profile_layer_time(p, DEV, name, sig, pass, x, 1.0 / 3, &t, &source));
  g_assert_cmpint(source, ==, expected_source);
  return t;
}

static void
test_exact_and_interpolated(void)
{
  g_autoptr(StProfile) p = st_profile_new();
  /* fc1 forward: 1000 ns at batch 8, 3000 ns at batch 32. */
  st_profile_add_layer(p, DEV, "fc1", NULL, ST_PASS_FWD, 8, 1000, 0);
  st_profile_add_layer(p, DEV, "fc1", NULL, ST_PASS_FWD, 32, 3000, 0);
  g_assert_cmpfloat_with_epsilon(layer_time(p, "fc1", NULL, ST_PASS_FWD, 8, ST_SRC_PROFILED),
                                 1000, 1e-9);
  g_assert_cmpfloat_with_epsilon(layer_time(p, "fc1", NULL, ST_PASS_FWD, 32, ST_SRC_PROFILED),
                                 3000, 1e-9);
  /* Between: t(16) = 1000 + (3000 - 1000) * (16 - 8) / (32 - 8) = 1666.67. */
  g_assert_cmpfloat_with_epsilon(
    layer_time(p, "fc1", NULL, ST_PASS_FWD, 16, ST_SRC_INTERPOLATED), 1000 + 2000.0 / 3, 1e-6);
  /* Nothing for another pass, name or device. */
  double t;
  g_assert_false(st_profile_layer_time(p, DEV, "fc1", NULL, ST_PASS_BWD, 8, 0.5, &t, NULL));
  g_assert_false(st_profile_layer_time(p, DEV, "fc2", NULL, ST_PASS_FWD, 8, 0.5, &t, NULL));
  g_assert_false(st_profile_layer_time(p, "OtherGPU", "fc1", NULL, ST_PASS_FWD, 8, 0.5, &t, NULL));
  /* A later measurement at the same x replaces the earlier one. */
  st_profile_add_layer(p, DEV, "fc1", NULL, ST_PASS_FWD, 8, 1200, 0);
  g_assert_cmpfloat_with_epsilon(layer_time(p, "fc1", NULL, ST_PASS_FWD, 8, ST_SRC_PROFILED),
                                 1200, 1e-9);
  g_assert_cmpint(st_profile_n_layer_entries(p), ==, 2);
}

static void
test_extrapolated(void)
{
  g_autoptr(StProfile) p = st_profile_new();
  /* Points (8, 1000) and (32, 3000): slope 250/3 ns per sample, 333 ns fixed. */
  st_profile_add_layer(p, DEV, "a", NULL, ST_PASS_FWD, 8, 1000, 0);
  st_profile_add_layer(p, DEV, "a", NULL, ST_PASS_FWD, 32, 3000, 0);
  /* Above: linear 3000 + 2000 * 32 / 24 = 5666.7 is below proportional
   * scaling from the nearest point, 3000 * 64 / 32 = 6000: the floor wins. */
  g_assert_cmpfloat_with_epsilon(layer_time(p, "a", NULL, ST_PASS_FWD, 64, ST_SRC_INTERPOLATED),
                                 6000, 1e-6);
  /* Below: linear 1000 - 2000 * 4 / 24 = 666.7 beats proportional 500. */
  g_assert_cmpfloat_with_epsilon(layer_time(p, "a", NULL, ST_PASS_FWD, 4, ST_SRC_INTERPOLATED),
                                 1000 - 2000.0 / 6, 1e-6);

  /* Points (8, 1000) and (16, 3000): the line crosses zero at x = 4.67. */
  st_profile_add_layer(p, DEV, "b", NULL, ST_PASS_FWD, 8, 1000, 0);
  st_profile_add_layer(p, DEV, "b", NULL, ST_PASS_FWD, 16, 3000, 0);
  /* Below: linear 1000 - 250 * 6 = -500 < 0; proportional 1000 * 2 / 8 = 250. */
  g_assert_cmpfloat_with_epsilon(layer_time(p, "b", NULL, ST_PASS_FWD, 2, ST_SRC_INTERPOLATED),
                                 250, 1e-6);
  /* Above: linear 3000 + 250 * 16 = 7000 beats proportional 6000. */
  g_assert_cmpfloat_with_epsilon(layer_time(p, "b", NULL, ST_PASS_FWD, 32, ST_SRC_INTERPOLATED),
                                 7000, 1e-6);

  /* One point (16, 800): proportional both ways, t = 800 * x / 16. */
  st_profile_add_layer(p, DEV, "c", NULL, ST_PASS_FWD, 16, 800, 0);
  g_assert_cmpfloat_with_epsilon(layer_time(p, "c", NULL, ST_PASS_FWD, 4, ST_SRC_INTERPOLATED),
                                 200, 1e-9);
  g_assert_cmpfloat_with_epsilon(layer_time(p, "c", NULL, ST_PASS_FWD, 64, ST_SRC_INTERPOLATED),
                                 3200, 1e-9);
}

static void
test_fwdbwd_split(void)
{
  g_autoptr(StProfile) p = st_profile_new();
  /* Only fwd+bwd measured: 3000 ns at batch 32. With fwd FLOPs a third of
   * the total, fwd = 3000 / 3 = 1000 and bwd = 3000 * 2 / 3 = 2000. */
  st_profile_add_layer(p, DEV, "conv1", NULL, ST_PASS_FWDBWD, 32, 3000, 0);
  g_assert_cmpfloat_with_epsilon(
    layer_time(p, "conv1", NULL, ST_PASS_FWD, 32, ST_SRC_INTERPOLATED), 1000, 1e-9);
  g_assert_cmpfloat_with_epsilon(
    layer_time(p, "conv1", NULL, ST_PASS_BWD, 32, ST_SRC_INTERPOLATED), 2000, 1e-9);
  g_assert_cmpfloat_with_epsilon(
    layer_time(p, "conv1", NULL, ST_PASS_FWDBWD, 32, ST_SRC_PROFILED), 3000, 1e-9);
  /* Split at another batch: proportional from the single point, then split. */
  g_assert_cmpfloat_with_epsilon(
    layer_time(p, "conv1", NULL, ST_PASS_FWD, 64, ST_SRC_INTERPOLATED), 2000, 1e-9);
  /* A measured pass wins over a split. */
  st_profile_add_layer(p, DEV, "conv1", NULL, ST_PASS_BWD, 32, 2500, 0);
  g_assert_cmpfloat_with_epsilon(layer_time(p, "conv1", NULL, ST_PASS_BWD, 32, ST_SRC_PROFILED),
                                 2500, 1e-9);
  /* An optimizer step is never split from anything. */
  double t;
  g_assert_false(st_profile_layer_time(p, DEV, "conv1", NULL, ST_PASS_OPTIM, 32, 0.5, &t, NULL));
}

static void
test_name_before_signature(void)
{
  g_autoptr(StProfile) p = st_profile_new();
  st_profile_add_layer(p, DEV, NULL, SIG, ST_PASS_FWD, 32, 500, 0);
  st_profile_add_layer(p, DEV, "fc1", NULL, ST_PASS_FWD, 32, 700, 0);
  /* fc1 was measured under its name: that wins. */
  g_assert_cmpfloat_with_epsilon(layer_time(p, "fc1", SIG, ST_PASS_FWD, 32, ST_SRC_PROFILED),
                                 700, 1e-9);
  /* fc2 of another model has the same signature: it carries over. */
  g_assert_cmpfloat_with_epsilon(layer_time(p, "fc2", SIG, ST_PASS_FWD, 32, ST_SRC_PROFILED),
                                 500, 1e-9);
  g_assert_cmpfloat_with_epsilon(layer_time(p, NULL, SIG, ST_PASS_FWD, 32, ST_SRC_PROFILED), 500,
                                 1e-9);
  /* An entry with both keys answers under either. */
  st_profile_add_layer(p, DEV, "head", "linear{out=10}[1024]", ST_PASS_FWD, 32, 90, 0);
  g_assert_cmpfloat_with_epsilon(
    layer_time(p, NULL, "linear{out=10}[1024]", ST_PASS_FWD, 32, ST_SRC_PROFILED), 90, 1e-9);
  g_assert_cmpfloat_with_epsilon(layer_time(p, "head", NULL, ST_PASS_FWD, 32, ST_SRC_PROFILED),
                                 90, 1e-9);
}

static void
test_links(void)
{
  g_autoptr(StProfile) p = st_profile_new();
  /* 8-rank intra-node all-reduce: 40 us at 1 MiB, 400 us at 16 MiB. */
  const int64_t mib = 1 << 20;
  st_profile_add_link(p, DEV, ST_COLL_ALL_REDUCE, ST_LINK_INTRA_NODE, 8, mib, 40e3);
  st_profile_add_link(p, DEV, ST_COLL_ALL_REDUCE, ST_LINK_INTRA_NODE, 8, 16 * mib, 400e3);
  double t = -1;
  StCostSource source = ST_SRC_NONE;
  g_assert_true(st_profile_link_time(p, DEV, ST_COLL_ALL_REDUCE, ST_LINK_INTRA_NODE, 8, mib, &t,
                                     &source));
  g_assert_cmpint(source, ==, ST_SRC_LINK_PROFILE);
  g_assert_cmpfloat_with_epsilon(t, 40e3, 1e-9);
  /* 24 us per MiB past 40 us at 1 MiB: t(8 MiB) = 40 + 24 * 7 = 208 us. */
  g_assert_true(st_profile_link_time(p, DEV, ST_COLL_ALL_REDUCE, ST_LINK_INTRA_NODE, 8, 8 * mib,
                                     &t, NULL));
  g_assert_cmpfloat_with_epsilon(t, 208e3, 1e-6);
  /* Beyond: the same line, t(32 MiB) = 40 + 24 * 31 = 784 us. */
  g_assert_true(st_profile_link_time(p, DEV, ST_COLL_ALL_REDUCE, ST_LINK_INTRA_NODE, 8,
                                     32 * mib, &t, NULL));
  g_assert_cmpfloat_with_epsilon(t, 784e3, 1e-6);
  /* Other ranks, link class or collective: not covered. */
  g_assert_false(st_profile_link_time(p, DEV, ST_COLL_ALL_REDUCE, ST_LINK_INTRA_NODE, 4, mib, &t,
                                      NULL));
  g_assert_false(st_profile_link_time(p, DEV, ST_COLL_ALL_REDUCE, ST_LINK_INTER_NODE, 8, mib, &t,
                                      NULL));
  g_assert_false(st_profile_link_time(p, DEV, ST_COLL_ALL_GATHER, ST_LINK_INTRA_NODE, 8, mib, &t,
                                      NULL));
  /* One point: proportional, t(2 MiB) = 2 * 30 us. */
  st_profile_add_link(p, DEV, ST_COLL_BROADCAST, ST_LINK_INTER_NODE, 2, mib, 30e3);
  g_assert_true(st_profile_link_time(p, DEV, ST_COLL_BROADCAST, ST_LINK_INTER_NODE, 2, 2 * mib,
                                     &t, NULL));
  g_assert_cmpfloat_with_epsilon(t, 60e3, 1e-6);
  g_assert_cmpint(st_profile_n_link_entries(p), ==, 3);
}

/* merge/a.json, then merge/sub/b.json (sorted by path, so b's fc1 at x=32
 * replaces a's), then merge/sub/other-device.json; notes.txt is ignored. */
static void
test_directory_merge(void)
{
  g_autofree char *dir = st_test_src("tests/data/profiles/merge");
  g_autoptr(GError) error = NULL;
  g_autoptr(StProfile) p = st_profile_load(dir, &error);
  g_assert_no_error(error);
  /* a: 3 entries; b: 2, one of which replaces a's fc1 at x=32; other-device: 1. */
  g_assert_cmpint(st_profile_n_layer_entries(p), ==, 5);
  g_assert_cmpint(st_profile_n_link_entries(p), ==, 2);
  g_assert_cmpfloat_with_epsilon(layer_time(p, "fc1", NULL, ST_PASS_FWD, 8, ST_SRC_PROFILED),
                                 10e3, 1e-9);
  g_assert_cmpfloat_with_epsilon(layer_time(p, "fc1", NULL, ST_PASS_FWD, 32, ST_SRC_PROFILED),
                                 36e3, 1e-9);
  /* b's signature-only bwd entry serves a layer of another name. */
  g_assert_cmpfloat_with_epsilon(layer_time(p, "other", SIG, ST_PASS_BWD, 8, ST_SRC_PROFILED),
                                 20e3, 1e-9);
  /* Optimizer entries are keyed by kernel name, x = elements. */
  g_assert_cmpfloat_with_epsilon(
    layer_time(p, "adam", NULL, ST_PASS_OPTIM, 2000000, ST_SRC_INTERPOLATED), 500e3, 1e-6);
  double t;
  g_assert_true(st_profile_layer_time(p, "OtherGPU", "fc1", NULL, ST_PASS_FWD, 8, 0.5, &t, NULL));
  g_assert_cmpfloat_with_epsilon(t, 99e3, 1e-9);
  /* The links of both files form one series. */
  g_assert_true(st_profile_link_time(p, DEV, ST_COLL_ALL_REDUCE, ST_LINK_INTRA_NODE, 8,
                                     16 << 20, &t, NULL));
  g_assert_cmpfloat_with_epsilon(t, 400e3, 1e-9);
}

static char *
save_to(const StProfile *p, const char *dir, const char *name)
{
  char *path = g_build_filename(dir, name, NULL);
  g_autoptr(GError) error = NULL;
  g_assert_true(st_profile_save(p, path, &error));
  g_assert_no_error(error);
  return path;
}

static void
test_save_reload(void)
{
  g_autofree char *tmp = st_test_tmpdir();
  g_autoptr(StProfile) p = st_profile_new();
  st_profile_set_device(p, DEV, "550.54", "12.4", "2026-01-15", "test");
  /* Added out of order: save sorts them. */
  st_profile_add_layer(p, DEV, "fc1", SIG, ST_PASS_FWD, 32, 3000.5, 12.5);
  st_profile_add_layer(p, DEV, "fc1", SIG, ST_PASS_FWD, 8, 1000.25, 0);
  st_profile_add_layer(p, DEV, NULL, "conv{k=3}[3,32,32]", ST_PASS_FWDBWD, 16, 777, 0);
  st_profile_add_layer(p, DEV, "sgd", NULL, ST_PASS_OPTIM, 1000, 42, 0);
  st_profile_add_layer(p, "OtherGPU", "fc1", NULL, ST_PASS_FWD, 8, 5, 0); /* not saved */
  st_profile_add_link(p, DEV, ST_COLL_REDUCE_SCATTER, ST_LINK_INTER_NODE, 16, 1 << 20, 55e3);
  st_profile_add_link(p, DEV, ST_COLL_ALL_REDUCE, ST_LINK_INTRA_NODE, 8, 1 << 20, 40e3);
  g_autofree char *path = save_to(p, tmp, "saved.json");

  g_autoptr(GError) error = NULL;
  g_autoptr(StProfile) back = st_profile_load(path, &error);
  g_assert_no_error(error);
  g_assert_cmpint(st_profile_n_layer_entries(back), ==, 4);
  g_assert_cmpint(st_profile_n_link_entries(back), ==, 2);
  static const struct {
    const char *name, *sig;
    StPass pass;
    int64_t x;
  } probes[] = {
    {"fc1", NULL, ST_PASS_FWD, 32}, {NULL, SIG, ST_PASS_FWD, 8},   {"x", SIG, ST_PASS_FWD, 20},
    {NULL, "conv{k=3}[3,32,32]", ST_PASS_BWD, 16}, {"sgd", NULL, ST_PASS_OPTIM, 3000},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(probes); i++) {
    double a = 0, b = 0;
    StCostSource sa, sb;
    g_assert_true(st_profile_layer_time(p, DEV, probes[i].name, probes[i].sig, probes[i].pass,
                                        probes[i].x, 0.25, &a, &sa));
    g_assert_true(st_profile_layer_time(back, DEV, probes[i].name, probes[i].sig,
                                        probes[i].pass, probes[i].x, 0.25, &b, &sb));
    g_assert_cmpfloat_with_epsilon(a, b, 1e-6);
    g_assert_cmpint(sa, ==, sb);
  }
  double t;
  g_assert_true(st_profile_link_time(back, DEV, ST_COLL_REDUCE_SCATTER, ST_LINK_INTER_NODE, 16,
                                     1 << 20, &t, NULL));
  g_assert_cmpfloat_with_epsilon(t, 55e3, 1e-6);
  g_assert_false(
    st_profile_layer_time(back, "OtherGPU", "fc1", NULL, ST_PASS_FWD, 8, 0.5, &t, NULL));

  /* Saving the reloaded profile gives the same bytes: deterministic order. */
  g_autofree char *again = save_to(back, tmp, "again.json");
  g_autofree char *text1 = st_test_read(path, NULL);
  g_autofree char *text2 = st_test_read(again, NULL);
  g_assert_cmpstr(text1, ==, text2);
  g_assert_nonnull(strstr(text1, "\"driver\":\t\"550.54\""));
}

/* Each text is refused in ST_PROFILE_ERROR, naming the file and the fragments. */
static void
test_bad_input(void)
{
  static const struct {
    const char *text;
    StError code;
    const char *fragments[2];
  } cases[] = {
    {"{\"format\": \"stagger-profile\", \"version\": 1,", ST_ERROR_PARSE, {"malformed JSON"}},
    {"[]", ST_ERROR_INVALID, {"expected a JSON object"}},
    {"{\"format\": \"chakra\", \"version\": 1, \"device\": \"G\"}", ST_ERROR_INVALID,
     {"key 'format'", "'chakra'"}},
    {"{\"format\": \"stagger-profile\", \"version\": 2, \"device\": \"G\"}", ST_ERROR_INVALID,
     {"key 'version'", "out of range"}},
    {"{\"format\": \"stagger-profile\", \"version\": 1}", ST_ERROR_INVALID,
     {"missing key 'device'"}},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"kernels\": []}",
     ST_ERROR_INVALID, {"unknown key 'kernels'"}},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"layers\": ["
     "{\"name\": \"a\", \"pass\": \"fwd\", \"x\": 1, \"time_us\": 1},"
     "{\"name\": \"a\", \"pass\": \"fwd\", \"time_us\": 1}]}",
     ST_ERROR_INVALID, {"layers[1]: missing key 'x'"}},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"layers\": ["
     "{\"name\": \"a\", \"pass\": \"forward\", \"x\": 1, \"time_us\": 1}]}",
     ST_ERROR_INVALID, {"layers[0]: key 'pass'", "unknown pass 'forward'"}},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"layers\": ["
     "{\"name\": \"a\", \"pass\": \"fwd\", \"x\": 1, \"time_us\": -1}]}",
     ST_ERROR_INVALID, {"layers[0]: key 'time_us'", "minimum"}},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"layers\": ["
     "{\"pass\": \"fwd\", \"x\": 1, \"time_us\": 1}]}",
     ST_ERROR_INVALID, {"layers[0]: missing key 'name' or 'signature'"}},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"layers\": ["
     "{\"name\": \"a\", \"pass\": \"fwd\", \"x\": 0, \"time_us\": 1}]}",
     ST_ERROR_INVALID, {"layers[0]: key 'x'", "out of range"}},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"layers\": ["
     "{\"name\": \"a\", \"pass\": \"fwd\", \"x\": 1, \"time\": 1}]}",
     ST_ERROR_INVALID, {"layers[0]: unknown key 'time'"}},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"links\": ["
     "{\"collective\": \"allreduce\", \"link\": \"intra_node\", \"ranks\": 8, \"bytes\": 1, "
     "\"time_us\": 1}]}",
     ST_ERROR_INVALID, {"links[0]: key 'collective'", "unknown collective 'allreduce'"}},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"links\": ["
     "{\"collective\": \"all_reduce\", \"link\": \"nvlink\", \"ranks\": 8, \"bytes\": 1, "
     "\"time_us\": 1}]}",
     ST_ERROR_INVALID, {"links[0]: key 'link'", "unknown link class 'nvlink'"}},
    {"{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"G\", \"links\": [3]}",
     ST_ERROR_INVALID, {"links[0]: expected an object"}},
  };
  g_autofree char *tmp = st_test_tmpdir();
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *name = g_strdup_printf("bad-%zu.json", i);
    g_autofree char *path = g_build_filename(tmp, name, NULL);
    g_assert_true(g_file_set_contents(path, cases[i].text, -1, NULL));
    g_autoptr(StProfile) p = st_profile_new();
    st_profile_add_layer(p, DEV, "kept", NULL, ST_PASS_FWD, 1, 1, 0);
    g_autoptr(GError) error = NULL;
    g_assert_false(st_profile_merge_file(p, path, &error));
    g_assert_error(error, ST_PROFILE_ERROR, (gint)cases[i].code);
    if (g_test_verbose())
      g_printerr("%s\n", error->message);
    g_assert_nonnull(strstr(error->message, path));
    for (int k = 0; k < 2 && cases[i].fragments[k] != NULL; k++)
      if (strstr(error->message, cases[i].fragments[k]) == NULL)
        g_error("case %zu: '%s' does not mention '%s'", i, error->message,
                cases[i].fragments[k]);
    /* A refused file leaves the profile as it was. */
    g_assert_cmpint(st_profile_n_layer_entries(p), ==, 1);
  }
  /* A directory with no profile in it, and a path that does not exist. */
  g_autoptr(GError) error = NULL;
  g_autofree char *empty = st_test_tmpdir();
  g_assert_null(st_profile_load(empty, &error));
  g_assert_error(error, ST_PROFILE_ERROR, ST_ERROR_INVALID);
  g_clear_error(&error);
  g_autofree char *missing = g_build_filename(tmp, "missing.json", NULL);
  g_assert_null(st_profile_load(missing, &error));
  g_assert_error(error, ST_PROFILE_ERROR, ST_ERROR_IO);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/profile/exact-and-interpolated", test_exact_and_interpolated);
  g_test_add_func("/profile/extrapolated", test_extrapolated);
  g_test_add_func("/profile/fwdbwd-split", test_fwdbwd_split);
  g_test_add_func("/profile/name-before-signature", test_name_before_signature);
  g_test_add_func("/profile/links", test_links);
  g_test_add_func("/profile/directory-merge", test_directory_merge);
  g_test_add_func("/profile/save-reload", test_save_reload);
  g_test_add_func("/profile/bad-input", test_bad_input);
  return g_test_run();
}
