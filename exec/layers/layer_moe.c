/* layer_moe.c: the MoE router and experts (model types and the chain they
 * form in sim/model/layer_moe.c) on B samples of T tokens of width D, E
 * experts, the stream [B, T, W = 2D + E] between them: per token the
 * running sum, h, and the E gates.
 *
 * moe_router: parameters the norm's (weight [D], bias [D] for layernorm,
 * none) and W_r [E, D] (init U(+-1/sqrt(D))). Forward: h = norm(x); the
 * stream gets x, h; logits = h W_r^T (scratch); moe_route_fwd writes the
 * gates into the stream and saves the fp32 probabilities and the int32
 * choices. Saved: the norm's statistics, h [B T D], probabilities [B T E],
 * choices [B T top_k]; it keeps its input. Backward from the stream's
 * gradient: the logits' gradient (scratch) from the gates', h's = the
 * stream's h part + dlogits W_r (scratch), through the norm (scratch, when
 * there is one), plus the running sum's gradient.
 *
 * moe_expert e: parameters its MLP's (layer_llm_parts.c). Forward: gather
 * its C rows per sample (moe_gather: index and gate per slot, X [B C D]),
 * Y = MLP(X), copy the stream (the last expert: its running sum only) and
 * scatter gate x Y into the running sum. Saved: index int32 and gate fp32
 * [B C] each, X, the MLP's, Y. Backward: the stream's gradient passes on
 * (the last expert makes it: the running sum's gradient, zeros for h and
 * the gates); dY = gate x the running sum's gradient at its rows and the
 * gate's gradient = that . Y (moe_gather_grad, into column 2D + e); the
 * MLP's backward to dX, scattered into h's gradient. Scratch: dY, the
 * MLP's work, dX.
 *
 * Rows mode (expert parallelism over E ranks, exec/op_ep.c: ctx->ep = E):
 * the pass is at batch E b and reads and writes the all-to-alls' buffers,
 * [E members][X/E experts][b C][d]: forward X = its rows from every member
 * (copied into the saved block), Y = MLP(X) written back at the same
 * places of `out`; backward dY from `dout` at those places, dX to `din`'s.
 * The gathering, gating and scattering are the all-to-alls' side's; the
 * saved block's index and gate stay unused.
 *
 * Split over a tensor-parallel group (expert tensor parallelism, no
 * sequence parallelism: every rank has every token): each rank holds its
 * slice of the MLP (st_mlp_spans), so Y and dX are partial sums; the
 * group's all-reduce of each completes them (tp_rows: Y in the saved
 * block; dX is written over X there, which the backward no longer needs)
 * and tp_tail scatters them into the stream (forward: gate x Y into the
 * running sum; backward: dX into h's gradient). A down-projection bias is
 * added by rank 0 only.
 */
#include <math.h>

#include "exec/layers/layers_private.h"

/* ---- moe_router --------------------------------------------------------------------------- */

typedef struct {
  int B, T, d, experts, k, capacity, norm_topk;
  StNormPart norm;
} Router;

static Router
router_of(const StLayer *l, int batch)
{
  Router r;
  r.B = batch;
  r.T = (int)l->in_shape.dims[0];
  r.d = (int)l->in_shape.dims[1];
  r.experts = (int)st_layer_attr(l, "experts", 1);
  r.k = (int)st_layer_attr(l, "top_k", 1);
  r.capacity = (int)st_moe_capacity(l);
  r.norm_topk = st_layer_attr(l, "norm_topk", 1) != 0;
  r.norm = (StNormPart){(int)st_layer_attr(l, "norm", 0), batch * r.T, r.d, NULL, NULL};
  return r;
}

typedef struct {
  void *h;
  float *probs;
  int32_t *sel;
} RouterSaved;

static size_t
router_layout(Router *r, StKDtype dt, char *base, RouterSaved *s)
{
  StCarve cv = {base, 0};
  size_t rows = (size_t)r->B * r->T;
  st_norm_layout(&r->norm, &cv);
  s->h = st_carve(&cv, rows * r->d * st_kdt_size(dt));
  s->probs = st_carve(&cv, rows * r->experts * sizeof(float));
  s->sel = st_carve(&cv, rows * r->k * sizeof(int32_t));
  return cv.offset;
}

