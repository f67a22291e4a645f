/* test_model_inputs.c: models whose layers name their inputs (branches
 * joined by concat, model_inputs.h), conv2d_rect, and the Inception-v3 file
 * built from them.
 */
#include <string.h>

#include "base/json.h"
#include "model/layer_type.h"
#include "model/model.h"
#include "testutil.h"

static StModel *
parse(const char *text, GError **error)
{
  g_autoptr(cJSON) root = cJSON_Parse(text);
  g_assert_nonnull(root);
  return st_model_from_json(root, "test", error);
}

static const StLayer *
layer(const StModel *m, const char *name)
{
  for (int i = 0; i < m->n_layers; i++)
    if (strcmp(m->layers[i].name, name) == 0)
      return &m->layers[i];
  g_assert_not_reached();
  return NULL;
}

/* A stem, two branches from it (a 1x7 and a 7x1 convolution, no bias) and
 * their concat, on [16, 17, 17]:
 *   each branch: 7 x 16 x 32 = 3584 weights, 2 x 3584 x 17 x 17 FLOP forward;
 *   the concat: [64, 17, 17], no FLOPs, no weights. */
#define BRANCHES                                                                              \
  "{\"name\": \"b\", \"input\": [16, 17, 17], \"layers\": ["                                 \
  "{\"name\": \"stem\", \"type\": \"relu\"},"                                                 \
  "{\"name\": \"a\", \"type\": \"conv2d_rect\", \"out_channels\": 32, \"kernel_h\": 1, "      \
  "\"kernel_w\": 7, \"padding_w\": 3, \"bias\": false},"                                      \
  "{\"name\": \"b\", \"type\": \"conv2d_rect\", \"out_channels\": 32, \"kernel_h\": 7, "      \
  "\"kernel_w\": 1, \"padding_h\": 3, \"bias\": false, \"inputs\": [\"stem\"]},"             \
  "{\"name\": \"cat\", \"type\": \"concat\", \"inputs\": [\"a\", \"b\"]}"

static void
test_branches(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) m = parse(BRANCHES "]}", &error);
  g_assert_no_error(error);
  const StLayer *a = layer(m, "a"), *b = layer(m, "b"), *cat = layer(m, "cat");
  g_assert_cmpint(a->params, ==, 3584);
  g_assert_cmpint(b->params, ==, 3584);
  g_assert_cmpfloat_with_epsilon(a->fwd_flops, 2.0 * 3584 * 17 * 17, 1e-6);
  g_assert_cmpint(b->in_shape.dims[0], ==, 16); /* the stem's output, not a's */
  g_assert_cmpint(cat->in_shape.dims[0], ==, 64);
  g_assert_cmpint(cat->out_shape.dims[1], ==, 17);
  g_assert_cmpfloat(cat->fwd_flops, ==, 0);
  g_assert_true(st_model_has_branches(m));
  int32_t in[ST_LAYER_MAX_INPUTS];
  g_assert_cmpint(st_model_layer_inputs(m, 3, in), ==, 2);
  g_assert_cmpint(in[0], ==, 1);
  g_assert_cmpint(in[1], ==, 2);
  g_assert_cmpint(st_model_layer_inputs(m, 1, in), ==, 1);
  g_assert_cmpint(in[0], ==, 0);
  g_assert_cmpint(st_model_layer_inputs(m, 0, in), ==, 0);
  /* Written and read back: the same inputs, the same numbers. */
  g_autoptr(cJSON) json = st_model_to_json(m);
  g_autoptr(StModel) again = st_model_from_json(json, "again", &error);
  g_assert_no_error(error);
  g_assert_cmpint(again->layers[3].n_inputs, ==, 2);
  g_assert_cmpint(again->layers[2].inputs[0], ==, 0);
  g_assert_cmpint(again->params, ==, m->params);
  g_autoptr(StModel) copy = st_model_copy(m);
  g_assert_cmpint(copy->layers[3].inputs[1], ==, 2);
  g_autoptr(StModel) chain = st_test_model_named("vgg16");
  g_assert_false(st_model_has_branches(chain));
}

