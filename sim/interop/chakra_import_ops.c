/* chakra_import_ops.c: one rank's trace file -> its program's ops (see
 * chakra_import_private.h).
 *
 * Order. Nodes become ops dependencies first, in file order otherwise (an
 * iterative depth-first walk over data_deps and ctrl_deps), so a file that
 * is already in order, as stagger writes them, keeps its order exactly; a
 * dependency on an id the file lacks, or a cycle, is an error. Ops of one
 * stream run in that order.
 *
 * Dependencies. An op waits for its data_deps and its ctrl_deps, except a
 * ctrl_dep on its stream predecessor, which the stream's order implies (the
 * exporter writes each op's stream predecessor as its ctrl_dep). A node
 * stagger does not simulate is contracted: its dependents wait for what it
 * waited for. Memory effects: chakra_import_memory.c.
 */
#include "interop/chakra_import_private.h"

#include <inttypes.h>
#include <string.h>

#include "base/error.h"

static void
free_garray(gpointer p)
{
  if (p != NULL)
    g_array_unref(p);
}

gboolean
im_get_int(const ImRank *x, guint k, const char *name, int64_t *out, gboolean *present,
           GError **error)
{
  const EtAttr *a = im_attr(im_node(x, k), name);
  if (present != NULL)
    *present = a != NULL;
  if (a == NULL)
    return TRUE;
  GError *local = NULL;
  if (!et_attr_int(a, out, &local)) {
    im_node_fail(error, x->f, k, "%s", local->message);
    g_error_free(local);
    return FALSE;
  }
  return TRUE;
}

gboolean
im_get_string(const ImRank *x, guint k, const char *name, const char **out, GError **error)
{
  const EtAttr *a = im_attr(im_node(x, k), name);
  if (a == NULL)
    return TRUE;
  GError *local = NULL;
  if (!et_attr_string(a, out, &local)) {
    im_node_fail(error, x->f, k, "%s", local->message);
    g_error_free(local);
    return FALSE;
  }
  return TRUE;
}

/* ---- order ---------------------------------------------------------------------- */

/* The position of the node of id `id` + 1, 0 when the file has none. */
static guint
position_of(const ImRank *x, uint64_t id)
{
  if (x->pos_of == NULL)
    return id - x->first_id < x->n ? (guint)(id - x->first_id) + 1 : 0;
  return GPOINTER_TO_UINT(g_hash_table_lookup(x->pos_of, &id));
}

static gboolean
dep_position(const ImRank *x, guint k, uint64_t id, guint *out, GError **error)
{
  guint v = position_of(x, id);
  if (v == 0)
    return im_node_fail(error, x->f, k, "depends on node %" PRIu64 ", which this file does not "
                        "have (a dangling dependency)", id);
  *out = v - 1;
  return TRUE;
}

static uint64_t
dep_id(const EtNode *n, size_t c)
{
  return c < n->n_data_deps ? n->data_deps[c] : n->ctrl_deps[c - n->n_data_deps];
}

static gboolean
order_nodes(ImRank *x, GError **error)
{
  g_autofree guint8 *state = g_new0(guint8, MAX(x->n, 1)); /* 0 new, 1 on the path, 2 done */
  g_autofree size_t *cursor = g_new0(size_t, MAX(x->n, 1));
  g_autoptr(GArray) stack = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint s = 0; s < x->n; s++) {
    if (state[s] != 0)
      continue;
    state[s] = 1;
    g_array_append_val(stack, s);
    while (stack->len > 0) {
      guint t = g_array_index(stack, guint, stack->len - 1);
      const EtNode *n = im_node(x, t);
      gboolean pushed = FALSE;
      while (!pushed && cursor[t] < n->n_data_deps + n->n_ctrl_deps) {
        guint d;
        if (!dep_position(x, t, dep_id(n, cursor[t]++), &d, error))
          return FALSE;
        if (state[d] == 1)
          return im_node_fail(error, x->f, t, "is in a dependency cycle (it waits for node "
                              "%" PRIu64 ", which waits for it)", im_node(x, d)->id);
        if (state[d] == 0) {
          state[d] = 1;
          g_array_append_val(stack, d);
          pushed = TRUE;
        }
      }
      if (!pushed) {
        state[t] = 2;
        g_array_set_size(stack, stack->len - 1);
        g_array_append_val(x->order, t);
      }
    }
  }
  return TRUE;
}

