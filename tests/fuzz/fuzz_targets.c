/* fuzz_targets.c: the table of fuzz targets (see fuzz_targets.h). */
#include "fuzz_targets.h"

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "cluster/cluster.h"
#include "cost/calibration.h"
#include "import/import.h"
#include "interop/chakra.h"
#include "model/model.h"
#include "plan/plan.h"
#include "profile/profile.h"
#include "profile/profile_import_kineto.h"
#include "sched/sched.h"
#include "strategy/options.h"

/* The 8-GPU node every target that needs a cluster runs on. Transfer full. */
static StCluster *
node_of_8(void)
{
  static const char *const node =
    "{\"name\": \"n\", \"nodes\": 1, \"gpus_per_node\": 8, \"gpu\": {\"name\": \"G\", "
    "\"memory\": \"80GiB\", \"flops\": {\"fp32\": \"67TFLOP/s\"}, \"memory_bandwidth\": "
    "\"3.35TB/s\"}, \"links\": {\"intra_node\": {\"bandwidth\": \"450GB/s\", \"latency\": "
    "\"2us\"}, \"inter_node\": {\"bandwidth\": \"50GB/s\", \"latency\": \"5us\"}}}";
  g_autoptr(cJSON) root = cJSON_Parse(node);
  StCluster *c = st_cluster_from_json(root, "fuzz", NULL);
  g_assert_nonnull(c);
  return c;
}

static gboolean
model(const char *path)
{
  g_autoptr(StModel) m = st_model_load(path, NULL);
  return m != NULL;
}

/* A cluster, then resized as --nodes 3 --gpus 5 would. */
static gboolean
cluster(const char *path)
{
  g_autoptr(StCluster) c = st_cluster_load(path, NULL);
  return c != NULL && st_cluster_resize(c, 3, 5, NULL);
}

static gboolean
profile(const char *path)
{
  g_autoptr(StProfile) p = st_profile_load(path, NULL);
  return p != NULL;
}

/* A stored schedule, and its invariant checks (what `stagger sim --schedule`
 * runs before simulating). */
static gboolean
schedule(const char *path)
{
  g_autoptr(StSchedule) s = st_schedule_load(path, NULL);
  return s != NULL && st_schedule_check(s, NULL);
}

/* Lines "NAME VALUE" set shared options by name (as the command line and
 * the planner do), then resolve them on an 8-GPU node; "space.NAME VALUE" lines
 * go to the planner's spec, which takes ranges ("1-64:x2") and lists. */
static gboolean
options(const char *path)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return FALSE;
  gboolean ok = TRUE;
  StOptions o;
  st_options_init(&o);
  StPlanSpec *spec = st_plan_spec_new();
  g_auto(GStrv) lines = g_strsplit(text, "\n", 64);
  for (int i = 0; lines[i] != NULL; i++) {
    char *value = strchr(lines[i], ' ');
    if (value == NULL)
      continue;
    *value++ = '\0';
    if (g_str_has_prefix(lines[i], "space.")) {
      ok &= st_plan_spec_set(spec, lines[i] + 6, value, NULL);
    } else if (st_options_set(&o, lines[i], value, NULL)) {
      g_free(st_options_get(&o, lines[i]));
    } else {
      ok = FALSE;
    }
  }
  g_autoptr(StCluster) c = node_of_8();
  ok = ok && st_cluster_resize(c, o.nodes, o.gpus, NULL) && st_options_resolve(&o, c, NULL);
  st_options_clear(&o);
  st_plan_spec_free(spec);
  return ok;
}

static gboolean
plan_space(const char *path)
{
  StPlanSpec *spec = st_plan_spec_new();
  gboolean ok = st_plan_spec_load(spec, path, NULL);
  st_plan_spec_free(spec);
  return ok;
}

static gboolean
import_with(const char *format, const char *path)
{
  StImportOptions o = {0};
  StImportResult r;
  st_import_result_init(&r);
  g_autoptr(StModel) m = st_import(st_importer_find(format), path, &o, &r, NULL);
  st_import_result_clear(&r);
  return m != NULL;
}

static gboolean
import_hf(const char *path)
{
  return import_with("hf", path);
}

static gboolean
import_onnx(const char *path)
{
  return import_with("onnx", path);
}

/* A torch.profiler trace of models/mlp.json's training, as the seeds are. */
static gboolean
kineto(const char *path)
{
  static StModel *mlp = NULL; /* loaded once per process, kept for its life */
  if (mlp == NULL)
    mlp = st_model_load(STAGGER_SOURCE_DIR "/models/mlp.json", NULL);
  g_assert_nonnull(mlp);
  StKinetoOptions o = {NULL, 0, ST_LINK_INTRA_NODE};
  StKinetoImport stats = {0};
  g_autoptr(StProfile) p = st_profile_import_kineto(path, mlp, &o, &stats, NULL);
  st_kineto_import_clear(&stats);
  return p != NULL;
}

