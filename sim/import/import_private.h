/* import_private.h: what the importers of sim/import/ share: the registry
 * entries, the Hugging Face architectures' table, and helpers that build a
 * model file's JSON. Private to sim/import/. */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdint.h>

#include "import/hf_config.h"
#include "import/import.h"
#include "model/layer_type.h"

/* import_hf.c, import_onnx.c */
extern const StImporter st_importer_hf;
extern const StImporter st_importer_onnx;

/* ---- the model of a model file's tree (import_build.c) ------------------ */

/* The model st_model_from_json makes of `root`, built directly when the
 * tree has the plain shape importers write; NULL when it has not, or when
 * it would not load: the caller then loads it (for the loader's message).
 * Transfer full. */
StModel *st_import_build_model(const cJSON *root);

/* ---- building a model file ---------------------------------------------- */

/* Appends {"name": NAME, "type": TYPE} to the array `layers` and returns it
 * for its attrs (borrowed). */
cJSON *st_import_layer(cJSON *layers, const char *name, const char *type);
/* Appends {"repeat": COUNT, "layers": []} (from 0) and returns its body. */
cJSON *st_import_repeat(cJSON *layers, int64_t count);
/* Sets an integer or a flag attr of a layer. */
void st_import_int(cJSON *layer, const char *key, int64_t value);
void st_import_flag(cJSON *layer, const char *key, gboolean value);

/* ---- Hugging Face architectures (hf_*.c) --------------------------------- */

/* What an architecture's reader fills. */
typedef struct {
  cJSON *layers;          /* the model's layer list, appended to in order */
  int64_t context;        /* positions it was trained for (the default tokens per sample) */
  gboolean learned_positions; /* a position table: no more tokens than `context` */
  GString *note;          /* what the model is, for the file's "note" */
  StImportResult *result; /* for warnings */
} HfModel;

typedef struct {
  const char *model_type;      /* config.json's "model_type" */
  const char *const *classes;  /* "architectures" entries it accepts (causal-LM classes) */
  const char *summary;
  /* Reads every key of the architecture from `config` and appends the
   * layers. Keys it does not read must be in HF_IGNORED. */
  gboolean (*build)(HfConfig *config, HfModel *model, GError **error);
} HfArch;

/* A dropout probability `key` that stagger's llama_block cannot hold: 0
 * (or absent), else a warning that it is left out (import_hf.c). */
gboolean hf_no_dropout(HfConfig *config, HfModel *model, const char *key, GError **error);

/* hf_gpt2.c, hf_llama.c, hf_neox.c */
extern const HfArch st_hf_gpt2;
extern const HfArch st_hf_llama;
extern const HfArch st_hf_mistral;
extern const HfArch st_hf_mixtral;
extern const HfArch st_hf_qwen2;
extern const HfArch st_hf_gpt_neox;
/* hf_deepseek.c */
extern const HfArch st_hf_deepseek_v2;
extern const HfArch st_hf_deepseek_v3;
