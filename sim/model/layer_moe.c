/* layer_moe.c: a mixture-of-experts feed-forward (Shazeer et al. 2017;
 * GShard, Lepikhin et al. 2020; Switch Transformer, Fedus et al. 2021;
 * Mixtral, Jiang et al. 2024) as a chain of layers of a sequential model:
 *
 *   {"name": "l.{i}.moe", "type": "moe_router", "experts": 8, "top_k": 2},
 *   {"repeat": 8, "layers": [{"name": "l.{i}.expert.{j}", "type": "moe_expert",
 *                             "ffn": 14336}]}
 *
 * moe_router computes h = norm(x), the router's logits h W_r^T [s, E], each
 * token's top_k experts and gates (softmax over all experts, renormalized
 * over the top_k with norm_topk, as Mixtral), and each expert's capacity:
 * C = ceil(capacity_pct / 100 x top_k x s / E) tokens of a sequence (its
 * "group", GShard's term), at most s; tokens are admitted in GShard's
 * order, every token's first choice before any second choice, then in
 * token order; a token an expert has no room for is dropped there (its
 * gate is 0, the residual carries it). Its output is the chain's stream
 * [s, 2 d + E]: per token the running sum (x, then x plus the experts'
 * contributions so far), h, and the E gates (0 where not routed).
 *
 * moe_expert e (its index, the expert count, top_k and C come from the
 * chain: link()) gathers the C tokens routed to it (padding with zero rows:
 * it always computes C rows, so its cost and memory do not depend on the
 * data), runs its MLP on them, and adds gate x output into the running sum;
 * its output is the stream again, or, for the last expert, the running sum
 * [s, d]: the MoE layer's output, x + sum_e gate_e MLP_e(h).
 *
 * Each expert is a layer: its weights are a bucket, a ZeRO-3 gather, a
 * pipeline cut of their own, and an expert-parallel strategy places layers
 * (issue 13). The price of the sequential form is the stream: each expert
 * copies it (2 d + E per token) forward and back, transient (an expert
 * keeps what it gathered, not the stream). A router costs 2 s d E FLOPs
 * forward; an expert its MLP's over C rows (layer_llm.c): with
 * capacity_pct 100 the E experts compute top_k x s rows in all, what
 * top_k / E of the expert parameters per token implies (active_params).
 *
 * Kept (per sample): the router its input, h, the fp32 probabilities
 * [s, E] and the int32 choices [s, top_k]; an expert its gathered rows X
 * [C, d], its MLP's tensors, its output rows Y [C, d] (for the gates'
 * gradient) and per row the token index (int32) and gate (fp32).
 * Not modelled: auxiliary load-balancing and z-losses (O(s E) work).
 */
#include <math.h>

#include "model/layer_types_private.h"

/* ---- moe_router -------------------------------------------------------------------- */

static const StAttrSpec ROUTER_ATTRS[] = {
  {.key = "experts", .min = 1, .max = 1 << 16, .required = TRUE,
   .help = "experts E: the moe_expert layers that follow"},
  {.key = "top_k", .fallback = 2, .min = 1, .help = "experts each token goes to"},
  {.key = "capacity_pct", .fallback = 100, .min = 1, .max = 1000000,
   .help = "capacity factor x 100: an expert takes at most ceil(capacity_pct / 100 x top_k x "
           "tokens / experts) tokens of a sequence, the rest pass by (dropped)"},
  {.key = "norm", .fallback = ST_NORM_RMS, .choices = ST_NORM_NAMES,
   .help = "rmsnorm, layernorm or none: the norm before the router and experts"},
  {.key = "norm_topk", .fallback = 1, .flag = TRUE,
   .help = "renormalize the top_k gates to sum to 1 (Mixtral); off: softmax over all experts"},
  {NULL},
};

int64_t
st_moe_capacity(const StLayer *router)
{
  double s = (double)router->in_shape.dims[0];
  double c = ceil((double)st_layer_attr(router, "capacity_pct", 100) / 100.0 *
                  (double)st_layer_attr(router, "top_k", 1) * s /
                  (double)st_layer_attr(router, "experts", 1));
  return (int64_t)MIN(c, s);
}

