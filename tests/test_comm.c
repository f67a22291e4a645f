/* test_comm.c: the local comm backend's collectives that tensor and expert
 * parallelism added, called as the executor calls them: one thread per
 * rank, each with its own buffers on the host device.
 *
 * Worked examples: 3 ranks, rank i's element e holds 100 i + e.
 * - all-to-all of 6 elements (slices of 2): rank j receives from rank i
 *   the elements 2j, 2j + 1 of i's buffer, at 2i: recv_j[2i + k] =
 *   100 i + 2j + k.
 * - all-reduce MAX: every element the largest of the three, 200 + e; SUM
 *   (the default) 300 + 3 e.
 * - reduce-scatter MAX of 6: rank j's 2 elements are 200 + 2j + k.
 * - an all-to-all the group does not divide, or in place, is refused. */
#include "exec/comm.h"
#include "testutil.h"

#define N_RANKS 3

typedef struct {
  const StCommBackend *b;
  StCommCtx *ctx;
  int rank;
  StCollKind kind;
  StCommOp op;
  size_t total;
  float *send, *recv;
  gboolean ok;
  GError *error;
} Member;

static gpointer
member_run(gpointer data)
{
  Member *m = data;
  StCommCall call = {
    .rank = m->rank,
    .comm = 0,
    .tag = 0,
    .kind = m->kind,
    .op = m->op,
    .send = m->send,
    .recv = m->recv,
    .total = m->total,
    .dt = ST_KDT_F32,
    .stream = NULL,
    .what = "a test collective",
  };
  m->ok = m->b->collective(m->ctx, &call, &m->error);
  return NULL;
}

typedef struct {
  StSchedule *s;
  StExecDevice *devices[N_RANKS];
  StCommCtx *ctx;
} World;

static void
world_open(World *w)
{
  w->s = st_test_unit_schedule(N_RANKS, NULL);
  int32_t color[N_RANKS] = {0, 0, 0};
  st_schedule_add_comm(w->s, "world", color);
  for (int r = 0; r < N_RANKS; r++) {
    g_autoptr(GError) error = NULL;
    w->devices[r] = st_device_open("host", 0, &error);
    g_assert_no_error(error);
  }
  g_autoptr(GError) error = NULL;
  w->ctx = st_comm_local.open(w->s, w->devices, 10.0, &error);
  g_assert_no_error(error);
}

static void
world_close(World *w)
{
  st_comm_local.close(w->ctx);
  for (int r = 0; r < N_RANKS; r++)
    w->devices[r]->backend->close(w->devices[r]);
  st_schedule_free(w->s);
}

/* Runs one collective on every rank: send[i][e] = 100 i + e; recv of
 * `recv_elems`. Returns the members (their recv buffers, errors). */
static void
run_all(World *w, StCollKind kind, StCommOp op, size_t total, size_t recv_elems,
        gboolean in_place, Member *m)
{
  GThread *threads[N_RANKS];
  for (int i = 0; i < N_RANKS; i++) {
    m[i] = (Member){&st_comm_local, w->ctx, i, kind, op, total, g_new(float, total), NULL,
                    FALSE, NULL};
    for (size_t e = 0; e < total; e++)
      m[i].send[e] = (float)(100 * i + (int)e);
    m[i].recv = in_place ? m[i].send : g_new0(float, MAX(recv_elems, 1));
    threads[i] = g_thread_new("member", member_run, &m[i]);
  }
  for (int i = 0; i < N_RANKS; i++)
    g_thread_join(threads[i]);
}

static void
members_free(Member *m, gboolean in_place)
{
  for (int i = 0; i < N_RANKS; i++) {
    if (!in_place)
      g_free(m[i].recv);
    g_free(m[i].send);
    g_clear_error(&m[i].error);
  }
}

static void
test_all_to_all(void)
{
  World w;
  world_open(&w);
  Member m[N_RANKS];
  run_all(&w, ST_COLL_ALL_TO_ALL, ST_COMM_SUM, 6, 6, FALSE, m);
  for (int j = 0; j < N_RANKS; j++) {
    g_assert_no_error(m[j].error);
    for (int i = 0; i < N_RANKS; i++)
      for (int k = 0; k < 2; k++)
        g_assert_cmpfloat(m[j].recv[2 * i + k], ==, 100 * i + 2 * j + k);
  }
  members_free(m, FALSE);
  /* 7 elements do not cut into 3 slices; in place is refused */
  run_all(&w, ST_COLL_ALL_TO_ALL, ST_COMM_SUM, 7, 7, FALSE, m);
  for (int j = 0; j < N_RANKS; j++) {
    g_assert_false(m[j].ok);
    g_assert_error(m[j].error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED);
  }
  members_free(m, FALSE);
  run_all(&w, ST_COLL_ALL_TO_ALL, ST_COMM_SUM, 6, 6, TRUE, m);
  for (int j = 0; j < N_RANKS; j++)
    g_assert_false(m[j].ok);
  members_free(m, TRUE);
  world_close(&w);
}

static void
test_max(void)
{
  World w;
  world_open(&w);
  Member m[N_RANKS];
  run_all(&w, ST_COLL_ALL_REDUCE, ST_COMM_MAX, 5, 0, TRUE, m);
  for (int j = 0; j < N_RANKS; j++)
    for (int e = 0; e < 5; e++)
      g_assert_cmpfloat(m[j].send[e], ==, 200 + e);
  members_free(m, TRUE);
  run_all(&w, ST_COLL_ALL_REDUCE, ST_COMM_SUM, 5, 0, TRUE, m);
  for (int j = 0; j < N_RANKS; j++)
    for (int e = 0; e < 5; e++)
      g_assert_cmpfloat(m[j].send[e], ==, 300 + 3 * e);
  members_free(m, TRUE);
  run_all(&w, ST_COLL_REDUCE_SCATTER, ST_COMM_MAX, 6, 2, FALSE, m);
  for (int j = 0; j < N_RANKS; j++)
    for (int k = 0; k < 2; k++)
      g_assert_cmpfloat(m[j].recv[k], ==, 200 + 2 * j + k);
  members_free(m, FALSE);
  world_close(&w);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/comm/local/all-to-all", test_all_to_all);
  g_test_add_func("/comm/local/max", test_max);
  return g_test_run();
}
