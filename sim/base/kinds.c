/* kinds.c: name tables and parsers for kinds.h. One table per enum; one
 * lookup routine serves them all. */
#include "kinds.h"

#include <string.h>

#include "error.h"

static const char *const DTYPE[] = {"fp32", "fp16", "bf16", NULL};
static const int DTYPE_BYTES[] = {4, 2, 2};
static const char *const OP_KIND[] = {"INVALID", "COMP", "COMM_COLL", "COMM_SEND", "COMM_RECV",
                                      "COPY", NULL};
static const char *const PASS[] = {"invalid", "fwd",    "bwd",    "fwd+bwd", "optim",
                                   "compress", "expand", "recompute", "bwd_input",
                                   "bwd_weight", NULL};
static const char *const COLL[] = {"invalid",    "all_reduce", "reduce_scatter",
                                   "all_gather", "broadcast",  "reduce",
                                   "all_to_all", "ring_shift", NULL};
static const char *const COPY[] = {"invalid", "d2d", "h2d", "d2h", NULL};
static const char *const MEM[] = {"params",      "grads", "optimizer",
                                  "activations", "comm",  "workspace", NULL};
static const char *const SOURCE[] = {"none",       "profiled",     "interpolated", "roofline",
                                     "alpha_beta", "link_profile", "measured",     "estimate",
                                     NULL};
static const char *const LINK[] = {"intra_node", "inter_node", "pcie", "local", NULL};
static const char *const OPTIMIZER[] = {"sgd", "adam", NULL};
static const char *const DATA[] = {"none",  "params", "params_shard", "grads",  "grads_shard",
                                   "optim", "optim_shard", "acts", "output", "input_grad",
                                   "grads_total", "index", "params_packed",
                                   "params_packed_shard", "grads_packed", "grads_packed_shard",
                                   "grads_packed_fp32", "optim_packed", "optim_packed_shard",
                                   "tp_input", "tp_output", "tp_output_grad", "tp_input_grad",
                                   "tp_grads",
                                   "ep_dispatch", "ep_combine", "ep_combine_grad",
                                   "ep_dispatch_grad", "tp_overlap", "cp", NULL};
static const char *const PRECISION[] = {"fp32", "mixed", "fp8", NULL};
static const char *const RECOMPUTE[] = {"none", "selective", "full", NULL};
static const char *const RECOMPUTE_OP[] = {"core_attn", "mlp_act", "layernorm",
                                            "torchtitan", NULL};
static const char *const MEMKIND[] = {"allocated", "reserved", "device", NULL};

static const char *
name_of(const char *const *table, int n, int value)
{
  g_return_val_if_fail(value >= 0 && value < n, "?");
  return table[value];
}

/* `first` skips the invalid entry of tables that start with one. */
static gboolean
parse_in(const char *const *table, int first, const char *what, const char *text, int *out,
         GError **error)
{
  for (int i = first; table[i] != NULL; i++) {
    if (text != NULL && strcmp(text, table[i]) == 0) {
      *out = i;
      return TRUE;
    }
  }
  g_autofree char *list = g_strjoinv(", ", (char **)(table + first));
  g_set_error(error, ST_BASE_ERROR, ST_ERROR_INVALID, "unknown %s '%s' (expected one of: %s)",
              what, text ? text : "(null)", list);
  return FALSE;
}

#define NAME_AND_PARSE(fn, Type, table, first, n, what)                                       \
  const char *st_##fn##_name(Type v) { return name_of(table, n, (int)v); }                   \
  gboolean st_##fn##_parse(const char *text, Type *out, GError **error)                      \
  {                                                                                           \
    int v;                                                                                    \
    if (!parse_in(table, first, what, text, &v, error))                                       \
      return FALSE;                                                                           \
    *out = (Type)v;                                                                           \
    return TRUE;                                                                              \
  }

