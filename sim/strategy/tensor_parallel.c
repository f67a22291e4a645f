/* tensor_parallel.c: see tensor_parallel.h. */
#include "strategy/tensor_parallel.h"

#include "model/layer_type.h"

#define NONE UINT32_MAX
#define COMMS_MAX 3

/* The collectives of one part of a pass, in the order they run: those
 * before the compute first. */
typedef struct {
  StTpComm comm[COMMS_MAX];
  StData data[COMMS_MAX];
  int n;
} PartComms;

static void
part_comms(const StLayer *layer, StPass pass, int dtype_bytes, PartComms *out)
{
  gboolean fwd = pass != ST_PASS_BWD;
  StTpComm c[2];
  int n = st_layer_tp_comm(layer, pass, dtype_bytes, c);
  *out = (PartComms){0};
  /* Megatron's column-parallel linear keeps only its s/t rows of a
   * sequence-parallel input and gathers them again in backward, for the
   * weight gradient: wherever the forward gathers the input first. */
  StTpComm fc[2];
  int nf = fwd ? 0 : st_layer_tp_comm(layer, ST_PASS_FWD, dtype_bytes, fc);
  for (int k = 0; k < nf; k++)
    if (fc[k].before && fc[k].kind == ST_COLL_ALL_GATHER) {
      out->comm[out->n] = fc[k];
      out->data[out->n++] = ST_DATA_TP_INPUT;
    }
  for (int k = 0; k < n; k++) {
    if (!c[k].before)
      continue;
    out->comm[out->n] = c[k];
    out->data[out->n++] = fwd ? ST_DATA_TP_INPUT : ST_DATA_TP_OUTPUT_GRAD;
  }
  /* The gathered output gradient is read first: it leads. */
  if (!fwd && out->n == 2) {
    StTpComm tc = out->comm[0];
    out->comm[0] = out->comm[1];
    out->comm[1] = tc;
    StData td = out->data[0];
    out->data[0] = out->data[1];
    out->data[1] = td;
  }
  for (int k = 0; k < n; k++) {
    if (c[k].before)
      continue;
    g_assert(out->n < COMMS_MAX);
    out->comm[out->n] = c[k];
    out->data[out->n++] = fwd ? ST_DATA_TP_OUTPUT : ST_DATA_TP_INPUT_GRAD;
  }
}

int64_t
st_tp_pass_comm_bytes(const StModel *m, int layer, StPass pass, int batch, StDtype dtype)
{
  const StLayer *l = &m->layers[layer];
  double share[ST_TP_PARTS_MAX];
  int parts = st_layer_tp_parts(l, pass, share);
  PartComms pc;
  part_comms(l, pass, st_dtype_bytes(dtype), &pc);
  int64_t bytes = 0;
  for (int k = 0; k < pc.n; k++)
    bytes += pc.comm[k].bytes * batch;
  return bytes * parts;
}

typedef struct {
  StProgram *p;
  const StTpSpec *tp;
  const StModel *m;
  int stream, layer, micro;
  uint32_t last;          /* the pass's last op so far, NONE before the first */
  uint32_t after;         /* what the pass's first op waits for besides pm's */
  const StPassMem *pm;
  const StPassExtra *extra; /* a hook's, never NULL */
  uint32_t rest[COMMS_MAX]; /* overlapped chunks the next exposed op also waits for */
  int n_rest;
} Emit;

static void
apply_frees(Emit *e)
{
  for (int i = 0; i < e->pm->n_free; i++)
    st_program_free_buffer(e->p, e->pm->free[i]);
  for (int i = 0; i < e->extra->n_free; i++)
    st_program_free_buffer(e->p, e->extra->free[i]);
}

/* The dependencies of the op being built: the previous op of the pass, or
 * for the first, what the pass waits for. */
