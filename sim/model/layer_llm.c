/* layer_llm.c: the feed-forward and normalization parts of LLMs: RMSNorm
 * (Zhang and Sennrich 2019) and gated MLPs (Shazeer 2020, "GLU Variants
 * Improve Transformer"): SwiGLU (LLaMA, Mistral, Qwen2) and GeGLU (Gemma),
 * as layers of their own and as parts of llama_block and the MoE experts.
 *
 * MLP on x [s, d] with f = ffn / tp per rank; gated kinds (n = 2) project
 * to a gate and an up half, plain GELU (n = 1) to one:
 *   params = n f d + f d (+ n f + d with bias)
 *   fwd    = 2 s d f (n + 1): SwiGLU 6 s d f
 *   bwd    = 2 x fwd
 *   kept   = besides the input (the first projection's): its output s n f
 *            (the activation's input), and the activation's output s f (the
 *            down projection's input). Plain GELU with f = 4 d at 16 bits:
 *            Korthikanti et al.'s MLP without dropout, 2 s d + 16 s d bytes.
 *   memory(), as exec/layers/layer_llm_parts.c: saved u [B s n f] and
 *            h [B s f]; backward scratch dh [B s f] and du [B s n f].
 *
 * RMSNorm over the last dim d: y = x / rms(x) * g, rms = sqrt(mean(x^2) +
 * eps): params d; 4 FLOPs per element forward (square, sum, two scales),
 * twice that backward; keeps its input, saves the fp32 1/rms per token.
 */
#include "model/layer_types_private.h"

const char *const ST_MLP_NAMES[] = {"swiglu", "geglu", "gelu", "none", NULL};
const char *const ST_NORM_NAMES[] = {"rmsnorm", "layernorm", "none", NULL};

#define RMSNORM_FWD_FLOPS_PER_ELEM 4.0

/* ---- parts ---------------------------------------------------------------------- */

int64_t
st_norm_params(StNormKind kind, int64_t d)
{
  return kind == ST_NORM_RMS ? d : kind == ST_NORM_LAYER ? 2 * d : 0;
}

int64_t
st_norm_saved(StNormKind kind, int64_t rows)
{
  int64_t v = st_layer_aligned(rows * (int64_t)sizeof(float));
  return kind == ST_NORM_RMS ? v : kind == ST_NORM_LAYER ? 2 * v : 0;
}

static int64_t
mlp_n(const StMlpPart *p)
{
  return p->kind == ST_MLP_GELU ? 1 : 2;
}

gboolean
st_mlp_part(const StLayer *layer, const char *ffn_key, int64_t rows, int64_t d, int64_t ffn,
            StMlpKind kind, gboolean bias, StMlpPart *p, GError **error)
{
  if (!st_layer_check_tp(layer, ffn_key, ffn, error) ||
      !st_layer_check_size(3.0 * (double)d * (double)ffn, ST_MAX_COUNT, "the weights", error) ||
      !st_layer_check_size(3.0 * (double)rows * (double)ffn * MAX(layer->tp, 1), ST_MAX_ELEMS,
                           "the kept elements", error))
    return FALSE;
  int64_t t = MAX(layer->tp, 1);
  *p = (StMlpPart){rows * (layer->sp ? t : 1), d, ffn / t, kind, bias};
  return TRUE;
}

int64_t
st_mlp_params(const StMlpPart *p)
{
  if (p->kind == ST_MLP_NONE)
    return 0;
  int64_t n = mlp_n(p);
  return (n + 1) * p->f * p->d + (p->bias ? n * p->f + p->d : 0);
}

double
st_mlp_fwd_flops(const StMlpPart *p)
{
  if (p->kind == ST_MLP_NONE)
    return 0;
  return 2.0 * (double)p->rows * (double)p->d * (double)p->f * (double)(mlp_n(p) + 1);
}

int64_t
st_mlp_kept(const StMlpPart *p, int e)
{
  if (p->kind == ST_MLP_NONE)
    return 0;
  return p->rows * p->f * (mlp_n(p) + 1) * e;
}

