/* tensors.c: see tensors.h. */
#include "strategy/tensors.h"

#include "model/layer_type.h"
#include "strategy/offload.h"

#define NONE UINT32_MAX

struct StTensors {
  StProgram *program;
  StTensorsSpec spec;
  int n;                /* layers */
  StLayerMemory *mem;   /* [n], at each layer's batch on this rank (zero where it runs none) */
  StRecompute *mode;    /* [n]: what each layer does (st_recompute_layer) */
  /* Buffers, NONE until made (or when empty). Boundary k: */
  uint32_t *made;       /* [n + 1]: x[k] as layer k-1 (or the data) made it */
  uint32_t *in;         /* [n + 1]: x[k] brought in for layer k (moved boundaries) */
  uint32_t *grad;       /* [n + 1]: g[k] as the backward of k made it */
  uint32_t *grad_in;    /* [n + 1]: g[k] brought in for layer k-1 (moved boundaries) */
  uint32_t *sent;       /* [n + 1]: the last op taking x[k] out (moved boundaries) */
  gboolean *in_done;    /* [2 (n + 1)]: the first move in happened (forward, backward) */
  /* Per layer: */
  uint32_t *saved;      /* what the layer keeps for its backward */
  uint32_t *again;      /* its recompute's output, when its backward reads it */
  uint32_t *remade;     /* selective: the part of `saved` its recompute makes again */
  uint32_t *parked;     /* a tied head's gradient, by the layer it is tied to */
  gboolean *offload;    /* [n]: among the first N transformer layers (offload.h) */
  uint32_t *down;       /* offloaded: the saved block the forward made, until its D2H */
  uint32_t *fetch;      /* offloaded: the H2D copy bringing it back, once added */
  uint32_t targets;
};

void
st_pass_mem_alloc(StPassMem *pm, uint32_t buffer)
{
  if (buffer == NONE)
    return;
  g_assert(pm->n_alloc < ST_PASS_MEM_MAX);
  pm->alloc[pm->n_alloc++] = buffer;
}

void
st_pass_mem_free(StPassMem *pm, uint32_t buffer)
{
  if (buffer == NONE)
    return;
  g_assert(pm->n_free < ST_PASS_MEM_MAX);
  pm->free[pm->n_free++] = buffer;
}

void
st_pass_mem_apply(StProgram *p, const StPassMem *pm)
{
  for (int i = 0; i < pm->n_after; i++)
    st_program_after(p, pm->after[i]);
  for (int i = 0; i < pm->n_alloc; i++)
    st_program_alloc(p, pm->alloc[i]);
  for (int i = 0; i < pm->n_free; i++)
    st_program_free_buffer(p, pm->free[i]);
}

/* Buffer names, "WHAT LAYER mMICRO", cut to fit: every pass of every
 * micro-batch names a few, so without printf's cost. */
#define NAME_MAX_LEN 256

static void
name_of(char out[NAME_MAX_LEN], const char *what, const char *layer, int micro)
{
  char digits[16];
  int n = 0;
  unsigned v = micro < 0 ? 0u - (unsigned)micro : (unsigned)micro;
  do
    digits[n++] = (char)('0' + v % 10);
  while ((v /= 10) > 0);
  if (micro < 0)
    digits[n++] = '-';
  gsize at = 0;
  const char *parts[] = {what, " ", layer, " m"};
  for (gsize i = 0; i < G_N_ELEMENTS(parts); i++)
    for (const char *c = parts[i]; *c != '\0' && at + n + 1 < NAME_MAX_LEN; c++)
      out[at++] = *c;
  while (n > 0)
    out[at++] = digits[--n];
  out[at] = '\0';
}

