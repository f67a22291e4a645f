/* test_import_onnx.c: exported ONNX networks into models (import/import.h).
 *
 * tests/data/onnx/ holds networks exported by torch.onnx and torch's own
 * counts of them (counts.json), both made once by tests/data/onnx/export.py
 * (Debian's python3-torch and python3-torchvision; CI uses the committed
 * files). For each network the importer's count on the graph must equal
 * torch's: parameters exactly, and the FLOPs of the matrix products
 * (convolutions and products, 2 per multiply-add, as torch's dispatch-level
 * count sees them run) exactly. The model built from the graph must hold
 * the same parameters; its forward FLOPs are the products plus the
 * element-wise work its layer types count (docs/MODELS.md), a few percent
 * more. Where the zoo has the network (ResNet-50, ViT-B/16) the import must
 * be the zoo's model, layer for layer; the small GPT must be what one writes by
 * hand for it; MobileNetV2's inverted residuals and ReLU6, which no stagger
 * type describes, become custom layers whose numbers are checked against
 * their closed form. Then the refusals, each naming what is wrong.
 */
#include <glib/gstdio.h>
#include <string.h>

#include "base/json.h"
#include "import/import.h"
#include "model/layer_type.h"
#include "protowire.h"
#include "testutil.h"

typedef struct {
  int64_t params;
  double dense_flops;
} TorchCounts;

/* counts.json's entry for `name`. */
static TorchCounts
torch_counts(const char *name)
{
  g_autofree char *path = st_test_src("tests/data/onnx/counts.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(cJSON) root = st_json_load_file(path, &error);
  g_assert_no_error(error);
  const cJSON *entry = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "networks"), name);
  g_assert_nonnull(entry);
  return (TorchCounts){
    .params = (int64_t)cJSON_GetObjectItem(entry, "params")->valuedouble,
    .dense_flops = cJSON_GetObjectItem(entry, "dense_flops")->valuedouble,
  };
}

static StModel *
import_onnx(const char *relative, const StImportOptions *options, StImportResult *result,
            GError **error)
{
  g_autofree char *path = st_test_src(relative);
  st_import_result_init(result);
  return st_import(st_importer_find("onnx"), path, options, result, error);
}

/* Imports tests/data/onnx/NAME.onnx and checks it against torch's counts. */
static StModel *
import_checked(const char *name, StImportResult *result)
{
  g_autofree char *relative = g_strdup_printf("tests/data/onnx/%s.onnx", name);
  g_autoptr(GError) error = NULL;
  StModel *model = import_onnx(relative, NULL, result, &error);
  g_assert_no_error(error);
  TorchCounts torch = torch_counts(name);
  g_assert_cmpint(result->graph_params, ==, torch.params);
  g_assert_cmpfloat_with_epsilon(result->graph_dense_flops, torch.dense_flops, 0.5);
  g_assert_cmpint(model->params, ==, torch.params);
  /* The layers count the products and element-wise work besides (norms,
   * activations, pooling, the loss); never less than the products. */
  g_assert_cmpfloat(model->fwd_flops, >=, torch.dense_flops * (1 - 1e-12));
  g_assert_cmpfloat(model->fwd_flops, <=, torch.dense_flops * 1.10);
  return model;
}

static void
assert_same_layers(const StModel *a, const StModel *b, gboolean names)
{
  g_assert_cmpint(a->n_layers, ==, b->n_layers);
  for (int i = 0; i < a->n_layers; i++) {
    if (names)
      g_assert_cmpstr(a->layers[i].name, ==, b->layers[i].name);
    g_assert_cmpstr(a->layers[i].signature, ==, b->layers[i].signature);
    g_assert_cmpint(a->layers[i].params, ==, b->layers[i].params);
    g_assert_cmpint(a->layers[i].act_bytes, ==, b->layers[i].act_bytes);
  }
  g_assert_cmpfloat(a->fwd_flops, ==, b->fwd_flops);
}

/* torchvision resnet50: 25,557,032 parameters (torchvision's model table)
 * and 4.09 G multiply-adds at 224 x 224 (its "GFLOPS" column counts
 * multiply-adds): 8.18 GFLOP of products. The import is models/resnet50.json,
 * names included. */
