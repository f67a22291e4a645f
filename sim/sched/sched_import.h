/* sched_import.h: the schedule's JSON reader in parts, for importers that
 * build a schedule's programs themselves instead of writing them as JSON
 * and reading them back (interop/chakra_import*.c: 10^6 ops as JSON were
 * most of a Chakra import).
 *
 * The importer writes the small schedule-wide parts as JSON (settings,
 * cluster, devices, ranks, communicators; a model when it has one as JSON)
 * and reads them with st_schedule_from_json_without_programs, which checks
 * them as st_schedule_from_json does; then it builds each program through
 * the builder API (sched.h) and adds them in order with
 * st_schedule_add_program. The builder only g_return_if_fail()s, so the
 * importer checks what it passes (indices in range, as the reader's
 * messages say it), and st_schedule_check checks the whole.
 */
#pragma once

#include "sched/sched.h"

struct cJSON;

/* st_schedule_from_json of `root` without its "programs" (absent), whose
 * ranks name programs 0 .. n_programs - 1 that the caller adds in that
 * order. `model` (taken), when not NULL, is the main job's model in place
 * of root's "model" (then absent). Transfer full. */
StSchedule *st_schedule_from_json_without_programs(const struct cJSON *root, StModel *model,
                                                   int n_programs, const char *origin,
                                                   GError **error);

/* A program's JSON without its "ops" (name, job, streams, buffers,
 * labels: a Chakra trace's 'stagger_program') as a program with no ops
 * yet, checked as st_schedule_from_json checks a program; its job must be
 * below `n_jobs`. Errors name the JSON path (".buffers[2]: ..."). Transfer
 * full. */
StProgram *st_program_from_json_head(const struct cJSON *obj, int n_jobs, GError **error);