static void
test_errors(void)
{
  struct {
    const char *text, *message;
  } cases[] = {
    {BRANCHES ", {\"name\": \"x\", \"type\": \"relu\", \"inputs\": [\"nosuch\"]}]}",
     "'nosuch' is not a layer before this one"},
    {"{\"name\": \"m\", \"input\": [4], \"layers\": ["
     "{\"name\": \"x\", \"type\": \"relu\", \"inputs\": [\"y\"]},"
     "{\"name\": \"y\", \"type\": \"relu\"}]}",
     "'y' is not a layer before this one"},
    {BRANCHES ", {\"name\": \"x\", \"type\": \"relu\", \"inputs\": []}]}", "expected a list"},
    {"{\"name\": \"m\", \"input\": [4, 8, 8], \"layers\": ["
     "{\"name\": \"a\", \"type\": \"relu\"},"
     "{\"name\": \"p\", \"type\": \"maxpool2d\", \"kernel\": 2},"
     "{\"name\": \"cat\", \"type\": \"concat\", \"inputs\": [\"a\", \"p\"]}]}",
     "does not concatenate"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(StModel) m = parse(cases[i].text, &error);
    g_assert_null(m);
    g_assert_error(error, ST_MODEL_ERROR, ST_ERROR_INVALID);
    if (strstr(error->message, cases[i].message) == NULL)
      g_error("case %zu: '%s' lacks '%s'", i, error->message, cases[i].message);
  }
}

/* torchvision's inception_v3(aux_logits=False) has 23,834,568 parameters
 * (27,161,264 with the aux logits, less their 3,326,696); DeepPool's graph
 * (examples/inception.py), which models/inception_v3.json follows, runs each
 * BasicConv2d's convolution alone, so it lacks the batchnorm's weight and
 * bias per output channel of the 94 convolutions. The per-module shapes are
 * the comments of torchvision's forward (N x 256 x 35 x 35 after Mixed_5b,
 * ...). */
static void
test_inception(void)
{
  g_autoptr(StModel) m = st_test_model_named("inception_v3");
  int64_t channels = 0;
  int convs = 0;
  for (int i = 0; i < m->n_layers; i++)
    if (g_str_has_prefix(m->layers[i].type->name, "conv2d")) {
      channels += m->layers[i].out_shape.dims[0];
      convs++;
    }
  g_assert_cmpint(convs, ==, 94);
  g_assert_cmpint(m->params + 2 * channels, ==, 23834568);
  g_assert_cmpint(m->params, ==, 23800136);
  const struct {
    const char *name;
    int64_t c, hw;
  } shapes[] = {
    {"maxpool2", 192, 35},         {"Mixed_5b.concat", 256, 35}, {"Mixed_5c.concat", 288, 35},
    {"Mixed_6a.concat", 768, 17},  {"Mixed_6e.concat", 768, 17}, {"Mixed_7a.concat", 1280, 8},
    {"Mixed_7b.concat", 2048, 8},  {"Mixed_7c.concat", 2048, 8},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(shapes); i++) {
    const StLayer *l = layer(m, shapes[i].name);
    g_assert_cmpint(l->out_shape.dims[0], ==, shapes[i].c);
    g_assert_cmpint(l->out_shape.dims[1], ==, shapes[i].hw);
    g_assert_cmpint(l->out_shape.dims[2], ==, shapes[i].hw);
  }
  /* Derived again (as strategies do, st_model_derive_as): the same graph. */
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) again = st_model_derive_as(m, NULL, 1, FALSE, &error);
  g_assert_no_error(error);
  g_assert_cmpint(again->params, ==, m->params);
  g_assert_cmpint(layer(again, "Mixed_7c.concat")->out_shape.dims[0], ==, 2048);
  g_assert_cmpint(layer(again, "Mixed_7c.concat")->n_inputs, ==, 4);
  /* 126 layers: DeepPool's 125 rows per batch, and the loss. */
  g_assert_cmpint(m->n_layers, ==, 126);
  g_assert_true(st_model_has_branches(m));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/model/inputs/branches", test_branches);
  g_test_add_func("/model/inputs/errors", test_errors);
  g_test_add_func("/model/inputs/inception-v3", test_inception);
  return g_test_run();
}