static void
test_resnet50(void)
{
  StImportResult result;
  g_autoptr(StModel) model = import_checked("resnet50", &result);
  g_assert_cmpint(model->params, ==, 25557032);
  g_assert_cmpfloat(result.graph_dense_flops, >, 8.17e9);
  g_assert_cmpfloat(result.graph_dense_flops, <, 8.19e9);
  g_autoptr(StModel) zoo = st_test_model_named("resnet50");
  assert_same_layers(model, zoo, TRUE);
  g_assert_cmpint(result.custom_layers, ==, 0);
  g_assert_cmpuint(result.warnings->len, ==, 0);
  st_import_result_clear(&result);
}

/* torchvision vit_b_16: 86,567,656 parameters and 17.56 G multiply-adds
 * (torchvision's table): 35.13 GFLOP of products. Its attention is torch's
 * MultiheadAttention, laid out [batch x heads, s, s]; its dropouts have p 0.
 * The import is models/vit_b16.json layer for layer (names aside). */
static void
test_vit_b_16(void)
{
  StImportResult result;
  g_autoptr(StModel) model = import_checked("vit_b_16", &result);
  g_assert_cmpint(model->params, ==, 86567656);
  g_assert_cmpfloat(result.graph_dense_flops, >, 35.12e9);
  g_assert_cmpfloat(result.graph_dense_flops, <, 35.14e9);
  g_autoptr(StModel) zoo = st_test_model_named("vit_b16");
  assert_same_layers(model, zoo, FALSE);
  g_assert_cmpint(result.custom_layers, ==, 0);
  g_assert_cmpuint(result.warnings->len, ==, 0);
  st_import_result_clear(&result);
}

/* export.py's TinyGPT, written by hand in stagger's vocabulary: a tied
 * head, two causal pre-LN blocks with dropout. */
static void
test_tiny_gpt(void)
{
  StImportResult result;
  g_autoptr(StModel) model = import_checked("tiny_gpt", &result);
  g_autoptr(StModel) by_hand = st_test_model_parse(
    "{\"name\": \"tiny_gpt\", \"input\": [64], \"layers\": ["
    " {\"name\": \"wte\", \"type\": \"embedding\", \"vocab\": 512, \"dim\": 128},"
    " {\"name\": \"wpe\", \"type\": \"position_embedding\", \"positions\": 64},"
    " {\"name\": \"drop\", \"type\": \"dropout\"},"
    " {\"repeat\": 2, \"layers\": [{\"name\": \"h.{i}\", \"type\": \"transformer_block\","
    "   \"heads\": 4, \"ffn\": 512, \"causal\": true, \"dropout\": true}]},"
    " {\"name\": \"ln_f\", \"type\": \"layernorm\"},"
    " {\"name\": \"lm_head\", \"type\": \"lm_head\", \"vocab\": 512, \"tied\": true},"
    " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}");
  assert_same_layers(model, by_hand, FALSE);
  /* The blocks are transformer blocks, which count only the products: 24
   * s d^2 + 4 s^2 d each (s 64, d 128): the graph's products there. */
  g_assert_cmpfloat(model->layers[3].fwd_flops, ==, 24.0 * 64 * 128 * 128 + 4.0 * 64 * 64 * 128);
  g_assert_cmpint(result.custom_layers, ==, 0);
  st_import_result_clear(&result);
}

/* export.py's TinyLlama, by hand: RMSNorm written out, GQA (4 heads, 2 for
 * keys and values), RoPE, SwiGLU of 344, an untied head. The graph computes
 * its scores whole: dense attention (flash off), whose FLOPs the check
 * held against the graph's products. */
static void
test_tiny_llama(void)
{
  StImportResult result;
  g_autoptr(StModel) model = import_checked("tiny_llama", &result);
  g_autoptr(StModel) by_hand = st_test_model_parse(
    "{\"name\": \"tiny_llama\", \"input\": [64], \"layers\": ["
    " {\"name\": \"embed_tokens\", \"type\": \"embedding\", \"vocab\": 512, \"dim\": 128},"
    " {\"repeat\": 2, \"layers\": [{\"name\": \"layers.{i}\", \"type\": \"llama_block\","
    "   \"heads\": 4, \"kv_heads\": 2, \"ffn\": 344, \"flash\": false}]},"
    " {\"name\": \"norm\", \"type\": \"rmsnorm\"},"
    " {\"name\": \"lm_head\", \"type\": \"lm_head\", \"vocab\": 512},"
    " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}");
  assert_same_layers(model, by_hand, TRUE);
  g_assert_cmpint(result.custom_layers, ==, 0);
  st_import_result_clear(&result);
}

