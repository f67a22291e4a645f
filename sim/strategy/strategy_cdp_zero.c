/* strategy_cdp_zero.c: cyclic DP with ZeRO-DP's sharded model states,
 * passed point to point instead of by collectives (PAPERS.md section 1).
 *
 * Each stage has one owner (CdpPlan.owner) keeping its optimizer states;
 * with --zero-stage 2 also its gradient, with 3 also its parameters. The
 * workers reach a stage one after another, so:
 * - its gradient is chain-reduced to the owner: the workers other than the
 *   owner, in worker order, each add their gradient and pass the sum on, the
 *   last to the owner, which steps the stage (update, cdp.h);
 * - its parameters are relayed: the owner sends them to the first worker
 *   that reads them, which forwards them to the next, and so on. Under v2
 *   the workers reading w_t (delta 0) and those reading w_{t-1} (delta 1)
 *   form two relays, each started by the owner.
 * When a relay runs: with stages 1 and 2 every worker keeps every stage's
 * parameters, and a delta-1 reader receives w_t during step t, after its
 * backward of the stage, for step t+1 (so step 0 waits for nothing: every
 * worker starts from w_0); a delta-0 reader receives w_t in step t before
 * its forward. With stage 3 a worker keeps a stage's parameters only from
 * one stage before its forward to the end of its backward, received within
 * the step. Stage 1 keeps every stage's gradient; 2 and 3 only from the
 * stage's first backward until its sum has left.
 *
 * Streams: a send waits for its receiver, so each peer gets streams of its
 * own (cdp_peer_stream) and the owner's end of a chain, which waits for the
 * whole chain, never holds up the links it forwards for other stages.
 */
#include "strategy/cdp.h"

typedef struct {
  int32_t *chain;      /* [n]: the non-owners in worker order, then the owner */
  int32_t *relay[2];   /* non-owners reading version 0 / 1, in worker order */
  int n_relay[2];
} Stage;

typedef struct {
  const CdpPlan *c;
  Stage *stages;       /* [s] */
} Zero;

static int
index_in(const int32_t *list, int n, int rank)
{
  for (int i = 0; i < n; i++)
    if (list[i] == rank)
      return i;
  return -1;
}

/* Whether a user's relay runs a step ahead: ZeRO 1-2 users keep a copy, so
 * one that reads w_{t-1} in step t (delta 1) receives it in step t-1, after
 * its backward of the stage; the owner sends it right after the update
 * that makes it. Every other relay brings, within step t, what step t reads
 * (delta 0: w_t, made this step; ZeRO-3's transient copies). */
static gboolean
ahead(const CdpPlan *c, int delta)
{
  return c->zero < 3 && delta == 1;
}

static uint32_t
emit_owner_send(CdpRank *r, int l, int to, const char *label, uint32_t dep, gboolean prev)
{
  const CdpPlan *c = r->c;
  StOp op = cdp_p2p_op(r, TRUE, cdp_peer_stream(r, "params own ->", to, l), to,
                       CDP_TAG(CDP_TAG_RELAY, l), c->params[l] * c->bytes.weight,
                       ST_DATA_PARAMS, c->first[l], c->first[l + 1] - 1, label);
  op.version = prev ? 1 : 0; /* w_{t-1}, made by the last step's update, or w_t */
  st_program_begin(r->p, &op);
  if (prev)
    st_program_after_prev_step(r->p, dep);
  else
    st_program_after(r->p, dep);
  return st_program_commit(r->p);
}

static void
owner_update(CdpRank *r, int l)
{
  const Zero *z = r->data;
  const Stage *zs = &z->stages[l];
  CdpStage *st = &r->st[l];
  /* The version the update overwrites must have left in the relay: w_{t-1}
   * (one version kept: every user reads w_t) went with the last step's
   * relay; w_{t-2} (two kept) with the last step's delta-1 relay or before. */
  uint32_t prev[1];
  int n_prev = 0;
  if (st->slots.versions == 1 && zs->n_relay[0] > 0)
    prev[n_prev++] = cdp_mark_prev(r->p, &st->marks[CDP_MARK_FORWARDED]);
  else if (st->slots.versions == 2 && zs->n_relay[1] > 0)
    prev[n_prev++] = cdp_mark_prev(r->p, &st->marks[CDP_MARK_SENT]);
  uint32_t u = cdp_emit_update(r, l, NULL, 0, prev, n_prev);
  /* w_t: to this step's delta-0 readers, and a step ahead to delta-1 ones. */
  if (zs->n_relay[0] > 0)
    cdp_mark_set(r->p, &st->marks[CDP_MARK_FORWARDED],
                 emit_owner_send(r, l, zs->relay[0][0], "params new", u, FALSE));
  if (zs->n_relay[1] > 0 && ahead(r->c, 1))
    cdp_mark_set(r->p, &st->marks[CDP_MARK_SENT],
                 emit_owner_send(r, l, zs->relay[1][0], "params next step", u, FALSE));
}