/* ---- what a node is ------------------------------------------------------------- */

/* Whether attribute `name` means something to stagger on a node of `type`. */
static gboolean
attr_used(const Import *im, int type, const char *name)
{
  static const char *const common[] = {"is_cpu_op", "stream", "inputs", "outputs", NULL};
  static const char *const comp[] = {"num_ops", "tensor_size", NULL};
  static const char *const coll[] = {"comm_type", "comm_size", "pg_name", NULL};
  static const char *const p2p[] = {"comm_src", "comm_dst", "comm_tag", "comm_size", "pg_name",
                                    NULL};
  static const char *const mem[] = {"tensor_size", NULL};
  if (g_strv_contains(common, name) || (im->stagger && g_str_has_prefix(name, "stagger_")))
    return TRUE;
  switch (type) {
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE: return g_strv_contains(comp, name);
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE: return g_strv_contains(coll, name);
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE:
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE: return g_strv_contains(p2p, name);
  default: return g_strv_contains(mem, name);
  }
}

static void
count_unused(const ImRank *x, const EtNode *n)
{
  Import *im = x->im;
  for (size_t i = 0; i < n->n_attr; i++)
    if (!attr_used(im, n->type, n->attr[i]->name)) {
      g_autofree char *what = g_strdup_printf("attribute '%s'", n->attr[i]->name);
      im_count(im->unused, what);
    }
  if (n->start_time_micros != 0)
    im_count(im->unused, "field start_time_micros");
  if (n->inputs != NULL && n->inputs->values != NULL && *n->inputs->values != '\0')
    im_count(im->unused, "field inputs (IOInfo)");
  if (n->outputs != NULL && n->outputs->values != NULL && *n->outputs->values != '\0')
    im_count(im->unused, "field outputs (IOInfo)");
  if (!im->stagger && n->type != CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE &&
      n->duration_micros != 0)
    im_count(im->unused, "duration_micros of a communication or memory node (the network "
                         "model costs it)");
}

/* The stream of node k: stagger's index, or a foreign trace's by its
 * "stream" attribute, else where it runs. */
static gboolean
node_stream(ImRank *x, guint k, StOpKind kind, int *out, GError **error)
{
  int64_t stream = 0, cpu = 0;
  gboolean has_stream = FALSE;
  if (!im_get_int(x, k, "stream", &stream, &has_stream, error) ||
      !im_get_int(x, k, "is_cpu_op", &cpu, NULL, error))
    return FALSE;
  if (x->im->stagger) {
    if (!has_stream || stream < 0 || stream >= x->n_streams)
      return im_node_fail(error, x->f, k, "attribute 'stream': expected a stream of its program "
                          "(0 to %d)", x->n_streams - 1);
    *out = (int)stream;
    return TRUE;
  }
  g_autofree char *name =
    has_stream ? g_strdup_printf("stream %" G_GINT64_FORMAT, stream)
    : cpu      ? g_strdup("cpu")
    : g_strdup(kind == ST_OP_COMP ? "compute" : kind == ST_OP_COPY ? "memory" : "comm");
  gpointer v = g_hash_table_lookup(x->stream_of, name);
  if (v == NULL) {
    GPtrArray *streams = x->p->streams;
    if (streams->len >= G_MAXUINT16) /* the schedule's reader's bound */
      return im_node_fail(error, x->f, k, "more than %d streams", G_MAXUINT16 - 1);
    g_ptr_array_add(streams, g_strdup(name));
    v = GUINT_TO_POINTER(streams->len);
    g_hash_table_insert(x->stream_of, g_steal_pointer(&name), v);
  }
  *out = GPOINTER_TO_INT(v) - 1;
  return TRUE;
}

/* The op kind of a node, or INVALID (with what to count) when it is
 * contracted. `coll` gets a collective's kind. */