/* The same network at toy size exported with torch.onnx.export's defaults
 * (eval mode, constant folding, weights in the file): the tied head is a
 * transposed copy of the table, an initializer of its own, which the
 * importer recognizes by its bytes and counts once, as torch does. */
static void
test_folded_tie(void)
{
  StImportResult result;
  g_autoptr(StModel) model = import_checked("tiny_gpt_folded", &result);
  const StLayer *head = &model->layers[model->n_layers - 2];
  g_assert_cmpstr(head->type->name, ==, "lm_head");
  g_assert_cmpint(st_layer_attr(head, "tied", 0), ==, 1);
  g_assert_cmpint(head->params, ==, 0);
  g_assert_cmpuint(result.warnings->len, ==, 1);
  g_assert_nonnull(strstr(result.warnings->pdata[0], "is a transposed copy of 'wte.weight'"));
  /* Eval mode: no dropout in the graph, so none in the block. */
  g_assert_cmpint(st_layer_attr(&model->layers[2], "dropout", 1), ==, 0);
  g_assert_cmpint(result.custom_layers, ==, 0);
  st_import_result_clear(&result);
}

static const StLayer *
find_layer(const StModel *model, const char *name)
{
  for (int i = 0; i < model->n_layers; i++)
    if (strcmp(model->layers[i].name, name) == 0)
      return &model->layers[i];
  g_error("no layer '%s'", name);
}

/* torchvision mobilenet_v2: 3,504,872 parameters. ReLU6 (Clip) and the
 * inverted residual blocks have no stagger type: custom layers, announced. */
static void
test_mobilenet_v2(void)
{
  StImportResult result;
  g_autoptr(StModel) model = import_checked("mobilenet_v2", &result);
  g_assert_cmpint(model->params, ==, 3504872);
  g_assert_cmpint(result.custom_layers, >, 0);
  gboolean clip = FALSE;
  for (guint i = 0; i < result.warnings->len; i++)
    clip = clip || strstr(result.warnings->pdata[i], "(Clip)") != NULL;
  g_assert_true(clip);
  /* features.3: 24 -> 144 (1x1) -> 144 (3x3 depthwise) -> 24 (1x1) on
   * 56 x 56, each conv with a batch norm, ReLU6 after the first two, plus
   * the input. Parameters: 24*144 + 144*9 + 144*24 convs, 2 per channel of
   * each norm. FLOPs per sample (p = 3136 positions): products 2 p (24*144
   * + 9*144 + 144*24), norms 7 p (144 + 144 + 24), clips p (144 + 144),
   * the add p 24. */
  const StLayer *block = find_layer(model, "features.3");
  g_assert_cmpstr(block->type->name, ==, "custom");
  g_assert_cmpint(block->params, ==, 24 * 144 + 144 * 9 + 144 * 24 + 2 * (144 + 144 + 24));
  double p = 56 * 56;
  double dense = 2 * p * (24 * 144 + 9 * 144 + 144 * 24);
  g_assert_cmpfloat(block->fwd_flops, ==, dense + 7 * p * 312 + p * 288 + p * 24);
  g_assert_cmpfloat(block->bwd_flops, ==, block->fwd_flops + dense);
  g_assert_cmpint(block->out_shape.n_dims, ==, 3);
  g_assert_cmpint(block->out_shape.dims[0], ==, 24);
  st_import_result_clear(&result);
}

/* ---- options and refusals ------------------------------------------------- */

