/* module.h: backends built as loadable modules, loaded when a command first
 * needs them (GModule), so that a process that never runs on a GPU never
 * maps CUDA, cuBLAS or NCCL: `stagger --version`, `sim`, `plan` start in
 * milliseconds.
 *
 * A module "NAME" is the file libstagger-NAME.so, built from one backend's
 * sources (exec/CMakeLists.txt: "cuda" = device_cuda.c + kernels/cuda,
 * "nccl" = comm_nccl.c) and linked against its libraries; it exports its
 * backend table and ST_MODULE_STAMP, and calls back into the program that
 * loads it (the error domain, the lockstep helper), which exports its
 * symbols for that (ENABLE_EXPORTS).
 *
 * Where modules are looked for, first match wins:
 *  1. $STAGGER_MODULE_DIR, when set (and only there);
 *  2. a program inside the build tree: the build tree's module folder;
 *  3. an installed program: LIBDIR/stagger beside its BINDIR (relative to
 *     the program, so an installed tree may be moved).
 * The registries (device_registry.c, comm_registry.c) say which backend is
 * which module; this file only finds, checks and loads. Loaded modules stay
 * for the life of the process (GModule keeps one handle per file).
 */
#pragma once

#include <glib.h>

#include "exec/comm.h"
#include "exec/device.h"
#include "kernels/kernels.h"

/* What a module was built against: a module from another version, or whose
 * tables differ in size from the program's, is refused with a message
 * rather than run. */
typedef struct {
  const char *version;   /* STAGGER_VERSION */
  size_t device_table;   /* sizeof (StDeviceBackend) */
  size_t comm_table;     /* sizeof (StCommBackend) */
  size_t kernel_table;   /* sizeof (StKernels) */
} StModuleStamp;

#define ST_MODULE_STAMP                                                                       \
  {STAGGER_VERSION, sizeof(StDeviceBackend), sizeof(StCommBackend), sizeof(StKernels)}

/* Every module defines `const StModuleStamp st_module_stamp = ST_MODULE_STAMP;`. */
#define ST_MODULE_STAMP_SYMBOL "st_module_stamp"

/* The address of `symbol` in module `name` ("cuda"), loading and checking
 * the module on first use. For messages, `what` names the backend ("the
 * cuda device backend") and `needs` what configure must find to build it
 * ("a CUDA toolkit (nvcc)"). NULL with ST_EXEC_ERROR_NO_DEVICE set when the
 * module was not built, is not where it is looked for, cannot be loaded (a
 * library it needs is missing: the message says which) or does not match.
 * Borrowed (the module stays loaded). */
gconstpointer st_module_symbol(const char *name, const char *symbol, const char *what,
                               const char *needs, GError **error);
