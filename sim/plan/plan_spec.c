/* plan_spec.c: what the user asked the planner for, set by name (see
 * plan.h). The command line and the JSON space file both end here, so a key
 * means the same in both. Every value of a list is checked through the
 * option table as it is given, so a bad value is reported with its option
 * before anything is searched. */
#include "plan/plan.h"

#include <math.h>
#include <string.h>

#include "base/json.h"
#include "base/units.h"

G_DEFINE_QUARK(st-plan-error-quark, st_plan_error)

/* A list longer than this is a typo ("1-1000000"), not a search. */
#define MAX_LIST 100000

static const char *const OBJECTIVES[] = {"time",          "throughput", "throughput-per-gpu",
                                         "gpu-hours",     "time-to-train", "cost",
                                         "energy",        NULL};
static const char *const PRUNES[] = {"front", "winner", "off", NULL};

const char *
st_plan_objective_name(StPlanObjective o)
{
  g_return_val_if_fail(o < ST_PLAN_OBJ_N, "?");
  return OBJECTIVES[o];
}

const char *
st_plan_prune_name(StPlanPrune p)
{
  g_return_val_if_fail(p < ST_PLAN_PRUNE_N, "?");
  return PRUNES[p];
}

static void
values_free(gpointer data)
{
  StPlanValues *v = data;
  g_free(v->name);
  g_ptr_array_unref(v->values);
  g_free(v);
}

StPlanSpec *
st_plan_spec_new(void)
{
  StPlanSpec *spec = g_new0(StPlanSpec, 1);
  spec->strategies = g_ptr_array_new_with_free_func(g_free);
  spec->nodes = g_array_new(FALSE, FALSE, sizeof(int));
  spec->gpus = g_array_new(FALSE, FALSE, sizeof(int));
  spec->micro_batches = g_array_new(FALSE, FALSE, sizeof(int));
  spec->accumulations = g_array_new(FALSE, FALSE, sizeof(int));
  spec->options = g_ptr_array_new_with_free_func(values_free);
  spec->objective = ST_PLAN_OBJ_TIME;
  spec->train_steps = 1000;
  spec->prune = ST_PLAN_PRUNE_FRONT;
  return spec;
}

void
st_plan_spec_free(StPlanSpec *spec)
{
  if (spec == NULL)
    return;
  if (spec->run != NULL)
    st_run_spec_clear(spec->run);
  g_free(spec->run);
  if (spec->run_intervals != NULL)
    g_array_unref(spec->run_intervals);
  if (spec->run_spares != NULL)
    g_array_unref(spec->run_spares);
  g_ptr_array_unref(spec->strategies);
  g_array_unref(spec->nodes);
  g_array_unref(spec->gpus);
  g_array_unref(spec->micro_batches);
  g_array_unref(spec->accumulations);
  g_ptr_array_unref(spec->options);
  g_free(spec);
}

const StPlanValues *
st_plan_spec_values(const StPlanSpec *spec, const char *name)
{
  for (guint i = 0; i < spec->options->len; i++) {
    const StPlanValues *v = g_ptr_array_index(spec->options, i);
    if (strcmp(v->name, name) == 0)
      return v;
  }
  return NULL;
}

static gboolean
bad(GError **error, const char *name, const char *value, const char *format, ...)
  G_GNUC_PRINTF(4, 5);

static gboolean
bad(GError **error, const char *name, const char *value, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *why = g_strdup_vprintf(format, args);
  va_end(args);
  /* A list of 10^6 values is not echoed whole: its start and its length. */
  size_t length = strlen(value);
  if (length > 96)
    g_set_error(error, ST_PLAN_ERROR, ST_ERROR_INVALID, "--%s %.64s... (%zu characters): %s",
                name, value, length, why);
  else
    g_set_error(error, ST_PLAN_ERROR, ST_ERROR_INVALID, "--%s %s: %s", name, value, why);
  return FALSE;
}

/* A whole non-negative integer, or FALSE. */
static gboolean
parse_int(const char *text, int64_t *out)
{
  if (!g_ascii_isdigit(text[0]))
    return FALSE;
  char *end = NULL;
  guint64 v = g_ascii_strtoull(text, &end, 10);
  if (*end != '\0' || v > G_MAXINT64)
    return FALSE;
  *out = (int64_t)v;
  return TRUE;
}

/* A comma list's items (transfer full), split with strchr: g_strsplit's
 * strstr costs a strlen of the rest per item under AddressSanitizer,
 * quadratic on a list of 10^6 values. NULL with the refusal past MAX_LIST
 * items. */
