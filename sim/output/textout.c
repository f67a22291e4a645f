/* textout.c: see textout.h. */
#include "output/textout.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#include "base/error.h"
#include "output/output.h"

gboolean
st_text_open(StTextOut *out, const char *path, GError **error)
{
  out->len = 0;
  out->error = 0;
  out->path = g_strdup(path);
  out->tmp = g_strconcat(path, ".tmp", NULL);
  out->f = g_fopen(out->tmp, "wb");
  if (out->f == NULL) {
    int saved = errno;
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s: cannot create: %s", out->tmp,
                g_strerror(saved));
    g_clear_pointer(&out->path, g_free);
    g_clear_pointer(&out->tmp, g_free);
    return FALSE;
  }
  out->buf = g_malloc(ST_TEXT_BUF);
  return TRUE;
}

void
st_text_flush(StTextOut *out)
{
  if (out->len > 0 && out->error == 0 && fwrite(out->buf, 1, out->len, out->f) != out->len)
    out->error = errno ? errno : EIO;
  out->len = 0;
}

void
st_text_mem_slow(StTextOut *out, const char *text, size_t n)
{
  st_text_flush(out);
  if (n > ST_TEXT_BUF) {
    if (out->error == 0 && fwrite(text, 1, n, out->f) != n)
      out->error = errno ? errno : EIO;
    return;
  }
  memcpy(out->buf, text, n);
  out->len = n;
}

/* Digits of `v` into the end of `end`'s buffer, backwards, two at a time;
 * returns the start. */
static char *
digits(char *end, uint64_t v)
{
  static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
                                 "25262728293031323334353637383940414243444546474849"
                                 "50515253545556575859606162636465666768697071727374"
                                 "75767778798081828384858687888990919293949596979899";
  while (v >= 100) {
    unsigned k = (unsigned)(v % 100) * 2;
    v /= 100;
    *--end = pairs[k + 1];
    *--end = pairs[k];
  }
  if (v >= 10) {
    unsigned k = (unsigned)v * 2;
    *--end = pairs[k + 1];
    *--end = pairs[k];
  } else {
    *--end = (char)('0' + v);
  }
  return end;
}

void
st_text_int(StTextOut *out, int64_t v)
{
  char buf[24];
  char *end = buf + sizeof buf;
  char *p = digits(end, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
  if (v < 0)
    *--p = '-';
  st_text_mem(out, p, (size_t)(end - p));
}

void
st_text_us(StTextOut *out, int64_t ns)
{
  char buf[32];
  char *end = buf + sizeof buf;
  uint64_t mag = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
  unsigned frac = (unsigned)(mag % 1000);
  char *p = end;
  for (int i = 0; i < 3; i++, frac /= 10)
    *--p = (char)('0' + frac % 10);
  *--p = '.';
  p = digits(p, mag / 1000);
  if (ns < 0)
    *--p = '-';
  st_text_mem(out, p, (size_t)(end - p));
}

void
st_text_abort(StTextOut *out)
{
  if (out->f != NULL)
    fclose(out->f);
  out->f = NULL;
  if (out->tmp != NULL)
    g_unlink(out->tmp);
  g_clear_pointer(&out->path, g_free);
  g_clear_pointer(&out->tmp, g_free);
  g_clear_pointer(&out->buf, g_free);
}

gboolean
st_text_close(StTextOut *out, GError **error)
{
  st_text_flush(out);
  if (fclose(out->f) != 0 && out->error == 0)
    out->error = errno ? errno : EIO;
  out->f = NULL;
  if (out->error != 0) {
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s: write failed: %s", out->tmp,
                g_strerror(out->error));
    st_text_abort(out);
    return FALSE;
  }
  if (g_rename(out->tmp, out->path) != 0) {
    int saved = errno;
    g_set_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO, "%s: cannot rename from %s: %s", out->path,
                out->tmp, g_strerror(saved));
    st_text_abort(out);
    return FALSE;
  }
  g_clear_pointer(&out->path, g_free);
  g_clear_pointer(&out->tmp, g_free);
  g_clear_pointer(&out->buf, g_free);
  return TRUE;
}