static gboolean
router_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  if (!st_layer_check_dims(layer, 2, "[tokens, dim]", error))
    return FALSE;
  int64_t s = layer->in_shape.dims[0], d = layer->in_shape.dims[1];
  int64_t experts = st_layer_attr(layer, "experts", 1), k = st_layer_attr(layer, "top_k", 1);
  if (k > experts)
    return st_layer_attr_error(error, "top_k",
                               "%" G_GINT64_FORMAT " is more than the %" G_GINT64_FORMAT
                               " experts",
                               k, experts);
  if (!st_layer_check_size((double)s * (double)(2 * d + experts), ST_MAX_ELEMS,
                           "the stream's elements", error))
    return FALSE;
  StNormKind norm = (StNormKind)st_layer_attr(layer, "norm", ST_NORM_RMS);
  int64_t e = dtype_bytes;
  layer->out_shape = (StShape){.n_dims = 2, .dims = {s, 2 * d + experts}};
  layer->out_bytes = s * (2 * d + experts) * e;
  layer->params = st_norm_params(norm, d) + experts * d;
  layer->fwd_flops = 2.0 * (double)s * (double)d * (double)experts;
  layer->bwd_flops = 2.0 * layer->fwd_flops;
  layer->act_bytes = layer->in_bytes + s * d * e + s * (experts + k) * (int64_t)sizeof(float);
  layer->chain_open = TRUE;
  return TRUE;
}

/* saved: norm statistics, h [B s d], probabilities fp32 [B s E], choices
 * int32 [B s k]; forward scratch the logits [B s E]; backward scratch the
 * logits' gradient, h's and the norm's input gradient [B s d] each (with
 * norm none h's gradient is the input's). */
static void
router_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  int64_t rows = batch * layer->in_shape.dims[0], d = layer->in_shape.dims[1];
  int64_t experts = st_layer_attr(layer, "experts", 1), k = st_layer_attr(layer, "top_k", 1);
  int64_t map = st_layer_aligned(rows * d * dtype_bytes);
  int64_t logits = st_layer_aligned(rows * experts * dtype_bytes);
  out->saved = st_norm_saved((StNormKind)st_layer_attr(layer, "norm", ST_NORM_RMS), rows) + map +
               st_layer_aligned(rows * experts * (int64_t)sizeof(float)) +
               st_layer_aligned(rows * k * (int64_t)sizeof(int32_t));
  out->fwd_scratch = logits;
  /* the norm's input gradient: none without a norm */
  gboolean norm = st_layer_attr(layer, "norm", ST_NORM_RMS) != ST_NORM_NONE;
  out->bwd_scratch = logits + (norm ? 2 : 1) * map;
}

const StLayerType st_layer_moe_router = {
  .name = "moe_router",
  .summary = "MoE router: norm, top-k gates with a capacity per expert; opens the chain of "
             "moe_expert layers",
  .attrs = ROUTER_ATTRS,
  .derive = router_derive,
  .keeps = ST_KEEPS_INPUT,
  .memory = router_memory,
  .tp = ST_TP_REPLICATED,
};

/* ---- moe_expert -------------------------------------------------------------------- */

/* StMlpKind's names an expert accepts. */
static const char *const EXPERT_MLPS[] = {"swiglu", "geglu", "gelu", NULL};

static const StAttrSpec EXPERT_ATTRS[] = {
  {.key = "ffn", .min = 1, .required = TRUE, .help = "hidden width of the expert's MLP"},
  {.key = "mlp", .fallback = ST_MLP_SWIGLU, .choices = EXPERT_MLPS,
   .help = "swiglu, geglu or gelu"},
  {.key = "bias", .flag = TRUE, .help = "biases on the MLP's projections"},
  {.key = "expert", .derived = TRUE, .help = "its index in the chain (derived)"},
  {.key = "experts", .derived = TRUE, .help = "the router's experts (derived)"},
  {.key = "top_k", .derived = TRUE, .help = "the router's top_k (derived)"},
  {.key = "capacity", .derived = TRUE,
   .help = "tokens it takes per sample, C (derived from the router)"},
  {NULL},
};

static gboolean
expert_link(StLayer *layer, const StLayer *prev, GError **error)
{
  gboolean after_router = prev != NULL && prev->type == &st_layer_moe_router;
  if (prev == NULL || !prev->chain_open ||
      (!after_router && prev->type != &st_layer_moe_expert))
    return st_layer_attr_error(error, "type",
                               "a moe_expert follows its moe_router or the expert before it");
  st_layer_set_attr(layer, "experts", st_layer_attr(prev, "experts", 1));
  st_layer_set_attr(layer, "top_k", st_layer_attr(prev, "top_k", 1));
  st_layer_set_attr(layer, "capacity",
                    after_router ? st_moe_capacity(prev) : st_layer_attr(prev, "capacity", 1));
  st_layer_set_attr(layer, "expert", after_router ? 0 : st_layer_attr(prev, "expert", 0) + 1);
  return TRUE;
}

typedef struct {
  int64_t s, d, experts, index, top_k, capacity;
  gboolean last;
  StMlpPart mlp;
} Expert;

