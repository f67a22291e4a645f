/* chakra_export.c: a Schedule as Chakra execution traces (chakra.h; the
 * mapping in docs/INTEROP.md).
 *
 * Every rank's file holds one training step of its program, node id = op
 * index. A communicator's group g is process group pg_base[c] + g; ids run
 * from 1 over the communicators in order (ASTRA-sim reads "" and "0" as
 * "every rank", so 0 is never used).
 *
 * What ASTRA-sim reads is written in its attributes' own types, as Chakra's
 * converters write them: comm_type, comm_size, num_ops as int64_val;
 * comm_src, comm_dst, comm_tag as int32_val; tensor_size as uint64_val;
 * is_cpu_op as bool_val (false: ASTRA-sim's older feeder takes a missing
 * one for a CPU op); pg_name as string_val; inputs / outputs as
 * string_list pairs [tensor, bytes] (its memory tracker: a tensor lives from
 * the start of the node that lists it in outputs to the end of the last
 * that lists it in inputs, which is when stagger allocates and frees it).
 *
 * comm_size is nccl-tests' size (stagger's bytes) for every collective but
 * all-gather, where ASTRA-sim takes the size each rank contributes (its
 * Ring.cc: an all-gather of data_size ends with data_size x ranks), so
 * comm_size = bytes / group size there, rounded up (a layer of 512 bytes
 * gathered over 1024 ranks would say 0, and ASTRA-sim never completes a
 * collective of 0 bytes).
 */
#include "interop/chakra.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "interop/chakra_private.h"
#include "sched/sched_json_private.h"
#include "sched/work.h"

char *
st_chakra_rank_path(const char *prefix, int rank)
{
  return g_strdup_printf("%s.%d.et", prefix, rank);
}

char *
st_chakra_groups_path(const char *prefix)
{
  return g_strdup_printf("%s.comm_groups.json", prefix);
}

typedef struct {
  const StSchedule *s;
  const StChakraExportOptions *o;
  int *pg_base;          /* [comms]: process group id of each communicator's group 0 */
  char **program_json;   /* [programs]: each program without its ops, printed */
  double **comp_ns;      /* [programs][ops]: COMP ops' time alone, computed once */
  char *schedule_json;   /* the schedule-wide parts, for rank 0's metadata */
  StChakraExportStats *stats;
} Export;

/* ---- the metadata ------------------------------------------------------------ */

const char *const ET_SCHEDULE_KEYS[] = {"model", "settings", "jobs", "steps", "warmup_steps",
                                        "warmup_scale", "notes", NULL};

/* The parts of the schedule's JSON that no node carries: model, settings,
 * jobs, steps, notes, the communicators' names and group counts; and each
 * program without its ops (streams, buffers, labels). */
static void
split_schedule_json(Export *x)
{
  const StSchedule *s = x->s;
  g_autoptr(cJSON) root = st_schedule_to_json(s);
  g_autoptr(cJSON) head = cJSON_CreateObject();
  for (const char *const *k = ET_SCHEDULE_KEYS; *k != NULL; k++) {
    cJSON *item = cJSON_DetachItemFromObjectCaseSensitive(root, *k);
    if (item != NULL)
      cJSON_AddItemToObject(head, *k, item);
  }
  cJSON *comms = cJSON_AddArrayToObject(head, "comms");
  for (guint c = 0; c < s->comms->len; c++) {
    const StComm *comm = st_schedule_comm(s, (int)c);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", comm->name);
    st_json_add_int(o, "groups", comm->n_groups);
    cJSON_AddItemToArray(comms, o);
  }
  x->schedule_json = cJSON_PrintUnformatted(head);
  cJSON *programs = cJSON_GetObjectItemCaseSensitive(root, "programs");
  x->program_json = g_new0(char *, s->programs->len);
  for (guint p = 0; p < s->programs->len; p++) {
    cJSON *prog = cJSON_GetArrayItem(programs, (int)p);
    cJSON_DeleteItemFromObjectCaseSensitive(prog, "ops");
    x->program_json[p] = cJSON_PrintUnformatted(prog);
  }
}

