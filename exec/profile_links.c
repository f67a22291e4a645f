/* profile_links.c: st_profiler_links (profiler.h): collectives and a send
 * matched by a receive, over sizes and rank counts, through the executor's
 * comm backends (exec/comm.h).
 *
 * A small schedule carries what the backends need: `world` ranks (every
 * rank of this process on one device for local comm; rank r on GPU r for
 * NCCL, nodes as torchrun / mpirun lay them out) and one communicator per
 * rank count k, whose single group is ranks 0 .. k-1. For each case every
 * member in this process is one part of a replay (device.h) without a
 * graph: local comm's members meet from threads of their own, NCCL's from
 * their processes. A case's time is the median over runs of when the last
 * member here finished (rank 0's own time under NCCL, as nccl-tests'
 * "-a 0"); algbw and busbw follow from it when the profile is saved.
 *
 * Link classes: local among ranks of one device; with NCCL intra_node when
 * the k ranks fit in one node (LOCAL_WORLD_SIZE), inter_node otherwise.
 */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "exec/comm.h"
#include "exec/profile_private.h"

static const StCollKind COLLECTIVES[] = {ST_COLL_ALL_REDUCE, ST_COLL_REDUCE_SCATTER,
                                         ST_COLL_ALL_GATHER, ST_COLL_BROADCAST, ST_COLL_REDUCE};

static int
env_int(const char *const *names, int fallback)
{
  for (const char *const *n = names; *n != NULL; n++) {
    const char *v = g_getenv(*n);
    if (v != NULL && *v != '\0')
      return atoi(v);
  }
  return fallback;
}

typedef struct {
  ProfDev d;
  const StCommBackend *cb;
  StCommCtx *ctx;
  StSchedule *s;
  gboolean nccl;
  int rank, world, local_world; /* this process's first rank; ranks; ranks per node */
  int n_here;                   /* ranks this process runs: ranks rank .. rank + n_here - 1 */
  void **streams;               /* [n_here] */
  void **send, **recv;          /* [n_here] device buffers of max_bytes */
  int64_t max_bytes;
} Links;

/* One member's part of a case. */
typedef struct {
  Links *ln;
  StCommCall call;
  int peer;         /* p2p: the other rank */
  int mode;         /* 0 collective, 1 send, 2 receive */
} Member;

static gboolean
member_body(gpointer data, void *stream, GError **error)
{
  Member *m = data;
  Links *ln = m->ln;
  m->call.stream = stream;
  gboolean ok = m->mode == 0   ? ln->cb->collective(ln->ctx, &m->call, error)
                : m->mode == 1 ? ln->cb->send(ln->ctx, &m->call, m->peer, error)
                               : ln->cb->recv(ln->ctx, &m->call, m->peer, error);
  if (!ok)
    ln->cb->abort(ln->ctx); /* the other members give up instead of waiting */
  return ok;
}

/* The schedule: a model nobody runs, a cluster of the right shape. */
static StSchedule *
links_schedule(const Links *ln, const int *counts, int n_counts, GError **error)
{
  static const char *model_text =
    "{\"name\": \"links\", \"input\": [1], \"layers\": [{\"name\": \"x\", \"type\": \"relu\"}]}";
  int per_node = ln->nccl ? ln->local_world : 1;
  int nodes = ln->nccl ? (ln->world + per_node - 1) / per_node : 1;
  g_autofree char *cluster_text = g_strdup_printf(
    "{\"name\": \"links\", \"nodes\": %d, \"gpus_per_node\": %d, \"gpu\": {\"name\": \"%s\", "
    "\"memory\": \"1TiB\", \"flops\": {\"fp32\": \"1TFLOP/s\"}, \"memory_bandwidth\": "
    "\"1TB/s\"}, \"links\": {\"intra_node\": {\"bandwidth\": \"1GB/s\", \"latency\": \"1us\"}, "
    "\"inter_node\": {\"bandwidth\": \"1GB/s\", \"latency\": \"1us\"}}}",
    nodes, per_node, "profiled");
  g_autoptr(cJSON) mj = st_json_parse(model_text, strlen(model_text), "<links model>", error);
  g_autoptr(cJSON) cj =
    mj != NULL ? st_json_parse(cluster_text, strlen(cluster_text), "<links cluster>", error)
               : NULL;
  StModel *model = cj != NULL ? st_model_from_json(mj, "<links model>", error) : NULL;
  StCluster *cluster = model != NULL ? st_cluster_from_json(cj, "<links cluster>", error) : NULL;
  if (cluster == NULL) {
    st_model_free(model);
    return NULL;
  }
  g_autofree int32_t *placement = g_new(int32_t, ln->world);
  for (int r = 0; r < ln->world; r++)
    placement[r] = ln->nccl ? r : 0;
  StSchedule *s = st_schedule_new(model, cluster, ln->world, placement);
  g_autofree int32_t *color = g_new(int32_t, ln->world);
  for (int c = 0; c < n_counts; c++) {
    for (int r = 0; r < ln->world; r++)
      color[r] = r < counts[c] ? 0 : -1;
    g_autofree char *name = g_strdup_printf("first-%d", counts[c]);
    st_schedule_add_comm(s, name, color);
  }
  return s;
}

