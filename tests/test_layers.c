/* test_layers.c: every layer implementation (exec/layers/) on small shapes,
 * on the host kernels.
 *
 * The layers come from small inline models that use every layer type but
 * "custom", so shapes and parameter counts are the model loader's. Per layer:
 * - init writes exactly l->params values, finite, the same for the same
 *   seed and (for layers with random weights) different for another seed;
 * - forward writes all of its output and nothing past it, nor past
 *   saved_bytes() in `saved`; backward nothing past din or dparams, and gets
 *   `in` / `out` only when the model type keeps them, as in the executor;
 * - backward matches central finite differences of forward, in fp32, for
 *   sampled entries of the input and of the parameters: L = sum(w * out) with
 *   random w (the loss layer: L = loss_scale * loss_sum), h = 1e-2, agreement
 *   to 2e-2 relative plus 2e-3 absolute; an entry that disagrees gets a
 *   second chance with h = 3e-3. Inside a residual block a ReLU would often
 *   switch sides within h (its batch norm moves every element of a channel),
 *   so for this check the blocks' batch-norm shifts are set to +6 (their
 *   ReLUs pass everything); the blocks are checked besides against the
 *   composition of their primitive layers (conv2d, batchnorm2d, relu), ReLU
 *   masks and all, to fp32 rounding (1e-5 of the largest magnitude);
 * - the bf16 forward agrees with the fp32 forward to 6e-2 of the output's
 *   largest magnitude (a few bf16 roundings of 2^-9 through a block).
 * That whole models built of them learn is test_layers_learn.c.
 */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "exec/layer_impl.h"
#include "model/layer_type.h"
#include "layer_net.h"
#include "testutil.h"

static const StKernels *K;

/* ---- models ---------------------------------------------------------------- */

