/* layer_decoder_ulysses.c: llama_block's attention on a context-parallel
 * rank with DeepSpeed Ulysses' all-to-alls (Jacobs et al. 2023; Transformer
 * Engine's a2a; --cp-comm all-to-all), the steps layer_decoder_cp.c calls
 * when StLayerCp.kind is ST_LAYER_CP_A2A (sim/strategy/context_parallel.h:
 * pre | a2a Q K V | core | a2a out | post).
 *
 * The rank holds T tokens of each sequence (its two chunks) and all its H
 * query and G key/value heads; c ranks, H and G multiples of c (the
 * strategy checks). An all-to-all cuts both buffers into c slices: slice j
 * of the rank's send lands in rank j's recv as slice `rank`.
 *
 *   forward  open   RoPE on the rank's qkv by global position; slice j =
 *                   its tokens' Q, K, V of head group j (H / c query heads,
 *                   G / c kv heads: B T n / c)
 *            core   the whole sequence of the rank's head group, rank i's
 *                   slice placed at rank i's positions, into the saved
 *                   block's qkv (as large as the rank's own); flash
 *                   attention on it (lse saved); slice i of the send = the
 *                   output rows at rank i's positions
 *            close  slice j = the rank's tokens' output of head group j,
 *                   into y's columns of group j
 *   backward open   dy by head group, as the forward's output
 *            core   dy of the whole sequence of the group; the output again
 *                   (flash recomputes; nothing more is kept), flash's
 *                   backward; dqkv's rows sent back to their ranks
 *            close  dqkv of the rank's tokens from the c groups; RoPE's
 *                   inverse.
 */
#include <math.h>

#include "exec/layers/decoder_private.h"

typedef struct {
  int B, T, S, H, G, k, c, rank;
  size_t n, nc, hq; /* a qkv row's width, a group's, a group's query heads' */
} Geo;

static Geo
geo_of(const StLayerCtx *c, const Block *b)
{
  const StAttnGeom *a = &b->attn;
  int cs = c->cp->size;
  Geo g = {a->B, a->T, a->T * cs, a->H, a->G, a->k, cs, c->cp->rank, 0, 0, 0};
  g.n = st_cp_n(b);
  g.nc = g.n / (size_t)cs;
  g.hq = (size_t)(a->H / cs) * a->k;
  return g;
}

/* Between slices by rank ([c][B][T] rows of `width`) and the whole
 * sequence ([B][S] rows): rank i's token t sits at its global position. */
static int
by_rank(const StLayerCtx *c, const Geo *g, void *packed, void *whole, size_t width,
        gboolean to_whole)
{
  size_t h = (size_t)g->T / 2, bytes = h * width * st_kdt_size(c->dt);
  for (int i = 0; i < g->c; i++)
    for (int b = 0; b < g->B; b++)
      for (int half = 0; half < 2; half++) {
        size_t p = (((size_t)i * g->B + b) * g->T + half * h) * width;
        size_t w = ((size_t)b * g->S + st_k_cp_position((int)(half * h), g->T, g->c, i)) * width;
        void *dst = to_whole ? st_at(whole, c->dt, w) : st_at(packed, c->dt, p);
        const void *src = to_whole ? st_at(packed, c->dt, p) : st_at(whole, c->dt, w);
        ST_TRY(c->k->copy(c->stream, dst, src, bytes, 0));
      }
  return 0;
}

/* Between the rank's rows of qkv [B T n] and slices by head group
 * ([c][B T] rows of n / c: the group's Q, K, V). */
static int
qkv_by_group(const StLayerCtx *c, const Geo *g, void *qkv, void *packed, gboolean pack)
{
  int bt = g->B * g->T;
  size_t gk = (size_t)(g->G / g->c) * g->k;
  size_t col[3] = {0, (size_t)g->H * g->k, (size_t)(g->H + g->G) * g->k}; /* Q, K, V */
  size_t width[3] = {g->hq, gk, gk}, at[3] = {0, g->hq, g->hq + gk};
  for (int j = 0; j < g->c; j++) {
    void *slice = st_at(packed, c->dt, (size_t)j * bt * g->nc);
    for (int p = 0; p < 3; p++) {
      void *mine = st_at(qkv, c->dt, col[p] + (size_t)j * width[p]);
      void *theirs = st_at(slice, c->dt, at[p]);
      ST_TRY(pack ? c->k->copy2d(c->stream, theirs, (int)g->nc, mine, (int)g->n, bt,
                                 (int)width[p], c->dt)
                  : c->k->copy2d(c->stream, mine, (int)g->n, theirs, (int)g->nc, bt,
                                 (int)width[p], c->dt));
    }
  }
  return 0;
}

