/* readers.c: inputs of N nodes for every reader, and the readers' calls
 * (readers.h). The files are written by hand (JSON as text, protobuf with
 * protobuf-c or by its wire format), as a foreign tool would write them. */
#include "readers.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "cluster/cluster.h"
#include "import/import.h"
#include "interop/chakra.h"
#include "interop/chakra_private.h"
#include "model/model.h"
#include "plan/plan.h"
#include "profile/profile.h"
#include "profile/profile_import_deeppool.h"
#include "profile/profile_import_kineto.h"
#include "sched/sched.h"
#include "protowire.h"

double
st_reader_cpu_seconds(void)
{
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char *
save(const char *dir, const char *name, GString *text, GError **error)
{
  char *path = g_build_filename(dir, name, NULL);
  gboolean ok = g_file_set_contents_full(path, text->str, (gssize)text->len,
                                         G_FILE_SET_CONTENTS_NONE, 0644, error);
  g_string_free(text, TRUE);
  if (!ok)
    g_clear_pointer(&path, g_free);
  return path;
}

/* ---- model JSON -------------------------------------------------------------- */

static void
model_text(GString *s, int64_t n)
{
  g_string_append(s, "{\"name\": \"wide\", \"input\": [8], \"layers\": [\n");
  for (int64_t i = 0; i < n; i++) {
    if (i % 2 == 0)
      g_string_append_printf(s, "  {\"name\": \"l%" G_GINT64_FORMAT "\", \"type\": \"linear\", "
                             "\"out_features\": 8}", i);
    else
      g_string_append_printf(s, "  {\"name\": \"l%" G_GINT64_FORMAT "\", \"type\": \"relu\"}", i);
    g_string_append(s, i + 1 < n ? ",\n" : "\n");
  }
  g_string_append(s, "]}\n");
}

static char *
model_write(const char *dir, int64_t n, GError **error)
{
  GString *s = g_string_sized_new((gsize)n * 64 + 64);
  model_text(s, n);
  return save(dir, "model.json", s, error);
}

static gboolean
model_read(const char *path, GError **error)
{
  g_autoptr(StModel) m = st_model_load(path, error);
  return m != NULL;
}

/* ---- profile ----------------------------------------------------------------- */

static char *
profile_write(const char *dir, int64_t n, GError **error)
{
  GString *s = g_string_sized_new((gsize)n * 80 + 256);
  g_string_append(s, "{\"format\": \"stagger-profile\", \"version\": 1, \"device\": \"H100-SXM\", "
                     "\"source\": \"generated\", \"layers\": [\n");
  for (int64_t i = 0; i < n; i++)
    g_string_append_printf(s, "  {\"name\": \"l%" G_GINT64_FORMAT "\", \"pass\": \"%s\", \"x\": "
                           "%d, \"time_us\": %" G_GINT64_FORMAT ".5}%s\n", i / 2,
                           i % 2 == 0 ? "fwd" : "bwd", 1 + (int)(i % 3), 1 + i % 97,
                           i + 1 < n ? "," : "");
  g_string_append(s, "]}\n");
  return save(dir, "profile.json", s, error);
}

static gboolean
profile_read(const char *path, GError **error)
{
  g_autoptr(StProfile) p = st_profile_load(path, error);
  return p != NULL;
}

/* ---- schedule JSON ----------------------------------------------------------- */

static char *
schedule_write(const char *dir, int64_t n, GError **error)
{
  GString *s = g_string_sized_new((gsize)n * 100 + 4096);
  g_string_append(s,
    "{\"format\": \"stagger-schedule\", \"version\": 1,\n"
    " \"model\": {\"name\": \"tiny\", \"input\": [16], \"layers\": [{\"name\": \"l0\", "
    "\"type\": \"custom\", \"params\": 256, \"fwd_flops\": 512, \"bwd_flops\": 1024, "
    "\"activation_bytes\": 64, \"output_bytes\": 64}]},\n"
    " \"cluster\": {\"name\": \"pair\", \"nodes\": 1, \"gpus_per_node\": 2, \"gpu\": {\"name\": "
    "\"H100-SXM\", \"memory\": \"80GiB\", \"flops\": {\"fp32\": \"67TFLOP/s\"}, "
    "\"memory_bandwidth\": \"3.35TB/s\"}, \"links\": {\"intra_node\": {\"bandwidth\": "
    "\"450GB/s\", \"latency\": \"2us\", \"topology\": \"switch\"}}},\n"
    " \"settings\": {\"strategy\": \"dp\", \"description\": \"generated\", \"precision\": "
    "\"fp32\", \"optimizer\": \"sgd\", \"micro_batch\": 8, \"accumulation\": 1, "
    "\"global_batch\": 16},\n"
    " \"steps\": 1,\n"
    " \"devices\": [{\"node\": 0, \"local\": 0}, {\"node\": 0, \"local\": 1}],\n"
    " \"ranks\": [{\"device\": 0, \"program\": 0}, {\"device\": 1, \"program\": 0}],\n"
    " \"comms\": [{\"name\": \"world\", \"groups\": [[0, 1]]}],\n"
    " \"programs\": [{\"name\": \"dp\", \"streams\": [{\"name\": \"compute\", \"priority\": 0}, "
    "{\"name\": \"comm\", \"priority\": 1}],\n  \"labels\": [],\n  \"buffers\": [\n");
  int64_t n_buffers = (n + 3) / 4;
  for (int64_t b = 0; b < n_buffers; b++)
    g_string_append_printf(s, "   {\"name\": \"act %" G_GINT64_FORMAT "\", \"category\": "
                           "\"activations\", \"bytes\": 512}%s\n", b,
                           b + 1 < n_buffers ? "," : "");
  g_string_append(s, "  ],\n  \"ops\": [\n");
  for (int64_t i = 0; i < n; i++) {
    if (i % 8 == 7)
      g_string_append(s, "   {\"kind\": \"COMM_COLL\", \"collective\": \"all_reduce\", "
                         "\"stream\": 1, \"comm\": 0, \"bytes\": 1024");
    else
      g_string_append_printf(s, "   {\"kind\": \"COMP\", \"pass\": \"%s\", \"stream\": 0, "
                             "\"layer\": 0, \"micro\": 0, \"batch\": 8", i % 2 ? "bwd" : "fwd");
    if (i > 0)
      g_string_append_printf(s, ", \"deps\": [%" G_GINT64_FORMAT "]", i - 1);
    if (i % 4 == 0)
      g_string_append_printf(s, ", \"alloc\": [%" G_GINT64_FORMAT "]", i / 4);
    else if (i % 4 == 1)
      g_string_append_printf(s, ", \"free\": [%" G_GINT64_FORMAT "]", i / 4);
    g_string_append(s, i + 1 < n ? "},\n" : "}\n");
  }
  g_string_append(s, "  ]}]}\n");
  return save(dir, "schedule.json", s, error);
}

static gboolean
schedule_read(const char *path, GError **error)
{
  g_autoptr(StSchedule) s = st_schedule_load(path, error);
  return s != NULL && st_schedule_check(s, error);
}

/* ---- a foreign Chakra trace of one rank ----------------------------------------- */

static char *
chakra_write(const char *dir, int64_t n, GError **error)
{
  char *prefix = g_build_filename(dir, "et", NULL);
  g_autofree char *path = st_chakra_rank_path(prefix, 0);
  EtWriter *w = et_writer_open(path, error);
  if (w == NULL) {
    g_free(prefix);
    return NULL;
  }
  EtMeta meta;
  chakra_proto_msg__global_metadata__init(&meta);
  meta.version = (char *)"0.0.4";
  gboolean ok = et_writer_add(w, &meta.base, error);
  char name[64];
  for (int64_t i = 0; ok && i < n; i++) {
    EtNode node;
    chakra_proto_msg__node__init(&node);
    node.id = (uint64_t)i + 1;
    uint64_t deps[2];
    node.data_deps = deps;
    if (i >= 1)
      deps[node.n_data_deps++] = (uint64_t)i;
    if (i >= 5 && i % 3 == 0)
      deps[node.n_data_deps++] = (uint64_t)i - 4;
    EtAttrs a;
    et_attrs_init(&a);
    if (i % 16 == 15) {
      g_snprintf(name, sizeof(name), "## process_group:init ##");
      node.type = CHAKRA_PROTO_MSG__NODE_TYPE__METADATA_NODE;
    } else if (i % 8 == 7) {
      g_snprintf(name, sizeof(name), "nccl:all_reduce");
      node.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
      et_attrs_int64(&a, "comm_type", 0); /* ALL_REDUCE */
      et_attrs_int64(&a, "comm_size", 4096 * (1 + i % 13));
      et_attrs_bool(&a, "is_cpu_op", FALSE);
    } else {
      /* PyTorch's names repeat; their sizes and durations mostly do not. */
      g_snprintf(name, sizeof(name), "aten::op%d", (int)(i % 1000));
      node.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
      node.duration_micros = (uint64_t)(1 + i % 997);
      et_attrs_int64(&a, "num_ops", 1000 * (1 + i));
      et_attrs_int64(&a, "tensor_size", 64 * (1 + i % 101));
      et_attrs_bool(&a, "is_cpu_op", i % 5 == 0);
      /* Its output, read by the next compute node (ASTRA-sim's [tensor,
       * bytes] pairs); every 4th also reads the output 3 nodes back. */
      char out[32], in[32], back[32];
      g_snprintf(out, sizeof(out), "t%" G_GINT64_FORMAT, i);
      char *outputs[] = {out, (char *)"4096"};
      et_attrs_string_list(&a, "outputs", outputs, 2);
      if (i > 0 && (i - 1) % 8 != 7 && (i - 1) % 16 != 15) {
        g_snprintf(in, sizeof(in), "t%" G_GINT64_FORMAT, i - 1);
        g_snprintf(back, sizeof(back), "t%" G_GINT64_FORMAT, i - 3);
        char *inputs[] = {in, (char *)"4096", back, (char *)"4096"};
        et_attrs_string_list(&a, "inputs", inputs, i >= 3 && i % 4 == 0 ? 4 : 2);
      }
    }
    node.name = name;
    et_attrs_attach(&a, &node);
    ok = et_writer_add(w, &node.base, error);
    et_attrs_clear(&a);
  }
  if (!et_writer_close(w, ok ? error : NULL) || !ok)
    g_clear_pointer(&prefix, g_free);
  return prefix;
}

static StCluster *
one_gpu(void)
{
  static const char *const node =
    "{\"name\": \"n\", \"nodes\": 1, \"gpus_per_node\": 1, \"gpu\": {\"name\": \"G\", "
    "\"memory\": \"80GiB\", \"flops\": {\"fp32\": \"67TFLOP/s\"}, \"memory_bandwidth\": "
    "\"3.35TB/s\"}, \"links\": {\"intra_node\": {\"bandwidth\": \"450GB/s\", \"latency\": "
    "\"2us\"}, \"inter_node\": {\"bandwidth\": \"50GB/s\", \"latency\": \"5us\"}}}";
  g_autoptr(cJSON) root = cJSON_Parse(node);
  StCluster *c = st_cluster_from_json(root, "readers", NULL);
  g_assert_nonnull(c);
  return c;
}

static gboolean
chakra_read(const char *prefix, GError **error)
{
  g_autoptr(StCluster) c = one_gpu();
  g_autoptr(StProfile) profile = st_profile_new();
  StChakraImportOptions o = {.cluster = c, .profile = profile};
  StChakraImportStats stats = {0};
  g_autoptr(StSchedule) s = st_chakra_import(prefix, &o, &stats, error);
  st_chakra_import_stats_clear(&stats);
  return s != NULL;
}

/* ---- ONNX, in protobuf's wire format (onnx.proto's field numbers) ------------------ */

/* x [1, 8] -> MatMul(w) -> Relu -> MatMul(w) -> ... -> y: n nodes, none
 * named (NodeProto field 3 absent), one weight shared by every MatMul. */
static char *
onnx_write(const char *dir, int64_t n, GError **error)
{
  GByteArray *graph = g_byte_array_new();
  char in[32] = "x", out[32];
  for (int64_t i = 0; i < n; i++) {
    GByteArray *node = g_byte_array_new();
    if (i + 1 == n)
      g_snprintf(out, sizeof(out), "y");
    else
      g_snprintf(out, sizeof(out), "t%" G_GINT64_FORMAT, i);
    st_pb_string(node, 1, in);
    if (i % 2 == 0)
      st_pb_string(node, 1, "w");
    st_pb_string(node, 2, out);
    st_pb_string(node, 4, i % 2 == 0 ? "MatMul" : "Relu");
    st_pb_message(graph, 1, node);
    memcpy(in, out, sizeof(in));
  }
  GByteArray *weight = g_byte_array_new(); /* TensorProto: dims, type, name, raw data */
  static const float zeros[64] = {0};
  st_pb_int(weight, 1, 8);
  st_pb_int(weight, 1, 8);
  st_pb_int(weight, 2, 1);
  st_pb_string(weight, 8, "w");
  st_pb_bytes(weight, 9, zeros, sizeof(zeros));
  st_pb_message(graph, 5, weight);
  GByteArray *dims = g_byte_array_new(), *tensor = g_byte_array_new();
  GByteArray *type = g_byte_array_new(), *input = g_byte_array_new();
  GByteArray *d0 = g_byte_array_new(), *d1 = g_byte_array_new();
  st_pb_int(d0, 1, 1);
  st_pb_int(d1, 1, 8);
  st_pb_message(dims, 1, d0);
  st_pb_message(dims, 1, d1);
  st_pb_int(tensor, 1, 1);
  st_pb_message(tensor, 2, dims);
  st_pb_message(type, 1, tensor);
  st_pb_string(input, 1, "x");
  st_pb_message(input, 2, type);
  st_pb_message(graph, 11, input);
  GByteArray *output = g_byte_array_new();
  st_pb_string(output, 1, "y");
  st_pb_message(graph, 12, output);
  g_autoptr(GByteArray) model = g_byte_array_new();
  GByteArray *opset = g_byte_array_new();
  st_pb_int(model, 1, 8);
  st_pb_message(model, 7, graph);
  st_pb_int(opset, 2, 17);
  st_pb_message(model, 8, opset);
  char *path = g_build_filename(dir, "graph.onnx", NULL);
  if (!g_file_set_contents_full(path, (const char *)model->data, model->len,
                                G_FILE_SET_CONTENTS_NONE, 0644, error))
    g_clear_pointer(&path, g_free);
  return path;
}

static gboolean
import_with(const char *format, const char *path, GError **error)
{
  StImportOptions o = {.no_loss = TRUE};
  StImportResult r;
  st_import_result_init(&r);
  g_autoptr(StModel) m = st_import(st_importer_find(format), path, &o, &r, error);
  st_import_result_clear(&r);
  return m != NULL;
}

static gboolean
onnx_read(const char *path, GError **error)
{
  return import_with("onnx", path, error);
}

/* ---- Hugging Face config --------------------------------------------------------- */

static char *
hf_write(const char *dir, int64_t n, GError **error)
{
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "{\"architectures\": [\"GPT2LMHeadModel\"], \"model_type\": \"gpt2\", "
                         "\"activation_function\": \"gelu_new\", \"n_ctx\": 1024, \"n_embd\": "
                         "64, \"n_head\": 4, \"n_layer\": %" G_GINT64_FORMAT ", \"n_positions\": "
                         "1024, \"vocab_size\": 1000, \"layer_norm_epsilon\": 1e-05}\n", n);
  return save(dir, "config.json", s, error);
}