static const char *const MODELS[] = {
  /* convolutions, pools, residual blocks (with and without downsample,
   * grouped), then a dense head */
  "{\"name\": \"img\", \"input\": [3, 16, 16], \"layers\": ["
  " {\"name\": \"conv1\", \"type\": \"conv2d\", \"out_channels\": 6, \"kernel\": 3,"
  "  \"padding\": 1},"
  " {\"name\": \"bn1\", \"type\": \"batchnorm2d\"},"
  " {\"name\": \"relu1\", \"type\": \"relu\"},"
  " {\"name\": \"pool1\", \"type\": \"maxpool2d\", \"kernel\": 3, \"stride\": 2, \"padding\": 1},"
  " {\"name\": \"b1\", \"type\": \"basic_block\", \"planes\": 6},"
  " {\"name\": \"b2\", \"type\": \"basic_block\", \"planes\": 8, \"stride\": 2},"
  " {\"name\": \"b3\", \"type\": \"bottleneck\", \"planes\": 2},"
  " {\"name\": \"b4\", \"type\": \"bottleneck\", \"planes\": 4, \"stride\": 2, \"groups\": 2,"
  "  \"width_per_group\": 32},"
  " {\"name\": \"gap\", \"type\": \"adaptive_avgpool2d\", \"output_size\": 1},"
  " {\"name\": \"flat\", \"type\": \"flatten\"},"
  " {\"name\": \"fc\", \"type\": \"linear\", \"out_features\": 10},"
  " {\"name\": \"drop\", \"type\": \"dropout\"},"
  " {\"name\": \"act\", \"type\": \"gelu\"},"
  " {\"name\": \"ln\", \"type\": \"layernorm\"},"
  " {\"name\": \"fc2\", \"type\": \"linear\", \"out_features\": 5, \"bias\": false},"
  " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}",
  /* grouped conv without bias, plain norms, average and upsampling pools */
  "{\"name\": \"img2\", \"input\": [4, 9, 9], \"layers\": ["
  " {\"name\": \"c\", \"type\": \"conv2d\", \"out_channels\": 4, \"kernel\": 3, \"stride\": 2,"
  "  \"groups\": 2, \"bias\": false},"
  " {\"name\": \"bn\", \"type\": \"batchnorm2d\", \"affine\": false},"
  " {\"name\": \"ap\", \"type\": \"avgpool2d\", \"kernel\": 2, \"stride\": 1, \"padding\": 1},"
  " {\"name\": \"up\", \"type\": \"adaptive_avgpool2d\", \"output_size\": 7},"
  " {\"name\": \"c2\", \"type\": \"conv2d\", \"out_channels\": 3, \"kernel\": 1},"
  " {\"name\": \"flat\", \"type\": \"flatten\"},"
  " {\"name\": \"fc\", \"type\": \"linear\", \"out_features\": 4},"
  " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}",
  /* a ViT: patches, class token, positions, encoder block, class head */
  "{\"name\": \"vit\", \"input\": [3, 8, 8], \"layers\": ["
  " {\"name\": \"patch\", \"type\": \"conv2d\", \"out_channels\": 8, \"kernel\": 4, \"stride\": 4},"
  " {\"name\": \"tok\", \"type\": \"to_tokens\"},"
  " {\"name\": \"cls\", \"type\": \"class_token\"},"
  " {\"name\": \"pos\", \"type\": \"position_embedding\", \"positions\": 6},"
  " {\"name\": \"blk\", \"type\": \"transformer_block\", \"heads\": 2, \"ffn\": 12},"
  " {\"name\": \"ln\", \"type\": \"layernorm\", \"affine\": false},"
  " {\"name\": \"sel\", \"type\": \"select_token\"},"
  " {\"name\": \"head\", \"type\": \"linear\", \"out_features\": 3},"
  " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}",
  /* a GPT: causal blocks with dropout, a tied head with a bias */
  "{\"name\": \"gpt\", \"input\": [6], \"layers\": ["
  " {\"name\": \"wte\", \"type\": \"embedding\", \"vocab\": 13, \"dim\": 8},"
  " {\"name\": \"wpe\", \"type\": \"position_embedding\"},"
  " {\"name\": \"drop\", \"type\": \"dropout\"},"
  " {\"name\": \"h0\", \"type\": \"transformer_block\", \"heads\": 2, \"causal\": true,"
  "  \"dropout\": true},"
  " {\"name\": \"h1\", \"type\": \"transformer_block\", \"heads\": 4, \"causal\": true},"
  " {\"name\": \"ln_f\", \"type\": \"layernorm\"},"
  " {\"name\": \"head\", \"type\": \"lm_head\", \"vocab\": 13, \"tied\": true, \"bias\": true},"
  " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}",
  /* an untied head */
  "{\"name\": \"lm\", \"input\": [4], \"layers\": ["
  " {\"name\": \"emb\", \"type\": \"embedding\", \"vocab\": 7, \"dim\": 6},"
  " {\"name\": \"head\", \"type\": \"lm_head\", \"vocab\": 7},"
  " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}",
  /* LLM layers: GQA attention with RoPE (flash), dense MQA with biases, a
   * window with partial rotary, RMSNorm, SwiGLU, GeGLU with biases, LLaMA
   * blocks (sequential; NeoX-style parallel with LayerNorm and GELU, dense,
   * not causal; the attention half), two MoE chains (capacity below the
   * tokens; no norm, not renormalized, GELU and GeGLU experts) */
  "{\"name\": \"llm\", \"input\": [6], \"layers\": ["
  " {\"name\": \"emb\", \"type\": \"embedding\", \"vocab\": 11, \"dim\": 8},"
  " {\"name\": \"att\", \"type\": \"attention\", \"heads\": 4, \"kv_heads\": 2,"
  "  \"rope_theta\": 100},"
  " {\"name\": \"attd\", \"type\": \"attention\", \"heads\": 2, \"kv_heads\": 1,"
  "  \"flash\": false, \"qkv_bias\": true, \"out_bias\": true},"
  " {\"name\": \"attw\", \"type\": \"attention\", \"heads\": 2, \"window\": 3,"
  "  \"rope_dim\": 2},"
  " {\"name\": \"n\", \"type\": \"rmsnorm\"},"
  " {\"name\": \"sw\", \"type\": \"swiglu\", \"ffn\": 10},"
  " {\"name\": \"ge\", \"type\": \"geglu\", \"ffn\": 6, \"bias\": true},"
  " {\"name\": \"b0\", \"type\": \"llama_block\", \"heads\": 4, \"kv_heads\": 2,"
  "  \"ffn\": 12},"
  " {\"name\": \"b1\", \"type\": \"llama_block\", \"heads\": 2, \"ffn\": 16,"
  "  \"mlp\": \"gelu\", \"norm\": \"layernorm\", \"parallel_residual\": true,"
  "  \"flash\": false, \"causal\": false, \"mlp_bias\": true, \"qkv_bias\": true},"
  " {\"name\": \"b2\", \"type\": \"llama_block\", \"heads\": 2, \"mlp\": \"none\"},"
  " {\"name\": \"r\", \"type\": \"moe_router\", \"experts\": 3, \"capacity_pct\": 75},"
  " {\"repeat\": 3, \"layers\": [{\"name\": \"e{i}\", \"type\": \"moe_expert\","
  "  \"ffn\": 6}]},"
  " {\"name\": \"rn\", \"type\": \"moe_router\", \"experts\": 2, \"top_k\": 1,"
  "  \"norm\": \"none\", \"norm_topk\": false},"
  " {\"name\": \"f0\", \"type\": \"moe_expert\", \"ffn\": 4, \"mlp\": \"gelu\","
  "  \"bias\": true},"
  " {\"name\": \"f1\", \"type\": \"moe_expert\", \"ffn\": 4, \"mlp\": \"geglu\"},"
  " {\"name\": \"nf\", \"type\": \"rmsnorm\"},"
  " {\"name\": \"head\", \"type\": \"lm_head\", \"vocab\": 11},"
  " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}",
};

