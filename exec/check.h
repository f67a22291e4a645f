/* check.h: one way to turn a kernel's or a backend call's status into a
 * GError, with the file, the line, the call and the library's message
 * (nccl-tests' CUDACHECK / NCCLCHECK, as a GError). Side effects stay outside
 * the macro's condition logic: the call runs exactly once.
 *
 *   ST_KCHECK(k->gemm(...), error, "gemm of layer %s", name) -> returns FALSE
 */
#pragma once

#include <glib.h>

#include "exec/exec.h"

/* The text of a kernel status: the CUDA / cuBLAS message when the device
 * says so, "invalid argument" for ST_K_EINVAL. Borrowed, static. */
const char *st_exec_status_text(const char *device, int status);

gboolean st_exec_fail_status(GError **error, const char *file, int line, const char *call,
                             int status, const char *device);

/* Evaluates `call` once; on a non-zero status sets `error` and returns FALSE
 * from the enclosing function. */
#define ST_KCHECK(call, device, error)                                                        \
  do {                                                                                        \
    int st_status_ = (call);                                                                  \
    if (st_status_ != 0)                                                                      \
      return st_exec_fail_status((error), __FILE__, __LINE__, #call, st_status_, (device));   \
  } while (0)