static gboolean
write_metadata(Export *x, EtWriter *w, int rank, GError **error)
{
  const StSchedule *s = x->s;
  EtAttrs a;
  et_attrs_init(&a);
  et_attrs_string(&a, "stagger_format", "stagger-chakra");
  et_attrs_int64(&a, "stagger_version", 1);
  et_attrs_int64(&a, "stagger_rank", rank);
  et_attrs_int64(&a, "stagger_ranks", s->n_ranks);
  et_attrs_int64(&a, "stagger_device", s->ranks[rank].device);
  et_attrs_int64(&a, "stagger_start_ns", s->ranks[rank].start_ns);
  et_attrs_int64(&a, "stagger_replica", s->ranks[rank].replica);
  et_attrs_string(&a, "stagger_program", x->program_json[s->ranks[rank].program]);
  if (rank == 0)
    et_attrs_string(&a, "stagger_schedule", x->schedule_json);
  EtMeta meta;
  chakra_proto_msg__global_metadata__init(&meta);
  meta.version = (char *)ST_CHAKRA_SCHEMA_VERSION;
  et_attrs_attach(&a, &meta);
  gboolean ok = et_writer_add(w, &meta.base, error);
  et_attrs_clear(&a);
  return ok;
}

/* ---- nodes --------------------------------------------------------------------- */

static int
node_type(const StOp *op)
{
  switch ((StOpKind)op->kind) {
  case ST_OP_COMP: return CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
  case ST_OP_COMM_COLL: return CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
  case ST_OP_COMM_SEND: return CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE;
  case ST_OP_COMM_RECV: return CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE;
  case ST_OP_COPY:
    return op->sub == ST_COPY_D2H ? CHAKRA_PROTO_MSG__NODE_TYPE__MEM_STORE_NODE
                                  : CHAKRA_PROTO_MSG__NODE_TYPE__MEM_LOAD_NODE;
  default: g_return_val_if_reached(CHAKRA_PROTO_MSG__NODE_TYPE__INVALID_NODE);
  }
}

/* Chakra's CollectiveCommType of a stagger collective: the same name in
 * capitals ("all_reduce" is ALL_REDUCE), so a collective kind stagger adds
 * later maps by itself when Chakra has it; -1 when it does not. */
static int
comm_type(StCollKind kind)
{
  g_autofree char *name = g_ascii_strup(st_coll_name(kind), -1);
  const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value_by_name(
    &chakra_proto_msg__collective_comm_type__descriptor, name);
  return v != NULL ? v->value : -1;
}

/* Memory effects as [tensor, bytes] pairs: tensor "<buffer>:<name>". */
static void
add_tensors(EtAttrs *a, const char *name, const StProgram *p, const uint32_t *buffers, guint n,
            gboolean persistent_too)
{
  g_autoptr(GPtrArray) v = g_ptr_array_new_with_free_func(g_free);
  for (guint i = 0; i < p->buffers->len && persistent_too; i++) {
    const StBuffer *b = &g_array_index(p->buffers, StBuffer, i);
    if (b->persistent) {
      g_ptr_array_add(v, g_strdup_printf("%u:%s", i, b->name));
      g_ptr_array_add(v, g_strdup_printf("%" G_GINT64_FORMAT, b->bytes));
    }
  }
  for (guint i = 0; i < n; i++) {
    const StBuffer *b = &g_array_index(p->buffers, StBuffer, buffers[i]);
    g_ptr_array_add(v, g_strdup_printf("%u:%s", buffers[i], b->name));
    g_ptr_array_add(v, g_strdup_printf("%" G_GINT64_FORMAT, b->bytes));
  }
  et_attrs_string_list(a, name, (char *const *)v->pdata, v->len);
}