static void
emit_deps(Emit *e)
{
  for (int i = 0; i < e->n_rest; i++)
    st_program_after(e->p, e->rest[i]);
  e->n_rest = 0;
  if (e->last != NONE) {
    st_program_after(e->p, e->last);
    return;
  }
  if (e->after != NONE)
    st_program_after(e->p, e->after);
  for (int i = 0; i < e->extra->n_after; i++)
    st_program_after(e->p, e->extra->after[i]);
  for (int i = 0; i < e->extra->n_after_prev_step; i++)
    st_program_after_prev_step(e->p, e->extra->after_prev_step[i]);
  for (int i = 0; i < e->pm->n_after; i++)
    st_program_after(e->p, e->pm->after[i]);
}

/* A collective of the part after the last op. */
static uint32_t
emit_coll(Emit *e, int part, const StTpComm *c, StData data, int64_t bytes, uint32_t alloc,
          uint32_t free, gboolean frees)
{
  StOp op = st_op_coll(e->stream, c->kind, e->tp->comm, bytes);
  st_op_moves(&op, data, e->layer, e->layer);
  op.micro = e->micro;
  op.part = (uint8_t)part;
  st_program_begin(e->p, &op);
  emit_deps(e);
  if (alloc != NONE)
    st_program_alloc(e->p, alloc);
  if (free != NONE)
    st_program_free_buffer(e->p, free);
  if (frees)
    apply_frees(e);
  return e->last = st_program_commit(e->p);
}

/* The overlapped chunks of a collective (tensor_parallel.h): beside the
 * compute, after `after`, on the overlap stream; the pass's next exposed
 * op waits for them. */
static void
emit_rest(Emit *e, int part, const StTpComm *c, int64_t bytes, uint32_t after)
{
  StOp op = st_op_coll(e->tp->overlap_stream, c->kind, e->tp->comm, bytes);
  st_op_moves(&op, ST_DATA_TP_OVERLAP, e->layer, e->layer);
  op.micro = e->micro;
  op.part = (uint8_t)part;
  st_program_begin(e->p, &op);
  if (after != NONE)
    st_program_after(e->p, after);
  g_assert(e->n_rest < COMMS_MAX);
  e->rest[e->n_rest++] = st_program_commit(e->p);
}

/* A transient comm buffer of the part: "WHAT LAYER [part k] mM". */
static uint32_t
comm_buffer(Emit *e, const char *what, int part, int64_t bytes)
{
  const char *name = e->m->layers[e->layer].name;
  g_autofree char *text = part > 0 ? g_strdup_printf("%s %s part %d m%d", what, name, part,
                                                     e->micro)
                                   : g_strdup_printf("%s %s m%d", what, name, e->micro);
  return st_program_add_buffer(e->p, text, ST_MEM_COMM, bytes, FALSE);
}

