/* recompute.c: see recompute.h. */
#include "strategy/recompute.h"

#include "model/layer_type.h"

StRecomputePlan
st_recompute_plan(const StOptions *o)
{
  /* (the choice's index + 1 is the set's bits: option_table.c) */
  StRecomputePlan plan = {(StRecompute)o->recompute, o->recompute_every,
                          (unsigned)o->recompute_ops + 1};
  return plan;
}

/* 1-based count of transformer layers up to and including layer i; 0 when
 * layer i is not one. */
static int
block_number(const StModel *m, int i)
{
  if (!m->layers[i].type->block)
    return 0;
  int n = 0;
  for (int k = 0; k <= i; k++)
    n += m->layers[k].type->block ? 1 : 0;
  return n;
}

/* Per-sample memory at the model's dtype: what the layer drops under the
 * ops (any batch drops the same layers). */
static int64_t
drops(const StModel *m, int i, unsigned ops)
{
  StLayerMemory mem;
  st_layer_memory(m, i, 1, m->dtype, &mem);
  return st_layer_memory_again(&mem, ops, NULL);
}

StRecompute
st_recompute_layer(const StModel *m, const StRecomputePlan *plan, int i)
{
  g_return_val_if_fail(i >= 0 && i < m->n_layers, ST_RECOMPUTE_NONE);
  switch (plan->mode) {
  case ST_RECOMPUTE_FULL:
    if (plan->every <= 0)
      return ST_RECOMPUTE_FULL;
    int j = block_number(m, i);
    return j > 0 && j % plan->every == 0 ? ST_RECOMPUTE_FULL : ST_RECOMPUTE_NONE;
  case ST_RECOMPUTE_SELECTIVE:
    return drops(m, i, plan->ops) > 0 ? ST_RECOMPUTE_SELECTIVE : ST_RECOMPUTE_NONE;
  default:
    return ST_RECOMPUTE_NONE;
  }
}

StRecompute *
st_recompute_layers(const StModel *m, const StRecomputePlan *plan)
{
  StRecompute *mode = g_new0(StRecompute, MAX(m->n_layers, 1));
  int blocks = 0;
  for (int i = 0; i < m->n_layers; i++) {
    blocks += m->layers[i].type->block ? 1 : 0;
    if (plan->mode == ST_RECOMPUTE_FULL && plan->every > 0)
      mode[i] = m->layers[i].type->block && blocks % plan->every == 0 ? ST_RECOMPUTE_FULL
                                                                      : ST_RECOMPUTE_NONE;
    else
      mode[i] = st_recompute_layer(m, plan, i);
  }
  return mode;
}

static gboolean
refuse(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);

static gboolean
refuse(GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *text = g_strdup_vprintf(format, args);
  va_end(args);
  g_set_error_literal(error, ST_OPTIONS_ERROR, ST_ERROR_INVALID, text);
  return FALSE;
}

static gboolean
check_selective(const StModel *m, unsigned ops, GError **error)
{
  unsigned set = ops == 0 ? ST_RC_DEFAULT : ops;
  for (int op = 0; op < ST_RC_N; op++) {
    if ((set & (1u << op)) == 0)
      continue;
    gboolean some = FALSE;
    for (int i = 0; i < m->n_layers && !some; i++)
      some = drops(m, i, 1u << op) > 0;
    if (some)
      continue;
    if (op == ST_RC_CORE_ATTN && set == ST_RC_DEFAULT)
      return refuse(error,
                    "--recompute selective: it drops only the attention scores dense attention "
                    "keeps, and no layer of '%s' keeps any (flash attention keeps none): it "
                    "would change nothing; --recompute-ops mlp_act or layernorm drops other "
                    "ops' outputs, --recompute full keeps only each layer's input",
                    m->name);
    return refuse(error,
                  "--recompute-ops %s: no layer of '%s' keeps anything of %s (%s): the run "
                  "would be the same without it",
                  st_recompute_op_name(op), m->name, st_recompute_op_name(op),
                  op == ST_RC_CORE_ATTN ? "flash attention keeps no scores"
                  : op == ST_RC_MLP_ACT ? "no MLP in a transformer layer"
                  : op == ST_RC_LAYERNORM
                    ? "no norm whose output a transformer layer keeps"
                    : "torchtitan's policy is modelled for llama_block layers, whole: not "
                      "split over a tensor-parallel group");
  }
  return TRUE;
}

gboolean
st_recompute_check(const StModel *m, const StRecomputePlan *plan, GError **error)
{
  if (plan->ops != 0 && plan->ops != ST_RC_DEFAULT && plan->mode != ST_RECOMPUTE_SELECTIVE)
    return refuse(error, "--recompute-ops chooses what --recompute selective drops; "
                         "give --recompute selective with it");
  if (plan->every > 0 && plan->mode != ST_RECOMPUTE_FULL)
    return refuse(error, "--recompute-every %d checkpoints every %d-th transformer layer "
                         "under --recompute full; give --recompute full with it",
                  plan->every, plan->every);
  switch (plan->mode) {
  case ST_RECOMPUTE_NONE:
    return TRUE;
  case ST_RECOMPUTE_SELECTIVE:
    return check_selective(m, plan->ops, error);
  default:
    break;
  }
  if (plan->every > 0) {
    int blocks = 0;
    for (int i = 0; i < m->n_layers; i++)
      blocks += m->layers[i].type->block ? 1 : 0;
    if (blocks < plan->every)
      return refuse(error,
                    "--recompute-every %d: '%s' has %d transformer layers (transformer_block, "
                    "llama_block), so none would be checkpointed",
                    plan->every, m->name, blocks);
    return TRUE;
  }
  for (int i = 0; i < m->n_layers; i++) {
    StLayerMemory mem;
    st_layer_memory(m, i, 1, m->dtype, &mem);
    if (mem.saved > 0)
      return TRUE;
  }
  return refuse(error, "--recompute %s: no layer of '%s' keeps anything for its backward",
                st_recompute_name(plan->mode), m->name);
}

char *
st_recompute_describe(const StRecomputePlan *plan)
{
  switch (plan->mode) {
  case ST_RECOMPUTE_FULL:
    if (plan->every == 1)
      return g_strdup(", full recomputation of every transformer layer");
    if (plan->every > 1)
      return g_strdup_printf(", full recomputation of one transformer layer in %d",
                             plan->every);
    return g_strdup(", full recomputation");
  case ST_RECOMPUTE_SELECTIVE: {
    if (plan->ops == 0 || plan->ops == ST_RC_DEFAULT)
      return g_strdup(", selective recomputation");
    g_autofree char *ops = st_recompute_ops_format(plan->ops);
    return g_strdup_printf(", selective recomputation (%s)", ops);
  }
  default:
    return g_strdup("");
  }
}

gboolean
st_recompute_check_split(const StRecomputePlan *plan, int tp, GError **error)
{
  if (plan->mode == ST_RECOMPUTE_SELECTIVE && (plan->ops & (1u << ST_RC_TORCHTITAN)) != 0 &&
      tp > 1)
    return refuse(error, "--recompute-ops torchtitan: torchtitan's policy is modelled for whole "
                         "llama_block layers, and --tensor-parallel %d splits them", tp);
  return TRUE;
}
