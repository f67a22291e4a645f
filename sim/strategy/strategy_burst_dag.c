/* strategy_burst_dag.c: the burst schedule of a model with branches, or of
 * a plan whose branches are packed on other GPUs (strategy_burst.h):
 * samples move along the model's edges between any two GPU sets. */
#include "strategy/strategy_burst.h"


/* Moves `P` bytes per sample of the micro-batch from the set (sa, a) to the
 * set (sb, bw), for this rank: sample s sits on rank sa + s % a before and
 * sb + s % bw after, so each (source, destination) pair moves every
 * large-th sample from one residue (st_burst_share of them); a pair on one
 * rank is a local copy. Peers are ranks (the world communicator). Sends
 * wait for `src_ready`. Returns the last op bringing data in (NONE: this
 * rank receives nothing). */
static uint32_t
exchange_dag(Emit *e, int micro, int sa, int a, int sb, int bw, int64_t P, int tag, int layer,
             gboolean backward, uint32_t src_ready)
{
  Burst *b = e->b;
  int j = e->j, small = MIN(a, bw), large = MAX(a, bw);
  StData data = backward ? ST_DATA_INPUT_GRAD : ST_DATA_OUTPUT;
  uint32_t done = NONE;
  if (j >= sa && j < sa + a) {
    int p = j - sa;
    for (int q = p % small; q < bw; q += small) {
      int r = a >= bw ? p : q, n = share(b, large, r), dst = sb + q;
      if (n == 0)
        continue;
      StOp op = dst == j ? st_op_copy(e->recv, ST_COPY_D2D, n * P)
                         : st_op_send(e->send, b->world, dst, tag, n * P);
      /* samples r, r + large, ...: every rank's replica is 0 here (build) */
      uint32_t id = st_burst_transfer(e, op, micro, n, r, large, data, layer, src_ready, NONE,
                                      NONE, NONE, FALSE);
      if (dst == j)
        done = id;
    }
  }
  if (j >= sb && j < sb + bw) {
    int q = j - sb;
    for (int p = q % small; p < a; p += small) {
      int r = a >= bw ? p : q, n = share(b, large, r), src = sa + p;
      if (n == 0 || src == j)
        continue;
      StOp op = st_op_recv(e->recv, b->world, src, tag, n * P);
      done = st_burst_transfer(e, op, micro, n, r, large, data, layer, done, NONE, NONE, NONE,
                               FALSE);
    }
  }
  return done;
}

/* Edge k into layer v, one direction, of one micro-batch. */
static int
dag_tag(const Burst *b, int micro, int v, int k, int backward)
{
  return ((micro * b->n + v) * ST_LAYER_MAX_INPUTS + k) * 2 + backward;
}

static gboolean
same_set(const Burst *b, int u, int v)
{
  return b->lo[u] == b->lo[v] && b->w[u] == b->w[v];
}

/* One op after every op of `deps` (NONE entries skipped); it allocates
 * `alloc` and frees `release` (NONE: nothing). */
static uint32_t
comp_after(Emit *e, StPass pass, int i, int micro, const uint32_t *deps, int n_deps,
           uint32_t alloc, uint32_t release)
{
  StOp op = st_op_comp(e->compute, pass, i, micro, share(e->b, e->b->w[i], e->j - e->b->lo[i]));
  /* samples j - lo, every w-th (every rank's replica is 0 here: build) */
  st_op_samples(&op, (int)(micro * e->b->M) + e->j - e->b->lo[i], e->b->w[i]);
  st_program_begin(e->p, &op);
  for (int k = 0; k < n_deps; k++)
    if (deps[k] != NONE)
      st_program_after(e->p, deps[k]);
  if (alloc != NONE)
    st_program_alloc(e->p, alloc);
  if (release != NONE)
    st_program_free_buffer(e->p, release);
  e->last_comp = st_program_commit(e->p);
  return e->last_comp;
}

/* What layer v keeps for its backward at this rank's share (act_bytes, in
 * the activation dtype): made by its forward, freed by its backward. */