static gboolean
node_kind(ImRank *x, guint k, StOpKind *kind, StCollKind *coll, gboolean *barrier,
          GError **error)
{
  const EtNode *n = im_node(x, k);
  *kind = ST_OP_INVALID;
  *barrier = FALSE;
  switch (n->type) {
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE: *kind = ST_OP_COMP; return TRUE;
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE: *kind = ST_OP_COMM_SEND; return TRUE;
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE: *kind = ST_OP_COMM_RECV; return TRUE;
  case CHAKRA_PROTO_MSG__NODE_TYPE__MEM_LOAD_NODE:
  case CHAKRA_PROTO_MSG__NODE_TYPE__MEM_STORE_NODE: *kind = ST_OP_COPY; return TRUE;
  case CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE: break;
  default:
    im_count(x->im->skipped, et_node_type_name(n->type));
    return TRUE;
  }
  int64_t type = 0;
  gboolean present = FALSE;
  if (!im_get_int(x, k, "comm_type", &type, &present, error))
    return FALSE;
  if (!present)
    return im_node_fail(error, x->f, k, "a COMM_COLL_NODE needs the attribute 'comm_type'");
  const char *chakra = et_comm_type_name((int)type);
  g_autofree char *name = g_ascii_strdown(chakra, -1);
  if (strcmp(name, "reduce_scatter_block") == 0)
    name[strlen("reduce_scatter")] = '\0';
  if (strcmp(name, "barrier") == 0) { /* a synchronization: an empty all-reduce */
    *barrier = TRUE;
    g_free(name);
    name = g_strdup("all_reduce");
  }
  if (!st_coll_parse(name, coll, NULL)) {
    g_autofree char *what = g_strdup_printf("COMM_COLL_NODE %s", chakra);
    im_count(x->im->skipped, what);
    return TRUE;
  }
  *kind = ST_OP_COMM_COLL;
  return TRUE;
}

/* ---- the op ----------------------------------------------------------------------- */

/* Whether `deps` holds op: a walk while they are few (most nodes wait for
 * one or two; a hash set per node was a fifth of the allocations), a set
 * made once they are many. */
#define FEW_DEPS 16

static gboolean
has_dep(const GArray *deps, GHashTable **seen, int32_t op)
{
  if (*seen == NULL && deps->len <= FEW_DEPS) {
    for (guint i = 0; i < deps->len; i++)
      if (g_array_index(deps, int32_t, i) == op)
        return TRUE;
    return FALSE;
  }
  if (*seen == NULL) {
    *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (guint i = 0; i < deps->len; i++)
      g_hash_table_add(*seen, GINT_TO_POINTER(g_array_index(deps, int32_t, i) + 1));
  }
  return g_hash_table_contains(*seen, GINT_TO_POINTER(op + 1));
}

/* Resolves node k's dependencies (data_deps, then ctrl_deps other than
 * `pred`) into ops, without repeats. */
static GArray *
resolve_deps(const ImRank *x, guint k, int32_t pred)
{
  const EtNode *n = im_node(x, k);
  GArray *deps = g_array_new(FALSE, FALSE, sizeof(int32_t));
  g_autoptr(GHashTable) seen = NULL;
  for (size_t c = 0; c < n->n_data_deps + n->n_ctrl_deps; c++) {
    guint d = position_of(x, dep_id(n, c)) - 1;
    const int32_t *ops = x->op_of[d] >= 0 ? &x->op_of[d] : (const int32_t *)x->through[d]->data;
    guint m = x->op_of[d] >= 0 ? 1 : x->through[d]->len;
    for (guint i = 0; i < m; i++) {
      if ((c >= n->n_data_deps && ops[i] == pred) || has_dep(deps, &seen, ops[i]))
        continue;
      if (seen != NULL)
        g_hash_table_add(seen, GINT_TO_POINTER(ops[i] + 1));
      g_array_append_val(deps, ops[i]);
    }
  }
  return deps;
}

/* stagger_prev_deps: dependencies on ops of the previous step, as node
 * positions (fix_prev_deps makes them ops). */
