/* layer_llm.c: the standalone LLM layers (model types in
 * sim/model/layer_llm.c and layer_attention.c), each one part of
 * layer_llm_parts.c on the layer's input:
 *
 *   rmsnorm    weight [dim] (init 1); saves the fp32 1/rms per token
 *   swiglu,    W1 [2 ffn, dim] (gate rows, then up rows), b1 [2 ffn],
 *   geglu      W2 [dim, ffn], b2 [dim] (biases with `bias`)
 *   attention  W_qkv [(heads + 2 kv_heads) head_dim, dim], b_qkv, W_o [dim,
 *              heads head_dim], b_o (biases with qkv_bias, out_bias)
 *
 * Each keeps its input (the model says so); the attention's dense
 * probabilities are what selective recomputation drops and remakes.
 *
 * Split over a tensor-parallel group (layer_impl.h), the attention holds its
 * heads' rows of W_qkv and columns of W_o, the MLPs their share of ffn
 * (gate and up rows, W2's columns): both run as whole on every row of the
 * micro-batch with their share and write partial sums; the output bias goes
 * to the rank's own rows. RMSNorm is replicated.
 */
#include "exec/layers/layers_private.h"

/* ---- rmsnorm ---------------------------------------------------------------------- */

static StNormPart
rms_part(const StLayer *l, int batch)
{
  StNormPart n = {0, st_layer_rows(&l->in_shape, batch), st_layer_last_dim(&l->in_shape), NULL,
                  NULL};
  return n;
}

static void
rmsnorm_init(const StLayer *l, float *params, uint64_t seed)
{
  st_norm_init(0, st_layer_last_dim(&l->in_shape), params);
}

static size_t
rmsnorm_saved(const StLayer *l, int batch, StKDtype dt)
{
  StNormPart n = rms_part(l, batch);
  StCarve cv = {NULL, 0};
  st_norm_layout(&n, &cv);
  return cv.offset;
}

static int
rmsnorm_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                const void *in, void *out, void *saved)
{
  StNormPart n = rms_part(l, batch);
  StCarve cv = {saved, 0};
  st_norm_layout(&n, &cv);
  return st_norm_forward(c, &n, params, in, out);
}

static int
rmsnorm_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                 const void *in, const void *out, const void *saved, const void *dout,
                 void *din, void *dparams)
{
  StNormPart n = rms_part(l, batch);
  StCarve cv = {(char *)saved, 0};
  st_norm_layout(&n, &cv);
  return st_norm_backward(c, &n, params, in, dout, din, dparams);
}

const StLayerImpl st_impl_rmsnorm = {
  .type = "rmsnorm",
  .init = rmsnorm_init,
  .saved_bytes = rmsnorm_saved,
  .forward = rmsnorm_forward,
  .backward = rmsnorm_backward,
};

/* ---- swiglu, geglu ------------------------------------------------------------------- */

/* With the output bias on the rank's own rows when split (`rank` -1: all). */
static StMlpGeom
glu_geom(const StLayer *l, int batch, int rank)
{
  StMlpGeom m = st_mlp_geom(l, st_tp_rows(l, batch), st_layer_last_dim(&l->in_shape), "bias");
  if (rank >= 0)
    st_tp_own_rows(l, batch, rank, &m.bias_first, &m.bias_rows);
  return m;
}

static int
glu_spans(const StLayer *l, int rank, StTpSpan *out)
{
  StMlpGeom m = glu_geom(l, 1, -1);
  int n = 0;
  st_mlp_spans(&m, rank, out, &n);
  return n;
}

static void
glu_init(const StLayer *l, float *params, uint64_t seed)
{
  StMlpGeom m = glu_geom(l, 1, -1);
  st_mlp_init(&m, params, seed, l, 0);
}

static size_t
glu_saved(const StLayer *l, int batch, StKDtype dt)
{
  StMlpGeom m = glu_geom(l, batch, -1);
  StMlpSaved s;
  StCarve cv = {NULL, 0};
  st_mlp_layout(&m, dt, &cv, &s);
  return cv.offset;
}

static int
glu_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params, const void *in,
            void *out, void *saved)
{
  StMlpGeom m = glu_geom(l, batch, c->tp_rank);
  StMlpSaved s;
  StCarve cv = {saved, 0};
  st_mlp_layout(&m, c->dt, &cv, &s);
  return st_mlp_forward(c, &m, params, in, out, &s);
}

