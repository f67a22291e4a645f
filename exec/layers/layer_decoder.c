/* layer_decoder.c: llama_block (model type in sim/model/layer_decoder.c)
 * on x [B, T, D], from the parts of layer_llm_parts.c:
 *
 *   sequential:  x1 = x + attn(norm1(x)); out = x1 + mlp(norm2(x1))
 *   parallel:    out = x + attn(norm1(x)) + mlp(norm2(x))
 *   mlp none:    out = x + attn(norm1(x))
 *
 * Parameters: norm1 (weight [D], and bias [D] for layernorm), the
 * attention's, then with an MLP norm2 and the MLP's. Saved: norm1's fp32
 * statistics, h1 = norm1(x), the attention's; with an MLP x1 (sequential),
 * norm2's statistics, h2 = norm2(.), the MLP's. The block keeps its input.
 * Forward scratch: the attention's work, and (parallel) the MLP's output
 * before it is added. Backward scratch: g (a branch input's gradient),
 * with an MLP dx1 (sequential: x1's gradient; parallel: norm2's input
 * gradient), and one block for the branch being differentiated, as large as
 * the larger branch's work.
 *
 * Split over a tensor-parallel group (l->tp > 1, layer_impl.h), the block
 * runs in parts: part 1 (the attention half; with a parallel residual or
 * no MLP the whole block, one part) and part 2 (the MLP half). A part reads
 * its input on all N rows (part 1: x; part 2: x1) and writes a partial sum
 * of its output (part 1: x1, part 2: out), the residual added on the rank's
 * own rows; the norms run on the N rows before each half. Nothing of the
 * norms is saved: the backward runs each norm again from the part's input
 * (which the executor all-gathers again under sequence parallelism), then
 * its half's backward, then the norm's backward on the rank's partial
 * gradient (linear in it: the reduction after gives the exact input
 * gradient; the norm weights' gradients are partial sums, all-reduced per
 * step: StTpSpan PARTIAL), plus the residual's gradient on its own rows.
 * Saved: x1 (sequential with an MLP: the rank's rows of it), the
 * attention's, the MLP's. Forward scratch, one block for every part: the
 * norm's statistics and output, the attention's work, (parallel) the MLP's
 * output. Backward: the statistics, the norm's output, the half's input
 * gradient g, a second gradient (parallel: the attention branch's norm
 * gradient; sequential without sequence parallelism: part 1's output
 * gradient, which arrives in the tensor it writes), and the larger half's
 * work.
 */
#include "exec/layers/decoder_private.h"

enum { MLP_NONE = 3 }; /* sim/model's StMlpKind */

Block
st_decoder_block(const StLayer *l, int batch)
{
  Block b;
  b.rows = st_tp_rows(l, batch);
  b.d = st_layer_last_dim(&l->in_shape);
  b.attn = st_attn_geom(l, batch);
  b.norm = (int)st_layer_attr(l, "norm", 0);
  b.has_mlp = st_layer_attr(l, "mlp", 0) != MLP_NONE;
  b.parallel = b.has_mlp && st_layer_attr(l, "parallel_residual", 0) != 0;
  b.mlp = st_mlp_geom(l, b.rows, b.d, "mlp_bias");
  b.norm_params = st_norm_param_count(b.norm, b.d);
  b.attn_params = st_attn_param_count(&b.attn);
  return b;
}

/* Parameter offsets: norm1, attention, norm2, MLP. */
Offsets
st_decoder_offsets(const Block *b)
{
  Offsets o = {0, b->norm_params, 0, 0};
  o.norm2 = o.attn + b->attn_params;
  o.mlp = o.norm2 + b->norm_params;
  return o;
}

/* The saved block's layout (the attention's probabilities from `again`
 * when given); its main part's bytes. */
size_t
st_decoder_layout(const Block *b, StKDtype dt, char *base, void *again, Saved *s)
{
  StCarve cv = {base, 0}, other = {again, 0};
  size_t map = (size_t)b->rows * b->d * st_kdt_size(dt);
  s->n1 = (StNormPart){b->norm, b->rows, b->d, NULL, NULL};
  st_norm_layout(&s->n1, &cv);
  s->h1 = st_carve(&cv, map);
  st_attn_layout(&b->attn, dt, &cv, again != NULL ? &other : &cv, &s->attn);
  s->x1 = s->h2 = NULL;
  if (b->has_mlp) {
    s->x1 = b->parallel ? NULL : st_carve(&cv, map);
    s->n2 = (StNormPart){b->norm, b->rows, b->d, NULL, NULL};
    st_norm_layout(&s->n2, &cv);
    s->h2 = st_carve(&cv, map);
    st_mlp_layout(&b->mlp, dt, &cv, &s->mlp);
  }
  return cv.offset;
}

