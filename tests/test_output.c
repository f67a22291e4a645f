/* test_output.c: memory.csv, comm.csv, ops.csv, trace.json and the plots,
 * from a small timeline written by hand so that every number is known.
 *
 * The schedule: 4 GPUs on one node, one rank per GPU, one program with a
 * compute stream and a comm stream:
 *   op 0  fwd fc1 m0   (compute)           allocates act (50 B)
 *   op 1  bwd fc1 m0   (compute, after 0)  allocates grad (30 B), frees act
 *   op 2  all_reduce   (comm, after 1)     label with a comma and quotes
 *   op 3  optim        (compute, after 2)  frees grad
 * plus a persistent 100 B weight. The timeline is folded: device 0 (rank 0)
 * stands for devices 0-2, device 3 (rank 3) for itself.
 */
#include <glib/gstdio.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "output/output.h"
#include "output/plot.h"
#include "testutil.h"

static StSchedule *
tiny_schedule(void)
{
  StModel *model = g_new0(StModel, 1);
  model->name = g_strdup("tiny");
  model->n_layers = 2;
  model->layers = g_new0(StLayer, 2);
  model->layers[0].name = g_strdup("fc1");
  model->layers[1].name = g_strdup("fc2");
  StCluster *cluster = g_new0(StCluster, 1);
  cluster->name = g_strdup("box");
  cluster->gpu.name = g_strdup("H100");
  cluster->nodes = 1;
  cluster->gpus_per_node = 4;
  cluster->gpus = 4;

  StSchedule *s = st_schedule_new(model, cluster, 4, NULL);
  s->settings.strategy = g_strdup("dp");
  s->settings.description = g_strdup("dp, 4 ranks");
  int world = st_schedule_add_world(s, "world");
  StProgram *p = st_program_new("dp");
  int compute = st_program_add_stream(p, "compute", 0);
  int comm = st_program_add_stream(p, "comm, grads", 1);
  uint32_t weight = st_program_add_buffer(p, "weight", ST_MEM_PARAMS, 100, TRUE);
  (void)weight;
  uint32_t act = st_program_add_buffer(p, "act", ST_MEM_ACTIVATIONS, 50, FALSE);
  uint32_t grad = st_program_add_buffer(p, "grad", ST_MEM_GRADS, 30, FALSE);

  StOp op = st_op_comp(compute, ST_PASS_FWD, 0, 0, 8);
  st_program_begin(p, &op);
  st_program_alloc(p, act);
  uint32_t fwd = st_program_commit(p);

  op = st_op_comp(compute, ST_PASS_BWD, 0, 0, 8);
  st_program_begin(p, &op);
  st_program_after(p, fwd);
  st_program_alloc(p, grad);
  st_program_free_buffer(p, act);
  uint32_t bwd = st_program_commit(p);

  op = st_op_coll(comm, ST_COLL_ALL_REDUCE, world, 30);
  op.label = st_program_label(p, "bucket \"0\", grads");
  st_program_begin(p, &op);
  st_program_after(p, bwd);
  uint32_t reduce = st_program_commit(p);

  op = st_op_elementwise(compute, ST_PASS_OPTIM, -1, 25, 100);
  st_program_begin(p, &op);
  st_program_after(p, reduce);
  st_program_free_buffer(p, grad);
  st_program_commit(p);

  int program = st_schedule_add_program(s, p);
  for (int r = 0; r < 4; r++)
    s->ranks[r].program = program;
  return s;
}

static void
add_op(StTimeline *t, int rank, uint32_t op, StCostSource source, int64_t ready, int64_t start,
       int64_t end)
{
  StOpRecord rec = {.rank = rank, .op = op, .source = (uint8_t)source, .ready_ns = ready,
                    .start_ns = start, .end_ns = end};
  g_array_append_val(t->ops, rec);
}

