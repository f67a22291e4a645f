/* test_chakra_import_golden.c: what the Chakra importer makes of a few
 * traces, pinned in tests/golden/chakra/ and compared byte for byte: the
 * schedule as stagger writes it (st_schedule_to_json) and, for a foreign
 * trace, the profile its durations became.
 *
 * The importer once wrote the schedule as JSON and read it back; it now
 * builds it directly (docs/PERFORMANCE.md, issue 23). These files were
 * written by the JSON round trip and hold the direct build to it:
 *   - foreign-64: the benchmark's trace (tests/readers.c) of 64 nodes on
 *     one rank: COMP nodes with durations (CPU ones among them), all-reduces,
 *     METADATA nodes contracted, tensors written and read;
 *   - foreign-4ranks: 4 ranks, an all-gather on a process group, a
 *     barrier, a copy, a METADATA node, a send and a receive between ranks
 *     0 and 2; ranks 1 and 3 differ only in what stagger does not use,
 *     and share one program;
 *   - zero3-mlp: a stagger trace (ZeRO-3 on 2 GPUs, its previous-step
 *     dependencies and buffers), exported and imported.
 *
 * After an intended change, regenerate and review the diff:
 *   STAGGER_REGENERATE_GOLDEN=1 build/tests/test_chakra_import_golden && git diff tests/golden
 */
#include <string.h>

#include "base/json.h"
#include "interop/chakra.h"
#include "interop/chakra_private.h"
#include "readers.h"
#include "chakra_trace.h"
#include "testutil.h"

static void
compare_golden(const char *name, const char *text)
{
  g_autofree char *want_path = st_test_src("tests/golden/chakra");
  g_autofree char *file = g_build_filename(want_path, name, NULL);
  if (g_getenv("STAGGER_REGENERATE_GOLDEN") != NULL) {
    g_autoptr(GError) error = NULL;
    g_assert_true(g_mkdir_with_parents(want_path, 0755) == 0);
    g_assert_true(g_file_set_contents(file, text, -1, &error));
    g_assert_no_error(error);
    return;
  }
  g_autofree char *want = st_test_read(file, NULL);
  if (want == NULL)
    g_error("%s is missing: run STAGGER_REGENERATE_GOLDEN=1 %s", file, g_get_prgname());
  if (strcmp(want, text) != 0) {
    g_autofree char *tmp = g_build_filename(g_get_tmp_dir(), name, NULL);
    g_file_set_contents(tmp, text, -1, NULL);
    g_error("%s differs from %s (written to %s); if the change is intended, regenerate with "
            "STAGGER_REGENERATE_GOLDEN=1 and review 'git diff tests/golden'", file,
            "the import", tmp);
  }
}

/* Imports `prefix` on `cluster` and compares the schedule (and, when
 * given, the profile) with the golden files `name`.schedule.json and
 * `name`.profile.json. */
static void
import_and_compare(const char *prefix, const StCluster *cluster, const char *name,
                   gboolean profile_too)
{
  g_autoptr(StProfile) profile = st_profile_new();
  StChakraImportOptions o = {.cluster = cluster, .profile = profile,
                             .precision = ST_PRECISION_FP32, .optimizer = ST_OPTIMIZER_ADAM,
                             .global_batch = 32};
  StChakraImportStats stats = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) s = st_chakra_import(prefix, &o, &stats, &error);
  g_assert_no_error(error);
  g_test_message("%s: %d ranks, %" G_GINT64_FORMAT " nodes, %" G_GINT64_FORMAT " ops, warning: %s",
                 name, stats.ranks, stats.nodes, stats.ops,
                 stats.warning != NULL ? stats.warning : "none");
  st_chakra_import_stats_clear(&stats);
  g_autoptr(cJSON) json = st_schedule_to_json(s);
  g_autofree char *text = cJSON_Print(json);
  g_autofree char *file = g_strdup_printf("%s.schedule.json", name);
  compare_golden(file, text);
  if (profile_too) {
    g_autofree char *dir = st_test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "profile.json", NULL);
    g_assert_true(st_profile_save(profile, path, &error));
    g_assert_no_error(error);
    g_autofree char *ptext = st_test_read(path, NULL);
    g_autofree char *pfile = g_strdup_printf("%s.profile.json", name);
    compare_golden(pfile, ptext);
  }
}

static void
test_foreign_300(void)
{
  g_autofree char *dir = st_test_tmpdir();
  g_autoptr(GError) error = NULL;
  g_autofree char *prefix = st_reader_input_find("chakra")->write(dir, 64, &error);
  g_assert_no_error(error);
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 1);
  import_and_compare(prefix, c, "foreign-64", TRUE);
}

/* ---- four foreign ranks ------------------------------------------------------------ */

/* Rank r of 4: compute, an all-gather on process group 1 (every rank), a
 * barrier, a copy to the host, CPU compute, a METADATA node; ranks 0 and 2
 * also exchange a send and a receive on group 4 ({0, 2}). Ranks 1 and 3
 * differ only in what stagger does not use (a METADATA node's name, an
 * rf_id): their programs are one. */
