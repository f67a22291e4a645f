/* strategy_reads.c: which strategies read each strategy-specific option (see
 * strategy.h, st_strategy_option_readers). An option missing from the table
 * is read by every strategy (batch, precision, optimizer, comm, framework). */
#include "strategy/strategy.h"

#include <string.h>

typedef struct {
  const char *option;
  const char *readers; /* comma list */
} Readers;

static const Readers READERS[] = {
  {"tensor-parallel", "megatron"},
  {"sequence-parallel", "megatron"},
  {"expert-parallel", "megatron"},
  {"moe-imbalance", "megatron"},
  {"moe-routing", "megatron"},
  {"expert-recompute", "megatron"},
  {"expert-tensor-parallel", "megatron"},
  {"virtual-stages", "megatron"},
  {"first-stage-layers", "megatron"},
  {"last-stage-layers", "megatron"},
  {"account-for-embedding", "megatron"},
  {"account-for-loss", "megatron"},
  {"layer-split", "megatron"},
  {"vocab-multiple", "megatron"},
  {"tp-comm-overlap", "megatron"},
  {"context-parallel", "megatron"},
  {"cp-comm", "megatron"},
  {"pipeline-stages", "pipeline,megatron"},
  {"pipeline-schedule", "pipeline,megatron"},
  {"balance", "pipeline"},
  {"offload-activations", "dp,zero,pipeline"},
  {"update-rule", "cdp"},
  {"stages", "cdp"},
  {"stage-split", "cdp"},
  {"cdp-reduce", "cdp"},
  {"model-parallel", "cdp"},
  {"cdp-slack", "cdp"},
  {"amp-limit", "burst,multiplex"},
  {"foreground", "multiplex"},
  {"background", "multiplex"},
  {"mux-piece-us", "multiplex"},
  {"mux-slowdown", "multiplex"},
  {"mux-long-recv-us", "multiplex"},
  {"mux-bg-pieces", "multiplex"},
  {"mux-bg-pieces-alone", "multiplex"},
  {"mux-fg-pieces", "multiplex"},
  {NULL, NULL},
};

const char *
st_strategy_option_readers(const char *option)
{
  for (const Readers *r = READERS; r->option != NULL; r++)
    if (strcmp(r->option, option) == 0)
      return r->readers;
  return NULL;
}

gboolean
st_strategy_reads_option(const char *strategy, const char *option)
{
  const char *readers = st_strategy_option_readers(option);
  if (readers == NULL)
    return TRUE;
  g_auto(GStrv) names = g_strsplit(readers, ",", -1);
  return g_strv_contains((const char *const *)names, strategy);
}
