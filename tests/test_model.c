/* test_model.c: the model loader, the layer types and the shipped models.
 *
 * Parameter counts are the published ones (torchvision's model cards, the
 * GPT papers); FLOP and byte examples state their closed form first. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "model/layer_type.h"
#include "model/model.h"
#include "testutil.h"

static StModel *
load_shipped(const char *name)
{
  g_autofree char *relative = g_strdup_printf("models/%s.json", name);
  g_autofree char *path = st_test_src(relative);
  g_autoptr(GError) error = NULL;
  StModel *model = st_model_load(path, &error);
  g_assert_no_error(error);
  g_assert_nonnull(model);
  return model;
}

/* A model from inline JSON text. */
static StModel *
parse_model(const char *text, GError **error)
{
  g_autoptr(cJSON) root = st_json_parse(text, strlen(text), "<inline>", error);
  if (root == NULL)
    return NULL;
  return st_model_from_json(root, "<inline>", error);
}

static const StLayer *
find_layer(const StModel *model, const char *name)
{
  for (int i = 0; i < model->n_layers; i++)
    if (strcmp(model->layers[i].name, name) == 0)
      return &model->layers[i];
  g_assert_not_reached();
  return NULL;
}

/* ---- published parameter counts ---------------------------------------- */

typedef struct {
  const char *name;
  int64_t params;
} Published;

static const Published PUBLISHED[] = {
  {"resnet18", 11689512},   {"resnet50", 25557032},
  {"vgg16", 138357544},     {"vgg19", 143667240},
  {"wide_resnet101_2", 126886696}, {"vit_b16", 86567656},
  {"gpt2-124m", 124439808}, {"mlp", 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10},
};

static void
test_params(gconstpointer data)
{
  const Published *p = data;
  g_autoptr(StModel) model = load_shipped(p->name);
  g_assert_cmpint(model->params, ==, p->params);
  int64_t sum = 0;
  for (int i = 0; i < model->n_layers; i++)
    sum += model->layers[i].params;
  g_assert_cmpint(sum, ==, model->params);
}

/* GPT-3 (Brown et al. 2020, table 2.1), vocab V = 50257, context n = 2048,
 * tied LM head, d_ff = 4d: params = 12 L d^2 + 13 L d + (V + n) d + 2 d
 * (blocks, token and position tables, final LayerNorm), within 5% of the
 * nominal size. */
typedef struct {
  const char *name;
  int64_t layers, d, heads;
  double nominal;
} Gpt3;

static const Gpt3 GPT3[] = {
  {"gpt3-1.3b", 24, 2048, 16, 1.3e9},
  {"gpt3-2.7b", 32, 2560, 32, 2.7e9},
  {"gpt3-6.7b", 32, 4096, 32, 6.7e9},
  {"gpt3-13b", 40, 5120, 40, 13.0e9},
};

static void
test_gpt3(gconstpointer data)
{
  const Gpt3 *g = data;
  g_autoptr(StModel) model = load_shipped(g->name);
  int64_t L = g->layers, d = g->d;
  int64_t expected = 12 * L * d * d + 13 * L * d + (50257 + 2048) * d + 2 * d;
  g_assert_cmpint(model->params, ==, expected);
  g_assert_cmpfloat(fabs((double)model->params - g->nominal) / g->nominal, <, 0.05);
  const StLayer *block = find_layer(model, "h.0");
  g_assert_cmpint(st_layer_attr(block, "heads", 0), ==, g->heads);
  g_assert_cmpint(block->params, ==, 12 * d * d + 13 * d);
  g_assert_cmpint(find_layer(model, "lm_head")->params, ==, 0);
}

/* ---- worked examples ----------------------------------------------------- */

/* linear, in = 784, out = 512, one token: params = 784*512 + 512 = 401,920;
 * fwd = 2*in*out = 802,816 FLOPs; bwd = 2 x fwd; keeps its input 784 x 4 B.
 * On [197, 768] tokens to 3072: fwd = 2*768*3072*197 = 929,562,624. */
