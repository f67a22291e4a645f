/* engine_net.c: communication in the engine.
 *
 * A collective waits until every simulated member of its group has issued it
 * (the n-th collective of each member on that group meets the n-th of the
 * others); a send waits for its receive and the other way round. Then the
 * ops become one flow that runs the plan's phases one after another: a fixed
 * latency, then the phase's bytes as a flow over the links its use list
 * names (engine_links.c), sharing each of them max-min fairly with every
 * other flow there (engine_share.c). Collectives load every member device's
 * links, a transfer the sender's out side and the receiver's in side, a
 * copy its device's PCIe link or memory.
 */
#include "engine/engine_internal.h"

#include "base/util.h"
#include "cost/framework.h"

#include <string.h>

typedef struct {
  int32_t comm, group;
  int64_t seq;
} InstKey;

typedef struct {
  InstKey key;
  int32_t arrived;
  int32_t expected;
  GArray *members; /* OpRef */
} Instance;

typedef struct {
  int32_t comm, group, kind;
  int32_t pieces; /* issued as this many collectives one after another */
  int64_t bytes;
} PlanKey;

typedef struct {
  int32_t src, dst, tag; /* simulated ranks */
} PeerKey;

typedef struct {
  PeerKey key;
  GQueue sends; /* OpRef * */
  GQueue recvs;
} PeerQueue;

typedef struct {
  int32_t comm, group;
} GroupKey;

typedef struct {
  GroupKey key;
  int32_t n_sim;     /* simulated members */
  StGroupShape shape;
} GroupInfo;

/* A collective's plan with the use list of each phase. */
typedef struct {
  StCommPlan plan;
  int32_t lists[ST_COMM_MAX_PHASES];
} Prepared;

/* ---- hashing of the small keys ------------------------------------------- */

static guint
mix(guint h, int64_t v)
{
  return (h ^ (guint)(v ^ (v >> 32))) * 16777619u;
}

static guint
inst_hash(gconstpointer p)
{
  const InstKey *k = p;
  return mix(mix(mix(2166136261u, k->comm), k->group), k->seq);
}

static gboolean
inst_equal(gconstpointer a, gconstpointer b)
{
  const InstKey *x = a, *y = b;
  return x->comm == y->comm && x->group == y->group && x->seq == y->seq;
}

static guint
plan_hash(gconstpointer p)
{
  const PlanKey *k = p;
  return mix(mix(mix(mix(mix(2166136261u, k->comm), k->group), k->kind), k->pieces), k->bytes);
}

static gboolean
plan_equal(gconstpointer a, gconstpointer b)
{
  const PlanKey *x = a, *y = b;
  return x->comm == y->comm && x->group == y->group && x->kind == y->kind &&
         x->pieces == y->pieces && x->bytes == y->bytes;
}

static guint
peer_hash(gconstpointer p)
{
  const PeerKey *k = p;
  return mix(mix(mix(2166136261u, k->src), k->dst), k->tag);
}

static gboolean
peer_equal(gconstpointer a, gconstpointer b)
{
  const PeerKey *x = a, *y = b;
  return x->src == y->src && x->dst == y->dst && x->tag == y->tag;
}

static guint
group_hash(gconstpointer p)
{
  const GroupKey *k = p;
  return mix(mix(2166136261u, k->comm), k->group);
}

static gboolean
group_equal(gconstpointer a, gconstpointer b)
{
  const GroupKey *x = a, *y = b;
  return x->comm == y->comm && x->group == y->group;
}

static void
instance_free(gpointer p)
{
  Instance *inst = p;
  g_array_unref(inst->members);
  g_free(inst);
}

static void
peer_queue_free(gpointer p)
{
  PeerQueue *q = p;
  g_queue_clear_full(&q->sends, g_free);
  g_queue_clear_full(&q->recvs, g_free);
  g_free(q);
}

void
net_init(Engine *e)
{
  e->instances = g_hash_table_new_full(inst_hash, inst_equal, NULL, instance_free);
  e->p2p = g_hash_table_new_full(peer_hash, peer_equal, NULL, peer_queue_free);
  e->plans = g_hash_table_new_full(plan_hash, plan_equal, g_free, g_free);
  e->groups = g_hash_table_new_full(group_hash, group_equal, NULL, g_free);
  e->flows = g_ptr_array_new();
  links_init(e);
  share_init(e);
}

static void
flow_destroy(Flow *f)
{
  g_array_unref(f->members);
  g_free(f);
}