static gboolean
prev_deps(ImRank *x, guint k, GError **error)
{
  const EtAttr *a = im_attr(im_node(x, k), "stagger_prev_deps");
  if (a == NULL)
    return TRUE;
  g_autoptr(GArray) ids = NULL;
  GError *local = NULL;
  if (!et_attr_int_list(a, &ids, &local)) {
    im_node_fail(error, x->f, k, "%s", local->message);
    g_error_free(local);
    return FALSE;
  }
  for (guint i = 0; i < ids->len; i++) {
    guint d = 0;
    if (!dep_position(x, k, (uint64_t)g_array_index(ids, int64_t, i), &d, error))
      return FALSE;
    int32_t position = (int32_t)d;
    g_array_append_val(x->p->prev, position);
  }
  ImOp *r = &g_array_index(x->p->ops, ImOp, x->p->ops->len - 1);
  r->n_prev = x->p->prev->len - r->prev_first;
  return TRUE;
}

/* ---- one node, one rank ---------------------------------------------------------------- */

static gboolean
node_op(ImRank *x, guint k, GError **error)
{
  const EtNode *n = im_node(x, k);
  StOpKind kind;
  StCollKind coll = ST_COLL_INVALID;
  gboolean barrier;
  x->im->n_nodes++;
  if (!node_kind(x, k, &kind, &coll, &barrier, error))
    return FALSE;
  if (kind == ST_OP_INVALID) { /* contracted: its dependents wait for what it waits for */
    x->op_of[k] = -1;
    x->through[k] = resolve_deps(x, k, -1);
    return TRUE;
  }
  int stream = 0;
  if (!node_stream(x, k, kind, &stream, error))
    return FALSE;
  ImProgram *p = x->p;
  int32_t op_index = (int32_t)p->ops->len, none = -1;
  while ((guint)stream >= x->last->len)
    g_array_append_val(x->last, none);
  int32_t pred = g_array_index(x->last, int32_t, stream);
  g_autoptr(GArray) deps = resolve_deps(x, k, pred);
  ImOp *r = im_program_add_op(p, k, kind, kind == ST_OP_COMM_COLL ? (int)coll : 0, stream);
  x->op_of[k] = op_index;
  if (!im_op_fields(x, k, kind, barrier, r, error))
    return FALSE;
  r->dep_first = p->deps->len;
  r->n_deps = deps->len;
  g_array_append_vals(p->deps, deps->data, deps->len);
  r->prev_first = p->prev->len;
  if (!prev_deps(x, k, error) || !im_node_memory(x, k, op_index, error))
    return FALSE;
  if (pred >= 0)
    g_array_append_val(deps, pred);
  g_ptr_array_add(x->op_deps, g_steal_pointer(&deps));
  g_array_index(x->last, int32_t, stream) = op_index;
  count_unused(x, n);
  return TRUE;
}

/* Previous-step dependencies were noted as node positions: now that every
 * node has its op, they become op indices. */
static gboolean
fix_prev_deps(ImRank *x, GError **error)
{
  ImProgram *p = x->p;
  for (guint i = 0; i < p->ops->len; i++) {
    const ImOp *r = &g_array_index(p->ops, ImOp, i);
    for (uint32_t j = 0; j < r->n_prev; j++) {
      int32_t *d = &g_array_index(p->prev, int32_t, r->prev_first + j);
      if (x->op_of[*d] < 0)
        return im_node_fail(error, x->f, r->node, "stagger_prev_deps names node %" PRIu64 ", "
                            "which is not an op", im_node(x, (guint)*d)->id);
      *d = x->op_of[*d];
    }
  }
  return TRUE;
}

static void
rank_clear(ImRank *x)
{
  g_clear_pointer(&x->pos_of, g_hash_table_unref);
  g_clear_pointer(&x->order, g_array_unref);
  for (guint k = 0; x->through != NULL && k < x->n; k++)
    free_garray(x->through[k]);
  g_clear_pointer(&x->through, g_free);
  g_clear_pointer(&x->op_of, g_free);
  g_clear_pointer(&x->last, g_array_unref);
  g_clear_pointer(&x->stream_of, g_hash_table_unref);
  g_clear_pointer(&x->op_deps, g_ptr_array_unref);
  g_clear_pointer(&x->tensor_of, g_hash_table_unref);
  g_clear_pointer(&x->tensors, g_ptr_array_unref);
  g_clear_pointer(&x->buffer_items, g_ptr_array_unref);
}

