/* layer_split.c: what every tensor-parallel layer shares (layer_impl.h):
 * the rows whose residual a rank adds, and the layout of a rank's
 * parameters in the whole layer's (spans) with the slicing and placing
 * built on it. The layers' own spans are in their files. */
#include "exec/layers/layers_private.h"

int
st_tp_rows(const StLayer *l, int batch)
{
  int t = MAX(l->tp, 1);
  switch (l->type->tp) {
  case ST_TP_VOCAB_IN: /* ids [tokens]: every token of the micro-batch */
    return (int)st_layer_elems(&l->in_shape, batch);
  case ST_TP_VOCAB_LOSS: /* logits of every token already */
    return st_layer_rows(&l->in_shape, batch);
  default: /* under sequence parallelism the input is the rank's N / t rows */
    return st_layer_rows(&l->in_shape, batch) * (l->sp ? t : 1);
  }
}

void
st_tp_own_rows(const StLayer *l, int batch, int rank, int *first, int *count)
{
  int n = st_tp_rows(l, batch), t = MAX(l->tp, 1);
  if (t == 1) {
    *first = 0;
    *count = n;
  } else if (l->sp) {
    *first = rank * (n / t);
    *count = n / t;
  } else {
    *first = 0;
    *count = rank == 0 ? n : 0;
  }
}

int
st_tp_spans(const StLayer *l, int rank, StTpSpan *out)
{
  const StLayerImpl *impl = st_layer_impl_find(l->type->name);
  if (l->tp > 1 && impl != NULL && impl->tp_spans != NULL)
    return impl->tp_spans(l, rank, out);
  out[0] = (StTpSpan){0, 0, (size_t)l->params, 1, 0, 0,
                      l->tp > 1 && l->sp ? ST_TP_SPAN_PARTIAL : ST_TP_SPAN_WHOLE};
  return 1;
}

void
st_tp_slice(const StLayer *l, int rank, const float *whole, float *part)
{
  StTpSpan spans[ST_TP_SPANS_MAX];
  int n = st_tp_spans(l, rank, spans);
  for (int k = 0; k < n; k++) {
    const StTpSpan *s = &spans[k];
    for (size_t i = 0; i < s->rows; i++)
      memcpy(part + s->part + i * s->part_ld, whole + s->whole + i * s->whole_ld,
             s->len * sizeof(float));
  }
}

void
st_tp_place(const StLayer *l, int rank, const float *part, float *whole)
{
  StTpSpan spans[ST_TP_SPANS_MAX];
  int n = st_tp_spans(l, rank, spans);
  for (int k = 0; k < n; k++) {
    const StTpSpan *s = &spans[k];
    for (size_t i = 0; i < s->rows; i++)
      memcpy(whole + s->whole + i * s->whole_ld, part + s->part + i * s->part_ld,
             s->len * sizeof(float));
  }
}

size_t
st_tp_partial_elems(const StLayer *l)
{
  StTpSpan spans[ST_TP_SPANS_MAX];
  int n = st_tp_spans(l, 0, spans);
  size_t elems = 0;
  for (int k = 0; k < n; k++)
    if (spans[k].kind == ST_TP_SPAN_PARTIAL)
      elems += spans[k].len * spans[k].rows;
  return elems;
}

int
st_bias_rows(const StLayerCtx *c, void *out, const void *bias, int first, int count, int cols)
{
  if (bias == NULL || count == 0)
    return 0;
  return c->k->bias_add(c->stream, st_at(out, c->dt, (size_t)first * cols), bias, count, cols,
                        c->dt);
}

/* ---- span builders ------------------------------------------------------------------ */

void
st_span_add(StTpSpan *out, int *n, size_t whole, size_t part, size_t len, size_t rows,
            size_t whole_ld, size_t part_ld, StTpSpanKind kind)
{
  g_assert(*n < ST_TP_SPANS_MAX);
  if (len > 0 && rows > 0)
    out[(*n)++] = (StTpSpan){whole, part, len, rows, whole_ld, part_ld, kind};
}

void
st_spans_shift(StTpSpan *spans, int from, int n, size_t whole, size_t part)
{
  for (int k = from; k < n; k++) {
    spans[k].whole += whole;
    spans[k].part += part;
  }
}
