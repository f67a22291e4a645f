/* error.h: the error codes shared by every module's GError domain.
 *
 * Each module owns one domain (ST_MODEL_ERROR, ST_CLUSTER_ERROR, ...), defined
 * with G_DEFINE_QUARK in its own source, and reports failures with these codes.
 * A function that can fail takes `GError **error` last and returns FALSE/NULL
 * exactly when it sets it. Programming errors are g_return_val_if_fail, never
 * a GError. Library code never exits: only main() picks the exit code.
 */
#pragma once

#include <glib.h>

typedef enum {
  ST_ERROR_IO = 1,      /* a file could not be read or written */
  ST_ERROR_PARSE,       /* malformed text: JSON, a unit, a number */
  ST_ERROR_INVALID,     /* well-formed but wrong: missing key, negative size, unknown name */
  ST_ERROR_UNSUPPORTED, /* valid request this build or configuration cannot do */
  ST_ERROR_FAILED,      /* anything else, with a message that says what */
} StError;

/* The domain for errors that belong to no single module (units, json). */
#define ST_BASE_ERROR (st_base_error_quark())
GQuark st_base_error_quark(void);