static void
add_mem(StTimeline *t, int device, int64_t t_ns, StMemCategory category, int64_t delta)
{
  StMemEvent ev = {t_ns, delta, device, device, -1, 0, (uint8_t)category};
  g_array_append_val(t->mem, ev);
}

static void
add_comm(StTimeline *t, int device, int64_t start, int64_t end, double bytes, StLinkClass link)
{
  StCommRecord rec = {start, end, bytes, device, device, 2, (uint8_t)link};
  g_array_append_val(t->comm, rec);
}

/* Rank 3 runs 200 ns behind rank 0 in compute; both all-reduces start at
 * 3.5 us once everyone has arrived. Records and events are interleaved
 * between the devices, as an engine appends them. */
static StTimeline *
tiny_timeline(const StSchedule *s)
{
  StTimeline *t = st_timeline_new(s, FALSE, "simulated");
  int32_t rep[4] = {0, 0, 0, 3};
  memcpy(t->device_rep, rep, sizeof rep);
  memcpy(t->rank_rep, rep, sizeof rep);

  add_op(t, 0, 0, ST_SRC_PROFILED, 0, 0, 1000);
  add_op(t, 3, 0, ST_SRC_PROFILED, 0, 0, 1200);
  add_op(t, 0, 1, ST_SRC_PROFILED, 1000, 1000, 3000);
  add_op(t, 3, 1, ST_SRC_PROFILED, 1200, 1200, 3200);
  add_op(t, 0, 2, ST_SRC_ALPHA_BETA, 3000, 3500, 4500);
  add_op(t, 3, 2, ST_SRC_ALPHA_BETA, 3200, 3500, 4500);
  /* The all-reduces ran as rings. */
  for (guint i = t->ops->len - 2; i < t->ops->len; i++)
    g_array_index(t->ops, StOpRecord, i).algo = st_timeline_algo(t, "ring");
  add_op(t, 0, 3, ST_SRC_ROOFLINE, 4500, 4500, 5000);
  add_op(t, 3, 3, ST_SRC_ROOFLINE, 4500, 4500, 5200);

  add_mem(t, 0, 0, ST_MEM_PARAMS, 100);
  add_mem(t, 3, 0, ST_MEM_PARAMS, 100);
  add_mem(t, 0, 0, ST_MEM_ACTIVATIONS, 50);
  add_mem(t, 3, 0, ST_MEM_ACTIVATIONS, 50);
  add_mem(t, 0, 1000, ST_MEM_GRADS, 30);
  add_mem(t, 3, 1200, ST_MEM_GRADS, 30);
  add_mem(t, 0, 3000, ST_MEM_ACTIVATIONS, -50);
  add_mem(t, 3, 3200, ST_MEM_ACTIVATIONS, -50);
  add_mem(t, 0, 5000, ST_MEM_GRADS, -30);
  add_mem(t, 3, 5200, ST_MEM_GRADS, -30);

  /* 1e6 B in 1 us is 1e12 B/s = 1000 GB/s; device 0 stands for 3 devices. */
  add_comm(t, 0, 3500, 4500, 1e6, ST_LINK_INTRA_NODE);
  /* 2.5e5 B in 0.5 us = 500 GB/s, first inter-node then intra-node. */
  add_comm(t, 3, 3500, 4000, 2.5e5, ST_LINK_INTER_NODE);
  add_comm(t, 3, 4000, 4500, 2.5e5, ST_LINK_INTRA_NODE);
  /* Zero length: contributes nothing, adds no row. */
  add_comm(t, 0, 4500, 4500, 100, ST_LINK_PCIE);
  t->end_ns = 5200;
  return t;
}

static char *
write_and_read(gboolean (*write)(const StTimeline *, const char *, GError **),
               const StTimeline *t, const char *dir, const char *file)
{
  g_autofree char *path = g_build_filename(dir, file, NULL);
  g_autoptr(GError) error = NULL;
  g_assert_true(write(t, path, &error));
  g_assert_no_error(error);
  g_autofree char *tmp = g_strconcat(path, ".tmp", NULL);
  g_assert_false(g_file_test(tmp, G_FILE_TEST_EXISTS));
  return st_test_read(path, NULL);
}