/* ---- a layer on the host: buffers, scratch, context ------------------------ */

#define GUARD 512 /* bytes of 0xa5 after every buffer a layer writes */

static void *
guarded(size_t bytes)
{
  uint8_t *p = g_malloc(bytes + GUARD);
  memset(p, 0xa5, bytes + GUARD);
  return p;
}

static void
assert_guard(const void *p, size_t bytes, const char *what, const StLayer *l)
{
  const uint8_t *g = (const uint8_t *)p + bytes;
  for (size_t i = 0; i < GUARD; i++)
    if (g[i] != 0xa5) {
      g_test_message("layer %s (%s) wrote past %s", l->name, l->type->name, what);
      g_assert_not_reached();
    }
}

/* Scratch: every block lives until scratch_release (the executor's rule). */
static void *
scratch_alloc(gpointer pool, size_t bytes)
{
  void *p = g_malloc(bytes);
  g_ptr_array_add(pool, p);
  return p;
}

typedef struct {
  const StModel *m;
  const StLayer *l;
  const StLayerImpl *impl;
  int batch;
  StKDtype dt;
  size_t n_in, n_out, in_bytes, out_bytes, saved_bytes;
  void *in, *out, *saved, *params, *dparams, *din, *dout;
  float *tied, *dtied;       /* lm_head tied: the embedding's table and its gradient */
  int32_t *targets;
  float loss_sum;
  GPtrArray *pool;
  StLayerCtx c;
} One;

/* Rows of a tensor over its last dim: samples times leading dims. */
static int
rows_of(const StShape *s, int batch)
{
  return (int)(st_shape_elems(s) / s->dims[s->n_dims - 1]) * batch;
}

static int
tied_rows(const One *o)
{
  return (int)st_layer_attr(o->l, "vocab", 1) * (int)o->l->in_shape.dims[o->l->in_shape.n_dims - 1];
}

static gboolean
is_loss(const StLayer *l)
{
  return strcmp(l->type->name, "softmax_cross_entropy") == 0;
}

