/* layer_decoder_cp.c: llama_block on one rank of a context-parallel group
 * (l->cp = c > 1; exec/layer_impl.h StLayerCp), as Megatron-LM runs it with
 * Transformer Engine's p2p ring (Liu et al. 2023). The rank holds T = s / c
 * tokens of each sequence (chunks rank and 2c - 1 - rank of 2c); the norms,
 * the projections and the MLP run on them as they are, the attention's
 * queries attend the keys of the whole sequence, masked (causal, a sliding
 * window) by the global positions (kernels.h st_k_cp_position), RoPE
 * turning each token by its global position. The pass runs in the schedule's steps
 * (sim/strategy/context_parallel.h):
 *
 *   forward:  pre      norm1, qkv, RoPE; the rank's keys and values into
 *                      ring slot 0; o, m, l = 0
 *             core k   the queries against slot (k - 1) mod 2, which holds
 *                      the chunk of rank (rank - k + 1) mod c (exchange k
 *                      - 1 brought it), merged by the online softmax
 *             post     y = o / l and lse (saved, as flash's), the output
 *                      projection, the residual, the MLP half
 *   backward: post     the MLP half, the output projection's backward into
 *                      dy; the rank's keys and values into slot 0
 *             core k   (k = 1 .. c, the steps c .. 1) the queries' gradient
 *                      into dqkv; the chunk's keys' and values' into dqkv
 *                      (k = 1, the rank's own) or into d[k % 2], which
 *                      exchange k + 1 adds to the gradient it passes on
 *             pre      the gradient that came home (the last exchange) added,
 *                      RoPE's inverse, the qkv projection's and norm1's
 *                      backward, the residuals.
 *
 * Exchanges (cp_exchange), E = B T 2 G k elements (the rank's K and V):
 *   forward k < c:       slot (k - 1) % 2 -> slot k % 2, E
 *   backward m = 1 .. c + 1 (st_cp_ring_bwd_carries): slot (m - 1) % 2 ->
 *     slot m % 2: its chunk (m < c, E), and its gradient (m >= 3, E) after
 *     adding core m - 1's share (d[(m - 1) % 2]) to what came with it; the
 *     last (m = c + 1) into home
 * Slots hold [K V | their gradient] (the forward uses the first half).
 * With Ulysses' all-to-alls (StLayerCp.kind ST_LAYER_CP_A2A, steps pre |
 * core | post) the attention between the projections is
 * layer_decoder_ulysses.c's; the rest is the same.
 *
 * Split over a tensor-parallel group (l->tp > 1: the block in two parts,
 * this pass part 1, the attention half, between the group's collectives),
 * the same steps on the rank's heads: pre the norm (again from the input
 * on all N rows, which the executor gathers under sequence parallelism)
 * and qkv; post the output projection's partial sum and the residual on
 * the rank's own rows; backward post keeps the output gradient (without
 * sequence parallelism it arrives in the input gradient pre writes), pre
 * runs the norm again before its backward. Blocks in one part (a parallel
 * residual, no MLP) are refused with tensor parallelism (exec_check.c).
 */
#include <math.h>

#include "exec/layers/decoder_private.h"
#include "strategy/context_parallel.h"

size_t
st_decoder_cp_layout(const Block *b, StKDtype dt, int backward, int kind, char *base,
                     CpState *st)
{
  StCarve cv = {base, 0};
  size_t es = st_kdt_size(dt), bt = (size_t)b->attn.B * b->attn.T, E = st_cp_kv_elems(b);
  size_t heads = (size_t)b->attn.B * b->attn.H * b->attn.T, n = st_cp_n(b);
  size_t out = bt * b->attn.H * b->attn.k;
  *st = (CpState){0};
  if (kind == ST_LAYER_CP_A2A) { /* the rank's qkv; the all-to-alls' buffers */
    if (backward) {
      st->dy = st_carve(&cv, out * es);
      st->dqkv = st_carve(&cv, bt * n * es);
      st->dx1 = b->has_mlp ? st_carve(&cv, (size_t)b->rows * b->d * es) : NULL;
    } else {
      st->qkv = st_carve(&cv, bt * n * es);
    }
    st->send = st_carve(&cv, MAX(out, bt * n) * es);
    st->recv = st_carve(&cv, MAX(out, bt * n) * es);
    return cv.offset;
  }
  if (!backward) {
    st->o = st_carve(&cv, out * sizeof(float));
    st->m = st_carve(&cv, heads * sizeof(float));
    st->l = st_carve(&cv, heads * sizeof(float));
    for (int i = 0; i < 2; i++)
      st->slot[i] = st_carve(&cv, E * es);
    return cv.offset;
  }
  st->dy = st_carve(&cv, out * es);
  st->dqkv = st_carve(&cv, bt * n * es);
  st->dx1 = b->has_mlp ? st_carve(&cv, (size_t)b->rows * b->d * es) : NULL;
  st->home = st_carve(&cv, E * es);
  st->tmp = st_carve(&cv, E * es);
  for (int i = 0; i < 2; i++) {
    st->slot[i] = st_carve(&cv, 2 * E * es);
    st->d[i] = st_carve(&cv, E * es);
  }
  return cv.offset;
}

