/* decoder_private.h: llama_block's pieces (layer_decoder.c), shared with
 * its context-parallel passes in steps (layer_decoder_cp.c). */
#pragma once

#include "exec/layers/layers_private.h"

typedef struct {
  StAttnGeom attn;
  StMlpGeom mlp;
  int norm, has_mlp, parallel, rows, d;
  size_t norm_params, attn_params;
} Block;

/* Parameter offsets: norm1, attention, norm2, MLP. */
typedef struct {
  size_t norm1, attn, norm2, mlp;
} Offsets;

typedef struct {
  StNormPart n1, n2;
  void *h1, *x1, *h2;
  StAttnSaved attn;
  StMlpSaved mlp;
} Saved;

Block st_decoder_block(const StLayer *l, int batch);
Offsets st_decoder_offsets(const Block *b);
/* The (whole) block's saved layout (the attention's probabilities from
 * `again` when given); its main part's bytes. */
size_t st_decoder_layout(const Block *b, StKDtype dt, char *base, void *again, Saved *s);

/* Split over a tensor-parallel group: the rank's geometry (biases on its
 * own rows) and its saved layout (x1 on its rows, the attention's, the
 * MLP's). */
Block st_decoder_split_block(const StLayer *l, int batch, int rank);
size_t st_decoder_split_layout(const StLayer *l, const Block *b, int batch, StKDtype dt,
                               char *base, void *again, Saved *s);

/* Context parallelism (layer_decoder_cp.c, exec/layer_impl.h StLayerCp). */
size_t st_decoder_cp_state_bytes(const StLayer *l, int batch, StKDtype dt, int backward);
int st_decoder_cp_exchange(const StLayer *l, int batch, StKDtype dt, int backward, int k, int c,
                           void *state, const void **send, void **recv, size_t *elems);
int st_decoder_cp_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                          const void *in, void *out, void *saved);
int st_decoder_cp_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                           const void *in, const void *saved, const void *dout, void *din,
                           void *dparams);
