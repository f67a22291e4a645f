/* test_chakra_export.c: Chakra traces as stagger writes them, read by an
 * independent decoder: protoc (Debian's protobuf-compiler) decodes every
 * message over the same schema, and each node is compared field by field
 * with the schedule it came from, computed here from the schedule alone
 * (not from the exporter's code). Skips when protoc is absent.
 *
 * protoc decodes one message; a trace file is a stream of length-prefixed
 * messages. Putting a one-byte tag before each length (field 1 for the
 * metadata, field 2 for every node) makes the file the wire encoding of a
 * wrapper message { GlobalMetadata metadata = 1; repeated Node nodes = 2; },
 * which protoc decodes in one go. */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "interop/chakra.h"
#include "sched/work.h"
#include "testutil.h"

/* ---- protoc's text format, parsed ------------------------------------------ */

typedef struct TNode TNode;
struct TNode {
  char *key;
  char *value;      /* NULL for a message */
  GPtrArray *kids;  /* TNode *, for a message */
};

static void
tnode_free(gpointer p)
{
  TNode *n = p;
  g_free(n->key);
  g_free(n->value);
  if (n->kids != NULL)
    g_ptr_array_unref(n->kids);
  g_free(n);
}

static TNode *
tnode_new(const char *key)
{
  TNode *n = g_new0(TNode, 1);
  n->key = g_strdup(key);
  n->kids = g_ptr_array_new_with_free_func(tnode_free);
  return n;
}

/* A quoted string as protoc writes it (C escapes, octal for other bytes). */
static char *
unquote(const char *s)
{
  g_assert_true(s[0] == '"');
  g_autofree char *inner = g_strndup(s + 1, strlen(s) - 2);
  return g_strcompress(inner);
}

static TNode *
parse_text(const char *text)
{
  TNode *root = tnode_new("");
  g_autoptr(GPtrArray) stack = g_ptr_array_new();
  g_ptr_array_add(stack, root);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (int i = 0; lines[i] != NULL; i++) {
    char *line = g_strstrip(lines[i]);
    TNode *top = g_ptr_array_index(stack, stack->len - 1);
    if (*line == '\0')
      continue;
    if (strcmp(line, "}") == 0) {
      g_ptr_array_remove_index(stack, stack->len - 1);
    } else if (g_str_has_suffix(line, " {")) {
      line[strlen(line) - 2] = '\0';
      TNode *kid = tnode_new(line);
      g_ptr_array_add(top->kids, kid);
      g_ptr_array_add(stack, kid);
    } else {
      char *colon = strstr(line, ": ");
      g_assert_nonnull(colon);
      *colon = '\0';
      TNode *kid = g_new0(TNode, 1);
      kid->key = g_strdup(line);
      kid->value = colon[2] == '"' ? unquote(colon + 2) : g_strdup(colon + 2);
      g_ptr_array_add(top->kids, kid);
    }
  }
  g_assert_cmpuint(stack->len, ==, 1);
  return root;
}

/* The values of every child `key`. */
static GPtrArray *
values(const TNode *n, const char *key)
{
  GPtrArray *v = g_ptr_array_new();
  for (guint i = 0; i < n->kids->len; i++) {
    const TNode *k = g_ptr_array_index(n->kids, i);
    if (strcmp(k->key, key) == 0)
      g_ptr_array_add(v, k->value);
  }
  return v;
}

static const char *
value(const TNode *n, const char *key)
{
  g_autoptr(GPtrArray) v = values(n, key);
  g_assert_cmpuint(v->len, <=, 1);
  return v->len == 1 ? g_ptr_array_index(v, 0) : NULL;
}

/* The attribute `name` of a node: its one value member (name, value text). */
static const TNode *
attr(const TNode *node, const char *name)
{
  for (guint i = 0; i < node->kids->len; i++) {
    const TNode *a = g_ptr_array_index(node->kids, i);
    if (strcmp(a->key, "attr") == 0 && g_strcmp0(value(a, "name"), name) == 0)
      return a;
  }
  return NULL;
}

/* The values of a string_list attribute. */
static GPtrArray *
string_list(const TNode *node, const char *name)
{
  const TNode *a = attr(node, name);
  g_assert_nonnull(a);
  for (guint i = 0; i < a->kids->len; i++) {
    const TNode *k = g_ptr_array_index(a->kids, i);
    if (strcmp(k->key, "string_list") == 0)
      return values(k, "values");
  }
  g_assert_not_reached();
}

