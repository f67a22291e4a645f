/* onnx_check.c: holding a rule's proposal to the graph (onnx_map.h), and
 * remembering what the model loader made of proposals already checked.
 *
 * A proposal is loaded as a small model ({"name": "check", "dtype", "input":
 * the first segment's input per sample, "layers": the proposal}) and its
 * output shape, parameters and FLOPs compared with the graph's. A graph
 * repeats itself (a transformer's blocks, ResNet's bottlenecks, the
 * benchmark's 10^6 MatMuls and Relus), so most proposals are equal to an
 * earlier one but for their layers' names, and loading each was a fifth of
 * a large import. What the loader derives does not depend on the names
 * (they are only checked to be unique and quoted in messages), so a
 * proposal that loaded is remembered by a key of everything else: the
 * dtype, the input shape and each layer's members but "name", in order.
 * One that did not load is not remembered (its message names its layers)
 * and is loaded again each time; nor is one whose names could matter
 * (`inputs` naming other layers, a `repeat`, a name that is not a string
 * or appears twice).
 */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "base/util.h"
#include "import/onnx_map.h"
#include "import/onnx_ops.h"

/* What the loader derived from a proposal: all that the check reads. */
typedef struct {
  StShape out;     /* the last layer's output per sample */
  int64_t params;
  double fwd_flops;
} Checked;

GHashTable *
onnx_checked_new(void)
{
  return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
}

/* `text` with its length first, so that no two texts run together alike. */
static void
append_text(GString *key, char tag, const char *text)
{
  g_string_append_c(key, tag);
  st_string_append_int(key, (int64_t)strlen(text));
  g_string_append_c(key, ':');
  g_string_append(key, text);
}

static void
append_value(GString *key, const cJSON *item)
{
  if (cJSON_IsNumber(item)) {
    double v = item->valuedouble;
    if (v == (double)(int64_t)v && v >= -0x1p62 && v <= 0x1p62 && !(v == 0 && signbit(v))) {
      g_string_append_c(key, 'i');
      st_string_append_int(key, (int64_t)v);
    } else {
      char text[G_ASCII_DTOSTR_BUF_SIZE];
      append_text(key, 'd', g_ascii_dtostr(text, sizeof text, v));
    }
  } else if (cJSON_IsString(item)) {
    append_text(key, 's', item->valuestring);
  } else if (cJSON_IsTrue(item)) {
    g_string_append_c(key, 't');
  } else if (cJSON_IsFalse(item)) {
    g_string_append_c(key, 'f');
  } else if (cJSON_IsNull(item)) {
    g_string_append_c(key, 'z');
  } else {
    g_autofree char *text = cJSON_PrintUnformatted(item);
    append_text(key, 'j', text != NULL ? text : "");
  }
}

/* The key of a proposal loaded from `in` at the model's dtype, into `key`;
 * FALSE when it is not to be remembered. */
static gboolean
proposal_key(const OnnxMap *m, const OnnxValue *in, const cJSON *layers, GString *key)
{
  g_string_assign(key, m->dtype);
  for (int k = 1; k < in->rank; k++) {
    g_string_append_c(key, ',');
    st_string_append_int(key, in->dims[k]);
  }
  const cJSON *layer;
  cJSON_ArrayForEach(layer, layers)
  {
    if (!cJSON_IsObject(layer))
      return FALSE;
    const cJSON *name = NULL;
    g_string_append_c(key, '{');
    const cJSON *member;
    cJSON_ArrayForEach(member, layer)
    {
      if (strcmp(member->string, "name") == 0) {
        if (name != NULL || !cJSON_IsString(member))
          return FALSE;
        name = member;
        continue;
      }
      if (strcmp(member->string, "inputs") == 0 || strcmp(member->string, "repeat") == 0)
        return FALSE;
      append_text(key, 'k', member->string);
      append_value(key, member);
    }
    g_string_append_c(key, '}');
    if (name == NULL)
      return FALSE;
    /* Names unique within the proposal (a proposal is a few layers). */
    for (const cJSON *before = layers->child; before != layer; before = before->next)
      if (strcmp(cJSON_GetObjectItemCaseSensitive(before, "name")->valuestring,
                 name->valuestring) == 0)
        return FALSE;
  }
  return TRUE;
}

/* Loads the proposal as the model "check"; FALSE with `why` told when it
 * does not load. */
static gboolean
load(const OnnxMap *m, const OnnxValue *in, const cJSON *layers, Checked *got, GString *why)
{
  g_autoptr(cJSON) root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "name", "check");
  cJSON_AddStringToObject(root, "dtype", m->dtype);
  cJSON *shape = cJSON_AddArrayToObject(root, "input");
  for (int k = 1; k < in->rank; k++)
    cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)in->dims[k]));
  /* The proposal by reference, not copied: freeing `root` leaves it whole. */
  cJSON_AddItemReferenceToObject(root, "layers", (cJSON *)layers);
  g_autoptr(GError) error = NULL;
  g_autoptr(StModel) model = st_model_from_json(root, "proposal", &error);
  if (model == NULL) {
    g_string_append(why, error->message);
    return FALSE;
  }
  *got = (Checked){.out = model->layers[model->n_layers - 1].out_shape,
                   .params = model->params, .fwd_flops = model->fwd_flops};
  return TRUE;
}

gboolean
onnx_check_proposal(OnnxMap *m, int seg, int n, const cJSON *layers, gboolean dense_only,
                    GString *why)
{
  const OnnxValue *in = onnx_value(m->g, m->segs[seg].in);
  const OnnxValue *out = onnx_value(m->g, m->segs[seg + n - 1].out);
  int64_t params = onnx_segments_params(m, seg, n);
  if (cJSON_GetArraySize(layers) == 0) {
    gboolean same = in->rank == out->rank &&
                    memcmp(in->dims, out->dims, sizeof(int64_t) * (size_t)in->rank) == 0;
    if (!same || params != 0)
      g_string_append(why, "it changes the shape or holds parameters");
    return same && params == 0;
  }
  g_autoptr(GString) key = g_string_new(NULL);
  gboolean keyed = proposal_key(m, in, layers, key);
  const Checked *known = keyed ? g_hash_table_lookup(m->checked, key->str) : NULL;
  Checked got;
  if (known != NULL) {
    got = *known;
  } else {
    if (!load(m, in, layers, &got, why))
      return FALSE;
    if (keyed)
      g_hash_table_insert(m->checked, g_string_free(g_steal_pointer(&key), FALSE),
                          g_memdup2(&got, sizeof got));
  }
  gboolean shape_ok = got.out.n_dims == out->rank - 1 &&
                      memcmp(got.out.dims, out->dims + 1,
                             sizeof(int64_t) * (size_t)got.out.n_dims) == 0;
  double dense = 0;
  if (shape_ok && got.params == params && dense_only)
    onnx_segments_flops(m, seg, n, &dense);
  if (!shape_ok) {
    g_autofree char *shape = st_shape_format(&got.out);
    g_autofree char *want = onnx_shape_text(out);
    g_string_append_printf(why, "it makes %s per sample where the graph makes %s", shape, want);
  } else if (got.params != params) {
    g_string_append_printf(why, "it has %" G_GINT64_FORMAT " parameters where the graph has %"
                           G_GINT64_FORMAT, got.params, params);
  } else if (dense_only && (got.fwd_flops > dense * (1 + 1e-9) ||
                            got.fwd_flops < dense * (1 - 1e-9))) {
    g_string_append_printf(why, "it computes %.6g FLOPs where the graph's products compute "
                           "%.6g", got.fwd_flops, dense);
  } else {
    return TRUE;
  }
  return FALSE;
}
