/* layer_dense.c: layers with a weight matrix or a table (model types in
 * sim/model/layer_dense.c). Parameter layouts, in order inside the flat
 * vector (PyTorch's state_dict order and shapes):
 *
 *   linear              weight [out, in], bias [out] (when bias)
 *   embedding           weight [vocab, dim]
 *   position_embedding  weight [positions, dim] (the first `tokens` rows are used)
 *   class_token         token [dim]
 *   lm_head             weight [vocab, dim] (unless tied), bias [vocab] (when bias)
 *
 * Linear maps act on the last dim; every leading dim (and the batch) is a row.
 * Init: linear weights and biases U(+-1/sqrt(in)) (PyTorch's nn.Linear);
 * tables and the class token U with std 0.02 (GPT-2's); lm_head bias 0.
 *
 * Split over a tensor-parallel group (layer_impl.h), the embedding and the
 * LM head hold rank r's rows [r V / t, (r + 1) V / t) of the vocabulary
 * (Megatron-LM's VocabParallelEmbedding and column-parallel output layer):
 * the embedding writes its rows' vectors and zeros for the other ids (a
 * partial sum over the group), the head the logits of its classes for every
 * row, and a partial sum of the input gradient.
 */
#include <math.h>

#include "exec/layers/layers_private.h"

#define TABLE_BOUND (0.02f * 1.7320508f) /* uniform with std 0.02 */

/* ---- linear ------------------------------------------------------------- */

static void
linear_init(const StLayer *l, float *params, uint64_t seed)
{
  int in = st_layer_last_dim(&l->in_shape), out = st_layer_last_dim(&l->out_shape);
  float bound = 1.0f / sqrtf((float)in);
  st_init_uniform(params, (size_t)out * in, bound, seed, l, 0);
  if (st_layer_attr(l, "bias", 1))
    st_init_uniform(params + (size_t)out * in, (size_t)out, bound, seed, l, 1);
}

static int
linear_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
               const void *in, void *out, void *saved)
{
  int fi = st_layer_last_dim(&l->in_shape), fo = st_layer_last_dim(&l->out_shape);
  const void *b = st_layer_attr(l, "bias", 1) ? st_at(params, c->dt, (size_t)fo * fi) : NULL;
  return st_dense_fwd(c, in, st_layer_rows(&l->in_shape, batch), fi, fo, params, b, out);
}

static int
linear_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                const void *in, const void *out, const void *saved, const void *dout, void *din,
                void *dparams)
{
  int fi = st_layer_last_dim(&l->in_shape), fo = st_layer_last_dim(&l->out_shape);
  void *db = st_layer_attr(l, "bias", 1) ? st_at(dparams, c->dt, (size_t)fo * fi) : NULL;
  return st_dense_bwd(c, in, dout, st_layer_rows(&l->in_shape, batch), fi, fo, params, din,
                      dparams, db);
}

const StLayerImpl st_impl_linear = {
  .type = "linear",
  .init = linear_init,
  .saved_bytes = st_layer_no_saved,
  .forward = linear_forward,
  .backward = linear_backward,
};

/* ---- embedding: ids [batch, tokens] -> [batch, tokens, dim] -------------- */

static void
table_init(const StLayer *l, float *params, uint64_t seed)
{
  st_init_uniform(params, (size_t)l->params, TABLE_BOUND, seed, l, 0);
}

/* The rows of the vocabulary rank `rank` holds: [*first, *first + rows). */
static int
vocab_slice(const StLayer *l, int rank, int *first)
{
  int t = MAX(l->tp, 1), rows = (int)st_layer_attr(l, "vocab", 1) / t;
  *first = rank * rows;
  return rows;
}

static int
embedding_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                  const void *in, void *out, void *saved)
{
  int n = (int)st_layer_elems(&l->in_shape, batch), dim = (int)st_layer_attr(l, "dim", 1);
  int first, rows = vocab_slice(l, c->tp_rank, &first);
  return c->k->embedding_fwd(c->stream, out, params, in, n, dim, first, rows, c->dt);
}

static int
embedding_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                   const void *in, const void *out, const void *saved, const void *dout,
                   void *din, void *dparams)
{
  int n = (int)st_layer_elems(&l->in_shape, batch), dim = (int)st_layer_attr(l, "dim", 1);
  int first, rows = vocab_slice(l, c->tp_rank, &first);
  return c->k->embedding_bwd(c->stream, dparams, dout, in, n, dim, first, rows,
                             c->dt); /* ids: no din */
}

/* The rank's rows of the table (the head's weight, then its bias). */
static int
vocab_spans(const StLayer *l, int rank, StTpSpan *out)
{
  int first, rows = vocab_slice(l, rank, &first), n = 0;
  size_t dim = (size_t)st_layer_attr(l, "dim", 0);
  if (dim == 0) /* lm_head: the input's width */
    dim = (size_t)st_layer_last_dim(&l->in_shape);
  size_t w = st_layer_attr(l, "tied", 0) ? 0 : (size_t)rows * dim;
  size_t V = (size_t)rows * MAX(l->tp, 1);
  st_span_add(out, &n, (size_t)first * dim, 0, w, 1, 0, 0, ST_TP_SPAN_SPLIT);
  if (st_layer_attr(l, "bias", 0))
    st_span_add(out, &n, (w > 0 ? V * dim : 0) + (size_t)first, w, (size_t)rows, 1, 0, 0,
                ST_TP_SPAN_SPLIT);
  return n;
}