static void
test_flops_linear(void)
{
  g_autoptr(StModel) mlp = load_shipped("mlp");
  const StLayer *fc1 = find_layer(mlp, "fc1");
  g_assert_cmpint(fc1->params, ==, 401920);
  g_assert_cmpfloat(fc1->fwd_flops, ==, 802816.0);
  g_assert_cmpfloat(fc1->bwd_flops, ==, 2 * 802816.0);
  g_assert_cmpint(fc1->act_bytes, ==, 784 * 4);
  g_assert_cmpint(fc1->in_bytes, ==, 784 * 4);
  g_assert_cmpint(fc1->out_bytes, ==, 512 * 4);

  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) tokens = parse_model(
    "{\"name\": \"t\", \"input\": [197, 768], \"layers\": ["
    " {\"name\": \"fc\", \"type\": \"linear\", \"out_features\": 3072, \"bias\": false}]}",
    &error);
  g_assert_no_error(error);
  const StLayer *fc = &tokens->layers[0];
  g_assert_cmpfloat(fc->fwd_flops, ==, 929562624.0);
  g_assert_cmpint(fc->params, ==, 768 * 3072);
  g_assert_cmpint(fc->out_shape.n_dims, ==, 2);
  g_assert_cmpint(fc->out_shape.dims[0], ==, 197);
  g_assert_cmpint(fc->out_shape.dims[1], ==, 3072);
  /* generic roofline traffic: fwd = in + out + act, bwd = 2 act + in + out */
  g_assert_cmpfloat(fc->fwd_io_bytes, ==, (double)(fc->in_bytes + fc->out_bytes + fc->act_bytes));
  g_assert_cmpfloat(fc->bwd_io_bytes, ==,
                    (double)(2 * fc->act_bytes + fc->in_bytes + fc->out_bytes));
}

/* ResNet-50's conv1, 7x7 stride 2 padding 3, 3 -> 64 channels on 224x224:
 * Hout = (224 + 6 - 7) / 2 + 1 = 112; params = 7*7*3*64 = 9,408;
 * fwd = 2 * (k*k*Cin/groups) * Cout * Hout * Wout = 2*147*64*112*112
 *     = 236,027,904; bwd = 2 x fwd; keeps its input 3*224*224*4 B. */
static void
test_flops_conv2d(void)
{
  g_autoptr(StModel) model = load_shipped("resnet50");
  const StLayer *conv1 = &model->layers[0];
  g_assert_cmpstr(conv1->name, ==, "conv1");
  g_assert_cmpint(conv1->params, ==, 9408);
  g_assert_cmpfloat(conv1->fwd_flops, ==, 236027904.0);
  g_assert_cmpfloat(conv1->bwd_flops, ==, 2 * 236027904.0);
  g_assert_cmpint(conv1->act_bytes, ==, 3 * 224 * 224 * 4);
  g_autofree char *out = st_shape_format(&conv1->out_shape);
  g_assert_cmpstr(out, ==, "[64,112,112]");
  g_assert_cmpstr(conv1->signature, ==,
                  "conv2d{bias=0,groups=1,kernel=7,out_channels=64,padding=3,stride=2}"
                  "[3,224,224]");

  /* Depthwise: groups = channels = 32, 3x3 on 32x10x10, padding 1:
   * fwd = 2 * (9 * 32/32) * 32 * 10 * 10 = 57,600; params = 9*32 + 32. */
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) dw = parse_model(
    "{\"name\": \"dw\", \"input\": [32, 10, 10], \"layers\": ["
    " {\"name\": \"dw\", \"type\": \"conv2d\", \"out_channels\": 32, \"kernel\": 3,"
    "  \"padding\": 1, \"groups\": 32}]}",
    &error);
  g_assert_no_error(error);
  g_assert_cmpfloat(dw->layers[0].fwd_flops, ==, 57600.0);
  g_assert_cmpint(dw->layers[0].params, ==, 9 * 32 + 32);
}

/* GPT-2's block, s = 1024 tokens, d = 768, a = 12 heads, f = 4d, fp32:
 * params = 12 d^2 + 13 d = 7,087,872;
 * fwd = 24 s d^2 + 4 s^2 d (QK^T and AV included, causal not halved);
 * kept with dropout = 4 B x (8sd + 2sf + 2as^2) + masks (as^2 + 2sd) B. */