static void
test_memory_csv(void)
{
  g_autoptr(StSchedule) s = tiny_schedule();
  g_autoptr(StTimeline) t = tiny_timeline(s);
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *text = write_and_read(st_csv_write_memory, t, dir, "memory.csv");
  /* Device 0 reaches end_ns (5.2 us) after its last event at 5 us and gets a
   * closing row; device 3's last event is at end_ns already. */
  g_assert_cmpstr(text, ==,
                  "time_us,device,params,grads,optimizer,activations,comm,workspace,total\n"
                  "0.000,0,100,0,0,50,0,0,150\n"
                  "1.000,0,100,30,0,50,0,0,180\n"
                  "3.000,0,100,30,0,0,0,0,130\n"
                  "5.000,0,100,0,0,0,0,0,100\n"
                  "5.200,0,100,0,0,0,0,0,100\n"
                  "0.000,3,100,0,0,50,0,0,150\n"
                  "1.200,3,100,30,0,50,0,0,180\n"
                  "3.200,3,100,30,0,0,0,0,130\n"
                  "5.200,3,100,0,0,0,0,0,100\n");
}

/* Unfolded and measured: the same header; a device with no event at 0
 * (or none at all) still starts with a row of zeros at 0. */
static void
test_memory_csv_unfolded(void)
{
  g_autoptr(StSchedule) s = tiny_schedule();
  g_autoptr(StTimeline) t = st_timeline_new(s, TRUE, "host");
  add_mem(t, 1, 500, ST_MEM_WORKSPACE, 64);
  add_mem(t, 1, 700, ST_MEM_WORKSPACE, -64);
  t->end_ns = 1000;
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *text = write_and_read(st_csv_write_memory, t, dir, "memory.csv");
  g_assert_cmpstr(text, ==,
                  "time_us,device,params,grads,optimizer,activations,comm,workspace,total\n"
                  "0.000,0,0,0,0,0,0,0,0\n"
                  "1.000,0,0,0,0,0,0,0,0\n"
                  "0.000,1,0,0,0,0,0,0,0\n"
                  "0.500,1,0,0,0,0,0,64,64\n"
                  "0.700,1,0,0,0,0,0,0,0\n"
                  "1.000,1,0,0,0,0,0,0,0\n"
                  "0.000,2,0,0,0,0,0,0,0\n"
                  "1.000,2,0,0,0,0,0,0,0\n"
                  "0.000,3,0,0,0,0,0,0,0\n"
                  "1.000,3,0,0,0,0,0,0,0\n");
}

static void
test_comm_csv(void)
{
  g_autoptr(StSchedule) s = tiny_schedule();
  g_autoptr(StTimeline) t = tiny_timeline(s);
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *text = write_and_read(st_csv_write_comm, t, dir, "comm.csv");
  /* From 3.5 us: 1000 GB/s x 3 devices intra-node, 500 GB/s inter-node;
   * from 4 us device 3 moves to intra-node; all ends at 4.5 us. */
  g_assert_cmpstr(text, ==,
                  "time_us,intra_node,inter_node,pcie,local,total\n"
                  "0.000,0.000000,0.000000,0.000000,0.000000,0.000000\n"
                  "3.500,3000.000000,500.000000,0.000000,0.000000,3500.000000\n"
                  "4.000,3500.000000,0.000000,0.000000,0.000000,3500.000000\n"
                  "4.500,0.000000,0.000000,0.000000,0.000000,0.000000\n"
                  "5.200,0.000000,0.000000,0.000000,0.000000,0.000000\n");
}

