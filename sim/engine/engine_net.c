/* engine_net.c: communication in the engine.
 *
 * A collective waits until every simulated member of its group has issued it
 * (the n-th collective of each member on that group meets the n-th of the
 * others); a send waits for its receive and the other way round. Then the
 * ops become one flow that runs the plan's phases one after another: a fixed
 * latency, then the phase's bytes at a rate shared with the other flows on
 * the same ports. A port is one direction of one link class of one device;
 * a flow's rate is the least, over its ports, of its bandwidth divided by the
 * number of flows moving bytes through that port. Whenever a flow enters or
 * leaves a port, the flows there are brought up to date and rescheduled.
 * Collectives send and receive on every member device; a transfer sends on
 * one device and receives on the other; a copy uses its device's memory or
 * PCIe link.
 */
#include "engine/engine_internal.h"

#include <math.h>

typedef enum {
  PORTS_GROUP = 0, /* out and in on every device */
  PORTS_P2P,       /* out on devices[0], in on recv_device */
  PORTS_OUT,       /* out on devices[0] */
  PORTS_IN,        /* in on devices[0] */
} PortMode;

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
  int32_t n_devices; /* distinct representative devices */
  int32_t *devices;
} GroupInfo;

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
  return mix(mix(mix(mix(2166136261u, k->comm), k->group), k->kind), k->bytes);
}

