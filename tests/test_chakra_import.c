/* test_chakra_import.c: Chakra traces back into stagger.
 *
 * - Round trip: for every registered strategy (and folded or not, sharing
 *   GPUs, several nodes), exporting a schedule and importing it gives the
 *   same simulated outputs, byte for byte (report.json, ops.csv,
 *   memory.csv, comm.csv, trace.json).
 * - Foreign traces, written here node by node: a COMP node costs its
 *   duration_micros, else its num_ops / tensor_size on the roofline; nodes
 *   and attributes stagger does not use are counted in the warning.
 * - Malformed traces: each error names the file and the node.
 */
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "cost/cost.h"
#include "engine/engine.h"
#include "interop/chakra.h"
#include "interop/chakra_import_private.h"
#include "interop/chakra_private.h"
#include "chakra_trace.h"
#include "readers.h"
#include "testutil.h"

/* ---- round trip ----------------------------------------------------------------- */

/* Simulates `s` and writes its outputs to `dir`. */
static void
simulate_to(const StSchedule *s, const StProfile *profile, gboolean no_fold, const char *dir)
{
  g_autoptr(GError) error = NULL;
  StEngineOptions eo = {profile, "auto", NULL, no_fold, NULL};
  StTimeline *t = st_simulate(s, &eo, NULL, &error);
  g_assert_no_error(error);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_true(st_output_write_all(sum, dir, &error));
  g_assert_no_error(error);
  st_timeline_free(t);
}

static void
assert_same_file(const char *a, const char *b, const char *name)
{
  g_autofree char *pa = g_build_filename(a, name, NULL);
  g_autofree char *pb = g_build_filename(b, name, NULL);
  g_autofree char *ta = st_test_read(pa, NULL);
  g_autofree char *tb = st_test_read(pb, NULL);
  if (strcmp(ta, tb) != 0)
    g_error("%s differs between %s and %s", name, a, b);
}

static StSchedule *
import(const char *prefix, const StCluster *cluster, StProfile *profile,
       StChakraImportStats *stats, GError **error)
{
  StChakraImportOptions io = {.cluster = cluster, .profile = profile,
                              .precision = ST_PRECISION_FP32, .optimizer = ST_OPTIMIZER_ADAM};
  return st_chakra_import(prefix, &io, stats, error);
}

typedef struct {
  const char *model;
  int nodes, gpus, ranks, zero_stage;
  StPrecision precision;
  gboolean no_fold;
  const char *const *options; /* NULL, or name, value pairs then NULL (a strategy's own) */
} Trip;

static void
round_trip(const char *strategy, const Trip *t, const char *dir)
{
  g_test_message("%s on %s, %d nodes x %d GPUs, %d ranks%s", strategy, t->model, t->nodes,
                 t->gpus, t->ranks, t->no_fold ? ", not folded" : "");
  g_autoptr(StModel) m = st_test_model_named(t->model);
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", t->nodes, t->gpus);
  StOptions o;
  st_options_init(&o);
  o.ranks = t->ranks;
  o.micro_batch = 4;
  o.zero_stage = t->zero_stage;
  o.precision = t->precision;
  o.steps = 3;
  for (const char *const *kv = t->options; kv != NULL && kv[0] != NULL; kv += 2)
    g_assert_true(st_options_set(&o, kv[0], kv[1], NULL));
  g_autoptr(StSchedule) s = st_test_build(strategy, m, c, &o);
  st_options_clear(&o);
  g_autofree char *prefix = g_build_filename(dir, strategy, "et", "trace", NULL);
  g_autoptr(GError) error = NULL;
  StChakraExportOptions eo = {NULL, "auto"};
  g_assert_true(st_chakra_export(s, prefix, &eo, NULL, &error));
  g_assert_no_error(error);
  StChakraImportStats stats = {0};
  g_autoptr(StSchedule) back = import(prefix, c, NULL, &stats, &error);
  g_assert_no_error(error);
  g_assert_nonnull(back);
  g_assert_true(stats.from_stagger);
  g_assert_cmpint(stats.ranks, ==, s->n_ranks);
  g_assert_null(stats.warning); /* stagger reads everything it writes */
  st_chakra_import_stats_clear(&stats);
  g_autofree char *a = g_build_filename(dir, strategy, "direct", NULL);
  g_autofree char *b = g_build_filename(dir, strategy, "imported", NULL);
  simulate_to(s, NULL, t->no_fold, a);
  simulate_to(back, NULL, t->no_fold, b);
  for (const char *const *f = (const char *const[]){"report.json", "ops.csv", "memory.csv",
                                                    "comm.csv", "trace.json", NULL};
       *f != NULL; f++)
    assert_same_file(a, b, *f);
}

