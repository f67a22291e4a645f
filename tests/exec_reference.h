/* exec_reference.h: a direct training step on the host, written from the
 * definitions and not from the executor, for the executor's numerical
 * checks (test_exec_cdp.c, test_exec_sparse.c). It runs each layer's real
 * forward and backward (exec/layer_impl.h) with the host kernels on plain
 * host arrays, on the samples the executor makes (st_exec_sample), one
 * whole model per micro-batch, fp32. No schedule, no buffers, no
 * communication: gradients are summed in the order a test says.
 *
 * Static functions, included by the tests that use them.
 */
#pragma once

#include <string.h>

#include "exec/exec.h"
#include "exec/layer_impl.h"
#include "kernels/kernels.h"

/* The model's weights: one host fp32 vector per layer (NULL when none). */
typedef struct {
  const StModel *m;
  float **w; /* [n_layers] */
} RefWeights;

static RefWeights
ref_weights_new(const StModel *m)
{
  RefWeights r = {m, g_new0(float *, m->n_layers)};
  for (int i = 0; i < m->n_layers; i++)
    if (m->layers[i].params > 0)
      r.w[i] = g_new0(float, m->layers[i].params);
  return r;
}

static void
ref_weights_free(RefWeights *r)
{
  for (int i = 0; r->w != NULL && i < r->m->n_layers; i++)
    g_free(r->w[i]);
  g_clear_pointer(&r->w, g_free);
}

static void
ref_weights_copy(RefWeights *dst, const RefWeights *src)
{
  for (int i = 0; i < src->m->n_layers; i++)
    if (src->w[i] != NULL)
      memcpy(dst->w[i], src->w[i], sizeof(float) * (size_t)src->m->layers[i].params);
}

/* The executor's first weights: each layer's init from the seed. */
static void
ref_weights_init(RefWeights *r, uint64_t seed)
{
  for (int i = 0; i < r->m->n_layers; i++)
    if (r->w[i] != NULL)
      st_layer_impl_find(r->m->layers[i].type->name)->init(&r->m->layers[i], r->w[i], seed);
}

static void *
ref_scratch(gpointer pool, size_t bytes)
{
  void *p = g_malloc0(MAX(bytes, 1));
  g_ptr_array_add(pool, p);
  return p;
}

static int
ref_positions(const StModel *m)
{
  const StLayer *loss = &m->layers[m->n_layers - 1];
  return loss->in_shape.n_dims >= 2 ? (int)loss->in_shape.dims[0] : 1;
}

/* Adds to grads[i] the gradient, with per-layer weights w[i] (each layer may
 * read its own version), of the loss of samples g0 .. g0 + b - 1 scaled by
 * 1 / (global_batch x positions), as the executor scales it. The forward's
 * dropout masks follow the executor's seeding for (step, micro). */
