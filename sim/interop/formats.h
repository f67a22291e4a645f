/* formats.h: the file formats `stagger schedule --format` writes a Schedule
 * in, one table entry each (formats.c): "json", stagger's own
 * self-contained schedule (sched.h), and "chakra", MLCommons Chakra
 * execution traces (chakra.h). Adding a format is one entry.
 */
#pragma once

#include <glib.h>

#include "profile/profile.h"
#include "sched/sched.h"

/* What a writer may need beside the schedule; all borrowed. */
typedef struct {
  const StProfile *profile; /* may be NULL */
  const char *comm_algo;    /* the simulator's --comm-algo */
} StFormatContext;

typedef struct {
  const char *name;
  const char *summary; /* one line, for --help: what --out names and what is written */
  /* Writes `schedule` at `out`; returns a line saying what was written
   * (transfer full), or NULL with `error` set. */
  char *(*write)(const StSchedule *schedule, const char *out, const StFormatContext *ctx,
                 GError **error);
} StScheduleFormat;

/* NULL-terminated; the first is the default. */
const StScheduleFormat *const *st_schedule_formats(void);
const StScheduleFormat *st_schedule_format_find(const char *name);