uint32_t
st_tp_emit_pass(StProgram *p, const StTpSpec *tp, const StModel *m, int stream, StPass pass,
                int layer, int micro, int batch, const StPassMem *pm, uint32_t after,
                const StPassExtra *extra)
{
  static const StPassExtra no_extra = {0};
  const StLayer *l = &m->layers[layer];
  double share[ST_TP_PARTS_MAX];
  int parts = tp->t > 1 ? st_layer_tp_parts(l, pass, share) : 1;
  PartComms pc = {0};
  if (tp->t > 1)
    part_comms(l, pass, st_dtype_bytes(tp->dtype), &pc);
  Emit e = {.p = p, .tp = tp, .m = m, .stream = stream, .layer = layer, .micro = micro,
            .last = NONE, .after = after, .pm = pm, .extra = extra ? extra : &no_extra};
  gboolean first_comp = TRUE;
  /* a pass that ends after its reduction frees there (StLayerType.tp_tail) */
  gboolean tail = l->type->tp_tail && pass == ST_PASS_BWD && pc.n > 0 && !pc.comm[pc.n - 1].before;
  /* Chunks overlap the compute only between a gather and a reduce-scatter
   * (sequence parallelism), so that an exposed op joins them. */
  gboolean split = tp->overlap && tp->t > 1 && pc.n > 0 &&
                   pc.comm[pc.n - 1].kind == ST_COLL_REDUCE_SCATTER;
  int64_t chunks = tp->t;
  for (int j = 0; j < parts; j++) {
    /* Forward runs the parts in order, backward in reverse. */
    int part = parts == 1 ? 0 : pass == ST_PASS_BWD ? parts - j : j + 1;
    gboolean last_part = j == parts - 1;
    uint32_t gathered[COMMS_MAX], partial = NONE;
    int n_gathered = 0;
    int k = 0;
    int64_t rest[COMMS_MAX] = {0};
    for (; k < pc.n && pc.comm[k].before; k++) {
      int64_t bytes = pc.comm[k].bytes * batch;
      gathered[n_gathered] = comm_buffer(&e, pc.data[k] == ST_DATA_TP_INPUT ? "gathered input"
                                                                            : "gathered dy",
                                         part, bytes);
      rest[k] = split ? bytes - bytes / chunks : 0;
      emit_coll(&e, part, &pc.comm[k], pc.data[k], bytes - rest[k], gathered[n_gathered], NONE,
                FALSE);
      n_gathered++;
    }
    uint32_t exposed = e.last; /* what the compute waits for in the pass */
    /* The compute: a reduce-scatter after it reads the partial sums it writes. */
    gboolean scatter = k < pc.n && pc.comm[k].kind == ST_COLL_REDUCE_SCATTER;
    if (scatter)
      partial = comm_buffer(&e, pass == ST_PASS_BWD ? "partial dx" : "partial out", part,
                            pc.comm[k].bytes * batch);
    /* Context parallelism cuts the part around its exchanges: the first
     * step opens it, the last writes the partial sums and frees. */
    int steps = st_cp_steps(tp->cp, m, layer, part);
    gboolean bwd = pass == ST_PASS_BWD;
    StOp op = st_op_comp(stream, pass, layer, micro, batch);
    op.part = (uint8_t)part;
    if (steps > 0)
      st_op_set_cp_step(&op, bwd ? steps - 1 : 0, steps);
    st_program_begin(p, &op);
    emit_deps(&e);
    if (first_comp) {
      for (int i = 0; i < pm->n_alloc; i++)
        st_program_alloc(p, pm->alloc[i]);
      for (int i = 0; i < e.extra->n_alloc; i++)
        st_program_alloc(p, e.extra->alloc[i]);
    }
    if (steps > 0) {
      /* a forward's gathered input is the QKV projection's, read first; a
       * backward's gathered input is its weight gradient's, read last */
      for (int i = 0; !bwd && i < n_gathered; i++)
        st_program_free_buffer(p, gathered[i]);
      uint32_t opened = st_program_commit(p);
      uint32_t core = st_cp_emit_core(p, tp->cp, m, stream, tp->cp_stream, pass, layer, part,
                                      micro, batch, opened);
      st_op_set_cp_step(&op, bwd ? 0 : steps - 1, steps);
      st_program_begin(p, &op);
      st_program_after(p, core);
    }
    if (partial != NONE)
      st_program_alloc(p, partial);
    for (int i = 0; (steps == 0 || bwd) && i < n_gathered; i++)
      st_program_free_buffer(p, gathered[i]);
    if (last_part && !tail)
      apply_frees(&e);
    e.last = st_program_commit(p);
    first_comp = FALSE;
    /* The gathers' other chunks, then the reduce-scatter's first ones, run
     * beside the compute once the exposed chunks are in (with none exposed
     * yet, after the compute: nothing to overlap). */
    uint32_t compute = e.last;
    for (int c = 0; split && c < pc.n; c++) {
      if (!pc.comm[c].before && pc.comm[c].kind != ST_COLL_REDUCE_SCATTER)
        continue;
      int64_t bytes = pc.comm[c].bytes * batch;
      if (!pc.comm[c].before)
        rest[c] = bytes - bytes / chunks;
      if (rest[c] > 0)
        emit_rest(&e, part, &pc.comm[c], rest[c], exposed != NONE ? exposed : compute);
    }
    for (; k < pc.n; k++) {
      emit_coll(&e, part, &pc.comm[k], pc.data[k], pc.comm[k].bytes * batch - rest[k], NONE,
                partial, last_part && tail && k == pc.n - 1);
      partial = NONE;
    }
  }
  return e.last;
}
