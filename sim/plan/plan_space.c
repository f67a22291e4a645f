/* plan_space.c: a spec expanded into configurations, and one configuration
 * turned into options (see plan.h). Strategies are taken from the registry
 * at run time with their own knobs: no strategy is known here by name. */
#include "plan/plan.h"

#include <string.h>

#include "base/util.h"

/* Larger spaces are a mistake in a range, not a search anyone waits for. */
#define MAX_CONFIGS 2000000

static const int DEFAULT_MICRO_BATCHES[] = {1, 2, 4, 8, 16, 32, 64};

typedef struct {
  int nodes, gpus;
} Shape;

/* One varied option of a strategy: its name and values (chunk strings). */
typedef struct {
  const char *name;
  GPtrArray *values; /* const char *, borrowed from the chunk */
} Dim;

static void
dim_clear(gpointer data)
{
  Dim *d = data;
  g_ptr_array_unref(d->values);
}

static void
config_clear(gpointer data)
{
  StPlanConfig *c = data;
  g_free(c->settings);
}

static int
compare_shape(gconstpointer a, gconstpointer b)
{
  const Shape *x = a, *y = b;
  if (x->gpus != y->gpus)
    return (x->gpus > y->gpus) - (x->gpus < y->gpus);
  return (x->nodes > y->nodes) - (x->nodes < y->nodes);
}

/* Cluster shapes, by GPUs then nodes. With both lists, a pair is kept when
 * its GPUs need exactly its nodes (fewer GPUs would leave a node empty:
 * that is the shape with fewer nodes). */
static GArray *
shapes(const StPlanSpec *spec, const StCluster *c, GError **error)
{
  GArray *out = g_array_new(FALSE, FALSE, sizeof(Shape));
  int per = c->gpus_per_node;
  guint nn = spec->nodes->len, ng = spec->gpus->len;
  if (nn == 0 && ng == 0) {
    Shape s = {c->nodes, c->gpus};
    g_array_append_val(out, s);
  }
  for (guint i = 0; i < nn && ng == 0; i++) {
    int n = g_array_index(spec->nodes, int, i);
    Shape s = {n, n * per};
    g_array_append_val(out, s);
  }
  for (guint j = 0; j < ng && nn == 0; j++) {
    int g = g_array_index(spec->gpus, int, j);
    Shape s = {(int)st_div_ceil(g, per), g};
    g_array_append_val(out, s);
  }
  for (guint i = 0; i < nn && ng > 0; i++) {
    for (guint j = 0; j < ng; j++) {
      int n = g_array_index(spec->nodes, int, i), g = g_array_index(spec->gpus, int, j);
      if (g <= n * per && g > (n - 1) * per) {
        Shape s = {n, g};
        g_array_append_val(out, s);
      }
    }
  }
  g_array_sort(out, compare_shape);
  /* Drop repeats (the same GPU count asked twice). */
  guint kept = 0;
  for (guint i = 0; i < out->len; i++) {
    Shape s = g_array_index(out, Shape, i);
    if (kept > 0 && compare_shape(&s, &g_array_index(out, Shape, kept - 1)) == 0)
      continue;
    g_array_index(out, Shape, kept++) = s;
  }
  g_array_set_size(out, kept);
  if (out->len == 0) {
    g_set_error(error, ST_PLAN_ERROR, ST_ERROR_INVALID,
                "--nodes and --gpus leave no cluster shape: each GPU count must need exactly "
                "one of the node counts (%d GPUs per node)",
                per);
    g_array_unref(out);
    return NULL;
  }
  return out;
}

static gboolean
declares(const StStrategy *s, const char *option)
{
  for (const StStrategyKnob *k = s->knobs; k != NULL && k->option != NULL; k++)
    if (strcmp(k->option, option) == 0)
      return TRUE;
  return FALSE;
}

static gboolean
declared_anywhere(const char *option)
{
  for (const StStrategy *const *s = st_strategies(); *s != NULL; s++)
    if (declares(*s, option))
      return TRUE;
  return FALSE;
}

/* The options `strategy` varies: its knobs (the user's values win over the
 * declared ones; a knob without values only with the user's), then the
 * user's lists of options no strategy declares. A list of an option other
 * strategies declare and this one does not is not varied here: it does not
 * read it. */
