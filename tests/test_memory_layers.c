/* test_memory_layers.c: the simulator's memory of every layer pass against
 * what the executor's implementation of it really asks for.
 *
 * Exact (0 bytes of tolerance: the model counts the ST_LAYER_ALIGN padding
 * of the tensors a layer cuts out of one block): for every layer type the
 * executor implements, at two batch sizes in fp32 and bf16,
 * st_layer_memory (sim/model) against the implementation (exec/layers):
 * the saved block it asks for, the tensors between layers, and the scratch
 * its forward and its backward take (a counting allocator adds up each
 * request, aligned as the executor carves the schedule's workspace); plus a
 * convolution whose columns do not fit ST_CONV_COLS_BYTES at once.
 * tests/test_memory_conformance.c checks whole runs of every strategy.
 */
#include <string.h>

#include "base/json.h"
#include "exec/layer_impl.h"
#include "model/layer_type.h"
#include "testutil.h"

/* Small models that use every implemented layer type (and some of their
 * variants: grouped, without bias or affine, with dropout, causal, tied;
 * flash and dense attention, GQA, windows, every MLP and norm of the
 * LLaMA block, MoE chains with and without a norm). */
static const char *const MODELS[] = {
  "tests/data/memory/img.json",
  "tests/data/memory/img2.json",
  "tests/data/memory/vit.json",
  "tests/data/memory/gpt.json",
  "tests/data/memory/lm.json",
  "tests/data/memory/llama.json",
  "tests/data/memory/moe.json",
};

/* ---- per layer ------------------------------------------------------------- */

/* Scratch as the executor lends it from the schedule's workspace: every
 * request cut at an ST_LAYER_ALIGN boundary, all alive until the call ends. */
typedef struct {
  int64_t taken;
  GPtrArray *blocks;
} Counter;

static void *
count_scratch(gpointer pool, size_t bytes)
{
  Counter *c = pool;
  c->taken += st_layer_aligned((int64_t)bytes);
  void *p = g_malloc0(bytes);
  g_ptr_array_add(c->blocks, p);
  return p;
}

/* A zeroed tensor of `n` elements of `dt` filled with small values. */
static void *
tensor(size_t n, StKDtype dt, GRand *r)
{
  size_t es = st_kdt_size(dt);
  void *p = g_malloc0(MAX(n * es, 1));
  for (size_t k = 0; k < n; k++) {
    float v = (float)g_rand_double_range(r, -1, 1);
    if (dt == ST_KDT_F32)
      ((float *)p)[k] = v;
    else
      ((uint16_t *)p)[k] = st_f32_to_bf16(v);
  }
  return p;
}

/* Runs layer i's forward and backward as the executor calls them and checks
 * every number of st_layer_memory against what they asked for. */
