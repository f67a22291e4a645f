/* context_parallel.c: see context_parallel.h. */
#include "strategy/context_parallel.h"

#include "model/model.h"

#define NONE UINT32_MAX

int
st_cp_steps(const StCpSpec *cp, const StModel *m, int layer, int part)
{
  if (cp == NULL || cp->c <= 1 || st_layer_cp_part(&m->layers[layer]) != part)
    return 0;
  return cp->kind == ST_CP_RING ? cp->c + 2 : 3;
}

static uint32_t
exchange(StProgram *p, const StCpSpec *cp, int stream, StCollKind kind, int64_t bytes, int layer,
         int part, int micro, uint32_t after, uint32_t after2, uint32_t alloc, uint32_t free)
{
  StOp op = st_op_coll(stream, kind, cp->comm, bytes);
  st_op_moves(&op, ST_DATA_CP, layer, layer);
  op.micro = micro;
  op.part = (uint8_t)part;
  st_program_begin(p, &op);
  if (after != NONE)
    st_program_after(p, after);
  if (after2 != NONE)
    st_program_after(p, after2);
  if (alloc != NONE)
    st_program_alloc(p, alloc);
  if (free != NONE)
    st_program_free_buffer(p, free);
  return st_program_commit(p);
}

static uint32_t
core_step(StProgram *p, int stream, StPass pass, int layer, int part, int micro, int batch,
          int step, int steps, uint32_t after, uint32_t after2, uint32_t free)
{
  StOp op = st_op_comp(stream, pass, layer, micro, batch);
  op.part = (uint8_t)part;
  st_op_set_cp_step(&op, step, steps);
  st_program_begin(p, &op);
  if (after != NONE)
    st_program_after(p, after);
  if (after2 != NONE)
    st_program_after(p, after2);
  if (free != NONE)
    st_program_free_buffer(p, free);
  return st_program_commit(p);
}

static uint32_t
buffer(StProgram *p, const StModel *m, const char *what, int layer, int micro, int64_t bytes)
{
  g_autofree char *name = g_strdup_printf("%s %s m%d", what, m->layers[layer].name, micro);
  return st_program_add_buffer(p, name, ST_MEM_COMM, bytes, FALSE);
}

uint32_t
st_cp_emit_core(StProgram *p, const StCpSpec *cp, const StModel *m, int stream, int cp_stream,
                StPass pass, int layer, int part, int micro, int batch, uint32_t first)
{
  int steps = st_cp_steps(cp, m, layer, part);
  g_return_val_if_fail(steps >= 3, first);
  int64_t kv, qkv, out;
  st_layer_cp_bytes(&m->layers[layer], st_dtype_bytes(cp->dtype), &kv, &qkv, &out);
  gboolean bwd = st_pass_is_backward(pass);
  if (cp->kind == ST_CP_ALL_TO_ALL) {
    /* forward: Q K V in, the output back; backward: the output's gradient
     * in, those of Q K V back */
    int64_t in = (bwd ? out : qkv) * batch, back = (bwd ? qkv : out) * batch;
    uint32_t buf = buffer(p, m, "a2a heads", layer, micro, (qkv + out) * batch);
    uint32_t a = exchange(p, cp, stream, ST_COLL_ALL_TO_ALL, in, layer, part, micro, first, NONE,
                          buf, NONE);
    uint32_t c = core_step(p, stream, pass, layer, part, micro, batch, 1, steps, a, NONE, NONE);
    return exchange(p, cp, stream, ST_COLL_ALL_TO_ALL, back, layer, part, micro, c, NONE, NONE,
                    buf);
  }
  /* The ring: c core steps, the chunk of each next one exchanged beside it. */
  int n = steps - 2;
  int64_t chunk = kv * batch;
  if (!bwd) {
    uint32_t ring = buffer(p, m, "ring kv", layer, micro, 2 * chunk);
    uint32_t prev_core = first, prev_x = NONE;
    for (int k = 1; k <= n; k++) {
      uint32_t x = NONE;
      if (k < n)
        x = exchange(p, cp, cp_stream, ST_COLL_RING_SHIFT, chunk, layer, part, micro, prev_core,
                     prev_x, k == 1 ? ring : NONE, NONE);
      prev_core = core_step(p, stream, pass, layer, part, micro, batch, k, steps, prev_core,
                            prev_x, k == n ? ring : NONE);
      prev_x = x;
    }
    return prev_core;
  }
  /* Backward (TE's p2p backward): core k (run in order k = 1 .. c, the
   * steps c .. 1) computes the local queries against the chunk of the rank
   * k - 1 before, and that chunk's keys' and values' gradient, which
   * follows the chunk one exchange behind: X m runs beside core m (after
   * core m - 1) and moves the chunk core m + 1 reads (m < c) and the
   * gradient summed through core m - 1 (m >= 3: core 1's, the rank's own
   * chunk's, stays home); X c + 1, after the last core step, brings the
   * last gradient home. st_cp_ring_bwd_carries says what each carries. */
  uint32_t ring = buffer(p, m, "ring kv dkv", layer, micro, 4 * chunk);
  uint32_t prev_core = first, prev_x = NONE, last_x = NONE;
  int emitted = 0, total = st_cp_ring_bwd_exchanges(n);
  for (int k = 1; k <= n + 1; k++) {
    gboolean kv_part, grad_part;
    st_cp_ring_bwd_carries(n, k, &kv_part, &grad_part);
    uint32_t x = NONE;
    if (kv_part || grad_part) {
      emitted++;
      x = exchange(p, cp, cp_stream, ST_COLL_RING_SHIFT,
                   (kv_part ? chunk : 0) + (grad_part ? chunk : 0), layer, part, micro,
                   prev_core, last_x, emitted == 1 ? ring : NONE,
                   emitted == total ? ring : NONE);
      last_x = x;
    }
    if (k <= n) /* core k reads the chunk X k - 1 brought */
      prev_core = core_step(p, stream, pass, layer, part, micro, batch, n + 1 - k, steps,
                            prev_core, prev_x, NONE);
    prev_x = x;
  }
  return last_x;
}

void
st_cp_ring_bwd_carries(int c, int m, gboolean *kv, gboolean *grad)
{
  *kv = m >= 1 && m <= c - 1;
  *grad = m >= 3 && m <= c + 1;
}

int
st_cp_ring_bwd_exchanges(int c)
{
  int n = 0;
  for (int m = 1; m <= c + 1; m++) {
    gboolean kv, grad;
    st_cp_ring_bwd_carries(c, m, &kv, &grad);
    n += kv || grad;
  }
  return n;
}

int64_t
st_cp_pass_bytes(const StCpSpec *cp, const StModel *m, int layer, StPass pass, int batch)
{
  int steps = st_cp_steps(cp, m, layer, st_layer_cp_part(&m->layers[layer]));
  if (steps == 0)
    return 0;
  int64_t kv, qkv, out;
  st_layer_cp_bytes(&m->layers[layer], st_dtype_bytes(cp->dtype), &kv, &qkv, &out);
  gboolean bwd = st_pass_is_backward(pass);
  if (cp->kind == ST_CP_ALL_TO_ALL)
    return (qkv + out) * batch * (cp->c - 1) / cp->c;
  return (int64_t)(cp->c - 1) * (bwd ? 2 : 1) * kv * batch;
}