void
st_mlp_memory(const StMlpPart *p, int batch, int e, StPartMemory *m)
{
  *m = (StPartMemory){0};
  if (p->kind == ST_MLP_NONE)
    return;
  int64_t rf = batch * p->rows * p->f * e;
  int64_t u = st_layer_aligned(rf * mlp_n(p)), h = st_layer_aligned(rf);
  m->saved = u + h;
  m->again = h; /* the activation's output, made again from u */
  m->bwd = h + u;
}

/* ---- rmsnorm ---------------------------------------------------------------------- */

static const StAttrSpec NO_ATTRS[] = {{NULL}};

static gboolean
rmsnorm_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  st_layer_same_shape(layer, dtype_bytes);
  double elems = (double)st_shape_elems(&layer->in_shape);
  layer->params = st_norm_params(ST_NORM_RMS, layer->in_shape.dims[layer->in_shape.n_dims - 1]);
  layer->fwd_flops = RMSNORM_FWD_FLOPS_PER_ELEM * elems;
  layer->bwd_flops = 2.0 * layer->fwd_flops;
  layer->act_bytes = layer->in_bytes;
  return TRUE;
}

static void
rmsnorm_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  const StShape *in = &layer->in_shape;
  out->saved = st_norm_saved(ST_NORM_RMS, st_shape_elems(in) / in->dims[in->n_dims - 1] * batch);
}

const StLayerType st_layer_rmsnorm = {
  .name = "rmsnorm",
  .summary = "RMS normalization over the last dim, learned scale (LLaMA)",
  .attrs = NO_ATTRS,
  .derive = rmsnorm_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = rmsnorm_memory,
  .tp = ST_TP_REPLICATED,
};

/* ---- swiglu, geglu ---------------------------------------------------------------- */

static const StAttrSpec GLU_ATTRS[] = {
  {.key = "ffn", .min = 1, .required = TRUE, .help = "hidden width (LLaMA-2 7B: 11008)"},
  {.key = "bias", .flag = TRUE, .help = "biases on the three projections"},
  {NULL},
};

static gboolean
glu_part(const StLayer *layer, StMlpPart *p, GError **error)
{
  StMlpKind kind = layer->type == &st_layer_geglu ? ST_MLP_GEGLU : ST_MLP_SWIGLU;
  return st_mlp_part(layer, "ffn", layer->in_shape.dims[0], layer->in_shape.dims[1],
                     st_layer_attr(layer, "ffn", 1), kind, st_layer_attr(layer, "bias", 0) != 0,
                     p, error);
}

static gboolean
glu_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  StMlpPart p;
  if (!st_layer_check_dims(layer, 2, "[tokens, dim]", error) || !glu_part(layer, &p, error))
    return FALSE;
  st_layer_same_shape(layer, dtype_bytes);
  layer->params = st_mlp_params(&p);
  layer->fwd_flops = st_mlp_fwd_flops(&p);
  layer->bwd_flops = 2.0 * layer->fwd_flops;
  layer->act_bytes = layer->in_bytes + st_mlp_kept(&p, dtype_bytes);
  layer->act_again[ST_RC_MLP_ACT] = p.rows * p.f * dtype_bytes;
  return TRUE;
}

static void
glu_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  StMlpPart p;
  gboolean ok = glu_part(layer, &p, NULL);
  g_return_if_fail(ok);
  StPartMemory m;
  st_mlp_memory(&p, batch, dtype_bytes, &m);
  out->saved = m.saved;
  out->again[ST_RC_MLP_ACT] = m.again;
  out->bwd_scratch = m.bwd;
}

const StLayerType st_layer_swiglu = {
  .name = "swiglu",
  .summary = "gated MLP down(silu(gate(x)) * up(x)) (LLaMA's feed-forward)",
  .attrs = GLU_ATTRS,
  .derive = glu_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = glu_memory,
  .tp = ST_TP_PARALLEL,
};

const StLayerType st_layer_geglu = {
  .name = "geglu",
  .summary = "gated MLP down(gelu(gate(x)) * up(x)) (Gemma's feed-forward)",
  .attrs = GLU_ATTRS,
  .derive = glu_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = glu_memory,
  .tp = ST_TP_PARALLEL,
};