static void
test_round_trip(void)
{
  /* Sub-group collectives (ZeRO-3 gathers, pipelines' all-reduces, burst's
   * sets), point-to-point (pipeline, cyclic DP), copies (burst), several
   * ranks per GPU (6 on 4), two nodes, mixed precision, unfolded. */
  static const Trip trips[] = {
    {"mlp", 1, 4, 0, 3, ST_PRECISION_FP32, FALSE, NULL},
    {"mlp", 1, 4, 6, 2, ST_PRECISION_MIXED, TRUE, NULL},
    {"resnet18", 2, 2, 0, 1, ST_PRECISION_MIXED, FALSE, NULL},
  };
  g_autofree char *dir = st_test_tmpdir();
  for (const StStrategy *const *st = st_strategies(); *st != NULL; st++)
    for (gsize k = 0; k < G_N_ELEMENTS(trips); k++) {
      g_autofree char *sub = g_strdup_printf("%s/%zu", dir, k);
      round_trip((*st)->name, &trips[k], sub);
    }
  /* What a strategy's defaults leave out: a layer pass cut in parts around
   * its tensor-parallel collectives (StOp.part), interleaved pipeline
   * chunks, background jobs and their warm-up scale. */
  static const char *const tp_sp[] = {"tensor-parallel", "2", "pipeline-stages", "2",
                                       "sequence-parallel", "true", "global-batch", "16",
                                       "micro-batch", "2", NULL};
  static const char *const tp_vpp[] = {"tensor-parallel", "2", "pipeline-stages", "2",
                                        "virtual-stages", "2", "global-batch", "32",
                                        "micro-batch", "2", NULL};
  static const char *const background[] = {"background", "mlp:b8", NULL};
  static const struct {
    const char *strategy;
    Trip trip;
  } own[] = {
    {"megatron", {"gpt2-124m", 1, 8, 0, 0, ST_PRECISION_MIXED, FALSE, tp_sp}},
    {"megatron", {"gpt2-124m", 1, 8, 0, 1, ST_PRECISION_MIXED, FALSE, tp_vpp}},
    {"multiplex", {"mlp", 1, 4, 0, 0, ST_PRECISION_FP32, FALSE, background}},
  };
  for (gsize k = 0; k < G_N_ELEMENTS(own); k++) {
    g_autofree char *sub = g_strdup_printf("%s/own%zu", dir, k);
    round_trip(own[k].strategy, &own[k].trip, sub);
  }
}

/* ---- traces written node by node ------------------------------------------------------ */

/* Writes a node; `a` may be NULL; `deps` ends with 0 (ids start at 1). */
static void
trace_node(EtWriter *w, uint64_t id, const char *name, int type, uint64_t duration_us,
           const uint64_t *deps, EtAttrs *a)
{
  size_t n = 0;
  while (deps != NULL && deps[n] != 0)
    n++;
  st_test_et_node(w, id, name, type, duration_us, deps, n, a);
}

#define DEPS(...) ((const uint64_t[]){__VA_ARGS__, 0})

static const StOpRecord *
record_of(const StTimeline *t, int rank, uint32_t op)
{
  for (guint i = 0; i < t->ops->len; i++) {
    const StOpRecord *r = &g_array_index(t->ops, StOpRecord, i);
    if (r->rank == rank && r->op == op)
      return r;
  }
  g_assert_not_reached();
}