static void
test_flops_transformer(void)
{
  g_autoptr(StModel) model = load_shipped("gpt2-124m");
  const StLayer *h = find_layer(model, "h.0");
  double s = 1024, d = 768, a = 12, f = 4 * 768;
  g_assert_cmpint(h->params, ==, 7087872);
  g_assert_cmpfloat(h->fwd_flops, ==, 24 * s * d * d + 4 * s * s * d);
  g_assert_cmpfloat(h->bwd_flops, ==, 2 * h->fwd_flops);
  double kept = 4 * (8 * s * d + 2 * s * f + 2 * a * s * s) + (a * s * s + 2 * s * d);
  g_assert_cmpfloat((double)h->act_bytes, ==, kept);
  g_assert_cmpint(st_layer_attr(h, "ffn", 0), ==, 3072); /* 0 resolved to 4d */
  g_assert_cmpint(st_layer_attr(h, "causal", 0), ==, 1);
}

/* Whole-model forward FLOPs against the multiply-accumulate counts that
 * torchvision publishes (x2): ResNet-50 4.09 GMAC, VGG-16 15.47, ViT-B/16
 * 17.56. Ours adds norms, pools and activations to the convolutions. */
static void
test_flops_totals(void)
{
  static const struct {
    const char *name;
    double gmac;
  } cases[] = {{"resnet50", 4.09}, {"vgg16", 15.47}, {"vit_b16", 17.56}};
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(StModel) model = load_shipped(cases[i].name);
    double published = 2e9 * cases[i].gmac;
    g_assert_cmpfloat(fabs(model->fwd_flops - published) / published, <, 0.03);
    g_assert_cmpfloat(model->bwd_flops, >, 1.9 * model->fwd_flops);
  }
}

/* MLP 784-512-512-10, fp32. Kept: fc1's input 784, relu1's output 512
 * (fc2 keeps the same tensor: not counted twice), relu2's output 512, the
 * loss's log-probabilities 10: (784 + 512 + 512 + 10) x 4 = 7,272 bytes. */
static void
test_act_shared(void)
{
  g_autoptr(StModel) mlp = load_shipped("mlp");
  g_assert_cmpint(mlp->act_bytes, ==, 7272);
  g_assert_cmpint(find_layer(mlp, "relu1")->act_bytes, ==, 512 * 4);
  g_assert_cmpint(find_layer(mlp, "fc2")->act_bytes, ==, 0);
  g_assert_cmpint(find_layer(mlp, "fc2")->in_bytes, ==, 512 * 4);

  /* ResNet-18's basic blocks keep their output; the next block's input is
   * that tensor. layer1.1 on [64,56,56]: conv1 out, relu out, conv2 out,
   * final relu out = 4 maps of 64*56*56, its input not counted again. */
  g_autoptr(StModel) r18 = load_shipped("resnet18");
  g_assert_cmpint(find_layer(r18, "layer1.1")->act_bytes, ==, 4 * 64 * 56 * 56 * 4);
  /* layer1.0 follows maxpool, which does not keep its output: input counted. */
  g_assert_cmpint(find_layer(r18, "layer1.0")->act_bytes, ==, 5 * 64 * 56 * 56 * 4);
}

/* ---- round trip, copy, repeat, custom ------------------------------------ */