static void
block_init(const StLayer *l, float *params, uint64_t seed)
{
  Block b = st_decoder_block(l, 1);
  Offsets o = st_decoder_offsets(&b);
  st_norm_init(b.norm, b.d, params + o.norm1);
  st_attn_init(&b.attn, params + o.attn, seed, l, 0);
  if (b.has_mlp) {
    st_norm_init(b.norm, b.d, params + o.norm2);
    st_mlp_init(&b.mlp, params + o.mlp, seed, l, 2);
  }
}

static size_t
block_saved(const StLayer *l, int batch, StKDtype dt)
{
  Block b = st_decoder_block(l, batch);
  Saved s;
  return st_decoder_layout(&b, dt, NULL, NULL, &s);
}

static size_t
block_again(const StLayer *l, int batch, StKDtype dt)
{
  Block b = st_decoder_block(l, batch);
  StAttnSaved s;
  StCarve main = {NULL, 0}, again = {NULL, 0};
  st_attn_layout(&b.attn, dt, &main, &again, &s);
  return again.offset;
}

#define PAR(off) st_at(params, c->dt, o.off)
#define DPAR(off) st_at(dparams, c->dt, o.off)

static int
block_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
              const void *in, void *out, void *saved)
{
  const StKernels *k = c->k;
  Block b = st_decoder_block(l, batch);
  Offsets o = st_decoder_offsets(&b);
  Saved s;
  st_decoder_layout(&b, c->dt, saved, c->again, &s);
  size_t n = (size_t)b.rows * b.d;
  void *work, *t = NULL;
  ST_SCRATCH(work, c, st_attn_fwd_work(&b.attn, c->dt));
  if (b.parallel)
    ST_SCRATCH(t, c, n * st_kdt_size(c->dt)); /* the MLP's output */
  ST_TRY(st_norm_forward(c, &s.n1, PAR(norm1), in, s.h1));
  /* the attention branch lands in x1 (sequential) or out */
  void *a_out = b.has_mlp && !b.parallel ? s.x1 : out;
  ST_TRY(st_attn_forward(c, &b.attn, PAR(attn), s.h1, a_out, &s.attn, work));
  ST_TRY(k->add(c->stream, a_out, a_out, in, c->dt, n));
  if (!b.has_mlp)
    return 0;
  const void *mlp_in = b.parallel ? in : s.x1;
  ST_TRY(st_norm_forward(c, &s.n2, PAR(norm2), mlp_in, s.h2));
  if (b.parallel) {
    ST_TRY(st_mlp_forward(c, &b.mlp, PAR(mlp), s.h2, t, &s.mlp));
    return k->add(c->stream, out, out, t, c->dt, n);
  }
  ST_TRY(st_mlp_forward(c, &b.mlp, PAR(mlp), s.h2, out, &s.mlp));
  return k->add(c->stream, out, out, s.x1, c->dt, n);
}

static int
block_recompute(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                const void *in, const void *saved)
{
  Block b = st_decoder_block(l, batch);
  Saved s;
  st_decoder_layout(&b, c->dt, (char *)saved, c->again, &s);
  void *work;
  ST_SCRATCH(work, c, st_attn_again_work(&b.attn, c->dt));
  return st_attn_recompute(c, &b.attn, &s.attn, work);
}

