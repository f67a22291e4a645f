/* fuzz_targets.h: what the fuzzers feed with arbitrary bytes (docs/RELIABILITY.md).
 *
 * Each target is a reader of user input: it gets a file holding the bytes
 * (every loader reads a path, so the file is what a user would give) and
 * must return, with or without an error, and never crash, hang, leak or
 * trip a sanitizer or a GLib critical. A target lists the shipped files
 * that seed its corpus; tests/fuzz/regressions/NAME/ holds every input that
 * once broke it. The normal build replays seeds and regressions under ctest
 * (fuzz_replay); the `sanitize` preset builds one libFuzzer binary per
 * target (fuzz_NAME), which tests/fuzz/run.sh runs for a bounded time.
 *
 * Adding a target: a function and a row in fuzz_targets.c (with seeds), and
 * nothing else; CMake and run.sh read the table.
 */
#pragma once

#include <glib.h>

typedef struct {
  const char *name;  /* fuzz_NAME; the folder of its regressions */
  /* Reads the input at `path`; TRUE when it was accepted. Refusing is a
   * fine outcome for fuzzed bytes; the replay checks that good seeds pass. */
  gboolean (*run)(const char *path);
  /* Seed files, globs relative to the source tree, the
   * last part of each a pattern (models/STAR.json); NULL-terminated. */
  const char *const *seeds;
} StFuzzTarget;

/* Terminated by a row whose name is NULL. */
const StFuzzTarget *st_fuzz_targets(void);
const StFuzzTarget *st_fuzz_target_find(const char *name);

/* Makes GLib criticals and warnings abort, so that a g_return_if_fail that
 * fires on fuzzed input counts as a crash (and libFuzzer keeps the input).
 * Call once per process. */
void st_fuzz_setup(void);
