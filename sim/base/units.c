/* units.c: see units.h. One table per quantity; one parser walks them. */
#include "units.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "limits.h"

G_DEFINE_QUARK(st-base-error-quark, st_base_error)

typedef struct {
  const char *suffix;
  double factor; /* to the internal unit */
} UnitSuffix;

static const UnitSuffix BYTE_UNITS[] = {
  {"B", 1.0},
  {"kB", 1e3},  {"KB", 1e3},  {"MB", 1e6},  {"GB", 1e9},  {"TB", 1e12}, {"PB", 1e15},
  {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
  {"TiB", 1099511627776.0}, {"PiB", 1125899906842624.0},
  {NULL, 0},
};

static const UnitSuffix BANDWIDTH_UNITS[] = {
  {"B/s", 1.0}, {"kB/s", 1e3}, {"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9}, {"TB/s", 1e12},
  {"KiB/s", 1024.0}, {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0},
  {"bit/s", 1.0 / 8}, {"kbit/s", 1e3 / 8}, {"Mbit/s", 1e6 / 8}, {"Gbit/s", 1e9 / 8},
  {"Tbit/s", 1e12 / 8},
  {NULL, 0},
};

static const UnitSuffix DURATION_UNITS[] = {
  {"ns", 1.0}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9},
  {NULL, 0},
};

static const UnitSuffix FLOP_RATE_UNITS[] = {
  {"FLOP/s", 1.0}, {"GFLOP/s", 1e9}, {"TFLOP/s", 1e12}, {"PFLOP/s", 1e15},
  {"FLOPS", 1.0}, {"GFLOPS", 1e9}, {"TFLOPS", 1e12}, {"PFLOPS", 1e15},
  {NULL, 0},
};

/* Splits "12.5 GB/s" into a finite non-negative number and a suffix found in
 * `units`; anything else is an error that quotes the text and the units. */
static gboolean
parse_with_units(const char *text, const UnitSuffix *units, const char *what,
                 double *out, GError **error)
{
  g_return_val_if_fail(out != NULL, FALSE);
  if (text == NULL || *text == '\0') {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_PARSE, "empty %s", what);
    return FALSE;
  }
  /* Only a plain decimal number may lead: strtod would also take leading
   * spaces, a sign, "0x" hex, "inf" and "nan". */
  if (text[0] == '-') {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_PARSE, "'%s': a %s cannot be negative", text,
                what);
    return FALSE;
  }
  if (!g_ascii_isdigit(text[0]) && !(text[0] == '.' && g_ascii_isdigit(text[1]))) {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_PARSE,
                "'%s' is not a %s: it must start with a number", text, what);
    return FALSE;
  }
  if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_PARSE,
                "'%s' is not a %s: write the number in decimal", text, what);
    return FALSE;
  }
  char *end = NULL;
  double value = g_ascii_strtod(text, &end);
  if (end == text || !isfinite(value)) {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_PARSE,
                "'%s' is not a %s: it must start with a number", text, what);
    return FALSE;
  }
  if (value < 0) {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_PARSE, "'%s': a %s cannot be negative",
                text, what);
    return FALSE;
  }
  const char *suffix = end;
  if (*suffix == ' ')
    suffix++;
  for (const UnitSuffix *u = units; u->suffix != NULL; u++) {
    if (strcmp(suffix, u->suffix) == 0) {
      *out = value * u->factor;
      return TRUE;
    }
  }
  g_autoptr(GString) known = g_string_new(NULL);
  for (const UnitSuffix *u = units; u->suffix != NULL; u++)
    g_string_append_printf(known, "%s%s", known->len ? ", " : "", u->suffix);
  if (*suffix == '\0')
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_PARSE,
                "'%s' has no unit: a %s needs one of %s", text, what, known->str);
  else
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_PARSE,
                "'%s': unknown unit '%s' for a %s (expected one of %s)", text, suffix, what,
                known->str);
  return FALSE;
}

gboolean
st_parse_bytes(const char *text, int64_t *bytes, GError **error)
{
  double v;
  if (!parse_with_units(text, BYTE_UNITS, "size", &v, error))
    return FALSE;
  if (v > 9.0e18) {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_PARSE, "'%s' is too large a size", text);
    return FALSE;
  }
  *bytes = (int64_t)llround(v);
  return TRUE;
}