static void
router_init(const StLayer *l, float *params, uint64_t seed)
{
  Router r = router_of(l, 1);
  size_t np = st_norm_param_count(r.norm.kind, r.d);
  st_norm_init(r.norm.kind, r.d, params);
  st_init_uniform(params + np, (size_t)r.experts * r.d, 1.0f / sqrtf((float)r.d), seed, l, 0);
}

static size_t
router_saved(const StLayer *l, int batch, StKDtype dt)
{
  Router r = router_of(l, batch);
  RouterSaved s;
  return router_layout(&r, dt, NULL, &s);
}

static int
router_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
               const void *in, void *out, void *saved)
{
  const StKernels *k = c->k;
  Router r = router_of(l, batch);
  RouterSaved s;
  router_layout(&r, c->dt, saved, &s);
  int rows = r.B * r.T, w = 2 * r.d + r.experts;
  size_t es = st_kdt_size(c->dt);
  const void *wr = st_at(params, c->dt, st_norm_param_count(r.norm.kind, r.d));
  void *logits;
  ST_SCRATCH(logits, c, (size_t)rows * r.experts * es);
  ST_TRY(st_norm_forward(c, &r.norm, params, in, s.h));
  ST_TRY(k->copy2d(c->stream, out, w, in, r.d, rows, r.d, c->dt));
  ST_TRY(k->copy2d(c->stream, st_at(out, c->dt, (size_t)r.d), w, s.h, r.d, rows, r.d, c->dt));
  ST_TRY(k->gemm(c->stream, 0, 1, rows, r.experts, r.d, 1.0f, s.h, wr, 0.0f, logits, c->dt, 1, 0,
                 0, 0));
  return k->moe_route_fwd(c->stream, st_at(out, c->dt, 2 * (size_t)r.d), w, s.probs, s.sel,
                          logits, r.B, r.T, r.experts, r.k, r.capacity, r.norm_topk, c->dt);
}

static int
router_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                const void *in, const void *out, const void *saved, const void *dout, void *din,
                void *dparams)
{
  const StKernels *k = c->k;
  Router r = router_of(l, batch);
  RouterSaved s;
  router_layout(&r, c->dt, (char *)saved, &s);
  int rows = r.B * r.T, w = 2 * r.d + r.experts;
  size_t es = st_kdt_size(c->dt), np = st_norm_param_count(r.norm.kind, r.d);
  const void *wr = st_at(params, c->dt, np);
  gboolean norm = r.norm.kind != 2;
  void *dlogits, *dh, *t = NULL;
  ST_SCRATCH(dlogits, c, (size_t)rows * r.experts * es);
  ST_SCRATCH(dh, c, (size_t)rows * r.d * es);
  if (norm)
    ST_SCRATCH(t, c, (size_t)rows * r.d * es);
  ST_TRY(k->moe_route_bwd(c->stream, dlogits, st_at(dout, c->dt, 2 * (size_t)r.d), w, s.probs,
                          s.sel, rows, r.experts, r.k, r.norm_topk, c->dt));
  ST_TRY(k->copy2d(c->stream, dh, r.d, st_at(dout, c->dt, (size_t)r.d), w, rows, r.d, c->dt));
  /* dh += dlogits W_r; dW_r += dlogits^T h */
  ST_TRY(k->gemm(c->stream, 0, 0, rows, r.d, r.experts, 1.0f, dlogits, wr, 1.0f, dh, c->dt, 1, 0,
                 0, 0));
  ST_TRY(k->gemm(c->stream, 1, 0, r.experts, r.d, rows, 1.0f, dlogits, s.h, 1.0f,
                 st_at(dparams, c->dt, np), c->dt, 1, 0, 0, 0));
  if (norm)
    ST_TRY(st_norm_backward(c, &r.norm, params, in, dh, din != NULL ? t : NULL, dparams));
  if (din == NULL)
    return 0;
  ST_TRY(k->copy2d(c->stream, din, r.d, dout, w, rows, r.d, c->dt));
  return k->add(c->stream, din, din, norm ? t : dh, c->dt, (size_t)rows * r.d);
}

const StLayerImpl st_impl_moe_router = {
  .type = "moe_router",
  .init = router_init,
  .saved_bytes = router_saved,
  .forward = router_forward,
  .backward = router_backward,
};

/* ---- moe_expert ------------------------------------------------------------------------------ */

typedef struct {
  int B, T, d, experts, index, capacity, last, w;
  StMlpGeom mlp;
} Expert;

