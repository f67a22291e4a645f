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
 */
#include "exec/layers/layers_private.h"

typedef struct {
  StAttnGeom attn;
  StMlpGeom mlp;
  int norm, has_mlp, parallel, rows, d;
  size_t norm_params, attn_params;
} Block;

enum { MLP_NONE = 3 }; /* sim/model's StMlpKind */

static Block
block_of(const StLayer *l, int batch)
{
  Block b;
  b.rows = st_layer_rows(&l->in_shape, batch);
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
typedef struct {
  size_t norm1, attn, norm2, mlp;
} Offsets;

static Offsets
offsets_of(const Block *b)
{
  Offsets o = {0, b->norm_params, 0, 0};
  o.norm2 = o.attn + b->attn_params;
  o.mlp = o.norm2 + b->norm_params;
  return o;
}

typedef struct {
  StNormPart n1, n2;
  void *h1, *x1, *h2;
  StAttnSaved attn;
  StMlpSaved mlp;
} Saved;

/* The saved block's layout (the attention's probabilities from `again`
 * when given); its main part's bytes. */
static size_t
layout(const Block *b, StKDtype dt, char *base, void *again, Saved *s)
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
  Block b = block_of(l, 1);
  Offsets o = offsets_of(&b);
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
  Block b = block_of(l, batch);
  Saved s;
  return layout(&b, dt, NULL, NULL, &s);
}

static size_t
block_again(const StLayer *l, int batch, StKDtype dt)
{
  Block b = block_of(l, batch);
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
  Block b = block_of(l, batch);
  Offsets o = offsets_of(&b);
  Saved s;
  layout(&b, c->dt, saved, c->again, &s);
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
  Block b = block_of(l, batch);
  Saved s;
  layout(&b, c->dt, (char *)saved, c->again, &s);
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
  Block b = block_of(l, batch);
  Offsets o = offsets_of(&b);
  Saved s;
  layout(&b, c->dt, (char *)saved, c->again, &s);
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

const StLayerImpl st_impl_llama_block = {
  .type = "llama_block",
  .init = block_init,
  .saved_bytes = block_saved,
  .forward = block_forward,
  .backward = block_backward,
  .again_bytes = block_again,
  .recompute = block_recompute,
};
