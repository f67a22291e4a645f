/* formats.c: the table of schedule file formats (formats.h). */
#include "interop/formats.h"

#include <string.h>

#include "interop/chakra.h"

static char *
write_json(const StSchedule *schedule, const char *out, const StFormatContext *ctx,
           GError **error)
{
  if (!st_schedule_save(schedule, out, error))
    return NULL;
  return g_strdup_printf("written to %s", out);
}

static char *
write_chakra(const StSchedule *schedule, const char *out, const StFormatContext *ctx,
             GError **error)
{
  StChakraExportOptions options = {ctx->profile, ctx->comm_algo};
  StChakraExportStats stats;
  if (!st_chakra_export(schedule, out, &options, &stats, error))
    return NULL;
  g_autofree char *what = st_chakra_export_describe(&stats);
  g_autofree char *groups = st_chakra_groups_path(out);
  return g_strdup_printf("written to %s.0.et .. %s.%d.et and %s: %s", out, out,
                         schedule->n_ranks - 1, groups, what);
}

static const StScheduleFormat JSON = {
  "json", "--out FILE: stagger's self-contained schedule JSON (docs/FORMATS.md)", write_json};
static const StScheduleFormat CHAKRA = {
  "chakra",
  "--out PREFIX: MLCommons Chakra execution traces PREFIX.<rank>.et and ASTRA-sim's "
  "PREFIX.comm_groups.json (docs/INTEROP.md)",
  write_chakra};

static const StScheduleFormat *const FORMATS[] = {&JSON, &CHAKRA, NULL};

const StScheduleFormat *const *
st_schedule_formats(void)
{
  return FORMATS;
}

const StScheduleFormat *
st_schedule_format_find(const char *name)
{
  for (const StScheduleFormat *const *f = FORMATS; *f != NULL; f++)
    if (strcmp((*f)->name, name) == 0)
      return *f;
  return NULL;
}
