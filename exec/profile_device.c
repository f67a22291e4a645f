/* profile_device.c: the profiler's session on one device (profile_private.h):
 * opening the backend and its streams, naming the profile, timing replays
 * into medians and spreads, memory and data, progress and notes. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#include "base/util.h"
#include "exec/check.h"
#include "exec/mix.h"
#include "exec/profile_private.h"

void
st_profiler_options_init(StProfilerOptions *o)
{
  *o = (StProfilerOptions){
    .backend = "auto",
    .comm = "auto",
    .precision = ST_PRECISION_FP32,
    .warmup = 5,
    .repeats = 30,
    .timeout_s = 300,
  };
}

void
st_profiler_report_clear(StProfilerReport *r)
{
  g_clear_pointer(&r->device, g_free);
  g_clear_pointer(&r->machine, g_free);
  g_clear_pointer(&r->notes, g_ptr_array_unref);
  r->measured = 0;
  r->writer = FALSE;
}

void
prof_note(ProfDev *d, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_ptr_array_add(d->report->notes, g_strdup_vprintf(format, args));
  va_end(args);
}

gboolean
prof_open(ProfDev *d, const StProfilerOptions *o, int gpu, StProfilerReport *report,
          GError **error)
{
  *d = (ProfDev){.o = o, .report = report};
  if (report->notes == NULL)
    report->notes = g_ptr_array_new_with_free_func(g_free);
  report->writer = TRUE;
  d->dev = st_device_open(o->backend != NULL ? o->backend : "auto", gpu, error);
  if (d->dev == NULL)
    return FALSE;
  d->b = d->dev->backend;
  if (d->b->replay == NULL) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "the %s backend cannot replay work for timing", d->b->name);
    return FALSE;
  }
  d->k = d->b->kernels(d->dev);
  d->dt = o->precision == ST_PRECISION_MIXED ? ST_KDT_BF16 : ST_KDT_F32;
  for (int i = 0; i < PROF_N_STREAMS; i++) {
    d->streams[i] = d->b->stream_new(d->dev, i == PROF_STREAM_HIGH ? 1 : 0, error);
    if (d->streams[i] == NULL)
      return FALSE;
  }
  d->b->facts(d->dev, &d->facts);
  d->device_name = g_strdup(o->device_name != NULL ? o->device_name
                            : d->facts.name != NULL ? d->facts.name
                                                    : d->b->name);
  g_free(report->device);
  g_free(report->machine);
  report->device = g_strdup(d->device_name);
  report->machine = g_strdup(d->facts.machine);
  return TRUE;
}

void
prof_close(ProfDev *d)
{
  if (d->dev != NULL) {
    for (int i = 0; i < PROF_N_STREAMS; i++)
      if (d->streams[i] != NULL)
        d->b->stream_free(d->dev, d->streams[i]);
    d->b->close(d->dev);
  }
  st_device_facts_clear(&d->facts);
  g_free(d->device_name);
  *d = (ProfDev){0};
}

void
prof_name_profile(ProfDev *d, StProfile *profile)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_utc();
  g_autofree char *date = g_date_time_format(now, "%Y-%m-%d");
  st_profile_set_device(profile, d->device_name, d->facts.driver, d->facts.runtime, date,
                        "stagger profile");
  st_profile_set_machine(profile, d->facts.machine, st_precision_name(d->o->precision));
}

/* ---- timing -------------------------------------------------------------------- */

gboolean
prof_measure(ProfDev *d, const StReplayPart *parts, int n, gboolean graph, ProfTiming *t,
             GError **error)
{
  g_return_val_if_fail(n >= 1 && n <= PROF_MAX_PARTS, FALSE);
  int runs = MAX(d->o->repeats, 1);
  g_autofree int64_t *times = g_new(int64_t, (size_t)runs * n);
  if (!d->b->replay(d->dev, parts, n, graph, MAX(d->o->warmup, 0), runs, times, error))
    return FALSE;
  g_autofree double *v = g_new(double, runs);
  g_autofree double *span = g_new(double, runs);
  for (int r = 0; r < runs; r++) {
    span[r] = 0;
    for (int p = 0; p < n; p++)
      span[r] = MAX(span[r], (double)times[(size_t)r * n + p]);
  }
  for (int p = 0; p < n; p++) {
    for (int r = 0; r < runs; r++)
      v[r] = (double)times[(size_t)r * n + p];
    qsort(v, runs, sizeof(double), st_compare_double);
    t->end_ns[p] = round(st_quantile(v, runs, 0.5));
  }
  /* Whole ns: the clocks resolve no finer, and files stay short. */
  qsort(span, runs, sizeof(double), st_compare_double);
  t->span_ns = round(st_quantile(span, runs, 0.5));
  t->spread_ns = round(st_quantile(span, runs, 0.9)) - round(st_quantile(span, runs, 0.1));
  d->report->measured++;
  return TRUE;
}

void
prof_step(ProfDev *d, const char *what)
{
  d->done++;
  /* Under NCCL every process measures; the one that writes reports. */
  if (d->o->progress != NULL && d->report->writer)
    d->o->progress(d->o->progress_data, d->done, MAX(d->total, d->done), what);
}

/* ---- memory and data ------------------------------------------------------------ */

gboolean
prof_alloc(ProfDev *d, void **ptr, size_t bytes, const char *what, GError **error)
{
  *ptr = NULL;
  int status = d->k->alloc(ptr, MAX(bytes, 1));
  if (status != 0 || *ptr == NULL) {
    g_autofree char *size = g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_OOM, "%s: %s of device memory: %s", what,
                size, st_exec_status_text(d->k->name, status != 0 ? status : ST_K_ENOMEM));
    return FALSE;
  }
  ST_KCHECK(d->k->memset0(d->streams[0], *ptr, MAX(bytes, 1)), d->k->name, error);
  return d->b->stream_sync(d->dev, d->streams[0], error);
}

gboolean
prof_upload(ProfDev *d, void *dst, const void *src, size_t bytes, GError **error)
{
  ST_KCHECK(d->k->copy(d->streams[0], dst, src, bytes, 1), d->k->name, error);
  return d->b->stream_sync(d->dev, d->streams[0], error);
}

gboolean
prof_upload_random(ProfDev *d, void *dst, size_t n, float scale, uint64_t seed, GError **error)
{
  size_t es = st_kdt_size(d->dt);
  g_autofree char *host = g_malloc(MAX(n * es, 1));
  for (size_t i = 0; i < n; i++) {
    float u = (float)((double)(st_splitmix64(seed ^ st_splitmix64(i)) >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
    if (d->dt == ST_KDT_BF16)
      ((uint16_t *)host)[i] = st_f32_to_bf16(u * scale);
    else
      ((float *)host)[i] = u * scale;
  }
  return prof_upload(d, dst, host, n * es, error);
}

GArray *
prof_sizes(int64_t min, int64_t max)
{
  GArray *sizes = g_array_new(FALSE, FALSE, sizeof(int64_t));
  int64_t s = MAX(min, 1);
  for (; s <= max; s *= 4) {
    g_array_append_val(sizes, s);
    if (s > G_MAXINT64 / 4)
      break;
  }
  if (sizes->len == 0 || g_array_index(sizes, int64_t, sizes->len - 1) != max)
    g_array_append_val(sizes, max);
  return sizes;
}
