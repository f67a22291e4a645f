/* chakra_import_ops.c: one rank's trace file -> its program's JSON (see
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
#include "base/json.h"
#include "sched/sched_json_private.h"

static void
free_garray(gpointer p)
{
  if (p != NULL)
    g_array_unref(p);
}

static gboolean
get_int(const ImRank *x, guint k, const char *name, int64_t *out, gboolean *present,
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

static gboolean
get_string(const ImRank *x, guint k, const char *name, const char **out, GError **error)
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

static gboolean
dep_position(const ImRank *x, guint k, uint64_t id, guint *out, GError **error)
{
  gpointer v = g_hash_table_lookup(x->pos_of, &id);
  if (v == NULL)
    return im_node_fail(error, x->f, k, "depends on node %" PRIu64 ", which this file does not "
                        "have (a dangling dependency)", id);
  *out = GPOINTER_TO_UINT(v) - 1;
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
  if (!get_int(x, k, "stream", &stream, &has_stream, error) ||
      !get_int(x, k, "is_cpu_op", &cpu, NULL, error))
    return FALSE;
  if (x->im->stagger) {
    if (!has_stream || stream < 0 || stream >= cJSON_GetArraySize(x->streams))
      return im_node_fail(error, x->f, k, "attribute 'stream': expected a stream of its program "
                          "(0 to %d)", cJSON_GetArraySize(x->streams) - 1);
    *out = (int)stream;
    return TRUE;
  }
  g_autofree char *name =
    has_stream ? g_strdup_printf("stream %" G_GINT64_FORMAT, stream)
    : cpu      ? g_strdup("cpu")
    : g_strdup(kind == ST_OP_COMP ? "compute" : kind == ST_OP_COPY ? "memory" : "comm");
  gpointer v = g_hash_table_lookup(x->stream_of, name);
  if (v == NULL) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "name", name);
    st_json_add_int(s, "priority", 0);
    cJSON_AddItemToArray(x->streams, s);
    v = GINT_TO_POINTER(cJSON_GetArraySize(x->streams));
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
  if (!get_int(x, k, "comm_type", &type, &present, error))
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

/* Resolves node k's dependencies (data_deps, then ctrl_deps other than
 * `pred`) into ops, without repeats. */
static GArray *
resolve_deps(const ImRank *x, guint k, int32_t pred)
{
  const EtNode *n = im_node(x, k);
  GArray *deps = g_array_new(FALSE, FALSE, sizeof(int32_t));
  g_autoptr(GHashTable) seen = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (size_t c = 0; c < n->n_data_deps + n->n_ctrl_deps; c++) {
    guint d = GPOINTER_TO_UINT(g_hash_table_lookup(x->pos_of, &(uint64_t){dep_id(n, c)})) - 1;
    const int32_t *ops = x->op_of[d] >= 0 ? &x->op_of[d] : (const int32_t *)x->through[d]->data;
    guint m = x->op_of[d] >= 0 ? 1 : x->through[d]->len;
    for (guint i = 0; i < m; i++) {
      if ((c >= n->n_data_deps && ops[i] == pred) ||
          g_hash_table_contains(seen, GINT_TO_POINTER(ops[i] + 1)))
        continue;
      g_hash_table_add(seen, GINT_TO_POINTER(ops[i] + 1));
      g_array_append_val(deps, ops[i]);
    }
  }
  return deps;
}

/* stagger_prev_deps: dependencies on ops of the previous step. */
static gboolean
prev_deps(ImRank *x, guint k, cJSON *deps, GError **error)
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
    /* The op may come later in the program: it is filled in at the end. */
    cJSON *pair = cJSON_CreateArray();
    cJSON_AddItemToArray(pair, cJSON_CreateNumber(d));
    cJSON_AddItemToArray(pair, cJSON_CreateNumber(-1));
    cJSON_AddItemToArray(deps, pair);
  }
  return TRUE;
}

