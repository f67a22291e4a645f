/* strategy_cdp_mp.c: cyclic DP with model parallelism: each of the S stages
 * runs on devices of its own, and a device serves several workers when the
 * stagger keeps their use of the stage apart (PAPERS.md section 1: DP with
 * the same model parallelism needs a device per worker and stage).
 *
 * Ranks. Worker k's stage l is rank l * N + k (cdp_rank_of), started k * d
 * late like the worker; it receives its input from the rank of stage l-1 and
 * sends its output to that of l+1, and the gradients back.
 *
 * Devices. From the estimated timeline of each worker (its passes, and its
 * transfers between the devices it is placed on: a boundary that crosses
 * nodes costs more) the busy intervals of stage l within the cycle T are
 * known; worker k starts k d after worker 0, so stage l fits on m devices
 * (worker k on device k mod m) when no two workers of one device overlap.
 * cdp_mp_place takes the least such m per stage; the plan places again with
 * the transfers of the new placement until it holds (strategy_cdp.c), and
 * also counts the devices free transfers would need, the paper's idealised
 * max(N, S) for uniform stages. Under the dp rule every worker waits for the
 * same reduction, the stagger does not survive step 0, and no device is
 * shared.
 *
 * A shared device keeps one copy of the stage's states, held by its first
 * worker (the holder); the others (guests) compute with it: a guest's
 * backward adds to the holder's gradient and says so by an event (DONE);
 * the holder reduces the device's gradient with the other devices of the
 * stage, steps, and tells its guests (READY). Guests at another phase of
 * the cycle read the other parameter version, so a shared device keeps two,
 * and two gradient buffers (cdp_slots).
 */
#include <math.h>

#include "strategy/cdp.h"

/* ---- placement ------------------------------------------------------------------- */

typedef struct {
  double start, end; /* ns within the cycle [0, T) */
} Span;

/* Busy spans of each stage in worker k's cycle, from the estimates and the
 * transfers between the devices worker k is placed on: [s] arrays. */
static GArray **
worker_spans(const CdpPlan *c, int k)
{
  GArray **spans = g_new(GArray *, c->s);
  for (int l = 0; l < c->s; l++)
    spans[l] = g_array_new(FALSE, FALSE, sizeof(Span));
  const double *hop = c->hop_ns + (gsize)k * c->s;
  double t = 0;
  for (int m = 0; m < c->a; m++) {
    for (int l = 0; l < c->s; l++) {
      Span sp = {t, t + c->fwd_ns[l]};
      g_array_append_val(spans[l], sp);
      t = sp.end + (l + 1 < c->s ? hop[l] : 0);
    }
    for (int l = c->s - 1; l >= 0; l--) {
      Span sp = {t, t + c->bwd_ns[l]};
      g_array_append_val(spans[l], sp);
      t = sp.end + (l > 0 ? hop[l - 1] : 0);
    }
  }
  return spans;
}

/* Whether span a meets span b shifted by `shift` on the circle of length T. */
static gboolean
meets(Span a, Span b, double shift, double T)
{
  double tol = 1e-9 * T;
  double len = b.end - b.start, x = fmod(b.start + shift, T);
  if (x < 0)
    x += T;
  Span pieces[2] = {{x, MIN(x + len, T)}, {0, x + len - T}};
  for (int i = 0; i < 2; i++)
    if (pieces[i].end > pieces[i].start && MAX(a.start, pieces[i].start) <
                                              MIN(a.end, pieces[i].end) - tol)
      return TRUE;
  return FALSE;
}

/* Whether m devices hold stage l: the workers of one device (k, k + m, ...,
 * each with its own transfers, started (k' - k) d after k) never use it at
 * once, and the device's cycle also has room for the stage's optimizer step,
 * which its holder runs once per step when the gradient is in (where in the
 * cycle depends on the reduction, so only its length is checked).
 * spans[k][l] are worker k's. */