static int
glu_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
             const void *in, const void *out, const void *saved, const void *dout, void *din,
             void *dparams)
{
  StMlpGeom m = glu_geom(l, batch, c->tp_rank);
  StMlpSaved s;
  StCarve cv = {(char *)saved, 0};
  st_mlp_layout(&m, c->dt, &cv, &s);
  void *work;
  ST_SCRATCH(work, c, st_mlp_bwd_work(&m, c->dt));
  return st_mlp_backward(c, &m, params, in, &s, dout, din, dparams, work);
}

const StLayerImpl st_impl_swiglu = {
  .type = "swiglu",
  .init = glu_init,
  .saved_bytes = glu_saved,
  .forward = glu_forward,
  .backward = glu_backward,
  .tp_spans = glu_spans,
};

const StLayerImpl st_impl_geglu = {
  .type = "geglu",
  .init = glu_init,
  .saved_bytes = glu_saved,
  .forward = glu_forward,
  .backward = glu_backward,
  .tp_spans = glu_spans,
};

/* ---- attention ------------------------------------------------------------------------ */

static int
attention_spans(const StLayer *l, int rank, StTpSpan *out)
{
  StAttnGeom a = st_attn_geom(l, 1);
  int n = 0;
  st_attn_spans(&a, rank, out, &n);
  return n;
}

static void
attention_init(const StLayer *l, float *params, uint64_t seed)
{
  StAttnGeom a = st_attn_geom(l, 1);
  st_attn_init(&a, params, seed, l, 0);
}

/* The saved block's tensors, the probabilities from c->again when given. */
static size_t
attention_layout(const StAttnGeom *a, StKDtype dt, char *saved, void *again, StAttnSaved *s)
{
  StCarve main = {saved, 0}, other = {again, 0};
  st_attn_layout(a, dt, &main, again != NULL ? &other : &main, s);
  return main.offset;
}

static size_t
attention_saved(const StLayer *l, int batch, StKDtype dt)
{
  StAttnGeom a = st_attn_geom(l, batch);
  StAttnSaved s;
  return attention_layout(&a, dt, NULL, NULL, &s);
}

static size_t
attention_again(const StLayer *l, int batch, StKDtype dt)
{
  StAttnGeom a = st_attn_geom(l, batch);
  StAttnSaved s;
  StCarve main = {NULL, 0}, again = {NULL, 0};
  st_attn_layout(&a, dt, &main, &again, &s);
  return again.offset;
}

static int
attention_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                  const void *in, void *out, void *saved)
{
  StAttnGeom a = st_attn_geom(l, batch);
  st_tp_own_rows(l, batch, c->tp_rank, &a.bias_first, &a.bias_rows);
  StAttnSaved s;
  attention_layout(&a, c->dt, saved, c->again, &s);
  void *work;
  ST_SCRATCH(work, c, st_attn_fwd_work(&a, c->dt));
  return st_attn_forward(c, &a, params, in, out, &s, work);
}

static int
attention_recompute(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                    const void *in, const void *saved)
{
  StAttnGeom a = st_attn_geom(l, batch);
  StAttnSaved s;
  attention_layout(&a, c->dt, (char *)saved, c->again, &s);
  void *work;
  ST_SCRATCH(work, c, st_attn_again_work(&a, c->dt));
  return st_attn_recompute(c, &a, &s, work);
}

static int
attention_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                   const void *in, const void *out, const void *saved, const void *dout,
                   void *din, void *dparams)
{
  StAttnGeom a = st_attn_geom(l, batch);
  StAttnSaved s;
  attention_layout(&a, c->dt, (char *)saved, c->again, &s);
  void *work;
  ST_SCRATCH(work, c, st_attn_bwd_work(&a, c->dt));
  return st_attn_backward(c, &a, params, in, &s, dout, din, dparams, work);
}

const StLayerImpl st_impl_attention = {
  .type = "attention",
  .init = attention_init,
  .saved_bytes = attention_saved,
  .forward = attention_forward,
  .backward = attention_backward,
  .again_bytes = attention_again,
  .recompute = attention_recompute,
  .tp_spans = attention_spans,
};