gboolean
st_parse_bandwidth(const char *text, double *bytes_per_s, GError **error)
{
  return parse_with_units(text, BANDWIDTH_UNITS, "bandwidth", bytes_per_s, error);
}

gboolean
st_parse_duration(const char *text, int64_t *ns, GError **error)
{
  double v;
  if (!parse_with_units(text, DURATION_UNITS, "duration", &v, error))
    return FALSE;
  if (v > 9.0e18) {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_PARSE, "'%s' is too long a duration", text);
    return FALSE;
  }
  *ns = (int64_t)llround(v);
  return TRUE;
}

gboolean
st_parse_flop_rate(const char *text, double *flop_per_s, GError **error)
{
  return parse_with_units(text, FLOP_RATE_UNITS, "FLOP rate", flop_per_s, error);
}

const StRange ST_RANGE_LINK_BANDWIDTH = {"link bandwidth", 1e6, 1e14, "1MB/s", "100TB/s"};
const StRange ST_RANGE_MEMORY_BANDWIDTH = {"memory bandwidth", 1e9, 1e14, "1GB/s", "100TB/s"};
const StRange ST_RANGE_FLOP_RATE = {"FLOP rate", 1e9, 1e17, "1GFLOP/s", "100PFLOP/s"};
const StRange ST_RANGE_LATENCY = {"latency", 0, 1e9, "0s", "1s"};
const StRange ST_RANGE_DEVICE_MEMORY = {"device memory", 1048576.0, 1125899906842624.0, "1MiB",
                                        "1PiB"};
const StRange ST_RANGE_SIZE = {"size", 0, (double)ST_MAX_BYTES, "0B", "1PiB"};

gboolean
st_range_check(const StRange *range, double value, const char *text, GError **error)
{
  g_return_val_if_fail(range != NULL, FALSE);
  if (value >= range->min && value <= range->max)
    return TRUE;
  gboolean low = !(value >= range->min); /* NaN counts as low */
  g_set_error(error, ST_BASE_ERROR, ST_ERROR_INVALID,
              "'%s' is %s the %s %s accepted, %s (docs/RELIABILITY.md)", text,
              low ? "below" : "above", low ? "smallest" : "largest", range->what,
              low ? range->min_text : range->max_text);
  return FALSE;
}

char *
st_format_bytes(int64_t bytes)
{
  static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = (double)bytes;
  int i = 0;
  while (fabs(v) >= 1024.0 && i < 5) {
    v /= 1024.0;
    i++;
  }
  return i == 0 ? g_strdup_printf("%" G_GINT64_FORMAT " B", bytes)
                : g_strdup_printf("%.2f %s", v, names[i]);
}

char *
st_format_duration(int64_t ns)
{
  double v = (double)ns;
  if (llabs(ns) < 1000)
    return g_strdup_printf("%" G_GINT64_FORMAT " ns", ns);
  if (fabs(v) < 1e6)
    return g_strdup_printf("%.1f us", v / 1e3);
  if (fabs(v) < 1e9)
    return g_strdup_printf("%.2f ms", v / 1e6);
  return g_strdup_printf("%.3f s", v / 1e9);
}

char *
st_format_bandwidth(double bytes_per_s)
{
  if (bytes_per_s >= 1e9)
    return g_strdup_printf("%.1f GB/s", bytes_per_s / 1e9);
  if (bytes_per_s >= 1e6)
    return g_strdup_printf("%.1f MB/s", bytes_per_s / 1e6);
  return g_strdup_printf("%.0f B/s", bytes_per_s);
}

char *
st_format_count(double value)
{
  static const char *const prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  double v = value;
  while (fabs(v) >= 1000.0 && i < 6) {
    v /= 1000.0;
    i++;
  }
  if (i == 0)
    return g_strdup_printf("%.0f", v);
  return g_strdup_printf(fabs(v) >= 100 ? "%.0f%s" : fabs(v) >= 10 ? "%.1f%s" : "%.2f%s", v,
                         prefixes[i]);
}

char *
st_us_text(int64_t ns, char buf[ST_US_TEXT_LEN])
{
  uint64_t mag = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
  g_snprintf(buf, ST_US_TEXT_LEN, "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", mag / 1000,
             (unsigned)(mag % 1000));
  return buf;
}