static void
write_rank(const char *prefix, int r)
{
  EtWriter *w = st_test_et_open(prefix, r);
  gboolean p2p = r % 2 == 0;
  EtAttrs a;
  et_attrs_init(&a);
  et_attrs_int64(&a, "num_ops", 1000000);
  et_attrs_int64(&a, "tensor_size", 4096);
  char *out[] = {(char *)"x", (char *)"4096"};
  et_attrs_string_list(&a, "outputs", out, 2);
  st_test_et_node(w, 1, "aten::mm", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, p2p ? 30 : 0, NULL, 0, &a);
  et_attrs_clear(&a);
  g_autofree char *meta_name = g_strdup_printf("## meta %d ##", r);
  st_test_et_node(w, 2, meta_name, CHAKRA_PROTO_MSG__NODE_TYPE__METADATA_NODE, 0, (uint64_t[]){1}, 1,
           NULL);
  if (p2p) {
    et_attrs_init(&a);
    et_attrs_int64(&a, "comm_src", r);
    et_attrs_int64(&a, "comm_dst", r ^ 2);
    et_attrs_int64(&a, "comm_size", 1 << 20);
    et_attrs_int64(&a, "comm_tag", 7);
    et_attrs_string(&a, "pg_name", "4");
    st_test_et_node(w, 3, "send", CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE, 0, (uint64_t[]){2}, 1,
             &a);
    et_attrs_clear(&a);
    et_attrs_init(&a);
    et_attrs_int64(&a, "comm_src", r ^ 2);
    et_attrs_int64(&a, "comm_dst", r);
    et_attrs_int64(&a, "comm_size", 1 << 20);
    et_attrs_int64(&a, "comm_tag", 7);
    et_attrs_string(&a, "pg_name", "4");
    st_test_et_node(w, 4, "recv", CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE, 0, (uint64_t[]){1}, 1,
             &a);
    et_attrs_clear(&a);
  }
  et_attrs_init(&a);
  et_attrs_int64(&a, "comm_type", 2); /* ALL_GATHER */
  et_attrs_int64(&a, "comm_size", 8192);
  et_attrs_string(&a, "pg_name", "1");
  et_attrs_int64(&a, "rf_id", r);
  st_test_et_node(w, 5, "nccl:all_gather", CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE, 0,
           p2p ? (uint64_t[]){3, 4} : (uint64_t[]){2}, p2p ? 2 : 1, &a);
  et_attrs_clear(&a);
  et_attrs_init(&a);
  et_attrs_int64(&a, "comm_type", 9); /* BARRIER */
  st_test_et_node(w, 6, "barrier", CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE, 0, (uint64_t[]){5},
           1, &a);
  et_attrs_clear(&a);
  et_attrs_init(&a);
  et_attrs_int64(&a, "tensor_size", 65536);
  st_test_et_node(w, 7, "copy", CHAKRA_PROTO_MSG__NODE_TYPE__MEM_STORE_NODE, 0, (uint64_t[]){6}, 1,
           &a);
  et_attrs_clear(&a);
  et_attrs_init(&a);
  et_attrs_int64(&a, "num_ops", 5);
  et_attrs_bool(&a, "is_cpu_op", TRUE);
  char *in[] = {(char *)"x", (char *)"4096"};
  et_attrs_string_list(&a, "inputs", in, 2);
  st_test_et_node(w, 8, "aten::add", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 12, (uint64_t[]){7, 2}, 2,
           &a);
  et_attrs_clear(&a);
  st_test_et_close(w);
}

static void
test_foreign_4ranks(void)
{
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *prefix = g_build_filename(dir, "ring", NULL);
  for (int r = 0; r < 4; r++)
    write_rank(prefix, r);
  g_autofree char *groups = st_chakra_groups_path(prefix);
  g_assert_true(g_file_set_contents(groups, "{\"1\": [0, 1, 2, 3], \"4\": [0, 2]}", -1, NULL));
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  import_and_compare(prefix, c, "foreign-4ranks", TRUE);
}

static void
test_zero3(void)
{
  g_autofree char *dir = st_test_tmpdir();
  g_autoptr(StModel) m = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  StOptions o;
  st_options_init(&o);
  o.micro_batch = 4;
  o.zero_stage = 3;
  g_autoptr(StSchedule) s = st_test_build("zero", m, c, &o);
  st_options_clear(&o);
  g_autofree char *p = g_build_filename(dir, "z", NULL);
  g_autoptr(GError) error = NULL;
  StChakraExportOptions eo = {NULL, "auto"};
  g_assert_true(st_chakra_export(s, p, &eo, NULL, &error));
  g_assert_no_error(error);
  import_and_compare(p, c, "zero3-mlp", FALSE);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/chakra/import-golden/foreign-64", test_foreign_300);
  g_test_add_func("/chakra/import-golden/foreign-4ranks", test_foreign_4ranks);
  g_test_add_func("/chakra/import-golden/zero3-mlp", test_zero3);
  return g_test_run();
}