/* The op fields a stagger trace carries as stagger_<field>. */
static gboolean
stagger_fields(ImRank *x, guint k, StOpKind kind, cJSON *op, GError **error)
{
  const char *pass = NULL, *copy = NULL, *data = NULL;
  if (!get_string(x, k, "stagger_pass", &pass, error) ||
      !get_string(x, k, "stagger_copy", &copy, error) ||
      !get_string(x, k, "stagger_data", &data, error))
    return FALSE;
  if (kind == ST_OP_COMP && pass == NULL)
    return im_node_fail(error, x->f, k, "a stagger COMP node needs 'stagger_pass'");
  if (kind == ST_OP_COMP)
    cJSON_AddStringToObject(op, "pass", pass);
  if (kind == ST_OP_COPY && copy == NULL)
    return im_node_fail(error, x->f, k, "a stagger copy needs 'stagger_copy'");
  if (kind == ST_OP_COPY)
    cJSON_AddStringToObject(op, "copy", copy);
  if (data != NULL)
    cJSON_AddStringToObject(op, "data", data);
  for (guint f = 0; f < ST_N_OP_FIELDS; f++) {
    g_autofree char *name = g_strconcat("stagger_", ST_OP_FIELDS[f].key, NULL);
    int64_t v;
    gboolean present;
    if (!get_int(x, k, name, &v, &present, error))
      return FALSE;
    if (present)
      st_json_add_int(op, ST_OP_FIELDS[f].key, v);
  }
  int64_t part;
  gboolean has_part;
  if (!get_int(x, k, "stagger_part", &part, &has_part, error))
    return FALSE;
  if (has_part)
    st_json_add_int(op, "part", part);
  const EtAttr *samples = im_attr(im_node(x, k), "stagger_samples");
  if (samples != NULL) {
    g_autoptr(GArray) v = NULL;
    if (!et_attr_int_list(samples, &v, NULL) || v->len != 2)
      return im_node_fail(error, x->f, k, "stagger_samples: expected [first, stride]");
    cJSON *a = cJSON_AddArrayToObject(op, "samples");
    for (guint i = 0; i < 2; i++)
      cJSON_AddItemToArray(a, cJSON_CreateNumber((double)g_array_index(v, int64_t, i)));
  }
  return TRUE;
}

/* What a foreign node adds: a COMP node's layer, a copy's direction, bytes. */
static gboolean
foreign_fields(ImRank *x, guint k, StOpKind kind, cJSON *op, GError **error)
{
  const EtNode *n = im_node(x, k);
  int64_t num_ops = 0, tensor_size = 0, cpu = 0;
  if (!get_int(x, k, "num_ops", &num_ops, NULL, error) ||
      !get_int(x, k, "tensor_size", &tensor_size, NULL, error) ||
      !get_int(x, k, "is_cpu_op", &cpu, NULL, error))
    return FALSE;
  if (num_ops < 0 || tensor_size < 0)
    return im_node_fail(error, x->f, k, "num_ops and tensor_size cannot be negative");
  if (kind == ST_OP_COMP) {
    cJSON_AddStringToObject(op, "pass", "fwd");
    st_json_add_int(op, "layer", im_foreign_layer(x->im, n, num_ops, tensor_size, cpu != 0));
    st_json_add_int(op, "batch", 1);
    if (n->duration_micros == 0 && num_ops == 0 && tensor_size == 0)
      im_count(x->im->unused, "COMP_NODE with no duration_micros, num_ops or tensor_size "
                              "(costs nothing)");
  } else if (kind == ST_OP_COPY) {
    gboolean load = n->type == CHAKRA_PROTO_MSG__NODE_TYPE__MEM_LOAD_NODE;
    cJSON_AddStringToObject(op, "copy", load ? "h2d" : "d2h");
    if (tensor_size > 0)
      st_json_add_int(op, "bytes", tensor_size);
  }
  return TRUE;
}