static GStrv
split_list(const char *name, const char *text, GError **error)
{
  g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func(g_free);
  for (const char *p = text;;) {
    if (items->len >= MAX_LIST) {
      bad(error, name, text, "more than %d values", MAX_LIST);
      return NULL;
    }
    const char *comma = strchr(p, ',');
    g_ptr_array_add(items, comma != NULL ? g_strndup(p, (gsize)(comma - p)) : g_strdup(p));
    if (comma == NULL)
      break;
    p = comma + 1;
  }
  g_ptr_array_set_free_func(items, NULL);
  g_ptr_array_add(items, NULL);
  return (GStrv)g_ptr_array_free(g_steal_pointer(&items), FALSE);
}

/* Integers from "1,2,4", "1-64" (every integer) or "1-64:x2" (1, 2, 4, ...,
 * 64), appended as text to `out` in the order given, duplicates dropped. */
static gboolean
expand_integers(const char *name, const char *text, GPtrArray *out, GError **error)
{
  g_auto(GStrv) items = split_list(name, text, error);
  if (items == NULL)
    return FALSE;
  g_autoptr(GHashTable) seen = g_hash_table_new(g_int64_hash, g_int64_equal);
  g_autoptr(GArray) numbers = g_array_new(FALSE, FALSE, sizeof(int64_t));
  for (char **item = items; *item != NULL; item++) {
    char *it = g_strstrip(*item);
    g_auto(GStrv) range = g_strsplit(it, "-", 2);
    int64_t first = 0, last = 0, factor = 0;
    if (range[0] == NULL || !parse_int(range[0], &first))
      return bad(error, name, text, "'%s' is not a whole number or a range A-B", it);
    last = first;
    if (range[1] != NULL) {
      char *step = strchr(range[1], ':');
      if (step != NULL) {
        *step++ = '\0';
        if (step[0] != 'x' || !parse_int(step + 1, &factor) || factor < 2)
          return bad(error, name, text, "'%s': a step is written ':xK' with K >= 2", it);
      }
      if (!parse_int(range[1], &last) || last < first)
        return bad(error, name, text, "'%s' is not a range A-B with A <= B", it);
      if (factor > 0 && first == 0)
        return bad(error, name, text, "'%s': a geometric range cannot start at 0", it);
    }
    for (int64_t v = first; v <= last;) {
      if (numbers->len >= MAX_LIST)
        return bad(error, name, text, "more than %d values", MAX_LIST);
      g_array_append_val(numbers, v);
      if (factor > 0 && v > last / factor)
        break;
      v = factor > 0 ? v * factor : v + 1;
    }
  }
  for (guint i = 0; i < numbers->len; i++) {
    int64_t *v = &g_array_index(numbers, int64_t, i);
    if (g_hash_table_contains(seen, v))
      continue;
    g_hash_table_add(seen, v);
    g_ptr_array_add(out, g_strdup_printf("%" G_GINT64_FORMAT, *v));
  }
  return TRUE;
}

/* The values of table option `spec` in `text`, each checked by
 * st_options_set. Integer options take ranges; string options take one
 * value (a comma may belong to it); the others a comma list. */
static gboolean
option_values(const StOptionSpec *option, const char *text, GPtrArray *out, GError **error)
{
  if (option->type == ST_OPT_INT || option->type == ST_OPT_INT64) {
    if (!expand_integers(option->name, text, out, error))
      return FALSE;
  } else if (option->type == ST_OPT_STRING) {
    g_ptr_array_add(out, g_strstrip(g_strdup(text)));
  } else {
    g_auto(GStrv) items = split_list(option->name, text, error);
    if (items == NULL)
      return FALSE;
    for (char **item = items; *item != NULL; item++)
      g_ptr_array_add(out, g_strdup(g_strstrip(*item)));
  }
  StOptions scratch;
  st_options_init(&scratch);
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < out->len; i++)
    ok = st_options_set(&scratch, option->name, g_ptr_array_index(out, i), error);
  st_options_clear(&scratch);
  if (ok && out->len == 0)
    return bad(error, option->name, text, "no value");
  return ok;
}

static gboolean
set_int_list(GArray *list, const char *name, const char *text, int64_t min, GError **error)
{
  g_autoptr(GPtrArray) values = g_ptr_array_new_with_free_func(g_free);
  const StOptionSpec *option = st_option_find(name);
  if (option != NULL ? !option_values(option, text, values, error)
                     : !expand_integers(name, text, values, error))
    return FALSE;
  g_array_set_size(list, 0);
  for (guint i = 0; i < values->len; i++) {
    int64_t v = g_ascii_strtoll(g_ptr_array_index(values, i), NULL, 10);
    if (v < min || v > G_MAXINT)
      return bad(error, name, text,
                 "%" G_GINT64_FORMAT " is out of range (at least %" G_GINT64_FORMAT ")", v, min);
    int iv = (int)v;
    g_array_append_val(list, iv);
  }
  return TRUE;
}