/* A simulated run's links on the tiny timeline (one step: the window is the
 * whole run, 5.2 us): gpu0 out (100 GB/s, standing for 3 ports) carries
 * flow 0 at 40 GB/s over [3.5, 4.5) us and half of flow 1 (10 GB/s over
 * [3.5, 4) us); node0 nic0 out (10 GB/s) all of flow 1.
 *   gpu0 out: 45 then 40 GB/s: 42500 B, utilization 42500 / (100e9 x 5.2 us)
 *             = 0.081731, busy 1/5.2 = 0.192308, peak 45 GB/s;
 *   nic0 out: 10 GB/s for 0.5 us: 5000 B, utilization 5000 / 52000 = 0.096154,
 *             busy 0.096154, peak 10 GB/s: the bottleneck, alone of its kind
 *             (imbalance 1). */
static void
add_links(StTimeline *t)
{
  t->net = st_net_trace_new();
  StNetLink links[] = {
    {g_strdup("gpu0 out"), 0, 0, ST_LINK_INTRA_NODE, TRUE, 100e9, 3},
    {g_strdup("node0 nic0 out"), 40, 5, ST_LINK_INTER_NODE, TRUE, 10e9, 1},
  };
  g_array_append_vals(t->net->links, links, 2);
  StNetUse l0[] = {{0, 1.0}}, l1[] = {{0, 0.5}, {1, 1.0}};
  st_net_trace_add_list(t->net, l0, 1);
  st_net_trace_add_list(t->net, l1, 2);
  StNetRate r[] = {{3500, 0, 0, 40e9}, {3500, 1, 1, 10e9}, {4000, 1, 1, 0}, {4500, 0, 0, 0}};
  g_array_append_vals(t->net->rates, r, 4);
  t->net->n_flows = 2;
}

static char *
write_summary_and_read(gboolean (*write)(const StSummary *, const char *, GError **),
                       const StSummary *sum, const char *dir, const char *file)
{
  g_autofree char *path = g_build_filename(dir, file, NULL);
  g_autoptr(GError) error = NULL;
  g_assert_true(write(sum, path, &error));
  g_assert_no_error(error);
  return st_test_read(path, NULL);
}

static void
test_links_csv(void)
{
  g_autoptr(StSchedule) s = tiny_schedule();
  g_autoptr(StTimeline) t = tiny_timeline(s);
  add_links(t);
  g_autoptr(StSummary) sum = st_summary_new(t);
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *links = write_summary_and_read(st_csv_write_links, sum, dir, "links.csv");
  g_assert_cmpstr(links, ==,
                  "link,name,class,sends,capacity_GBps,stands_for,bytes,utilization,"
                  "busy_fraction,peak_GBps\n"
                  "0,gpu0 out,intra_node,1,100.000000,3,42500,0.081731,0.192308,45.000000\n"
                  "1,node0 nic0 out,inter_node,1,10.000000,1,5000,0.096154,0.096154,10.000000\n");
  /* The busiest first; rows at 0, at each change, at the end. */
  g_autofree char *rates = write_summary_and_read(st_csv_write_link_rates, sum, dir,
                                                  "link_rates.csv");
  g_assert_cmpstr(rates, ==,
                  "time_us,node0 nic0 out,gpu0 out\n"
                  "0.000,0.000000,0.000000\n"
                  "3.500,10.000000,45.000000\n"
                  "4.000,0.000000,40.000000\n"
                  "4.500,0.000000,0.000000\n"
                  "5.200,0.000000,0.000000\n");
  /* The report names the bottleneck; comm.csv sums each class over the
   * links it stands for: intra 3 x 45 then 3 x 40, inter 10. */
  g_assert_cmpint(sum->bottleneck, ==, 1);
  g_assert_cmpfloat_with_epsilon(sum->link_imbalance, 1, 1e-12);
  g_autoptr(cJSON) report = st_report_to_json(sum);
  const cJSON *b = cJSON_GetObjectItem(cJSON_GetObjectItem(report, "comm"), "bottleneck");
  g_assert_cmpstr(cJSON_GetObjectItem(b, "link")->valuestring, ==, "node0 nic0 out");
  g_assert_cmpfloat_with_epsilon(cJSON_GetObjectItem(b, "utilization")->valuedouble,
                                 5000.0 / 52000, 1e-12);
  g_autofree char *comm = write_and_read(st_csv_write_comm, t, dir, "comm.csv");
  g_assert_cmpstr(comm, ==,
                  "time_us,intra_node,inter_node,pcie,local,total\n"
                  "0.000,0.000000,0.000000,0.000000,0.000000,0.000000\n"
                  "3.500,135.000000,10.000000,0.000000,0.000000,145.000000\n"
                  "4.000,120.000000,0.000000,0.000000,0.000000,120.000000\n"
                  "4.500,0.000000,0.000000,0.000000,0.000000,0.000000\n"
                  "5.200,0.000000,0.000000,0.000000,0.000000,0.000000\n");
}