static gboolean
expert_of(const StLayer *layer, Expert *x, GError **error)
{
  x->s = layer->in_shape.dims[0];
  x->experts = st_layer_attr(layer, "experts", 1);
  x->index = st_layer_attr(layer, "expert", 0);
  x->top_k = st_layer_attr(layer, "top_k", 1);
  x->capacity = st_layer_attr(layer, "capacity", 1);
  x->last = x->index == x->experts - 1;
  int64_t width = layer->in_shape.dims[1] - x->experts;
  if (width <= 0 || width % 2 != 0) {
    g_autofree char *shape = st_shape_format(&layer->in_shape);
    g_set_error(error, ST_MODEL_ERROR, ST_ERROR_INVALID,
                "input shape %s: not the stream [tokens, 2 dim + %" G_GINT64_FORMAT
                "] of a router with %" G_GINT64_FORMAT " experts",
                shape, x->experts, x->experts);
    return FALSE;
  }
  x->d = width / 2;
  return st_mlp_part(layer, "ffn", x->capacity, x->d, st_layer_attr(layer, "ffn", 1),
                     (StMlpKind)st_layer_attr(layer, "mlp", ST_MLP_SWIGLU),
                     st_layer_attr(layer, "bias", 0) != 0, &x->mlp, error);
}

static gboolean
expert_derive(StLayer *layer, int dtype_bytes, GError **error)
{
  Expert x;
  if (!st_layer_check_dims(layer, 2, "[tokens, 2 dim + experts]", error) ||
      !expert_of(layer, &x, error))
    return FALSE;
  int64_t e = dtype_bytes, c = x.capacity;
  layer->out_shape = layer->in_shape;
  if (x.last)
    layer->out_shape.dims[1] = x.d;
  layer->out_bytes = st_shape_elems(&layer->out_shape) * e;
  layer->chain_open = !x.last;
  layer->params = st_mlp_params(&x.mlp);
  layer->active_params = layer->params * x.top_k / x.experts;
  layer->fwd_flops = st_mlp_fwd_flops(&x.mlp);
  layer->bwd_flops = 2.0 * layer->fwd_flops;
  layer->act_bytes = (x.mlp.rows + c) * x.d * e + st_mlp_kept(&x.mlp, dtype_bytes) +
                     c * (int64_t)(sizeof(int32_t) + sizeof(float));
  /* The roofline's traffic: the expert's own C rows in and out and what it
   * keeps, not the router's stream (2 d + E per token) that the generic
   * count takes from its shapes: a token dispatcher hands an expert its rows
   * without copying the stream (the executor's chain copies it, a cost of
   * that implementation, not of the work), so a bound charging the stream
   * would sit above what a framework's kernels take (tests/test_estimate.c,
   * never-beats-roofline, its moe-fine model). */
  double rows_io = 2.0 * (double)(c * x.d * e);
  layer->fwd_io_bytes = rows_io + (double)layer->act_bytes;
  layer->bwd_io_bytes = rows_io + 2.0 * (double)layer->act_bytes;
  return TRUE;
}

/* saved: row index int32 and gate fp32 [B C] each, X [B C d], the MLP's,
 * Y [B C d]; backward scratch: dY, the MLP's, dX [B C d]. Under sequence
 * parallelism X is the tensor group's rows gathered, [t B C d] (as the MLP's
 * tensors; the projections' weight gradients read them, and the schedule
 * gathers them once), the rest the rank's own C. */
static void
expert_memory(const StLayer *layer, int batch, int dtype_bytes, StLayerMemory *out)
{
  Expert x;
  gboolean ok = expert_of(layer, &x, NULL);
  g_return_if_fail(ok);
  int64_t rows = batch * x.capacity, map = st_layer_aligned(rows * x.d * dtype_bytes);
  int64_t in = st_layer_aligned(batch * x.mlp.rows * x.d * dtype_bytes);
  StPartMemory mlp;
  st_mlp_memory(&x.mlp, batch, dtype_bytes, &mlp);
  out->saved = 2 * st_layer_aligned(rows * 4) + in + map + mlp.saved;
  out->bwd_scratch = 2 * map + mlp.bwd;
}

/* Tensor-parallel: the MLP's output rows are partial sums, all-reduced
 * before they are added in (forward); the gathered rows' gradient after
 * the backward. Not the stream. */
static int
expert_tp_comm(const StLayer *layer, StPass pass, int dtype_bytes, StTpComm out[2])
{
  Expert x;
  gboolean ok = expert_of(layer, &x, NULL);
  g_return_val_if_fail(ok, 0);
  out[0] = (StTpComm){ST_COLL_ALL_REDUCE, x.capacity * x.d * dtype_bytes, FALSE};
  return 1;
}

const StLayerType st_layer_moe_expert = {
  .name = "moe_expert",
  .summary = "MoE expert: an MLP over the tokens its router gives it, up to its capacity; "
             "continues the router's chain, the last closes it",
  .attrs = EXPERT_ATTRS,
  .derive = expert_derive,
  .keeps = 0,
  .memory = expert_memory,
  .tp = ST_TP_PARALLEL,
  .tp_comm = expert_tp_comm,
  .tp_tail = TRUE,
  .link = expert_link,
};