/* Buffers for layer l with random input, params from init(seed 7), in dt. */
static void
one_setup(One *o, const StModel *m, int i, int batch, StKDtype dt, GRand *r)
{
  memset(o, 0, sizeof(*o));
  o->m = m;
  o->l = &m->layers[i];
  o->impl = st_layer_impl_find(o->l->type->name);
  g_assert_nonnull(o->impl);
  o->batch = batch;
  o->dt = dt;
  size_t es = st_kdt_size(dt);
  o->n_in = (size_t)st_shape_elems(&o->l->in_shape) * batch;
  o->n_out = (size_t)st_shape_elems(&o->l->out_shape) * batch;
  o->in_bytes = o->n_in * (st_layer_takes_ids(o->l) ? sizeof(int32_t) : es);
  o->out_bytes = o->n_out * es;
  o->in = guarded(o->in_bytes);
  for (size_t k = 0; k < o->n_in; k++) {
    if (st_layer_takes_ids(o->l)) {
      ((int32_t *)o->in)[k] = g_rand_int_range(r, 0, (int)st_layer_attr(o->l, "vocab", 1));
      continue;
    }
    /* away from ReLU's kink; maxpool's inputs distinct by 0.05 (no ties within h) */
    float v = strcmp(o->l->type->name, "maxpool2d") == 0
                ? 0.05f * (float)((k * 37) % o->n_in) - 0.025f * (float)o->n_in
                : (float)g_rand_double_range(r, 0.05, 1.0) * (g_rand_boolean(r) ? 1 : -1);
    if (dt == ST_KDT_F32)
      ((float *)o->in)[k] = v;
    else
      ((uint16_t *)o->in)[k] = st_f32_to_bf16(v);
  }
  o->out = guarded(o->out_bytes);
  memset(o->out, 0xff, o->out_bytes); /* NaN: forward must write every element */
  o->saved_bytes = o->impl->saved_bytes(o->l, batch, dt);
  o->saved = guarded(o->saved_bytes);
  size_t np = (size_t)o->l->params;
  g_autofree float *p32 = g_new(float, np + 1);
  o->impl->init(o->l, p32, 7);
  o->params = guarded(np * es);
  g_assert_cmpint(K->convert(NULL, o->params, dt, p32, ST_KDT_F32, np), ==, 0);
  o->dparams = guarded(np * es);
  memset(o->dparams, 0, np * es);
  o->din = guarded(o->n_in * es);
  o->dout = guarded(o->out_bytes);
  for (size_t k = 0; k < o->n_out; k++) {
    float v = (float)g_rand_double_range(r, -1, 1);
    if (dt == ST_KDT_F32)
      ((float *)o->dout)[k] = v;
    else
      ((uint16_t *)o->dout)[k] = st_f32_to_bf16(v);
  }
  if (st_layer_attr(o->l, "tied", 0)) { /* an fp32 table stands in for the embedding's */
    g_assert(dt == ST_KDT_F32);
    o->tied = g_new(float, tied_rows(o));
    o->dtied = g_new0(float, tied_rows(o));
    for (int k = 0; k < tied_rows(o); k++)
      o->tied[k] = (float)g_rand_double_range(r, -0.5, 0.5);
  }
  int rows = rows_of(&o->l->in_shape, batch), classes =
    (int)o->l->in_shape.dims[o->l->in_shape.n_dims - 1];
  o->targets = g_new(int32_t, rows);
  for (int k = 0; k < rows; k++)
    o->targets[k] = g_rand_int_range(r, 0, classes);
  o->pool = g_ptr_array_new_with_free_func(g_free);
  o->c = (StLayerCtx){
    .k = K, .dt = dt, .seed = 99, .scratch = scratch_alloc, .pool = o->pool,
    .targets = o->targets, .loss_sum = &o->loss_sum,
    .loss_scale = 1.0f / (float)rows, .tied_params = o->tied, .tied_grads = o->dtied,
  };
}

static void
one_clear(One *o)
{
  g_free(o->in);
  g_free(o->out);
  g_free(o->saved);
  g_free(o->params);
  g_free(o->dparams);
  g_free(o->din);
  g_free(o->dout);
  g_free(o->tied);
  g_free(o->dtied);
  g_free(o->targets);
  g_ptr_array_unref(o->pool);
}

static void
one_forward(One *o)
{
  o->loss_sum = 0;
  g_assert_cmpint(o->impl->forward(&o->c, o->l, o->batch, o->params, o->in, o->out, o->saved), ==,
                  0);
  g_ptr_array_set_size(o->pool, 0);
}

/* Backward as the executor calls it: in / out only when the type keeps them. */
static void
one_backward(One *o, void *din)
{
  unsigned keeps = o->l->type->keeps;
  g_assert_cmpint(o->impl->backward(&o->c, o->l, o->batch, o->params,
                                    (keeps & ST_KEEPS_INPUT) ? o->in : NULL,
                                    (keeps & ST_KEEPS_OUTPUT) ? o->out : NULL, o->saved,
                                    is_loss(o->l) ? NULL : o->dout, din, o->dparams),
                  ==, 0);
  g_ptr_array_set_size(o->pool, 0);
}

/* L = sum(w * out), or the scaled loss (fp32 runs). */
static double
one_loss(One *o)
{
  one_forward(o);
  if (is_loss(o->l))
    return (double)o->c.loss_scale * o->loss_sum;
  double s = 0;
  for (size_t k = 0; k < o->n_out; k++)
    s += (double)((float *)o->dout)[k] * ((float *)o->out)[k];
  return s;
}

/* Every layer of every model, in turn. */
typedef void (*LayerFn)(const StModel *m, int i);