static void
test_foreign_gpu_trace(void)
{
  /* Two ranks of a GPU-shaped trace (as Chakra's PyTorch converter writes
   * them), on two H100s (the roofline bounds fp32 work at the TF32 peak,
   * 494 TFLOP/s, 3.35 TB/s), costed by the roofline (pinned below):
   *   1 gemm       COMP, duration 100 us             -> 100 us, profiled
   *   2 softmax    COMP, num_ops 67e9, tensor 3.35e6 -> max(67e9 / 494e12,
   *                3.35e6 / 3.35e12) s = 135.63 us, roofline
   *   3 allreduce  COMM_COLL ALL_REDUCE, 64 MiB, after 2
   *   4 metadata   METADATA_NODE after 3: contracted, 5 waits for 3
   *   5 tail       COMP, duration 10 us, after 4
   *   6 launch     COMP on the CPU (is_cpu_op), 50 us, beside the gemm
   * so the step is 100 + 135.63 + t(all-reduce alone) + 10 us (+ 50 ns: while
   * the CPU op runs beside it, at fill 1e-3, both run at 1 / 1.001), and the
   * warning counts the METADATA nodes and the attribute 'rf_id' stagger does
   * not use. */
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *prefix = g_build_filename(dir, "gpu", NULL);
  const int64_t ar_bytes = 64 << 20;
  for (int r = 0; r < 2; r++) {
    EtWriter *w = st_test_et_open(prefix, r);
    EtAttrs a;
    et_attrs_init(&a);
    et_attrs_bool(&a, "is_cpu_op", FALSE);
    et_attrs_int64(&a, "rf_id", 7);
    trace_node(w, 1, "gemm", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 100, NULL, &a);
    et_attrs_clear(&a);
    et_attrs_init(&a);
    et_attrs_int64(&a, "num_ops", 67000000000);
    et_attrs_uint64(&a, "tensor_size", 3350000);
    trace_node(w, 2, "softmax", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 0, DEPS(1), &a);
    et_attrs_clear(&a);
    et_attrs_init(&a);
    et_attrs_int64(&a, "comm_type", 0); /* ALL_REDUCE */
    et_attrs_int64(&a, "comm_size", ar_bytes);
    trace_node(w, 3, "allreduce", CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE, 0, DEPS(2), &a);
    et_attrs_clear(&a);
    trace_node(w, 4, "metadata", CHAKRA_PROTO_MSG__NODE_TYPE__METADATA_NODE, 0, DEPS(3), NULL);
    trace_node(w, 5, "tail", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 10, DEPS(4), NULL);
    et_attrs_init(&a);
    et_attrs_bool(&a, "is_cpu_op", TRUE);
    trace_node(w, 6, "launch", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 50, NULL, &a);
    et_attrs_clear(&a);
    st_test_et_close(w);
  }
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  g_autoptr(StProfile) profile = st_profile_new();
  g_autoptr(GError) error = NULL;
  StChakraImportStats stats = {0};
  g_autoptr(StSchedule) s = import(prefix, c, profile, &stats, &error);
  g_assert_no_error(error);
  g_assert_false(stats.from_stagger);
  g_assert_cmpint(stats.nodes, ==, 12);
  g_assert_cmpint(stats.ops, ==, 10);
  g_assert_nonnull(strstr(stats.warning, "METADATA_NODE (2 nodes)"));
  g_assert_nonnull(strstr(stats.warning, "attribute 'rf_id' (2 times)"));
  st_chakra_import_stats_clear(&stats);
  g_assert_cmpint(s->programs->len, ==, 1); /* both ranks run the same */

  /* The closed forms below are the roofline's: pin it (--compute-model). */
  s->settings.compute_model = g_strdup("roofline");
  StEngineOptions eo = {profile, "auto", NULL, FALSE, NULL};
  g_autoptr(StTimeline) t = st_simulate(s, &eo, NULL, &error);
  g_assert_no_error(error);
  /* Ops in dependency order: launch is last (it depends on nothing, and
   * comes last in the file). */
  const StOpRecord *gemm = record_of(t, 0, 0), *softmax = record_of(t, 0, 1),
                   *ar = record_of(t, 0, 2), *tail = record_of(t, 0, 3),
                   *launch = record_of(t, 0, 4);
  /* The CPU op shares the device at fill 1e-3 (the least a profile
   * holds): while they overlap, both run at 1 / 1.001. */
  g_assert_cmpint(labs((long)(gemm->end_ns - gemm->start_ns - 100050)), <=, 1); /* ns rounding */
  g_assert_cmpint(gemm->source, ==, ST_SRC_PROFILED);
  g_assert_cmpint(softmax->end_ns - softmax->start_ns, ==, (int64_t)ceil(67e9 / 494e12 * 1e9));
  g_assert_cmpint(softmax->source, ==, ST_SRC_ROOFLINE);
  g_assert_cmpint(labs((long)(launch->end_ns - launch->start_ns - 50050)), <=, 1);
  g_assert_cmpint(ar->start_ns, ==, softmax->end_ns);
  StGroupShape shape;
  st_schedule_group_shape(s, 0, 0, &shape);
  StCommPlan plan;
  g_assert_true(st_comm_plan_collective(c, NULL, "auto", ST_COLL_ALL_REDUCE, ar_bytes, &shape,
                                        &plan, &error));
  g_assert_cmpfloat_with_epsilon((double)(ar->end_ns - ar->start_ns), st_comm_plan_ns(&plan),
                                 2);
  g_assert_cmpint(tail->start_ns, ==, ar->end_ns);
  g_assert_cmpint(tail->end_ns - tail->start_ns, ==, 10000);
}

