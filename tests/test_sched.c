/* test_sched.c: the Schedule's JSON form and its invariant checks.
 *
 * The base schedule: 4 ranks on 4 GPUs; a world communicator and a "pairs"
 * communicator of groups {0,1} and {2,3}. Even ranks run program "even",
 * odd ranks "odd": forward and backward of two layers, an all-reduce of the
 * gradients on the world, one send from each even rank to its odd partner,
 * an optimizer step that the next step's first forward waits for. Each fault
 * below breaks exactly one invariant; the check must name it.
 */
#include <cjson/cJSON.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "sched/sched.h"
#include "testutil.h"

static const char MODEL_JSON[] =
  "{\"name\": \"tiny\", \"input\": [16], \"layers\": ["
  " {\"name\": \"l0\", \"type\": \"custom\", \"params\": 256, \"fwd_flops\": 512,"
  "  \"bwd_flops\": 1024, \"activation_bytes\": 64, \"output_bytes\": 64},"
  " {\"name\": \"l1\", \"type\": \"custom\", \"params\": 128, \"fwd_flops\": 256,"
  "  \"bwd_flops\": 512, \"activation_bytes\": 32, \"output_bytes\": 16}]}";

/* `nodes` nodes of 8 GPUs, of which `gpus` are used. */
static StCluster *
make_cluster(int nodes, int gpus)
{
  g_autofree char *text = g_strdup_printf(
    "{\"name\": \"test\", \"nodes\": %d, \"gpus_per_node\": 8,"
    " \"gpu\": {\"name\": \"H100-SXM\", \"memory\": \"80GiB\","
    "         \"flops\": {\"bf16\": \"989TFLOP/s\", \"fp32\": \"67TFLOP/s\"},"
    "         \"memory_bandwidth\": \"3.35TB/s\"},"
    " \"links\": {\"intra_node\": {\"bandwidth\": \"450GB/s\", \"latency\": \"2us\","
    "                             \"topology\": \"switch\"},"
    "           \"inter_node\": {\"bandwidth\": \"50GB/s\", \"latency\": \"5us\","
    "                             \"topology\": \"switch\"}}}",
    nodes);
  g_autoptr(GError) error = NULL;
  g_autoptr(cJSON) root = st_json_parse(text, strlen(text), "<cluster>", &error);
  g_assert_no_error(error);
  g_autoptr(StCluster) cluster = st_cluster_from_json(root, "<cluster>", &error);
  g_assert_no_error(error);
  g_assert_true(st_cluster_resize(cluster, 0, gpus, &error));
  g_assert_no_error(error);
  return g_steal_pointer(&cluster);
}

static StModel *
make_model(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(cJSON) root = st_json_parse(MODEL_JSON, strlen(MODEL_JSON), "<model>", &error);
  g_assert_no_error(error);
  StModel *model = st_model_from_json(root, "<model>", &error);
  g_assert_no_error(error);
  return model;
}

typedef enum {
  FAULT_NONE,
  FAULT_UNMATCHED_SEND, /* the odd program posts no receive */
  FAULT_BYTES,          /* the receive expects other bytes than were sent */
  FAULT_COLL_KIND,      /* odd ranks all-gather where even ranks all-reduce */
  FAULT_COLL_COUNT,     /* odd ranks issue one more all-reduce */
  FAULT_NEVER_FREED,    /* act1 allocated, never freed */
  FAULT_FREED_TWICE,    /* act0 freed by two ops */
  FAULT_FREE_UNORDERED, /* the all-reduce frees act1 but need not run after forward */
  FAULT_NOT_MEMBER,     /* the all-reduce runs on a communicator without rank 3 */
  FAULT_PEER_RANGE,     /* the send names peer 5 of a 2-member group */
  FAULT_PEER_SELF,      /* the send names the sender itself */
  FAULT_PERSISTENT_FREED, /* the optimizer step frees the weights */
} Fault;

enum { BYTES_GRADS = 4096, BYTES_ACT = 1024 };