static void
assert_models_equal(const StModel *a, const StModel *b)
{
  g_assert_cmpstr(a->name, ==, b->name);
  g_assert_cmpint(a->dtype, ==, b->dtype);
  g_assert_true(st_shape_equal(&a->input, &b->input));
  g_assert_cmpint(a->n_layers, ==, b->n_layers);
  for (int i = 0; i < a->n_layers; i++) {
    const StLayer *x = &a->layers[i], *y = &b->layers[i];
    g_assert_cmpstr(x->name, ==, y->name);
    g_assert_true(x->type == y->type);
    g_assert_cmpint(x->n_attrs, ==, y->n_attrs);
    for (int k = 0; k < x->n_attrs; k++) {
      g_assert_cmpstr(x->attrs[k].key, ==, y->attrs[k].key);
      g_assert_cmpint(x->attrs[k].value, ==, y->attrs[k].value);
    }
    g_assert_true(st_shape_equal(&x->in_shape, &y->in_shape));
    g_assert_true(st_shape_equal(&x->out_shape, &y->out_shape));
    g_assert_cmpstr(x->signature, ==, y->signature);
    g_assert_cmpint(x->params, ==, y->params);
    g_assert_cmpfloat(x->fwd_flops, ==, y->fwd_flops);
    g_assert_cmpfloat(x->bwd_flops, ==, y->bwd_flops);
    g_assert_cmpint(x->act_bytes, ==, y->act_bytes);
    g_assert_cmpint(x->out_bytes, ==, y->out_bytes);
    g_assert_cmpint(x->in_bytes, ==, y->in_bytes);
    g_assert_cmpfloat(x->fwd_io_bytes, ==, y->fwd_io_bytes);
    g_assert_cmpfloat(x->bwd_io_bytes, ==, y->bwd_io_bytes);
  }
  g_assert_cmpint(a->params, ==, b->params);
  g_assert_cmpfloat(a->fwd_flops, ==, b->fwd_flops);
  g_assert_cmpfloat(a->bwd_flops, ==, b->bwd_flops);
  g_assert_cmpint(a->act_bytes, ==, b->act_bytes);
}

static void
test_roundtrip(gconstpointer data)
{
  const char *name = data;
  g_autoptr(StModel) model = load_shipped(name);
  g_autoptr(cJSON) json = st_model_to_json(model);
  /* Through text, as `stagger model show --json` hands it on. */
  g_autofree char *text = cJSON_Print(json);
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) back = parse_model(text, &error);
  g_assert_no_error(error);
  assert_models_equal(model, back);
}

static void
test_copy(void)
{
  g_autoptr(StModel) model = load_shipped("vit_b16");
  g_autoptr(StModel) copy = st_model_copy(model);
  assert_models_equal(model, copy);
  g_assert_cmpstr(copy->path, ==, model->path);
  g_assert_true(copy->layers[0].name != model->layers[0].name);
  st_model_free(NULL);
}

/* resnet50: conv1, bn1, relu, maxpool, then 3 + 4 + 6 + 3 bottlenecks named
 * as torchvision's modules: layer3.5 is the 4 + 3 + 4 + 5 = 16th layer. */
static void
test_repeat(void)
{
  g_autoptr(StModel) model = load_shipped("resnet50");
  g_assert_cmpint(model->n_layers, ==, 4 + 16 + 4);
  g_assert_cmpstr(model->layers[16].name, ==, "layer3.5");
  g_assert_cmpint(st_layer_attr(&model->layers[16], "planes", 0), ==, 256);
  g_assert_cmpint(st_layer_attr(&model->layers[16], "stride", 0), ==, 1);
  g_assert_cmpint(st_layer_attr(&model->layers[16], "missing", -7), ==, -7);

  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) rep = parse_model(
    "{\"name\": \"r\", \"input\": [8], \"layers\": [{\"repeat\": 3, \"from\": 5, \"layers\": ["
    " {\"name\": \"fc{i}\", \"type\": \"linear\", \"out_features\": 8},"
    " {\"name\": \"act{i}\", \"type\": \"relu\"}]}]}",
    &error);
  g_assert_no_error(error);
  g_assert_cmpint(rep->n_layers, ==, 6);
  g_assert_cmpstr(rep->layers[0].name, ==, "fc5");
  g_assert_cmpstr(rep->layers[5].name, ==, "act7");
}

/* custom layers take their numbers as given; the output is a vector of
 * ceil(output_bytes / 4) fp32 elements; booleans in attrs are 0/1. */