static gboolean
set_count(int64_t *out, const char *name, const char *text, int64_t min, int64_t max,
          GError **error)
{
  int64_t v;
  g_autofree char *trimmed = g_strstrip(g_strdup(text));
  if (!parse_int(trimmed, &v) || v < min || v > max)
    return bad(error, name, text, "must be a whole number between %" G_GINT64_FORMAT
               " and %" G_GINT64_FORMAT, min, max);
  *out = v;
  return TRUE;
}

static gboolean
set_choice(int *out, const char *const *choices, const char *name, const char *text,
           GError **error)
{
  for (int i = 0; choices[i] != NULL; i++) {
    if (strcmp(choices[i], text) == 0) {
      *out = i;
      return TRUE;
    }
  }
  g_autofree char *known = g_strjoinv(", ", (char **)choices);
  return bad(error, name, text, "must be one of %s", known);
}

static gboolean
set_strategies(StPlanSpec *spec, const char *name, const char *text, GError **error)
{
  g_ptr_array_set_size(spec->strategies, 0);
  if (strcmp(text, "all") == 0)
    return TRUE;
  g_auto(GStrv) items = split_list(name, text, error);
  if (items == NULL)
    return FALSE;
  for (char **item = items; *item != NULL; item++) {
    const char *n = g_strstrip(*item);
    g_autoptr(GError) unknown = NULL;
    if (st_strategy_lookup(n, &unknown) == NULL)
      return bad(error, name, text, "%s", unknown->message);
    gboolean dup = FALSE;
    for (guint i = 0; i < spec->strategies->len && !dup; i++)
      dup = strcmp(g_ptr_array_index(spec->strategies, i), n) == 0;
    if (!dup)
      g_ptr_array_add(spec->strategies, g_strdup(n));
  }
  if (spec->strategies->len == 0)
    return bad(error, name, text, "no strategy");
  return TRUE;
}

gboolean
st_plan_spec_set(StPlanSpec *spec, const char *name, const char *value, GError **error)
{
  g_return_val_if_fail(spec != NULL && name != NULL && value != NULL, FALSE);
  int64_t v = 0;
  int choice = 0;
  if (strcmp(name, "strategy") == 0 || strcmp(name, "strategies") == 0)
    return set_strategies(spec, name, value, error);
  if (strcmp(name, "nodes") == 0)
    return set_int_list(spec->nodes, name, value, 1, error);
  if (strcmp(name, "gpus") == 0)
    return set_int_list(spec->gpus, name, value, 1, error);
  if (strcmp(name, "micro-batch") == 0)
    return set_int_list(spec->micro_batches, name, value, 1, error);
  if (strcmp(name, "accumulation") == 0)
    return set_int_list(spec->accumulations, name, value, 1, error);
  if (strcmp(name, "global-batch") == 0)
    return set_count(&spec->global_batch, name, value, 0, G_MAXINT64 / 2, error);
  if (strcmp(name, "gpu-batch") == 0)
    return set_count(&spec->gpu_batch, name, value, 0, G_MAXINT32, error);
  if (strcmp(name, "train-steps") == 0)
    return set_count(&spec->train_steps, name, value, 1, G_MAXINT64 / 2, error);
  if (strcmp(name, "gpu-budget") == 0) {
    if (!set_count(&v, name, value, 0, G_MAXINT32, error))
      return FALSE;
    spec->gpu_budget = (int)v;
    return TRUE;
  }
  if (strcmp(name, "gpus-per-node") == 0) {
    if (!set_count(&v, name, value, 0, G_MAXINT32, error))
      return FALSE;
    spec->gpus_per_node = (int)v;
    return TRUE;
  }
  if (strcmp(name, "threads") == 0) {
    if (!set_count(&v, name, value, 0, 1024, error))
      return FALSE;
    spec->threads = (int)v;
    return TRUE;
  }
  if (strcmp(name, "wave") == 0) {
    if (!set_count(&v, name, value, 0, 1 << 20, error))
      return FALSE;
    spec->wave = (int)v;
    return TRUE;
  }
  if (strcmp(name, "max-time") == 0) {
    /* Seconds, or a duration with its unit. */
    char *end = NULL;
    double seconds = g_ascii_strtod(value, &end);
    int64_t ns = 0;
    if (end == value || *end != '\0') {
      g_autoptr(GError) local = NULL;
      if (!st_parse_duration(value, &ns, &local))
        return bad(error, name, value, "%s", local->message);
      seconds = (double)ns * 1e-9;
    }
    if (!(seconds > 0) || !isfinite(seconds))
      return bad(error, name, value, "must be a positive time: seconds (90) or with a unit (90s, 1.5s)");
    spec->max_time_s = seconds;
    return TRUE;
  }
  if (strcmp(name, "mem-cap") == 0) {
    g_autoptr(GError) local = NULL;
    if (!st_parse_bytes(value, &v, &local) || v <= 0)
      return bad(error, name, value, "%s", local ? local->message : "must be positive");
    spec->mem_cap = v;
    return TRUE;
  }
  if (strcmp(name, "objective") == 0) {
    if (!set_choice(&choice, OBJECTIVES, name, value, error))
      return FALSE;
    spec->objective = (StPlanObjective)choice;
    return TRUE;
  }
  if (strcmp(name, "prune") == 0) {
    if (!set_choice(&choice, PRUNES, name, value, error))
      return FALSE;
    spec->prune = (StPlanPrune)choice;
    return TRUE;
  }
  if (strcmp(name, "no-fold") == 0 || strcmp(name, "allow-stale") == 0 ||
      strcmp(name, "tp-across-nodes") == 0) {
    static const char *const FLAGS[] = {"false", "true", NULL};
    if (!set_choice(&choice, FLAGS, name, value, error))
      return FALSE;
    *(name[0] == 'n'   ? &spec->no_fold
      : name[0] == 'a' ? &spec->allow_stale
                       : &spec->tp_across_nodes) = choice == 1;
    return TRUE;
  }
  const StOptionSpec *option = st_option_find(name);
  if (option == NULL) {
    g_set_error(error, ST_PLAN_ERROR, ST_ERROR_INVALID, "unknown option --%s", name);
    return FALSE;
  }
  StPlanValues *values = g_new0(StPlanValues, 1);
  values->name = g_strdup(name);
  values->values = g_ptr_array_new_with_free_func(g_free);
  if (!option_values(option, value, values->values, error)) {
    values_free(values);
    return FALSE;
  }
  for (guint i = 0; i < spec->options->len; i++) {
    if (strcmp(((StPlanValues *)g_ptr_array_index(spec->options, i))->name, name) == 0) {
      g_ptr_array_remove_index(spec->options, i);
      break;
    }
  }
  g_ptr_array_add(spec->options, values);
  return TRUE;
}