static Expert
expert_of(const StLayer *l, int batch)
{
  Expert x;
  x.B = batch;
  x.T = (int)l->in_shape.dims[0];
  x.experts = (int)st_layer_attr(l, "experts", 1);
  x.index = (int)st_layer_attr(l, "expert", 0);
  x.capacity = (int)st_layer_attr(l, "capacity", 1);
  x.w = (int)l->in_shape.dims[1];
  x.d = (x.w - x.experts) / 2;
  x.last = x.index == x.experts - 1;
  x.mlp = st_mlp_geom(l, batch * x.capacity, x.d, "bias");
  return x;
}

/* Split: the down projection's bias on rank 0's rows only (the reduction
 * sums the ranks'). */
static Expert
expert_on(const StLayerCtx *c, const StLayer *l, int batch)
{
  Expert x = expert_of(l, batch);
  if (l->tp > 1 && c->tp_rank != 0)
    x.mlp.bias_rows = 0;
  return x;
}

typedef struct {
  int32_t *idx;
  float *gate;
  void *x, *y;
  StMlpSaved mlp;
} ExpertSaved;

static size_t
expert_layout(const Expert *x, StKDtype dt, char *base, ExpertSaved *s)
{
  StCarve cv = {base, 0};
  size_t slots = (size_t)x->B * x->capacity, map = slots * x->d * st_kdt_size(dt);
  s->idx = st_carve(&cv, slots * sizeof(int32_t));
  s->gate = st_carve(&cv, slots * sizeof(float));
  s->x = st_carve(&cv, map);
  st_mlp_layout(&x->mlp, dt, &cv, &s->mlp);
  s->y = st_carve(&cv, map);
  return cv.offset;
}

static void
expert_init(const StLayer *l, float *params, uint64_t seed)
{
  Expert x = expert_of(l, 1);
  st_mlp_init(&x.mlp, params, seed, l, 0);
}

static size_t
expert_saved(const StLayer *l, int batch, StKDtype dt)
{
  Expert x = expert_of(l, batch);
  ExpertSaved s;
  return expert_layout(&x, dt, NULL, &s);
}

/* Rows mode: this expert's rows in a buffer [E][X/E][b C d]: E blocks of
 * b C d elements, (X/E) b C d apart, from *at. */
static int
ep_rows(const StLayerCtx *c, const Expert *x, int *at, int *ld)
{
  int n = x->experts / c->ep, block = x->B / c->ep * x->capacity * x->d;
  *at = (x->index - c->ep_index * n) * block;
  *ld = n * block;
  return block;
}

static int
expert_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
               const void *in, void *out, void *saved)
{
  const StKernels *k = c->k;
  Expert x = expert_on(c, l, batch);
  ExpertSaved s;
  expert_layout(&x, c->dt, saved, &s);
  if (c->ep > 0) {
    int at, ld, block = ep_rows(c, &x, &at, &ld);
    ST_TRY(k->copy2d(c->stream, s.x, block, st_at(in, c->dt, (size_t)at), ld, c->ep, block,
                     c->dt));
    ST_TRY(st_mlp_forward(c, &x.mlp, params, s.x, s.y, &s.mlp));
    if (l->tp > 1) /* Y is a partial sum: expert_tail places it, reduced */
      return 0;
    return k->copy2d(c->stream, st_at(out, c->dt, (size_t)at), ld, s.y, block, c->ep, block,
                     c->dt);
  }
  int rows = x.B * x.T, ld_out = x.last ? x.d : x.w;
  ST_TRY(k->moe_gather(c->stream, s.x, s.idx, s.gate, in, x.w, x.d, 2 * x.d + x.index, x.B, x.T,
                       x.capacity, x.d, c->dt));
  ST_TRY(st_mlp_forward(c, &x.mlp, params, s.x, s.y, &s.mlp));
  ST_TRY(k->copy2d(c->stream, out, ld_out, in, x.w, rows, ld_out, c->dt));
  if (l->tp > 1) /* Y is a partial sum: expert_tail scatters it, reduced */
    return 0;
  return k->moe_scatter(c->stream, out, ld_out, 0, s.y, s.idx, s.gate, x.B, x.T, x.capacity, x.d,
                        c->dt);
}