static void
test_custom(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) model = parse_model(
    "{\"name\": \"c\", \"input\": [16], \"dtype\": \"fp32\", \"layers\": ["
    " {\"name\": \"blob\", \"type\": \"custom\", \"params\": 1000, \"fwd_flops\": 5000000,"
    "  \"bwd_flops\": 10000000, \"activation_bytes\": 4096, \"output_bytes\": 2050},"
    " {\"name\": \"fc\", \"type\": \"linear\", \"out_features\": 2, \"bias\": true}]}",
    &error);
  g_assert_no_error(error);
  const StLayer *blob = &model->layers[0];
  g_assert_cmpint(blob->params, ==, 1000);
  g_assert_cmpfloat(blob->fwd_flops, ==, 5e6);
  g_assert_cmpfloat(blob->bwd_flops, ==, 1e7);
  g_assert_cmpint(blob->act_bytes, ==, 4096);
  g_assert_cmpint(blob->out_bytes, ==, 2050);
  g_assert_cmpint(blob->out_shape.dims[0], ==, 513);
  g_assert_cmpint(st_layer_attr(&model->layers[1], "bias", -1), ==, 1);
  g_assert_cmpint(model->layers[1].params, ==, 513 * 2 + 2);
  g_assert_cmpint(model->params, ==, 1000 + 513 * 2 + 2);
}

/* Given dim0.. a custom layer's output has that shape (so a convolution
 * can follow it), and output_bytes must be its elements at the dtype. */
static void
test_custom_shape(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) model = parse_model(
    "{\"name\": \"c\", \"input\": [3, 8, 8], \"dtype\": \"bf16\", \"layers\": ["
    " {\"name\": \"blob\", \"type\": \"custom\", \"fwd_flops\": 0, \"bwd_flops\": 0,"
    "  \"output_bytes\": 1024, \"dim0\": 8, \"dim1\": 8, \"dim2\": 8},"
    " {\"name\": \"conv\", \"type\": \"conv2d\", \"out_channels\": 4, \"kernel\": 1}]}",
    &error);
  g_assert_no_error(error);
  g_assert_cmpint(model->layers[0].out_shape.n_dims, ==, 3);
  g_assert_cmpint(model->layers[1].params, ==, 8 * 4 + 4);
  g_autoptr(StModel) wrong = parse_model(
    "{\"name\": \"c\", \"input\": [16], \"layers\": ["
    " {\"name\": \"blob\", \"type\": \"custom\", \"fwd_flops\": 0, \"bwd_flops\": 0,"
    "  \"output_bytes\": 100, \"dim0\": 8}]}",
    &error);
  g_assert_null(wrong);
  g_assert_nonnull(strstr(error->message, "key 'output_bytes': 100 is not the 8 elements"));
  g_clear_error(&error);
  g_autoptr(StModel) gap = parse_model(
    "{\"name\": \"c\", \"input\": [16], \"layers\": ["
    " {\"name\": \"blob\", \"type\": \"custom\", \"fwd_flops\": 0, \"bwd_flops\": 0,"
    "  \"output_bytes\": 32, \"dim0\": 8, \"dim2\": 1}]}",
    &error);
  g_assert_null(gap);
  g_assert_nonnull(strstr(error->message, "key 'dim2': given without dim1"));
}

/* Mixed precision keeps activations in 16 bits: half the fp32 bytes. */
static void
test_bytes_as(void)
{
  g_autoptr(StModel) model = load_shipped("gpt2-124m");
  g_assert_cmpint(model->dtype, ==, ST_DTYPE_FP32);
  g_assert_cmpint(st_model_bytes_as(model, 4096, ST_DTYPE_BF16), ==, 2048);
  g_assert_cmpint(st_model_bytes_as(model, 4096, ST_DTYPE_FP32), ==, 4096);
}

static void
test_print(void)
{
  g_autoptr(StModel) model = load_shipped("resnet18");
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "table.txt", NULL);
  FILE *out = fopen(path, "w");
  g_assert_nonnull(out);
  st_model_print(model, out);
  fclose(out);
  g_autofree char *text = st_test_read(path, NULL);
  g_assert_nonnull(strstr(text, "11,689,512"));
  g_assert_nonnull(strstr(text, "layer4.1"));
  g_assert_nonnull(strstr(text, "[3,224,224] -> [64,112,112]"));
  g_assert_nonnull(strstr(text, "GFLOP"));
}