/* A Chakra execution trace of one rank (PREFIX.0.et), imported onto one GPU
 * of the node, as `stagger sim --chakra PREFIX --gpus 1` does. */
static gboolean
chakra(const char *path)
{
  static char *prefix = NULL; /* a folder of this process, kept for its life */
  if (prefix == NULL) {
    g_autofree char *dir = g_dir_make_tmp("stagger-fuzz-chakra-XXXXXX", NULL);
    g_assert_nonnull(dir);
    prefix = g_build_filename(dir, "t", NULL);
  }
  g_autofree char *bytes = NULL;
  gsize length = 0;
  g_autofree char *rank0 = st_chakra_rank_path(prefix, 0);
  g_autofree char *groups = st_chakra_groups_path(prefix);
  /* The seed's process groups: one group, rank 0, as stagger writes it. */
  if (!g_file_get_contents(path, &bytes, &length, NULL) ||
      !g_file_set_contents_full(rank0, bytes, (gssize)length, G_FILE_SET_CONTENTS_NONE, 0644,
                                NULL) ||
      !g_file_set_contents_full(groups, "{\"1\": [0]}\n", -1, G_FILE_SET_CONTENTS_NONE, 0644,
                                NULL))
    return FALSE;
  g_autoptr(StCluster) c = node_of_8();
  st_cluster_resize(c, 0, 1, NULL);
  g_autoptr(StProfile) profile = st_profile_new();
  StChakraImportOptions o = {.cluster = c, .profile = profile};
  StChakraImportStats stats = {0};
  g_autoptr(StSchedule) s = st_chakra_import(prefix, &o, &stats, NULL);
  st_chakra_import_stats_clear(&stats);
  return s != NULL;
}

/* A calibration file (its parameters, scoped ones too), applied to a node
 * and described as sim prints it. */
static gboolean
calibration(const char *path)
{
  StCalibration c;
  if (!st_calibration_load(path, &c, NULL))
    return FALSE;
  g_autoptr(StCluster) node = node_of_8();
  st_calibration_apply(&c, node);
  g_free(st_calibration_describe(&c));
  st_calibration_clear(&c);
  return TRUE;
}

#define SEEDS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* One row per target; each row opens a line with {"NAME", (CMake reads them). */
static const StFuzzTarget TARGETS[] = {
  {"model", model,
   SEEDS("models/*.json", "tests/data/models/*.json", "tests/data/exec/*.json",
         "tests/data/cli/*.json", "tests/bad_inputs/*.json")},
  {"cluster", cluster,
   SEEDS("models/clusters/*.json", "tests/data/clusters/*.json",
         "tests/data/engine/cluster.json")},
  {"profile", profile, SEEDS("traces/profiles/host/*.json", "traces/profiles/*.json")},
  {"schedule", schedule, SEEDS("tests/bad_inputs/schedule.json", "tests/data/schedules/*.json")},
  {"options", options, SEEDS("tests/fuzz/options/*.txt")},
  {"plan_space", plan_space, SEEDS("tests/fuzz/plan_space/*.json")},
  {"import_hf", import_hf, SEEDS("tests/data/hf/*.json")},
  {"import_onnx", import_onnx, SEEDS("tests/data/onnx/*.onnx", "tests/data/onnx/cases/*.onnx")},
  {"kineto", kineto, SEEDS("tests/data/kineto/*.json")},
  {"chakra", chakra, SEEDS("tests/fuzz/chakra/*.et")},
  {"calibration", calibration, SEEDS("models/calibration/*.json", "tests/fuzz/calibration/*.json")},
  {NULL},
};

const StFuzzTarget *
st_fuzz_targets(void)
{
  return TARGETS;
}

const StFuzzTarget *
st_fuzz_target_find(const char *name)
{
  for (const StFuzzTarget *t = TARGETS; t->name != NULL; t++)
    if (strcmp(t->name, name) == 0)
      return t;
  return NULL;
}

/* Writes the message as GLib would, then aborts on a warning or worse:
 * libFuzzer catches SIGABRT and keeps the input, where GLib's own fatal
 * path (a breakpoint, SIGTRAP) would end the process with no input kept. */
static GLogWriterOutput
abort_on_warning(GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data)
{
  GLogWriterOutput out = g_log_writer_standard_streams(level, fields, n_fields, data);
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    abort();
  return out;
}

void
st_fuzz_setup(void)
{
  g_log_set_writer_func(abort_on_warning, NULL, NULL);
}
