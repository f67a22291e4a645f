/* plan_json_text.c: cJSON_Print's formatted text of a tree, appended to a
 * buffer at a given depth (plan_private.h), so that plan.json can be
 * written a point at a time, each point as if printed inside the whole
 * tree. The rules are cJSON 1.7's (print_value and its helpers): objects
 * open with a newline, one member a line indented by tabs, a tab after the
 * colon; arrays stay on one line, ", " between items; a number equal to its
 * int (valueint) is printed with %d, else with %1.15g unless that does not
 * read back within DBL_EPSILON, then %1.17g; NaN and infinities are null;
 * strings escape '"', '\\', the named control characters and the other
 * bytes under 32 as \u00xx. tests/test_plan_write.c compares the result
 * with cJSON_Print byte for byte. Its own integer formatting and strtod
 * instead of sscanf make it several times faster than cJSON_Print on a
 * plan's points. */
#include "plan/plan_private.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/json.h"

static void
tabs(GString *out, int n)
{
  for (int i = 0; i < n; i++)
    g_string_append_c(out, '\t');
}

static void
text_string(GString *out, const char *s)
{
  g_string_append_c(out, '"');
  for (const unsigned char *p = (const unsigned char *)(s != NULL ? s : ""); *p != '\0'; p++) {
    /* A run of characters that need no escape, in one append (700,000
     * pruned points' reasons went one character at a time). */
    const unsigned char *run = p;
    while (*p > 31 && *p != '"' && *p != '\\')
      p++;
    g_string_append_len(out, (const char *)run, p - run);
    if (*p == '\0')
      break;
    g_string_append_c(out, '\\');
    switch (*p) {
    case '\\':
      g_string_append_c(out, '\\');
      break;
    case '"':
      g_string_append_c(out, '"');
      break;
    case '\b':
      g_string_append_c(out, 'b');
      break;
    case '\f':
      g_string_append_c(out, 'f');
      break;
    case '\n':
      g_string_append_c(out, 'n');
      break;
    case '\r':
      g_string_append_c(out, 'r');
      break;
    case '\t':
      g_string_append_c(out, 't');
      break;
    default:
      g_string_append_printf(out, "u%04x", *p);
      break;
    }
  }
  g_string_append_c(out, '"');
}

static void
text_int(GString *out, int v)
{
  char buf[16];
  int n = 0;
  unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
  do {
    buf[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u > 0);
  if (v < 0)
    g_string_append_c(out, '-');
  while (n > 0)
    g_string_append_c(out, buf[--n]);
}

static void
text_number(GString *out, const cJSON *item)
{
  double d = item->valuedouble;
  if (isnan(d) || isinf(d)) {
    g_string_append(out, "null");
    return;
  }
  if (d == (double)item->valueint) {
    text_int(out, item->valueint);
    return;
  }
  char buf[32];
  snprintf(buf, sizeof buf, "%1.15g", d);
  double back = strtod(buf, NULL);
  if (!(fabs(back - d) <= MAX(fabs(back), fabs(d)) * DBL_EPSILON))
    snprintf(buf, sizeof buf, "%1.17g", d);
  g_string_append(out, buf);
}

void
st_plan_json_text(GString *out, const cJSON *item, int depth)
{
  switch (item->type & 0xFF) {
  case cJSON_NULL:
    g_string_append(out, "null");
    break;
  case cJSON_False:
    g_string_append(out, "false");
    break;
  case cJSON_True:
    g_string_append(out, "true");
    break;
  case cJSON_Number:
    text_number(out, item);
    break;
  case cJSON_Raw:
    g_string_append(out, item->valuestring != NULL ? item->valuestring : "");
    break;
  case cJSON_String:
    text_string(out, item->valuestring);
    break;
  case cJSON_Array:
    g_string_append_c(out, '[');
    for (const cJSON *c = item->child; c != NULL; c = c->next) {
      st_plan_json_text(out, c, depth);
      if (c->next != NULL)
        g_string_append(out, ", ");
    }
    g_string_append_c(out, ']');
    break;
  case cJSON_Object:
    g_string_append(out, "{\n");
    for (const cJSON *c = item->child; c != NULL; c = c->next) {
      tabs(out, depth + 1);
      text_string(out, c->string);
      g_string_append(out, ":\t");
      st_plan_json_text(out, c, depth + 1);
      if (c->next != NULL)
        g_string_append_c(out, ',');
      g_string_append_c(out, '\n');
    }
    tabs(out, depth);
    g_string_append_c(out, '}');
    break;
  default:
    break;
  }
}