static void
add_tensors(EtAttrs *a, const char *name, const char *tensor, const char *bytes)
{
  char *pair[2] = {(char *)tensor, (char *)bytes};
  et_attrs_string_list(a, name, pair, tensor != NULL ? 2 : 0);
}

static void
test_foreign_memory(void)
{
  /* ASTRA-sim's memory attributes on a foreign trace: a tensor lives from
   * the start of the node listing it in outputs to the end of the last
   * listing it in inputs, when that one depends on the writer:
   *   1 COMP  outputs a (1000 B), inputs w (never written: live throughout)
   *   2 COMP  after 1, inputs a, outputs b (300 B)
   *   3 COMM  (its own stream, depends on nothing) inputs b: not after b's
   *           writer, so b is live throughout, and the warning says so. */
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *prefix = g_build_filename(dir, "mem", NULL);
  EtWriter *w = st_test_et_open(prefix, 0);
  EtAttrs a;
  et_attrs_init(&a);
  add_tensors(&a, "outputs", "a", "1000");
  add_tensors(&a, "inputs", "w", "64");
  trace_node(w, 1, "one", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 5, NULL, &a);
  et_attrs_clear(&a);
  et_attrs_init(&a);
  add_tensors(&a, "inputs", "a", "1000");
  add_tensors(&a, "outputs", "b", "300");
  trace_node(w, 2, "two", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 5, DEPS(1), &a);
  et_attrs_clear(&a);
  et_attrs_init(&a);
  et_attrs_int64(&a, "comm_type", 0);
  et_attrs_int64(&a, "comm_size", 0);
  add_tensors(&a, "inputs", "b", "300");
  trace_node(w, 3, "three", CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE, 0, NULL, &a);
  et_attrs_clear(&a);
  st_test_et_close(w);
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 1);
  g_autoptr(StProfile) profile = st_profile_new();
  g_autoptr(GError) error = NULL;
  StChakraImportStats stats = {0};
  g_autoptr(StSchedule) s = import(prefix, c, profile, &stats, &error);
  g_assert_no_error(error);
  g_assert_nonnull(strstr(stats.warning, "tensor lifetime"));
  st_chakra_import_stats_clear(&stats);
  const StProgram *p = st_schedule_program_of(s, 0);
  g_assert_cmpuint(p->buffers->len, ==, 3); /* a, w, b in order of mention */
  const StBuffer *ba = &g_array_index(p->buffers, StBuffer, 0);
  const StBuffer *bw = &g_array_index(p->buffers, StBuffer, 1);
  const StBuffer *bb = &g_array_index(p->buffers, StBuffer, 2);
  g_assert_cmpstr(ba->name, ==, "a");
  g_assert_false(ba->persistent);
  g_assert_cmpint(ba->bytes, ==, 1000);
  g_assert_true(bw->persistent);
  g_assert_true(bb->persistent);
  /* a: allocated by op 0 (one), freed by op 1 (two). */
  const StOp *one = st_program_op(p, 0), *two = st_program_op(p, 1);
  g_assert_cmpuint(one->n_alloc, ==, 1);
  g_assert_cmpuint(st_program_allocs(p, one)[0], ==, 0);
  g_assert_cmpuint(two->n_free, ==, 1);
  g_assert_cmpuint(st_program_frees(p, two)[0], ==, 0);
  /* The peak: w + b live throughout, a while one and two run. */
  StEngineOptions eo = {profile, "auto", NULL, FALSE, NULL};
  g_autoptr(StTimeline) t = st_simulate(s, &eo, NULL, &error);
  g_assert_no_error(error);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_assert_cmpint(st_summary_device(sum, 0)->peak_bytes, ==, 64 + 300 + 1000);
}