static void
links_close(Links *ln)
{
  if (ln->ctx != NULL)
    ln->cb->close(ln->ctx);
  for (int i = 0; i < ln->n_here; i++) {
    if (ln->send != NULL && ln->send[i] != NULL)
      ln->d.k->free(ln->send[i]);
    if (ln->recv != NULL && ln->recv[i] != NULL)
      ln->d.k->free(ln->recv[i]);
    if (ln->streams != NULL && ln->streams[i] != NULL && i > 0)
      ln->d.b->stream_free(ln->d.dev, ln->streams[i]);
  }
  g_free(ln->send);
  g_free(ln->recv);
  g_free(ln->streams);
  st_schedule_free(ln->s);
  prof_close(&ln->d);
}

/* The comm backend and where this process stands in the world. */
static gboolean
links_place(Links *ln, const StProfilerOptions *o, const int *counts, int n_counts,
            GError **error)
{
  static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", NULL};
  static const char *const size_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
  static const char *const local_rank_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                                "MPI_LOCALRANKID", NULL};
  static const char *const local_size_vars[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                                "MPI_LOCALNRANKS", NULL};
  const char *comm = o->comm != NULL ? o->comm : "auto";
  int world = env_int(size_vars, 0);
  if (g_strcmp0(comm, "auto") == 0)
    comm = world > 1 ? "nccl" : "local";
  ln->nccl = strcmp(comm, "nccl") == 0;
  int most = 0;
  for (int c = 0; c < n_counts; c++)
    most = MAX(most, counts[c]);
  if (ln->nccl) {
    ln->rank = env_int(rank_vars, -1);
    ln->world = world;
    ln->local_world = MAX(env_int(local_size_vars, world), 1);
    ln->n_here = 1;
    if (ln->rank < 0 || world < 2) {
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                  "the nccl backend profiles one rank per process: start it with torchrun or "
                  "mpirun on 2 GPUs or more (RANK and WORLD_SIZE)");
      return FALSE;
    }
    if (most > world) {
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                  "--ranks asks for %d ranks, and %d processes were started", most, world);
      return FALSE;
    }
    return (ln->cb = st_comm_backend_load(comm, error)) != NULL &&
           prof_open(&ln->d, o, env_int(local_rank_vars, 0), ln->d.report, error);
  }
  if ((ln->cb = st_comm_backend_load(comm, error)) == NULL)
    return FALSE;
  ln->rank = 0;
  ln->world = ln->n_here = most;
  ln->local_world = most;
  return prof_open(&ln->d, o, 0, ln->d.report, error);
}

