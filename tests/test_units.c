/* test_units.c: the unit parsers (every accepted spelling family and every
 * kind of error) and the human formatting of sizes, times, rates, counts. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/limits.h"
#include "base/units.h"

static void
test_bytes(void)
{
  /* Decimal prefixes are powers of 1000, binary ones powers of 1024. */
  static const struct {
    const char *text;
    int64_t bytes;
  } cases[] = {
    {"4096B", 4096},
    {"512 MB", 512000000},
    {"1.5TB", 1500000000000},
    {"80GiB", 80LL << 30},
    {"1KiB", 1024},
    {"2 kB", 2000},
    {"0B", 0},
    {"3MiB", 3LL << 20},
    {"1PB", 1000000000000000LL},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) error = NULL;
    int64_t bytes = -1;
    g_assert_true(st_parse_bytes(cases[i].text, &bytes, &error));
    g_assert_no_error(error);
    g_assert_cmpint(bytes, ==, cases[i].bytes);
  }
  /* Rounded to the nearest byte: 1.5 B -> 2 B. */
  int64_t bytes = 0;
  g_assert_true(st_parse_bytes("1.5B", &bytes, NULL));
  g_assert_cmpint(bytes, ==, 2);
}

static void
test_bandwidth(void)
{
  double v = 0;
  g_assert_true(st_parse_bandwidth("450GB/s", &v, NULL));
  g_assert_cmpfloat_with_epsilon(v, 450e9, 1);
  g_assert_true(st_parse_bandwidth("12.5 GB/s", &v, NULL));
  g_assert_cmpfloat_with_epsilon(v, 12.5e9, 1);
  /* 100 Gbit/s is 12.5 GB/s: bits divided by 8. */
  g_assert_true(st_parse_bandwidth("100Gbit/s", &v, NULL));
  g_assert_cmpfloat_with_epsilon(v, 12.5e9, 1);
  g_assert_true(st_parse_bandwidth("3.35TB/s", &v, NULL));
  g_assert_cmpfloat_with_epsilon(v, 3.35e12, 1);
  g_assert_true(st_parse_bandwidth("1GiB/s", &v, NULL));
  g_assert_cmpfloat_with_epsilon(v, 1073741824.0, 1e-6);
}

static void
test_duration(void)
{
  int64_t ns = 0;
  g_assert_true(st_parse_duration("2us", &ns, NULL));
  g_assert_cmpint(ns, ==, 2000);
  g_assert_true(st_parse_duration("1.5 ms", &ns, NULL));
  g_assert_cmpint(ns, ==, 1500000);
  g_assert_true(st_parse_duration("40ns", &ns, NULL));
  g_assert_cmpint(ns, ==, 40);
  g_assert_true(st_parse_duration("1s", &ns, NULL));
  g_assert_cmpint(ns, ==, 1000000000);
  /* Rounded to the nearest ns. */
  g_assert_true(st_parse_duration("0.0026us", &ns, NULL));
  g_assert_cmpint(ns, ==, 3);
}

static void
test_flop_rate(void)
{
  double v = 0;
  g_assert_true(st_parse_flop_rate("989TFLOP/s", &v, NULL));
  g_assert_cmpfloat_with_epsilon(v, 989e12, 1);
  g_assert_true(st_parse_flop_rate("67 TFLOPS", &v, NULL));
  g_assert_cmpfloat_with_epsilon(v, 67e12, 1);
  g_assert_true(st_parse_flop_rate("19.5TFLOP/s", &v, NULL));
  g_assert_cmpfloat_with_epsilon(v, 19.5e12, 1);
  g_assert_true(st_parse_flop_rate("1.2PFLOP/s", &v, NULL));
  g_assert_cmpfloat_with_epsilon(v, 1.2e15, 1);
}

/* Every error is ST_BASE_ERROR / ST_ERROR_PARSE and quotes the text. */
static void
expect_parse_error(gboolean ok, GError *error, const char *fragment)
{
  g_assert_false(ok);
  g_assert_error(error, ST_BASE_ERROR, ST_ERROR_PARSE);
  if (strstr(error->message, fragment) == NULL)
    g_error("'%s' does not mention '%s'", error->message, fragment);
}

/* A macro, so that `error` is read after the parser has set it. */
#define EXPECT_PARSE_ERROR(call, error, fragment)                                              \
  do {                                                                                         \
    gboolean ok_ = (call);                                                                     \
    expect_parse_error(ok_, (error), (fragment));                                              \
  } while (0)