static gboolean
fits(const CdpPlan *c, GArray ***spans, int l, int m)
{
  double T = c->step_ns, d = T / c->n;
  int most = (c->n + m - 1) / m; /* workers on device 0, the busiest */
  if (most > 1 && most * c->a * (c->fwd_ns[l] + c->bwd_ns[l]) + c->update_ns[l] > T)
    return FALSE;
  for (int k = 0; k < c->n; k++)
    for (int k2 = k + m; k2 < c->n; k2 += m) {
      const GArray *a = spans[k][l], *b = spans[k2][l];
      for (guint i = 0; i < a->len; i++)
        for (guint j = 0; j < b->len; j++)
          if (meets(g_array_index(a, Span, i), g_array_index(b, Span, j), (k2 - k) * d, T))
            return FALSE;
    }
  return TRUE;
}

/* Device indices: each stage's devices consecutive, and inside one node
 * whenever they fit in one, first fit in stage order, so that the gradient
 * chain between a stage's devices stays on the node's links (crossing nodes
 * it runs at the inter-node bandwidth, 9x slower on a DGX H100). Sets base;
 * returns the GPUs the layout spans (idle ones left in a node included). */
int
cdp_mp_lay_out(CdpPlan *c)
{
  int per = c->cluster->gpus_per_node > 0 ? c->cluster->gpus_per_node : 1;
  int nodes = 0;
  for (int l = 0; l < c->s; l++)
    nodes += (c->hosts[l] + per - 1) / per;
  g_autofree int *fill = g_new0(int, nodes); /* devices taken in each node, from its start */
  g_free(c->base);
  c->base = g_new(int32_t, c->s);
  int span = 0;
  for (int l = 0; l < c->s; l++) {
    int m = c->hosts[l], node = 0;
    if (m <= per)
      while (per - fill[node] < m)
        node++;
    else
      /* Whole nodes, after every node in use. */
      for (node = nodes - 1; node > 0 && fill[node - 1] == 0; node--)
        ;
    c->base[l] = node * per + fill[node];
    for (int left = m; left > 0; node++) {
      int take = MIN(left, per - fill[node]);
      fill[node] += take;
      left -= take;
    }
    span = MAX(span, c->base[l] + m);
  }
  return span;
}

int
cdp_mp_place(CdpPlan *c)
{
  GArray ***spans = g_new(GArray **, c->n);
  for (int k = 0; k < c->n; k++)
    spans[k] = worker_spans(c, k);
  int32_t *hosts = g_new(int32_t, c->s);
  for (int l = 0; l < c->s; l++) {
    int m = c->n;
    if (c->rule != CDP_RULE_DP && c->step_ns > 0)
      for (m = c->hosts ? c->hosts[l] : 1; m < c->n && !fits(c, spans, l, m); m++)
        ;
    hosts[l] = m;
  }
  g_free(c->hosts);
  c->hosts = hosts;
  int span = cdp_mp_lay_out(c);
  for (int k = 0; k < c->n; k++) {
    for (int l = 0; l < c->s; l++)
      g_array_unref(spans[k][l]);
    g_free(spans[k]);
  }
  g_free(spans);
  return span;
}

gboolean
cdp_mp_check(const CdpPlan *c, int used, GError **error)
{
  if (used <= c->cluster->gpus)
    return TRUE;
  g_set_error(error, ST_STRATEGY_ERROR, ST_ERROR_INVALID,
              "cdp --model-parallel: %d workers x %d stages need %d GPUs with the %s (DP "
              "with the same model parallelism: %d); the cluster has %d: raise --gpus or "
              "--nodes, or lower --ranks or --stages",
              c->n, c->s, used,
              c->rule == CDP_RULE_DP ? "dp rule (no stagger to share devices by)" : "stagger",
              c->n * c->s, c->cluster->gpus);
  return FALSE;
}

/* ---- programs --------------------------------------------------------------------- */

typedef struct {
  uint32_t *done; /* [n]: a holder's receives of its guests' DONE, this step */
  int n_done;
  CdpTurn *turns; /* cdp_mp_turns under the stretched stagger, else NULL */
  int *turn_in, *turn_out; /* [2a]: this rank's streams of turns, -1 until used */
} Mp;

/* The device holder of worker k's stage l, and the guests of holder j. */
static int
holder_of(const CdpPlan *c, int k, int l)
{
  return k % c->hosts[l];
}

static int
n_guests(const CdpPlan *c, int j, int l)
{
  int m = c->hosts[l];
  return j < m ? (c->n - 1 - j) / m : 0;
}

