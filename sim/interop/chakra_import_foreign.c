/* chakra_import_foreign.c: what a trace that stagger did not write lacks
 * and the importer makes up, each choice documented in docs/INTEROP.md.
 *
 * Model. One custom layer per distinct COMP node (name, num_ops,
 * tensor_size, duration_micros, CPU or not), run as a forward pass of one
 * sample: fwd_flops = num_ops, fwd_io_bytes = tensor_size, so that without
 * a duration the compute cost model charges max(FLOPs / peak, bytes /
 * bandwidth), ASTRA-sim's roofline for the same node.
 *
 * Costs. A COMP node with duration_micros > 0 costs exactly that: the
 * duration becomes a profile entry for its layer on the cluster's GPU (a
 * measured time, as a profile holds), which the compute models try before
 * the roofline. A CPU op (is_cpu_op) runs on a "cpu" stream of its rank and
 * is given a fill of CPU_FILL, so it takes its time while taking next to
 * nothing from the kernels beside it: the GPU-sharing model serves a
 * kernel of fill 1 and one of fill f at 1 / (1 + f) each, 0.1 % slower.
 */
#include "interop/chakra_import_private.h"

#include "base/json.h"
#include "base/util.h"
#include "model/model_build.h"

/* The device fraction a CPU op takes in the GPU-sharing model: the least
 * a profile's fill holds (profile_measure.c clamps to [1e-3, 1]). */
#define CPU_FILL 1e-3

/* Appends custom layer `name` to the model (made on first use), keeping
 * the first refusal for im_foreign_model. */
static void
add_layer(Import *im, const char *name, int64_t num_ops, int64_t tensor_size)
{
  if (im->model == NULL) {
    g_autofree char *base = g_path_get_basename(im->prefix);
    g_autofree char *model_name = g_strdup_printf("chakra:%s", base);
    im->model = st_model_new(model_name, &(StShape){.n_dims = 1, .dims = {1}}, ST_DTYPE_FP32);
  }
  static const char *const keys[] = {"fwd_flops", "bwd_flops", "output_bytes", "fwd_io_bytes"};
  int64_t values[] = {num_ops, 0, MAX(tensor_size, 1), tensor_size};
  if (im->model_error == NULL)
    st_model_add_layer(im->model, name, "custom", keys, values, G_N_ELEMENTS(keys),
                       &im->model_error);
}

int
im_foreign_layer(Import *im, const EtNode *n, int64_t num_ops, int64_t tensor_size,
                 gboolean cpu)
{
  const char *base = n->name != NULL && *n->name != '\0' ? n->name : "node";
  GString *k = g_string_assign(im->scratch, base); /* by hand, not printf: one per COMP node */
  int64_t parts[] = {num_ops, tensor_size, (int64_t)MIN(n->duration_micros, G_MAXINT64), cpu};
  for (guint i = 0; i < G_N_ELEMENTS(parts); i++) {
    g_string_append_c(k, '\x1f');
    st_string_append_int(k, parts[i]);
  }
  if (n->duration_micros > G_MAXINT64) /* not a duration, but keep such nodes apart */
    g_string_append_c(k, '+');
  gpointer v = g_hash_table_lookup(im->layer_of, k->str);
  if (v != NULL)
    return GPOINTER_TO_INT(v) - 1;
  int index = (int)g_hash_table_size(im->layer_of);
  char *key = g_string_chunk_insert_len(im->layer_text, k->str, (gssize)k->len);
  g_hash_table_insert(im->layer_of, key, GINT_TO_POINTER(index + 1));
  /* Names are unique in a model: a repeated name gets the layer's index. */
  GString *name_text = g_string_assign(im->scratch, base);
  if (g_hash_table_contains(im->layer_names, base)) {
    g_string_append(name_text, " #");
    st_string_append_int(name_text, index);
  }
  const char *name = g_string_chunk_insert_len(im->layer_text, name_text->str,
                                               (gssize)name_text->len);
  g_hash_table_add(im->layer_names, (gpointer)name);
  add_layer(im, name, num_ops, tensor_size);
  if (n->duration_micros > 0) {
    const char *device = im->o->cluster->gpu.name;
    st_profile_add_layer(im->o->profile, device, name, NULL, ST_PASS_FWD, 1,
                         (double)n->duration_micros * 1e3, 0);
    if (cpu)
      st_profile_set_layer_fill(im->o->profile, device, name, NULL, ST_PASS_FWD, 1, CPU_FILL,
                                FALSE);
  }
  return index;
}

StModel *
im_foreign_model(Import *im, GError **error)
{
  if (g_hash_table_size(im->layer_of) == 0) /* a model has a layer; no op uses this one */
    add_layer(im, "(no compute)", 0, 0);
  g_autoptr(StModel) model = g_steal_pointer(&im->model);
  g_autofree char *origin = g_strdup_printf("%s: model", im->prefix);
  if (im->model_error != NULL) {
    g_propagate_prefixed_error(error, g_steal_pointer(&im->model_error), "%s: ", origin);
    return NULL;
  }
  if (!st_model_finish(model, error)) {
    g_prefix_error(error, "%s: ", origin);
    return NULL;
  }
  return g_steal_pointer(&model);
}

cJSON *
im_foreign_settings(Import *im)
{
  g_autofree char *base = g_path_get_basename(im->prefix);
  g_autofree char *description =
    g_strdup_printf("Chakra trace %s: %d ranks", base, im->n_ranks);
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "strategy", "chakra");
  cJSON_AddStringToObject(s, "description", description);
  cJSON_AddStringToObject(s, "precision", st_precision_name(im->o->precision));
  cJSON_AddStringToObject(s, "optimizer", st_optimizer_name(im->o->optimizer));
  st_json_add_int(s, "micro_batch", 0);
  st_json_add_int(s, "accumulation", 1);
  st_json_add_int(s, "global_batch", im->o->global_batch);
  return s;
}