static StProgram *
build_program(const char *name, gboolean even, Fault fault, int world, int pairs, int partial)
{
  StProgram *p = st_program_new(name);
  int compute = st_program_add_stream(p, "compute", 0);
  int comm = st_program_add_stream(p, "comm", 1);
  /* Persistent: in no alloc or free list. */
  uint32_t weights = st_program_add_buffer(p, "weights", ST_MEM_PARAMS, 1536, TRUE);
  uint32_t act0 = st_program_add_buffer(p, "act l0", ST_MEM_ACTIVATIONS, 512, FALSE);
  uint32_t act1 = st_program_add_buffer(p, "act l1", ST_MEM_ACTIVATIONS, 256, FALSE);
  uint32_t grads = st_program_add_buffer(p, "grads", ST_MEM_GRADS, BYTES_GRADS, FALSE);
  uint32_t work = st_program_add_buffer(p, "workspace", ST_MEM_WORKSPACE, 64, FALSE);
  uint32_t msg = st_program_add_buffer(p, "message", ST_MEM_COMM, BYTES_ACT, FALSE);
  /* The optimizer step, built last, is waited for by the next step. */
  uint32_t optim = st_program_forward_ref(p);

  StOp op = st_op_comp(compute, ST_PASS_FWD, 0, 0, 8);
  st_program_begin(p, &op);
  st_program_after_prev_step(p, optim);
  st_program_alloc(p, act0);
  st_program_alloc(p, work);
  st_program_free_buffer(p, work);
  uint32_t f0 = st_program_commit(p);

  op = st_op_comp(compute, ST_PASS_FWD, 1, 0, 8);
  st_program_begin(p, &op);
  st_program_after(p, f0);
  st_program_alloc(p, act1);
  uint32_t f1 = st_program_commit(p);

  op = st_op_comp(compute, ST_PASS_BWD, 1, 0, 8);
  st_program_begin(p, &op);
  st_program_after(p, f1);
  if (fault != FAULT_NEVER_FREED && fault != FAULT_FREE_UNORDERED)
    st_program_free_buffer(p, act1);
  st_program_alloc(p, grads);
  uint32_t b1 = st_program_commit(p);

  op = st_op_comp(compute, ST_PASS_BWD, 0, 0, 8);
  st_program_begin(p, &op);
  st_program_after(p, b1);
  st_program_free_buffer(p, act0);
  uint32_t b0 = st_program_commit(p);

  /* The all-reduce waits for the last backward (op 3). */
  StCollKind kind = fault == FAULT_COLL_KIND && !even ? ST_COLL_ALL_GATHER : ST_COLL_ALL_REDUCE;
  op = st_op_coll(comm, kind, fault == FAULT_NOT_MEMBER ? partial : world, BYTES_GRADS);
  op.label = st_program_label(p, "bucket 0");
  st_program_begin(p, &op);
  if (fault != FAULT_FREE_UNORDERED)
    st_program_after(p, b0);
  if (fault == FAULT_FREED_TWICE)
    st_program_free_buffer(p, act0);
  if (fault == FAULT_FREE_UNORDERED)
    st_program_free_buffer(p, act1);
  uint32_t ar = st_program_commit(p);

  if (even) {
    int peer = fault == FAULT_PEER_RANGE ? 5 : fault == FAULT_PEER_SELF ? 0 : 1;
    op = st_op_send(comm, pairs, peer, 7, BYTES_ACT);
  } else if (fault == FAULT_UNMATCHED_SEND) {
    /* A copy stands in for the receive, so op indices stay the same. */
    op = st_op_copy(comm, ST_COPY_D2D, BYTES_ACT);
  } else {
    op = st_op_recv(comm, pairs, 0, 7, fault == FAULT_BYTES ? BYTES_ACT / 2 : BYTES_ACT);
  }
  st_program_begin(p, &op);
  st_program_after(p, ar);
  st_program_alloc(p, msg);
  st_program_free_buffer(p, msg);
  uint32_t p2p = st_program_commit(p);

  if (fault == FAULT_COLL_COUNT && !even)
    op = st_op_coll(comm, ST_COLL_ALL_REDUCE, world, BYTES_GRADS);
  else
    op = st_op_elementwise(compute, ST_PASS_COMPRESS, -1, 16, 64);
  st_program_begin(p, &op);
  st_program_after(p, p2p);
  st_program_commit(p);

  op = st_op_elementwise(compute, ST_PASS_OPTIM, -1, 384, 384 * 16);
  st_program_begin(p, &op);
  st_program_after(p, ar);
  st_program_free_buffer(p, grads);
  if (fault == FAULT_PERSISTENT_FREED)
    st_program_free_buffer(p, weights);
  uint32_t last = st_program_commit(p);
  g_assert_cmpuint(last, ==, 7);
  st_program_resolve(p, optim, last);
  return p;
}

