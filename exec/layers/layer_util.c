/* layer_util.c: initialisation, the saved-block carver, scratch memory and
 * shape helpers that every layer implementation uses. */
#include "exec/layers/layers_private.h"

#include "exec/mix.h"

/* FNV-1a of the layer's name: layers with equal shapes get different weights. */
static uint64_t
name_hash(const char *name)
{
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (const unsigned char *p = (const unsigned char *)name; *p != '\0'; p++)
    h = (h ^ *p) * UINT64_C(0x100000001b3);
  return h;
}

void
st_init_uniform(float *x, size_t n, float bound, uint64_t seed, const StLayer *l, int tensor)
{
  uint64_t key = st_mix64(seed ^ st_mix64(name_hash(l->name) + (uint64_t)tensor));
  for (size_t i = 0; i < n; i++) {
    uint64_t z = st_mix64(key + UINT64_C(0x9e3779b97f4a7c15) * (i + 1));
    float u = (float)(z >> 40) * (1.0f / 16777216.0f); /* [0, 1), 24 bits */
    x[i] = (2.0f * u - 1.0f) * bound;
  }
}

uint64_t
st_layer_subseed(uint64_t seed, int j)
{
  return st_mix64(seed ^ st_mix64(UINT64_C(0xd1b54a32d192ed03) * (uint64_t)(j + 1)));
}

void
st_init_fill(float *x, size_t n, float value)
{
  for (size_t i = 0; i < n; i++)
    x[i] = value;
}

void *
st_carve(StCarve *c, size_t bytes)
{
  void *p = c->base != NULL ? c->base + c->offset : NULL;
  c->offset += (size_t)st_layer_aligned((int64_t)bytes);
  return p;
}

void *
st_scratch(const StLayerCtx *c, size_t bytes)
{
  if (bytes == 0 || c->scratch == NULL)
    return NULL;
  return c->scratch(c->pool, bytes);
}

int
st_layer_last_dim(const StShape *s)
{
  return (int)s->dims[s->n_dims - 1];
}

int
st_layer_rows(const StShape *s, int batch)
{
  return (int)(st_shape_elems(s) / s->dims[s->n_dims - 1]) * batch;
}

size_t
st_layer_elems(const StShape *s, int batch)
{
  return (size_t)st_shape_elems(s) * (size_t)batch;
}

size_t
st_layer_no_saved(const StLayer *l, int batch, StKDtype dt)
{
  return 0;
}

int
st_copy_through(const StLayerCtx *c, void *dst, const void *src, size_t elems)
{
  if (dst == src)
    return 0;
  return c->k->copy(c->stream, dst, src, elems * st_kdt_size(c->dt), 0);
}

void
st_layer_no_init(const StLayer *l, float *params, uint64_t seed)
{
}