static int
expert_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                const void *in, const void *out, const void *saved, const void *dout, void *din,
                void *dparams)
{
  const StKernels *k = c->k;
  Expert x = expert_on(c, l, batch);
  ExpertSaved s;
  expert_layout(&x, c->dt, (char *)saved, &s);
  int rows = x.B * x.T, ld_sum = x.last ? x.d : x.w;
  size_t es = st_kdt_size(c->dt), map = (size_t)x.B * x.capacity * x.d * es;
  void *dy, *work, *dx;
  ST_SCRATCH(dy, c, map);
  ST_SCRATCH(work, c, st_mlp_bwd_work(&x.mlp, c->dt));
  ST_SCRATCH(dx, c, map);
  if (c->ep > 0) {
    int at, ld, block = ep_rows(c, &x, &at, &ld);
    ST_TRY(k->copy2d(c->stream, dy, block, st_at(dout, c->dt, (size_t)at), ld, c->ep, block,
                     c->dt));
    ST_TRY(st_mlp_backward(c, &x.mlp, params, s.x, &s.mlp, dy, dx, dparams, work));
    if (l->tp > 1) /* dX is a partial sum: kept over X, expert_tail places it, reduced */
      return k->copy2d(c->stream, s.x, block, dx, block, c->ep, block, c->dt);
    return k->copy2d(c->stream, st_at(din, c->dt, (size_t)at), ld, dx, block, c->ep, block,
                     c->dt);
  }
  if (din != NULL) {
    if (x.last)
      ST_TRY(k->memset0(c->stream, din, (size_t)rows * x.w * es));
    ST_TRY(k->copy2d(c->stream, din, x.w, dout, ld_sum, rows, ld_sum, c->dt));
  }
  ST_TRY(k->moe_gather_grad(c->stream, dy, din, x.w, 2 * x.d + x.index, dout, ld_sum, s.y, s.idx,
                            s.gate, x.B, x.T, x.capacity, x.d, c->dt));
  ST_TRY(st_mlp_backward(c, &x.mlp, params, s.x, &s.mlp, dy, dx, dparams, work));
  if (l->tp > 1) /* dX is a partial sum: kept over X for the reduction, then expert_tail */
    return k->copy2d(c->stream, s.x, x.d, dx, x.d, x.B * x.capacity, x.d, c->dt);
  if (din == NULL)
    return 0;
  return k->moe_scatter(c->stream, din, x.w, x.d, dx, s.idx, NULL, x.B, x.T, x.capacity, x.d,
                        c->dt);
}

static void *
expert_rows(const StLayer *l, int batch, StKDtype dt, StPass pass, void *saved, size_t *elems)
{
  Expert x = expert_of(l, batch);
  ExpertSaved s;
  expert_layout(&x, dt, saved, &s);
  *elems = (size_t)x.B * x.capacity * x.d;
  return pass == ST_PASS_BWD ? s.x : s.y;
}

static int
expert_tail(const StLayerCtx *c, const StLayer *l, int batch, StPass pass, void *saved,
            void *target)
{
  Expert x = expert_of(l, batch);
  ExpertSaved s;
  expert_layout(&x, c->dt, saved, &s);
  if (c->ep > 0) { /* rows mode: back to this expert's places in the all-to-all's buffer */
    int at, ld, block = ep_rows(c, &x, &at, &ld);
    return c->k->copy2d(c->stream, st_at(target, c->dt, (size_t)at), ld,
                        pass == ST_PASS_BWD ? s.x : s.y, block, c->ep, block, c->dt);
  }
  if (pass == ST_PASS_BWD)
    return target == NULL ? 0
                          : c->k->moe_scatter(c->stream, target, x.w, x.d, s.x, s.idx, NULL,
                                              x.B, x.T, x.capacity, x.d, c->dt);
  return c->k->moe_scatter(c->stream, target, x.last ? x.d : x.w, 0, s.y, s.idx, s.gate, x.B,
                           x.T, x.capacity, x.d, c->dt);
}

static int
expert_spans(const StLayer *l, int rank, StTpSpan *out)
{
  Expert x = expert_of(l, 1);
  int n = 0;
  st_mlp_spans(&x.mlp, rank, out, &n);
  return n;
}

const StLayerImpl st_impl_moe_expert = {
  .type = "moe_expert",
  .init = expert_init,
  .saved_bytes = expert_saved,
  .forward = expert_forward,
  .backward = expert_backward,
  .tp_spans = expert_spans,
  .tp_rows = expert_rows,
  .tp_tail = expert_tail,
};