static void
test_errors(void)
{
  int64_t i64;
  double d;
  struct {
    const char *text;
    const char *fragment;
  } bytes_errors[] = {
    {"", "empty"},
    {"GB", "must start with a number"},   /* no number */
    {"nan", "must start with a number"},  /* not finite */
    {"80", "has no unit"},                /* bare number: never silently bytes */
    {"80 gb", "unknown unit 'gb'"},       /* case matters */
    {"512  MB", "unknown unit"},          /* one optional space, not two */
    {"512MB ", "unknown unit"},           /* nothing after the unit */
    {"2us", "unknown unit 'us'"},         /* a duration is not a size */
    {"-1GB", "cannot be negative"},
    {"1e30B", "too large"},
  };
  for (gsize k = 0; k < G_N_ELEMENTS(bytes_errors); k++) {
    g_autoptr(GError) error = NULL;
    EXPECT_PARSE_ERROR(st_parse_bytes(bytes_errors[k].text, &i64, &error), error,
                       bytes_errors[k].fragment);
  }
  {
    g_autoptr(GError) error = NULL;
    EXPECT_PARSE_ERROR(st_parse_bandwidth("450 GBs", &d, &error), error, "unknown unit 'GBs'");
    /* The message lists what would have been accepted. */
    g_assert_nonnull(strstr(error->message, "GB/s"));
  }
  {
    g_autoptr(GError) error = NULL;
    EXPECT_PARSE_ERROR(st_parse_bandwidth("450", &d, &error), error, "has no unit");
  }
  {
    g_autoptr(GError) error = NULL;
    EXPECT_PARSE_ERROR(st_parse_duration("2 sec", &i64, &error), error, "unknown unit 'sec'");
  }
  {
    g_autoptr(GError) error = NULL;
    EXPECT_PARSE_ERROR(st_parse_duration("-2us", &i64, &error), error, "cannot be negative");
  }
  {
    g_autoptr(GError) error = NULL;
    EXPECT_PARSE_ERROR(st_parse_duration("1e12s", &i64, &error), error, "too long");
  }
  {
    g_autoptr(GError) error = NULL;
    EXPECT_PARSE_ERROR(st_parse_flop_rate("989TFLOP", &d, &error), error,
                       "unknown unit 'TFLOP'");
  }
  {
    g_autoptr(GError) error = NULL;
    EXPECT_PARSE_ERROR(st_parse_flop_rate(NULL, &d, &error), error, "empty");
  }
}

static void
expect_format(char *text /* transfer full */, const char *expected)
{
  g_assert_cmpstr(text, ==, expected);
  g_free(text);
}

static void
test_format(void)
{
  /* Binary prefixes for sizes, two decimals. */
  expect_format(st_format_bytes(512), "512 B");
  expect_format(st_format_bytes(1536LL << 20), "1.50 GiB");
  expect_format(st_format_bytes(80LL << 30), "80.00 GiB");
  expect_format(st_format_bytes(2048), "2.00 KiB");
  /* Durations pick ns, us, ms or s by magnitude. */
  expect_format(st_format_duration(999), "999 ns");
  expect_format(st_format_duration(1500), "1.5 us");
  expect_format(st_format_duration(3200000), "3.20 ms");
  expect_format(st_format_duration(2500000000), "2.500 s");
  /* Rates in decimal units, as link specs are written. */
  expect_format(st_format_bandwidth(450e9), "450.0 GB/s");
  expect_format(st_format_bandwidth(12.5e6), "12.5 MB/s");
  expect_format(st_format_bandwidth(100), "100 B/s");
  /* Counts: SI prefix, 3 significant digits. */
  expect_format(st_format_count(123), "123");
  expect_format(st_format_count(1234), "1.23k");
  expect_format(st_format_count(25.6e6), "25.6M");
  expect_format(st_format_count(1.32e9), "1.32G");
  expect_format(st_format_count(175e9), "175G");
}

/* What the formatter prints, the parser reads back (to its precision). */
static void
test_round_trip(void)
{
  int64_t ns = 0;
  g_autofree char *d = st_format_duration(1500);
  g_assert_true(st_parse_duration(d, &ns, NULL));
  g_assert_cmpint(ns, ==, 1500);
  double bw = 0;
  g_autofree char *b = st_format_bandwidth(450e9);
  g_assert_true(st_parse_bandwidth(b, &bw, NULL));
  g_assert_cmpfloat_with_epsilon(bw, 450e9, 1);
  int64_t bytes = 0;
  g_autofree char *s = st_format_bytes(1536LL << 20);
  g_assert_true(st_parse_bytes(s, &bytes, NULL));
  g_assert_cmpint(bytes, ==, 1536LL << 20);
}

/* Each documented range reads as written: its texts parse to its bounds, and
 * a value beyond either bound is refused with the value and the bound. */