size_t
st_decoder_cp_state_bytes(const StLayer *l, int batch, StKDtype dt, int backward, int kind)
{
  Block b = st_decoder_block(l, batch);
  CpState st;
  return st_decoder_cp_layout(&b, dt, backward, kind, NULL, &st);
}

/* The ring backward's exchange m (1 .. c + 1) that is the k-th emitted
 * (sim/strategy/context_parallel.h st_cp_ring_bwd_carries), or 0. */
static int
ring_bwd_m(int k, int c, gboolean *kv, gboolean *grad)
{
  for (int m = 1, n = 0; m <= c + 1; m++) {
    st_cp_ring_bwd_carries(c, m, kv, grad);
    if ((*kv || *grad) && ++n == k)
      return m;
  }
  return 0;
}

int
st_decoder_cp_exchange(const StLayer *l, int batch, StKDtype dt, int backward, int kind, int k,
                       int c, void *state, const void **send, void **recv, size_t *elems,
                       void **add_to, const void **add_from, size_t *add_elems)
{
  Block b = st_decoder_block(l, batch);
  CpState st;
  st_decoder_cp_layout(&b, dt, backward, kind, state, &st);
  size_t E = st_cp_kv_elems(&b);
  *add_to = NULL;
  *add_from = NULL;
  *add_elems = 0;
  if (kind == ST_LAYER_CP_A2A) {
    /* forward Q K V in, the output back; backward the output's gradient
     * in, Q K V's back */
    size_t bt = (size_t)b.attn.B * b.attn.T, out = bt * b.attn.H * b.attn.k;
    if (k < 1 || k > 2)
      return ST_K_EINVAL;
    *send = st.send;
    *recv = st.recv;
    *elems = (k == 1) == !backward ? bt * st_cp_n(&b) : out;
    return 0;
  }
  if (!backward) {
    if (k < 1 || k > c - 1)
      return ST_K_EINVAL;
    *send = st.slot[(k - 1) % 2];
    *recv = st.slot[k % 2];
    *elems = E;
    return 0;
  }
  /* exchange m sends slot (m - 1) % 2: the chunk core m read, passed on,
   * and the gradient core m - 1 computed added to what came with it */
  gboolean kv, grad;
  int m = ring_bwd_m(k, c, &kv, &grad);
  if (m == 0)
    return ST_K_EINVAL;
  void *from = st.slot[(m - 1) % 2], *to = st.slot[m % 2];
  *send = kv ? from : st_at(from, dt, E);
  *recv = m == c + 1 ? st.home : kv ? to : st_at(to, dt, E);
  *elems = (kv ? E : 0) + (grad ? E : 0);
  if (grad) {
    *add_to = st_at(from, dt, E);
    *add_from = st.d[(m - 1) % 2];
    *add_elems = E;
  }
  return 0;
}

/* RoPE on the rank's qkv rows by their global positions: the rows placed
 * at their positions in a [B, c T, n] scratch, turned there, put back. */
int
st_decoder_rope_global(const StLayerCtx *c, const Block *b, void *qkv, int inverse)
{
  const StAttnGeom *a = &b->attn;
  if (a->theta <= 0)
    return 0;
  size_t n = st_cp_n(b), es = st_kdt_size(c->dt), h = (size_t)a->T / 2;
  int S = a->T * c->cp->size;
  size_t bytes = (size_t)a->B * S * n * es;
  void *big;
  ST_SCRATCH(big, c, bytes);
  ST_TRY(c->k->memset0(c->stream, big, bytes));
  for (int pass = 0; pass < 2; pass++)
    for (int s = 0; s < a->B; s++)
      for (int half = 0; half < 2; half++) {
        size_t local = ((size_t)s * a->T + half * h) * n;
        size_t global = ((size_t)s * S +
                         st_k_cp_position((int)(half * h), a->T, c->cp->size, c->cp->rank)) *
                        n;
        void *dst = pass == 0 ? st_at(big, c->dt, global) : st_at(qkv, c->dt, local);
        const void *src = pass == 0 ? st_at(qkv, c->dt, local) : st_at(big, c->dt, global);
        ST_TRY(c->k->copy(c->stream, dst, src, h * n * es, 0));
        if (pass == 0 && half == 1 && s == a->B - 1)
          ST_TRY(c->k->rope(c->stream, big, a->B, S, a->H + a->G, (int)n, a->k, a->rot, a->theta,
                            inverse, c->dt));
      }
  return 0;
}