/* ---- the users ------------------------------------------------------------------- */

/* Receives the parameters of stage l from the previous worker of its relay
 * (or the owner) and forwards them to the next. */
static void
user_relay(CdpRank *r, int l)
{
  const CdpPlan *c = r->c;
  const Zero *z = r->data;
  const Stage *zs = &z->stages[l];
  CdpStage *st = &r->st[l];
  int v = st->delta;
  int pos = index_in(zs->relay[v], zs->n_relay[v], r->rank);
  int from = pos == 0 ? c->owner[l] : zs->relay[v][pos - 1];
  gboolean forwards = pos + 1 < zs->n_relay[v];
  const char *label = ahead(c, v) ? "params next step" : v ? "params previous" : "params new";
  int64_t bytes = c->params[l] * c->bytes.weight;
  StOp op = cdp_p2p_op(r, FALSE, cdp_peer_stream(r, "params in <-", from, l), from,
                       CDP_TAG(CDP_TAG_RELAY, l), bytes, ST_DATA_PARAMS, c->first[l],
                       c->first[l + 1] - 1, label);
  /* What moves: w_{t-1} for this step's delta-1 readers, else w_t. */
  int version = !ahead(c, v) && v == 1 ? 1 : 0;
  op.version = version;
  st_program_begin(r->p, &op);
  if (st->relayed != CDP_NONE) {
    /* ZeRO-3: a copy for this step, one stage ahead of its forward. */
    st_program_alloc(r->p, st->relayed);
    if (l > r->lo)
      st_program_after(r->p, r->st[l - 1].marks[CDP_MARK_F_FIRST].op);
  } else {
    /* Into the kept copy, once this worker is done with the old one: its
     * backward of the stage (this step's when a step ahead, else the last
     * step's) and its last forwarding of it. */
    if (ahead(c, v))
      st_program_after(r->p, st->marks[CDP_MARK_B_LAST].op);
    else
      st_program_after_prev_step(r->p, cdp_mark_prev(r->p, &st->marks[CDP_MARK_B_LAST]));
    if (forwards)
      st_program_after_prev_step(r->p, cdp_mark_prev(r->p, &st->marks[CDP_MARK_FORWARDED]));
  }
  uint32_t got = st_program_commit(r->p);
  cdp_mark_set(r->p, &st->marks[CDP_MARK_GATE], got);
  if (forwards) {
    int to = zs->relay[v][pos + 1];
    StOp fop = cdp_p2p_op(r, TRUE, cdp_peer_stream(r, "params out ->", to, l), to,
                          CDP_TAG(CDP_TAG_RELAY, l), bytes, ST_DATA_PARAMS, c->first[l],
                          c->first[l + 1] - 1, label);
    fop.version = version;
    st_program_begin(r->p, &fop);
    st_program_after(r->p, got);
    uint32_t fwd = st_program_commit(r->p);
    cdp_mark_set(r->p, &st->marks[CDP_MARK_FORWARDED], fwd);
    /* A relayed copy is freed only once it has been passed on. */
    if (st->relayed != CDP_NONE)
      cdp_add_gate(st->gate_b_last, &st->n_gate_b_last, CDP_MARK_FORWARDED, FALSE);
  }
}

