/* textout.h: a file written as text, fast, atomically.
 *
 * The big outputs (trace.json, ops.csv, memory.csv) reach gigabytes for
 * millions of ops: they are formatted into a buffer by hand (integers and
 * microsecond times through integer arithmetic, no printf, no locale) and
 * streamed to PATH.tmp, renamed to PATH when closed without error, so a
 * reader never sees half a file and memory does not grow with the file.
 * Any write error is kept and reported once, by st_text_close.
 */
#pragma once

#include <glib.h>
#include <stdint.h>
#include <stdio.h>

#define ST_TEXT_BUF (1 << 16)

typedef struct {
  FILE *f;
  char *path, *tmp;
  size_t len;           /* bytes in buf */
  int error;            /* errno of the first failure, 0 when none */
  char *buf;            /* [ST_TEXT_BUF] */
} StTextOut;

/* Opens PATH.tmp for writing; FALSE with `error` set when it cannot. The
 * caller must then call st_text_close (or st_text_abort). */
gboolean st_text_open(StTextOut *out, const char *path, GError **error);
/* Flushes, closes and renames into place; on any failure along the way the
 * temporary file is removed and `error` names the file. */
gboolean st_text_close(StTextOut *out, GError **error);
/* Closes and removes the temporary file. */
void st_text_abort(StTextOut *out);

void st_text_flush(StTextOut *out);

static inline void
st_text_c(StTextOut *out, char c)
{
  if (out->len == ST_TEXT_BUF)
    st_text_flush(out);
  out->buf[out->len++] = c;
}

/* The slow path of st_text_mem: flushes first, or writes a long text through. */
void st_text_mem_slow(StTextOut *out, const char *text, size_t n);

static inline void
st_text_mem(StTextOut *out, const char *text, size_t n)
{
  if (out->len + n > ST_TEXT_BUF) {
    st_text_mem_slow(out, text, n);
    return;
  }
  __builtin_memcpy(out->buf + out->len, text, n);
  out->len += n;
}

static inline void
st_text_str(StTextOut *out, const char *text)
{
  st_text_mem(out, text, __builtin_strlen(text));
}

/* Decimal integers. */
void st_text_int(StTextOut *out, int64_t v);
/* Nanoseconds as microseconds with exactly three decimals, as st_us_text. */
void st_text_us(StTextOut *out, int64_t ns);