static void
each_layer(LayerFn fn)
{
  for (size_t k = 0; k < G_N_ELEMENTS(MODELS); k++) {
    g_autoptr(StModel) m = st_test_model_parse(MODELS[k]);
    for (int i = 0; i < m->n_layers; i++)
      fn(m, i);
  }
}

/* ---- registry and init ------------------------------------------------------ */

static void
test_registry(void)
{
  for (const StLayerType *const *t = st_layer_types(); *t != NULL; t++) {
    const StLayerImpl *impl = st_layer_impl_find((*t)->name);
    /* custom's numbers are given; mla_block, conv2d_rect and concat (Inception's
     * layers, docs/DEEPPOOL.md) are simulated only */
    if (strcmp((*t)->name, "custom") == 0 || strcmp((*t)->name, "mla_block") == 0 ||
        strcmp((*t)->name, "conv2d_rect") == 0 || strcmp((*t)->name, "concat") == 0)
      g_assert_null(impl);
    else {
      g_assert_nonnull(impl);
      g_assert_cmpstr(impl->type, ==, (*t)->name);
    }
  }
  int n = 0;
  for (const StLayerImpl *const *i = st_layer_impls(); *i != NULL; i++, n++)
    g_assert_nonnull(st_layer_type_find((*i)->type));
  g_assert_cmpint(n, ==, 28);
  g_autoptr(StModel) m = st_test_model_parse(MODELS[3]);
  g_assert_true(st_layer_takes_ids(&m->layers[0]));
  g_assert_false(st_layer_takes_ids(&m->layers[1]));
}

/* init writes exactly l->params finite values, deterministic in the seed. */
static void
init_one(const StModel *m, int i)
{
  const StLayer *l = &m->layers[i];
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  size_t n = (size_t)l->params;
  g_autofree float *a = g_new(float, n + 16), *b = g_new(float, n + 16);
  g_autofree float *c = g_new(float, n + 16);
  for (size_t k = 0; k < n + 16; k++)
    a[k] = b[k] = c[k] = NAN;
  impl->init(l, a, 1234);
  impl->init(l, b, 1234);
  impl->init(l, c, 1235);
  for (size_t k = 0; k < n; k++)
    g_assert_true(isfinite(a[k]));
  for (size_t k = n; k < n + 16; k++)
    g_assert_true(isnan(a[k]));
  g_assert_cmpint(memcmp(a, b, n * sizeof(float)), ==, 0);
  /* norms start at 1 and 0, a tied head's bias at 0: the rest is random */
  gboolean random = n > 0 && strcmp(l->type->name, "batchnorm2d") != 0 &&
                    strcmp(l->type->name, "layernorm") != 0 &&
                    strcmp(l->type->name, "rmsnorm") != 0 && !st_layer_attr(l, "tied", 0);
  if (random)
    g_assert_cmpint(memcmp(a, c, n * sizeof(float)), !=, 0);
}

static void
test_init(void)
{
  each_layer(init_one);
}

/* ---- what forward and backward write ---------------------------------------- */

static void
contract_one(const StModel *m, int i)
{
  for (int d = 0; d < 2; d++) {
    StKDtype dt = d == 0 ? ST_KDT_F32 : ST_KDT_BF16;
    if (dt == ST_KDT_BF16 && st_layer_attr(&m->layers[i], "tied", 0))
      continue;
    g_autoptr(GRand) r = g_rand_new_with_seed(20 + i);
    One o;
    one_setup(&o, m, i, 3, dt, r);
    one_forward(&o);
    g_autofree float *out = g_new(float, o.n_out);
    g_assert_cmpint(K->convert(NULL, out, ST_KDT_F32, o.out, dt, o.n_out), ==, 0);
    for (size_t k = 0; k < o.n_out; k++)
      if (!isfinite(out[k])) {
        g_test_message("layer %s: output %zu not written (%g)", o.l->name, k, out[k]);
        g_assert_not_reached();
      }
    assert_guard(o.out, o.out_bytes, "its output", o.l);
    assert_guard(o.saved, o.saved_bytes, "saved_bytes() in saved", o.l);
    one_backward(&o, st_layer_takes_ids(o.l) ? NULL : o.din);
    one_backward(&o, NULL); /* the first layer's call */
    assert_guard(o.din, o.n_in * st_kdt_size(dt), "din", o.l);
    assert_guard(o.dparams, (size_t)o.l->params * st_kdt_size(dt), "dparams", o.l);
    assert_guard(o.saved, o.saved_bytes, "saved_bytes() in saved", o.l);
    one_clear(&o);
  }
}