const StLayerImpl st_impl_embedding = {
  .type = "embedding",
  .init = table_init,
  .saved_bytes = st_layer_no_saved,
  .forward = embedding_forward,
  .backward = embedding_backward,
  .tp_spans = vocab_spans,
};

/* ---- position_embedding: out = in + table[:tokens] ------------------------ */

static int
position_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                 const void *in, void *out, void *saved)
{
  int tokens = (int)l->in_shape.dims[0], dim = (int)l->in_shape.dims[1];
  ST_TRY(st_copy_through(c, out, in, st_layer_elems(&l->in_shape, batch)));
  return c->k->add_rows(c->stream, out, params, batch, tokens, dim, c->dt);
}

static int
position_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                  const void *in, const void *out, const void *saved, const void *dout,
                  void *din, void *dparams)
{
  int tokens = (int)l->in_shape.dims[0], dim = (int)l->in_shape.dims[1];
  if (din != NULL)
    ST_TRY(st_copy_through(c, din, dout, st_layer_elems(&l->in_shape, batch)));
  return c->k->add_rows_bwd(c->stream, dparams, dout, batch, tokens, dim, c->dt);
}

const StLayerImpl st_impl_position_embedding = {
  .type = "position_embedding",
  .init = table_init,
  .saved_bytes = st_layer_no_saved,
  .forward = position_forward,
  .backward = position_backward,
};

/* ---- class_token: [batch, tokens, dim] -> [batch, 1 + tokens, dim] ------- */

static int
class_token_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                    const void *in, void *out, void *saved)
{
  size_t tokens = (size_t)l->in_shape.dims[0], dim = (size_t)l->in_shape.dims[1];
  size_t es = st_kdt_size(c->dt);
  for (int b = 0; b < batch; b++) {
    void *ob = st_at(out, c->dt, (size_t)b * (tokens + 1) * dim);
    ST_TRY(c->k->copy(c->stream, ob, params, dim * es, 0));
    ST_TRY(c->k->copy(c->stream, st_at(ob, c->dt, dim), st_at(in, c->dt, (size_t)b * tokens * dim),
                      tokens * dim * es, 0));
  }
  return 0;
}

static int
class_token_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                     const void *in, const void *out, const void *saved, const void *dout,
                     void *din, void *dparams)
{
  size_t tokens = (size_t)l->in_shape.dims[0], dim = (size_t)l->in_shape.dims[1];
  size_t es = st_kdt_size(c->dt);
  for (int b = 0; b < batch; b++) {
    const void *db = st_at(dout, c->dt, (size_t)b * (tokens + 1) * dim);
    ST_TRY(c->k->axpy(c->stream, dparams, c->dt, 1.0f, db, c->dt, dim));
    if (din != NULL)
      ST_TRY(c->k->copy(c->stream, st_at(din, c->dt, (size_t)b * tokens * dim),
                        st_at(db, c->dt, dim), tokens * dim * es, 0));
  }
  return 0;
}

const StLayerImpl st_impl_class_token = {
  .type = "class_token",
  .init = table_init,
  .saved_bytes = st_layer_no_saved,
  .forward = class_token_forward,
  .backward = class_token_backward,
};

/* ---- lm_head: [.., dim] -> [.., vocab]; tied: the first embedding's weight */

static void
lm_head_init(const StLayer *l, float *params, uint64_t seed)
{
  int dim = st_layer_last_dim(&l->in_shape), vocab = (int)st_layer_attr(l, "vocab", 1);
  size_t w = st_layer_attr(l, "tied", 0) ? 0 : (size_t)vocab * dim;
  st_init_uniform(params, w, 1.0f / sqrtf((float)dim), seed, l, 0);
  if (st_layer_attr(l, "bias", 0))
    st_init_fill(params + w, (size_t)vocab, 0.0f);
}

static int
lm_head_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                const void *in, void *out, void *saved)
{
  int dim = st_layer_last_dim(&l->in_shape), first, vocab = vocab_slice(l, c->tp_rank, &first);
  int tied = st_layer_attr(l, "tied", 0) != 0;
  const void *w = tied ? c->tied_params : params;
  if (w == NULL)
    return ST_K_EINVAL;
  size_t wn = tied ? 0 : (size_t)vocab * dim;
  const void *b = st_layer_attr(l, "bias", 0) ? st_at(params, c->dt, wn) : NULL;
  return st_dense_fwd(c, in, st_tp_rows(l, batch), dim, vocab, w, b, out);
}

static int
lm_head_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
                 const void *in, const void *out, const void *saved, const void *dout, void *din,
                 void *dparams)
{
  int dim = st_layer_last_dim(&l->in_shape), first, vocab = vocab_slice(l, c->tp_rank, &first);
  int tied = st_layer_attr(l, "tied", 0) != 0;
  const void *w = tied ? c->tied_params : params;
  void *dw = tied ? c->tied_grads : dparams;
  if (w == NULL || dw == NULL)
    return ST_K_EINVAL;
  size_t wn = tied ? 0 : (size_t)vocab * dim;
  void *db = st_layer_attr(l, "bias", 0) ? st_at(dparams, c->dt, wn) : NULL;
  return st_dense_bwd(c, in, dout, st_tp_rows(l, batch), dim, vocab, w, din, dw, db);
}

const StLayerImpl st_impl_lm_head = {
  .type = "lm_head",
  .init = lm_head_init,
  .saved_bytes = st_layer_no_saved,
  .forward = lm_head_forward,
  .backward = lm_head_backward,
  .tp_spans = vocab_spans,
};