/* The rank whose chunk core step k (1 .. c, in the order run) reads. */
static int
chunk_rank(const StLayerCp *cp, int k)
{
  return ((cp->rank - (k - 1)) % cp->size + cp->size) % cp->size;
}

#define PAR(off) st_at(params, c->dt, o.off)
#define DPAR(off) st_at(dparams, c->dt, o.off)

/* Forward pre after the norm: qkv from h, RoPE, the state zeroed, the
 * rank's keys and values into slot 0. */
static int
fwd_open(const StLayerCtx *c, const Block *b, const void *attn_params, const void *h,
         const Saved *s, const CpState *st, size_t state_bytes)
{
  const StAttnGeom *a = &b->attn;
  int n = (int)st_cp_n(b), w = 2 * a->G * a->k;
  if (c->cp->kind == ST_LAYER_CP_A2A) {
    ST_TRY(st_attn_qkv_fwd(c, a, attn_params, h, st->qkv));
    return st_ulysses_fwd_open(c, b, st);
  }
  ST_TRY(st_attn_qkv_fwd(c, a, attn_params, h, s->attn.qkv));
  ST_TRY(st_decoder_rope_global(c, b, s->attn.qkv, 0));
  ST_TRY(c->k->memset0(c->stream, c->cp->state, state_bytes));
  return c->k->copy2d(c->stream, st->slot[0], w, st_at(s->attn.qkv, c->dt, (size_t)a->H * a->k),
                      n, a->B * a->T, w, c->dt);
}

/* Forward core step k: the queries against slot (k - 1) % 2. */
static int
fwd_core(const StLayerCtx *c, const Block *b, const Saved *s, const CpState *st)
{
  const StAttnGeom *a = &b->attn;
  const StLayerCp *cp = c->cp;
  if (cp->kind == ST_LAYER_CP_A2A)
    return st_ulysses_fwd_core(c, b, s, st);
  return c->k->ring_attn_fwd(c->stream, st->o, st->m, st->l, s->attn.qkv, (int)st_cp_n(b),
                             st->slot[(cp->step - 1) % 2], a->B, a->T, a->H, a->G, a->k,
                             1.0f / sqrtf((float)a->k), a->causal, a->window, cp->size,
                             cp->rank, chunk_rank(cp, cp->step), c->dt);
}

/* Backward core step (k = c + 1 - step in the order run): the queries'
 * gradient into dqkv, the chunk's keys' and values' into dqkv (k = 1, the
 * rank's own) or the slot's second half, which travels with it. */
static int
bwd_core(const StLayerCtx *c, const Block *b, const Saved *s, const CpState *st)
{
  const StAttnGeom *a = &b->attn;
  const StLayerCp *cp = c->cp;
  if (cp->kind == ST_LAYER_CP_A2A)
    return st_ulysses_bwd_core(c, b, s, st);
  int k = cp->size + 1 - cp->step, n = (int)st_cp_n(b);
  void *slot = st->slot[(k - 1) % 2];
  void *dkv = k == 1 ? st_at(st->dqkv, c->dt, (size_t)a->H * a->k) : st->d[k % 2];
  int ld_dkv = k == 1 ? n : 2 * a->G * a->k;
  if (k > 1) /* exchange k - 1, which read it last, is done */
    ST_TRY(c->k->memset0(c->stream, dkv, st_cp_kv_elems(b) * st_kdt_size(c->dt)));
  return c->k->ring_attn_bwd(c->stream, st->dqkv, n, dkv, ld_dkv, st->dy, s->attn.y, s->attn.lse,
                             s->attn.qkv, n, slot, a->B, a->T, a->H, a->G, a->k,
                             1.0f / sqrtf((float)a->k), a->causal, a->window, cp->size,
                             cp->rank, chunk_rank(cp, k), c->dt);
}