NAME_AND_PARSE(dtype, StDtype, DTYPE, 0, ST_DTYPE_N, "dtype")
NAME_AND_PARSE(op_kind, StOpKind, OP_KIND, 1, ST_OP_N, "op kind")
NAME_AND_PARSE(pass, StPass, PASS, 1, ST_PASS_N, "pass")
NAME_AND_PARSE(coll, StCollKind, COLL, 1, ST_COLL_N, "collective")
NAME_AND_PARSE(copy, StCopyKind, COPY, 1, ST_COPY_N, "copy kind")
NAME_AND_PARSE(mem, StMemCategory, MEM, 0, ST_MEM_N, "memory category")
NAME_AND_PARSE(cost_source, StCostSource, SOURCE, 1, ST_SRC_N, "cost source")
NAME_AND_PARSE(link, StLinkClass, LINK, 0, ST_LINK_N, "link class")
NAME_AND_PARSE(optimizer, StOptimizer, OPTIMIZER, 0, ST_OPTIMIZER_N, "optimizer")
NAME_AND_PARSE(precision, StPrecision, PRECISION, 0, ST_PRECISION_N, "precision")
NAME_AND_PARSE(recompute, StRecompute, RECOMPUTE, 0, ST_RECOMPUTE_N, "recomputation")
NAME_AND_PARSE(recompute_op, StRecomputeOp, RECOMPUTE_OP, 0, ST_RC_N, "recomputed op")
NAME_AND_PARSE(memory_kind, StMemoryKind, MEMKIND, 0, ST_MEMKIND_N, "memory figure")
NAME_AND_PARSE(data, StData, DATA, 0, ST_DATA_N, "data kind")

gboolean
st_recompute_ops_parse(const char *text, unsigned *out, GError **error)
{
  g_auto(GStrv) names = g_strsplit(text != NULL ? text : "", "+", -1);
  unsigned ops = 0;
  for (int i = 0; names[i] != NULL; i++) {
    StRecomputeOp op;
    if (!st_recompute_op_parse(names[i], &op, error))
      return FALSE;
    if ((ops & (1u << op)) != 0) {
      g_set_error(error, ST_BASE_ERROR, ST_ERROR_INVALID, "recomputed op '%s' given twice",
                  names[i]);
      return FALSE;
    }
    ops |= 1u << op;
  }
  if ((ops & (1u << ST_RC_TORCHTITAN)) != 0 && ops != 1u << ST_RC_TORCHTITAN) {
    g_set_error(error, ST_BASE_ERROR, ST_ERROR_INVALID,
                "recomputed ops '%s': torchtitan is a whole policy (what a block keeps), "
                "not an op to join with others", text);
    return FALSE;
  }
  *out = ops;
  return TRUE;
}

char *
st_recompute_ops_format(unsigned ops)
{
  if (ops == 0)
    ops = ST_RC_DEFAULT;
  GString *s = g_string_new(NULL);
  for (int op = 0; op < ST_RC_N; op++)
    if ((ops & (1u << op)) != 0)
      g_string_append_printf(s, "%s%s", s->len > 0 ? "+" : "", RECOMPUTE_OP[op]);
  return g_string_free(s, FALSE);
}

int
st_dtype_bytes(StDtype d)
{
  g_return_val_if_fail(d >= 0 && d < ST_DTYPE_N, 0);
  return DTYPE_BYTES[d];
}

double
st_coll_busbw_factor(StCollKind c, int ranks)
{
  double n = ranks;
  switch (c) {
  case ST_COLL_ALL_REDUCE:
    return ranks > 1 ? 2.0 * (n - 1) / n : 0.0;
  case ST_COLL_REDUCE_SCATTER:
  case ST_COLL_ALL_GATHER:
  case ST_COLL_ALL_TO_ALL:
    return ranks > 1 ? (n - 1) / n : 0.0;
  case ST_COLL_BROADCAST:
  case ST_COLL_REDUCE:
    return 1.0;
  case ST_COLL_RING_SHIFT:
    return ranks > 1 ? 1.0 : 0.0;
  default:
    g_return_val_if_reached(0.0);
  }
}