static void
test_contract(void)
{
  each_layer(contract_one);
}

/* ---- gradients against finite differences ------------------------------------ */

static void
fd_entry(One *o, float *x, size_t k, float analytic, const char *what)
{
  const float hs[2] = {1e-2f, 3e-3f};
  double fd = 0;
  for (int t = 0; t < 2; t++) {
    float keep = x[k];
    x[k] = keep + hs[t];
    double up = one_loss(o);
    x[k] = keep - hs[t];
    double down = one_loss(o);
    x[k] = keep;
    fd = (up - down) / (2.0 * hs[t]);
    if (fabs(fd - analytic) <= 2e-2 * fmax(fabs(fd), fabs(analytic)) + 2e-3)
      return;
  }
  g_test_message("layer %s (%s): d/d %s[%zu]: finite difference %.6g, backward %.6g", o->l->name,
                 o->l->type->name, what, k, fd, analytic);
  g_assert_not_reached();
}

static gboolean is_block(const StLayer *l);
static void block_shift_betas(One *o);

static void
gradient_one(const StModel *m, int i)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(40 + i);
  One o;
  /* 3 samples: a batch norm over 2 values (a 1x1 map) gives exactly +-1,
   * and a residual sum of two such is exactly at the ReLU's kink */
  one_setup(&o, m, i, 3, ST_KDT_F32, r);
  if (is_block(o.l))
    block_shift_betas(&o);
  one_forward(&o);
  one_backward(&o, st_layer_takes_ids(o.l) ? NULL : o.din);
  g_autofree float *din = g_memdup2(o.din, o.n_in * sizeof(float));
  g_autofree float *dp = g_memdup2(o.dparams, (size_t)o.l->params * sizeof(float));
  for (int s = 0; s < 12 && !st_layer_takes_ids(o.l); s++) {
    size_t k = (size_t)g_rand_int_range(r, 0, (int)o.n_in);
    fd_entry(&o, o.in, k, din[k], "input");
  }
  for (int s = 0; s < 16 && o.l->params > 0; s++) {
    size_t k = (size_t)g_rand_int_range(r, 0, (int)o.l->params);
    fd_entry(&o, o.params, k, dp[k], "params");
  }
  if (o.tied != NULL) {
    g_autofree float *dt = g_memdup2(o.dtied, (size_t)tied_rows(&o) * sizeof(float));
    for (int s = 0; s < 12; s++) {
      size_t k = (size_t)g_rand_int_range(r, 0, tied_rows(&o));
      fd_entry(&o, o.tied, k, dt[k], "tied weights");
    }
  }
  one_clear(&o);
}

static void
test_gradients(void)
{
  each_layer(gradient_one);
}

/* ---- bf16 against fp32 ---------------------------------------------------------- */

static void
bf16_one(const StModel *m, int i)
{
  if (st_layer_attr(&m->layers[i], "tied", 0))
    return;
  g_autoptr(GRand) r32 = g_rand_new_with_seed(60 + i), r16 = g_rand_new_with_seed(60 + i);
  One a, b;
  one_setup(&a, m, i, 2, ST_KDT_F32, r32);
  one_setup(&b, m, i, 2, ST_KDT_BF16, r16); /* the same draws, rounded */
  one_forward(&a);
  one_forward(&b);
  if (is_loss(a.l)) {
    g_assert_cmpfloat_with_epsilon(b.loss_sum, a.loss_sum, 2e-2 * fabs(a.loss_sum));
  } else {
    g_autofree float *y = g_new(float, b.n_out);
    g_assert_cmpint(K->convert(NULL, y, ST_KDT_F32, b.out, ST_KDT_BF16, b.n_out), ==, 0);
    float most = 0;
    for (size_t k = 0; k < a.n_out; k++)
      most = fmaxf(most, fabsf(((float *)a.out)[k]));
    for (size_t k = 0; k < a.n_out; k++)
      if (!(fabsf(y[k] - ((float *)a.out)[k]) <= 6e-2f * most)) {
        g_test_message("layer %s: bf16 output %zu: %g, fp32 %g", a.l->name, k, y[k],
                       ((float *)a.out)[k]);
        g_assert_not_reached();
      }
  }
  one_clear(&a);
  one_clear(&b);
}

