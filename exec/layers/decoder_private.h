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

/* A pass's state (device memory), by kind (StLayerCp.kind). */
typedef struct {
  float *o, *m, *l;   /* ring forward: fp32 [B T H k], [B H T], [B H T] */
  void *dy, *dqkv;    /* backward: [B T H k], [B T n] */
  void *dx1;          /* backward with an MLP: x1's gradient (parallel: norm2's input's);
                         split over a tensor group: the output gradient, kept to the end */
  void *home, *tmp;   /* ring backward: [B T 2 G k] the gradient back home, its sum */
  void *slot[2];      /* ring: [B T 2 G k] keys and values (backward: then their gradient
                         summed so far, which travels one exchange behind them) */
  void *d[2];         /* ring backward: [B T 2 G k] a core step's share of that gradient */
  void *qkv;          /* all-to-all forward: the rank's qkv [B T n] (the saved block
                         holds the whole sequence's of its heads) */
  void *send, *recv;  /* all-to-all: the buffers, c slices of B T n / c (or H k / c) */
} CpState;

/* Elements of the rank's keys and values, B T 2 G k; of a qkv row, n. */
static inline size_t
st_cp_kv_elems(const Block *b)
{
  return (size_t)b->attn.B * b->attn.T * 2 * b->attn.G * b->attn.k;
}

static inline size_t
st_cp_n(const Block *b)
{
  return (size_t)(b->attn.H + 2 * b->attn.G) * b->attn.k;
}

size_t st_decoder_cp_layout(const Block *b, StKDtype dt, int backward, int kind, char *base,
                            CpState *st);
/* RoPE on the rank's qkv rows [B T n] by their global positions. */
int st_decoder_rope_global(const StLayerCtx *c, const Block *b, void *qkv, int inverse);
size_t st_decoder_cp_state_bytes(const StLayer *l, int batch, StKDtype dt, int backward,
                                 int kind);
int st_decoder_cp_exchange(const StLayer *l, int batch, StKDtype dt, int backward, int kind,
                           int k, int c, void *state, const void **send, void **recv,
                           size_t *elems, void **add_to, const void **add_from,
                           size_t *add_elems);
/* DeepSpeed Ulysses' steps (layer_decoder_ulysses.c): forward open (after
 * the qkv projection into st->qkv: RoPE, Q K V packed by head group),
 * core (the whole sequence's attention on the rank's heads, the output
 * packed by rank), close (the output unpacked into s->attn.y); backward
 * open (st->dy packed by head group), core, close (dqkv unpacked into
 * st->dqkv, RoPE's inverse). */
int st_ulysses_fwd_open(const StLayerCtx *c, const Block *b, const CpState *st);
int st_ulysses_fwd_core(const StLayerCtx *c, const Block *b, const Saved *s, const CpState *st);
int st_ulysses_fwd_close(const StLayerCtx *c, const Block *b, const Saved *s, const CpState *st);
int st_ulysses_bwd_open(const StLayerCtx *c, const Block *b, const CpState *st);
int st_ulysses_bwd_core(const StLayerCtx *c, const Block *b, const Saved *s, const CpState *st);
int st_ulysses_bwd_close(const StLayerCtx *c, const Block *b, const CpState *st);
int st_decoder_cp_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                          const void *in, void *out, void *saved);
int st_decoder_cp_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                           const void *in, const void *saved, const void *dout, void *din,
                           void *dparams);