/* Writes `bytes` as file `name` in `dir`. */
static char *
write_bytes(const char *dir, const char *name, const guint8 *bytes, gsize n)
{
  char *path = g_build_filename(dir, name, NULL);
  g_autoptr(GError) error = NULL;
  g_file_set_contents(path, (const char *)bytes, (gssize)n, &error);
  g_assert_no_error(error);
  return path;
}

static void
expect_error(const char *prefix, const char *pattern)
{
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  g_autoptr(StProfile) profile = st_profile_new();
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) s = import(prefix, c, profile, NULL, &error);
  g_assert_null(s);
  g_assert_nonnull(error);
  if (!g_pattern_match_simple(pattern, error->message))
    g_error("'%s' does not match '%s'", error->message, pattern);
}

static void
test_malformed(void)
{
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *p = g_build_filename(dir, "bad", NULL);
  g_autofree char *f0 = st_chakra_rank_path(p, 0);

  /* No file at all, then an empty one. */
  expect_error(p, "*bad.0.et: no such file*");
  g_free(write_bytes(dir, "bad.0.et", (const guint8 *)"", 0));
  expect_error(p, "*bad.0.et: empty file*");

  /* A length prefix whose varint never ends. */
  g_free(write_bytes(dir, "bad.0.et", (const guint8[]){0x80, 0x80}, 2));
  expect_error(p, "*bad.0.et: the global metadata (byte 0): length prefix: truncated varint*");

  /* Metadata, then a node whose length runs past the end of the file. */
  g_free(write_bytes(dir, "bad.0.et", (const guint8[]){0x00, 0x05, 0x08, 0x01}, 4));
  expect_error(p, "*bad.0.et: node #0 (byte 1): length prefix says 5 bytes, but only 2 are "
                  "left*");

  /* Node field 7 (duration_micros, a varint) sent as length-delimited. */
  g_free(write_bytes(dir, "bad.0.et",
                     (const guint8[]){0x00, 0x05, 0x08, 0x01, 0x3a, 0x01, 0x00}, 7));
  expect_error(p, "*node #0 (byte 4): Node field 7 ('duration_micros'): wire type "
                  "length-delimited, but the schema gives it varint*");

  /* A dangling dependency, then a cycle. */
  EtWriter *w = st_test_et_open(p, 0);
  trace_node(w, 1, "a", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 1, NULL, NULL);
  trace_node(w, 2, "b", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 1, DEPS(1, 99), NULL);
  st_test_et_close(w);
  expect_error(p, "*bad.0.et: node #1 (id 2 'b', byte *): depends on node 99, which this file "
                  "does not have (a dangling dependency)*");
  w = st_test_et_open(p, 0);
  trace_node(w, 1, "a", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 1, DEPS(2), NULL);
  trace_node(w, 2, "b", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 1, DEPS(1), NULL);
  st_test_et_close(w);
  expect_error(p, "*bad.0.et: node #* is in a dependency cycle*");
  /* Ids that do not count up by one find their nodes through a table
   * (counting ones by subtraction): a repeated id, a dangling dependency,
   * then a file that imports. */
  w = st_test_et_open(p, 0);
  trace_node(w, 5, "a", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 1, NULL, NULL);
  trace_node(w, 5, "b", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 1, NULL, NULL);
  st_test_et_close(w);
  expect_error(p, "*bad.0.et: node #1 (id 5 'b', byte *): repeats the id of node #0*");
  w = st_test_et_open(p, 0);
  trace_node(w, 10, "a", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 1, NULL, NULL);
  trace_node(w, 3, "b", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 1, DEPS(10, 11), NULL);
  st_test_et_close(w);
  expect_error(p, "*bad.0.et: node #1 (id 3 'b', byte *): depends on node 11, which this file "
                  "does not have (a dangling dependency)*");
  w = st_test_et_open(p, 0);
  trace_node(w, 10, "a", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 1, NULL, NULL);
  trace_node(w, 3, "b", CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE, 1, DEPS(10), NULL);
  st_test_et_close(w);
  {
    g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
    g_autoptr(StProfile) profile = st_profile_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(StSchedule) s = import(p, c, profile, NULL, &error);
    g_assert_no_error(error);
    g_assert_nonnull(s);
  }

  /* A collective without its size; a send whose comm_src is another rank. */
  w = st_test_et_open(p, 0);
  EtAttrs a;
  et_attrs_init(&a);
  et_attrs_int64(&a, "comm_type", 0);
  trace_node(w, 1, "ar", CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE, 0, NULL, &a);
  et_attrs_clear(&a);
  st_test_et_close(w);
  expect_error(p, "*bad.0.et: node #0 (id 1 'ar'*): a COMM_COLL_NODE needs the attribute "
                  "'comm_size'*");
  w = st_test_et_open(p, 0);
  et_attrs_init(&a);
  et_attrs_int32(&a, "comm_src", 1);
  et_attrs_int32(&a, "comm_dst", 0);
  et_attrs_int64(&a, "comm_size", 8);
  trace_node(w, 1, "send", CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE, 0, NULL, &a);
  et_attrs_clear(&a);
  st_test_et_close(w);
  expect_error(p, "*bad.0.et: node #0 (id 1 'send'*): comm_src is 1, but this is rank 0's "
                  "file*");

  /* A process group that no group file defines. */
  w = st_test_et_open(p, 0);
  et_attrs_init(&a);
  et_attrs_int64(&a, "comm_type", 0);
  et_attrs_int64(&a, "comm_size", 8);
  et_attrs_string(&a, "pg_name", "5");
  trace_node(w, 1, "ar", CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE, 0, NULL, &a);
  et_attrs_clear(&a);
  st_test_et_close(w);
  expect_error(p, "*node #0 (id 1 'ar'*): process group '5' is in no communicator-group file "
                  "(*bad.comm_groups.json does not exist)*");
}