static gboolean
plan_equal(gconstpointer a, gconstpointer b)
{
  const PlanKey *x = a, *y = b;
  return x->comm == y->comm && x->group == y->group && x->kind == y->kind &&
         x->bytes == y->bytes;
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

static void
group_info_free(gpointer p)
{
  GroupInfo *g = p;
  g_free(g->devices);
  g_free(g);
}

void
net_init(Engine *e)
{
  int n_ports = e->s->n_devices * ST_LINK_N * 2;
  e->ports = g_new0(Port, n_ports);
  for (int i = 0; i < n_ports; i++)
    e->ports[i].flows = g_ptr_array_new();
  e->instances = g_hash_table_new_full(inst_hash, inst_equal, NULL, instance_free);
  e->p2p = g_hash_table_new_full(peer_hash, peer_equal, NULL, peer_queue_free);
  e->plans = g_hash_table_new_full(plan_hash, plan_equal, g_free, g_free);
  e->group_devices = g_hash_table_new_full(group_hash, group_equal, NULL, group_info_free);
  e->flows = g_hash_table_new(g_direct_hash, g_direct_equal);
}

static void
flow_destroy(gpointer data)
{
  Flow *f = data;
  g_free(f->devices);
  g_free(f->ports);
  g_array_unref(f->members);
  g_free(f);
}

static void
flow_free(Engine *e, Flow *f)
{
  g_hash_table_remove(e->flows, f);
  flow_destroy(f);
}

void
net_clear(Engine *e)
{
  if (e->ports == NULL)
    return;
  /* Flows still alive after a failure. */
  GHashTableIter it;
  gpointer f;
  g_hash_table_iter_init(&it, e->flows);
  while (g_hash_table_iter_next(&it, &f, NULL))
    flow_destroy(f);
  g_clear_pointer(&e->flows, g_hash_table_unref);
  for (int i = 0; i < e->s->n_devices * ST_LINK_N * 2; i++)
    g_ptr_array_unref(e->ports[i].flows);
  g_clear_pointer(&e->ports, g_free);
  g_clear_pointer(&e->instances, g_hash_table_unref);
  g_clear_pointer(&e->p2p, g_hash_table_unref);
  g_clear_pointer(&e->plans, g_hash_table_unref);
  g_clear_pointer(&e->group_devices, g_hash_table_unref);
}

/* ---- ports and rates ---------------------------------------------------- */

static inline int32_t
port_id(int device, StLinkClass link, int out)
{
  return (device * ST_LINK_N + (int)link) * 2 + (out ? 0 : 1);
}

static void
flow_set_ports(Flow *f, PortMode mode, StLinkClass link)
{
  f->n_ports = 0;
  switch (mode) {
  case PORTS_GROUP:
    for (int i = 0; i < f->n_devices; i++) {
      f->ports[f->n_ports++] = port_id(f->devices[i], link, 1);
      f->ports[f->n_ports++] = port_id(f->devices[i], link, 0);
    }
    break;
  case PORTS_P2P:
    f->ports[f->n_ports++] = port_id(f->devices[0], link, 1);
    f->ports[f->n_ports++] = port_id(f->recv_device, link, 0);
    break;
  case PORTS_OUT:
    f->ports[f->n_ports++] = port_id(f->devices[0], link, 1);
    break;
  case PORTS_IN:
    f->ports[f->n_ports++] = port_id(f->devices[0], link, 0);
    break;
  }
}

/* Work done since the last update, then the new rate and finish time. */
static void
flow_update(Engine *e, Flow *f)
{
  f->remaining -= (double)(e->now - f->last_ns) * 1e-9 * f->rate;
  if (f->remaining < 0)
    f->remaining = 0;
  f->last_ns = e->now;
  const StCommPhase *ph = &f->plan.phases[f->phase];
  double rate = ph->bandwidth;
  for (int i = 0; i < f->n_ports; i++) {
    double share = ph->bandwidth / e->ports[f->ports[i]].load;
    if (share < rate)
      rate = share;
  }
  f->rate = rate;
  st_queue_reschedule(&e->queue, &f->ev.node,
                      e->now + (int64_t)ceil(f->remaining / rate * 1e9 - 1e-6));
}

/* Updates every flow on the ports of `f` (and f itself if attached). */
static void
recompute_around(Engine *e, const Flow *f)
{
  uint64_t stamp = ++e->stamp;
  for (int i = 0; i < f->n_ports; i++) {
    GPtrArray *fs = e->ports[f->ports[i]].flows;
    for (guint j = 0; j < fs->len; j++) {
      Flow *g = g_ptr_array_index(fs, j);
      if (g->stamp == stamp)
        continue;
      g->stamp = stamp;
      flow_update(e, g);
    }
  }
}

static void
attach(Engine *e, Flow *f)
{
  for (int i = 0; i < f->n_ports; i++) {
    Port *p = &e->ports[f->ports[i]];
    p->load++;
    g_ptr_array_add(p->flows, f);
  }
  f->rate = 0;
  f->last_ns = e->now;
  recompute_around(e, f);
}

static void
detach(Engine *e, Flow *f)
{
  for (int i = 0; i < f->n_ports; i++) {
    Port *p = &e->ports[f->ports[i]];
    p->load--;
    g_ptr_array_remove_fast(p->flows, f);
  }
  recompute_around(e, f);
}

/* ---- flows --------------------------------------------------------------- */

static void
record_phase(Engine *e, Flow *f)
{
  const StCommPhase *ph = &f->plan.phases[f->phase];
  const OpRef *first = &g_array_index(f->members, OpRef, 0);
  for (int i = 0; i < f->n_devices; i++) {
    StCommRecord rec = {
      .start_ns = f->phase_start_ns,
      .end_ns = e->now,
      .bytes = ph->bytes,
      .device = f->devices[i],
      .rank = e->sims[first->sim].rank,
      .op = first->op,
      .link = (uint8_t)ph->link,
    };
    g_array_append_val(e->tl->comm, rec);
  }
}

static void
flow_finish(Engine *e, Flow *f)
{
  for (guint i = 0; i < f->members->len; i++)
    engine_complete(e, &g_array_index(f->members, OpRef, i), f->start_ns, f->plan.source);
  flow_free(e, f);
}

/* Enters the bandwidth part of the current phase; FALSE when it has no bytes. */
static gboolean
enter_bandwidth(Engine *e, Flow *f)
{
  const StCommPhase *ph = &f->plan.phases[f->phase];
  if (ph->bytes <= 0)
    return FALSE;
  f->remaining = ph->bytes;
  f->phase_start_ns = e->now;
  flow_set_ports(f, (PortMode)f->mode, ph->link);
  attach(e, f);
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
      st_queue_push(&e->queue, &f->ev.node, e->now + ph->latency_ns);
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
    detach(e, f);
    record_phase(e, f);
  }
  f->phase++;
  flow_advance(e, f);
}

static Flow *
flow_new(Engine *e, PortMode mode, const StCommPlan *plan, const int32_t *devices,
         int n_devices, int recv_device)
{
  Flow *f = g_new0(Flow, 1);
  f->mode = (uint8_t)mode;
  st_event_node_init(&f->ev.node);
  f->ev.kind = EV_FLOW;
  f->plan = *plan;
  f->devices = g_memdup2(devices, sizeof(int32_t) * n_devices);
  f->n_devices = n_devices;
  f->recv_device = recv_device;
  f->ports = g_new(int32_t, 2 * n_devices + 2);
  f->members = g_array_new(FALSE, FALSE, sizeof(OpRef));
  f->start_ns = e->now;
  g_hash_table_add(e->flows, f);
  return f;
}