uint32_t
st_pass_scratch(StProgram *p, const StModel *m, int layer, int micro, StPass pass, int batch,
                StDtype dtype, StRecompute mode, unsigned ops)
{
  StLayerMemory mem;
  st_layer_memory(m, layer, batch, dtype, &mem);
  gboolean selective = mode == ST_RECOMPUTE_SELECTIVE;
  int64_t again_scratch = 0;
  int64_t again = selective ? st_layer_memory_again(&mem, ops, &again_scratch) : 0;
  int64_t bytes = mem.fwd_scratch;
  if (st_pass_is_backward(pass)) /* each half of a split one runs the layer's backward call */
    bytes = mem.bwd_scratch;
  else if (pass == ST_PASS_FWD && selective)
    bytes += again;
  else if (pass == ST_PASS_RECOMPUTE && selective)
    bytes = again_scratch;
  /* The executor sums a recomputed loss into a float of the pass's
   * workspace: the step's loss was summed by the forward. */
  else if (pass == ST_PASS_RECOMPUTE && mem.targets > 0)
    bytes += st_layer_aligned(sizeof(float));
  if (bytes == 0)
    return NONE;
  char name[NAME_MAX_LEN];
  name_of(name,
          pass == ST_PASS_BWD          ? "scratch bwd"
          : pass == ST_PASS_BWD_INPUT  ? "scratch bwd_input"
          : pass == ST_PASS_BWD_WEIGHT ? "scratch bwd_weight"
                                       : "scratch fwd",
          m->layers[layer].name, micro);
  return st_program_add_buffer(p, name, ST_MEM_WORKSPACE, bytes, FALSE);
}

/* A layer's tensors; under loss_in_place a loss keeps its rows' log-sum-exp
 * (fp32) where it would keep the probabilities, and writes the gradient
 * over the logits; under loss_16bit (one rank's whole vocabulary) it keeps
 * them in the activations' 16 bits. */
static void
layer_memory(const StTensorsSpec *spec, int i, StLayerMemory *out)
{
  st_layer_memory(spec->model, i, spec->batch[i], spec->dtype, out);
  const StLayer *l = &spec->model->layers[i];
  int e = st_dtype_bytes(spec->dtype);
  if (spec->loss_in_place && out->targets > 0)
    out->saved = st_layer_aligned(out->targets / (int64_t)sizeof(int32_t) * (int64_t)sizeof(float));
  else if (spec->loss_16bit && out->targets > 0 && l->tp <= 1 && e < (int)sizeof(float))
    out->saved = st_layer_aligned(st_shape_elems(&l->in_shape) * spec->batch[i] * e);
}

StTensors *
st_tensors_new(StProgram *p, const StTensorsSpec *spec)
{
  StTensors *t = g_new0(StTensors, 1);
  const StModel *m = spec->model;
  int n = m->n_layers;
  t->program = p;
  t->spec = *spec;
  t->n = n;
  t->mem = g_new0(StLayerMemory, n);
  t->mode = st_recompute_layers(m, &spec->recompute);
  for (int i = 0; i < n; i++)
    if (spec->batch[i] > 0)
      layer_memory(spec, i, &t->mem[i]);
  uint32_t **arrays[] = {&t->made, &t->in, &t->grad, &t->grad_in, &t->sent};
  for (gsize k = 0; k < G_N_ELEMENTS(arrays); k++) {
    *arrays[k] = g_new(uint32_t, n + 1);
    for (int i = 0; i <= n; i++)
      (*arrays[k])[i] = NONE;
  }
  t->offload = st_offload_layers(m, spec->offload);
  uint32_t **layer_arrays[] = {&t->saved, &t->again, &t->parked, &t->remade, &t->down,
                               &t->fetch};
  for (gsize k = 0; k < G_N_ELEMENTS(layer_arrays); k++) {
    *layer_arrays[k] = g_new(uint32_t, n);
    for (int i = 0; i < n; i++)
      (*layer_arrays[k])[i] = NONE;
  }
  t->in_done = g_new0(gboolean, 2 * (size_t)(n + 1));
  t->targets = NONE;
  return t;
}

void
st_tensors_free(StTensors *t)
{
  if (t == NULL)
    return;
  g_free(t->mem);
  g_free(t->mode);
  g_free(t->made);
  g_free(t->in);
  g_free(t->grad);
  g_free(t->grad_in);
  g_free(t->sent);
  g_free(t->in_done);
  g_free(t->saved);
  g_free(t->again);
  g_free(t->parked);
  g_free(t->remade);
  g_free(t->offload);
  g_free(t->down);
  g_free(t->fetch);
  g_free(t);
}