static void
test_ops_csv(void)
{
  g_autoptr(StSchedule) s = tiny_schedule();
  g_autoptr(StTimeline) t = tiny_timeline(s);
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *text = write_and_read(st_csv_write_ops, t, dir, "ops.csv");
  /* Lanes: device 0 rank 0 compute (0), comm (1); device 3 rank 3 compute
   * (2), comm (3). Fields with a comma are quoted; a double
   * quote becomes a single quote (gnuplot cannot read doubled quotes). */
  g_assert_cmpstr(
    text, ==,
    "rank,device,stream,stream_name,lane,step,op,kind,what,name,layer,micro,batch,bytes,"
    "ready_us,start_us,end_us,duration_us,source,algo\n"
    "0,0,0,compute,0,0,0,COMP,fwd,fwd fc1 m0,fc1,0,8,0,0.000,0.000,1.000,1.000,profiled,\n"
    "0,0,0,compute,0,0,1,COMP,bwd,bwd fc1 m0,fc1,0,8,0,1.000,1.000,3.000,2.000,profiled,\n"
    "0,0,0,compute,0,0,3,COMP,optim,optim,,,0,100,4.500,4.500,5.000,0.500,roofline,\n"
    "0,0,1,\"comm, grads\",1,0,2,COMM_COLL,all_reduce,\"all_reduce bucket '0', grads\",,,0,"
    "30,3.000,3.500,4.500,1.000,alpha_beta,ring\n"
    "3,3,0,compute,2,0,0,COMP,fwd,fwd fc1 m0,fc1,0,8,0,0.000,0.000,1.200,1.200,profiled,\n"
    "3,3,0,compute,2,0,1,COMP,bwd,bwd fc1 m0,fc1,0,8,0,1.200,1.200,3.200,2.000,profiled,\n"
    "3,3,0,compute,2,0,3,COMP,optim,optim,,,0,100,4.500,4.500,5.200,0.700,roofline,\n"
    "3,3,1,\"comm, grads\",3,0,2,COMM_COLL,all_reduce,\"all_reduce bucket '0', grads\",,,0,"
    "30,3.200,3.500,4.500,1.000,alpha_beta,ring\n");
}

static int
count_events(const cJSON *events, const char *ph, const char *name)
{
  int n = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, events)
  {
    const char *p = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
    const char *nm = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
    n += strcmp(p, ph) == 0 && (name == NULL || (nm != NULL && strcmp(nm, name) == 0));
  }
  return n;
}

static double
number(const cJSON *obj, const char *key)
{
  const cJSON *item = cJSON_GetObjectItem(obj, key);
  g_assert_nonnull(item);
  g_assert_true(cJSON_IsNumber(item));
  return item->valuedouble;
}

