/* test_model_build.c: a model built in code (model/model_build.h) is the
 * model its file gives: the same layers, attrs, derived numbers and
 * totals, compared as st_model_to_json writes them; and the builder
 * refuses what the loader refuses, naming the layer and the key. Layer
 * signatures and profile keys, now joined by hand, are printf's text.
 */
#include <string.h>

#include "base/json.h"
#include "model/layer_type.h"
#include "model/model_build.h"
#include "profile/profile_private.h"
#include "testutil.h"

typedef struct {
  const char *name, *type;
  const char *keys[4];
  int64_t values[4];
  int n;
} Layer;

/* The model built from `layers`, and the same as the JSON the loader reads,
 * written by st_model_to_json: equal text. */
static void
assert_same(const char *name, const StShape *input, StDtype dtype, const Layer *layers, int n)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) built = st_model_new(name, input, dtype);
  g_autoptr(cJSON) root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "name", name);
  cJSON_AddStringToObject(root, "dtype", st_dtype_name(dtype));
  cJSON *in = cJSON_AddArrayToObject(root, "input");
  for (int d = 0; d < input->n_dims; d++)
    cJSON_AddItemToArray(in, cJSON_CreateNumber((double)input->dims[d]));
  cJSON *list = cJSON_AddArrayToObject(root, "layers");
  for (int i = 0; i < n; i++) {
    const Layer *l = &layers[i];
    g_assert_true(st_model_add_layer(built, l->name, l->type, l->keys, l->values, l->n, &error));
    g_assert_no_error(error);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", l->name);
    cJSON_AddStringToObject(o, "type", l->type);
    for (int k = 0; k < l->n; k++)
      st_json_add_int(o, l->keys[k], l->values[k]);
    cJSON_AddItemToArray(list, o);
  }
  g_assert_true(st_model_finish(built, &error));
  g_assert_no_error(error);
  g_autoptr(StModel) loaded = st_model_from_json(root, name, &error);
  g_assert_no_error(error);
  g_autoptr(cJSON) a = st_model_to_json(built);
  g_autoptr(cJSON) b = st_model_to_json(loaded);
  g_autofree char *ta = cJSON_Print(a);
  g_autofree char *tb = cJSON_Print(b);
  g_assert_cmpstr(ta, ==, tb);
  g_assert_cmpint(built->n_layers, ==, n);
  for (int i = 0; i < n; i++)
    g_assert_cmpstr(built->layers[i].signature, ==, loaded->layers[i].signature);
}

static void
test_same_as_loaded(void)
{
  /* A Chakra import's model: custom layers, one of no compute. */
  static const Layer custom[] = {
    {"aten::mm", "custom", {"fwd_flops", "bwd_flops", "output_bytes", "fwd_io_bytes"},
     {1000000, 0, 4096, 4096}, 4},
    {"aten::mm #1", "custom", {"fwd_flops", "bwd_flops", "output_bytes", "fwd_io_bytes"},
     {INT64_C(1) << 53, 0, 1, 0}, 4},
    {"(no compute)", "custom", {"fwd_flops", "bwd_flops", "output_bytes"}, {0, 0, 1}, 3},
  };
  assert_same("chakra:et", &(StShape){1, {1}}, ST_DTYPE_FP32, custom, 3);
  /* An MLP; then a convolution with flags and defaults, in fp16. */
  static const Layer mlp[] = {
    {"fc1", "linear", {"out_features"}, {512}, 1},
    {"relu1", "relu", {0}, {0}, 0},
    {"fc2", "linear", {"out_features", "bias"}, {10, 0}, 2},
    {"loss", "softmax_cross_entropy", {0}, {0}, 0},
  };
  assert_same("mlp", &(StShape){1, {784}}, ST_DTYPE_FP32, mlp, 4);
  static const Layer conv[] = {
    {"conv1", "conv2d", {"out_channels", "kernel", "stride", "padding"}, {64, 7, 2, 3}, 4},
    {"bn1", "batchnorm2d", {0}, {0}, 0},
    {"pool", "maxpool2d", {"kernel", "stride"}, {3, 2}, 2},
  };
  assert_same("stem", &(StShape){3, {3, 224, 224}}, ST_DTYPE_FP16, conv, 3);
}

static void
expect_refused(const char *type, const char *const *keys, const int64_t *values, int n,
               const char *pattern)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) m = st_model_new("m", &(StShape){1, {8}}, ST_DTYPE_FP32);
  gboolean ok = st_model_add_layer(m, "x", type, keys, values, n, &error) &&
                st_model_finish(m, &error);
  g_assert_false(ok);
  g_assert_nonnull(error);
  if (!g_pattern_match_simple(pattern, error->message))
    g_error("'%s' does not match '%s'", error->message, pattern);
}