/* The op's fields that no Chakra attribute carries, as stagger_<field>. */
static void
add_stagger_fields(EtAttrs *a, const StOp *op, GPtrArray *names)
{
  if (op->kind == ST_OP_COMP)
    et_attrs_string(a, "stagger_pass", st_pass_name((StPass)op->sub));
  if (op->kind == ST_OP_COPY)
    et_attrs_string(a, "stagger_copy", st_copy_name((StCopyKind)op->sub));
  if (op->data != ST_DATA_NONE)
    et_attrs_string(a, "stagger_data", st_data_name((StData)op->data));
  if (op->part > 0)
    et_attrs_int64(a, "stagger_part", op->part);
  if (op->sample_stride > 0) {
    int64_t samples[2] = {op->sample_first, op->sample_stride};
    et_attrs_int64_list(a, "stagger_samples", samples, 2);
  }
  for (guint f = 0; f < ST_N_OP_FIELDS; f++) {
    const char *key = ST_OP_FIELDS[f].key;
    int64_t v = st_op_field_get(op, f);
    if (v == ST_OP_FIELDS[f].none || strcmp(key, "comm") == 0 || strcmp(key, "peer") == 0 ||
        strcmp(key, "tag") == 0)
      continue;
    char *name = g_strconcat("stagger_", key, NULL);
    g_ptr_array_add(names, name);
    et_attrs_int64(a, name, v);
  }
}

/* The op's time alone on the exporting cluster, in ns. */
static gboolean
op_time_ns(Export *x, int rank, const StProgram *p, uint32_t i, double *ns, GError **error)
{
  const StSchedule *s = x->s;
  const StOp *op = st_program_op(p, i);
  StCommPlan plan;
  *ns = 0;
  if (op->kind == ST_OP_COMP) {
    *ns = x->comp_ns[s->ranks[rank].program][i];
  } else if (op->kind == ST_OP_COMM_COLL) {
    StGroupShape shape;
    st_schedule_group_shape(s, op->comm, st_schedule_comm(s, op->comm)->group_of[rank], &shape);
    if (!st_comm_plan_collective(s->cluster, x->o->profile, x->o->comm_algo,
                                 (StCollKind)op->sub, op->bytes, &shape, &plan, error))
      return FALSE;
    *ns = st_comm_plan_ns(&plan);
  } else if (op->kind == ST_OP_COMM_SEND || op->kind == ST_OP_COMM_RECV) {
    int peer = st_schedule_peer_rank(s, rank, op->comm, op->peer);
    st_comm_plan_p2p_profiled(s->cluster, x->o->profile, s->ranks[rank].device,
                              s->ranks[peer].device, op->bytes, &plan);
    *ns = st_comm_plan_ns(&plan);
  }
  return TRUE;
}