/* A JSON value as the text the command line would carry. */
static char *
json_text(const cJSON *item, GError **error)
{
  if (cJSON_IsString(item))
    return g_strdup(item->valuestring);
  if (cJSON_IsBool(item))
    return g_strdup(cJSON_IsTrue(item) ? "true" : "false");
  if (cJSON_IsNumber(item)) {
    double d = item->valuedouble;
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    /* Whole numbers as integers; inf and 1e300 (no int64 holds them) go on
     * as written, for the option's own parser to refuse. */
    if (d >= -0x1p63 && d < 0x1p63 && d == (double)(int64_t)d)
      return g_strdup_printf("%" G_GINT64_FORMAT, (int64_t)d);
    return g_strdup(g_ascii_dtostr(buf, sizeof buf, d));
  }
  if (cJSON_IsArray(item)) {
    g_autoptr(GString) joined = g_string_new(NULL);
    const cJSON *element;
    cJSON_ArrayForEach(element, item) {
      if (cJSON_IsArray(element) || cJSON_IsObject(element)) {
        g_set_error(error, ST_PLAN_ERROR, ST_ERROR_INVALID, "nested lists are not values");
        return NULL;
      }
      g_autofree char *text = json_text(element, error);
      if (text == NULL)
        return NULL;
      g_string_append_printf(joined, "%s%s", joined->len ? "," : "", text);
    }
    return g_string_free(g_steal_pointer(&joined), FALSE);
  }
  g_set_error(error, ST_PLAN_ERROR, ST_ERROR_INVALID,
              "expected a string, a number, a boolean or a list of them");
  return NULL;
}

gboolean
st_plan_spec_load(StPlanSpec *spec, const char *path, GError **error)
{
  g_autoptr(cJSON) root = st_json_load_file(path, error);
  if (root == NULL)
    return FALSE;
  if (!cJSON_IsObject(root)) {
    g_set_error(error, ST_PLAN_ERROR, ST_ERROR_INVALID,
                "%s: expected an object of option names and values", path);
    return FALSE;
  }
  const cJSON *item;
  cJSON_ArrayForEach(item, root) {
    g_autofree char *text = json_text(item, error);
    if (text == NULL || !st_plan_spec_set(spec, item->string, text, error)) {
      g_prefix_error(error, "%s: key '%s': ", path, item->string);
      return FALSE;
    }
  }
  return TRUE;
}
