/* data.c: synthetic samples from a seeded generator, for a task a model can
 * learn, so that the loss of a real run goes down.
 *
 * Sample g of step t is the same whatever the strategy: g counts over the
 * global batch, replica by replica, micro-batch by micro-batch, so DP, ZeRO,
 * pipelines and any rank count see the same samples in each step. A rank's
 * replica (its data index) is StRank.replica, which the strategy sets: the
 * rank itself in DP and ZeRO, the pipeline (or cyclic-DP worker) for every
 * stage of it, so a pipeline's first stage makes the inputs and its last
 * stage the targets of the same samples. A layer pass that says its samples
 * (StOp.sample_stride, burst parallelism) gets those: the same global
 * batch, dealt every w-th sample to the w ranks of a layer.
 * - Models that read token ids (a first embedding layer): sequences where each
 *   token determines the next, t[k+1] = (5 t[k] + 3) mod V from a random
 *   first token; the targets are the next tokens: a bigram table to learn.
 * - Other models: inputs uniform in [-1, 1]; the target is the class a fixed
 *   random linear teacher gives the first (up to) 64 inputs, argmax over c of
 *   sum_k T[c, k] x[k]: learnable, and cheap to make even for images.
 * With a real data set (StExecOptions.data, exec/dataset.h), sample g is
 * its training row st_dataset_train_row(seed, g): features and label.
 */
#include "exec/check.h"
#include "exec/dataset.h"
#include "exec/mix.h"
#include "exec/runtime.h"