static gboolean
hf_read(const char *path, GError **error)
{
  return import_with("hf", path, error);
}

/* ---- a torch.profiler trace, and the model its ranges name ------------------------- */

static char *
kineto_write(const char *dir, int64_t n, GError **error)
{
  GString *m = g_string_sized_new((gsize)n * 64 + 64);
  model_text(m, n);
  g_autofree char *model = save(dir, "kineto-model.json", m, error);
  if (model == NULL)
    return NULL;
  GString *s = g_string_sized_new((gsize)n * 600 + 1024);
  g_string_append_printf(s, "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\": "
                         "\"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 85024112640}],\n"
                         "\"traceEvents\": [\n {\"ph\": \"X\", \"cat\": \"user_annotation\", "
                         "\"name\": \"ProfilerStep#0\", \"pid\": 100, \"tid\": 1, \"ts\": 0, "
                         "\"dur\": %" G_GINT64_FORMAT "}", n * 100 + 100);
  for (int64_t i = 0; i < n; i++) {
    int64_t t = 10 + i * 100;
    g_string_append_printf(s,
      ",\n {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"l%" G_GINT64_FORMAT "\", "
      "\"pid\": 100, \"tid\": 1, \"ts\": %" G_GINT64_FORMAT ", \"dur\": 90}"
      ",\n {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::%s\", \"pid\": 100, \"tid\": 1, "
      "\"ts\": %" G_GINT64_FORMAT ", \"dur\": 80}"
      ",\n {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 100, "
      "\"tid\": 1, \"ts\": %" G_GINT64_FORMAT ", \"dur\": 5, \"args\": {\"correlation\": %"
      G_GINT64_FORMAT "}}"
      ",\n {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7, "
      "\"ts\": %" G_GINT64_FORMAT ", \"dur\": %" G_GINT64_FORMAT ", \"args\": {\"correlation\": %"
      G_GINT64_FORMAT ", \"stream\": 7}}",
      i, t, i % 2 == 0 ? "linear" : "relu", t + 2, t + 4, i + 1,
      i % 2 == 0 ? "ampere_sgemm_64x64_tn" : "vectorized_elementwise_kernel", t + 20,
      1 + i % 37, i + 1);
  }
  g_string_append(s, "\n]}\n");
  return save(dir, "kineto.json", s, error);
}

