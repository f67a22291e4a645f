/* json.c: see json.h. */
#include "json.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "error.h"
#include "units.h"

cJSON *
st_json_parse(const char *text, gsize length, const char *origin, GError **error)
{
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, length, &end, FALSE);
  if (root != NULL)
    return root;
  /* cJSON points at where it stopped; turn that into line:column. */
  int line = 1, column = 1;
  const char *stop = end != NULL ? end : text;
  for (const char *p = text; p < stop && p < text + length; p++) {
    if (*p == '\n') {
      line++;
      column = 1;
    } else {
      column++;
    }
  }
  gboolean at_end = TRUE;
  for (const char *p = stop; p < text + length && at_end; p++)
    at_end = g_ascii_isspace(*p) || *p == '\0';
  if (length == 0)
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_PARSE, "%s: empty file, expected JSON", origin);
  else if (at_end)
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_PARSE,
                "%s:%d:%d: malformed JSON: the text ends before it is complete (an unclosed "
                "bracket or brace?)",
                origin, line, column);
  else
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_PARSE, "%s:%d:%d: malformed JSON", origin, line,
                column);
  return NULL;
}

cJSON *
st_json_load_file(const char *path, GError **error)
{
  g_autofree char *text = NULL;
  gsize length = 0;
  GError *local = NULL;
  if (!g_file_get_contents(path, &text, &length, &local)) {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return NULL;
  }
  return st_json_parse(text, length, path, error);
}

gboolean
st_json_write_file(const char *path, const cJSON *root, GError **error)
{
  g_autofree char *text = cJSON_Print(root);
  if (text == NULL) {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_FAILED, "%s: out of memory formatting JSON",
                path);
    return FALSE;
  }
  g_autofree char *with_newline = g_strconcat(text, "\n", NULL);
  GError *local = NULL;
  if (!g_file_set_contents(path, with_newline, -1, &local)) {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return FALSE;
  }
  return TRUE;
}

gboolean
st_json_check_keys(const cJSON *obj, const char *const *allowed, GError **error)
{
  const cJSON *item;
  cJSON_ArrayForEach(item, obj)
  {
    gboolean known = FALSE;
    for (const char *const *a = allowed; *a != NULL && !known; a++)
      known = strcmp(item->string, *a) == 0;
    if (!known) {
      g_autofree char *list = g_strjoinv(", ", (char **)allowed);
      g_set_error(error, ST_BASE_ERROR, ST_ERROR_INVALID,
                  "unknown key '%s' (expected one of: %s)", item->string, list);
      return FALSE;
    }
  }
  return TRUE;
}

/* Finds `key`; handles `required`. Returns TRUE with *item NULL when optional and absent. */
static gboolean
lookup(const cJSON *obj, const char *key, gboolean required, const cJSON **item, GError **error)
{
  *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (*item == NULL && required) {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_INVALID, "missing key '%s'", key);
    return FALSE;
  }
  return TRUE;
}

static const char *
type_name(const cJSON *item)
{
  if (cJSON_IsString(item)) return "a string";
  if (cJSON_IsNumber(item)) return "a number";
  if (cJSON_IsBool(item)) return "a boolean";
  if (cJSON_IsNull(item)) return "null";
  if (cJSON_IsArray(item)) return "an array";
  if (cJSON_IsObject(item)) return "an object";
  return "invalid";
}

static gboolean
wrong_type(const char *key, const char *expected, const cJSON *item, GError **error)
{
  g_set_error(error, ST_BASE_ERROR, ST_ERROR_INVALID, "key '%s': expected %s, got %s", key,
              expected, type_name(item));
  return FALSE;
}

gboolean
st_json_get_object(const cJSON *obj, const char *key, gboolean required, const cJSON **out,
                   GError **error)
{
  const cJSON *item;
  if (!lookup(obj, key, required, &item, error))
    return FALSE;
  if (item == NULL)
    return TRUE;
  if (!cJSON_IsObject(item))
    return wrong_type(key, "an object", item, error);
  *out = item;
  return TRUE;
}

gboolean
st_json_get_array(const cJSON *obj, const char *key, gboolean required, const cJSON **out,
                  GError **error)
{
  const cJSON *item;
  if (!lookup(obj, key, required, &item, error))
    return FALSE;
  if (item == NULL)
    return TRUE;
  if (!cJSON_IsArray(item))
    return wrong_type(key, "an array", item, error);
  *out = item;
  return TRUE;
}

gboolean
st_json_get_string(const cJSON *obj, const char *key, gboolean required, const char **out,
                   GError **error)
{
  const cJSON *item;
  if (!lookup(obj, key, required, &item, error))
    return FALSE;
  if (item == NULL)
    return TRUE;
  if (!cJSON_IsString(item))
    return wrong_type(key, "a string", item, error);
  *out = item->valuestring;
  return TRUE;
}

gboolean
st_json_item_int(const cJSON *item, const char *what, int64_t min, int64_t max, int64_t *out,
                 GError **error)
{
  if (!cJSON_IsNumber(item))
    return wrong_type(what, "an integer", item, error);
  double v = item->valuedouble;
  if (!isfinite(v) || v != floor(v)) {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_INVALID, "key '%s': %g is not an integer", what,
                v);
    return FALSE;
  }
  /* Beyond 2^53 a JSON number is no longer exact (and beyond 2^63 no int64):
   * out of range, whatever the key allows. */
  const int64_t exact = INT64_C(1) << 53;
  int64_t lo = MAX(min, -exact), hi = MIN(max, exact);
  if (v < (double)lo || v > (double)hi) {
    char number[32]; /* 2^62 in digits, 1e300 as such (not its 301 digits) */
    g_snprintf(number, sizeof number, fabs(v) < 1e20 ? "%.0f" : "%g", v);
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_INVALID,
                "key '%s': %s is out of range [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]",
                what, number, lo, hi);
    return FALSE;
  }
  *out = (int64_t)v;
  return TRUE;
}