static StSchedule *
build(Fault fault)
{
  StSchedule *s = st_schedule_new(make_model(), make_cluster(1, 4), 4, NULL);
  int world = st_schedule_add_world(s, "world");
  int32_t pair_color[4] = {0, 0, 1, 1};
  int pairs = st_schedule_add_comm(s, "pairs", pair_color);
  int32_t partial_color[4] = {0, 0, 0, -1};
  int partial = st_schedule_add_comm(s, "partial", partial_color);
  int even = st_schedule_add_program(s, build_program("even", TRUE, fault, world, pairs, partial));
  int odd = st_schedule_add_program(s, build_program("odd", FALSE, fault, world, pairs, partial));
  for (int r = 0; r < 4; r++)
    s->ranks[r].program = r % 2 == 0 ? even : odd;
  s->steps = 3;
  s->settings.strategy = g_strdup("test");
  s->settings.description = g_strdup("hand-built, 4 ranks");
  s->settings.precision = ST_PRECISION_MIXED;
  s->settings.optimizer = ST_OPTIMIZER_ADAM;
  s->settings.micro_batch = 8;
  s->settings.accumulation = 1;
  s->settings.global_batch = 32;
  st_schedule_note_number(s, "buckets", 1);
  st_schedule_note_text(s, "layout", "even/odd");
  return s;
}

static void
test_check_valid(void)
{
  g_autoptr(StSchedule) s = build(FAULT_NONE);
  g_autoptr(GError) error = NULL;
  g_assert_true(st_schedule_check(s, &error));
  g_assert_no_error(error);
}

typedef struct {
  Fault fault;
  const char *expect[3]; /* substrings of the message */
} FaultCase;

static const FaultCase FAULTS[] = {
  {FAULT_UNMATCHED_SEND, {"rank 0, program 'even', op 5 (send->1", "no matching receive"}},
  {FAULT_BYTES, {"rank 0, program 'even', op 5", "bytes mismatch", "rank 1, program 'odd'"}},
  {FAULT_COLL_KIND, {"rank 0", "rank 1, program 'odd', op 4", "kind mismatch"}},
  {FAULT_COLL_COUNT, {"collective count mismatch", "rank 1", "op 6"}},
  {FAULT_NEVER_FREED, {"op 1 (fwd l1 m0)", "'act l1'", "never freed"}},
  {FAULT_FREED_TWICE, {"op 4 (all_reduce bucket 0)", "'act l0' a second time", "op 3"}},
  {FAULT_FREE_UNORDERED, {"op 4 (all_reduce bucket 0)", "'act l1'", "does not run after"}},
  {FAULT_NOT_MEMBER, {"rank 3, program 'odd', op 4", "not a member", "'partial'"}},
  {FAULT_PEER_RANGE, {"rank 0, program 'even', op 5", "peer 5 is out of range", "'pairs'"}},
  {FAULT_PEER_SELF, {"rank 0, program 'even', op 5", "rank 0 itself"}},
  {FAULT_PERSISTENT_FREED, {"op 7 (optim)", "frees persistent buffer 0 'weights'"}},
};

static void
test_check_faults(void)
{
  for (guint i = 0; i < G_N_ELEMENTS(FAULTS); i++) {
    g_autoptr(StSchedule) s = build(FAULTS[i].fault);
    g_autoptr(GError) error = NULL;
    g_assert_false(st_schedule_check(s, &error));
    g_assert_error(error, ST_SCHED_ERROR, ST_ERROR_INVALID);
    g_test_message("fault %d: %s", FAULTS[i].fault, error->message);
    for (int j = 0; j < 3 && FAULTS[i].expect[j] != NULL; j++)
      if (strstr(error->message, FAULTS[i].expect[j]) == NULL)
        g_error("fault %d: '%s' not in: %s", FAULTS[i].fault, FAULTS[i].expect[j],
                error->message);
  }
}

/* Indices a strategy can get wrong without the builder noticing. */
static void
test_check_indices(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) s = build(FAULT_NONE);
  StProgram *odd = g_ptr_array_index(s->programs, 1);
  g_array_index(odd->ops, StOp, 1).layer = 9;
  g_assert_false(st_schedule_check(s, &error));
  g_assert_nonnull(strstr(error->message, "layer 9 is out of range"));
  g_clear_error(&error);

  g_array_index(odd->ops, StOp, 1).layer = 1;
  g_array_index(odd->ops, StOp, 1).batch = 0;
  g_assert_false(st_schedule_check(s, &error));
  g_assert_nonnull(strstr(error->message, "rank 1, program 'odd', op 1"));
  g_assert_nonnull(strstr(error->message, "batch > 0"));
  g_clear_error(&error);

  g_array_index(odd->ops, StOp, 1).batch = 8;
  s->ranks[2].program = 7;
  g_assert_false(st_schedule_check(s, &error));
  g_assert_nonnull(strstr(error->message, "rank 2: program 7 does not exist"));
}