static gboolean
kineto_read(const char *path, GError **error)
{
  g_autofree char *dir = g_path_get_dirname(path);
  g_autofree char *model_path = g_build_filename(dir, "kineto-model.json", NULL);
  g_autoptr(StModel) model = st_model_load(model_path, error);
  if (model == NULL)
    return FALSE;
  StKinetoOptions o = {NULL, 16, ST_LINK_INTRA_NODE}; /* --batch 16 */
  StKinetoImport stats = {0};
  g_autoptr(StProfile) p = st_profile_import_kineto(path, model, &o, &stats, error);
  st_kineto_import_clear(&stats);
  return p != NULL;
}

/* ---- a DeepPool profile, and the model its rows describe ---------------------------- */

/* Linear layers of widths 8 + (k mod 65536), each followed by a relu: the
 * input shapes are varied (as a real network's are), and the parameters
 * stay within 2^53 at 10^6 layers. */
static int64_t
deeppool_width(int64_t i)
{
  return 8 + (i / 2) % 65536;
}

static char *
deeppool_write(const char *dir, int64_t n, GError **error)
{
  GString *m = g_string_sized_new((gsize)n * 64 + 64);
  g_string_append(m, "{\"name\": \"widths\", \"input\": [8], \"layers\": [\n");
  for (int64_t i = 0; i < n; i++) {
    if (i % 2 == 0)
      g_string_append_printf(m, "  {\"name\": \"l%" G_GINT64_FORMAT "\", \"type\": \"linear\", "
                             "\"out_features\": %" G_GINT64_FORMAT "}", i, deeppool_width(i));
    else
      g_string_append_printf(m, "  {\"name\": \"l%" G_GINT64_FORMAT "\", \"type\": \"relu\"}", i);
    g_string_append(m, i + 1 < n ? ",\n" : "\n");
  }
  g_string_append(m, "]}\n");
  g_autofree char *model = save(dir, "deeppool-model.json", m, error);
  if (model == NULL)
    return NULL;
  GString *s = g_string_sized_new((gsize)n * 80 + 64);
  g_string_append(s, "#config  avg(ms)    p50     p90     p99\n");
  for (int64_t i = 0; i < n; i++) {
    int64_t in = i == 0 ? 8 : deeppool_width(i - 1 - (i - 1) % 2);
    if (i % 2 == 0)
      g_string_append_printf(s, "linear{\"in_features\":%" G_GINT64_FORMAT ",\"out_features\":%"
                             G_GINT64_FORMAT "}[1]%" G_GINT64_FORMAT " 0.%03d\n", in,
                             deeppool_width(i), in, 1 + (int)(i % 997));
    else
      g_string_append_printf(s, "ReLU2d{}[1][%" G_GINT64_FORMAT "] 0.%03d\n", deeppool_width(i),
                             1 + (int)(i % 997));
  }
  return save(dir, "deeppool.txt", s, error);
}