gboolean
st_json_get_int(const cJSON *obj, const char *key, gboolean required, int64_t min, int64_t max,
                int64_t *out, GError **error)
{
  const cJSON *item;
  if (!lookup(obj, key, required, &item, error))
    return FALSE;
  if (item == NULL)
    return TRUE;
  return st_json_item_int(item, key, min, max, out, error);
}

gboolean
st_json_get_double_range(const cJSON *obj, const char *key, gboolean required, double min,
                         double max, double *out, GError **error)
{
  const cJSON *item;
  if (!lookup(obj, key, required, &item, error))
    return FALSE;
  if (item == NULL)
    return TRUE;
  if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble))
    return wrong_type(key, "a number", item, error);
  if (item->valuedouble < min || item->valuedouble > max) {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_INVALID, "key '%s': %g is %s the %s %g", key,
                item->valuedouble, item->valuedouble < min ? "below" : "above",
                item->valuedouble < min ? "minimum" : "maximum",
                item->valuedouble < min ? min : max);
    return FALSE;
  }
  *out = item->valuedouble;
  return TRUE;
}

gboolean
st_json_get_double(const cJSON *obj, const char *key, gboolean required, double min, double *out,
                   GError **error)
{
  return st_json_get_double_range(obj, key, required, min, DBL_MAX, out, error);
}

gboolean
st_json_get_bool(const cJSON *obj, const char *key, gboolean required, gboolean *out,
                 GError **error)
{
  const cJSON *item;
  if (!lookup(obj, key, required, &item, error))
    return FALSE;
  if (item == NULL)
    return TRUE;
  if (!cJSON_IsBool(item))
    return wrong_type(key, "true or false", item, error);
  *out = cJSON_IsTrue(item);
  return TRUE;
}

/* The unit getters share this: the value must be a string; its parse errors get the key. */
static gboolean
get_unit_text(const cJSON *obj, const char *key, gboolean required, const char **text,
              GError **error)
{
  const cJSON *item;
  *text = NULL;
  if (!lookup(obj, key, required, &item, error))
    return FALSE;
  if (item == NULL)
    return TRUE;
  if (!cJSON_IsString(item))
    return wrong_type(key, "a string with a unit (such as \"80GiB\" or \"2us\")", item, error);
  *text = item->valuestring;
  return TRUE;
}

static gboolean
name_key(gboolean ok, const char *key, GError **error)
{
  if (!ok)
    g_prefix_error(error, "key '%s': ", key);
  return ok;
}

/* A parsed quantity (`parsed`: whether parsing gave `value`), then its
 * range; errors get the key. */
static gboolean
ranged(gboolean parsed, double value, const char *text, const StRange *range, const char *key,
       GError **error)
{
  return name_key(parsed && st_range_check(range, value, text, error), key, error);
}

gboolean
st_json_get_bytes(const cJSON *obj, const char *key, gboolean required, const StRange *range,
                  int64_t *out, GError **error)
{
  const char *text;
  int64_t v = 0;
  if (!get_unit_text(obj, key, required, &text, error))
    return FALSE;
  if (text == NULL)
    return TRUE;
  gboolean parsed = st_parse_bytes(text, &v, error);
  if (!ranged(parsed, (double)v, text, range, key, error))
    return FALSE;
  *out = v;
  return TRUE;
}

gboolean
st_json_get_bandwidth(const cJSON *obj, const char *key, gboolean required,
                      const StRange *range, double *out, GError **error)
{
  const char *text;
  double v = 0;
  if (!get_unit_text(obj, key, required, &text, error))
    return FALSE;
  if (text == NULL)
    return TRUE;
  gboolean parsed = st_parse_bandwidth(text, &v, error);
  if (!ranged(parsed, v, text, range, key, error))
    return FALSE;
  *out = v;
  return TRUE;
}

gboolean
st_json_get_duration(const cJSON *obj, const char *key, gboolean required, const StRange *range,
                     int64_t *out, GError **error)
{
  const char *text;
  int64_t v = 0;
  if (!get_unit_text(obj, key, required, &text, error))
    return FALSE;
  if (text == NULL)
    return TRUE;
  gboolean parsed = st_parse_duration(text, &v, error);
  if (!ranged(parsed, (double)v, text, range, key, error))
    return FALSE;
  *out = v;
  return TRUE;
}

gboolean
st_json_get_flop_rate(const cJSON *obj, const char *key, gboolean required,
                      const StRange *range, double *out, GError **error)
{
  const char *text;
  double v = 0;
  if (!get_unit_text(obj, key, required, &text, error))
    return FALSE;
  if (text == NULL)
    return TRUE;
  gboolean parsed = st_parse_flop_rate(text, &v, error);
  if (!ranged(parsed, v, text, range, key, error))
    return FALSE;
  *out = v;
  return TRUE;
}

cJSON *
st_json_add_int(cJSON *obj, const char *key, int64_t value)
{
  return cJSON_AddNumberToObject(obj, key, (double)value);
}