static void
user_chain(CdpRank *r, int l)
{
  const CdpPlan *c = r->c;
  const Zero *z = r->data;
  CdpStage *st = &r->st[l];
  const int32_t *chain = z->stages[l].chain;
  int me = index_in(chain, c->n, r->rank);
  int64_t bytes = c->params[l] * c->bytes.grad;
  g_autofree char *label = g_strdup_printf("grads s%d", l);
  uint32_t ready = st->marks[CDP_MARK_B_LAST].op;
  if (me > 0)
    ready = cdp_emit_p2p(r, FALSE, cdp_peer_stream(r, "grads in <-", chain[me - 1], l), chain[me - 1],
                         CDP_TAG(CDP_TAG_REDUCE, l), bytes, ST_DATA_GRADS, l, label, &ready, 1);
  int to = chain[me + 1];
  StOp op = cdp_p2p_op(r, TRUE, cdp_peer_stream(r, "grads out ->", to, l), to,
                       CDP_TAG(CDP_TAG_REDUCE, l), bytes, ST_DATA_GRADS, c->first[l],
                       c->first[l + 1] - 1, label);
  st_program_begin(r->p, &op);
  st_program_after(r->p, ready);
  if (st->grads_step != CDP_NONE)
    st_program_free_buffer(r->p, st->grads_step);
  cdp_mark_set(r->p, &st->marks[CDP_MARK_SENT], st_program_commit(r->p));
}

/* ---- hooks --------------------------------------------------------------------------- */

static void
zero_step_begin(CdpRank *r)
{
  const CdpPlan *c = r->c;
  const Zero *z = r->data;
  for (int l = r->lo; l < r->hi; l++) {
    CdpStage *st = &r->st[l];
    const Stage *zs = &z->stages[l];
    /* ZeRO-3's delta-1 readers get w_{t-1}, made by the last step's update. */
    if (st->role == CDP_ROLE_HOLDER && zs->n_relay[1] > 0 && !ahead(c, 1))
      cdp_mark_set(r->p, &st->marks[CDP_MARK_SENT],
                   emit_owner_send(r, l, zs->relay[1][0], "params previous",
                                   cdp_mark_prev(r->p, &st->marks[CDP_MARK_UPDATE]), TRUE));
    if (st->role == CDP_ROLE_USER && !ahead(c, st->delta) &&
        (st->relayed == CDP_NONE || l == r->lo))
      user_relay(r, l);
  }
}

static void
zero_after_forward(CdpRank *r, int l)
{
  /* ZeRO-3 prefetch: the next stage's parameters once this one started. */
  if (l + 1 < r->hi && r->st[l + 1].role == CDP_ROLE_USER && r->st[l + 1].relayed != CDP_NONE)
    user_relay(r, l + 1);
}

static void
zero_before_pass(CdpRank *r, int l, gboolean backward)
{
  const CdpStage *st = &r->st[l];
  if (st->role == CDP_ROLE_HOLDER && cdp_update_point(st) == (backward ? 1 : 0))
    owner_update(r, l);
}

static void
zero_after_backward(CdpRank *r, int l)
{
  const CdpPlan *c = r->c;
  const Zero *z = r->data;
  CdpStage *st = &r->st[l];
  if (st->role == CDP_ROLE_USER) {
    user_chain(r, l);
    if (ahead(c, st->delta))
      user_relay(r, l);
    return;
  }
  if (st->role != CDP_ROLE_HOLDER)
    return;
  uint32_t b_last = st->marks[CDP_MARK_B_LAST].op;
  if (c->n > 1) {
    /* The sum of the others, added to the owner's own gradient. It comes
     * once the whole chain is done: on a stream of its own, so that it does
     * not hold up this rank's receives as a link of other stages' chains. */
    g_autofree char *label = g_strdup_printf("grads s%d", l);
    int from = z->stages[l].chain[c->n - 2];
    uint32_t got = cdp_emit_p2p(r, FALSE, cdp_peer_stream(r, "total in <-", from, l), from,
                                CDP_TAG(CDP_TAG_REDUCE, l),
                                c->params[l] * c->bytes.grad, ST_DATA_GRADS, l, label,
                                &b_last, 1);
    cdp_mark_set(r->p, &st->marks[CDP_MARK_TOTAL], got);
  } else {
    cdp_mark_set(r->p, &st->marks[CDP_MARK_TOTAL], b_last);
  }
  if (cdp_update_point(st) == 2)
    owner_update(r, l);
}

/* ---- build ---------------------------------------------------------------------------- */