/* Backward post's end: the rank's keys and values into slot 0 (the state
 * was zeroed first). */
static int
bwd_open(const StLayerCtx *c, const Block *b, const Saved *s, const CpState *st)
{
  const StAttnGeom *a = &b->attn;
  int n = (int)st_cp_n(b), w = 2 * a->G * a->k;
  if (c->cp->kind == ST_LAYER_CP_A2A)
    return st_ulysses_bwd_open(c, b, st);
  return c->k->copy2d(c->stream, st->slot[0], w, st_at(s->attn.qkv, c->dt, (size_t)a->H * a->k),
                      n, a->B * a->T, w, c->dt);
}

/* Forward post's start: the attention's output y (and lse) in the saved
 * block. */
static int
fwd_close(const StLayerCtx *c, const Block *b, const Saved *s, const CpState *st)
{
  const StAttnGeom *a = &b->attn;
  if (c->cp->kind == ST_LAYER_CP_A2A)
    return st_ulysses_fwd_close(c, b, s, st);
  return c->k->ring_attn_finish(c->stream, s->attn.y, s->attn.lse, st->o, st->m, st->l, a->B,
                                a->T, a->H, a->k, c->dt);
}

/* Backward pre's start: the gradient come home added to the rank's own
 * (dqkv's key and value columns), then RoPE's inverse on dqkv. */
static int
bwd_home(const StLayerCtx *c, const Block *b, const CpState *st)
{
  const StKernels *k = c->k;
  const StAttnGeom *a = &b->attn;
  if (c->cp->kind == ST_LAYER_CP_A2A)
    return st_ulysses_bwd_close(c, b, st);
  int n = (int)st_cp_n(b), w = 2 * a->G * a->k, bt = a->B * a->T;
  void *kv_cols = st_at(st->dqkv, c->dt, (size_t)a->H * a->k);
  ST_TRY(k->copy2d(c->stream, st->tmp, w, kv_cols, n, bt, w, c->dt));
  ST_TRY(k->add(c->stream, st->tmp, st->tmp, st->home, c->dt, st_cp_kv_elems(b)));
  ST_TRY(k->copy2d(c->stream, kv_cols, n, st->tmp, w, bt, w, c->dt));
  return st_decoder_rope_global(c, b, st->dqkv, 1);
}

static int
whole_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
              const void *in, void *out, void *saved)
{
  const StKernels *k = c->k;
  const StLayerCp *cp = c->cp;
  Block b = st_decoder_block(l, batch);
  Offsets o = st_decoder_offsets(&b);
  const StAttnGeom *a = &b.attn;
  Saved s;
  st_decoder_layout(&b, c->dt, saved, c->again, &s);
  CpState st;
  size_t state_bytes = st_decoder_cp_layout(&b, c->dt, 0, cp->kind, cp->state, &st);
  if (cp->step == 0) {
    ST_TRY(st_norm_forward(c, &s.n1, PAR(norm1), in, s.h1));
    return fwd_open(c, &b, PAR(attn), s.h1, &s, &st, state_bytes);
  }
  if (cp->step < cp->steps - 1)
    return fwd_core(c, &b, &s, &st);
  ST_TRY(fwd_close(c, &b, &s, &st));
  size_t map = (size_t)b.rows * b.d;
  void *a_out = b.has_mlp && !b.parallel ? s.x1 : out;
  ST_TRY(st_attn_out_fwd(c, a, PAR(attn), s.attn.y, a_out));
  ST_TRY(k->add(c->stream, a_out, a_out, in, c->dt, map));
  if (!b.has_mlp)
    return 0;
  const void *mlp_in = b.parallel ? in : s.x1;
  ST_TRY(st_norm_forward(c, &s.n2, PAR(norm2), mlp_in, s.h2));
  if (b.parallel) {
    void *t;
    ST_SCRATCH(t, c, map * st_kdt_size(c->dt));
    ST_TRY(st_mlp_forward(c, &b.mlp, PAR(mlp), s.h2, t, &s.mlp));
    return k->add(c->stream, out, out, t, c->dt, map);
  }
  ST_TRY(st_mlp_forward(c, &b.mlp, PAR(mlp), s.h2, out, &s.mlp));
  return k->add(c->stream, out, out, s.x1, c->dt, map);
}

/* Backward post: the MLP half (as block_backward), then the output
 * projection's backward into dy; the rank's keys and values into slot 0. */