static gboolean
links_open(Links *ln, const int *counts, int n_counts, GError **error)
{
  if (ln->nccl && ln->d.b == &st_device_host) {
    g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                "the nccl backend needs the cuda device backend, not the host");
    return FALSE;
  }
  ln->d.report->writer = ln->rank == 0;
  if ((ln->s = links_schedule(ln, counts, n_counts, error)) == NULL)
    return FALSE;
  g_autofree StExecDevice **devices = g_new0(StExecDevice *, ln->world);
  for (int i = 0; i < ln->n_here; i++)
    devices[ln->rank + i] = ln->d.dev;
  ln->streams = g_new0(void *, ln->n_here);
  ln->send = g_new0(void *, ln->n_here);
  ln->recv = g_new0(void *, ln->n_here);
  for (int i = 0; i < ln->n_here; i++) {
    /* The session's first stream serves rank 0 here; the others get their own. */
    ln->streams[i] = i == 0 ? ln->d.streams[0] : ln->d.b->stream_new(ln->d.dev, 0, error);
    if (ln->streams[i] == NULL ||
        !prof_alloc(&ln->d, &ln->send[i], (size_t)ln->max_bytes, "send buffer", error) ||
        !prof_alloc(&ln->d, &ln->recv[i], (size_t)ln->max_bytes, "receive buffer", error))
      return FALSE;
  }
  ln->ctx = ln->cb->open(ln->s, devices, ln->d.o->timeout_s, error);
  return ln->ctx != NULL;
}

/* One collective of `bytes` over the first k ranks (communicator `comm`);
 * or (coll INVALID) a send from rank `a` to rank `b`. Adds the entry. */
static gboolean
links_case(Links *ln, int comm, int k, StCollKind coll, int a, int b, StLinkClass link,
           int64_t bytes, StProfile *profile, GError **error)
{
  gboolean p2p = coll == ST_COLL_INVALID;
  size_t total = (size_t)MAX(bytes / 4, k); /* fp32 elements */
  g_autofree char *what =
    p2p ? g_strdup_printf("send_recv of %" G_GINT64_FORMAT " bytes, rank %d to %d", bytes, a, b)
        : g_strdup_printf("%s of %" G_GINT64_FORMAT " bytes over %d ranks", st_coll_name(coll),
                          bytes, k);
  Member members[PROF_MAX_PARTS];
  StReplayPart parts[G_N_ELEMENTS(members)];
  int n = 0;
  for (int i = 0; i < ln->n_here && n < (int)G_N_ELEMENTS(members); i++) {
    int r = ln->rank + i;
    if (p2p ? r != a && r != b : r >= k)
      continue;
    Member *m = &members[n];
    *m = (Member){.ln = ln,
                  .call = {.rank = r, .comm = comm, .tag = 0,
                           .kind = p2p ? ST_COLL_INVALID : coll, .send = ln->send[i],
                           .recv = ln->recv[i], .total = total, .dt = ST_KDT_F32, .what = what}};
    if (p2p) {
      m->mode = r == a ? 1 : 2;
      m->peer = r == a ? b : a;
    } else if (coll == ST_COLL_ALL_REDUCE) {
      m->call.recv = ln->send[i]; /* in place, as the executor reduces gradients */
    }
    parts[n] = (StReplayPart){ln->streams[i], member_body, m};
    n++;
  }
  if (n > 0) {
    ProfTiming t;
    if (!prof_measure(&ln->d, parts, n, FALSE, &t, error)) {
      g_prefix_error(error, "%s: ", what);
      return FALSE;
    }
    if (ln->rank == 0 && p2p)
      st_profile_add_p2p(profile, ln->d.device_name, link, bytes, t.span_ns, t.spread_ns);
    else if (ln->rank == 0)
      st_profile_add_link_measured(profile, ln->d.device_name, coll, link, k, bytes, t.span_ns,
                                   t.spread_ns);
  }
  prof_step(&ln->d, what);
  return TRUE;
}

static StLinkClass
link_of(const Links *ln, int first, int last)
{
  if (!ln->nccl)
    return ST_LINK_LOCAL;
  return first / ln->local_world == last / ln->local_world ? ST_LINK_INTRA_NODE
                                                           : ST_LINK_INTER_NODE;
}

/* Rank counts: the given ones, else 2, 4, 8, ... and the most there are
 * (under NCCL the world; locally 4 ranks on one device). */