static GArray *
dims_of(const StPlanSpec *spec, const StStrategy *strategy, const StModel *model,
        GStringChunk *strings)
{
  GArray *dims = g_array_new(FALSE, FALSE, sizeof(Dim));
  g_array_set_clear_func(dims, dim_clear);
  for (const StStrategyKnob *k = strategy->knobs; k != NULL && k->option != NULL; k++) {
    gboolean applies = model == NULL || strategy->knob_applies == NULL ||
                       strategy->knob_applies(k->option, model);
    const StPlanValues *given = st_plan_spec_values(spec, k->option);
    if ((!applies || k->values == NULL) && given == NULL)
      continue;
    Dim d = {g_string_chunk_insert_const(strings, k->option), g_ptr_array_new()};
    g_auto(GStrv) declared = given ? NULL : g_strsplit(k->values, ",", -1);
    for (guint i = 0; given != NULL && i < given->values->len; i++)
      g_ptr_array_add(d.values,
                      g_string_chunk_insert_const(strings, g_ptr_array_index(given->values, i)));
    for (char **v = declared; v != NULL && *v != NULL; v++)
      g_ptr_array_add(d.values, g_string_chunk_insert_const(strings, g_strstrip(*v)));
    g_array_append_val(dims, d);
  }
  for (guint i = 0; i < spec->options->len; i++) {
    const StPlanValues *given = g_ptr_array_index(spec->options, i);
    if (given->values->len < 2 || declares(strategy, given->name) ||
        declared_anywhere(given->name))
      continue;
    Dim d = {g_string_chunk_insert_const(strings, given->name), g_ptr_array_new()};
    for (guint j = 0; j < given->values->len; j++)
      g_ptr_array_add(d.values,
                      g_string_chunk_insert_const(strings, g_ptr_array_index(given->values, j)));
    g_array_append_val(dims, d);
  }
  return dims;
}

/* Appends every combination of `dims` for one (strategy, shape, batch)
 * that `keep` keeps (NULL: all). */
static void
append_combinations(GArray *out, const StPlanConfig *base, GArray *dims, StPlanKeep keep,
                    gpointer data)
{
  guint n = dims->len;
  g_autofree guint *at = g_new0(guint, n + 1);
  for (;;) {
    StPlanConfig c = *base;
    c.n_settings = (int)n;
    c.settings = g_new(const char *, 2 * n + 1);
    for (guint i = 0; i < n; i++) {
      const Dim *d = &g_array_index(dims, Dim, i);
      c.settings[2 * i] = d->name;
      c.settings[2 * i + 1] = g_ptr_array_index(d->values, at[i]);
    }
    if (keep == NULL || keep(&c, data))
      g_array_append_val(out, c);
    else
      g_free(c.settings);
    /* Odometer: the last option varies fastest. */
    guint i = n;
    while (i > 0) {
      i--;
      if (++at[i] < g_array_index(dims, Dim, i).values->len)
        break;
      at[i] = 0;
      if (i == 0)
        return;
    }
    if (n == 0)
      return;
  }
}

