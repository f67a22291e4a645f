/* test_memory_conformance.c: the simulator's memory of every layer pass
 * against what the executor really allocates.
 *
 * Two levels, both exact (0 bytes of tolerance: the executor's pool records
 * the bytes asked for, not its size classes, and the model counts the
 * ST_LAYER_ALIGN padding of the tensors a layer cuts out of one block):
 * - per layer: for every layer type the executor implements, at two batch
 *   sizes in fp32 and bf16, st_layer_memory (sim/model) against the
 *   implementation (exec/layers): the saved block it asks for, the tensors
 *   between layers, and the scratch its forward and its backward take (a
 *   counting allocator adds up each request, aligned as the executor carves
 *   the schedule's workspace); plus a convolution whose columns do not fit
 *   ST_CONV_COLS_BYTES at once;
 * - per run: small models using every layer type and the shipped test models
 *   (tests/data/exec), built as dp and zero 1-3, simulated and run on the
 *   host backend: every op's allocations and frees, by category, summed
 *   over the steps, are the same in both timelines (which op allocates what
 *   does not depend on timing); on one rank under dp, where every buffer
 *   comes and goes on the compute stream, the memory peak and what each
 *   category holds at it are equal too (with more streams, the order in
 *   which a gather or a reduce-scatter interleaves with the compute moves the
 *   peak in time, so only the per-op check applies).
 */
#include <string.h>

#include "base/json.h"
#include "engine/engine.h"
#include "exec/exec.h"
#include "exec/layer_impl.h"
#include "model/layer_type.h"
#include "output/compare.h"
#include "output/output.h"
#include "strategy/strategy.h"
#include "testutil.h"

/* Small models that use every implemented layer type (and some of their
 * variants: grouped, without bias or affine, with dropout, causal, tied). */
static const char *const MODELS[] = {
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
  "{\"name\": \"lm\", \"input\": [4], \"layers\": ["
  " {\"name\": \"emb\", \"type\": \"embedding\", \"vocab\": 7, \"dim\": 6},"
  " {\"name\": \"head\", \"type\": \"lm_head\", \"vocab\": 7},"
  " {\"name\": \"loss\", \"type\": \"softmax_cross_entropy\"}]}",
};

/* The models the executor tests run (custom.json has no real math). */
static const char *const SHIPPED[] = {
  "tests/data/exec/tiny-mlp.json",
  "tests/data/exec/tiny-mlp3.json",
  "tests/data/exec/tiny-gpt.json",
  "models/mlp.json",
};

static StModel *
parse_model(const char *text)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(cJSON) root = st_json_parse(text, strlen(text), "<inline>", &error);
  g_assert_no_error(error);
  StModel *m = st_model_from_json(root, "<inline>", &error);
  g_assert_no_error(error);
  return m;
}