static void
test_missing_rank(void)
{
  /* A stagger trace of 4 ranks without rank 2's file; then a stray file
   * for a rank the trace does not have. */
  g_autofree char *dir = st_test_tmpdir();
  g_autoptr(StModel) m = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 4);
  StOptions o;
  st_options_init(&o);
  o.micro_batch = 4;
  g_autoptr(StSchedule) s = st_test_build("dp", m, c, &o);
  st_options_clear(&o);
  g_autofree char *p = g_build_filename(dir, "dp", NULL);
  g_autoptr(GError) error = NULL;
  StChakraExportOptions eo = {NULL, "auto"};
  g_assert_true(st_chakra_export(s, p, &eo, NULL, &error));
  g_autofree char *f2 = st_chakra_rank_path(p, 2), *f4 = st_chakra_rank_path(p, 4);
  g_autofree char *f3 = st_chakra_rank_path(p, 3);
  g_autofree char *moved = g_strconcat(f2, ".away", NULL);
  g_assert_cmpint(g_rename(f2, moved), ==, 0);
  expect_error(p, "*dp.2.et: missing: the trace has ranks 0 to 3 (its metadata says so), but "
                  "no file for rank 2*");
  g_assert_cmpint(g_rename(moved, f2), ==, 0);
  gsize n;
  g_autofree char *bytes = st_test_read(f3, &n);
  g_assert_true(g_file_set_contents(f4, bytes, (gssize)n, NULL));
  expect_error(p, "*dp.4.et: rank 4, but *dp.0.et says the trace has 4 ranks*");
  g_unlink(f4);
  /* A truncated rank file: the message it ends in is named. */
  g_assert_true(g_file_set_contents(f3, bytes, (gssize)n - 3, NULL));
  expect_error(p, "*dp.3.et: node #* (byte *): *");
}