static void
test_bf16(void)
{
  each_layer(bf16_one);
}

/* ---- residual blocks against their parts ----------------------------------- */

static gboolean
is_block(const StLayer *l)
{
  return strcmp(l->type->name, "basic_block") == 0 || strcmp(l->type->name, "bottleneck") == 0;
}

/* Appends a primitive layer to a model's JSON text (a conv2d without bias
 * when type is "conv2d"); names are made unique by the text's length. */
static void
part(GString *s, const char *type, int out, int k, int stride, int pad, int groups)
{
  g_string_append_printf(s, "%s{\"name\": \"p%zu\", \"type\": \"%s\"",
                         s->str[s->len - 1] == '[' ? "" : ", ", s->len, type);
  if (strcmp(type, "conv2d") == 0)
    g_string_append_printf(s,
                           ", \"out_channels\": %d, \"kernel\": %d, \"stride\": %d, "
                           "\"padding\": %d, \"groups\": %d, \"bias\": false",
                           out, k, stride, pad, groups);
  g_string_append(s, "}");
}

static GString *
parts_begin(const StLayer *l)
{
  const int64_t *d = l->in_shape.dims;
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "{\"name\": \"parts\", \"input\": [%d, %d, %d], \"layers\": [",
                         (int)d[0], (int)d[1], (int)d[2]);
  return s;
}

/* A residual block as models of primitive layers on the block's input: the
 * main path, and the shortcut (NULL when it is the identity). Their
 * parameters, in order, are the block's documented layout. Transfer full. */
static void
block_parts(const StLayer *l, char **main_json, char **short_json)
{
  int cin = (int)l->in_shape.dims[0], planes = (int)st_layer_attr(l, "planes", 1);
  int stride = (int)st_layer_attr(l, "stride", 1), cout;
  GString *m = parts_begin(l);
  if (strcmp(l->type->name, "bottleneck") == 0) {
    int groups = (int)st_layer_attr(l, "groups", 1);
    int width = (int)(planes * st_layer_attr(l, "width_per_group", 64) / 64 * groups);
    cout = 4 * planes;
    part(m, "conv2d", width, 1, 1, 0, 1);
    part(m, "batchnorm2d", 0, 0, 0, 0, 0);
    part(m, "relu", 0, 0, 0, 0, 0);
    part(m, "conv2d", width, 3, stride, 1, groups);
    part(m, "batchnorm2d", 0, 0, 0, 0, 0);
    part(m, "relu", 0, 0, 0, 0, 0);
    part(m, "conv2d", cout, 1, 1, 0, 1);
  } else {
    cout = planes;
    part(m, "conv2d", planes, 3, stride, 1, 1);
    part(m, "batchnorm2d", 0, 0, 0, 0, 0);
    part(m, "relu", 0, 0, 0, 0, 0);
    part(m, "conv2d", planes, 3, 1, 1, 1);
  }
  part(m, "batchnorm2d", 0, 0, 0, 0, 0);
  g_string_append(m, "]}");
  *main_json = g_string_free(m, FALSE);
  *short_json = NULL;
  if (stride == 1 && cin == cout)
    return;
  GString *s = parts_begin(l);
  part(s, "conv2d", cout, 1, stride, 0, 1);
  part(s, "batchnorm2d", 0, 0, 0, 0, 0);
  g_string_append(s, "]}");
  *short_json = g_string_free(s, FALSE);
}

/* Sets every batch norm shift of a block's parameters to BLOCK_SHIFT: its
 * ReLUs then pass everything (a normalized value is at most sqrt(samples -
 * 1) ~ 7 from 0 in theory, and far less in practice), so finite
 * differences see no kink. */
#define BLOCK_SHIFT 6.0f
static void
block_shift_betas(One *o)
{
  g_autofree char *mj = NULL, *sj = NULL;
  block_parts(o->l, &mj, &sj);
  size_t off = 0;
  for (int p = 0; p < 2; p++) {
    if ((p == 0 ? mj : sj) == NULL)
      continue;
    g_autoptr(StModel) m = st_test_model_parse(p == 0 ? mj : sj);
    for (int j = 0; j < m->n_layers; j++) {
      const StLayer *l = &m->layers[j];
      if (strcmp(l->type->name, "batchnorm2d") == 0)
        for (int64_t c = 0; c < l->params / 2; c++)
          ((float *)o->params)[off + l->params / 2 + c] = BLOCK_SHIFT;
      off += (size_t)l->params;
    }
  }
  g_assert_cmpint(off, ==, o->l->params);
}