/* ---- who reads what ------------------------------------------------------------- */

static gboolean
runs(const StTensors *t, int layer)
{
  return layer >= 0 && layer < t->n && t->spec.batch[layer] > 0;
}

static gboolean
moved(const StTensors *t, int k)
{
  return t->spec.moved != NULL && k > 0 && k < t->n && t->spec.moved[k];
}

static gboolean
keeps(const StTensors *t, int layer, unsigned what)
{
  return runs(t, layer) && (t->spec.model->layers[layer].type->keeps & what) != 0;
}

/* Layer i is checkpointed. */
static gboolean
full(const StTensors *t, int i)
{
  return runs(t, i) && t->mode[i] == ST_RECOMPUTE_FULL;
}

/* Selective recomputation of layer i: it has something to drop. */
static gboolean
selective(const StTensors *t, int i)
{
  return runs(t, i) && t->mode[i] == ST_RECOMPUTE_SELECTIVE;
}

/* What layer i's selective recompute makes again (its forward drops). */
static int64_t
again_bytes(const StTensors *t, int i)
{
  return st_layer_memory_again(&t->mem[i], t->spec.recompute.ops, NULL);
}

gboolean
st_tensors_recomputes(const StTensors *t, int layer)
{
  return full(t, layer) || selective(t, layer);
}

/* The backward of k-1 reads x[k] as made by k-1: its output, kept (not
 * when k-1 is checkpointed, where it reads the recompute's). */
static gboolean
bwd_reads_output(const StTensors *t, int k)
{
  return keeps(t, k - 1, ST_KEEPS_OUTPUT) && !full(t, k - 1);
}

/* The last of layer k's passes that read its input: its backward when it
 * keeps it, else its recompute (checkpointing), else its forward. */
static StPass
last_input_reader(const StTensors *t, int k)
{
  if (keeps(t, k, ST_KEEPS_INPUT))
    return ST_PASS_BWD;
  return full(t, k) ? ST_PASS_RECOMPUTE : ST_PASS_FWD;
}

/* Whether pass (pass, layer) is the last reader of x[k] as layer k-1 made
 * it (k = layer or layer + 1). Views (flatten) are copies in the executor,
 * so they end a chain like any layer. */
static gboolean
frees_made(const StTensors *t, int k, StPass pass, int layer)
{
  if (bwd_reads_output(t, k))
    return pass == ST_PASS_BWD && layer == k - 1;
  if (!moved(t, k) && runs(t, k))
    return layer == k && pass == last_input_reader(t, k);
  if (moved(t, k))
    return FALSE; /* its transfers out */
  /* Nothing reads it (a loss's output): its maker. */
  return pass == ST_PASS_FWD && layer == k - 1;
}

/* ---- buffers ---------------------------------------------------------------------- */

/* A buffer of this micro-batch named "WHAT LAYER mMICRO" holding `data` of
 * `data_layer` (ST_DATA_NONE: opaque); NONE when `bytes` is 0. */
static uint32_t
buffer(StTensors *t, const char *what, int layer, StMemCategory category, int64_t bytes,
       StData data, int data_layer)
{
  if (bytes == 0)
    return NONE;
  char name[NAME_MAX_LEN];
  name_of(name, what, t->spec.model->layers[layer].name, t->spec.micro);
  uint32_t b = st_program_add_buffer(t->program, name, category, bytes, FALSE);
  if (data != ST_DATA_NONE)
    st_program_buffer_holds(t->program, b, data, data_layer, data_layer, t->spec.micro, 1);
  return b;
}

