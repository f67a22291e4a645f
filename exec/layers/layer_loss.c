/* layer_loss.c: softmax_cross_entropy over the last dim (model type in
 * sim/model/layer_elementwise.c), for classification (logits [batch,
 * classes], targets [batch]) and language models (logits [batch, tokens,
 * vocab], targets [batch, tokens]): every token is a row.
 *
 * Forward adds the sum over rows of -log p[target] to ctx->loss_sum;
 * backward writes dlogits = (p - onehot(target)) * ctx->loss_scale, the
 * gradient of loss_scale * loss_sum: with loss_scale = 1 / (samples of the
 * global batch x tokens per sample), as the executor sets it, that is the
 * mean over every token of the global batch (the model's per-sample loss is
 * the mean over its tokens). The probabilities (fp32, [rows, classes]) are
 * saved for the backward; the layer's own output ([batch, 1]) is written as
 * zeros: the loss lives in loss_sum. No parameters.
 *
 * Over logits split by classes (a tensor-parallel group, layer_impl.h; rank
 * r holds classes [r V / t, (r + 1) V / t) of every row): the forward
 * writes kernels.h's ce_split_fwd statistics (fp32 [4, rows]) and
 * exp(x - local max) (fp32 [rows, V / t], in place of the probabilities);
 * the executor's all-reduce of the statistics (op_tp.c) completes them and
 * adds the loss; the backward writes the rank's columns of the gradient.
 * A vocabulary padded to a multiple of the group (the megatron strategy,
 * Megatron-LM's --make-vocab-size-divisible-by) computes its padding's
 * logits as Megatron does, but leaves them out of the softmax (Megatron-LM
 * lets them in: its loss at initialization is log of the padded size), so
 * that a padded run trains the model file's model: their exps are 0, so
 * are their gradients.
 */
#include "exec/layers/layers_private.h"

/* The split loss's saved block: exps [rows, classes], then stats [4, rows]. */
static size_t
split_layout(const StLayer *l, int batch, char *base, float **exps, float **stats)
{
  StCarve cv = {base, 0};
  *exps = st_carve(&cv, st_layer_elems(&l->in_shape, batch) * sizeof(float));
  *stats = st_carve(&cv, 4 * (size_t)st_layer_rows(&l->in_shape, batch) * sizeof(float));
  return cv.offset;
}

static int
vocab_first(const StLayerCtx *c, const StLayer *l)
{
  return c->tp_rank * st_layer_last_dim(&l->in_shape);
}

/* Of the rank's classes, those of the vocabulary (not its padding). */
static int
vocab_valid(const StLayerCtx *c, const StLayer *l)
{
  int64_t classes = st_layer_last_dim(&l->in_shape);
  if (c->vocab <= 0)
    return (int)classes;
  return (int)CLAMP(c->vocab - vocab_first(c, l), 0, classes);
}

static void *
loss_tp_tensor(const StLayer *l, int batch, StKDtype dt, int part, void *saved)
{
  float *exps, *stats;
  split_layout(l, batch, saved, &exps, &stats);
  return stats;
}

static size_t
loss_saved(const StLayer *l, int batch, StKDtype dt)
{
  float *exps, *stats;
  if (l->tp > 1)
    return split_layout(l, batch, NULL, &exps, &stats);
  return st_layer_elems(&l->in_shape, batch) * sizeof(float); /* probabilities */
}

static int
loss_forward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
             const void *in, void *out, void *saved)
{
  if (c->targets == NULL || c->loss_sum == NULL)
    return ST_K_EINVAL;
  if (out != NULL)
    ST_TRY(c->k->memset0(c->stream, out,
                         st_layer_elems(&l->out_shape, batch) * st_kdt_size(c->dt)));
  if (l->tp > 1) {
    float *exps, *stats;
    split_layout(l, batch, saved, &exps, &stats);
    return c->k->ce_split_fwd(c->stream, exps, stats, in, c->targets, vocab_first(c, l),
                              st_layer_rows(&l->in_shape, batch), st_layer_last_dim(&l->in_shape),
                              vocab_valid(c, l), c->dt);
  }
  return c->k->softmax_ce_fwd(c->stream, c->loss_sum, saved, in, c->targets,
                              st_layer_rows(&l->in_shape, batch), st_layer_last_dim(&l->in_shape),
                              c->dt);
}

static int
loss_backward(const StLayerCtx *c, const StLayer *l, int batch, const void *params,
              const void *in, const void *out, const void *saved, const void *dout, void *din,
              void *dparams)
{
  if (din == NULL)
    return 0;
  if (c->targets == NULL)
    return ST_K_EINVAL;
  if (l->tp > 1) {
    float *exps, *stats;
    split_layout(l, batch, (char *)saved, &exps, &stats);
    return c->k->ce_split_bwd(c->stream, din, exps, stats, c->targets, vocab_first(c, l),
                              c->loss_scale, st_layer_rows(&l->in_shape, batch),
                              st_layer_last_dim(&l->in_shape), c->dt);
  }
  return c->k->softmax_ce_bwd(c->stream, din, saved, c->targets, c->loss_scale,
                              st_layer_rows(&l->in_shape, batch), st_layer_last_dim(&l->in_shape),
                              c->dt);
}

const StLayerImpl st_impl_softmax_cross_entropy = {
  .type = "softmax_cross_entropy",
  .init = st_layer_no_init,
  .saved_bytes = loss_saved,
  .forward = loss_forward,
  .backward = loss_backward,
  .tp_tensor = loss_tp_tensor,
};