static gboolean
write_node(Export *x, EtWriter *w, int rank, uint32_t i, int64_t prev_on_stream,
           GError **error)
{
  const StSchedule *s = x->s;
  const StProgram *p = st_schedule_program_of(s, rank);
  const StOp *op = st_program_op(p, i);
  g_autofree char *name = st_op_describe(s, p, i);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GArray) data_deps = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  g_autoptr(GArray) prev_deps = g_array_new(FALSE, FALSE, sizeof(int64_t));
  const StDep *deps = st_program_deps(p, op);
  for (uint32_t d = 0; d < op->n_deps; d++) {
    if (deps[d].step_offset == 0) {
      uint64_t id = deps[d].op;
      g_array_append_val(data_deps, id);
    } else {
      int64_t id = deps[d].op;
      g_array_append_val(prev_deps, id);
    }
  }
  uint64_t ctrl = (uint64_t)prev_on_stream;
  double ns;
  if (!op_time_ns(x, rank, p, i, &ns, error))
    return FALSE;

  EtAttrs a;
  et_attrs_init(&a);
  et_attrs_bool(&a, "is_cpu_op", FALSE);
  et_attrs_int64(&a, "stream", op->stream);
  if (op->kind == ST_OP_COMP) {
    StComputeCtx ctx = st_program_compute_ctx(s, p, x->o->profile);
    StWork work = st_op_work(s, p, op);
    double flops = 0, bytes = 0;
    st_compute_work_traffic(&ctx, &work, &flops, &bytes);
    et_attrs_int64(&a, "num_ops", (int64_t)llround(flops));
    et_attrs_uint64(&a, "tensor_size", (uint64_t)llround(bytes));
  } else if (op->kind == ST_OP_COPY) {
    et_attrs_uint64(&a, "tensor_size", (uint64_t)op->bytes);
  } else {
    const StComm *comm = st_schedule_comm(s, op->comm);
    int group = comm->group_of[rank];
    g_autofree char *pg = g_strdup_printf("%d", x->pg_base[op->comm] + group);
    int64_t size = op->bytes;
    if (op->kind == ST_OP_COMM_COLL) {
      int type = comm_type((StCollKind)op->sub);
      if (type < 0) {
        g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_UNSUPPORTED,
                    "rank %d, op %u (%s): Chakra has no collective type for %s", rank, i, name,
                    st_coll_name((StCollKind)op->sub));
        et_attrs_clear(&a);
        return FALSE;
      }
      et_attrs_int64(&a, "comm_type", type);
      if (op->sub == ST_COLL_ALL_GATHER) { /* rounded up: a part of 0 bytes hangs ASTRA-sim */
        int64_t members = comm->offsets[group + 1] - comm->offsets[group];
        size = (size + members - 1) / members;
      }
    } else {
      int peer = st_schedule_peer_rank(s, rank, op->comm, op->peer);
      gboolean send = op->kind == ST_OP_COMM_SEND;
      et_attrs_int32(&a, "comm_src", send ? rank : peer);
      et_attrs_int32(&a, "comm_dst", send ? peer : rank);
      et_attrs_int32(&a, "comm_tag", op->tag);
    }
    et_attrs_int64(&a, "comm_size", size);
    et_attrs_string(&a, "pg_name", pg);
  }
  add_tensors(&a, "outputs", p, st_program_allocs(p, op), op->n_alloc, i == 0);
  add_tensors(&a, "inputs", p, st_program_frees(p, op), op->n_free, FALSE);
  add_stagger_fields(&a, op, names);
  if (prev_deps->len > 0)
    et_attrs_int64_list(&a, "stagger_prev_deps", (const int64_t *)(const void *)prev_deps->data,
                        prev_deps->len);

  EtNode node;
  chakra_proto_msg__node__init(&node);
  node.id = i;
  node.name = name;
  node.type = node_type(op);
  node.n_data_deps = data_deps->len;
  node.data_deps = (uint64_t *)(void *)data_deps->data;
  node.n_ctrl_deps = prev_on_stream >= 0 ? 1 : 0;
  node.ctrl_deps = &ctrl;
  node.duration_micros = (uint64_t)llround(MAX(ns, 0) / 1e3);
  et_attrs_attach(&a, &node);
  gboolean ok = et_writer_add(w, &node.base, error);
  et_attrs_clear(&a);
  if (ok && x->stats != NULL)
    x->stats->nodes[node.type]++;
  return ok;
}

static gboolean
write_rank(Export *x, const char *prefix, int rank, GError **error)
{
  const StProgram *p = st_schedule_program_of(x->s, rank);
  g_autofree char *path = st_chakra_rank_path(prefix, rank);
  EtWriter *w = et_writer_open(path, error);
  if (w == NULL)
    return FALSE;
  g_autofree int64_t *last = g_new(int64_t, MAX(p->streams->len, 1));
  for (guint k = 0; k < p->streams->len; k++)
    last[k] = -1;
  gboolean ok = write_metadata(x, w, rank, error);
  for (uint32_t i = 0; ok && i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    ok = write_node(x, w, rank, i, last[op->stream], error);
    last[op->stream] = i;
  }
  GError *close_error = NULL;
  if (!et_writer_close(w, ok ? error : &close_error))
    ok = FALSE;
  g_clear_error(&close_error);
  if (ok && x->stats != NULL)
    x->stats->files++;
  return ok;
}

/* ---- the whole ------------------------------------------------------------------- */

