/* report_multiplex.h: the "multiplex" object of report.json, for schedules
 * the multiplex strategy built (strategy_multiplex.c; docs/DEEPPOOL.md).
 *
 * From the one timeline of a multiplexed run, whose foreground ran its first
 * `alone_steps` steps (a schedule note) without background work: the
 * foreground's step time in the steady multiplexed steps against its alone
 * step, background samples per second, cluster throughput (foreground plus
 * background) and the share of GPU time with no kernel running, multiplexed
 * and alone. docs/FORMATS.md lists the keys.
 */
#pragma once

#include "output/output.h"

/* NULL when the schedule has no "alone_steps" note (not multiplexed).
 * Transfer full. */
struct cJSON *st_report_multiplex_json(const StSummary *summary);