static char *
print(const StSchedule *s)
{
  g_autoptr(cJSON) root = st_schedule_to_json(s);
  return cJSON_Print(root);
}

static void
assert_same(const StSchedule *a, const StSchedule *b)
{
  g_assert_cmpint(a->n_ranks, ==, b->n_ranks);
  g_assert_cmpint(a->n_devices, ==, b->n_devices);
  g_assert_cmpint(a->steps, ==, b->steps);
  g_assert_cmpstr(a->settings.description, ==, b->settings.description);
  g_assert_cmpint(a->settings.optimizer, ==, b->settings.optimizer);
  g_assert_cmpint(a->settings.global_batch, ==, b->settings.global_batch);
  g_assert_cmpuint(a->notes->len, ==, b->notes->len);
  g_assert_cmpmem(a->ranks, sizeof(StRank) * a->n_ranks, b->ranks, sizeof(StRank) * b->n_ranks);
  g_assert_cmpmem(a->devices, sizeof(StDevice) * a->n_devices, b->devices,
                  sizeof(StDevice) * b->n_devices);
  g_assert_cmpuint(a->comms->len, ==, b->comms->len);
  for (guint c = 0; c < a->comms->len; c++) {
    const StComm *x = st_schedule_comm(a, c), *y = st_schedule_comm(b, c);
    g_assert_cmpstr(x->name, ==, y->name);
    g_assert_cmpint(x->n_groups, ==, y->n_groups);
    g_assert_cmpmem(x->group_of, sizeof(int32_t) * a->n_ranks, y->group_of,
                    sizeof(int32_t) * b->n_ranks);
    g_assert_cmpmem(x->index_of, sizeof(int32_t) * a->n_ranks, y->index_of,
                    sizeof(int32_t) * b->n_ranks);
  }
  g_assert_cmpuint(a->programs->len, ==, b->programs->len);
  for (guint p = 0; p < a->programs->len; p++) {
    const StProgram *x = g_ptr_array_index(a->programs, p);
    const StProgram *y = g_ptr_array_index(b->programs, p);
    g_assert_cmpstr(x->name, ==, y->name);
    g_assert_cmpmem(x->ops->data, x->ops->len * sizeof(StOp), y->ops->data,
                    y->ops->len * sizeof(StOp));
    g_assert_cmpmem(x->deps->data, x->deps->len * sizeof(StDep), y->deps->data,
                    y->deps->len * sizeof(StDep));
    g_assert_cmpmem(x->mem->data, x->mem->len * sizeof(uint32_t), y->mem->data,
                    y->mem->len * sizeof(uint32_t));
    g_assert_cmpuint(x->buffers->len, ==, y->buffers->len);
    g_assert_cmpuint(x->labels->len, ==, y->labels->len);
  }
}

static void
test_json_round_trip(void)
{
  g_autoptr(StSchedule) s = build(FAULT_NONE);
  g_autoptr(GError) error = NULL;
  g_autoptr(cJSON) root = st_schedule_to_json(s);
  g_autoptr(StSchedule) back = st_schedule_from_json(root, "<test>", &error);
  g_assert_no_error(error);
  assert_same(s, back);
  g_autofree char *text = print(s);
  g_autofree char *again = print(back);
  g_assert_cmpstr(text, ==, again);
  g_assert_true(st_schedule_check(back, &error));

  /* The compact op form: only the fields that apply; previous-step deps as pairs. */
  const cJSON *op = cJSON_GetArrayItem(
    cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "programs"), 0), "ops"), 0);
  g_autofree char *first = cJSON_PrintUnformatted(op);
  g_assert_cmpstr(first, ==,
                  "{\"kind\":\"COMP\",\"pass\":\"fwd\",\"stream\":0,\"layer\":0,\"micro\":0,"
                  "\"batch\":8,\"deps\":[[7,-1]],\"alloc\":[1,4],\"free\":[4]}");
  const cJSON *comms = cJSON_GetObjectItem(root, "comms");
  g_autofree char *pairs = cJSON_PrintUnformatted(cJSON_GetArrayItem(comms, 1));
  g_assert_cmpstr(pairs, ==, "{\"name\":\"pairs\",\"groups\":[[0,1],[2,3]]}");
}