/* The program's parts a stagger trace carries in its metadata. */
static cJSON *
stagger_program(Import *im, int rank, GError **error)
{
  const EtFile *f = im->files[rank];
  const EtAttr *a = et_attr_find(f->meta->attr, f->meta->n_attr, "stagger_program");
  const char *text = NULL;
  if (a == NULL || !et_attr_string(a, &text, NULL)) {
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID,
                "%s: the global metadata lacks 'stagger_program' (rank 0's file says stagger "
                "wrote this trace)", f->path);
    return NULL;
  }
  cJSON *program = cJSON_Parse(text);
  if (!cJSON_IsObject(program) || !cJSON_IsArray(cJSON_GetObjectItem(program, "streams")) ||
      !cJSON_IsArray(cJSON_GetObjectItem(program, "buffers"))) {
    cJSON_Delete(program);
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_PARSE,
                "%s: 'stagger_program' is not a program's JSON", f->path);
    return NULL;
  }
  return program;
}

ImProgram *
im_rank_program(Import *im, int rank, GError **error)
{
  ImRank x = {.im = im, .rank = rank, .f = im->files[rank]};
  x.n = x.f->nodes->len;
  g_autoptr(ImProgram) p = im_program_new(rank);
  x.p = p;
  x.buffer_items = g_ptr_array_new();
  if (im->stagger) {
    p->head = stagger_program(im, rank, error);
    if (p->head == NULL) {
      rank_clear(&x);
      return NULL;
    }
    x.n_streams = cJSON_GetArraySize(cJSON_GetObjectItem(p->head, "streams"));
    cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(p->head, "buffers"))
      g_ptr_array_add(x.buffer_items, item);
  } else {
    p->name = g_strdup("rank");
  }
  x.order = g_array_new(FALSE, FALSE, sizeof(guint));
  x.op_of = g_new(int32_t, MAX(x.n, 1));
  for (guint k = 0; k < x.n; k++)
    x.op_of[k] = -1;
  x.through = g_new0(GArray *, MAX(x.n, 1));
  x.last = g_array_new(FALSE, FALSE, sizeof(int32_t));
  x.stream_of = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  x.op_deps = g_ptr_array_new_with_free_func(free_garray);
  x.tensor_of = g_hash_table_new(g_str_hash, g_str_equal);
  x.tensors = g_ptr_array_new_with_free_func(im_tensor_free);
  int32_t none = -1;
  for (int s = 0; s < x.n_streams; s++)
    g_array_append_val(x.last, none);

  gboolean ok = TRUE;
  /* Ids counting up by one from the first node's (what exporters write)
   * find their node by subtraction; any others through a table (10^6
   * entries for a trace of 10^6 nodes). */
  x.first_id = x.n > 0 ? ((EtNode *)g_ptr_array_index(x.f->nodes, 0))->id : 0;
  gboolean dense = TRUE;
  for (guint k = 0; dense && k < x.n; k++)
    dense = ((EtNode *)g_ptr_array_index(x.f->nodes, k))->id == x.first_id + k;
  if (!dense)
    x.pos_of = g_hash_table_new(g_int64_hash, g_int64_equal);
  for (guint k = 0; ok && !dense && k < x.n; k++) {
    EtNode *n = g_ptr_array_index(x.f->nodes, k);
    guint previous = GPOINTER_TO_UINT(g_hash_table_lookup(x.pos_of, &n->id));
    if (previous != 0)
      ok = im_node_fail(error, x.f, k, "repeats the id of node #%u", previous - 1);
    g_hash_table_insert(x.pos_of, &n->id, GUINT_TO_POINTER(k + 1));
  }
  ok = ok && order_nodes(&x, error);
  for (guint i = 0; ok && i < x.order->len; i++)
    ok = node_op(&x, g_array_index(x.order, guint, i), error);
  ok = ok && fix_prev_deps(&x, error);
  if (ok) {
    if (!im->stagger)
      im_foreign_buffers(&x);
    im->n_ops += p->ops->len;
  }
  rank_clear(&x);
  return ok ? g_steal_pointer(&p) : NULL;
}