/* Between the rank's rows of y or dy [B T H k] and slices by head group. */
static int
out_by_group(const StLayerCtx *c, const Geo *g, void *y, void *packed, gboolean pack)
{
  int bt = g->B * g->T, hk = g->H * g->k;
  for (int j = 0; j < g->c; j++) {
    void *slice = st_at(packed, c->dt, (size_t)j * bt * g->hq);
    void *mine = st_at(y, c->dt, (size_t)j * g->hq);
    ST_TRY(pack ? c->k->copy2d(c->stream, slice, (int)g->hq, mine, hk, bt, (int)g->hq, c->dt)
                : c->k->copy2d(c->stream, mine, hk, slice, (int)g->hq, bt, (int)g->hq, c->dt));
  }
  return 0;
}

int
st_ulysses_fwd_open(const StLayerCtx *c, const Block *b, const CpState *st)
{
  Geo g = geo_of(c, b);
  ST_TRY(st_decoder_rope_global(c, b, st->qkv, 0));
  return qkv_by_group(c, &g, st->qkv, st->send, TRUE);
}

int
st_ulysses_fwd_core(const StLayerCtx *c, const Block *b, const Saved *s, const CpState *st)
{
  const StAttnGeom *a = &b->attn;
  Geo g = geo_of(c, b);
  void *y;
  ST_SCRATCH(y, c, (size_t)g.B * g.S * g.hq * st_kdt_size(c->dt));
  ST_TRY(by_rank(c, &g, st->recv, s->attn.qkv, g.nc, TRUE));
  ST_TRY(c->k->flash_attn_fwd(c->stream, y, s->attn.lse, s->attn.qkv, g.B, g.S, g.H / g.c,
                              g.G / g.c, g.k, 1.0f / sqrtf((float)g.k), a->causal, a->window,
                              c->dt));
  return by_rank(c, &g, st->send, y, g.hq, FALSE);
}

int
st_ulysses_fwd_close(const StLayerCtx *c, const Block *b, const Saved *s, const CpState *st)
{
  Geo g = geo_of(c, b);
  return out_by_group(c, &g, s->attn.y, st->recv, FALSE);
}

int
st_ulysses_bwd_open(const StLayerCtx *c, const Block *b, const CpState *st)
{
  Geo g = geo_of(c, b);
  return out_by_group(c, &g, st->dy, st->send, TRUE);
}

int
st_ulysses_bwd_core(const StLayerCtx *c, const Block *b, const Saved *s, const CpState *st)
{
  const StAttnGeom *a = &b->attn;
  Geo g = geo_of(c, b);
  size_t es = st_kdt_size(c->dt), rows = (size_t)g.B * g.S, hc = (size_t)g.H / g.c;
  float scale = 1.0f / sqrtf((float)g.k);
  void *dy, *y, *dqkv;
  float *lse, *rowdot;
  ST_SCRATCH(dy, c, rows * g.hq * es);
  ST_SCRATCH(y, c, rows * g.hq * es);
  ST_SCRATCH(dqkv, c, rows * g.nc * es);
  ST_SCRATCH(lse, c, rows * hc * sizeof(float));
  ST_SCRATCH(rowdot, c, rows * hc * sizeof(float));
  ST_TRY(by_rank(c, &g, st->recv, dy, g.hq, TRUE));
  ST_TRY(c->k->flash_attn_fwd(c->stream, y, lse, s->attn.qkv, g.B, g.S, (int)hc, g.G / g.c, g.k,
                              scale, a->causal, a->window, c->dt));
  ST_TRY(c->k->flash_attn_bwd(c->stream, dqkv, dy, s->attn.qkv, y, s->attn.lse, rowdot, g.B, g.S,
                              (int)hc, g.G / g.c, g.k, scale, a->causal, a->window, c->dt));
  return by_rank(c, &g, st->send, dqkv, g.nc, FALSE);
}

int
st_ulysses_bwd_close(const StLayerCtx *c, const Block *b, const CpState *st)
{
  Geo g = geo_of(c, b);
  ST_TRY(qkv_by_group(c, &g, st->dqkv, st->recv, FALSE));
  return st_decoder_rope_global(c, b, st->dqkv, 1);
}