/* The buffers autograd makes around PyTorch's F.cross_entropy (spec
 * loss_autograd) on one rank's whole vocabulary, as its formulas run
 * (tools/autograd/derivatives.yaml): forward, the fp32 copy of 16-bit logits
 * (_to_copy) beside the log-probabilities log_softmax makes of it and saves;
 * backward, nll_loss_backward's dense gradient, alive with the saved
 * log-probabilities while _log_softmax_backward_data writes the input's
 * gradient: in fp32, a buffer of its own, cast into the logits' gradient
 * after; in the logits' dtype (loss_16bit), that gradient itself, which the
 * schedule holds already. Each the logits' size. 0 for other layers and
 * passes. */
static int64_t
loss_autograd_bytes(const StTensors *t, StPass pass, int layer)
{
  const StLayer *l = &t->spec.model->layers[layer];
  if (!t->spec.loss_autograd || t->mem[layer].targets == 0 || l->tp > 1)
    return 0;
  int e = st_dtype_bytes(t->spec.dtype);
  int loss_e = t->spec.loss_16bit ? e : (int)sizeof(float);
  int64_t elems = st_shape_elems(&l->in_shape) * t->spec.batch[layer];
  int64_t buffer = st_layer_aligned(elems * loss_e);
  if (st_pass_is_backward(pass))
    return (loss_e > e ? 2 : 1) * buffer;
  return loss_e > e ? buffer : 0;
}

static void
scratch(StTensors *t, StPassMem *pm, StPass pass, int layer)
{
  uint32_t b = st_pass_scratch(t->program, t->spec.model, layer, t->spec.micro, pass,
                               t->spec.batch[layer], t->spec.dtype, t->mode[layer],
                               t->spec.recompute.ops);
  int64_t autograd = loss_autograd_bytes(t, pass, layer);
  uint32_t a = NONE;
  if (autograd > 0) {
    char name[NAME_MAX_LEN];
    name_of(name, st_pass_is_backward(pass) ? "loss autograd bwd" : "loss autograd fwd",
            t->spec.model->layers[layer].name, t->spec.micro);
    a = st_program_add_buffer(t->program, name, ST_MEM_ACTIVATIONS, autograd, FALSE);
  }
  st_pass_mem_alloc(pm, b);
  st_pass_mem_alloc(pm, a);
  st_pass_mem_free(pm, a);
  st_pass_mem_free(pm, b);
}

/* x[k] as layer k reads it. */
static uint32_t
input_of(const StTensors *t, int k)
{
  return moved(t, k) ? t->in[k] : t->made[k];
}

/* Frees x[layer] (its input) and x[layer + 1] (its output) where this pass
 * reads them last. */
static void
free_read(StTensors *t, StPass pass, int layer, StPassMem *pm)
{
  if (moved(t, layer)) {
    if (pass == last_input_reader(t, layer))
      st_pass_mem_free(pm, t->in[layer]);
  } else if (frees_made(t, layer, pass, layer)) {
    st_pass_mem_free(pm, t->made[layer]);
  }
  if (frees_made(t, layer + 1, pass, layer))
    st_pass_mem_free(pm, t->made[layer + 1]);
}

static void
forward(StTensors *t, int i, StPassMem *pm)
{
  const StLayerMemory *mem = &t->mem[i];
  if (i == 0) {
    t->made[0] = buffer(t, "input", 0, ST_MEM_ACTIVATIONS, mem->input, ST_DATA_ACTS, 0);
    st_pass_mem_alloc(pm, t->made[0]);
  }
  g_assert(input_of(t, i) != NONE || mem->input == 0);
  t->made[i + 1] = buffer(t, "out", i, ST_MEM_ACTIVATIONS, mem->output, ST_DATA_OUTPUT, i);
  st_pass_mem_alloc(pm, t->made[i + 1]);
  if (!full(t, i)) {
    /* selective: the part the recompute makes again is the forward's scratch */
    int64_t kept = mem->saved - (selective(t, i) ? again_bytes(t, i) : 0);
    t->saved[i] = buffer(t, "kept", i, ST_MEM_ACTIVATIONS, kept, ST_DATA_ACTS, i);
    st_pass_mem_alloc(pm, t->saved[i]);
  } else {
    /* The layer writes its saved block, then the forward lets it go: the
     * recompute makes it again. */
    uint32_t once = buffer(t, "kept once", i, ST_MEM_ACTIVATIONS, mem->saved, ST_DATA_ACTS, i);
    st_pass_mem_alloc(pm, once);
    st_pass_mem_free(pm, once);
  }
  if (mem->targets > 0) {
    t->targets = buffer(t, "targets", i, ST_MEM_WORKSPACE, mem->targets, ST_DATA_ACTS, i);
    st_pass_mem_alloc(pm, t->targets);
  }
  scratch(t, pm, ST_PASS_FWD, i);
  free_read(t, ST_PASS_FWD, i, pm);
}

