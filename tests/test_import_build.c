/* test_import_build.c: an importer's tree made into its model directly
 * (st_import_build_model, import_build.c) is the model the loader makes of
 * it, and any tree the loader refuses or that is not of the plain shape is
 * left to the loader (NULL), so that its message is the loader's.
 *
 * Every shipped model, written out by st_model_to_json with layers expanded
 * and attrs explicit (its "derived" and "totals", which the loader skips,
 * taken off), must be built and equal the loaded one field for field: every
 * layer type the models use, flags and choices among them. Then a small
 * tree changed in each way the loader refuses or reads differently.
 *
 * Also st_import_format, which writes strings and whole numbers itself:
 * the same text as when every value was printed by cJSON_PrintUnformatted
 * (the reference below, the function as it was), on trees with escapes,
 * UTF-8, numbers past int's range, fractions, -0 and literals, and on the
 * models of every ONNX fixture.
 */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "import/import_private.h"
#include "testutil.h"

/* Built and loaded alike; or, when `built_expected` is FALSE, left to the
 * loader. */
static void
assert_builds_as_loaded(const cJSON *root, gboolean built_expected)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) loaded = st_model_from_json(root, "tree", &error);
  g_autoptr(StModel) built = st_import_build_model(root);
  if (loaded == NULL) {
    g_assert_null(built);
    return;
  }
  if (!built_expected) {
    g_assert_null(built);
    return;
  }
  g_assert_nonnull(built);
  st_test_assert_same_model(built, loaded);
}

static void
test_shipped_models(void)
{
  g_autofree char *dir_path = st_test_src("models");
  g_autoptr(GDir) dir = g_dir_open(dir_path, 0, NULL);
  g_assert_nonnull(dir);
  int checked = 0;
  const char *file;
  while ((file = g_dir_read_name(dir)) != NULL) {
    if (!g_str_has_suffix(file, ".json"))
      continue;
    g_autofree char *relative = g_build_filename("models", file, NULL);
    g_autoptr(StModel) model = st_test_model(relative);
    g_clear_pointer(&model->path, g_free); /* st_model_from_json leaves it unset */
    g_autoptr(cJSON) root = st_model_to_json(model);
    cJSON_DeleteItemFromObjectCaseSensitive(root, "totals");
    gboolean inputs = FALSE;
    cJSON *layer;
    cJSON_ArrayForEach(layer, cJSON_GetObjectItemCaseSensitive(root, "layers"))
    {
      cJSON_DeleteItemFromObjectCaseSensitive(layer, "derived");
      inputs = inputs || cJSON_HasObjectItem(layer, "inputs");
    }
    /* Branches (Inception's `inputs`) and parallelism are the loader's. */
    gboolean plain = !inputs && !cJSON_HasObjectItem(root, "tensor_parallel") &&
                     !cJSON_HasObjectItem(root, "context_parallel");
    g_test_message("%s: %d layers, %s", file, model->n_layers, plain ? "built" : "loaded");
    assert_builds_as_loaded(root, plain);
    checked += plain;
  }
  g_assert_cmpint(checked, >=, 20);
}

/* A conv net with a flag, a choice-free int attr and defaults; `change`
 * edits one layer of it. */
static const char *const BASE =
  "{\"name\": \"t\", \"note\": \"n\", \"input\": [3, 32, 32], \"dtype\": \"fp16\", \"layers\": ["
  "{\"name\": \"c\", \"type\": \"conv2d\", \"out_channels\": 8, \"kernel\": 3, \"padding\": 1, "
  "\"bias\": false},"
  "{\"name\": \"r\", \"type\": \"relu\"},"
  "{\"name\": \"f\", \"type\": \"flatten\"},"
  "{\"name\": \"l\", \"type\": \"linear\", \"out_features\": 10, \"bias\": true},"
  "{\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}";

static cJSON *
base_tree(void)
{
  cJSON *root = cJSON_Parse(BASE);
  g_assert_nonnull(root);
  return root;
}

static cJSON *
layer_of(cJSON *root, int i)
{
  return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "layers"), i);
}