/* comm, peer, tag and bytes of a communication node. */
static gboolean
comm_fields(ImRank *x, guint k, StOpKind kind, gboolean barrier, cJSON *op, GError **error)
{
  const char *pg_name = "";
  int64_t size = 0, src = x->rank, dst = x->rank, tag = 0;
  gboolean has_size = FALSE, has_src = FALSE, has_dst = FALSE;
  if (!get_string(x, k, "pg_name", &pg_name, error) ||
      !get_int(x, k, "comm_size", &size, &has_size, error) ||
      !get_int(x, k, "comm_src", &src, &has_src, error) ||
      !get_int(x, k, "comm_dst", &dst, &has_dst, error) ||
      !get_int(x, k, "comm_tag", &tag, NULL, error))
    return FALSE;
  PgRef pg;
  if (!im_process_group(x->im, x->rank, k, pg_name, &pg, error))
    return FALSE;
  const cJSON *group = pg.members;
  int members = cJSON_GetArraySize(group);
  st_json_add_int(op, "comm", pg.comm);
  if (!has_size && !barrier && !x->im->stagger)
    return im_node_fail(error, x->f, k, "a %s needs the attribute 'comm_size'",
                        et_node_type_name(im_node(x, k)->type));
  if (size < 0)
    return im_node_fail(error, x->f, k, "comm_size %" G_GINT64_FORMAT " is negative", size);
  if (kind == ST_OP_COMM_COLL) {
    StCollKind coll = ST_COLL_INVALID;
    st_coll_parse(cJSON_GetStringValue(cJSON_GetObjectItem(op, "collective")), &coll, NULL);
    if (coll == ST_COLL_ALL_GATHER) /* ASTRA-sim's size: each rank's part */
      size *= members;
  } else {
    gboolean send = kind == ST_OP_COMM_SEND;
    int64_t self = send ? src : dst, peer = send ? dst : src;
    if (send ? !has_dst : !has_src)
      return im_node_fail(error, x->f, k, "a %s needs the attribute '%s'",
                          send ? "COMM_SEND_NODE" : "COMM_RECV_NODE",
                          send ? "comm_dst" : "comm_src");
    if (self != x->rank)
      return im_node_fail(error, x->f, k, "%s is %" G_GINT64_FORMAT ", but this is rank %d's "
                          "file", send ? "comm_src" : "comm_dst", self, x->rank);
    int index = -1, m = 0; /* the last match, as before; walked once, not indexed */
    const cJSON *member;
    cJSON_ArrayForEach(member, group)
    {
      if (member->valueint == peer)
        index = m;
      m++;
    }
    if (index < 0)
      return im_node_fail(error, x->f, k, "peer rank %" G_GINT64_FORMAT " is not in process "
                          "group '%s'", peer, *pg_name != '\0' ? pg_name : "0");
    st_json_add_int(op, "peer", index);
    if (tag != 0)
      st_json_add_int(op, "tag", tag);
  }
  if (!x->im->stagger && size > 0)
    st_json_add_int(op, "bytes", size);
  return TRUE;
}

/* ---- one node, one rank ---------------------------------------------------------------- */

static gboolean
node_op(ImRank *x, guint k, cJSON *ops, GError **error)
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
  int stream;
  if (!node_stream(x, k, kind, &stream, error))
    return FALSE;
  int32_t op_index = (int32_t)x->ops->len, none = -1;
  while ((guint)stream >= x->last->len)
    g_array_append_val(x->last, none);
  int32_t pred = g_array_index(x->last, int32_t, stream);
  g_autoptr(GArray) deps = resolve_deps(x, k, pred);
  cJSON *op = cJSON_CreateObject();
  cJSON_AddItemToArray(ops, op);
  g_ptr_array_add(x->ops, op);
  x->op_of[k] = op_index;
  cJSON_AddStringToObject(op, "kind", st_op_kind_name(kind));
  if (kind == ST_OP_COMM_COLL)
    cJSON_AddStringToObject(op, "collective", st_coll_name(coll));
  st_json_add_int(op, "stream", stream);
  gboolean ok = x->im->stagger ? stagger_fields(x, k, kind, op, error)
                               : foreign_fields(x, k, kind, op, error);
  if (ok && kind != ST_OP_COMP && kind != ST_OP_COPY)
    ok = comm_fields(x, k, kind, barrier, op, error);
  if (!ok)
    return FALSE;
  cJSON *dj = cJSON_AddArrayToObject(op, "deps");
  for (guint i = 0; i < deps->len; i++)
    cJSON_AddItemToArray(dj, cJSON_CreateNumber(g_array_index(deps, int32_t, i)));
  if (!prev_deps(x, k, dj, error) || !im_node_memory(x, k, op_index, op, error))
    return FALSE;
  if (pred >= 0)
    g_array_append_val(deps, pred);
  g_ptr_array_add(x->op_deps, g_steal_pointer(&deps));
  g_array_index(x->last, int32_t, stream) = op_index;
  count_unused(x, n);
  return TRUE;
}