static void
check_layer(const StModel *m, int i, int batch, StKDtype dt)
{
  const StLayer *l = &m->layers[i];
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  g_assert_nonnull(impl);
  StLayerMemory mem;
  st_layer_memory(m, i, batch, dt == ST_KDT_F32 ? ST_DTYPE_FP32 : ST_DTYPE_BF16, &mem);
  size_t es = st_kdt_size(dt);
  size_t n_in = (size_t)st_shape_elems(&l->in_shape) * batch;
  size_t n_out = (size_t)st_shape_elems(&l->out_shape) * batch;
  gboolean ids = st_layer_takes_ids(l);
  g_test_message("%s: layer %s (%s), batch %d, %s: saved %" G_GINT64_FORMAT ", scratch %"
                 G_GINT64_FORMAT " / %" G_GINT64_FORMAT,
                 m->name, l->name, l->type->name, batch, dt == ST_KDT_F32 ? "fp32" : "bf16", mem.saved,
                 mem.fwd_scratch, mem.bwd_scratch);
  /* what the executor's op_compute.c and data.c allocate around the call */
  g_assert_cmpint(mem.input, ==, (int64_t)(n_in * (ids ? sizeof(int32_t) : es)));
  g_assert_cmpint(mem.output, ==, (int64_t)(n_out * es));
  g_assert_cmpint(mem.input_grad, ==, (int64_t)(n_in * es));
  g_assert_cmpint(mem.saved, ==, (int64_t)impl->saved_bytes(l, batch, dt));

  g_autoptr(GRand) r = g_rand_new_with_seed(11);
  g_autofree void *in = NULL;
  if (ids) {
    int32_t *t = g_new(int32_t, n_in);
    for (size_t k = 0; k < n_in; k++)
      t[k] = g_rand_int_range(r, 0, (int)st_layer_attr(l, "vocab", 1));
    in = t;
  } else {
    in = tensor(n_in, dt, r);
  }
  int64_t tied_n = st_layer_attr(l, "tied", 0)
                     ? st_layer_attr(l, "vocab", 1) * l->in_shape.dims[l->in_shape.n_dims - 1]
                     : 0;
  g_autofree void *out = g_malloc0(n_out * es);
  g_autofree void *saved = g_malloc0(MAX((size_t)mem.saved, 1));
  g_autofree void *params = tensor((size_t)l->params, dt, r);
  g_autofree void *dparams = g_malloc0(MAX((size_t)l->params * es, 1));
  g_autofree void *tied = tensor((size_t)tied_n, dt, r);
  g_autofree void *dtied = g_malloc0(MAX((size_t)tied_n * es, 1));
  g_autofree void *dout = tensor(n_out, dt, r);
  g_autofree void *din = g_malloc0(n_in * es);
  const StShape *s = &l->in_shape;
  int rows = (int)(st_shape_elems(s) / s->dims[s->n_dims - 1]) * batch;
  g_autofree int32_t *targets = g_new(int32_t, rows);
  for (int k = 0; k < rows; k++)
    targets[k] = g_rand_int_range(r, 0, (int)s->dims[s->n_dims - 1]);
  float loss_sum = 0;
  Counter fwd = {0, g_ptr_array_new_with_free_func(g_free)};
  Counter bwd = {0, g_ptr_array_new_with_free_func(g_free)};
  StLayerCtx c = {
    .k = st_kernels_host(), .dt = dt, .seed = 5, .scratch = count_scratch, .pool = &fwd,
    .targets = targets, .loss_sum = &loss_sum, .loss_scale = 1.0f / (float)rows,
    .tied_params = tied_n > 0 ? tied : NULL, .tied_grads = tied_n > 0 ? dtied : NULL,
  };
  g_assert_cmpint(impl->forward(&c, l, batch, params, in, out, saved), ==, 0);
  c.pool = &bwd;
  unsigned keeps = l->type->keeps;
  gboolean loss = strcmp(l->type->name, "softmax_cross_entropy") == 0;
  g_assert_cmpint(impl->backward(&c, l, batch, params, (keeps & ST_KEEPS_INPUT) ? in : NULL,
                                 (keeps & ST_KEEPS_OUTPUT) ? out : NULL, saved,
                                 loss ? NULL : dout, ids ? NULL : din, dparams),
                  ==, 0);
  g_assert_cmpint(fwd.taken, ==, mem.fwd_scratch);
  g_assert_cmpint(bwd.taken, ==, mem.bwd_scratch);

  /* Selective recomputation: the part of the saved block the layer can
   * make again, and the recompute's scratch; the forward then writes those
   * tensors elsewhere (c.again) and the backward reads them there. */
  size_t again = impl->again_bytes != NULL ? impl->again_bytes(l, batch, dt) : 0;
  /* (the executor's layers make only core attention's part again) */
  g_assert_cmpint(mem.again[ST_RC_CORE_ATTN], ==, (int64_t)again);
  if (again > 0) {
    g_assert_cmpint(mem.again[ST_RC_CORE_ATTN], <=, mem.saved);
    g_autofree void *ag = g_malloc0(again);
    Counter fwd2 = {0, g_ptr_array_new_with_free_func(g_free)};
    Counter rec = {0, g_ptr_array_new_with_free_func(g_free)};
    Counter bwd2 = {0, g_ptr_array_new_with_free_func(g_free)};
    c.again = ag;
    c.pool = &fwd2;
    g_assert_cmpint(impl->forward(&c, l, batch, params, in, out, saved), ==, 0);
    c.pool = &rec;
    g_assert_cmpint(impl->recompute(&c, l, batch, params, in, saved), ==, 0);
    c.pool = &bwd2;
    g_assert_cmpint(impl->backward(&c, l, batch, params, (keeps & ST_KEEPS_INPUT) ? in : NULL,
                                   (keeps & ST_KEEPS_OUTPUT) ? out : NULL, saved,
                                   loss ? NULL : dout, ids ? NULL : din, dparams),
                    ==, 0);
    g_assert_cmpint(fwd2.taken, ==, mem.fwd_scratch);
    g_assert_cmpint(rec.taken, ==, mem.again_scratch[ST_RC_CORE_ATTN]);
    g_assert_cmpint(bwd2.taken, ==, mem.bwd_scratch);
    g_ptr_array_unref(fwd2.blocks);
    g_ptr_array_unref(rec.blocks);
    g_ptr_array_unref(bwd2.blocks);
  } else {
    g_assert_cmpint(mem.again_scratch[ST_RC_CORE_ATTN], ==, 0);
  }
  g_ptr_array_unref(fwd.blocks);
  g_ptr_array_unref(bwd.blocks);
}