static void
test_refused(void)
{
  static const char *const flops[] = {"fwd_flops", "bwd_flops", "output_bytes"};
  expect_refused("custom", flops, (int64_t[]){-1, 0, 1}, 3,
                 "layer 0 'x': key 'fwd_flops': -1 is out of range [0, 9007199254740992]");
  expect_refused("custom", flops, (int64_t[]){(INT64_C(1) << 53) + 2, 0, 1}, 3,
                 "*key 'fwd_flops': 9007199254740994 is out of range*");
  expect_refused("custom", flops, (int64_t[]){1, 0, 0}, 3,
                 "*key 'output_bytes': 0 is out of range [1, 1125899906842624]");
  expect_refused("custom", flops, (int64_t[]){1, 0}, 2,
                 "layer 0 'x': key 'output_bytes': missing (required by custom)");
  static const char *const odd[] = {"fwd_flops", "bwd_flops", "output_bytes", "colour"};
  expect_refused("custom", odd, (int64_t[]){1, 0, 1, 3}, 4,
                 "layer 0 'x': unknown key 'colour' (not an attr of custom)");
  expect_refused("nonesuch", NULL, NULL, 0, "layer 0 'x': key 'type': unknown layer type*");
  /* A derivation the loader refuses: a custom shape that is not its bytes. */
  static const char *const shaped[] = {"fwd_flops", "bwd_flops", "output_bytes", "dim0"};
  expect_refused("custom", shaped, (int64_t[]){1, 0, 12, 4}, 4,
                 "layer 0 'x': key 'output_bytes': 12 is not the 4 elements*");

  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) empty = st_model_new("m", &(StShape){1, {8}}, ST_DTYPE_FP32);
  g_assert_false(st_model_finish(empty, &error));
  g_assert_nonnull(strstr(error->message, "a model needs at least one layer"));
  g_clear_error(&error);
  g_autoptr(StModel) twice = st_model_new("m", &(StShape){1, {8}}, ST_DTYPE_FP32);
  g_assert_true(st_model_add_layer(twice, "r", "relu", NULL, NULL, 0, &error));
  g_assert_true(st_model_add_layer(twice, "r", "relu", NULL, NULL, 0, &error));
  g_assert_false(st_model_finish(twice, &error));
  g_assert_cmpstr(error->message, ==, "layer 1 'r': duplicate name (also layer 0)");
}

/* A layer's signature as printf wrote it before it was joined by hand
 * (model_load.c): "type{k=v,...}[in shape]" and "/tpT" (+"sp"), "/cpC". */
static char *
printf_signature(const StLayer *layer)
{
  GString *s = g_string_new(layer->type->name);
  g_string_append_c(s, '{');
  for (int i = 0; i < layer->n_attrs; i++) {
    const char *name = st_layer_attr_choice(layer, layer->attrs[i].key);
    if (name != NULL)
      g_string_append_printf(s, "%s%s=%s", i > 0 ? "," : "", layer->attrs[i].key, name);
    else
      g_string_append_printf(s, "%s%s=%" G_GINT64_FORMAT, i > 0 ? "," : "",
                             layer->attrs[i].key, layer->attrs[i].value);
  }
  g_string_append_c(s, '}');
  g_autofree char *shape = st_shape_format(&layer->in_shape);
  g_string_append(s, shape);
  if (layer->tp > 1)
    g_string_append_printf(s, "/tp%d%s", layer->tp, layer->sp ? "sp" : "");
  if (layer->cp > 1)
    g_string_append_printf(s, "/cp%d", layer->cp);
  return g_string_free(s, FALSE);
}

/* Signatures and profile keys carry profile entries from file to file:
 * joined by hand (no printf per layer, per key), they must be the text
 * printf made. Every shipped model, whole and as tensor-parallel and
 * context-parallel ranks; keys with negative and wide numbers. */
static void
test_same_text_as_printf(void)
{
  g_autofree char *dir = st_test_src("models");
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  g_assert_nonnull(d);
  const char *file;
  int layers = 0;
  while ((file = g_dir_read_name(d)) != NULL) {
    if (!g_str_has_suffix(file, ".json"))
      continue;
    g_autofree char *path = g_build_filename(dir, file, NULL);
    g_autoptr(StModel) m = st_model_load(path, NULL);
    if (m == NULL)
      continue; /* not a model (a cluster folder's neighbour) */
    g_autoptr(StModel) tp = st_model_derive_as(m, NULL, 2, TRUE, NULL);
    const StModel *each[] = {m, tp};
    for (int k = 0; k < 2; k++)
      for (int i = 0; each[k] != NULL && i < each[k]->n_layers; i++, layers++) {
        g_autofree char *want = printf_signature(&each[k]->layers[i]);
        g_assert_cmpstr(each[k]->layers[i].signature, ==, want);
      }
  }
  g_assert_cmpint(layers, >, 1000);
  static const int64_t xs[] = {1, 0, -7, 12345, G_MAXINT64, G_MININT64};
  for (guint i = 0; i < G_N_ELEMENTS(xs); i++) {
    g_autofree char *entry = st_profile_layer_entry_key("H100", "fc1", NULL, ST_PASS_BWD_INPUT,
                                                        xs[i]);
    g_autofree char *want = g_strdup_printf("%s\x1f%s\x1f%s\x1f%d\x1f%" G_GINT64_FORMAT, "H100",
                                            "fc1", "", (int)ST_PASS_BWD_INPUT, xs[i]);
    g_assert_cmpstr(entry, ==, want);
  }
  g_autofree char *key = st_profile_layer_key("H100", 's', "linear{bias=1}[8]", ST_PASS_FWD);
  g_autofree char *want = g_strdup_printf("H100\x1fs\x1flinear{bias=1}[8]\x1f%d", ST_PASS_FWD);
  g_assert_cmpstr(key, ==, want);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/model/build/same-as-loaded", test_same_as_loaded);
  g_test_add_func("/model/build/refused", test_refused);
  g_test_add_func("/model/build/same-text-as-printf", test_same_text_as_printf);
  return g_test_run();
}
