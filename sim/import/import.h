/* import.h: models described elsewhere, brought into stagger's model format.
 *
 * An importer reads one foreign description (a Hugging Face transformers
 * config.json, an exported ONNX network) and builds the JSON tree of a model
 * file (model/model.h): the same file a person would write, with real layer
 * types wherever one describes the computation and `custom` layers with
 * computed numbers only where none does (each such place is a warning).
 * Importers are registered by format in import_registry.c; `stagger model
 * import --FORMAT FILE` picks one by its name.
 *
 * st_import() runs an importer and loads what it built through the model
 * loader (or, for a plain tree, the model builder, whose checks and
 * derivation are the loader's), so an import either yields a model that
 * stagger derives and checks like any other, or fails with a message
 * naming the file and the key, node or layer at fault.
 *
 * Ownership: StImportResult owns its tree and its warnings.
 */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdint.h>

#include "model/model.h"

#define ST_IMPORT_ERROR (st_import_error_quark())
GQuark st_import_error_quark(void);

/* What the user may choose; zero-initialized means "the source's own". */
typedef struct {
  const char *name;    /* the model's name; NULL: from the source (its file name) */
  int64_t seq_len;     /* tokens per sample; 0: the source's context length */
  gboolean no_loss;    /* ONNX: do not append the softmax cross-entropy loss */
  GHashTable *dims;    /* ONNX: symbolic dim name -> value (char * -> gint64 *),
                          borrowed; NULL when none was given */
} StImportOptions;

typedef struct {
  cJSON *model;        /* the model file's tree; owned */
  GPtrArray *warnings; /* char *, owned: where the import approximated */
  /* ONNX only: the graph's own count per sample (nodes as exported), so that
   * it can be checked against the exporter's: matrix products (Conv, MatMul,
   * Gemm, 2 FLOPs per multiply-add) and the trainable parameters. */
  double graph_dense_flops;
  int64_t graph_params;
  int graph_nodes;     /* nodes read (all), and custom layers made */
  int custom_layers;
} StImportResult;

void st_import_result_init(StImportResult *result);
void st_import_result_clear(StImportResult *result);
/* Appends a warning (printf format). */
void st_import_warn(StImportResult *result, const char *format, ...) G_GNUC_PRINTF(2, 3);

typedef struct {
  const char *name;    /* the format, and the CLI option (--hf, --onnx) */
  const char *arg;     /* what the option takes, for --help ("CONFIG.json") */
  const char *summary; /* one line for --help */
  /* Reads `path` and fills result->model (and warnings). Errors name the
   * file and what is wrong. */
  gboolean (*run)(const char *path, const StImportOptions *options, StImportResult *result,
                  GError **error);
} StImporter;

/* NULL-terminated, in registry order. */
const StImporter *const *st_importers(void);
const StImporter *st_importer_find(const char *name);

/* Runs `importer` on `path` into `result` and loads the model it built
 * (origin `path`). Transfer full. */
StModel *st_import(const StImporter *importer, const char *path, const StImportOptions *options,
                   StImportResult *result, GError **error);

/* The model file for `result`: its tree as text, one layer per line, as the
 * shipped models are written. Transfer full. */
char *st_import_format(const StImportResult *result);