void
net_clear(Engine *e)
{
  if (e->flows == NULL)
    return;
  /* Flows still alive after a failure. */
  for (guint i = 0; i < e->flows->len; i++)
    flow_destroy(g_ptr_array_index(e->flows, i));
  g_clear_pointer(&e->flows, g_ptr_array_unref);
  g_clear_pointer(&e->instances, g_hash_table_unref);
  g_clear_pointer(&e->p2p, g_hash_table_unref);
  g_clear_pointer(&e->plans, g_hash_table_unref);
  g_clear_pointer(&e->groups, g_hash_table_unref);
  share_clear(e);
  links_clear(e);
}

/* ---- flows --------------------------------------------------------------- */

static void
flow_finish(Engine *e, Flow *f)
{
  for (guint i = 0; i < f->members->len; i++)
    engine_complete(e, &g_array_index(f->members, OpRef, i), f->start_ns, f->plan.source,
                    f->plan.algo);
  /* Out of the list of live flows: the last one takes its place. */
  Flow *last = g_ptr_array_index(e->flows, e->flows->len - 1);
  last->slot = f->slot;
  g_ptr_array_index(e->flows, f->slot) = last;
  g_ptr_array_set_size(e->flows, e->flows->len - 1);
  flow_destroy(f);
}

/* The flow's kernels take (sign 1) or give back (-1) what they hold on its
 * members' devices, and the kernels there are re-rated. A copy holds
 * nothing (copy engines); a member rank sharing a device with another adds
 * its own kernel. */
static void
hold(Engine *e, Flow *f, int sign)
{
  if (f->held.fill <= 0 && f->held.mem <= 0)
    return;
  for (guint i = 0; i < f->members->len; i++) {
    int d = e->sims[g_array_index(f->members, OpRef, i).sim].state;
    DeviceState *dev = &e->devices[d];
    dev->comm_kernels += sign;
    dev->comm_fill = dev->comm_kernels > 0 ? dev->comm_fill + sign * f->held.fill : 0;
    dev->comm_mem = dev->comm_kernels > 0 ? dev->comm_mem + sign * f->held.mem : 0;
    compute_reshare(e, d);
  }
}

/* Enters the bandwidth part of the current phase; FALSE when it has no bytes. */
static gboolean
enter_bandwidth(Engine *e, Flow *f)
{
  const StCommPhase *ph = &f->plan.phases[f->phase];
  if (ph->bytes <= 0)
    return FALSE;
  f->remaining = ph->bytes;
  share_attach(e, f, f->lists[f->phase]);
  /* NCCL's kernels hold SMs and HBM beside the compute (copies use the copy
   * engines), under a framework that says so (not a bound, not none). */
  const StFramework *fw = e->compute.framework;
  if (strcmp(f->plan.algo, "copy") != 0 && fw != NULL && fw->comm_contends) {
    f->held = st_comm_share_traits(e->s->cluster, ph);
    hold(e, f, 1);
  }
  return TRUE;
}

/* Runs phases from the current one until one has to wait; finishes the flow
 * when none is left. */
static void
flow_advance(Engine *e, Flow *f)
{
  for (; f->phase < f->plan.n_phases; f->phase++) {
    const StCommPhase *ph = &f->plan.phases[f->phase];
    if (ph->latency_ns > 0) {
      f->in_latency = TRUE;
      st_queue_push(&e->queue, &f->ev.node, st_time_add(e->now, ph->latency_ns));
      return;
    }
    if (enter_bandwidth(e, f))
      return;
  }
  flow_finish(e, f);
}

void
net_on_event(Engine *e, Flow *f)
{
  if (f->in_latency) {
    f->in_latency = FALSE;
    if (enter_bandwidth(e, f))
      return;
  } else {
    share_detach(e, f);
    hold(e, f, -1);
    f->held = (StShareTraits){0, 0, 0};
  }
  f->phase++;
  flow_advance(e, f);
}

/* A flow over `plan` whose phase i loads lists[i]. */
static Flow *
flow_new(Engine *e, const StCommPlan *plan, const int32_t *lists)
{
  Flow *f = g_new0(Flow, 1);
  st_event_node_init(&f->ev.node);
  f->ev.kind = EV_FLOW;
  f->plan = *plan;
  memcpy(f->lists, lists, sizeof f->lists);
  f->members = g_array_new(FALSE, FALSE, sizeof(OpRef));
  f->start_ns = e->now;
  f->slot = (int32_t)e->flows->len;
  g_ptr_array_add(e->flows, f);
  return f;
}

/* ---- collectives --------------------------------------------------------- */

static GroupInfo *
group_info(Engine *e, int comm, int group)
{
  GroupKey key = {comm, group};
  GroupInfo *info = g_hash_table_lookup(e->groups, &key);
  if (info != NULL)
    return info;
  const StComm *c = st_schedule_comm(e->s, comm);
  info = g_new0(GroupInfo, 1);
  info->key = key;
  int canon = links_canon(e, comm);
  if (canon != comm) {
    /* The same groups, counted and shaped once. */
    const GroupInfo *same = group_info(e, canon, group);
    info->n_sim = same->n_sim;
    info->shape = same->shape;
    g_hash_table_insert(e->groups, &info->key, info);
    return info;
  }
  for (int i = c->offsets[group]; i < c->offsets[group + 1]; i++)
    info->n_sim += e->sim_of_rank[c->members[i]] >= 0;
  st_schedule_group_shape(e->s, comm, group, &info->shape);
  g_hash_table_insert(e->groups, &info->key, info);
  return info;
}