static void
test_json_jobs_and_starts(void)
{
  /* A second job (with its own model) and staggered starts survive the round
   * trip; a program of job 1 may index only job 1's layers. */
  g_autoptr(StSchedule) s = build(FAULT_NONE);
  StSettings settings = {.strategy = "dp", .description = "background", .micro_batch = 4,
                         .accumulation = 1, .global_batch = 16};
  int job = st_schedule_add_job(s, "bg", make_model(), &settings);
  StProgram *p = g_ptr_array_index(s->programs, 1);
  p->job = job;
  s->ranks[3].start_ns = 12345;
  /* What buffers hold and ops move round-trips too. */
  StProgram *p0 = g_ptr_array_index(s->programs, 0);
  st_program_buffer_holds(p0, 0, ST_DATA_PARAMS_SHARD, 0, 1, -1, 4);
  g_array_index(p0->ops, StOp, 0).data = ST_DATA_OUTPUT;
  g_array_index(p0->ops, StOp, 0).layer_last = 0;
  g_autoptr(GError) error = NULL;
  g_assert_true(st_schedule_check(s, &error));
  g_autoptr(cJSON) root = st_schedule_to_json(s);
  g_autoptr(StSchedule) back = st_schedule_from_json(root, "<test>", &error);
  g_assert_no_error(error);
  g_assert_cmpint(st_schedule_n_jobs(back), ==, 2);
  g_assert_cmpint(((StProgram *)g_ptr_array_index(back->programs, 1))->job, ==, 1);
  g_assert_cmpint(back->ranks[3].start_ns, ==, 12345);
  g_assert_cmpint(st_schedule_job_settings(back, 1)->global_batch, ==, 16);
  const StProgram *b0 = g_ptr_array_index(back->programs, 0);
  const StBuffer *buf = &g_array_index(b0->buffers, StBuffer, 0);
  g_assert_cmpint(buf->data, ==, ST_DATA_PARAMS_SHARD);
  g_assert_cmpint(buf->layer_last, ==, 1);
  g_assert_cmpint(buf->parts, ==, 4);
  g_assert_cmpint(st_program_op(b0, 0)->data, ==, ST_DATA_OUTPUT);
  g_autofree char *text = print(s);
  g_autofree char *again = print(back);
  g_assert_cmpstr(text, ==, again);

  /* A job that does not exist is refused with its path. */
  cJSON *prog = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "programs"), 1);
  cJSON_ReplaceItemInObject(prog, "job", cJSON_CreateNumber(5));
  g_autoptr(StSchedule) bad = st_schedule_from_json(root, "x.json", &error);
  g_assert_null(bad);
  g_assert_nonnull(strstr(error->message, "x.json"));
  g_assert_nonnull(strstr(error->message, "job"));
}

static void
test_save_load(void)
{
  g_autoptr(StSchedule) s = build(FAULT_NONE);
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "schedule.json", NULL);
  g_autoptr(GError) error = NULL;
  g_assert_true(st_schedule_save(s, path, &error));
  g_assert_no_error(error);
  g_autoptr(StSchedule) back = st_schedule_load(path, &error);
  g_assert_no_error(error);
  assert_same(s, back);
  g_autofree char *path2 = g_build_filename(dir, "again.json", NULL);
  g_assert_true(st_schedule_save(back, path2, &error));
  g_autofree char *a = st_test_read(path, NULL);
  g_autofree char *b = st_test_read(path2, NULL);
  g_assert_cmpstr(a, ==, b);

  g_autofree char *missing = g_build_filename(dir, "missing.json", NULL);
  g_assert_null(st_schedule_load(missing, &error));
  g_assert_nonnull(strstr(error->message, "missing.json"));
}