static void
compute_costs(Export *x)
{
  const StSchedule *s = x->s;
  x->comp_ns = g_new0(double *, s->programs->len);
  for (guint pi = 0; pi < s->programs->len; pi++) {
    const StProgram *p = g_ptr_array_index(s->programs, pi);
    StComputeCtx ctx = st_program_compute_ctx(s, p, x->o->profile);
    x->comp_ns[pi] = g_new0(double, MAX(p->ops->len, 1));
    for (guint i = 0; i < p->ops->len; i++) {
      const StOp *op = st_program_op(p, i);
      if (op->kind != ST_OP_COMP)
        continue;
      StWork work = st_op_work(s, p, op);
      StCostSource source;
      x->comp_ns[pi][i] = st_compute_time(&ctx, &work, &source);
    }
  }
}

static gboolean
write_groups(Export *x, const char *prefix, GError **error)
{
  const StSchedule *s = x->s;
  EtGroups g;
  et_groups_init(&g);
  x->pg_base = g_new(int, MAX(s->comms->len, 1));
  int next = 1;
  for (guint c = 0; c < s->comms->len; c++) {
    const StComm *comm = st_schedule_comm(s, (int)c);
    x->pg_base[c] = next;
    for (int k = 0; k < comm->n_groups; k++) {
      g_autofree char *id = g_strdup_printf("%d", next++);
      et_groups_add(&g, id, comm->members + comm->offsets[k],
                    comm->offsets[k + 1] - comm->offsets[k]);
    }
  }
  g_autofree char *path = st_chakra_groups_path(prefix);
  gboolean ok = et_groups_save(&g, path, error);
  if (ok && x->stats != NULL)
    x->stats->groups = (int)g.ids->len;
  et_groups_clear(&g);
  return ok;
}

gboolean
st_chakra_export(const StSchedule *schedule, const char *prefix,
                 const StChakraExportOptions *options, StChakraExportStats *stats,
                 GError **error)
{
  g_return_val_if_fail(schedule != NULL && prefix != NULL && options != NULL, FALSE);
  g_autofree char *base = g_path_get_basename(prefix);
  if (*prefix == '\0' || g_str_has_suffix(prefix, G_DIR_SEPARATOR_S) ||
      strcmp(base, ".") == 0) {
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_INVALID,
                "'%s': a trace prefix names files (PREFIX.<rank>.et), not a folder", prefix);
    return FALSE;
  }
  g_autofree char *dir = g_path_get_dirname(prefix);
  if (g_mkdir_with_parents(dir, 0755) != 0) {
    g_set_error(error, ST_CHAKRA_ERROR, ST_ERROR_IO, "%s: %s", dir, g_strerror(errno));
    return FALSE;
  }
  if (stats != NULL)
    *stats = (StChakraExportStats){0};
  Export x = {.s = schedule, .o = options, .stats = stats};
  split_schedule_json(&x);
  compute_costs(&x);
  gboolean ok = write_groups(&x, prefix, error);
  for (int r = 0; ok && r < schedule->n_ranks; r++)
    ok = write_rank(&x, prefix, r, error);
  for (guint p = 0; p < schedule->programs->len; p++) {
    cJSON_free(x.program_json[p]);
    g_free(x.comp_ns[p]);
  }
  g_free(x.program_json);
  g_free(x.comp_ns);
  g_free(x.pg_base);
  cJSON_free(x.schedule_json);
  return ok;
}

char *
st_chakra_export_describe(const StChakraExportStats *stats)
{
  GString *text = g_string_new(NULL);
  int64_t total = 0;
  for (int t = 0; t < ST_CHAKRA_N_NODE_TYPES; t++)
    total += stats->nodes[t];
  g_string_printf(text, "%d rank files, %" G_GINT64_FORMAT " nodes (", stats->files, total);
  const char *sep = "";
  for (int t = 0; t < ST_CHAKRA_N_NODE_TYPES; t++)
    if (stats->nodes[t] > 0) {
      g_string_append_printf(text, "%s%" G_GINT64_FORMAT " %s", sep, stats->nodes[t],
                             et_node_type_name(t));
      sep = ", ";
    }
  g_string_append_printf(text, "), %d process groups", stats->groups);
  return g_string_free(text, FALSE);
}
