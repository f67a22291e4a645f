/* profile_kineto_scan.c: a flat trace event read from its text, to the
 * values cJSON would give (kineto_scan_flat, profile_kineto_private.h).
 *
 * Most events are flat objects of plain strings and numbers: 4·10^6 of
 * them parsed by cJSON (a node and a key a member, freed again) were most
 * of a Kineto import. The scan below reads such an event itself, to the
 * values cJSON would give: a string without escapes or control bytes is
 * its bytes; a number is the longest run of [0-9+-.eE] (at most 63, as
 * cJSON takes), starting with a digit or '-', all of it read by strtod;
 * white space is every byte up to 32; a repeated key keeps its first
 * value. Anything else (an escape, an array, an object other than a flat
 * "args", a literal it does not know, malformed text) is left to cJSON
 * for that event, so what is read, and what is refused, is what it was.
 */
#include <string.h>

#include "profile/profile_kineto_private.h"

/* A string at the cursor: its bytes, [*start, *start + *len); FALSE (the
 * cursor anywhere) when it is not a plain one. */
static gboolean
scan_string(KinetoCursor *c, const char **start, gsize *len)
{
  if (c->p >= c->end || *c->p != '"')
    return FALSE;
  const char *q = ++c->p;
  while (q < c->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 32)
    q++;
  if (q >= c->end || *q != '"')
    return FALSE;
  *start = c->p;
  *len = (gsize)(q - c->p);
  c->p = q + 1;
  return TRUE;
}

/* A scalar value at the cursor into *v (a string's valuestring in `text`,
 * when given; else left unset, as the value is not read). */
static gboolean
scan_scalar(KinetoCursor *c, cJSON *v, GString *text)
{
  if (c->p >= c->end)
    return FALSE;
  char ch = *c->p;
  if (ch == '"') {
    const char *start;
    gsize len;
    if (!scan_string(c, &start, &len))
      return FALSE;
    *v = (cJSON){.type = cJSON_String};
    if (text != NULL) {
      g_string_set_size(text, len);
      memcpy(text->str, start, len);
      v->valuestring = text->str;
    }
    return TRUE;
  }
  if (ch == '-' || (ch >= '0' && ch <= '9')) {
    const char *q = c->p;
    gboolean integer = TRUE; /* digits after an optional '-' */
    for (; q < c->end && q - c->p < 64; q++) {
      char d = *q;
      if (d >= '0' && d <= '9')
        continue;
      if (d == '+' || d == '.' || d == 'e' || d == 'E' || (d == '-' && q > c->p))
        integer = FALSE;
      else if (d != '-')
        break;
    }
    gsize len = (gsize)(q - c->p);
    if (len > 63)
      return FALSE;
    gboolean negative = ch == '-';
    if (integer && len - negative >= 1 && len - negative <= 15) {
      /* exact in a double, as strtod gives it; "-0" is -0.0 */
      int64_t u = 0;
      for (const char *d = c->p + negative; d < q; d++)
        u = u * 10 + (*d - '0');
      double value = (double)u;
      *v = (cJSON){.type = cJSON_Number, .valuedouble = negative ? -value : value};
      c->p = q;
      return TRUE;
    }
    char number[64];
    memcpy(number, c->p, len);
    number[len] = '\0';
    char *stop = NULL;
    double d = g_ascii_strtod(number, &stop);
    if (stop != number + len)
      return FALSE;
    *v = (cJSON){.type = cJSON_Number, .valuedouble = d};
    c->p = q;
    return TRUE;
  }
  static const struct {
    const char *text;
    int type;
  } LITERALS[] = {{"null", cJSON_NULL}, {"false", cJSON_False}, {"true", cJSON_True}};
  for (gsize i = 0; i < G_N_ELEMENTS(LITERALS); i++) {
    gsize len = strlen(LITERALS[i].text);
    if ((gsize)(c->end - c->p) >= len && memcmp(c->p, LITERALS[i].text, len) == 0) {
      *v = (cJSON){.type = LITERALS[i].type};
      c->p += len;
      return TRUE;
    }
  }
  return FALSE;
}

/* After a member: ',' (TRUE, *more) or '}' (TRUE, !*more). */
static gboolean
scan_next(KinetoCursor *c, gboolean *more)
{
  kineto_skip_space(c);
  if (c->p >= c->end || (*c->p != ',' && *c->p != '}'))
    return FALSE;
  *more = *c->p == ',';
  c->p++;
  return TRUE;
}

