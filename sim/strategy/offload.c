/* offload.c: see offload.h. */
#include "strategy/offload.h"

#include "model/layer_type.h"
#include "strategy/tensors.h"

gboolean *
st_offload_layers(const StModel *m, int n)
{
  gboolean *on = g_new0(gboolean, MAX(m->n_layers, 1));
  int blocks = 0;
  for (int i = 0; i < m->n_layers && blocks < n; i++)
    if (m->layers[i].type->block)
      on[i] = ++blocks <= n;
  return on;
}

int64_t
st_offload_bytes(const StModel *m, int n, const StRecomputePlan *plan, int batch, StDtype dtype)
{
  if (n <= 0)
    return 0;
  g_autofree gboolean *on = st_offload_layers(m, n);
  g_autofree StRecompute *mode = st_recompute_layers(m, plan);
  int64_t total = 0;
  for (int i = 0; i < m->n_layers; i++) {
    if (!on[i] || mode[i] == ST_RECOMPUTE_FULL)
      continue;
    StLayerMemory mem;
    st_layer_memory(m, i, batch, dtype, &mem);
    /* What tensors.c keeps: less the part selective recomputation drops. */
    total += mem.saved - (mode[i] == ST_RECOMPUTE_SELECTIVE
                            ? st_layer_memory_again(&mem, plan->ops, NULL)
                            : 0);
  }
  return total;
}

gboolean
st_offload_check(const StModel *m, const StCluster *c, int n, const StRecomputePlan *plan,
                 GError **error)
{
  if (n <= 0)
    return TRUE;
  int blocks = 0;
  for (int i = 0; i < m->n_layers; i++)
    blocks += m->layers[i].type->block ? 1 : 0;
  if (n > blocks) {
    g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID,
                "--offload-activations %d: '%s' has %d transformer layers (transformer_block, "
                "llama_block)%s",
                n, m->name, blocks, blocks > 0 ? "" : ": nothing to offload");
    return FALSE;
  }
  if (st_offload_bytes(m, n, plan, 1, m->dtype) == 0) {
    g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID,
                "--offload-activations %d: the first %d transformer layer%s of '%s' keep%s no "
                "saved block to offload (checkpointed by --recompute full, a layer keeps only "
                "its input, which stays on the GPU)",
                n, n, n == 1 ? "" : "s", m->name, n == 1 ? "s" : "");
    return FALSE;
  }
  if (!c->links[ST_LINK_PCIE].present) {
    g_set_error(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID,
                "--offload-activations %d: cluster '%s' has no pcie link (its links.pcie) to "
                "copy activations between GPU and host over",
                n, c->name);
    return FALSE;
  }
  return TRUE;
}

uint32_t
st_offload_down(StProgram *p, int stream, StTensors *t, int layer, uint32_t fwd)
{
  if (stream < 0 || !st_tensors_offloads(t, layer))
    return UINT32_MAX;
  StPassMem pm = {0};
  int64_t bytes = st_tensors_offload_bytes(t, layer);
  st_tensors_offload_down(t, layer, &pm);
  StOp op = st_op_copy(stream, ST_COPY_D2H, bytes);
  op.label = st_program_label(p, "acts to host");
  st_op_moves(&op, ST_DATA_ACTS, layer, layer);
  op.micro = g_array_index(p->buffers, StBuffer, pm.free[0]).micro;
  st_program_begin(p, &op);
  st_program_after(p, fwd);
  st_pass_mem_apply(p, &pm);
  return st_program_commit(p);
}

void
st_offload_gate_copied(StOffloadGate *g, uint32_t copy)
{
  if (copy == UINT32_MAX)
    return;
  g->wait = g->last;
  g->last = copy;
}

uint32_t
st_offload_gate_take(StOffloadGate *g)
{
  uint32_t w = g->wait;
  g->wait = UINT32_MAX;
  return w;
}

void
st_offload_up(StProgram *p, int stream, StTensors *t, int layer, uint32_t after)
{
  if (stream < 0 || layer < 0 || !st_tensors_offloaded(t, layer) ||
      st_tensors_offload_fetched(t, layer))
    return;
  StPassMem pm = {0};
  st_tensors_offload_up(t, layer, &pm);
  StOp op = st_op_copy(stream, ST_COPY_H2D, st_tensors_offload_bytes(t, layer));
  op.label = st_program_label(p, "acts from host");
  st_op_moves(&op, ST_DATA_ACTS, layer, layer);
  op.micro = g_array_index(p->buffers, StBuffer, pm.alloc[0]).micro;
  st_program_begin(p, &op);
  if (after != UINT32_MAX)
    st_program_after(p, after);
  st_pass_mem_apply(p, &pm);
  st_tensors_offload_fetch_op(t, layer, st_program_commit(p));
}

void
st_offload_note(StSchedule *s, const StModel *m, int n, const StRecomputePlan *plan, int batch,
                StDtype dtype)
{
  if (n <= 0)
    return;
  st_schedule_note_number(s, "offload_activation_layers", n);
  st_schedule_note_number(s, "offload_activation_bytes_per_micro",
                          (double)st_offload_bytes(m, n, plan, batch, dtype));
}