static uint32_t
kept(Emit *e, int v, int micro)
{
  const Burst *b = e->b;
  int64_t bytes = st_model_bytes_as(b->m, b->m->layers[v].act_bytes, b->bytes.activation) *
                  share(b, b->w[v], e->j - b->lo[v]);
  if (bytes <= 0)
    return NONE;
  g_autofree char *name = g_strdup_printf("kept %s m%d", b->m->layers[v].name, micro);
  return st_program_add_buffer(e->p, name, ST_MEM_ACTIVATIONS, bytes, FALSE);
}

/* A micro-batch along the model's edges: before layer v, each input u
 * comes from u's set (a local dependency when the sets are equal, else an
 * exchange_dag); in backward, each input's gradient goes back the same way,
 * and u's backward waits for the gradients of all its consumers. Memory:
 * the model states (model_states) and what each layer keeps for its
 * backward (kept); tensors.h follows a chain's boundaries, so the outputs
 * in flight, the transfers' buffers and the scratch of a schedule with
 * branches are not counted (its peak memory is a lower bound). No
 * recomputation. */
void
st_burst_emit_micro_dag(Emit *e, int micro)
{
  Burst *b = e->b;
  int n = b->n;
  g_autofree uint32_t *gdeps = g_new(uint32_t, (gsize)n * ST_LAYER_MAX_INPUTS * 4);
  g_autofree int *n_gdeps = g_new0(int, n);
  g_autofree uint32_t *keep = g_new(uint32_t, n);
  for (int v = 0; v < n; v++) {
    int32_t in[ST_LAYER_MAX_INPUTS];
    uint32_t deps[ST_LAYER_MAX_INPUTS];
    int k_in = st_model_layer_inputs(b->m, v, in);
    for (int k = 0; k < k_in; k++) {
      int u = in[k];
      deps[k] = same_set(b, u, v)
                  ? e->fwd[u]
                  : exchange_dag(e, micro, b->lo[u], b->w[u], b->lo[v], b->w[v],
                                 st_burst_out_bytes(b, u), dag_tag(b, micro, v, k, 0), u, FALSE,
                                 e->fwd[u]);
    }
    keep[v] = part(e, v) ? kept(e, v, micro) : NONE;
    e->fwd[v] = part(e, v) ? comp_after(e, ST_PASS_FWD, v, micro, deps, k_in, keep[v], NONE)
                           : NONE;
  }
  for (int v = n - 1; v >= 0; v--) {
    if (part(e, v)) {
      e->bwd[v] = comp_after(e, ST_PASS_BWD, v, micro, &gdeps[v * ST_LAYER_MAX_INPUTS * 4],
                             n_gdeps[v], NONE, keep[v]);
      const StLayer *l = &b->m->layers[v];
      if (micro == b->A - 1 && b->w[v] > 1 && l->params > 0) {
        StOp reduce = st_op_coll(e->sync, ST_COLL_ALL_REDUCE,
                                 st_burst_scomm(b, b->lo[v], b->w[v]), l->params * b->bytes.grad);
        st_op_moves(&reduce, ST_DATA_GRADS, v, v);
        st_program_begin(e->p, &reduce);
        st_program_after(e->p, e->bwd[v]);
        e->last_reduce = st_program_commit(e->p);
      }
    }
    int32_t in[ST_LAYER_MAX_INPUTS];
    int k_in = st_model_layer_inputs(b->m, v, in);
    for (int k = 0; k < k_in; k++) {
      int u = in[k];
      uint32_t got = same_set(b, u, v)
                       ? e->bwd[v]
                       : exchange_dag(e, micro, b->lo[v], b->w[v], b->lo[u], b->w[u],
                                      st_burst_out_bytes(b, u),
                                      dag_tag(b, micro, v, k, 1), v, TRUE,
                                      e->bwd[v]);
      if (got != NONE && n_gdeps[u] < ST_LAYER_MAX_INPUTS * 4)
        gdeps[u * ST_LAYER_MAX_INPUTS * 4 + n_gdeps[u]++] = got;
    }
  }
}