static int
cp_backward_post(const StLayerCtx *c, const Block *b, const Offsets *op, const void *params,
                 const void *in, const Saved *s, CpState *st, size_t state_bytes,
                 const void *dout, void *din, void *dparams)
{
  const StKernels *k = c->k;
  Offsets o = *op;
  const StAttnGeom *a = &b->attn;
  size_t map = (size_t)b->rows * b->d;
  ST_TRY(k->memset0(c->stream, c->cp->state, state_bytes));
  const void *d_attn = dout;
  if (b->has_mlp) {
    void *g, *work;
    ST_SCRATCH(g, c, map * st_kdt_size(c->dt));
    ST_SCRATCH(work, c, st_mlp_bwd_work(&b->mlp, c->dt));
    const void *mlp_in = b->parallel ? in : s->x1;
    ST_TRY(st_mlp_backward(c, &b->mlp, PAR(mlp), s->h2, &s->mlp, dout, g, DPAR(mlp), work));
    gboolean need_dx1 = !b->parallel || din != NULL;
    ST_TRY(st_norm_backward(c, &s->n2, PAR(norm2), mlp_in, g, need_dx1 ? st->dx1 : NULL,
                            DPAR(norm2)));
    if (!b->parallel) {
      ST_TRY(k->add(c->stream, st->dx1, st->dx1, dout, c->dt, map));
      d_attn = st->dx1;
    }
  }
  ST_TRY(st_attn_out_bwd(c, a, PAR(attn), s->attn.y, d_attn, st->dy, DPAR(attn)));
  return bwd_open(c, b, s, st);
}

/* Backward pre: the gradient home added to the rank's own, RoPE's
 * inverse, the qkv projection's and norm1's backward, the residuals. */
static int
cp_backward_pre(const StLayerCtx *c, const Block *b, const Offsets *op, const void *params,
                const void *in, const Saved *s, CpState *st, const void *dout, void *din,
                void *dparams)
{
  const StKernels *k = c->k;
  Offsets o = *op;
  const StAttnGeom *a = &b->attn;
  ST_TRY(bwd_home(c, b, st));
  size_t map = (size_t)b->rows * b->d;
  void *g;
  ST_SCRATCH(g, c, map * st_kdt_size(c->dt));
  ST_TRY(st_attn_qkv_bwd(c, a, PAR(attn), s->h1, st->dqkv, g, DPAR(attn)));
  ST_TRY(st_norm_backward(c, &s->n1, PAR(norm1), in, g, din, DPAR(norm1)));
  if (din == NULL)
    return 0;
  if (!b->has_mlp)
    return k->add(c->stream, din, din, dout, c->dt, map);
  ST_TRY(k->add(c->stream, din, din, st->dx1, c->dt, map));
  return b->parallel ? k->add(c->stream, din, din, dout, c->dt, map) : 0;
}

static int
whole_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
               const void *in, const void *saved, const void *dout, void *din, void *dparams)
{
  const StLayerCp *cp = c->cp;
  Block b = st_decoder_block(l, batch);
  Offsets o = st_decoder_offsets(&b);
  Saved s;
  st_decoder_layout(&b, c->dt, (char *)saved, c->again, &s);
  CpState st;
  size_t state_bytes = st_decoder_cp_layout(&b, c->dt, 1, cp->kind, cp->state, &st);
  if (cp->step == cp->steps - 1)
    return cp_backward_post(c, &b, &o, params, in, &s, &st, state_bytes, dout, din, dparams);
  if (cp->step == 0)
    return cp_backward_pre(c, &b, &o, params, in, &s, &st, dout, din, dparams);
  return bwd_core(c, &b, &s, &st);
}

/* ---- split over a tensor-parallel group: part 1, the attention half ------------------ */

/* out[own rows] += in's (the residual, once per row over the group): `in`
 * on all N rows, or `local`, the rank's own rows alone (sequence
 * parallelism's forward post, whose gathered input is gone). */
static int
own_rows_add(const StLayerCtx *c, const StLayer *l, int batch, int d, void *out, const void *in,
             gboolean local)
{
  int first, count;
  st_tp_own_rows(l, batch, c->tp_rank, &first, &count);
  size_t off = (size_t)first * d;
  return count > 0 ? c->k->add(c->stream, st_at(out, c->dt, off), st_at(out, c->dt, off),
                               st_at(in, c->dt, local ? 0 : off), c->dt, (size_t)count * d)
                   : 0;
}