static void
test_types(void)
{
  int n = 0;
  for (const StLayerType *const *t = st_layer_types(); *t != NULL; t++, n++) {
    g_assert_true(st_layer_type_find((*t)->name) == *t);
    g_assert_true((*t)->summary != NULL && (*t)->summary[0] != '\0');
    g_assert_nonnull((*t)->derive);
    for (const StAttrSpec *a = (*t)->attrs; a->key != NULL; a++) {
      g_assert_true(a->help != NULL && a->help[0] != '\0');
      if (!a->required)
        g_assert_cmpint(a->fallback, >=, a->min);
      for (const StAttrSpec *b = a + 1; b->key != NULL; b++)
        g_assert_cmpstr(a->key, !=, b->key);
    }
  }
  g_assert_cmpint(n, >=, 20);
  g_assert_null(st_layer_type_find("conv3d"));
  g_assert_nonnull(st_layer_type_find("custom"));
}

/* ---- bad input ------------------------------------------------------------ */

typedef struct {
  const char *file;     /* tests/data/models/<file> */
  const char *expect[3]; /* substrings of the message besides the file name */
} BadCase;

static const BadCase BAD[] = {
  {"bad_unknown_key.json", {"layer 0 'conv1'", "unknown key 'kernal'"}},
  {"bad_missing_attr.json", {"layer 1 'conv2'", "key 'kernel'", "missing"}},
  {"bad_negative.json", {"layer 1 'fc'", "key 'out_features'", "-5"}},
  {"bad_wrong_type.json", {"layer 0 'conv1'", "key 'kernel'", "expected an integer"}},
  {"bad_unknown_type.json", {"layer 0 'conv1'", "key 'type'", "conv3d"}},
  {"bad_malformed.json", {"malformed JSON"}},
  {"bad_empty_layers.json", {"key 'layers'", "empty"}},
  {"bad_shape.json", {"layer 0 'conv1'", "input shape [784]", "[C,H,W]"}},
  {"bad_duplicate_name.json", {"layer 2 'fc'", "duplicate", "layer 0"}},
  {"bad_repeat.json", {"layers[1] (repeat)", "key 'repeat'"}},
  {"bad_nested_repeat.json", {"layers[0] (repeat)", "key 'repeat'", "nested"}},
  {"bad_flag.json", {"layer 0 'fc'", "key 'bias'"}},
  {"bad_input.json", {"key 'input'"}},
  {"bad_dtype.json", {"key 'dtype'", "fp8"}},
  {"bad_heads.json", {"layer 2 'block'", "key 'heads'", "768"}},
  {"bad_missing_name.json", {"layer 1:", "key 'name'"}},
  {"bad_kernel_too_large.json", {"layer 1 'conv2'", "key 'kernel'"}},
  {"bad_missing_type.json", {"layer 0 'x'", "key 'type'"}},
  {"bad_layer_not_object.json", {"layers[1]", "object"}},
  {"bad_top_key.json", {"unknown key 'layer'"}},
};

static void
test_bad(gconstpointer data)
{
  const BadCase *c = data;
  g_autofree char *relative = g_build_filename("tests/data/models", c->file, NULL);
  g_autofree char *path = st_test_src(relative);
  g_assert_true(g_file_test(path, G_FILE_TEST_EXISTS));
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) model = st_model_load(path, &error);
  g_assert_null(model);
  g_assert_nonnull(error);
  g_assert_true(error->domain == ST_MODEL_ERROR);
  if (g_test_verbose())
    g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, c->file));
  for (int i = 0; i < 3 && c->expect[i] != NULL; i++) {
    if (strstr(error->message, c->expect[i]) == NULL)
      g_error("message \"%s\" lacks \"%s\"", error->message, c->expect[i]);
  }
}

static void
test_bad_missing_file(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) model = st_model_load("no/such/model.json", &error);
  g_assert_null(model);
  g_assert_error(error, ST_MODEL_ERROR, ST_ERROR_IO);
  g_assert_nonnull(strstr(error->message, "no/such/model.json"));
}

/* Loads `text` and checks the contract: a model or an error, never both or
 * neither, and an error names the origin. Returns TRUE when it loaded. */
static gboolean
loads_or_fails_cleanly(const char *text)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) model = parse_model(text, &error);
  g_assert_true((model == NULL) != (error == NULL));
  if (model == NULL)
    g_assert_nonnull(strstr(error->message, "<inline>"));
  return model != NULL;
}