static void
test_trace(void)
{
  g_autoptr(StSchedule) s = tiny_schedule();
  g_autoptr(StTimeline) t = tiny_timeline(s);
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *text = write_and_read(st_trace_write, t, dir, "trace.json");
  g_autoptr(cJSON) root = cJSON_Parse(text);
  g_assert_nonnull(root);
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(root, "displayTimeUnit")), ==, "ns");
  const cJSON *other = cJSON_GetObjectItem(root, "otherData");
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(other, "strategy")), ==, "dp");
  g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(other, "origin")), ==, "simulated");
  const cJSON *events = cJSON_GetObjectItem(root, "traceEvents");
  g_assert_true(cJSON_IsArray(events));

  /* Two recorded devices (pids 1 and 4), four (rank, stream) threads, eight
   * ops, four memory changes per device, and per rank two cross-stream
   * dependencies (all_reduce after bwd, optim after all_reduce). */
  g_assert_cmpint(count_events(events, "M", "process_name"), ==, 2);
  g_assert_cmpint(count_events(events, "M", "thread_name"), ==, 4);
  g_assert_cmpint(count_events(events, "M", "thread_sort_index"), ==, 4);
  g_assert_cmpint(count_events(events, "X", NULL), ==, 8);
  g_assert_cmpint(count_events(events, "C", "memory"), ==, 8);
  g_assert_cmpint(count_events(events, "s", "dep"), ==, 4);
  g_assert_cmpint(count_events(events, "f", "dep"), ==, 4);

  g_autoptr(GHashTable) starts = g_hash_table_new(g_direct_hash, g_direct_equal);
  const cJSON *e;
  cJSON_ArrayForEach(e, events)
  {
    const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
    int pid = (int)number(e, "pid");
    g_assert_true(pid == 1 || pid == 4);
    const cJSON *args = cJSON_GetObjectItem(e, "args");
    if (strcmp(ph, "M") == 0 && strcmp(name, "process_name") == 0) {
      const char *label = cJSON_GetStringValue(cJSON_GetObjectItem(args, "name"));
      g_assert_cmpstr(label, ==,
                      pid == 1 ? "GPU 0 (node 0) stands for 3 devices" : "GPU 3 (node 0)");
    } else if (strcmp(ph, "M") == 0 && strcmp(name, "thread_name") == 0) {
      int tid = (int)number(e, "tid");
      const char *label = cJSON_GetStringValue(cJSON_GetObjectItem(args, "name"));
      const char *want[] = {"rank 0: compute", "rank 0: comm, grads", "rank 3: compute",
                            "rank 3: comm, grads"};
      g_assert_cmpint(tid, >=, 1);
      g_assert_cmpint(tid, <=, 4);
      g_assert_cmpstr(label, ==, want[tid - 1]);
    } else if (strcmp(ph, "X") == 0 && strcmp(name, "all_reduce bucket \"0\", grads") == 0) {
      g_assert_cmpfloat_with_epsilon(number(e, "ts"), 3.5, 1e-9);
      g_assert_cmpfloat_with_epsilon(number(e, "dur"), 1.0, 1e-9);
      g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(e, "cat")), ==, "COMM_COLL");
      g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(args, "source")), ==,
                      "alpha_beta");
      g_assert_cmpfloat_with_epsilon(number(args, "bytes"), 30, 1e-9);
      g_assert_cmpfloat_with_epsilon(number(args, "ready_us"), pid == 1 ? 3.0 : 3.2, 1e-9);
    } else if (strcmp(ph, "C") == 0 && pid == 1 && number(e, "ts") == 1.0) {
      g_assert_cmpfloat(number(args, "params"), ==, 100);
      g_assert_cmpfloat(number(args, "grads"), ==, 30);
      g_assert_cmpfloat(number(args, "activations"), ==, 50);
      g_assert_cmpfloat(number(args, "workspace"), ==, 0);
    } else if (strcmp(ph, "s") == 0) {
      g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(e, "cat")), ==, "dep");
      g_hash_table_insert(starts, GINT_TO_POINTER((int)number(e, "id")), (gpointer)e);
    } else if (strcmp(ph, "f") == 0) {
      /* Every finish has its start, from the other stream of the same rank,
       * and binds to the slice that encloses it. */
      const cJSON *s_event =
        g_hash_table_lookup(starts, GINT_TO_POINTER((int)number(e, "id")));
      g_assert_nonnull(s_event);
      g_assert_cmpint((int)number(s_event, "pid"), ==, pid);
      g_assert_cmpint((int)number(s_event, "tid"), !=, (int)number(e, "tid"));
      g_assert_cmpstr(cJSON_GetStringValue(cJSON_GetObjectItem(e, "bp")), ==, "e");
      g_assert_cmpfloat(number(s_event, "ts"), <, number(e, "ts"));
    }
  }
  g_assert_cmpint(g_hash_table_size(starts), ==, 4);
}