static int
block_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
               const void *in, const void *out, const void *saved, const void *dout, void *din,
               void *dparams)
{
  const StKernels *k = c->k;
  Block b = st_decoder_block(l, batch);
  Offsets o = st_decoder_offsets(&b);
  Saved s;
  st_decoder_layout(&b, c->dt, (char *)saved, c->again, &s);
  size_t n = (size_t)b.rows * b.d, map = n * st_kdt_size(c->dt);
  size_t attn_work = st_attn_bwd_work(&b.attn, c->dt);
  void *g, *dx1 = NULL, *branch;
  ST_SCRATCH(g, c, map);
  if (b.has_mlp)
    ST_SCRATCH(dx1, c, map);
  ST_SCRATCH(branch, c, b.has_mlp ? MAX(attn_work, st_mlp_bwd_work(&b.mlp, c->dt)) : attn_work);
  if (!b.has_mlp) {
    ST_TRY(st_attn_backward(c, &b.attn, PAR(attn), s.h1, &s.attn, dout, g, DPAR(attn), branch));
    ST_TRY(st_norm_backward(c, &s.n1, PAR(norm1), in, g, din, DPAR(norm1)));
    return din != NULL ? k->add(c->stream, din, din, dout, c->dt, n) : 0;
  }
  /* MLP branch */
  const void *mlp_in = b.parallel ? in : s.x1;
  ST_TRY(st_mlp_backward(c, &b.mlp, PAR(mlp), s.h2, &s.mlp, dout, g, DPAR(mlp), branch));
  gboolean need_dx1 = !b.parallel || din != NULL;
  ST_TRY(st_norm_backward(c, &s.n2, PAR(norm2), mlp_in, g, need_dx1 ? dx1 : NULL, DPAR(norm2)));
  /* sequential: dx1 is x1's gradient, which the attention branch gets;
   * parallel: the attention branch gets dout, dx1 waits to be added */
  const void *d_attn = dout;
  if (!b.parallel) {
    ST_TRY(k->add(c->stream, dx1, dx1, dout, c->dt, n));
    d_attn = dx1;
  }
  ST_TRY(st_attn_backward(c, &b.attn, PAR(attn), s.h1, &s.attn, d_attn, g, DPAR(attn), branch));
  ST_TRY(st_norm_backward(c, &s.n1, PAR(norm1), in, g, din, DPAR(norm1)));
  if (din == NULL)
    return 0;
  ST_TRY(k->add(c->stream, din, din, dx1, c->dt, n));
  return b.parallel ? k->add(c->stream, din, din, dout, c->dt, n) : 0;
}

/* ---- split over a tensor-parallel group ----------------------------------------------- */

/* The split block's saved layout (the probabilities from `again` when
 * given): x1 on the rank's rows, the attention's, the MLP's. */
size_t
st_decoder_split_layout(const StLayer *l, const Block *b, int batch, StKDtype dt, char *base,
                        void *again, Saved *s)
{
  StCarve cv = {base, 0}, other = {again, 0};
  size_t x1 = (size_t)st_layer_rows(&l->in_shape, batch) * b->d * st_kdt_size(dt);
  s->x1 = b->has_mlp && !b->parallel ? st_carve(&cv, x1) : NULL;
  st_attn_layout(&b->attn, dt, &cv, again != NULL ? &other : &cv, &s->attn);
  if (b->has_mlp)
    st_mlp_layout(&b->mlp, dt, &cv, &s->mlp);
  return cv.offset;
}

/* One pass's work block, the same for every part: the norm's statistics
 * and output h, then (backward) g and the second gradient, then the
 * branch's work (and, forward with a parallel residual, the MLP's output). */
typedef struct {
  StNormPart n;
  void *h, *g, *g2, *branch, *t;
} Work;

static size_t
work_layout(const Block *b, gboolean sp, gboolean backward, StKDtype dt, char *base, Work *w)
{
  StCarve cv = {base, 0};
  size_t map = (size_t)b->rows * b->d * st_kdt_size(dt);
  w->n = (StNormPart){b->norm, b->rows, b->d, NULL, NULL};
  st_norm_layout(&w->n, &cv);
  w->h = st_carve(&cv, map);
  w->g = w->g2 = w->t = NULL;
  if (!backward) {
    w->branch = st_carve(&cv, st_attn_fwd_work(&b->attn, dt));
    w->t = b->parallel ? st_carve(&cv, map) : NULL;
    return cv.offset;
  }
  w->g = st_carve(&cv, map);
  gboolean second = b->parallel || (b->has_mlp && !sp);
  w->g2 = second ? st_carve(&cv, map) : NULL;
  size_t branch = st_attn_bwd_work(&b->attn, dt);
  if (b->has_mlp)
    branch = MAX(branch, st_mlp_bwd_work(&b->mlp, dt));
  w->branch = st_carve(&cv, branch);
  return cv.offset;
}

/* The split block's geometry on rank `rank`: biases on its own rows. */
Block
st_decoder_split_block(const StLayer *l, int batch, int rank)
{
  Block b = st_decoder_block(l, batch);
  st_tp_own_rows(l, batch, rank, &b.attn.bias_first, &b.attn.bias_rows);
  b.mlp.bias_first = b.attn.bias_first;
  b.mlp.bias_rows = b.attn.bias_rows;
  return b;
}