static GArray *
rank_counts(const StProfilerOptions *o)
{
  GArray *counts = g_array_new(FALSE, FALSE, sizeof(int));
  if (o->ranks != NULL && o->n_ranks > 0) {
    g_array_append_vals(counts, o->ranks, (guint)o->n_ranks);
    return counts;
  }
  static const char *const size_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
  int world = env_int(size_vars, 0);
  gboolean nccl = g_strcmp0(o->comm, "nccl") == 0 ||
                  (g_strcmp0(o->comm, "local") != 0 && world > 1);
  int most = nccl ? MAX(world, 2) : 4;
  for (int k = 2; k <= most; k *= 2)
    g_array_append_val(counts, k);
  if (g_array_index(counts, int, counts->len - 1) != most)
    g_array_append_val(counts, most);
  return counts;
}

gboolean
st_profiler_links(const StProfilerOptions *o, StProfile *profile, StProfilerReport *report,
                  GError **error)
{
  g_autoptr(GArray) counts = rank_counts(o);
  for (guint c = 0; c < counts->len; c++) {
    int k = g_array_index(counts, int, c);
    if (k < 2 || k > PROF_MAX_PARTS) {
      g_set_error(error, ST_EXEC_ERROR, ST_EXEC_ERROR_UNSUPPORTED,
                  "--ranks: %d ranks: a link is measured between 2 and %d ranks", k,
                  PROF_MAX_PARTS);
      return FALSE;
    }
  }
  Links ln = {.d.report = report};
  if (report->notes == NULL)
    report->notes = g_ptr_array_new_with_free_func(g_free);
  const int *cv = (const int *)(gpointer)counts->data;
  if (!links_place(&ln, o, cv, (int)counts->len, error)) {
    links_close(&ln);
    return FALSE;
  }
  gboolean host = ln.d.b == &st_device_host;
  int64_t min_bytes = o->min_bytes > 0 ? o->min_bytes : 1024;
  ln.max_bytes = o->max_bytes > 0 ? o->max_bytes : host ? 16 << 20 : 256 << 20;
  g_autoptr(GArray) sizes = prof_sizes(min_bytes, ln.max_bytes);
  if (!links_open(&ln, cv, (int)counts->len, error)) {
    links_close(&ln);
    return FALSE;
  }
  prof_name_profile(&ln.d, profile);
  /* Point-to-point: ranks 0 and 1, and 0 and the first rank of the next
   * node when there is one. */
  int pairs[2][2] = {{0, 1}, {0, ln.local_world}};
  int n_pairs = ln.nccl && ln.world > ln.local_world ? 2 : 1;
  int comm_of_2 = -1;
  for (guint c = 0; c < counts->len; c++)
    if (g_array_index(counts, int, c) == 2)
      comm_of_2 = (int)c;
  ln.d.total = (int)sizes->len * ((int)counts->len * (int)G_N_ELEMENTS(COLLECTIVES) + n_pairs);
  gboolean ok = TRUE;
  for (guint c = 0; ok && c < counts->len; c++) {
    int k = g_array_index(counts, int, c);
    for (gsize kind = 0; ok && kind < G_N_ELEMENTS(COLLECTIVES); kind++)
      for (guint i = 0; ok && i < sizes->len; i++)
        ok = links_case(&ln, (int)c, k, COLLECTIVES[kind], 0, 0, link_of(&ln, 0, k - 1),
                        g_array_index(sizes, int64_t, i), profile, error);
  }
  /* The pairs talk over a communicator holding both: the widest one. */
  int widest = 0;
  for (guint c = 1; c < counts->len; c++)
    if (g_array_index(counts, int, c) > g_array_index(counts, int, widest))
      widest = (int)c;
  for (int p = 0; ok && p < n_pairs; p++) {
    int a = pairs[p][0], b = pairs[p][1];
    int comm = b < 2 && comm_of_2 >= 0 ? comm_of_2 : widest;
    if (b >= g_array_index(counts, int, widest)) {
      prof_note(&ln.d, "send_recv from rank %d to %d skipped: --ranks stops before rank %d", a,
                b, b);
      continue;
    }
    for (guint i = 0; ok && i < sizes->len; i++)
      ok = links_case(&ln, comm, 2, ST_COLL_INVALID, a, b, link_of(&ln, a, b),
                      g_array_index(sizes, int64_t, i), profile, error);
  }
  links_close(&ln);
  return ok;
}
