/* chakra_import_fields.c: the fields of the op a node becomes (see
 * chakra_import_private.h): a stagger trace's from its stagger_<field>
 * attributes, a foreign trace's made up (chakra_import_foreign.c), and a
 * communication node's communicator, peer, tag and bytes. Every value lies
 * in the range the schedule's reader takes (an index's upper bound is
 * checked once the schedule exists: chakra_import_program.c).
 */
#include "interop/chakra_import_private.h"

#include "base/limits.h"
#include "sched/sched_json_private.h"

/* A name of a stagger_* attribute ("stagger_pass") as its kind. */
static gboolean
parse_name(ImRank *x, guint k, const char *attr, const char *text,
           gboolean (*parse)(const char *, int *, GError **), int *out, GError **error)
{
  GError *local = NULL;
  if (!parse(text, out, &local)) {
    im_node_fail(error, x->f, k, "attribute '%s': %s", attr, local->message);
    g_error_free(local);
    return FALSE;
  }
  return TRUE;
}

static gboolean
parse_pass(const char *text, int *out, GError **error)
{
  StPass v = ST_PASS_INVALID;
  gboolean ok = st_pass_parse(text, &v, error);
  *out = (int)v;
  return ok;
}

static gboolean
parse_copy(const char *text, int *out, GError **error)
{
  StCopyKind v = ST_COPY_INVALID;
  gboolean ok = st_copy_parse(text, &v, error);
  *out = (int)v;
  return ok;
}

static gboolean
parse_data(const char *text, int *out, GError **error)
{
  StData v = ST_DATA_NONE;
  gboolean ok = st_data_parse(text, &v, error);
  *out = (int)v;
  return ok;
}

/* `v` as `what` of node k, in [lo, hi] (the range the schedule's reader
 * takes); FALSE with the error otherwise. */
static gboolean
in_range(ImRank *x, guint k, const char *what, int64_t v, int64_t lo, int64_t hi,
         GError **error)
{
  if (v >= lo && v <= hi)
    return TRUE;
  return im_node_fail(error, x->f, k, "%s: %" G_GINT64_FORMAT " is out of range [%"
                      G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]", what, v, lo, hi);
}

/* The op fields a stagger trace carries as stagger_<field>, in the ranges
 * the schedule's reader takes (an index's upper bound is checked once the
 * schedule exists: chakra_import_program.c). */
static gboolean
stagger_fields(ImRank *x, guint k, StOpKind kind, ImOp *r, GError **error)
{
  const char *pass = NULL, *copy = NULL, *data = NULL;
  if (!im_get_string(x, k, "stagger_pass", &pass, error) ||
      !im_get_string(x, k, "stagger_copy", &copy, error) ||
      !im_get_string(x, k, "stagger_data", &data, error))
    return FALSE;
  int sub = r->op.sub, data_kind = ST_DATA_NONE;
  if (kind == ST_OP_COMP && pass == NULL)
    return im_node_fail(error, x->f, k, "a stagger COMP node needs 'stagger_pass'");
  if (kind == ST_OP_COMP && !parse_name(x, k, "stagger_pass", pass, parse_pass, &sub, error))
    return FALSE;
  if (kind == ST_OP_COPY && copy == NULL)
    return im_node_fail(error, x->f, k, "a stagger copy needs 'stagger_copy'");
  if (kind == ST_OP_COPY && !parse_name(x, k, "stagger_copy", copy, parse_copy, &sub, error))
    return FALSE;
  if (data != NULL && !parse_name(x, k, "stagger_data", data, parse_data, &data_kind, error))
    return FALSE;
  r->op.sub = (uint8_t)sub;
  r->op.data = (uint8_t)data_kind;
  for (guint f = 0; f < ST_N_OP_FIELDS; f++) {
    g_autofree char *name = g_strconcat("stagger_", ST_OP_FIELDS[f].key, NULL);
    int64_t v;
    gboolean present;
    if (!im_get_int(x, k, name, &v, &present, error))
      return FALSE;
    int64_t lo = ST_OP_FIELDS[f].index != INDEX_NONE ? 0 : ST_OP_FIELDS[f].min;
    int64_t hi = ST_OP_FIELDS[f].wide ? ST_MAX_BYTES : G_MAXINT32;
    if (present && !in_range(x, k, name, v, lo, hi, error))
      return FALSE;
    if (present)
      im_op_set(r, f, v);
  }
  int64_t part;
  gboolean has_part;
  if (!im_get_int(x, k, "stagger_part", &part, &has_part, error))
    return FALSE;
  if (has_part && !in_range(x, k, "stagger_part", part, 0, ST_TP_PARTS_MAX, error))
    return FALSE;
  if (has_part && part > 0 && r->op.layer < 0)
    return im_node_fail(error, x->f, k, "stagger_part: a part of a layer's pass needs its "
                        "'stagger_layer'");
  if (has_part)
    r->op.part = (uint8_t)part;
  const EtAttr *samples = im_attr(im_node(x, k), "stagger_samples");
  if (samples != NULL) {
    g_autoptr(GArray) v = NULL;
    if (!et_attr_int_list(samples, &v, NULL) || v->len != 2)
      return im_node_fail(error, x->f, k, "stagger_samples: expected [first, stride]");
    int64_t first = g_array_index(v, int64_t, 0), stride = g_array_index(v, int64_t, 1);
    if (first < 0 || first > G_MAXINT32 || stride < 1 || stride > G_MAXUINT16)
      return im_node_fail(error, x->f, k, "stagger_samples: expected [first, stride], integers "
                          "with first >= 0 and 1 <= stride <= %d", G_MAXUINT16);
    st_op_samples(&r->op, (int)first, (int)stride);
  }
  return TRUE;
}

