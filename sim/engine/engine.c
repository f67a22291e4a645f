/* engine.c: the event loop, op readiness and dispatch. */
#include "engine/engine.h"

G_DEFINE_QUARK(st-engine-error-quark, st_engine_error)

void
st_engine_stats_clear(StEngineStats *stats)
{
  g_clear_pointer(&stats->fold_note, g_free);
  *stats = (StEngineStats){0};
}