static int64_t
attr_int(const TNode *node, const char *name, const char *member)
{
  const TNode *a = attr(node, name);
  if (a == NULL)
    g_error("node '%s' has no attribute '%s'", value(node, "name"), name);
  const char *v = value(a, member);
  if (v == NULL && strcmp(member, "bool_val") != 0)
    return 0; /* proto3 leaves zeros out */
  if (v == NULL)
    return 0;
  if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0)
    return strcmp(v, "true") == 0;
  return g_ascii_strtoll(v, NULL, 10);
}

/* ---- decoding a trace file with protoc ---------------------------------------- */

static const char WRAPPER[] =
  "syntax = \"proto3\";\n"
  "import \"chakra_et.proto\";\n"
  "message Trace { ChakraProtoMsg.GlobalMetadata metadata = 1;\n"
  "                repeated ChakraProtoMsg.Node nodes = 2; }\n";

static TNode *
protoc_decode(const char *protoc, const char *dir, const char *path)
{
  gsize len;
  g_autofree char *data = st_test_read(path, &len);
  GByteArray *wrapped = g_byte_array_new();
  gsize at = 0;
  for (int k = 0; at < len; k++) {
    uint8_t tag = k == 0 ? 0x0a : 0x12; /* field 1 or 2, wire type 2 */
    g_byte_array_append(wrapped, &tag, 1);
    uint64_t n = 0;
    int shift = 0;
    gsize start = at;
    while ((uint8_t)data[at] & 0x80) {
      n |= (uint64_t)((uint8_t)data[at++] & 0x7f) << shift;
      shift += 7;
    }
    n |= (uint64_t)((uint8_t)data[at++]) << shift;
    g_byte_array_append(wrapped, (const guint8 *)data + start, (guint)(at - start + n));
    at += n;
  }
  g_assert_cmpuint(at, ==, len);
  g_autofree char *bin = g_build_filename(dir, "wrapped.bin", NULL);
  g_autoptr(GError) error = NULL;
  g_file_set_contents(bin, (const char *)wrapped->data, wrapped->len, &error);
  g_assert_no_error(error);
  g_byte_array_unref(wrapped);
  g_autofree char *schema_dir = st_test_src("sim/interop");
  g_autofree char *cmd = g_strdup_printf(
    "sh -c '\"%s\" --proto_path=\"%s\" --proto_path=\"%s\" --decode=Trace trace.proto < \"%s\"'",
    protoc, dir, schema_dir, bin);
  g_autofree char *out = NULL, *err = NULL;
  int status = 0;
  g_spawn_command_line_sync(cmd, &out, &err, &status, &error);
  g_assert_no_error(error);
  if (status != 0)
    g_error("protoc failed on %s: %s", path, err);
  return parse_text(out);
}

/* ---- expectations from the schedule ------------------------------------------- */

/* Chakra's published enum numbers (schema/protobuf/et_def.proto). */
enum { COMP_NODE = 4, COMM_SEND_NODE = 5, COMM_RECV_NODE = 6, COMM_COLL_NODE = 7,
       MEM_LOAD_NODE = 2, MEM_STORE_NODE = 3 };

static const char *
node_type_name(const StOp *op)
{
  switch (op->kind) {
  case ST_OP_COMP: return "COMP_NODE";
  case ST_OP_COMM_COLL: return "COMM_COLL_NODE";
  case ST_OP_COMM_SEND: return "COMM_SEND_NODE";
  case ST_OP_COMM_RECV: return "COMM_RECV_NODE";
  default: return op->sub == ST_COPY_D2H ? "MEM_STORE_NODE" : "MEM_LOAD_NODE";
  }
}

static int
comm_type_number(int coll)
{
  switch (coll) {
  case ST_COLL_ALL_REDUCE: return 0;
  case ST_COLL_REDUCE: return 1;
  case ST_COLL_ALL_GATHER: return 2;
  case ST_COLL_BROADCAST: return 5;
  case ST_COLL_REDUCE_SCATTER: return 7;
  default: g_assert_not_reached();
  }
}

/* The members of process group `id` in the group file, as a comparable string. */
static char *
group_members(const cJSON *groups, const char *id)
{
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(groups, id);
  g_assert_nonnull(g);
  GString *s = g_string_new(NULL);
  const cJSON *r;
  cJSON_ArrayForEach(r, g) g_string_append_printf(s, "%d,", r->valueint);
  return g_string_free(s, FALSE);
}