/* Bytes an op moves, from attribute `what` of node k: at most what the
 * schedule's reader takes. */
static gboolean
set_bytes(ImRank *x, guint k, ImOp *r, const char *what, int64_t bytes, GError **error)
{
  if (!in_range(x, k, what, bytes, 0, ST_MAX_BYTES, error))
    return FALSE;
  im_op_set(r, ST_OP_FIELD_BYTES, bytes);
  return TRUE;
}

/* What a foreign node adds: a COMP node's layer, a copy's direction, bytes. */
static gboolean
foreign_fields(ImRank *x, guint k, StOpKind kind, ImOp *r, GError **error)
{
  const EtNode *n = im_node(x, k);
  int64_t num_ops = 0, tensor_size = 0, cpu = 0;
  if (!im_get_int(x, k, "num_ops", &num_ops, NULL, error) ||
      !im_get_int(x, k, "tensor_size", &tensor_size, NULL, error) ||
      !im_get_int(x, k, "is_cpu_op", &cpu, NULL, error))
    return FALSE;
  if (num_ops < 0 || tensor_size < 0)
    return im_node_fail(error, x->f, k, "num_ops and tensor_size cannot be negative");
  if (kind == ST_OP_COMP) {
    r->op.sub = ST_PASS_FWD;
    im_op_set(r, ST_OP_FIELD_LAYER, im_foreign_layer(x->im, n, num_ops, tensor_size, cpu != 0));
    im_op_set(r, ST_OP_FIELD_BATCH, 1);
    if (n->duration_micros == 0 && num_ops == 0 && tensor_size == 0)
      im_count(x->im->unused, "COMP_NODE with no duration_micros, num_ops or tensor_size "
                              "(costs nothing)");
  } else if (kind == ST_OP_COPY) {
    gboolean load = n->type == CHAKRA_PROTO_MSG__NODE_TYPE__MEM_LOAD_NODE;
    r->op.sub = load ? ST_COPY_H2D : ST_COPY_D2H;
    if (tensor_size > 0 && !set_bytes(x, k, r, "tensor_size", tensor_size, error))
      return FALSE;
  }
  return TRUE;
}

/* comm, peer, tag and bytes of a communication node. */
static gboolean
comm_fields(ImRank *x, guint k, StOpKind kind, gboolean barrier, ImOp *r, GError **error)
{
  const char *pg_name = "";
  int64_t size = 0, src = x->rank, dst = x->rank, tag = 0;
  gboolean has_size = FALSE, has_src = FALSE, has_dst = FALSE;
  if (!im_get_string(x, k, "pg_name", &pg_name, error) ||
      !im_get_int(x, k, "comm_size", &size, &has_size, error) ||
      !im_get_int(x, k, "comm_src", &src, &has_src, error) ||
      !im_get_int(x, k, "comm_dst", &dst, &has_dst, error) ||
      !im_get_int(x, k, "comm_tag", &tag, NULL, error))
    return FALSE;
  PgRef pg;
  if (!im_process_group(x->im, x->rank, k, pg_name, &pg, error))
    return FALSE;
  const cJSON *group = pg.members;
  int members = cJSON_GetArraySize(group);
  im_op_set(r, ST_OP_FIELD_COMM, pg.comm);
  if (!has_size && !barrier && !x->im->stagger)
    return im_node_fail(error, x->f, k, "a %s needs the attribute 'comm_size'",
                        et_node_type_name(im_node(x, k)->type));
  if (size < 0)
    return im_node_fail(error, x->f, k, "comm_size %" G_GINT64_FORMAT " is negative", size);
  if (kind == ST_OP_COMM_COLL) {
    if (r->op.sub == ST_COLL_ALL_GATHER && !x->im->stagger) { /* ASTRA-sim's: each rank's part */
      if ((double)size * members > (double)ST_MAX_BYTES)
        return im_node_fail(error, x->f, k, "comm_size %" G_GINT64_FORMAT " x %d ranks is out of "
                            "range [0, %" G_GINT64_FORMAT "]", size, members, ST_MAX_BYTES);
      size *= members;
    }
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
    im_op_set(r, ST_OP_FIELD_PEER, index);
    if (tag != 0 && !in_range(x, k, "comm_tag", tag, G_MININT32, G_MAXINT32, error))
      return FALSE;
    if (tag != 0)
      im_op_set(r, ST_OP_FIELD_TAG, tag);
  }
  if (!x->im->stagger && size > 0 && !set_bytes(x, k, r, "comm_size", size, error))
    return FALSE;
  return TRUE;
}

gboolean
im_op_fields(ImRank *x, guint k, StOpKind kind, gboolean barrier, ImOp *r, GError **error)
{
  gboolean ok = x->im->stagger ? stagger_fields(x, k, kind, r, error)
                               : foreign_fields(x, k, kind, r, error);
  if (ok && kind != ST_OP_COMP && kind != ST_OP_COPY)
    ok = comm_fields(x, k, kind, barrier, r, error);
  return ok;
}