static void
test_symbolic_dim(void)
{
  StImportResult result;
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) none =
    import_onnx("tests/data/onnx/cases/symbolic_dim.onnx", NULL, &result, &error);
  g_assert_null(none);
  g_assert_nonnull(strstr(error->message, "dim 1 has no size ('seq'): give it with --dim seq"));
  st_import_result_clear(&result);
  g_clear_error(&error);

  g_autoptr(GHashTable) dims = g_hash_table_new(g_str_hash, g_str_equal);
  gint64 seq = 16;
  g_hash_table_insert(dims, "seq", &seq);
  StImportOptions options = {.dims = dims, .no_loss = TRUE};
  g_autoptr(StModel) model =
    import_onnx("tests/data/onnx/cases/symbolic_dim.onnx", &options, &result, &error);
  g_assert_no_error(error);
  /* [16, 8] x [8, 8]: a linear layer, and no loss after it. */
  g_assert_cmpint(model->n_layers, ==, 1);
  g_assert_cmpstr(model->layers[0].type->name, ==, "linear");
  g_assert_cmpint(model->input.dims[0], ==, 16);
  g_assert_cmpfloat(model->fwd_flops, ==, 2.0 * 16 * 8 * 8);
  st_import_result_clear(&result);
}

static void
assert_refused(const char *relative, const char *expected)
{
  StImportResult result;
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) model = import_onnx(relative, NULL, &result, &error);
  g_assert_null(model);
  g_assert_nonnull(error);
  if (strstr(error->message, expected) == NULL)
    g_error("'%s' lacks '%s'", error->message, expected);
  st_import_result_clear(&result);
}

static void
test_refusals(void)
{
  assert_refused("tests/data/onnx/cases/unsupported_op.onnx",
                 "node 'hardmax' (Hardmax): unsupported operator 'Hardmax'");
  assert_refused("tests/data/onnx/cases/two_inputs.onnx", "inputs 'a' and 'b'");
  assert_refused("tests/data/onnx/none.onnx", "No such file");
  assert_refused("tests/data/hf/gpt2.json", "not an ONNX model");
}

/* Every prefix of a real file is refused cleanly or imported, never a
 * crash (the reader is a loader of untrusted files). */
static void
test_truncated(void)
{
  g_autofree char *src = st_test_src("tests/data/onnx/tiny_gpt.onnx");
  gsize length;
  g_autofree char *bytes = st_test_read(src, &length);
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "cut.onnx", NULL);
  int refused = 0;
  for (gsize cut = 0; cut < length; cut += length / 97 + 1) {
    g_assert_true(g_file_set_contents_full(path, bytes, (gssize)cut, G_FILE_SET_CONTENTS_NONE,
                                           0644, NULL));
    StImportResult result;
    st_import_result_init(&result);
    g_autoptr(GError) error = NULL;
    g_autoptr(StModel) model = st_import(st_importer_find("onnx"), path, NULL, &result, &error);
    g_assert_true((model == NULL) == (error != NULL));
    refused += model == NULL;
    st_import_result_clear(&result);
  }
  g_assert_cmpint(refused, >, 90);
}

/* Files with a few bytes changed (a seeded draw of positions and values):
 * each one imports or is refused with an error, never crashes or leaks
 * (run it under the sanitizers to see the latter). */
static void
test_mutated(void)
{
  g_autofree char *src = st_test_src("tests/data/onnx/tiny_gpt.onnx");
  gsize length;
  g_autofree char *bytes = st_test_read(src, &length);
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "mutated.onnx", NULL);
  g_autoptr(GRand) rand = g_rand_new_with_seed(12);
  int refused = 0, imported = 0;
  for (int round = 0; round < 400; round++) {
    g_autofree char *copy = g_memdup2(bytes, length);
    int changes = g_rand_int_range(rand, 1, 5);
    for (int c = 0; c < changes; c++)
      copy[g_rand_int_range(rand, 0, (gint32)length)] = (char)g_rand_int_range(rand, 0, 256);
    g_assert_true(g_file_set_contents_full(path, copy, (gssize)length,
                                           G_FILE_SET_CONTENTS_NONE, 0644, NULL));
    StImportResult result;
    st_import_result_init(&result);
    g_autoptr(GError) error = NULL;
    g_autoptr(StModel) model = st_import(st_importer_find("onnx"), path, NULL, &result, &error);
    g_assert_true((model == NULL) == (error != NULL));
    if (model == NULL)
      refused++;
    else
      imported++;
    st_import_result_clear(&result);
  }
  g_assert_cmpint(refused, >, 0);
  g_assert_cmpint(imported, >, 0);
}

/* ---- a graph written here, in protobuf's wire format ------------------------ */

/* A [1, 8] input times a weight passed through `chain` Identity nodes
 * (onnx.proto's field numbers). */