/* The block against its parts run one by one: out = relu(main(x) +
 * shortcut(x)), forward and backward, to fp32 rounding (1e-5 of the largest
 * magnitude): this checks the ReLU masks that finite differences avoid. */
static void
block_one(const StModel *m, int i)
{
  if (!is_block(&m->layers[i]))
    return;
  g_autofree char *mj = NULL, *sj = NULL;
  block_parts(&m->layers[i], &mj, &sj);
  g_autoptr(GRand) r = g_rand_new_with_seed(90 + i);
  One o;
  one_setup(&o, m, i, 3, ST_KDT_F32, r);
  one_forward(&o);
  one_backward(&o, o.din);
  Net parts[2];
  int n_parts = sj != NULL ? 2 : 1;
  size_t off = 0;
  for (int p = 0; p < n_parts; p++) {
    net_init(&parts[p], p == 0 ? mj : sj, 3);
    for (int j = 0; j < parts[p].m->n_layers; j++) {
      size_t np = (size_t)parts[p].m->layers[j].params;
      memcpy(parts[p].params[j], (float *)o.params + off, np * sizeof(float));
      off += np;
    }
    parts[p].input = g_memdup2(o.in, o.n_in * sizeof(float));
    net_forward(&parts[p]);
  }
  g_assert_cmpint(off, ==, o.l->params); /* the parts' parameters are the block's */
  const float *main_out = parts[0].outs[parts[0].m->n_layers - 1];
  const float *shortcut = n_parts == 2 ? parts[1].outs[parts[1].m->n_layers - 1] : o.in;
  g_autofree double *want = g_new(double, o.n_out), *wdin = g_new(double, o.n_in);
  g_autofree float *dz = g_new(float, o.n_out), *dmain = g_new(float, o.n_in);
  g_autofree float *dshort = g_new(float, o.n_in);
  for (size_t k = 0; k < o.n_out; k++) {
    want[k] = fmaxf(main_out[k] + shortcut[k], 0.0f);
    dz[k] = want[k] > 0 ? ((float *)o.dout)[k] : 0.0f;
  }
  net_backward(&parts[0], dz, dmain);
  if (n_parts == 2)
    net_backward(&parts[1], dz, dshort);
  for (size_t k = 0; k < o.n_in; k++)
    wdin[k] = (double)dmain[k] + (n_parts == 2 ? dshort[k] : dz[k]);
  g_autofree double *wgrad = g_new(double, (size_t)o.l->params);
  off = 0;
  for (int p = 0; p < n_parts; p++)
    for (int j = 0; j < parts[p].m->n_layers; j++)
      for (int64_t k = 0; k < parts[p].m->layers[j].params; k++)
        wgrad[off++] = ((float *)parts[p].grads[j])[k];
  struct {
    const char *what;
    const float *got;
    const double *want;
    size_t n;
  } checks[3] = {{"output", o.out, want, o.n_out},
                 {"input gradient", o.din, wdin, o.n_in},
                 {"parameter gradient", o.dparams, wgrad, (size_t)o.l->params}};
  for (int c = 0; c < 3; c++) {
    double most = 0;
    for (size_t k = 0; k < checks[c].n; k++)
      most = fmax(most, fabs(checks[c].want[k]));
    for (size_t k = 0; k < checks[c].n; k++)
      if (!(fabs(checks[c].got[k] - checks[c].want[k]) <= 1e-5 * most + 1e-7)) {
        g_test_message("block %s: %s %zu: %g, parts %g", o.l->name, checks[c].what, k,
                       checks[c].got[k], checks[c].want[k]);
        g_assert_not_reached();
      }
  }
  for (int p = 0; p < n_parts; p++)
    net_clear(&parts[p]);
  one_clear(&o);
}

static void
test_blocks(void)
{
  each_layer(block_one);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  K = st_kernels_host();
  g_test_add_func("/layers/registry", test_registry);
  g_test_add_func("/layers/init", test_init);
  g_test_add_func("/layers/contract", test_contract);
  g_test_add_func("/layers/gradients", test_gradients);
  g_test_add_func("/layers/blocks", test_blocks);
  g_test_add_func("/layers/bf16", test_bf16);
  return g_test_run();
}