static void
user_stage(CdpRank *r, int l)
{
  const CdpPlan *c = r->c;
  CdpStage *st = &r->st[l];
  int64_t n = c->params[l];
  st->role = CDP_ROLE_USER;
  if (c->zero < 3)
    cdp_stage_buffer(r, l, "params", ST_MEM_PARAMS, n * c->bytes.weight, TRUE, ST_DATA_PARAMS);
  else
    st->relayed = cdp_stage_buffer(r, l, "params relayed", ST_MEM_PARAMS, n * c->bytes.weight,
                                   FALSE, ST_DATA_PARAMS);
  if (c->zero < 2) {
    cdp_stage_buffer(r, l, "grads", ST_MEM_GRADS, n * c->bytes.grad, TRUE, ST_DATA_GRADS);
    /* The next backward rewrites the gradient only once its sum has left. */
    cdp_add_gate(st->gate_b, &st->n_gate_b, CDP_MARK_SENT, TRUE);
  } else {
    st->grads_step =
      cdp_stage_buffer(r, l, "grads", ST_MEM_GRADS, n * c->bytes.grad, FALSE, ST_DATA_GRADS);
  }
  cdp_add_gate(st->gate_f, &st->n_gate_f, CDP_MARK_GATE, ahead(c, st->delta));
}

static void
plan_stage(const CdpPlan *c, int l, Stage *zs, unsigned *seen)
{
  int o = c->owner[l], n_chain = 0;
  zs->chain = g_new(int32_t, c->n);
  zs->relay[0] = g_new(int32_t, c->n);
  zs->relay[1] = g_new(int32_t, c->n);
  *seen = 0;
  for (int k = 0; k < c->n; k++) {
    int v = cdp_delta(c, k, l);
    *seen |= 1u << v;
    if (k == o)
      continue;
    zs->chain[n_chain++] = k;
    zs->relay[v][zs->n_relay[v]++] = k;
  }
  zs->chain[n_chain] = o;
}

static void
stages_free(Stage *stages, int s)
{
  for (int l = 0; l < s; l++) {
    g_free(stages[l].chain);
    g_free(stages[l].relay[0]);
    g_free(stages[l].relay[1]);
  }
  g_free(stages);
}

gboolean
cdp_build_zero(CdpPlan *c, GError **error)
{
  (void)error;
  StSchedule *s = c->schedule;
  st_schedule_add_world(s, "world");
  Zero z = {c, g_new0(Stage, c->s)};
  g_autofree unsigned *seen = g_new0(unsigned, c->s);
  for (int l = 0; l < c->s; l++)
    plan_stage(c, l, &z.stages[l], &seen[l]);
  static const CdpHooks hooks = {zero_step_begin, zero_before_pass, zero_after_forward,
                                 zero_after_backward, NULL, NULL};
  for (int k = 0; k < c->n; k++) {
    CdpRank r;
    cdp_rank_init(&r, c, k, k, 0, c->s, &hooks, &z);
    for (int l = 0; l < c->s; l++) {
      if (c->params[l] == 0)
        continue;
      if (c->owner[l] == k) {
        cdp_holder(&r, l, cdp_slots(c, seen[l], c->n > 1));
        r.st[l].serves = c->n > 1;
      }
      else
        user_stage(&r, l);
    }
    s->ranks[k].program = st_schedule_add_program(s, cdp_rank_finish(&r));
    cdp_rank_clear(&r);
  }
  stages_free(z.stages, c->s);
  return TRUE;
}

int
cdp_zero_collectives_replaced(const CdpPlan *c)
{
  /* As strategy_zero.c issues them per rank and step: a reduce-scatter per
   * gradient bucket (per micro-batch from stage 2 on), an all-gather per
   * bucket after the step (stages 1-2) or per layer with parameters before
   * each forward and backward (stage 3). */
  g_autoptr(GArray) buckets = st_grad_buckets(c->model, c->options->bucket_bytes, c->bytes.grad);
  int nb = (int)buckets->len, with_params = 0;
  for (int i = 0; i < c->model->n_layers; i++)
    with_params += c->model->layers[i].params > 0;
  int reduce = c->zero >= 2 ? c->a * nb : nb;
  int gather = c->zero == 3 ? 2 * c->a * with_params : nb;
  return reduce + gather;
}
