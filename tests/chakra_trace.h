/* chakra_trace.h: Chakra execution traces written node by node for the
 * importer's tests (test_chakra_import*.c), through the trace writer
 * stagger's exporter uses (interop/chakra_private.h). Failures assert.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "interop/chakra_private.h"

/* PREFIX.<rank>.et opened, its global metadata (version 0.0.4) written. */
EtWriter *st_test_et_open(const char *prefix, int rank);
void st_test_et_close(EtWriter *w);
/* A node on `n_deps` data dependencies; `a` (its attributes) may be NULL. */
void st_test_et_node(EtWriter *w, uint64_t id, const char *name, int type, uint64_t duration_us,
                     const uint64_t *deps, size_t n_deps, EtAttrs *a);