static float
uniform(uint64_t seed, uint64_t sample, uint64_t k)
{
  uint64_t h = st_splitmix64(seed ^ st_splitmix64(sample * 0x100000001b3ull + k));
  return (float)((double)(h >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

int
st_exec_data_index(const StSchedule *s, int rank)
{
  return s->ranks[rank].replica;
}

/* The samples op `o` (a layer pass of micro-batch `micro`) computes at
 * `step`: sample j < *n is sample first + j * stride of the run. The
 * schedule says them (StOp.sample_stride: burst's every w-th sample, from
 * the rank's replica); else they are the rank's contiguous micro-batch. */
static uint64_t
samples_of(const Rank *r, uint32_t o, int micro, int32_t step, uint64_t *stride, int *n)
{
  const StSettings *st = r->settings;
  const StOp *op = st_program_op(r->p, o);
  int d = st_exec_data_index(r->x->s, r->rank);
  uint64_t base = (uint64_t)step * (uint64_t)st->global_batch;
  if (op->sample_stride > 0) {
    *stride = op->sample_stride;
    *n = op->batch;
    return base + (uint64_t)d + (uint64_t)op->sample_first;
  }
  *stride = 1;
  *n = st->micro_batch;
  return base + ((uint64_t)d * (uint64_t)st->accumulation + (uint64_t)micro) *
                  (uint64_t)st->micro_batch;
}

static gboolean
takes_ids(const Rank *r)
{
  return st_layer_takes_ids(&r->model->layers[0]);
}

/* The position in its sequence of a rank's token k of `per`: its own
 * under context parallelism (the rank's two chunks: kernels.h
 * st_k_cp_position), else k. */
static int
position(const Rank *r, int k, int per)
{
  return r != NULL && r->cp_size > 1 ? st_k_cp_position(k, per, r->cp_size, r->cp_rank) : k;
}

/* Token k of sample g's sequence over a vocabulary of v. */
static int32_t
token(uint64_t seed, uint64_t g, int k, int64_t v)
{
  int64_t t = (int64_t)(st_splitmix64(seed ^ st_splitmix64(g)) % (uint64_t)v);
  for (int i = 0; i < k; i++)
    t = (5 * t + 3) % v;
  return (int32_t)t;
}

gboolean
data_make_input(Rank *r, int micro, int32_t step, uint32_t op, void *stream, GError **error)
{
  int b;
  uint64_t stride;
  const StShape *in = &r->model->input;
  size_t per = (size_t)st_shape_elems(in);
  uint64_t g0 = samples_of(r, op, micro, step, &stride, &b), seed = r->x->o->seed;
  Act *a = acts_output(r, step, micro, -1);
  g_autofree void *host = NULL;
  size_t bytes;
  if (takes_ids(r)) {
    int64_t vocab = r->vocab > 0 ? r->vocab : st_layer_attr(&r->model->layers[0], "vocab", 2);
    int32_t *ids = g_new(int32_t, (size_t)b * per);
    for (int j = 0; j < b; j++)
      for (size_t k = 0; k < per; k++)
        ids[(size_t)j * per + k] =
          token(seed, g0 + (uint64_t)j * stride, position(r, (int)k, (int)per), vocab);
    host = ids;
    bytes = (size_t)b * per * sizeof(int32_t);
  } else {
    size_t n = (size_t)b * per;
    const StDataset *ds = r->p->job == 0 ? r->x->o->data : NULL; /* background: synthetic */
    g_autofree float *real = NULL;
    if (ds != NULL) { /* rows of the data set; st_dataset_fits checked the width */
      real = g_new(float, n);
      for (int j = 0; j < b; j++)
        memcpy(real + (size_t)j * per,
               ds->x + (size_t)st_dataset_train_row(ds, seed, g0 + (uint64_t)j * stride) * per,
               sizeof(float) * per);
    }
    bytes = n * st_kdt_size(r->x->dt);
    if (r->x->dt == ST_KDT_BF16) {
      uint16_t *h = g_new(uint16_t, n);
      for (size_t i = 0; i < n; i++)
        h[i] = st_f32_to_bf16(real != NULL ? real[i] : uniform(seed, g0 + i / per * stride, i % per));
      host = h;
    } else {
      float *h = g_new(float, n);
      for (size_t i = 0; i < n; i++)
        h[i] = real != NULL ? real[i] : uniform(seed, g0 + i / per * stride, i % per);
      host = h;
    }
  }
  if (!acts_make(r, a, bytes, ST_MEM_ACTIVATIONS, step, op, stream, error))
    return FALSE;
  ST_KCHECK(r->k->copy(stream, a->ptr, host, bytes, 1), r->k->name, error);
  return r->dev->backend->stream_sync(r->dev, stream, error);
}

/* Inputs the teacher reads, and its class for sample g: the inputs are
 * uniform(seed, g, k) as data_make_input makes them. */
#define TEACHER_INPUTS 64

static int32_t
teacher(uint64_t seed, uint64_t g, int64_t classes, size_t inputs)
{
  uint64_t tseed = st_splitmix64(seed ^ 0x7eac4e5ull);
  int64_t best = 0;
  double best_score = -1e300;
  for (int64_t c = 0; c < classes; c++) {
    double score = 0;
    for (size_t k = 0; k < inputs; k++)
      score += (double)uniform(tseed, (uint64_t)c, k) * uniform(seed, g, k);
    if (score > best_score) {
      best_score = score;
      best = c;
    }
  }
  return (int32_t)best;
}

/* Positions (tokens, or 1) a model's loss averages over, and its classes:
 * `vocab` when the vocabulary was padded (0: none). */
static int
positions(const StModel *m, int64_t vocab, int64_t *classes)
{
  const StLayer *loss = &m->layers[m->n_layers - 1];
  /* logits split over a tensor-parallel group: the rank's share of them */
  *classes = vocab > 0 ? vocab : loss->in_shape.dims[loss->in_shape.n_dims - 1] * MAX(loss->tp, 1);
  return loss->in_shape.n_dims >= 2 ? (int)loss->in_shape.dims[0] : 1;
}

/* Sample g's targets: [positions] (of rank r's tokens; NULL: all). */
static void
targets_of(const Rank *r, const StModel *m, int64_t vocab, uint64_t seed, uint64_t g, int32_t *t)
{
  int64_t classes;
  int per = positions(m, vocab, &classes);
  size_t in_per = (size_t)st_shape_elems(&m->input);
  gboolean ids = st_layer_takes_ids(&m->layers[0]);
  for (int k = 0; k < per; k++)
    t[k] = ids ? token(seed, g, position(r, k, per) + 1, classes)
               : teacher(seed, g, classes, MIN(in_per, TEACHER_INPUTS));
}

void
st_exec_sample(const StModel *m, uint64_t seed, uint64_t g, float *x, int32_t *ids,
               int32_t *targets)
{
  size_t per = (size_t)st_shape_elems(&m->input);
  gboolean takes = st_layer_takes_ids(&m->layers[0]);
  for (size_t k = 0; k < per; k++) {
    if (takes && ids != NULL)
      ids[k] = token(seed, g, (int)k, st_layer_attr(&m->layers[0], "vocab", 2));
    else if (!takes && x != NULL)
      x[k] = uniform(seed, g, k);
  }
  if (targets != NULL)
    targets_of(NULL, m, 0, seed, g, targets);
}

gboolean
data_make_targets(Rank *r, int micro, int32_t step, uint32_t op, void *stream, GError **error)
{
  int b;
  uint64_t stride;
  int64_t classes;
  int per = positions(r->model, r->vocab, &classes);
  uint64_t g0 = samples_of(r, op, micro, step, &stride, &b), seed = r->x->o->seed;
  g_autofree int32_t *t = g_new(int32_t, (size_t)b * per);
  const StDataset *ds = r->p->job == 0 ? r->x->o->data : NULL; /* background: synthetic */
  for (int j = 0; j < b; j++) {
    uint64_t g = g0 + (uint64_t)j * stride;
    if (ds != NULL) /* one position (st_dataset_fits) */
      t[j] = ds->y[st_dataset_train_row(ds, seed, g)];
    else
      targets_of(r, r->model, r->vocab, seed, g, t + (size_t)j * per);
  }
  size_t bytes = (size_t)b * per * sizeof(int32_t);
  void *ptr = NULL;
  g_mutex_lock(&r->lock);
  gboolean ok = st_pool_alloc(r->pool, bytes, ST_MEM_WORKSPACE, step, op, -1, "targets", stream,
                              &ptr, error);
  g_mutex_unlock(&r->lock);
  if (!ok)
    return FALSE;
  r->targets[micro] = ptr;
  ST_KCHECK(r->k->copy(stream, ptr, t, bytes, 1), r->k->name, error);
  return r->dev->backend->stream_sync(r->dev, stream, error);
}
