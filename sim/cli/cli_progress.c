/* cli_progress.c: a progress line on stderr for long commands (cli.h).
 *
 * A thread wakes every quarter of a second and, once the command has run
 * longer than the delay, writes what it does: the phase the command set
 * and, while simulating, the engine's counters. On a terminal the line is
 * rewritten in place and cleared when the phase changes or the command
 * ends; elsewhere (a log file, CI) a full line is written when a phase
 * starts and every 10 s, so a batch job's log shows it is alive without
 * growing much.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/units.h"
#include "cli/cli.h"

struct StCliProgress {
  char *label;
  GThread *thread;
  GMutex lock;
  GCond wake;
  gboolean stop;         /* under lock */
  char *phase;           /* under lock */
  StEngineProgress engine;
  gboolean tty;
  gint64 delay_us;       /* show nothing before this */
  gint64 start_us;
  gint64 last_us;        /* last line written, 0 for none */
  gboolean shown_on_tty; /* a line to clear */
};

/* Writes the line; the lock is held. */
static void
show(StCliProgress *p, gint64 now)
{
  g_autoptr(GString) line = g_string_new(NULL);
  g_string_append_printf(line, "  %s: %s", p->label, p->phase);
  int64_t total = atomic_load_explicit(&p->engine.ops_total, memory_order_relaxed);
  int64_t done = atomic_load_explicit(&p->engine.ops_done, memory_order_relaxed);
  int64_t events = atomic_load_explicit(&p->engine.events, memory_order_relaxed);
  if (total > 0) {
    g_autofree char *t = st_format_count((double)total);
    g_autofree char *ev = st_format_count((double)events);
    g_string_append_printf(line, ": %.0f%% of %s op executions, %s events",
                           100.0 * (double)MIN(done, total) / (double)total, t, ev);
  }
  g_string_append_printf(line, ", %.0f s", (double)(now - p->start_us) / 1e6);
  if (p->tty)
    fprintf(stderr, "\r\033[K%s", line->str);
  else
    fprintf(stderr, "%s\n", line->str);
  fflush(stderr);
  p->last_us = now;
  p->shown_on_tty = p->tty;
}

static void
clear_line(StCliProgress *p)
{
  if (p->shown_on_tty) {
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
    p->shown_on_tty = FALSE;
  }
}

static gpointer
watch(gpointer data)
{
  StCliProgress *p = data;
  g_mutex_lock(&p->lock);
  while (!p->stop) {
    gint64 now = g_get_monotonic_time();
    gint64 every = p->tty ? G_USEC_PER_SEC / 2 : 10 * G_USEC_PER_SEC;
    if (now - p->start_us >= p->delay_us && (p->last_us == 0 || now - p->last_us >= every))
      show(p, now);
    g_cond_wait_until(&p->wake, &p->lock, g_get_monotonic_time() + G_USEC_PER_SEC / 4);
  }
  g_mutex_unlock(&p->lock);
  return NULL;
}

StCliProgress *
st_cli_progress_new(const char *label, const char *phase)
{
  StCliProgress *p = g_new0(StCliProgress, 1);
  p->label = g_strdup(label);
  p->phase = g_strdup(phase);
  g_mutex_init(&p->lock);
  g_cond_init(&p->wake);
  p->tty = isatty(STDERR_FILENO);
  const char *ms = g_getenv("STAGGER_PROGRESS_MS");
  p->delay_us = ms != NULL ? g_ascii_strtoll(ms, NULL, 10) * 1000 : 2 * G_USEC_PER_SEC;
  p->start_us = g_get_monotonic_time();
  if (!p->tty && p->delay_us == 0) /* what a test can rely on */
    show(p, p->start_us);
  p->thread = g_thread_new("progress", watch, p);
  return p;
}

void
st_cli_progress_phase(StCliProgress *p, const char *phase)
{
  g_mutex_lock(&p->lock);
  clear_line(p);
  g_free(p->phase);
  p->phase = g_strdup(phase);
  atomic_store(&p->engine.ops_total, 0);
  atomic_store(&p->engine.ops_done, 0);
  atomic_store(&p->engine.events, 0);
  /* In a log, a new phase past the delay is worth a line at once. */
  gint64 now = g_get_monotonic_time();
  if (!p->tty && now - p->start_us >= p->delay_us)
    show(p, now);
  g_mutex_unlock(&p->lock);
}

StEngineProgress *
st_cli_progress_engine(StCliProgress *p)
{
  return &p->engine;
}

void
st_cli_progress_free(StCliProgress *p)
{
  if (p == NULL)
    return;
  g_mutex_lock(&p->lock);
  p->stop = TRUE;
  g_cond_signal(&p->wake);
  g_mutex_unlock(&p->lock);
  g_thread_join(p->thread);
  clear_line(p);
  g_mutex_clear(&p->lock);
  g_cond_clear(&p->wake);
  g_free(p->phase);
  g_free(p->label);
  g_free(p);
}