/* An offloaded layer's recompute and backward read its block back: they
 * wait for its H2D copy, which must have been added. */
static void
wait_fetch(const StTensors *t, int i, StPassMem *pm)
{
  if (t->down[i] == NONE)
    return;
  g_assert(t->fetch[i] != NONE);
  g_assert(pm->n_after < (int)G_N_ELEMENTS(pm->after));
  pm->after[pm->n_after++] = t->fetch[i];
}

static void
recompute(StTensors *t, int i, StPassMem *pm)
{
  const StLayerMemory *mem = &t->mem[i];
  g_assert(st_tensors_recomputes(t, i));
  wait_fetch(t, i, pm);
  if (selective(t, i)) {
    t->remade[i] = buffer(t, "again", i, ST_MEM_ACTIVATIONS, again_bytes(t, i), ST_DATA_ACTS, i);
    st_pass_mem_alloc(pm, t->remade[i]);
    scratch(t, pm, ST_PASS_RECOMPUTE, i);
    return;
  }
  t->saved[i] = buffer(t, "kept", i, ST_MEM_ACTIVATIONS, mem->saved, ST_DATA_ACTS, i);
  st_pass_mem_alloc(pm, t->saved[i]);
  /* A fresh output: the backward's when it reads it, else dropped. */
  uint32_t out = buffer(t, "out again", i, ST_MEM_ACTIVATIONS, mem->output, ST_DATA_OUTPUT, i);
  st_pass_mem_alloc(pm, out);
  if (keeps(t, i, ST_KEEPS_OUTPUT))
    t->again[i] = out;
  else
    st_pass_mem_free(pm, out);
  scratch(t, pm, ST_PASS_RECOMPUTE, i);
  free_read(t, ST_PASS_RECOMPUTE, i, pm);
}

/* A backward (`pass` BWD), or half of one: B (BWD_INPUT) makes the input's
 * gradient and frees nothing the layer read, which W (BWD_WEIGHT) reads
 * again and frees as a whole backward does. */
static void
backward(StTensors *t, int i, StPass pass, StPassMem *pm)
{
  const StLayerMemory *mem = &t->mem[i];
  const StModel *m = t->spec.model;
  gboolean makes = pass != ST_PASS_BWD_WEIGHT, frees = pass != ST_PASS_BWD_INPUT;
  wait_fetch(t, i, pm);
  /* The first layer's input is data: no gradient of it. */
  if (i > 0 && makes) {
    t->grad[i] = buffer(t, "dx", i, ST_MEM_WORKSPACE, mem->input_grad, ST_DATA_INPUT_GRAD, i);
    st_pass_mem_alloc(pm, t->grad[i]);
  }
  scratch(t, pm, pass, i);
  if (!frees) {
    if (i > 0 && !runs(t, i - 1) && !moved(t, i))
      st_pass_mem_free(pm, t->grad[i]);
    return;
  }
  /* A tied head's weight gradient waits in a buffer of its own until the
   * backward of the layer it is tied to adds it to that layer's gradient
   * (which, in a ZeRO bucket, only comes with that backward; the executor
   * parks it under every strategy, so DP and ZeRO sum in one order). A rank
   * without that backward (a pipeline stage keeping a copy) adds it in
   * directly. */
  int tied = st_model_tied_layer(m, i);
  if (tied >= 0 && runs(t, tied) && t->parked[tied] == NONE) {
    t->parked[tied] = buffer(t, "tied grads", tied, ST_MEM_GRADS,
                             m->layers[tied].params * t->spec.grad_bytes, ST_DATA_NONE, tied);
    st_pass_mem_alloc(pm, t->parked[tied]);
  }
  st_pass_mem_free(pm, t->parked[i]);
  st_pass_mem_free(pm, t->saved[i]);
  st_pass_mem_free(pm, t->again[i]);
  st_pass_mem_free(pm, t->remade[i]);
  if (mem->targets > 0)
    st_pass_mem_free(pm, t->targets);
  /* The gradient of its output, read last here. */
  if (i + 1 < t->n)
    st_pass_mem_free(pm, moved(t, i + 1) ? t->grad_in[i + 1] : t->grad[i + 1]);
  free_read(t, ST_PASS_BWD, i, pm);
  if (bwd_reads_output(t, i + 1) && moved(t, i + 1) && t->sent[i + 1] != NONE) {
    g_assert(pm->n_after < (int)G_N_ELEMENTS(pm->after));
    pm->after[pm->n_after++] = t->sent[i + 1];
  }
  /* Nobody here reads the gradient it made (no layer before it here, and
   * no transfer out): it goes with this pass. */
  if (i > 0 && makes && !runs(t, i - 1) && !moved(t, i))
    st_pass_mem_free(pm, t->grad[i]);
}