static gboolean
deeppool_read(const char *path, GError **error)
{
  g_autofree char *dir = g_path_get_dirname(path);
  g_autofree char *model_path = g_build_filename(dir, "deeppool-model.json", NULL);
  g_autoptr(StModel) model = st_model_load(model_path, error);
  if (model == NULL)
    return FALSE;
  g_autoptr(StProfile) p = st_profile_import_deeppool(path, model, "A100", NULL, error);
  return p != NULL;
}

/* ---- a plan space file ------------------------------------------------------------- */

static char *
space_write(const char *dir, int64_t n, GError **error)
{
  GString *s = g_string_sized_new((gsize)n * 9 + 64);
  g_string_append(s, "{\"strategy\": [\"dp\", \"zero\"], \"nodes\": [");
  for (int64_t i = 0; i < n; i++)
    g_string_append_printf(s, "%s%" G_GINT64_FORMAT, i > 0 ? ", " : "", i + 1);
  g_string_append(s, "], \"global-batch\": 512}\n");
  return save(dir, "space.json", s, error);
}

static gboolean
space_read(const char *path, GError **error)
{
  StPlanSpec *spec = st_plan_spec_new();
  gboolean ok = st_plan_spec_load(spec, path, error);
  st_plan_spec_free(spec);
  return ok;
}

/* ---- the table ------------------------------------------------------------------------ */

static const StReaderInput READERS[] = {
  {"model", "layers", model_write, model_read},
  {"profile", "entries", profile_write, profile_read},
  {"schedule", "ops", schedule_write, schedule_read},
  {"chakra", "nodes", chakra_write, chakra_read},
  {"onnx", "nodes", onnx_write, onnx_read},
  {"kineto", "kernels", kineto_write, kineto_read},
  {"deeppool", "rows", deeppool_write, deeppool_read},
  {"hf", "blocks", hf_write, hf_read},
  {"space", "values", space_write, space_read},
  {NULL},
};

const StReaderInput *
st_reader_inputs(void)
{
  return READERS;
}

const StReaderInput *
st_reader_input_find(const char *name)
{
  for (const StReaderInput *r = READERS; r->name != NULL; r++)
    if (strcmp(r->name, name) == 0)
      return r;
  return NULL;
}