/* norm(in) on the N rows again, into scratch (the split block saves none
 * of its norms): its statistics in *n, its output in *h. */
static int
norm_again(const StLayerCtx *c, const Block *b, const void *np, const void *in, StNormPart *n,
           void **h)
{
  size_t map = (size_t)b->rows * b->d * st_kdt_size(c->dt);
  StCarve cv = {NULL, 0};
  *n = (StNormPart){b->norm, b->rows, b->d, NULL, NULL};
  st_norm_layout(n, &cv);
  st_carve(&cv, map);
  char *base;
  ST_SCRATCH(base, c, cv.offset);
  cv = (StCarve){base, 0};
  *n = (StNormPart){b->norm, b->rows, b->d, NULL, NULL};
  st_norm_layout(n, &cv);
  *h = st_carve(&cv, map);
  return st_norm_forward(c, n, np, in, *h);
}

static int
split_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
              const void *in, void *out, void *saved)
{
  const StLayerCp *cp = c->cp;
  Block b = st_decoder_split_block(l, batch, c->tp_rank);
  Offsets o = st_decoder_offsets(&b);
  const StAttnGeom *a = &b.attn;
  Saved s;
  st_decoder_split_layout(l, &b, batch, c->dt, saved, c->again, &s);
  CpState st;
  size_t state_bytes = st_decoder_cp_layout(&b, c->dt, 0, cp->kind, cp->state, &st);
  if (cp->step == 0) {
    StNormPart n;
    void *h;
    ST_TRY(norm_again(c, &b, PAR(norm1), in, &n, &h));
    return fwd_open(c, &b, PAR(attn), h, &s, &st, state_bytes);
  }
  if (cp->step < cp->steps - 1)
    return fwd_core(c, &b, &s, &st);
  ST_TRY(fwd_close(c, &b, &s, &st));
  ST_TRY(st_attn_out_fwd(c, a, PAR(attn), s.attn.y, out)); /* a partial sum */
  return own_rows_add(c, l, batch, b.d, out, in, l->sp);
}

static int
split_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
               const void *in, const void *saved, const void *dout, void *din, void *dparams)
{
  const StLayerCp *cp = c->cp;
  Block b = st_decoder_split_block(l, batch, c->tp_rank);
  Offsets o = st_decoder_offsets(&b);
  const StAttnGeom *a = &b.attn;
  Saved s;
  st_decoder_split_layout(l, &b, batch, c->dt, (char *)saved, c->again, &s);
  CpState st;
  size_t state_bytes = st_decoder_cp_layout(&b, c->dt, 1, cp->kind, cp->state, &st);
  size_t map = (size_t)b.rows * b.d;
  if (cp->step == cp->steps - 1) {
    /* the output gradient kept: without sequence parallelism it came in
     * the input gradient, which pre writes */
    ST_TRY(c->k->memset0(c->stream, cp->state, state_bytes));
    ST_TRY(c->k->copy(c->stream, st.dx1, dout, map * st_kdt_size(c->dt), 0));
    ST_TRY(st_attn_out_bwd(c, a, PAR(attn), s.attn.y, st.dx1, st.dy, DPAR(attn)));
    return bwd_open(c, &b, &s, &st);
  }
  if (cp->step > 0)
    return bwd_core(c, &b, &s, &st);
  ST_TRY(bwd_home(c, &b, &st));
  StNormPart n;
  void *h, *g;
  ST_TRY(norm_again(c, &b, PAR(norm1), in, &n, &h));
  ST_SCRATCH(g, c, map * st_kdt_size(c->dt));
  ST_TRY(st_attn_qkv_bwd(c, a, PAR(attn), h, st.dqkv, g, DPAR(attn)));
  ST_TRY(st_norm_backward(c, &n, PAR(norm1), in, g, din, DPAR(norm1)));
  return din != NULL ? own_rows_add(c, l, batch, b.d, din, st.dx1, FALSE) : 0;
}

/* ---- the entry points ------------------------------------------------------------------ */

int
st_decoder_cp_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                      const void *in, void *out, void *saved)
{
  return l->tp > 1 ? split_forward(c, l, batch, params, in, out, saved)
                   : whole_forward(c, l, batch, params, in, out, saved);
}

int
st_decoder_cp_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                       const void *in, const void *saved, const void *dout, void *din,
                       void *dparams)
{
  return l->tp > 1 ? split_backward(c, l, batch, params, in, saved, dout, din, dparams)
                   : whole_backward(c, l, batch, params, in, saved, dout, din, dparams);
}