/* Every attr of every layer of three shipped models, replaced in turn by odd
 * values, loads or fails with an error: never a crash. */
static void
test_bad_fuzz(void)
{
  static const char *const values[] = {"0", "1", "-1", "2.5", "65536", "1e7", "1e300",
                                       "\"x\"", "true", "null", "[]", "{}"};
  static const char *const names[] = {"resnet50", "vit_b16", "gpt2-124m"};
  int failures = 0, loads = 0;
  for (gsize m = 0; m < G_N_ELEMENTS(names); m++) {
    g_autoptr(StModel) model = load_shipped(names[m]);
    g_autoptr(cJSON) json = st_model_to_json(model);
    cJSON *layer;
    cJSON_ArrayForEach(layer, cJSON_GetObjectItem(json, "layers"))
    {
      for (int k = 0; k < cJSON_GetArraySize(layer); k++) {
        g_autofree char *key = g_strdup(cJSON_GetArrayItem(layer, k)->string);
        if (strcmp(key, "derived") == 0)
          continue;
        for (gsize v = 0; v < G_N_ELEMENTS(values); v++) {
          /* Swap the value in, print, swap the original back. */
          cJSON *original = cJSON_Duplicate(cJSON_GetObjectItem(layer, key), TRUE);
          cJSON_ReplaceItemInObjectCaseSensitive(layer, key, cJSON_Parse(values[v]));
          g_autofree char *text = cJSON_PrintUnformatted(json);
          cJSON_ReplaceItemInObjectCaseSensitive(layer, key, original);
          if (loads_or_fails_cleanly(text))
            loads++;
          else
            failures++;
        }
      }
    }
  }
  g_assert_cmpint(failures, >, 0);
  g_assert_cmpint(loads, >, 0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(PUBLISHED); i++) {
    g_autofree char *path = g_strdup_printf("/model/params/%s", PUBLISHED[i].name);
    g_test_add_data_func(path, &PUBLISHED[i], test_params);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(GPT3); i++) {
    g_autofree char *path = g_strdup_printf("/model/params/%s", GPT3[i].name);
    g_test_add_data_func(path, &GPT3[i], test_gpt3);
  }
  g_test_add_func("/model/flops/linear", test_flops_linear);
  g_test_add_func("/model/flops/conv2d", test_flops_conv2d);
  g_test_add_func("/model/flops/transformer", test_flops_transformer);
  g_test_add_func("/model/flops/totals", test_flops_totals);
  g_test_add_func("/model/act/shared-once", test_act_shared);
  static const char *const shipped[] = {"resnet18", "resnet50", "vgg16", "vgg19",
                                        "wide_resnet101_2", "vit_b16", "gpt2-124m",
                                        "gpt3-1.3b", "gpt3-2.7b", "gpt3-6.7b", "gpt3-13b",
                                        "mlp"};
  for (gsize i = 0; i < G_N_ELEMENTS(shipped); i++) {
    g_autofree char *path = g_strdup_printf("/model/roundtrip/%s", shipped[i]);
    g_test_add_data_func(path, shipped[i], test_roundtrip);
  }
  g_test_add_func("/model/copy", test_copy);
  g_test_add_func("/model/repeat", test_repeat);
  g_test_add_func("/model/custom", test_custom);
  g_test_add_func("/model/custom-shape", test_custom_shape);
  g_test_add_func("/model/bytes-as", test_bytes_as);
  g_test_add_func("/model/print", test_print);
  g_test_add_func("/model/types", test_types);
  for (gsize i = 0; i < G_N_ELEMENTS(BAD); i++) {
    g_autofree char *stem = g_strndup(BAD[i].file, strlen(BAD[i].file) - strlen(".json"));
    g_autofree char *path = g_strdup_printf("/model/bad/%s", stem + strlen("bad_"));
    g_test_add_data_func(path, &BAD[i], test_bad);
  }
  g_test_add_func("/model/bad/missing-file", test_bad_missing_file);
  g_test_add_func("/model/bad/fuzz", test_bad_fuzz);
  return g_test_run();
}