static int
guest(const CdpPlan *c, int j, int l, int i)
{
  return j + (i + 1) * c->hosts[l];
}

static void
mp_step_begin(CdpRank *r)
{
  const CdpPlan *c = r->c;
  Mp *mp = r->data;
  int l = r->lo;
  CdpStage *st = &r->st[l];
  g_autofree char *ready = g_strdup_printf("ready s%d", l);
  g_autofree char *done = g_strdup_printf("done s%d", l);
  mp->n_done = 0;
  for (int i = 0; i < 2 * c->a; i++)
    mp->turn_in[i] = mp->turn_out[i] = -1;
  if (st->role == CDP_ROLE_GUEST) {
    uint32_t got = cdp_emit_p2p(r, FALSE, cdp_stream(r, &r->sync, "sync", 0),
                                cdp_rank_of(c, holder_of(c, r->worker, l), l),
                                CDP_TAG(CDP_TAG_READY, l), 0, ST_DATA_NONE, l, ready, NULL, 0);
    cdp_mark_set(r->p, &st->marks[CDP_MARK_GATE], got);
  } else if (st->role == CDP_ROLE_HOLDER) {
    for (int i = 0; i < n_guests(c, r->worker, l); i++)
      mp->done[mp->n_done++] =
        cdp_emit_p2p(r, FALSE, cdp_stream(r, &r->sync, "sync", 0),
                     cdp_rank_of(c, guest(c, r->worker, l, i), l),
                     CDP_TAG(CDP_TAG_DONE, l), 0, ST_DATA_NONE, l, done, NULL, 0);
  }
}

static void
mp_update(CdpRank *r, int l)
{
  const CdpPlan *c = r->c;
  uint32_t u = cdp_emit_update(r, l, NULL, 0, NULL, 0);
  g_autofree char *ready = g_strdup_printf("ready s%d", l);
  int stream = cdp_stream(r, &r->update, "update", 1);
  for (int i = 0; i < n_guests(c, r->worker, l); i++)
    cdp_emit_p2p(r, TRUE, stream, cdp_rank_of(c, guest(c, r->worker, l, i), l),
                 CDP_TAG(CDP_TAG_READY, l), 0, ST_DATA_NONE, l, ready, &u, 1);
}

static void
mp_before_pass(CdpRank *r, int l, gboolean backward)
{
  const CdpStage *st = &r->st[l];
  if (st->role == CDP_ROLE_HOLDER && cdp_update_point(st) == (backward ? 1 : 0))
    mp_update(r, l);
}

static void
mp_after_backward(CdpRank *r, int l)
{
  const CdpPlan *c = r->c;
  Mp *mp = r->data;
  CdpStage *st = &r->st[l];
  if (st->role == CDP_ROLE_GUEST) {
    uint32_t b_last = st->marks[CDP_MARK_B_LAST].op;
    g_autofree char *done = g_strdup_printf("done s%d", l);
    cdp_emit_p2p(r, TRUE, cdp_stream(r, &r->sync, "sync", 0),
                 cdp_rank_of(c, holder_of(c, r->worker, l), l), CDP_TAG(CDP_TAG_DONE, l), 0,
                 ST_DATA_NONE, l, done, &b_last, 1);
    return;
  }
  if (st->role != CDP_ROLE_HOLDER)
    return;
  /* Among the stage's devices: their holders, in worker order. */
  g_autofree int32_t *holders = g_new(int32_t, c->hosts[l]);
  for (int j = 0; j < c->hosts[l]; j++)
    holders[j] = cdp_rank_of(c, j, l);
  cdp_emit_reduction(r, l, holders, c->hosts[l], r->worker, mp->done, mp->n_done);
  if (cdp_update_point(st) == 2)
    mp_update(r, l);
}

static void
guest_stage(CdpRank *r, int l, CdpSlots slots)
{
  CdpStage *st = &r->st[l];
  st->role = CDP_ROLE_GUEST;
  st->slots = slots;
  cdp_add_gate(st->gate_f, &st->n_gate_f, CDP_MARK_GATE, st->delta == 1);
  if (slots.grads == 2)
    cdp_add_gate(st->gate_b, &st->n_gate_b, CDP_MARK_GATE, TRUE);
  else if (st->delta == 1)
    cdp_add_gate(st->gate_b, &st->n_gate_b, CDP_MARK_GATE, FALSE);
}

