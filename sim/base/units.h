/* units.h: strict parsing and human formatting of sizes, rates and times.
 *
 * Every quantity in a model, cluster or option string carries its unit; a bare
 * number is refused where a unit is required, so "80" never silently means
 * bytes when the user meant GiB. Decimal prefixes (k, M, G, T, P) are powers of
 * 1000, binary ones (Ki, Mi, Gi, Ti) powers of 1024. Parsers accept an optional
 * space between number and unit, nothing else around them.
 *
 * Internal units: bytes as int64, rates as double per second, time as int64
 * nanoseconds (the simulator's clock).
 */
#pragma once

#include <glib.h>
#include <stdint.h>

/* "80GiB", "512 MB", "1.5TB", "4096B". Result in bytes, rounded to the nearest byte. */
gboolean st_parse_bytes(const char *text, int64_t *bytes, GError **error);

/* "450GB/s", "12.5 GB/s", "100Gbit/s" (bits are divided by 8). Bytes per second. */
gboolean st_parse_bandwidth(const char *text, double *bytes_per_s, GError **error);

/* "2us", "1.5 ms", "40ns", "1s". Nanoseconds, rounded to the nearest ns. */
gboolean st_parse_duration(const char *text, int64_t *ns, GError **error);

/* "989TFLOP/s", "67 TFLOPS". FLOP per second. */
gboolean st_parse_flop_rate(const char *text, double *flop_per_s, GError **error);

/* ---- physical ranges ------------------------------------------------------
 *
 * A quantity read from a file or the command line is checked against the
 * range of its kind before anything uses it: "1e-300GB/s" parses, but no
 * link is that slow, and the times it would give overflow the clock. The
 * ranges reach orders of magnitude beyond today's hardware on both sides
 * (an H100's NVLink is 450 GB/s per direction, its bf16 peak 989 TFLOP/s);
 * docs/RELIABILITY.md lists them. */
typedef struct {
  const char *what;     /* "link bandwidth" */
  double min, max;      /* in the internal unit (bytes, bytes/s, ns, FLOP/s) */
  const char *min_text; /* the same as a user writes it: "1MB/s" */
  const char *max_text;
} StRange;

extern const StRange ST_RANGE_LINK_BANDWIDTH;   /* 1 MB/s .. 100 TB/s, per GPU or NIC */
extern const StRange ST_RANGE_MEMORY_BANDWIDTH; /* 1 GB/s .. 100 TB/s */
extern const StRange ST_RANGE_FLOP_RATE;        /* 1 GFLOP/s .. 100 PFLOP/s */
extern const StRange ST_RANGE_LATENCY;          /* 0 .. 1 s */
extern const StRange ST_RANGE_DEVICE_MEMORY;    /* 1 MiB .. 1 PiB */
extern const StRange ST_RANGE_SIZE;             /* 0 .. 1 PiB: a buffer, a message, a bucket */

/* Fails unless min <= value <= max, quoting `text` (what the user wrote) and
 * the range: "'1e-300GB/s' is below the smallest link bandwidth accepted,
 * 1MB/s". */
gboolean st_range_check(const StRange *range, double value, const char *text, GError **error);

/* Formatting for tables: "1.50 GiB", "3.2 ms", "450 GB/s", "1.23 TFLOP". Transfer full. */
char *st_format_bytes(int64_t bytes);
char *st_format_duration(int64_t ns);
char *st_format_bandwidth(double bytes_per_s);
char *st_format_count(double value); /* 25.6M, 1.32G: SI prefix, 3 significant digits */

/* ns as microseconds with exactly three decimals ("1234.567"), through
 * integer arithmetic: no locale, the same bytes everywhere. Returns `buf`. */
#define ST_US_TEXT_LEN 32
char *st_us_text(int64_t ns, char buf[ST_US_TEXT_LEN]);