/* A collective issued as `pieces` collectives of bytes / pieces one after
 * another (a ZeRO-3 gather in the framework's buckets) moves the same
 * bytes and pays each piece's latency. */
static const Prepared *
collective_plan(Engine *e, int comm, int group, StCollKind kind, int64_t bytes, int pieces)
{
  PlanKey key = {comm, group, kind, pieces, bytes};
  Prepared *p = g_hash_table_lookup(e->plans, &key);
  if (p != NULL)
    return p;
  const GroupInfo *info = group_info(e, comm, group);
  p = g_new0(Prepared, 1);
  GError *error = NULL;
  if (!st_comm_plan_collective(e->s->cluster, e->options->profile, e->comm_algo, kind, bytes,
                               &info->shape, &p->plan, &error)) {
    engine_fail(e, "%s on communicator '%s': %s", st_coll_name(kind),
                st_schedule_comm(e->s, comm)->name, error->message);
    g_error_free(error);
    p->plan.n_phases = 0;
  }
  for (int i = 0; i < p->plan.n_phases; i++) {
    p->plan.phases[i].latency_ns = st_ns_ceil((double)p->plan.phases[i].latency_ns * pieces);
    p->lists[i] = links_collective(e, comm, group, &p->plan.phases[i].use, &info->shape);
  }
  g_hash_table_insert(e->plans, g_memdup2(&key, sizeof key), p);
  return p;
}

static void start_copy(Engine *e, const OpRef *ref, StNetKind kind, int64_t bytes);

void
net_collective(Engine *e, const OpRef *ref)
{
  SimRank *sr = &e->sims[ref->sim];
  const StOp *op = engine_op(e, ref);
  const StComm *c = st_schedule_comm(e->s, op->comm);
  InstKey key = {op->comm, c->group_of[sr->rank], sr->coll_seq[op->comm]++};
  Instance *inst = g_hash_table_lookup(e->instances, &key);
  if (inst == NULL) {
    inst = g_new0(Instance, 1);
    inst->key = key;
    inst->expected = group_info(e, key.comm, key.group)->n_sim;
    inst->members = g_array_new(FALSE, FALSE, sizeof(OpRef));
    g_hash_table_insert(e->instances, &inst->key, inst);
  }
  g_array_append_val(inst->members, *ref);
  if (++inst->arrived < inst->expected)
    return;

  /* A group of one moves nothing, but an out-of-place collective (one that
   * allocates where its result goes) still copies its input there, as NCCL
   * does with one rank: a device-to-device copy. */
  if (c->offsets[key.group + 1] - c->offsets[key.group] == 1 && op->n_alloc > 0) {
    g_hash_table_remove(e->instances, &key);
    start_copy(e, ref, ST_NET_MEM, op->bytes);
    return;
  }
  int64_t bucket = e->s->settings.gather_bucket_bytes;
  gboolean params = op->data == ST_DATA_PARAMS || op->data == ST_DATA_PARAMS_PACKED;
  int pieces = bucket > 0 && params && op->sub == ST_COLL_ALL_GATHER
                 ? (int)MIN(st_div_ceil(op->bytes, bucket), 1 << 20)
                 : 1;
  const Prepared *p = collective_plan(e, key.comm, key.group, op->sub, op->bytes, pieces);
  Flow *f = flow_new(e, &p->plan, p->lists);
  g_array_append_vals(f->members, inst->members->data, inst->members->len);
  g_hash_table_remove(e->instances, &key);
  flow_advance(e, f);
}

/* ---- point to point ------------------------------------------------------- */

static PeerQueue *
peer_queue(Engine *e, int src, int dst, int tag)
{
  PeerKey key = {src, dst, tag};
  PeerQueue *q = g_hash_table_lookup(e->p2p, &key);
  if (q == NULL) {
    q = g_new0(PeerQueue, 1);
    q->key = key;
    g_queue_init(&q->sends);
    g_queue_init(&q->recvs);
    g_hash_table_insert(e->p2p, &q->key, q);
  }
  return q;
}

/* The real rank a simulated rank's p2p op talks to. */
static int
peer_of(Engine *e, const OpRef *ref)
{
  const StOp *op = engine_op(e, ref);
  return st_schedule_peer_rank(e->s, e->sims[ref->sim].rank, op->comm, op->peer);
}

