/* util.h: tiny helpers with no better home. */
#pragma once

#include <glib.h>
#include <stdint.h>

/* qsort / g_array_sort comparators. */
int st_compare_int32(gconstpointer a, gconstpointer b);
int st_compare_int64(gconstpointer a, gconstpointer b);
int st_compare_double(gconstpointer a, gconstpointer b);

/* The q-quantile (q in [0, 1]) of `n` >= 1 sorted values, linear between
 * ranks: the median at 0.5; p90 - p10 is the spread profiles record. */
double st_quantile(const double *sorted, int n, double q);

/* v in decimal, as printf's "%" G_GINT64_FORMAT writes it, without printf:
 * for keys and signatures made millions of times (a model of 10^6 layers,
 * a profile of 10^6 entries). st_int_text writes into `out` and returns
 * it; st_string_append_int appends. */
#define ST_INT_TEXT_SIZE 24
const char *st_int_text(int64_t v, char out[ST_INT_TEXT_SIZE]);
void st_string_append_int(GString *s, int64_t v);

/* ceil(a / b) for positive b. */
static inline int64_t
st_div_ceil(int64_t a, int64_t b)
{
  return (a + b - 1) / b;
}

/* "s" unless n is 1: "%d GPU%s", n, st_plural(n). */
static inline const char *
st_plural(int64_t n)
{
  return n == 1 ? "" : "s";
}