/* The same timeline gives the same bytes, every file. */
static void
test_deterministic(void)
{
  g_autoptr(StSchedule) s = tiny_schedule();
  g_autoptr(StTimeline) t = tiny_timeline(s);
  g_autofree char *a = st_test_tmpdir();
  g_autofree char *b = st_test_tmpdir();
  gboolean (*writers[])(const StTimeline *, const char *, GError **) = {
    st_csv_write_memory, st_csv_write_comm, st_csv_write_ops, st_trace_write};
  const char *files[] = {"memory.csv", "comm.csv", "ops.csv", "trace.json"};
  for (int i = 0; i < 4; i++) {
    g_autofree char *x = write_and_read(writers[i], t, a, files[i]);
    g_autofree char *y = write_and_read(writers[i], t, b, files[i]);
    g_assert_cmpstr(x, ==, y);
  }
}

static void
test_write_error_names_path(void)
{
  g_autoptr(StSchedule) s = tiny_schedule();
  g_autoptr(StTimeline) t = tiny_timeline(s);
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "missing", "memory.csv", NULL);
  g_autofree char *trace = g_build_filename(dir, "missing", "trace.json", NULL);
  g_autoptr(GError) error = NULL;
  g_assert_false(st_csv_write_memory(t, path, &error));
  g_assert_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO);
  g_assert_nonnull(strstr(error->message, path));
  g_clear_error(&error);
  g_assert_false(st_trace_write(t, trace, &error));
  g_assert_error(error, ST_OUTPUT_ERROR, ST_ERROR_IO);
  g_assert_nonnull(strstr(error->message, trace));
}

/* ---- plots --------------------------------------------------------------- */

/* A run directory as `stagger sim --out` leaves it, minus the trace. */
static void
write_run(const StTimeline *t, const char *dir, const char *strategy)
{
  g_autoptr(GError) error = NULL;
  g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
  g_autofree char *report = g_build_filename(dir, "report.json", NULL);
  g_autofree char *json = g_strdup_printf("{\"strategy\": \"%s\"}\n", strategy);
  g_assert_true(g_file_set_contents(report, json, -1, &error));
  g_autofree char *memory = g_build_filename(dir, "memory.csv", NULL);
  g_autofree char *comm = g_build_filename(dir, "comm.csv", NULL);
  g_autofree char *ops = g_build_filename(dir, "ops.csv", NULL);
  g_assert_true(st_csv_write_memory(t, memory, &error));
  g_assert_true(st_csv_write_comm(t, comm, &error));
  g_assert_true(st_csv_write_ops(t, ops, &error));
  g_assert_no_error(error);
}

static void
assert_png(const char *path)
{
  static const guchar signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  gsize length = 0;
  g_autofree char *data = st_test_read(path, &length);
  g_assert_cmpuint(length, >, 8);
  g_assert_cmpmem(data, 8, signature, 8);
}

static gboolean
have_gnuplot(void)
{
  g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
  if (gnuplot == NULL)
    g_test_skip("gnuplot not on PATH");
  return gnuplot != NULL;
}