void
st_tensors_pass(StTensors *t, StPass pass, int layer, StPassMem *pm)
{
  g_assert(runs(t, layer));
  switch (pass) {
  case ST_PASS_FWD:
    forward(t, layer, pm);
    return;
  case ST_PASS_RECOMPUTE:
    recompute(t, layer, pm);
    return;
  case ST_PASS_BWD:
  case ST_PASS_BWD_INPUT:
  case ST_PASS_BWD_WEIGHT:
    backward(t, layer, pass, pm);
    return;
  default:
    g_assert_not_reached();
  }
}

/* ---- offload to host (offload.h) ------------------------------------------------ */

gboolean
st_tensors_offloads(const StTensors *t, int layer)
{
  return runs(t, layer) && t->offload[layer] && !full(t, layer) && t->saved[layer] != NONE;
}

int64_t
st_tensors_offload_bytes(const StTensors *t, int layer)
{
  uint32_t b = t->down[layer] != NONE ? t->down[layer] : t->saved[layer];
  g_assert(b != NONE);
  return g_array_index(t->program->buffers, StBuffer, b).bytes;
}

void
st_tensors_offload_down(StTensors *t, int layer, StPassMem *pm)
{
  g_assert(st_tensors_offloads(t, layer) && t->down[layer] == NONE);
  t->down[layer] = t->saved[layer];
  st_pass_mem_free(pm, t->down[layer]);
  t->saved[layer] = NONE;
}

gboolean
st_tensors_offloaded(const StTensors *t, int layer)
{
  return layer >= 0 && layer < t->n && t->down[layer] != NONE;
}

gboolean
st_tensors_offload_fetched(const StTensors *t, int layer)
{
  return t->down[layer] != NONE && t->saved[layer] != NONE;
}

void
st_tensors_offload_up(StTensors *t, int layer, StPassMem *pm)
{
  g_assert(t->down[layer] != NONE && t->saved[layer] == NONE);
  int64_t bytes = g_array_index(t->program->buffers, StBuffer, t->down[layer]).bytes;
  t->saved[layer] = buffer(t, "kept back", layer, ST_MEM_ACTIVATIONS, bytes, ST_DATA_ACTS, layer);
  st_pass_mem_alloc(pm, t->saved[layer]);
}

void
st_tensors_offload_fetch_op(StTensors *t, int layer, uint32_t op)
{
  g_assert(t->down[layer] != NONE);
  t->fetch[layer] = op;
}

/* ---- moves -------------------------------------------------------------------------- */