GArray *
st_plan_space_expand(const StPlanSpec *spec, const StModel *model, const StCluster *cluster,
                     GStringChunk *strings, StPlanKeep keep, gpointer data, GError **error)
{
  g_autoptr(GPtrArray) strategies = g_ptr_array_new();
  for (guint i = 0; i < spec->strategies->len; i++) {
    const StStrategy *s = st_strategy_lookup(g_ptr_array_index(spec->strategies, i), error);
    if (s == NULL)
      return NULL;
    g_ptr_array_add(strategies, (gpointer)s);
  }
  for (const StStrategy *const *s = st_strategies(); spec->strategies->len == 0 && *s != NULL;
       s++)
    g_ptr_array_add(strategies, (gpointer)*s);

  g_autoptr(GArray) shape_list = shapes(spec, cluster, error);
  if (shape_list == NULL)
    return NULL;
  g_autoptr(GArray) micro = g_array_new(FALSE, FALSE, sizeof(int));
  if (spec->micro_batches->len > 0)
    g_array_append_vals(micro, spec->micro_batches->data, spec->micro_batches->len);
  else
    g_array_append_vals(micro, DEFAULT_MICRO_BATCHES, G_N_ELEMENTS(DEFAULT_MICRO_BATCHES));
  /* Accumulation is a dimension only when no batch is fixed. */
  gboolean free_batch = spec->global_batch == 0 && spec->gpu_batch == 0;
  g_autoptr(GArray) accum = g_array_new(FALSE, FALSE, sizeof(int));
  int one = 1, implied = 0;
  if (!free_batch)
    g_array_append_val(accum, implied);
  else if (spec->accumulations->len > 0)
    g_array_append_vals(accum, spec->accumulations->data, spec->accumulations->len);
  else
    g_array_append_val(accum, one);

  /* Count first, so that a huge space fails before it is allocated. */
  double total = 0;
  for (guint s = 0; s < strategies->len; s++) {
    g_autoptr(GArray) dims = dims_of(spec, g_ptr_array_index(strategies, s), model, strings);
    double n = (double)shape_list->len * micro->len * accum->len;
    for (guint i = 0; i < dims->len; i++)
      n *= g_array_index(dims, Dim, i).values->len;
    total += n;
  }
  if (total > MAX_CONFIGS) {
    g_set_error(error, ST_PLAN_ERROR, ST_ERROR_INVALID,
                "the space holds %.0f configurations (at most %d): narrow --nodes, --gpus, "
                "--micro-batch or the option lists",
                total, MAX_CONFIGS);
    return NULL;
  }

  if (total <= ST_PLAN_LIST_ALL)
    keep = NULL;
  GArray *out = g_array_sized_new(FALSE, FALSE, sizeof(StPlanConfig),
                                  (guint)MIN(total, ST_PLAN_LIST_ALL));
  g_array_set_clear_func(out, config_clear);
  for (guint s = 0; s < strategies->len; s++) {
    const StStrategy *strategy = g_ptr_array_index(strategies, s);
    g_autoptr(GArray) dims = dims_of(spec, strategy, model, strings);
    for (guint h = 0; h < shape_list->len; h++) {
      const Shape *shape = &g_array_index(shape_list, Shape, h);
      for (guint m = 0; m < micro->len; m++) {
        for (guint a = 0; a < accum->len; a++) {
          StPlanConfig base = {
            .strategy = strategy,
            .nodes = shape->nodes,
            .gpus = shape->gpus,
            .micro_batch = g_array_index(micro, int, m),
            .accumulation = g_array_index(accum, int, a),
          };
          append_combinations(out, &base, dims, keep, data);
        }
      }
    }
  }
  return out;
}

static gboolean
set_number(StOptions *o, const char *name, int64_t value, GError **error)
{
  /* Decimal by hand: printf's machinery was a twentieth of preparing a
   * 700,000-configuration space (four numbers each, twice). */
  char text[24];
  char *at = text + sizeof text;
  uint64_t u = value < 0 ? 0 - (uint64_t)value : (uint64_t)value;
  *--at = '\0';
  do {
    *--at = (char)('0' + u % 10);
    u /= 10;
  } while (u > 0);
  if (value < 0)
    *--at = '-';
  return st_options_set(o, name, at, error);
}

gboolean
st_plan_config_options(const StPlanSpec *spec, const StPlanConfig *c, StOptions *out,
                       GError **error)
{
  st_options_init(out); /* --steps auto: every configuration timed in its steady state */
  gboolean ok = TRUE;
  /* A single value applies to every strategy, as in `stagger sim`. */
  for (guint i = 0; ok && i < spec->options->len; i++) {
    const StPlanValues *v = g_ptr_array_index(spec->options, i);
    if (v->values->len == 1)
      ok = st_options_set(out, v->name, g_ptr_array_index(v->values, 0), error);
  }
  for (int i = 0; ok && i < c->n_settings; i++)
    ok = st_options_set(out, c->settings[2 * i], c->settings[2 * i + 1], error);
  ok = ok && set_number(out, "nodes", c->nodes, error) &&
       set_number(out, "gpus", c->gpus, error) &&
       set_number(out, "micro-batch", c->micro_batch, error);
  if (ok) {
    int64_t ranks = out->ranks > 0 ? out->ranks : c->gpus;
    int64_t global = spec->global_batch > 0 ? spec->global_batch
                     : spec->gpu_batch > 0  ? spec->gpu_batch * c->gpus
                                            : ranks * c->micro_batch * c->accumulation;
    ok = set_number(out, "global-batch", global, error);
  }
  if (!ok)
    st_options_clear(out);
  return ok;
}

char *
st_plan_config_label(const StPlanConfig *c)
{
  GString *label = g_string_new(NULL);
  for (int i = 0; i < c->n_settings; i++)
    g_string_append_printf(label, "%s%s=%s", i ? " " : "", c->settings[2 * i],
                           c->settings[2 * i + 1]);
  return g_string_free(label, FALSE);
}