static GByteArray *
identity_chain(int chain)
{
  GByteArray *graph = g_byte_array_new();
  char name[32], next[32];
  for (int i = 0; i < chain; i++) {
    GByteArray *node = g_byte_array_new();
    g_snprintf(name, sizeof(name), "w%d", i);
    g_snprintf(next, sizeof(next), "w%d", i + 1);
    st_pb_string(node, 1, name);
    st_pb_string(node, 2, next);
    st_pb_string(node, 4, "Identity");
    st_pb_message(graph, 1, node);
  }
  GByteArray *matmul = g_byte_array_new();
  st_pb_string(matmul, 1, "x");
  st_pb_string(matmul, 1, next);
  st_pb_string(matmul, 2, "y");
  st_pb_string(matmul, 4, "MatMul");
  st_pb_message(graph, 1, matmul);
  GByteArray *weight = g_byte_array_new(); /* TensorProto: dims, type, name, raw data */
  static const float zeros[64] = {0};
  st_pb_int(weight, 1, 8);
  st_pb_int(weight, 1, 8);
  st_pb_int(weight, 2, 1);
  st_pb_string(weight, 8, "w0");
  st_pb_bytes(weight, 9, zeros, sizeof(zeros));
  st_pb_message(graph, 5, weight);
  GByteArray *dims = g_byte_array_new(), *shape = g_byte_array_new();
  GByteArray *tensor = g_byte_array_new(), *type = g_byte_array_new();
  GByteArray *input = g_byte_array_new(), *d0 = g_byte_array_new(), *d1 = g_byte_array_new();
  st_pb_int(d0, 1, 1);
  st_pb_int(d1, 1, 8);
  st_pb_message(dims, 1, d0);
  st_pb_message(dims, 1, d1);
  g_byte_array_append(shape, dims->data, dims->len);
  g_byte_array_unref(dims);
  st_pb_int(tensor, 1, 1);
  st_pb_message(tensor, 2, shape);
  st_pb_message(type, 1, tensor);
  st_pb_string(input, 1, "x");
  st_pb_message(input, 2, type);
  st_pb_message(graph, 11, input);
  GByteArray *output = g_byte_array_new();
  st_pb_string(output, 1, "y");
  st_pb_message(graph, 12, output);
  GByteArray *model = g_byte_array_new(), *opset = g_byte_array_new();
  st_pb_int(model, 1, 8);
  st_pb_message(model, 7, graph);
  st_pb_int(opset, 2, 17);
  st_pb_message(model, 8, opset);
  return model;
}

/* A weight behind 200,000 Identity nodes: followed without recursion, so
 * no stack runs out; the product is still a linear layer of 64 weights. */
static void
test_long_chain(void)
{
  g_autoptr(GByteArray) model = identity_chain(200000);
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "chain.onnx", NULL);
  g_assert_true(g_file_set_contents_full(path, (const char *)model->data, model->len,
                                         G_FILE_SET_CONTENTS_NONE, 0644, NULL));
  StImportResult result;
  st_import_result_init(&result);
  g_autoptr(GError) error = NULL;
  StImportOptions options = {.no_loss = TRUE};
  g_autoptr(StModel) imported = st_import(st_importer_find("onnx"), path, &options, &result,
                                          &error);
  g_assert_no_error(error);
  g_assert_cmpint(imported->params, ==, 64);
  g_assert_cmpstr(imported->layers[0].type->name, ==, "linear");
  st_import_result_clear(&result);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/import/onnx/resnet50", test_resnet50);
  g_test_add_func("/import/onnx/vit-b-16", test_vit_b_16);
  g_test_add_func("/import/onnx/tiny-gpt", test_tiny_gpt);
  g_test_add_func("/import/onnx/tiny-llama", test_tiny_llama);
  g_test_add_func("/import/onnx/folded-tie", test_folded_tie);
  g_test_add_func("/import/onnx/mobilenet-v2", test_mobilenet_v2);
  g_test_add_func("/import/onnx/symbolic-dim", test_symbolic_dim);
  g_test_add_func("/import/onnx/refusals", test_refusals);
  g_test_add_func("/import/onnx/truncated", test_truncated);
  g_test_add_func("/import/onnx/mutated", test_mutated);
  g_test_add_func("/import/onnx/long-chain", test_long_chain);
  return g_test_run();
}