/* ---- collectives --------------------------------------------------------- */

static GroupInfo *
group_info(Engine *e, int comm, int group)
{
  GroupKey key = {comm, group};
  GroupInfo *info = g_hash_table_lookup(e->group_devices, &key);
  if (info != NULL)
    return info;
  const StComm *c = st_schedule_comm(e->s, comm);
  info = g_new0(GroupInfo, 1);
  info->key = key;
  int n = c->offsets[group + 1] - c->offsets[group];
  info->devices = g_new(int32_t, n);
  for (int i = 0; i < n; i++) {
    int m = c->members[c->offsets[group] + i];
    info->n_sim += e->sim_of_rank[m] >= 0;
    int d = e->fold->device_rep[e->s->ranks[m].device];
    gboolean seen = FALSE;
    for (int j = 0; j < info->n_devices && !seen; j++)
      seen = info->devices[j] == d;
    if (!seen)
      info->devices[info->n_devices++] = d;
  }
  g_hash_table_insert(e->group_devices, &info->key, info);
  return info;
}

static const StCommPlan *
collective_plan(Engine *e, int comm, int group, StCollKind kind, int64_t bytes)
{
  PlanKey key = {comm, group, kind, bytes};
  StCommPlan *plan = g_hash_table_lookup(e->plans, &key);
  if (plan != NULL)
    return plan;
  StGroupShape shape;
  st_schedule_group_shape(e->s, comm, group, &shape);
  plan = g_new0(StCommPlan, 1);
  GError *error = NULL;
  if (!st_comm_plan_collective(e->s->cluster, e->options->profile, e->comm_algo, kind, bytes,
                               &shape, plan, &error)) {
    engine_fail(e, "%s on communicator '%s': %s", st_coll_name(kind),
                st_schedule_comm(e->s, comm)->name, error->message);
    g_error_free(error);
    plan->n_phases = 0;
  }
  g_hash_table_insert(e->plans, g_memdup2(&key, sizeof key), plan);
  return plan;
}

static void start_copy(Engine *e, const OpRef *ref, StLinkClass link, PortMode mode,
                       int64_t bytes);

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
    start_copy(e, ref, ST_LINK_LOCAL, PORTS_OUT, op->bytes);
    return;
  }
  const GroupInfo *info = group_info(e, key.comm, key.group);
  const StCommPlan *plan = collective_plan(e, key.comm, key.group, op->sub, op->bytes);
  Flow *f = flow_new(e, PORTS_GROUP, plan, info->devices, info->n_devices, -1);
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

static void
start_transfer(Engine *e, const OpRef *send, const OpRef *recv)
{
  const StOp *op = engine_op(e, send);
  int src_dev = e->sims[send->sim].device;
  int dst_dev = e->sims[recv->sim].device;
  /* The link is the one between the real sender and its real receiver. */
  int real_dst = e->s->ranks[peer_of(e, send)].device;
  StCommPlan plan;
  st_comm_plan_p2p_profiled(e->s->cluster, e->options->profile, src_dev, real_dst, op->bytes,
                            &plan);
  Flow *f = flow_new(e, PORTS_P2P, &plan, &src_dev, 1, dst_dev);
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
start_copy(Engine *e, const OpRef *ref, StLinkClass link, PortMode mode, int64_t bytes)
{
  int dev = e->sims[ref->sim].device;
  StCommPlan plan = {
    .algo = "copy",
    .source = ST_SRC_ALPHA_BETA,
    .n_phases = 1,
    .phases = {{link, st_cluster_link_latency(e->s->cluster, link), (double)bytes,
                st_cluster_link_bandwidth(e->s->cluster, link)}},
  };
  Flow *f = flow_new(e, mode, &plan, &dev, 1, -1);
  g_array_append_val(f->members, *ref);
  flow_advance(e, f);
}

void
net_copy(Engine *e, const OpRef *ref)
{
  const StOp *op = engine_op(e, ref);
  StLinkClass link = op->sub == ST_COPY_D2D ? ST_LINK_LOCAL : ST_LINK_PCIE;
  if (!e->s->cluster->links[link].present && link != ST_LINK_LOCAL) {
    engine_fail(e, "a %s copy needs the cluster's pcie link, and '%s' has none",
                st_copy_name(op->sub), e->s->cluster->name);
    return;
  }
  start_copy(e, ref, link, op->sub == ST_COPY_H2D ? PORTS_IN : PORTS_OUT, op->bytes);
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