static void
ref_grad(const StModel *m, uint64_t seed, int64_t global_batch, float *const *w, float **grads,
         uint64_t g0, int b, int step, int micro)
{
  const StKernels *k = st_kernels_host();
  int L = m->n_layers, per = ref_positions(m);
  size_t in_per = (size_t)st_shape_elems(&m->input);
  gboolean ids = st_layer_takes_ids(&m->layers[0]);
  void **act = g_new0(void *, L + 1);   /* act[0] the input, act[i + 1] layer i's output */
  void **saved = g_new0(void *, L);
  int32_t *targets = g_new(int32_t, (size_t)b * per);
  act[0] = ids ? (void *)g_new(int32_t, (size_t)b * in_per) : (void *)g_new(float, (size_t)b * in_per);
  for (int j = 0; j < b; j++)
    st_exec_sample(m, seed, g0 + (uint64_t)j, ids ? NULL : (float *)act[0] + (size_t)j * in_per,
                   ids ? (int32_t *)act[0] + (size_t)j * in_per : NULL, targets + (size_t)j * per);
  float loss_sum = 0;
  GPtrArray *pool = g_ptr_array_new_with_free_func(g_free);
  for (int i = 0; i < L; i++) {
    const StLayer *l = &m->layers[i];
    const StLayerImpl *impl = st_layer_impl_find(l->type->name);
    int t = st_model_tied_layer(m, i);
    StLayerCtx c = {.k = k, .dt = ST_KDT_F32, .scratch = ref_scratch, .pool = pool,
                    .seed = seed ^ ((uint64_t)step << 40) ^ ((uint64_t)micro << 20) ^ (uint64_t)i,
                    .targets = targets, .loss_sum = &loss_sum,
                    .loss_scale = 1.0f / (float)((double)global_batch * per),
                    .tied_params = t >= 0 ? w[t] : NULL, .tied_grads = t >= 0 ? grads[t] : NULL};
    act[i + 1] = g_malloc0(MAX((size_t)b * (size_t)st_shape_elems(&l->out_shape) * 4, 1));
    saved[i] = g_malloc0(MAX(impl->saved_bytes(l, b, ST_KDT_F32), 1));
    g_assert_cmpint(impl->forward(&c, l, b, w[i], act[i], act[i + 1], saved[i]), ==, 0);
  }
  void *dout = NULL;
  for (int i = L - 1; i >= 0; i--) {
    const StLayer *l = &m->layers[i];
    const StLayerImpl *impl = st_layer_impl_find(l->type->name);
    int t = st_model_tied_layer(m, i);
    StLayerCtx c = {.k = k, .dt = ST_KDT_F32, .scratch = ref_scratch, .pool = pool,
                    .seed = seed ^ ((uint64_t)step << 40) ^ ((uint64_t)micro << 20) ^ (uint64_t)i,
                    .targets = targets, .loss_sum = &loss_sum,
                    .loss_scale = 1.0f / (float)((double)global_batch * per),
                    .tied_params = t >= 0 ? w[t] : NULL, .tied_grads = t >= 0 ? grads[t] : NULL};
    void *din = i > 0 ? g_malloc0((size_t)b * (size_t)st_shape_elems(&l->in_shape) * 4) : NULL;
    gboolean kin = (l->type->keeps & ST_KEEPS_INPUT) != 0;
    gboolean kout = (l->type->keeps & ST_KEEPS_OUTPUT) != 0;
    g_assert_cmpint(impl->backward(&c, l, b, w[i], kin ? act[i] : NULL, kout ? act[i + 1] : NULL,
                                   saved[i], dout, din, grads[i]),
                    ==, 0);
    g_free(dout);
    dout = din;
  }
  g_free(dout);
  g_ptr_array_unref(pool);
  for (int i = 0; i <= L; i++)
    g_free(act[i]);
  for (int i = 0; i < L; i++)
    g_free(saved[i]);
  g_free(act);
  g_free(saved);
  g_free(targets);
}

/* One momentum-SGD step of every layer with the host kernel the executor
 * uses (momentum 0.9, no weight decay): w -= lr (mom = 0.9 mom + g). */
static void
ref_sgd(RefWeights *w, RefWeights *momentum, float *const *grads, double lr)
{
  const StKernels *k = st_kernels_host();
  for (int i = 0; i < w->m->n_layers; i++)
    if (w->w[i] != NULL)
      g_assert_cmpint(k->sgd(NULL, w->w[i], momentum->w[i], grads[i], ST_KDT_F32, NULL,
                             ST_KDT_F32, (size_t)w->m->layers[i].params, (float)lr, 0.9f, 0.0f,
                             1.0f),
                      ==, 0);
}

/* grads[i] += add[i] over every layer (the sum of two workers' gradients). */
static void
ref_add(const StModel *m, float **grads, float *const *add)
{
  for (int i = 0; i < m->n_layers; i++)
    for (int64_t j = 0; grads[i] != NULL && j < m->layers[i].params; j++)
      grads[i][j] += add[i][j];
}

static void
ref_zero(const StModel *m, float **grads)
{
  for (int i = 0; i < m->n_layers; i++)
    if (grads[i] != NULL)
      memset(grads[i], 0, sizeof(float) * (size_t)m->layers[i].params);
}

/* Largest |a - b| / (|b| + 1e-3) between executor weights (`got`, one GArray
 * of float per layer) and reference ones. */
static double
ref_differ(const GPtrArray *got, const RefWeights *want)
{
  double worst = 0;
  g_assert_cmpuint(got->len, ==, (guint)want->m->n_layers);
  for (int i = 0; i < want->m->n_layers; i++) {
    const GArray *x = g_ptr_array_index(got, i);
    g_assert_cmpuint(x->len, ==, (guint)want->m->layers[i].params);
    for (guint j = 0; j < x->len; j++) {
      double u = g_array_index(x, float, j), v = want->w[i][j];
      worst = MAX(worst, fabs(u - v) / (fabs(v) + 1e-3));
    }
  }
  return worst;
}