static void
check_rank(const StSchedule *s, int rank, const TNode *trace, const cJSON *groups)
{
  const StProgram *p = st_schedule_program_of(s, rank);
  const TNode *meta = g_ptr_array_index(trace->kids, 0);
  g_assert_cmpstr(meta->key, ==, "metadata");
  g_assert_cmpstr(value(meta, "version"), ==, ST_CHAKRA_SCHEMA_VERSION);
  g_assert_cmpint(attr_int(meta, "stagger_rank", "int64_val"), ==, rank);
  g_assert_cmpint(attr_int(meta, "stagger_device", "int64_val"), ==, s->ranks[rank].device);
  g_assert_cmpuint(trace->kids->len, ==, p->ops->len + 1);
  g_autofree int64_t *last = g_new(int64_t, p->streams->len);
  for (guint k = 0; k < p->streams->len; k++)
    last[k] = -1;
  for (guint i = 0; i < p->ops->len; i++) {
    const StOp *op = st_program_op(p, i);
    const TNode *n = g_ptr_array_index(trace->kids, i + 1);
    g_assert_cmpstr(n->key, ==, "nodes");
    g_autofree char *name = st_op_describe(s, p, i);
    g_assert_cmpint(value(n, "id") ? g_ascii_strtoll(value(n, "id"), NULL, 10) : 0, ==, i);
    g_assert_cmpstr(value(n, "name"), ==, name);
    g_assert_cmpstr(value(n, "type"), ==, node_type_name(op));
    /* data_deps: the op's same-step dependencies; ctrl_deps: its stream
     * predecessor; stagger_prev_deps: the previous-step ones. */
    g_autoptr(GPtrArray) data = values(n, "data_deps");
    g_autoptr(GPtrArray) ctrl = values(n, "ctrl_deps");
    const StDep *deps = st_program_deps(p, op);
    guint same = 0;
    for (uint32_t d = 0; d < op->n_deps; d++) {
      if (deps[d].step_offset != 0)
        continue;
      g_assert_cmpuint(same, <, data->len);
      g_assert_cmpint(g_ascii_strtoll(g_ptr_array_index(data, same), NULL, 10), ==, deps[d].op);
      same++;
    }
    g_assert_cmpuint(same, ==, data->len);
    g_assert_cmpuint(ctrl->len, ==, last[op->stream] >= 0 ? 1 : 0);
    if (ctrl->len == 1)
      g_assert_cmpint(g_ascii_strtoll(g_ptr_array_index(ctrl, 0), NULL, 10), ==,
                      last[op->stream]);
    last[op->stream] = i;
    g_assert_cmpint(attr_int(n, "is_cpu_op", "bool_val"), ==, 0);
    g_assert_cmpint(attr_int(n, "stream", "int64_val"), ==, op->stream);
    if (op->kind == ST_OP_COMP) {
      g_assert_cmpstr(value(attr(n, "stagger_pass"), "string_val"), ==, st_pass_name(op->sub));
      if (op->sub == ST_PASS_FWD || op->sub == ST_PASS_BWD || op->sub == ST_PASS_RECOMPUTE) {
        const StLayer *l = &st_program_model(s, p)->layers[op->layer];
        double flops = op->batch * (op->sub == ST_PASS_BWD ? l->bwd_flops : l->fwd_flops);
        g_assert_cmpfloat_with_epsilon(attr_int(n, "num_ops", "int64_val"), flops, 1);
        g_assert_cmpint(attr_int(n, "stagger_layer", "int64_val"), ==, op->layer);
        g_assert_cmpint(attr_int(n, "stagger_batch", "int64_val"), ==, op->batch);
        g_assert_cmpint(attr_int(n, "tensor_size", "uint64_val"), >, 0);
        /* duration_micros: the time alone, rounded to microseconds. */
        StComputeCtx ctx = st_program_compute_ctx(s, p, NULL);
        StWork work = st_op_work(s, p, op);
        StCostSource src;
        double ns = st_compute_time(&ctx, &work, &src);
        const char *us = value(n, "duration_micros");
        g_assert_cmpint(us != NULL ? g_ascii_strtoll(us, NULL, 10) : 0, ==, llround(ns / 1e3));
      }
    } else if (op->kind == ST_OP_COPY) {
      g_assert_cmpint(attr_int(n, "tensor_size", "uint64_val"), ==, op->bytes);
    } else {
      const StComm *comm = st_schedule_comm(s, op->comm);
      int g = comm->group_of[rank];
      int size = comm->offsets[g + 1] - comm->offsets[g];
      /* The process group names exactly the members of the rank's group. */
      g_autofree char *members = group_members(groups, value(attr(n, "pg_name"), "string_val"));
      GString *want = g_string_new(NULL);
      for (int m = comm->offsets[g]; m < comm->offsets[g + 1]; m++)
        g_string_append_printf(want, "%d,", comm->members[m]);
      g_assert_cmpstr(members, ==, want->str);
      g_string_free(want, TRUE);
      if (op->kind == ST_OP_COMM_COLL) {
        g_assert_cmpint(attr_int(n, "comm_type", "int64_val"), ==, comm_type_number(op->sub));
        /* ASTRA-sim's all-gather size is what one rank contributes, rounded up. */
        g_assert_cmpint(attr_int(n, "comm_size", "int64_val"), ==,
                        op->sub == ST_COLL_ALL_GATHER ? (op->bytes + size - 1) / size
                                                      : op->bytes);
      } else {
        int peer = st_schedule_peer_rank(s, rank, op->comm, op->peer);
        gboolean send = op->kind == ST_OP_COMM_SEND;
        g_assert_cmpint(attr_int(n, "comm_src", "int32_val"), ==, send ? rank : peer);
        g_assert_cmpint(attr_int(n, "comm_dst", "int32_val"), ==, send ? peer : rank);
        g_assert_cmpint(attr_int(n, "comm_tag", "int32_val"), ==, op->tag);
        g_assert_cmpint(attr_int(n, "comm_size", "int64_val"), ==, op->bytes);
      }
    }
    /* Memory: what the op allocates is in outputs, what it frees in inputs,
     * as [tensor, bytes] pairs (persistent buffers: outputs of node 0). */
    g_autoptr(GPtrArray) outs = string_list(n, "outputs");
    g_autoptr(GPtrArray) ins = string_list(n, "inputs");
    guint persistent = 0;
    for (guint b = 0; i == 0 && b < p->buffers->len; b++)
      persistent += g_array_index(p->buffers, StBuffer, b).persistent;
    g_assert_cmpuint(outs->len, ==, 2 * (op->n_alloc + persistent));
    g_assert_cmpuint(ins->len, ==, 2 * op->n_free);
    for (uint32_t k = 0; k < op->n_free; k++) {
      const StBuffer *b = &g_array_index(p->buffers, StBuffer, st_program_frees(p, op)[k]);
      g_assert_true(g_str_has_suffix(g_ptr_array_index(ins, 2 * k), b->name));
      g_assert_cmpint(g_ascii_strtoll(g_ptr_array_index(ins, 2 * k + 1), NULL, 10), ==,
                      b->bytes);
    }
  }
}