static StModel *
load_model(const char *relative)
{
  g_autofree char *path = st_test_src(relative);
  g_autoptr(GError) error = NULL;
  StModel *m = st_model_load(path, &error);
  g_assert_no_error(error);
  return m;
}

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
    g_autoptr(StModel) m = parse_model(MODELS[k]);
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
  g_autoptr(StModel) m = parse_model(
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

/* ---- per run ----------------------------------------------------------------- */

typedef struct {
  const char *strategy;
  int zero_stage, ranks, accumulation;
  StPrecision precision;
} Case;

static StSchedule *
build(const StModel *m, const Case *c, int micro_batch)
{
  g_autofree char *path = st_test_src("models/clusters/dgx-h100.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StCluster) cl = st_cluster_load(path, &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(cl, 0, c->ranks, &error));
  StOptions o;
  st_options_init(&o);
  o.ranks = c->ranks;
  o.micro_batch = micro_batch;
  o.accumulation = c->accumulation;
  o.global_batch = (int64_t)c->ranks * micro_batch * c->accumulation;
  o.steps = 3;
  o.precision = c->precision;
  o.zero_stage = c->zero_stage;
  o.bucket_bytes = 0;
  StSchedule *s = st_strategy_build(st_strategy_find(c->strategy), m, cl, NULL, &o, &error);
  g_assert_no_error(error);
  st_options_clear(&o);
  return s;
}

/* bytes[rank][op][category][0 alloc, 1 free] over every step; op n_ops
 * stands for the persistent buffers allocated before the first step. */
typedef int64_t PerOp[ST_MEM_N][2];

static PerOp *
per_op(const StTimeline *t, int n_ranks, guint n_ops)
{
  PerOp *acc = g_new0(PerOp, (size_t)n_ranks * (n_ops + 1));
  for (guint k = 0; k < t->mem->len; k++) {
    const StMemEvent *e = &g_array_index(t->mem, StMemEvent, k);
    g_assert_cmpint(e->rank, >=, 0);
    guint op = e->op == UINT32_MAX ? n_ops : e->op;
    g_assert_cmpuint(op, <=, n_ops);
    acc[(size_t)e->rank * (n_ops + 1) + op][e->category][e->delta < 0] += e->delta;
  }
  return acc;
}

static void
check_run(const char *name, const StModel *m, const Case *c)
{
  int micro_batch = 3;
  g_autoptr(StSchedule) s = build(m, c, micro_batch);
  g_autoptr(GError) error = NULL;
  StEngineOptions eo = {NULL, "auto", NULL, TRUE}; /* every rank recorded */
  g_autoptr(StTimeline) predicted = st_simulate(s, &eo, NULL, &error);
  g_assert_no_error(error);
  StExecOptions xo;
  st_exec_options_init(&xo);
  xo.device = "host";
  xo.timeout_s = 120;
  StExecResult result;
  g_autoptr(StTimeline) measured = st_execute(s, &xo, &result, &error);
  g_assert_no_error(error);
  st_exec_result_clear(&result);

  g_assert_cmpuint(s->programs->len, ==, 1); /* every rank runs the same program */
  const StProgram *p = g_ptr_array_index(s->programs, 0);
  guint n = p->ops->len;
  g_autofree PerOp *want = per_op(predicted, s->n_ranks, n);
  g_autofree PerOp *got = per_op(measured, s->n_ranks, n);
  int differ = 0;
  for (int rank = 0; rank < s->n_ranks; rank++)
    for (guint o = 0; o <= n; o++)
      for (int cat = 0; cat < ST_MEM_N; cat++)
        for (int way = 0; way < 2; way++) {
          int64_t a = want[(size_t)rank * (n + 1) + o][cat][way];
          int64_t b = got[(size_t)rank * (n + 1) + o][cat][way];
          if (a == b)
            continue;
          g_autofree char *what = o < n ? st_op_describe(s, p, o) : g_strdup("persistent");
          g_test_message("%s: rank %d, op %u '%s', %s %s: predicted %" G_GINT64_FORMAT
                         ", measured %" G_GINT64_FORMAT " (bytes over %d steps)",
                         name, rank, o, what, st_mem_name((StMemCategory)cat),
                         way ? "freed" : "allocated", a, b, s->steps);
          differ++;
        }
  g_assert_cmpint(differ, ==, 0);

  if (c->ranks > 1 || strcmp(c->strategy, "dp") != 0)
    return;
  g_autoptr(StSummary) ps = st_summary_new(predicted);
  g_autoptr(StSummary) ms = st_summary_new(measured);
  StComparison cmp;
  st_compare(ps, ms, &cmp);
  g_test_message("%s: peak %" G_GINT64_FORMAT " predicted, %" G_GINT64_FORMAT " measured", name,
                 cmp.peak_total[0], cmp.peak_total[1]);
  g_assert_cmpint(cmp.peak_total[0], ==, cmp.peak_total[1]);
  for (int cat = 0; cat < ST_MEM_N; cat++)
    g_assert_cmpint(cmp.peak[0][cat], ==, cmp.peak[1][cat]);
}

static const Case CASES[] = {
  {"dp", 0, 1, 1, ST_PRECISION_FP32},
  {"zero", 1, 1, 1, ST_PRECISION_FP32},
  {"zero", 2, 1, 1, ST_PRECISION_FP32},
  {"zero", 3, 1, 1, ST_PRECISION_FP32},
};

/* Whether the executor runs this case at all. ZeRO-3 of a tied head with a
 * bias of its own fails before any memory is compared: its forward finds no
 * gathered weights ("the layer's weights is not on this rank"), a limit of
 * the executor and ZeRO-3 outside this test. */
static gboolean
runs(const StModel *m, const Case *c)
{
  if (c->zero_stage < 3)
    return TRUE;
  for (int i = 0; i < m->n_layers; i++)
    if (st_model_tied_layer(m, i) >= 0 && m->layers[i].params > 0)
      return FALSE;
  return TRUE;
}

static void
check_model(const char *name, const StModel *m)
{
  for (gsize k = 0; k < G_N_ELEMENTS(CASES); k++) {
    if (!runs(m, &CASES[k]))
      continue;
    g_autofree char *label =
      g_strdup_printf("%s %s%.0d", name, CASES[k].strategy, CASES[k].zero_stage);
    check_run(label, m, &CASES[k]);
  }
}

static void
test_runs_inline(void)
{
  for (gsize k = 0; k < G_N_ELEMENTS(MODELS); k++) {
    g_autoptr(StModel) m = parse_model(MODELS[k]);
    check_model(m->name, m);
  }
}

static void
test_runs_shipped(void)
{
  for (gsize k = 0; k < G_N_ELEMENTS(SHIPPED); k++) {
    g_autoptr(StModel) m = load_model(SHIPPED[k]);
    check_model(SHIPPED[k], m);
  }
}

static void
test_runs_variants(void)
{
  /* Accumulation (two micro-batches' tensors, a tied head parked per
   * micro-batch under ZeRO-2), 16-bit activations, and two ranks, whose
   * collectives allocate beside the passes. */
  g_autoptr(StModel) gpt = load_model("tests/data/exec/tiny-gpt.json");
  g_autoptr(StModel) img = parse_model(MODELS[0]);
  const Case variants[] = {
    {"dp", 0, 1, 2, ST_PRECISION_FP32},
    {"zero", 2, 1, 2, ST_PRECISION_FP32},
    {"dp", 0, 1, 1, ST_PRECISION_MIXED},
    {"zero", 3, 1, 1, ST_PRECISION_MIXED},
    {"dp", 0, 2, 1, ST_PRECISION_FP32},
    {"zero", 3, 2, 2, ST_PRECISION_FP32},
  };
  for (gsize k = 0; k < G_N_ELEMENTS(variants); k++) {
    const Case *c = &variants[k];
    g_autofree char *label = g_strdup_printf("%s%.0d, %d ranks, %d micro-batches, %s",
                                             c->strategy, c->zero_stage, c->ranks,
                                             c->accumulation, st_precision_name(c->precision));
    g_autofree char *a = g_strdup_printf("tiny-gpt %s", label);
    g_autofree char *b = g_strdup_printf("img %s", label);
    check_run(a, gpt, c);
    check_run(b, img, c);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/memory/layers", test_layers);
  g_test_add_func("/memory/conv-chunks", test_conv_chunks);
  g_test_add_func("/memory/runs/inline", test_runs_inline);
  g_test_add_func("/memory/runs/shipped", test_runs_shipped);
  g_test_add_func("/memory/runs/variants", test_runs_variants);
  return g_test_run();
}