/* out[own rows] += in[own rows] (the residual, once per row over the group). */
static int
own_add(const StLayerCtx *c, const StLayer *l, int batch, const Block *b, void *out,
        const void *in)
{
  int first, count;
  st_tp_own_rows(l, batch, c->tp_rank, &first, &count);
  size_t off = (size_t)first * b->d;
  return count > 0 ? c->k->add(c->stream, st_at(out, c->dt, off), st_at(out, c->dt, off),
                               st_at(in, c->dt, off), c->dt, (size_t)count * b->d)
                   : 0;
}

static int
split_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
              const void *in, void *out, void *saved)
{
  Block b = st_decoder_split_block(l, batch, c->tp_rank);
  Offsets o = st_decoder_offsets(&b);
  Saved s;
  st_decoder_split_layout(l, &b, batch, c->dt, saved, c->again, &s);
  char *base;
  ST_SCRATCH(base, c, work_layout(&b, l->sp, FALSE, c->dt, NULL, &(Work){0}));
  Work w;
  work_layout(&b, l->sp, FALSE, c->dt, base, &w);
  if (c->part == 2) { /* the MLP half on x1 */
    ST_TRY(st_norm_forward(c, &w.n, PAR(norm2), in, w.h));
    ST_TRY(st_mlp_forward(c, &b.mlp, PAR(mlp), w.h, out, &s.mlp));
    return own_add(c, l, batch, &b, out, in);
  }
  ST_TRY(st_norm_forward(c, &w.n, PAR(norm1), in, w.h));
  ST_TRY(st_attn_forward(c, &b.attn, PAR(attn), w.h, out, &s.attn, w.branch));
  if (b.parallel) {
    ST_TRY(st_norm_forward(c, &w.n, PAR(norm2), in, w.h));
    ST_TRY(st_mlp_forward(c, &b.mlp, PAR(mlp), w.h, w.t, &s.mlp));
    ST_TRY(c->k->add(c->stream, out, out, w.t, c->dt, (size_t)b.rows * b.d));
  }
  return own_add(c, l, batch, &b, out, in);
}

/* The norm `norm_at` again on `in`, the half's backward from dout into g,
 * then the norm's backward from g into dx (written). */
static int
split_half_bwd(const StLayerCtx *c, const Block *b, const Work *w, gboolean mlp,
               const void *params, size_t norm_at, size_t half_at, const void *in,
               const Saved *s, const void *dout, void *dx, void *dparams)
{
  const void *np = st_at(params, c->dt, norm_at), *hp = st_at(params, c->dt, half_at);
  void *dnp = st_at(dparams, c->dt, norm_at), *dhp = st_at(dparams, c->dt, half_at);
  ST_TRY(st_norm_forward(c, &w->n, np, in, w->h));
  if (mlp)
    ST_TRY(st_mlp_backward(c, &b->mlp, hp, w->h, &s->mlp, dout, w->g, dhp, w->branch));
  else
    ST_TRY(st_attn_backward(c, &b->attn, hp, w->h, &s->attn, dout, w->g, dhp, w->branch));
  return st_norm_backward(c, &w->n, np, in, w->g, dx, dnp);
}

static int
split_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
               const void *in, const void *dout, void *din, void *dparams, const void *saved)
{
  Block b = st_decoder_split_block(l, batch, c->tp_rank);
  Offsets o = st_decoder_offsets(&b);
  Saved s;
  st_decoder_split_layout(l, &b, batch, c->dt, (char *)saved, c->again, &s);
  char *base;
  ST_SCRATCH(base, c, work_layout(&b, l->sp, TRUE, c->dt, NULL, &(Work){0}));
  Work w;
  work_layout(&b, l->sp, TRUE, c->dt, base, &w);
  size_t n = (size_t)b.rows * b.d;
  if (c->part == 2) {
    ST_TRY(split_half_bwd(c, &b, &w, TRUE, params, o.norm2, o.mlp, in, &s, dout, din, dparams));
    return din != NULL ? own_add(c, l, batch, &b, din, dout) : 0;
  }
  if (dout == din) { /* part 1's output gradient came in the tensor it writes */
    ST_TRY(c->k->copy(c->stream, w.g2, dout, n * st_kdt_size(c->dt), 0));
    dout = w.g2;
  }
  if (b.parallel) {
    ST_TRY(split_half_bwd(c, &b, &w, TRUE, params, o.norm2, o.mlp, in, &s, dout, din, dparams));
    ST_TRY(split_half_bwd(c, &b, &w, FALSE, params, o.norm1, o.attn, in, &s, dout,
                          din != NULL ? w.g2 : NULL, dparams));
    if (din != NULL)
      ST_TRY(c->k->add(c->stream, din, din, w.g2, c->dt, n));
  } else {
    ST_TRY(split_half_bwd(c, &b, &w, FALSE, params, o.norm1, o.attn, in, &s, dout, din,
                          dparams));
  }
  return din != NULL ? own_add(c, l, batch, &b, din, dout) : 0;
}