static void
test_layers(void)
{
  /* Every implemented type appears in MODELS, so a new one without a
   * memory() that matches cannot slip by. */
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  for (gsize k = 0; k < G_N_ELEMENTS(MODELS); k++) {
    g_autoptr(StModel) m = st_test_model(MODELS[k]);
    for (int i = 0; i < m->n_layers; i++) {
      g_hash_table_add(seen, (gpointer)m->layers[i].type->name);
      for (int batch = 1; batch <= 3; batch += 2) {
        check_layer(m, i, batch, ST_KDT_F32);
        check_layer(m, i, batch, ST_KDT_BF16);
      }
    }
  }
  for (const StLayerImpl *const *impl = st_layer_impls(); *impl != NULL; impl++)
    if (!g_hash_table_contains(seen, (*impl)->type))
      g_error("layer type '%s' has an implementation but no model here", (*impl)->type);
}

static void
test_conv_chunks(void)
{
  /* A 3x3 conv of 256 channels on 32 x 32: the columns of one image are
   * 256 * 9 * 1024 * 4 = 9,437,184 bytes, so ST_CONV_COLS_BYTES (32 MiB)
   * holds 3 of them: at batch 4 (fp32) the passes work on 3 images at a
   * time, at batch 2 on both, and in bf16 on 4 of 4. */
  g_autoptr(StModel) m = st_test_model_parse(
    "{\"name\": \"wide\", \"input\": [256, 32, 32], \"layers\": ["
    " {\"name\": \"c\", \"type\": \"conv2d\", \"out_channels\": 4, \"kernel\": 3,"
    "  \"padding\": 1},"
    " {\"name\": \"flat\", \"type\": \"flatten\"},"
    " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}");
  StLayerMemory mem;
  st_layer_memory(m, 0, 4, ST_DTYPE_FP32, &mem);
  g_assert_cmpint(mem.fwd_scratch, ==, 3 * 9437184);
  st_layer_memory(m, 0, 2, ST_DTYPE_FP32, &mem);
  g_assert_cmpint(mem.fwd_scratch, ==, 2 * 9437184);
  st_layer_memory(m, 0, 4, ST_DTYPE_BF16, &mem);
  g_assert_cmpint(mem.bwd_scratch, ==, 4 * 9437184 / 2);
  check_layer(m, 0, 4, ST_KDT_F32);
  check_layer(m, 0, 4, ST_KDT_BF16);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/memory/layers", test_layers);
  g_test_add_func("/memory/conv-chunks", test_conv_chunks);
  return g_test_run();
}