/* Each fixture is broken in one place; the message names the file and it. */
static void
test_bad_files(void)
{
  static const struct {
    const char *file;
    const char *expect[2];
  } cases[] = {
    {"malformed.json", {"malformed.json:", "malformed JSON"}},
    {"dangling-dep.json",
     {"programs[0].ops[2].deps[0]: dependency on op 40", "which does not come before op 2"}},
    {"unknown-kind.json", {"programs[0].ops[1]: key 'kind'", "unknown op kind 'COMM_BCAST'"}},
    {"stream-range.json", {"programs[0].ops[1]: key 'stream': 3 is out of range", "2 streams"}},
    {"missing-key.json", {"ranks[1]: missing key 'program'", NULL}},
    {"unknown-key.json", {"programs[0].buffers[0]: unknown key 'persistant'", NULL}},
    {"bad-group.json", {"comms[0].groups[0][2]: rank 0 is already in group 0", NULL}},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *relative = g_build_filename("tests/data/schedules", cases[i].file, NULL);
    g_autofree char *path = st_test_src(relative);
    g_autoptr(GError) error = NULL;
    g_autoptr(StSchedule) s = st_schedule_load(path, &error);
    g_assert_null(s);
    g_assert_nonnull(error);
    g_test_message("%s", error->message);
    if (strstr(error->message, cases[i].file) == NULL)
      g_error("%s: file name not in: %s", cases[i].file, error->message);
    for (int j = 0; j < 2 && cases[i].expect[j] != NULL; j++)
      if (strstr(error->message, cases[i].expect[j]) == NULL)
        g_error("%s: '%s' not in: %s", cases[i].file, cases[i].expect[j], error->message);
  }
  /* The fixtures' common part is itself valid. */
  g_autofree char *good = st_test_src("tests/data/schedules/valid.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(StSchedule) s = st_schedule_load(good, &error);
  g_assert_no_error(error);
  g_assert_true(st_schedule_check(s, &error));
}

/* 1024 data-parallel ranks sharing one ~500-op program: per-program checks
 * run once, so the whole check stays far under a second. */
static void
test_check_scale(void)
{
  const int n_ranks = 1024, n_layers = 2, n_micro = 100;
  g_autoptr(StSchedule) s =
    st_schedule_new(make_model(), make_cluster(128, 1024), n_ranks, NULL);
  int world = st_schedule_add_world(s, "world");
  g_autoptr(StProgram) p = st_program_new("dp");
  int compute = st_program_add_stream(p, "compute", 0);
  int comm = st_program_add_stream(p, "comm", 1);
  uint32_t grads = st_program_add_buffer(p, "grads", ST_MEM_GRADS, 1 << 20, FALSE);
  uint32_t prev = 0;
  for (int m = 0; m < n_micro; m++) {
    uint32_t act = st_program_add_buffer(p, "act", ST_MEM_ACTIVATIONS, 1 << 16, FALSE);
    for (int pass = 0; pass < 2; pass++)
      for (int l = 0; l < n_layers; l++) {
        StOp op = st_op_comp(compute, pass == 0 ? ST_PASS_FWD : ST_PASS_BWD,
                             pass == 0 ? l : n_layers - 1 - l, m, 8);
        st_program_begin(p, &op);
        if (p->ops->len > 0)
          st_program_after(p, prev);
        if (m == 0 && pass == 0 && l == 0)
          st_program_alloc(p, grads);
        if (pass == 0 && l == 0)
          st_program_alloc(p, act);
        if (pass == 1 && l == n_layers - 1)
          st_program_free_buffer(p, act);
        prev = st_program_commit(p);
      }
    StOp op = st_op_coll(comm, ST_COLL_ALL_REDUCE, world, 1 << 16);
    st_program_begin(p, &op);
    st_program_after(p, prev);
    if (m == n_micro - 1)
      st_program_free_buffer(p, grads);
    st_program_commit(p);
  }
  g_assert_cmpuint(p->ops->len, ==, 500);
  int pi = st_schedule_add_program(s, g_steal_pointer(&p));
  for (int r = 0; r < n_ranks; r++)
    s->ranks[r].program = pi;
  g_autoptr(GError) error = NULL;
  gint64 start = g_get_monotonic_time();
  g_assert_true(st_schedule_check(s, &error));
  g_assert_no_error(error);
  double seconds = (g_get_monotonic_time() - start) / 1e6;
  g_test_message("check of %d ranks x 500 ops: %.3f ms", n_ranks, seconds * 1e3);
  g_assert_cmpfloat(seconds, <, 1.0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/sched/check/valid", test_check_valid);
  g_test_add_func("/sched/check/faults", test_check_faults);
  g_test_add_func("/sched/check/indices", test_check_indices);
  g_test_add_func("/sched/check/scale", test_check_scale);
  g_test_add_func("/sched/json/round-trip", test_json_round_trip);
  g_test_add_func("/sched/json/save-load", test_save_load);
  g_test_add_func("/sched/json/jobs-and-starts", test_json_jobs_and_starts);
  g_test_add_func("/sched/json/bad-files", test_bad_files);
  return g_test_run();
}