static const CdpTurn *
turn_of(const CdpRank *r, int l, int micro, gboolean backward)
{
  const Mp *mp = r->data;
  if (mp->turns == NULL)
    return NULL;
  return &mp->turns[((gsize)r->worker * r->c->s + l) * 2 * r->c->a + 2 * micro + backward];
}

/* The stretched stagger's turns (cdp_mp_turns): a zero-byte message from
 * the rank whose pass precedes this one on the device. */
static gboolean
mp_turn_in(CdpRank *r, int l, int micro, gboolean backward, StDep *dep)
{
  const CdpTurn *t = turn_of(r, l, micro, backward);
  if (t == NULL || t->from < 0)
    return FALSE;
  Mp *mp = r->data;
  int i = 2 * micro + backward;
  g_autofree char *name = g_strdup_printf("turn in %d", i);
  g_autofree char *label = g_strdup_printf("turn s%d", l);
  uint32_t got = cdp_emit_p2p(r, FALSE, cdp_stream(r, &mp->turn_in[i], name, 0),
                              cdp_rank_of(r->c, t->from, l), CDP_TAG(CDP_TAG_TURN + i, l), 0,
                              ST_DATA_NONE, l, label, NULL, 0);
  *dep = (StDep){got, t->prev ? -1 : 0};
  return TRUE;
}

static void
mp_turn_out(CdpRank *r, int l, int micro, gboolean backward, uint32_t last)
{
  const CdpTurn *t = turn_of(r, l, micro, backward);
  if (t == NULL || t->to < 0)
    return;
  Mp *mp = r->data;
  int i = 2 * micro + backward;
  g_autofree char *name = g_strdup_printf("turn out %d", i);
  g_autofree char *label = g_strdup_printf("turn s%d", l);
  cdp_emit_p2p(r, TRUE, cdp_stream(r, &mp->turn_out[i], name, 0), cdp_rank_of(r->c, t->to, l),
               CDP_TAG(CDP_TAG_TURN + t->to_pass, l), 0, ST_DATA_NONE, l, label, &last, 1);
}

gboolean
cdp_build_mp(CdpPlan *c, GError **error)
{
  (void)error;
  StSchedule *s = c->schedule;
  st_schedule_add_world(s, "world");
  g_autofree int32_t *color = g_new(int32_t, s->n_ranks);
  for (int l = 0; l < c->s; l++)
    for (int k = 0; k < c->n; k++)
      color[cdp_rank_of(c, k, l)] = k < c->hosts[l] ? l : -1;
  st_schedule_add_comm(s, "holders", color);
  Mp mp = {g_new(uint32_t, c->n), 0, c->absorbed ? cdp_mp_turns(c) : NULL,
            g_new(int, 2 * c->a), g_new(int, 2 * c->a)};
  static const CdpHooks hooks = {mp_step_begin, mp_before_pass, NULL, mp_after_backward,
                                 mp_turn_in, mp_turn_out};
  for (int l = 0; l < c->s; l++) {
    for (int k = 0; k < c->n; k++) {
      int rank = cdp_rank_of(c, k, l), j = holder_of(c, k, l);
      CdpRank r;
      cdp_rank_init(&r, c, rank, k, l, l + 1, &hooks, &mp);
      if (c->params[l] > 0) {
        /* The versions the device's workers read. */
        unsigned seen = 1u << cdp_delta(c, j, l);
        for (int i = 0; i < n_guests(c, j, l); i++)
          seen |= 1u << cdp_delta(c, guest(c, j, l, i), l);
        CdpSlots slots = cdp_slots(c, seen, n_guests(c, j, l) > 0);
        if (k == j) {
          cdp_holder(&r, l, slots);
          r.st[l].serves = n_guests(c, j, l) > 0;
        }
        else
          guest_stage(&r, l, slots);
      }
      s->ranks[rank].program = st_schedule_add_program(s, cdp_rank_finish(&r));
      cdp_rank_clear(&r);
    }
  }
  g_free(mp.done);
  g_free(mp.turns);
  g_free(mp.turn_in);
  g_free(mp.turn_out);
  return TRUE;
}
