/* fuzz_one.c: the libFuzzer entry of one target, fuzz_NAME (ST_FUZZ_TARGET
 * names it at compile time; see fuzz_targets.h). The bytes go to a file of
 * this process, which the target reads as a user's file. */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *path = NULL; /* the input file of this process */

static void
remove_input(void)
{
  if (path != NULL)
    unlink(path);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static const StFuzzTarget *target = NULL;
  if (target == NULL) {
    st_fuzz_setup();
    target = st_fuzz_target_find(ST_FUZZ_TARGET);
    if (target == NULL)
      abort();
    /* In the current folder (run.sh runs each target in its own), under a
     * name of its own: a name with the pid or a random part would make
     * messages, and any code that walks them, differ from run to run. */
    path = g_strdup("fuzz-input." ST_FUZZ_TARGET);
    atexit(remove_input);
  }
  /* Plainly: g_file_set_contents would fsync an existing file each time. */
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0)
    abort();
  target->run(path);
  return 0;
}