static void
test_ranges(void)
{
  const StRange *const ranges[] = {&ST_RANGE_LINK_BANDWIDTH, &ST_RANGE_MEMORY_BANDWIDTH,
                                   &ST_RANGE_FLOP_RATE,      &ST_RANGE_LATENCY,
                                   &ST_RANGE_DEVICE_MEMORY,  &ST_RANGE_SIZE};
  for (gsize i = 0; i < G_N_ELEMENTS(ranges); i++) {
    const StRange *r = ranges[i];
    double lo = -1, hi = -1;
    int64_t lo_i = -1, hi_i = -1;
    if (r == &ST_RANGE_LINK_BANDWIDTH || r == &ST_RANGE_MEMORY_BANDWIDTH) {
      g_assert_true(st_parse_bandwidth(r->min_text, &lo, NULL));
      g_assert_true(st_parse_bandwidth(r->max_text, &hi, NULL));
    } else if (r == &ST_RANGE_FLOP_RATE) {
      g_assert_true(st_parse_flop_rate(r->min_text, &lo, NULL));
      g_assert_true(st_parse_flop_rate(r->max_text, &hi, NULL));
    } else if (r == &ST_RANGE_LATENCY) {
      g_assert_true(st_parse_duration(r->min_text, &lo_i, NULL));
      g_assert_true(st_parse_duration(r->max_text, &hi_i, NULL));
      lo = (double)lo_i, hi = (double)hi_i;
    } else {
      g_assert_true(st_parse_bytes(r->min_text, &lo_i, NULL));
      g_assert_true(st_parse_bytes(r->max_text, &hi_i, NULL));
      lo = (double)lo_i, hi = (double)hi_i;
    }
    g_assert_cmpfloat(lo, ==, r->min);
    g_assert_cmpfloat(hi, ==, r->max);
    g_assert_true(st_range_check(r, r->min, r->min_text, NULL));
    g_assert_true(st_range_check(r, r->max, r->max_text, NULL));
    g_autoptr(GError) error = NULL;
    g_assert_false(st_range_check(r, r->max * 2, "big", &error));
    g_assert_error(error, ST_BASE_ERROR, ST_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, "'big' is above"));
    g_assert_nonnull(strstr(error->message, r->max_text));
  }
  /* The case: a link of 1e-300 GB/s parses, and is refused. */
  double bw = 0;
  g_autoptr(GError) error = NULL;
  g_assert_true(st_parse_bandwidth("1e-300GB/s", &bw, NULL));
  g_assert_false(st_range_check(&ST_RANGE_LINK_BANDWIDTH, bw, "1e-300GB/s", &error));
  g_assert_nonnull(strstr(error->message, "'1e-300GB/s' is below the smallest link bandwidth"));
  g_assert_false(st_range_check(&ST_RANGE_FLOP_RATE, NAN, "nan", NULL));
}

/* The clock saturates instead of overflowing; products report overflow. */
static void
test_checked(void)
{
  g_assert_cmpint(st_ns_ceil(1.0), ==, 1);
  g_assert_cmpint(st_ns_ceil(1.00001), ==, 2);
  g_assert_cmpint(st_ns_ceil(1.0 + 1e-7), ==, 1); /* rounding error, not a nanosecond */
  g_assert_cmpint(st_ns_ceil(-5), ==, 0);
  g_assert_cmpint(st_ns_ceil(NAN), ==, 0);
  g_assert_cmpint(st_ns_ceil(1e19), ==, ST_TIME_MAX);
  g_assert_cmpint(st_ns_ceil(INFINITY), ==, ST_TIME_MAX);
  g_assert_cmpint(st_ns_ceil(9223372036854774784.0), ==, INT64_C(9223372036854774784));
  g_assert_cmpint(st_ns_floor(2.9), ==, 2);
  g_assert_cmpint(st_ns_floor(1e300), ==, ST_TIME_MAX);
  g_assert_cmpint(st_time_add(5, 7), ==, 12);
  g_assert_cmpint(st_time_add(ST_TIME_MAX - 1, 2), ==, ST_TIME_MAX);
  g_assert_cmpint(st_time_add(ST_TIME_MAX, ST_TIME_MAX), ==, ST_TIME_MAX);
  int64_t out = 42;
  g_assert_true(st_mul_i64(INT64_C(1) << 31, INT64_C(1) << 31, &out));
  g_assert_cmpint(out, ==, INT64_C(1) << 62);
  g_assert_false(st_mul_i64(INT64_C(1) << 32, INT64_C(1) << 31, &out));
  g_assert_cmpint(out, ==, INT64_C(1) << 62);
  g_assert_false(st_mul_i64(-(INT64_C(1) << 62), 4, &out));
  /* 2^20 nodes x 4096 GPUs: the wrap to "0 x H100", in 64 bits. */
  g_assert_true(st_mul_i64(1 << 20, 4096, &out));
  g_assert_cmpint(out, >, ST_MAX_GPUS);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/units/bytes", test_bytes);
  g_test_add_func("/units/bandwidth", test_bandwidth);
  g_test_add_func("/units/duration", test_duration);
  g_test_add_func("/units/flop-rate", test_flop_rate);
  g_test_add_func("/units/errors", test_errors);
  g_test_add_func("/units/format", test_format);
  g_test_add_func("/units/round-trip", test_round_trip);
  g_test_add_func("/units/ranges", test_ranges);
  g_test_add_func("/units/checked", test_checked);
  return g_test_run();
}