typedef struct {
  const char *strategy, *model;
  int gpus, ranks, zero_stage;
} Case;

static void
test_protoc_decodes_export(void)
{
  if (STAGGER_PROTOC[0] == '\0') {
    g_test_skip("protoc (protobuf-compiler) is not installed");
    return;
  }
  /* Sub-group collectives (ZeRO-3's gathers, pipelines' all-reduces),
   * point-to-point transfers (pipeline, cyclic DP), copies (burst),
   * several ranks per device (multiplex). */
  static const Case cases[] = {
    {"zero", "mlp", 4, 0, 3},       {"pipeline", "mlp", 4, 0, 0},
    {"cdp", "mlp", 4, 0, 0},        {"burst", "resnet18", 4, 0, 0},
    {"multiplex", "mlp", 2, 0, 0},
    {"zero", "mlp", 3, 0, 3}, /* gathers whose bytes 3 ranks do not divide: sizes rounded up */
  };
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *wrapper = g_build_filename(dir, "trace.proto", NULL);
  g_autoptr(GError) error = NULL;
  g_file_set_contents(wrapper, WRAPPER, -1, &error);
  g_assert_no_error(error);
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
    const Case *c = &cases[k];
    g_test_message("%s on %s", c->strategy, c->model);
    g_autoptr(StModel) m = st_test_model_named(c->model);
    g_autoptr(StCluster) cl = st_test_cluster_named("dgx-h100", 1, c->gpus);
    StOptions o;
    st_options_init(&o);
    o.zero_stage = c->zero_stage;
    o.micro_batch = 8;
    g_autoptr(StSchedule) s = st_test_build(c->strategy, m, cl, &o);
    g_autofree char *sub = g_strdup_printf("%zu", k);
    g_autofree char *prefix = g_build_filename(dir, sub, c->strategy, "et", NULL);
    StChakraExportOptions eo = {NULL, "auto"};
    StChakraExportStats stats;
    g_assert_true(st_chakra_export(s, prefix, &eo, &stats, &error));
    g_assert_no_error(error);
    g_assert_cmpint(stats.files, ==, s->n_ranks);
    g_autofree char *groups_path = st_chakra_groups_path(prefix);
    g_autofree char *groups_text = st_test_read(groups_path, NULL);
    g_autoptr(cJSON) groups = cJSON_Parse(groups_text);
    g_assert_nonnull(groups);
    for (int r = 0; r < s->n_ranks; r++) {
      g_autofree char *path = st_chakra_rank_path(prefix, r);
      TNode *trace = protoc_decode(STAGGER_PROTOC, dir, path);
      check_rank(s, r, trace, groups);
      tnode_free(trace);
    }
    st_options_clear(&o);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/chakra/export/protoc-decodes", test_protoc_decodes_export);
  return g_test_run();
}
