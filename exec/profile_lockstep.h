/* profile_lockstep.h: n threads that run numbered iterations in lockstep,
 * for the device backends' replay (device.h) when the parts of a run must
 * be issued from threads of their own: every thread passes a barrier
 * before each iteration, so iteration i of every part starts only when
 * every part ended iteration i - 1.
 *
 * Private to exec/ (device_host.c, device_cuda.c).
 */
#pragma once

#include <glib.h>

/* One thread's share of an iteration; FALSE with `error` set stops every
 * thread at the next barrier. */
typedef gboolean (*StLockstepFn)(gpointer ctx, int part, int iteration, GError **error);

/* For it in [0, iterations): barrier; `lead` (may be NULL) on part 0's
 * thread, then a second barrier; `each` on every part's thread. Part 0 runs
 * on the calling thread, parts 1 .. n-1 on new threads, joined before it
 * returns. The first error is returned. */
gboolean st_lockstep_run(int n, int iterations, StLockstepFn lead, StLockstepFn each,
                         gpointer ctx, GError **error);