/* What a measured transfer loads per byte of the unit use (1 when modelled). */
static double
p2p_scale(const StCommPhase *ph)
{
  return MAX(ph->use.gpu, MAX(ph->use.mem, ph->use.nic_dev));
}

static void
start_transfer(Engine *e, const OpRef *send, const OpRef *recv)
{
  const StOp *op = engine_op(e, send);
  int src_dev = e->sims[send->sim].device;
  /* The link is the one between the real sender and its real receiver. */
  int real_dst = e->s->ranks[peer_of(e, send)].device;
  StCommPlan plan;
  st_comm_plan_p2p_profiled(e->s->cluster, e->options->profile, src_dev, real_dst, op->bytes,
                            &plan);
  int32_t lists[ST_COMM_MAX_PHASES] = {0};
  if (plan.n_phases > 0)
    lists[0] = links_p2p(e, send->sim, op, p2p_scale(&plan.phases[0]));
  Flow *f = flow_new(e, &plan, lists);
  g_array_append_val(f->members, *send);
  g_array_append_val(f->members, *recv);
  flow_advance(e, f);
}

void
net_p2p(Engine *e, const OpRef *ref)
{
  const StOp *op = engine_op(e, ref);
  int me = e->sims[ref->sim].rank;
  int peer = e->fold->rank_rep[peer_of(e, ref)];
  gboolean send = op->kind == ST_OP_COMM_SEND;
  PeerQueue *q = send ? peer_queue(e, me, peer, op->tag) : peer_queue(e, peer, me, op->tag);
  GQueue *mine = send ? &q->sends : &q->recvs;
  GQueue *theirs = send ? &q->recvs : &q->sends;
  if (g_queue_is_empty(theirs)) {
    g_queue_push_tail(mine, g_memdup2(ref, sizeof *ref));
    return;
  }
  g_autofree OpRef *other = g_queue_pop_head(theirs);
  if (send)
    start_transfer(e, ref, other);
  else
    start_transfer(e, other, ref);
}

/* ---- copies --------------------------------------------------------------- */

static void
start_copy(Engine *e, const OpRef *ref, StNetKind kind, int64_t bytes)
{
  int dev = e->sims[ref->sim].device;
  StLinkClass link = st_net_kind_class(kind);
  StCommPlan plan = {
    .algo = "copy",
    .source = ST_SRC_ALPHA_BETA,
    .n_phases = 1,
    .phases = {{.link = link,
                .latency_ns = st_cluster_link_latency(e->s->cluster, link),
                .bytes = (double)bytes,
                .bandwidth = st_cluster_link_bandwidth(e->s->cluster, link)}},
  };
  int32_t lists[ST_COMM_MAX_PHASES] = {links_copy(e, dev, kind)};
  Flow *f = flow_new(e, &plan, lists);
  g_array_append_val(f->members, *ref);
  flow_advance(e, f);
}

void
net_copy(Engine *e, const OpRef *ref)
{
  const StOp *op = engine_op(e, ref);
  StNetKind kind = op->sub == ST_COPY_D2D   ? ST_NET_MEM
                   : op->sub == ST_COPY_H2D ? ST_NET_PCIE_DOWN
                                            : ST_NET_PCIE_UP;
  if (kind != ST_NET_MEM && !e->s->cluster->links[ST_LINK_PCIE].present) {
    engine_fail(e, "a %s copy needs the cluster's pcie link, and '%s' has none",
                st_copy_name(op->sub), e->s->cluster->name);
    return;
  }
  start_copy(e, ref, kind, op->bytes);
}

/* ---- deadlock reports ------------------------------------------------------ */

char *
net_describe_wait(Engine *e, const SimRank *sr, uint32_t o, int32_t step)
{
  const StOp *op = st_program_op(sr->program, o);
  if (op->kind == ST_OP_COMM_COLL) {
    const StComm *c = st_schedule_comm(e->s, op->comm);
    int group = c->group_of[sr->rank];
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, e->instances);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
      const Instance *inst = value;
      if (inst->key.comm == op->comm && inst->key.group == group)
        return g_strdup_printf("the other members of communicator '%s' group %d (%d of %d "
                               "simulated members arrived)",
                               c->name, group, inst->arrived, inst->expected);
    }
    return g_strdup_printf("communicator '%s' group %d", c->name, group);
  }
  if (op->kind == ST_OP_COMM_SEND || op->kind == ST_OP_COMM_RECV) {
    OpRef ref = {e->sim_of_rank[sr->rank], o, step, 0};
    return g_strdup_printf("a matching %s rank %d (tag %d)",
                           op->kind == ST_OP_COMM_SEND ? "receive on" : "send from",
                           peer_of(e, &ref), op->tag);
  }
  return g_strdup("its device");
}