/* Whether an args key is one of KINETO_ARGS_READ. */
static gboolean
arg_read_later(const char *key, gsize len)
{
  static const char *const READ[] = KINETO_ARGS_READ;
  for (gsize i = 0; i < G_N_ELEMENTS(READ); i++)
    if (strncmp(READ[i], key, len) == 0 && READ[i][len] == '\0')
      return TRUE;
  return FALSE;
}

/* A flat "args" object: its "Sequence number" and "correlation" into
 * seq and corr (type 0 when absent); *read set when a key is one read
 * later (KINETO_ARGS_READ). */
static gboolean
scan_args(KinetoCursor *c, cJSON *seq, cJSON *corr, gboolean *read)
{
  *seq = *corr = (cJSON){0};
  *read = FALSE;
  c->p++; /* '{' */
  kineto_skip_space(c);
  if (c->p < c->end && *c->p == '}') {
    c->p++;
    return TRUE;
  }
  for (gboolean more = TRUE; more;) {
    const char *key;
    gsize len;
    kineto_skip_space(c);
    if (!scan_string(c, &key, &len) || !kineto_expect(c, ':'))
      return FALSE;
    kineto_skip_space(c);
    cJSON value;
    if (!scan_scalar(c, &value, NULL))
      return FALSE;
    cJSON *slot = len == 15 && memcmp(key, "Sequence number", 15) == 0 ? seq
                  : len == 11 && memcmp(key, "correlation", 11) == 0   ? corr
                                                                       : NULL;
    if (slot != NULL && slot->type == 0)
      *slot = value;
    else if (slot == NULL && !*read)
      *read = arg_read_later(key, len);
    if (!scan_next(c, &more))
      return FALSE;
  }
  return TRUE;
}

/* Member `key` of an event: its index in KinetoFlat.value, or -1 for a
 * key not read. By length first: every member of 4·10^6 events comes
 * here, and comparing with each of the seven keys (a strlen each) was a
 * tenth of the scan. */
static int
member_slot(const char *key, gsize len)
{
  switch (len) {
  case 2:
    return key[0] == 'p' && key[1] == 'h' ? 0 : key[0] == 't' && key[1] == 's' ? 2 : -1;
  case 3:
    return memcmp(key, "dur", 3) == 0   ? 3
           : memcmp(key, "cat", 3) == 0 ? 4
           : memcmp(key, "pid", 3) == 0 ? 5
           : memcmp(key, "tid", 3) == 0 ? 6
                                        : -1;
  case 4:
    return memcmp(key, "name", 4) == 0 ? 1 : -1;
  default:
    return -1;
  }
}

gboolean
kineto_scan_flat(KinetoCursor *c, GString *const text[KINETO_FLAT_MEMBERS], KinetoFlat *out)
{
  *out = (KinetoFlat){.args = NULL};
  if (c->p >= c->end || *c->p != '{')
    return FALSE;
  c->p++;
  kineto_skip_space(c);
  if (c->p < c->end && *c->p == '}')
    return FALSE; /* {}: not an event; cJSON's path says what it is */
  for (gboolean more = TRUE; more;) {
    const char *key;
    gsize len;
    kineto_skip_space(c);
    if (!scan_string(c, &key, &len) || !kineto_expect(c, ':'))
      return FALSE;
    kineto_skip_space(c);
    int slot = member_slot(key, len);
    if (len == 4 && memcmp(key, "args", 4) == 0) {
      if (c->p >= c->end || *c->p != '{')
        return FALSE;
      const char *start = c->p;
      cJSON seq, corr;
      gboolean read;
      if (!scan_args(c, &seq, &corr, &read))
        return FALSE;
      if (out->args == NULL) {
        out->args = start;
        out->args_end = c->p;
        out->seq = seq;
        out->corr = corr;
        out->args_read = read;
      }
    } else {
      /* the first value of a member read needs its text; the rest is skipped */
      gboolean first = slot >= 0 && out->value[slot].type == 0;
      cJSON value;
      if (!scan_scalar(c, &value, first ? text[slot] : NULL))
        return FALSE;
      if (first)
        out->value[slot] = value;
    }
    if (!scan_next(c, &more))
      return FALSE;
  }
  return TRUE;
}