static void
test_mutations(void)
{
  /* A deterministic stand-in for fuzzing until the loader fuzz harness
   * exists: a valid two-rank trace with bytes flipped, cut, or inserted
   * (1000 variants, a fixed seed) either imports or fails with a GError;
   * it never crashes and never reaches the builder's g_return_if_fail
   * (G_DEBUG=fatal-criticals makes that fatal in ctest). */
  g_autofree char *dir = st_test_tmpdir();
  g_autoptr(StModel) m = st_test_model_named("mlp");
  g_autoptr(StCluster) c = st_test_cluster_named("dgx-h100", 1, 2);
  StOptions o;
  st_options_init(&o);
  o.micro_batch = 4;
  o.zero_stage = 3;
  g_autoptr(StSchedule) s = st_test_build("zero", m, c, &o);
  st_options_clear(&o);
  g_autofree char *p = g_build_filename(dir, "m", NULL);
  g_autoptr(GError) error = NULL;
  StChakraExportOptions eo = {NULL, "auto"};
  g_assert_true(st_chakra_export(s, p, &eo, NULL, &error));
  g_autofree char *f1 = st_chakra_rank_path(p, 1);
  gsize n;
  g_autofree guint8 *orig = (guint8 *)st_test_read(f1, &n);
  GRand *rand = g_rand_new_with_seed(14);
  int imported = 0, refused = 0;
  for (int i = 0; i < 1000; i++) {
    GByteArray *b = g_byte_array_new();
    g_byte_array_append(b, orig, (guint)n);
    int kind = g_rand_int_range(rand, 0, 4);
    guint at = (guint)g_rand_int_range(rand, 0, (gint32)n);
    if (kind == 0) /* flip a few bits */
      for (int k = 0; k < 1 + g_rand_int_range(rand, 0, 4); k++)
        b->data[(at + (guint)k * 7) % n] ^= (guint8)(1u << g_rand_int_range(rand, 0, 8));
    else if (kind == 1) /* cut the file */
      g_byte_array_set_size(b, at);
    else if (kind == 2) /* set a byte */
      b->data[at] = (guint8)g_rand_int_range(rand, 0, 256);
    else { /* insert a byte */
      guint8 v = (guint8)g_rand_int_range(rand, 0, 256);
      g_array_insert_val((GArray *)b, at, v);
    }
    FILE *out = fopen(f1, "wb"); /* not g_file_set_contents: no fsync per variant */
    g_assert_nonnull(out);
    g_assert_cmpuint(fwrite(b->data, 1, b->len, out), ==, b->len);
    g_assert_cmpint(fclose(out), ==, 0);
    g_byte_array_unref(b);
    g_autoptr(StProfile) profile = st_profile_new();
    g_autoptr(GError) e = NULL;
    g_autoptr(StSchedule) back = import(p, c, profile, NULL, &e);
    g_assert_true((back == NULL) == (e != NULL));
    if (back != NULL)
      imported++;
    else
      refused++;
  }
  g_rand_free(rand);
  g_test_message("%d mutated traces imported, %d refused", imported, refused);
  g_assert_cmpint(refused, >, 500);
}

/* The importer releases a file's decoded nodes once its program is
 * converted (et_file_release_nodes); a message about one of its nodes
 * after that (im_program_build's checks) decodes the node again and names
 * it as before: the benchmark's foreign trace of 64 nodes. */
static void
test_node_message_after_release(void)
{
  g_autofree char *dir = st_test_tmpdir();
  g_autoptr(GError) error = NULL;
  g_autofree char *prefix = st_reader_input_find("chakra")->write(dir, 64, &error);
  g_assert_no_error(error);
  g_autofree char *path = g_strdup_printf("%s.0.et", prefix);
  g_autoptr(EtFile) f = et_file_read(path, &error);
  g_assert_no_error(error);
  guint n = f->nodes->len;
  g_assert_cmpuint(n, ==, 64);
  static const guint NODES[] = {0, 17, 63};
  char *before[G_N_ELEMENTS(NODES)];
  for (guint i = 0; i < G_N_ELEMENTS(NODES); i++) {
    GError *e = NULL;
    g_assert_false(im_node_fail(&e, f, NODES[i], "why %u", NODES[i]));
    before[i] = g_strdup(e->message);
    g_test_message("%s", e->message);
    g_error_free(e);
  }
  et_file_release_nodes(f);
  g_assert_cmpuint(f->nodes->len, ==, 0);
  g_assert_cmpuint(f->offsets->len, ==, n);
  for (guint i = 0; i < G_N_ELEMENTS(NODES); i++) {
    GError *e = NULL;
    g_assert_false(im_node_fail(&e, f, NODES[i], "why %u", NODES[i]));
    g_assert_cmpstr(e->message, ==, before[i]);
    g_assert_nonnull(strstr(e->message, "id "));
    g_error_free(e);
    g_free(before[i]);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/chakra/import/round-trip", test_round_trip);
  g_test_add_func("/chakra/import/foreign-gpu-trace", test_foreign_gpu_trace);
  g_test_add_func("/chakra/import/foreign-memory", test_foreign_memory);
  g_test_add_func("/chakra/import/malformed", test_malformed);
  g_test_add_func("/chakra/import/missing-rank", test_missing_rank);
  g_test_add_func("/chakra/import/mutations", test_mutations);
  g_test_add_func("/chakra/import/node-message-after-release", test_node_message_after_release);
  return g_test_run();
}