static size_t
split_saved(const StLayer *l, int batch, StKDtype dt)
{
  Block b = st_decoder_block(l, batch);
  Saved s;
  return st_decoder_split_layout(l, &b, batch, dt, NULL, NULL, &s);
}

/* Parameters: norm1 PARTIAL, the attention's spans, norm2 PARTIAL, the MLP's. */
static int
block_spans(const StLayer *l, int rank, StTpSpan *out)
{
  Block b = st_decoder_block(l, 1);
  Offsets o = st_decoder_offsets(&b);
  size_t t = (size_t)MAX(l->tp, 1);
  size_t whole_attn = st_attn_param_count(&b.attn) + 0, np = b.norm_params;
  /* the whole layer's attention: its parameters scale with the heads */
  StAttnGeom whole = b.attn;
  whole.H *= (int)t;
  whole.G *= (int)t;
  whole.t = 1;
  whole_attn = st_attn_param_count(&whole);
  int n = 0;
  st_span_add(out, &n, 0, o.norm1, np, 1, 0, 0, ST_TP_SPAN_PARTIAL);
  int from = n;
  st_attn_spans(&b.attn, rank, out, &n);
  st_spans_shift(out, from, n, np, o.attn);
  if (!b.has_mlp)
    return n;
  st_span_add(out, &n, np + whole_attn, o.norm2, np, 1, 0, 0, ST_TP_SPAN_PARTIAL);
  from = n;
  st_mlp_spans(&b.mlp, rank, out, &n);
  st_spans_shift(out, from, n, 2 * np + whole_attn, o.mlp);
  return n;
}

static void *
block_tp_tensor(const StLayer *l, int batch, StKDtype dt, int part, void *saved)
{
  Block b = st_decoder_block(l, batch);
  Saved s;
  st_decoder_split_layout(l, &b, batch, dt, saved, NULL, &s);
  return part == 1 ? s.x1 : NULL;
}

/* ---- the entry points: whole or split -------------------------------------------------- */

static size_t
block_saved_any(const StLayer *l, int batch, StKDtype dt)
{
  return l->tp > 1 ? split_saved(l, batch, dt) : block_saved(l, batch, dt);
}

static int
block_forward_any(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                  const void *in, void *out, void *saved)
{
  if (c->cp != NULL)
    return st_decoder_cp_forward(c, l, batch, params, in, out, saved);
  return l->tp > 1 ? split_forward(c, l, batch, params, in, out, saved)
                   : block_forward(c, l, batch, params, in, out, saved);
}

static int
block_backward_any(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                   const void *in, const void *out, const void *saved, const void *dout,
                   void *din, void *dparams)
{
  if (c->cp != NULL)
    return st_decoder_cp_backward(c, l, batch, params, in, saved, dout, din, dparams);
  return l->tp > 1 ? split_backward(c, l, batch, params, in, dout, din, dparams, saved)
                   : block_backward(c, l, batch, params, in, out, saved, dout, din, dparams);
}

static int
block_recompute_any(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                    const void *in, const void *saved)
{
  if (l->tp <= 1)
    return block_recompute(c, l, batch, params, in, saved);
  Block b = st_decoder_block(l, batch);
  Saved s;
  st_decoder_split_layout(l, &b, batch, c->dt, (char *)saved, c->again, &s);
  void *work;
  ST_SCRATCH(work, c, st_attn_again_work(&b.attn, c->dt));
  return st_attn_recompute(c, &b.attn, &s.attn, work);
}

const StLayerImpl st_impl_llama_block = {
  .type = "llama_block",
  .init = block_init,
  .saved_bytes = block_saved_any,
  .forward = block_forward_any,
  .backward = block_backward_any,
  .again_bytes = block_again,
  .recompute = block_recompute_any,
  .tp_spans = block_spans,
  .tp_tensor = block_tp_tensor,
  .cp_state_bytes = st_decoder_cp_state_bytes,
  .cp_exchange = st_decoder_cp_exchange,
};