static void
test_variants(void)
{
  g_autoptr(cJSON) plain = base_tree();
  assert_builds_as_loaded(plain, TRUE);

  /* Each: the loader refuses it, or reads it in a way left to it. */
  static const struct {
    int layer;         /* -1: the root */
    const char *key;
    const char *value; /* JSON; NULL: delete the key */
  } CHANGES[] = {
    {0, "bias", "1"},              /* a flag as 0/1: the loader takes it (built) */
    {0, "out_channels", "true"},   /* a bool for an integer */
    {0, "out_channels", "8.5"},    /* not whole */
    {0, "out_channels", "0"},      /* below its range */
    {0, "out_channels", "1e300"},  /* far out of range */
    {0, "out_channels", "\"8\""},  /* a string */
    {0, "kernel", "9007199254740993"},
    {0, "groups", "3"},            /* does not divide the channels: derive refuses */
    {0, "colour", "1"},            /* an unknown key */
    {0, "derived", "{}"},          /* skipped by the loader: left to it */
    {1, "inputs", "[\"c\"]"},      /* branches: left to the loader */
    {1, "name", "\"c\""},          /* a duplicate name */
    {1, "name", "3"},              /* not a string */
    {1, "name", NULL},             /* missing */
    {1, "type", "\"nope\""},       /* unknown type */
    {1, "type", NULL},
    {-1, "dtype", "\"fp7\""},
    {-1, "dtype", "\"bf16\""},     /* built */
    {-1, "dtype", NULL},           /* fp32: built */
    {-1, "note", "1"},
    {-1, "input", "[3, 32]"},      /* derive refuses a conv on two dims */
    {-1, "input", "[0, 32, 32]"},
    {-1, "input", "[3.5, 32, 32]"},
    {-1, "input", "[1048576, 1048576, 4]"}, /* over 2^40 elements */
    {-1, "input", "[]"},
    {-1, "layers", "[]"},
    {-1, "layers", "[1]"},
    {-1, "layers", "[{\"repeat\": 2, \"layers\": [{\"name\": \"r{i}\", \"type\": \"relu\"}]}]"},
    {-1, "tensor_parallel", "{\"ranks\": 1}"},
    {-1, "totals", "{}"},
    {-1, "extra", "1"},
  };
  static const gboolean BUILT[G_N_ELEMENTS(CHANGES)] = {[0] = TRUE, [17] = TRUE, [18] = TRUE};
  for (guint c = 0; c < G_N_ELEMENTS(CHANGES); c++) {
    g_autoptr(cJSON) root = base_tree();
    cJSON *obj = CHANGES[c].layer < 0 ? root : layer_of(root, CHANGES[c].layer);
    cJSON_DeleteItemFromObjectCaseSensitive(obj, CHANGES[c].key);
    if (CHANGES[c].value != NULL)
      cJSON_AddItemToObject(obj, CHANGES[c].key, cJSON_Parse(CHANGES[c].value));
    g_test_message("change %u: %s = %s", c, CHANGES[c].key,
                   CHANGES[c].value != NULL ? CHANGES[c].value : "(deleted)");
    assert_builds_as_loaded(root, BUILT[c]);
  }

  /* A key twice: the loader reads the first. */
  g_autoptr(cJSON) twice = base_tree();
  cJSON_AddItemToObject(layer_of(twice, 3), "out_features", cJSON_CreateNumber(12));
  assert_builds_as_loaded(twice, FALSE);
  /* A name twice in one layer. */
  g_autoptr(cJSON) named = base_tree();
  cJSON_AddItemToObject(layer_of(named, 1), "name", cJSON_CreateString("other"));
  assert_builds_as_loaded(named, FALSE);
}

/* ---- st_import_format against cJSON's printing ---------------------------------- */

static void
ref_key(GString *out, const char *key)
{
  cJSON string = {.type = cJSON_String, .valuestring = (char *)key};
  g_autofree char *text = cJSON_PrintUnformatted(&string);
  g_string_append_printf(out, "%s: ", text);
}

static void
ref_inline(GString *out, const cJSON *item)
{
  if (cJSON_IsObject(item) || cJSON_IsArray(item)) {
    gboolean object = cJSON_IsObject(item);
    g_string_append_c(out, object ? '{' : '[');
    const cJSON *child;
    gboolean first = TRUE;
    cJSON_ArrayForEach(child, item)
    {
      if (!first)
        g_string_append(out, ", ");
      first = FALSE;
      if (object)
        ref_key(out, child->string);
      ref_inline(out, child);
    }
    g_string_append_c(out, object ? '}' : ']');
    return;
  }
  g_autofree char *text = cJSON_PrintUnformatted(item);
  g_string_append(out, text);
}

