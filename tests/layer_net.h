/* layer_net.h: a model run layer by layer through the layer
 * implementations (exec/layers/), fp32 on the host kernels, as the executor
 * chains them; for test_layers.c (residual blocks against their parts) and
 * test_layers_learn.c (whole models learn). */
#pragma once

#include <string.h>

#include "exec/layer_impl.h"
#include "testutil.h"

/* Scratch: every block lives until the pass ends (the executor's rule). */
static inline void *
net_scratch(gpointer pool, size_t bytes)
{
  void *p = g_malloc(bytes);
  g_ptr_array_add(pool, p);
  return p;
}

/* A model run layer by layer, fp32 on the host, as the executor chains them. */
typedef struct {
  const StKernels *k; /* the host's */
  StModel *m;
  int batch;
  void **params, **grads, **outs, **saved, **dins; /* per layer */
  void *input;      /* fp32 features or int32 ids */
  int32_t *targets; /* [rows of the loss] */
  float loss_sum, loss_scale;
  GPtrArray *pool;
} Net;

static inline void
net_init(Net *n, const char *json, int batch)
{
  memset(n, 0, sizeof(*n));
  n->k = st_kernels_host();
  n->m = st_test_model_parse(json);
  n->batch = batch;
  int L = n->m->n_layers;
  n->params = g_new0(void *, L);
  n->grads = g_new0(void *, L);
  n->outs = g_new0(void *, L);
  n->saved = g_new0(void *, L);
  n->dins = g_new0(void *, L);
  for (int i = 0; i < L; i++) {
    const StLayer *l = &n->m->layers[i];
    const StLayerImpl *impl = st_layer_impl_find(l->type->name);
    n->params[i] = g_new(float, l->params + 1);
    impl->init(l, n->params[i], 5);
    n->grads[i] = g_new0(float, l->params + 1);
    n->outs[i] = g_new(float, st_shape_elems(&l->out_shape) * batch);
    n->saved[i] = g_malloc(impl->saved_bytes(l, batch, ST_KDT_F32) + 1);
    n->dins[i] = g_new(float, st_shape_elems(&l->in_shape) * batch);
  }
  const StLayer *loss = &n->m->layers[L - 1];
  /* The mean over the loss's rows: samples times its input's leading dims. */
  const StShape *in = &loss->in_shape;
  n->loss_scale = 1.0f / (float)(st_shape_elems(in) / in->dims[in->n_dims - 1] * batch);
  n->pool = g_ptr_array_new_with_free_func(g_free);
}

static inline void
net_clear(Net *n)
{
  for (int i = 0; i < n->m->n_layers; i++) {
    g_free(n->params[i]);
    g_free(n->grads[i]);
    g_free(n->outs[i]);
    g_free(n->saved[i]);
    g_free(n->dins[i]);
  }
  g_free(n->params);
  g_free(n->grads);
  g_free(n->outs);
  g_free(n->saved);
  g_free(n->dins);
  g_free(n->input);
  g_free(n->targets);
  g_ptr_array_unref(n->pool);
  st_model_free(n->m);
}

static inline StLayerCtx
net_ctx(Net *n)
{
  return (StLayerCtx){.k = n->k, .dt = ST_KDT_F32, .seed = 3, .scratch = net_scratch,
                      .pool = n->pool, .targets = n->targets, .loss_sum = &n->loss_sum,
                      .loss_scale = n->loss_scale, .tied_params = n->params[0],
                      .tied_grads = n->grads[0]}; /* a tied head uses layer 0's table */
}

static inline void
net_forward(Net *n)
{
  StLayerCtx c = net_ctx(n);
  n->loss_sum = 0;
  for (int i = 0; i < n->m->n_layers; i++) {
    const StLayer *l = &n->m->layers[i];
    const void *in = i == 0 ? n->input : n->outs[i - 1];
    g_assert_cmpint(st_layer_impl_find(l->type->name)->forward(&c, l, n->batch, n->params[i], in,
                                                                n->outs[i], n->saved[i]),
                    ==, 0);
    g_ptr_array_set_size(n->pool, 0);
  }
}

/* dout: the last layer's output gradient (NULL after a loss); din: the
 * first layer's input gradient (NULL to skip). Gradients accumulate. */
static inline void
net_backward(Net *n, const void *dout, void *din)
{
  StLayerCtx c = net_ctx(n);
  int L = n->m->n_layers;
  for (int i = L - 1; i >= 0; i--) {
    const StLayer *l = &n->m->layers[i];
    const void *in = i == 0 ? n->input : n->outs[i - 1];
    g_assert_cmpint(st_layer_impl_find(l->type->name)
                      ->backward(&c, l, n->batch, n->params[i], in, n->outs[i], n->saved[i],
                                 i + 1 < L ? n->dins[i + 1] : dout, i > 0 ? n->dins[i] : din,
                                 n->grads[i]),
                    ==, 0);
    g_ptr_array_set_size(n->pool, 0);
  }
}

/* One forward and backward over the batch, then params -= lr * grads by
 * hand; the mean loss of the forward. */
static inline double
net_step(Net *n, float lr)
{
  net_forward(n);
  net_backward(n, NULL, NULL);
  for (int i = 0; i < n->m->n_layers; i++) {
    size_t np = (size_t)n->m->layers[i].params;
    g_assert_cmpint(
      n->k->axpy(NULL, n->params[i], ST_KDT_F32, -lr, n->grads[i], ST_KDT_F32, np), ==, 0);
    memset(n->grads[i], 0, np * sizeof(float));
  }
  return (double)n->loss_sum * n->loss_scale;
}