/* Previous-step dependencies were written as node positions: now that
 * every node has its op, they become op indices. */
static gboolean
fix_prev_deps(ImRank *x, GError **error)
{
  for (guint i = 0; i < x->order->len; i++) {
    guint k = g_array_index(x->order, guint, i);
    if (x->op_of[k] < 0)
      continue;
    cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItem(g_ptr_array_index(x->ops, x->op_of[k]), "deps"))
    {
      if (!cJSON_IsArray(item))
        continue;
      guint d = (guint)item->child->valuedouble;
      if (x->op_of[d] < 0)
        return im_node_fail(error, x->f, k, "stagger_prev_deps names node %" PRIu64 ", which "
                            "is not an op", im_node(x, d)->id);
      cJSON_SetNumberValue(item->child, x->op_of[d]);
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
  g_clear_pointer(&x->ops, g_ptr_array_unref);
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

cJSON *
im_rank_program(Import *im, int rank, GError **error)
{
  ImRank x = {.im = im, .rank = rank, .f = im->files[rank]};
  x.n = x.f->nodes->len;
  g_autoptr(cJSON) program = NULL;
  if (im->stagger) {
    program = stagger_program(im, rank, error);
    if (program == NULL)
      return NULL;
  } else {
    program = cJSON_CreateObject();
    cJSON_AddStringToObject(program, "name", "rank");
    cJSON_AddArrayToObject(program, "streams");
    cJSON_AddArrayToObject(program, "buffers");
    cJSON_AddArrayToObject(program, "labels");
  }
  x.streams = cJSON_GetObjectItem(program, "streams");
  x.buffers = cJSON_GetObjectItem(program, "buffers");
  x.buffer_items = g_ptr_array_new();
  cJSON *item;
  cJSON_ArrayForEach(item, x.buffers)
    g_ptr_array_add(x.buffer_items, item);
  cJSON *ops = cJSON_AddArrayToObject(program, "ops");
  x.pos_of = g_hash_table_new(g_int64_hash, g_int64_equal);
  x.order = g_array_new(FALSE, FALSE, sizeof(guint));
  x.op_of = g_new(int32_t, MAX(x.n, 1));
  for (guint k = 0; k < x.n; k++)
    x.op_of[k] = -1;
  x.through = g_new0(GArray *, MAX(x.n, 1));
  x.ops = g_ptr_array_new();
  x.last = g_array_new(FALSE, FALSE, sizeof(int32_t));
  x.stream_of = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  x.op_deps = g_ptr_array_new_with_free_func(free_garray);
  x.tensor_of = g_hash_table_new(g_str_hash, g_str_equal);
  x.tensors = g_ptr_array_new_with_free_func(im_tensor_free);
  int32_t none = -1;
  for (int s = 0; s < cJSON_GetArraySize(x.streams); s++)
    g_array_append_val(x.last, none);

  gboolean ok = TRUE;
  for (guint k = 0; ok && k < x.n; k++) {
    EtNode *n = g_ptr_array_index(x.f->nodes, k);
    guint previous = GPOINTER_TO_UINT(g_hash_table_lookup(x.pos_of, &n->id));
    if (previous != 0)
      ok = im_node_fail(error, x.f, k, "repeats the id of node #%u", previous - 1);
    g_hash_table_insert(x.pos_of, &n->id, GUINT_TO_POINTER(k + 1));
  }
  ok = ok && order_nodes(&x, error);
  for (guint i = 0; ok && i < x.order->len; i++)
    ok = node_op(&x, g_array_index(x.order, guint, i), ops, error);
  ok = ok && fix_prev_deps(&x, error);
  if (ok) {
    if (!im->stagger)
      im_foreign_buffers(&x);
    im->n_ops += x.ops->len;
  }
  rank_clear(&x);
  return ok ? g_steal_pointer(&program) : NULL;
}