uint32_t
st_tensors_move_in(StTensors *t, int k, gboolean backward, StMemCategory category)
{
  g_assert(moved(t, k));
  gboolean *done = &t->in_done[(backward ? t->n + 1 : 0) + k];
  if (*done)
    return NONE;
  *done = TRUE;
  if (!backward) {
    g_assert(runs(t, k));
    t->in[k] = buffer(t, "in", k, category, t->mem[k].input, ST_DATA_OUTPUT, k - 1);
    return t->in[k];
  }
  g_assert(runs(t, k - 1));
  /* g[k] at layer k-1's batch: the gradient of its output. */
  t->grad_in[k] =
    buffer(t, "dy", k - 1, category, t->mem[k - 1].output, ST_DATA_INPUT_GRAD, k);
  return t->grad_in[k];
}

uint32_t
st_tensors_move_out(StTensors *t, int k, gboolean backward)
{
  g_assert(moved(t, k));
  if (backward)
    return t->grad[k];
  return bwd_reads_output(t, k) ? NONE : t->made[k];
}

void
st_tensors_sent(StTensors *t, int k, uint32_t op)
{
  g_assert(moved(t, k));
  t->sent[k] = op;
}

/* ---- footprint ---------------------------------------------------------------------- */

typedef struct {
  const StProgram *program;
  int64_t live, peak;
} Tally;

static void
tally(Tally *y, const StPassMem *pm)
{
  for (int k = 0; k < pm->n_alloc; k++)
    y->live += g_array_index(y->program->buffers, StBuffer, pm->alloc[k]).bytes;
  y->peak = MAX(y->peak, y->live);
  for (int k = 0; k < pm->n_free; k++)
    y->live -= g_array_index(y->program->buffers, StBuffer, pm->free[k]).bytes;
}

/* The effects of one move as an op of its own. */
static void
tally_move(Tally *y, uint32_t alloc, uint32_t free)
{
  StPassMem pm = {0};
  st_pass_mem_alloc(&pm, alloc);
  st_pass_mem_free(&pm, free);
  tally(y, &pm);
}

void
st_tensors_footprint(const StTensorsSpec *spec, int64_t *held, int64_t *peak)
{
  g_autoptr(StProgram) p = st_program_new("footprint");
  g_autoptr(StTensors) t = st_tensors_new(p, spec);
  Tally y = {p, 0, 0};
  int n = t->n;
  for (int i = 0; i < n; i++) {
    if (!runs(t, i))
      continue;
    if (moved(t, i))
      tally_move(&y, st_tensors_move_in(t, i, FALSE, ST_MEM_ACTIVATIONS), NONE);
    StPassMem pm = {0};
    st_tensors_pass(t, ST_PASS_FWD, i, &pm);
    tally(&y, &pm);
    if (st_tensors_offloads(t, i)) { /* gone to the host as soon as its copy ends */
      pm = (StPassMem){0};
      st_tensors_offload_down(t, i, &pm);
      tally(&y, &pm);
    }
    if (moved(t, i + 1))
      tally_move(&y, NONE, st_tensors_move_out(t, i + 1, FALSE));
  }
  *held = y.live;
  for (int i = n - 1; i >= 0; i--) {
    if (!runs(t, i))
      continue;
    if (moved(t, i + 1))
      tally_move(&y, st_tensors_move_in(t, i + 1, TRUE, ST_MEM_WORKSPACE), NONE);
    StPassMem pm = {0};
    if (t->down[i] != NONE) { /* back right before its backward */
      st_tensors_offload_up(t, i, &pm);
      st_tensors_offload_fetch_op(t, i, 0);
      tally(&y, &pm);
      pm = (StPassMem){0};
    }
    if (st_tensors_recomputes(t, i)) {
      st_tensors_pass(t, ST_PASS_RECOMPUTE, i, &pm);
      tally(&y, &pm);
      pm = (StPassMem){0};
    }
    st_tensors_pass(t, ST_PASS_BWD, i, &pm);
    tally(&y, &pm);
    if (moved(t, i))
      tally_move(&y, NONE, st_tensors_move_out(t, i, TRUE));
  }
  g_assert(y.live == 0);
  *peak = y.peak;
}