static void
ref_layers(GString *out, const cJSON *layers, const char *indent)
{
  const cJSON *layer;
  cJSON_ArrayForEach(layer, layers)
  {
    const cJSON *body = cJSON_GetObjectItemCaseSensitive(layer, "layers");
    g_string_append(out, indent);
    if (cJSON_IsArray(body)) {
      g_string_append_c(out, '{');
      const cJSON *key;
      cJSON_ArrayForEach(key, layer)
      {
        if (key == body)
          continue;
        ref_key(out, key->string);
        ref_inline(out, key);
        g_string_append(out, ", ");
      }
      g_string_append(out, "\"layers\": [\n");
      g_autofree char *deeper = g_strconcat(indent, "  ", NULL);
      ref_layers(out, body, deeper);
      g_string_append(out, "]}");
    } else {
      ref_inline(out, layer);
    }
    g_string_append(out, layer->next != NULL ? ",\n" : "\n");
  }
  if (out->len >= 2 && out->str[out->len - 1] == '\n')
    g_string_truncate(out, out->len - 1);
}

static char *
ref_format(const cJSON *model)
{
  GString *out = g_string_new("{\n");
  const cJSON *item;
  cJSON_ArrayForEach(item, model)
  {
    g_string_append(out, "  ");
    ref_key(out, item->string);
    if (strcmp(item->string, "layers") == 0 && cJSON_IsArray(item)) {
      g_string_append(out, "[\n");
      ref_layers(out, item, "    ");
      g_string_append(out, "\n  ]");
    } else {
      ref_inline(out, item);
    }
    g_string_append(out, item->next != NULL ? ",\n" : "\n");
  }
  g_string_append(out, "}\n");
  return g_string_free(out, FALSE);
}

static void
assert_formats_as_cjson(cJSON *tree)
{
  StImportResult result;
  st_import_result_init(&result);
  result.model = tree;
  g_autofree char *text = st_import_format(&result);
  g_autofree char *want = ref_format(tree);
  g_assert_cmpstr(text, ==, want);
  st_import_result_clear(&result);
}

static void
test_format(void)
{
  cJSON *tree = cJSON_Parse(
    "{\"name\": \"a\\\"b\\\\c\\n\\t\\u0001d\", \"note\": \"caf\u00e9 \u2014 /x/\", "
    "\"input\": [3, 224, 224], \"layers\": ["
    "{\"name\": \"k\\\"ey\", \"type\": \"x\", \"a\": 2147483647, \"b\": 2147483648, "
    "\"c\": -2147483648, \"d\": -2147483649, \"e\": 1e10, \"f\": 0.5, \"g\": -0.0, "
    "\"h\": 1e300, \"i\": 3.14159265358979, \"j\": 0.1, \"k\": true, \"l\": false, "
    "\"m\": null, \"n\": [1, \"two\", {\"t\\\\\": 3}], \"o\": 9007199254740993, "
    "\"p\": \"\", \"q\": 123456789012345678},"
    "{\"repeat\": 2, \"layers\": [{\"name\": \"r{i}\", \"type\": \"relu\"}]}]}");
  g_assert_nonnull(tree);
  assert_formats_as_cjson(tree);
  /* Numbers cJSON_Parse cannot make: NaN, infinities, a huge int part. */
  cJSON *odd = cJSON_CreateObject();
  cJSON_AddNumberToObject(odd, "nan", NAN);
  cJSON_AddNumberToObject(odd, "inf", INFINITY);
  cJSON_AddNumberToObject(odd, "minf", -INFINITY);
  cJSON_AddNumberToObject(odd, "big", 1e19);
  cJSON_AddNumberToObject(odd, "small", 1e-300);
  cJSON_AddNumberToObject(odd, "negative", -12345);
  assert_formats_as_cjson(odd);

  static const char *const NAMES[] = {"resnet50", "vit_b_16", "tiny_gpt", "tiny_gpt_folded",
                                      "tiny_llama", "mobilenet_v2", NULL};
  for (const char *const *n = NAMES; *n != NULL; n++) {
    g_autofree char *file = g_strdup_printf("tests/data/onnx/%s.onnx", *n);
    g_autofree char *path = st_test_src(file);
    StImportResult result;
    st_import_result_init(&result);
    g_autoptr(GError) error = NULL;
    g_autoptr(StModel) model = st_import(st_importer_find("onnx"), path, NULL, &result, &error);
    g_assert_no_error(error);
    g_autofree char *text = st_import_format(&result);
    g_autofree char *want = ref_format(result.model);
    g_assert_cmpstr(text, ==, want);
    st_import_result_clear(&result);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/import/build/shipped-models", test_shipped_models);
  g_test_add_func("/import/build/variants", test_variants);
  g_test_add_func("/import/format/as-cjson", test_format);
  return g_test_run();
}