static void
test_plot_run(void)
{
  if (!have_gnuplot())
    return;
  g_autoptr(StSchedule) s = tiny_schedule();
  g_autoptr(StTimeline) t = tiny_timeline(s);
  g_autofree char *dir = st_test_tmpdir();
  write_run(t, dir, "dp");
  g_autofree char *plots = st_test_src("plots");
  g_autoptr(GPtrArray) written = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GError) error = NULL;
  g_assert_true(st_plot_dir(dir, plots, "png", written, &error));
  g_assert_no_error(error);
  const char *want[] = {"memory.png", "comm.png", "gantt.png"};
  g_assert_cmpuint(written->len, ==, G_N_ELEMENTS(want));
  for (guint i = 0; i < written->len; i++) {
    g_autofree char *path = g_build_filename(dir, want[i], NULL);
    g_assert_cmpstr(g_ptr_array_index(written, i), ==, path);
    assert_png(path);
  }

  g_ptr_array_set_size(written, 0);
  g_assert_true(st_plot_dir(dir, plots, "svg", written, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(written->len, ==, 3);
  g_autofree char *svg = st_test_read(g_ptr_array_index(written, 0), NULL);
  g_assert_nonnull(strstr(svg, "<svg"));
}

/* `stagger sim --strategy a,b` leaves one subdirectory per strategy: each is
 * rendered, then the overlays go in the parent. */
static void
test_plot_compare(void)
{
  if (!have_gnuplot())
    return;
  g_autoptr(StSchedule) s = tiny_schedule();
  g_autoptr(StTimeline) t = tiny_timeline(s);
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *a = g_build_filename(dir, "dp", NULL);
  g_autofree char *b = g_build_filename(dir, "zero", NULL);
  write_run(t, a, "dp");
  write_run(t, b, "zero");
  g_autofree char *plots = st_test_src("plots");
  g_autoptr(GPtrArray) written = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GError) error = NULL;
  g_assert_true(st_plot_dir(dir, plots, NULL, written, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(written->len, ==, 8);
  for (guint i = 0; i < written->len; i++)
    assert_png(g_ptr_array_index(written, i));
  g_autofree char *overlay = g_build_filename(dir, "compare_memory.png", NULL);
  g_assert_cmpstr(g_ptr_array_index(written, 6), ==, overlay);
}

static void
test_plot_errors(void)
{
  g_autofree char *dir = st_test_tmpdir();
  g_autofree char *plots = st_test_src("plots");
  g_autoptr(GPtrArray) written = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GError) error = NULL;
  g_assert_false(st_plot_dir(dir, plots, "gif", written, &error));
  g_assert_error(error, ST_OUTPUT_ERROR, ST_ERROR_INVALID);
  g_clear_error(&error);
  /* Nothing to plot: the error names the directory (known before gnuplot
   * is looked for). */
  g_assert_false(st_plot_dir(dir, plots, "png", written, &error));
  g_assert_error(error, ST_OUTPUT_ERROR, ST_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, dir));
  g_assert_cmpuint(written->len, ==, 0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/output/memory-csv", test_memory_csv);
  g_test_add_func("/output/memory-csv-unfolded", test_memory_csv_unfolded);
  g_test_add_func("/output/comm-csv", test_comm_csv);
  g_test_add_func("/output/links-csv", test_links_csv);
  g_test_add_func("/output/ops-csv", test_ops_csv);
  g_test_add_func("/output/trace", test_trace);
  g_test_add_func("/output/deterministic", test_deterministic);
  g_test_add_func("/output/write-error", test_write_error_names_path);
  g_test_add_func("/output/plot/run", test_plot_run);
  g_test_add_func("/output/plot/compare", test_plot_compare);
  g_test_add_func("/output/plot/errors", test_plot_errors);
  return g_test_run();
}
